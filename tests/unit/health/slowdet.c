/*
 * slowdet.c — the slow-link and slow-rank detector's decisions
 * (health/slowdet_stats.h) on made-up jobs, and its datagrams' checks
 * (health/slowdet_watch.c, weft_slowdet_take) on a watch made by hand:
 *  - median and MAD as statistics books have them;
 *  - a host whose every connection runs at a quarter of the others' is
 *    named, and only it; healthy jobs with the noise a shared machine has
 *    (every host alike, or two-level fabrics where every host has one
 *    fast connection under its leaf and one slow one across the spine)
 *    name nobody; connections too small to believe, or inside a host, do
 *    not count; fewer than 3 hosts: nobody;
 *  - a rank whose first messages come far later than the others' is named;
 *    jitter, or a job where everyone is as late, names nobody; a skipped
 *    rank is never named; so is a rank whose process did not run far
 *    more of the time than the others' (stopped), and not one on a
 *    machine where every rank starves alike;
 *  - naming takes WEFT_DETECT_CONFIRM flagged periods in a row, clearing
 *    as many clean ones, and an interruption starts the count again;
 *  - the driving thread's accounting (weft_slowdet_waited, _first) on a
 *    communicator made by hand: a gap in the wait loop that the rank
 *    slept on purpose (core/wait.c's slept_ns) is a wait on the peer, one
 *    it did not run (a stop, here a sleep that slept_ns does not count) a
 *    stall; a first message seen after the rank itself stalled is not
 *    held against its sender (the stopped rank's upstream neighbour was
 *    named instead of it), one it slept waiting for is;
 *  - datagrams: unsigned, from another address, of another communicator,
 *    replayed, a sample to a rank other than 0, a verdict from a rank
 *    other than 0, links naming no rank: dropped; a good verdict is kept
 *    once (its repeat is not a second event).
 */
#include <check.h>
#include <math.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/comm.h"
#include "core/task.h"
#include "core/watch_int.h"
#include "health/slowdet_int.h"
#include "health/slowdet_stats.h"
#include "tests/lib/watch_double.h"
#include "util/clock.h"

START_TEST(median_and_mad)
{
	double v[] = {5, 1, 4, 2, 3}, tmp[7];
	ck_assert(weft_slowdet_median(v, 5) == 3);
	double w[] = {4, 1, 3, 2};
	ck_assert(weft_slowdet_median(w, 4) == 2.5);
	double x[] = {1, 1, 2, 2, 4, 6, 9}; /* the textbook's: MAD 1 */
	double med = weft_slowdet_median(x, 7);
	ck_assert(fabs(weft_slowdet_mad(x, 7, med, tmp) - 1.4826) < 1e-9);
}
END_TEST

/* A ring of @p n ranks, one per host: rank r sends to r+1 at rate[r]. */
static int ring(struct weft_slowdet_link_obs *l, int n, const double *rate)
{
	for (int r = 0; r < n; r++)
		l[r] = (struct weft_slowdet_link_obs){.src = r,
						      .dst = (r + 1) % n,
						      .bytes = 4u << 20,
						      .busy_s = 0.15,
						      .rate_Bps = rate[r]};
	return n;
}

START_TEST(throttled_host_named)
{
	/* 4 hosts at 36 MB/s; host 1's uplink at 9: its links in and out */
	int host_of[] = {0, 1, 2, 3};
	double rate[] = {9e6, 9.1e6, 35e6, 37e6}, best[4], tmp[8], median;
	int itmp[8];
	bool slow[4];
	struct weft_slowdet_link_obs l[4];
	int n = weft_slowdet_slow_hosts(l, ring(l, 4, rate), host_of, 4, best, slow, &median, tmp,
					itmp);
	ck_assert_int_eq(n, 1);
	ck_assert(slow[1] && !slow[0] && !slow[2] && !slow[3]);
	ck_assert(best[1] == 9.1e6 && best[0] == 37e6);
	ck_assert(median > 30e6 && median < 38e6);
}
END_TEST

