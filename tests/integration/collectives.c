/*
 * collectives.c — every collective with every algorithm of the library's
 * table, in one set of rank processes per configuration: over libfabric,
 * whose initialisation (about 0.35 s a job here) would dominate one suite
 * per collective. The collective suites (allreduce.c, ...) have the
 * matrices of shm, socket, the fake hosts and the verbs double.
 *
 * One job per (provider, path, nranks, endpoints): tcp;ofi_rxm and sockets
 * (pinned to lo), WEFT_OFI_PROTO=tagged and rma, 1 to 8 ranks, the tagged
 * path over 3 endpoints (3 ranks) and 8 (2 ranks: WEFT_OFI_EPS). Each job
 * goes through allreduce, reduce_scatter, allgather, broadcast, reduce,
 * alltoall and barrier, forcing each algorithm in turn through the
 * communicator's tuner between calls (as WEFT_ALGO would at init), then
 * the tuner's own choice: counts 0, 1, 7, 4099 and, up to 3 ranks, 65537
 * (several 64 KiB chunks: WEFT_OFI_CHUNK=64K), (datatype, op) samples, in
 * place and out of place, roots first, last and middle in rotation, each
 * case checked as tests/lib/colls.h says. So every algorithm's message
 * pattern (windows, out-of-order completion on the tagged path, reducing
 * receives through the rma bounce) meets both ofi paths.
 *
 * --algo A keeps the cases that force A (auto: the tuner's choice).
 */
#include <stdio.h>

#include "algorithms/algo.h"
#include "colls.h"
#include "core/comm.h"
#include "integ.h"
#include "integ_matrix.h"
#include "tune/tune.h"

static const enum weft_coll_kind colls[] = {
    WEFT_COLL_ALLREDUCE, WEFT_COLL_REDUCE_SCATTER, WEFT_COLL_ALLGATHER, WEFT_COLL_BROADCAST,
    WEFT_COLL_REDUCE,	 WEFT_COLL_ALLTOALL,	   WEFT_COLL_BARRIER,
};

/* Force @p algo (NULL: the tuner's choice) for @p coll from the next call. */
static void force(weft_comm_t comm, enum weft_coll_kind coll, const struct weft_algo *algo)
{
	comm->tuner->forced[coll] = algo;
	comm->tuner->memo[coll].algo = NULL;
}

static int matrix_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	struct coll_ctx c;
	coll_init(&c, comm, rank, nranks);
	const size_t counts[] = {0, 1, 7, 4099, 65537};
	size_t ncounts = nranks <= 3 ? 5 : 4;
	unsigned rot = 0;
	for (size_t k = 0; k < sizeof(colls) / sizeof(colls[0]) && !c.error; k++) {
		const struct weft_algo *const *algos = weft_algos_for(colls[k]);
		/* Every algorithm, then NULL: the tuner's choice. */
		for (size_t a = 0; algos && (a == 0 || algos[a - 1]) && !c.error; a++) {
			const struct weft_algo *algo = algos[a];
			if (!integ_wants(algo ? algo->name : "auto"))
				continue;
			force(comm, colls[k], algo);
			for (size_t i = 0; i < ncounts && !c.error; i++) {
				harness_progress("%s/%s count %zu", weft_coll_name(colls[k]),
						 algo ? algo->name : "auto", counts[i]);
				coll_rotated(&c, colls[k], counts[i], rot++);
			}
		}
		force(comm, colls[k], NULL);
	}
	return coll_end(&c);
}

struct ofi_job {
	const char *prov, *proto;
	int nranks;
	int eps; /* WEFT_OFI_EPS (0: unset) */
};

static const struct ofi_job jobs[] = {
    {"tcp;ofi_rxm", "tagged", 1, 0}, {"tcp;ofi_rxm", "tagged", 2, 0},
    {"tcp;ofi_rxm", "tagged", 3, 0}, {"tcp;ofi_rxm", "tagged", 5, 0},
    {"tcp;ofi_rxm", "tagged", 8, 0}, {"tcp;ofi_rxm", "rma", 2, 0},
    {"tcp;ofi_rxm", "rma", 3, 0},    {"tcp;ofi_rxm", "rma", 5, 0},
    {"tcp;ofi_rxm", "rma", 8, 0},    {"sockets", "tagged", 2, 0},
    {"sockets", "tagged", 4, 0},     {"sockets", "rma", 3, 0},
    {"sockets", "rma", 4, 0},	     {"tcp;ofi_rxm", "tagged", 3, 3},
    {"tcp;ofi_rxm", "tagged", 2, 8},
};
#define NJOBS ((int)(sizeof(jobs) / sizeof(jobs[0])))

START_TEST(matrix)
{
	const struct ofi_job *j = &jobs[_i];
	struct integ_env e;
	integ_env_init(&e, 60);
	integ_env_add(&e, "WEFT_OFI_CHUNK=64K");
	integ_env_addf(&e, "WEFT_OFI_PROVIDER=%s", j->prov);
	integ_env_addf(&e, "WEFT_OFI_PROTO=%s", j->proto);
	integ_env_addf(&e, "WEFT_OFI_EPS=%d", j->eps ? j->eps : 1);
	char label[128];
	snprintf(label, sizeof(label), "collectives over ofi %s %s, nranks %d, %d endpoints",
		 j->prov, j->proto, j->nranks, j->eps ? j->eps : 1);
	struct harness_job job = {.nranks = j->nranks, .body = matrix_body, .timeout_s = 150};
	integ_run(&job, &e, label);
}
END_TEST

static void add(Suite *s)
{
	TCase *tc = integ_tcase_every(s, 180);
	tcase_add_loop_test(tc, matrix, 0, NJOBS);
}

int main(int argc, char **argv)
{
	static const struct integ_suite suite = {"collectives", "ofi", add};
	return integ_main(argc, argv, &suite);
}
