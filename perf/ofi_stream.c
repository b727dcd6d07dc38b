/*
 * ofi_stream — what a libfabric provider streams between one pair of
 * processes with several messages in flight, without Weft: the figure
 * Weft's ofi transport is measured against (perf/compare, docs/benchmarks.md).
 *
 *   build/ofi_stream [-p PROVIDER] [-m tagged|rma|both] [-b MIN] [-e MAX]
 *                    [-f FACTOR] [-w WINDOW] [-t SECONDS]
 *
 * The program forks into the pair (rank 0 sends, rank 1 receives) and
 * swaps endpoint names over a socketpair. Per size, for about -t seconds:
 *   tagged  rank 1 keeps WINDOW fi_trecv posted, rank 0 keeps WINDOW
 *           fi_tsend in flight;
 *   rma     rank 0 keeps WINDOW fi_writedata in flight into a buffer rank 1
 *           registered; rank 1 counts the remote completions;
 * then rank 1 answers with a small message and rank 0 stops its clock:
 * bandwidth = bytes / time, in GB/s (1e9). Manual progress: both ranks
 * spin on fi_cq_read. Defaults: tcp;ofi_rxm on lo (FI_TCP_IFACE=lo unless
 * set), 64 KiB to 16 MiB by 4, window 8, 0.5 s per size.
 */
#define _GNU_SOURCE
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_WINDOW 64
#define ACK_TAG	   0xacull

struct opts {
	const char *prov, *mode;
	size_t min, max;
	unsigned factor, window;
	double seconds;
};

struct peer_card {
	unsigned char name[128];
	size_t namelen;
	uint64_t addr, key;
};

struct ep {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_mr *mr;
	void *desc;
	fi_addr_t peer;
	char *buf;
	size_t bytes;
	struct peer_card theirs;
	struct fi_context2 ctx[MAX_WINDOW + 1];
};

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what, int ret)
{
	fprintf(stderr, "ofi_stream: %s: %s\n", what, fi_strerror(ret < 0 ? -ret : ret));
	exit(1);
}

static size_t parse_size(const char *s)
{
	char *end;
	size_t v = strtoull(s, &end, 10);
	switch (*end) {
	case 'k':
	case 'K': return v << 10;
	case 'm':
	case 'M': return v << 20;
	case 'g':
	case 'G': return v << 30;
	default: return v;
	}
}

static void open_ep(struct ep *e, const struct opts *o)
{
	struct fi_info *h = fi_allocinfo();
	h->caps = FI_TAGGED | FI_MSG | FI_RMA;
	h->mode = FI_CONTEXT | FI_CONTEXT2 | FI_RX_CQ_DATA;
	h->ep_attr->type = FI_EP_RDM;
	h->domain_attr->mr_mode =
	    FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED | FI_MR_ENDPOINT;
	h->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	h->domain_attr->threading = FI_THREAD_DOMAIN;
	h->fabric_attr->prov_name = strdup(o->prov);
	int ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &e->info);
	if (ret)
		die(o->prov, ret);
	fi_freeinfo(h);
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
	struct fi_av_attr ava = {.type = FI_AV_TABLE, .count = 2};
	if ((ret = fi_fabric(e->info->fabric_attr, &e->fabric, NULL)) ||
	    (ret = fi_domain(e->fabric, e->info, &e->domain, NULL)) ||
	    (ret = fi_cq_open(e->domain, &cqa, &e->cq, NULL)) ||
	    (ret = fi_av_open(e->domain, &ava, &e->av, NULL)) ||
	    (ret = fi_endpoint(e->domain, e->info, &e->ep, NULL)) ||
	    (ret = fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV)) ||
	    (ret = fi_ep_bind(e->ep, &e->av->fid, 0)) || (ret = fi_enable(e->ep)))
		die("opening the endpoint", ret);
	e->bytes = o->max * o->window;
	if (posix_memalign((void **)&e->buf, 4096, e->bytes))
		die("buffer", -FI_ENOMEM);
	memset(e->buf, 1, e->bytes);
	uint64_t access = FI_SEND | FI_RECV | FI_WRITE | FI_REMOTE_WRITE;
	if ((ret = fi_mr_reg(e->domain, e->buf, e->bytes, access, 0, 1, 0, &e->mr, NULL)))
		die("fi_mr_reg", ret);
	if ((e->info->domain_attr->mr_mode & FI_MR_ENDPOINT) &&
	    ((ret = fi_mr_bind(e->mr, &e->ep->fid, 0)) || (ret = fi_mr_enable(e->mr))))
		die("fi_mr_bind", ret);
	e->desc = fi_mr_desc(e->mr);
}

