/*
 * launch.c — the table of launcher variables (launch/): which
 * launcher each environment means (precedence, detection that a generic
 * name like RANK does not trigger), rank, size, local rank and size, one
 * host or not, the root a job derives, and the error that names the
 * variable when a launcher's variables are there but unusable. Then the
 * public weft_launch_query(), and weft_comm_init_env() end to end under
 * the environments of Open MPI, Slurm (`srun -n 2` on one node: issue 14)
 * and torchrun, with no WEFT_ROOT.
 *
 * Each case starts from an environment with every launcher variable unset.
 */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "launch/launch.h"
#include "tools/launch/local_launch.h"
#include "weft.h"

static const char *const launcher_vars[] = {
    "WEFT_RANK",
    "WEFT_NRANKS",
    "WEFT_LOCAL_RANK",
    "WEFT_LOCAL_SIZE",
    "WEFT_ROOT",
    "WEFT_SECRET",
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "PMIX_RANK",
    "PMIX_NAMESPACE",
    "WEFT_PMIX",
    "WEFT_PMIX_LIB",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "OMPI_MCA_orte_precondition_transports",
    "OMPI_MCA_ess_base_jobid",
    "PMI_RANK",
    "PMI_SIZE",
    "PMI_FD",
    "PMI_JOBID",
    "MPI_LOCALRANKID",
    "MPI_LOCALNRANKS",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_LOCALID",
    "SLURM_NODEID",
    "SLURM_NNODES",
    "SLURM_STEP_NUM_NODES",
    "SLURM_TASKS_PER_NODE",
    "SLURM_STEP_TASKS_PER_NODE",
    "SLURM_NTASKS_PER_NODE",
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
    "SLURM_STEP_NODELIST",
    "SLURM_DISTRIBUTION",
};

#define MAX_VARS 14

/* Unset every launcher variable, then set @p env ("KEY=VALUE", NULL-ended). */
static void set_env(const char *const *env)
{
	for (size_t i = 0; i < sizeof(launcher_vars) / sizeof(launcher_vars[0]); i++)
		unsetenv(launcher_vars[i]);
	for (int i = 0; i < MAX_VARS && env[i]; i++) {
		const char *eq = strchr(env[i], '=');
		char key[64];
		ck_assert_ptr_nonnull(eq);
		snprintf(key, sizeof(key), "%.*s", (int)(eq - env[i]), env[i]);
		ck_assert_int_eq(setenv(key, eq + 1, 1), 0);
	}
}

static void describe(const char *const *env, char *buf, size_t len)
{
	buf[0] = '\0';
	for (int i = 0; i < MAX_VARS && env[i]; i++) {
		strncat(buf, " ", len - strlen(buf) - 1);
		strncat(buf, env[i], len - strlen(buf) - 1);
	}
	if (!buf[0])
		snprintf(buf, len, " (nothing set)");
}

struct good_case {
	const char *env[MAX_VARS];
	const char *name;
	int rank, nranks, local_rank, local_size;
	bool one_host;
	const char *root_host; /* "" for none */
	int root_port;
};

#define SRUN_2_ONE_NODE                                                                            \
	"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_LOCALID=1", "SLURM_NODEID=0",                   \
	    "SLURM_TASKS_PER_NODE=2", "SLURM_NNODES=1", "SLURM_JOB_ID=77", "SLURM_STEP_ID=0"
#define OMPI_1_OF_2                                                                                \
	"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=1",        \
	    "OMPI_COMM_WORLD_LOCAL_SIZE=2", "OMPI_MCA_orte_precondition_transports=ab-cd"
#define TORCHRUN_3_OF_4                                                                            \
	"TORCHELASTIC_RUN_ID=none", "RANK=3", "WORLD_SIZE=4", "LOCAL_RANK=1",                      \
	    "LOCAL_WORLD_SIZE=2", "GROUP_RANK=1", "GROUP_WORLD_SIZE=2", "MASTER_ADDR=10.1.2.3",    \
	    "MASTER_PORT=29500"

