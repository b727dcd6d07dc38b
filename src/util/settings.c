/* settings.c — the one table of WEFT_* environment variables. */
#include "util/settings.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct weft_setting settings[] = {
    {"WEFT_DEBUG", "WARN", "log level: NONE, WARN, INFO or TRACE"},
    {"WEFT_DEBUG_SUBSYS", "ALL",
     "comma-separated subsystems to log: INIT,BOOT,COLL,TUNE,TOPO,SHM,NET,PACE or ALL"},
    {"WEFT_DEBUG_FILE", NULL, "write log lines here instead of stderr (%h host, %p pid)"},
    {"WEFT_TIMEOUT", "300", "seconds any wait may last (bootstrap and operations) before failing"},
    {"WEFT_BOOTSTRAP_TIMEOUT", NULL,
     "seconds to wait for all ranks at init (default: WEFT_TIMEOUT)"},
    {"WEFT_ROOT", NULL, "host:port of the bootstrap root for weft_comm_init_env (rank 0 listens)"},
    {"WEFT_SECRET", NULL, "16 hex digits shared by all ranks of a weft_comm_init_env job"},
    {"WEFT_RANK", NULL, "this process's rank, for weft_comm_init_env"},
    {"WEFT_NRANKS", NULL, "number of ranks, for weft_comm_init_env"},
    {"WEFT_HOSTID", NULL, "override the host identity (ranks with equal ids share memory)"},
    {"WEFT_TRANSPORTS", NULL,
     "transports to use, e.g. 'socket' or '^shm' (default: all; same value on every rank)"},
    {"WEFT_SOCKET_IFNAME", NULL,
     "interface for TCP, e.g. lo or eth0 (default: loopback on one host, else the NIC nearest "
     "the rank's cores)"},
    {"WEFT_SOCKET_NSOCKS", "2", "TCP sockets per peer, striped"},
    {"WEFT_SOCKET_CHUNK", "512K", "bytes per pipelined chunk on TCP"},
    {"WEFT_SHM_SLOTS", "8", "slots in each shared-memory FIFO"},
    {"WEFT_SHM_SLOT_BYTES", "128K", "bytes per shared-memory FIFO slot (the pipelining chunk)"},
    {"WEFT_SHM_CMA", "1", "use single-copy process_vm_readv for large shared-memory messages"},
    {"WEFT_SHM_CMA_MIN", "256K", "smallest message that takes the single-copy path"},
    {"WEFT_TOPO_FILE", NULL,
     "topology file: Slurm topology.conf or the JSON weft-topo writes (leaf of each host)"},
    {"WEFT_LLDP_SOCKET", NULL, "lldpd control socket to query (default: lldpd's own)"},
    {"WEFT_LLDP", "1", "ask the local lldpd for the leaf switch above each NIC"},
    {"WEFT_PLACEMENT", "topo",
     "ring order: 'topo' (host, then leaf, before crossing the spine) or 'rank' (rank order)"},
    {"WEFT_BIND", "none", "bind each rank near its NIC: none, numa or core"},
    {"WEFT_ISA", NULL,
     "reduction kernels: 'generic' (SSE2) or 'avx2' (default: the best this CPU has)"},
    {"WEFT_ALGO", NULL, "force algorithms, e.g. 'allreduce:ring;allgather:ring'"},
    {"WEFT_TUNE_CALIBRATE", "0",
     "measure alpha and beta per link class at init (1) instead of the defaults"},
    {"WEFT_TUNE", NULL,
     "algorithm per size range, e.g. 'allreduce:0-64K:rhd,64K-inf:ring;allgather:0-inf:ring'"},
};

const struct weft_setting *weft_settings_all(size_t *count)
{
	*count = sizeof(settings) / sizeof(settings[0]);
	return settings;
}

static const struct weft_setting *find(const char *name)
{
	for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++)
		if (strcmp(settings[i].name, name) == 0)
			return &settings[i];
	fprintf(stderr, "weft: internal error: setting %s is not declared in settings.c\n", name);
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
	const char *v = weft_setting_str(name);
	if (!v)
		return false;
	char *end;
	errno = 0;
	long x = strtol(v, &end, 0);
	if (errno || end == v)
		return false;
	long mult = 1;
	switch (*end) {
	case 'k':
	case 'K':
		mult = 1L << 10;
		end++;
		break;
	case 'm':
	case 'M':
		mult = 1L << 20;
		end++;
		break;
	case 'g':
	case 'G':
		mult = 1L << 30;
		end++;
		break;
	default: break;
	}
	if (*end != '\0')
		return false;
	if (x > 0 && x > __LONG_MAX__ / mult)
		return false;
	*out = x * mult;
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
