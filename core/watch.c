/* watch.c — the out-of-band watch's socket and thread: heartbeats to the
 * neighbours, answers to queries, and what this rank publishes of itself
 * (watch.h says why; watch_verdict.c uses it at a timeout). */
#define _GNU_SOURCE /* pipe2 */
#include "core/watch.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/comm.h"
#include "core/fail.h"
#include "core/watch_int.h"
#include "util/clock.h"
#include "util/log.h"

/* Milliseconds, for the age of the watched state: two reads per
 * collective (started, finished), so the coarse clock (the last tick,
 * 1-4 ms old; ~5 ns against ~20 ns for CLOCK_MONOTONIC's, a tenth of an
 * 8-byte AllReduce) -- ages are compared with timeouts of seconds. Both
 * clocks count from the same origin, so ages taken here agree with each
 * other to a tick. */
int64_t watch_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void watch_state_mine(struct weft_watch *w, struct watch_state *st)
{
	int64_t age = watch_now_ms() - atomic_load_explicit(&w->changed_ms, memory_order_relaxed);
	st->started = atomic_load_explicit(&w->started, memory_order_relaxed);
	st->finished = atomic_load_explicit(&w->finished, memory_order_relaxed);
	st->coll = atomic_load_explicit(&w->coll, memory_order_relaxed);
	st->waiting_for = atomic_load_explicit(&w->waiting_for, memory_order_relaxed);
	st->age_ms = age < 0 ? 0 : age > UINT32_MAX ? UINT32_MAX : (uint32_t)age;
	st->flags = atomic_load(&w->timed_out_call) ? WATCH_TIMED_OUT : 0;
	if (w->comm && weft_comm_revoked(w->comm))
		st->flags |= WATCH_REVOKED;
}

static int neighbour(const struct weft_watch *w, int side)
{
	return (w->rank + (side ? 1 : w->nranks - 1)) % w->nranks;
}

static uint32_t heard_ms(const struct watch_view *v, double now)
{
	if (v->heard == 0)
		return UINT32_MAX;
	double ms = (now - v->heard) * 1e3;
	return ms < 0 ? 0 : ms >= UINT32_MAX ? UINT32_MAX - 1 : (uint32_t)ms;
}

/* How often a caller of weft_watch_silence asks a peer it has not heard. */
#define SILENCE_ASK_S 0.1

double watch_silence(struct weft_watch *w, int peer, double now)
{
	if (peer < 0 || peer >= w->nranks || peer == w->rank)
		return -1;
	pthread_mutex_lock(&w->lock);
	struct watch_view *v = &w->view[peer];
	if ((v->heard == 0 || now - v->heard >= SILENCE_ASK_S) &&
	    (v->silence_asked == 0 || now - v->silence_asked >= SILENCE_ASK_S)) {
		v->silence_asked = now;
		watch_send(w, peer, WATCH_QUERY); /* sets asked unless it is set */
	}
	/* asked: unanswered since then (any datagram from it clears it) */
	double silent = v->asked > 0 ? now - v->asked : v->heard > 0 ? now - v->heard : 0;
	pthread_mutex_unlock(&w->lock);
	return silent < 0 ? 0 : silent;
}

double weft_watch_silence(struct weft_comm *comm, int peer)
{
	struct weft_watch *w = comm->watch;
	if (!w || !w->running)
		return -1;
	return watch_silence(w, peer, weft_now());
}

void watch_wait_changed(struct weft_watch *w, double seconds)
{
	struct timespec until = weft_wall_after(seconds);
	pthread_cond_timedwait(&w->changed, &w->lock, &until);
}

void watch_asked(struct weft_watch *w, int peer, double now)
{
	if (w->view[peer].asked == 0)
		w->view[peer].asked = now;
}

void watch_sendto(struct weft_watch *w, int peer, const void *buf, size_t len)
{
	const struct sockaddr *to = (const struct sockaddr *)&w->addrs[peer];
	/* A refusal an earlier datagram met is reported once, by failing the
	 * next send (IP_RECVERR): that one goes again. */
	for (int tries = 0; tries < 2; tries++)
		if (sendto(w->fd, buf, len, MSG_DONTWAIT, to, w->lens[peer]) >= 0 ||
		    errno != ECONNREFUSED)
			return;
}

/* With w->lock held when type is a reply, a query or a revoke (it reads
 * or writes the view). */