static const struct good_case good[] = {
    /* No launcher: one rank of one. RANK alone is not torchrun. */
    {{NULL}, "none", 0, 1, 0, 1, true, "", 0},
    {{"RANK=2", "WORLD_SIZE=4", "MASTER_ADDR=h", "MASTER_PORT=1"}, "none", 0, 1, 0, 1, true, "", 0},
    {{"GROUP_RANK=0", "RANK=0", "WORLD_SIZE=2"}, "none", 0, 1, 0, 1, true, "", 0},
    /* An salloc shell has SLURM_NTASKS but is no task. */
    {{"SLURM_NTASKS=4", "SLURM_JOB_ID=5", "SLURM_NNODES=2"}, "none", 0, 1, 0, 1, true, "", 0},
    {{"WEFT_RANK=1", "WEFT_NRANKS=4"}, "weft", 1, 4, -1, -1, false, "", 0},
    {{"WEFT_RANK=1", "WEFT_NRANKS=4", "WEFT_LOCAL_RANK=1", "WEFT_LOCAL_SIZE=4"},
     "weft",
     1,
     4,
     1,
     4,
     true,
     "",
     0},
    {{"WEFT_RANK=3", "WEFT_NRANKS=4", "WEFT_LOCAL_RANK=1", "WEFT_LOCAL_SIZE=2"},
     "weft",
     3,
     4,
     1,
     2,
     false,
     "",
     0},
    {{"WEFT_RANK=0", "WEFT_NRANKS=1"}, "weft", 0, 1, -1, -1, false, "", 0},
    {{TORCHRUN_3_OF_4}, "torchrun", 3, 4, 1, 2, false, "10.1.2.3", 29501},
    /* torchrun found by GROUP_RANK with LOCAL_WORLD_SIZE, on one host. */
    {{"GROUP_RANK=0", "LOCAL_WORLD_SIZE=2", "RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1",
      "GROUP_WORLD_SIZE=1", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29600"},
     "torchrun",
     1,
     2,
     1,
     2,
     true,
     "127.0.0.1",
     29601},
    {{OMPI_1_OF_2}, "Open MPI", 1, 2, 1, 2, true, "", 0},
    {{"OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_RANK=1",
      "OMPI_COMM_WORLD_LOCAL_SIZE=2"},
     "Open MPI",
     3,
     4,
     1,
     2,
     false,
     "",
     0},
    /* Open MPI's mpirun sets PMIx variables too: Open MPI's are read. */
    {{OMPI_1_OF_2, "PMIX_RANK=1", "PMIX_NAMESPACE=4930"}, "Open MPI", 1, 2, 1, 2, true, "", 0},
    {{"PMI_RANK=1", "PMI_SIZE=2", "MPI_LOCALRANKID=1", "MPI_LOCALNRANKS=2"},
     "MPICH/Hydra",
     1,
     2,
     1,
     2,
     true,
     "",
     0},
    {{"PMI_RANK=0", "PMI_SIZE=3"}, "MPICH/Hydra", 0, 3, -1, -1, false, "", 0},
    /* srun -n 2 on one node (issue 14: not SLURM_NTASKS_PER_NODE). */
    {{SRUN_2_ONE_NODE}, "Slurm", 1, 2, 1, 2, true, "", 0},
    {{"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_LOCALID=1", "SLURM_TASKS_PER_NODE=2",
      "SLURM_NNODES=1", "SLURM_STEP_ID=0"},
     "Slurm",
     1,
     2,
     1,
     2,
     true,
     "",
     0},
    /* srun -N 4 -n 7: node 2 of "2(x3),1" has two tasks; the root is node01. */
    {{"SLURM_PROCID=5", "SLURM_NTASKS=7", "SLURM_LOCALID=1", "SLURM_NODEID=2",
      "SLURM_STEP_TASKS_PER_NODE=2(x3),1", "SLURM_STEP_NUM_NODES=4", "SLURM_JOB_ID=9",
      "SLURM_STEP_ID=1", "SLURM_STEP_NODELIST=node[01-04]"},
     "Slurm",
     5,
     7,
     1,
     2,
     false,
     "node01",
     0},
    {{"SLURM_PROCID=6", "SLURM_NTASKS=7", "SLURM_LOCALID=0", "SLURM_NODEID=3",
      "SLURM_STEP_TASKS_PER_NODE=2(x3),1", "SLURM_STEP_NUM_NODES=4", "SLURM_STEP_ID=1",
      "SLURM_STEP_NODELIST=b1,a2"},
     "Slurm",
     6,
     7,
     0,
     1,
     false,
     "b1",
     0},
    /* -m cyclic: rank 0 is still on the first node. */
    {{"SLURM_PROCID=1", "SLURM_NTASKS=4", "SLURM_LOCALID=0", "SLURM_NODEID=1",
      "SLURM_STEP_TASKS_PER_NODE=2(x2)", "SLURM_STEP_NUM_NODES=2", "SLURM_STEP_ID=1",
      "SLURM_DISTRIBUTION=cyclic", "SLURM_STEP_NODELIST=n[7-8]"},
     "Slurm",
     1,
     4,
     0,
     2,
     false,
     "n7",
     0},
    /* -m arbitrary: rank 0 may be anywhere, so the list names no root. */
    {{"SLURM_PROCID=1", "SLURM_NTASKS=4", "SLURM_LOCALID=0", "SLURM_NODEID=2",
      "SLURM_STEP_TASKS_PER_NODE=1(x4)", "SLURM_STEP_NUM_NODES=4", "SLURM_STEP_ID=1",
      "SLURM_DISTRIBUTION=arbitrary", "SLURM_STEP_NODELIST=h[1-4]"},
     "Slurm",
     1,
     4,
     0,
     1,
     false,
     "",
     0},
    /* A one-node step inside a four-node allocation: the step's counts win. */
    {{"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_LOCALID=0", "SLURM_NODEID=0", "SLURM_NNODES=4",
      "SLURM_TASKS_PER_NODE=4(x4)", "SLURM_STEP_NUM_NODES=1", "SLURM_STEP_TASKS_PER_NODE=2",
      "SLURM_STEP_ID=3", "SLURM_STEP_NODELIST=n3"},
     "Slurm",
     0,
     2,
     0,
     2,
     true,
     "",
     0},
    /* Without a node id across nodes, the local size is unknown. */
    {{"SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_TASKS_PER_NODE=2(x2)", "SLURM_NNODES=2",
      "SLURM_STEP_ID=0"},
     "Slurm",
     0,
     4,
     -1,
     -1,
     false,
     "",
     0},
    /* An sbatch -n 1 script is one rank of one. */
    {{"SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_LOCALID=0", "SLURM_JOB_ID=12"},
     "Slurm",
     0,
     1,
     0,
     1,
     true,
     "",
     0},
    /* srun --mpi=pmix with no PMIx server answering: Slurm's are read. */
    {{SRUN_2_ONE_NODE, "PMIX_RANK=1", "PMIX_NAMESPACE=slurm.pmix.77.0"},
     "Slurm",
     1,
     2,
     1,
     2,
     true,
     "",
     0},
    /* Precedence: WEFT_* over everything; torchrun over PMIx and Slurm
     * (srun --mpi=pmix torchrun); Open MPI and Hydra over Slurm. */
    {{"WEFT_RANK=0", "WEFT_NRANKS=3", OMPI_1_OF_2}, "weft", 0, 3, -1, -1, false, "", 0},
    {{TORCHRUN_3_OF_4, "PMIX_RANK=0", "PMIX_NAMESPACE=x", "SLURM_PROCID=0"},
     "torchrun",
     3,
     4,
     1,
     2,
     false,
     "10.1.2.3",
     29501},
    {{OMPI_1_OF_2, "SLURM_PROCID=0", "SLURM_NTASKS=1"}, "Open MPI", 1, 2, 1, 2, true, "", 0},
    {{"PMI_RANK=1", "PMI_SIZE=2", "SLURM_PROCID=0", "SLURM_NTASKS=1"},
     "MPICH/Hydra",
     1,
     2,
     -1,
     -1,
     false,
     "",
     0},
    /* srun --mpi=pmi2 -N 2 -n 3: its PMI_RANK/PMI_SIZE are Slurm's own;
     * Slurm's variables give the local size and the root. */
    {{"PMI_RANK=2", "PMI_SIZE=3", "PMI_FD=11", "PMI_JOBID=9.1", "SLURM_PROCID=2", "SLURM_NTASKS=3",
      "SLURM_LOCALID=0", "SLURM_NODEID=1", "SLURM_STEP_TASKS_PER_NODE=2,1",
      "SLURM_STEP_NUM_NODES=2", "SLURM_JOB_ID=9", "SLURM_STEP_ID=1", "SLURM_STEP_NODELIST=n[1-2]"},
     "Slurm",
     2,
     3,
     0,
     1,
     false,
     "n1",
     0},
    /* Hydra under Slurm: the ranks inherit their proxy's step variables. */
    {{"PMI_RANK=3", "PMI_SIZE=4", "SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_STEP_ID=0"},
     "MPICH/Hydra",
     3,
     4,
     -1,
     -1,
     false,
     "",
     0},
};

START_TEST(launch_good)
{
	const struct good_case *c = &good[_i];
	char what[512];
	describe(c->env, what, sizeof(what));
	set_env(c->env);
	struct weft_launch l;
	struct weft_err err = {0};
	weft_status_t st = weft_launch_detect(&l, &err);
	ck_assert_msg(st == WEFT_SUCCESS, "%s: %s", what, err.msg);
	ck_assert_msg(strcmp(l.name, c->name) == 0, "%s: launcher %s, want %s", what, l.name,
		      c->name);
	ck_assert_msg(l.found == (strcmp(c->name, "none") != 0), "%s: found %d", what, l.found);
	ck_assert_msg(l.rank == c->rank && l.nranks == c->nranks,
		      "%s: rank %d of %d, want %d of %d", what, l.rank, l.nranks, c->rank,
		      c->nranks);
	ck_assert_msg(l.local_rank == c->local_rank && l.local_size == c->local_size,
		      "%s: local %d of %d, want %d of %d", what, l.local_rank, l.local_size,
		      c->local_rank, c->local_size);
	ck_assert_msg(l.one_host == c->one_host, "%s: one_host %d", what, l.one_host);
	ck_assert_msg(strcmp(l.root_host, c->root_host) == 0 && l.root_port == c->root_port,
		      "%s: root '%s' port %d, want '%s' %d", what, l.root_host, l.root_port,
		      c->root_host, c->root_port);
}
END_TEST

struct bad_case {
	const char *env[MAX_VARS];
	weft_status_t st;
	const char *says[3]; /* the message must contain each */
};

static const struct bad_case bad[] = {
    {{"WEFT_RANK=0"}, WEFT_ERR_INVALID_ARG, {"WEFT_RANK is set but WEFT_NRANKS is not"}},
    {{"WEFT_NRANKS=2"}, WEFT_ERR_INVALID_ARG, {"WEFT_NRANKS is set but WEFT_RANK is not"}},
    {{"WEFT_RANK=2", "WEFT_NRANKS=2"},
     WEFT_ERR_INVALID_ARG,
     {"WEFT_RANK=2 and WEFT_NRANKS=2: rank not below size"}},
    {{"WEFT_RANK=x", "WEFT_NRANKS=2"}, WEFT_ERR_INVALID_ARG, {"WEFT_RANK='x' is not an integer"}},
    {{"WEFT_RANK=-1", "WEFT_NRANKS=2"}, WEFT_ERR_INVALID_ARG, {"WEFT_RANK='-1'"}},
    {{"WEFT_RANK=+1", "WEFT_NRANKS=2"}, WEFT_ERR_INVALID_ARG, {"WEFT_RANK='+1'"}},
    {{"WEFT_RANK= 1", "WEFT_NRANKS=2"}, WEFT_ERR_INVALID_ARG, {"WEFT_RANK=' 1'"}},
    {{"WEFT_RANK=1K", "WEFT_NRANKS=2048"}, WEFT_ERR_INVALID_ARG, {"WEFT_RANK='1K'"}},
    {{"WEFT_RANK=", "WEFT_NRANKS=2"}, WEFT_ERR_INVALID_ARG, {"WEFT_RANK=''"}},
    {{"WEFT_RANK=0", "WEFT_NRANKS=0"}, WEFT_ERR_INVALID_ARG, {"WEFT_NRANKS=0"}},
    {{"WEFT_RANK=0", "WEFT_NRANKS=99999999999"}, WEFT_ERR_INVALID_ARG, {"WEFT_NRANKS='9999"}},
    {{"WEFT_RANK=0", "WEFT_NRANKS=4", "WEFT_LOCAL_SIZE=0"},
     WEFT_ERR_INVALID_ARG,
     {"WEFT_LOCAL_SIZE=0"}},
    {{"WEFT_RANK=0", "WEFT_NRANKS=4", "WEFT_LOCAL_SIZE=5"},
     WEFT_ERR_INVALID_ARG,
     {"WEFT_LOCAL_SIZE='5' is not an integer in 0..4"}},
    {{"WEFT_RANK=0", "WEFT_NRANKS=4", "WEFT_LOCAL_RANK=2", "WEFT_LOCAL_SIZE=2"},
     WEFT_ERR_INVALID_ARG,
     {"WEFT_LOCAL_RANK=2 and WEFT_LOCAL_SIZE=2: local rank not below local size"}},
    {{"TORCHELASTIC_RUN_ID=none"},
     WEFT_ERR_INVALID_ARG,
     {"torchrun's variables are set but RANK and WORLD_SIZE are not"}},
    {{"TORCHELASTIC_RUN_ID=none", "RANK=0"}, WEFT_ERR_INVALID_ARG, {"WORLD_SIZE"}},
    {{"TORCHELASTIC_RUN_ID=none", "RANK=0", "WORLD_SIZE=2", "MASTER_PORT=29500"},
     WEFT_ERR_INVALID_ARG,
     {"MASTER_ADDR is not set"}},
    {{"TORCHELASTIC_RUN_ID=none", "RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=h"},
     WEFT_ERR_INVALID_ARG,
     {"MASTER_PORT is not set"}},
    {{"TORCHELASTIC_RUN_ID=none", "RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=h", "MASTER_PORT=x"},
     WEFT_ERR_INVALID_ARG,
     {"MASTER_PORT='x'"}},
    {{"TORCHELASTIC_RUN_ID=none", "RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=h", "MASTER_PORT=65535"},
     WEFT_ERR_INVALID_ARG,
     {"MASTER_PORT='65535' is not an integer in 0..65534"}},
    {{"TORCHELASTIC_RUN_ID=none", "RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=1",
      "MASTER_ADDR=h", "MASTER_PORT=1"},
     WEFT_ERR_INVALID_ARG,
     {"LOCAL_RANK=1 and LOCAL_WORLD_SIZE=1: local rank not below local size"}},
    /* PMIx alone and no server: the message says why and what to do. */
    {{"PMIX_RANK=0", "PMIX_NAMESPACE=slurm.pmix.5.0"},
     WEFT_ERR_NOT_SUPPORTED,
     {"PMIX_RANK", "PMIx cannot be used (", "WEFT_RANK, WEFT_NRANKS and WEFT_ROOT"}},
    {{"PMIX_NAMESPACE=x"}, WEFT_ERR_NOT_SUPPORTED, {"PMIx"}},
    {{"PMIX_RANK=0", "PMIX_NAMESPACE=x", "WEFT_PMIX=0"},
     WEFT_ERR_NOT_SUPPORTED,
     {"PMIx cannot be used (WEFT_PMIX=0)"}},
    {{"PMIX_RANK=0", "PMIX_NAMESPACE=x", "WEFT_PMIX_LIB=/nonexistent/libpmix.so.2"},
     WEFT_ERR_NOT_SUPPORTED,
     {"WEFT_PMIX_LIB=/nonexistent/libpmix.so.2: "}},
    {{"OMPI_COMM_WORLD_RANK=0"},
     WEFT_ERR_INVALID_ARG,
     {"OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not"}},
    {{"OMPI_COMM_WORLD_RANK=x", "OMPI_COMM_WORLD_SIZE=2"},
     WEFT_ERR_INVALID_ARG,
     {"OMPI_COMM_WORLD_RANK='x'"}},
    {{"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=3",
      "OMPI_COMM_WORLD_LOCAL_SIZE=2"},
     WEFT_ERR_INVALID_ARG,
     {"OMPI_COMM_WORLD_LOCAL_RANK='3'"}},
    {{"PMI_RANK=3", "PMI_SIZE=2"}, WEFT_ERR_INVALID_ARG, {"PMI_RANK=3 and PMI_SIZE=2"}},
    {{"PMI_SIZE=2"}, WEFT_ERR_INVALID_ARG, {"PMI_SIZE is set but PMI_RANK is not"}},
    {{"SLURM_PROCID=0"}, WEFT_ERR_INVALID_ARG, {"SLURM_PROCID is set but SLURM_NTASKS is not"}},
    /* sbatch's script has SLURM_PROCID=0 but is no task of a step. */
    {{"SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_JOB_ID=3"},
     WEFT_ERR_INVALID_ARG,
     {"SLURM_STEP_ID is not", "batch script", "srun"}},
    {{"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_STEP_ID=0", "SLURM_NNODES=1",
      "SLURM_TASKS_PER_NODE=2(x3"},
     WEFT_ERR_INVALID_ARG,
     {"SLURM_TASKS_PER_NODE=2(x3: '2(x3' is not N or N(xM)"}},
    {{"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_STEP_ID=0", "SLURM_NNODES=1",
      "SLURM_TASKS_PER_NODE=2(y1)"},
     WEFT_ERR_INVALID_ARG,
     {"'2(y1)' is not N or N(xM)"}},
    {{"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_STEP_ID=0", "SLURM_NNODES=1",
      "SLURM_TASKS_PER_NODE=2(x0)"},
     WEFT_ERR_INVALID_ARG,
     {"bad repeat count '0'"}},
    {{"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_STEP_ID=0", "SLURM_NNODES=1",
      "SLURM_TASKS_PER_NODE=two"},
     WEFT_ERR_INVALID_ARG,
     {"SLURM_TASKS_PER_NODE=two: bad task count 'two'"}},
    {{"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_STEP_ID=0", "SLURM_NNODES=1",
      "SLURM_TASKS_PER_NODE=8"},
     WEFT_ERR_INVALID_ARG,
     {"SLURM_TASKS_PER_NODE=8 gives node 0 8 task(s), more than SLURM_NTASKS=2"}},
    {{"SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_STEP_ID=0", "SLURM_NNODES=2", "SLURM_NODEID=1",
      "SLURM_LOCALID=2", "SLURM_TASKS_PER_NODE=2(x2)"},
     WEFT_ERR_INVALID_ARG,
     {"SLURM_TASKS_PER_NODE=2(x2) gives node 1 2 task(s): SLURM_LOCALID=2 is not below"}},
    {{"SLURM_PROCID=0", "SLURM_NTASKS=7", "SLURM_STEP_ID=0", "SLURM_NODEID=4",
      "SLURM_STEP_TASKS_PER_NODE=2(x3),1"},
     WEFT_ERR_INVALID_ARG,
     {"SLURM_STEP_TASKS_PER_NODE=2(x3),1 names 4 node(s), but SLURM_NODEID is 4"}},
    {{"SLURM_PROCID=0", "SLURM_NTASKS=7", "SLURM_STEP_ID=0", "SLURM_NODEID=4",
      "SLURM_STEP_NUM_NODES=4", "SLURM_STEP_TASKS_PER_NODE=2(x3),1"},
     WEFT_ERR_INVALID_ARG,
     {"SLURM_NODEID='4' is not an integer in 0..3"}},
    {{"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_STEP_ID=0", "SLURM_STEP_NUM_NODES=0"},
     WEFT_ERR_INVALID_ARG,
     {"SLURM_STEP_NUM_NODES=0"}},
    {{"SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_STEP_ID=0", "SLURM_NNODES=2",
      "SLURM_STEP_NODELIST=node[1-"},
     WEFT_ERR_INVALID_ARG,
     {"SLURM_STEP_NODELIST=node[1-: "}},
};

START_TEST(launch_bad)
{
	const struct bad_case *c = &bad[_i];
	char what[512];
	describe(c->env, what, sizeof(what));
	set_env(c->env);
	struct weft_launch l;
	struct weft_err err = {0};
	weft_status_t st = weft_launch_detect(&l, &err);
	ck_assert_msg(st == c->st, "%s: status %d (%s), want %d", what, (int)st,
		      st ? err.msg : "no error", (int)c->st);
	for (int k = 0; k < 3 && c->says[k]; k++)
		ck_assert_msg(strstr(err.msg, c->says[k]), "%s: message '%s' lacks '%s'", what,
			      err.msg, c->says[k]);
}
END_TEST

/* ---- the root a job derives ---- */

static void root_of(const char *const *env, char *text, size_t len, weft_status_t *st,
		    struct weft_err *err)
{
	struct weft_launch l;
	struct sockaddr_storage addr;
	socklen_t alen;
	set_env(env);
	memset(err, 0, sizeof(*err));
	*st = weft_launch_detect(&l, err);
	ck_assert_msg(*st == WEFT_SUCCESS, "%s", err->msg);
	*st = weft_launch_root(&l, &addr, &alen, err);
	text[0] = '\0';
	if (*st == WEFT_SUCCESS) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)&addr;
		char host[INET_ADDRSTRLEN];
		ck_assert_int_eq(in->sin_family, AF_INET);
		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		snprintf(text, len, "%s:%d", host, ntohs(in->sin_port));
	}
}

