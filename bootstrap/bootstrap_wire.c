/* bootstrap_wire.c — time and address helpers shared by both sides of the
 * bootstrap (see bootstrap_wire.h for the protocol). */
#include "bootstrap/bootstrap_wire.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
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

/*
 * "rank 3" or "ranks 3,5,7-9" for the ranks where @p missing is true (entry
 * i is rank first + i); stops before overflowing and then says how many
 * there are in all.
 */
void weft_bootstrap_wire_ranks_format(const bool *missing, int nranks, int first, char *buf,
				      size_t size)
{
	int count = 0, shown = 0;
	size_t used;

	for (int i = 0; i < nranks; i++)
		count += missing[i];
	used = (size_t)snprintf(buf, size, "%s ", count == 1 ? "rank" : "ranks");
	for (int i = 0; i < nranks && used < size; i++) {
		int j = i;

		if (!missing[i])
			continue;
		while (j + 1 < nranks && missing[j + 1])
			j++;
		if (used + 48 > size) {
			snprintf(buf + used, size - used, "... (%d in all)", count);
			return;
		}
		if (j > i)
			used += (size_t)snprintf(buf + used, size - used, "%s%d-%d",
						 shown ? "," : "", first + i, first + j);
		else
			used += (size_t)snprintf(buf + used, size - used, "%s%d", shown ? "," : "",
						 first + i);
		shown += j - i + 1;
		i = j;
	}
}
