/*
 * flood.c — a stranger for perf/bench_flood.sh: a process without the
 * job's key that keeps hammering the listeners it is given, at a stated
 * rate, until SIGTERM or SIGINT. It knows nothing of Weft but what anyone
 * on the network could see (the handshake's magic, in a hello that cannot
 * answer a challenge); it uses no Weft code.
 *
 *   flood --tcp PORT[,PORT...] [--udp PORT[,PORT...]] [--rate N]
 *         [--silent N] [--datagrams N]
 *
 * Every second it opens --rate new connections to 127.0.0.1 spread over
 * the TCP ports (alternately 104 bytes of garbage and a hello-shaped
 * message, then closed), keeps up to --silent connections open that say
 * nothing (opening new ones as the listener drops them, at most --rate a
 * second), and sends
 * --datagrams 176-byte datagrams of garbage to each UDP port. Aimed at a
 * closed port it pays the same CPU for its system calls and the kernel
 * refuses them, which is the benchmark's quiet run. At exit it prints what
 * it did.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_PORTS  64
#define MAX_SILENT 4096

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* "1,2,3" into @p ports; the count, or -1 on a bad list. */
static int parse_ports(const char *s, unsigned *ports)
{
	int n = 0;
	while (*s) {
		char *end;
		unsigned long p = strtoul(s, &end, 10);
		if (end == s || p == 0 || p > 65535 || n == MAX_PORTS || (*end && *end != ','))
			return -1;
		ports[n++] = (unsigned)p;
		s = *end ? end + 1 : end;
	}
	return n;
}

static bool parse_count(const char *s, long max, long *out)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (end == s || *end || v < 0 || v > max)
		return false;
	*out = v;
	return true;
}

static struct sockaddr_in loopback(unsigned port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

/* A non-blocking connect; the socket, or -1. */
static int dial(unsigned port)
{
	struct sockaddr_in to = loopback(port);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&to, sizeof(to)) != 0 && errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	return fd;
}

/* What a stranger sends where a hello goes: garbage, or the handshake's
 * magic and version followed by zeros (it has no key to prove). */
static void noisy(unsigned port, bool hello_shaped, long *sent)
{
	unsigned char msg[104];
	int fd = dial(port);
	if (fd < 0)
		return;
	memset(msg, hello_shaped ? 0 : 0xab, sizeof(msg));
	if (hello_shaped) {
		memcpy(msg, "WEFTHS01", 8);
		msg[8] = 1; /* version 1 */
	}
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	if (poll(&p, 1, 50) == 1 && (p.revents & POLLOUT) &&
	    send(fd, msg, sizeof(msg), MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof(msg))
		(*sent)++;
	close(fd);
}

static void usage(void)
{
	fprintf(stderr, "usage: flood --tcp PORT[,PORT...] [--udp PORT[,PORT...]] [--rate N] "
			"[--silent N] [--datagrams N]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	unsigned tcp[MAX_PORTS], udp[MAX_PORTS];
	int ntcp = 0, nudp = 0;
	long rate = 1000, nsilent_max = 200, datagrams = 1000;
	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v)
			usage();
		if (!strcmp(argv[i], "--tcp"))
			ntcp = parse_ports(v, tcp);
		else if (!strcmp(argv[i], "--udp"))
			nudp = parse_ports(v, udp);
		else if (!strcmp(argv[i], "--rate") && parse_count(v, 1000000, &rate))
			;
		else if (!strcmp(argv[i], "--silent") && parse_count(v, MAX_SILENT, &nsilent_max))
			;
		else if (!strcmp(argv[i], "--datagrams") && parse_count(v, 1000000, &datagrams))
			;
		else
			usage();
		if (ntcp < 0 || nudp < 0)
			usage();
		i++;
	}
	if (ntcp == 0)
		usage();
	struct rlimit rl = {MAX_SILENT + 256, MAX_SILENT + 256};
	setrlimit(RLIMIT_NOFILE, &rl);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);

	static int silent[MAX_SILENT];
	int nsilent = 0;
	long opened = 0, sent = 0, dgrams = 0, reopened = 0;
	int ufd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	unsigned char junk[176];
	memset(junk, 0x5a, sizeof(junk));
	double t0 = now_s();
	/* In steps of 10 ms, each doing a hundredth of a second's share. */
	for (long step = 0; !stop; step++) {
		double due = t0 + (double)(step + 1) * 0.01;
		long conns = (rate * (step + 1)) / 100 - (rate * step) / 100;
		long dg = (datagrams * (step + 1)) / 100 - (datagrams * step) / 100;
		for (long k = 0; k < conns && !stop; k++, opened++)
			noisy(tcp[opened % ntcp], opened % 2, &sent);
		for (int u = 0; u < nudp; u++)
			for (long k = 0; k < dg; k++) {
				struct sockaddr_in to = loopback(udp[u]);
				if (sendto(ufd, junk, sizeof(junk), MSG_DONTWAIT,
					   (struct sockaddr *)&to, sizeof(to)) > 0)
					dgrams++;
			}
		/* The silent ones: replace those the listener closed. */
		for (int k = 0; k < nsilent; k++) {
			char c;
			ssize_t n = recv(silent[k], &c, 1, MSG_DONTWAIT);
			if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
				close(silent[k]);
				silent[k--] = silent[--nsilent];
			}
		}
		for (long k = 0; k < conns && nsilent < nsilent_max; k++) {
			int fd = dial(tcp[(opened + (unsigned)nsilent) % (unsigned)ntcp]);
			if (fd < 0)
				break;
			silent[nsilent++] = fd;
			reopened++;
		}
		double left = due - now_s();
		if (left > 0) {
			struct timespec ts = {0, (long)(left * 1e9)};
			nanosleep(&ts, NULL);
		}
	}
	double secs = now_s() - t0;
	printf("flood: %.1f s: %ld connections opened (%ld sent their bytes), %ld silent ones "
	       "opened (%d held at the end), %ld datagrams\n",
	       secs, opened, sent, reopened, nsilent, dgrams);
	return 0;
}
