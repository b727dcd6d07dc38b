/*
 * pacer.c — the pacer's controllers (core/pace/pacer.h) driven
 * by synthetic signals and a fake clock: DCQCN's cut by alpha/2, alpha's
 * EWMA and decay, the five fast-recovery stages, additive and hyper
 * increase from the timer and the byte counter, the floor and the line
 * rate; the release time and budget the gate reads; the delay controller's
 * target, increase and proportional decrease; the settings. Nothing here
 * reads a real clock: every time is passed in, so every result is exact.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/pace/pacer.h"
#include "core/pace/pacer_settings.h"
#include "transports/registry.h"
#include "util/settings.h"

#define LINE 1e9
/* Periods that are powers of two keep the fake times exact in binary. */
#define TICK (1.0 / 1024)
#define T0   1.0

static struct weft_pacer_params params;

static void setup(void)
{
	weft_pacer_params_default(&params);
	params.alpha_period_s = TICK;
	params.timer_s = TICK;
	params.cnp_interval_s = TICK / 2;
	params.byte_counter = 1u << 20;
}

static const struct weft_pacer_signal marked = {.delivered = 100, .delivered_ce = 10};
static const struct weft_pacer_signal clean = {.delivered = 100};

START_TEST(dcqcn_first_mark_halves)
{
	struct weft_pacer pc;
	weft_pacer_init(&pc, &params, LINE, T0);
	ck_assert(!weft_pacer_limiting(&pc));
	weft_pacer_feedback(&pc, &clean, T0);
	ck_assert_double_eq(pc.rc_Bps, LINE);
	weft_pacer_feedback(&pc, &marked, T0);
	/* alpha waits at 1 until the first cut: R_C = R_C (1 - 1/2). */
	ck_assert_double_eq_tol(pc.alpha, 1.0, 1e-12);
	ck_assert_double_eq_tol(pc.rc_Bps, LINE / 2, 1e-3);
	ck_assert_double_eq(pc.rt_Bps, LINE);
	ck_assert_uint_eq(pc.cuts, 1);
	ck_assert(weft_pacer_limiting(&pc));
}
END_TEST

/* alpha is the EWMA of the marked fraction, one sample per period that
 * saw deliveries; a cut takes R_C (1 - alpha / 2). */
START_TEST(dcqcn_cut_by_alpha_over_two)
{
	struct weft_pacer pc;
	params.timer_s = 1e9; /* no increase: only alpha moves */
	weft_pacer_init(&pc, &params, LINE, T0);
	weft_pacer_feedback(&pc, &marked, T0);
	/* 256 periods without marks: alpha = (1 - g)^256. */
	for (int i = 1; i <= 256; i++)
		weft_pacer_feedback(&pc, &clean, T0 + i * TICK);
	double g = params.g, a = pow(1 - g, 256);
	ck_assert_double_eq_tol(pc.alpha, a, 1e-12);
	/* Periods with no deliveries say nothing: alpha stays. */
	const struct weft_pacer_signal none = {0};
	for (int i = 257; i <= 300; i++)
		weft_pacer_feedback(&pc, &none, T0 + i * TICK);
	ck_assert_double_eq_tol(pc.alpha, a, 1e-12);
	/* One period of 200 segments, 10 marked (two reads): F = 1/20. */
	double rc = pc.rc_Bps;
	weft_pacer_feedback(&pc, &clean, T0 + 300.5 * TICK);
	ck_assert_double_eq_tol(pc.alpha, a, 1e-12);
	weft_pacer_feedback(&pc, &marked, T0 + 301 * TICK);
	double a2 = (1 - g) * a + g / 20;
	ck_assert_double_eq_tol(pc.alpha, a2, 1e-12);
	ck_assert_uint_eq(pc.cuts, 2);
	ck_assert_double_eq_tol(pc.rc_Bps, rc * (1 - a2 / 2), 1e-3);
	ck_assert_double_eq_tol(pc.rt_Bps, rc, 1e-3);
}
END_TEST

/* Before its first notification a connection has no rate limiter: alpha
 * waits at 1 however long it ran, and the first cut halves. */
START_TEST(dcqcn_alpha_waits_for_the_first_cut)
{
	struct weft_pacer pc;
	weft_pacer_init(&pc, &params, LINE, T0);
	weft_pacer_advance(&pc, T0 + 1000 * TICK);
	weft_pacer_feedback(&pc, &clean, T0 + 2000 * TICK);
	ck_assert_double_eq(pc.alpha, 1.0);
	weft_pacer_feedback(&pc, &marked, T0 + 3000 * TICK);
	ck_assert_double_eq_tol(pc.rc_Bps, LINE / 2, 1e-3);
}
END_TEST

