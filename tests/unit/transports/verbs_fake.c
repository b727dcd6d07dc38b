/*
 * verbs_fake.c — the test double for libibverbs, driven through
 * Weft's own dlopen table and verbs.h's inline wrappers (ibv_post_send,
 * ibv_post_recv, ibv_poll_cq: they call the context's ops, which the
 * double fills), so what the transport relies on is what is checked:
 *
 *  - devices, ports, LIDs and GIDs come from the fake sysfs tree;
 *  - the QP state machine: RESET -> INIT -> RTR -> RTS with the masks and
 *    address vectors each step needs (RoCE without a GRH, an empty source
 *    GID, an MTU above the port's are refused), ERR and RESET from any
 *    state, posts refused in the wrong state;
 *  - RDMA writes with immediate: data, immediate, length and order of the
 *    receive completions; plain and zero-length writes; a write waits for
 *    a posted receive;
 *  - the send queue: unsignaled requests hold their slot until a later
 *    signaled completion is polled;
 *  - errors as hardware gives them: a bad lkey (IBV_WC_LOC_PROT_ERR), a
 *    bad rkey, a range outside the MR, an MR without remote write, a
 *    deregistered MR (IBV_WC_REM_ACCESS_ERR), then everything else flushed;
 *    a wrong GID or PSN, and a peer process that died, end in
 *    IBV_WC_RETRY_EXC_ERR after the QP's retry time;
 *  - registrations that are not a mapping of their own (user buffers
 *    from malloc's heap, sharing pages), written into through
 *    process_vm_writev; which registrations move their pages;
 *  - paths with a rate (FAKE_IBVERBS_QP_RATE for every QP,
 *    FAKE_IBVERBS_SLOW_QP for one): a QP's writes take len / rate each,
 *    one after the other, and another QP's do not wait for them; a
 *    malformed value fails create_qp;
 *  - teardown order (EBUSY) and no file left in /dev/shm.
 *
 * Two QPs of one process talk to each other (one on mlx5_0, one on
 * mlx5_1), except for the dead peer, which is a forked child.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fake_ibverbs/fake_ibverbs_api.h"
#include "transports/verbs/verbs_lib.h"
#include "verbs_env.h"

#define BUF_BYTES 8192
#define GID_V2	  3 /* mlx5_0's RoCE v2 IPv4-mapped entry; mlx5_1's is 4 */

static const struct weft_ibv *T;
static char why[512];

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	unsigned char *buf;
	struct ibv_mr *mr;
	int gid_index;
	union ibv_gid gid;
	uint32_t psn;
};

/* What a peer needs of a side: numbers and keys, no pointers (the dead
 * peer test sends them from another process). */
struct remote {
	uint32_t qpn, psn, rkey;
	uint64_t addr;
	union ibv_gid gid;
};

static struct remote remote_of(const struct side *s)
{
	return (struct remote){.qpn = s->qp->qp_num,
			       .psn = s->psn,
			       .rkey = s->mr->rkey,
			       .addr = (uint64_t)(uintptr_t)s->buf,
			       .gid = s->gid};
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void load(void)
{
	verbs_find_paths();
	setenv("FAKE_IBVERBS_SYSFS", verbs_sysfs_path, 1);
	T = weft_verbs_lib_load(verbs_fake_path, why, sizeof(why));
	ck_assert_msg(T, "%s", why);
}

static struct ibv_context *open_dev(const char *name)
{
	int n = 0;
	struct ibv_device **list = T->get_device_list(&n);
	ck_assert_ptr_nonnull(list);
	struct ibv_context *ctx = NULL;
	for (int i = 0; i < n && !ctx; i++)
		if (strcmp(T->get_device_name(list[i]), name) == 0)
			ctx = T->open_device(list[i]);
	T->free_device_list(list);
	ck_assert_msg(ctx, "no device %s", name);
	return ctx;
}

static void open_side(struct side *s, const char *dev, uint32_t sq, uint32_t rq, int access)
{
	memset(s, 0, sizeof(*s));
	s->ctx = open_dev(dev);
	s->pd = T->alloc_pd(s->ctx);
	s->cq = T->create_cq(s->ctx, 256, NULL, NULL, 0);
	ck_assert(s->pd && s->cq);
	struct ibv_qp_init_attr ia = {.send_cq = s->cq,
				      .recv_cq = s->cq,
				      .cap = {.max_send_wr = sq,
					      .max_recv_wr = rq,
					      .max_send_sge = 2,
					      .max_recv_sge = 1,
					      .max_inline_data = 64},
				      .qp_type = IBV_QPT_RC};
	s->qp = T->create_qp(s->pd, &ia);
	ck_assert_msg(s->qp, "create_qp: %s", strerror(errno));
	s->buf = mmap(NULL, BUF_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert(s->buf != MAP_FAILED);
	s->mr = T->reg_mr(s->pd, s->buf, BUF_BYTES, access);
	ck_assert_msg(s->mr, "reg_mr: %s", strerror(errno));
	s->gid_index = strcmp(dev, "mlx5_0") == 0 ? GID_V2 : 4;
	ck_assert_int_eq(T->query_gid(s->ctx, 1, s->gid_index, &s->gid), 0);
	s->psn = (uint32_t)(s->qp->qp_num * 7) & 0xffffff;
}

static void close_side(struct side *s)
{
	ck_assert_int_eq(T->destroy_qp(s->qp), 0);
	ck_assert_int_eq(T->dereg_mr(s->mr), 0);
	ck_assert_int_eq(T->destroy_cq(s->cq), 0);
	ck_assert_int_eq(T->dealloc_pd(s->pd), 0);
	ck_assert_int_eq(T->close_device(s->ctx), 0);
	munmap(s->buf, BUF_BYTES);
}

static int to_init(struct side *s)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
				.port_num = 1,
				.qp_access_flags =
				    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE};
	return T->modify_qp(s->qp, &a,
			    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

#define RTR_MASK                                                                                   \
	(IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |            \
	 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)
#define RTS_MASK                                                                                   \
	(IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |     \
	 IBV_QP_MAX_QP_RD_ATOMIC)

static struct ibv_qp_attr rtr_to(const struct side *s, const struct remote *peer)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR,
				.path_mtu = IBV_MTU_1024,
				.dest_qp_num = peer->qpn,
				.rq_psn = peer->psn,
				.max_dest_rd_atomic = 1,
				.min_rnr_timer = 12,
				.ah_attr = {.is_global = 1, .port_num = 1}};
	a.ah_attr.grh.dgid = peer->gid;
	a.ah_attr.grh.sgid_index = (uint8_t)s->gid_index;
	a.ah_attr.grh.hop_limit = 64;
	return a;
}

