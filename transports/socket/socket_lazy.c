/*
 * socket_lazy.c — the TCP transport's connections made during the job
 * (WEFT_CONNECT=lazy, env->connect_lazy): the higher rank's call to the
 * lower, the lower rank's answer, and the progress that moves connections
 * under way while the job runs.
 *
 * The lower rank of a pair always connects (socket.h), so two ranks that
 * start at once (A sends to B while B sends to A) still make one
 * connection. When the higher rank needs the pair first, it calls: it
 * connects a socket to the lower rank's listener and runs the handshake
 * with role WEFT_HS_CALL (util/handshake.h: each side proves the key); the
 * lower rank, once it has, starts its connector as if it had a message for
 * the caller.
 * A call that meets a connection already under way changes nothing.
 *
 * The call's socket stays open on both sides until the connection is up,
 * and the caller watches it: a peer that is gone refuses the call, one that
 * dies meanwhile resets it, so the caller fails at once naming the peer
 * instead of waiting for WEFT_TIMEOUT. A connection still not up after
 * WEFT_TIMEOUT fails naming the peer (a host that does not answer).
 *
 * The listener stays open for the whole job. Progress looks at it on every
 * call while one of this rank's own connections is under way, and
 * otherwise every SOCK_IDLE_POLLS calls (strangers in their handshake
 * included: one poll over them all then), so an idle job pays one
 * accept4() per that many polls, however many strangers knock. Whatever
 * arrives is routed as at init: a socket that fails the handshake is
 * dropped.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transports/socket/socket.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/netaddr.h"

#define SOCK_IDLE_POLLS 64

void weft_tp_socket_list_connecting(struct weft_sock_comm *sc, struct weft_sock_conn *c)
{
	if (c->listed || c->up)
		return;
	c->listed = true;
	if (c->since == 0)
		c->since = weft_now();
	sc->connecting[sc->nconnecting++] = c;
}

/* The call could not be made or was closed before the connection was up:
 * the peer is gone (or closed its communicator). */
static weft_status_t call_failed(struct weft_sock_conn *c, int err)
{
	const struct weft_tp_env *env = c->sc->base.env;
	int peer = c->base.peer;
	char where[80];
	weft_addr_str((const struct sockaddr *)&c->sc->cards[peer].addr, where, sizeof(where));
	weft_status_t st;
	if (err == 0 || err == ECONNRESET || err == ECONNREFUSED || err == EPIPE)
		st = weft_tp_fail(env, WEFT_ERR_REMOTE,
				  "socket: peer rank %d (%s, listening at %s) %s while this rank "
				  "was connecting to it",
				  peer, env->peers[peer].hostname, where,
				  err == ECONNREFUSED ? "refused the connection (is it gone?)"
				  : err == 0	      ? "closed the call"
						      : "reset the call");
	else
		st =
		    weft_tp_fail_errno(env, err, "socket: calling peer rank %d at %s", peer, where);
	weft_tp_socket_conn_fail(c, st);
	return st;
}

/* The caller's handshake with the lower rank's listener; a call the
 * listener dropped before its challenge (a flood) is made again. */
static weft_status_t call_handshake(struct weft_sock_conn *c)
{
	const struct weft_tp_env *env = c->sc->base.env;
	switch (weft_hs_step(c->call_hs)) {
	case WEFT_HS_AGAIN: return WEFT_INPROGRESS;
	case WEFT_HS_OK:
		weft_hs_clear(c->call_hs);
		free(c->call_hs);
		c->call_hs = NULL;
		c->call = WEFT_SOCK_CALL_SENT;
		weft_log(WEFT_LOG_INFO, WEFT_SUB_NET, "socket: asked peer rank %d to connect",
			 c->base.peer);
		return WEFT_INPROGRESS;
	case WEFT_HS_REFUSED: {
		char where[80];
		weft_addr_str((const struct sockaddr *)&c->sc->cards[c->base.peer].addr, where,
			      sizeof(where));
		weft_status_t st =
		    weft_tp_fail(env, WEFT_ERR_REMOTE,
				 "socket: %s, the address of peer rank %d, %s (calling it)", where,
				 c->base.peer, c->call_hs->why);
		free(c->call_hs);
		c->call_hs = NULL;
		weft_tp_socket_conn_fail(c, st);
		return st;
	}
	default: {
		int err = c->call_hs->errnum;
		weft_hs_clear(c->call_hs);
		free(c->call_hs);
		c->call_hs = NULL;
		if ((err == 0 || err == ECONNRESET) && c->call_retries++ < WEFT_SOCK_RETRIES) {
			close(c->call_fd);
			c->call_fd = -1;
			c->call = WEFT_SOCK_CALL_NONE;
			return WEFT_INPROGRESS;
		}
		return call_failed(c, err);
	}
	}
}

