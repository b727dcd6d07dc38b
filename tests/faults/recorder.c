/*
 * recorder.c — the flight recorder (core/trace.h): what it keeps, when it
 * writes itself out, and what weft-topo --trace makes of a job's files.
 *
 *  - a timeout: 3 ranks, WEFT_TIMEOUT=2; rank 2 skips allreduce seq 3 and
 *    stays alive outside Weft. Ranks 0 and 1 time out and write their
 *    recorder to WEFT_TRACE_DIR (reason "timeout"): seq 3 failed, waiting
 *    for a peer, a "timeout" event; rank 2 writes its own with
 *    weft_comm_dump (3 collectives called, not 4). weft-topo --trace on the
 *    three files says that rank 2 never posted allreduce seq 3 and that
 *    every waiter waits on rank 2;
 *  - SIGUSR2 with WEFT_TRACE_SIGNAL=1: the file appears and the job goes
 *    on, every allreduce exact;
 *  - a fatal signal: rank 1 raises SIGSEGV after 5 allreduces: it dies of
 *    it, its file says "signal SIGSEGV" with 5 operations done, and rank 0,
 *    whose next allreduce fails, writes its own with a "failure" event;
 *  - an abort: weft_comm_abort writes the file (reason "abort");
 *  - weft_comm_dump: to a path, the last operations in order with their
 *    arguments (send/recv with their peer); NULL without WEFT_TRACE_DIR and
 *    an unwritable path are errors that leave the communicator working;
 *    WEFT_TRACE_BUFFER=4 keeps the last 4 and 0 none; bad values of
 *    WEFT_TRACE_BUFFER and WEFT_TRACE_SIGNAL fail init naming them.
 */
#include <check.h>
#include <dirent.h>
#include <jansson.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define COUNT 64

struct shared {
	_Atomic int done; /* ranks whose stuck call returned */
};

static char dir[256];
static char env_dir[300];

static void fresh_dir(void)
{
	snprintf(dir, sizeof(dir), "/tmp/weft-recorder-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(env_dir, sizeof(env_dir), "WEFT_TRACE_DIR=%s", dir);
}

static void remove_dir(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.') {
			char p[600];
			snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
			unlink(p);
		}
	if (d)
		closedir(d);
	rmdir(dir);
}

/* The dump of rank @p rank in dir (NULL: none), parsed. */
static json_t *dump_of(int rank, char *path, size_t len)
{
	char want[32];
	snprintf(want, sizeof(want), "-r%d-p", rank);
	DIR *d = opendir(dir);
	struct dirent *e;
	json_t *doc = NULL;
	while (d && !doc && (e = readdir(d)))
		if (strncmp(e->d_name, "weft-trace-", 11) == 0 && strstr(e->d_name, want) &&
		    strstr(e->d_name, ".json") && !strstr(e->d_name, ".partial")) {
			snprintf(path, len, "%s/%s", dir, e->d_name);
			doc = json_load_file(path, 0, NULL);
		}
	if (d)
		closedir(d);
	return doc;
}

static const char *str(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "";
}

static long long num(const json_t *o, const char *k)
{
	return json_integer_value(json_object_get(o, k));
}

/* A finished operation's times are all there and in order (its start may
 * be read on the precise clock, its call and end on the coarse one), and
 * what it waited on is a rank or none. */
static void check_done_op(const json_t *op, int nranks)
{
	const char *keys[] = {"posted_us", "started_us", "finished_us"};
	for (int k = 0; k < 3; k++)
		ck_assert_msg(json_is_integer(json_object_get(op, keys[k])), "op %lld: %s is %s",
			      num(op, "id"), keys[k],
			      json_is_null(json_object_get(op, keys[k])) ? "null" : "not a number");
	ck_assert_msg(num(op, "posted_us") <= num(op, "started_us") &&
			  num(op, "started_us") <= num(op, "finished_us"),
		      "op %lld's times: %lld %lld %lld", num(op, "id"), num(op, "posted_us"),
		      num(op, "started_us"), num(op, "finished_us"));
	ck_assert_str_eq(str(op, "status"), weft_status_string(WEFT_SUCCESS));
	long long peer = num(op, "waiting_for");
	ck_assert_msg(peer >= -1 && peer < nranks, "op %lld waits on %lld", num(op, "id"), peer);
	ck_assert_msg(peer >= 0 || strcmp(str(op, "wait"), "") == 0, "op %lld: wait '%s'",
		      num(op, "id"), str(op, "wait"));
}

