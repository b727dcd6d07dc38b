/* slowdet_stats.c — see slowdet_stats.h. */
#include "health/slowdet_stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double weft_slowdet_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double weft_slowdet_mad(const double *v, int n, double med, double *tmp)
{
	for (int i = 0; i < n; i++)
		tmp[i] = fabs(v[i] - med);
	return 1.4826 * weft_slowdet_median(tmp, n);
}

/* Scaled MADs below which a small spread is not believed: a job whose
 * hosts all run alike has a MAD near 0, and jitter must not be an
 * outlier. In log units: 5 %. */
#define LOG_MAD_FLOOR 0.05

/* One believed connection between hosts @p a and @p b at @p rate: the
 * host's best, and the other hosts it has been seen with (the first in
 * peer[a], -1 none; two[a] once a second one appears). */
static void take(double *best, int *peer, int *two, int a, int b, double rate)
{
	if (rate > best[a])
		best[a] = rate;
	if (peer[a] < 0)
		peer[a] = b;
	else if (peer[a] != b)
		two[a] = 1;
}

int weft_slowdet_slow_hosts(const struct weft_slowdet_link_obs *links, int nlinks,
			    const int *host_of, int nhosts, double *best, bool *slow,
			    double *median_Bps, double *tmp, int *itmp)
{
	int *peer = itmp, *two = itmp + nhosts;
	memset(best, 0, (size_t)nhosts * sizeof(*best));
	memset(slow, 0, (size_t)nhosts * sizeof(*slow));
	memset(two, 0, (size_t)nhosts * sizeof(*two));
	for (int h = 0; h < nhosts; h++)
		peer[h] = -1;
	*median_Bps = 0;
	for (int i = 0; i < nlinks; i++) {
		const struct weft_slowdet_link_obs *l = &links[i];
		int a = host_of[l->src], b = host_of[l->dst];
		if (a == b || l->bytes < WEFT_DETECT_MIN_BYTES ||
		    l->busy_s < WEFT_DETECT_MIN_BUSY_S || !(l->rate_Bps > 0))
			continue;
		take(best, peer, two, a, b, l->rate_Bps);
		take(best, peer, two, b, a, l->rate_Bps);
	}
	double *logs = tmp, *scratch = tmp + nhosts;
	int n = 0;
	for (int h = 0; h < nhosts; h++)
		if (best[h] > 0)
			logs[n++] = log(best[h]);
	if (n < 3)
		return 0;
	double med = weft_slowdet_median(logs, n);
	double mad = weft_slowdet_mad(logs, n, med, scratch);
	if (mad < LOG_MAD_FLOOR)
		mad = LOG_MAD_FLOOR;
	double gap = fmax(WEFT_DETECT_Z * mad, log(WEFT_DETECT_RATE_FACTOR));
	*median_Bps = exp(med);
	int found = 0;
	for (int h = 0; h < nhosts; h++)
		if (best[h] > 0 && log(best[h]) < med - gap && two[h]) {
			slow[h] = true;
			found++;
		}
	return found;
}

/* The outliers of @p v above its median by @p floor (and 3 scaled MADs,
 * and twice the median); the median in *median. */
static int high_outliers(const double *v_in, const bool *have, const bool *skip, int n,
			 double floor, bool *slow, double *median, double *tmp)
{
	memset(slow, 0, (size_t)n * sizeof(*slow));
	*median = 0;
	double *v = tmp, *scratch = tmp + n;
	int m = 0;
	for (int r = 0; r < n; r++)
		if (have[r])
			v[m++] = v_in[r];
	if (m < 3)
		return 0;
	double med = weft_slowdet_median(v, m);
	double mad = weft_slowdet_mad(v, m, med, scratch);
	*median = med;
	double gap = fmax(WEFT_DETECT_Z * mad, floor);
	int found = 0;
	for (int r = 0; r < n; r++)
		if (have[r] && !skip[r] && v_in[r] > med + gap && v_in[r] > 2 * med) {
			slow[r] = true;
			found++;
		}
	return found;
}

int weft_slowdet_late_ranks(const double *late, const bool *have, const bool *skip, int n,
			    bool *slow, double *median, double *tmp)
{
	return high_outliers(late, have, skip, n, WEFT_DETECT_LATE_S, slow, median, tmp);
}

int weft_slowdet_off_ranks(const double *off, const bool *have, const bool *skip, int n, bool *slow,
			   double *median, double *tmp)
{
	return high_outliers(off, have, skip, n, WEFT_DETECT_OFF_GAP, slow, median, tmp);
}

void weft_slowdet_late_explained(bool *late, const bool *off, const bool *named_off, int n)
{
	bool any = false;
	for (int r = 0; r < n; r++)
		any |= off[r] || named_off[r];
	for (int r = 0; r < n && any; r++)
		if (!off[r] && !named_off[r])
			late[r] = false;
}

int weft_slowdet_link_confirm(double rate_Bps, double median_Bps, int confirm)
{
	bool severe = rate_Bps > 0 && rate_Bps * WEFT_DETECT_SEVERE <= median_Bps;
	return severe && confirm > 1 ? confirm - 1 : confirm;
}

enum weft_slowdet_change weft_slowdet_step(struct weft_slowdet_run *run, bool flagged, uint32_t ops,
					   int confirm)
{
	if (flagged) {
		run->clean = 0;
		if (run->flagged < UINT16_MAX)
			run->flagged++;
		run->ops += ops;
		if (!run->named && run->flagged >= confirm) {
			run->named = true;
			return WEFT_DETECT_NAMED;
		}
		return WEFT_DETECT_SAME;
	}
	run->flagged = 0;
	if (!run->named) {
		run->ops = 0;
		return WEFT_DETECT_SAME;
	}
	if (run->clean < UINT16_MAX)
		run->clean++;
	if (run->clean >= confirm) {
		run->named = false;
		run->clean = 0;
		run->ops = 0;
		return WEFT_DETECT_CLEARED;
	}
	return WEFT_DETECT_SAME;
}
