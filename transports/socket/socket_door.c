/*
 * socket_door.c — the TCP transport's listener: what it accepts, the
 * handshakes under way (util/handshake.h), bounded by WEFT_MAX_PENDING and
 * WEFT_HANDSHAKE_TIMEOUT, and where an authenticated socket goes: its
 * connection's slot, or a lazy call (socket_lazy.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transports/socket/socket.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/netaddr.h"

static void close_fd(int *fd)
{
	if (*fd >= 0) {
		shutdown(*fd, SHUT_RDWR);
		close(*fd);
		*fd = -1;
	}
}

static bool would_block(int err)
{
	return err == EAGAIN || err == EWOULDBLOCK;
}

/* The first few strangers are named; a flood of them is counted. A
 * connection that simply closed during its handshake (a call its caller no
 * longer needed) is no stranger: it is dropped quietly. */
static void drop(struct weft_sock_comm *sc, int k, const char *why, bool quiet)
{
	struct weft_sock_pending *p = &sc->pending[k];
	if (quiet)
		weft_log(WEFT_LOG_INFO, WEFT_SUB_NET, "socket: a call closed by its caller (%s)",
			 why);
	else if (++sc->refused <= 3) {
		struct sockaddr_storage from = {0};
		socklen_t len = sizeof(from);
		char who[80] = "unknown";
		if (getpeername(p->hs.fd, (struct sockaddr *)&from, &len) == 0)
			weft_addr_str((const struct sockaddr *)&from, who, sizeof(who));
		weft_log(WEFT_LOG_WARN, WEFT_SUB_NET, "socket: dropped a connection from %s: %s%s",
			 who, why,
			 sc->refused == 3 ? " (further ones are counted, not logged)" : "");
	}
	weft_hs_clear(&p->hs);
	close_fd(&p->hs.fd);
	sc->pending[k] = sc->pending[--sc->npending];
}

static void pending_drop(struct weft_sock_comm *sc, int k, const char *why)
{
	drop(sc, k, why, false);
}

/* The connector says who it is: one of ours, for a slot it may take? */
static const char *hello_problem(struct weft_sock_comm *sc, const struct weft_hs_hello *h)
{
	const struct weft_tp_env *env = sc->base.env;
	struct weft_sock_hello sh;
	memcpy(&sh, h->payload, sizeof(sh));
	if (h->role != WEFT_HS_SOCKET && h->role != WEFT_HS_CALL)
		return "a handshake meant for another kind of listener";
	if (memcmp(h->id, env->id, WEFT_HS_ID_BYTES) != 0 || h->peer != env->rank)
		return "a handshake for another communicator or rank";
	bool repath = h->role == WEFT_HS_CALL && sh.nsocks == WEFT_SOCK_CALL_REPATH;
	if (repath ? sh.mask == 0 || sh.mask >> sc->nslots : sh.mask != 0)
		return "a request for new sockets in slots this connection does not have";
	if (h->role == WEFT_HS_CALL) {
		if (sh.nsocks != sc->nsocks && !repath)
			return "the socket count does not match";
		return h->rank > env->rank && h->rank < env->nranks
			   ? NULL
			   : "a call from a rank out of range (only higher ranks call)";
	}
	if (sh.nsocks != sc->nsocks)
		return "the socket count does not match";
	if (h->rank < 0 || h->rank >= env->rank)
		return "rank out of range (only lower ranks connect)";
	if (sh.index >= sc->nslots)
		return "socket index out of range";
	if (sh.gen == 0)
		return "socket generation out of range";
	return NULL;
}

/* Install the authenticated socket @p fd in slot @p s of @p c, generation
 * @p gen: a replacement fails over the socket it replaces, if this side
 * still had it. */
static void install(struct weft_sock_comm *sc, struct weft_sock_conn *c, unsigned s, int fd,
		    uint32_t gen)
{
	struct weft_sock *sk = &c->sock[s];
	bool later = c->up;
	if (sk->phase == WEFT_SOCK_UP) { /* the peer saw it fail before this side did */
		unsigned frames = weft_tp_socket_retire(c, s);
		char name[32];
		weft_log(WEFT_LOG_INFO, WEFT_SUB_NET,
			 "socket: peer rank %d replaced %s; %u frame%s sent again", c->base.peer,
			 weft_sock_slot_name(sc, s, name, sizeof(name)), frames,
			 frames == 1 ? "" : "s");
		if (!sk->h.dark_since) {
			sk->h.dark_since = weft_now();
			sk->h.old_port = sk->port;
		}
	}
	weft_tp_socket_close_fd(c, s);
	sk->fd = fd;
	sk->gen = gen;
	weft_tp_socket_tune(sc, fd);
	sk->phase = WEFT_SOCK_UP;
	if (later) /* at init, the connection coming up starts every slot */
		weft_tp_socket_slot_up(c, s);
}

