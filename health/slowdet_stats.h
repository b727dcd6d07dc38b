/*
 * slowdet_stats.h — the detector's decisions, as pure functions of what
 * the ranks measured in one period (no clock, no socket, no
 * communicator), so that tests/unit/health/slowdet.c can drive them with
 * made-up jobs. slowdet.h says what is measured and why.
 */
#ifndef WEFT_SLOWDET_STATS_H
#define WEFT_SLOWDET_STATS_H

#include <stdbool.h>
#include <stdint.h>

/* A connection's rate over a period is believed when the connection
 * moved at least this many bytes with data out at least this long. */
#define WEFT_DETECT_MIN_BYTES  (256u << 10)
#define WEFT_DETECT_MIN_BUSY_S 0.01
/* Outliers: this many scaled MADs below the median, and at least ... */
#define WEFT_DETECT_Z 3.0
/* ... this factor below it for a host's rate, */
#define WEFT_DETECT_RATE_FACTOR 2.0
/* ... and this many seconds above it for a rank's lateness, */
#define WEFT_DETECT_LATE_S 0.01
/* ... and this share of the time above it for a rank's time not running. */
#define WEFT_DETECT_OFF_GAP 0.1

/* One connection's period: from rank src to rank dst. */
struct weft_slowdet_link_obs {
	int src, dst;
	uint64_t bytes;	 /* acknowledged */
	double busy_s;	 /* with data out, less receiver-limited */
	double rate_Bps; /* bytes / busy_s */
};

/* The median of @p v (n > 0; @p v is sorted in place). */
double weft_slowdet_median(double *v, int n);

/* The median absolute deviation from @p med, scaled by 1.4826 (a normal
 * distribution's standard deviation); @p tmp holds n doubles. */
double weft_slowdet_mad(const double *v, int n, double med, double *tmp);

/* Hosts whose uplink is slow. @p host_of maps ranks to hosts (0 ..
 * nhosts-1). best[h] is the best believed rate of a connection into or
 * out of host h (0: none believed; connections inside a host do not
 * count). slow[h] is set for the outliers; *median_Bps is the hosts'
 * median best rate. A host is judged only on believed connections to at
 * least 2 other hosts: one slow connection may be its peer's fault.
 * Returns how many are slow (0 with fewer than 3 hosts with a rate).
 * @p tmp holds 2 x nhosts doubles and @p itmp 2 x nhosts ints. */
int weft_slowdet_slow_hosts(const struct weft_slowdet_link_obs *links, int nlinks,
			    const int *host_of, int nhosts, double *best, bool *slow,
			    double *median_Bps, double *tmp, int *itmp);

/* Ranks that arrive late: late[r] is how long, on average, the ranks that
 * receive from rank r waited after posting an operation for its first
 * message, have[r] whether any said; skip[r] leaves a rank out (its
 * host's uplink is named, which explains it). slow[r] is set for the
 * outliers (3 scaled MADs and WEFT_DETECT_LATE_S above the median, and
 * twice it); *median is the median. Returns how many (0 with fewer than 3
 * ranks known). @p tmp holds 2 x n doubles. */
int weft_slowdet_late_ranks(const double *late, const bool *have, const bool *skip, int n,
			    bool *slow, double *median, double *tmp);

/* Ranks that did not run: off[r] is the share of the last periods rank
 * r's process did not run when it asked to (its watch thread woke late:
 * stopped, or its cores taken), have[r] whether it said; skip[r] as
 * above. slow[r] is set for the outliers (3 scaled MADs and
 * WEFT_DETECT_OFF_GAP above the median, and twice it): a machine whose
 * ranks all starve alike names nobody. *median is the median. Returns how
 * many (0 with fewer than 3 ranks known). @p tmp holds 2 x n doubles. */
int weft_slowdet_off_ranks(const double *off, const bool *have, const bool *skip, int n, bool *slow,
			   double *median, double *tmp);

/* A rank that did not run holds up every rank downstream of it, whose
 * first messages then come late too: while any rank is off (off[r], or
 * named for it: named_off[r]), clear late[k] for every rank k that is not
 * itself off, as a slow uplink explains its host's ranks. */
void weft_slowdet_late_explained(bool *late, const bool *off, const bool *named_off, int n);

/* Naming and clearing: a suspect is named after @p confirm periods in a
 * row flagged, and cleared after @p confirm in a row clean. */
struct weft_slowdet_run {
	uint16_t flagged, clean; /* periods in a row */
	bool named;
	uint32_t ops; /* operations the job finished while flagged */
};

enum weft_slowdet_change { WEFT_DETECT_SAME = 0, WEFT_DETECT_NAMED, WEFT_DETECT_CLEARED };

/* The periods in a row a slow host's uplink needs before it is named: one
 * fewer than @p confirm (at least 1) when its rate @p rate_Bps is
 * WEFT_DETECT_SEVERE times below the job's @p median_Bps or more, else
 * @p confirm. A host's rate is taken over the last periods together (a
 * window, slowdet_int.h), so a first flagged period already holds more
 * than one period of slow data; one that deep is no passing hiccup. */
#define WEFT_DETECT_SEVERE 4.0
int weft_slowdet_link_confirm(double rate_Bps, double median_Bps, int confirm);

/* One period of one suspect: @p flagged this period, @p ops the job
 * finished in it. */
enum weft_slowdet_change weft_slowdet_step(struct weft_slowdet_run *run, bool flagged, uint32_t ops,
					   int confirm);

#endif
