/*
 * socket_slot.c — the connector's side of one slot of a connection (the
 * lower rank connects): a non-blocking connect to the peer's listener, the
 * handshake (util/handshake.h, payload {slot, nsocks, generation}), and the
 * slot coming up. At init (connector_step, via weft_tp_socket_conn_step)
 * any failure fails the connection. Later (weft_tp_socket_slot_step), a
 * socket that replaces a failed one, or a probe, is tried again on a new
 * socket, so a new source port and a new ECMP path, until one gets
 * through: after a connect or handshake that takes longer than the stall
 * bound (a SYN lost on a dead path is retried by the kernel only after a
 * second), or fails; only a refusal ends it, since a listener that is gone
 * means the peer is gone.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "transports/socket/socket.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/netaddr.h"

/* A new socket's connect and handshake may take this long (or the stall
 * bound, if longer) before it is given up for another. */
#define SLOT_CONNECT_MIN_S 0.1

struct weft_hs *weft_tp_socket_hs_start(struct weft_sock_comm *sc, int fd, int peer, bool call,
					const struct weft_sock_hello *hello)
{
	const struct weft_tp_env *env = sc->base.env;
	struct weft_hs *hs = malloc(sizeof(*hs));
	struct weft_err err = {0};
	if (hs && weft_hs_connect(hs, fd, env->key, call ? WEFT_HS_CALL : WEFT_HS_SOCKET, env->id,
				  env->rank, peer, hello, sizeof(*hello), &err) != WEFT_SUCCESS) {
		weft_tp_fail(env, err.status, "socket: %s", err.msg);
		free(hs);
		return NULL;
	}
	if (!hs)
		weft_tp_fail(env, WEFT_ERR_NO_MEMORY, "socket: out of memory");
	return hs;
}

static void hs_end(struct weft_hs **hs)
{
	if (*hs) {
		weft_hs_clear(*hs);
		free(*hs);
		*hs = NULL;
	}
}

void weft_tp_socket_forget_handshakes(struct weft_sock_conn *c)
{
	for (unsigned i = 0; i < c->sc->nslots; i++)
		hs_end(&c->sock[i].hs);
	hs_end(&c->call_hs);
	hs_end(&c->repath_hs);
}

/* What went wrong, for a message: errno's text or the handshake's. */
struct slot_err {
	int err;	  /* errno, 0 for EOF or a refusal */
	bool refused;	  /* the handshake failed authentication */
	const char *what; /* the step, or the handshake's reason */
};

static const char *addr_of(const struct weft_sock_conn *c, char *buf, size_t len)
{
	return weft_addr_str((const struct sockaddr *)&c->sc->cards[c->base.peer].addr, buf, len);
}

/* Slot @p s from IDLE to UP, as far as it goes now: WEFT_SUCCESS (up),
 * WEFT_INPROGRESS, or WEFT_ERR_REMOTE with *e saying why. */
