/*
 * engine.c — the transfer engine (algorithms/engine/engine.h) against
 * a fake transport that records what is posted and completes it when, and
 * how, the test says: out-of-order completion, zero-byte items, signals,
 * an error mid-queue, windows of one, phases, readiness, what a task waits
 * for, and the pacing gate's accounting (core/gate.h) under WEFT_GATE=one
 * and with a pacer (WEFT_PACER=dcqcn) on a transport that reports marks.
 * No process is forked: one synthetic communicator, in this process.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/engine/engine.h"
#include "core/comm.h"
#include "core/p2p.h"
#include "transports/common/tp_stubs.h"

#define NPEERS 4
#define MAXMSG 64
#define NITEMS 6
#define PEER_A 1
#define PEER_B 2

/* --- The fake transport: remembers every message posted to it --- */

struct posted {
	struct weft_msg *msg;
	int peer;
	bool send;
};

static struct posted posted[MAXMSG];
static int nposted;

/* The window-of-one test's rules, checked as each message arrives: at most
 * one message in flight per direction, and send k > 0 only after receive
 * k - 1 completed. */
static bool window_one;
static int open_msgs[2];
static bool recv_completed[MAXMSG];

static weft_status_t fake_post(struct weft_conn *conn, struct weft_msg *msg, bool send)
{
	ck_assert_int_lt(nposted, MAXMSG);
	posted[nposted++] = (struct posted){msg, conn->peer, send};
	open_msgs[send]++;
	uint32_t step = (uint32_t)msg->tag;
	if (window_one) {
		ck_assert_int_le(open_msgs[send], 1);
		ck_assert_msg(!send || step == 0 || recv_completed[step - 1],
			      "send %u went before receive %u completed", step, step - 1);
	}
	return WEFT_SUCCESS;
}

static weft_status_t fake_isend(struct weft_conn *conn, struct weft_msg *msg)
{
	return fake_post(conn, msg, true);
}

static weft_status_t fake_irecv(struct weft_conn *conn, struct weft_msg *msg)
{
	return fake_post(conn, msg, false);
}

static const struct weft_tp_ops fake_ops = {
    .size = sizeof(struct weft_tp_ops),
    .name = "fake",
    .msg = {.isend = fake_isend, .irecv = fake_irecv},
    .signal = {.signals = weft_tp_no_signals, .pace = weft_tp_no_pace},
    .wait = WEFT_TP_NO_WAIT_OPS,
};

/* A transport that reports CE marks (fake_ce of them since the last
 * query) and records the rate the pacer hands it. */
static uint32_t fake_ce;
static double fake_rate = -1;
static bool fake_hw_paced;

static int fake_signals(struct weft_conn *conn, struct weft_tp_signal *out, int max)
{
	out[0] = (struct weft_tp_signal){.delivered = 100, .delivered_ce = fake_ce};
	fake_ce = 0;
	return 1;
}

static void fake_pace(struct weft_conn *conn, double rate_Bps)
{
	fake_rate = rate_Bps;
}

static void fake_props(struct weft_tp *tp, int peer, struct weft_tp_props *out)
{
	*out = (struct weft_tp_props){.bandwidth_Bps = 1, .rate_controlled = fake_hw_paced};
}

static const struct weft_tp_ops fake_signal_ops = {
    .size = sizeof(struct weft_tp_ops),
    .name = "fake-signals",
    .msg = {.isend = fake_isend, .irecv = fake_irecv},
    .prop = {.props = fake_props},
    .signal = {.signals = fake_signals, .pace = fake_pace},
    .wait = WEFT_TP_NO_WAIT_OPS,
};

/* Is the @p i-th message posted still the one in its slot? The engine
 * reuses a message once it has reaped it. */
static bool live(int i)
{
	for (int j = i + 1; j < nposted; j++)
		if (posted[j].msg == posted[i].msg)
			return false;
	return true;
}

/* Complete the @p i-th message posted. */
static void finish(int i, weft_status_t st)
{
	ck_assert_int_lt(i, nposted);
	ck_assert(live(i) && !posted[i].msg->done);
	open_msgs[posted[i].send]--;
	uint32_t step = (uint32_t)posted[i].msg->tag;
	if (!posted[i].send && step < MAXMSG)
		recv_completed[step] = true;
	weft_msg_complete(posted[i].msg, st);
}

/* --- A synthetic communicator and task --- */

