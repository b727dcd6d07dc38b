/*
 * fuzz_sock_frames.c — libFuzzer target: what the socket transport's path
 * failover (WEFT_REPATH=stall) reads from a peer: the acknowledgement
 * vector in every frame header, the control frames (ACK, ACKNOW, BYE,
 * REPLACE), data frames flagged RESEND or ACKREQ, the sockets that replace
 * a slot (their hello's slot, generation and mask) and the re-path call
 * (transports/socket/socket_rx.c, socket_path.c, socket_door.c,
 * socket_lazy.c).
 *
 * Both ends of one connection run in this process, their sockets AF_UNIX
 * socket pairs behind a fake system-call table (struct weft_sock_io, as in
 * tests/unit/transports/failover.c; TCP_INFO always healthy, so no stall is
 * seen but the ones the input makes). Once connected, one end is the rank
 * under test and the other is never moved again: the fuzzer writes in its
 * place, on its ends of the sockets, and drains what the rank under test
 * writes. The rank under test has posted receives from the peer (some
 * reducing) and one send to it.
 *
 * Input: a configuration byte (bits 0-1: sockets - 1; bit 2: the rank under
 * test is the acceptor, rank 1, else the connector, rank 0; bits 3-4:
 * receives - 1; bit 5: adaptive spray), two bytes per receive (its length,
 * up to 4 fragments of 4 KiB; bit 15: reducing), then operations, each an
 * op byte and its arguments:
 *   0-1 data frame: slot, message, fragment, flags, and a mask of the
 *       fields to take from the input instead of their right value
 *       (magic, nacks, fseq, seq, off+len, frag_len, tag, acknowledgements),
 *       each 4 bytes; then a byte: how much of its payload to write
 *       (255: all). Payload bytes are a pattern of (message, offset).
 *   2   control frame: slot, kind, slot argument, generation (0: the
 *       slot's own, else 4 bytes), action, arguments-set byte.
 *   3   acknowledgement-only frame (CTL_ACK): slot, then per slot a mode
 *       byte (0: acknowledge what was written whole on it, 1: 4 bytes of
 *       count, 2: 4 bytes of generation, 4 of count).
 *   4   raw bytes: slot, length, bytes.
 *   5   progress the rank under test: rounds.
 *   6   the peer's end of a slot shuts down (EOF).
 *   7   a new authenticated connection to the rank under test: role (CALL
 *       or SOCKET), slot, generation, socket count and mask, 4 bytes each.
 * Beyond crashes, leaks and sanitizer reports, the target checks what the
 * transport promises: an error names the peer ("peer rank N"); once the
 * connection failed every message posted on it is done; a receive that
 * completed successfully holds exactly the pattern (reduced into its local
 * operand once) unless raw bytes were written. The bounded flush at fini
 * (WEFT_PEER_DEAD=0.01) keeps each input short.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/pace/pacer_settings.h"
#include "transports/registry.h"
#include "transports/socket/socket.h"
#include "util/handshake.h"
#include "weft.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_RECV  4
#define FRAG	  4096u
#define MAX_MINE  32
#define SEND_LEN  6000
#define LISTENERS 2

struct input {
	const uint8_t *p;
	size_t n;
};

static unsigned byte(struct input *in)
{
	if (!in->n)
		return 0;
	in->n--;
	return *in->p++;
}

static uint32_t u32(struct input *in)
{
	uint32_t v = 0;
	for (int i = 0; i < 4; i++)
		v = v << 8 | byte(in);
	return v;
}

/* ---- the fake network: socket pairs, a queue per listener ---- */

struct queue {
	uint16_t port;
	int fds[64];
	int n;
};
static struct queue queues[LISTENERS];

static uint16_t port_of(const struct sockaddr *a)
{
	return ntohs(((const struct sockaddr_in *)a)->sin_port);
}

static uint16_t listen_port(int fd)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	return getsockname(fd, (struct sockaddr *)&a, &len) == 0 ? ntohs(a.sin_port) : 0;
}

/* The other end of each pair, until connect queues it. */
static int other_end[4096];

