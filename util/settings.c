/* settings.c — the one table of WEFT_* environment variables. */
#include "util/settings.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/parse.h"

static const struct weft_setting settings[] = {
    {"WEFT_DEBUG", "WARN", "log level: NONE, WARN, INFO or TRACE"},
    {"WEFT_DEBUG_SUBSYS", "ALL",
     "comma-separated subsystems to log: INIT,BOOT,COLL,TUNE,TOPO,SHM,NET,PACE or ALL"},
    {"WEFT_DEBUG_FILE", NULL, "write log lines here instead of stderr (%h host, %p pid)"},
    {"WEFT_TIMEOUT", "300", "seconds any wait may last (bootstrap and operations) before failing"},
    {"WEFT_BOOTSTRAP_TIMEOUT", NULL,
     "seconds to wait for all ranks at init (default: WEFT_TIMEOUT)"},
    {"WEFT_PEER_DEAD", "5",
     "seconds a peer may stay silent on the watch (asked, not answering) before it is found "
     "failed: unreachable, or stopped when it is on this host and stopped (at most "
     "WEFT_TIMEOUT); a peer whose process is gone is found at once"},
    {"WEFT_KEEP_GOING", "0",
     "1: Weft's own launcher (-np, weft-run) keeps the other ranks running when one dies, so "
     "that they can shrink their communicators and go on (--keep-going)"},
    {"WEFT_BOOTSTRAP_FANOUT", "4",
     "children per rank in the bootstrap's relay tree, read where the root starts (1: a chain; "
     "the rank count or more: the root sends to every rank)"},
    {"WEFT_ROOT", NULL, "host:port of the bootstrap root for weft_comm_init_env (rank 0 listens)"},
    {"WEFT_SECRET", NULL,
     "the job's key for weft_comm_init_env: 64 hex digits (or 16, as keys were before) shared "
     "by all ranks"},
    {"WEFT_SECRET_FILE", NULL,
     "file holding WEFT_SECRET's hex digits (and at most a newline), readable only by its owner "
     "(chmod 600)"},
    {"WEFT_ALLOW_DERIVED_SECRET", "0",
     "1: a job across hosts with no key given may use one derived from the launcher's job id, "
     "which other users can guess (trusted clusters only)"},
    {"WEFT_MAX_PENDING", "64",
     "connections per listener that may be in their handshake at once; a new one drops one: a "
     "silent one first, the oldest of two alike, never one being admitted"},
    {"WEFT_HANDSHAKE_TIMEOUT", "5",
     "seconds a connection may take to prove it holds the job's key before it is dropped"},
    {"WEFT_PATH_STALL", NULL,
     "seconds a path with data in flight may go unacknowledged before the transport acts: "
     "socket fails the sub-flow over (default: 4 of its RTTs, at least 0.05; 0.25 with one "
     "segment in flight), verbs and ofi check the peer (default 0.1; WEFT_IB_STALL and "
     "WEFT_OFI_STALL are older names)"},
    {"WEFT_RANK", NULL, "this process's rank, for weft_comm_init_env"},
    {"WEFT_NRANKS", NULL, "number of ranks, for weft_comm_init_env"},
    {"WEFT_LOCAL_RANK", NULL, "rank among this host's ranks (optional, with WEFT_RANK)"},
    {"WEFT_LOCAL_SIZE", NULL,
     "ranks on this host (optional; equal to WEFT_NRANKS: no WEFT_ROOT needed)"},
    {"WEFT_PMIX", "1",
     "0: ignore PMIx (PMIX_RANK/PMIX_NAMESPACE) and read the launcher's other variables"},
    {"WEFT_PMIX_LIB", NULL, "libpmix to dlopen (default: libpmix.so.2)"},
    {"WEFT_HOSTID", NULL, "override the host identity (ranks with equal ids share memory)"},
    {"WEFT_TRANSPORTS", NULL,
     "transports to use, e.g. 'socket' or '^shm' (default: all; same value on every rank)"},
    {"WEFT_SOCKET_IFNAME", NULL,
     "interface for TCP, e.g. lo or eth0 (default: loopback on one host, else the NIC nearest "
     "the rank's cores)"},
    {"WEFT_CONNECT", "auto",
     "when peers are connected: 'eager' (all at init), 'lazy' (each on its first message: "
     "descriptors only for the peers the algorithms use) or 'auto' (lazy above 64 ranks)"},
    {"WEFT_PROGRESS_THREAD", "0",
     "1: a thread per communicator drives non-blocking operations while the caller computes"},
    {"WEFT_WAIT", "auto",
     "how a waiting rank waits: 'spin', 'block' (spin for WEFT_WAIT_SPIN, then sleep until its "
     "peers' data or another thread wakes it) or 'auto' (block when the host's ranks' compute "
     "threads outnumber the CPUs they may run on)"},
    {"WEFT_WAIT_SPIN", "50",
     "microseconds a blocking wait (WEFT_WAIT) polls without an event before it sleeps"},
    {"WEFT_GATE", "open",
     "pacing gate on every connection's sends: 'open', or 'one' (one message in flight, "
     "for tests)"},
    {"WEFT_STATS_FILE", NULL,
     "write per-connection counters here as JSON lines (%r rank, %h host; no %r: .RANK "
     "appended); weft-topo --stats reads them"},
    {"WEFT_STATS_INTERVAL", "1", "seconds between two writes of WEFT_STATS_FILE"},
    {"WEFT_TRACE_BUFFER", "2048",
     "operations each communicator's flight recorder keeps (128 bytes each, rounded up to a "
     "power of two; 0: off)"},
    {"WEFT_TRACE_DIR", NULL,
     "write the flight recorder here as JSON on a timeout, an abort, a lost peer, a fatal "
     "signal or SIGTERM (one file per rank and communicator); weft-topo --trace reads them"},
    {"WEFT_TRACE_SIGNAL", "0", "1: SIGUSR2 writes the flight recorder (to WEFT_TRACE_DIR)"},
    {"WEFT_METRICS_FILE", NULL,
     "write Prometheus metrics (text format 0.0.4) here every WEFT_METRICS_INTERVAL, replaced "
     "whole (%r rank, %h host, %p pid): node_exporter's textfile collector reads *.prom"},
    {"WEFT_METRICS_INTERVAL", "5", "seconds between two writes of WEFT_METRICS_FILE"},
    {"WEFT_METRICS_PORT", NULL,
     "serve /metrics over HTTP on this port + the local rank (libmicrohttpd; read-only, "
     "unauthenticated)"},
    {"WEFT_METRICS_ADDR", "127.0.0.1", "the address the /metrics endpoint binds"},
    {"WEFT_METRICS_CONNECTIONS", "8",
     "connections the /metrics endpoint holds at once (half of them per client address)"},
    {"WEFT_METRICS_PEERS", "32",
     "per-peer series for at most this many peers; beyond, summed per peer leaf"},
    {"WEFT_METRICS_JOB", NULL,
     "the job label of every series (default: the first communicator's id)"},
    {"WEFT_MHD_LIB", NULL, "libmicrohttpd to dlopen (default: libmicrohttpd.so.12)"},
    {"WEFT_DETECT", "1",
     "name slow links (a host's uplink) and slow ranks while the job runs (3 ranks or more); 0: "
     "off"},
    {"WEFT_DETECT_PERIOD", "0.2",
     "seconds between the detector's samples (each rank sends rank 0 one datagram)"},
    {"WEFT_DETECT_CONFIRM", "3",
     "periods in a row a suspect must be flagged before it is named (and clean before it is "
     "cleared)"},
    {"WEFT_TOPO_FILE", NULL,
     "topology file: Slurm topology.conf or the JSON weft-topo writes (leaf of each host)"},
    {"WEFT_LLDP_SOCKET", NULL, "lldpd control socket to query (default: lldpd's own)"},
    {"WEFT_LLDP", "1", "ask the local lldpd for the leaf switch above each NIC"},
    {"WEFT_LLDP_LIB", NULL, "liblldpctl to dlopen (default: liblldpctl.so.4, from Debian's lldpd)"},
    {"WEFT_TOPO_SLURM", "1",
     "take the leaf and spine from Slurm's SLURM_TOPOLOGY_ADDR (topology/tree) where set"},
    {"WEFT_PLACEMENT", "topo",
     "ring order: 'topo' (host, then leaf, before crossing the spine) or 'rank' (rank order)"},
    {"WEFT_BIND", "none", "bind each rank near its NIC: none, numa or core"},
    {"WEFT_SHMEM", "1",
     "intra-host AllReduce through mapped buffers and shared counters (algorithm 'shm'); 0: off"},
    {"WEFT_SHMEM_STAGED", "0",
     "1: the 'shm' AllReduce stages buffers not from weft_mem_alloc through its slots; 0: hands "
     "such calls to the tuner's next choice"},
    {"WEFT_SHMEM_STAGE", "256K",
     "bytes per staging slot of the 'shm' AllReduce for buffers not from weft_mem_alloc"},
    {"WEFT_STREAM_MIN", NULL,
     "outputs larger than this (twice this in place) are written with streaming (non-temporal) "
     "stores where not read again; default: the last-level cache / (4 x local ranks), 4M "
     "where unknown"},
    {"WEFT_ISA", NULL,
     "reduction kernels: 'generic' (SSE2) or 'avx2' (default: the best this CPU has)"},
    {"WEFT_ALGO", NULL, "force algorithms, e.g. 'allreduce:ring;allgather:ring'"},
    {"WEFT_TUNE_CALIBRATE", "0",
     "measure alpha and beta per link class at init (1) instead of the defaults"},
    {"WEFT_TUNE", NULL,
     "algorithm per size range, e.g. 'allreduce:0-64K:rhd,64K-inf:ring;allgather:0-inf:ring'"},
};

