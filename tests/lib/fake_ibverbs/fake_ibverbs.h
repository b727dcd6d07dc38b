/*
 * fake_ibverbs.h — internals of the test double for libibverbs
 * (build/tests/libfake_ibverbs.so), which Weft's verbs transport loads
 * through WEFT_IBVERBS_LIB. It implements the calls Weft makes, with the
 * real <infiniband/verbs.h> layouts, between processes of one host:
 *
 *   devices    the directories of $FAKE_IBVERBS_SYSFS/class/infiniband (a
 *              fake sysfs tree, tests/fixtures/sysfs): ports, states, link
 *              layers, LIDs and GID tables are read from it, as rdma-core
 *              reads /sys.
 *   contexts   a struct ibv_context whose ops table holds post_send,
 *              post_recv and poll_cq, so the static inline wrappers of
 *              verbs.h (ibv_post_send, ibv_post_recv, ibv_poll_cq) call
 *              into the fake exactly as they call into a real provider.
 *   MRs        registering exactly one mapping of the process (an mmap of
 *              its own, which the kernel did not merge with a neighbour)
 *              that no other live registration covers moves its pages onto a
 *              /dev/shm file (weftfake-mr-<pid>-<rkey>: a header page, then
 *              the pages), mapped back at the same address with MAP_FIXED
 *              after copying their contents in; a peer maps the file to
 *              "RDMA write" into it with memcpy. Any other registration
 *              (pages of the heap, which other threads may be writing;
 *              pages shared with another MR) gets the header page only,
 *              and peers write into the owner's memory with
 *              process_vm_writev (the fake lets any process do so:
 *              PR_SET_PTRACER_ANY). Moved pages are MAP_SHARED: a child
 *              forked after registration shares them instead of copying.
 *   QPs        RC only. Each QP has a /dev/shm file (weftfake-qp-<qpn>)
 *              with its state, the addresses it was given at RTR/RTS, and
 *              an inbound ring: a write with immediate copies the data into
 *              the peer's MR, then pushes (imm, length) there; the peer's
 *              poll_cq turns entries into receive completions against its
 *              posted receives. Plain writes only copy.
 *   delivery   a work request is executed by post_send or by a later
 *              poll_cq of the same process, in order. It waits (like a
 *              retried packet) while the peer QP is missing, not in
 *              RTR/RTS, pointed elsewhere (QPN, GID or LID, PSN, MTU), or
 *              its inbound ring is full; after the QP's retry time
 *              (4.096 us * 2^timeout * (retry_cnt + 1)) it fails with
 *              IBV_WC_RETRY_EXC_ERR. A peer whose process is dead (or a
 *              zombie) never becomes ready. Bad lkeys and rkeys give
 *              IBV_WC_LOC_PROT_ERR and IBV_WC_REM_ACCESS_ERR. An error
 *              moves the QP to ERR and flushes everything posted on it
 *              (IBV_WC_WR_FLUSH_ERR), as hardware does.
 *   paths      a QP's writes are placed at once, unless it has a rate:
 *              FAKE_IBVERBS_QP_RATE=RATE gives every QP a path of RATE
 *              bytes per second, FAKE_IBVERBS_SLOW_QP=N:RATE the N-th QP
 *              each process creates (0-based, in creation order) one of
 *              its own (a slower or congested path). A paced QP executes
 *              each write (places it, pushes its immediate, queues its
 *              completion) no earlier than len / RATE after it reached the
 *              head of the send queue or after the QP's previous write was
 *              placed, whichever is later; QPs do not hold each other up.
 *              A malformed value makes ibv_create_qp fail with EINVAL (and
 *              says so on stderr).
 *   limits     send queue slots are freed when the completion of a later
 *              signaled request is polled (unsignaled requests need one);
 *              a full send queue is ENOMEM; a full CQ is an overrun
 *              (poll_cq returns -1).
 *
 * One mutex serialises every call within a process. Files of processes
 * that died are removed by the next ibv_get_device_list of any process.
 * FAKE_IBVERBS_DEBUG=1 prints why a request waits or fails.
 */
#ifndef WEFT_FAKE_IBVERBS_H
#define WEFT_FAKE_IBVERBS_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "fake_ibverbs_api.h"

#define FAKE_EXPORT __attribute__((visibility("default")))

#define FAKE_PAGE	  4096u
#define FAKE_MAX_SGE	  4
#define FAKE_MAX_INLINE	  256
#define FAKE_MAX_WR	  16384
#define FAKE_INBOUND	  1024 /* writes with immediate not yet received, per QP */
#define FAKE_MAX_PORTS	  4
#define FAKE_MAX_GIDS	  32
#define FAKE_QP_MAGIC	  0x31505145414b4657ull /* "WFKAEQP1" */
#define FAKE_MR_MAGIC	  0x31524d45414b4657ull /* "WFKAEMR1" */
#define FAKE_QPS_GONE	  100			/* a destroyed QP's state in its file */
#define FAKE_SHM_PREFIX	  "weftfake-"
#define FAKE_PEER_RECHECK 0.01 /* seconds between looks at a peer's pid */

/* ---- shared between processes ---- */

struct fake_inbound {
	uint32_t imm; /* as posted: network byte order */
	uint32_t len;
};

