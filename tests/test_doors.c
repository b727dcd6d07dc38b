/*
 * test_doors.c — no listening socket is left open once init returns: the
 * bootstrap root closes its listener when every rank has joined, and the
 * socket transport closes its TCP listener once every peer is connected
 * (a stranger then finds the port closed instead of a socket that accepts
 * and reads it). Counted from /proc: this process's socket inodes against
 * the LISTEN entries of /proc/net/tcp and tcp6 (loopback only).
 */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static bool own_socket(unsigned long inode)
{
	DIR *d = opendir("/proc/self/fd");
	bool found = false;
	struct dirent *e;
	while (d && !found && (e = readdir(d))) {
		char path[300], link[64];
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		ssize_t n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = '\0';
		unsigned long ino;
		found = sscanf(link, "socket:[%lu]", &ino) == 1 && ino == inode;
	}
	if (d)
		closedir(d);
	return found;
}

/* TCP sockets of this process in LISTEN (state 0A). */
static int listening(void)
{
	int count = 0;
	const char *files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
	for (int f = 0; f < 2; f++) {
		FILE *fp = fopen(files[f], "r");
		char line[512];
		while (fp && fgets(line, sizeof(line), fp)) {
			char state[8];
			unsigned long inode;
			if (sscanf(line, "%*s %*s %*s %7s %*s %*s %*s %*s %*s %lu", state,
				   &inode) == 2 &&
			    strcmp(state, "0A") == 0 && own_socket(inode))
				count++;
		}
		if (fp)
			fclose(fp);
	}
	return count;
}

static int doors_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	int n = listening();
	if (n != 0)
		return harness_fail("%d TCP listener(s) still open after init", n);
	float x = 1;
	weft_status_t st = weft_allreduce(WEFT_IN_PLACE, &x, 1, WEFT_FLOAT32, WEFT_SUM, comm);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "allreduce after the doors closed");
	return x == (float)nranks ? 0 : harness_fail("allreduce gave %g", (double)x);
}

START_TEST(no_listener_after_init)
{
	static const char *const env[] = {"WEFT_TRANSPORTS=socket", "WEFT_SOCKET_IFNAME=lo",
					  "WEFT_TIMEOUT=30", NULL};
	struct harness_result res;
	harness_run(3, env, doors_body, NULL, 60, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

START_TEST(no_listener_after_env_init)
{
	static const char *const env[] = {"WEFT_TRANSPORTS=socket", "WEFT_SOCKET_IFNAME=lo",
					  "WEFT_TIMEOUT=30", NULL};
	struct harness_job job = {
	    .nranks = 3, .env = env, .body = doors_body, .timeout_s = 60, .init = HARNESS_INIT_ENV};
	struct harness_result res;
	harness_run_job(&job, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("doors");
	TCase *tc = tcase_create("listeners");
	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, no_listener_after_init);
	tcase_add_test(tc, no_listener_after_env_init);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