static int fake_socket(int domain, int type, int protocol)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
		return -1;
	if (sv[0] >= 4096) {
		close(sv[0]);
		close(sv[1]);
		errno = EMFILE;
		return -1;
	}
	other_end[sv[0]] = sv[1];
	return sv[0];
}

static int fake_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	for (int i = 0; i < LISTENERS; i++)
		if (queues[i].port == port_of(addr) && queues[i].n < 64) {
			queues[i].fds[queues[i].n++] = other_end[fd];
			return 0;
		}
	close(other_end[fd]);
	errno = ECONNREFUSED;
	return -1;
}

static int fake_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	uint16_t port = listen_port(fd);
	for (int i = 0; i < LISTENERS; i++)
		if (queues[i].port == port && queues[i].n > 0) {
			int got = queues[i].fds[0];
			memmove(queues[i].fds, queues[i].fds + 1, --queues[i].n * sizeof(int));
			return got;
		}
	errno = EAGAIN;
	return -1;
}

/* A healthy path: everything written is acknowledged at once. */
static int fake_tcp_info(int fd, struct tcp_info *ti)
{
	memset(ti, 0, sizeof(*ti));
	ti->tcpi_rtt = 200;
	ti->tcpi_state = 1; /* established */
	return 0;
}

static const struct weft_sock_io fake_io = {
    .socket = fake_socket,
    .connect = fake_connect,
    .accept4 = fake_accept4,
    .sendmsg = sendmsg,
    .recv = recv,
    .tcp_info = fake_tcp_info,
    .shutdown = shutdown,
    .close = close,
};

/* ---- the two ranks ---- */

struct end {
	struct weft_tp_env env;
	struct weft_tp_peer peers[2];
	struct weft_tp *tp;
	struct weft_conn *conn;
	char err[512];
	weft_status_t status;
};

static struct end ends[2];
static struct weft_key key;
static unsigned char comm_id[WEFT_HS_ID_BYTES] = "fuzz-sock-frames";
static struct weft_sock_card first_card;

static weft_status_t env_allgather(void *ctx, void *buf, size_t bytes)
{
	struct end *e = ctx;
	struct weft_sock_card *cards = buf;
	if (e->env.rank == 0) {
		first_card = cards[0];
		cards[1] = cards[0]; /* patched once rank 1 has its listener */
	} else {
		cards[0] = first_card;
	}
	return WEFT_SUCCESS;
}

static weft_status_t env_fail(void *ctx, weft_status_t status, const char *msg)
{
	struct end *e = ctx;
	if (!e->status) {
		e->status = status;
		snprintf(e->err, sizeof(e->err), "%s", msg);
	}
	return status;
}

static void env_explain(void *ctx, uint64_t sent, uint64_t want, int peer, char *buf, size_t len)
{
	buf[0] = '\0';
}

static double env_silence(void *ctx, int peer)
{
	return -1; /* no watch: a peer dark on every path is gone after WEFT_PEER_DEAD */
}

static struct weft_sock_comm *sc_of(int r)
{
	return weft_container_of(ends[r].tp, struct weft_sock_comm, base);
}

static struct weft_sock_conn *conn_of(int r)
{
	return weft_container_of(ends[r].conn, struct weft_sock_conn, base);
}

static bool setup(unsigned nsocks, bool adaptive)
{
	char n[8];
	snprintf(n, sizeof(n), "%u", nsocks);
	setenv("WEFT_SOCKET_NSOCKS", n, 1);
	setenv("WEFT_SPRAY", adaptive ? "adaptive" : "rr", 1);
	memset(queues, 0, sizeof(queues));
	memset(ends, 0, sizeof(ends));
	for (int r = 0; r < 2; r++) {
		struct end *e = &ends[r];
		for (int p = 0; p < 2; p++)
			e->peers[p] = (struct weft_tp_peer){.host_id = p ? "b" : "a",
							    .hostname = p ? "b" : "a"};
		e->env = (struct weft_tp_env){.rank = r,
					      .nranks = 2,
					      .local_size = 1,
					      .key = &key,
					      .id = comm_id,
					      .timeout_s = 30,
					      .peers = e->peers,
					      .wait_fd = -1,
					      .ctx = e,
					      .allgather = env_allgather,
					      .fail = env_fail,
					      .explain = env_explain,
					      .peer_silence = env_silence};
		if (weft_tp_socket_ops.life.init(&e->env, &e->tp) != WEFT_SUCCESS)
			abort(); /* the settings above are valid: a broken harness */
		queues[r].port = listen_port(sc_of(r)->listen_fd);
	}
	sc_of(0)->cards[1] = sc_of(1)->cards[1];
	for (int turn = 0; turn < 2000 && (!ends[0].conn || !ends[1].conn); turn++)
		for (int r = 0; r < 2; r++) {
			if (!ends[r].conn &&
			    ends[r].tp->ops->conn.connect(ends[r].tp, 1 - r, &ends[r].conn) < 0)
				abort();
			for (int q = 0; q < 2; q++)
				ends[q].tp->ops->msg.progress(ends[q].tp);
		}
	return ends[0].conn && ends[1].conn;
}