static struct weft_comm comm;
static struct weft_peer peers[NPEERS];
static struct weft_conn conns[NPEERS];
static struct weft_task *task;

static void setup(void)
{
	memset(&comm, 0, sizeof(comm));
	memset(peers, 0, sizeof(peers));
	nposted = 0;
	window_one = false;
	memset(open_msgs, 0, sizeof(open_msgs));
	memset(recv_completed, 0, sizeof(recv_completed));
	comm.rank = 0;
	comm.nranks = NPEERS;
	comm.peers = peers;
	comm.chunk_bytes = 4096;
	comm.gate.ops = NULL;
	ck_assert_int_eq(weft_gate_init(&comm.gate, &comm.err), WEFT_SUCCESS);
	for (int p = 1; p < NPEERS; p++) {
		conns[p] = (struct weft_conn){.ops = &fake_ops, .peer = p};
		peers[p].conn = &conns[p];
		peers[p].link.peer = p;
	}
	ck_assert_int_eq(posix_memalign((void **)&task, 64, sizeof(*task)), 0);
	memset(task, 0, sizeof(*task));
	task->comm = &comm;
	task->seq = 7;
	task->args.esize = 1;
	task->waiting_for = -1;
}

static void teardown(void)
{
	free(task);
	unsetenv("WEFT_GATE");
}

/* --- What the algorithms under test say --- */

static char buf[NITEMS][16];
static int done_order[3][NITEMS * 4]; /* per queue, the k of each done callback */
static int ndone[3];
static size_t item_bytes[NITEMS]; /* bytes of item k (0: skipped) */
static bool item_signal[NITEMS];

static void item(struct weft_task *t, int q, uint32_t k, struct weft_xfer *out)
{
	out->buf = buf[k % NITEMS];
	out->bytes = item_bytes[k % NITEMS];
	out->signal = item_signal[k % NITEMS];
}

static void done(struct weft_task *t, int q, uint32_t k)
{
	done_order[q][ndone[q]++] = (int)k;
}

static const struct weft_queue_ops plain_ops = {.item = item, .done = done};

static void reset_items(size_t bytes)
{
	memset(ndone, 0, sizeof(ndone));
	for (int k = 0; k < NITEMS; k++) {
		item_bytes[k] = bytes;
		item_signal[k] = false;
	}
}

static struct weft_engine *eng(void)
{
	return weft_engine_of(task);
}

static weft_status_t progress(void)
{
	return weft_engine_progress(eng(), task);
}

/* --- Tests --- */

START_TEST(out_of_order_completion)
{
	reset_items(8);
	weft_engine_init(eng(), NULL);
	weft_engine_add_queue(eng(), &plain_ops, PEER_A, false, NITEMS, 100);
	weft_engine_start(eng(), task);
	ck_assert_int_eq(progress(), WEFT_INPROGRESS);
	ck_assert_int_eq(nposted, NITEMS); /* window 8 > 6: all posted at once */
	for (int i = 0; i < NITEMS; i++) {
		ck_assert(!posted[i].send);
		ck_assert_int_eq(posted[i].peer, PEER_A);
		ck_assert_uint_eq(posted[i].msg->tag, weft_p2p_tag(7, 100 + (uint32_t)i));
	}
	/* The later ones finish first: nothing is reaped before item 0. */
	for (int i = NITEMS - 1; i >= 1; i--)
		finish(i, WEFT_SUCCESS);
	ck_assert_int_eq(progress(), WEFT_INPROGRESS);
	ck_assert_int_eq(ndone[0], 0);
	ck_assert_int_eq(task->waiting_for, PEER_A);
	finish(0, WEFT_SUCCESS);
	ck_assert_int_eq(progress(), WEFT_SUCCESS);
	ck_assert_int_eq(ndone[0], NITEMS);
	for (int i = 0; i < NITEMS; i++)
		ck_assert_int_eq(done_order[0][i], i);
}
END_TEST

