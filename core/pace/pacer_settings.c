/*
 * pacer_settings.c — the pacer's constants as settings, and reading them.
 *
 * Defaults: DCQCN's reaction point as its paper gives them (g = 1/256,
 * alpha and rate timers of 55 us, byte counter 10 MB, F = 5 stages,
 * R_AI 40 Mbit/s, R_HAI 10 x R_AI; one CNP per 50 us), and Swift's shape
 * for delay (beta 0.8, max_mdf 0.5). Rates are in bytes per second.
 */
#include <stdio.h>
#include <string.h>

#include "core/pace/pacer.h"
#include "core/pace/pacer_settings.h"
#include "util/settings.h"

const struct weft_setting weft_pacer_settings[] = {
    {"WEFT_PACER", "off",
     "congestion pacer per network connection: off, dcqcn (ECN marks) or delay (RTT)"},
    {"WEFT_PACER_G", "0.00390625", "dcqcn: gain of alpha's EWMA (1/256)"},
    {"WEFT_PACER_ALPHA_PERIOD", "55e-6",
     "dcqcn: seconds per sample of the marked fraction alpha averages (K)"},
    {"WEFT_PACER_TIMER", "55e-6",
     "dcqcn: seconds per rate-increase timer event (T; at least the RTT)"},
    {"WEFT_PACER_BYTES", "10M", "dcqcn: bytes sent per rate-increase byte-counter event (B)"},
    {"WEFT_PACER_STAGES", "5", "dcqcn: fast-recovery stages (F)"},
    {"WEFT_PACER_RAI", "5e6", "dcqcn: additive increase, bytes/s (40 Mbit/s)"},
    {"WEFT_PACER_RHAI", "50e6", "dcqcn: hyper increase, bytes/s (400 Mbit/s)"},
    {"WEFT_PACER_CNP_INTERVAL", "50e-6",
     "dcqcn: seconds between two cuts at least (and at least the RTT)"},
    {"WEFT_PACER_MIN_RATE", "1e6", "lowest rate a connection is paced to, bytes/s"},
    {"WEFT_PACER_START_RATE", NULL,
     "rate (bytes/s) a connection starts at (default: its line rate; dcqcn rises only after a "
     "cut, so this paces every connection, for tests)"},
    {"WEFT_PACER_WINDOW", "1e-3", "bytes in flight a paced connection may have: rate x this, s"},
    {"WEFT_PACER_RATE_WINDOW", "10",
     "dcqcn: RTTs the largest delivery rate is remembered for (a cut starts from it)"},
    {"WEFT_PACER_TICK", "50e-6", "seconds between two reads of the transports' signals"},
    {"WEFT_PACER_HOP_DELAY", "25e-6", "delay: target delay allowance per hop, s"},
    {"WEFT_PACER_HOPS", "4", "delay: hops on a path (target = base RTT + hops x hop delay)"},
    {"WEFT_PACER_DELAY_AI", "5e6", "delay: additive increase per RTT below target, bytes/s"},
    {"WEFT_PACER_DELAY_BETA", "0.8", "delay: decrease per unit of relative excess delay"},
    {"WEFT_PACER_DELAY_MAX_MDF", "0.5", "delay: largest fraction cut at once"},
};

const size_t weft_pacer_nsettings = sizeof(weft_pacer_settings) / sizeof(weft_pacer_settings[0]);

/* The core declares its pacer's settings itself (the transport registry
 * declares only the transports'), when the library loads, so that
 * weft-topo --settings lists them before any communicator exists. */
__attribute__((constructor)) static void pacer_settings_load(void)
{
	weft_settings_add(weft_pacer_settings, weft_pacer_nsettings);
}

void weft_pacer_params_default(struct weft_pacer_params *p)
{
	*p = (struct weft_pacer_params){
	    .mode = WEFT_PACER_DCQCN,
	    .g = 1.0 / 256,
	    .alpha_period_s = 55e-6,
	    .timer_s = 55e-6,
	    .byte_counter = 10u << 20,
	    .stages = 5,
	    .rai_Bps = 5e6,
	    .rhai_Bps = 50e6,
	    .cnp_interval_s = 50e-6,
	    .min_rate_Bps = 1e6,
	    .window_s = 1e-3,
	    .rate_window = 10,
	    .hop_delay_s = 25e-6,
	    .hops = 4,
	    .delay_ai_Bps = 5e6,
	    .delay_beta = 0.8,
	    .delay_max_mdf = 0.5,
	};
}

