/*
 * socket_conn.c — the TCP transport's setup and teardown: settings, the
 * listener, the hello handshake that routes accepted sockets to their peer,
 * non-blocking connect, abort, and the ops table. The data path (framing,
 * striping, progress) is in socket_data.c; the wire format is described in
 * socket.h.
 *
 * Who connects: for each pair the lower rank opens nsocks connections to the
 * higher rank's listener. The higher rank accepts from its one listener
 * whatever arrives, runs the handshake on each socket (util/handshake.h)
 * and routes it by (rank, index); a socket that fails it, or claims a slot
 * that is taken, is closed (the first few with a warning) and the job goes
 * on. Connecting lazily, the same happens during the job, and the
 * higher rank calls the lower one when it needs the pair first
 * (socket_lazy.c).
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

#define SOCK_CARD_MAGIC 0x57454654534f4b43ull /* "WEFTSOKC" */
/* Reduce receives land in a bounce buffer this big (per socket) before they
 * are combined: small enough to stay in L2 between the copy out of the
 * kernel and the reduction that reads it. */
#define SOCK_BOUNCE_MAX		(256u << 10)
#define SOCK_MIN_CHUNK		4096u
#define SOCK_SPRAY_ENGINE_CHUNK (512u << 10)

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

/* WEFT_SPRAY, and the fragment size: 512K, or 64K when spraying, so that
 * one engine chunk still spreads over the sockets. */
static weft_status_t read_spray(struct weft_sock_comm *sc, long *chunk)
{
	const struct weft_tp_env *env = sc->base.env;
	weft_status_t st = weft_tp_read_spray(env, "socket", &sc->spray);
	if (st != WEFT_SUCCESS)
		return st;
	const char *set = weft_setting_str("WEFT_SOCKET_CHUNK");
	*chunk = sc->spray == WEFT_SPRAY_ADAPTIVE ? 64L << 10 : 512L << 10;
	if (set && (!weft_setting_long("WEFT_SOCKET_CHUNK", chunk) ||
		    *chunk < (long)SOCK_MIN_CHUNK || *chunk > (1L << 30)))
		return weft_tp_fail(env, WEFT_ERR_INVALID_ARG,
				    "WEFT_SOCKET_CHUNK=%s: expected a size from 4K to 1G", set);
	return WEFT_SUCCESS;
}

static weft_status_t read_settings(struct weft_sock_comm *sc)
{
	const struct weft_tp_env *env = sc->base.env;
	long nsocks = 0, chunk = 0;
	if (!weft_setting_long("WEFT_SOCKET_NSOCKS", &nsocks) || nsocks < 1 ||
	    nsocks > WEFT_SOCK_MAX_NSOCKS)
		return weft_tp_fail(env, WEFT_ERR_INVALID_ARG,
				    "WEFT_SOCKET_NSOCKS=%s: expected an integer from 1 to %d",
				    weft_setting_str("WEFT_SOCKET_NSOCKS"), WEFT_SOCK_MAX_NSOCKS);
	weft_status_t st = read_spray(sc, &chunk);
	if (st != WEFT_SUCCESS)
		return st;
	sc->nsocks = (unsigned)nsocks;
	/* A multiple of 4 KiB keeps every fragment a whole number of elements,
	 * so a reduce receive never has an element split across two sockets. */
	sc->chunk = (size_t)chunk & ~(size_t)(SOCK_MIN_CHUNK - 1);
	sc->bounce_bytes = sc->chunk < SOCK_BOUNCE_MAX ? sc->chunk : SOCK_BOUNCE_MAX;
	/* The engine's chunk: sprayed, several fragments, so that one chunk
	 * already spreads over the sockets. */
	sc->base.chunk_bytes =
	    sc->spray == WEFT_SPRAY_ADAPTIVE && sc->chunk < SOCK_SPRAY_ENGINE_CHUNK
		? SOCK_SPRAY_ENGINE_CHUNK
		: sc->chunk;
	return weft_tp_socket_read_pacing(sc);
}

static weft_status_t open_listener(struct weft_sock_comm *sc, struct weft_sock_card *card)
{
	const struct weft_tp_env *env = sc->base.env;
	weft_status_t st = read_settings(sc);
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
	weft_log(WEFT_LOG_INFO, WEFT_SUB_NET,
		 "socket: listening on %s, %u sockets per peer, chunk %zu, spray %s",
		 addr_str(&card->addr, where, sizeof(where)), sc->nsocks, sc->chunk,
		 sc->spray == WEFT_SPRAY_ADAPTIVE ? "adaptive" : "rr");
	return WEFT_SUCCESS;
}