START_TEST(zero_byte_items_and_signals)
{
	reset_items(8);
	item_bytes[1] = item_bytes[2] = item_bytes[4] = 0;
	item_signal[4] = true; /* a barrier token: posted with no payload */
	weft_engine_init(eng(), NULL);
	weft_engine_add_queue(eng(), &plain_ops, PEER_B, true, NITEMS, 0);
	weft_engine_start(eng(), task);
	ck_assert_int_eq(progress(), WEFT_INPROGRESS);
	/* Items 0, 3, 4 (signal), 5 reach the transport; 1 and 2 do not. */
	ck_assert_int_eq(nposted, 4);
	ck_assert_uint_eq(posted[2].msg->len, 0);
	ck_assert_uint_eq(posted[2].msg->tag, weft_p2p_tag(7, 4));
	for (int i = 0; i < nposted; i++)
		finish(i, WEFT_SUCCESS);
	ck_assert_int_eq(progress(), WEFT_SUCCESS);
	/* Every item, skipped or not, is done in order. */
	ck_assert_int_eq(ndone[0], NITEMS);
	for (int i = 0; i < NITEMS; i++)
		ck_assert_int_eq(done_order[0][i], i);
}
END_TEST

START_TEST(error_mid_queue)
{
	reset_items(8);
	weft_engine_init(eng(), NULL);
	eng()->window_max = 2;
	weft_engine_add_queue(eng(), &plain_ops, PEER_A, false, NITEMS, 0);
	weft_engine_start(eng(), task);
	ck_assert_int_eq(progress(), WEFT_INPROGRESS);
	ck_assert_int_eq(nposted, 2);
	finish(0, WEFT_SUCCESS);
	ck_assert_int_eq(progress(), WEFT_INPROGRESS);
	ck_assert_int_eq(nposted, 3);
	finish(2, WEFT_SUCCESS);
	finish(1, WEFT_ERR_REMOTE);
	ck_assert_int_eq(progress(), WEFT_ERR_REMOTE);
	/* Item 1 failed: its done callback never ran, nothing more was posted. */
	ck_assert_int_eq(ndone[0], 1);
	ck_assert_int_eq(nposted, 3);
	ck_assert_int_eq(progress(), WEFT_ERR_REMOTE); /* and it stays failed */
}
END_TEST

/* Sends follow receives one item behind: send 0 goes at once (the ring's
 * first step sends its own data), send k needs receive k - 1 done. */
static bool follows(const struct weft_task *t, int q, uint32_t k)
{
	return weft_engine_follows(weft_engine_of(t), 0, k, 1);
}

static const struct weft_queue_ops follow_ops = {.item = item, .ready = follows, .done = done};

START_TEST(window_of_one_and_readiness)
{
	reset_items(8);
	weft_engine_init(eng(), NULL);
	eng()->window_max = 1;
	window_one = true;
	weft_engine_add_queue(eng(), &plain_ops, PEER_A, false, NITEMS, 0);
	weft_engine_add_queue(eng(), &follow_ops, PEER_B, true, NITEMS, 0);
	weft_engine_start(eng(), task);
	weft_status_t st = progress();
	ck_assert_int_eq(nposted, 2); /* receive 0, and send 0 which waits for nothing */
	ck_assert(!posted[0].send && posted[1].send);
	ck_assert_int_eq(task->waiting_for, PEER_A);
	/* Finish the oldest open message, receives and sends in turn. */
	for (int round = 0; st == WEFT_INPROGRESS && round < 4 * NITEMS; round++) {
		int pick = -1;
		for (int i = 0; i < nposted && pick < 0; i++)
			if (live(i) && !posted[i].msg->done && posted[i].send == (round % 2 == 1))
				pick = i;
		for (int i = 0; i < nposted && pick < 0; i++)
			if (live(i) && !posted[i].msg->done)
				pick = i;
		ck_assert_int_ge(pick, 0);
		finish(pick, WEFT_SUCCESS);
		st = progress();
	}
	ck_assert_int_eq(st, WEFT_SUCCESS);
	ck_assert_int_eq(nposted, 2 * NITEMS);
	ck_assert_int_eq(ndone[0], NITEMS);
	ck_assert_int_eq(ndone[1], NITEMS);
}
END_TEST

/* Two phases: phase 1's queue is set up only once phase 0 is complete. */
static int phases_begun, phases_done;

static bool phase_begin(struct weft_task *t, uint32_t phase)
{
	if (phase >= 2)
		return false;
	phases_begun++;
	weft_engine_add_queue(weft_engine_of(t), &plain_ops, phase ? PEER_B : PEER_A, false, 2,
			      phase * 10);
	return true;
}

static void phase_done(struct weft_task *t, uint32_t phase)
{
	ck_assert_int_eq((int)phase, phases_done);
	phases_done++;
}