static int port_of(const char *text)
{
	const char *colon = strrchr(text, ':');
	return colon ? atoi(colon + 1) : -1;
}

START_TEST(root_derived)
{
	char a[64], b[64];
	weft_status_t st;
	struct weft_err err;

	/* WEFT_ROOT wins over everything. */
	root_of((const char *const[]){OMPI_1_OF_2, "WEFT_ROOT=127.0.0.1:1234", NULL}, a, sizeof(a),
		&st, &err);
	ck_assert_str_eq(a, "127.0.0.1:1234");
	/* One host: loopback, a port from the job id, the same on every rank. */
	root_of((const char *const[]){OMPI_1_OF_2, NULL}, a, sizeof(a), &st, &err);
	root_of((const char *const[]){"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2",
				      "OMPI_COMM_WORLD_LOCAL_RANK=0",
				      "OMPI_COMM_WORLD_LOCAL_SIZE=2",
				      "OMPI_MCA_orte_precondition_transports=ab-cd", NULL},
		b, sizeof(b), &st, &err);
	ck_assert_str_eq(a, b);
	ck_assert_msg(strncmp(a, "127.0.0.1:", 10) == 0, "%s", a);
	ck_assert_int_ge(port_of(a), 20000);
	ck_assert_int_le(port_of(a), 32767);
	/* Another job: another port. */
	root_of((const char *const[]){"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2",
				      "OMPI_COMM_WORLD_LOCAL_RANK=0",
				      "OMPI_COMM_WORLD_LOCAL_SIZE=2",
				      "OMPI_MCA_orte_precondition_transports=ab-ce", NULL},
		b, sizeof(b), &st, &err);
	ck_assert_str_ne(a, b);
	/* srun -n 2 on one node (issue 14), and another step of the same job. */
	root_of((const char *const[]){SRUN_2_ONE_NODE, NULL}, a, sizeof(a), &st, &err);
	ck_assert_msg(st == WEFT_SUCCESS && strncmp(a, "127.0.0.1:", 10) == 0, "%s", err.msg);
	root_of((const char *const[]){SRUN_2_ONE_NODE, "SLURM_STEP_ID=1", NULL}, b, sizeof(b), &st,
		&err);
	ck_assert_str_ne(a, b);
	/* torchrun: MASTER_ADDR, port MASTER_PORT + 1. */
	root_of((const char *const[]){"TORCHELASTIC_RUN_ID=none", "RANK=1", "WORLD_SIZE=2",
				      "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29500", NULL},
		a, sizeof(a), &st, &err);
	ck_assert_str_eq(a, "127.0.0.1:29501");
	/* Slurm across nodes: the first node of the step, port from job and
	 * step; a node that resolves to loopback cannot serve the other hosts. */
	root_of((const char *const[]){"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_NNODES=2",
				      "SLURM_JOB_ID=77", "SLURM_STEP_ID=0",
				      "SLURM_STEP_NODELIST=localhost,vm", NULL},
		a, sizeof(a), &st, &err);
	ck_assert_int_eq(st, WEFT_ERR_INVALID_ARG);
	ck_assert_msg(strstr(err.msg, "'localhost' (the first node of SLURM_STEP_NODELIST) "
				      "resolves to a loopback address") &&
			  strstr(err.msg, "srun --mpi=pmix"),
		      "%s", err.msg);
	/* The same name on one node is fine: every rank is there. */
	root_of((const char *const[]){"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_NNODES=1",
				      "SLURM_JOB_ID=77", "SLURM_STEP_ID=0",
				      "SLURM_STEP_NODELIST=localhost", NULL},
		a, sizeof(a), &st, &err);
	ck_assert_msg(st == WEFT_SUCCESS && strncmp(a, "127.0.0.1:", 10) == 0, "%s", err.msg);
	ck_assert_int_ge(port_of(a), 20000);
}
END_TEST

