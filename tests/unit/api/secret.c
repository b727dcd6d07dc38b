/*
 * secret.c — the bootstrap secret of a job without PMIx
 * (api/comm_secret.c): WEFT_SECRET, WEFT_SECRET_FILE (only a file of
 * the user's that no one else can read), the derived one with its
 * warning, and the error that a manual launch across hosts without one
 * gets at init instead of "wrong secret" at the root. No network: the
 * root's address is only compared, never contacted.
 */
#include <arpa/inet.h>
#include <check.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"
#include "launch/launch.h"

static struct sockaddr_storage addr_of(const char *ip)
{
	struct sockaddr_storage ss = {0};
	struct sockaddr_in *in = (struct sockaddr_in *)&ss;
	in->sin_family = AF_INET;
	in->sin_port = htons(5000);
	inet_pton(AF_INET, ip, &in->sin_addr);
	return ss;
}

static struct weft_launch manual(void)
{
	struct weft_launch l = {.found = true,
				.name = "weft",
				.rank = 1,
				.nranks = 4,
				.local_rank = -1,
				.local_size = -1,
				.job_key = 42};
	return l; /* job_key_from NULL: from the parent's pid */
}

static void clear_env(void)
{
	unsetenv("WEFT_SECRET");
	unsetenv("WEFT_SECRET_FILE");
}

START_TEST(across_hosts_without_secret_fails_clearly)
{
	clear_env();
	struct weft_launch l = manual();
	struct sockaddr_storage root = addr_of("192.0.2.1");
	struct weft_err err = {0};
	uint64_t secret = 0;
	weft_status_t st = weft_api_env_secret(&l, &root, &secret, &err);
	ck_assert_int_eq(st, WEFT_ERR_INVALID_ARG);
	ck_assert_msg(strstr(err.msg, "WEFT_SECRET") && strstr(err.msg, "WEFT_SECRET_FILE") &&
			  strstr(err.msg, "across hosts"),
		      "message: %s", err.msg);
}
END_TEST

START_TEST(one_host_or_job_id_derives)
{
	clear_env();
	struct weft_launch l = manual();
	struct sockaddr_storage lo = addr_of("127.0.0.1"), far = addr_of("192.0.2.1");
	struct weft_err err = {0};
	uint64_t a = 0, b = 0;
	ck_assert_int_eq(weft_api_env_secret(&l, &lo, &a, &err), WEFT_SUCCESS);
	l.job_key_from = "SLURM_JOB_ID"; /* srun, mpirun: the same on every host */
	ck_assert_int_eq(weft_api_env_secret(&l, &far, &b, &err), WEFT_SUCCESS);
	ck_assert_uint_eq(a, b);
	ck_assert_uint_ne(a, 0);
}
END_TEST

START_TEST(secret_setting)
{
	clear_env();
	struct weft_launch l = manual();
	struct sockaddr_storage far = addr_of("192.0.2.1");
	struct weft_err err = {0};
	uint64_t s = 0;
	setenv("WEFT_SECRET", "00112233aabbccdd", 1);
	ck_assert_int_eq(weft_api_env_secret(&l, &far, &s, &err), WEFT_SUCCESS);
	ck_assert_uint_eq(s, 0x00112233aabbccddull);
	setenv("WEFT_SECRET", "-0112233aabbccdd", 1);
	ck_assert_int_eq(weft_api_env_secret(&l, &far, &s, &err), WEFT_ERR_INVALID_ARG);
	setenv("WEFT_SECRET", "12", 1);
	ck_assert_int_eq(weft_api_env_secret(&l, &far, &s, &err), WEFT_ERR_INVALID_ARG);
	clear_env();
}
END_TEST

static void write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	ck_assert_int_eq(chmod(path, mode), 0);
}

START_TEST(secret_file)
{
	clear_env();
	char dir[] = "/tmp/weft-secret-XXXXXX", path[64];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/secret", dir);
	struct weft_launch l = manual();
	struct sockaddr_storage far = addr_of("192.0.2.1");
	struct weft_err err = {0};
	uint64_t s = 0;
	setenv("WEFT_SECRET_FILE", path, 1);
	write_file(path, "0123456789abcdef\n", 0600);
	ck_assert_int_eq(weft_api_env_secret(&l, &far, &s, &err), WEFT_SUCCESS);
	ck_assert_uint_eq(s, 0x0123456789abcdefull);
	write_file(path, "0123456789abcdef\n", 0644); /* others can read it */
	ck_assert_int_eq(weft_api_env_secret(&l, &far, &s, &err), WEFT_ERR_INVALID_ARG);
	ck_assert_msg(strstr(err.msg, "only you can read"), "message: %s", err.msg);
	write_file(path, "not hex at all!!\n", 0600);
	ck_assert_int_eq(weft_api_env_secret(&l, &far, &s, &err), WEFT_ERR_INVALID_ARG);
	unlink(path);
	ck_assert_int_ne(weft_api_env_secret(&l, &far, &s, &err), WEFT_SUCCESS); /* missing */
	rmdir(dir);
	clear_env();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("secret");
	TCase *tc = tcase_create("env");
	tcase_add_test(tc, across_hosts_without_secret_fails_clearly);
	tcase_add_test(tc, one_host_or_job_id_derives);
	tcase_add_test(tc, secret_setting);
	tcase_add_test(tc, secret_file);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