static const struct weft_engine_ops two_phases = {.phase_begin = phase_begin,
						  .phase_done = phase_done};

START_TEST(phases)
{
	reset_items(8);
	phases_begun = phases_done = 0;
	weft_engine_init(eng(), &two_phases);
	weft_engine_start(eng(), task);
	ck_assert_int_eq(phases_begun, 1);
	ck_assert_int_eq(progress(), WEFT_INPROGRESS);
	ck_assert_int_eq(nposted, 2);
	finish(1, WEFT_SUCCESS);
	ck_assert_int_eq(progress(), WEFT_INPROGRESS);
	ck_assert_int_eq(phases_done, 0);
	finish(0, WEFT_SUCCESS);
	ck_assert_int_eq(progress(), WEFT_INPROGRESS);
	ck_assert_int_eq(phases_done, 1);
	ck_assert_int_eq(nposted, 4);
	ck_assert_int_eq(posted[2].peer, PEER_B);
	ck_assert_uint_eq(posted[3].msg->tag, weft_p2p_tag(7, 11));
	ck_assert_int_eq(task->waiting_for, PEER_B);
	finish(2, WEFT_SUCCESS);
	finish(3, WEFT_SUCCESS);
	ck_assert_int_eq(progress(), WEFT_SUCCESS);
	ck_assert_int_eq(phases_done, 2);
}
END_TEST

/* A lockstep step: pieces with peer -1 are left out on both sides. */
START_TEST(step_lists)
{
	weft_engine_init(eng(), NULL);
	struct weft_step st;
	weft_step_clear(&st);
	st.recv[1] = (struct weft_xfer){.peer = PEER_A, .buf = buf[0], .bytes = 4};
	st.send[0] = (struct weft_xfer){.peer = PEER_B, .buf = buf[1], .bytes = 4};
	weft_engine_add_step(eng(), 3, &st);
	weft_engine_start(eng(), task);
	ck_assert_int_eq(progress(), WEFT_INPROGRESS);
	ck_assert_int_eq(nposted, 2);
	ck_assert(!posted[0].send); /* receives first */
	ck_assert_uint_eq(posted[0].msg->tag, weft_p2p_tag(7, 3 * WEFT_ENGINE_STEP_PIECES + 1));
	ck_assert_uint_eq(posted[1].msg->tag, weft_p2p_tag(7, 3 * WEFT_ENGINE_STEP_PIECES + 0));
	finish(0, WEFT_SUCCESS);
	finish(1, WEFT_SUCCESS);
	ck_assert_int_eq(progress(), WEFT_SUCCESS);
}
END_TEST

/* The test gate admits one message per connection; the others wait, in
 * order, and go as the first completes. */
START_TEST(gate_one_holds_in_order)
{
	setenv("WEFT_GATE", "one", 1);
	ck_assert_int_eq(weft_gate_init(&comm.gate, &comm.err), WEFT_SUCCESS);
	reset_items(8);
	weft_engine_init(eng(), NULL);
	weft_engine_add_queue(eng(), &plain_ops, PEER_A, true, 3, 0);
	weft_engine_start(eng(), task);
	ck_assert_int_eq(progress(), WEFT_INPROGRESS);
	ck_assert_int_eq(nposted, 1); /* the engine posted 3; the gate let one through */
	struct weft_p2p_link *link = &peers[PEER_A].link;
	ck_assert_uint_eq(link->inflight_msgs, 1);
	ck_assert_uint_eq(link->inflight_bytes, 8);
	ck_assert_ptr_nonnull(link->held_head);
	for (int i = 0; i < 3; i++) {
		ck_assert_uint_eq(posted[i].msg->tag, weft_p2p_tag(7, (uint32_t)i));
		finish(i, WEFT_SUCCESS);
		ck_assert_uint_eq(link->inflight_msgs, 0);
		ck_assert_int_eq(weft_p2p_progress(&comm), WEFT_SUCCESS);
		ck_assert_int_eq(nposted, i < 2 ? i + 2 : 3);
	}
	ck_assert_int_eq(progress(), WEFT_SUCCESS);
	ck_assert_uint_eq(link->sent_msgs, 3);
	ck_assert_ptr_null(comm.held_links);
}
END_TEST