/* ---- the rank under test (u) and the fuzzer in its peer's place ---- */

struct run {
	int u, f;		     /* the rank under test; the peer the fuzzer plays */
	int fd[WEFT_SOCK_MAX_SLOTS]; /* the fuzzer's end of each slot */
	int mine[MAX_MINE];	     /* socket ends the harness opened */
	int nmine;
	bool raw; /* bytes were written that no header describes */
	/* The last frame written on the slot was cut short: what comes next
	 * there is its payload, whatever it was meant to be (raw). */
	bool partial[WEFT_SOCK_MAX_SLOTS];
	unsigned nrecv;
	struct weft_msg recv[MAX_RECV], send;
	unsigned char *buf[MAX_RECV], *local[MAX_RECV], *sendbuf;
};

static void sum_u8(void *dst, const void *a, const void *b, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *x = a, *y = b;
	for (size_t i = 0; i < n; i++)
		d[i] = (unsigned char)(x[i] + y[i]);
}

static unsigned char pattern(uint64_t seq, uint64_t at)
{
	return (unsigned char)(at * 131 + seq * 29 + 7);
}

static void drain(struct run *run)
{
	char sink[16384];
	for (unsigned s = 0; s < WEFT_SOCK_MAX_SLOTS; s++)
		while (run->fd[s] >= 0 && recv(run->fd[s], sink, sizeof(sink), MSG_DONTWAIT) > 0)
			;
}

static void progress(struct run *run, unsigned rounds)
{
	for (unsigned i = 0; i < rounds; i++) {
		ends[run->u].tp->ops->msg.progress(ends[run->u].tp);
		drain(run);
	}
}

/* Write @p len bytes on the fuzzer's end of slot @p s, as far as the rank
 * under test reads them (a bounded wait). */
static void put(struct run *run, unsigned s, const void *p, size_t len)
{
	const char *b = p;
	for (int tries = 0; len && run->fd[s] >= 0 && tries < 64; tries++) {
		ssize_t n = send(run->fd[s], b, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			b += n;
			len -= (size_t)n;
		} else if (n < 0 && errno != EAGAIN) {
			return;
		} else {
			progress(run, 4);
		}
	}
}

/* Frames the rank under test wrote whole on slot @p s. */
static uint32_t written(const struct weft_sock_conn *c, unsigned s)
{
	const struct weft_sock_tx *tx = &c->sock[s].tx;
	return tx->wr ? tx->wr->fseq - 1 : tx->next_fseq - 1;
}

/* The right acknowledgement vector: all the rank under test wrote. */
static void right_acks(const struct weft_sock_conn *c, struct weft_sock_ack *acks)
{
	for (unsigned i = 0; i < c->sc->nslots; i++)
		acks[i] = (struct weft_sock_ack){.gen = c->sock[i].gen, .frames = written(c, i)};
}

static void put_frame(struct run *run, unsigned s, const struct weft_sock_frame *h,
		      const struct weft_sock_ack *acks, unsigned nacks)
{
	run->raw = run->raw || run->partial[s];
	run->partial[s] = false;
	put(run, s, h, sizeof(*h));
	put(run, s, acks, nacks * sizeof(acks[0]));
}

