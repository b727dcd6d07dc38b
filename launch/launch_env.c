/*
 * launch_env.c — the table of launcher variables and the rules that read
 * it (precedence and detection: launch.h), and the root address a job
 * derives from it.
 */
#include "launch/launch.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"
#include "util/netaddr.h"
#include "util/parse.h"
#include "util/settings.h"

#define ROOT_HINT "set WEFT_ROOT=host:port (an address of rank 0's host, the same on every rank)"

struct launcher {
	const char *name;
	/* The launcher started us when all variables of either group are set. */
	const char *detect[2][2];
	const char *rank, *size, *local_rank, *local_size; /* local ones may be NULL */
	const char *job[4]; /* hashed into the job key; none set: the parent's pid */
	/* Reads ranks itself (PMIx) instead of from variables; when it
	 * cannot (saying why in @p why), the next launcher whose variables are
	 * set applies. */
	weft_status_t (*read)(struct weft_launch *l, char *why, size_t len);
	/* Launcher-specific reading once rank and size are known. */
	weft_status_t (*more)(struct weft_launch *l, struct weft_err *err);
	/* True where these variables were set by a launcher further down the
	 * table, which knows more: that one is read instead. */
	bool (*defer)(void);
};

static weft_status_t torchrun_more(struct weft_launch *l, struct weft_err *err);
static bool hydra_is_slurm_pmi2(void);

static const struct launcher launchers[] = {
    {
	.name = "weft",
	.detect = {{"WEFT_RANK"}, {"WEFT_NRANKS"}},
	.rank = "WEFT_RANK",
	.size = "WEFT_NRANKS",
	.local_rank = "WEFT_LOCAL_RANK",
	.local_size = "WEFT_LOCAL_SIZE",
    },
    {
	.name = "torchrun",
	.detect = {{"TORCHELASTIC_RUN_ID"}, {"GROUP_RANK", "LOCAL_WORLD_SIZE"}},
	.rank = "RANK",
	.size = "WORLD_SIZE",
	.local_rank = "LOCAL_RANK",
	.local_size = "LOCAL_WORLD_SIZE",
	/* The run id defaults to "none": the c10d store's address tells jobs apart. */
	.job = {"TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT"},
	.more = torchrun_more,
    },
    {
	.name = "PMIx",
	.detect = {{"PMIX_RANK"}, {"PMIX_NAMESPACE"}},
	.read = weft_launch_pmix,
    },
    {
	.name = "Open MPI",
	.detect = {{"OMPI_COMM_WORLD_RANK"}, {"OMPI_COMM_WORLD_SIZE"}},
	.rank = "OMPI_COMM_WORLD_RANK",
	.size = "OMPI_COMM_WORLD_SIZE",
	.local_rank = "OMPI_COMM_WORLD_LOCAL_RANK",
	.local_size = "OMPI_COMM_WORLD_LOCAL_SIZE",
	.job = {"OMPI_MCA_orte_precondition_transports", "OMPI_MCA_ess_base_jobid",
		"PMIX_NAMESPACE"},
    },
    {
	/* Hydra gives no job id; its proxy, the ranks' parent on a host, stands in. */
	.name = "MPICH/Hydra",
	.detect = {{"PMI_RANK"}, {"PMI_SIZE"}},
	.rank = "PMI_RANK",
	.size = "PMI_SIZE",
	.local_rank = "MPI_LOCALRANKID",
	.local_size = "MPI_LOCALNRANKS",
	.defer = hydra_is_slurm_pmi2,
    },
    {
	.name = "Slurm",
	/* Not SLURM_NTASKS: salloc's shell has it, and is no rank. */
	.detect = {{"SLURM_PROCID"}},
	.rank = "SLURM_PROCID",
	.size = "SLURM_NTASKS",
	.local_rank = "SLURM_LOCALID",
	.job = {"SLURM_JOB_ID", "SLURM_STEP_ID"},
	.more = weft_launch_slurm,
    },
};

#define NLAUNCHERS (sizeof(launchers) / sizeof(launchers[0]))