/* Cut twice so that R_T is well below the line rate, then count. */
static void cut_twice(struct weft_pacer *pc, double *now)
{
	weft_pacer_init(pc, &params, LINE, T0);
	weft_pacer_feedback(pc, &marked, T0);
	*now = T0 + TICK / 2;
	weft_pacer_feedback(pc, &marked, *now);
	ck_assert_uint_eq(pc->cuts, 2);
	ck_assert_double_eq_tol(pc->rt_Bps, LINE / 2, 1e-3);
}

START_TEST(dcqcn_one_cut_per_interval)
{
	struct weft_pacer pc;
	weft_pacer_init(&pc, &params, LINE, T0);
	weft_pacer_feedback(&pc, &marked, T0);
	weft_pacer_feedback(&pc, &marked, T0 + TICK / 4);
	ck_assert_uint_eq(pc.cuts, 1);
	ck_assert_double_eq_tol(pc.rc_Bps, LINE / 2, 1e-3);
	weft_pacer_feedback(&pc, &marked, T0 + TICK / 2);
	ck_assert_uint_eq(pc.cuts, 2);
	ck_assert_uint_eq(pc.marks, 30);
	ck_assert_uint_eq(pc.delivered, 300);
}
END_TEST

/* A TCP flow that sends far below the line rate is cut from the rate its
 * data was delivered at: R_T = measured, R_C = R_T (1 - a/2). A measure
 * above R_C is not a reason to cut from higher. */
START_TEST(dcqcn_cut_from_delivery_rate)
{
	struct weft_pacer pc;
	weft_pacer_init(&pc, &params, LINE, T0);
	struct weft_pacer_signal sig = marked;
	sig.delivery_Bps = LINE / 64;
	weft_pacer_feedback(&pc, &sig, T0);
	ck_assert_double_eq_tol(pc.rt_Bps, LINE / 64, 1e-3);
	ck_assert_double_eq_tol(pc.rc_Bps, LINE / 128, 1e-3);
	/* A measure above R_C: the cut starts from R_C. */
	sig.delivery_Bps = LINE;
	weft_pacer_feedback(&pc, &sig, T0 + TICK / 2);
	ck_assert_uint_eq(pc.cuts, 2);
	ck_assert_double_eq_tol(pc.rt_Bps, LINE / 128, 1e-3);
	ck_assert_double_eq_tol(pc.rc_Bps, LINE / 128 * (1 - pc.alpha / 2), 1e-3);
}
END_TEST

/* The cut takes the largest delivery rate of the last rate_window RTTs
 * (here timer periods: no RTT is known), not one low sample. */
START_TEST(dcqcn_delivery_rate_windowed_max)
{
	struct weft_pacer pc;
	params.rate_window = 4;
	weft_pacer_init(&pc, &params, LINE, T0);
	struct weft_pacer_signal hi = {.delivered = 10, .delivery_Bps = LINE / 8};
	struct weft_pacer_signal lo = marked;
	lo.delivery_Bps = LINE / 512;
	weft_pacer_feedback(&pc, &hi, T0);
	weft_pacer_feedback(&pc, &lo, T0 + 2 * TICK); /* within the window: LINE / 8 holds */
	ck_assert_uint_eq(pc.cuts, 1);
	ck_assert_double_eq_tol(pc.rt_Bps, LINE / 8, 1e-3);
	/* Older than the window: the low sample replaces it. */
	weft_pacer_feedback(&pc, &lo, T0 + 7 * TICK);
	ck_assert_uint_eq(pc.cuts, 2);
	ck_assert_double_eq_tol(pc.rt_Bps, LINE / 512, 1e-3);
	/* A measure below the floor starts the cut from the floor. */
	lo.delivery_Bps = params.min_rate_Bps / 4;
	weft_pacer_feedback(&pc, &lo, T0 + 12 * TICK);
	ck_assert_double_eq(pc.rt_Bps, params.min_rate_Bps);
	ck_assert_double_eq(pc.rc_Bps, params.min_rate_Bps);
}
END_TEST

/* With an RTT longer than the CNP interval and the timer, at most one cut
 * per RTT (the marks of the RTT after a cut were earned before it), and
 * one rate-increase timer event per RTT. */