START_TEST(root_missing)
{
	char a[64];
	weft_status_t st;
	struct weft_err err;

	root_of((const char *const[]){"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=4",
				      "OMPI_COMM_WORLD_LOCAL_SIZE=2", NULL},
		a, sizeof(a), &st, &err);
	ck_assert_int_eq(st, WEFT_ERR_INVALID_ARG);
	ck_assert_msg(strstr(err.msg, "WEFT_ROOT is not set and the Open MPI job is not on one "
				      "host: set WEFT_ROOT=host:port"),
		      "%s", err.msg);
	/* Slurm across nodes without a node list: say what to do. */
	root_of((const char *const[]){"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_NNODES=2",
				      "SLURM_STEP_ID=0", NULL},
		a, sizeof(a), &st, &err);
	ck_assert_int_eq(st, WEFT_ERR_INVALID_ARG);
	ck_assert_msg(strstr(err.msg, "Slurm job is not on one host: SLURM_STEP_NODELIST is not "
				      "set, so rank 0's node is unknown") &&
			  strstr(err.msg, "WEFT_ROOT=host:port") &&
			  strstr(err.msg, "srun --mpi=pmix"),
		      "%s", err.msg);
	/* A first node that does not resolve (rejected before any DNS query). */
	root_of((const char *const[]){"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_NNODES=2",
				      "SLURM_STEP_ID=0", "SLURM_STEP_NODELIST=no..such..node",
				      NULL},
		a, sizeof(a), &st, &err);
	ck_assert_int_eq(st, WEFT_ERR_INVALID_ARG);
	ck_assert_msg(strstr(err.msg, "'no..such..node' (the first node of SLURM_STEP_NODELIST) "
				      "does not resolve") &&
			  strstr(err.msg, "WEFT_ROOT") && strstr(err.msg, "srun --mpi=pmix"),
		      "%s", err.msg);
	/* -m arbitrary: no root from the node list, and the reason. */
	root_of((const char *const[]){"SLURM_PROCID=1", "SLURM_NTASKS=4", "SLURM_NNODES=4",
				      "SLURM_STEP_ID=0", "SLURM_DISTRIBUTION=arbitrary",
				      "SLURM_STEP_NODELIST=h[1-4]", NULL},
		a, sizeof(a), &st, &err);
	ck_assert_int_eq(st, WEFT_ERR_INVALID_ARG);
	ck_assert_msg(strstr(err.msg, "SLURM_DISTRIBUTION=arbitrary puts rank 0 on any node") &&
			  strstr(err.msg, "srun --mpi=pmix") && strstr(err.msg, "WEFT_ROOT="),
		      "%s", err.msg);
	/* Rank 0 that finds itself off the first node says so. */
	root_of((const char *const[]){"SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_NNODES=4",
				      "SLURM_NODEID=2", "SLURM_STEP_ID=0",
				      "SLURM_STEP_NODELIST=h[1-4]", NULL},
		a, sizeof(a), &st, &err);
	ck_assert_int_eq(st, WEFT_ERR_INVALID_ARG);
	ck_assert_msg(strstr(err.msg, "SLURM_NODEID is not 0"), "%s", err.msg);
	/* srun --mpi=pmix where PMIx cannot be used: the error says that too. */
	root_of((const char *const[]){"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_NNODES=2",
				      "SLURM_STEP_ID=0", "PMIX_RANK=1",
				      "PMIX_NAMESPACE=slurm.pmix.1.0", "WEFT_PMIX=0", NULL},
		a, sizeof(a), &st, &err);
	ck_assert_int_eq(st, WEFT_ERR_INVALID_ARG);
	ck_assert_msg(
	    strstr(err.msg, "PMIx variables are set, but PMIx cannot be used: WEFT_PMIX=0"), "%s",
	    err.msg);
}
END_TEST