/* After the allgather: every rank must have a listener and the same
 * striping parameters, or the two ends of a pair would cut messages
 * differently. */
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
		if (c->nsocks != me->nsocks || c->chunk != me->chunk || c->spray != me->spray)
			return weft_tp_fail(
			    env, WEFT_ERR_INVALID_ARG,
			    "socket: WEFT_SOCKET_NSOCKS/WEFT_SOCKET_CHUNK/WEFT_SPRAY differ "
			    "between ranks: rank %d has %u/%llu/%s, rank %d has %u/%llu/%s",
			    env->rank, me->nsocks, (unsigned long long)me->chunk,
			    me->spray ? "adaptive" : "rr", r, c->nsocks,
			    (unsigned long long)c->chunk, c->spray ? "adaptive" : "rr");
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
	for (unsigned i = 0; i < sc->nsocks; i++) {
		c->sock[i].fd = -1;
		/* Pre-faulted now so the first reduce receive pays no page faults. */
		c->sock[i].bounce.buf = malloc(sc->bounce_bytes);
		c->sock[i].bounce.cap = sc->bounce_bytes;
		if (!c->sock[i].bounce.buf) {
			for (unsigned j = 0; j < i; j++)
				free(c->sock[j].bounce.buf);
			free(c);
			return NULL;
		}
		memset(c->sock[i].bounce.buf, 0, sc->bounce_bytes);
	}
	sc->conns[peer] = c;
	return c;
}

struct weft_hs *weft_tp_socket_hs_start(struct weft_sock_comm *sc, int fd, int peer, bool call,
					unsigned index)
{
	const struct weft_tp_env *env = sc->base.env;
	struct weft_sock_hello h = {.index = index, .nsocks = sc->nsocks};
	struct weft_hs *hs = malloc(sizeof(*hs));
	struct weft_err err = {0};
	if (hs && weft_hs_connect(hs, fd, env->key, call ? WEFT_HS_CALL : WEFT_HS_SOCKET, env->id,
				  env->rank, peer, &h, sizeof(h), &err) != WEFT_SUCCESS) {
		weft_tp_fail(env, err.status, "socket: %s", err.msg);
		free(hs);
		return NULL;
	}
	if (!hs)
		weft_tp_fail(env, WEFT_ERR_NO_MEMORY, "socket: out of memory");
	return hs;
}

/* The kernel's smoothed RTT of a connected socket, in us (0 unknown). */
static uint32_t tcp_rtt_us(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	memset(&ti, 0, sizeof(ti));
	return fd >= 0 && getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 ? ti.tcpi_rtt : 0;
}

void weft_tp_socket_nodelay(int fd)
{
	int one = 1;
	/* Best effort: without it small messages wait for Nagle, not fail. */
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)
		weft_log(WEFT_LOG_WARN, WEFT_SUB_NET, "socket: TCP_NODELAY: %s", strerror(errno));
}

static void hs_end(struct weft_hs **hs)
{
	if (*hs) {
		weft_hs_clear(*hs);
		free(*hs);
		*hs = NULL;
	}
}

static weft_status_t hello_failed(struct weft_sock_conn *c, unsigned i, int err, const char *what)
{
	const struct weft_tp_env *env = c->sc->base.env;
	weft_status_t st =
	    err == 0
		? weft_tp_fail(env, WEFT_ERR_REMOTE,
			       "socket: peer rank %d closed the connection during the handshake "
			       "(socket %u, %s)",
			       c->base.peer, i, what)
		: weft_tp_fail_errno(env, err,
				     "socket: handshake with peer rank %d (socket %u, %s)",
				     c->base.peer, i, what);
	weft_tp_socket_conn_fail(c, err == 0 ? WEFT_ERR_REMOTE : st);
	return st;
}

/* The connector's handshake on socket i, once connected. A listener under
 * a flood drops its oldest handshakes: a connection it closed before its
 * challenge is made again, up to WEFT_SOCK_RETRIES times. */