START_TEST(dcqcn_one_cut_and_one_increase_per_rtt)
{
	struct weft_pacer pc;
	weft_pacer_init(&pc, &params, LINE, T0);
	const double rtt = 8 * TICK;
	struct weft_pacer_signal sig = marked, calm = clean;
	sig.rtt_us = calm.rtt_us = (uint32_t)(rtt * 1e6);
	weft_pacer_feedback(&pc, &sig, T0);
	const double rtt_s = sig.rtt_us * 1e-6; /* as the pacer sees it, in whole us */
	weft_pacer_feedback(&pc, &sig, T0 + 4 * TICK);
	ck_assert_uint_eq(pc.cuts, 1);
	const double eps = 1e-9; /* the sums below are not exact in binary */
	weft_pacer_feedback(&pc, &sig, T0 + rtt_s + eps);
	ck_assert_uint_eq(pc.cuts, 2);
	/* Timer events: none before an RTT has passed, then one. */
	double rc = pc.rc_Bps, cut = T0 + rtt_s + eps;
	weft_pacer_feedback(&pc, &calm, cut + rtt_s / 2);
	ck_assert_double_eq(pc.rc_Bps, rc);
	ck_assert_int_eq(pc.t_events, 0);
	weft_pacer_feedback(&pc, &calm, cut + rtt_s + eps);
	ck_assert_int_eq(pc.t_events, 1);
	ck_assert_double_eq_tol(pc.rc_Bps, (rc + pc.rt_Bps) / 2, 1e-3);
}
END_TEST

/* An idle connection's timer only brings R_C back to R_T: no stage is
 * counted and R_T is not raised (alpha stays too: an idle period says
 * nothing of the path); busy again, the stages count from there. */
START_TEST(dcqcn_idle_recovers_only_to_the_target)
{
	struct weft_pacer pc;
	double now;
	cut_twice(&pc, &now);
	double rt = pc.rt_Bps, rc0 = pc.rc_Bps;
	struct weft_pacer_signal idle = {.idle = true};
	/* The first idle read closes alpha's period of the marks before. */
	weft_pacer_feedback(&pc, &idle, now + TICK);
	ck_assert_double_eq_tol(pc.rc_Bps, (rc0 + rt) / 2, 1e-3);
	double alpha = pc.alpha;
	for (int i = 2; i <= 100; i++)
		weft_pacer_feedback(&pc, &idle, now + i * TICK);
	now += 100 * TICK;
	/* Back at R_T, no further: no stage counted, R_T not raised. */
	ck_assert_double_eq_tol(pc.rc_Bps, rt, 1e-3);
	ck_assert_double_le(pc.rc_Bps, rt);
	ck_assert_double_eq(pc.rt_Bps, rt);
	ck_assert_int_eq(pc.t_events, 0);
	ck_assert(weft_pacer_limiting(&pc));
	ck_assert_double_eq(pc.alpha, alpha);
	/* Busy again: fast recovery's stages count from here. */
	weft_pacer_feedback(&pc, &clean, now + TICK / 2);
	ck_assert_int_eq(pc.t_events, 0);
	weft_pacer_feedback(&pc, &clean, now + TICK);
	ck_assert_int_eq(pc.t_events, 1);
	ck_assert_double_eq(pc.rt_Bps, rt);
}
END_TEST

START_TEST(dcqcn_no_increase_before_a_cut)
{
	struct weft_pacer pc;
	params.start_rate_Bps = LINE / 4;
	weft_pacer_init(&pc, &params, LINE, T0);
	ck_assert(weft_pacer_limiting(&pc));
	weft_pacer_advance(&pc, T0 + 100 * TICK);
	weft_pacer_sent(&pc, 50u << 20, T0 + 100 * TICK);
	ck_assert_double_eq(pc.rc_Bps, LINE / 4);
}
END_TEST

START_TEST(dcqcn_fast_recovery_five_stages)
{
	struct weft_pacer pc;
	double now;
	cut_twice(&pc, &now);
	double rt = pc.rt_Bps, rc = pc.rc_Bps;
	for (int stage = 1; stage <= 5; stage++) {
		weft_pacer_advance(&pc, now + stage * TICK);
		rc = (rt + rc) / 2;
		ck_assert_double_eq(pc.rt_Bps, rt); /* the target holds */
		ck_assert_double_eq_tol(pc.rc_Bps, rc, 1e-3);
		ck_assert_int_eq(pc.t_events, stage);
	}
	/* The sixth timer event is additive increase: R_T += R_AI. */
	weft_pacer_advance(&pc, now + 6 * TICK);
	ck_assert_double_eq_tol(pc.rt_Bps, rt + params.rai_Bps, 1e-3);
	ck_assert_double_eq_tol(pc.rc_Bps, (rt + params.rai_Bps + rc) / 2, 1e-3);
}
END_TEST

