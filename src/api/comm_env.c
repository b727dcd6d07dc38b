/* comm_env.c — weft_get_unique_id and weft_comm_init_env: where the root
 * listens, and rank/size/secret from the launcher's environment. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "api/api.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/netaddr.h"
#include "util/settings.h"

static double bootstrap_timeout(void)
{
	double t = 300;
	weft_setting_double("WEFT_TIMEOUT", &t);
	weft_setting_double("WEFT_BOOTSTRAP_TIMEOUT", &t);
	return t > 0 ? t : 300;
}

static weft_status_t random_secret(uint64_t *secret, struct weft_err *err)
{
	if (getrandom(secret, sizeof(*secret), 0) != (ssize_t)sizeof(*secret))
		return weft_err_errno(err, errno, "getrandom for the bootstrap secret");
	return WEFT_SUCCESS;
}

weft_status_t weft_get_unique_id(weft_unique_id_t *id)
{
	struct weft_err *err = weft_err_init_record();
	weft_err_clear(err);
	if (!id)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG, "weft_get_unique_id: id is NULL");
	struct sockaddr_storage addr;
	socklen_t len;
	const char *root = weft_setting_str("WEFT_ROOT");
	weft_status_t st =
	    root ? weft_addr_parse(root, "WEFT_ROOT", &addr, &len, err)
		 : weft_addr_of_interface(weft_setting_str("WEFT_SOCKET_IFNAME"), &addr, &len, err);
	if (st != WEFT_SUCCESS)
		return st;
	uint64_t secret;
	st = random_secret(&secret, err);
	if (st != WEFT_SUCCESS)
		return st;
	struct weft_uid uid;
	memset(&uid, 0, sizeof(uid));
	st = weft_bootstrap_root_start((struct sockaddr *)&addr, len, secret, bootstrap_timeout(),
				       &uid, err);
	if (st != WEFT_SUCCESS)
		return st;
	memset(id, 0, sizeof(*id));
	memcpy(id->internal, &uid, sizeof(uid));
	return WEFT_SUCCESS;
}

/* A strict non-negative integer from the environment. */
static weft_status_t env_int(const char *name, int *out, bool *present, struct weft_err *err)
{
	const char *v = getenv(name);
	*present = v != NULL;
	if (!v)
		return WEFT_SUCCESS;
	char *end;
	errno = 0;
	long x = strtol(v, &end, 10);
	if (errno || end == v || *end || x < 0 || x > WEFT_MAX_RANKS)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG, "%s='%s' is not an integer in 0..%d",
				    name, v, WEFT_MAX_RANKS);
	*out = (int)x;
	return WEFT_SUCCESS;
}

struct launcher {
	const char *name;
	const char *rank_var, *size_var;
	const char *local_size_var; /* ranks on this host, to tell a local job */
	const char *job_var;	    /* a value the launcher gives every rank of one job */
};

static const struct launcher launchers[] = {
    {"weft", "WEFT_RANK", "WEFT_NRANKS", NULL, NULL},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE",
     "OMPI_MCA_orte_precondition_transports"},
    {"MPICH/Hydra", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS", NULL},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE", "SLURM_JOB_ID"},
};

static uint64_t fnv1a(uint64_t h, const char *s)
{
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ull;
	}
	return h;
}

/* Without WEFT_ROOT/WEFT_SECRET a local job needs a port and a secret that
 * all its ranks compute alike: both come from the launcher's job key (or,
 * for Hydra, which sets none, the launching proxy's pid, shared by the
 * ranks of a host). */
static uint64_t job_key(const struct launcher *l)
{
	uint64_t h = 0xcbf29ce484222325ull;
	const char *job = l->job_var ? getenv(l->job_var) : NULL;
	char ppid[32];
	if (!job) {
		snprintf(ppid, sizeof(ppid), "ppid:%d", (int)getppid());
		job = ppid;
	}
	h = fnv1a(h, l->name);
	h = fnv1a(h, job);
	const char *step = getenv("SLURM_STEP_ID");
	if (step && strcmp(l->name, "Slurm") == 0)
		h = fnv1a(h, step);
	return h;
}