static weft_status_t connector_handshake(struct weft_sock_conn *c, unsigned i)
{
	struct weft_sock_comm *sc = c->sc;
	const struct weft_tp_env *env = sc->base.env;
	struct weft_sock *s = &c->sock[i];
	char where[80];
	switch (weft_hs_step(s->hs)) {
	case WEFT_HS_AGAIN: return WEFT_INPROGRESS;
	case WEFT_HS_OK:
		hs_end(&s->hs);
		s->phase = WEFT_SOCK_UP;
		return WEFT_SUCCESS;
	case WEFT_HS_REFUSED: {
		const char *why = s->hs->why;
		hs_end(&s->hs);
		weft_tp_socket_conn_fail(c, WEFT_ERR_REMOTE);
		return weft_tp_fail(env, WEFT_ERR_REMOTE,
				    "socket: %s, the address of peer rank %d, %s (socket %u)",
				    addr_str(&sc->cards[c->base.peer].addr, where, sizeof(where)),
				    c->base.peer, why, i);
	}
	default: {
		int err = s->hs->errnum;
		const char *what = s->hs->why;
		hs_end(&s->hs);
		if ((err == 0 || err == ECONNRESET || err == EPIPE) &&
		    s->retries++ < WEFT_SOCK_RETRIES) {
			close_fd(&s->fd);
			s->phase = WEFT_SOCK_IDLE; /* knock again */
			return WEFT_INPROGRESS;
		}
		return hello_failed(c, i, err, what);
	}
	}
}

/* The lower rank's side of socket i: connect, then the handshake. */
static weft_status_t connector_step(struct weft_sock_conn *c, unsigned i)
{
	struct weft_sock_comm *sc = c->sc;
	const struct weft_tp_env *env = sc->base.env;
	struct weft_sock *s = &c->sock[i];
	const struct weft_sock_card *card = &sc->cards[c->base.peer];
	const struct sockaddr_storage *addr = &card->addr;
	char where[80];
	int err = 0;

	switch (s->phase) {
	case WEFT_SOCK_IDLE:
		s->fd = socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (s->fd < 0)
			return weft_tp_fail_errno(env, errno,
						  "socket: creating socket %u to peer rank %d", i,
						  c->base.peer);
		weft_tp_socket_nodelay(s->fd);
		weft_tp_socket_tune(sc, s->fd);
		if (connect(s->fd, (const struct sockaddr *)addr, card->addr_len) != 0 &&
		    errno != EINPROGRESS) {
			err = errno;
			close_fd(&s->fd);
			return weft_tp_fail_errno(
			    env, err, "socket: connecting to peer rank %d at %s", c->base.peer,
			    addr_str(addr, where, sizeof(where)));
		}
		s->phase = WEFT_SOCK_CONNECTING;
		/* fall through */
	case WEFT_SOCK_CONNECTING: {
		struct pollfd p = {.fd = s->fd, .events = POLLOUT};
		if (poll(&p, 1, 0) <= 0)
			return WEFT_INPROGRESS;
		socklen_t len = sizeof(err);
		if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
			err = errno;
		if (err != 0) {
			close_fd(&s->fd);
			return weft_tp_fail_errno(
			    env, err, "socket: connecting to peer rank %d at %s", c->base.peer,
			    addr_str(addr, where, sizeof(where)));
		}
		s->hs = weft_tp_socket_hs_start(sc, s->fd, c->base.peer, false, i);
		if (!s->hs)
			return WEFT_ERR_NO_MEMORY;
		s->phase = WEFT_SOCK_HANDSHAKE;
	}
		/* fall through */
	case WEFT_SOCK_HANDSHAKE: return connector_handshake(c, i);
	case WEFT_SOCK_UP: return WEFT_SUCCESS;
	case WEFT_SOCK_CLOSED: break;
	}
	return c->failed ? c->failed : WEFT_ERR_INTERNAL;
}

void weft_tp_socket_forget_handshakes(struct weft_sock_conn *c)
{
	for (unsigned i = 0; i < c->sc->nsocks; i++)
		hs_end(&c->sock[i].hs);
	hs_end(&c->call_hs);
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
	c->rtt_us = tcp_rtt_us(c->sock[0].fd);
	weft_tp_socket_check_ecn(c);
	sc->active[sc->nactive++] = c;
	/* A call, made or answered, has done its work; the caller is told its
	 * sockets are through before the close (socket.h). */
	if (c->call_fd >= 0 && sc->base.env->rank < c->base.peer)
		(void)send(c->call_fd, &(char){WEFT_SOCK_CALL_ANSWER}, 1,
			   MSG_NOSIGNAL | MSG_DONTWAIT);
	close_fd(&c->call_fd);
	hs_end(&c->call_hs);
	char where[80];
	weft_log(WEFT_LOG_INFO, WEFT_SUB_NET,
		 "socket: connected to peer rank %d at %s (%u sockets)", c->base.peer,
		 addr_str(&sc->cards[c->base.peer].addr, where, sizeof(where)), sc->nsocks);
}

