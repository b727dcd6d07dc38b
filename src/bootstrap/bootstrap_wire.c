/* bootstrap_wire.c — time and address helpers shared by both sides of the
 * bootstrap (see bootstrap_wire.h for the protocol). */
#include "bootstrap/bootstrap_wire.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <time.h>

#include "bootstrap/bootstrap.h"

_Static_assert(sizeof(struct weft_uid) <= sizeof(weft_unique_id_t),
	       "struct weft_uid must fit in weft_unique_id_t");

double weft_bootstrap_wire_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int weft_bootstrap_wire_ms_until(double deadline, double now)
{
	double ms = (deadline - now) * 1000.0;

	if (ms <= 0)
		return 0;
	if (ms > 60000)
		return 60000;
	return (int)ms + 1;
}

void weft_bootstrap_wire_addr_format(const struct sockaddr *sa, char *buf, size_t size)
{
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in4 = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &in4->sin_addr, host, sizeof(host));
		port = ntohs(in4->sin_port);
		snprintf(buf, size, "%s:%u", host, port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		port = ntohs(in6->sin6_port);
		snprintf(buf, size, "[%s]:%u", host, port);
	} else {
		snprintf(buf, size, "(address family %d)", sa->sa_family);
	}
}

bool weft_bootstrap_wire_addr_len_ok(int family, socklen_t len)
{
	if (family == AF_INET)
		return len == sizeof(struct sockaddr_in);
	if (family == AF_INET6)
		return len == sizeof(struct sockaddr_in6);
	return false;
}