/* The recorded collective number @p call, NULL if absent. */
static const json_t *op_of(const json_t *doc, long long call, const char *coll)
{
	size_t i;
	const json_t *op;
	json_array_foreach(json_object_get(doc, "ops"), i, op)
	{
		if (num(op, "call") == call && strcmp(str(op, "coll"), coll) == 0)
			return op;
	}
	return NULL;
}

static bool has_event(const json_t *doc, const char *kind)
{
	size_t i;
	const json_t *e;
	json_array_foreach(json_object_get(doc, "events"), i, e)
	{
		if (strcmp(str(e, "kind"), kind) == 0)
			return true;
	}
	return false;
}

static int allreduces(weft_comm_t comm, int n)
{
	float x[COUNT];
	for (int i = 0; i < n; i++) {
		for (int k = 0; k < COUNT; k++)
			x[k] = 1.0f;
		weft_status_t st =
		    weft_allreduce(WEFT_IN_PLACE, x, COUNT, WEFT_FLOAT32, WEFT_SUM, comm);
		if (st != WEFT_SUCCESS)
			return harness_fail_status(comm, st, "allreduce %d", i);
		int nranks;
		weft_comm_size(comm, &nranks);
		if (x[COUNT - 1] != (float)nranks)
			return harness_fail("allreduce %d: %g, not %d", i, (double)x[COUNT - 1],
					    nranks);
	}
	return 0;
}

/* ---- a timeout, and weft-topo --trace on the three files ---- */

static int timeout_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	struct shared *sh = harness_shared();
	if (allreduces(comm, 3))
		return 1;
	if (rank == 2) { /* skips seq 3: alive outside Weft until the others gave up */
		for (int i = 0; i < 3000 && atomic_load(&sh->done) < 2; i++)
			usleep(10000);
		weft_status_t st = weft_comm_dump(comm, NULL);
		return st == WEFT_SUCCESS ? 0 : harness_fail_status(comm, st, "weft_comm_dump");
	}
	float x[COUNT] = {0};
	weft_status_t st = weft_allreduce(WEFT_IN_PLACE, x, COUNT, WEFT_FLOAT32, WEFT_SUM, comm);
	atomic_fetch_add(&sh->done, 1);
	return st == WEFT_ERR_TIMEOUT ? 0 : harness_fail_status(comm, st, "the stuck allreduce");
}

/* weft-topo --trace on every file in dir: its text. */
static char *merge(const char *format)
{
	static char out[16384];
	char cmd[1024];
	const char *build = getenv("WEFT_BUILD") ? getenv("WEFT_BUILD") : "build";
	snprintf(cmd, sizeof(cmd), "%s/weft-topo --trace %s %s/weft-trace-*.json 2>&1", build,
		 format, dir);
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	size_t n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	int rc = pclose(p);
	ck_assert_msg(rc == 0, "%s exited %d:\n%s", cmd, rc, out);
	return out;
}