START_TEST(healthy_jobs_name_nobody)
{
	double best[16], tmp[32], median;
	int itmp[32];
	bool slow[16];
	struct weft_slowdet_link_obs l[16];
	int host_of[16];
	for (int r = 0; r < 16; r++)
		host_of[r] = r;
	/* every host alike, with 30 % noise */
	double noisy[] = {30e6, 39e6, 36e6, 33e6, 27e6, 37e6, 35e6, 31e6};
	ck_assert_int_eq(weft_slowdet_slow_hosts(l, ring(l, 8, noisy), host_of, 8, best, slow,
						 &median, tmp, itmp),
			 0);
	/* two levels: in-leaf links at GB/s, spine links at 36 MB/s, every host
	 * has one of each (a leaf-aware ring) */
	double two[] = {2e9, 36e6, 1.5e9, 35e6, 2.5e9, 37e6, 1e9, 36e6};
	ck_assert_int_eq(
	    weft_slowdet_slow_hosts(l, ring(l, 8, two), host_of, 8, best, slow, &median, tmp, itmp),
	    0);
	/* too little to believe: a slow link that moved 64 KiB */
	double one[] = {1e6, 36e6, 36e6, 36e6};
	ring(l, 4, one);
	l[0].bytes = 64 << 10;
	l[3].bytes = 64 << 10;
	ck_assert_int_eq(weft_slowdet_slow_hosts(l, 4, host_of, 4, best, slow, &median, tmp, itmp),
			 0);
	/* inside a host: never a host's uplink */
	int same[] = {0, 0, 1, 2};
	ring(l, 4, one);
	l[3].rate_Bps = 1e6; /* 3 -> 0 slow too: host 0 then has only slow links */
	l[0].dst = 1;	     /* but 0 -> 1 stays inside host 0 */
	/* host 0's connection out (1 -> 2) is fast: only its link inside counts as slow */
	ck_assert_int_eq(weft_slowdet_slow_hosts(l, 4, same, 3, best, slow, &median, tmp, itmp), 0);
	ck_assert(best[0] == 36e6);
	/* one slow connection alone: its peer's fault as much as its own */
	double lone[] = {5e6, 36e6, 36e6, 36e6};
	ring(l, 4, lone);
	l[3].bytes = 0; /* 3 -> 0 moved nothing: host 0 is seen with host 1 only */
	l[1].bytes = 0; /* 1 -> 2 neither: host 1 with host 0 only */
	ck_assert_int_eq(weft_slowdet_slow_hosts(l, 4, host_of, 4, best, slow, &median, tmp, itmp),
			 0);
	/* two hosts: no majority */
	double two_hosts[] = {1e6, 36e6};
	ck_assert_int_eq(weft_slowdet_slow_hosts(l, ring(l, 2, two_hosts), host_of, 2, best, slow,
						 &median, tmp, itmp),
			 0);
}
END_TEST

START_TEST(late_rank_named)
{
	/* the first messages of rank 2 come 60 ms after the call, the others' 12 */
	double late[] = {0.012, 0.011, 0.060, 0.013}, tmp[8], median;
	bool have[] = {1, 1, 1, 1}, skip[4] = {0}, slow[4];
	ck_assert_int_eq(weft_slowdet_late_ranks(late, have, skip, 4, slow, &median, tmp), 1);
	ck_assert(slow[2] && !slow[0] && !slow[1] && !slow[3]);
	ck_assert(fabs(median - 0.0125) < 1e-9);
	skip[2] = true; /* its host's uplink is named: the link explains it */
	ck_assert_int_eq(weft_slowdet_late_ranks(late, have, skip, 4, slow, &median, tmp), 0);
	skip[2] = false;
	have[2] = false; /* nobody said */
	ck_assert_int_eq(weft_slowdet_late_ranks(late, have, skip, 4, slow, &median, tmp), 0);
	have[2] = true;
	double near[] = {0.012, 0.011, 0.019, 0.013}; /* late by less than 10 ms: jitter */
	ck_assert_int_eq(weft_slowdet_late_ranks(near, have, skip, 4, slow, &median, tmp), 0);
	double alike[] = {0.040, 0.050, 0.060, 0.045}; /* everyone late: nobody stands out */
	ck_assert_int_eq(weft_slowdet_late_ranks(alike, have, skip, 4, slow, &median, tmp), 0);
}
END_TEST

