/*
 * perf_common.c — the sweep and the report of the *_perf programs; see
 * perf_common.h.
 *
 * For every size from -b to -e:
 *   1. -w warm-up calls, a barrier, then -n timed calls; the mean time per
 *      call on each rank, reduced with MAX over ranks, is the row's time;
 *   2. with -c 1, one more call on a known pattern, checked element by
 *      element and for writes outside the buffers (perf_check.c);
 *   3. the same again in place, if the collective has an in-place form
 *      (otherwise the four in-place columns print N/A, so every row keeps
 *      nccl-tests' 13 columns).
 */
#define _GNU_SOURCE
#include "perf_int.h"

#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const struct perf_test *perf_g_test;
const char *perf_g_prog = "perf";
int perf_g_rank = -1;
int perf_g_nranks;

/* ---- the collectives ------------------------------------------------- */

static double factor_allreduce(int n)
{
	return 2.0 * (n - 1) / n;
}

static double factor_gather(int n)
{
	return (double)(n - 1) / n;
}

static double factor_one(int n)
{
	return 1.0;
}

static const struct perf_coll_info coll_infos[PERF_COLL_COUNT] = {
    [PERF_COLL_ALLREDUCE] = {"allreduce", true, false, true, 1, 1, factor_allreduce},
    [PERF_COLL_ALLGATHER] = {"allgather", false, false, true, 1, 0, factor_gather},
    [PERF_COLL_REDUCE_SCATTER] = {"reduce_scatter", true, false, true, 0, 1, factor_gather},
    [PERF_COLL_BROADCAST] = {"broadcast", false, true, true, 1, 1, factor_one},
    [PERF_COLL_REDUCE] = {"reduce", true, true, true, 1, 1, factor_one},
    [PERF_COLL_ALLTOALL] = {"alltoall", false, false, false, 0, 0, factor_gather},
    [PERF_COLL_SENDRECV] = {"sendrecv", false, false, false, 1, 1, factor_one},
};

const struct perf_coll_info *perf_coll_info(enum perf_coll coll)
{
	return &coll_infos[coll];
}

size_t perf_send_blocks(void)
{
	int b = coll_infos[perf_g_test->coll].send_blocks;
	return b ? (size_t)b : (size_t)perf_g_nranks;
}

size_t perf_recv_blocks(void)
{
	int b = coll_infos[perf_g_test->coll].recv_blocks;
	return b ? (size_t)b : (size_t)perf_g_nranks;
}

void perf_algo_setting(char *buf, size_t len, const char *algo)
{
	if (perf_g_test->coll == PERF_COLL_SENDRECV)
		snprintf(buf, len, "send:%s;recv:%s", algo, algo);
	else
		snprintf(buf, len, "%s:%s", coll_infos[perf_g_test->coll].name, algo);
}

/* ---- errors ------------------------------------------------------------ */

void perf_die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	if (perf_g_rank >= 0)
		fprintf(stderr, "%s: rank %d: ", perf_g_prog, perf_g_rank);
	else
		fprintf(stderr, "%s: ", perf_g_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	perf_rt_abort();
}

/* ---- the sweep --------------------------------------------------------- */

struct sweep {
	const struct perf_opts *o;
	const struct perf_coll_info *ci;
	struct perf_buf send, recv;
	double bw_sum;
	int bw_count;
	int64_t wrong, oob;
};

static void format_time(char *buf, size_t len, double us)
{
	if (us >= 10000.0)
		snprintf(buf, len, "%7.0f", us);
	else if (us >= 100.0)
		snprintf(buf, len, "%7.1f", us);
	else if (us >= 1.0)
		snprintf(buf, len, "%7.2f", us);
	else /* shared-memory latencies: a hundredth of a us is 5 % of them */
		snprintf(buf, len, "%7.3f", us);
}

/* Point the call at the buffers, aliased as perf_common.h says in place. */
static void place_buffers(struct sweep *s, struct perf_call *c)
{
	size_t off = (size_t)perf_g_rank * c->count * perf_dtype_size(c->dtype);

	c->sendbuf = s->send.p;
	c->recvbuf = s->recv.p;
	if (!c->in_place)
		return;
	switch (perf_g_test->coll) {
	case PERF_COLL_ALLGATHER: c->sendbuf = s->recv.p + off; break;
	case PERF_COLL_REDUCE_SCATTER: c->recvbuf = s->send.p + off; break;
	default: c->sendbuf = s->recv.p; break;
	}
}

