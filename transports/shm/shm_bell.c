/*
 * shm_bell.c — waking a local peer that sleeps (WEFT_WAIT=block,
 * core/wait.c): its bell.
 *
 * A rank that may sleep (env->wait_fd >= 0) makes a FIFO beside its
 * segment, /dev/shm/weft-ID-RANK.bell (mode 600, the same random id as the
 * segment's name), opens its read end and puts it in its wait set. Every
 * local peer opens the write end at init (checked as the segment is:
 * owner, mode, a FIFO), and the name is unlinked with the segment's.
 *
 * To sleep, the rank raises asleep in its control page (then a seq_cst
 * fence) and checks its FIFOs once more (weft_tp_shm_settle). A peer that
 * stores something the rank may wait for (a slot, the tail, a single-copy
 * completion, the shm AllReduce's counters) fences and reads the flag;
 * whoever finds it raised first takes it down and writes one byte to the
 * FIFO, which wakes the epoll. Of the two fenced sides one sees the
 * other's store, so a wake-up is never lost; a stale byte costs one
 * spurious wake-up at most. A peer that never sleeps has no FIFO and costs
 * its peers nothing: they ring only where env->peers[p].sleeps.
 *
 * Why a FIFO and not a futex or an eventfd: the rank may also wait for
 * sockets, and a futex cannot be waited on beside them; an eventfd cannot
 * be opened by another process without passing the descriptor, which
 * needs a socket between the ranks or ptrace rights (pidfd_getfd); a FIFO
 * is opened by name, with the same permission checks as the segment.
 */
#define _GNU_SOURCE
#include "transports/shm/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/log.h"

void weft_tp_shm_bell_path(char *buf, size_t len, const char *seg_name)
{
	snprintf(buf, len, "/dev/shm%s.bell", seg_name);
}

weft_status_t weft_tp_shm_bell_create(struct shm_tp *tp, const char *seg_name)
{
	const struct weft_tp_env *env = tp->base.env;
	char path[128];
	weft_tp_shm_bell_path(path, sizeof(path), seg_name);
	if (mkfifo(path, 0600) != 0)
		return weft_tp_fail_errno(env, errno, "shm: mkfifo(%s) for WEFT_WAIT's bell", path);
	tp->bell_rd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
	if (tp->bell_rd < 0) {
		weft_status_t st = weft_tp_fail_errno(env, errno, "shm: open(%s)", path);
		unlink(path);
		return st;
	}
	struct epoll_event ev = {.events = EPOLLIN};
	if (epoll_ctl(env->wait_fd, EPOLL_CTL_ADD, tp->bell_rd, &ev) != 0)
		return weft_tp_fail_errno(env, errno, "shm: adding the bell to the wait set");
	return WEFT_SUCCESS;
}

weft_status_t weft_tp_shm_bell_open(struct shm_conn *c, const char *peer_seg_name)
{
	const struct weft_tp_env *env = c->tp->base.env;
	char path[128];
	weft_tp_shm_bell_path(path, sizeof(path), peer_seg_name);
	/* Read and write: the FIFO then always has a reader, so a write after
	 * the peer died is EAGAIN at worst, never SIGPIPE (which would kill
	 * this process: a library must not raise it; faults/shrink lost a
	 * survivor so). Linux defines O_RDWR on a FIFO. */
	int fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return weft_tp_fail_errno(env, errno, "shm: open(%s), rank %d's bell", path,
					  c->base.peer);
	struct stat sb;
	if (fstat(fd, &sb) != 0 || !S_ISFIFO(sb.st_mode) || sb.st_uid != geteuid() ||
	    (sb.st_mode & 077)) {
		close(fd);
		return weft_tp_fail(env, WEFT_ERR_INVALID_ARG,
				    "shm: %s, rank %d's bell, is not a FIFO of this user with mode "
				    "600 (another user made it?)",
				    path, c->base.peer);
	}
	c->bell_wr = fd;
	return WEFT_SUCCESS;
}

void weft_tp_shm_bell_ring(struct shm_conn *c)
{
	atomic_thread_fence(memory_order_seq_cst);
	_Atomic uint32_t *asleep = &c->peer_ctl->asleep;
	if (!atomic_load_explicit(asleep, memory_order_relaxed) ||
	    !atomic_exchange_explicit(asleep, 0, memory_order_relaxed))
		return;
	char one = 1;
	if (write(c->bell_wr, &one, 1) < 0) {
		/* EAGAIN: the FIFO holds bytes the peer has not drained: it wakes anyway. */
	}
}

bool weft_tp_shm_arm(struct weft_tp *base)
{
	struct shm_tp *tp = weft_container_of(base, struct shm_tp, base);
	if (tp->bell_rd < 0)
		return tp->nlocal == 1; /* no local peer: nothing to ring us */
	atomic_store_explicit(&tp->ctl->asleep, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
	return true;
}

void weft_tp_shm_disarm(struct weft_tp *base)
{
	struct shm_tp *tp = weft_container_of(base, struct shm_tp, base);
	if (tp->bell_rd < 0)
		return;
	atomic_store_explicit(&tp->ctl->asleep, 0, memory_order_relaxed);
	char buf[64];
	while (read(tp->bell_rd, buf, sizeof(buf)) > 0)
		;
}

void weft_tp_shm_wake(struct weft_conn *base)
{
	struct shm_conn *c = weft_container_of(base, struct shm_conn, base);
	if (c->bell_wr >= 0)
		weft_tp_shm_bell_ring(c);
}
