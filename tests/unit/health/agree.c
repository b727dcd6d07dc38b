/*
 * agree.c — the shrink's agreement (health/agree_proto.h) over a simulated
 * network, thousands of random runs: messages dropped, repeated, delayed
 * and reordered; ranks that crash at any moment (proposers in the middle
 * of a ballot included) and join late; detectors that see a crash after
 * different delays on different ranks and, across hosts, suspect live
 * ranks that are only slow. What must hold in every run:
 *
 *  - agreement: every rank that decides decides the same value, crashed
 *    deciders included (the property the shrink exists for);
 *  - validity: one host (a perfect detector: only crashed ranks are ever
 *    found gone): the value leaves out only crashed ranks;
 *  - termination: when the detectors settle (no false suspicion after a
 *    point) and a quorum is alive, every live rank decides; across hosts
 *    with half of the ranks or more crashed, no rank decides.
 *
 * A broken protocol shows here: the test has a mode that removes the
 * acceptor's promise check (an acceptor that accepts any ballot) and
 * asserts that some run then disagrees — proof that the checks can fail.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "health/agree_proto.h"

#define MAXN	  8
#define MAXMSG	  20000
#define STEP_S	  0.001
#define MAX_STEPS 60000

struct sim_msg {
	int to;
	double at;
	struct agree_msg m;
	struct agree_blob *v;
};

struct sim_rank {
	bool crashed, joined, decided, gave_up;
	double crash_at, join_at;
	struct agree_acceptor acc;
	struct agree_proposer prop;
	bool has_prop;
	int rival;
	double rival_until, learn_sent;
	unsigned learns;
	struct agree_blob *value;
};

struct sim {
	int n;
	bool one_host, broken;
	double now;
	double drop, dup, max_delay;
	double detect[MAXN][MAXN];	  /* observer sees r's crash this long after it */
	double suspect_until[MAXN][MAXN]; /* observer wrongly suspects r until then */
	struct sim_rank rank[MAXN];
	struct sim_msg *q;
	int nq;
	unsigned seed;
	int me; /* the rank whose env callbacks run */
};

static double uniform(struct sim *s)
{
	return (double)rand_r(&s->seed) / RAND_MAX;
}

static weft_rank_failure_t sim_gone(void *ctx, int r)
{
	struct sim *s = ctx;
	struct sim_rank *k = &s->rank[r];
	if (r == s->me)
		return WEFT_RANK_ALIVE;
	if (k->crashed && s->now >= k->crash_at + s->detect[s->me][r])
		return WEFT_RANK_KILLED;
	if (!s->one_host && s->now < s->suspect_until[s->me][r])
		return WEFT_RANK_UNREACHABLE;
	return WEFT_RANK_ALIVE;
}

static bool sim_listed(void *ctx, int r)
{
	(void)ctx;
	(void)r;
	return false;
}

static void post(struct sim *s, int to, const struct agree_msg *m)
{
	int copies = uniform(s) < s->drop ? 0 : uniform(s) < s->dup ? 2 : 1;
	for (int c = 0; c < copies && s->nq < MAXMSG; c++) {
		struct sim_msg *e = &s->q[s->nq++];
		e->to = to;
		e->at = s->now + uniform(s) * s->max_delay;
		e->m = *m;
		e->v = agree_blob_copy(m->value);
		e->m.value = e->v;
	}
}

static void sim_send(void *ctx, int to, const struct agree_msg *m)
{
	post(ctx, to, m);
}

static bool sim_root(void *ctx, unsigned char addr[AGREE_ROOT_BYTES], uint32_t *len)
{
	struct sim *s = ctx;
	memset(addr, 0, AGREE_ROOT_BYTES);
	addr[0] = (unsigned char)s->me;
	*len = 16;
	return true;
}

static struct agree_env env_of(struct sim *s)
{
	return (struct agree_env){.ctx = s,
				  .nranks = s->n,
				  .one_host = s->one_host,
				  .gone = sim_gone,
				  .listed = sim_listed,
				  .send = sim_send,
				  .root = sim_root};
}

/* An acceptor that forgets what it accepted and ignores its promises (the
 * "broken" mode). */
static bool broken_take(struct agree_acceptor *a, const struct agree_msg *in, struct agree_msg *out)
{
	if (a->joined && in->instance == a->instance &&
	    (in->type == AGREE_PREPARE || in->type == AGREE_ACCEPT)) {
		a->promised = 0;
		if (in->type == AGREE_PREPARE) {
			free(a->acc);
			a->acc = NULL;
			a->acc_ballot = 0;
		}
	}
	return agree_acceptor_take(a, in, out);
}

