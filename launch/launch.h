/*
 * launch.h — what the launcher that started this process says about it:
 * the one table of launcher variables in Weft (launch_env.c), read by
 * weft_comm_init_env() and, through weft_launch_query(), by the perf
 * programs and weft-topo.
 *
 * Precedence, first match wins:
 *   1. Weft      WEFT_RANK, WEFT_NRANKS [, WEFT_LOCAL_RANK, WEFT_LOCAL_SIZE]
 *   2. torchrun  RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, when
 *                TORCHELASTIC_RUN_ID (or GROUP_RANK with LOCAL_WORLD_SIZE)
 *                says torchrun set them: RANK alone is too common a name
 *   3. PMIx      PMIX_RANK or PMIX_NAMESPACE: rank, job size, local rank and
 *                size from the PMIx server (launch_pmix.c; srun --mpi=pmix,
 *                Open MPI's mpirun), and rank 0's bootstrap id through it.
 *                Where PMIx cannot be used (libpmix missing, no server
 *                answers, WEFT_PMIX=0) the MPI or Slurm variables set beside
 *                them are read, and with none the launch fails saying why
 *   4. Open MPI  OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}
 *   5. Hydra     PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS; not
 *                where they equal SLURM_PROCID and SLURM_NTASKS in a step
 *                (srun --mpi=pmi2 sets them): Slurm's variables say more
 *   6. Slurm     SLURM_PROCID (not SLURM_NTASKS alone: salloc's shell has
 *                it), SLURM_NTASKS, SLURM_LOCALID, the (STEP_)TASKS_PER_NODE
 *                and (STEP_)NUM_NODES/NNODES counts, SLURM_STEP_NODELIST for
 *                the root (launch_slurm.c)
 *
 * torchrun comes before PMIx because `srun --mpi=pmix torchrun` workers
 * inherit the agent's PMIx variables: PMIx would make them one rank each of
 * a job of agents.
 *
 * A launcher is detected by its rank or its size variable (torchrun by its
 * own markers), so a half-set pair is an error naming the missing one rather
 * than a silent fall through to the next launcher or to one rank.
 */
#ifndef WEFT_LAUNCH_H
#define WEFT_LAUNCH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "util/error.h"

#define WEFT_LAUNCH_HOST_BYTES 256
#define WEFT_LAUNCH_TEXT_BYTES 256

struct weft_launch {
	bool found;	      /* false: no launcher; one rank of one ("none") */
	const char *name;     /* "weft", "torchrun", "PMIx", "Open MPI", "MPICH/Hydra", "Slurm",
				 "none" */
	bool pmix;	      /* ranks came from the PMIx server: the id travels through it */
	const char *rank_var; /* where rank and size came from, for messages */
	const char *size_var;
	int rank, nranks;
	int local_rank, local_size; /* -1: the launcher does not say */
	bool one_host;		    /* the launcher says every rank is on this host */
	bool pmix_seen;		    /* PMIx variables were set */
	/* When PMIx variables were set but PMIx is not what was read: why. */
	char pmix_why[WEFT_LAUNCH_TEXT_BYTES];
	char detail[WEFT_LAUNCH_TEXT_BYTES]; /* where the ranks came from, for the log */
	uint64_t job_key;		     /* equal on the ranks of one job, not across jobs */
	/* What job_key came from ("SLURM_JOB_ID", ...), or NULL when it is the
	 * parent's pid, which only ranks with one parent share. */
	const char *job_key_from;
	/* Where rank 0 listens when WEFT_ROOT is not set (torchrun, Slurm
	 * across nodes); "" when the launcher does not say. */
	char root_host[WEFT_LAUNCH_HOST_BYTES];
	int root_port;	       /* 0: derived from job_key */
	const char *root_from; /* what root_host came from, for messages */
	bool root_is_node;     /* root_host is a node name Weft picked (Slurm), not one
				  the user gave (MASTER_ADDR): it must not be loopback */
	const char *root_hint; /* what to do when there is no root */
};

/*
 * Read the launcher's variables. No launcher is success with found false.
 * A launcher whose variables are there but unusable (half set, malformed,
 * rank >= size) is WEFT_ERR_INVALID_ARG naming the variable; PMIx variables
 * with nothing else beside them, where PMIx cannot be used, are
 * WEFT_ERR_NOT_SUPPORTED saying why. Reads the environment and, where PMIx
 * variables are set, asks the local PMIx server (initialising the client
 * the first time): no network, no name resolution.
 */
weft_status_t weft_launch_detect(struct weft_launch *l, struct weft_err *err);

/*
 * The bootstrap root's address for a job: WEFT_ROOT if set, else the
 * launcher's root host (torchrun's MASTER_ADDR, Slurm's first node), else
 * 127.0.0.1 when every rank is on this host, with a port derived from the
 * job key where the launcher gives none. Otherwise WEFT_ERR_INVALID_ARG
 * with the launcher's hint.
 */
weft_status_t weft_launch_root(const struct weft_launch *l, struct sockaddr_storage *addr,
			       socklen_t *len, struct weft_err *err);

/* launch_slurm.c: Slurm's sizes and root, after rank and size are read. */
weft_status_t weft_launch_slurm(struct weft_launch *l, struct weft_err *err);

/* launch_pmix.c: rank, size, local rank and size from PMIx (the client is
 * started on the first call and finalised at exit). On failure (libpmix or
 * its server not there, WEFT_PMIX=0) an error status, @p why saying why,
 * and nothing logged: the caller falls back to the launcher's variables. */
weft_status_t weft_launch_pmix(struct weft_launch *l, char *why, size_t len);

/*
 * After weft_launch_pmix() succeeded, collective over every rank of the
 * PMIx namespace: rank 0 (@p publish true) hands its @p len bytes at @p buf
 * to all the others, which receive them there. Put + Commit, a Fence that
 * collects the data (bounded by @p timeout_s where the server honours
 * PMIX_TIMEOUT), Get. Each call uses a new key, so a job may share as often
 * as it creates communicators, in the same order on every rank.
 */
weft_status_t weft_launch_pmix_share(void *buf, size_t len, bool publish, double timeout_s,
				     struct weft_err *err);

/* launch_env.c, for launch_slurm.c: a strict integer variable in
 * 0..@p max, *present false if unset. */
weft_status_t weft_launch_env_int(const char *name, int max, int *out, bool *present,
				  struct weft_err *err);

#endif