/* Time one placement of one size and print its four columns. */
static void bench(struct sweep *s, struct perf_call *c, const struct perf_pattern *p, size_t bytes)
{
	const struct perf_opts *o = s->o;
	double t0, sec, algbw, busbw;
	int64_t counts[2] = {0, 0};
	char tbuf[32];

	place_buffers(s, c);
	for (int i = 0; i < o->warmup; i++)
		perf_g_test->run(c);
	perf_rt_barrier();
	t0 = perf_rt_wtime();
	for (int i = 0; i < o->iters; i++)
		perf_g_test->run(c);
	sec = perf_rt_max_double((perf_rt_wtime() - t0) / o->iters);

	if (o->check) {
		perf_check_prepare(p, c);
		perf_g_test->run(c);
		perf_check_result(p, c, &counts[0], &counts[1]);
		perf_rt_sum_i64(counts, 2);
		s->wrong += counts[0];
		s->oob += counts[1];
	}
	algbw = sec > 0 ? (double)bytes / 1e9 / sec : 0;
	busbw = algbw * s->ci->busbw_factor(perf_g_nranks);
	s->bw_sum += busbw;
	s->bw_count++;
	if (perf_g_rank != 0)
		return;
	format_time(tbuf, sizeof(tbuf), sec * 1e6);
	if (o->check)
		printf("  %7s  %6.2f  %6.2f  %5g", tbuf, algbw, busbw, (double)counts[0]);
	else
		printf("  %7s  %6.2f  %6.2f  %5s", tbuf, algbw, busbw, "N/A");
}

static void sweep_one(struct sweep *s, enum perf_dtype dt, enum perf_op op)
{
	const struct perf_opts *o = s->o;
	size_t ts = perf_dtype_size(dt);
	size_t blocks =
	    perf_send_blocks() > perf_recv_blocks() ? perf_send_blocks() : perf_recv_blocks();
	int root = s->ci->has_root ? o->root : -1;
	struct perf_pattern *p = perf_pattern_new(dt, op, root);

	/* realistic data for the timed calls; the check reloads what it needs */
	perf_pattern_fill_input(p, s->send.p, s->send.bytes);
	for (size_t size = o->minbytes;; size = perf_next_size(o, size)) {
		struct perf_call c = {.dtype = dt,
				      .op = op,
				      .rank = perf_g_rank,
				      .nranks = perf_g_nranks,
				      .root = root};
		size_t bytes;

		c.count = size / ts / blocks;
		bytes = c.count * ts * blocks;
		if (perf_g_rank == 0) {
			printf("%12zu  %12zu  %8s  %6s  %6d", bytes, bytes / ts,
			       perf_dtype_name(dt), s->ci->has_op ? perf_op_name(op) : "none",
			       root);
			fflush(stdout);
		}
		c.in_place = false;
		bench(s, &c, p, bytes);
		if (s->ci->in_place) {
			c.in_place = true;
			bench(s, &c, p, bytes);
		} else if (perf_g_rank == 0) {
			printf("  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
		}
		if (perf_g_rank == 0)
			printf("\n");
		if (perf_next_size(o, size) == 0)
			break;
	}
	perf_pattern_free(p);
}

/* ---- the report's header ------------------------------------------------- */

/* "all", or the CPUs this process may run on ("0", "0,2-3"). */
static void describe_cpus(char *buf, size_t len)
{
	cpu_set_t set;
	size_t used = 0;
	int n = 0;

	snprintf(buf, len, "?");
	if (sched_getaffinity(0, sizeof(set), &set))
		return;
	if (CPU_COUNT(&set) >= sysconf(_SC_NPROCESSORS_ONLN)) {
		snprintf(buf, len, "all");
		return;
	}
	for (int c = 0; c < CPU_SETSIZE && used + 1 < len; c++) {
		int end = c;
		if (!CPU_ISSET(c, &set))
			continue;
		while (end + 1 < CPU_SETSIZE && CPU_ISSET(end + 1, &set))
			end++;
		used += (size_t)snprintf(buf + used, len - used, end > c ? "%s%d-%d" : "%s%d",
					 n++ ? "," : "", c, end);
		c = end;
	}
}

static void print_ranks(const struct perf_rank_info *all)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	bool one_host = true;

	printf("#\n# Using ranks\n");
	for (int r = 0; r < perf_g_nranks; r++) {
		printf("#  Rank %2d Group %2d Pid %6d on %10.*s cpus %.*s\n", r, 0, (int)all[r].pid,
		       PERF_HOST_CHARS - 1, all[r].host, PERF_CPUS_CHARS - 1, all[r].cpus);
		one_host = one_host && strncmp(all[r].host, all[0].host, PERF_HOST_CHARS) == 0;
	}
	if (one_host && cores > 0 && perf_g_nranks > cores)
		printf("# Note: %d ranks on %ld online cores: oversubscribed, not a performance "
		       "figure\n",
		       perf_g_nranks, cores);
	printf("#\n");
}