/* Swap cards over the socketpair and put the peer in the address vector. */
static void swap_cards(struct ep *e, int fd)
{
	struct peer_card mine = {.namelen = sizeof(mine.name), .key = fi_mr_key(e->mr)};
	mine.addr = e->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR ? (uintptr_t)e->buf : 0;
	int ret = fi_getname(&e->ep->fid, mine.name, &mine.namelen);
	if (ret)
		die("fi_getname", ret);
	if (write(fd, &mine, sizeof(mine)) != (ssize_t)sizeof(mine) ||
	    read(fd, &e->theirs, sizeof(e->theirs)) != (ssize_t)sizeof(e->theirs))
		die("swapping cards", -FI_EIO);
	if (fi_av_insert(e->av, e->theirs.name, 1, &e->peer, 0, NULL) != 1)
		die("fi_av_insert", -FI_EINVAL);
}

/* Completions read; on an error entry, die with its text. */
static int reap(struct ep *e, uint64_t *remote)
{
	struct fi_cq_tagged_entry ev[16];
	ssize_t n = fi_cq_read(e->cq, ev, 16);
	if (n == -FI_EAGAIN)
		return 0;
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err = {0};
		fi_cq_readerr(e->cq, &err, 0);
		die("completion", -err.err);
	}
	if (n < 0)
		die("fi_cq_read", (int)n);
	int local = 0;
	for (ssize_t i = 0; i < n; i++) {
		if ((ev[i].flags & FI_REMOTE_WRITE) ||
		    ((ev[i].flags & FI_REMOTE_CQ_DATA) && !(ev[i].flags & FI_WRITE)))
			(*remote)++;
		else
			local++;
	}
	return local;
}

static void post_retry(ssize_t (*post)(struct ep *, size_t, unsigned), struct ep *e, size_t size,
		       unsigned slot)
{
	uint64_t remote = 0;
	ssize_t ret;
	while ((ret = post(e, size, slot)) == -FI_EAGAIN)
		reap(e, &remote);
	if (ret)
		die("posting", (int)ret);
}

static ssize_t post_send(struct ep *e, size_t size, unsigned slot)
{
	return fi_tsend(e->ep, e->buf + (size_t)slot * size, size, e->desc, e->peer, 1,
			&e->ctx[slot]);
}

static ssize_t post_recv(struct ep *e, size_t size, unsigned slot)
{
	return fi_trecv(e->ep, e->buf + (size_t)slot * size, size, e->desc, e->peer, 1, 0,
			&e->ctx[slot]);
}

static ssize_t post_write(struct ep *e, size_t size, unsigned slot)
{
	return fi_writedata(e->ep, e->buf + (size_t)slot * size, size, e->desc, slot, e->peer,
			    e->theirs.addr + (uint64_t)slot * size, e->theirs.key, &e->ctx[slot]);
}

/* The small message that ends a round (tag ACK_TAG, both directions). */
static void ack(struct ep *e, bool send)
{
	uint64_t remote = 0;
	ssize_t ret;
	void *ctx = &e->ctx[MAX_WINDOW];
	do
		ret = send ? fi_tsend(e->ep, e->buf, 8, e->desc, e->peer, ACK_TAG, ctx)
			   : fi_trecv(e->ep, e->buf, 8, e->desc, e->peer, ACK_TAG, 0, ctx);
	while (ret == -FI_EAGAIN && (reap(e, &remote), true));
	if (ret)
		die("ack", (int)ret);
	while (reap(e, &remote) == 0)
		;
}

/* Rank 0: @p count messages of @p size, window in flight; seconds taken. */
static double sender(struct ep *e, bool rma, size_t size, uint64_t count, unsigned window)
{
	uint64_t posted = 0, done = 0, remote = 0;
	double t0 = now();
	while (done < count) {
		while (posted < count && posted - done < window) {
			post_retry(rma ? post_write : post_send, e, size,
				   (unsigned)(posted % window));
			posted++;
		}
		done += (uint64_t)reap(e, &remote);
	}
	ack(e, false);
	return now() - t0;
}

static void receiver(struct ep *e, bool rma, size_t size, uint64_t count, unsigned window)
{
	uint64_t posted = 0, done = 0, remote = 0;
	while (rma ? remote < count : done < count) {
		while (!rma && posted < count && posted - done < window) {
			post_retry(post_recv, e, size, (unsigned)(posted % window));
			posted++;
		}
		done += (uint64_t)reap(e, &remote);
	}
	ack(e, true);
}