/* ---- weft_launch_query ---- */

START_TEST(query_public)
{
	weft_launch_info_t info = WEFT_LAUNCH_INFO_INIT;
	set_env((const char *const[]){NULL});
	ck_assert_int_eq(weft_launch_query(&info), WEFT_SUCCESS);
	ck_assert_str_eq(info.launcher, "none");
	ck_assert_int_eq(info.rank, 0);
	ck_assert_int_eq(info.nranks, 1);
	ck_assert_int_eq(info.local_rank, 0);
	ck_assert_int_eq(info.local_size, 1);

	set_env((const char *const[]){SRUN_2_ONE_NODE, NULL});
	ck_assert_int_eq(weft_launch_query(&info), WEFT_SUCCESS);
	ck_assert_str_eq(info.launcher, "Slurm");
	ck_assert_int_eq(info.rank, 1);
	ck_assert_int_eq(info.nranks, 2);
	ck_assert_int_eq(info.local_rank, 1);
	ck_assert_int_eq(info.local_size, 2);

	/* Unusable variables: an error naming them, info unchanged. */
	set_env((const char *const[]){"SLURM_PROCID=2", "SLURM_NTASKS=2", NULL});
	ck_assert_int_eq(weft_launch_query(&info), WEFT_ERR_INVALID_ARG);
	ck_assert_msg(strstr(weft_init_last_error(), "SLURM_PROCID=2 and SLURM_NTASKS=2"), "%s",
		      weft_init_last_error());
	ck_assert_str_eq(info.launcher, "Slurm");
	ck_assert_int_eq(info.rank, 1);

	set_env((const char *const[]){"PMIX_RANK=0", NULL});
	ck_assert_int_eq(weft_launch_query(&info), WEFT_ERR_NOT_SUPPORTED);
	ck_assert_msg(strstr(weft_init_last_error(), "PMIx"), "%s", weft_init_last_error());

	/* A later success clears the message. */
	set_env((const char *const[]){NULL});
	ck_assert_int_eq(weft_launch_query(&info), WEFT_SUCCESS);
	ck_assert_str_eq(weft_init_last_error(), "");

	ck_assert_int_eq(weft_launch_query(NULL), WEFT_ERR_INVALID_ARG);
	ck_assert_msg(strstr(weft_init_last_error(), "info is NULL"), "%s", weft_init_last_error());
	info.size = 8;
	ck_assert_int_eq(weft_launch_query(&info), WEFT_ERR_INVALID_ARG);
	ck_assert_msg(strstr(weft_init_last_error(), "info->size is 8"), "%s",
		      weft_init_last_error());
	/* A caller built against a later, larger struct is served. */
	struct {
		weft_launch_info_t info;
		char more[64];
	} big = {.info = {.size = sizeof(big)}};
	ck_assert_int_eq(weft_launch_query(&big.info), WEFT_SUCCESS);
	ck_assert_str_eq(big.info.launcher, "none");
}
END_TEST

