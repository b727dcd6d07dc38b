/*
 * ofi.h — internals of the libfabric transport: ofi.c (life, connections,
 * properties, the ops table), ofi_lib.c (libfabric through dlopen),
 * ofi_info.c (choosing a provider), ofi_tagged.c (the tagged path),
 * ofi_rma.c (the rma path: the primitives under transports/common/rma_proto.h).
 * Not included outside transports/ofi/.
 *
 * One fabric, domain, completion queue and address vector per
 * communicator, and one endpoint (FI_EP_RDM) or, on the tagged path,
 * WEFT_OFI_EPS of them: sub-flows. Every endpoint of a rank talks to the
 * same-numbered endpoint of each peer, and a message takes the one its tag
 * picks (on both sides alike, so the receive is posted where the message
 * lands); a connection-based provider (tcp;ofi_rxm) opens a connection
 * per endpoint pair, with its own source port, so ECMP hashes the
 * sub-flows onto different paths. Endpoint names travel in the card every
 * rank allgathers at init, with the RMA region's key; the address vector
 * holds every peer's endpoints. Progress is manual: only weft's progress
 * calls move data.
 *
 * Two paths, one per communicator (WEFT_OFI_PROTO, the same on every rank):
 *  - tagged: fi_tsend / fi_trecv, directed receives (FI_DIRECTED_RECV),
 *    the provider's own eager and rendezvous protocols. The ofi tag packs
 *    the communicator (7 bits), the operation's sequence (24 bits) and its
 *    step (32 bits); bit 63 marks liveness probes. Messages match by tag,
 *    so they may complete out of order (props: ordered = false).
 *  - rma: the protocol of transports/common/rma_proto.h (the one verbs
 *    runs) over fi_writedata; remote completions name the writer by the
 *    rank in the upper half of the 64-bit CQ data, or by FI_SOURCE where
 *    the provider carries only 4 bytes.
 */
#ifndef WEFT_TP_OFI_H
#define WEFT_TP_OFI_H

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transports/common/mr_cache.h"
#include "transports/common/rma_proto.h"
#include "transports/common/tp_liveness.h"
#include "transports/common/tp_queue.h"
#include "transports/common/tp_watchdog.h"
#include "transports/ofi/ofi_ops.h"
#include "transports/transport.h"

#define OFI_NAME_MAX   256 /* endpoint name bytes in a card: every endpoint's, end to end */
#define OFI_EPS_MAX    8   /* endpoints per rank (WEFT_OFI_EPS) */
#define OFI_PROV_MAX   32
#define OFI_CARD_MAGIC 0x57454654304f4649ull /* "WEFT0OFI" */
#define OFI_API	       FI_VERSION(1, 17)

/* libfabric's exported functions, reached through dlopen (ofi_lib.c):
 * everything else in its API is inline over the objects' ops tables. */
struct ofi_lib {
	void *handle;
	int (*getinfo)(uint32_t version, const char *node, const char *service, uint64_t flags,
		       const struct fi_info *hints, struct fi_info **info);
	void (*freeinfo)(struct fi_info *info);
	struct fi_info *(*dupinfo)(const struct fi_info *info);
	int (*fabric)(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context);
	const char *(*strerror)(int errnum);
};

enum ofi_proto {
	OFI_PROTO_TAGGED = 0,
	OFI_PROTO_RMA = 1,
};

/* What each rank publishes at init. */
struct ofi_card {
	uint64_t magic;
	int32_t status; /* weft_status_t of this rank's setup; not SUCCESS: unusable */
	uint32_t proto;
	uint64_t chunk;
	char prov[OFI_PROV_MAX];
	uint32_t namelen; /* of one endpoint's name */
	uint32_t neps;	  /* endpoints, their names one after the other in name */
	unsigned char name[OFI_NAME_MAX];
	struct weft_rma_card rma;
	struct weft_live_card live;
};

/* Tagged path: one posted operation. The provider's context is inside it
 * (FI_CONTEXT / FI_CONTEXT2 providers keep their state there). */
enum ofi_op {
	OFI_OP_SEND = 1,
	OFI_OP_RECV,
	OFI_OP_PROBE,	  /* a liveness probe we sent */
	OFI_OP_PROBE_RECV /* the receive that swallows peers' probes */
};

struct ofi_req {
	struct weft_tp_req base;
	struct fi_context2 ctx; /* what the provider gets: FI_CONTEXT, FI_CONTEXT2 */
	enum ofi_op op;
	unsigned flow; /* the endpoint it is posted on */
	struct ofi_conn *conn;
	struct weft_mr_entry *mr;
	void *bounce; /* an in-place reducing receive lands here */
	bool posted;  /* handed to the provider (else waiting in pendq) */
};

struct ofi_tp;

struct ofi_conn {
	struct weft_conn base;
	struct ofi_tp *tp;
	fi_addr_t addr;		/* the peer's first endpoint (probes, rma) */
	const fi_addr_t *addrs; /* all its endpoints: tp->addrs + peer * tp->neps */
	bool broken;
	weft_status_t fail_status;
	/* tagged */
	struct weft_tp_reqq reqs; /* every message in flight, in post order */
	void *bounce[2];	  /* for in-place reducing receives, allocated on first use */
	bool bounce_busy[2];
	size_t bounce_len;
	bool probing;
	struct ofi_req probe;
	unsigned nmsgs; /* messages posted and not done */
	bool on_work;	/* in tp->work */
	bool moved;
	struct weft_watchdog wd;
	double connect_failing_since; /* 0, or when posts began to fail with -FI_ENOENT */
	/* rma */
	struct weft_rma_conn rc;
};

