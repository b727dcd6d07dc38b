/* api.h — what the files of src/api share (none of it is public). */
#ifndef WEFT_API_INTERNAL_H
#define WEFT_API_INTERNAL_H

#include "core/comm.h"

/* The last steps of every way to create a communicator, after
 * weft_comm_create: the tuner, then the closing barrier. On failure the
 * communicator is freed and the message is in weft_init_last_error(). */
weft_status_t weft_api_comm_finish(struct weft_comm *comm, weft_comm_t *out);

/* In a group (weft_group_start): record @p task to start at the group's
 * end (hand its request back if it has one) and return true; else false. */
bool weft_api_group_record(struct weft_task *task, weft_request_t *request);

/* Is a group open on this thread (between weft_group_start and _end)? */
bool weft_api_group_open(void);

#endif