START_TEST(dcqcn_byte_counter_recovers_too)
{
	struct weft_pacer pc;
	double now;
	cut_twice(&pc, &now);
	double rt = pc.rt_Bps, rc = pc.rc_Bps;
	/* Five byte-counter events (no time passes): fast recovery. */
	for (int i = 0; i < 5; i++)
		weft_pacer_sent(&pc, params.byte_counter, now);
	for (int i = 0; i < 5; i++)
		rc = (rt + rc) / 2;
	ck_assert_int_eq(pc.bc_events, 5);
	ck_assert_double_eq(pc.rt_Bps, rt);
	ck_assert_double_eq_tol(pc.rc_Bps, rc, 1e-3);
	/* Less than a counter's worth is no event. */
	weft_pacer_sent(&pc, params.byte_counter - 1, now);
	ck_assert_int_eq(pc.bc_events, 5);
	weft_pacer_sent(&pc, 1, now);
	ck_assert_double_eq_tol(pc.rt_Bps, rt + params.rai_Bps, 1e-3);
}
END_TEST

START_TEST(dcqcn_hyper_increase)
{
	struct weft_pacer pc;
	double now;
	cut_twice(&pc, &now);
	for (int i = 0; i < 5; i++)
		weft_pacer_sent(&pc, params.byte_counter, now);
	weft_pacer_advance(&pc, now + 5 * TICK); /* T = BC = 5 */
	double rt = pc.rt_Bps;
	/* min(T, BC) = 5 >= F: R_T += (5 - 5 + 1) R_HAI, for the byte event
	 * and for the timer's; two more of each make min(T, BC) = 6 and 7:
	 * 2 R_HAI, then 3 R_HAI per event. */
	weft_pacer_sent(&pc, params.byte_counter, now + 5 * TICK);
	ck_assert_double_eq_tol(pc.rt_Bps, rt + params.rhai_Bps, 1e-3);
	weft_pacer_advance(&pc, now + 6 * TICK);
	ck_assert_double_eq_tol(pc.rt_Bps, rt + 2 * params.rhai_Bps, 1e-3);
	weft_pacer_sent(&pc, params.byte_counter, now + 6 * TICK); /* T 6, BC 6 before: 2 */
	ck_assert_double_eq_tol(pc.rt_Bps, rt + 4 * params.rhai_Bps, 1e-3);
	weft_pacer_advance(&pc, now + 7 * TICK); /* T 6, BC 7 before: 2 */
	ck_assert_double_eq_tol(pc.rt_Bps, rt + 6 * params.rhai_Bps, 1e-3);
	weft_pacer_sent(&pc, params.byte_counter, now + 7 * TICK); /* 7, 7: 3 */
	ck_assert_double_eq_tol(pc.rt_Bps, rt + 9 * params.rhai_Bps, 1e-3);
}
END_TEST

START_TEST(dcqcn_recovers_to_line_and_stops_pacing)
{
	struct weft_pacer pc;
	double now;
	cut_twice(&pc, &now);
	weft_pacer_advance(&pc, now + 1.0); /* 1024 timer events: capped at 64 */
	for (int i = 0; i < 200; i++)
		weft_pacer_advance(&pc, now + 1.0 + i * TICK);
	ck_assert_double_eq(pc.rc_Bps, LINE);
	ck_assert_double_eq(pc.rt_Bps, LINE);
	ck_assert(!weft_pacer_limiting(&pc));
	ck_assert(weft_pacer_admit(&pc, 1u << 30, 1u << 30, now));
	/* Released at line rate: the next congestion starts afresh. */
	ck_assert_double_eq(pc.alpha, 1.0);
	ck_assert_int_eq(pc.t_events, 0);
	weft_pacer_feedback(&pc, &marked, now + 2.0);
	ck_assert_double_eq_tol(pc.rc_Bps, LINE / 2, 1e-3);
}
END_TEST

START_TEST(dcqcn_floor)
{
	struct weft_pacer pc;
	weft_pacer_init(&pc, &params, LINE, T0);
	for (int i = 0; i < 200; i++)
		weft_pacer_feedback(&pc, &marked, T0 + i * (TICK / 2));
	ck_assert_double_eq(pc.rc_Bps, params.min_rate_Bps);
}
END_TEST

