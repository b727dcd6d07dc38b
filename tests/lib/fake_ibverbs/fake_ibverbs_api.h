/*
 * fake_ibverbs_api.h — what the fake libibverbs offers beyond the verbs:
 * a marker by which Weft's verbs transport knows it has loaded a test
 * double (it then serves peers only when WEFT_TRANSPORTS names verbs), and
 * two calls the tests reach with dlsym to look at what the fake was told.
 */
#ifndef WEFT_FAKE_IBVERBS_API_H
#define WEFT_FAKE_IBVERBS_API_H

#include <stdint.h>

/* Present (and 1) in the fake only. */
#define WEFT_FAKE_IBVERBS_MARKER "weft_fake_ibverbs"

/* A QP as its /dev/shm file records it (any process's QP). */
struct weft_fake_qp_attr {
	int pid;
	uint32_t state; /* enum ibv_qp_state; 100: destroyed */
	uint32_t port, link_layer, mtu, sgid_index;
	uint32_t dest_qpn, rq_psn, sq_psn;
	uint16_t dlid, slid;
	uint8_t is_global, sl, traffic_class, timeout, retry_cnt, rnr_retry;
	uint8_t sgid[16], dgid[16];
};

/* weft_fake_ibv_qp_attr(qpn, &attr): 0, or -1 if no such QP file. */
typedef int (*weft_fake_qp_attr_fn)(uint32_t qpn, struct weft_fake_qp_attr *out);
#define WEFT_FAKE_QP_ATTR "weft_fake_ibv_qp_attr"

/* weft_fake_ibv_files(pid): how many /dev/shm files process pid owns
 * (0 for a process that cleaned up); first removes those of dead ones. */
typedef int (*weft_fake_files_fn)(int pid);
#define WEFT_FAKE_FILES "weft_fake_ibv_files"

/* weft_fake_ibv_mr_counts(&regs, &deregs): ibv_reg_mr and ibv_dereg_mr
 * calls this process made so far. */
typedef void (*weft_fake_mr_counts_fn)(uint64_t *regs, uint64_t *deregs);
#define WEFT_FAKE_MR_COUNTS "weft_fake_ibv_mr_counts"

#endif
