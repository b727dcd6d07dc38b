/*
 * tcp_limit.c — what loopback TCP lets two processes exchange: the limit a
 * np=2 AllReduce over the socket transport is measured against.
 *
 * At np=2 a ring AllReduce sends S bytes and receives S bytes per rank
 * (half in the reduce-scatter, half in the allgather), so its algbw (= busbw
 * at np=2) cannot beat S / t, t the time two processes take to send each
 * other S bytes at once over the same number of connections. This program
 * measures that exchange, as fast as it can be done, two ways, and prints
 * the better of the two:
 *
 *  - poll: one thread per process, non-blocking sockets, sendmsg/recv in
 *    whatever order the kernel allows (what the socket transport does);
 *  - threads: one sending and one receiving thread per connection, blocking
 *    calls (no polling at all; more threads than this machine has cores).
 *
 * Bytes are striped over the connections in WEFT_SOCKET_CHUNK-sized pieces.
 *
 * Timing is the perf programs' (and copy_limit's): after -w warm-up
 * exchanges, -n exchanges back to back, their mean. With --best, instead,
 * each exchange is started together (a handshake first) and the fastest
 * one counts: a best case (at 1 MiB, 5.4-7.3 GB/s against means of
 * 3.6-5.6 in three alternated runs on this VM, medians 5.9 and 4.1), no
 * limit for a mean to be held against.
 *
 *	build/tcp_limit [-b 64K] [-e 256M] [-f 2] [-n ITERS] [-w WARMUP] [--nsocks 2]
 *	                [--chunk 512K] [--sockbuf BYTES] [--mode poll|threads|both] [--best]
 *
 * Only libc, loopback and Weft's size parser: no Weft transport in it.
 */
#define _GNU_SOURCE
#include "limit_args.h"
#include "util/parse.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_SOCKS 16

struct opts {
	size_t lo, hi, chunk;
	int factor, iters, warmup, nsocks, sockbuf;
	bool poll_mode, thread_mode, best;
};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what)
{
	fprintf(stderr, "tcp_limit: %s: %s\n", what, strerror(errno));
	exit(3);
}

/* A size with an optional K, M or G suffix and B ("64K", "2MB"). */
static size_t parse_size(const char *s)
{
	uint64_t v;
	if (weft_parse_size(s, SIZE_MAX, WEFT_PARSE_B_SUFFIX, &v, NULL) != WEFT_SUCCESS) {
		fprintf(stderr, "tcp_limit: bad size '%s'\n", s);
		exit(2);
	}
	return (size_t)v;
}

static void tune_socket(int fd, int sockbuf)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (sockbuf > 0) {
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sockbuf, sizeof(sockbuf));
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sockbuf, sizeof(sockbuf));
	}
}

/* Process 0 listens and accepts nsocks connections; process 1 connects. */
static void connect_pair(int side, const struct opts *o, int listen_fd, int port, int *fds)
{
	for (int i = 0; i < o->nsocks; i++) {
		if (side == 0) {
			fds[i] = accept(listen_fd, NULL, NULL);
		} else {
			struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
			a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
			fds[i] = socket(AF_INET, SOCK_STREAM, 0);
			if (fds[i] < 0)
				die("socket");
			tune_socket(fds[i], o->sockbuf);
			while (connect(fds[i], (struct sockaddr *)&a, sizeof(a)) != 0)
				if (errno != EINTR)
					die("connect");
		}
		if (fds[i] < 0)
			die("accept");
		tune_socket(fds[i], o->sockbuf);
	}
}

/* Stripe [0, bytes) over the sockets in chunks: how many bytes go on @p s. */
static size_t share_of(size_t bytes, size_t chunk, int nsocks, int s)
{
	size_t n = 0;
	for (size_t off = (size_t)s * chunk; off < bytes; off += (size_t)nsocks * chunk)
		n += bytes - off < chunk ? bytes - off : chunk;
	return n;
}