weft_status_t weft_launch_env_int(const char *name, int max, int *out, bool *present,
				  struct weft_err *err)
{
	const char *v = getenv(name);
	*present = v != NULL;
	if (!v)
		return WEFT_SUCCESS;
	uint64_t x;
	if (weft_parse_size(v, (uint64_t)max, WEFT_PARSE_NO_SUFFIX, &x, NULL) != WEFT_SUCCESS)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG, "%s='%s' is not an integer in 0..%d",
				    name, v, max);
	*out = (int)x;
	return WEFT_SUCCESS;
}

static bool group_set(const char *const group[2])
{
	if (!group[0])
		return false;
	for (int i = 0; i < 2 && group[i]; i++)
		if (!getenv(group[i]))
			return false;
	return true;
}

static bool detected(const struct launcher *e)
{
	return (group_set(e->detect[0]) || group_set(e->detect[1])) && !(e->defer && e->defer());
}

static bool same_var(const char *a, const char *b)
{
	const char *x = getenv(a), *y = getenv(b);
	return x && y && strcmp(x, y) == 0;
}

/* srun --mpi=pmi2 sets PMI_RANK and PMI_SIZE beside SLURM_PROCID and
 * SLURM_NTASKS, with the same values, and no local rank or size: Slurm's
 * variables say more (local sizes, the node list for the root, a job id the
 * nodes share). Hydra's ranks under Slurm inherit their proxy's SLURM_PROCID
 * (one proxy a node), which differs from PMI_RANK unless every node has one
 * rank, and then Slurm's variables describe the same job. */
static bool hydra_is_slurm_pmi2(void)
{
	return getenv("SLURM_STEP_ID") && same_var("PMI_RANK", "SLURM_PROCID") &&
	       same_var("PMI_SIZE", "SLURM_NTASKS");
}

static uint64_t fnv1a(uint64_t h, const char *s)
{
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ull;
	}
	return h ^ 0xff; /* a separator, so "ab"+"c" and "a"+"bc" differ */
}

static uint64_t job_key(const struct launcher *e, const char **from)
{
	uint64_t h = fnv1a(0xcbf29ce484222325ull, e->name);
	bool any = false;
	*from = NULL;
	for (int i = 0; i < 4 && e->job[i]; i++) {
		const char *v = getenv(e->job[i]);
		if (v) {
			h = fnv1a(fnv1a(h, e->job[i]), v);
			any = true;
			if (!*from)
				*from = e->job[i];
		}
	}
	if (!any) {
		char ppid[32];
		snprintf(ppid, sizeof(ppid), "ppid:%d", (int)getppid());
		h = fnv1a(h, ppid);
	}
	return h;
}

/* Local rank and size, where the launcher gives them: both optional, but
 * what is there must agree with rank and size. */
static weft_status_t read_local(const struct launcher *e, struct weft_launch *l,
				struct weft_err *err)
{
	bool have_rank = false, have_size = false;
	weft_status_t st = WEFT_SUCCESS;
	if (e->local_size)
		st = weft_launch_env_int(e->local_size, l->nranks, &l->local_size, &have_size, err);
	if (st == WEFT_SUCCESS && e->local_rank)
		st = weft_launch_env_int(e->local_rank, l->nranks - 1, &l->local_rank, &have_rank,
					 err);
	if (st != WEFT_SUCCESS)
		return st;
	if (have_size && l->local_size < 1)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG, "%s=0: no rank on this host",
				    e->local_size);
	if (have_rank && have_size && l->local_rank >= l->local_size)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "%s=%d and %s=%d: local rank not below local size",
				    e->local_rank, l->local_rank, e->local_size, l->local_size);
	l->one_host = have_size && l->local_size == l->nranks;
	return WEFT_SUCCESS;
}