START_TEST(stopped_rank_named)
{
	/* Rank 2 stopped 50 ms in every 120 (its process did not run 38 % of
	 * the time, as the watch thread's lateness says); the others 1-5 %
	 * (figures from fabric/test_detect's TRACE lines). */
	double off[] = {0.013, 0.006, 0.380, 0.029}, tmp[8], median;
	bool have[] = {1, 1, 1, 1}, skip[4] = {0}, slow[4];
	ck_assert_int_eq(weft_slowdet_off_ranks(off, have, skip, 4, slow, &median, tmp), 1);
	ck_assert(slow[2] && !slow[0] && !slow[1] && !slow[3]);
	ck_assert(fabs(median - 0.021) < 1e-9);
	skip[2] = true;
	ck_assert_int_eq(weft_slowdet_off_ranks(off, have, skip, 4, slow, &median, tmp), 0);
	skip[2] = false;
	/* A busy machine: every rank starved alike (30-45 %): nobody. */
	double busy[] = {0.30, 0.45, 0.38, 0.33};
	ck_assert_int_eq(weft_slowdet_off_ranks(busy, have, skip, 4, slow, &median, tmp), 0);
	/* One rank starved a little more than the others (by less than 10
	 * points of the time): jitter, nobody. */
	double jitter[] = {0.02, 0.03, 0.11, 0.02};
	ck_assert_int_eq(weft_slowdet_off_ranks(jitter, have, skip, 4, slow, &median, tmp), 0);
	/* Fewer than 3 ranks said: nobody. */
	bool two[] = {1, 0, 1, 0};
	ck_assert_int_eq(weft_slowdet_off_ranks(off, two, skip, 4, slow, &median, tmp), 0);
}
END_TEST

/* A stopped rank makes the ranks downstream late too: while it is off (or
 * named for it) their lateness is its, not theirs. */
START_TEST(stopped_rank_explains_lateness)
{
	bool late[4] = {1, 0, 1, 0}, off[4] = {0, 0, 1, 0}, named[4] = {0};
	weft_slowdet_late_explained(late, off, named, 4);
	ck_assert(!late[0]); /* downstream of rank 2: explained */
	ck_assert(late[2]);  /* the stopped rank keeps its own flags */
	bool late2[4] = {1, 0, 0, 0}, off2[4] = {0}, named2[4] = {0, 0, 1, 0};
	weft_slowdet_late_explained(late2, off2, named2, 4); /* named, not off this period */
	ck_assert(!late2[0]);
	bool late3[4] = {1, 0, 0, 0}, none[4] = {0};
	weft_slowdet_late_explained(late3, none, none, 4); /* nobody off: a rank that calls late */
	ck_assert(late3[0]);
}
END_TEST

/* A link far below the job's median is named a period sooner; one just
 * past the outlier bar, and the clearing, wait the full count. */
