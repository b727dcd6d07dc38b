/*
 * bootstrap_root_start.c — starting a root listener (bootstrap.h): bind
 * and listen, then serve one job in a detached thread (bootstrap_root.c).
 * The two steps are apart for the shrink (api/comm_shrink.c): its
 * proposer binds the new communicator's root before it puts the address
 * in the value the survivors agree on, and serves it only once that value
 * is chosen.
 */
#define _GNU_SOURCE
#include "bootstrap/bootstrap.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/bootstrap_root.h"
#include "bootstrap/bootstrap_wire.h"
#include "util/log.h"
#include "util/settings.h"

/* The root's state for listener @p fd, settings read; NULL on failure
 * (@p fd is then closed, the reason in @p err). @p job_id: the job's id,
 * or NULL for a random one. */
static struct root *root_new(int fd, const struct weft_key *key, const unsigned char *job_id,
			     double timeout_s, struct weft_err *err)
{
	struct root *r = calloc(1, sizeof(*r));
	long v = 0;

	if (!r) {
		close(fd);
		weft_err_set(err, WEFT_ERR_NO_MEMORY, "bootstrap: root state");
		return NULL;
	}
	r->listen_fd = fd;
	if (!weft_setting_long("WEFT_BOOTSTRAP_FANOUT", &v) || v < 1 || v > WEFT_MAX_RANKS) {
		weft_err_set(err, WEFT_ERR_INVALID_ARG,
			     "WEFT_BOOTSTRAP_FANOUT=%s: must be a whole number of ranks, 1 to %d",
			     weft_setting_str("WEFT_BOOTSTRAP_FANOUT"), WEFT_MAX_RANKS);
		root_free(r);
		return NULL;
	}
	r->fanout = (int)v;
	if (job_id)
		memcpy(r->job_id, job_id, sizeof(r->job_id));
	else if (weft_random(r->job_id, sizeof(r->job_id), err) != WEFT_SUCCESS) {
		root_free(r);
		return NULL;
	}
	r->key = *key;
	r->timeout_s = timeout_s;
	r->handshake_s = weft_hs_timeout_s();
	r->max_pending = weft_hs_max_pending();
	r->start = weft_bootstrap_wire_now_s();
	return r;
}

/* The root's thread, detached; on failure @p r is freed. */
static weft_status_t root_thread_start(struct root *r, const struct weft_key *key,
				       struct weft_err *err)
{
	pthread_attr_t attr;
	pthread_t tid;
	int rc;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = weft_bootstrap_roots_add(key) ? pthread_create(&tid, &attr, root_main, r) : ENOMEM;
	pthread_attr_destroy(&attr);
	if (!rc)
		return WEFT_SUCCESS;
	weft_bootstrap_roots_remove(key);
	root_free(r);
	return weft_err_errno(err, rc, "bootstrap: root thread");
}

weft_status_t weft_bootstrap_root_listen(const struct sockaddr *addr, socklen_t addr_len,
					 int *fd_out, struct weft_uid *uid, struct weft_err *err)
{
	union weft_uid_addr bound;
	socklen_t bound_len = sizeof(bound);
	char where[ADDR_STR_BYTES];
	int one = 1;
	int fd;

	*fd_out = -1;
	if (!addr || !uid || !weft_bootstrap_wire_addr_len_ok(addr->sa_family, addr_len))
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "bootstrap: root address must be IPv4 or IPv6");
	fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return weft_err_errno(err, errno, "bootstrap: root socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, addr, addr_len) < 0 || listen(fd, SOMAXCONN) < 0 ||
	    getsockname(fd, &bound.sa, &bound_len) < 0) {
		int e = errno;

		weft_bootstrap_wire_addr_format(addr, where, sizeof(where));
		close(fd);
		return weft_err_errno(err, e, "bootstrap: root listen on %s", where);
	}
	memset(uid, 0, sizeof(*uid));
	uid->magic = WEFT_UID_MAGIC;
	uid->version = WEFT_UID_VERSION;
	uid->addr_len = bound_len;
	memcpy(&uid->addr, &bound, bound_len);
	*fd_out = fd;
	return WEFT_SUCCESS;
}

weft_status_t weft_bootstrap_root_serve(int fd, const struct weft_key *key,
					const unsigned char *job_id, double timeout_s,
					const int64_t *pids, int npids, struct weft_err *err)
{
	char where[ADDR_STR_BYTES];
	struct root *r;

	if (!(timeout_s > 0)) {
		close(fd);
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "bootstrap: root timeout must be positive, not %g", timeout_s);
	}
	r = root_new(fd, key, job_id, timeout_s, err);
	if (!r)
		return err->status;
	if (pids && npids > 0) {
		r->local_pids = malloc((size_t)npids * sizeof(*pids));
		if (!r->local_pids) {
			root_free(r);
			return weft_err_set(err, WEFT_ERR_NO_MEMORY, "bootstrap: root state");
		}
		memcpy(r->local_pids, pids, (size_t)npids * sizeof(*pids));
		r->npids = npids;
	}
	{
		union weft_uid_addr bound;
		socklen_t len = sizeof(bound);

		if (getsockname(fd, &bound.sa, &len) == 0)
			weft_bootstrap_wire_addr_format(&bound.sa, r->addr, sizeof(r->addr));
	}
	memcpy(where, r->addr, sizeof(where)); /* the thread owns r once it runs */
	weft_status_t st = root_thread_start(r, key, err);
	if (st == WEFT_SUCCESS)
		weft_log(WEFT_LOG_INFO, WEFT_SUB_BOOT,
			 "bootstrap root listening on %s (timeout %.1f s)", where, timeout_s);
	return st;
}

weft_status_t weft_bootstrap_root_start(const struct sockaddr *addr, socklen_t addr_len,
					const struct weft_key *key, double timeout_s,
					struct weft_uid *uid, struct weft_err *err)
{
	int fd;
	weft_status_t st = weft_bootstrap_root_listen(addr, addr_len, &fd, uid, err);

	if (st == WEFT_SUCCESS)
		st = weft_bootstrap_root_serve(fd, key, NULL, timeout_s, NULL, 0, err);
	if (st != WEFT_SUCCESS) {
		memset(uid, 0, sizeof(*uid));
		return st;
	}
	uid->key = *key;
	return WEFT_SUCCESS;
}
