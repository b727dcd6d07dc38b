/*
 * metrics_http.c — the /metrics endpoint: GNU libmicrohttpd (Debian's
 * libmicrohttpd12), loaded with dlopen the first time an endpoint starts,
 * so that libweft loads and runs where it is missing (the endpoint then
 * says why in a warning, and the file and everything else go on).
 *
 * Why libmicrohttpd: a small, long-maintained C server that Debian ships,
 * with what an endpoint facing strangers needs built in: one internal
 * thread polling every connection with epoll (no thread per connection),
 * a cap on connections in all and per client address, an idle timeout, a
 * memory cap per connection, and HTTP/1.1 parsing we do not write.
 *
 * The endpoint is read-only and unauthenticated, as Prometheus endpoints
 * are: it serves GET (and HEAD) of /metrics and nothing else, binds
 * WEFT_METRICS_ADDR (127.0.0.1 unless the operator widens it), holds at
 * most WEFT_METRICS_CONNECTIONS connections (half of them per client
 * address, so one address cannot take them all) and drops one idle for
 * WEFT_HANDSHAKE_TIMEOUT seconds. It answers OpenMetrics 1.0 when the
 * request's Accept header asks for application/openmetrics-text (as
 * Prometheus does), else the text format 0.0.4.
 */
#include "health/metrics_int.h"

#include <stdio.h>
#include <string.h>

#include "util/log.h"
#include "util/settings.h"

#ifndef WEFT_HAVE_MHD

struct weft_metrics_http *weft_metrics_http_start(const char *addr, int port, int connections)
{
	weft_log(WEFT_LOG_WARN, WEFT_SUB_INIT,
		 "metrics: WEFT_METRICS_PORT is set, but this libweft was built without "
		 "libmicrohttpd's headers (libmicrohttpd-dev): no endpoint");
	return NULL;
}

void weft_metrics_http_stop(struct weft_metrics_http *h)
{
}

#else /* WEFT_HAVE_MHD */

#include <arpa/inet.h>
#include <dlfcn.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdlib.h>

/* The calls Weft makes, filled by dlsym. */
struct mhd_lib {
	struct MHD_Daemon *(*start)(unsigned int flags, uint16_t port, MHD_AcceptPolicyCallback apc,
				    void *apc_cls, MHD_AccessHandlerCallback dh, void *dh_cls, ...);
	void (*stop)(struct MHD_Daemon *daemon);
	struct MHD_Response *(*from_buffer)(size_t size, void *buffer,
					    enum MHD_ResponseMemoryMode mode);
	enum MHD_Result (*add_header)(struct MHD_Response *r, const char *header,
				      const char *content);
	enum MHD_Result (*queue)(struct MHD_Connection *c, unsigned int status,
				 struct MHD_Response *r);
	void (*destroy)(struct MHD_Response *r);
	const char *(*lookup)(struct MHD_Connection *c, enum MHD_ValueKind kind, const char *key);
};

struct weft_metrics_http {
	struct MHD_Daemon *daemon;
	struct mhd_lib lib;
	char where[96];
};

static bool find(void *h, const char *name, void *slot, char *why, size_t len)
{
	void *sym = dlsym(h, name);
	if (!sym) {
		snprintf(why, len, "libmicrohttpd lacks %s", name);
		return false;
	}
	memcpy(slot, &sym, sizeof(sym));
	return true;
}

/* dlopen once per process; the library stays loaded (a daemon's thread
 * may outlive nothing, but a second endpoint then costs no load). */
static bool load(struct mhd_lib *lib, char *why, size_t len)
{
	const char *path = weft_setting_str("WEFT_MHD_LIB");
	void *h = dlopen(path ? path : "libmicrohttpd.so.12", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(why, len, "%s%s (install libmicrohttpd12)", path ? "WEFT_MHD_LIB: " : "",
			 dlerror());
		return false;
	}
	return find(h, "MHD_start_daemon", &lib->start, why, len) &&
	       find(h, "MHD_stop_daemon", &lib->stop, why, len) &&
	       find(h, "MHD_create_response_from_buffer", &lib->from_buffer, why, len) &&
	       find(h, "MHD_add_response_header", &lib->add_header, why, len) &&
	       find(h, "MHD_queue_response", &lib->queue, why, len) &&
	       find(h, "MHD_destroy_response", &lib->destroy, why, len) &&
	       find(h, "MHD_lookup_connection_value", &lib->lookup, why, len);
}

