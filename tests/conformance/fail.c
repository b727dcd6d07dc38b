/*
 * fail.c — the conformance cases about what must fail, and how: a receive
 * that meets a send of another length (shorter, or longer: truncation) or
 * tag, a peer killed with -9 while a large message flows, and a peer that
 * closes (the transport's abort, weft_comm_abort, weft_comm_destroy). Each
 * failure is WEFT_ERR_REMOTE on the survivor, in bounded time, with a
 * message that names the peer and what it did; nothing is written past a
 * receive's buffer.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conformance.h"
#include "core/progress.h"
#include "transports/transport.h"

/* Seconds a killed peer may take to be noticed: on its host its pid can
 * be checked; elsewhere a transport waits for its connection or probes
 * to fail. */
#define KILL_NOTICE_HOST_S  1.0
#define KILL_NOTICE_APART_S 5.0

/* How long a peer that closed waits for the survivor's verdict before it
 * leaves, so that the survivor notices the close and not a dead pid. */
#define CLOSER_WAIT_S 10.0

/* ---- mismatches ---- */

struct mismatch {
	uint64_t stag, rtag;
	size_t slen, rlen;
};

/* A receive of N bytes meets a send of M < N, small or large (eager,
 * rendezvous or single copy), or of another tag. */
static const struct mismatch mismatches[] = {
    {5, 5, 100, 200},
    {5, 5, 100, 100000},
    {5, 5, 1u << 20, 2u << 20},
    {5, 6, 100, 100},
};

/* ... of M > N: truncation, by one element or by a lot. */
static const struct mismatch truncations[] = {
    {5, 5, 200, 100},
    {5, 5, 4000, 3996},
    {5, 5, 300000, 200000},
};

/* A transport that matches by tag (not ordered) never meets a receive with
 * a send of another tag: the receive waits, untouched, and a receive of
 * the send's tag gets it. */
static int wrong_tag_waits(weft_comm_t comm, const struct mismatch *mm)
{
	static unsigned char buf[2][100 + CONF_GUARD];
	static struct weft_msg wrong, right;
	memset(buf, 0xee, sizeof(buf));
	wrong = (struct weft_msg){.buf = buf[0], .len = mm->rlen, .tag = mm->rtag};
	right = (struct weft_msg){.buf = buf[1], .len = mm->slen, .tag = mm->stag};
	struct weft_msg *one[] = {&wrong}, *other[] = {&right};
	if (weft_p2p_irecv_msg(comm, 0, &wrong) != WEFT_SUCCESS)
		return harness_fail_status(comm, wrong.status, "post");
	weft_status_t st = p2p_wait(comm, one, 1, 0.2);
	if (st != WEFT_ERR_TIMEOUT || wrong.done)
		return harness_fail_status(comm, st, "a receive of tag %#llx met tag %#llx",
					   (unsigned long long)mm->rtag,
					   (unsigned long long)mm->stag);
	for (size_t i = 0; i < sizeof(buf[0]); i++)
		if (buf[0][i] != 0xee)
			return harness_fail("the waiting receive was written at byte %zu", i);
	st = weft_p2p_irecv_msg(comm, 0, &right);
	if (st == WEFT_SUCCESS)
		st = p2p_wait(comm, other, 1, CONF_WAIT_S);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "the receive of the send's tag");
	return p2p_verify(buf[1], mm->slen, 0, 1, 5) || conf_sync(comm, 2);
}

/* The error names the peer, the receive's tag and length and, with
 * @p both, the send's. */
static int names(weft_comm_t comm, const struct mismatch *mm, const char *who, int peer, bool both)
{
	char want[5][40];
	snprintf(want[0], sizeof(want[0]), "rank %d", peer);
	snprintf(want[1], sizeof(want[1]), "tag %#llx", (unsigned long long)mm->rtag);
	snprintf(want[2], sizeof(want[2]), "%zu bytes", mm->rlen);
	snprintf(want[3], sizeof(want[3]), "tag %#llx", (unsigned long long)mm->stag);
	snprintf(want[4], sizeof(want[4]), "%zu bytes", mm->slen);
	const char *const list[] = {want[0], want[1], want[2], both ? want[3] : NULL,
				    want[4], NULL};
	return conf_says_all(who, weft_comm_last_error(comm), list);
}

/* Rank 0 sends, rank 1 receives something else and fails naming both tags,
 * both lengths and rank 0, writing nothing past its buffer; rank 0 hears
 * of it: a receive from rank 1 fails within CONF_NOTICE_S (or, where it
 * finds the mismatch itself, it names the peer and what it expects). */