/* Route an authenticated socket; false with *why set if it has no place. */
static bool pending_route(struct weft_sock_comm *sc, struct weft_sock_pending *p, const char **why)
{
	const struct weft_hs_hello *h = &p->hs.hello;
	const struct weft_tp_env *env = sc->base.env;
	struct weft_sock_hello sh;
	memcpy(&sh, h->payload, sizeof(sh));
	if (h->role == WEFT_HS_CALL)
		return weft_tp_socket_route_call(sc, p->hs.fd, h->rank, &sh, why);
	struct weft_sock_conn *c = weft_tp_socket_conn_get(sc, h->rank);
	if (!c)
		return *why = "out of memory", false;
	struct weft_sock *sk = &c->sock[sh.index];
	if (c->failed)
		return *why = "a socket for a connection that failed", false;
	if ((sk->phase != WEFT_SOCK_IDLE || sk->gen > sh.gen) && sh.gen <= sk->gen)
		return *why = "duplicate socket for a rank and index", false;
	if (c->up && !weft_sock_acking(sc))
		return *why = "a new socket for a connection that is up", false;
	install(sc, c, sh.index, p->hs.fd, sh.gen);
	/* Lazily this rank may have nothing for the peer yet: progress brings
	 * the connection up, so the connector is not kept waiting. */
	if (env->connect_lazy && !c->up)
		weft_tp_socket_list_connecting(sc, c);
	return true;
}

static void accept_new(struct weft_sock_comm *sc)
{
	for (;;) {
		int fd = sc->io->accept4(sc->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (!would_block(errno))
				weft_log(WEFT_LOG_WARN, WEFT_SUB_NET, "socket: accept: %s",
					 strerror(errno));
			return;
		}
		if (sc->npending == sc->max_pending) {
			int victim = -1;
			for (int k = 0; k < sc->npending; k++)
				if (weft_hs_droppable(&sc->pending[k].hs) &&
				    (victim < 0 ||
				     weft_hs_drop_first(&sc->pending[k].hs, sc->pending[k].since,
							&sc->pending[victim].hs,
							sc->pending[victim].since)))
					victim = k;
			if (victim < 0) { /* all being welcomed: this one waits */
				close(fd);
				continue;
			}
			pending_drop(sc, victim,
				     "WEFT_MAX_PENDING connections were in their "
				     "handshake");
		}
		struct weft_sock_pending *p = &sc->pending[sc->npending++];
		weft_hs_accept(&p->hs, fd);
		p->since = weft_now();
	}
}

/* Move pending handshake @p k along; true if it left the list. */
static bool pending_step(struct weft_sock_comm *sc, int k)
{
	struct weft_sock_pending *p = &sc->pending[k];
	struct weft_err err = {0};
	const char *why = NULL;
	for (;;) {
		switch (weft_hs_step(&p->hs)) {
		case WEFT_HS_AGAIN: return false;
		case WEFT_HS_HELLO:
			why = hello_problem(sc, &p->hs.hello);
			if (!why && weft_hs_answer(&p->hs, sc->base.env->key, sc->base.env->rank,
						   NULL, 0, &err) != WEFT_SUCCESS)
				why = "out of random bytes";
			if (why) {
				pending_drop(sc, k, why);
				return true;
			}
			continue;
		case WEFT_HS_OK:
			if (pending_route(sc, p, &why)) {
				sc->pending[k] = sc->pending[--sc->npending];
			} else {
				pending_drop(sc, k, why);
			}
			return true;
		case WEFT_HS_IO_ERROR:
			/* a call that closed, perhaps while being welcomed: its
			 * caller's connection came up */
			drop(sc, k, p->hs.why,
			     (p->hs.errnum == 0 || p->hs.errnum == EPIPE ||
			      p->hs.errnum == ECONNRESET) &&
				 p->hs.hello.role == WEFT_HS_CALL &&
				 p->hs.phase == WEFT_HS_FAILED &&
				 p->hs.hello.magic == WEFT_HS_MAGIC);
			return true;
		default: pending_drop(sc, k, p->hs.why); return true;
		}
	}
}

/* Handshakes under way: stepped only where the socket is ready (one poll
 * for them all), so that strangers cost a poll entry each, not a recv per
 * progress call; dropped past WEFT_HANDSHAKE_TIMEOUT. */
static void pending_progress(struct weft_sock_comm *sc)
{
	struct pollfd *pfd = sc->pending_pfd;
	double now = weft_now();
	for (int k = sc->npending - 1; k >= 0; k--)
		if (now - sc->pending[k].since > sc->hs_timeout_s)
			pending_drop(sc, k, "no handshake within WEFT_HANDSHAKE_TIMEOUT");
	int n = sc->npending;
	for (int k = 0; k < n; k++)
		pfd[k] = (struct pollfd){.fd = sc->pending[k].hs.fd,
					 .events = weft_hs_events(&sc->pending[k].hs)};
	if (n == 0 || poll(pfd, (nfds_t)n, 0) <= 0)
		return;
	for (int k = n - 1; k >= 0; k--)
		if (pfd[k].revents)
			pending_step(sc, k);
}

void weft_tp_socket_accept(struct weft_sock_comm *sc)
{
	accept_new(sc);
	pending_progress(sc);
}

void weft_tp_socket_door_close(struct weft_sock_comm *sc, const char *why)
{
	while (sc->npending > 0) {
		if (why)
			pending_drop(sc, sc->npending - 1, why);
		else {
			weft_hs_clear(&sc->pending[sc->npending - 1].hs);
			close_fd(&sc->pending[--sc->npending].hs.fd);
		}
	}
}