static weft_status_t env_secret(const struct launcher *l, uint64_t *secret, struct weft_err *err)
{
	const char *s = weft_setting_str("WEFT_SECRET");
	if (s) {
		char *end;
		errno = 0;
		unsigned long long x = strtoull(s, &end, 16);
		if (errno || strlen(s) != 16 || *end)
			return weft_err_set(err, WEFT_ERR_INVALID_ARG,
					    "WEFT_SECRET must be 16 hex digits");
		*secret = x;
		return WEFT_SUCCESS;
	}
	*secret = job_key(l) ^ 0x9e3779b97f4a7c15ull;
	return WEFT_SUCCESS;
}

static weft_status_t env_root(const struct launcher *l, int nranks, struct sockaddr_storage *addr,
			      socklen_t *len, struct weft_err *err)
{
	const char *root = weft_setting_str("WEFT_ROOT");
	if (root)
		return weft_addr_parse(root, "WEFT_ROOT", addr, len, err);
	const char *local = l->local_size_var ? getenv(l->local_size_var) : NULL;
	if (nranks > 1 && (!local || atoi(local) != nranks))
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "WEFT_ROOT is not set and the %s job is not on one host: set "
				    "WEFT_ROOT=host:port (an address of rank 0's host)",
				    l->name);
	weft_status_t st = weft_addr_of_interface(NULL, addr, len, err);
	/* 20000..32767: below Linux's ephemeral range, so no outgoing
	 * connection holds it. */
	((struct sockaddr_in *)addr)->sin_port = htons((uint16_t)(20000 + job_key(l) % 12768));
	return st;
}

weft_status_t weft_comm_init_env(weft_comm_t *comm, const weft_config_t *config)
{
	struct weft_err *err = weft_err_init_record();
	weft_err_clear(err);
	if (!comm)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG, "weft_comm_init_env: comm is NULL");
	*comm = NULL;
	const struct launcher *l = NULL;
	int rank = -1, nranks = -1;
	for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]) && !l; i++) {
		bool have_rank, have_size;
		weft_status_t st = env_int(launchers[i].rank_var, &rank, &have_rank, err);
		if (st == WEFT_SUCCESS)
			st = env_int(launchers[i].size_var, &nranks, &have_size, err);
		if (st != WEFT_SUCCESS)
			return st;
		if (have_rank != have_size)
			return weft_err_set(
			    err, WEFT_ERR_INVALID_ARG, "%s is set but %s is not",
			    have_rank ? launchers[i].rank_var : launchers[i].size_var,
			    have_rank ? launchers[i].size_var : launchers[i].rank_var);
		if (have_rank)
			l = &launchers[i];
	}
	if (!l)
		return weft_err_set(
		    err, WEFT_ERR_INVALID_ARG,
		    "weft_comm_init_env: no rank in the environment (set WEFT_RANK and "
		    "WEFT_NRANKS, or launch with mpirun or srun)");
	if (nranks < 1 || rank >= nranks)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "%s=%d and %s=%d: rank not below size", l->rank_var, rank,
				    l->size_var, nranks);

	struct weft_uid uid;
	memset(&uid, 0, sizeof(uid));
	struct sockaddr_storage addr;
	socklen_t len;
	weft_status_t st = env_secret(l, &uid.secret, err);
	if (st == WEFT_SUCCESS)
		st = env_root(l, nranks, &addr, &len, err);
	if (st != WEFT_SUCCESS)
		return st;
	if (rank == 0) {
		st = weft_bootstrap_root_start((struct sockaddr *)&addr, len, uid.secret,
					       bootstrap_timeout(), &uid, err);
		if (st != WEFT_SUCCESS)
			return st;
	} else {
		uid.magic = WEFT_UID_MAGIC;
		uid.version = WEFT_UID_VERSION;
		uid.addr_len = (uint32_t)len;
		memcpy(&uid.addr, &addr, len);
	}
	struct weft_comm *c;
	st = weft_comm_create(&c, nranks, &uid, rank, config, NULL);
	return st == WEFT_SUCCESS ? weft_api_comm_finish(c, comm) : st;
}