START_TEST(severe_link_sooner)
{
	ck_assert_int_eq(weft_slowdet_link_confirm(9e6, 75e6, 3), 2);	  /* 8x below */
	ck_assert_int_eq(weft_slowdet_link_confirm(18.75e6, 75e6, 3), 2); /* 4x: the bar */
	ck_assert_int_eq(weft_slowdet_link_confirm(30e6, 75e6, 3), 3);	  /* 2.5x */
	ck_assert_int_eq(weft_slowdet_link_confirm(9e6, 75e6, 1), 1);	  /* never below 1 */
	ck_assert_int_eq(weft_slowdet_link_confirm(0, 75e6, 3), 3);	  /* no rate believed */
	struct weft_slowdet_run run = {0};
	int need = weft_slowdet_link_confirm(9e6, 75e6, 3);
	ck_assert_int_eq(weft_slowdet_step(&run, true, 1, need), WEFT_DETECT_SAME);
	ck_assert_int_eq(weft_slowdet_step(&run, true, 1, need), WEFT_DETECT_NAMED);
	ck_assert_int_eq(weft_slowdet_step(&run, false, 1, 3), WEFT_DETECT_SAME);
	ck_assert_int_eq(weft_slowdet_step(&run, false, 1, 3), WEFT_DETECT_SAME);
	ck_assert_int_eq(weft_slowdet_step(&run, false, 1, 3), WEFT_DETECT_CLEARED);
}
END_TEST

START_TEST(confirm_and_clear)
{
	struct weft_slowdet_run run = {0};
	ck_assert_int_eq(weft_slowdet_step(&run, true, 2, 3), WEFT_DETECT_SAME);
	ck_assert_int_eq(weft_slowdet_step(&run, true, 2, 3), WEFT_DETECT_SAME);
	ck_assert_int_eq(weft_slowdet_step(&run, false, 2, 3), WEFT_DETECT_SAME); /* interrupted */
	ck_assert_int_eq(weft_slowdet_step(&run, true, 1, 3), WEFT_DETECT_SAME);
	ck_assert_int_eq(weft_slowdet_step(&run, true, 1, 3), WEFT_DETECT_SAME);
	ck_assert_int_eq(weft_slowdet_step(&run, true, 1, 3), WEFT_DETECT_NAMED);
	ck_assert_int_eq(run.ops, 3); /* the operations of the run that named it */
	ck_assert_int_eq(weft_slowdet_step(&run, true, 1, 3), WEFT_DETECT_SAME);
	ck_assert_int_eq(weft_slowdet_step(&run, false, 1, 3), WEFT_DETECT_SAME);
	ck_assert_int_eq(weft_slowdet_step(&run, false, 1, 3), WEFT_DETECT_SAME);
	ck_assert_int_eq(weft_slowdet_step(&run, true, 1, 3), WEFT_DETECT_SAME); /* not yet clear */
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(weft_slowdet_step(&run, false, 1, 3), WEFT_DETECT_SAME);
	ck_assert_int_eq(weft_slowdet_step(&run, false, 1, 3), WEFT_DETECT_CLEARED);
	ck_assert(!run.named);
}
END_TEST

/* ---- datagrams ---- */

#define NRANKS WATCH_DOUBLE_RANKS
static uint64_t last_seq[NRANKS];

static void make_watch(struct weft_watch *w, struct weft_slowdet *d, int me)
{
	memset(d, 0, sizeof(*d));
	memset(last_seq, 0, sizeof(last_seq));
	d->last_seq = last_seq;
	pthread_mutex_init(&d->lock, NULL);
	watch_double_init(w, me);
	ck_assert_int_eq(weft_watch_serve(w, &weft_slowdet_watch, d), WEFT_SUCCESS);
}

static struct slowdet_msg verdict_msg(const struct weft_watch *w, int from, uint64_t seq,
				      uint64_t id)
{
	struct slowdet_msg m = {.magic = DETECT_MAGIC,
				.comm_id = w->comm_id,
				.seq = seq,
				.type = DETECT_VERDICT,
				.rank = from};
	m.u.verdict = (struct slowdet_verdict){.id = id,
					       .kind = DETECT_LINK,
					       .named = 1,
					       .rank = 2,
					       .value = 9000000,
					       .median = 36000000};
	weft_mac(&w->key, &m, offsetof(struct slowdet_msg, mac), m.mac);
	return m;
}

/* ---- the driving thread's accounting ---- */

#define MS 1000000ull