/* ---- weft_comm_init_env under other launchers, end to end ---- */

struct e2e {
	const char *name;
	char job[32]; /* a job id unique to this run */
	int port;     /* a free port, for torchrun's MASTER_PORT + 1 */
};

static void setf(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void setf(const char *name, const char *fmt, ...)
{
	char v[128];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v, sizeof(v), fmt, ap);
	va_end(ap);
	setenv(name, v, 1);
}

/* What the launcher would have set in rank @p r of @p n. */
static void launcher_env(const struct e2e *e, int r, int n)
{
	if (strcmp(e->name, "Open MPI") == 0) {
		setf("OMPI_COMM_WORLD_RANK", "%d", r);
		setf("OMPI_COMM_WORLD_SIZE", "%d", n);
		setf("OMPI_COMM_WORLD_LOCAL_RANK", "%d", r);
		setf("OMPI_COMM_WORLD_LOCAL_SIZE", "%d", n);
		setf("OMPI_MCA_orte_precondition_transports", "%s", e->job);
		setf("PMIX_RANK", "%d", r);
		setf("PMIX_NAMESPACE", "%s", e->job);
	} else if (strcmp(e->name, "Slurm") == 0) {
		/* srun -n N on one node. Steps across nodes need hosts that
		 * are not this one's loopback: tests/fabric/test_slurm.sh. */
		setf("SLURM_PROCID", "%d", r);
		setf("SLURM_NTASKS", "%d", n);
		setf("SLURM_LOCALID", "%d", r);
		setf("SLURM_NODEID", "0");
		setf("SLURM_TASKS_PER_NODE", "%d", n);
		setf("SLURM_NNODES", "1");
		setf("SLURM_JOB_ID", "%s", e->job);
		setf("SLURM_STEP_ID", "0");
		setf("SLURM_STEP_NODELIST", "localhost");
	} else {
		setf("TORCHELASTIC_RUN_ID", "none");
		setf("RANK", "%d", r);
		setf("WORLD_SIZE", "%d", n);
		setf("LOCAL_RANK", "%d", r);
		setf("LOCAL_WORLD_SIZE", "%d", n);
		setf("GROUP_RANK", "0");
		setf("GROUP_WORLD_SIZE", "1");
		setf("MASTER_ADDR", "127.0.0.1");
		setf("MASTER_PORT", "%d", e->port - 1);
	}
}

