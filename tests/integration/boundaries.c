/*
 * boundaries.c — every collective's algorithms, each forced in turn
 * (WEFT_ALGO), at the counts where pipelines cut their data: k chunks and
 * one element less or more, for the unit each algorithm cuts (the whole
 * vector, each of the two trees' halves, each rank's segment), over shm and
 * over socket; and large counts of several chunks at the default chunk
 * sizes at every rank count 1..8.
 *
 * Why: the main matrices use counts (0, 1, 7, nranks-1, 4099, 1M+3) that
 * seldom land next to a chunk boundary, and the tuner picks the same
 * algorithm for them every time. A ring pipeline that drops its last partial
 * chunk passed them at 4, 6 and 8 ranks.
 *
 * The chunk is set small (WEFT_SHM_SLOT_BYTES=4096, WEFT_SOCKET_CHUNK=4096)
 * so that boundaries come at small counts: c = 4096 / element size
 * elements. Counts are u (k c + d) for k in {1, 2, 9} (9 chunks pass the
 * engines' windows of 8 messages), d in {-1, 0, +1}, u the algorithm's unit:
 * 1 (chunks of the whole vector, of each rank's block in allgather,
 * reduce_scatter and alltoall), 2 (the two trees of the tree AllReduce)
 * and nranks (the ring AllReduce's segments). Every u nranks count is also
 * a count divisible by nranks. Datatypes and ops rotate (every element
 * size meets every count kind); the reductions also run the rounding data
 * of harness.h (fp16, bf16, fp32, fp64 with sum, prod and avg, whose
 * results must be rounded once), at a boundary count. Every element is
 * checked, guard bytes around every output must survive, and out-of-place
 * inputs must be unchanged.
 *
 * Configurations: the k-th algorithm of every collective together (k = 0:
 * ring AllReduce, ring AllGather, ring ReduceScatter, ring Broadcast, tree
 * Reduce, pairwise AlltoAll; k = 1: tree, Bruck, tree Broadcast; k = 2:
 * recursive halving-doubling, hierarchical AllGather; k = 3: hierarchical
 * AllReduce), each job running only the collectives that have a k-th
 * algorithm. The hierarchical ones run on two fake hosts (WEFT_HOSTID), so
 * both of their stages work, over shm inside a host and socket between.
 * One job runs with WEFT_ISA=generic.
 *
 * Over the transport the suite runs with (tests/lib/integ.h): shm at 1..8
 * ranks, socket at 2..8. Its one case, "forced".
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algo.h"
#include "core/comm.h"
#include "harness.h"
#include "integ.h"
#include "reduce/reduce.h"

#define SMALL_CHUNK	   4096
#define MAX_FAILURES_SHOWN 6
#define JOB_TIMEOUT_S	   120.0

enum coll {
	C_ALLREDUCE,
	C_ALLGATHER,
	C_REDUCE_SCATTER,
	C_BROADCAST,
	C_REDUCE,
	C_ALLTOALL,
	C_COUNT
};

static const enum weft_coll_kind coll_kind[C_COUNT] = {
    WEFT_COLL_ALLREDUCE, WEFT_COLL_ALLGATHER, WEFT_COLL_REDUCE_SCATTER,
    WEFT_COLL_BROADCAST, WEFT_COLL_REDUCE,    WEFT_COLL_ALLTOALL,
};

struct plan {
	bool colls[C_COUNT]; /* the collectives this job forces and runs */
	bool small_chunks;   /* boundaries at SMALL_CHUNK; else large counts at the defaults */
	size_t chunk;	     /* the chunk the counts are cut for */
	bool generic_isa;    /* WEFT_ISA=generic: the ranks check the kernels are generic */
	int nhosts;	     /* fake hosts (WEFT_HOSTID), 1: the real one */
	char algo_env[256];
};

struct ctx {
	weft_comm_t comm;
	int rank, nranks;
	const struct plan *plan;
	unsigned salt;
	unsigned rot; /* rotation of datatypes and ops */
	int cases;
	int failures;
};

enum data { DATA_EXACT, DATA_ROUND };

/* ---- buffers: [guard | data | guard], data prefilled so that every
 * element of a result must be written */
struct gbuf {
	unsigned char *data;
	size_t bytes;
};

static bool gbuf_alloc(struct gbuf *g, size_t bytes)
{
	unsigned char *p = malloc(bytes + 2 * HARNESS_GUARD_BYTES);
	g->data = p ? p + HARNESS_GUARD_BYTES : NULL;
	g->bytes = bytes;
	if (!p)
		return false;
	harness_guard_fill(p, HARNESS_GUARD_BYTES);
	harness_guard_fill(p + HARNESS_GUARD_BYTES + bytes, HARNESS_GUARD_BYTES);
	memset(g->data, 0xcd, bytes);
	return true;
}