static void deliver(struct sim *s, struct sim_msg *e)
{
	struct sim_rank *k = &s->rank[e->to];
	if (k->crashed)
		return;
	struct agree_msg out;
	switch (e->m.type) {
	case AGREE_PROMISE:
	case AGREE_ACCEPTED:
	case AGREE_NACK:
	case AGREE_NOT_JOINED:
		if (k->has_prop)
			agree_proposer_take(&k->prop, &e->m);
		return;
	case AGREE_PENDING: return;
	default: break;
	}
	bool reply = s->broken ? broken_take(&k->acc, &e->m, &out)
			       : agree_acceptor_take(&k->acc, &e->m, &out);
	if (reply)
		post(s, e->m.from, &out);
}

static void deliver_due(struct sim *s)
{
	for (int i = 0; i < s->nq;) {
		if (s->q[i].at > s->now || uniform(s) < 0.3) { /* not yet, or reordered */
			i++;
			continue;
		}
		struct sim_msg e = s->q[i];
		s->q[i] = s->q[--s->nq];
		deliver(s, &e);
		free(e.v);
	}
}

static int candidate(struct sim *s, struct sim_rank *k)
{
	if (k->rival >= 0 && s->now < k->rival_until && sim_gone(s, k->rival) == WEFT_RANK_ALIVE)
		return k->rival;
	k->rival = -1;
	for (int r = 0; r < s->n; r++)
		if (sim_gone(s, r) == WEFT_RANK_ALIVE)
			return r;
	return s->me;
}

static void propose(struct sim *s, struct sim_rank *k)
{
	struct agree_env env = env_of(s);
	if (!k->has_prop) {
		ck_assert(agree_proposer_init(&k->prop, s->me, s->n, 0));
		k->has_prop = true;
	}
	switch (agree_proposer_step(&k->prop, &k->acc, &env, s->now)) {
	case AGREE_DECIDED: {
		struct agree_msg d = {.type = AGREE_DECIDE, .from = s->me, .value = k->prop.value},
				 out;
		agree_acceptor_take(&k->acc, &d, &out);
		for (int r = 0; r < s->n; r++)
			if (r != s->me)
				post(s, r, &d);
		break;
	}
	case AGREE_NOQUORUM: k->gave_up = true; break;
	case AGREE_STAND_BACK:
		k->rival = k->prop.rival;
		k->rival_until = s->now + 0.05;
		break;
	default: break;
	}
}

static void step_rank(struct sim *s, int r)
{
	struct sim_rank *k = &s->rank[r];
	s->me = r;
	if (k->crashed || k->gave_up || k->decided)
		return;
	if (k->acc.no_quorum_from >= 0) { /* a proposer found no quorum: give up too */
		k->gave_up = true;
		return;
	}
	if (!k->joined && s->now >= k->join_at) {
		agree_acceptor_join(&k->acc, 0, 0);
		k->joined = true;
	}
	if (!k->joined)
		return;
	const struct agree_blob *v = agree_acceptor_decided(&k->acc, 0);
	if (v) {
		k->decided = true;
		k->value = agree_blob_copy(v);
		return;
	}
	int c = candidate(s, k);
	if (c == r) {
		propose(s, k);
	} else if (s->now - k->learn_sent >= AGREE_RESEND_S) {
		struct agree_msg m = {.type = AGREE_LEARN, .from = r};
		k->learn_sent = s->now;
		post(s, c, &m);
		if (++k->learns % 4 == 0)
			post(s, (int)(k->learns / 4) % s->n, &m);
	}
}

struct outcome {
	int decided, live, crashed;
	bool agree, valid;
};

static void setup_sim(struct sim *s, unsigned seed, int n, bool one_host, int crashes, bool settled)
{
	memset(s, 0, sizeof(*s));
	s->seed = seed;
	s->n = n;
	s->one_host = one_host;
	s->drop = uniform(s) * 0.3;
	s->dup = uniform(s) * 0.2;
	s->max_delay = 0.0005 + uniform(s) * 0.01;
	s->q = calloc(MAXMSG, sizeof(*s->q));
	for (int r = 0; r < n; r++) {
		struct sim_rank *k = &s->rank[r];
		agree_acceptor_init(&k->acc, r);
		k->rival = -1;
		k->crash_at = 1e9;
		k->join_at = uniform(s) < 0.3 ? uniform(s) * 0.2 : 0;
		for (int o = 0; o < n; o++) {
			s->detect[o][r] = uniform(s) * 0.1;
			/* across hosts, a slow rank is suspected by some, for a while */
			if (!one_host && !settled && uniform(s) < 0.15)
				s->suspect_until[o][r] = uniform(s) * 0.3;
		}
	}
	for (int c = 0; c < crashes; c++) {
		int r = rand_r(&s->seed) % n;
		s->rank[r].crash_at = uniform(s) < 0.5 ? 0 : uniform(s) * 0.15;
	}
}