static struct ibv_qp_attr rtr_attr(const struct side *s, const struct side *peer)
{
	struct remote r = remote_of(peer);
	return rtr_to(s, &r);
}

static int to_rts(struct side *s, uint8_t timeout)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTS,
				.timeout = timeout,
				.retry_cnt = 1,
				.rnr_retry = 7,
				.sq_psn = s->psn,
				.max_rd_atomic = 1};
	return T->modify_qp(s->qp, &a, RTS_MASK);
}

/* a <-> b, both RTS; a's retries run out after ~2 ms (timeout 8). */
static void connect_pair(struct side *a, struct side *b)
{
	ck_assert_int_eq(to_init(a), 0);
	ck_assert_int_eq(to_init(b), 0);
	struct ibv_qp_attr ra = rtr_attr(a, b), rb = rtr_attr(b, a);
	ck_assert_int_eq(T->modify_qp(a->qp, &ra, RTR_MASK), 0);
	ck_assert_int_eq(T->modify_qp(b->qp, &rb, RTR_MASK), 0);
	ck_assert_int_eq(to_rts(a, 8), 0);
	ck_assert_int_eq(to_rts(b, 8), 0);
}

static int write_rem(struct side *from, const struct remote *to, size_t off, size_t len, bool imm,
		     uint32_t imm_value, unsigned flags, uint64_t id)
{
	struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)from->buf,
			      .length = (uint32_t)len,
			      .lkey = from->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = id,
				 .sg_list = len ? &sge : NULL,
				 .num_sge = len ? 1 : 0,
				 .opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE,
				 .send_flags = flags,
				 .imm_data = htonl(imm_value),
				 .wr.rdma = {.remote_addr = to->addr + off, .rkey = to->rkey}};
	struct ibv_send_wr *bad = NULL;
	return ibv_post_send(from->qp, &wr, &bad);
}

static int write_to(struct side *from, const struct side *to, size_t off, size_t len, bool imm,
		    uint32_t imm_value, unsigned flags, uint64_t id)
{
	struct remote r = remote_of(to);
	return write_rem(from, &r, off, len, imm, imm_value, flags, id);
}

static int post_recvs(struct side *s, int n, uint64_t id)
{
	for (int i = 0; i < n; i++) {
		struct ibv_recv_wr wr = {.wr_id = id + (uint64_t)i};
		struct ibv_recv_wr *bad = NULL;
		int err = ibv_post_recv(s->qp, &wr, &bad);
		if (err)
			return err;
	}
	return 0;
}

/* Up to @p n completions within @p limit seconds. */
static int poll_n(struct side *s, struct ibv_wc *wc, int n, double limit)
{
	int got = 0;
	double end = now() + limit;
	while (got < n && now() < end) {
		int k = ibv_poll_cq(s->cq, n - got, wc + got);
		ck_assert_int_ge(k, 0);
		got += k;
	}
	return got;
}

static struct weft_fake_qp_attr qp_attr(const struct ibv_qp *qp)
{
	weft_fake_qp_attr_fn fn = (weft_fake_qp_attr_fn)dlsym(T->handle, WEFT_FAKE_QP_ATTR);
	ck_assert_ptr_nonnull(fn);
	struct weft_fake_qp_attr a;
	ck_assert_int_eq(fn(qp->qp_num, &a), 0);
	return a;
}

static int files_of(int pid)
{
	weft_fake_files_fn fn = (weft_fake_files_fn)dlsym(T->handle, WEFT_FAKE_FILES);
	ck_assert_ptr_nonnull(fn);
	return fn(pid);
}