static int e2e_rank(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	const struct e2e *e = arg;
	launcher_env(e, rank, nranks);
	weft_launch_info_t info = WEFT_LAUNCH_INFO_INIT;
	if (weft_launch_query(&info) != WEFT_SUCCESS || strcmp(info.launcher, e->name) != 0 ||
	    info.rank != rank || info.nranks != nranks) {
		fprintf(stderr, "%s rank %d: weft_launch_query: %s, %s %d of %d\n", e->name, rank,
			weft_init_last_error(), info.launcher, info.rank, info.nranks);
		return 2;
	}
	weft_comm_t comm;
	if (weft_comm_init_env(&comm, NULL) != WEFT_SUCCESS) {
		fprintf(stderr, "%s rank %d: %s\n", e->name, rank, weft_init_last_error());
		return 3;
	}
	int32_t v = rank + 1;
	weft_status_t st = weft_allreduce(WEFT_IN_PLACE, &v, 1, WEFT_INT32, WEFT_SUM, comm);
	weft_comm_destroy(comm);
	return st == WEFT_SUCCESS && v == nranks * (nranks + 1) / 2 ? 0 : 4;
}

static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

static const char *const e2e_names[] = {"Open MPI", "Slurm", "torchrun"};

START_TEST(init_env_under_launchers)
{
	struct e2e e = {.name = e2e_names[_i], .port = free_port()};
	snprintf(e.job, sizeof(e.job), "%d.%ld", (int)getpid(), (long)time(NULL));
	set_env((const char *const[]){NULL});
	setenv("WEFT_BOOTSTRAP_TIMEOUT", "10", 1);
	struct weft_local_job job = {
	    .nranks = 3, .id = WEFT_LOCAL_ID_NONE, .name = e.name, .grace_s = 5, .timeout_s = 20};
	ck_assert_msg(weft_local_run(&job, e2e_rank, &e) == 0,
		      "weft_comm_init_env under %s (no WEFT_ROOT) failed", e.name);
}
END_TEST

static Suite *launch_suite(void)
{
	Suite *s = suite_create("launch");
	TCase *tc = tcase_create("table");
	tcase_add_loop_test(tc, launch_good, 0, (int)(sizeof(good) / sizeof(good[0])));
	tcase_add_loop_test(tc, launch_bad, 0, (int)(sizeof(bad) / sizeof(bad[0])));
	tcase_add_test(tc, root_derived);
	tcase_add_test(tc, root_missing);
	tcase_add_test(tc, query_public);
	suite_add_tcase(s, tc);
	tc = tcase_create("init_env");
	tcase_set_timeout(tc, 30);
	tcase_add_loop_test(tc, init_env_under_launchers, 0,
			    (int)(sizeof(e2e_names) / sizeof(e2e_names[0])));
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(launch_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
