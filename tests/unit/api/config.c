/*
 * config.c — weft_config_t.progress_thread and the config's size.
 *
 * One-rank communicators created in the test process:
 *  - progress_thread 1 gives the communicator a progress thread even with
 *    WEFT_PROGRESS_THREAD=0, and a non-blocking AllReduce then completes
 *    (its callback on another thread) while the caller only sleeps;
 *  - -1 gives none even with WEFT_PROGRESS_THREAD=1; 0 follows the setting;
 *  - a split child has a thread exactly when its parent has one, whatever
 *    the setting says;
 *  - a config of the size before progress_thread existed is accepted (and
 *    reads as 0); a larger size, or progress_thread 2, is an error naming
 *    the field, from weft_comm_init_rank and weft_comm_init_env alike.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/comm.h"
#include "harness.h"

static weft_status_t solo(const weft_config_t *config, weft_comm_t *comm)
{
	weft_unique_id_t id;
	weft_status_t st = weft_get_unique_id(&id);
	ck_assert_msg(st == WEFT_SUCCESS, "weft_get_unique_id: %s", weft_init_last_error());
	return weft_comm_init_rank(comm, 1, id, 0, config);
}

static weft_comm_t solo_ok(int mode, const char *setting)
{
	if (setting)
		setenv("WEFT_PROGRESS_THREAD", setting, 1);
	else
		unsetenv("WEFT_PROGRESS_THREAD");
	weft_config_t config = WEFT_CONFIG_INIT;
	config.progress_thread = mode;
	weft_comm_t comm = NULL;
	weft_status_t st = solo(&config, &comm);
	ck_assert_msg(st == WEFT_SUCCESS, "init (progress_thread %d, setting %s): %s", mode,
		      setting ? setting : "unset", weft_init_last_error());
	return comm;
}

struct seen {
	_Atomic int calls;
	_Atomic bool registering; /* inside weft_request_on_complete */
	bool early;		  /* ran there: the operation had already finished */
	pthread_t thread;
};

static void on_done(void *arg, weft_status_t status)
{
	struct seen *s = arg;
	s->thread = pthread_self();
	s->early = atomic_load(&s->registering);
	atomic_fetch_add(&s->calls, 1);
}

/* The progress thread finishes an operation and runs its callback. An
 * operation that finished before its callback was registered runs it on
 * the caller, as documented: 16 MiB out of place makes that rare, and an
 * attempt where it happens is repeated (up to 5). */
START_TEST(mode_on)
{
	weft_comm_t comm = solo_ok(1, "0");
	ck_assert_msg(comm->pt != NULL, "progress_thread 1: no thread");
	size_t n = 4u << 20;
	float *x = calloc(n, sizeof(float)), *y = calloc(n, sizeof(float));
	ck_assert_ptr_nonnull(x);
	ck_assert_ptr_nonnull(y);
	bool seen_thread = false;
	for (int attempt = 0; attempt < 5 && !seen_thread; attempt++) {
		weft_request_t req;
		struct seen s = {0};
		ck_assert_int_eq(weft_iallreduce(x, y, n, WEFT_FLOAT32, WEFT_SUM, comm, &req),
				 WEFT_SUCCESS);
		atomic_store(&s.registering, true);
		ck_assert_int_eq(weft_request_on_complete(req, on_done, &s), WEFT_SUCCESS);
		atomic_store(&s.registering, false);
		for (int i = 0; i < 2000 && !atomic_load(&s.calls); i++)
			usleep(1000);
		ck_assert_msg(atomic_load(&s.calls) == 1,
			      "the thread did not complete the operation");
		ck_assert_msg(s.early || !pthread_equal(s.thread, pthread_self()),
			      "callback of an unfinished operation ran on the caller");
		seen_thread = !s.early;
		ck_assert_int_eq(weft_wait(&req), WEFT_SUCCESS);
	}
	ck_assert_msg(seen_thread, "5 operations finished before their callbacks were registered");
	free(x);
	free(y);
	weft_comm_destroy(comm);
}
END_TEST