static struct weft_sock_frame right_header(const struct run *run, unsigned s, unsigned k,
					   unsigned i)
{
	const struct weft_sock_conn *c = conn_of(run->u);
	uint64_t len = k < run->nrecv ? run->recv[k].len : FRAG;
	uint64_t off = (uint64_t)i * FRAG;
	uint64_t left = off <= len ? len - off : 0;
	return (struct weft_sock_frame){.magic = WEFT_SOCK_FRAME_MAGIC,
					.frag_len = (uint32_t)(left < FRAG ? left : FRAG),
					.tag = 100 + k,
					.len = len,
					.off = off,
					.seq = k,
					.fseq = c->sock[s].rx.frames + 1,
					.nacks = (uint16_t)c->sc->nslots};
}

static void op_data(struct run *run, struct input *in)
{
	const struct weft_sock_conn *c = conn_of(run->u);
	unsigned s = byte(in) % c->sc->nslots, k = byte(in) % (MAX_RECV + 2);
	unsigned i = byte(in) % 6, flags = byte(in), mask = byte(in);
	struct weft_sock_frame h = right_header(run, s, k, i);
	struct weft_sock_ack acks[WEFT_SOCK_MAX_SLOTS];
	right_acks(c, acks);
	h.flags = (uint16_t)(flags & 0x80 ? flags << 8 | flags : flags & 7);
	if (mask & 1)
		h.magic = u32(in);
	if (mask & 2)
		h.nacks = (uint16_t)u32(in);
	if (mask & 4)
		h.fseq = u32(in);
	if (mask & 8)
		h.seq = u32(in);
	if (mask & 16) {
		h.off = u32(in);
		h.len = u32(in);
	}
	if (mask & 32)
		h.frag_len = u32(in);
	if (mask & 64)
		h.tag = u32(in);
	for (unsigned a = 0; (mask & 128) && a < c->sc->nslots; a++) {
		acks[a].gen = u32(in);
		acks[a].frames = u32(in);
	}
	unsigned cut = byte(in);
	size_t n = h.frag_len < 3 * FRAG ? h.frag_len : 3 * FRAG;
	if (cut != 255)
		n = n * cut / 255;
	unsigned char payload[3 * FRAG];
	for (size_t b = 0; b < n; b++)
		payload[b] = pattern(h.seq, h.off + b);
	put_frame(run, s, &h, acks, h.nacks <= c->sc->nslots ? h.nacks : c->sc->nslots);
	put(run, s, payload, n);
	run->partial[s] = n < h.frag_len;
	progress(run, 2);
}

static void op_ctl(struct run *run, struct input *in)
{
	const struct weft_sock_conn *c = conn_of(run->u);
	unsigned s = byte(in) % c->sc->nslots, kind = byte(in), slot = byte(in);
	unsigned g = byte(in);
	uint32_t gen = g ? u32(in) : c->sock[slot % c->sc->nslots].gen;
	unsigned action = byte(in), set = byte(in);
	struct weft_sock_frame h = {.magic = WEFT_SOCK_FRAME_MAGIC,
				    .flags = WEFT_SOCK_F_CTL,
				    .seq = kind % 8,
				    .nacks = (uint16_t)c->sc->nslots};
	if (h.seq == WEFT_SOCK_CTL_REPLACE || (set & 1)) {
		h.off = set & 2 ? slot : slot % c->sc->nslots;
		h.len = set & 4 ? (uint64_t)gen << 32 : gen;
		h.tag = set & 8 ? action : action % 3;
	}
	if (set & 16)
		h.frag_len = set >> 5;
	struct weft_sock_ack acks[WEFT_SOCK_MAX_SLOTS];
	right_acks(c, acks);
	put_frame(run, s, &h, acks, c->sc->nslots);
	progress(run, 2);
}

static void op_ack(struct run *run, struct input *in)
{
	const struct weft_sock_conn *c = conn_of(run->u);
	unsigned s = byte(in) % c->sc->nslots;
	struct weft_sock_ack acks[WEFT_SOCK_MAX_SLOTS];
	right_acks(c, acks);
	for (unsigned a = 0; a < c->sc->nslots; a++) {
		unsigned mode = byte(in) % 3;
		if (mode == 2)
			acks[a].gen = u32(in);
		if (mode)
			acks[a].frames = u32(in);
	}
	struct weft_sock_frame h = {.magic = WEFT_SOCK_FRAME_MAGIC,
				    .flags = WEFT_SOCK_F_CTL,
				    .seq = WEFT_SOCK_CTL_ACK,
				    .nacks = (uint16_t)c->sc->nslots};
	put_frame(run, s, &h, acks, c->sc->nslots);
	progress(run, 2);
}

