/*
 * socket_pace.c — what the TCP transport gives the pacer and takes from it.
 *
 * Feedback: per socket, deltas of TCP_INFO since the previous query:
 * segments delivered, of which CE-marked (tcpi_delivered_ce), and the
 * smoothed RTT. <linux/tcp.h> only: glibc's <netinet/tcp.h> lacks the CE
 * field, and the two clash.
 *
 * ECN. CE marks reach the sender only if ECN was negotiated on the
 * connection, and Linux decides that per network namespace or route, not
 * per socket (TCP clears the ECN bits of IP_TOS and sets ECT itself): the
 * connecting side (the lower rank) asks for ECN if net.ipv4.tcp_ecn=1 on
 * its host, or its route to the peer carries `features ecn`
 * (`ip route change 10.0.0.0/24 dev eth0 features ecn`); the accepting
 * side agrees if its tcp_ecn is 1 or 2 (2, the kernel's default, only
 * agrees). So: net.ipv4.tcp_ecn=1 on every host of the job. With the
 * pacer on and ECN not negotiated, the first connection that comes up says
 * so (once): dcqcn then never sees a mark, and only delay mode can act.
 *
 * Enforcement below Weft. Bytes handed to the kernel are not yet in the
 * network: they wait in the socket buffer, where a pacer's release times
 * mean nothing. TCP_NOTSENT_LOWAT bounds the unsent bytes the kernel will
 * take (a write beyond it returns EAGAIN, and progress comes back), so a
 * send completes close to when its bytes leave; SO_MAX_PACING_RATE hands
 * the kernel the pacer's rate (per socket: the connection's rate over its
 * sockets), which TCP's own pacing enforces per packet.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "transports/socket/socket.h"
#include "util/log.h"
#include "util/settings.h"

#define SOCK_PACED_LOWAT (128 << 10)
/* Sprayed, less: what a socket holds unsent (and the fragment it is
 * writing) is what it still owes when the others have finished, and a
 * slower path's sockets then hold the message back. On the two-spine
 * fabric with one spine at half rate (perf/bench_congestion.sh --mode spray's
 * unequal one, 8 sub-flows, 32 MiB AllReduce), two interleaved A/Bs of 4
 * trials each gave medians of 32.4 and 32.3 MB/s with 32K, of the 37.5
 * the two spines carry, and 28.8 and 23.8 with 128K. */
#define SOCK_SPRAY_LOWAT (32 << 10)

static struct weft_sock_conn *to_conn(struct weft_conn *conn)
{
	return weft_container_of(conn, struct weft_sock_conn, base);
}

weft_status_t weft_tp_socket_read_pacing(struct weft_sock_comm *sc)
{
	const struct weft_tp_env *env = sc->base.env;
	const char *pacer = weft_setting_str("WEFT_PACER");
	sc->paced = pacer && strcmp(pacer, "off") != 0;
	/* Spraying needs it as much as pacing: a socket's kernel buffer that
	 * takes megabytes unsent would make every path look equally fast. */
	long lowat = 0, tos = -1;
	if (sc->spray == WEFT_SPRAY_ADAPTIVE)
		lowat = SOCK_SPRAY_LOWAT;
	else if (sc->paced)
		lowat = SOCK_PACED_LOWAT;
	if (weft_setting_str("WEFT_SOCKET_NOTSENT_LOWAT") &&
	    (!weft_setting_long("WEFT_SOCKET_NOTSENT_LOWAT", &lowat) || lowat > (1L << 30)))
		return weft_tp_fail(env, WEFT_ERR_INVALID_ARG,
				    "WEFT_SOCKET_NOTSENT_LOWAT=%s: expected a size up to 1G",
				    weft_setting_str("WEFT_SOCKET_NOTSENT_LOWAT"));
	if (weft_setting_str("WEFT_SOCKET_TOS") &&
	    (!weft_setting_long("WEFT_SOCKET_TOS", &tos) || tos > 255))
		return weft_tp_fail(env, WEFT_ERR_INVALID_ARG,
				    "WEFT_SOCKET_TOS=%s: expected a byte, 0 to 255",
				    weft_setting_str("WEFT_SOCKET_TOS"));
	sc->notsent_lowat = (int)lowat;
	sc->tos = (int)tos;
	return WEFT_SUCCESS;
}

void weft_tp_socket_tune(struct weft_sock_comm *sc, int fd)
{
	/* (EOPNOTSUPP: not TCP at all, as a unit test's fake network is.) */
	if (sc->notsent_lowat > 0 &&
	    setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &sc->notsent_lowat,
		       sizeof(sc->notsent_lowat)) != 0 &&
	    errno != EOPNOTSUPP)
		weft_log(WEFT_LOG_WARN, WEFT_SUB_NET, "socket: TCP_NOTSENT_LOWAT: %s",
			 strerror(errno));
	if (sc->tos >= 0 && setsockopt(fd, IPPROTO_IP, IP_TOS, &sc->tos, sizeof(sc->tos)) != 0 &&
	    errno != EOPNOTSUPP)
		weft_log(WEFT_LOG_WARN, WEFT_SUB_NET, "socket: IP_TOS: %s", strerror(errno));
}

