/* tp_stubs.c — see tp_stubs.h. */
#include "transports/common/tp_stubs.h"

#include <string.h>

weft_status_t weft_tp_no_reg(struct weft_tp *tp, void *buf, size_t len, struct weft_mr **mr,
			     struct weft_mr_key *key)
{
	*mr = NULL;
	return WEFT_ERR_NOT_SUPPORTED;
}

void weft_tp_no_dereg(struct weft_tp *tp, struct weft_mr *mr)
{
}

weft_status_t weft_tp_no_map(struct weft_conn *conn, const struct weft_mr_key *key, void **addr)
{
	*addr = NULL;
	return WEFT_ERR_NOT_SUPPORTED;
}

void weft_tp_no_unmap(struct weft_conn *conn, void *addr, size_t len)
{
}

weft_status_t weft_tp_no_write(struct weft_conn *conn, struct weft_msg *msg, struct weft_mr *local,
			       const struct weft_mr_key *remote, uint64_t remote_off, uint64_t imm)
{
	weft_msg_complete(msg, WEFT_ERR_NOT_SUPPORTED);
	return WEFT_ERR_NOT_SUPPORTED;
}

weft_status_t weft_tp_no_get(struct weft_conn *conn, struct weft_msg *msg, struct weft_mr *local,
			     const struct weft_mr_key *remote, uint64_t remote_off)
{
	weft_msg_complete(msg, WEFT_ERR_NOT_SUPPORTED);
	return WEFT_ERR_NOT_SUPPORTED;
}

int weft_tp_no_signals(struct weft_conn *conn, struct weft_tp_signal *out, int max)
{
	return 0;
}

void weft_tp_no_pace(struct weft_conn *conn, double rate_Bps)
{
}

void weft_tp_no_connected(struct weft_tp *tp)
{
}

void weft_tp_no_paths(struct weft_conn *conn, struct weft_tp_paths *out)
{
	memset(out, 0, sizeof(*out));
}

bool weft_tp_no_arm(struct weft_tp *tp)
{
	return false;
}

void weft_tp_no_disarm(struct weft_tp *tp)
{
}

void weft_tp_no_wake(struct weft_conn *conn)
{
}
