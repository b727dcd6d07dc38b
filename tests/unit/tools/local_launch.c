/*
 * local_launch.c — the local launcher (tools/launch/): ranks get the
 * unique id through the pipe or their environment and form one
 * communicator; a failed rank's survivors get the grace period, then
 * SIGTERM, then SIGKILL; the deadline kills hung ranks; skipped ranks are
 * not started; rank 0 dying before it sends the id fails the others at
 * once; ranks die with a killed launcher; only the launcher's own children
 * are reaped; programs run with the environment variables set.
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/launch/local_launch.h"
#include "weft.h"

/* Gone, or a zombie nobody has reaped yet (the container's init may not). */
static bool dead(pid_t pid)
{
	char path[64], stat[256];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return true;
	size_t n = fread(stat, 1, sizeof(stat) - 1, f);
	fclose(f);
	stat[n] = '\0';
	const char *paren = strrchr(stat, ')');
	return !paren || paren[1] == '\0' || paren[2] == 'Z' || paren[2] == 'X';
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A rank: join the communicator, check rank and size, one allreduce. */
static int join_and_sum(weft_comm_t comm, int rank, int nranks)
{
	int r = -1, n = -1;
	int32_t v = rank + 1, want = nranks * (nranks + 1) / 2;
	weft_comm_rank(comm, &r);
	weft_comm_size(comm, &n);
	if (r != rank || n != nranks) {
		fprintf(stderr, "rank %d: comm says %d of %d\n", rank, r, n);
		return 3;
	}
	if (weft_allreduce(WEFT_IN_PLACE, &v, 1, WEFT_INT32, WEFT_SUM, comm) != WEFT_SUCCESS ||
	    v != want) {
		fprintf(stderr, "rank %d: allreduce gave %d, want %d\n", rank, v, want);
		return 4;
	}
	weft_comm_destroy(comm);
	return 0;
}

static int rank_with_id(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	weft_comm_t comm;
	if (weft_comm_init_rank(&comm, nranks, *id, rank, NULL) != WEFT_SUCCESS) {
		fprintf(stderr, "rank %d: %s\n", rank, weft_init_last_error());
		return 2;
	}
	return join_and_sum(comm, rank, nranks);
}

START_TEST(pipe_ids_make_one_comm)
{
	struct weft_local_job job = {.nranks = 4, .name = "test", .grace_s = 5};
	ck_assert_int_eq(weft_local_run(&job, rank_with_id, NULL), 0);
}
END_TEST

static int rank_from_env(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	char want[16];
	snprintf(want, sizeof(want), "%d", rank);
	const char *local = getenv("WEFT_LOCAL_RANK");
	if (!local || strcmp(local, want) != 0 || !getenv("WEFT_ROOT") || !getenv("WEFT_SECRET"))
		return 5;
	weft_comm_t comm;
	if (weft_comm_init_env(&comm, NULL) != WEFT_SUCCESS) {
		fprintf(stderr, "rank %d: %s\n", rank, weft_init_last_error());
		return 2;
	}
	return join_and_sum(comm, rank, nranks);
}

START_TEST(env_ids_make_one_comm)
{
	struct weft_local_job job = {
	    .nranks = 3, .id = WEFT_LOCAL_ID_ENV, .name = "test", .grace_s = 5};
	ck_assert_int_eq(weft_local_run(&job, rank_from_env, NULL), 0);
}
END_TEST

/* Rank 1 fails at once; the others wait forever (rank 2 even ignores
 * SIGTERM), so only the launcher can end them. */
static int one_fails(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	if (rank == 1)
		return 7;
	if (rank == 2)
		signal(SIGTERM, SIG_IGN);
	for (;;)
		pause();
}

START_TEST(grace_then_term_then_kill)
{
	struct weft_local_job job = {
	    .nranks = 4, .id = WEFT_LOCAL_ID_NONE, .name = "test", .grace_s = 0.5};
	int rank;
	char why[256];
	double t0 = now();
	ck_assert_int_eq(weft_local_start(&job, &rank, why, sizeof(why)), WEFT_SUCCESS);
	if (rank >= 0)
		_exit(one_fails(rank, job.nranks, NULL, NULL));
	ck_assert_int_eq(weft_local_wait(&job), 4);
	double took = now() - t0;
	ck_assert_msg(took > 0.4 && took < 5.0, "took %.1f s", took);
	ck_assert_int_eq(job.ranks[1].end, WEFT_LOCAL_EXITED);
	ck_assert_int_eq(job.ranks[1].code, 7);
	ck_assert(!job.ranks[1].stopped);
	for (int r = 0; r < 4; r += (r == 0) ? 2 : 1) {
		ck_assert_int_eq(job.ranks[r].end, WEFT_LOCAL_SIGNALED);
		ck_assert(job.ranks[r].stopped);
		ck_assert_int_eq(job.ranks[r].code, r == 2 ? SIGKILL : SIGTERM);
	}
	/* Rank 2 took SIGKILL, 2 s after SIGTERM. */
	ck_assert_msg(job.ranks[2].seconds > 2.0, "rank 2 ended after %.1f s",
		      job.ranks[2].seconds);
	ck_assert_msg(job.ranks[0].seconds < 2.0, "rank 0 ended after %.1f s",
		      job.ranks[0].seconds);
	weft_local_free(&job);
}
END_TEST

static int sleeper(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	if (rank == 0)
		return 0;
	for (;;)
		pause();
}

START_TEST(deadline_kills_hung)
{
	/* No grace period (the harness's way): only the deadline ends them. */
	struct weft_local_job job = {
	    .nranks = 3, .id = WEFT_LOCAL_ID_NONE, .grace_s = -1, .timeout_s = 1.0};
	int rank;
	char why[256];
	double t0 = now();
	ck_assert_int_eq(weft_local_start(&job, &rank, why, sizeof(why)), WEFT_SUCCESS);
	if (rank >= 0)
		_exit(sleeper(rank, job.nranks, NULL, NULL));
	ck_assert_int_eq(weft_local_wait(&job), 2);
	double took = now() - t0;
	ck_assert_msg(took >= 1.0 && took < 3.0, "took %.1f s", took);
	ck_assert_int_eq(job.ranks[0].end, WEFT_LOCAL_EXITED);
	ck_assert_int_eq(job.ranks[1].end, WEFT_LOCAL_HUNG);
	ck_assert_int_eq(job.ranks[2].end, WEFT_LOCAL_HUNG);
	ck_assert(dead(job.ranks[1].pid));
	weft_local_free(&job);
}
END_TEST

/* Skipped ranks are not started, and the started ones still get the id. */
static int read_id_only(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	static const char zero[sizeof(weft_unique_id_t)];
	return memcmp(id, zero, sizeof(zero)) == 0 ? 9 : 0;
}

START_TEST(skipped_ranks)
{
	struct weft_local_job job = {.nranks = 5, .name = "test", .grace_s = 5, .skip = 1u << 2};
	int rank;
	char why[256];
	weft_unique_id_t id;
	ck_assert_int_eq(weft_local_start(&job, &rank, why, sizeof(why)), WEFT_SUCCESS);
	if (rank >= 0) {
		if (weft_local_get_id(&job, rank, &id, why, sizeof(why)) != WEFT_SUCCESS)
			_exit(8);
		_exit(read_id_only(rank, job.nranks, &id, NULL));
	}
	ck_assert_int_eq(weft_local_wait(&job), 0);
	ck_assert_int_eq(job.ranks[2].end, WEFT_LOCAL_NOT_STARTED);
	ck_assert_int_eq(job.ranks[2].pid, 0);
	for (int r = 0; r < 5; r++)
		if (r != 2)
			ck_assert_int_eq(job.ranks[r].end, WEFT_LOCAL_EXITED);
	weft_local_free(&job);
}
END_TEST

/* Rank 0 dies before it sends the id: the others fail at once, they do
 * not wait for it. */
START_TEST(no_id_from_rank0)
{
	struct weft_local_job job = {.nranks = 3, .grace_s = 5};
	int rank;
	char why[256];
	weft_unique_id_t id;
	double t0 = now();
	ck_assert_int_eq(weft_local_start(&job, &rank, why, sizeof(why)), WEFT_SUCCESS);
	if (rank == 0)
		_exit(6);
	if (rank > 0) {
		weft_status_t st = weft_local_get_id(&job, rank, &id, why, sizeof(why));
		_exit(st != WEFT_SUCCESS && strstr(why, "no unique id from rank 0") ? 0 : 1);
	}
	ck_assert_int_eq(weft_local_wait(&job), 1);
	ck_assert_int_eq(job.ranks[0].code, 6);
	ck_assert_int_eq(job.ranks[1].end, WEFT_LOCAL_EXITED);
	ck_assert_int_eq(job.ranks[1].code, 0);
	ck_assert_int_eq(job.ranks[2].code, 0);
	ck_assert_msg(now() - t0 < 3.0, "took %.1f s", now() - t0);
	weft_local_free(&job);
}
END_TEST

/* A launcher killed with SIGKILL takes its ranks with it. */
START_TEST(ranks_die_with_launcher)
{
	int fds[2];
	ck_assert_int_eq(pipe(fds), 0);
	pid_t launcher = fork();
	ck_assert_int_ge(launcher, 0);
	if (launcher == 0) {
		struct weft_local_job job = {.nranks = 2, .id = WEFT_LOCAL_ID_NONE};
		int rank;
		char why[256];
		if (weft_local_start(&job, &rank, why, sizeof(why)) != WEFT_SUCCESS)
			_exit(1);
		if (rank >= 0) {
			pid_t me = getpid();
			if (write(fds[1], &me, sizeof(me)) != (ssize_t)sizeof(me))
				_exit(1);
			for (;;)
				pause();
		}
		weft_local_wait(&job);
		_exit(0);
	}
	close(fds[1]);
	pid_t ranks[2];
	ck_assert_int_eq(read(fds[0], &ranks[0], sizeof(pid_t)), (ssize_t)sizeof(pid_t));
	ck_assert_int_eq(read(fds[0], &ranks[1], sizeof(pid_t)), (ssize_t)sizeof(pid_t));
	close(fds[0]);
	kill(launcher, SIGKILL);
	waitpid(launcher, NULL, 0);
	double t0 = now();
	while (!(dead(ranks[0]) && dead(ranks[1])) && now() - t0 < 5.0)
		usleep(10000);
	ck_assert_msg(dead(ranks[0]) && dead(ranks[1]), "ranks outlived their launcher by 5 s");
}
END_TEST

/* The launcher reaps its own ranks only: a child of the caller survives. */
START_TEST(foreign_children_untouched)
{
	pid_t mine = fork();
	ck_assert_int_ge(mine, 0);
	if (mine == 0)
		_exit(42);
	usleep(50000); /* it has exited: a waitpid(-1) would reap it now */
	struct weft_local_job job = {.nranks = 2, .id = WEFT_LOCAL_ID_NONE, .grace_s = 5};
	int rank;
	char why[256];
	ck_assert_int_eq(weft_local_start(&job, &rank, why, sizeof(why)), WEFT_SUCCESS);
	if (rank >= 0)
		_exit(0);
	ck_assert_int_eq(weft_local_wait(&job), 0);
	weft_local_free(&job);
	int status = 0;
	ck_assert_int_eq(waitpid(mine, &status, 0), mine);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 42);
	/* SIGCHLD is unblocked again. */
	sigset_t cur;
	sigprocmask(SIG_BLOCK, NULL, &cur);
	ck_assert(!sigismember(&cur, SIGCHLD));
}
END_TEST