static int mismatch_sender(weft_comm_t comm, const struct mismatch *mm, bool by_tag)
{
	static struct weft_msg s, never;
	static uint64_t word;
	char *buf = malloc(mm->slen);
	if (!buf)
		return harness_fail("out of memory");
	p2p_fill(buf, mm->slen, 0, 1, 5);
	s = (struct weft_msg){.buf = buf, .len = mm->slen, .tag = mm->stag};
	never = (struct weft_msg){.buf = &word, .len = 8, .tag = 0x77};
	struct weft_msg *sent[] = {&s}, *wait[] = {&never};
	weft_status_t posted = weft_p2p_isend_msg(comm, 1, &s);
	/* A receiver that tells its sender where a large message goes (a
	 * rendezvous) lets the sender find the mismatch itself, at once; it
	 * names what the receiver expects (its own message may be gone). */
	if (posted == WEFT_ERR_REMOTE && !by_tag)
		return names(comm, mm, "sender", 1, false);
	if (posted != WEFT_SUCCESS)
		return harness_fail_status(comm, posted, "send");
	if (by_tag) {
		weft_status_t st = p2p_wait(comm, sent, 1, CONF_WAIT_S);
		return st == WEFT_SUCCESS ? conf_sync(comm, 2)
					  : harness_fail_status(comm, st, "send");
	}
	weft_p2p_irecv_msg(comm, 1, &never);
	double t0 = harness_now();
	weft_status_t st = p2p_wait(comm, wait, 1, CONF_WAIT_S);
	double took = harness_now() - t0;
	if (st != WEFT_ERR_REMOTE)
		return harness_fail_status(comm, st, "sender: expected a remote error");
	if (took > CONF_NOTICE_S)
		return harness_fail("sender: took %.2f s to notice", took);
	if (!s.done || (s.status != WEFT_SUCCESS && s.status != WEFT_ERR_REMOTE &&
			s.status != WEFT_ERR_ABORTED))
		return harness_fail("sender: the send was left %s (%d)",
				    s.done ? "failed" : "pending", s.status);
	return 0;
}

static int mismatch_receiver(weft_comm_t comm, const struct mismatch *mm)
{
	char *buf = malloc(mm->rlen + CONF_GUARD);
	if (!buf)
		return harness_fail("out of memory");
	conf_guard_fill(buf + mm->rlen);
	struct weft_msg r = {.buf = buf, .len = mm->rlen, .tag = mm->rtag};
	struct weft_msg *one[] = {&r};
	weft_status_t st = weft_p2p_irecv_msg(comm, 0, &r);
	if (st == WEFT_SUCCESS)
		st = p2p_wait(comm, one, 1, CONF_WAIT_S);
	if (st != WEFT_ERR_REMOTE)
		return harness_fail_status(comm, st, "receiver: expected WEFT_ERR_REMOTE");
	if (!conf_guard_ok(buf + mm->rlen))
		return harness_fail("receiver: %zu bytes written into a receive of %zu", mm->slen,
				    mm->rlen);
	return names(comm, mm, "receiver", 0, true);
}

static int body_mismatch(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const struct mismatch *mm = arg;
	bool by_tag = mm->stag != mm->rtag && !conf_ordered(comm, 1 - rank);
	if (conf_sync(comm, 1))
		return 1;
	if (rank == 0)
		return mismatch_sender(comm, mm, by_tag);
	return by_tag ? wrong_tag_waits(comm, mm) : mismatch_receiver(comm, mm);
}

START_TEST(mismatch)
{
	conf_run(2, body_mismatch, (void *)&mismatches[_i], false);
}
END_TEST

START_TEST(truncation)
{
	conf_run(2, body_mismatch, (void *)&truncations[_i], false);
}
END_TEST

/* ---- a peer killed ---- */

#define KILL_BYTES (8u << 20)

/* In the job's shared page. */
struct kill_page {
	int bytes_seen;	  /* a survivor's receive from the victim has some */
	double killed_at; /* harness_now() just before SIGKILL */
	double noticed[HARNESS_MAX_RANKS];
};

struct kill_variant {
	int victim;
	bool victim_sends; /* else it receives */
	bool hosts_apart;
};

/* Have bytes of a message of 0x5a landed in @p buf (zeroed)? */
static bool landed(const unsigned char *buf, size_t len)
{
	for (size_t off = 0; off < len; off += 4096)
		if (buf[off] || buf[off + 4095])
			return true;
	return false;
}

/* The victim's messages are in flight with every survivor: it dies once
 * bytes have moved (seen in a receive buffer: the survivors' or its own),
 * or once they all have. */
static void die_mid_message(weft_comm_t comm, struct weft_msg *big, int n,
			    const struct kill_variant *kv)
{
	struct kill_page *page = harness_shared();
	double end = harness_now() + CONF_WAIT_S;
	for (;;) {
		bool all = true, seen = __atomic_load_n(&page->bytes_seen, __ATOMIC_RELAXED);
		for (int i = 0; i < n; i++) {
			all &= big[i].done;
			seen |= !kv->victim_sends && landed(big[i].buf, big[i].len);
		}
		if (seen || all || harness_now() > end) {
			harness_progress("killing myself %s", seen  ? "mid-message"
							      : all ? "after the messages"
								    : "at the deadline");
			break;
		}
		weft_comm_progress(comm);
	}
	page->killed_at = harness_now();
	raise(SIGKILL);
}