void watch_send(struct weft_watch *w, int peer, uint32_t type)
{
	struct watch_msg m = {.magic = WATCH_MAGIC,
			      .comm_id = w->comm_id,
			      .seq = atomic_fetch_add(&w->seq, 1) + 1,
			      .type = type,
			      .rank = w->rank};
	m.timed_out_call = atomic_load(&w->timed_out_call);
	watch_state_mine(w, &m.me);
	if (type == WATCH_REPLY) {
		double now = weft_now();
		for (int s = 0; s < 2; s++) {
			const struct watch_view *v = &w->view[neighbour(w, s)];
			m.nb_heard_ms[s] = heard_ms(v, now);
			m.nb[s] = v->st;
		}
	}
	weft_mac(&w->key, &m, offsetof(struct watch_msg, mac), m.mac);
	if (type == WATCH_QUERY || type == WATCH_REVOKE)
		watch_asked(w, peer, weft_now());
	/* Best effort: a lost datagram is a rank not heard from. */
	watch_sendto(w, peer, &m, sizeof(m));
}

static bool same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
	return x->sin6_port == y->sin6_port && !memcmp(&x->sin6_addr, &y->sin6_addr, 16);
}

/* A datagram counts only from a rank of this communicator, from the
 * address that rank registered at init, with a MAC made with the key and a
 * sequence number newer than any taken from it: anything else is dropped
 * after those checks, and costs nothing more. */
bool watch_from_rank(const struct weft_watch *w, int rank, const struct sockaddr_storage *from)
{
	return rank >= 0 && rank < w->nranks && rank != w->rank && same_addr(from, &w->addrs[rank]);
}

static bool datagram_ok(struct weft_watch *w, const struct watch_msg *m, ssize_t len,
			const struct sockaddr_storage *from)
{
	unsigned char mac[WEFT_MAC_BYTES];
	if (len != (ssize_t)sizeof(*m) || m->magic != WATCH_MAGIC || m->comm_id != w->comm_id ||
	    !watch_from_rank(w, m->rank, from))
		return false;
	weft_mac(&w->key, m, offsetof(struct watch_msg, mac), mac);
	return weft_mac_equal(mac, m->mac);
}

void watch_take(struct weft_watch *w, const struct watch_msg *m, ssize_t len,
		const struct sockaddr_storage *from)
{
	if (!datagram_ok(w, m, len, from)) {
		w->dropped++;
		return;
	}
	pthread_mutex_lock(&w->lock);
	struct watch_view *v = &w->view[m->rank];
	if (m->seq <= v->last_seq) { /* replayed, or older than one taken */
		pthread_mutex_unlock(&w->lock);
		w->dropped++;
		return;
	}
	v->last_seq = m->seq;
	v->heard = weft_now();
	v->asked = 0;
	v->st = m->me;
	if (m->type == WATCH_REPLY) {
		v->replied = true;
		memcpy(v->nb_heard_ms, m->nb_heard_ms, sizeof(v->nb_heard_ms));
		memcpy(v->nb, m->nb, sizeof(v->nb));
	}
	if (m->type == WATCH_QUERY) {
		if (m->timed_out_call) {
			atomic_store(&w->peer_timed_out, m->timed_out_call);
			uint64_t one = 1; /* a rank asleep in a wait hears of it now */
			if (w->wake_fd >= 0 && write(w->wake_fd, &one, sizeof(one)) < 0) {
				/* full: a wake-up is pending anyway */
			}
		}
		watch_send(w, m->rank, WATCH_REPLY);
	}
	if (m->type == WATCH_REVOKE_ACK)
		v->revoke_acked = true;
	bool revoked = m->type == WATCH_REVOKE || (m->me.flags & WATCH_REVOKED);
	/* Known before the acknowledgement goes: the revoker closes its
	 * connections once it has it (health/revoke_peers.c). */
	if (revoked && w->comm)
		weft_comm_error_revoked(w->comm, m->rank);
	if (m->type == WATCH_REVOKE)
		watch_send(w, m->rank, WATCH_REVOKE_ACK);
	pthread_cond_broadcast(&w->changed);
	pthread_mutex_unlock(&w->lock);
}

/* The refusals the socket's error queue holds (IP_RECVERR): a datagram to
 * a rank whose watch socket is closed met an ICMP port unreachable — its
 * process exited, or it destroyed the communicator. A rank on another
 * host is then known dead; on this host the pid check decides (health/detect.c). */