static weft_status_t bad(struct weft_err *err, const char *name, const char *want)
{
	return weft_err_set(err, WEFT_ERR_INVALID_ARG, "%s=%s: expected %s", name,
			    weft_setting_str(name), want);
}

/* A positive number (a fraction if @p fraction: in (0, 1]). */
static bool read_pos(const char *name, double *out, bool fraction)
{
	double v = 0;
	if (!weft_setting_double(name, &v) || !(v > 0) || (fraction && v > 1))
		return false;
	*out = v;
	return true;
}

static weft_status_t read_mode(struct weft_pacer_params *p, struct weft_err *err)
{
	const char *m = weft_setting_str("WEFT_PACER");
	for (int i = 0; i < 3; i++)
		if (strcmp(m, weft_pacer_mode_name((enum weft_pacer_mode)i)) == 0) {
			p->mode = (enum weft_pacer_mode)i;
			return WEFT_SUCCESS;
		}
	return bad(err, "WEFT_PACER", "off, dcqcn or delay");
}

weft_status_t weft_pacer_params_read(struct weft_pacer_params *p, struct weft_err *err)
{
	weft_pacer_params_default(p);
	struct {
		const char *name;
		double *out;
		bool fraction;
	} reals[] = {
	    {"WEFT_PACER_G", &p->g, true},
	    {"WEFT_PACER_ALPHA_PERIOD", &p->alpha_period_s, false},
	    {"WEFT_PACER_TIMER", &p->timer_s, false},
	    {"WEFT_PACER_RAI", &p->rai_Bps, false},
	    {"WEFT_PACER_RHAI", &p->rhai_Bps, false},
	    {"WEFT_PACER_CNP_INTERVAL", &p->cnp_interval_s, false},
	    {"WEFT_PACER_MIN_RATE", &p->min_rate_Bps, false},
	    {"WEFT_PACER_WINDOW", &p->window_s, false},
	    {"WEFT_PACER_RATE_WINDOW", &p->rate_window, false},
	    {"WEFT_PACER_HOP_DELAY", &p->hop_delay_s, false},
	    {"WEFT_PACER_DELAY_AI", &p->delay_ai_Bps, false},
	    {"WEFT_PACER_DELAY_BETA", &p->delay_beta, true},
	    {"WEFT_PACER_DELAY_MAX_MDF", &p->delay_max_mdf, true},
	};
	for (size_t i = 0; i < sizeof(reals) / sizeof(reals[0]); i++)
		if (!read_pos(reals[i].name, reals[i].out, reals[i].fraction))
			return bad(err, reals[i].name,
				   reals[i].fraction ? "a number in (0, 1]" : "a positive number");
	long bytes = 0, stages = 0, hops = 0;
	if (!weft_setting_long("WEFT_PACER_BYTES", &bytes) || bytes < 1)
		return bad(err, "WEFT_PACER_BYTES", "a size of at least 1");
	if (!weft_setting_long("WEFT_PACER_STAGES", &stages) || stages < 1 || stages > 64)
		return bad(err, "WEFT_PACER_STAGES", "an integer from 1 to 64");
	if (!weft_setting_long("WEFT_PACER_HOPS", &hops) || hops > 64)
		return bad(err, "WEFT_PACER_HOPS", "an integer from 0 to 64");
	if (weft_setting_str("WEFT_PACER_START_RATE") &&
	    !read_pos("WEFT_PACER_START_RATE", &p->start_rate_Bps, false))
		return bad(err, "WEFT_PACER_START_RATE", "a positive number");
	p->byte_counter = (uint64_t)bytes;
	p->stages = (int)stages;
	p->hops = (int)hops;
	return read_mode(p, err);
}