/* ---- devices ---- */

START_TEST(devices)
{
	load();
	struct ibv_context *ctx = open_dev("mlx4_0");
	struct ibv_device_attr da;
	ck_assert_int_eq(T->query_device(ctx, &da), 0);
	ck_assert_int_eq(da.phys_port_cnt, 2);
	struct ibv_port_attr pa;
	ck_assert_int_eq(weft_verbs_query_port(T, ctx, 1, &pa), 0);
	ck_assert_int_eq(pa.state, IBV_PORT_DOWN);
	ck_assert_int_eq(weft_verbs_query_port(T, ctx, 2, &pa), 0);
	ck_assert_int_eq(pa.state, IBV_PORT_ACTIVE);
	ck_assert_int_eq(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
	ck_assert_int_ne(weft_verbs_query_port(T, ctx, 3, &pa), 0);
	T->close_device(ctx);

	ctx = open_dev("mlx5_2");
	ck_assert_int_eq(weft_verbs_query_port(T, ctx, 1, &pa), 0);
	ck_assert_int_eq(pa.link_layer, IBV_LINK_LAYER_INFINIBAND);
	ck_assert_int_eq(pa.lid, 0x12);
	ck_assert_int_eq(pa.active_mtu, IBV_MTU_4096);
	T->close_device(ctx);

	ctx = open_dev("mlx5_0");
	union ibv_gid g;
	ck_assert_int_eq(T->query_gid(ctx, 1, 3, &g), 0);
	static const uint8_t want[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 10, 1};
	ck_assert_mem_eq(g.raw, want, 16);
	ck_assert_int_ne(T->query_gid(ctx, 1, 40, &g), 0);
	ck_assert_str_eq(weft_verbs_wc_str(T, IBV_WC_RETRY_EXC_ERR),
			 "transport retry counter exceeded");
	T->close_device(ctx);
}
END_TEST

/* ---- the state machine ---- */

START_TEST(qp_states)
{
	load();
	struct side a, b;
	open_side(&a, "mlx5_0", 8, 8, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	open_side(&b, "mlx5_1", 8, 8, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	ck_assert_int_eq(qp_attr(a.qp).state, IBV_QPS_RESET);
	ck_assert_int_eq(post_recvs(&a, 1, 0), EINVAL); /* nothing may be posted in RESET */
	struct ibv_qp_attr r = rtr_attr(&a, &b);
	ck_assert_int_eq(T->modify_qp(a.qp, &r, RTR_MASK), EINVAL); /* RESET -> RTR */
	struct ibv_qp_attr init = {.qp_state = IBV_QPS_INIT, .port_num = 1};
	ck_assert_int_eq(T->modify_qp(a.qp, &init, IBV_QP_STATE | IBV_QP_PORT), EINVAL);
	init.port_num = 3;
	ck_assert_int_eq(
	    T->modify_qp(a.qp, &init,
			 IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
	    EINVAL);
	ck_assert_int_eq(to_init(&a), 0);
	ck_assert_int_eq(post_recvs(&a, 1, 0), 0);
	ck_assert_int_eq(write_to(&a, &b, 0, 8, true, 1, IBV_SEND_SIGNALED, 1), EINVAL);
	ck_assert_int_eq(to_rts(&a, 8), EINVAL);				 /* INIT -> RTS */
	ck_assert_int_eq(T->modify_qp(a.qp, &r, RTR_MASK & ~IBV_QP_AV), EINVAL); /* mask */
	r.ah_attr.is_global = 0;
	ck_assert_int_eq(T->modify_qp(a.qp, &r, RTR_MASK), EINVAL); /* RoCE needs a GRH */
	r = rtr_attr(&a, &b);
	r.ah_attr.grh.sgid_index = 6; /* an empty entry */
	ck_assert_int_eq(T->modify_qp(a.qp, &r, RTR_MASK), EINVAL);
	r = rtr_attr(&a, &b);
	r.path_mtu = IBV_MTU_4096; /* the RoCE port runs 1024 */
	ck_assert_int_eq(T->modify_qp(a.qp, &r, RTR_MASK), EINVAL);
	r = rtr_attr(&a, &b);
	r.ah_attr.sl = 3;
	r.ah_attr.grh.traffic_class = 106;
	ck_assert_int_eq(T->modify_qp(a.qp, &r, RTR_MASK), 0);
	ck_assert_int_eq(to_rts(&a, 40), EINVAL); /* timeout out of range */
	struct ibv_qp_attr rts = {.qp_state = IBV_QPS_RTS, .timeout = 14};
	ck_assert_int_eq(T->modify_qp(a.qp, &rts, IBV_QP_STATE | IBV_QP_TIMEOUT), EINVAL);
	ck_assert_int_eq(to_rts(&a, 14), 0);
	struct weft_fake_qp_attr fa = qp_attr(a.qp);
	ck_assert_int_eq(fa.state, IBV_QPS_RTS);
	ck_assert_int_eq(fa.dest_qpn, b.qp->qp_num);
	ck_assert_int_eq(fa.sgid_index, GID_V2);
	ck_assert_int_eq(fa.sl, 3);
	ck_assert_int_eq(fa.traffic_class, 106);
	ck_assert_int_eq(fa.timeout, 14);
	ck_assert_int_eq(fa.rq_psn, b.psn);
	ck_assert_int_eq(fa.sq_psn, a.psn);
	ck_assert_mem_eq(fa.dgid, b.gid.raw, 16);
	ck_assert_mem_eq(fa.sgid, a.gid.raw, 16);
	/* ERR and RESET from anywhere; from RESET the machine starts over. */
	struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR};
	ck_assert_int_eq(T->modify_qp(a.qp, &err, IBV_QP_STATE), 0);
	struct ibv_wc wc[4];
	ck_assert_int_eq(poll_n(&a, wc, 1, 1.0), 1); /* the receive posted in INIT */
	ck_assert_int_eq(wc[0].status, IBV_WC_WR_FLUSH_ERR);
	ck_assert_int_eq(wc[0].opcode, IBV_WC_RECV);
	struct ibv_qp_attr reset = {.qp_state = IBV_QPS_RESET};
	ck_assert_int_eq(T->modify_qp(a.qp, &reset, IBV_QP_STATE), 0);
	ck_assert_int_eq(to_init(&a), 0);
	ck_assert_int_eq(qp_attr(a.qp).state, IBV_QPS_INIT);
	close_side(&a);
	close_side(&b);
	ck_assert_int_eq(files_of(getpid()), 0);
}
END_TEST

/* ---- writes ---- */

START_TEST(write_imm)
{
	load();
	struct side a, b;
	int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	open_side(&a, "mlx5_0", 16, 16, rw);
	open_side(&b, "mlx5_1", 16, 16, rw);
	connect_pair(&a, &b);
	for (int i = 0; i < 200; i++)
		a.buf[i] = (unsigned char)(i * 3 + 1);
	ck_assert_int_eq(post_recvs(&b, 3, 100), 0);
	ck_assert_int_eq(write_to(&a, &b, 64, 100, true, 0x1234, IBV_SEND_SIGNALED, 7), 0);
	struct ibv_wc wc[4];
	ck_assert_int_eq(poll_n(&b, wc, 1, 1.0), 1);
	ck_assert_int_eq(poll_n(&a, wc + 1, 1, 1.0), 1);
	const struct ibv_wc *rx = &wc[0], *tx = &wc[1];
	ck_assert_int_eq(rx->status, IBV_WC_SUCCESS);
	ck_assert_int_eq(rx->opcode, IBV_WC_RECV_RDMA_WITH_IMM);
	ck_assert(rx->wc_flags & IBV_WC_WITH_IMM);
	ck_assert_uint_eq(ntohl(rx->imm_data), 0x1234);
	ck_assert_uint_eq(rx->byte_len, 100);
	ck_assert_uint_eq(rx->qp_num, b.qp->qp_num);
	ck_assert_uint_eq(rx->wr_id, 100);
	ck_assert_uint_eq(tx->wr_id, 7);
	ck_assert_int_eq(tx->opcode, IBV_WC_RDMA_WRITE);
	ck_assert_mem_eq(b.buf + 64, a.buf, 100);

	/* A plain write lands silently; a zero-length one with immediate
	 * still completes a receive; completions keep the order of the writes. */
	memset(a.buf, 0x5a, 16);
	ck_assert_int_eq(write_to(&a, &b, 4000, 16, false, 0, 0, 8), 0);
	ck_assert_int_eq(write_to(&a, &b, 0, 0, true, 2, 0, 9), 0);
	ck_assert_int_eq(write_to(&a, &b, 0, 8, true, 3, IBV_SEND_INLINE, 10), 0);
	ck_assert_int_eq(poll_n(&b, wc, 2, 1.0), 2);
	ck_assert_uint_eq(ntohl(wc[0].imm_data), 2);
	ck_assert_uint_eq(wc[0].byte_len, 0);
	ck_assert_uint_eq(ntohl(wc[1].imm_data), 3);
	ck_assert_uint_eq(wc[1].wr_id, 102);
	ck_assert_int_eq(b.buf[4000], 0x5a);
	ck_assert_int_eq(b.buf[4015], 0x5a);

	/* No receive posted: the write waits (receiver not ready), then
	 * completes once one is. */
	ck_assert_int_eq(write_to(&a, &b, 0, 8, true, 4, 0, 11), 0);
	ck_assert_int_eq(poll_n(&b, wc, 1, 0.05), 0);
	ck_assert_int_eq(post_recvs(&b, 1, 200), 0);
	ck_assert_int_eq(poll_n(&b, wc, 1, 1.0), 1);
	ck_assert_uint_eq(ntohl(wc[0].imm_data), 4);
	close_side(&a);
	close_side(&b);
	ck_assert_int_eq(files_of(getpid()), 0);
}
END_TEST

START_TEST(send_queue)
{
	load();
	struct side a, b;
	int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	open_side(&a, "mlx5_0", 4, 4, rw);
	open_side(&b, "mlx5_1", 4, 4, rw);
	connect_pair(&a, &b);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(write_to(&a, &b, 0, 8, false, 0, 0, (uint64_t)i), 0);
	ck_assert_int_eq(write_to(&a, &b, 0, 8, false, 0, IBV_SEND_SIGNALED, 3), 0);
	ck_assert_int_eq(write_to(&a, &b, 0, 8, false, 0, IBV_SEND_SIGNALED, 4), ENOMEM);
	struct ibv_wc wc[4];
	ck_assert_int_eq(poll_n(&a, wc, 1, 1.0), 1);
	ck_assert_uint_eq(wc[0].wr_id, 3);
	/* The signaled completion freed all four. */
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(write_to(&a, &b, 0, 8, false, 0, 0, 10 + (uint64_t)i), 0);
	ck_assert_int_eq(write_to(&a, &b, 0, 8, false, 0, IBV_SEND_SIGNALED, 13), 0);
	ck_assert_int_eq(poll_n(&a, wc, 1, 1.0), 1);
	ck_assert_int_eq(post_recvs(&b, 4, 0), 0);
	ck_assert_int_eq(post_recvs(&b, 1, 0), ENOMEM);
	close_side(&a);
	close_side(&b);
}
END_TEST

/* ---- errors ---- */

/* Post a write that fails with @p want, then one more and a receive on
 * the sender: both flushed. */
static void expect_error(struct side *a, const struct remote *b, enum ibv_wc_status want)
{
	struct ibv_wc wc[4];
	int got = poll_n(a, wc, 1, 1.0);
	ck_assert_int_eq(got, 1);
	ck_assert_msg(wc[0].status == want, "status %d (%s), wanted %d", wc[0].status,
		      weft_verbs_wc_str(T, wc[0].status), want);
	ck_assert_int_eq(qp_attr(a->qp).state, IBV_QPS_ERR);
	ck_assert_int_eq(write_rem(a, b, 0, 8, false, 0, 0, 99), 0);
	ck_assert_int_eq(post_recvs(a, 1, 77), 0);
	ck_assert_int_eq(poll_n(a, wc, 2, 1.0), 2);
	ck_assert_int_eq(wc[0].status, IBV_WC_WR_FLUSH_ERR);
	ck_assert_int_eq(wc[1].status, IBV_WC_WR_FLUSH_ERR);
}

START_TEST(bad_keys)
{
	load();
	int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	for (int k = 0; k < 5; k++) {
		struct side a, b;
		open_side(&a, "mlx5_0", 8, 8, rw);
		open_side(&b, "mlx5_1", 8, 8, k == 3 ? IBV_ACCESS_LOCAL_WRITE : rw);
		connect_pair(&a, &b);
		struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)a.buf,
				      .length = 8,
				      .lkey = k == 0 ? a.mr->lkey + 1000 : a.mr->lkey};
		struct ibv_send_wr wr = {
		    .sg_list = &sge,
		    .num_sge = 1,
		    .opcode = IBV_WR_RDMA_WRITE,
		    .wr.rdma = {.remote_addr = (uint64_t)(uintptr_t)b.buf,
				.rkey = k == 1 ? b.mr->rkey + 1000 : b.mr->rkey}};
		if (k == 2) /* past the end of b's MR */
			wr.wr.rdma.remote_addr += BUF_BYTES - 4;
		struct remote rb = remote_of(&b);
		if (k == 4) /* b's MR is gone */
			ck_assert_int_eq(T->dereg_mr(b.mr), 0);
		struct ibv_send_wr *bad;
		ck_assert_int_eq(ibv_post_send(a.qp, &wr, &bad), 0); /* unsignaled: errors show */
		expect_error(&a, &rb, k == 0 ? IBV_WC_LOC_PROT_ERR : IBV_WC_REM_ACCESS_ERR);
		if (k == 4)
			b.mr = T->reg_mr(b.pd, b.buf, BUF_BYTES, rw);
		close_side(&a);
		close_side(&b);
	}
	ck_assert_int_eq(files_of(getpid()), 0);
}
END_TEST

/* Misaddressed: the packets go nowhere, the retries run out. */
START_TEST(bad_address)
{
	load();
	int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	for (int k = 0; k < 3; k++) {
		struct side a, b;
		open_side(&a, "mlx5_0", 8, 8, rw);
		open_side(&b, "mlx5_1", 8, 8, rw);
		ck_assert_int_eq(to_init(&a), 0);
		ck_assert_int_eq(to_init(&b), 0);
		struct ibv_qp_attr ra = rtr_attr(&a, &b), rb = rtr_attr(&b, &a);
		if (k == 0) /* b's link-local GID instead of the one b uses */
			ck_assert_int_eq(T->query_gid(b.ctx, 1, 0, &ra.ah_attr.grh.dgid), 0);
		if (k == 1)
			ra.rq_psn ^= 1; /* harmless here: a receives nothing */
		ck_assert_int_eq(T->modify_qp(a.qp, &ra, RTR_MASK), 0);
		ck_assert_int_eq(T->modify_qp(b.qp, &rb, RTR_MASK), 0);
		if (k == 1)
			a.psn ^= 1; /* b expects another PSN from a */
		ck_assert_int_eq(to_rts(&a, 8), 0);
		if (k != 2) /* k == 2: b stays in RTR; a may write to it */
			ck_assert_int_eq(to_rts(&b, 8), 0);
		ck_assert_int_eq(post_recvs(&b, 1, 0), 0);
		double t0 = now();
		ck_assert_int_eq(write_to(&a, &b, 0, 8, true, 1, IBV_SEND_SIGNALED, 5), 0);
		struct ibv_wc wc[2];
		if (k == 2) {
			ck_assert_int_eq(poll_n(&a, wc, 1, 1.0), 1);
			ck_assert_int_eq(wc[0].status, IBV_WC_SUCCESS);
		} else {
			ck_assert_int_eq(poll_n(&a, wc, 1, 2.0), 1);
			ck_assert_int_eq(wc[0].status, IBV_WC_RETRY_EXC_ERR);
			/* 4.096 us * 2^8 * (1 + 1) */
			ck_assert_double_ge(now() - t0, 0.002);
		}
		close_side(&a);
		close_side(&b);
	}
}
END_TEST

/* The peer is another process, killed (a zombie until reaped: still
 * dead to the fake). */
START_TEST(dead_peer)
{
	load();
	int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	struct side a;
	open_side(&a, "mlx5_0", 8, 8, rw);
	struct remote ra = remote_of(&a); /* the child has it from the fork */
	int up[2];
	ck_assert_int_eq(pipe(up), 0);
	pid_t child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		struct side b;
		open_side(&b, "mlx5_1", 8, 8, rw);
		struct ibv_qp_attr r = rtr_to(&b, &ra);
		if (to_init(&b) || post_recvs(&b, 4, 0) || T->modify_qp(b.qp, &r, RTR_MASK) ||
		    to_rts(&b, 8))
			_exit(2);
		struct remote rb = remote_of(&b);
		if (write(up[1], &rb, sizeof(rb)) != sizeof(rb))
			_exit(3);
		pause();
		_exit(0);
	}
	struct remote rb;
	ck_assert_int_eq(read(up[0], &rb, sizeof(rb)), (ssize_t)sizeof(rb));
	ck_assert_int_eq(to_init(&a), 0);
	struct ibv_qp_attr r = rtr_to(&a, &rb);
	ck_assert_int_eq(T->modify_qp(a.qp, &r, RTR_MASK), 0);
	ck_assert_int_eq(to_rts(&a, 8), 0);
	ck_assert_int_eq(write_rem(&a, &rb, 0, 8, true, 1, IBV_SEND_SIGNALED, 1), 0);
	struct ibv_wc wc[2];
	ck_assert_int_eq(poll_n(&a, wc, 1, 1.0), 1);
	ck_assert_int_eq(wc[0].status, IBV_WC_SUCCESS);
	kill(child, SIGKILL);
	usleep(20000); /* dead, not reaped: a zombie */
	double t0 = now();
	ck_assert_int_eq(write_rem(&a, &rb, 0, 8, true, 2, IBV_SEND_SIGNALED, 2), 0);
	ck_assert_int_eq(poll_n(&a, wc, 1, 2.0), 1);
	ck_assert_int_eq(wc[0].status, IBV_WC_RETRY_EXC_ERR);
	ck_assert_double_lt(now() - t0, 1.0);
	int status;
	waitpid(child, &status, 0);
	files_of(getpid()); /* sweeps the dead child's files */
	ck_assert_int_eq(files_of(child), 0);
	close_side(&a);
}
END_TEST