static void take_refusals(struct weft_watch *w)
{
	for (;;) {
		char ctrl[512], byte;
		struct sockaddr_storage to;
		struct iovec iov = {&byte, 1};
		struct msghdr mh = {.msg_name = &to,
				    .msg_namelen = sizeof(to),
				    .msg_iov = &iov,
				    .msg_iovlen = 1,
				    .msg_control = ctrl,
				    .msg_controllen = sizeof(ctrl)};
		if (recvmsg(w->fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
			return;
		bool refused = false;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
			if (!((c->cmsg_level == SOL_IP && c->cmsg_type == IP_RECVERR) ||
			      (c->cmsg_level == SOL_IPV6 && c->cmsg_type == IPV6_RECVERR)))
				continue;
			struct sock_extended_err ee;
			memcpy(&ee, CMSG_DATA(c), sizeof(ee));
			refused |= ee.ee_errno == ECONNREFUSED;
		}
		for (int r = 0; refused && r < w->nranks; r++) {
			if (r == w->rank || !same_addr(&to, &w->addrs[r]))
				continue;
			pthread_mutex_lock(&w->lock);
			if (w->view[r].refused == 0)
				w->view[r].refused = weft_now();
			pthread_cond_broadcast(&w->changed);
			pthread_mutex_unlock(&w->lock);
			if (w->comm && !weft_comm_same_host(w->comm, r))
				weft_comm_mark_dead(w->comm, r, WEFT_RANK_KILLED);
		}
	}
}

/* A datagram that is not the watch's own: to the services that ride on
 * it, in the order they registered, until one takes it. */
static void take_other(struct weft_watch *w, ssize_t n, const struct sockaddr_storage *from)
{
	for (int i = 0; i < w->nservices; i++) {
		const struct weft_watch_service *svc = w->services[i].svc;
		if (svc->take && svc->take(w->services[i].ctx, w, w->rx, n, from))
			return;
	}
	w->dropped++;
}

/* Every datagram waiting at the socket: the watch's own, and the
 * services' (core/watch.h: their state is the rx_lock's, which the
 * watch's thread also holds for their ticks). */
static void take_all(struct weft_watch *w)
{
	pthread_mutex_lock(&w->rx_lock);
	for (;;) {
		struct sockaddr_storage from;
		socklen_t flen = sizeof(from);
		ssize_t n = recvfrom(w->fd, w->rx, WATCH_RX_BYTES, MSG_DONTWAIT | MSG_TRUNC,
				     (struct sockaddr *)&from, &flen);
		if (n < 0 && errno == ECONNREFUSED) /* a refusal reported: read on */
			continue;
		if (n < 0)
			break;
		uint64_t magic = 0;
		if (n >= (ssize_t)sizeof(magic))
			memcpy(&magic, w->rx, sizeof(magic));
		if (magic == WATCH_MAGIC || n < (ssize_t)sizeof(magic))
			watch_take(w, (const struct watch_msg *)(const void *)w->rx, n, &from);
		else
			take_other(w, n, &from);
	}
	take_refusals(w);
	pthread_mutex_unlock(&w->rx_lock);
}

void weft_watch_drain(struct weft_comm *comm)
{
	if (comm->watch)
		take_all(comm->watch);
}

/* The services' periodic work (rx_lock held): the soonest turn any of
 * them wants, in weft_now() seconds; 0: none. */
static double tick_services(struct weft_watch *w)
{
	uint64_t soonest = UINT64_MAX;
	for (int i = 0; i < w->nservices; i++) {
		const struct weft_watch_service *svc = w->services[i].svc;
		uint64_t due =
		    svc->tick ? svc->tick(w->services[i].ctx, w, weft_now_ns()) : UINT64_MAX;
		soonest = due < soonest ? due : soonest;
	}
	return soonest == UINT64_MAX ? 0 : soonest * 1e-9;
}

/* Heartbeats every period_s; the services' work when they ask. */
static void *watch_thread(void *arg)
{
	struct weft_watch *w = arg;
	double next_beat = 0;
	for (;;) {
		double now = weft_now();
		if (now >= next_beat) {
			watch_send(w, neighbour(w, 1), WATCH_HEARTBEAT);
			if (w->nranks > 2)
				watch_send(w, neighbour(w, 0), WATCH_HEARTBEAT);
			next_beat = now + w->period_s;
		}
		pthread_mutex_lock(&w->rx_lock); /* the services' state (take_all) */
		double due = tick_services(w);
		pthread_mutex_unlock(&w->rx_lock);
		struct pollfd fds[2] = {{.fd = w->fd, .events = POLLIN},
					{.fd = w->stop_pipe[0], .events = POLLIN}};
		double next = due > 0 && due < next_beat ? due : next_beat;
		now = weft_now();
		int ms = next > now ? (int)((next - now) * 1e3) + 1 : 0;
		if (poll(fds, 2, ms) < 0 && errno != EINTR)
			break;
		if (fds[1].revents)
			break;
		take_all(w);
	}
	return NULL;
}

/* The address every rank registers, as the bootstrap allgathers it. */
struct watch_addr {
	struct sockaddr_storage ss;
	uint32_t len;
	uint32_t pad;
};

static weft_status_t open_socket(struct weft_comm *comm, struct weft_watch *w,
				 struct watch_addr *mine)
{
	socklen_t len = sizeof(mine->ss);
	weft_status_t st = weft_comm_local_address(comm, &mine->ss, &len);
	if (st != WEFT_SUCCESS)
		return st;
	w->fd = socket(mine->ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (w->fd < 0 || bind(w->fd, (struct sockaddr *)&mine->ss, len) != 0 ||
	    getsockname(w->fd, (struct sockaddr *)&mine->ss, &len) != 0)
		return weft_comm_fail_errno(comm, errno, "init: watch socket");
	/* Refusals (a rank's socket closed: it exited) reach the error queue. */
	int one = 1;
	if (mine->ss.ss_family == AF_INET6)
		setsockopt(w->fd, SOL_IPV6, IPV6_RECVERR, &one, sizeof(one));
	else
		setsockopt(w->fd, SOL_IP, IP_RECVERR, &one, sizeof(one));
	mine->len = len;
	return WEFT_SUCCESS;
}

static weft_status_t exchange(struct weft_comm *comm, struct weft_watch *w)
{
	struct watch_addr *all = calloc((size_t)w->nranks, sizeof(*all));
	if (!all)
		return weft_comm_fail(comm, WEFT_ERR_NO_MEMORY, "init: no memory for the watch");
	weft_status_t st = open_socket(comm, w, &all[w->rank]);
	/* Every rank joins the allgather, even one whose socket failed: an
	 * empty address tells the others (and the bootstrap stays in step). */
	weft_status_t gst = weft_bootstrap_allgather(comm->bs, all, sizeof(*all), &comm->err);
	for (int r = 0; st == WEFT_SUCCESS && gst == WEFT_SUCCESS && r < w->nranks; r++) {
		if (all[r].len == 0 || all[r].len > sizeof(all[r].ss))
			st = weft_comm_fail(comm, WEFT_ERR_REMOTE,
					    "init: rank %d has no watch socket", r);
		w->addrs[r] = all[r].ss;
		w->lens[r] = all[r].len;
	}
	free(all);
	return st != WEFT_SUCCESS ? st : gst;
}

/* A quarter of the timeout, between 0.1 s and 5 s: a stopped rank is
 * missed by its neighbours well before anyone's operation times out. */
static double period(double timeout_s)
{
	double p = timeout_s / 4;
	return p < 0.1 ? 0.1 : p > 5 ? 5 : p;
}

static void watch_free(struct weft_watch *w)
{
	if (w->fd >= 0)
		close(w->fd);
	for (int i = 0; i < 2; i++)
		if (w->stop_pipe[i] >= 0)
			close(w->stop_pipe[i]);
	for (int i = 0; i < w->nservices; i++)
		if (w->services[i].svc->fini)
			w->services[i].svc->fini(w->services[i].ctx);
	pthread_mutex_destroy(&w->lock);
	pthread_mutex_destroy(&w->rx_lock);
	pthread_cond_destroy(&w->changed);
	weft_wipe(&w->key, sizeof(w->key));
	free(w->rx);
	free(w->addrs);
	free(w->lens);
	free(w->view);
	free(w->straggler);
	free(w);
}

weft_status_t weft_watch_start(struct weft_comm *comm)
{
	if (comm->nranks < 2)
		return WEFT_SUCCESS;
	struct weft_watch *w = calloc(1, sizeof(*w));
	if (!w)
		return weft_comm_fail(comm, WEFT_ERR_NO_MEMORY, "init: no memory for the watch");
	w->fd = w->stop_pipe[0] = w->stop_pipe[1] = -1;
	pthread_mutex_init(&w->lock, NULL);
	pthread_mutex_init(&w->rx_lock, NULL);
	pthread_cond_init(&w->changed, NULL);
	w->comm = comm;
	w->rank = comm->rank;
	w->wake_fd = comm->wait.evfd;
	w->nranks = comm->nranks;
	weft_key_derive(&w->key, &comm->key, "weft watch datagrams", comm->id, sizeof(comm->id));
	memcpy(&w->comm_id, comm->id, sizeof(w->comm_id));
	w->period_s = period(comm->timeout_s);
	atomic_store(&w->waiting_for, -1);
	atomic_store(&w->changed_ms, watch_now_ms());
	w->addrs = calloc((size_t)w->nranks, sizeof(*w->addrs));
	w->lens = calloc((size_t)w->nranks, sizeof(*w->lens));
	w->view = calloc((size_t)w->nranks, sizeof(*w->view));
	w->straggler = calloc((size_t)w->nranks, sizeof(*w->straggler));
	w->rx = malloc(WATCH_RX_BYTES);
	comm->watch = w;
	if (!w->addrs || !w->lens || !w->view || !w->straggler || !w->rx)
		return weft_comm_fail(comm, WEFT_ERR_NO_MEMORY, "init: no memory for the watch");
	return exchange(comm, w);
}

weft_status_t weft_watch_run(struct weft_comm *comm)
{
	struct weft_watch *w = comm->watch;
	if (!w)
		return WEFT_SUCCESS;
	if (pipe2(w->stop_pipe, O_CLOEXEC) != 0)
		return weft_comm_fail_errno(comm, errno, "init: watch pipe");
	int rc = pthread_create(&w->thread, NULL, watch_thread, w);
	if (rc != 0)
		return weft_comm_fail_errno(comm, rc, "init: watch thread");
	w->running = true;
	return WEFT_SUCCESS;
}

void weft_watch_stop(struct weft_comm *comm)
{
	struct weft_watch *w = comm->watch;
	if (!w)
		return;
	if (w->running) {
		char c = 0;
		ssize_t n;
		do
			n = write(w->stop_pipe[1], &c, 1);
		while (n < 0 && errno == EINTR);
		pthread_join(w->thread, NULL);
	}
	watch_free(w);
	comm->watch = NULL;
}

void weft_watch_op_started(struct weft_comm *comm, uint64_t call, int coll)
{
	struct weft_watch *w = comm->watch;
	if (!w)
		return;
	atomic_store_explicit(&w->coll, coll, memory_order_relaxed);
	atomic_store_explicit(&w->started, call + 1, memory_order_relaxed);
	atomic_store_explicit(&w->changed_ms, watch_now_ms(), memory_order_relaxed);
}

void weft_watch_op_finished(struct weft_comm *comm, uint64_t call)
{
	struct weft_watch *w = comm->watch;
	if (!w)
		return;
	atomic_store_explicit(&w->finished, call + 1, memory_order_relaxed);
	atomic_store_explicit(&w->changed_ms, watch_now_ms(), memory_order_relaxed);
}

void weft_watch_addr(const struct weft_comm *comm, int rank, char *buf, size_t len)
{
	const struct weft_watch *w = comm->watch;
	snprintf(buf, len, "-");
	if (!w || rank < 0 || rank >= w->nranks)
		return;
	const struct sockaddr_storage *ss = &w->addrs[rank];
	const void *a = ss->ss_family == AF_INET6
			    ? (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr
			    : (const void *)&((const struct sockaddr_in *)ss)->sin_addr;
	if (!inet_ntop(ss->ss_family, a, buf, (socklen_t)len))
		snprintf(buf, len, "-");
}

bool weft_watch_peer_timed_out(const struct weft_comm *comm)
{
	const struct weft_watch *w = comm->watch;
	return w && atomic_load_explicit(&w->peer_timed_out, memory_order_relaxed) != 0;
}

uint64_t weft_watch_peer_timed_out_call(const struct weft_comm *comm)
{
	const struct weft_watch *w = comm->watch;
	return w ? atomic_load(&w->peer_timed_out) : 0;
}

weft_status_t weft_watch_serve(struct weft_watch *w, const struct weft_watch_service *svc,
			       void *ctx)
{
	if (w->running || w->nservices >= WEFT_WATCH_SERVICES) {
		if (w->comm)
			return weft_comm_fail(w->comm, WEFT_ERR_INTERNAL,
					      "init: the watch cannot carry %s", svc->name);
		return WEFT_ERR_INTERNAL;
	}
	w->services[w->nservices].svc = svc;
	w->services[w->nservices].ctx = ctx;
	w->nservices++;
	return WEFT_SUCCESS;
}

void *weft_watch_service_ctx(const struct weft_watch *w, const struct weft_watch_service *svc)
{
	for (int i = 0; w && i < w->nservices; i++)
		if (w->services[i].svc == svc)
			return w->services[i].ctx;
	return NULL;
}