static void finish(struct sim *s, struct outcome *o)
{
	memset(o, 0, sizeof(*o));
	o->agree = o->valid = true;
	const struct agree_blob *first = NULL;
	for (int r = 0; r < s->n; r++) {
		struct sim_rank *k = &s->rank[r];
		o->crashed += k->crash_at < 1e9;
		o->live += !k->crashed;
		if (!k->value)
			continue;
		o->decided += !k->crashed;
		if (!first)
			first = k->value;
		else if (!agree_blob_equal(first, k->value))
			o->agree = false;
		const struct agree_value_hdr *h = agree_blob_hdr(k->value);
		const uint32_t *x = agree_blob_excl(k->value);
		for (uint32_t i = 0; s->one_host && h->kind == AGREE_MEMBERS && i < h->nexcl; i++)
			if (s->rank[x[i] & 0xffffff].crash_at >= 1e9)
				o->valid = false;
	}
	for (int r = 0; r < s->n; r++) {
		struct sim_rank *k = &s->rank[r];
		if (k->has_prop)
			agree_proposer_free(&k->prop);
		agree_acceptor_free(&k->acc);
		free(k->value);
	}
	for (int i = 0; i < s->nq; i++)
		free(s->q[i].v);
	free(s->q);
}

static void run(unsigned seed, int n, bool one_host, int crashes, bool broken, bool settled,
		struct outcome *o)
{
	static struct sim s;
	setup_sim(&s, seed, n, one_host, crashes, settled);
	s.broken = broken;
	for (int step = 0; step < MAX_STEPS; step++) {
		s.now = step * STEP_S;
		bool busy = false;
		for (int r = 0; r < n; r++) {
			struct sim_rank *k = &s.rank[r];
			if (!k->crashed && s.now >= k->crash_at)
				k->crashed = true;
			busy |= !k->crashed && !k->decided && !k->gave_up;
		}
		if (!busy)
			break;
		deliver_due(&s);
		for (int r = 0; r < n; r++)
			step_rank(&s, (r + step) % n);
	}
	finish(&s, o);
}

START_TEST(one_host_agrees_and_ends)
{
	for (unsigned seed = 1; seed <= 600; seed++) {
		int n = 2 + (int)(seed % (MAXN - 1)), crashes = (int)(seed / 7 % (unsigned)n);
		struct outcome o;
		run(seed, n, true, crashes, false, true, &o);
		ck_assert_msg(o.agree, "seed %u, %d ranks: two values decided", seed, n);
		ck_assert_msg(o.valid, "seed %u: a live rank was left out on one host", seed);
		ck_assert_msg(o.decided == o.live,
			      "seed %u, %d ranks, %d crashed: %d of %d live decided", seed, n,
			      o.crashed, o.decided, o.live);
	}
}
END_TEST

START_TEST(hosts_agree_and_need_a_majority)
{
	for (unsigned seed = 1; seed <= 600; seed++) {
		int n = 3 + (int)(seed % (MAXN - 2)), crashes = (int)(seed / 5 % (unsigned)n);
		bool settled = seed % 2 == 0; /* no rank suspected wrongly */
		struct outcome o;
		run(seed * 7919u, n, false, crashes, false, settled, &o);
		ck_assert_msg(o.agree, "seed %u, %d ranks: two values decided", seed, n);
		if (settled && 2 * o.live > n)
			ck_assert_msg(o.decided == o.live,
				      "seed %u, %d ranks, %d crashed: %d of %d live decided", seed,
				      n, o.crashed, o.decided, o.live);
	}
}
END_TEST

START_TEST(minority_never_decides)
{
	/* Half of the ranks or more crash at the start: no quorum across hosts. */
	static struct sim t;
	for (unsigned seed = 1; seed <= 200; seed++) {
		int n = 4 + (int)(seed % 4);
		struct outcome o;
		setup_sim(&t, seed * 131u, n, false, 0, false);
		for (int r = 0; r < n / 2 + (int)(seed % 2); r++)
			t.rank[r].crash_at = 0;
		for (int step = 0; step < 3000; step++) {
			t.now = step * STEP_S;
			for (int r = 0; r < n; r++)
				if (!t.rank[r].crashed && t.now >= t.rank[r].crash_at)
					t.rank[r].crashed = true;
			deliver_due(&t);
			for (int r = 0; r < n; r++)
				step_rank(&t, r);
		}
		finish(&t, &o);
		ck_assert_msg(o.decided == 0,
			      "seed %u: %d of %d ranks alive decided without a quorum", seed,
			      o.live, n);
	}
}
END_TEST