static enum MHD_Result answer(struct weft_metrics_http *h, struct MHD_Connection *c,
			      unsigned status, const char *type, const char *body, size_t len)
{
	struct MHD_Response *r = h->lib.from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	h->lib.add_header(r, "Content-Type", type);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		h->lib.add_header(r, "Allow", "GET, HEAD");
	enum MHD_Result ret = h->lib.queue(c, status, r);
	h->lib.destroy(r);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	struct weft_metrics_http *h = cls;
	static const char text[] = "text/plain; charset=utf-8";
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
		static const char msg[] = "only GET /metrics\n";
		return answer(h, c, MHD_HTTP_METHOD_NOT_ALLOWED, text, msg, sizeof(msg) - 1);
	}
	if (strcmp(url, "/metrics") != 0) {
		static const char msg[] = "Weft serves /metrics only\n";
		return answer(h, c, MHD_HTTP_NOT_FOUND, text, msg, sizeof(msg) - 1);
	}
	const char *accept = h->lib.lookup(c, MHD_HEADER_KIND, "Accept");
	enum weft_metrics_format fmt = accept && strstr(accept, "application/openmetrics-text")
					   ? WEFT_METRICS_OPENMETRICS
					   : WEFT_METRICS_TEXT;
	struct weft_mbuf b = {0};
	weft_metrics_render(fmt, &b);
	enum MHD_Result ret;
	if (b.oom) {
		static const char msg[] = "out of memory\n";
		ret = answer(h, c, 500, text, msg, sizeof(msg) - 1);
	} else {
		ret =
		    answer(h, c, MHD_HTTP_OK, weft_metrics_content_type(fmt), b.p ? b.p : "", b.n);
	}
	weft_mbuf_free(&b);
	return ret;
}

/* The address to bind: WEFT_METRICS_ADDR (checked at init) and @p port. */
static socklen_t bind_addr(const char *addr, int port, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, addr, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		return sizeof(*a4);
	}
	inet_pton(AF_INET6, addr, &a6->sin6_addr);
	a6->sin6_family = AF_INET6;
	a6->sin6_port = htons((uint16_t)port);
	return sizeof(*a6);
}

struct weft_metrics_http *weft_metrics_http_start(const char *addr, int port, int connections)
{
	char why[256] = "";
	struct weft_metrics_http *h = calloc(1, sizeof(*h));
	if (!h || !load(&h->lib, why, sizeof(why))) {
		weft_log(WEFT_LOG_WARN, WEFT_SUB_INIT, "metrics: no endpoint on %s:%d: %s", addr,
			 port, h ? why : "no memory");
		free(h);
		return NULL;
	}
	struct sockaddr_storage ss;
	bind_addr(addr, port, &ss);
	long idle = 5;
	weft_setting_long("WEFT_HANDSHAKE_TIMEOUT", &idle);
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL;
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	unsigned per_ip = connections / 2 > 0 ? (unsigned)connections / 2 : 1;
	h->daemon = h->lib.start(
	    flags, (uint16_t)port, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR,
	    (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_LIMIT, (unsigned)connections,
	    MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip, MHD_OPTION_CONNECTION_TIMEOUT,
	    (unsigned)(idle > 0 ? idle : 5), MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)65536,
	    MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)SOMAXCONN, MHD_OPTION_END);
	snprintf(h->where, sizeof(h->where), "%s%s%s:%d", ss.ss_family == AF_INET6 ? "[" : "", addr,
		 ss.ss_family == AF_INET6 ? "]" : "", port);
	if (!h->daemon) {
		weft_log(WEFT_LOG_WARN, WEFT_SUB_INIT,
			 "metrics: no endpoint: libmicrohttpd could not listen on %s (in use?)",
			 h->where);
		free(h);
		return NULL;
	}
	weft_log(WEFT_LOG_INFO, WEFT_SUB_INIT, "metrics: serving http://%s/metrics", h->where);
	return h;
}

void weft_metrics_http_stop(struct weft_metrics_http *h)
{
	if (!h)
		return;
	h->lib.stop(h->daemon);
	free(h);
}

#endif