START_TEST(timeout_dumps)
{
	fresh_dir();
	const char *const env[] = {"WEFT_TIMEOUT=2", env_dir, NULL};
	struct harness_job job = {.nranks = 3, .env = env, .body = timeout_body, .timeout_s = 60};
	struct harness_result res;
	harness_run_job(&job, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
	char path[600];
	for (int r = 0; r < 2; r++) {
		json_t *d = dump_of(r, path, sizeof(path));
		ck_assert_msg(d, "rank %d wrote no dump in %s", r, dir);
		ck_assert_str_eq(str(d, "reason"), "timeout");
		ck_assert_int_eq(num(d, "rank"), r);
		ck_assert_int_eq(num(d, "nranks"), 3);
		ck_assert_int_eq(num(d, "calls"), 4);
		const json_t *op = op_of(d, 3, "allreduce");
		ck_assert_msg(op, "rank %d: allreduce seq 3 not recorded (%s)", r, path);
		ck_assert_str_eq(str(op, "state"), "failed");
		ck_assert_str_eq(str(op, "dtype"), "float");
		ck_assert_int_eq(num(op, "count"), COUNT);
		ck_assert_msg(num(op, "waiting_for") >= 0 && num(op, "waiting_for") != r,
			      "rank %d waits on %lld", r, num(op, "waiting_for"));
		ck_assert_str_eq(str(op_of(d, 2, "allreduce"), "state"), "done");
		ck_assert_msg(has_event(d, "timeout"), "rank %d: no timeout event (%s)", r, path);
		json_decref(d);
	}
	json_t *d = dump_of(2, path, sizeof(path));
	ck_assert_msg(d, "rank 2 wrote no dump");
	ck_assert_str_eq(str(d, "reason"), "weft_comm_dump");
	ck_assert_int_eq(num(d, "calls"), 3);
	ck_assert_ptr_null(op_of(d, 3, "allreduce"));
	json_decref(d);
	char *text = merge("");
	ck_assert_msg(strstr(text, "allreduce seq 3 (float sum, 64 elements) is the first "
				   "operation not every rank posted: ranks 0,1 posted it; rank 2 "
				   "never did"),
		      "weft-topo --trace:\n%s", text);
	ck_assert_msg(strstr(text, "every waiter waits, directly or through others, on rank 2"),
		      "weft-topo --trace:\n%s", text);
	text = merge("--format json");
	ck_assert_msg(strstr(text, "\"never_posted_by\": [2]") &&
			  strstr(text, "\"chains_end_at\": [2]"),
		      "weft-topo --trace --format json:\n%s", text);
	remove_dir();
}
END_TEST

/* ---- SIGUSR2 ---- */

static int usr2_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	if (allreduces(comm, 4))
		return 1;
	if (rank == 0)
		raise(SIGUSR2);
	return allreduces(comm, 4);
}

START_TEST(sigusr2)
{
	fresh_dir();
	const char *const env[] = {"WEFT_TRACE_SIGNAL=1", env_dir, NULL};
	struct harness_result res;
	harness_run(2, env, usr2_body, NULL, 60, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
	char path[600];
	json_t *d = dump_of(0, path, sizeof(path));
	ck_assert_msg(d, "SIGUSR2 wrote no dump in %s", dir);
	ck_assert_str_eq(str(d, "reason"), "signal SIGUSR2");
	ck_assert_int_eq(num(d, "calls"), 4);
	ck_assert_str_eq(str(op_of(d, 3, "allreduce"), "state"), "done");
	json_decref(d);
	ck_assert_ptr_null(dump_of(1, path, sizeof(path)));
	remove_dir();
}
END_TEST

/* ---- a fatal signal ---- */

static int segv_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	if (allreduces(comm, 5))
		return 1;
	if (rank == 1)
		raise(SIGSEGV);
	float x[COUNT] = {0};
	weft_status_t st = weft_allreduce(WEFT_IN_PLACE, x, COUNT, WEFT_FLOAT32, WEFT_SUM, comm);
	return st != WEFT_SUCCESS ? 0 : harness_fail("an allreduce without rank 1 succeeded");
}