static void pause_ms(unsigned ms)
{
	struct timespec t = {0, (long)ms * 1000000};
	nanosleep(&t, NULL);
}

static void slept(struct weft_comm *c, unsigned ms)
{
	atomic_fetch_add(&c->wait.slept_ns, (uint64_t)ms * MS);
	pause_ms(ms);
}

START_TEST(stalls_are_not_lateness)
{
	struct weft_comm *c = calloc(1, sizeof(*c));
	ck_assert_ptr_nonnull(c);
	c->nranks = 3;
	setenv("WEFT_DETECT", "1", 1);
	ck_assert_int_eq(weft_slowdet_init(c), WEFT_SUCCESS);
	struct weft_slowdet *d = c->slowdet;
	ck_assert_ptr_nonnull(d);
	struct weft_task t = {.comm = c, .waiting_for = 1};

	/* Waiting on rank 1, asleep on purpose 30 ms: a wait, and its first
	 * message 30 ms late is held against it. */
	t.started_ns = weft_now_ns();
	uint64_t last = t.started_ns;
	weft_slowdet_waited(c, &t, &last);
	slept(c, 30);
	weft_slowdet_waited(c, &t, &last);
	weft_slowdet_first(&t, 1);
	uint64_t wait1 = weft_counter_get(&d->pub.wait_ns);
	ck_assert_uint_ge(wait1, 30 * MS);
	ck_assert_uint_ge(weft_counter_get(&d->pub.wait_on[1]), 30 * MS);
	ck_assert_uint_eq(weft_counter_get(&d->pub.stall_ns), 0);
	ck_assert_uint_ge(weft_counter_get(&d->pub.late_ns[1]), 30 * MS);
	ck_assert_uint_eq(weft_counter_get(&d->pub.late_n[1]), 1);

	/* The next operation: this rank stopped 40 ms in its wait (a gap that
	 * no sleep covers), the loop saw it; then rank 2's first message:
	 * the stop is not rank 2's lateness, and it is a stall, not a wait. */
	t.started_ns = weft_now_ns();
	last = t.started_ns;
	weft_slowdet_waited(c, &t, &last);
	pause_ms(40);
	weft_slowdet_waited(c, &t, &last);
	weft_slowdet_first(&t, 2);
	ck_assert_uint_ge(weft_counter_get(&d->pub.stall_ns), 40 * MS);
	ck_assert_uint_lt(weft_counter_get(&d->pub.wait_ns) - wait1, 10 * MS);
	ck_assert_uint_lt(weft_counter_get(&d->pub.late_ns[2]), 10 * MS);
	ck_assert_uint_eq(weft_counter_get(&d->pub.late_n[2]), 1);

	/* Stopped again, and the first message is taken before the loop looks
	 * again (the engine's progress comes first): not held against rank 2
	 * either. */
	t.started_ns = weft_now_ns();
	last = t.started_ns;
	weft_slowdet_waited(c, &t, &last);
	pause_ms(40);
	weft_slowdet_first(&t, 2);
	ck_assert_uint_lt(weft_counter_get(&d->pub.late_ns[2]), 20 * MS);
	ck_assert_uint_eq(weft_counter_get(&d->pub.late_n[2]), 2);

	weft_slowdet_fini(c);
	unsetenv("WEFT_DETECT");
	free(c);
}
END_TEST