START_TEST(release_time_and_budget)
{
	struct weft_pacer pc;
	params.byte_counter = 1u << 30; /* no increase in this test */
	weft_pacer_init(&pc, &params, LINE, T0);
	weft_pacer_feedback(&pc, &marked, T0); /* 500 MB/s */
	double rc = pc.rc_Bps;
	ck_assert(weft_pacer_admit(&pc, 0, 1u << 20, T0));
	weft_pacer_sent(&pc, 1u << 20, T0);
	double due = T0 + (1u << 20) / rc;
	ck_assert_double_eq_tol(pc.release_at, due, 1e-12);
	ck_assert(!weft_pacer_admit(&pc, 0, 4096, due - 1e-6));
	ck_assert(weft_pacer_admit(&pc, 0, 4096, due));
	/* Budget: rate x window (500 KB); a chunk beyond it waits while
	 * another is in flight, and goes alone. */
	size_t budget = weft_pacer_budget(&pc);
	ck_assert_uint_eq(budget, (size_t)(rc * params.window_s));
	ck_assert(weft_pacer_admit(&pc, budget / 2, budget / 2, due));
	ck_assert(!weft_pacer_admit(&pc, budget / 2, budget / 2 + 1, due));
	ck_assert(weft_pacer_admit(&pc, 0, 4 * budget, due));
	/* Back-to-back chunks queue up behind each other. */
	weft_pacer_sent(&pc, 1u << 20, due - 1e-3);
	ck_assert_double_eq_tol(pc.release_at, due + (1u << 20) / rc, 1e-12);
}
END_TEST

START_TEST(off_admits_everything)
{
	struct weft_pacer pc;
	params.mode = WEFT_PACER_OFF;
	weft_pacer_init(&pc, &params, LINE, T0);
	weft_pacer_feedback(&pc, &marked, T0);
	ck_assert_double_eq(pc.rc_Bps, LINE);
	ck_assert(weft_pacer_admit(&pc, 1u << 30, 1u << 30, T0));
}
END_TEST

static struct weft_pacer_signal rtt(uint32_t us)
{
	return (struct weft_pacer_signal){.delivered = 10, .rtt_us = us};
}

START_TEST(delay_decrease_in_proportion)
{
	struct weft_pacer pc;
	params.mode = WEFT_PACER_DELAY;
	weft_pacer_init(&pc, &params, LINE, T0);
	struct weft_pacer_signal s = rtt(100);
	weft_pacer_feedback(&pc, &s, T0);
	ck_assert_double_eq_tol(pc.base_rtt_s, 100e-6, 1e-12);
	ck_assert_double_eq(pc.rc_Bps, LINE);
	/* target = 100 + 4 x 25 = 200 us; 250 us: 1 - 0.8 x 50 / 250 = 0.84. */
	s = rtt(250);
	weft_pacer_feedback(&pc, &s, T0 + 1e-3);
	ck_assert_double_eq_tol(pc.rc_Bps, LINE * 0.84, 1e-3);
	/* Within one RTT of the decrease: no second one. */
	weft_pacer_feedback(&pc, &s, T0 + 1e-3 + 100e-6);
	ck_assert_double_eq_tol(pc.rc_Bps, LINE * 0.84, 1e-3);
	/* Far above: max_mdf bounds the cut at a half. */
	s = rtt(10000);
	weft_pacer_feedback(&pc, &s, T0 + 20e-3);
	ck_assert_double_eq_tol(pc.rc_Bps, LINE * 0.42, 1e-3);
	ck_assert_uint_eq(pc.cuts, 2);
}
END_TEST

START_TEST(delay_additive_below_target)
{
	struct weft_pacer pc;
	params.mode = WEFT_PACER_DELAY;
	params.start_rate_Bps = 100e6;
	weft_pacer_init(&pc, &params, LINE, T0);
	struct weft_pacer_signal s = rtt(100);
	weft_pacer_feedback(&pc, &s, T0 + 50e-6); /* half an RTT since init */
	ck_assert_double_eq_tol(pc.rc_Bps, 100e6 + params.delay_ai_Bps / 2, 1e-3);
	weft_pacer_feedback(&pc, &s, T0 + 1.0); /* a long gap: one RTT's worth */
	ck_assert_double_eq_tol(pc.rc_Bps, 100e6 + 1.5 * params.delay_ai_Bps, 1e-3);
	/* No RTT: nothing changes. */
	s = rtt(0);
	weft_pacer_feedback(&pc, &s, T0 + 2.0);
	ck_assert_double_eq_tol(pc.rc_Bps, 100e6 + 1.5 * params.delay_ai_Bps, 1e-3);
	/* Marks do not move the delay controller. */
	weft_pacer_feedback(&pc, &marked, T0 + 3.0);
	ck_assert_uint_eq(pc.cuts, 0);
}
END_TEST