START_TEST(fatal_signal)
{
	fresh_dir();
	const char *const env[] = {"WEFT_TIMEOUT=10", env_dir, NULL};
	struct harness_result res;
	harness_run(2, env, segv_body, NULL, 60, &res);
	ck_assert_msg(res.rank[1].end == HARNESS_SIGNALED && res.rank[1].code == SIGSEGV,
		      "rank 1 did not die of SIGSEGV: %s", res.summary);
	ck_assert_msg(res.rank[0].end == HARNESS_EXITED && res.rank[0].code == 0, "%s",
		      res.summary);
	char path[600];
	json_t *d = dump_of(1, path, sizeof(path));
	ck_assert_msg(d, "SIGSEGV wrote no dump in %s", dir);
	ck_assert_str_eq(str(d, "reason"), "signal SIGSEGV");
	ck_assert_int_eq(json_array_size(json_object_get(d, "ops")), 5);
	json_decref(d);
	d = dump_of(0, path, sizeof(path));
	ck_assert_msg(d, "rank 0 wrote no dump when its peer died");
	ck_assert_msg(has_event(d, "failure") || has_event(d, "timeout"),
		      "rank 0's dump has no failure event (%s)", path);
	json_decref(d);
	remove_dir();
}
END_TEST

/* ---- an abort ---- */

static int abort_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	if (allreduces(comm, 2))
		return 1;
	if (rank == 0)
		weft_comm_abort(comm);
	return 0;
}

START_TEST(abort_dumps)
{
	fresh_dir();
	const char *const env[] = {env_dir, NULL};
	struct harness_result res;
	harness_run(2, env, abort_body, NULL, 60, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
	char path[600];
	json_t *d = dump_of(0, path, sizeof(path));
	ck_assert_msg(d, "weft_comm_abort wrote no dump");
	ck_assert_str_eq(str(d, "reason"), "abort");
	ck_assert_msg(has_event(d, "abort"), "no abort event (%s)", path);
	json_decref(d);
	remove_dir();
}
END_TEST

/* ---- weft_comm_dump ---- */

static int dump_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const char *mode = arg;
	char path[600], want[64];
	if (allreduces(comm, 6))
		return 1;
	int peer = 1 - rank, v = rank, got = -1;
	weft_group_start();
	weft_send(&v, 1, WEFT_INT32, peer, comm);
	weft_recv(&got, 1, WEFT_INT32, peer, comm);
	weft_status_t st = weft_group_end();
	if (st != WEFT_SUCCESS || got != peer)
		return harness_fail_status(comm, st, "send/recv: got %d", got);
	float b[3] = {1, 2, 3};
	st = weft_broadcast(WEFT_IN_PLACE, b, 3, WEFT_FLOAT32, 1, comm);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "broadcast");
	st = weft_comm_dump(comm, NULL); /* no WEFT_TRACE_DIR */
	if (st != WEFT_ERR_INVALID_ARG || !strstr(weft_comm_last_error(comm), "WEFT_TRACE_DIR"))
		return harness_fail_status(comm, st, "weft_comm_dump(NULL) without a directory");
	st = weft_comm_dump(comm, "/nonexistent-dir/x.json");
	if (st != WEFT_ERR_SYSTEM || !strstr(weft_comm_last_error(comm), "/nonexistent-dir"))
		return harness_fail_status(comm, st, "weft_comm_dump to a missing directory");
	if (allreduces(comm, 1)) /* the communicator still works */
		return 1;
	snprintf(path, sizeof(path), "%s/%s.%d.json", dir, mode, rank);
	st = weft_comm_dump(comm, path);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "weft_comm_dump(%s)", path);
	snprintf(want, sizeof(want), "\"rank\":%d", rank);
	return harness_count_in_file(path, want) == 1 ? 0 : harness_fail("%s: no %s", path, want);
}