struct ofi_tp {
	struct weft_tp base;
	struct ofi_lib lib;
	enum ofi_proto proto;
	const char *idle; /* not NULL: the transport serves nobody, and why */
	char idle_buf[192];
	struct weft_tp_env quiet_env; /* while looking around unasked (ofi.c) */
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_ep *ep; /* eps[0] */
	struct fid_ep *eps[OFI_EPS_MAX];
	unsigned neps; /* WEFT_OFI_EPS: 1 on the rma path */
	struct fid_cq *cq;
	struct fid_av *av;
	bool ep_closed;
	bool hardware;	   /* a provider with a NIC behind it: outranks the socket transport */
	bool rank_in_data; /* the writer's rank rides in the CQ data's upper half */
	uint64_t next_key; /* requested keys (no FI_MR_PROV_KEY) */
	fi_addr_t *addrs;  /* nranks x neps: rank r's endpoint i at r * neps + i */
	struct ofi_card *cards;
	struct ofi_conn *conns; /* nranks */
	size_t chunk;
	double stall_s;
	struct weft_live live; /* tp_liveness.h */

	/* tagged */
	struct weft_tp_pool reqs;
	struct weft_mr_cache cache;
	struct weft_tp_reqq pendq; /* found the provider's queue full */
	struct ofi_conn **work;	   /* connections with messages in flight */
	int nwork;
	unsigned tag_seq_bits;
	uint64_t comm_bits;
	struct ofi_req probe_rx; /* swallows peers' probes */
	uint64_t probe_sink;
	struct weft_mr_reg probe_mr; /* FI_MR_LOCAL: probe_sink's */

	/* rma */
	struct weft_rma rma;
	struct fi_context2 *imm_ctx; /* FI_RX_CQ_DATA: receives for immediates */
	size_t nimm_ctx;
	unsigned imm_owed;
	weft_status_t error; /* failure to return from the next progress */
};

/* ofi_lib.c: load libfabric (WEFT_OFI_LIB); false with *why set. */
bool weft_ofi_lib_load(struct ofi_lib *lib, char *why, size_t len);
/* "fi_strerror text" of a negative libfabric return. */
const char *weft_ofi_strerror(const struct ofi_tp *tp, int ret);
/* A post's libfabric return, with -FI_ENOENT turned into -FI_EAGAIN for a
 * while: the sockets provider connects on the first post to a peer and
 * reports a connect that failed (lost a race with the peer's own, or met a
 * busy listener) as -FI_ENOENT, clearing its entry for the next try. A
 * peer that is really gone keeps failing, and is reported after
 * OFI_CONNECT_RETRY_S. */
int weft_ofi_retry_connect(struct ofi_conn *c, int ret);
/* Record a libfabric failure: "ofi: <what>: <fi_strerror>", WEFT_ERR_SYSTEM. */
weft_status_t weft_ofi_fail(struct ofi_tp *tp, int ret, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ofi_info.c */
/* "NAME=value: expected ...", WEFT_ERR_INVALID_ARG. */
weft_status_t weft_ofi_bad_setting(const struct weft_tp_env *env, const char *name,
				   const char *expected);
/* Did the user ask for ofi (WEFT_TRANSPORTS, WEFT_OFI_PROVIDER, FI_PROVIDER)? */
bool weft_ofi_requested(void);
/* Does this host show RDMA hardware a provider could drive? */
bool weft_ofi_hardware_visible(void);
/* Choose tp->info for @p proto: the provider asked for, else the first
 * that fits, on the interface the job uses. Errors name the provider and
 * the ones that would work. */
weft_status_t weft_ofi_choose(struct ofi_tp *tp);
/* Is @p prov a provider with hardware behind it? */
bool weft_ofi_prov_is_hardware(const char *prov);

/* ofi_mr.c: a registration for local use and remote reads and writes,
 * with the provider's mr_mode honoured; and its end. */
weft_status_t weft_ofi_mr_reg(struct ofi_tp *tp, void *buf, size_t len, struct weft_mr_reg *out);
void weft_ofi_mr_dereg(struct ofi_tp *tp, struct weft_mr_reg *reg);

/* ofi.c: is @p peer known to be gone (the liveness listener's word)? */
bool weft_ofi_peer_gone(struct ofi_tp *tp, int peer, char *why, size_t len);

/* ofi_tagged.c */
weft_status_t weft_ofi_tagged_init(struct ofi_tp *tp);
void weft_ofi_tagged_fini(struct ofi_tp *tp);
weft_status_t weft_ofi_tagged_isend(struct weft_conn *conn, struct weft_msg *msg);
weft_status_t weft_ofi_tagged_irecv(struct weft_conn *conn, struct weft_msg *msg);
weft_status_t weft_ofi_tagged_progress(struct ofi_tp *tp);
/* Sends handed to the provider and not completed? */
bool weft_ofi_tagged_sends_pending(const struct ofi_tp *tp);
void weft_ofi_tagged_fail_conn(struct ofi_conn *c, weft_status_t status);

/* ofi_rma.c */
weft_status_t weft_ofi_rma_init(struct ofi_tp *tp);
weft_status_t weft_ofi_rma_connect(struct ofi_tp *tp, int peer);
weft_status_t weft_ofi_rma_isend(struct weft_conn *conn, struct weft_msg *msg);
weft_status_t weft_ofi_rma_irecv(struct weft_conn *conn, struct weft_msg *msg);
weft_status_t weft_ofi_rma_progress(struct ofi_tp *tp);

#endif
