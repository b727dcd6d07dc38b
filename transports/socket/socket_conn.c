/*
 * socket_conn.c — the TCP transport's setup and teardown: the listener,
 * connections and their slots, abort and fini, properties, and the ops
 * table. The connector's side of a slot is in socket_slot.c, the
 * listener's in socket_door.c, the data path in socket_data.c; the wire
 * format is described in socket.h.
 *
 * Who connects: for each pair the lower rank opens its sockets (the data
 * sockets and, with WEFT_REPATH on, the control socket) to the higher
 * rank's listener. The higher rank accepts from its one listener whatever
 * arrives, runs the handshake on each socket (util/handshake.h) and routes
 * it by (rank, slot, generation); a socket that fails it, or claims a slot
 * that is taken, is closed (the first few with a warning) and the job goes
 * on. Connecting lazily, the same happens during the job, and the higher
 * rank calls the lower one when it needs the pair first (socket_lazy.c).
 *
 * The listener. Connecting eagerly without WEFT_REPATH, every connection
 * is made at init, so the listener closes then (a stranger finds the port
 * closed). With WEFT_REPATH on it stays open, bounded like every door
 * (WEFT_MAX_PENDING handshakes for WEFT_HANDSHAKE_TIMEOUT each), since a
 * failed sub-flow is replaced by a new connection to it during the job,
 * and the connector's listener takes the acceptor's call when every path
 * is dark (docs/reliability.md).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transports/common/tp_stubs.h"
#include "transports/socket/socket.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/netaddr.h"
#include "util/settings.h"

#define SOCK_CARD_MAGIC 0x57454654534f4b44ull /* "WEFTSOKD" */
#define CTL_BOUNCE	4096u

static struct weft_sock_comm *to_sc(struct weft_tp *tp)
{
	return weft_container_of(tp, struct weft_sock_comm, base);
}

static const char *addr_str(const struct sockaddr_storage *a, char *buf, size_t n)
{
	return weft_addr_str((const struct sockaddr *)a, buf, n);
}

static void close_fd(int *fd)
{
	if (*fd >= 0) {
		shutdown(*fd, SHUT_RDWR);
		close(*fd);
		*fd = -1;
	}
}

static int sock_score(struct weft_tp *tp, int peer)
{
	return peer == tp->env->rank ? 0 : 10;
}

/* The interface the communicator chose (env->ifname: WEFT_SOCKET_IFNAME,
 * else loopback on one host, else this rank's NIC). */
static weft_status_t pick_address(const struct weft_tp_env *env, struct weft_sock_card *card)
{
	socklen_t len = 0;
	struct weft_err err = {0};
	weft_status_t st = weft_addr_of_interface(env->ifname, &card->addr, &len, &err);
	card->addr_len = len;
	return st == WEFT_SUCCESS ? st : weft_tp_fail(env, st, "socket: %s", err.msg);
}