weft_status_t weft_tp_socket_conn_step(struct weft_sock_conn *c)
{
	struct weft_sock_comm *sc = c->sc;
	const struct weft_tp_env *env = sc->base.env;
	bool connector = env->rank < c->base.peer, all = true, none = true;
	for (unsigned i = 0; i < sc->nsocks; i++) {
		weft_status_t st = connector ? connector_step(c, i) : acceptor_step(c, i);
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

/* Every peer is connected: nobody has a reason to connect to this rank's
 * listener any more, and a stranger that does should find the port closed
 * rather than a socket that accepts and reads it. */
static void sock_connected(struct weft_tp *tp)
{
	struct weft_sock_comm *sc = to_sc(tp);
	weft_tp_socket_door_close(sc, "still without a handshake when init ended");
	if (sc->listen_fd < 0)
		return;
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
	for (int r = 0; r < tp->env->nranks; r++) {
		struct weft_sock_conn *c = sc->conns[r];
		for (unsigned i = 0; c && i < sc->nsocks; i++)
			hs_end(&c->sock[i].hs);
		if (c)
			hs_end(&c->call_hs);
	}
	close_fd(&sc->listen_fd);
}

static void sock_fini(struct weft_tp *tp)
{
	if (!tp)
		return;
	struct weft_sock_comm *sc = to_sc(tp);
	sock_abort(tp);
	for (int r = 0; sc->conns && r < tp->env->nranks; r++) {
		struct weft_sock_conn *c = sc->conns[r];
		if (!c)
			continue;
		for (unsigned i = 0; i < sc->nsocks; i++)
			free(c->sock[i].bounce.buf);
		free(c);
	}
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
	snprintf(buf, len, "socket(%s, %u streams)",
		 addr_str(&sc->cards[peer].addr, where, sizeof(where)), sc->nsocks);
}

static const struct weft_setting sock_settings[] = {
    {"WEFT_SOCKET_NSOCKS", "2", "TCP sockets (sub-flows) per peer, striped or sprayed"},
    {"WEFT_SOCKET_CHUNK", NULL,
     "bytes per fragment on a socket (default 512K; 64K with WEFT_SPRAY=adaptive)"},
    {"WEFT_SPRAY", "rr",
     "how fragments spread over a peer's sockets (and verbs' rendezvous pieces over its "
     "QPs): rr (round robin) or adaptive (by each path's drain rate: a socket takes the "
     "next fragment when the kernel has room, a QP by completion delay; a slower path "
     "carries less)"},
    {"WEFT_SOCKET_NOTSENT_LOWAT", NULL,
     "TCP_NOTSENT_LOWAT on every socket: unsent bytes the kernel may hold (default: 32K "
     "with WEFT_SPRAY=adaptive, 128K with WEFT_PACER on, else the kernel's; 0: the "
     "kernel's)"},
    {"WEFT_SOCKET_TOS", NULL,
     "IP TOS byte (DSCP << 2) on every socket, for the fabric's ECN-marked class; the ECN "
     "bits are the kernel's"},
};

const struct weft_tp_ops weft_tp_socket_ops = {
    .size = sizeof(struct weft_tp_ops),
    .name = "socket",
    .settings = sock_settings,
    .nsettings = sizeof(sock_settings) / sizeof(sock_settings[0]),
    .life = {.init = sock_init, .fini = sock_fini, .abort = sock_abort},
    .conn = {.score = sock_score, .connect = sock_connect, .connected = sock_connected},
    .msg = {.isend = weft_tp_socket_isend,
	    .irecv = weft_tp_socket_irecv,
	    .progress = weft_tp_socket_progress},
    .mem = WEFT_TP_NO_MEM_OPS,
    .rma = WEFT_TP_NO_RMA_OPS,
    .prop = {.props = sock_props, .describe = sock_describe},
    .signal = {.signals = weft_tp_socket_signals, .pace = weft_tp_socket_pace},
    .wait = {.arm = weft_tp_socket_arm,
	     .settle = weft_tp_socket_settle,
	     .disarm = weft_tp_socket_disarm,
	     .wake = weft_tp_no_wake},
};