START_TEST(mode_off_and_setting)
{
	weft_comm_t comm = solo_ok(-1, "1");
	ck_assert_msg(comm->pt == NULL, "progress_thread -1 with WEFT_PROGRESS_THREAD=1: a thread");
	weft_comm_destroy(comm);
	comm = solo_ok(0, "1");
	ck_assert_msg(comm->pt != NULL, "progress_thread 0, WEFT_PROGRESS_THREAD=1: no thread");
	weft_comm_destroy(comm);
	comm = solo_ok(0, NULL);
	ck_assert_msg(comm->pt == NULL, "progress_thread 0, setting unset: a thread");
	weft_comm_destroy(comm);
}
END_TEST

START_TEST(split_inherits)
{
	for (int mode = -1; mode <= 1; mode += 2) {
		weft_comm_t comm = solo_ok(mode, mode > 0 ? "0" : "1"), child = NULL;
		ck_assert_int_eq(weft_comm_split(comm, 0, 0, &child), WEFT_SUCCESS);
		ck_assert_ptr_nonnull(child);
		ck_assert_msg((child->pt != NULL) == (mode > 0),
			      "split of a communicator with progress_thread %d: child %s", mode,
			      child->pt ? "has a thread" : "has none");
		weft_comm_destroy(child);
		weft_comm_destroy(comm);
	}
}
END_TEST

static void expect_bad(const weft_config_t *config, const char *word)
{
	weft_comm_t comm = (weft_comm_t)(uintptr_t)1;
	weft_status_t st = solo(config, &comm);
	ck_assert_int_eq(st, WEFT_ERR_INVALID_ARG);
	ck_assert_ptr_null(comm);
	ck_assert_msg(strstr(weft_init_last_error(), word), "init_rank: \"%s\" does not name %s",
		      weft_init_last_error(), word);
	setenv("WEFT_RANK", "0", 1);
	setenv("WEFT_NRANKS", "1", 1);
	comm = (weft_comm_t)(uintptr_t)1;
	st = weft_comm_init_env(&comm, config);
	unsetenv("WEFT_RANK");
	unsetenv("WEFT_NRANKS");
	ck_assert_int_eq(st, WEFT_ERR_INVALID_ARG);
	ck_assert_ptr_null(comm);
	ck_assert_msg(strstr(weft_init_last_error(), word), "init_env: \"%s\" does not name %s",
		      weft_init_last_error(), word);
}

START_TEST(sizes_and_values)
{
	unsetenv("WEFT_PROGRESS_THREAD");
	setenv("WEFT_BOOTSTRAP_TIMEOUT", "1", 1); /* the roots of rejected inits wait this long */
	weft_config_t config = WEFT_CONFIG_INIT;
	config.progress_thread = 2;
	expect_bad(&config, "progress_thread");
	config.progress_thread = -2;
	expect_bad(&config, "progress_thread");
	config = (weft_config_t)WEFT_CONFIG_INIT;
	config.size = sizeof(weft_config_t) + 8;
	expect_bad(&config, "config->size");
	/* A caller built before the field: its size ends at timeout_seconds,
	 * and whatever follows in memory is not read. */
	config = (weft_config_t)WEFT_CONFIG_INIT;
	config.size = offsetof(weft_config_t, timeout_seconds) + sizeof(double);
	config.progress_thread = 77;
	weft_comm_t comm = NULL;
	ck_assert_msg(solo(&config, &comm) == WEFT_SUCCESS, "old-size config: %s",
		      weft_init_last_error());
	ck_assert_msg(comm->pt == NULL, "old-size config: read progress_thread");
	weft_comm_destroy(comm);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("progress_thread");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, mode_on);
	tcase_add_test(tc, mode_off_and_setting);
	tcase_add_test(tc, split_inherits);
	tcase_add_test(tc, sizes_and_values);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