#define NCORE (sizeof(settings) / sizeof(settings[0]))

/* The core table followed by the tables other modules declared
 * (weft_settings_add: the transports' own). Written only under the lock,
 * before the settings are first read (the transport registry declares
 * its tables when the library loads). */
#define WEFT_SETTINGS_MAX 128
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t core_once = PTHREAD_ONCE_INIT;
static struct weft_setting all[WEFT_SETTINGS_MAX];
static _Atomic size_t nall; /* entries below it are complete */

static void add_locked(const struct weft_setting *table, size_t n)
{
	size_t have = atomic_load(&nall);
	for (size_t i = 0; i < n && have < WEFT_SETTINGS_MAX; i++) {
		bool known = false;
		for (size_t j = 0; j < have && !known; j++)
			known = strcmp(all[j].name, table[i].name) == 0;
		if (!known)
			all[have++] = table[i];
	}
	atomic_store(&nall, have);
}

static void add_core(void)
{
	pthread_mutex_lock(&lock);
	add_locked(settings, NCORE);
	pthread_mutex_unlock(&lock);
}

void weft_settings_add(const struct weft_setting *table, size_t n)
{
	pthread_once(&core_once, add_core);
	pthread_mutex_lock(&lock);
	add_locked(table, n);
	pthread_mutex_unlock(&lock);
}

const struct weft_setting *weft_settings_all(size_t *count)
{
	pthread_once(&core_once, add_core);
	*count = atomic_load(&nall);
	return all;
}

static const struct weft_setting *find(const char *name)
{
	size_t n;
	const struct weft_setting *table = weft_settings_all(&n);
	for (size_t i = 0; i < n; i++)
		if (strcmp(table[i].name, name) == 0)
			return &table[i];
	fprintf(stderr, "weft: internal error: setting %s is not declared\n", name);
	abort();
}

const char *weft_setting_str(const char *name)
{
	const struct weft_setting *s = find(name);
	const char *v = getenv(name);
	return (v && *v) ? v : s->default_value;
}

bool weft_setting_long(const char *name, long *out)
{
	uint64_t v;
	if (weft_parse_size(weft_setting_str(name), LONG_MAX, 0, &v, NULL) != WEFT_SUCCESS)
		return false;
	*out = (long)v;
	return true;
}

bool weft_setting_double(const char *name, double *out)
{
	const char *v = weft_setting_str(name);
	if (!v)
		return false;
	char *end;
	errno = 0;
	double x = strtod(v, &end);
	if (errno || end == v || *end != '\0')
		return false;
	*out = x;
	return true;
}