/* User buffers from malloc: registrations that share pages (with each
 * other and with the allocator's data), written into through
 * process_vm_writev, with and without immediate. */
START_TEST(shared_pages)
{
	load();
	int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	struct side a, b;
	open_side(&a, "mlx5_0", 8, 8, rw);
	open_side(&b, "mlx5_1", 8, 8, rw);
	connect_pair(&a, &b);
	unsigned char *heap = malloc(300);
	ck_assert_ptr_nonnull(heap);
	memset(heap, 0, 300);
	struct ibv_mr *m1 = T->reg_mr(b.pd, heap, 100, rw);
	struct ibv_mr *m2 = T->reg_mr(b.pd, heap + 100, 200, rw);
	ck_assert(m1 && m2);
	struct remote r1 = remote_of(&b), r2 = r1;
	r1.addr = (uint64_t)(uintptr_t)heap;
	r1.rkey = m1->rkey;
	r2.addr = (uint64_t)(uintptr_t)heap + 100;
	r2.rkey = m2->rkey;
	memset(a.buf, 0x11, 64);
	memset(a.buf + 64, 0x22, 64);
	ck_assert_int_eq(post_recvs(&b, 1, 5), 0);
	ck_assert_int_eq(write_rem(&a, &r1, 10, 50, false, 0, 0, 1), 0);
	struct ibv_sge sge = {
	    .addr = (uint64_t)(uintptr_t)a.buf + 64, .length = 64, .lkey = a.mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 2,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
				 .send_flags = IBV_SEND_SIGNALED,
				 .imm_data = htonl(9),
				 .wr.rdma = {.remote_addr = r2.addr + 100, .rkey = r2.rkey}};
	struct ibv_send_wr *bad;
	ck_assert_int_eq(ibv_post_send(a.qp, &wr, &bad), 0);
	struct ibv_wc wc[2];
	ck_assert_int_eq(poll_n(&b, wc, 1, 1.0), 1);
	ck_assert_uint_eq(ntohl(wc[0].imm_data), 9);
	for (int i = 0; i < 300; i++)
		ck_assert_int_eq(heap[i], i >= 10 && i < 60	? 0x11
					  : i >= 200 && i < 264 ? 0x22
								: 0);
	/* Past the end of the second: refused, though the page goes on. */
	ck_assert_int_eq(write_rem(&a, &r2, 150, 64, false, 0, IBV_SEND_SIGNALED, 3), 0);
	ck_assert_int_eq(poll_n(&a, wc, 2, 1.0), 2);
	ck_assert_int_eq(wc[1].status, IBV_WC_REM_ACCESS_ERR);
	ck_assert_int_eq(T->dereg_mr(m2), 0);
	ck_assert_int_eq(T->dereg_mr(m1), 0);
	free(heap);
	close_side(&a);
	close_side(&b);
	ck_assert_int_eq(files_of(getpid()), 0);
}
END_TEST

