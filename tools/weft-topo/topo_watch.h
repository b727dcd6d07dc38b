/*
 * topo_watch.h — weft-topo --watch: a live view of a running job from its
 * ranks' metrics (their /metrics endpoints, WEFT_METRICS_PORT, or the
 * files of WEFT_METRICS_FILE): hosts grouped by leaf, each rank's current
 * operation and busbw, each connection's throughput, path rate and marks,
 * the slowest link and rank highlighted and whatever the job's detector
 * named. topo_watch.c fetches and parses a frame; topo_watch_view.c draws
 * it (ncurses, or text for --once) and runs the loop.
 */
#ifndef WEFT_TOPO_WATCH_H
#define WEFT_TOPO_WATCH_H

#include <stdbool.h>
#include <stdio.h>

#define WATCH_NAME 72

struct wrank {
	char comm[24];
	int rank, nranks;
	char host[WATCH_NAME], leaf[WATCH_NAME];
	char cur[24];	 /* the collective in flight, "" none */
	double age;	 /* how long it has been */
	double busbw;	 /* the last busbw of its largest size class */
	int busbw_class; /* that class (0: the smallest), -1 none */
	char busbw_coll[24];
	double ops;	    /* finished */
	double wait, stall; /* seconds, cumulative */
	bool has_wait;	    /* the detector's series were there */
	double wait_rate;   /* since the previous frame: fraction of the time waiting */
	bool has_wait_rate;
};

struct wlink {
	char comm[24];
	int src, dst;
	char dst_host[WATCH_NAME];
	double sent, acked, busy, rwnd, ce, delivered, retrans;
	int nsub;
	/* since the previous frame */
	bool has_rate;
	double tput, path, ce_frac, retrans_d;
};

struct wslow {
	char comm[24];
	char kind[8];
	int rank;
	char host[WATCH_NAME], addr[64];
	bool named;
};

struct frame {
	double t; /* when it was taken (CLOCK_MONOTONIC seconds) */
	struct wrank *ranks;
	int nranks, cap_r;
	struct wlink *links;
	int nlinks, cap_l;
	struct wslow slow[32];
	int nslow;
	int targets, failed; /* targets asked, and those that gave nothing */
	char error[256];     /* the first failure */
};

/* Fetch every target (URLs at once, files read) and parse what they say
 * into @p f, rates against @p prev (NULL: none yet). */
void weft_watch_fetch(char *const *targets, int n, struct frame *f, const struct frame *prev);
void weft_watch_frame_free(struct frame *f);

/* Parse one target's text (Prometheus 0.0.4) into @p f. */
void weft_watch_parse(const char *text, size_t len, struct frame *f);

#endif