START_TEST(datagrams)
{
	struct weft_watch w;
	struct weft_slowdet d;
	struct sockaddr_storage from0, from1, stranger;
	make_watch(&w, &d, 1);
	watch_double_address(&from0, 0);
	watch_double_address(&from1, 1);
	watch_double_address(&stranger, 9);
	struct slowdet_msg m = verdict_msg(&w, 0, 5, 1);
	ck_assert(weft_slowdet_take(&w, &m, sizeof(m), &from0)); /* taken */
	ck_assert_int_eq(d.nkept, 1);
	ck_assert_int_eq(d.kept[0].rank, 2);
	ck_assert(weft_slowdet_take(&w, &m, sizeof(m), &from0)); /* replayed: dropped */
	ck_assert_int_eq(d.dropped, 1);
	m = verdict_msg(&w, 0, 6, 1); /* rank 0 sends it again (a resend): kept once */
	ck_assert(weft_slowdet_take(&w, &m, sizeof(m), &from0));
	ck_assert_int_eq(d.nkept, 1);
	ck_assert_int_eq(d.last_id, 1);
	m = verdict_msg(&w, 0, 7, 2);
	ck_assert(weft_slowdet_take(&w, &m, sizeof(m), &stranger)); /* another address */
	m.mac[0] ^= 1;
	ck_assert(weft_slowdet_take(&w, &m, sizeof(m), &from0)); /* forged */
	m = verdict_msg(&w, 2, 8, 2);
	ck_assert(weft_slowdet_take(&w, &m, sizeof(m),
				    &watch_double_addrs[2])); /* a verdict not from 0 */
	m = verdict_msg(&w, 0, 9, 2);
	m.comm_id++;
	weft_mac(&w.key, &m, offsetof(struct slowdet_msg, mac), m.mac);
	ck_assert(weft_slowdet_take(&w, &m, sizeof(m), &from0)); /* another communicator */
	ck_assert_int_eq(d.dropped, 5);
	ck_assert_int_eq(d.last_id, 1);
	/* a sample to rank 1 (only rank 0 takes them) */
	m = verdict_msg(&w, 0, 10, 2);
	m.type = DETECT_SAMPLE;
	weft_mac(&w.key, &m, offsetof(struct slowdet_msg, mac), m.mac);
	ck_assert(weft_slowdet_take(&w, &m, sizeof(m), &from0));
	ck_assert_int_eq(d.dropped, 6);
	/* not the detector's: the watch's to judge */
	ck_assert(!weft_slowdet_take(&w, &m, 176, &from0));
	m.magic = 0;
	ck_assert(!weft_slowdet_take(&w, &m, sizeof(m), &from0));
	pthread_mutex_destroy(&d.lock);
}
END_TEST

START_TEST(sample_to_root_checked)
{
	struct weft_watch w;
	struct weft_slowdet d;
	make_watch(&w, &d, 0);
	struct slowdet_msg m = {.magic = DETECT_MAGIC,
				.comm_id = w.comm_id,
				.seq = 1,
				.type = DETECT_SAMPLE,
				.rank = 3};
	m.u.sample.nlinks = DETECT_LINKS + 1; /* more links than a sample holds */
	weft_mac(&w.key, &m, offsetof(struct slowdet_msg, mac), m.mac);
	ck_assert(weft_slowdet_take(&w, &m, sizeof(m), &watch_double_addrs[3]));
	m.u.sample.nlinks = 1;
	m.u.sample.links[0].peer = NRANKS; /* no such rank */
	m.seq = 2;
	weft_mac(&w.key, &m, offsetof(struct slowdet_msg, mac), m.mac);
	ck_assert(weft_slowdet_take(&w, &m, sizeof(m), &watch_double_addrs[3]));
	ck_assert_int_eq(d.dropped, 2);
	ck_assert_ptr_null(d.root); /* nothing reached the root's view */
	pthread_mutex_destroy(&d.lock);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("slowdet");
	TCase *tc = tcase_create("slowdet");
	tcase_add_test(tc, median_and_mad);
	tcase_add_test(tc, throttled_host_named);
	tcase_add_test(tc, healthy_jobs_name_nobody);
	tcase_add_test(tc, late_rank_named);
	tcase_add_test(tc, stopped_rank_named);
	tcase_add_test(tc, confirm_and_clear);
	tcase_add_test(tc, severe_link_sooner);
	tcase_add_test(tc, stopped_rank_explains_lateness);
	tcase_add_test(tc, stalls_are_not_lateness);
	tcase_add_test(tc, datagrams);
	tcase_add_test(tc, sample_to_root_checked);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