/* /dev/shm/weftfake-qp-<qpn> */
struct fake_qp_file {
	uint64_t magic;
	int32_t pid;
	uint32_t qpn;
	_Atomic uint32_t state; /* enum ibv_qp_state, or FAKE_QPS_GONE */
	uint32_t pd_id;
	uint32_t access; /* qp_access_flags (INIT) */
	uint32_t port;
	uint32_t link_layer;
	/* RTR */
	uint8_t sgid[16]; /* this QP's own address (its port's GID at sgid_index) */
	uint16_t slid;
	uint8_t dgid[16];
	uint16_t dlid;
	uint32_t dest_qpn, rq_psn, mtu, sgid_index;
	uint8_t is_global, sl, traffic_class, hop_limit;
	/* RTS */
	uint32_t sq_psn;
	uint8_t timeout, retry_cnt, rnr_retry, pad;
	/* Writes with immediate toward this QP: the peer produces, we consume. */
	_Atomic uint64_t in_head, in_tail;
	struct fake_inbound in[FAKE_INBOUND];
};

/* Page 0 of /dev/shm/weftfake-mr-<pid>-<rkey>; the pages follow. */
struct fake_mr_file {
	uint64_t magic;
	_Atomic uint32_t valid; /* 0 once deregistered */
	uint32_t rkey;
	uint32_t pd_id;
	uint32_t access;
	uint64_t addr, len; /* as registered */
	uint64_t base;	    /* addr rounded down to a page: file offset FAKE_PAGE */
	int32_t pid;	    /* the owner */
	uint32_t cma;	    /* no pages in the file: write with process_vm_writev */
};

/* ---- one process's objects ---- */

struct fake_port {
	int link_layer; /* IBV_LINK_LAYER_* */
	enum ibv_port_state state;
	uint16_t lid;
	int ngids;
	union ibv_gid gid[FAKE_MAX_GIDS];
};

struct fake_dev {
	struct ibv_device ibv;
	char dir[512]; /* .../class/infiniband/<name> */
	int nports;
	struct fake_port port[FAKE_MAX_PORTS + 1]; /* 1-based */
	struct fake_dev *next;
};

struct fake_ctx {
	struct ibv_context ibv;
	struct fake_dev *dev;
};

struct fake_pd {
	struct ibv_pd ibv;
	uint32_t id;
	int users; /* MRs and QPs */
};

struct fake_mr {
	struct ibv_mr ibv;
	struct fake_pd *pd;
	int access;
	bool cma;	     /* shares pages with another registration */
	uint64_t base, span; /* the pages moved onto the file */
	struct fake_mr_file *hdr;
	char path[96];
	struct fake_mr *next;
};

/* A work request waiting to be executed, or executed and not yet retired. */
struct fake_swr {
	uint64_t wr_id;
	enum ibv_wr_opcode opcode;
	unsigned flags;
	uint32_t imm;
	uint64_t raddr;
	uint32_t rkey;
	int nsge;
	struct ibv_sge sge[FAKE_MAX_SGE];
	uint32_t len;
	unsigned char inl[FAKE_MAX_INLINE];
};

/* A peer's MR, mapped here. */
struct fake_rmr {
	uint32_t rkey;
	struct fake_mr_file *hdr;
	size_t maplen;
};

#define FAKE_RMR_CACHE 16

struct fake_cq;

struct fake_qp {
	struct ibv_qp ibv;
	struct fake_pd *pd;
	struct fake_cq *scq, *rcq;
	struct fake_qp_file *file;
	char path[64];
	bool sig_all;
	struct ibv_qp_cap cap;
	/* send queue: [retired, executed) done, [executed, posted) waiting */
	struct fake_swr *sq;
	uint64_t sq_posted, sq_exec, sq_retired;
	/* receive queue: wr_ids, [rq_tail, rq_head) posted */
	uint64_t *rq;
	uint64_t rq_head, rq_tail;
	/* the peer */
	struct fake_qp_file *peer;
	double stuck_since; /* the head request could not be delivered since */
	double peer_seen;   /* when the peer's pid was last found alive */
	bool told;	    /* the debug note for the current wait is out */
	struct fake_rmr rmr[FAKE_RMR_CACHE];
	int nrmr;
	/* Its path's rate (FAKE_IBVERBS_QP_RATE, _SLOW_QP; 0: none), when its
	 * head write is due (0: not timed yet), when the previous was placed. */
	unsigned index; /* among the QPs this process created */
	double path_Bps, path_due, path_free;
	struct fake_qp *next;
};

struct fake_cqe {
	struct ibv_wc wc;
	struct fake_qp *sq_of; /* a send completion: retires its queue up to sq_idx */
	uint64_t sq_idx;
};

struct fake_cq {
	struct ibv_cq ibv;
	struct fake_cqe *ring;
	uint32_t cap;
	uint64_t head, tail;
	bool overrun;
	int users;
};

/* fake_dev.c (and the test calls of fake_ibverbs_api.h) */
int weft_fake_ibv_qp_attr(uint32_t qpn, struct weft_fake_qp_attr *out);
int weft_fake_ibv_files(int pid);
void weft_fake_ibv_mr_counts(uint64_t *regs, uint64_t *deregs);
extern pthread_mutex_t fake_lock;
extern struct fake_qp *fake_qps; /* every live QP of this process */
double fake_now(void);
void fake_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
struct fake_mr *fake_mr_find(uint32_t lkey);
int fake_port_gid(struct fake_dev *dev, int port, int index, union ibv_gid *gid);

/* fake_qp.c */
void fake_qp_flush(struct fake_qp *qp);
struct fake_qp *fake_qp_by_num(uint32_t qpn);

/* fake_data.c */
bool fake_cq_push(struct fake_cq *cq, const struct ibv_wc *wc, struct fake_qp *sq_of,
		  uint64_t sq_idx);
void fake_progress_all(void);
int fake_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int fake_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int fake_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);

#endif
