/*
 * socket_settings.c — the TCP transport's settings: how many sockets per
 * peer and how fragments spread over them, and how its paths are kept
 * (WEFT_REPATH, WEFT_PATH_STALL, WEFT_PEER_DEAD; socket_path.c).
 *
 * WEFT_REPATH defaults to off for now: the cost of acknowledgements on a
 * healthy path is not measured, and the flush at the end is bounded (2 s),
 * so a rank that finishes while a sub-flow is being replaced can close
 * before its resent frames reach the peer (docs/reliability.md; the hangs
 * seen with stall are fixed). stall is what tests/unit/transports/failover.c
 * and tests/fabric/test_failover.sh exercise; stall+congestion
 * (socket_repath.c) is not measured on the fabric at all (issue 27).
 */
#include <string.h>

#include "transports/socket/socket.h"
#include "util/settings.h"

#define SOCK_MIN_CHUNK		4096u
#define SOCK_BOUNCE_MAX		(256u << 10)
#define SOCK_SPRAY_ENGINE_CHUNK (512u << 10)

const struct weft_setting weft_tp_socket_settings[] = {
    {"WEFT_SOCKET_NSOCKS", "2", "TCP sockets (sub-flows) per peer, striped or sprayed"},
    {"WEFT_SOCKET_CHUNK", NULL,
     "bytes per fragment on a socket (default 512K; 64K with WEFT_SPRAY=adaptive)"},
    {"WEFT_SPRAY", "rr",
     "how fragments spread over a peer's sockets (and verbs' rendezvous pieces over its "
     "QPs): rr (round robin) or adaptive (by each path's drain rate: a socket takes the "
     "next fragment when the kernel has room, a QP by completion delay; a slower path "
     "carries less)"},
    {"WEFT_SOCKET_NOTSENT_LOWAT", NULL,
     "TCP_NOTSENT_LOWAT on every socket: unsent bytes the kernel may hold (default: 32K "
     "with WEFT_SPRAY=adaptive, 128K with WEFT_PACER on, else the kernel's; 0: the "
     "kernel's)"},
    {"WEFT_SOCKET_TOS", NULL,
     "IP TOS byte (DSCP << 2) on every socket, for the fabric's ECN-marked class; the ECN "
     "bits are the kernel's"},
    {"WEFT_REPATH", "off",
     "what moves a TCP sub-flow to a new source port (a new ECMP path): off (nothing: no "
     "acknowledgements, a dead path fails the job at WEFT_TIMEOUT), stall (a sub-flow whose "
     "kernel hears nothing for WEFT_PATH_STALL fails over to its siblings and is replaced) "
     "or stall+congestion (also one persistently more CE-marked or slower than its "
     "siblings; a single one probes: experimental, not yet measured); the same on every "
     "rank"},
};

_Static_assert(sizeof(weft_tp_socket_settings) / sizeof(weft_tp_socket_settings[0]) ==
		   WEFT_TP_SOCKET_NSETTINGS,
	       "WEFT_TP_SOCKET_NSETTINGS counts the table");

/* WEFT_SPRAY, and the fragment size: 512K, or 64K when spraying, so that
 * one engine chunk still spreads over the sockets. */
static weft_status_t read_spray(struct weft_sock_comm *sc, long *chunk)
{
	const struct weft_tp_env *env = sc->base.env;
	weft_status_t st = weft_tp_read_spray(env, "socket", &sc->spray);
	if (st != WEFT_SUCCESS)
		return st;
	const char *set = weft_setting_str("WEFT_SOCKET_CHUNK");
	*chunk = sc->spray == WEFT_SPRAY_ADAPTIVE ? 64L << 10 : 512L << 10;
	if (set && (!weft_setting_long("WEFT_SOCKET_CHUNK", chunk) ||
		    *chunk < (long)SOCK_MIN_CHUNK || *chunk > (1L << 30)))
		return weft_tp_fail(env, WEFT_ERR_INVALID_ARG,
				    "WEFT_SOCKET_CHUNK=%s: expected a size from 4K to 1G", set);
	return WEFT_SUCCESS;
}

static const char *const repath_names[] = {"off", "stall", "stall+congestion"};

const char *weft_tp_socket_repath_name(enum weft_sock_repath r)
{
	return (unsigned)r < 3 ? repath_names[r] : "?";
}

/* WEFT_REPATH, WEFT_PATH_STALL, WEFT_PEER_DEAD. */
static weft_status_t read_repath(struct weft_sock_comm *sc)
{
	const struct weft_tp_env *env = sc->base.env;
	const char *v = weft_setting_str("WEFT_REPATH");
	unsigned i = 0;
	while (i < 3 && strcmp(v, repath_names[i]) != 0)
		i++;
	if (i == 3)
		return weft_tp_fail(env, WEFT_ERR_INVALID_ARG,
				    "WEFT_REPATH=%s: expected off, stall or stall+congestion", v);
	sc->repath = (enum weft_sock_repath)i;
	sc->stall_s = 0;
	weft_status_t st = weft_tp_read_stall(env, "socket", NULL, 0.001, 60, &sc->stall_s);
	if (st != WEFT_SUCCESS)
		return st;
	double dead = 0;
	if (!weft_setting_double("WEFT_PEER_DEAD", &dead) || !(dead >= 0.01 && dead <= 3600))
		return weft_tp_fail(env, WEFT_ERR_INVALID_ARG,
				    "WEFT_PEER_DEAD=%s: expected seconds from 0.01 to 3600",
				    weft_setting_str("WEFT_PEER_DEAD"));
	sc->peer_dead_s = dead;
	return WEFT_SUCCESS;
}

weft_status_t weft_tp_socket_read_settings(struct weft_sock_comm *sc)
{
	const struct weft_tp_env *env = sc->base.env;
	long nsocks = 0, chunk = 0;
	if (!weft_setting_long("WEFT_SOCKET_NSOCKS", &nsocks) || nsocks < 1 ||
	    nsocks > WEFT_SOCK_MAX_NSOCKS)
		return weft_tp_fail(env, WEFT_ERR_INVALID_ARG,
				    "WEFT_SOCKET_NSOCKS=%s: expected an integer from 1 to %d",
				    weft_setting_str("WEFT_SOCKET_NSOCKS"), WEFT_SOCK_MAX_NSOCKS);
	weft_status_t st = read_spray(sc, &chunk);
	if (st == WEFT_SUCCESS)
		st = read_repath(sc);
	if (st != WEFT_SUCCESS)
		return st;
	sc->nsocks = (unsigned)nsocks;
	sc->nslots = sc->nsocks + (weft_sock_acking(sc) ? 2 : 0);
	/* A multiple of 4 KiB keeps every fragment a whole number of elements,
	 * so a reduce receive never has an element split across two sockets. */
	sc->chunk = (size_t)chunk & ~(size_t)(SOCK_MIN_CHUNK - 1);
	sc->bounce_bytes = sc->chunk < SOCK_BOUNCE_MAX ? sc->chunk : SOCK_BOUNCE_MAX;
	/* The engine's chunk: sprayed, several fragments, so that one chunk
	 * already spreads over the sockets. */
	sc->base.chunk_bytes =
	    sc->spray == WEFT_SPRAY_ADAPTIVE && sc->chunk < SOCK_SPRAY_ENGINE_CHUNK
		? SOCK_SPRAY_ENGINE_CHUNK
		: sc->chunk;
	return weft_tp_socket_read_pacing(sc);
}