static weft_status_t advance(struct weft_sock_conn *c, unsigned s, struct slot_err *e)
{
	struct weft_sock_comm *sc = c->sc;
	struct weft_sock *sk = &c->sock[s];
	const struct weft_sock_card *card = &sc->cards[c->base.peer];
	switch (sk->phase) {
	case WEFT_SOCK_IDLE:
		sk->fd = sc->io->socket(card->addr.ss_family,
					SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (sk->fd < 0)
			return *e = (struct slot_err){errno, false, "creating a socket"},
			       WEFT_ERR_REMOTE;
		weft_tp_socket_tune(sc, sk->fd);
		sk->phase_since = weft_now();
		if (sc->io->connect(sk->fd, (const struct sockaddr *)&card->addr, card->addr_len) !=
			0 &&
		    errno != EINPROGRESS) {
			*e = (struct slot_err){errno, false, "connecting"};
			weft_tp_socket_close_fd(c, s);
			return WEFT_ERR_REMOTE;
		}
		sk->phase = WEFT_SOCK_CONNECTING;
		/* fall through */
	case WEFT_SOCK_CONNECTING: {
		struct pollfd p = {.fd = sk->fd, .events = POLLOUT};
		if (poll(&p, 1, 0) <= 0)
			return WEFT_INPROGRESS;
		int err = 0;
		socklen_t len = sizeof(err);
		if (getsockopt(sk->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
			err = errno;
		if (err != 0) {
			weft_tp_socket_close_fd(c, s);
			return *e = (struct slot_err){err, false, "connecting"}, WEFT_ERR_REMOTE;
		}
		struct weft_sock_hello h = {.index = s, .nsocks = sc->nsocks, .gen = sk->gen};
		sk->hs = weft_tp_socket_hs_start(sc, sk->fd, c->base.peer, false, &h);
		if (!sk->hs)
			return WEFT_ERR_NO_MEMORY;
		sk->phase = WEFT_SOCK_HANDSHAKE;
	}
		/* fall through */
	case WEFT_SOCK_HANDSHAKE:
		switch (weft_hs_step(sk->hs)) {
		case WEFT_HS_AGAIN: return WEFT_INPROGRESS;
		case WEFT_HS_OK:
			hs_end(&sk->hs);
			sk->phase = WEFT_SOCK_UP;
			return WEFT_SUCCESS;
		case WEFT_HS_REFUSED: *e = (struct slot_err){0, true, sk->hs->why}; break;
		default: *e = (struct slot_err){sk->hs->errnum, false, sk->hs->why}; break;
		}
		hs_end(&sk->hs);
		weft_tp_socket_close_fd(c, s);
		return WEFT_ERR_REMOTE;
	case WEFT_SOCK_UP: return WEFT_SUCCESS;
	default: break;
	}
	return c->failed ? c->failed : WEFT_ERR_INTERNAL;
}

/* Init: a failure fails the connection, with the message it always had. */
static weft_status_t init_failed(struct weft_sock_conn *c, unsigned s, const struct slot_err *e)
{
	const struct weft_tp_env *env = c->sc->base.env;
	char where[80];
	weft_status_t st;
	if (e->refused)
		st = weft_tp_fail(env, WEFT_ERR_REMOTE,
				  "socket: %s, the address of peer rank %d, %s (socket %u)",
				  addr_of(c, where, sizeof(where)), c->base.peer, e->what, s);
	else if (strcmp(e->what, "connecting") == 0 || strcmp(e->what, "creating a socket") == 0)
		st = weft_tp_fail_errno(env, e->err, "socket: %s to peer rank %d at %s", e->what,
					c->base.peer, addr_of(c, where, sizeof(where)));
	else if (e->err == 0)
		st = weft_tp_fail(env, WEFT_ERR_REMOTE,
				  "socket: peer rank %d closed the connection during the handshake "
				  "(socket %u, %s)",
				  c->base.peer, s, e->what);
	else
		st = weft_tp_fail_errno(env, e->err,
					"socket: handshake with peer rank %d (socket %u, %s)",
					c->base.peer, s, e->what);
	weft_tp_socket_conn_fail(c, e->err == 0 || e->refused ? WEFT_ERR_REMOTE : st);
	return st;
}

weft_status_t weft_tp_socket_connector_step(struct weft_sock_conn *c, unsigned s)
{
	struct weft_sock *sk = &c->sock[s];
	struct slot_err e = {0};
	weft_status_t st = advance(c, s, &e);
	if (st != WEFT_ERR_REMOTE)
		return st;
	/* A listener under a flood drops its oldest handshakes: a connection
	 * it closed before its challenge is made again. */
	if (!e.refused && (e.err == 0 || e.err == ECONNRESET || e.err == EPIPE) &&
	    strcmp(e.what, "connecting") != 0 && sk->retries++ < WEFT_SOCK_RETRIES) {
		sk->phase = WEFT_SOCK_IDLE;
		return WEFT_INPROGRESS;
	}
	return init_failed(c, s, &e);
}

/* A slot is up (at init or later): what its health and acknowledgements
 * count starts afresh with the socket. */
void weft_tp_socket_slot_up(struct weft_sock_conn *c, unsigned s)
{
	struct weft_sock *sk = &c->sock[s];
	struct tcp_info ti;
	double now = weft_now();
	sk->port = weft_tp_socket_port(sk->fd, c->sc->base.env->rank < c->base.peer);
	sk->rx.frames = 0;
	sk->tx.next_fseq = 1;
	sk->tx.bye = false;
	sk->eof = false;
	sk->seen = (struct tcp_counters){0}; /* the new socket's counters start at 0 */
	sk->h.acked = c->sc->io->tcp_info(sk->fd, &ti) == 0 ? ti.tcpi_bytes_acked : 0;
	sk->h.progress_at = now;
	sk->h.srtt_us = 0;
	sk->h.parked = sk->h.parked_pending = false;
	if (sk->h.dark_since > 0) {
		double since = sk->h.gone_at > 0 ? sk->h.gone_at : sk->h.dark_since;
		c->st.replaced++;
		char name[32];
		weft_log(WEFT_LOG_INFO, WEFT_SUB_NET,
			 "socket: peer rank %d, %s moved from port %u to port %u after %.3f s dark "
			 "(%u new socket%s tried)",
			 c->base.peer, weft_sock_slot_name(c->sc, s, name, sizeof(name)),
			 sk->h.old_port, sk->port, now - since, sk->h.tried,
			 sk->h.tried == 1 ? "" : "s");
	}
	sk->h.dark_since = sk->h.gone_at = 0;
	sk->h.tried = 0;
	weft_tp_socket_repath_up(c, s);
}

weft_status_t weft_tp_socket_slot_step(struct weft_sock_conn *c, unsigned s)
{
	struct weft_sock_comm *sc = c->sc;
	struct weft_sock *sk = &c->sock[s];
	struct slot_err e = {0};
	if (sk->phase == WEFT_SOCK_IDLE) {
		sk->h.tried++;
		sk->gen++; /* each socket tried is a generation: the acceptor takes the newest */
	}
	weft_status_t st = advance(c, s, &e);
	if (st == WEFT_SUCCESS) {
		weft_tp_socket_slot_up(c, s);
		return st;
	}
	if (st == WEFT_INPROGRESS) {
		double limit = sc->stall_s > SLOT_CONNECT_MIN_S ? sc->stall_s : SLOT_CONNECT_MIN_S;
		if (weft_now() - sk->phase_since < limit)
			return st;
		hs_end(&sk->hs); /* its path may be dark too: another port */
		weft_tp_socket_close_fd(c, s);
	} else if (st != WEFT_ERR_REMOTE) {
		return st;
	} else if (e.err == ECONNREFUSED || e.refused) { /* not our peer's listener now */
		char where[80];
		st = weft_tp_fail(sc->base.env, WEFT_ERR_REMOTE,
				  "peer rank %d closed the connection (socket %u; a new connection "
				  "to its listener at %s %s: is it gone?)",
				  c->base.peer, s, addr_of(c, where, sizeof(where)),
				  e.refused ? e.what : "was refused");
		weft_tp_socket_conn_fail(c, WEFT_ERR_REMOTE);
		return st;
	}
	sk->phase = WEFT_SOCK_IDLE;
	return WEFT_INPROGRESS;
}