/* ---- poll mode: one thread, non-blocking ---- */

static void exchange_poll(const int *fds, int nsocks, char *sbuf, char *rbuf, size_t bytes,
			  size_t chunk)
{
	size_t sleft[MAX_SOCKS], rleft[MAX_SOCKS], soff[MAX_SOCKS] = {0}, roff[MAX_SOCKS] = {0};
	size_t open = 0;
	for (int s = 0; s < nsocks; s++) {
		sleft[s] = rleft[s] = share_of(bytes, chunk, nsocks, s);
		open += sleft[s] + rleft[s];
	}
	/* Each socket's share is contiguous in this test's buffers (the
	 * transport places fragments; the kernel's work is the same). */
	size_t base[MAX_SOCKS];
	for (int s = 0, at = 0; s < nsocks; at += (int)sleft[s], s++)
		base[s] = (size_t)at;
	while (open) {
		for (int s = 0; s < nsocks; s++) {
			if (rleft[s]) {
				ssize_t k =
				    recv(fds[s], rbuf + base[s] + roff[s], rleft[s], MSG_DONTWAIT);
				if (k > 0) {
					roff[s] += (size_t)k, rleft[s] -= (size_t)k,
					    open -= (size_t)k;
				} else if (k == 0 || (errno != EAGAIN && errno != EINTR)) {
					die("recv");
				}
			}
			if (sleft[s]) {
				ssize_t k = send(fds[s], sbuf + base[s] + soff[s], sleft[s],
						 MSG_DONTWAIT | MSG_NOSIGNAL);
				if (k > 0)
					soff[s] += (size_t)k, sleft[s] -= (size_t)k,
					    open -= (size_t)k;
				else if (errno != EAGAIN && errno != EINTR)
					die("send");
			}
		}
	}
}

/* ---- threads mode: a sender and a receiver per connection ---- */

struct job {
	int fd;
	char *buf;
	size_t bytes;
	bool send;
	pthread_barrier_t *go, *done;
	int rounds;
};

/* @p rounds exchanges of this thread's share, back to back. */
static void *pump(void *arg)
{
	struct job *j = arg;
	pthread_barrier_wait(j->go);
	for (int r = 0; r < j->rounds; r++) {
		for (size_t off = 0; off < j->bytes;) {
			ssize_t k = j->send
					? send(j->fd, j->buf + off, j->bytes - off, MSG_NOSIGNAL)
					: recv(j->fd, j->buf + off, j->bytes - off, 0);
			if (k <= 0 && errno != EINTR)
				die(j->send ? "send" : "recv");
			if (k > 0)
				off += (size_t)k;
		}
	}
	pthread_barrier_wait(j->done);
	return NULL;
}

/* Both sides start together: each writes a byte, then reads the other's. */
static void handshake(int sync_fd)
{
	char c = 0;
	if (write(sync_fd, &c, 1) != 1 || read(sync_fd, &c, 1) != 1)
		die("sync");
}

/* Seconds @p rounds back-to-back exchanges took, with threads. */
static double threads_once(const int *fds, int nsocks, char *sbuf, char *rbuf, size_t bytes,
			   size_t chunk, int rounds, int sync_fd)
{
	pthread_barrier_t go, done;
	pthread_barrier_init(&go, NULL, (unsigned)(2 * nsocks + 1));
	pthread_barrier_init(&done, NULL, (unsigned)(2 * nsocks + 1));
	struct job jobs[2 * MAX_SOCKS];
	pthread_t t[2 * MAX_SOCKS];
	size_t at = 0;
	for (int s = 0; s < nsocks; s++) {
		size_t n = share_of(bytes, chunk, nsocks, s);
		jobs[2 * s] = (struct job){fds[s], sbuf + at, n, true, &go, &done, rounds};
		jobs[2 * s + 1] = (struct job){fds[s], rbuf + at, n, false, &go, &done, rounds};
		at += n;
	}
	for (int i = 0; i < 2 * nsocks; i++)
		if (pthread_create(&t[i], NULL, pump, &jobs[i]) != 0)
			die("pthread_create");
	handshake(sync_fd);
	double t0 = now();
	pthread_barrier_wait(&go);
	pthread_barrier_wait(&done);
	double dt = now() - t0;
	for (int i = 0; i < 2 * nsocks; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&go);
	pthread_barrier_destroy(&done);
	return dt;
}