/* A survivor: its large message with the victim and a small receive from
 * it that never comes; the small one must fail with WEFT_ERR_REMOTE, the
 * communicator too, in bounded time, naming the victim. */
static int survive(weft_comm_t comm, struct weft_msg *big, const struct kill_variant *kv)
{
	struct kill_page *page = harness_shared();
	static uint64_t word;
	static struct weft_msg never; /* failed by destroy if still pending */
	never = (struct weft_msg){.buf = &word, .len = 8, .tag = 8};
	if (weft_p2p_irecv_msg(comm, kv->victim, &never) != WEFT_SUCCESS)
		return harness_fail_status(comm, never.status, "post");
	double end = harness_now() + 3 * KILL_NOTICE_APART_S;
	while (!never.done && harness_now() < end) {
		if (kv->victim_sends && landed(big->buf, big->len))
			__atomic_store_n(&page->bytes_seen, 1, __ATOMIC_RELAXED);
		weft_comm_progress(comm);
	}
	double took = harness_now() - page->killed_at;
	page->noticed[comm->rank] = took;
	weft_status_t async = WEFT_SUCCESS;
	weft_comm_get_async_error(comm, &async);
	if (!never.done || never.status != WEFT_ERR_REMOTE || async != WEFT_ERR_REMOTE)
		return harness_fail_status(comm, async, "survivor: the receive from the victim %s",
					   never.done ? "failed wrongly" : "is still pending");
	double bound = kv->hosts_apart ? KILL_NOTICE_APART_S : KILL_NOTICE_HOST_S;
	if (took > bound)
		return harness_fail("survivor: took %.2f s to notice (bound %.1f s)", took, bound);
	char who[16];
	snprintf(who, sizeof(who), "rank %d", kv->victim);
	const char *word_says = kv->hosts_apart ? conf_now->says.unreachable : conf_now->says.died;
	const char *const want[] = {who, word_says, NULL};
	return conf_says_all("survivor", weft_comm_last_error(comm), want);
}

static int body_killed(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const struct kill_variant *kv = arg;
	if (conf_sync(comm, 1))
		return 1;
	static struct weft_msg big[HARNESS_MAX_RANKS];
	int n = 0;
	for (int p = 0; p < nranks; p++) {
		if (p == rank || (rank != kv->victim && p != kv->victim))
			continue;
		bool send = (rank == kv->victim) == kv->victim_sends;
		big[n] =
		    (struct weft_msg){.buf = calloc(1, KILL_BYTES), .len = KILL_BYTES, .tag = 7};
		if (!big[n].buf)
			return harness_fail("out of memory");
		if (send)
			memset(big[n].buf, 0x5a, KILL_BYTES);
		weft_status_t st = send ? weft_p2p_isend_msg(comm, p, &big[n])
					: weft_p2p_irecv_msg(comm, p, &big[n]);
		if (st != WEFT_SUCCESS)
			return harness_fail_status(comm, st, "post");
		n++;
	}
	if (rank == kv->victim)
		die_mid_message(comm, big, n, kv);
	return survive(comm, &big[0], kv);
}

/* _i: bit 0, the victim receives (rank 1) instead of sending (rank 0, the
 * bootstrap root's host too); bit 1, each rank on a host of its own. */
START_TEST(killed)
{
	struct kill_variant kv = {
	    .victim = _i & 1, .victim_sends = !(_i & 1), .hosts_apart = (_i & 2) != 0};
	struct harness_job job = {.nranks = 3,
				  .body = body_killed,
				  .arg = &kv,
				  .before_init = kv.hosts_apart ? conf_hosts_apart : NULL};
	struct harness_result res;
	conf_run_job(&job, &res);
	ck_assert_msg(res.rank[kv.victim].end == HARNESS_SIGNALED, "%s: victim did not die: %s",
		      conf_now->name, res.summary);
	const struct kill_page *page = (const struct kill_page *)res.shared;
	for (int r = 0; r < 3; r++) {
		if (r == kv.victim)
			continue;
		ck_assert_msg(res.rank[r].end == HARNESS_EXITED && res.rank[r].code == 0,
			      "%s: survivor %d: %s", conf_now->name, r, res.summary);
		printf("%s: kill -9 of rank %d (%s, %s; %s): rank %d noticed in %.3f s\n",
		       conf_now->name, kv.victim, kv.victim_sends ? "sending" : "receiving",
		       kv.hosts_apart ? "hosts apart" : "one host", res.rank[kv.victim].progress, r,
		       page->noticed[r]);
	}
	fflush(stdout);
}
END_TEST

