/*
 * agree.h — the survivors of a communicator agree on who is gone
 * (weft_comm_shrink): one instance of the agreement of agree_proto.h per
 * attempt, run over the communicator's watch, with the checks of
 * health/detect.h deciding when a rank that does not answer is gone.
 */
#ifndef WEFT_AGREE_H
#define WEFT_AGREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "health/agree_proto.h"
#include "weft.h"

struct weft_comm;

struct weft_agree_req {
	const int *exclude; /* the caller's exclude list, sorted, without repeats */
	int nexclude;
	double deadline; /* weft_now() past which the call fails */
	/* Bind the listener of the new communicator's root; its address into
	 * @p addr (the proposer does it before it proposes a value of its own). */
	bool (*root)(void *ctx, unsigned char addr[AGREE_ROOT_BYTES], uint32_t *len);
	void *root_ctx;
};

struct weft_agree_result {
	uint64_t instance;
	struct agree_blob *value; /* decided; the caller frees it */
	bool composed_here;	  /* this rank composed it: its root listener serves it */
};

/* Run one instance: the caller's next (the first, or the one after the
 * last decided). Returns WEFT_SUCCESS with the decided value, or fails
 * with a sentence on the communicator: WEFT_ERR_REMOTE (no quorum; a rank
 * that left; the communicator of an earlier instance was built without
 * this rank), WEFT_ERR_TIMEOUT (past the deadline: the message names
 * whom it waited for), WEFT_ERR_NO_MEMORY, WEFT_ERR_SYSTEM (the root's
 * listener). */
weft_status_t weft_agree_run(struct weft_comm *comm, const struct weft_agree_req *req,
			     struct weft_agree_result *res);

/* During init (health/health.c): the agreement's state rides on the
 * communicator's watch from before its thread runs, so that a peer's
 * datagrams of an agreement are never missed. */
weft_status_t weft_agree_attach(struct weft_comm *comm);

/* After a decided instance: the caller's next call takes the next one.
 * @p built: it built the communicator of this one (so it tells a rank
 * whose build of it failed that the others went on without it); @p
 * failed: it was a member and failed to build it (so its next attempt
 * asks whether the others did). */
void weft_agree_done(struct weft_comm *comm, bool built, bool failed);

#endif