/* The higher rank's side while its sockets have not arrived: call the lower
 * rank, then watch the call. WEFT_INPROGRESS until the peer connects. */
weft_status_t weft_tp_socket_call_step(struct weft_sock_conn *c)
{
	struct weft_sock_comm *sc = c->sc;
	const struct weft_sock_card *card = &sc->cards[c->base.peer];
	int err = 0;
	switch (c->call) {
	case WEFT_SOCK_CALL_NONE:
		c->call_fd =
		    socket(card->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (c->call_fd < 0)
			return call_failed(c, errno);
		if (connect(c->call_fd, (const struct sockaddr *)&card->addr, card->addr_len) !=
			0 &&
		    errno != EINPROGRESS)
			return call_failed(c, errno);
		c->call = WEFT_SOCK_CALL_CONNECTING;
		/* fall through */
	case WEFT_SOCK_CALL_CONNECTING: {
		struct pollfd p = {.fd = c->call_fd, .events = POLLOUT};
		if (poll(&p, 1, 0) <= 0)
			return WEFT_INPROGRESS;
		socklen_t len = sizeof(err);
		if (getsockopt(c->call_fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
			err = errno;
		if (err != 0)
			return call_failed(c, err);
		struct weft_sock_hello h = {.nsocks = sc->nsocks};
		c->call_hs = weft_tp_socket_hs_start(sc, c->call_fd, c->base.peer, true, &h);
		if (!c->call_hs)
			return WEFT_ERR_NO_MEMORY;
		c->call = WEFT_SOCK_CALL_HANDSHAKE;
	}
		/* fall through */
	case WEFT_SOCK_CALL_HANDSHAKE: return call_handshake(c);
	case WEFT_SOCK_CALL_SENT: {
		char b;
		ssize_t n = recv(c->call_fd, &b, 1, MSG_DONTWAIT);
		if (n == 1 && b == WEFT_SOCK_CALL_ANSWER) { /* its sockets are on their way */
			close(c->call_fd);
			c->call_fd = -1;
			c->call = WEFT_SOCK_CALL_ANSWERED;
			return WEFT_INPROGRESS;
		}
		if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			return call_failed(c, n < 0 ? errno : 0);
		return WEFT_INPROGRESS;
	}
	case WEFT_SOCK_CALL_ANSWERED: return WEFT_INPROGRESS;
	}
	return WEFT_ERR_INTERNAL;
}

/* A re-path call: the higher rank sees every path to this rank dark, and
 * asks for new sockets in the slots of hello->mask. */
static bool route_repath(struct weft_sock_comm *sc, int fd, int rank,
			 const struct weft_sock_hello *hello, const char **why)
{
	struct weft_sock_conn *c = sc->conns[rank];
	if (!weft_sock_acking(sc) || !c || !c->up || c->failed)
		return *why = "a call for new sockets, but no connection has failed over", false;
	weft_log(WEFT_LOG_INFO, WEFT_SUB_NET,
		 "socket: peer rank %d asked for new sockets (every path dark on its side)", rank);
	for (unsigned s = 0; s < sc->nslots; s++)
		if ((hello->mask >> s & 1) && c->sock[s].phase == WEFT_SOCK_UP)
			weft_tp_socket_failover(c, s, "the peer's every path to it is dark");
	close(fd);
	return true;
}

/* An authenticated call on socket @p fd of the listener: the higher rank
 * @p rank asks this rank to connect. True if taken (the connection owns
 * @p fd), false with *why if not. */
bool weft_tp_socket_route_call(struct weft_sock_comm *sc, int fd, int rank,
			       const struct weft_sock_hello *hello, const char **why)
{
	const struct weft_tp_env *env = sc->base.env;
	if (hello->nsocks == WEFT_SOCK_CALL_REPATH)
		return route_repath(sc, fd, rank, hello, why);
	if (!env->connect_lazy)
		return *why = "a call for a connection, but this job connects at init", false;
	struct weft_sock_conn *c = weft_tp_socket_conn_get(sc, rank);
	if (!c)
		return *why = "out of memory", false;
	if (c->call_fd >= 0)
		return *why = "a second call from the same rank", false;
	if (c->failed || c->up) { /* it came up (or failed) before we read the call */
		if (c->up)
			(void)send(fd, &(char){WEFT_SOCK_CALL_ANSWER}, 1,
				   MSG_NOSIGNAL | MSG_DONTWAIT);
		close(fd);
		return true;
	}
	c->call_fd = fd;
	weft_log(WEFT_LOG_INFO, WEFT_SUB_NET, "socket: peer rank %d asked for a connection", rank);
	weft_tp_socket_list_connecting(sc, c);
	return true;
}

/* The re-path call could not be made: a refusal means the peer is gone. */
static weft_status_t repath_failed(struct weft_sock_conn *c, int err)
{
	if (c->repath_hs) {
		weft_hs_clear(c->repath_hs);
		free(c->repath_hs);
		c->repath_hs = NULL;
	}
	if (c->repath_fd >= 0) {
		c->sc->io->close(c->repath_fd);
		c->repath_fd = -1;
	}
	if (err != ECONNREFUSED)
		return WEFT_SUCCESS; /* another port, later */
	char where[80];
	weft_addr_str((const struct sockaddr *)&c->sc->cards[c->base.peer].addr, where,
		      sizeof(where));
	weft_status_t st =
	    weft_tp_fail(c->sc->base.env, WEFT_ERR_REMOTE,
			 "peer rank %d closed the connection (every socket to it failed, and a new "
			 "connection to its listener at %s was refused: is it gone?)",
			 c->base.peer, where);
	weft_tp_socket_conn_fail(c, WEFT_ERR_REMOTE);
	return st;
}

weft_status_t weft_tp_socket_repath_call(struct weft_sock_conn *c)
{
	struct weft_sock_comm *sc = c->sc;
	const struct weft_sock_card *card = &sc->cards[c->base.peer];
	double limit = sc->stall_s > 0.1 ? sc->stall_s : 0.1;
	if (c->repath_fd < 0) {
		c->repath_fd = sc->io->socket(card->addr.ss_family,
					      SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (c->repath_fd < 0)
			return WEFT_SUCCESS; /* out of descriptors: tried again later */
		c->repath_since = weft_now();
		c->repath_calls++;
		if (sc->io->connect(c->repath_fd, (const struct sockaddr *)&card->addr,
				    card->addr_len) != 0 &&
		    errno != EINPROGRESS)
			return repath_failed(c, errno);
	}
	if (!c->repath_hs) {
		struct pollfd p = {.fd = c->repath_fd, .events = POLLOUT};
		if (poll(&p, 1, 0) <= 0)
			return weft_now() - c->repath_since > limit ? repath_failed(c, 0)
								    : WEFT_SUCCESS;
		int err = 0;
		socklen_t len = sizeof(err);
		if (getsockopt(c->repath_fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
			err = errno;
		if (err != 0)
			return repath_failed(c, err);
		struct weft_sock_hello h = {.nsocks = WEFT_SOCK_CALL_REPATH,
					    .mask = c->repath_mask};
		c->repath_hs = weft_tp_socket_hs_start(sc, c->repath_fd, c->base.peer, true, &h);
		if (!c->repath_hs)
			return WEFT_ERR_NO_MEMORY;
	}
	switch (weft_hs_step(c->repath_hs)) {
	case WEFT_HS_AGAIN:
		return weft_now() - c->repath_since > limit ? repath_failed(c, 0) : WEFT_SUCCESS;
	case WEFT_HS_OK:
		c->repath_mask = 0; /* the connector replaces them */
		return repath_failed(c, 0);
	default: return repath_failed(c, 0);
	}
}

static weft_status_t setup_timeout(struct weft_sock_conn *c)
{
	const struct weft_tp_env *env = c->sc->base.env;
	int peer = c->base.peer;
	weft_status_t st = weft_tp_fail(
	    env, WEFT_ERR_TIMEOUT, "socket: no connection with peer rank %d (%s) within %.1f s",
	    peer, env->peers[peer].hostname, env->timeout_s);
	weft_tp_socket_conn_fail(c, st);
	return st;
}

weft_status_t weft_tp_socket_setup_progress(struct weft_sock_comm *sc)
{
	if (sc->listen_fd < 0)
		return WEFT_SUCCESS;
	if (!sc->nconnecting && ++sc->idle_polls < SOCK_IDLE_POLLS)
		return WEFT_SUCCESS;
	sc->idle_polls = 0;
	weft_tp_socket_accept(sc);
	double now = sc->nconnecting ? weft_now() : 0;
	weft_status_t ret = WEFT_SUCCESS;
	for (int k = sc->nconnecting - 1; k >= 0; k--) {
		struct weft_sock_conn *c = sc->connecting[k];
		weft_status_t st = c->failed ? c->failed : weft_tp_socket_conn_step(c);
		if (st == WEFT_INPROGRESS && now - c->since > sc->base.env->timeout_s)
			st = setup_timeout(c);
		if (st == WEFT_INPROGRESS)
			continue;
		c->listed = false;
		sc->connecting[k] = sc->connecting[--sc->nconnecting];
		if (st != WEFT_SUCCESS && ret == WEFT_SUCCESS)
			ret = st;
	}
	return ret;
}
