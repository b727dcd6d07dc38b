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
 *   3. PMIx      PMIX_RANK or PMIX_NAMESPACE: no reader yet (issue 14), so
 *                the MPI or Slurm variables set beside them are used, and
 *                with none the launch fails saying what to set instead
 *   4. Open MPI  OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}
 *   5. Hydra     PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS
 *   6. Slurm     SLURM_PROCID (not SLURM_NTASKS alone: salloc's shell has
 *                it), SLURM_NTASKS, SLURM_LOCALID, the (STEP_)TASKS_PER_NODE
 *                and (STEP_)NUM_NODES/NNODES counts, SLURM_STEP_NODELIST for
 *                the root (launch_slurm.c)
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

struct weft_launch {
	bool found;	      /* false: no launcher; one rank of one ("none") */
	const char *name;     /* "weft", "torchrun", "Open MPI", "MPICH/Hydra", "Slurm", "none" */
	const char *rank_var; /* where rank and size came from, for messages */
	const char *size_var;
	int rank, nranks;
	int local_rank, local_size; /* -1: the launcher does not say */
	bool one_host;		    /* the launcher says every rank is on this host */
	bool pmix_seen;		    /* PMIx variables were set too (and not used) */
	uint64_t job_key;	    /* equal on the ranks of one job, not across jobs */
	/* Where rank 0 listens when WEFT_ROOT is not set (torchrun, Slurm
	 * across nodes); "" when the launcher does not say. */
	char root_host[WEFT_LAUNCH_HOST_BYTES];
	int root_port;	       /* 0: derived from job_key */
	const char *root_from; /* what root_host came from, for messages */
	const char *root_hint; /* what to do when there is no root */
};

/*
 * Read the launcher's variables. No launcher is success with found false.
 * A launcher whose variables are there but unusable (half set, malformed,
 * rank >= size) is WEFT_ERR_INVALID_ARG naming the variable; PMIx variables
 * with nothing else beside them are WEFT_ERR_NOT_SUPPORTED. Reads only the
 * environment: no network, no name resolution.
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

/* launch_env.c, for launch_slurm.c: a strict integer variable in
 * 0..@p max, *present false if unset. */
weft_status_t weft_launch_env_int(const char *name, int max, int *out, bool *present,
				  struct weft_err *err);

#endif