/* ---- a peer that closes ---- */

enum close_how {
	CLOSE_TP_ABORT,	  /* the transport's life.abort */
	CLOSE_COMM_ABORT, /* weft_comm_abort */
	CLOSE_DESTROY,	  /* weft_comm_destroy (the harness's, after the body) */
};

struct close_page {
	double closed_at;
	int verdict_in; /* the survivor has its verdict: the closer may leave */
};

/* The closer stays alive until the survivor has seen the close. */
static int await_verdict(void)
{
	struct close_page *page = harness_shared();
	for (double end = harness_now() + CLOSER_WAIT_S;
	     !__atomic_load_n(&page->verdict_in, __ATOMIC_ACQUIRE); usleep(1000))
		if (harness_now() > end)
			return harness_fail("closer: the survivor never noticed");
	return 0;
}

static int closer_after_destroy(int rank, int nranks, void *arg)
{
	return rank == 0 && *(const enum close_how *)arg == CLOSE_DESTROY ? await_verdict() : 0;
}

/* Rank 0 closes with a receive from rank 1 posted: its own fails with
 * WEFT_ERR_ABORTED at once (and so does a send posted after the transport's
 * abort). */
static int closer(weft_comm_t comm, struct weft_msg *r, enum close_how how)
{
	struct close_page *page = harness_shared();
	page->closed_at = harness_now();
	if (how == CLOSE_DESTROY)
		return 0;
	if (how == CLOSE_COMM_ABORT) {
		weft_comm_abort(comm);
		struct weft_msg *one[] = {r};
		weft_status_t st = p2p_wait(comm, one, 1, CONF_WAIT_S);
		if (st != WEFT_ERR_ABORTED)
			return harness_fail_status(comm, st, "aborter: expected aborted");
		return await_verdict();
	}
	struct weft_tp *tp = conf_tp(comm, 1);
	tp->ops->life.abort(tp);
	if (!r->done || r->status != WEFT_ERR_ABORTED)
		return harness_fail("abort left the receive %s",
				    r->done ? "failed wrongly" : "queued");
	static char byte;
	static struct weft_msg late;
	late = (struct weft_msg){.buf = &byte, .len = 1, .tag = 2};
	if (weft_p2p_isend_msg(comm, 1, &late) != WEFT_ERR_ABORTED || !late.done ||
	    late.status != WEFT_ERR_ABORTED)
		return harness_fail("a send after the transport's abort was accepted");
	return await_verdict();
}

static int body_closed(weft_comm_t comm, int rank, int nranks, void *arg)
{
	enum close_how how = *(const enum close_how *)arg;
	if (conf_sync(comm, 1))
		return 1;
	/* Static: the closer's is failed by destroy, after the body. */
	static char buf[64];
	static struct weft_msg r;
	r = (struct weft_msg){.buf = buf, .len = sizeof(buf), .tag = 3};
	weft_status_t st = weft_p2p_irecv_msg(comm, 1 - rank, &r);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "post");
	if (rank == 0)
		return closer(comm, &r, how);
	struct close_page *page = harness_shared();
	struct weft_msg *one[] = {&r};
	st = p2p_wait(comm, one, 1, CONF_WAIT_S);
	double took = harness_now() - page->closed_at;
	__atomic_store_n(&page->verdict_in, 1, __ATOMIC_RELEASE);
	if (st != WEFT_ERR_REMOTE)
		return harness_fail_status(comm, st, "survivor: expected WEFT_ERR_REMOTE");
	if (took > CONF_NOTICE_S)
		return harness_fail("survivor: took %.2f s to notice", took);
	const char *const want[] = {"rank 0", how == CLOSE_DESTROY ? NULL : conf_now->says.aborted,
				    NULL};
	return conf_says_all("survivor", weft_comm_last_error(comm), want);
}

START_TEST(closed)
{
	enum close_how how = (enum close_how)_i;
	struct harness_job job = {
	    .nranks = 2, .body = body_closed, .arg = &how, .after_destroy = closer_after_destroy};
	struct harness_result res;
	conf_run_job(&job, &res);
	ck_assert_msg(res.ok, "%s: %s", conf_now->name, res.summary);
}
END_TEST

void conf_fail_cases(Suite *s)
{
	conf_add_case(s, "mismatch", mismatch, (int)(sizeof(mismatches) / sizeof(mismatches[0])));
	conf_add_case(s, "truncation", truncation,
		      (int)(sizeof(truncations) / sizeof(truncations[0])));
	conf_add_case(s, "killed", killed, conf_now->flags & CONF_HOSTS_APART ? 4 : 2);
	conf_add_case(s, "closed", closed, 3);
}
