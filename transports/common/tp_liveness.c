/* tp_liveness.c — see tp_liveness.h. */
#define _GNU_SOURCE
#include "transports/common/tp_liveness.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/log.h"
#include "util/netaddr.h"

/* How often the listener's side runs, and how many connections it takes
 * each time, so that a flood costs the progress loop little. */
#define SERVE_PERIOD_S	 0.01
#define ACCEPTS_PER_TURN 16

void weft_live_open(struct weft_live *l, const struct weft_tp_env *env, struct weft_live_card *card)
{
	*l = (struct weft_live){.env = env, .nranks = env->nranks, .listen_fd = -1};
	memset(card, 0, sizeof(*card));
	l->fds = malloc((size_t)env->nranks * sizeof(*l->fds));
	l->held = malloc((size_t)env->nranks * sizeof(*l->held));
	l->since = calloc((size_t)env->nranks, sizeof(*l->since));
	l->probe = calloc((size_t)env->nranks, sizeof(*l->probe));
	l->max_door = weft_hs_max_pending();
	l->hs_s = weft_hs_timeout_s();
	l->door = calloc((size_t)l->max_door, sizeof(*l->door));
	l->pfds = calloc((size_t)l->max_door, sizeof(*l->pfds));
	if (!l->fds || !l->held || !l->since || !l->probe || !l->door || !l->pfds)
		return;
	for (int r = 0; r < env->nranks; r++)
		l->fds[r] = l->held[r] = -1;
	struct weft_err err = {0};
	socklen_t len = 0;
	if (weft_addr_of_interface(env->ifname, &card->addr, &len, &err) != WEFT_SUCCESS)
		return;
	int fd = socket(card->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	socklen_t alen = sizeof(card->addr);
	if (bind(fd, (struct sockaddr *)&card->addr, len) != 0 || listen(fd, SOMAXCONN) != 0 ||
	    getsockname(fd, (struct sockaddr *)&card->addr, &alen) != 0) {
		close(fd);
		return;
	}
	l->listen_fd = fd;
	card->len = alen;
}

/* ---- the listener's side ---- */

static void door_drop(struct weft_live *l, int k, const char *why)
{
	if (++l->dropped <= 3)
		weft_log(WEFT_LOG_WARN, WEFT_SUB_NET,
			 "rank %d: liveness listener: dropped a connection: %s%s", l->env->rank,
			 why, l->dropped == 3 ? " (further ones are counted, not logged)" : "");
	weft_hs_clear(&l->door[k].hs);
	close(l->door[k].hs.fd);
	l->door[k] = l->door[--l->ndoor];
}

/* A probe's hello: of this communicator, for this rank, from a peer. */
static bool hello_ok(const struct weft_live *l, const struct weft_hs_hello *h)
{
	const struct weft_tp_env *env = l->env;
	return h->role == WEFT_HS_LIVE && h->peer == env->rank && h->rank >= 0 &&
	       h->rank < env->nranks && h->rank != env->rank &&
	       memcmp(h->id, env->id, WEFT_HS_ID_BYTES) == 0;
}

/* Move door handshake @p k along; it leaves the door when done. */
static void door_step(struct weft_live *l, int k)
{
	struct weft_hs *hs = &l->door[k].hs;
	struct weft_err err = {0};
	for (;;) {
		switch (weft_hs_step(hs)) {
		case WEFT_HS_AGAIN: return;
		case WEFT_HS_HELLO:
			if (!hello_ok(l, &hs->hello)) {
				door_drop(l, k, "a handshake for another communicator or rank");
				return;
			}
			if (weft_hs_answer(hs, l->env->key, l->env->rank, NULL, 0, &err) !=
			    WEFT_SUCCESS) {
				door_drop(l, k, err.msg);
				return;
			}
			continue;
		case WEFT_HS_OK: {
			int r = hs->hello.rank;
			if (l->held[r] >= 0) /* the peer probes again: its old probe is over */
				close(l->held[r]);
			l->held[r] = hs->fd;
			l->door[k] = l->door[--l->ndoor];
			return;
		}
		case WEFT_HS_REFUSED:
		case WEFT_HS_IO_ERROR: door_drop(l, k, hs->why); return;
		}
	}
}

static void door_accept(struct weft_live *l, double now)
{
	for (int n = 0; n < ACCEPTS_PER_TURN; n++) {
		int fd = accept4(l->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return; /* EAGAIN, EINTR, ECONNABORTED, EMFILE: next turn */
		if (l->ndoor == l->max_door) {
			int victim = -1;
			for (int k = 0; k < l->ndoor; k++)
				if (weft_hs_droppable(&l->door[k].hs) &&
				    (victim < 0 || weft_hs_drop_first(
						       &l->door[k].hs, l->door[k].since,
						       &l->door[victim].hs, l->door[victim].since)))
					victim = k;
			if (victim < 0) {
				close(fd);
				continue;
			}
			door_drop(l, victim,
				  "WEFT_MAX_PENDING connections were in their handshake");
		}
		weft_hs_accept(&l->door[l->ndoor].hs, fd);
		l->door[l->ndoor++].since = now;
	}
}

void weft_live_serve(struct weft_live *l)
{
	if (l->listen_fd < 0 || !l->door || !l->pfds)
		return;
	double now = weft_now();
	if (now - l->served < SERVE_PERIOD_S)
		return;
	l->served = now;
	door_accept(l, now);
	struct pollfd *p = l->pfds;
	for (int k = 0; k < l->ndoor; k++)
		p[k] = (struct pollfd){.fd = l->door[k].hs.fd,
				       .events = weft_hs_events(&l->door[k].hs)};
	int n = l->ndoor;
	if (n && poll(p, (nfds_t)n, 0) > 0)
		for (int k = n - 1; k >= 0; k--) /* door_step moves the last into k */
			if (p[k].revents)
				door_step(l, k);
	for (int k = l->ndoor - 1; k >= 0; k--)
		if (now - l->door[k].since > l->hs_s)
			door_drop(l, k, "no handshake within WEFT_HANDSHAKE_TIMEOUT");
}

/* ---- the prober's side ---- */

static void probe_end(struct weft_live *l, int peer)
{
	if (l->probe[peer]) {
		weft_hs_clear(l->probe[peer]);
		free(l->probe[peer]);
		l->probe[peer] = NULL;
	}
	if (l->fds[peer] >= 0)
		close(l->fds[peer]);
	l->fds[peer] = -1;
}

static enum weft_live_state gone(struct weft_live *l, int peer, char *why, size_t len,
				 const char *what)
{
	snprintf(why, len, "%s", what);
	probe_end(l, peer);
	return WEFT_LIVE_GONE;
}

#define REFUSES                                                                                    \
	"its liveness port refuses connections: the process is gone or has closed its "            \
	"communicator"

static enum weft_live_state start(struct weft_live *l, int peer, const struct weft_live_card *card,
				  char *why, size_t len)
{
	const struct weft_tp_env *env = l->env;
	struct weft_err err = {0};
	int fd = socket(card->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return WEFT_LIVE_UNKNOWN;
	l->probe[peer] = malloc(sizeof(*l->probe[peer]));
	if (!l->probe[peer] || weft_hs_connect(l->probe[peer], fd, env->key, WEFT_HS_LIVE, env->id,
					       env->rank, peer, NULL, 0, &err) != WEFT_SUCCESS) {
		free(l->probe[peer]);
		l->probe[peer] = NULL;
		close(fd);
		return WEFT_LIVE_UNKNOWN;
	}
	l->fds[peer] = fd;
	l->since[peer] = weft_now();
	if (connect(fd, (const struct sockaddr *)&card->addr, card->len) == 0 ||
	    errno == EINPROGRESS)
		return WEFT_LIVE_UNKNOWN;
	return gone(l, peer, why, len, errno == ECONNREFUSED ? REFUSES : strerror(errno));
}

/* The probe's TCP connection is up: move its handshake along. */
static enum weft_live_state probe_step(struct weft_live *l, int peer, char *why, size_t len)
{
	struct weft_hs *hs = l->probe[peer];
	switch (weft_hs_step(hs)) {
	case WEFT_HS_AGAIN: return WEFT_LIVE_ALIVE; /* its kernel answered */
	case WEFT_HS_OK:
		weft_hs_clear(hs);
		free(hs);
		l->probe[peer] = NULL;
		return WEFT_LIVE_ALIVE;
	case WEFT_HS_REFUSED:
		return gone(l, peer, why, len,
			    "its liveness port is not this communicator's (failed authentication): "
			    "the process is gone and another holds its port");
	default:
		if (hs->errnum == ECONNREFUSED)
			return gone(l, peer, why, len, REFUSES);
		/* closed before the welcome: a crowded door, or a death the
		 * next connect will show; knock again */
		probe_end(l, peer);
		return WEFT_LIVE_UNKNOWN;
	}
}

enum weft_live_state weft_live_check(struct weft_live *l, int peer,
				     const struct weft_live_card *card, double give_up_s, char *why,
				     size_t len)
{
	if (!l->fds || !l->door || !card->len)
		return WEFT_LIVE_UNKNOWN;
	weft_live_serve(l);
	if (l->fds[peer] < 0)
		return start(l, peer, card, why, len);
	struct pollfd p = {.fd = l->fds[peer], .events = POLLIN | POLLOUT};
	if (poll(&p, 1, 0) <= 0)
		return weft_now() - l->since[peer] > give_up_s
			   ? gone(l, peer, why, len, "its host does not answer")
			   : WEFT_LIVE_UNKNOWN;
	int err = 0;
	socklen_t elen = sizeof(err);
	getsockopt(l->fds[peer], SOL_SOCKET, SO_ERROR, &err, &elen);
	if (err == ECONNREFUSED)
		return gone(l, peer, why, len, REFUSES);
	if (l->probe[peer] && !err)
		return probe_step(l, peer, why, len);
	char c;
	if (err || (p.revents & (POLLERR | POLLHUP)))
		return gone(l, peer, why, len,
			    "its liveness connection was reset: the process is gone or has closed "
			    "its communicator");
	if ((p.revents & POLLIN) && recv(l->fds[peer], &c, 1, MSG_DONTWAIT | MSG_PEEK) == 0)
		return gone(l, peer, why, len,
			    "its liveness connection was closed: the process is gone or has "
			    "closed its communicator");
	return WEFT_LIVE_ALIVE;
}

void weft_live_close(struct weft_live *l)
{
	if (l->listen_fd >= 0)
		close(l->listen_fd);
	l->listen_fd = -1;
	for (int r = 0; l->fds && l->probe && r < l->nranks; r++)
		probe_end(l, r);
	for (int r = 0; l->held && r < l->nranks; r++)
		if (l->held[r] >= 0) {
			close(l->held[r]);
			l->held[r] = -1;
		}
	while (l->ndoor > 0) {
		weft_hs_clear(&l->door[l->ndoor - 1].hs);
		close(l->door[--l->ndoor].hs.fd);
	}
}

void weft_live_fini(struct weft_live *l)
{
	weft_live_close(l);
	free(l->fds);
	free(l->held);
	free(l->since);
	free(l->probe);
	free(l->door);
	free(l->pfds);
	memset(l, 0, sizeof(*l));
	l->listen_fd = -1;
}