static void print_header(const struct perf_opts *o)
{
	struct perf_rank_info mine = {.pid = (int32_t)getpid()}, *all;
	char desc[512];

	gethostname(mine.host, sizeof(mine.host) - 1);
	describe_cpus(mine.cpus, sizeof(mine.cpus));
	all = calloc((size_t)perf_g_nranks, sizeof(*all));
	if (!all)
		perf_die("out of memory");
	perf_rt_gather_info(&mine, all);
	perf_rt_describe(desc, sizeof(desc));
	if (perf_g_rank != 0) {
		free(all);
		return;
	}
	printf("# Collective test starting: %s\n", perf_g_prog);
	printf("# nRanks %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
	       "validation: %d\n",
	       perf_g_nranks, o->minbytes, o->maxbytes,
	       o->stepfactor > 1 ? o->stepfactor : o->stepbytes,
	       o->stepfactor > 1 ? "factor" : "bytes", o->warmup, o->iters, o->check);
	printf("# %s\n", desc);
	if (o->algo)
		printf("# Algorithm forced: WEFT_ALGO=%s\n", getenv("WEFT_ALGO"));
	print_ranks(all);
	printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place"
	       "          \n",
	       "", "", "", "", "");
	printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size",
	       "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
	       "algbw", "busbw", "#wrong");
	printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)",
	       "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
	       "");
	fflush(stdout);
	free(all);
}

/* ---- main -------------------------------------------------------------- */

/* The single dtype/op asked for must be supported; "all" skips the rest. */
static bool combo_runs(const struct perf_opts *o, enum perf_dtype dt, enum perf_op op)
{
	const char *why = perf_g_test->unsupported ? perf_g_test->unsupported(dt, op) : NULL;
	bool single = o->dtype >= 0 && (o->op >= 0 || !perf_coll_info(perf_g_test->coll)->has_op);

	if (!why)
		return true;
	if (single)
		perf_usage_error("-d %s -o %s: %s", perf_dtype_name(dt), perf_op_name(op), why);
	if (perf_g_rank == 0)
		printf("# skipping %s %s: %s\n", perf_dtype_name(dt), perf_op_name(op), why);
	return false;
}

int perf_main(int argc, char **argv, const struct perf_test *test)
{
	struct perf_opts o;
	struct sweep s = {.o = &o, .ci = perf_coll_info(test->coll)};
	int d0, d1, op0, op1;
	size_t maxcount;

	perf_g_test = test;
	perf_g_prog = test->prog;
	perf_parse_args(argc, argv, &o);
	d0 = o.dtype < 0 ? 0 : o.dtype;
	d1 = o.dtype < 0 ? PERF_DTYPE_COUNT - 1 : o.dtype;
	op0 = o.op < 0 ? 0 : o.op;
	op1 = o.op < 0 ? PERF_OP_COUNT - 1 : o.op;
	if (!s.ci->has_op)
		op0 = op1 = PERF_SUM; /* no op; one pass per datatype */
	/* refuse an unsupported single choice before starting any ranks */
	if (o.dtype >= 0 && (o.op >= 0 || !s.ci->has_op) && test->unsupported &&
	    test->unsupported(o.dtype, op0))
		perf_usage_error("-d %s -o %s: %s", perf_dtype_name(o.dtype), perf_op_name(op0),
				 test->unsupported(o.dtype, op0));

	perf_rt_init(&o);
	if (s.ci->has_root && o.root >= perf_g_nranks)
		perf_usage_error("-r %d: there are only %d ranks", o.root, perf_g_nranks);
	if (perf_g_rank == 0)
		setvbuf(stdout, NULL, _IOLBF, 0);
	/* elements per rank and block at the largest size, for every dtype */
	maxcount = o.maxbytes / (perf_send_blocks() > perf_recv_blocks() ? perf_send_blocks()
									 : perf_recv_blocks());
	perf_buf_alloc(&s.send, maxcount * perf_send_blocks());
	perf_buf_alloc(&s.recv, maxcount * perf_recv_blocks());
	print_header(&o);
	for (int d = d0; d <= d1; d++)
		for (int op = op0; op <= op1; op++)
			if (combo_runs(&o, d, op))
				sweep_one(&s, d, op);
	if (perf_g_rank == 0) {
		printf("# Out of bounds values : %lld %s\n", (long long)s.oob,
		       s.oob ? "FAILED" : "OK");
		printf("# Avg bus bandwidth    : %g \n", s.bw_count ? s.bw_sum / s.bw_count : 0.0);
		printf("#\n");
		if (s.wrong)
			printf("# %lld wrong elements: FAILED\n", (long long)s.wrong);
		fflush(stdout);
	}
	perf_buf_free(&s.send);
	perf_buf_free(&s.recv);
	perf_rt_finalize();
	return s.wrong || s.oob ? 1 : 0;
}