static void gbuf_free(struct gbuf *g)
{
	if (g->data)
		free(g->data - HARNESS_GUARD_BYTES);
	g->data = NULL;
}

static bool gbuf_guards_ok(const struct gbuf *g)
{
	return !g->data ||
	       (harness_guard_check(g->data - HARNESS_GUARD_BYTES, HARNESS_GUARD_BYTES) < 0 &&
		harness_guard_check(g->data + g->bytes, HARNESS_GUARD_BYTES) < 0);
}

/* 0: right; 1: wrong (the job goes on); 2: an error status (it stops). */
static int wrong(struct ctx *c, const char *name, const char *why)
{
	if (++c->failures <= MAX_FAILURES_SHOWN)
		harness_fail("%s: %s", name, why);
	return 1;
}

static void input(enum data d, void *buf, size_t count, weft_datatype_t dt, weft_op_t op, int rank,
		  int n, unsigned salt)
{
	if (d == DATA_ROUND)
		harness_round_input(buf, count, dt, op, rank, n, salt);
	else
		harness_ar_input(buf, count, dt, op, rank, n, salt);
}

static void expected(enum data d, void *buf, size_t count, weft_datatype_t dt, weft_op_t op, int n,
		     unsigned salt)
{
	if (d == DATA_ROUND)
		harness_round_expected(buf, count, dt, op, n, salt);
	else
		harness_ar_expected(buf, count, dt, op, n, salt);
}

/* ---- AllReduce, ReduceScatter, Reduce */
static int reduction_case(struct ctx *c, enum coll coll, size_t count, weft_datatype_t dt,
			  weft_op_t op, enum data d)
{
	int n = c->nranks, rank = c->rank, root = (int)(c->salt % (unsigned)n);
	unsigned salt = ++c->salt;
	bool in_place = coll == C_ALLREDUCE && salt % 2;
	char name[192];
	snprintf(name, sizeof(name), "%s nranks %d %s %s%s count %zu%s",
		 weft_coll_name(coll_kind[coll]), n, harness_dtype_name(dt), harness_op_name(op),
		 d == DATA_ROUND ? " (rounding)" : "", count, in_place ? " in place" : "");
	harness_progress("%s", name);
	size_t esz = harness_dtype_size(dt);
	size_t in_count = coll == C_REDUCE_SCATTER ? count * (size_t)n : count;
	struct gbuf in = {0}, out = {0};
	unsigned char *want = malloc(in_count * esz + 1), *orig = malloc(in_count * esz + 1);
	int res = 0;
	if (!want || !orig || !gbuf_alloc(&in, in_count * esz) ||
	    (!in_place && !gbuf_alloc(&out, count * esz))) {
		res = 2;
		harness_fail("%s: out of memory", name);
		goto out_free;
	}
	input(d, in.data, in_count, dt, op, rank, n, salt);
	memcpy(orig, in.data, in_count * esz);
	expected(d, want, in_count, dt, op, n, salt);
	unsigned char *result = in_place ? in.data : out.data;
	weft_status_t st;
	switch (coll) {
	case C_ALLREDUCE:
		st = weft_allreduce(in_place ? WEFT_IN_PLACE : in.data, result, count, dt, op,
				    c->comm);
		break;
	case C_REDUCE_SCATTER:
		st = weft_reduce_scatter(in.data, result, count, dt, op, c->comm);
		break;
	default: st = weft_reduce(in.data, result, count, dt, op, root, c->comm); break;
	}
	if (st != WEFT_SUCCESS) {
		harness_fail_status(c->comm, st, "%s", name);
		res = 2;
		goto out_free;
	}
	const unsigned char *mine =
	    want + (coll == C_REDUCE_SCATTER ? (size_t)rank * count * esz : 0);
	char why[256] = "";
	bool check = coll != C_REDUCE || rank == root;
	if (check && harness_compare(result, mine, count, dt, why, sizeof(why)) != SIZE_MAX)
		res = wrong(c, name, why);
	else if (!gbuf_guards_ok(&in) || !gbuf_guards_ok(&out))
		res = wrong(c, name, "a guard byte around a buffer was written");
	else if (!in_place && memcmp(in.data, orig, in_count * esz) != 0)
		res = wrong(c, name, "sendbuf was modified");
out_free:
	gbuf_free(&in);
	gbuf_free(&out);
	free(want);
	free(orig);
	return res;
}