/* Does the mapping holding @p addr come from one of the double's MR files
 * (pages moved), rather than from the process's own memory? */
static bool moved(const void *addr)
{
	FILE *f = fopen("/proc/self/maps", "r");
	ck_assert_ptr_nonnull(f);
	char line[512];
	bool found = false, in_file = false;
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned long lo = 0, hi = 0;
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && lo <= (uintptr_t)addr &&
		    (uintptr_t)addr < hi) {
			found = true;
			in_file = strstr(line, "weftfake-mr-") != NULL;
		}
	}
	fclose(f);
	ck_assert(found);
	return in_file;
}

/* A mapping of its own: guard pages around it keep the kernel from
 * merging it with a neighbour. */
static unsigned char *own_pages(size_t len)
{
	unsigned char *p = mmap(NULL, len + 8192, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert(p != MAP_FAILED);
	ck_assert_int_eq(mprotect(p + 4096, len, PROT_READ | PROT_WRITE), 0);
	return p + 4096;
}

/* Which registrations move their pages: whole page ranges of the heap (as
 * a registration cache rounds a small malloc buffer to its pages) stay
 * where they are, since other objects live there; a mapping of its own
 * moves, and keeps its contents. */
START_TEST(which_pages_move)
{
	load();
	struct side a;
	open_side(&a, "mlx5_0", 8, 8, IBV_ACCESS_LOCAL_WRITE);
	int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	unsigned char *small = malloc(64);
	ck_assert_ptr_nonnull(small);
	void *lo = (void *)((uintptr_t)small & ~(uintptr_t)4095);
	struct ibv_mr *heap = T->reg_mr(a.pd, lo, 4096, rw);
	ck_assert_ptr_nonnull(heap);
	ck_assert(!moved(small));
	unsigned char *own = own_pages(3 * 4096);
	own[4096 + 5] = 7;
	struct ibv_mr *whole = T->reg_mr(a.pd, own, 3 * 4096, rw);
	ck_assert_ptr_nonnull(whole);
	ck_assert(moved(own) && moved(own + 2 * 4096));
	ck_assert_int_eq(own[4096 + 5], 7);
	/* Part of a mapping stays too. */
	unsigned char *part_of = own_pages(2 * 4096);
	struct ibv_mr *part = T->reg_mr(a.pd, part_of, 4096, rw);
	ck_assert_ptr_nonnull(part);
	ck_assert(!moved(part_of));
	ck_assert_int_eq(T->dereg_mr(part), 0);
	ck_assert_int_eq(T->dereg_mr(whole), 0);
	ck_assert_int_eq(T->dereg_mr(heap), 0);
	munmap(own - 4096, 5 * 4096);
	munmap(part_of - 4096, 4 * 4096);
	free(small);
	close_side(&a);
	ck_assert_int_eq(files_of(getpid()), 0);
}
END_TEST

/* Each test runs in a child of its own (Check forks), which loads the
 * double afresh: side a's QP is the first this process creates, index 0. */
START_TEST(slow_qp)
{
	ck_assert_int_eq(setenv("FAKE_IBVERBS_QP_RATE", "2e6", 1), 0);
	ck_assert_int_eq(setenv("FAKE_IBVERBS_SLOW_QP", "0:1e6", 1), 0);
	load();
	struct side a, b;
	int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	open_side(&a, "mlx5_0", 16, 16, rw);
	open_side(&b, "mlx5_1", 16, 16, rw);
	connect_pair(&a, &b);
	ck_assert_int_eq(post_recvs(&a, 4, 200), 0);
	ck_assert_int_eq(post_recvs(&b, 4, 100), 0);
	/* a: two writes of 8 KiB at 1 MB/s, the second done 16.4 ms after the
	 * posts; b: one at 2 MB/s (4.1 ms), not held up by a's. */
	double t0 = now();
	ck_assert_int_eq(write_to(&a, &b, 0, BUF_BYTES, true, 1, IBV_SEND_SIGNALED, 1), 0);
	ck_assert_int_eq(write_to(&a, &b, 0, BUF_BYTES, true, 2, IBV_SEND_SIGNALED, 2), 0);
	ck_assert_int_eq(write_to(&b, &a, 0, BUF_BYTES, true, 3, IBV_SEND_SIGNALED, 3), 0);
	struct ibv_wc wc[3];
	double t[3];
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(poll_n(&b, &wc[i], 1, 1.0), 1);
		t[i] = now() - t0;
	}
	ck_assert_uint_eq(wc[0].wr_id, 3); /* b's send first */
	ck_assert_uint_eq(ntohl(wc[1].imm_data), 1);
	ck_assert_uint_eq(ntohl(wc[2].imm_data), 2);
	ck_assert_msg(t[0] >= BUF_BYTES / 2e6 && t[0] < t[1] && t[1] >= BUF_BYTES / 1e6 &&
			  t[2] >= 2 * BUF_BYTES / 1e6,
		      "8 KiB writes at 2 MB/s, then two at 1 MB/s, done after %.2f, %.2f, %.2f ms",
		      t[0] * 1e3, t[1] * 1e3, t[2] * 1e3);
	ck_assert_int_eq(poll_n(&a, wc, 3, 1.0), 3); /* b's write landed, a's two sends done */
	close_side(&a);
	close_side(&b);
	/* Values that are not N:RATE, or not a rate, fail the QP's creation. */
	static const char *const bad[][2] = {
	    {"FAKE_IBVERBS_SLOW_QP", "0:fast"},
	    {"FAKE_IBVERBS_SLOW_QP", "1e6"},
	    {"FAKE_IBVERBS_QP_RATE", "-5"},
	};
	struct ibv_context *ctx = open_dev("mlx5_0");
	struct ibv_pd *pd = T->alloc_pd(ctx);
	struct ibv_cq *cq = T->create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr ia = {.send_cq = cq,
				      .recv_cq = cq,
				      .cap = {.max_send_wr = 4, .max_recv_wr = 4},
				      .qp_type = IBV_QPT_RC};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		unsetenv("FAKE_IBVERBS_SLOW_QP");
		unsetenv("FAKE_IBVERBS_QP_RATE");
		ck_assert_int_eq(setenv(bad[i][0], bad[i][1], 1), 0);
		errno = 0;
		ck_assert_msg(!T->create_qp(pd, &ia) && errno == EINVAL, "%s=%s: a QP", bad[i][0],
			      bad[i][1]);
	}
	unsetenv("FAKE_IBVERBS_SLOW_QP");
	unsetenv("FAKE_IBVERBS_QP_RATE");
	ck_assert_int_eq(T->destroy_cq(cq), 0);
	ck_assert_int_eq(T->dealloc_pd(pd), 0);
	ck_assert_int_eq(T->close_device(ctx), 0);
	ck_assert_int_eq(files_of(getpid()), 0);
}
END_TEST