static weft_status_t read_launcher(const struct launcher *e, struct weft_launch *l,
				   struct weft_err *err)
{
	bool have_rank, have_size;
	l->found = true;
	l->name = e->name;
	l->rank_var = e->rank;
	l->size_var = e->size;
	weft_status_t st = weft_launch_env_int(e->rank, INT_MAX - 1, &l->rank, &have_rank, err);
	if (st == WEFT_SUCCESS)
		st = weft_launch_env_int(e->size, INT_MAX, &l->nranks, &have_size, err);
	if (st != WEFT_SUCCESS)
		return st;
	if (have_rank != have_size)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG, "%s is set but %s is not",
				    have_rank ? e->rank : e->size, have_rank ? e->size : e->rank);
	if (!have_rank)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "%s's variables are set but %s and %s are not", e->name,
				    e->rank, e->size);
	if (l->nranks < 1)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG, "%s=0: a job has at least one rank",
				    e->size);
	if (l->rank >= l->nranks)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "%s=%d and %s=%d: rank not below size", e->rank, l->rank,
				    e->size, l->nranks);
	st = read_local(e, l, err);
	l->job_key = job_key(e, &l->job_key_from);
	snprintf(l->detail, sizeof(l->detail), "%s, %s", e->rank, e->size);
	if (st == WEFT_SUCCESS && e->more)
		st = e->more(l, err);
	return st;
}

static void launch_none(struct weft_launch *l)
{
	memset(l, 0, sizeof(*l));
	l->name = "none";
	l->nranks = 1;
	l->local_size = 1;
	l->one_host = true;
	l->root_hint = ROOT_HINT;
}

/* A launcher that reads its own ranks (PMIx): true if it did. When it
 * cannot, @p l keeps only why, for the log and the final error. */
static bool try_read(const struct launcher *e, struct weft_launch *l)
{
	char why[WEFT_LAUNCH_TEXT_BYTES] = "";
	if (e->read(l, why, sizeof(why)) == WEFT_SUCCESS) {
		l->pmix_seen = true;
		return true;
	}
	launch_none(l);
	l->pmix_seen = true;
	memcpy(l->pmix_why, why, sizeof(why));
	weft_log(WEFT_LOG_INFO, WEFT_SUB_INIT,
		 "PMIx variables are set but PMIx is not used (%s): reading the launcher's "
		 "environment instead",
		 why);
	return false;
}

weft_status_t weft_launch_detect(struct weft_launch *l, struct weft_err *err)
{
	launch_none(l);
	for (size_t i = 0; i < NLAUNCHERS; i++) {
		const struct launcher *e = &launchers[i];
		if (!detected(e))
			continue;
		if (e->read) {
			if (try_read(e, l))
				return WEFT_SUCCESS;
			continue;
		}
		l->local_rank = l->local_size = -1;
		l->one_host = false;
		return read_launcher(e, l, err);
	}
	if (l->pmix_seen)
		return weft_err_set(
		    err, WEFT_ERR_NOT_SUPPORTED,
		    "PMIX_RANK/PMIX_NAMESPACE are set, but PMIx cannot be used (%s) "
		    "and no MPI or Slurm variables are set beside them: launch with "
		    "srun or mpirun, or set WEFT_RANK, WEFT_NRANKS and WEFT_ROOT",
		    l->pmix_why);
	return WEFT_SUCCESS;
}

/* torchrun's c10d store listens on MASTER_PORT on MASTER_ADDR; Weft's root
 * takes the next port there. */
static weft_status_t torchrun_more(struct weft_launch *l, struct weft_err *err)
{
	const char *addr = getenv("MASTER_ADDR");
	bool have_port;
	int port;
	weft_status_t st = weft_launch_env_int("MASTER_PORT", 65534, &port, &have_port, err);
	if (st != WEFT_SUCCESS)
		return st;
	if (!addr || !*addr || !have_port)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "torchrun: %s is not set (Weft's root listens on MASTER_ADDR, "
				    "port MASTER_PORT + 1)",
				    !addr || !*addr ? "MASTER_ADDR" : "MASTER_PORT");
	if (strlen(addr) >= sizeof(l->root_host))
		return weft_err_set(err, WEFT_ERR_INVALID_ARG, "MASTER_ADDR is too long");
	snprintf(l->root_host, sizeof(l->root_host), "%s", addr);
	l->root_port = port + 1;
	l->root_from = "MASTER_ADDR";
	l->root_hint = ROOT_HINT;
	bool have_groups;
	int groups;
	st = weft_launch_env_int("GROUP_WORLD_SIZE", l->nranks, &groups, &have_groups, err);
	if (st == WEFT_SUCCESS && have_groups && groups == 1)
		l->one_host = true;
	return st;
}