static weft_status_t open_listener(struct weft_sock_comm *sc, struct weft_sock_card *card)
{
	const struct weft_tp_env *env = sc->base.env;
	weft_status_t st = weft_tp_socket_read_settings(sc);
	if (st != WEFT_SUCCESS)
		return st;
	st = pick_address(env, card);
	if (st != WEFT_SUCCESS)
		return st;
	int fd = socket(card->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return weft_tp_fail_errno(env, errno, "socket: creating the listener");
	socklen_t alen = sizeof(card->addr);
	char where[80];
	if (bind(fd, (struct sockaddr *)&card->addr, card->addr_len) != 0 ||
	    listen(fd, SOMAXCONN) != 0 ||
	    getsockname(fd, (struct sockaddr *)&card->addr, &alen) != 0) {
		int e = errno;
		close(fd);
		return weft_tp_fail_errno(env, e, "socket: listening on %s",
					  addr_str(&card->addr, where, sizeof(where)));
	}
	card->addr_len = alen;
	sc->listen_fd = fd;
	card->nsocks = sc->nsocks;
	card->chunk = sc->chunk;
	card->spray = sc->spray;
	card->repath = sc->repath;
	weft_log(WEFT_LOG_INFO, WEFT_SUB_NET,
		 "socket: listening on %s, %u sockets per peer, chunk %zu, spray %s, repath %s",
		 addr_str(&card->addr, where, sizeof(where)), sc->nsocks, sc->chunk,
		 sc->spray == WEFT_SPRAY_ADAPTIVE ? "adaptive" : "rr",
		 weft_tp_socket_repath_name(sc->repath));
	return WEFT_SUCCESS;
}

/* After the allgather: every rank must have a listener and the same
 * striping parameters, or the two ends of a pair would cut messages
 * differently (and without the same WEFT_REPATH, frame them differently). */
static weft_status_t check_cards(struct weft_sock_comm *sc)
{
	const struct weft_tp_env *env = sc->base.env;
	const struct weft_sock_card *me = &sc->cards[env->rank];
	for (int r = 0; r < env->nranks; r++) {
		const struct weft_sock_card *c = &sc->cards[r];
		if (c->magic != SOCK_CARD_MAGIC || c->status != WEFT_SUCCESS)
			return weft_tp_fail(env, WEFT_ERR_REMOTE,
					    "socket: rank %d could not open its TCP listener (%s)",
					    r, weft_status_string((weft_status_t)c->status));
		if (c->nsocks != me->nsocks || c->chunk != me->chunk || c->spray != me->spray ||
		    c->repath != me->repath)
			return weft_tp_fail(
			    env, WEFT_ERR_INVALID_ARG,
			    "socket: WEFT_SOCKET_NSOCKS/WEFT_SOCKET_CHUNK/WEFT_SPRAY/WEFT_REPATH "
			    "differ between ranks: rank %d has %u/%llu/%s/%s, rank %d has "
			    "%u/%llu/%s/%s",
			    env->rank, me->nsocks, (unsigned long long)me->chunk,
			    me->spray ? "adaptive" : "rr", weft_tp_socket_repath_name(me->repath),
			    r, c->nsocks, (unsigned long long)c->chunk,
			    c->spray ? "adaptive" : "rr", weft_tp_socket_repath_name(c->repath));
	}
	return WEFT_SUCCESS;
}

static void sock_fini(struct weft_tp *tp);

static weft_status_t sock_init(const struct weft_tp_env *env, struct weft_tp **out)
{
	*out = NULL;
	struct weft_sock_comm *sc = calloc(1, sizeof(*sc));
	if (!sc)
		return weft_tp_fail(env, WEFT_ERR_NO_MEMORY, "socket: out of memory");
	sc->base.ops = &weft_tp_socket_ops;
	sc->base.env = env;
	sc->io = weft_sock_io_default;
	sc->listen_fd = -1;
	sc->cards = calloc((size_t)env->nranks, sizeof(*sc->cards));
	sc->conns = calloc((size_t)env->nranks, sizeof(*sc->conns));
	sc->active = calloc((size_t)env->nranks, sizeof(*sc->active));
	sc->connecting = calloc((size_t)env->nranks, sizeof(*sc->connecting));
	sc->max_pending = weft_hs_max_pending();
	sc->hs_timeout_s = weft_hs_timeout_s();
	sc->pending = calloc((size_t)sc->max_pending, sizeof(*sc->pending));
	sc->pending_pfd = calloc((size_t)sc->max_pending, sizeof(*sc->pending_pfd));
	if (!sc->cards || !sc->conns || !sc->active || !sc->connecting || !sc->pending ||
	    !sc->pending_pfd ||
	    weft_tp_pool_init(&sc->reqs, sizeof(struct weft_sock_req)) != WEFT_SUCCESS) {
		sock_fini(&sc->base);
		return weft_tp_fail(env, WEFT_ERR_NO_MEMORY, "socket: out of memory");
	}

	/* Take part in the allgather even if the listener failed, so the other
	 * ranks learn why instead of waiting for us until the timeout. */
	struct weft_sock_card *card = &sc->cards[env->rank];
	weft_status_t local = open_listener(sc, card);
	card->magic = SOCK_CARD_MAGIC;
	card->status = local;
	weft_status_t st = env->allgather(env->ctx, sc->cards, sizeof(*sc->cards));
	/* Our own failure is the root cause even if the allgather failed too
	 * (the communicator keeps the first error). */
	if (local != WEFT_SUCCESS)
		st = local;
	else if (st == WEFT_SUCCESS)
		st = check_cards(sc);
	if (st != WEFT_SUCCESS) {
		sock_fini(&sc->base);
		return st;
	}
	*out = &sc->base;
	return WEFT_SUCCESS;
}

static void conn_free(struct weft_sock_conn *c)
{
	for (unsigned i = 0; i < WEFT_SOCK_MAX_SLOTS; i++) {
		free(c->sock[i].bounce.buf);
		free(c->sock[i].rx.stage);
	}
	weft_tp_socket_ack_fini(c);
	free(c);
}

/* Slot @p i's buffers, pre-faulted now so that the first receive pays no
 * page faults: the staging buffer, and the bounce buffer reduce receives
 * land in (small on the control socket, which carries no data). */
static bool slot_alloc(struct weft_sock_conn *c, unsigned i)
{
	const struct weft_sock_comm *sc = c->sc;
	struct weft_sock *sk = &c->sock[i];
	size_t bounce =
	    i == weft_sock_ctl_slot(sc) && weft_sock_acking(sc) ? CTL_BOUNCE : sc->bounce_bytes;
	sk->fd = -1;
	sk->bounce.buf = malloc(bounce);
	sk->bounce.cap = bounce;
	sk->rx.stage = malloc(WEFT_SOCK_STAGE);
	if (!sk->bounce.buf || !sk->rx.stage)
		return false;
	memset(sk->bounce.buf, 0, bounce);
	memset(sk->rx.stage, 0, WEFT_SOCK_STAGE);
	sk->gen = 1;
	sk->tx.next_fseq = 1;
	return true;
}

struct weft_sock_conn *weft_tp_socket_conn_get(struct weft_sock_comm *sc, int peer)
{
	struct weft_sock_conn *c = sc->conns[peer];
	if (c)
		return c;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->base.ops = &weft_tp_socket_ops;
	c->base.tp = &sc->base;
	c->base.peer = peer;
	c->sc = sc;
	c->call_fd = -1;
	c->repath_fd = -1;
	c->probe = -1;
	for (unsigned i = 0; i < sc->nslots; i++)
		if (!slot_alloc(c, i)) {
			conn_free(c);
			return NULL;
		}
	if (weft_tp_socket_ack_init(c) != WEFT_SUCCESS) {
		conn_free(c);
		return NULL;
	}
	if (weft_sock_acking(sc)) /* the probe's slot waits until a probe needs it */
		c->sock[weft_sock_probe_slot(sc)].h.parked = true;
	sc->conns[peer] = c;
	return c;
}

/* The kernel's smoothed RTT of a connected socket, in us (0 unknown). */
static uint32_t tcp_rtt_us(const struct weft_sock_comm *sc, int fd)
{
	struct tcp_info ti;
	return fd >= 0 && sc->io->tcp_info(fd, &ti) == 0 ? ti.tcpi_rtt : 0;
}

/* The higher rank's side: up once its handshake, in the pending list, is done. */
static weft_status_t acceptor_step(struct weft_sock_conn *c, unsigned i)
{
	struct weft_sock *s = &c->sock[i];
	switch (s->phase) {
	case WEFT_SOCK_IDLE: return WEFT_INPROGRESS; /* the peer's socket has not arrived */
	case WEFT_SOCK_UP: return WEFT_SUCCESS;
	default: return c->failed ? c->failed : WEFT_ERR_INTERNAL;
	}
}

/* Both sides: the connection is up. */
static void conn_up(struct weft_sock_conn *c)
{
	struct weft_sock_comm *sc = c->sc;
	c->up = true;
	for (unsigned i = 0; i < sc->nslots; i++)
		if (c->sock[i].phase == WEFT_SOCK_UP)
			weft_tp_socket_slot_up(c, i);
	c->rtt_us = tcp_rtt_us(sc, c->sock[0].fd);
	weft_tp_socket_check_ecn(c);
	sc->active[sc->nactive++] = c;
	/* A call, made or answered, has done its work; the caller is told its
	 * sockets are through before the close (socket.h). */
	if (c->call_fd >= 0 && sc->base.env->rank < c->base.peer)
		(void)send(c->call_fd, &(char){WEFT_SOCK_CALL_ANSWER}, 1,
			   MSG_NOSIGNAL | MSG_DONTWAIT);
	close_fd(&c->call_fd);
	if (c->call_hs) {
		weft_hs_clear(c->call_hs);
		free(c->call_hs);
		c->call_hs = NULL;
	}
	char where[80];
	weft_log(WEFT_LOG_INFO, WEFT_SUB_NET,
		 "socket: connected to peer rank %d at %s (%u sockets%s)", c->base.peer,
		 addr_str(&sc->cards[c->base.peer].addr, where, sizeof(where)), sc->nsocks,
		 weft_sock_acking(sc) ? " and a control socket" : "");
}

weft_status_t weft_tp_socket_conn_step(struct weft_sock_conn *c)
{
	struct weft_sock_comm *sc = c->sc;
	const struct weft_tp_env *env = sc->base.env;
	bool connector = env->rank < c->base.peer, all = true, none = true;
	for (unsigned i = 0; i < sc->nslots; i++) {
		if (c->sock[i].h.parked)
			continue;
		weft_status_t st =
		    connector ? weft_tp_socket_connector_step(c, i) : acceptor_step(c, i);
		if (st < 0) {
			weft_tp_socket_conn_fail(c, st);
			return st;
		}
		all = all && st == WEFT_SUCCESS;
		none = none && c->sock[i].phase == WEFT_SOCK_IDLE;
	}
	if (all) {
		conn_up(c);
		return WEFT_SUCCESS;
	}
	/* Lazily the lower rank may have no reason to connect yet: ask it
	 * (and watch the call until its sockets arrive). */
	if (!connector && env->connect_lazy && (none || c->call != WEFT_SOCK_CALL_NONE))
		return weft_tp_socket_call_step(c);
	return WEFT_INPROGRESS;
}

static weft_status_t sock_connect(struct weft_tp *tp, int peer, struct weft_conn **out)
{
	struct weft_sock_comm *sc = to_sc(tp);
	const struct weft_tp_env *env = tp->env;
	*out = NULL;
	if (peer < 0 || peer >= env->nranks || peer == env->rank || sc->listen_fd < 0)
		return weft_tp_fail(env, WEFT_ERR_INTERNAL, "socket: connect to peer %d", peer);
	struct weft_sock_conn *c = weft_tp_socket_conn_get(sc, peer);
	if (!c)
		return weft_tp_fail(env, WEFT_ERR_NO_MEMORY, "socket: out of memory");
	if (c->failed)
		return c->failed;
	if (c->listed) /* lazily: progress moves it */
		return WEFT_INPROGRESS;
	if (!c->up) {
		weft_tp_socket_accept(sc);
		weft_status_t st = c->listed ? WEFT_INPROGRESS : weft_tp_socket_conn_step(c);
		if (st == WEFT_INPROGRESS && env->connect_lazy)
			weft_tp_socket_list_connecting(sc, c);
		if (st != WEFT_SUCCESS)
			return st;
	}
	*out = &c->base;
	return WEFT_SUCCESS;
}

/* Every peer is connected: without WEFT_REPATH nobody has a reason to
 * connect to this rank's listener any more, and a stranger that does
 * should find the port closed rather than a socket that accepts and reads
 * it. With it, a failed sub-flow's replacement comes here. */
static void sock_connected(struct weft_tp *tp)
{
	struct weft_sock_comm *sc = to_sc(tp);
	weft_tp_socket_door_close(sc, "still without a handshake when init ended");
	if (sc->listen_fd < 0)
		return;
	if (weft_sock_acking(sc)) {
		weft_log(WEFT_LOG_INFO, WEFT_SUB_NET,
			 "socket: every peer connected; the listener stays open for "
			 "replacement sockets (WEFT_REPATH=%s)",
			 weft_tp_socket_repath_name(sc->repath));
		return;
	}
	weft_log(WEFT_LOG_INFO, WEFT_SUB_NET, "socket: every peer connected; listener closed");
	/* shutdown first: a child forked since holds the socket too, and close
	 * alone would leave it listening (connections queued, never read). */
	shutdown(sc->listen_fd, SHUT_RDWR);
	close_fd(&sc->listen_fd);
}

static void sock_abort(struct weft_tp *tp)
{
	struct weft_sock_comm *sc = to_sc(tp);
	for (int r = 0; r < tp->env->nranks; r++)
		if (sc->conns[r])
			weft_tp_socket_conn_fail(sc->conns[r], WEFT_ERR_ABORTED);
	weft_tp_socket_door_close(sc, NULL);
	close_fd(&sc->listen_fd);
}

static void sock_fini(struct weft_tp *tp)
{
	if (!tp)
		return;
	struct weft_sock_comm *sc = to_sc(tp);
	if (sc->conns)
		weft_tp_socket_flush(sc);
	sock_abort(tp);
	for (int r = 0; sc->conns && r < tp->env->nranks; r++)
		if (sc->conns[r])
			conn_free(sc->conns[r]);
	weft_tp_pool_fini(&sc->reqs);
	free(sc->pending);
	free(sc->pending_pfd);
	free(sc->conns);
	free(sc->active);
	free(sc->connecting);
	free(sc->cards);
	free(sc);
}

/* The link speed the kernel reports for @p ifname (bytes/s), 0 unknown
 * (loopback and some virtual interfaces report none). */
static double link_speed(const char *ifname)
{
	if (!ifname)
		return 0;
	char path[128];
	snprintf(path, sizeof(path), "/sys/class/net/%s/speed", ifname);
	FILE *f = fopen(path, "r");
	long mbps = 0;
	if (f) {
		if (fscanf(f, "%ld", &mbps) != 1)
			mbps = 0;
		fclose(f);
	}
	return mbps > 0 ? (double)mbps * 1e6 / 8 : 0;
}

/* Defaults where nothing better is known: TCP over loopback on the
 * machines measured (docs/benchmarks.md, "What was measured"). */
#define SOCK_DEFAULT_LATENCY_S 10e-6
#define SOCK_DEFAULT_BPS       3e9

static void sock_props(struct weft_tp *tp, int peer, struct weft_tp_props *out)
{
	struct weft_sock_comm *sc = to_sc(tp);
	const struct weft_sock_conn *c = sc->conns[peer];
	double speed = link_speed(tp->env->ifname);
	bool rtt = c && c->rtt_us > 0;
	*out = (struct weft_tp_props){
	    /* The kernel's RTT of the handshake, one way; a loopback RTT is a
	     * few us, below what a message through the stack costs. */
	    .latency_s = rtt && c->rtt_us / 2 * 1e-6 > SOCK_DEFAULT_LATENCY_S
			     ? c->rtt_us / 2 * 1e-6
			     : SOCK_DEFAULT_LATENCY_S,
	    .bandwidth_Bps = speed > 0 ? speed : SOCK_DEFAULT_BPS,
	    .ordered = true,
	    .source = rtt || speed > 0 ? "measured" : "default",
	};
}

static void sock_describe(struct weft_tp *tp, int peer, char *buf, size_t len)
{
	struct weft_sock_comm *sc = to_sc(tp);
	char where[80];
	snprintf(buf, len, "socket(%s, %u streams, repath %s)",
		 addr_str(&sc->cards[peer].addr, where, sizeof(where)), sc->nsocks,
		 weft_tp_socket_repath_name(sc->repath));
}

static void sock_paths(struct weft_conn *conn, struct weft_tp_paths *out)
{
	const struct weft_sock_conn *c = weft_container_of(conn, struct weft_sock_conn, base);
	memset(out, 0, sizeof(*out));
	out->failovers = c->st.failovers;
	out->repaths = c->st.repaths;
	out->replaced = c->st.replaced;
	out->probes = c->st.probes;
	out->resent = c->st.resent;
	out->dups = c->st.dups;
	for (unsigned s = 0; s < c->sc->nslots; s++)
		out->dark += !c->sock[s].h.parked && c->sock[s].h.dark_since > 0;
	weft_tp_socket_dark_note(c, out->note, sizeof(out->note));
}

const struct weft_tp_ops weft_tp_socket_ops = {
    .size = sizeof(struct weft_tp_ops),
    .name = "socket",
    .settings = weft_tp_socket_settings,
    .nsettings = WEFT_TP_SOCKET_NSETTINGS,
    .life = {.init = sock_init, .fini = sock_fini, .abort = sock_abort},
    .conn = {.score = sock_score, .connect = sock_connect, .connected = sock_connected},
    .msg = {.isend = weft_tp_socket_isend,
	    .irecv = weft_tp_socket_irecv,
	    .progress = weft_tp_socket_progress},
    .mem = WEFT_TP_NO_MEM_OPS,
    .rma = WEFT_TP_NO_RMA_OPS,
    .prop = {.props = sock_props, .describe = sock_describe, .paths = sock_paths},
    .signal = {.signals = weft_tp_socket_signals, .pace = weft_tp_socket_pace},
    .wait = {.arm = weft_tp_socket_arm,
	     .settle = weft_tp_socket_settle,
	     .disarm = weft_tp_socket_disarm,
	     .wake = weft_tp_no_wake},
};