START_TEST(broken_acceptor_is_caught)
{
	int disagreements = 0;
	for (unsigned seed = 1; seed <= 3000 && !disagreements; seed++) {
		struct outcome o;
		run(seed * 104729u, 5, false, 2, true, false, &o);
		disagreements += !o.agree;
	}
	ck_assert_msg(disagreements > 0, "an acceptor that forgets what it accepted never made "
					 "two values: the test cannot see what it checks");
}
END_TEST

START_TEST(values_and_messages)
{
	struct agree_value_hdr h = {.kind = AGREE_MEMBERS, .proposer = 1, .root_len = 16};
	uint32_t excl[2] = {2u | (uint32_t)WEFT_RANK_KILLED << 24,
			    5u | (uint32_t)WEFT_RANK_UNREACHABLE << 24};
	h.nexcl = 2;
	struct agree_blob *b = agree_blob_new(&h, excl);
	ck_assert(agree_blob_valid(b, 6));
	ck_assert(!agree_blob_valid(b, 5)); /* rank 5 of 5 ranks */
	ck_assert_int_eq(agree_blob_left_out(b, 2), WEFT_RANK_KILLED);
	ck_assert_int_eq(agree_blob_left_out(b, 5), WEFT_RANK_UNREACHABLE);
	ck_assert_int_eq(agree_blob_left_out(b, 3), WEFT_RANK_ALIVE);
	excl[0] = 5u | (uint32_t)WEFT_RANK_KILLED << 24; /* unsorted, repeated */
	struct agree_blob *c = agree_blob_new(&h, excl);
	ck_assert(!agree_blob_valid(c, 6));
	int a[] = {1, 2}, d[] = {1, 3};
	ck_assert(agree_list_hash(a, 2) != agree_list_hash(d, 2));
	ck_assert(agree_list_hash(a, 1) != agree_list_hash(a, 2));
	free(b);
	free(c);
}
END_TEST

/* After a decided instance whose communicator it built, an acceptor
 * answers BUILT only to a rank that failed to build that one (RETRY, the
 * next instance): a rank merely ahead of it (a healthy communicator
 * shrunk again) hears NOT_JOINED and waits, instead of failing. */
static uint32_t answer(struct agree_acceptor *a, uint64_t instance, uint32_t flags,
		       uint64_t *ballot)
{
	struct agree_msg in = {.type = AGREE_PREPARE,
			       .flags = flags,
			       .from = 1,
			       .instance = instance,
			       .ballot = 1u << AGREE_RANK_BITS | 1u},
			 out;
	if (!agree_acceptor_take(a, &in, &out))
		return 0;
	*ballot = out.ballot;
	return out.type;
}

START_TEST(built_answers_only_a_retry)
{
	struct agree_acceptor a;
	uint64_t b = 0;
	agree_acceptor_init(&a, 0);
	agree_acceptor_join(&a, 0, 0);
	agree_acceptor_leave(&a, true, true, false); /* built instance 0 */
	ck_assert(!a.retry);
	ck_assert_uint_eq(answer(&a, 1, 0, &b), AGREE_NOT_JOINED);
	ck_assert_uint_eq(answer(&a, 1, AGREE_F_RETRY, &b), AGREE_BUILT);
	ck_assert_uint_eq(b, 0); /* the instance it built */
	ck_assert_uint_eq(answer(&a, 2, AGREE_F_RETRY, &b), AGREE_NOT_JOINED);
	agree_acceptor_join(&a, 1, 0); /* it shrinks again: a member like any other */
	ck_assert_uint_eq(answer(&a, 1, AGREE_F_RETRY, &b), AGREE_PROMISE);
	agree_acceptor_free(&a);

	/* The rank that failed to build: its next instance retries, and a
	 * BUILT for it is what its loop reads. */
	struct agree_acceptor f;
	agree_acceptor_init(&f, 2);
	agree_acceptor_join(&f, 0, 0);
	agree_acceptor_leave(&f, true, false, true);
	ck_assert(f.retry);
	agree_acceptor_join(&f, 1, 0);
	struct agree_msg built = {.type = AGREE_BUILT, .from = 0, .instance = 1, .ballot = 0}, out;
	ck_assert(!agree_acceptor_take(&f, &built, &out));
	ck_assert_int_eq(f.built_by, 0);
	ck_assert_uint_eq(f.built_by_instance, 0);
	agree_acceptor_free(&f);
}
END_TEST

static Suite *agree_suite(void)
{
	Suite *s = suite_create("agree");
	TCase *tc = tcase_create("protocol");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, values_and_messages);
	tcase_add_test(tc, built_answers_only_a_retry);
	tcase_add_test(tc, one_host_agrees_and_ends);
	tcase_add_test(tc, hosts_agree_and_need_a_majority);
	tcase_add_test(tc, minority_never_decides);
	tcase_add_test(tc, broken_acceptor_is_caught);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(agree_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