START_TEST(settings_defaults_and_errors)
{
	weft_registry_init();
	struct weft_pacer_params p, d;
	struct weft_err err = {0};
	unsetenv("WEFT_PACER");
	ck_assert_int_eq(weft_pacer_params_read(&p, &err), WEFT_SUCCESS);
	ck_assert_int_eq(p.mode, WEFT_PACER_OFF);
	weft_pacer_params_default(&d);
	ck_assert_double_eq_tol(p.g, d.g, 1e-15);
	ck_assert_double_eq_tol(p.timer_s, d.timer_s, 1e-15);
	ck_assert_uint_eq(p.byte_counter, d.byte_counter);
	ck_assert_int_eq(p.stages, 5);
	ck_assert_double_eq_tol(p.rai_Bps, d.rai_Bps, 1e-6);
	setenv("WEFT_PACER", "delay", 1);
	setenv("WEFT_PACER_STAGES", "3", 1);
	ck_assert_int_eq(weft_pacer_params_read(&p, &err), WEFT_SUCCESS);
	ck_assert_int_eq(p.mode, WEFT_PACER_DELAY);
	ck_assert_int_eq(p.stages, 3);
	setenv("WEFT_PACER", "fast", 1);
	ck_assert_int_eq(weft_pacer_params_read(&p, &err), WEFT_ERR_INVALID_ARG);
	ck_assert_ptr_nonnull(strstr(err.msg, "WEFT_PACER=fast"));
	memset(&err, 0, sizeof(err)); /* the first error stays */
	setenv("WEFT_PACER", "dcqcn", 1);
	setenv("WEFT_PACER_G", "2", 1);
	ck_assert_int_eq(weft_pacer_params_read(&p, &err), WEFT_ERR_INVALID_ARG);
	ck_assert_ptr_nonnull(strstr(err.msg, "WEFT_PACER_G=2"));
	unsetenv("WEFT_PACER_G");
	memset(&err, 0, sizeof(err));
	setenv("WEFT_PACER_START_RATE", "-5", 1);
	ck_assert_int_eq(weft_pacer_params_read(&p, &err), WEFT_ERR_INVALID_ARG);
	ck_assert_ptr_nonnull(strstr(err.msg, "WEFT_PACER_START_RATE"));
	unsetenv("WEFT_PACER_START_RATE");
	unsetenv("WEFT_PACER_STAGES");
	unsetenv("WEFT_PACER");
}
END_TEST

static Suite *pacer_suite(void)
{
	Suite *s = suite_create("pacer");
	TCase *tc = tcase_create("dcqcn");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, dcqcn_first_mark_halves);
	tcase_add_test(tc, dcqcn_cut_by_alpha_over_two);
	tcase_add_test(tc, dcqcn_alpha_waits_for_the_first_cut);
	tcase_add_test(tc, dcqcn_one_cut_per_interval);
	tcase_add_test(tc, dcqcn_no_increase_before_a_cut);
	tcase_add_test(tc, dcqcn_cut_from_delivery_rate);
	tcase_add_test(tc, dcqcn_delivery_rate_windowed_max);
	tcase_add_test(tc, dcqcn_one_cut_and_one_increase_per_rtt);
	tcase_add_test(tc, dcqcn_idle_recovers_only_to_the_target);
	tcase_add_test(tc, dcqcn_fast_recovery_five_stages);
	tcase_add_test(tc, dcqcn_byte_counter_recovers_too);
	tcase_add_test(tc, dcqcn_hyper_increase);
	tcase_add_test(tc, dcqcn_recovers_to_line_and_stops_pacing);
	tcase_add_test(tc, dcqcn_floor);
	tcase_add_test(tc, release_time_and_budget);
	tcase_add_test(tc, off_admits_everything);
	suite_add_tcase(s, tc);
	tc = tcase_create("delay");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, delay_decrease_in_proportion);
	tcase_add_test(tc, delay_additive_below_target);
	suite_add_tcase(s, tc);
	tc = tcase_create("settings");
	tcase_add_test(tc, settings_defaults_and_errors);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(pacer_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