/* 20000..32767: below Linux's ephemeral range, so no outgoing connection
 * holds it. */
static int derived_port(const struct weft_launch *l)
{
	return 20000 + (int)(l->job_key % 12768);
}

static bool is_loopback(const struct sockaddr_storage *a)
{
	if (a->ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr) >> 24) == 127;
	return a->ss_family == AF_INET6 &&
	       IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)a)->sin6_addr);
}

/* Why PMIx was not used, when its variables were set: the user who
 * launched with srun --mpi=pmix needs to hear it in this error. */
static const char *pmix_note(const struct weft_launch *l, char *buf, size_t len)
{
	if (!l->pmix_seen)
		return "";
	snprintf(buf, len, " (PMIx variables are set, but PMIx cannot be used: %s)", l->pmix_why);
	return buf;
}

static weft_status_t root_at_host(const struct weft_launch *l, struct sockaddr_storage *addr,
				  socklen_t *len, struct weft_err *err)
{
	int port = l->root_port ? l->root_port : derived_port(l);
	const char *why;
	char note[WEFT_LAUNCH_TEXT_BYTES + 64];
	const char *hint = l->root_hint ? l->root_hint : ROOT_HINT;
	if (weft_addr_resolve(l->root_host, port, addr, len, &why) != WEFT_SUCCESS)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "WEFT_ROOT is not set and rank 0's host '%s' (%s) does not "
				    "resolve (%s): %s%s",
				    l->root_host, l->root_from, why, hint,
				    pmix_note(l, note, sizeof(note)));
	/* Debian names the machine itself 127.0.1.1 in /etc/hosts: ranks on
	 * other hosts would dial their own loopback. */
	if (l->root_is_node && !l->one_host && is_loopback(addr))
		return weft_err_set(
		    err, WEFT_ERR_INVALID_ARG,
		    "WEFT_ROOT is not set and rank 0's host '%s' (%s) resolves to a "
		    "loopback address, which the ranks on other hosts cannot reach: "
		    "%s%s",
		    l->root_host, l->root_from, hint, pmix_note(l, note, sizeof(note)));
	return WEFT_SUCCESS;
}

weft_status_t weft_launch_root(const struct weft_launch *l, struct sockaddr_storage *addr,
			       socklen_t *len, struct weft_err *err)
{
	const char *root = weft_setting_str("WEFT_ROOT");
	weft_status_t st;
	if (root)
		return weft_addr_parse(root, "WEFT_ROOT", addr, len, err);
	if (l->root_host[0]) {
		st = root_at_host(l, addr, len, err);
	} else if (l->nranks == 1 || l->one_host) {
		st = weft_addr_of_interface(NULL, addr, len, err);
		((struct sockaddr_in *)addr)->sin_port = htons((uint16_t)derived_port(l));
	} else {
		char note[WEFT_LAUNCH_TEXT_BYTES + 64];
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "WEFT_ROOT is not set and the %s job is not on one host: %s%s",
				    l->name, l->root_hint ? l->root_hint : ROOT_HINT,
				    pmix_note(l, note, sizeof(note)));
	}
	char text[80];
	if (st == WEFT_SUCCESS)
		weft_log(WEFT_LOG_INFO, WEFT_SUB_INIT, "launcher %s: root %s (%s)", l->name,
			 weft_addr_str((struct sockaddr *)addr, text, sizeof(text)),
			 l->root_host[0] ? l->root_from : "this host, port from the job id");
	return st;
}
