/* tp_stubs.h — "not supported" entries for the ops a transport lacks (as
 * libfabric's fi_no_*): every entry of a table is set, so nothing on the hot
 * path tests for NULL. */
#ifndef WEFT_TP_STUBS_H
#define WEFT_TP_STUBS_H

#include "transports/transport.h"

weft_status_t weft_tp_no_reg(struct weft_tp *tp, void *buf, size_t len, struct weft_mr **mr,
			     struct weft_mr_key *key);
void weft_tp_no_dereg(struct weft_tp *tp, struct weft_mr *mr);
weft_status_t weft_tp_no_map(struct weft_conn *conn, const struct weft_mr_key *key, void **addr);
void weft_tp_no_unmap(struct weft_conn *conn, void *addr, size_t len);
weft_status_t weft_tp_no_write(struct weft_conn *conn, struct weft_msg *msg, struct weft_mr *local,
			       const struct weft_mr_key *remote, uint64_t remote_off, uint64_t imm);
weft_status_t weft_tp_no_get(struct weft_conn *conn, struct weft_msg *msg, struct weft_mr *local,
			     const struct weft_mr_key *remote, uint64_t remote_off);
void weft_tp_no_connected(struct weft_tp *tp);
int weft_tp_no_signals(struct weft_conn *conn, struct weft_tp_signal *out, int max);
void weft_tp_no_pace(struct weft_conn *conn, double rate_Bps);
void weft_tp_no_paths(struct weft_conn *conn, struct weft_tp_paths *out);
/* A transport with no wait object: a rank never sleeps on it (arm and
 * settle say no), and its data needs no bell (wake does nothing). */
bool weft_tp_no_arm(struct weft_tp *tp);
void weft_tp_no_disarm(struct weft_tp *tp);
void weft_tp_no_wake(struct weft_conn *conn);

/* The whole group, for a transport that has none of it. */
#define WEFT_TP_NO_MEM_OPS                                                                         \
	{                                                                                          \
		.reg = weft_tp_no_reg, .dereg = weft_tp_no_dereg, .map = weft_tp_no_map,           \
		.unmap = weft_tp_no_unmap                                                          \
	}
#define WEFT_TP_NO_WAIT_OPS                                                                        \
	{                                                                                          \
		.arm = weft_tp_no_arm, .settle = weft_tp_no_arm, .disarm = weft_tp_no_disarm,      \
		.wake = weft_tp_no_wake                                                            \
	}
#define WEFT_TP_NO_RMA_OPS                                                                         \
	{                                                                                          \
		.write = weft_tp_no_write, .get = weft_tp_no_get                                   \
	}

#endif