/* ---- AllGather, Broadcast, AlltoAll: bytes that differ per rank and block */
static int movement_case(struct ctx *c, enum coll coll, size_t count, weft_datatype_t dt)
{
	int n = c->nranks, rank = c->rank, root = n - 1 - (int)(c->salt % (unsigned)n);
	unsigned salt = ++c->salt;
	char name[192];
	snprintf(name, sizeof(name), "%s nranks %d %s count %zu", weft_coll_name(coll_kind[coll]),
		 n, harness_dtype_name(dt), count);
	harness_progress("%s", name);
	size_t blk = count * harness_dtype_size(dt);
	size_t in_bytes = coll == C_ALLTOALL ? blk * (size_t)n : blk;
	size_t out_bytes = coll == C_BROADCAST ? blk : blk * (size_t)n;
	struct gbuf in = {0}, out = {0};
	unsigned char *want = malloc(out_bytes + 1), *orig = malloc(in_bytes + 1);
	int res = 0;
	if (!want || !orig || !gbuf_alloc(&in, in_bytes) || !gbuf_alloc(&out, out_bytes)) {
		res = 2;
		harness_fail("%s: out of memory", name);
		goto out_free;
	}
	weft_status_t st;
	switch (coll) {
	case C_ALLGATHER:
		harness_ag_input(in.data, count, dt, rank, salt);
		for (int r = 0; r < n; r++)
			harness_ag_input(want + (size_t)r * blk, count, dt, r, salt);
		memcpy(orig, in.data, in_bytes);
		st = weft_allgather(in.data, out.data, count, dt, c->comm);
		break;
	case C_BROADCAST:
		harness_ag_input(in.data, count, dt, root + 1, salt);
		memcpy(want, in.data, blk);
		memcpy(orig, in.data, in_bytes);
		st = weft_broadcast(in.data, out.data, count, dt, root, c->comm);
		break;
	default:
		for (int j = 0; j < n; j++) {
			harness_ag_input(in.data + (size_t)j * blk, count, dt, rank * n + j, salt);
			harness_ag_input(want + (size_t)j * blk, count, dt, j * n + rank, salt);
		}
		memcpy(orig, in.data, in_bytes);
		st = weft_alltoall(in.data, out.data, count, dt, c->comm);
		break;
	}
	if (st != WEFT_SUCCESS) {
		harness_fail_status(c->comm, st, "%s", name);
		res = 2;
		goto out_free;
	}
	char why[256] = "";
	if (harness_compare(out.data, want, out_bytes, WEFT_UINT8, why, sizeof(why)) != SIZE_MAX)
		res = wrong(c, name, why);
	else if (!gbuf_guards_ok(&in) || !gbuf_guards_ok(&out))
		res = wrong(c, name, "a guard byte around a buffer was written");
	else if (memcmp(in.data, orig, in_bytes) != 0)
		res = wrong(c, name, "sendbuf was modified");
out_free:
	gbuf_free(&in);
	gbuf_free(&out);
	free(want);
	free(orig);
	return res;
}

/* Every element size, with ops that meet sum, prod, min, max and avg. */
static const struct {
	weft_datatype_t dt;
	weft_op_t op;
} rotation[] = {
    {WEFT_FLOAT32, WEFT_SUM}, {WEFT_FLOAT16, WEFT_MAX}, {WEFT_INT8, WEFT_SUM},
    {WEFT_FLOAT64, WEFT_AVG}, {WEFT_UINT32, WEFT_MIN},	{WEFT_BFLOAT16, WEFT_SUM},
    {WEFT_INT64, WEFT_PROD},  {WEFT_UINT8, WEFT_MAX},	{WEFT_INT32, WEFT_AVG},
};
#define NROTATION (sizeof(rotation) / sizeof(rotation[0]))

static bool is_reduction(enum coll coll)
{
	return coll == C_ALLREDUCE || coll == C_REDUCE_SCATTER || coll == C_REDUCE;
}

static int one_case(struct ctx *c, enum coll coll, size_t count, weft_datatype_t dt, weft_op_t op,
		    enum data d)
{
	c->cases++;
	return is_reduction(coll) ? reduction_case(c, coll, count, dt, op, d)
				  : movement_case(c, coll, count, dt);
}

/* The units an algorithm of @p coll may cut at: the whole vector (or each
 * rank's block), the tree AllReduce's two halves, the ring AllReduce's
 * nranks segments. */