/* Seconds @p rounds back-to-back exchanges took, polling. */
static double poll_once(const int *fds, int nsocks, char *sbuf, char *rbuf, size_t bytes,
			size_t chunk, int rounds, int sync_fd)
{
	handshake(sync_fd);
	double t0 = now();
	for (int r = 0; r < rounds; r++)
		exchange_poll(fds, nsocks, sbuf, rbuf, bytes, chunk);
	return now() - t0;
}

typedef double (*way_fn)(const int *fds, int nsocks, char *sbuf, char *rbuf, size_t bytes,
			 size_t chunk, int rounds, int sync_fd);

/* Seconds per exchange one way takes: after the warm-up, the mean of
 * @p rounds back to back, or (--best) the fastest of @p rounds started
 * together. */
static double run_way(way_fn way, const struct opts *o, const int *fds, char *sbuf, char *rbuf,
		      size_t bytes, int rounds, int sync_fd)
{
	if (o->warmup > 0)
		way(fds, o->nsocks, sbuf, rbuf, bytes, o->chunk, o->warmup, sync_fd);
	if (!o->best)
		return way(fds, o->nsocks, sbuf, rbuf, bytes, o->chunk, rounds, sync_fd) / rounds;
	double best = 1e30;
	for (int r = 0; r < rounds; r++) {
		double dt = way(fds, o->nsocks, sbuf, rbuf, bytes, o->chunk, 1, sync_fd);
		best = dt < best ? dt : best;
	}
	return best;
}

static int rounds_for(size_t bytes, int iters)
{
	if (iters > 0)
		return iters;
	size_t n = (256u << 20) / bytes;
	return n < 5 ? 5 : n > 1000 ? 1000 : (int)n;
}

static void side_main(int side, const struct opts *o, int listen_fd, int port, int sync_fd)
{
	int fds[MAX_SOCKS];
	connect_pair(side, o, listen_fd, port, fds);
	char *sbuf = malloc(o->hi), *rbuf = malloc(o->hi);
	if (!sbuf || !rbuf)
		die("malloc");
	memset(sbuf, side + 1, o->hi); /* pre-faulted */
	memset(rbuf, 0, o->hi);
	if (side == 0)
		printf("# tcp_limit: 2 processes exchange S bytes both ways over %d loopback "
		       "connection(s), chunk %zu, sockbuf %s; %s\n# %10s %14s %14s %10s\n",
		       o->nsocks, o->chunk, o->sockbuf > 0 ? "set" : "kernel default",
		       o->best ? "the fastest of the exchanges (--best)"
			       : "mean of back-to-back exchanges after the warm-up",
		       "size", "poll GB/s", "threads GB/s", "best GB/s");
	for (size_t s = o->lo; s <= o->hi; s *= (size_t)o->factor) {
		int n = rounds_for(s, o->iters);
		double tp =
		    o->poll_mode ? run_way(poll_once, o, fds, sbuf, rbuf, s, n, sync_fd) : 0;
		double tt =
		    o->thread_mode ? run_way(threads_once, o, fds, sbuf, rbuf, s, n, sync_fd) : 0;
		double gp = tp > 0 ? (double)s / tp / 1e9 : 0,
		       gt = tt > 0 ? (double)s / tt / 1e9 : 0;
		if (side == 0)
			printf("%12zu %14.3f %14.3f %10.3f\n", s, gp, gt, gp > gt ? gp : gt);
		fflush(stdout);
		if (o->factor <= 1)
			break;
	}
}

