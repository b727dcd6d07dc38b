/* pacer.c — see pacer.h. */
#include "core/pace/pacer.h"

#include <string.h>

static const char *const mode_names[] = {"off", "dcqcn", "delay"};

const char *weft_pacer_mode_name(enum weft_pacer_mode mode)
{
	return (unsigned)mode < 3 ? mode_names[mode] : "?";
}

static double clamp_rate(const struct weft_pacer *pc, double r)
{
	if (r > pc->line_Bps)
		return pc->line_Bps;
	return r < pc->p->min_rate_Bps ? pc->p->min_rate_Bps : r;
}

void weft_pacer_init(struct weft_pacer *pc, const struct weft_pacer_params *p, double line_Bps,
		     double now)
{
	memset(pc, 0, sizeof(*pc));
	pc->p = p;
	pc->line_Bps = line_Bps > p->min_rate_Bps ? line_Bps : p->min_rate_Bps;
	pc->rc_Bps = pc->rt_Bps = pc->line_Bps;
	if (p->start_rate_Bps > 0)
		pc->rc_Bps = pc->rt_Bps = clamp_rate(pc, p->start_rate_Bps);
	pc->alpha = 1.0; /* DCQCN's initial value: the first cut halves */
	pc->alpha_at = pc->timer_at = now;
	pc->cut_at = -1;
	pc->release_at = now;
}

/* Back at the line rate, DCQCN releases the flow's rate limiter: the next
 * congestion starts afresh (alpha 1, the first cut halves), as a flow's
 * first notification does. */
static void release_at_line(struct weft_pacer *pc)
{
	if (pc->p->mode != WEFT_PACER_DCQCN || pc->cut_at < 0 || pc->rc_Bps < pc->line_Bps)
		return;
	pc->alpha = 1.0;
	pc->alpha_delivered = pc->alpha_ce = 0;
	pc->cut_at = -1;
	pc->t_events = pc->bc_events = 0;
	pc->bytes = 0;
}

/* One rate-increase event (timer or byte counter), judged by the events
 * counted before it: the first F of either kind are fast recovery. The
 * caller counts the event afterwards. */
static void increase(struct weft_pacer *pc)
{
	const struct weft_pacer_params *p = pc->p;
	int hi = pc->t_events > pc->bc_events ? pc->t_events : pc->bc_events;
	int lo = pc->t_events < pc->bc_events ? pc->t_events : pc->bc_events;
	if (lo >= p->stages)
		pc->rt_Bps += (lo - p->stages + 1) * p->rhai_Bps; /* hyper */
	else if (hi >= p->stages)
		pc->rt_Bps += p->rai_Bps; /* additive */
	/* else fast recovery: R_T stays */
	pc->rt_Bps = clamp_rate(pc, pc->rt_Bps);
	pc->rc_Bps = clamp_rate(pc, (pc->rt_Bps + pc->rc_Bps) / 2);
}

/* alpha: once per period that saw deliveries, the EWMA takes the
 * fraction of them that were marked (a period with none says nothing of
 * the path and leaves it). */
static void dcqcn_alpha(struct weft_pacer *pc, const struct weft_pacer_signal *sig, double now)
{
	const struct weft_pacer_params *p = pc->p;
	if (pc->cut_at < 0)
		return; /* no rate limiter yet: alpha waits at 1 */
	pc->alpha_delivered += sig->delivered;
	pc->alpha_ce += sig->delivered_ce < sig->delivered ? sig->delivered_ce : sig->delivered;
	if (now - pc->alpha_at < p->alpha_period_s)
		return;
	if (pc->alpha_delivered == 0) {
		pc->alpha_at = now; /* an empty period: the next one starts now */
		return;
	}
	double f = (double)pc->alpha_ce / (double)pc->alpha_delivered;
	pc->alpha = (1 - p->g) * pc->alpha + p->g * f;
	pc->alpha_at = now;
	pc->alpha_delivered = pc->alpha_ce = 0;
}

/* The increase timer of dcqcn fires once per period (the timer, or the
 * RTT if longer) after a cut; while idle its events only recover toward
 * R_T. A long gap between calls runs every period it covered (at most 64
 * times: by then the rate is back at line rate for any sane setting). */
static void dcqcn_advance(struct weft_pacer *pc, double now, bool idle)
{
	const struct weft_pacer_params *p = pc->p;
	if (pc->cut_at < 0)
		return; /* no rate limiter yet */
	double period = p->timer_s > pc->rtt_s ? p->timer_s : pc->rtt_s;
	for (int i = 0; i < 64 && now - pc->timer_at >= period; i++) {
		pc->timer_at += period;
		if (idle) {
			/* Idle: back toward R_T, the rate the path took before the
			 * cut, but no stage counted and R_T never raised (pacer.h). */
			pc->rc_Bps = clamp_rate(pc, (pc->rt_Bps + pc->rc_Bps) / 2);
			continue;
		}
		increase(pc);
		pc->t_events++;
	}
	if (now - pc->timer_at >= period)
		pc->timer_at = now;
	release_at_line(pc);
}

/* The largest delivery rate of the last rate_window RTTs (at least as
 * many timer periods): a sample replaces it when larger, or when it is
 * older than that. */