static size_t units(enum coll coll, int n, size_t unit[3])
{
	size_t k = 0;
	unit[k++] = 1;
	if (coll == C_ALLREDUCE || coll == C_BROADCAST || coll == C_REDUCE)
		unit[k++] = 2;
	if (coll == C_ALLREDUCE && n > 2)
		unit[k++] = (size_t)n;
	return k;
}

/* Boundary counts u (k c + d) with the small chunk. */
static int boundaries(struct ctx *c, enum coll coll)
{
	static const size_t ks[] = {1, 2, 9};
	static const long ds[] = {-1, 0, 1};
	size_t unit[3], nunits = units(coll, c->nranks, unit);
	int res = 0;
	for (size_t u = 0; u < nunits && res < 2; u++)
		for (size_t k = 0; k < 3 && res < 2; k++)
			for (size_t d = 0; d < 3 && res < 2; d++) {
				if (ks[k] == 9 && ds[d] != 1)
					continue; /* the long case once, with a partial chunk */
				weft_datatype_t dt = rotation[c->rot % NROTATION].dt;
				weft_op_t op = rotation[c->rot % NROTATION].op;
				c->rot++;
				size_t ce = c->plan->chunk / harness_dtype_size(dt);
				size_t count = unit[u] * (size_t)((long)(ks[k] * ce) + ds[d]);
				res |= one_case(c, coll, count, dt, op, DATA_EXACT);
			}
	/* The rounding data, every float type and op, at a boundary. */
	static const weft_datatype_t floats[] = {WEFT_FLOAT16, WEFT_BFLOAT16, WEFT_FLOAT32,
						 WEFT_FLOAT64};
	static const weft_op_t ops[] = {WEFT_SUM, WEFT_PROD, WEFT_AVG};
	for (size_t f = 0; is_reduction(coll) && f < 4 && res < 2; f++)
		for (size_t o = 0; o < 3 && res < 2; o++) {
			size_t ce = c->plan->chunk / harness_dtype_size(floats[f]);
			size_t u = unit[(f + o) % nunits];
			res |= one_case(c, coll, u * (ce + 1), floats[f], ops[o], DATA_ROUND);
		}
	return res;
}

/* Several chunks and a partial one at the default chunk, u (2 c + 1) for
 * each unit u: fp32 with the plain data, and fp16 (for the reductions with
 * the rounding data) at every other unit. */
static int large(struct ctx *c, enum coll coll)
{
	size_t unit[3], nunits = units(coll, c->nranks, unit);
	if (coll == C_ALLTOALL && c->nranks > 4)
		return 0; /* n^2 blocks; alltoall.c runs it at 300001 */
	int res = 0;
	for (size_t u = 0; u < nunits && res < 2; u++) {
		bool half = u % 2;
		weft_datatype_t dt = half ? WEFT_FLOAT16 : WEFT_FLOAT32;
		size_t ce = c->plan->chunk / harness_dtype_size(dt);
		res |= one_case(c, coll, unit[u] * (2 * ce + 1), dt, WEFT_SUM,
				half ? DATA_ROUND : DATA_EXACT);
	}
	return res;
}

/* The counts above are boundaries only for the chunk the test assumes: make
 * sure it is the one in use (the one look inside the communicator). */
static int check_setup(struct ctx *c)
{
	size_t chunk = ((const struct weft_comm *)c->comm)->chunk_bytes;
	if (c->nranks > 1 && chunk != c->plan->chunk)
		return harness_fail(
		    "the pipelining chunk is %zu bytes, the test cuts counts for %zu", chunk,
		    c->plan->chunk);
	if (c->plan->generic_isa && strcmp(weft_reduce_isa(), "generic") != 0)
		return harness_fail("WEFT_ISA=generic, but the kernels are %s", weft_reduce_isa());
	return 0;
}

static int body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	struct ctx c = {.comm = comm, .rank = rank, .nranks = nranks, .plan = arg};
	int res = check_setup(&c);
	for (int k = 0; k < C_COUNT && res < 2; k++) {
		if (!c.plan->colls[k])
			continue;
		res |=
		    c.plan->small_chunks ? boundaries(&c, (enum coll)k) : large(&c, (enum coll)k);
	}
	if (c.failures > MAX_FAILURES_SHOWN)
		harness_fail("... %d wrong cases in all", c.failures);
	if (rank == 0)
		memcpy(harness_shared(), &c.cases, sizeof(c.cases));
	return res;
}

/* ---- jobs */

/* The k-th algorithm of every collective that has one: fills the plan's
 * WEFT_ALGO and collectives; false if no collective has a k-th. */
