/* api.h — what the files of api share (none of it is public). */
#ifndef WEFT_API_INTERNAL_H
#define WEFT_API_INTERNAL_H

#include "core/comm.h"
#include "launch/launch.h"

/* The last steps of every way to create a communicator, after
 * weft_comm_create: the tuner, then the closing barrier. On failure the
 * communicator is freed and the message is in weft_init_last_error(). */
weft_status_t weft_api_comm_finish(struct weft_comm *comm, weft_comm_t *out);

/* A caller's config (NULL is fine): its size, timeout and progress
 * thread; errors name @p call. */
weft_status_t weft_api_config_check(const weft_config_t *config, const char *call,
				    struct weft_err *err);

/* In a group (weft_group_start): record @p task to start at the group's
 * end (hand its request back if it has one) and return true; else false. */
bool weft_api_group_record(struct weft_task *task, weft_request_t *request);

/* Is a group open on this thread (between weft_group_start and _end)? */
bool weft_api_group_open(void);

/* comm_secret.c: the key of a job launched without PMIx (WEFT_SECRET,
 * WEFT_SECRET_FILE, this user's host key on one host), or why there is
 * none. */
weft_status_t weft_api_env_secret(const struct weft_launch *l, const struct sockaddr_storage *root,
				  struct weft_key *key, struct weft_err *err);

/* After a failed init of an environment launch: when this rank's key was
 * this user's host key with the parent's pid (no launcher job id, no key
 * given) and the root failed authentication, say in @p err why that may
 * be (ranks of different parents hold different keys) and what to do. */
void weft_api_env_secret_hint(const struct weft_launch *l, struct weft_err *err);

/* ---- coll.c, for the collective calls of coll.c and coll_blocks.c.
 * Each check returns WEFT_SUCCESS or records an error naming @p call (and
 * the parameter) on the communicator and returns it. */

/* comm is not NULL and has not failed earlier. */
weft_status_t weft_api_check_comm(struct weft_comm *comm, const char *call);

/* dtype is valid and @p nblocks blocks of @p count elements fit the
 * address space. */
weft_status_t weft_api_check_data(struct weft_comm *comm, const char *call, size_t count,
				  size_t nblocks, weft_datatype_t dtype);

/* @p r (named @p what: "root", "peer") is a rank of comm. */
weft_status_t weft_api_check_rank(struct weft_comm *comm, const char *call, const char *what,
				  int r);

/* @p buf (named @p what) is not NULL when @p count > 0. */
weft_status_t weft_api_check_buf(struct weft_comm *comm, const char *call, const char *what,
				 const void *buf, size_t count);

/* A non-blocking call's request is not NULL; *request is set to NULL. */
weft_status_t weft_api_need_request(struct weft_comm *comm, weft_request_t *request,
				    const char *call);

/* Whether [a, a + bytes) and [b, b + bytes) share a byte. */
bool weft_api_overlap(const void *a, const void *b, size_t bytes);

/* The arguments of a call, esize from dtype, everything else zero. */
struct weft_coll_args weft_api_args(enum weft_coll_kind coll, const void *sendbuf, void *recvbuf,
				    size_t count, weft_datatype_t dtype, weft_op_t op, int root);

/* Run a checked call: pick its algorithm, then wait for it (@p request
 * NULL), queue it and hand back its request, or record it in the open
 * group. */
weft_status_t weft_api_run(struct weft_comm *comm, const struct weft_coll_args *args,
			   weft_request_t *request);

/* Why an entry point refuses inside a completion callback (core/task.h). */
#define WEFT_API_IN_CALLBACK                                                                       \
	"called from a completion callback (weft_request_on_complete), which runs under a "        \
	"communicator's lock and must not call Weft"

#endif