void weft_tp_socket_check_ecn(struct weft_sock_conn *c)
{
	struct weft_sock_comm *sc = c->sc;
	if (!sc->paced || sc->ecn_noted)
		return;
	struct tcp_info ti;
	if (sc->io->tcp_info(c->sock[0].fd, &ti) != 0)
		return;
	sc->ecn_noted = true;
	if (ti.tcpi_options & TCPI_OPT_ECN) {
		weft_log(WEFT_LOG_INFO, WEFT_SUB_PACE, "socket: ECN negotiated with rank %d",
			 c->base.peer);
		return;
	}
	/* On loopback (a job on one host) there is no fabric to mark. */
	const char *ifname = sc->base.env->ifname;
	bool loopback = !ifname || strcmp(ifname, "lo") == 0;
	weft_log(loopback ? WEFT_LOG_INFO : WEFT_LOG_WARN, WEFT_SUB_PACE,
		 "socket: ECN not negotiated with rank %d: the pacer sees no CE marks (set "
		 "net.ipv4.tcp_ecn=1 on every host, or 'features ecn' on the route)",
		 c->base.peer);
}

/* Per-socket deltas of TCP_INFO since the previous call, for the data
 * sockets in slot order (a socket down reports nothing new). */
int weft_tp_socket_signals(struct weft_conn *conn, struct weft_tp_signal *out, int max)
{
	struct weft_sock_conn *c = to_conn(conn);
	int n = 0;
	for (unsigned i = 0; i < c->sc->nsocks && n < max; i++) {
		struct weft_sock *s = &c->sock[i];
		struct tcp_info ti;
		if (s->fd < 0 || s->phase != WEFT_SOCK_UP || c->sc->io->tcp_info(s->fd, &ti) != 0) {
			out[n++] = (struct weft_tp_signal){0};
			continue;
		}
		/* An older kernel fills less; the fields it does not know stay zero. */
		out[n++] = (struct weft_tp_signal){
		    .delivered = ti.tcpi_delivered - s->seen.delivered,
		    .delivered_ce = ti.tcpi_delivered_ce - s->seen.delivered_ce,
		    .rtt_us = ti.tcpi_rtt,
		    .bytes_acked = ti.tcpi_bytes_acked - s->seen.bytes_acked,
		    .delivery_Bps = ti.tcpi_delivery_rate,
		    .app_limited = ti.tcpi_delivery_rate_app_limited,
		    .busy_us = (uint32_t)(ti.tcpi_busy_time - s->seen.busy_us),
		    .rwnd_limited_us = (uint32_t)(ti.tcpi_rwnd_limited - s->seen.rwnd_us),
		    .retrans = ti.tcpi_total_retrans - s->seen.retrans,
		};
		s->seen.delivered = ti.tcpi_delivered;
		s->seen.delivered_ce = ti.tcpi_delivered_ce;
		s->seen.bytes_acked = ti.tcpi_bytes_acked;
		s->seen.busy_us = ti.tcpi_busy_time;
		s->seen.rwnd_us = ti.tcpi_rwnd_limited;
		s->seen.retrans = ti.tcpi_total_retrans;
	}
	return n;
}

/* The connection's rate, split over its sockets (rr: each carries the same
 * share); sprayed, each socket may take the whole rate, since the gate
 * bounds the connection's bytes and the paths decide the shares; 0:
 * unlimited. The control socket carries no data, and is not paced. */
void weft_tp_socket_pace(struct weft_conn *conn, double rate_Bps)
{
	struct weft_sock_conn *c = to_conn(conn);
	double per = c->sc->spray == WEFT_SPRAY_ADAPTIVE ? rate_Bps : rate_Bps / c->sc->nsocks;
	uint64_t v = rate_Bps <= 0 || per >= (double)UINT64_MAX ? UINT64_MAX : (uint64_t)per;
	for (unsigned i = 0; i < c->sc->nslots; i++) {
		int fd = c->sock[i].fd;
		if (i == weft_sock_ctl_slot(c->sc) && weft_sock_acking(c->sc))
			continue;
		if (fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &v, sizeof(v)) != 0) {
			weft_log(WEFT_LOG_WARN, WEFT_SUB_PACE, "socket: SO_MAX_PACING_RATE: %s",
				 strerror(errno));
			return;
		}
	}
}