static int count_arg(const char *s, const char *what, uint64_t lo, uint64_t hi)
{
	return limit_count_or_exit("tcp_limit", what, s, lo, hi);
}

/* To standard output with status 0 (--help), else to standard error with 2. */
static void usage(int status)
{
	fprintf(status ? stderr : stdout,
		"usage: tcp_limit [-b MIN] [-e MAX] [-f F] [-n ITERS] [-w WARMUP] "
		"[--nsocks N] [--chunk BYTES] [--sockbuf BYTES] "
		"[--mode poll|threads|both] [--best]\n");
	exit(status);
}

static void parse(int argc, char **argv, struct opts *o)
{
	static const struct option lopts[] = {{"nsocks", required_argument, NULL, 's'},
					      {"chunk", required_argument, NULL, 'c'},
					      {"sockbuf", required_argument, NULL, 'B'},
					      {"mode", required_argument, NULL, 'm'},
					      {"best", no_argument, NULL, 'x'},
					      {"help", no_argument, NULL, 'h'},
					      {0}};
	const char *env = getenv("WEFT_SOCKET_NSOCKS");
	*o = (struct opts){.lo = 64u << 10,
			   .hi = 256u << 20,
			   .chunk = 512u << 10,
			   .factor = 2,
			   .warmup = 5,
			   .nsocks = env ? count_arg(env, "WEFT_SOCKET_NSOCKS", 1, MAX_SOCKS) : 2,
			   .poll_mode = true,
			   .thread_mode = true};
	int c;
	while ((c = getopt_long_only(argc, argv, "b:e:f:n:w:", lopts, NULL)) != -1) {
		switch (c) {
		case 'b': o->lo = parse_size(optarg); break;
		case 'e': o->hi = parse_size(optarg); break;
		case 'f': o->factor = count_arg(optarg, "-f", 1, 1024); break;
		case 'n': o->iters = count_arg(optarg, "-n", 1, 1000000); break;
		case 'w': o->warmup = count_arg(optarg, "-w", 0, 1000000); break;
		case 's': o->nsocks = count_arg(optarg, "--nsocks", 1, MAX_SOCKS); break;
		case 'c': o->chunk = parse_size(optarg); break;
		case 'B': o->sockbuf = count_arg(optarg, "--sockbuf", 0, 1 << 30); break;
		case 'm':
			if (strcmp(optarg, "poll") && strcmp(optarg, "threads") &&
			    strcmp(optarg, "both")) {
				fprintf(stderr,
					"tcp_limit: --mode '%s': expected poll, threads or both\n",
					optarg);
				exit(2);
			}
			o->poll_mode = strcmp(optarg, "threads") != 0;
			o->thread_mode = strcmp(optarg, "poll") != 0;
			break;
		case 'x': o->best = true; break;
		case 'h': usage(0); break;
		default: usage(2);
		}
	}
	if (optind < argc) {
		fprintf(stderr, "tcp_limit: unexpected argument '%s'\n", argv[optind]);
		exit(2);
	}
	if (o->nsocks < 1 || o->nsocks > MAX_SOCKS || !o->lo || o->hi < o->lo || !o->chunk) {
		fprintf(stderr, "tcp_limit: need 1..%d sockets and 0 < min <= max\n", MAX_SOCKS);
		exit(2);
	}
}

int main(int argc, char **argv)
{
	struct opts o;
	parse(argc, argv, &o);
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof(a);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(lfd, 64) != 0 ||
	    getsockname(lfd, (struct sockaddr *)&a, &len) != 0)
		die("listen on 127.0.0.1");
	int sync[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sync) != 0)
		die("socketpair");
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		close(sync[0]);
		side_main(1, &o, -1, ntohs(a.sin_port), sync[1]);
		_exit(0);
	}
	close(sync[1]);
	side_main(0, &o, lfd, 0, sync[0]);
	int st;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