static void op_raw(struct run *run, struct input *in)
{
	unsigned s = byte(in) % conn_of(run->u)->sc->nslots, len = byte(in);
	unsigned char b[256];
	for (unsigned i = 0; i < len; i++)
		b[i] = (unsigned char)byte(in);
	run->raw = true;
	put(run, s, b, len);
	progress(run, 2);
}

/* A new authenticated connection from the peer (the fuzzer holds the key
 * too): a replacement socket, or a call, with the input's hello. */
static void op_hello(struct run *run, struct input *in)
{
	const struct weft_sock_comm *sc = sc_of(run->u);
	unsigned role = byte(in) & 1, slot = byte(in);
	struct weft_sock_hello hello; /* read in order: no initializer list */
	hello.index = slot % 4 == 3 ? u32(in) : slot % sc->nslots;
	hello.gen = u32(in);
	hello.nsocks = byte(in) & 1 ? u32(in) : sc->nsocks;
	hello.mask = u32(in);
	if (role && run->u != 0)
		return; /* only a higher rank calls */
	int sv[2];
	if (run->nmine + 1 > MAX_MINE ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
		return;
	struct queue *q = &queues[run->u];
	if (q->n == 64) {
		close(sv[0]);
		close(sv[1]);
		return;
	}
	q->fds[q->n++] = sv[1];
	run->mine[run->nmine++] = sv[0];
	struct weft_hs hs;
	struct weft_err err = {0};
	if (weft_hs_connect(&hs, sv[0], &key, role ? WEFT_HS_CALL : WEFT_HS_SOCKET, comm_id, run->f,
			    run->u, &hello, sizeof(hello), &err) != WEFT_SUCCESS)
		return;
	enum weft_hs_result r = WEFT_HS_AGAIN;
	for (int t = 0; t < 200 && r == WEFT_HS_AGAIN; t++) {
		r = weft_hs_step(&hs);
		progress(run, 1);
	}
	weft_hs_clear(&hs);
	progress(run, 4);
	/* Installed in its slot: the fuzzer writes there now. */
	if (r == WEFT_HS_OK && !role && hello.index < sc->nslots) {
		struct weft_sock_conn *c = conn_of(run->u);
		if (c->sock[hello.index].phase == WEFT_SOCK_UP &&
		    c->sock[hello.index].gen == hello.gen) {
			run->fd[hello.index] = sv[0];
			run->partial[hello.index] = false;
		}
	}
}

static void post(struct run *run, struct input *in)
{
	for (unsigned k = 0; k < run->nrecv; k++) {
		unsigned v = byte(in) << 8 | byte(in);
		size_t len = (v & 0x7fff) % (4 * FRAG + 1);
		run->buf[k] = malloc(len + 1);
		run->local[k] = malloc(len + 1);
		for (size_t b = 0; b < len; b++)
			run->local[k][b] = run->buf[k][b] = (unsigned char)(b * 7 + k);
		run->recv[k] =
		    (struct weft_msg){.buf = run->buf[k], .len = len, .tag = 100 + k, .unit = 1};
		if (v & 0x8000) {
			run->recv[k].reduce = sum_u8;
			run->recv[k].local = run->local[k];
		}
		weft_tp_socket_irecv(ends[run->u].conn, &run->recv[k]);
	}
	run->sendbuf = calloc(1, SEND_LEN);
	run->send = (struct weft_msg){.buf = run->sendbuf, .len = SEND_LEN, .tag = 7, .unit = 1};
	weft_tp_socket_isend(ends[run->u].conn, &run->send);
	progress(run, 8);
}

static void check(const struct run *run)
{
	const struct end *e = &ends[run->u];
	char who[32];
	snprintf(who, sizeof(who), "peer rank %d", run->f);
	if (e->status && !strstr(e->err, who)) {
		fprintf(stderr, "an error that does not name the peer: \"%s\"\n", e->err);
		abort();
	}
	bool failed = conn_of(run->u)->failed != 0;
	if (getenv("FUZZ_SOCK_FRAMES_SAY")) { /* what a seed did, to check it does it */
		fprintf(stderr, "rank %d: %s; receives done:", run->u,
			e->status ? e->err : "no error");
		for (unsigned k = 0; k < run->nrecv; k++)
			fprintf(stderr, " %d/%d", run->recv[k].done, run->recv[k].status);
		fprintf(stderr, "; failovers %llu, resent %llu, dups %llu\n",
			(unsigned long long)conn_of(run->u)->st.failovers,
			(unsigned long long)conn_of(run->u)->st.resent,
			(unsigned long long)conn_of(run->u)->st.dups);
	}
	for (unsigned k = 0; k <= run->nrecv; k++) {
		const struct weft_msg *m = k < run->nrecv ? &run->recv[k] : &run->send;
		if (failed && !m->done) {
			fprintf(stderr, "the connection failed (%s) and message %u waits\n", e->err,
				k);
			abort();
		}
		if (k == run->nrecv || !m->done || m->status != WEFT_SUCCESS || run->raw)
			continue;
		for (size_t b = 0; b < m->len; b++) {
			unsigned char want = pattern(k, b);
			if (m->reduce)
				want = (unsigned char)(want + run->local[k][b]);
			if (run->buf[k][b] != want) {
				fprintf(stderr, "receive %u byte %zu is %u, expected %u\n", k, b,
					run->buf[k][b], want);
				abort();
			}
		}
	}
}

static void finish(struct run *run)
{
	/* The peer under the fuzzer's hand: its connection fails (closing its
	 * ends), then both go. */
	weft_tp_socket_conn_fail(conn_of(run->f), WEFT_ERR_ABORTED);
	ends[run->u].tp->ops->life.fini(ends[run->u].tp);
	ends[run->f].tp->ops->life.fini(ends[run->f].tp);
	for (int i = 0; i < run->nmine; i++)
		close(run->mine[i]);
	for (int q = 0; q < LISTENERS; q++)
		for (int i = 0; i < queues[q].n; i++)
			close(queues[q].fds[i]);
	for (unsigned k = 0; k < run->nrecv; k++) {
		free(run->buf[k]);
		free(run->local[k]);
	}
	free(run->sendbuf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool once;
	if (!once) {
		once = true;
		setenv("WEFT_DEBUG", "NONE", 1);
		setenv("WEFT_REPATH", "stall", 1);
		setenv("WEFT_PEER_DEAD", "0.01", 1);
		setenv("WEFT_SOCKET_CHUNK", "4K", 1);
		weft_registry_init();
		weft_settings_add(weft_pacer_settings, weft_pacer_nsettings);
		memset(&key, 7, sizeof(key));
		weft_sock_io_default = &fake_io;
	}
	struct input in = {data, size};
	unsigned cfg = byte(&in);
	struct run run = {.u = cfg >> 2 & 1, .nrecv = (cfg >> 3 & 3) + 1};
	run.f = 1 - run.u;
	if (!setup((cfg & 3) + 1, cfg >> 5 & 1))
		abort();
	for (unsigned s = 0; s < WEFT_SOCK_MAX_SLOTS; s++)
		run.fd[s] = s < sc_of(run.f)->nslots ? conn_of(run.f)->sock[s].fd : -1;
	post(&run, &in);
	while (in.n && !conn_of(run.u)->failed) {
		switch (byte(&in) % 8) {
		case 0:
		case 1: op_data(&run, &in); break;
		case 2: op_ctl(&run, &in); break;
		case 3: op_ack(&run, &in); break;
		case 4: op_raw(&run, &in); break;
		case 5: progress(&run, byte(&in) % 32); break;
		case 6: shutdown(run.fd[byte(&in) % sc_of(run.u)->nslots], SHUT_RDWR); break;
		default: op_hello(&run, &in); break;
		}
	}
	progress(&run, 16);
	check(&run);
	finish(&run);
	return 0;
}