/* One size: a short trial to size the round, then the round. GB/s. */
static double measure(struct ep *e, int rank, int fd, bool rma, size_t size, const struct opts *o)
{
	uint64_t count = o->window * 2;
	double bw = 0;
	for (int round = 0; round < 2; round++) {
		if (rank == 0) {
			double t = sender(e, rma, size, count, o->window);
			bw = (double)size * (double)count / t / 1e9;
			uint64_t next = (uint64_t)(o->seconds * bw * 1e9 / (double)size);
			next = next < o->window ? o->window : next;
			if (write(fd, &next, sizeof(next)) != (ssize_t)sizeof(next))
				die("round", -FI_EIO);
			count = next;
		} else {
			receiver(e, rma, size, count, o->window);
			if (read(fd, &count, sizeof(count)) != (ssize_t)sizeof(count))
				die("round", -FI_EIO);
		}
	}
	return bw;
}

/* Half the round trip of an 8-byte tagged ping-pong, in microseconds. */
static double latency(struct ep *e, int rank, int iters)
{
	uint64_t remote = 0;
	double t0 = 0;
	for (int i = -10; i < iters; i++) {
		if (i == 0)
			t0 = now();
		for (int k = 0; k < 2; k++) {
			bool send = (k == 0) == (rank == 0);
			ssize_t ret;
			do
				ret = send ? fi_tsend(e->ep, e->buf, 8, e->desc, e->peer, 2,
						      &e->ctx[0])
					   : fi_trecv(e->ep, e->buf, 8, e->desc, e->peer, 2, 0,
						      &e->ctx[0]);
			while (ret == -FI_EAGAIN && (reap(e, &remote), true));
			if (ret)
				die("ping-pong", (int)ret);
			while (reap(e, &remote) == 0)
				;
		}
	}
	return (now() - t0) / iters / 2 * 1e6;
}

static void run(int rank, int fd, const struct opts *o)
{
	struct ep e;
	memset(&e, 0, sizeof(e));
	open_ep(&e, o);
	swap_cards(&e, fd);
	bool both = strcmp(o->mode, "both") == 0;
	bool tagged = both || strcmp(o->mode, "tagged") == 0,
	     rma = both || strcmp(o->mode, "rma") == 0;
	double lat = latency(&e, rank, 2000);
	if (rank == 0) {
		printf("# ofi_stream: provider %s, window %u, %.2f s per size\n",
		       e.info->fabric_attr->prov_name, o->window, o->seconds);
		printf("# 8-byte tagged ping-pong: %.2f us one way\n", lat);
		printf("# %12s %12s %12s   (GB/s, one way)\n", "size", "tagged", "rma");
	}
	for (size_t s = o->min; s <= o->max; s *= o->factor) {
		double t = tagged ? measure(&e, rank, fd, false, s, o) : 0;
		double r = rma ? measure(&e, rank, fd, true, s, o) : 0;
		if (rank == 0)
			printf("  %12zu %12.3f %12.3f\n", s, t, r);
		fflush(stdout);
	}
	fi_close(&e.mr->fid);
	fi_close(&e.ep->fid);
	fi_close(&e.av->fid);
	fi_close(&e.cq->fid);
	fi_close(&e.domain->fid);
	fi_close(&e.fabric->fid);
	fi_freeinfo(e.info);
	free(e.buf);
}

int main(int argc, char **argv)
{
	struct opts o = {"tcp;ofi_rxm", "both", 64u << 10, 16u << 20, 4, 8, 0.5};
	int c;
	while ((c = getopt(argc, argv, "p:m:b:e:f:w:t:h")) != -1) {
		switch (c) {
		case 'p': o.prov = optarg; break;
		case 'm': o.mode = optarg; break;
		case 'b': o.min = parse_size(optarg); break;
		case 'e': o.max = parse_size(optarg); break;
		case 'f': o.factor = (unsigned)atoi(optarg); break;
		case 'w': o.window = (unsigned)atoi(optarg); break;
		case 't': o.seconds = atof(optarg); break;
		default:
			fprintf(stderr,
				"usage: ofi_stream [-p PROVIDER] [-m tagged|rma|both] [-b MIN] "
				"[-e MAX] [-f FACTOR] [-w WINDOW] [-t SECONDS]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (o.window < 1 || o.window > MAX_WINDOW || o.factor < 2 || o.min < 1 || o.max < o.min) {
		fprintf(stderr, "ofi_stream: need 1 <= -w <= %d, -f >= 2, 1 <= -b <= -e\n",
			MAX_WINDOW);
		return 2;
	}
	setenv("FI_TCP_IFACE", "lo", 0);
	setenv("FI_SOCKETS_IFACE", "lo", 0);
	setenv("FI_UDP_IFACE", "lo", 0);
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return 1;
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		return 1;
	run(pid == 0 ? 1 : 0, pid == 0 ? sv[1] : sv[0], &o);
	if (pid == 0)
		_exit(0);
	int status = 0;
	waitpid(pid, &status, 0);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