static bool forced_plan(size_t k, struct plan *p)
{
	size_t len = (size_t)snprintf(p->algo_env, sizeof(p->algo_env), "WEFT_ALGO=");
	bool any = false;
	for (int c = 0; c < C_COUNT; c++) {
		const struct weft_algo *const *algos = weft_algos_for(coll_kind[c]);
		size_t have = 0;
		while (algos && algos[have])
			have++;
		p->colls[c] = k < have;
		if (k >= have)
			continue;
		len +=
		    (size_t)snprintf(p->algo_env + len, sizeof(p->algo_env) - len, "%s%s:%s",
				     any ? ";" : "", weft_coll_name(coll_kind[c]), algos[k]->name);
		if (strcmp(algos[k]->name, "hier") == 0)
			p->nhosts = 2;
		any = true;
	}
	return any;
}

static int set_host(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	const struct plan *p = arg;
	char host[32];
	snprintf(host, sizeof(host), "boundaries-h%d", rank * p->nhosts / nranks);
	return p->nhosts > 1 && setenv("WEFT_HOSTID", host, 1) != 0;
}

static void run(int nranks, struct plan *p)
{
	bool socket = integ_over("socket");
	struct integ_env e;
	integ_env_init(&e, 60);
	integ_env_add(&e, "WEFT_SOCKET_IFNAME=lo");
	integ_env_add(&e, p->algo_env);
	if (p->small_chunks) {
		integ_env_add(&e, "WEFT_SHM_SLOT_BYTES=4096");
		integ_env_add(&e, "WEFT_SOCKET_CHUNK=4096");
	}
	if (p->generic_isa)
		integ_env_add(&e, "WEFT_ISA=generic");
	/* The ranks agree on the smallest chunk any of them wants: shm's where
	 * a host holds two ranks, else socket's (fake hosts of one rank each). */
	bool shm_used = !socket && p->nhosts < nranks;
	p->chunk = p->small_chunks ? SMALL_CHUNK : shm_used ? (size_t)128 << 10 : (size_t)512 << 10;
	struct harness_job job = {
	    .nranks = nranks,
	    .env = e.v,
	    .body = body,
	    .arg = p,
	    .timeout_s = JOB_TIMEOUT_S,
	    .before_init = set_host,
	};
	struct harness_result res;
	harness_run_job(&job, &res);
	int cases;
	memcpy(&cases, res.shared, sizeof(cases));
	printf("boundaries %s %s%s nranks %d: %d cases, %.1f s\n", integ_transport(),
	       p->small_chunks ? "4K chunks " : "large ", p->algo_env, nranks, cases, res.seconds);
	fflush(stdout);
	ck_assert_msg(res.ok, "%s, %s%s, nranks %d:\n%s", integ_transport(),
		      p->small_chunks ? "4 KiB chunks, " : "default chunks, ", p->algo_env, nranks,
		      res.summary);
}

static void run_forced(int nranks, bool small_chunks, size_t first, size_t last)
{
	for (size_t k = first; k <= last; k++) {
		struct plan p = {.small_chunks = small_chunks, .nhosts = 1};
		if (!forced_plan(k, &p))
			break;
		if (p.nhosts > 1 && nranks < 2)
			p.nhosts = 1;
		run(nranks, &p);
	}
}

/* shm 1..8 ranks, socket 2..8 */
START_TEST(small_chunk_boundaries)
{
	run_forced(_i, true, 0, 9);
}
END_TEST

START_TEST(large_counts)
{
	run_forced(_i, false, 0, 1);
}
END_TEST

/* The generic kernels through the whole library, rounding data included. */
START_TEST(generic_isa)
{
	for (size_t k = 0; k <= 1; k++) {
		struct plan p = {.small_chunks = true, .generic_isa = true, .nhosts = 1};
		ck_assert(forced_plan(k, &p));
		run(3, &p);
	}
}
END_TEST

static void add(Suite *s)
{
	bool socket = integ_over("socket");
	TCase *tc = integ_tcase(s, "forced", 4 * JOB_TIMEOUT_S);
	if (!tc)
		return;
	tcase_add_loop_test(tc, small_chunk_boundaries, socket ? 2 : 1, 9);
	tcase_add_loop_test(tc, large_counts, socket ? 2 : 1, 9);
	if (!socket)
		tcase_add_test(tc, generic_isa);
}

int main(int argc, char **argv)
{
	static const struct integ_suite suite = {"boundaries", "shm socket", add};
	return integ_main(argc, argv, &suite);
}
