/* netaddr.c — parse and print socket addresses, find an interface's address. */
#include "util/netaddr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

weft_status_t weft_addr_resolve(const char *host, int port, struct sockaddr_storage *out,
				socklen_t *out_len, const char **why)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
	struct addrinfo *res = NULL;
	int rc = getaddrinfo(host, NULL, &hints, &res);
	if (rc != 0 || !res) {
		*why = rc ? gai_strerror(rc) : "no address";
		return WEFT_ERR_INVALID_ARG;
	}
	memset(out, 0, sizeof(*out));
	memcpy(out, res->ai_addr, res->ai_addrlen);
	*out_len = res->ai_addrlen;
	freeaddrinfo(res);
	if (out->ss_family == AF_INET)
		((struct sockaddr_in *)out)->sin_port = htons((uint16_t)port);
	else
		((struct sockaddr_in6 *)out)->sin6_port = htons((uint16_t)port);
	return WEFT_SUCCESS;
}

weft_status_t weft_addr_parse(const char *text, const char *what, struct sockaddr_storage *out,
			      socklen_t *out_len, struct weft_err *err)
{
	char host[256];
	const char *port;
	if (!text || !*text)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG, "%s is empty (expected host:port)",
				    what);
	if (text[0] == '[') {
		const char *close = strchr(text, ']');
		if (!close || close[1] != ':' || (size_t)(close - text - 1) >= sizeof(host))
			return weft_err_set(err, WEFT_ERR_INVALID_ARG,
					    "%s=%s: expected [ipv6]:port", what, text);
		memcpy(host, text + 1, (size_t)(close - text - 1));
		host[close - text - 1] = '\0';
		port = close + 2;
	} else {
		const char *colon = strrchr(text, ':');
		if (!colon || colon == text || (size_t)(colon - text) >= sizeof(host))
			return weft_err_set(err, WEFT_ERR_INVALID_ARG, "%s=%s: expected host:port",
					    what, text);
		memcpy(host, text, (size_t)(colon - text));
		host[colon - text] = '\0';
		port = colon + 1;
	}
	char *end;
	errno = 0;
	long p = strtol(port, &end, 10);
	if (errno || end == port || *end || p < 0 || p > 65535)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG, "%s=%s: port '%s' is not 0..65535",
				    what, text, port);
	const char *why;
	if (weft_addr_resolve(host, (int)p, out, out_len, &why) != WEFT_SUCCESS)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG, "%s=%s: cannot resolve '%s': %s",
				    what, text, host, why);
	return WEFT_SUCCESS;
}

weft_status_t weft_addr_of_interface(const char *ifname, struct sockaddr_storage *out,
				     socklen_t *out_len, struct weft_err *err)
{
	memset(out, 0, sizeof(*out));
	if (!ifname) {
		struct sockaddr_in *in = (struct sockaddr_in *)out;
		in->sin_family = AF_INET;
		in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		*out_len = sizeof(*in);
		return WEFT_SUCCESS;
	}
	struct ifaddrs *ifs;
	if (getifaddrs(&ifs) != 0)
		return weft_err_errno(err, errno, "getifaddrs");
	const struct ifaddrs *v4 = NULL, *v6 = NULL;
	bool exists = false;
	for (const struct ifaddrs *i = ifs; i; i = i->ifa_next) {
		if (strcmp(i->ifa_name, ifname) != 0)
			continue;
		exists = true;
		if (!i->ifa_addr || !(i->ifa_flags & IFF_UP))
			continue;
		if (i->ifa_addr->sa_family == AF_INET && !v4)
			v4 = i;
		if (i->ifa_addr->sa_family == AF_INET6 && !v6)
			v6 = i;
	}
	const struct ifaddrs *pick = v4 ? v4 : v6;
	if (pick) {
		*out_len = pick->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
								: sizeof(struct sockaddr_in6);
		memcpy(out, pick->ifa_addr, *out_len);
	}
	freeifaddrs(ifs);
	if (!pick)
		return weft_err_set(
		    err, WEFT_ERR_INVALID_ARG,
		    exists ? "WEFT_SOCKET_IFNAME=%s: interface has no address or is down"
			   : "WEFT_SOCKET_IFNAME=%s: no such interface",
		    ifname);
	return WEFT_SUCCESS;
}

const char *weft_addr_str(const struct sockaddr *sa, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(in->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(in6->sin6_port));
	} else {
		snprintf(buf, len, "(family %d)", sa->sa_family);
	}
	return buf;
}