START_TEST(dump_api)
{
	fresh_dir();
	struct harness_result res;
	harness_run(2, NULL, dump_body, "all", 60, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
	char path[600];
	snprintf(path, sizeof(path), "%s/all.1.json", dir);
	json_t *d = json_load_file(path, 0, NULL);
	ck_assert_msg(d, "%s is not JSON", path);
	ck_assert_str_eq(str(d, "reason"), "weft_comm_dump");
	const json_t *ops = json_object_get(d, "ops");
	/* 6 allreduces, send, recv, broadcast, allreduce: in call order */
	static const char *const colls[] = {"allreduce", "allreduce", "allreduce", "allreduce",
					    "allreduce", "allreduce", "send",	   "recv",
					    "broadcast", "allreduce"};
	ck_assert_int_eq(json_array_size(ops), 10);
	for (size_t i = 0; i < 10; i++) {
		const json_t *op = json_array_get(ops, i);
		ck_assert_str_eq(str(op, "coll"), colls[i]);
		ck_assert_str_eq(str(op, "state"), "done");
		ck_assert_int_eq(num(op, "id"), (long long)i + 1);
		check_done_op(op, 2);
		ck_assert_int_eq(num(op, "group"), i == 6 || i == 7);
	}
	const json_t *send = json_array_get(ops, 6), *bc = json_array_get(ops, 8);
	ck_assert_int_eq(num(send, "root"), 0); /* rank 1 sent to rank 0 */
	ck_assert_int_eq(num(send, "group"), 1);
	ck_assert_int_eq(num(bc, "root"), 1);
	ck_assert_int_eq(num(bc, "call"), 6);
	ck_assert_int_eq(num(bc, "count"), 3);
	ck_assert_int_eq(num(json_array_get(ops, 9), "call"), 7);
	json_decref(d);
	remove_dir();
}
END_TEST

START_TEST(buffer_size)
{
	static const char *const four[] = {"WEFT_TRACE_BUFFER=4", NULL};
	static const char *const none[] = {"WEFT_TRACE_BUFFER=0", NULL};
	fresh_dir();
	struct harness_result res;
	harness_run(2, four, dump_body, "four", 60, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
	harness_run(2, none, dump_body, "none", 60, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
	char path[600];
	snprintf(path, sizeof(path), "%s/four.0.json", dir);
	json_t *d = json_load_file(path, 0, NULL);
	ck_assert_msg(d, "%s", path);
	const json_t *ops = json_object_get(d, "ops");
	ck_assert_int_eq(json_array_size(ops), 4);
	ck_assert_int_eq(num(json_array_get(ops, 0), "id"), 7); /* the last 4 of 10 */
	ck_assert_int_eq(num(d, "buffer"), 4);
	for (size_t i = 0; i < 4; i++) { /* records reused from ops 3-6 */
		check_done_op(json_array_get(ops, i), 2);
		ck_assert_int_eq(num(json_array_get(ops, i), "group"), i < 2);
	}
	json_decref(d);
	snprintf(path, sizeof(path), "%s/none.0.json", dir);
	d = json_load_file(path, 0, NULL);
	ck_assert_msg(d, "%s", path);
	ck_assert_int_eq(json_array_size(json_object_get(d, "ops")), 0);
	json_decref(d);
	remove_dir();
}
END_TEST

static int bad_init(int rank, int nranks, weft_status_t status, const char *message, double seconds,
		    void *arg)
{
	const char *want = arg;
	return status == WEFT_ERR_INVALID_ARG && strstr(message, want)
		   ? 0
		   : harness_fail("init: %s (%s), expected %s", message, weft_status_string(status),
				  want);
}

START_TEST(bad_settings)
{
	static const char *const names[] = {"WEFT_TRACE_BUFFER=lots", "WEFT_TRACE_BUFFER=99999999",
					    "WEFT_TRACE_SIGNAL=2"};
	for (int i = 0; i < 3; i++) {
		const char *const env[] = {names[i], "WEFT_BOOTSTRAP_TIMEOUT=3", NULL};
		struct harness_job job = {.nranks = 2,
					  .env = env,
					  .timeout_s = 30,
					  .init_failed = bad_init,
					  .arg = (void *)names[i]};
		struct harness_result res;
		harness_run_job(&job, &res);
		ck_assert_msg(res.ok, "%s: %s", names[i], res.summary);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("recorder");
	TCase *tc = tcase_create("recorder");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, timeout_dumps);
	tcase_add_test(tc, sigusr2);
	tcase_add_test(tc, fatal_signal);
	tcase_add_test(tc, abort_dumps);
	tcase_add_test(tc, dump_api);
	tcase_add_test(tc, buffer_size);
	tcase_add_test(tc, bad_settings);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