/* A dying communicator completes what the gate still holds. */
START_TEST(gate_abort_completes_held)
{
	setenv("WEFT_GATE", "one", 1);
	ck_assert_int_eq(weft_gate_init(&comm.gate, &comm.err), WEFT_SUCCESS);
	reset_items(8);
	weft_engine_init(eng(), NULL);
	weft_engine_add_queue(eng(), &plain_ops, PEER_A, true, 3, 0);
	weft_engine_start(eng(), task);
	ck_assert_int_eq(progress(), WEFT_INPROGRESS);
	weft_p2p_abort(&comm, WEFT_ERR_ABORTED);
	finish(0, WEFT_ERR_ABORTED);
	ck_assert_int_eq(progress(), WEFT_ERR_ABORTED);
	ck_assert_int_eq(nposted, 1);
	ck_assert_ptr_null(comm.held_links);
}
END_TEST

/* WEFT_PACER=dcqcn: a connection with signals gets a pacer; marks cut its
 * rate, the transport is handed the rate, and the gate holds the next send
 * until its release time (here 16 s away: 8 bytes at 0.5 B/s). Without
 * signals, or on a device that paces itself, no pacer. */
START_TEST(gate_pacer_holds_after_marks)
{
	setenv("WEFT_PACER", "dcqcn", 1);
	setenv("WEFT_PACER_MIN_RATE", "0.01", 1);
	ck_assert_int_eq(weft_gate_init(&comm.gate, &comm.err), WEFT_SUCCESS);
	struct weft_p2p_link *a = &peers[PEER_A].link, *b = &peers[PEER_B].link;
	struct weft_p2p_link *c = &peers[3].link;
	conns[PEER_A].ops = &fake_signal_ops;
	conns[3].ops = &fake_signal_ops;
	ck_assert_int_eq(weft_gate_attach(&comm.gate, a, &conns[PEER_A], 1.0, &comm.err),
			 WEFT_SUCCESS);
	ck_assert_int_eq(weft_gate_attach(&comm.gate, b, &conns[PEER_B], 1.0, &comm.err),
			 WEFT_SUCCESS);
	fake_hw_paced = true;
	ck_assert_int_eq(weft_gate_attach(&comm.gate, c, &conns[3], 1.0, &comm.err), WEFT_SUCCESS);
	fake_hw_paced = false;
	ck_assert(a->paced);
	ck_assert(!b->paced); /* no signals */
	ck_assert(!c->paced); /* the device paces itself */
	fake_ce = 5;
	weft_gate_tick(&comm.gate);
	ck_assert_uint_eq(a->pacer.cuts, 1);
	ck_assert_double_eq_tol(fake_rate, 0.5, 1e-9);
	reset_items(8);
	weft_engine_init(eng(), NULL);
	weft_engine_add_queue(eng(), &plain_ops, PEER_A, true, 3, 0);
	weft_engine_start(eng(), task);
	ck_assert_int_eq(progress(), WEFT_INPROGRESS);
	ck_assert_int_eq(nposted, 1);
	finish(0, WEFT_SUCCESS);
	ck_assert_int_eq(progress(), WEFT_INPROGRESS);
	ck_assert_int_eq(nposted, 1); /* in flight: none; the release time holds it */
	ck_assert_ptr_nonnull(a->held_head);
	weft_p2p_abort(&comm, WEFT_ERR_ABORTED);
	weft_gate_fini(&comm.gate);
	conns[PEER_A].ops = &fake_ops;
	conns[3].ops = &fake_ops;
	unsetenv("WEFT_PACER");
	unsetenv("WEFT_PACER_MIN_RATE");
}
END_TEST

START_TEST(gate_bad_name)
{
	setenv("WEFT_GATE", "maybe", 1);
	struct weft_err err = {0};
	ck_assert_int_eq(weft_gate_init(&comm.gate, &err), WEFT_ERR_INVALID_ARG);
	ck_assert_msg(strstr(err.msg, "WEFT_GATE=maybe"), "%s", err.msg);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("engine");
	TCase *tc = tcase_create("engine");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, out_of_order_completion);
	tcase_add_test(tc, zero_byte_items_and_signals);
	tcase_add_test(tc, error_mid_queue);
	tcase_add_test(tc, window_of_one_and_readiness);
	tcase_add_test(tc, phases);
	tcase_add_test(tc, step_lists);
	tcase_add_test(tc, gate_one_holds_in_order);
	tcase_add_test(tc, gate_abort_completes_held);
	tcase_add_test(tc, gate_pacer_holds_after_marks);
	tcase_add_test(tc, gate_bad_name);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
