/* api.h — what the files of src/api share (none of it is public). */
#ifndef WEFT_API_INTERNAL_H
#define WEFT_API_INTERNAL_H

#include "core/comm.h"

/* The last steps of every way to create a communicator, after
 * weft_comm_create: the tuner, then the closing barrier. On failure the
 * communicator is freed and the message is in weft_init_last_error(). */
weft_status_t weft_api_comm_finish(struct weft_comm *comm, weft_comm_t *out);

#endif
