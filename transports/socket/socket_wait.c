/*
 * socket_wait.c — the TCP transport's part in a rank's sleep
 * (WEFT_WAIT=block, core/wait.c).
 *
 * A socket is in the communicator's wait set (env->wait_fd, epoll,
 * level-triggered) with the interest of what is queued on it: EPOLLIN
 * while progress would read it (weft_tp_socket_rx_wanted: a receive
 * posted, a frame half read), EPOLLOUT while it has frames to write.
 * With WEFT_REPATH on the rank never sleeps (settle says no): the path
 * checks run from progress. A socket with nothing queued is left out
 * of the set: data sent ahead of its receive, or a peer that closed after
 * its last message, must not wake a rank that has nothing to do with it
 * (a closed peer is noticed when a message is posted to it, as when
 * spinning). Level-triggered, the interest set right before the sleep is
 * enough: bytes that arrived meanwhile make the descriptor ready at once.
 *
 * SO_RCVLOWAT: a receive waiting for a large fragment sets the socket's
 * low-water mark to what the fragment still needs (at most
 * SOCK_LOWAT_MAX), so that epoll wakes the rank once the kernel holds
 * that much, not at every packet: on a 300 Mbit/s link a 512 KiB fragment
 * is 360 packets and 14 ms. Reads never wait for it (they are
 * non-blocking and take what is there), and a closed or reset peer makes
 * the socket readable whatever the mark.
 *
 * Connections under way (lazily: the listener, handshakes, calls) keep
 * the rank polling: settle says no while any is.
 */
#include <errno.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "transports/socket/socket.h"

/* The largest low-water mark (the kernel grows the receive buffer to hold it). */
#define SOCK_LOWAT_MAX (256u << 10)

/* Put @p fd in the wait set with @p events (0: out of it), knowing that
 * *@p reg_fd / *@p reg_events is what was registered (a socket closed
 * since left the set by itself, and its number may be taken again). */
static void interest(int epfd, int fd, uint32_t events, int *reg_fd, uint32_t *reg_events)
{
	bool known = *reg_fd == fd && fd >= 0;
	if (known && *reg_events == events)
		return;
	struct epoll_event ev = {.events = events};
	int ret;
	if (!events)
		ret = known ? epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL) : 0;
	else if (known)
		ret = epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev);
	else if ((ret = epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev)) != 0 && errno == EEXIST)
		ret = epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev);
	if (ret != 0 && errno == ENOENT && events)
		ret = epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
	*reg_fd = ret == 0 && events ? fd : -1;
	*reg_events = ret == 0 ? events : 0;
}

/* Payload bytes the frame slot @p s is reading still needs (1 between
 * frames: a header, or an acknowledgement, may come at any time). */
static size_t rx_needs(const struct weft_sock *sk)
{
	const struct weft_sock_rx *rx = &sk->rx;
	if (!rx->in_frame || rx->discard || !rx->req)
		return 1;
	return rx->hdr.frag_len - rx->got;
}

static void low_water(struct weft_sock *sk, size_t want)
{
	int v = (int)(want > SOCK_LOWAT_MAX ? SOCK_LOWAT_MAX : want ? want : 1);
	if (sk->lowat_fd == sk->fd && sk->lowat == v)
		return;
	if (setsockopt(sk->fd, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof(v)) == 0) {
		sk->lowat = v;
		sk->lowat_fd = sk->fd;
	}
}

static void sock_interest(struct weft_sock_conn *c, unsigned s, int epfd)
{
	struct weft_sock *sk = &c->sock[s];
	bool in = weft_tp_socket_rx_wanted(c, s);
	uint32_t events = (in ? EPOLLIN : 0) | (weft_tp_socket_tx_busy(c, s) ? EPOLLOUT : 0);
	if (!weft_tp_socket_usable(c, s))
		events = 0;
	if (events & EPOLLIN)
		low_water(sk, rx_needs(sk));
	interest(epfd, sk->fd, events, &sk->ep_fd, &sk->ep_events);
}

bool weft_tp_socket_arm(struct weft_tp *tp)
{
	return true; /* the data itself wakes the rank: nothing to raise */
}

bool weft_tp_socket_settle(struct weft_tp *tp)
{
	struct weft_sock_comm *sc = weft_container_of(tp, struct weft_sock_comm, base);
	int epfd = tp->env->wait_fd;
	/* With WEFT_REPATH on, the path checks (a stalled sub-flow, a
	 * replacement under way) run from progress, which a sleep would stop:
	 * such a rank keeps polling. */
	if (sc->nconnecting || sc->npending || weft_sock_acking(sc))
		return false;
	if (sc->listen_fd >= 0) /* lazily: a peer's first connection */
		interest(epfd, sc->listen_fd, EPOLLIN, &sc->ep_listen_fd, &sc->ep_listen_events);
	for (int k = 0; k < sc->nactive; k++) {
		struct weft_sock_conn *c = sc->active[k];
		for (unsigned s = 0; s < sc->nslots; s++)
			sock_interest(c, s, epfd);
	}
	return true;
}

void weft_tp_socket_disarm(struct weft_tp *tp)
{
	struct weft_sock_comm *sc = weft_container_of(tp, struct weft_sock_comm, base);
	sc->idle_polls = ~0u / 2; /* the next progress looks at the listener */
}