START_TEST(exec_programs)
{
	char *ok[] = {"/bin/sh", "-c",
		      "test \"$WEFT_NRANKS\" = 3 && test \"$WEFT_LOCAL_SIZE\" = 3 && "
		      "test -n \"$WEFT_ROOT\" && test -n \"$WEFT_SECRET\" && "
		      "test \"$WEFT_RANK\" = \"$WEFT_LOCAL_RANK\"",
		      NULL};
	struct weft_local_job job = {.nranks = 3, .name = "test", .grace_s = 5};
	ck_assert_int_eq(weft_local_exec(&job, ok), 0);

	char *bad[] = {"/bin/sh", "-c", "exit $((WEFT_RANK == 1 ? 3 : 0))", NULL};
	struct weft_local_job job2 = {.nranks = 2, .name = "test", .grace_s = 5};
	ck_assert_int_eq(weft_local_exec(&job2, bad), 1);

	char *missing[] = {"/nonexistent/program", NULL};
	struct weft_local_job job3 = {.nranks = 1, .name = "test", .grace_s = 5};
	ck_assert_int_eq(weft_local_exec(&job3, missing), 1);
}
END_TEST

START_TEST(bad_job)
{
	struct weft_local_job job = {.nranks = 0};
	int rank = 5;
	char why[256];
	ck_assert_int_eq(weft_local_start(&job, &rank, why, sizeof(why)), WEFT_ERR_SYSTEM);
	ck_assert_int_eq(rank, -1);
	ck_assert_msg(strstr(why, "0 ranks"), "%s", why);
	weft_local_free(&job);
}
END_TEST

static Suite *local_launch_suite(void)
{
	Suite *s = suite_create("local_launch");
	TCase *tc = tcase_create("launcher");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, pipe_ids_make_one_comm);
	tcase_add_test(tc, env_ids_make_one_comm);
	tcase_add_test(tc, grace_then_term_then_kill);
	tcase_add_test(tc, deadline_kills_hung);
	tcase_add_test(tc, skipped_ranks);
	tcase_add_test(tc, no_id_from_rank0);
	tcase_add_test(tc, ranks_die_with_launcher);
	tcase_add_test(tc, foreign_children_untouched);
	tcase_add_test(tc, exec_programs);
	tcase_add_test(tc, bad_job);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(local_launch_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
