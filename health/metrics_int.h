/* metrics_int.h — what the exporter's files share (metrics.h says why). */
#ifndef WEFT_METRICS_INT_H
#define WEFT_METRICS_INT_H

#include <stdbool.h>

#include "health/metrics.h"

struct weft_metrics_conf {
	double interval_s; /* WEFT_METRICS_INTERVAL */
	int port;	   /* WEFT_METRICS_PORT (base); 0 none */
	int peers;	   /* WEFT_METRICS_PEERS */
	int connections;   /* WEFT_METRICS_CONNECTIONS */
};

/* metrics_export.c: join the exporter (the first communicator starts its
 * file thread and endpoint, at base port + @p local_rank), and leave it. */
void weft_metrics_export_add(struct weft_metrics *m, int local_rank);
void weft_metrics_export_remove(struct weft_metrics *m);

/* metrics_http.c: the /metrics endpoint (libmicrohttpd, loaded with
 * dlopen): NULL, after a warning that says why, where it cannot serve. */
struct weft_metrics_http;
struct weft_metrics_http *weft_metrics_http_start(const char *addr, int port, int connections);
void weft_metrics_http_stop(struct weft_metrics_http *h);

/* The Content-Type of each format. */
const char *weft_metrics_content_type(enum weft_metrics_format format);

/* A label value, escaped as both formats want (\\, \", \n). */
void weft_mbuf_label(struct weft_mbuf *b, const char *value);

/* metrics_render.c: a family's "# HELP" and "# TYPE" (a counter's
 * samples are BASE_total) and its samples, name{labels extra} value;
 * @p extra is "" or starts with a comma. */
struct weft_mout {
	struct weft_mbuf *b;
	enum weft_metrics_format fmt;
};

enum weft_mkind { WEFT_MK_COUNTER = 0, WEFT_MK_GAUGE, WEFT_MK_HISTOGRAM };

void weft_mout_header(struct weft_mout *o, const char *base, enum weft_mkind k, const char *help);
void weft_mout_u(struct weft_mout *o, const char *name, const char *labels, const char *extra,
		 unsigned long long v);
void weft_mout_d(struct weft_mout *o, const char *name, const char *labels, const char *extra,
		 double v);

/* metrics_peers.c: the connections' series, per peer or per peer leaf. */
void weft_metrics_render_peers(const struct weft_metrics *list, struct weft_mout *o);

#endif