static void note_delivery(struct weft_pacer *pc, double sample, double now)
{
	if (!(sample > 0))
		return;
	double rtt = pc->rtt_s > pc->p->timer_s ? pc->rtt_s : pc->p->timer_s;
	if (sample >= pc->delivery_Bps || now - pc->delivery_at > pc->p->rate_window * rtt) {
		pc->delivery_Bps = sample;
		pc->delivery_at = now;
	}
}

/* The cut starts from the delivery rate when the connection sent slower
 * than R_C allowed (pacer.h). */
static void dcqcn_cut(struct weft_pacer *pc, double now)
{
	double from = pc->rc_Bps;
	if (pc->delivery_Bps > 0 && pc->delivery_Bps < from)
		from = clamp_rate(pc, pc->delivery_Bps);
	pc->rt_Bps = from;
	pc->rc_Bps = clamp_rate(pc, from * (1 - pc->alpha / 2));
	if (pc->cut_at < 0)
		pc->alpha_at = now; /* alpha's periods start with the rate limiter */
	pc->timer_at = now;
	pc->cut_at = now;
	pc->bytes = 0;
	pc->t_events = pc->bc_events = 0;
	pc->cuts++;
}

static void dcqcn_feedback(struct weft_pacer *pc, const struct weft_pacer_signal *sig, double now)
{
	if (sig->delivered_ce == 0)
		return;
	double interval = pc->p->cnp_interval_s > pc->rtt_s ? pc->p->cnp_interval_s : pc->rtt_s;
	if (pc->cut_at >= 0 && now - pc->cut_at < interval)
		return;
	dcqcn_cut(pc, now);
}

static void delay_feedback(struct weft_pacer *pc, const struct weft_pacer_signal *sig, double now)
{
	const struct weft_pacer_params *p = pc->p;
	if (sig->rtt_us == 0)
		return;
	double rtt = sig->rtt_us * 1e-6;
	double dt = now - pc->timer_at;
	pc->timer_at = now;
	pc->rtt_s = rtt;
	if (pc->base_rtt_s == 0 || rtt < pc->base_rtt_s)
		pc->base_rtt_s = rtt;
	double target = pc->base_rtt_s + p->hops * p->hop_delay_s;
	if (rtt <= target) {
		double per_rtt = dt > 0 ? dt / rtt : 0;
		pc->rc_Bps =
		    clamp_rate(pc, pc->rc_Bps + p->delay_ai_Bps * (per_rtt < 1 ? per_rtt : 1));
		return;
	}
	if (pc->cut_at >= 0 && now - pc->cut_at < rtt)
		return;
	double f = 1 - p->delay_beta * (rtt - target) / rtt;
	if (f < 1 - p->delay_max_mdf)
		f = 1 - p->delay_max_mdf;
	pc->rc_Bps = clamp_rate(pc, pc->rc_Bps * f);
	pc->cut_at = now;
	pc->cuts++;
}

void weft_pacer_advance(struct weft_pacer *pc, double now)
{
	if (pc->p->mode == WEFT_PACER_DCQCN)
		dcqcn_advance(pc, now, false);
}

void weft_pacer_feedback(struct weft_pacer *pc, const struct weft_pacer_signal *sig, double now)
{
	pc->delivered += sig->delivered;
	pc->marks += sig->delivered_ce;
	if (pc->p->mode == WEFT_PACER_DCQCN) {
		if (sig->rtt_us)
			pc->rtt_s = sig->rtt_us * 1e-6;
		note_delivery(pc, sig->delivery_Bps, now);
		dcqcn_advance(pc, now, sig->idle);
		dcqcn_alpha(pc, sig, now);
		dcqcn_feedback(pc, sig, now);
	} else if (pc->p->mode == WEFT_PACER_DELAY) {
		delay_feedback(pc, sig, now);
	}
}

void weft_pacer_sent(struct weft_pacer *pc, size_t bytes, double now)
{
	if (!weft_pacer_limiting(pc))
		return;
	double from = pc->release_at > now ? pc->release_at : now;
	pc->release_at = from + (double)bytes / pc->rc_Bps;
	if (pc->p->mode != WEFT_PACER_DCQCN || pc->cut_at < 0)
		return;
	pc->bytes += bytes;
	while (pc->bytes >= pc->p->byte_counter) {
		pc->bytes -= pc->p->byte_counter;
		increase(pc);
		pc->bc_events++;
	}
	release_at_line(pc);
}

bool weft_pacer_limiting(const struct weft_pacer *pc)
{
	return pc->p->mode != WEFT_PACER_OFF && pc->rc_Bps < pc->line_Bps;
}

size_t weft_pacer_budget(const struct weft_pacer *pc)
{
	return (size_t)(pc->rc_Bps * pc->p->window_s);
}

bool weft_pacer_admit(const struct weft_pacer *pc, size_t inflight, size_t bytes, double now)
{
	if (!weft_pacer_limiting(pc))
		return true;
	if (now < pc->release_at)
		return false;
	return inflight == 0 || inflight + bytes <= weft_pacer_budget(pc);
}
