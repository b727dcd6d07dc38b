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
#include "util/netaddr.h"

void weft_live_open(struct weft_live *l, const struct weft_tp_env *env, struct weft_live_card *card)
{
	*l = (struct weft_live){.nranks = env->nranks, .listen_fd = -1};
	memset(card, 0, sizeof(*card));
	l->fds = malloc((size_t)env->nranks * sizeof(*l->fds));
	l->since = calloc((size_t)env->nranks, sizeof(*l->since));
	if (!l->fds || !l->since)
		return;
	for (int r = 0; r < env->nranks; r++)
		l->fds[r] = -1;
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

/* Take what peers opened to us, so that the backlog never fills; keep them
 * open, so that they are reset when we go. */
static void accept_pending(struct weft_live *l)
{
	for (;;) {
		int fd = accept4(l->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		if (l->naccepted == l->max_accepted) {
			int n = l->max_accepted ? 2 * l->max_accepted : 8;
			int *p = realloc(l->accepted, (size_t)n * sizeof(*p));
			if (!p) {
				close(fd);
				return;
			}
			l->accepted = p;
			l->max_accepted = n;
		}
		l->accepted[l->naccepted++] = fd;
	}
}

static enum weft_live_state gone(struct weft_live *l, int peer, char *why, size_t len,
				 const char *what)
{
	snprintf(why, len, "%s", what);
	close(l->fds[peer]);
	l->fds[peer] = -1;
	return WEFT_LIVE_GONE;
}

static enum weft_live_state start(struct weft_live *l, int peer, const struct weft_live_card *card,
				  char *why, size_t len)
{
	int fd = socket(card->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return WEFT_LIVE_UNKNOWN;
	l->fds[peer] = fd;
	l->since[peer] = weft_now();
	if (connect(fd, (const struct sockaddr *)&card->addr, card->len) == 0)
		return WEFT_LIVE_ALIVE;
	if (errno == EINPROGRESS)
		return WEFT_LIVE_UNKNOWN;
	return gone(l, peer, why, len,
		    errno == ECONNREFUSED ? "its liveness port refuses connections: the process "
					    "is gone or has closed its communicator"
					  : strerror(errno));
}

enum weft_live_state weft_live_check(struct weft_live *l, int peer,
				     const struct weft_live_card *card, double give_up_s, char *why,
				     size_t len)
{
	if (!l->fds || !card->len)
		return WEFT_LIVE_UNKNOWN;
	if (l->listen_fd >= 0)
		accept_pending(l);
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
	char c;
	if (err || (p.revents & (POLLERR | POLLHUP)))
		return gone(l, peer, why, len,
			    err == ECONNREFUSED
				? "its liveness port refuses connections: the "
				  "process is gone or has closed its communicator"
				: "its liveness connection was reset: the process is "
				  "gone or has closed its communicator");
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
	for (int r = 0; l->fds && r < l->nranks; r++)
		if (l->fds[r] >= 0) {
			close(l->fds[r]);
			l->fds[r] = -1;
		}
	for (int i = 0; i < l->naccepted; i++)
		close(l->accepted[i]);
	l->naccepted = 0;
}

void weft_live_fini(struct weft_live *l)
{
	weft_live_close(l);
	free(l->fds);
	free(l->since);
	free(l->accepted);
	memset(l, 0, sizeof(*l));
	l->listen_fd = -1;
}
