/* netaddr.h — addresses from settings: "host:port" and interface names. */
#ifndef WEFT_NETADDR_H
#define WEFT_NETADDR_H

#include <sys/socket.h>

#include "util/error.h"

/* Parse "host:port" or "[v6]:port" (numeric or resolvable host). @p what
 * names the source in errors ("WEFT_ROOT"). */
weft_status_t weft_addr_parse(const char *text, const char *what, struct sockaddr_storage *out,
			      socklen_t *out_len, struct weft_err *err);

/* Resolve @p host (numeric or a name) and set @p port. On failure, *why is
 * the resolver's reason and nothing is logged: callers add their own context. */
weft_status_t weft_addr_resolve(const char *host, int port, struct sockaddr_storage *out,
				socklen_t *out_len, const char **why);

/* The first IPv4 (else IPv6) address of interface @p ifname, port 0.
 * NULL ifname: 127.0.0.1. */
weft_status_t weft_addr_of_interface(const char *ifname, struct sockaddr_storage *out,
				     socklen_t *out_len, struct weft_err *err);

/* "a.b.c.d:port" or "[v6]:port" into buf. */
const char *weft_addr_str(const struct sockaddr *sa, char *buf, size_t len);

#endif