START_TEST(teardown_order)
{
	load();
	struct side a;
	open_side(&a, "mlx5_0", 8, 8, IBV_ACCESS_LOCAL_WRITE);
	ck_assert_int_eq(T->destroy_cq(a.cq), EBUSY);
	ck_assert_int_eq(T->dealloc_pd(a.pd), EBUSY);
	/* Remote write without local write is refused, as the verbs say. */
	ck_assert_ptr_null(T->reg_mr(a.pd, a.buf + 4096, 4096, IBV_ACCESS_REMOTE_WRITE));
	/* Registrations may share pages. */
	struct ibv_mr *inner = T->reg_mr(a.pd, a.buf + 100, 10, IBV_ACCESS_LOCAL_WRITE);
	ck_assert_ptr_nonnull(inner);
	ck_assert_int_eq(T->dereg_mr(inner), 0);
	/* Moved pages keep their contents, and stay ours after. */
	unsigned char *page = own_pages(4096);
	page[5] = 42;
	struct ibv_mr *second = T->reg_mr(a.pd, page, 4096, IBV_ACCESS_LOCAL_WRITE);
	ck_assert_ptr_nonnull(second);
	ck_assert(moved(page));
	ck_assert_int_eq(page[5], 42);
	page[6] = 43;
	ck_assert_int_eq(T->dereg_mr(second), 0);
	ck_assert_int_eq(page[5] + page[6], 85);
	munmap(page - 4096, 3 * 4096);
	close_side(&a);
	ck_assert_int_eq(files_of(getpid()), 0);
}
END_TEST

static Suite *fake_suite(void)
{
	Suite *s = suite_create("verbs_fake");
	TCase *tc = tcase_create("fake");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, devices);
	tcase_add_test(tc, qp_states);
	tcase_add_test(tc, write_imm);
	tcase_add_test(tc, send_queue);
	tcase_add_test(tc, bad_keys);
	tcase_add_test(tc, bad_address);
	tcase_add_test(tc, dead_peer);
	tcase_add_test(tc, shared_pages);
	tcase_add_test(tc, which_pages_move);
	tcase_add_test(tc, slow_qp);
	tcase_add_test(tc, teardown_order);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(fake_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
