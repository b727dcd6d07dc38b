/*
 * secret.c — the key of a job without PMIx (api/comm_secret.c):
 * WEFT_SECRET and WEFT_SECRET_FILE (16 or 64 hex digits and nothing else;
 * only a file of the user's that no one else can read), this user's host
 * key on one host, a derived key across hosts only with
 * WEFT_ALLOW_DERIVED_SECRET=1, and the error a launch across hosts without
 * one gets at init. No network: the root's address is only compared.
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
#include "util/auth.h"

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

static bool key_eq(const struct weft_key *a, const struct weft_key *b)
{
	return memcmp(a, b, sizeof(*a)) == 0;
}

static void key_of_hex(struct weft_key *k, const char *hex)
{
	struct weft_err err = {0};
	ck_assert_int_eq(weft_key_parse(k, hex, strlen(hex), "test", &err), WEFT_SUCCESS);
}

START_TEST(across_hosts_without_secret_fails_clearly)
{
	clear_env();
	struct weft_launch l = manual();
	struct sockaddr_storage root = addr_of("192.0.2.1");
	struct weft_err err = {0};
	struct weft_key k;
	weft_status_t st = weft_api_env_secret(&l, &root, &k, &err);
	ck_assert_int_eq(st, WEFT_ERR_INVALID_ARG);
	ck_assert_msg(strstr(err.msg, "WEFT_SECRET") && strstr(err.msg, "WEFT_SECRET_FILE") &&
			  strstr(err.msg, "PMIx") && strstr(err.msg, "across hosts"),
		      "message: %s", err.msg);
	/* A launcher's job id is public: across hosts it is refused too. */
	l.job_key_from = "SLURM_JOB_ID";
	ck_assert_int_eq(weft_api_env_secret(&l, &root, &k, &err), WEFT_ERR_INVALID_ARG);
}
END_TEST

START_TEST(derived_only_when_allowed)
{
	clear_env();
	struct weft_launch l = manual();
	struct sockaddr_storage far = addr_of("192.0.2.1");
	struct weft_err err = {0};
	struct weft_key a, b;
	l.job_key_from = "SLURM_JOB_ID"; /* srun, mpirun: the same on every host */
	setenv("WEFT_ALLOW_DERIVED_SECRET", "1", 1);
	ck_assert_int_eq(weft_api_env_secret(&l, &far, &a, &err), WEFT_SUCCESS);
	ck_assert_int_eq(weft_api_env_secret(&l, &far, &b, &err), WEFT_SUCCESS);
	ck_assert(key_eq(&a, &b));
	l.job_key = 43;
	ck_assert_int_eq(weft_api_env_secret(&l, &far, &b, &err), WEFT_SUCCESS);
	ck_assert(!key_eq(&a, &b));
	unsetenv("WEFT_ALLOW_DERIVED_SECRET");
}
END_TEST

/* On one host the key mixes this user's private host key into the job id:
 * the same for the ranks of one job, unguessable for other users. */
START_TEST(one_host_uses_the_host_key)
{
	clear_env();
	char run[] = "/tmp/weft-run-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(run));
	setenv("XDG_RUNTIME_DIR", run, 1);
	struct weft_launch l = manual();
	struct sockaddr_storage lo = addr_of("127.0.0.1");
	struct weft_err err = {0};
	struct weft_key a, b, derived;
	ck_assert_int_eq(weft_api_env_secret(&l, &lo, &a, &err), WEFT_SUCCESS);
	ck_assert_int_eq(weft_api_env_secret(&l, &lo, &b, &err), WEFT_SUCCESS);
	ck_assert(key_eq(&a, &b));
	/* not what anyone could derive from the job id alone */
	struct weft_key zero = {{0}};
	weft_key_derive(&derived, &zero, "weft job key from the launcher's job id", &l.job_key,
			sizeof(l.job_key));
	ck_assert(!key_eq(&a, &derived));
	char path[128];
	snprintf(path, sizeof(path), "%s/weft/host.key", run);
	struct stat sb;
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 0777, 0600);
	ck_assert_int_eq(sb.st_size, 32);
	snprintf(path, sizeof(path), "%s/weft", run);
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 0777, 0700);
	/* a directory others may enter is refused */
	ck_assert_int_eq(chmod(path, 0755), 0);
	ck_assert_int_eq(weft_api_env_secret(&l, &lo, &a, &err), WEFT_ERR_INVALID_ARG);
	ck_assert_msg(strstr(err.msg, "only you can enter"), "message: %s", err.msg);
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", run);
	ck_assert_int_eq(system(cmd), 0);
	unsetenv("XDG_RUNTIME_DIR");
}
END_TEST

/* XDG_RUNTIME_DIR named but missing (srun hands the login node's to a
 * node where the user has none): the host key goes to /tmp/weft-UID, as
 * with no runtime directory at all, rather than init failing. */
START_TEST(missing_runtime_dir_falls_back)
{
	clear_env();
	struct weft_launch l = manual();
	struct sockaddr_storage lo = addr_of("127.0.0.1");
	struct weft_err err = {0};
	struct weft_key a, b;
	unsetenv("XDG_RUNTIME_DIR");
	ck_assert_int_eq(weft_api_env_secret(&l, &lo, &a, &err), WEFT_SUCCESS);
	setenv("XDG_RUNTIME_DIR", "/nonexistent/run/user/4242", 1);
	ck_assert_msg(weft_api_env_secret(&l, &lo, &b, &err) == WEFT_SUCCESS, "%s", err.msg);
	ck_assert(key_eq(&a, &b));
	unsetenv("XDG_RUNTIME_DIR");
}
END_TEST

/* A failed authentication at init, for a rank whose key came from the
 * host key and its parent's pid: the message says why that may be and
 * what to do; with a key given (or a launcher's job id), it is left as
 * it was. */
START_TEST(authentication_failure_hint)
{
	clear_env();
	struct weft_launch l = manual();
	struct weft_err err = {0};
	weft_err_set(&err, WEFT_ERR_REMOTE,
		     "rank 1: bootstrap: root 127.0.0.1:5000 failed "
		     "authentication (it does not hold the job's key)");
	weft_api_env_secret_hint(&l, &err);
	ck_assert_msg(strstr(err.msg, "parent") && strstr(err.msg, "WEFT_SECRET"), "%s", err.msg);
	struct weft_err given = {0};
	weft_err_set(&given, WEFT_ERR_REMOTE, "rank 1: bootstrap: root failed authentication");
	setenv("WEFT_SECRET", "00112233445566778899aabbccddeeff", 1);
	weft_api_env_secret_hint(&l, &given);
	ck_assert_msg(!strstr(given.msg, "parent"), "%s", given.msg);
	clear_env();
	l.job_key_from = "SLURM_JOB_ID";
	struct weft_err slurm = {0};
	weft_err_set(&slurm, WEFT_ERR_REMOTE, "rank 1: bootstrap: root failed authentication");
	weft_api_env_secret_hint(&l, &slurm);
	ck_assert_msg(!strstr(slurm.msg, "parent"), "%s", slurm.msg);
}
END_TEST

START_TEST(secret_setting)
{
	clear_env();
	struct weft_launch l = manual();
	struct sockaddr_storage far = addr_of("192.0.2.1");
	struct weft_err err = {0};
	struct weft_key k, want;
	setenv("WEFT_SECRET", "00112233aabbccdd", 1);
	ck_assert_int_eq(weft_api_env_secret(&l, &far, &k, &err), WEFT_SUCCESS);
	weft_key_from_u64(&want, 0x00112233aabbccddull);
	ck_assert(key_eq(&k, &want));
	const char *k64 = "00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF";
	setenv("WEFT_SECRET", k64, 1);
	ck_assert_int_eq(weft_api_env_secret(&l, &far, &k, &err), WEFT_SUCCESS);
	ck_assert_int_eq(k.b[0], 0x00);
	ck_assert_int_eq(k.b[31], 0xff);
	/* nothing but 16 or 64 hex digits */
	const char *bad[] = {"-0112233aabbccdd", "12",
			     "0x112233aabbccdd", " 0112233aabbccdd",
			     "0112233aabbccdd ", "00112233aabbccdd\n",
			     "0112233aabbccddg"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv("WEFT_SECRET", bad[i], 1);
		ck_assert_msg(weft_api_env_secret(&l, &far, &k, &err) == WEFT_ERR_INVALID_ARG,
			      "WEFT_SECRET=%s taken", bad[i]);
		ck_assert_msg(strstr(err.msg, "WEFT_SECRET"), "message: %s", err.msg);
	}
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
	struct weft_key k, want;
	setenv("WEFT_SECRET_FILE", path, 1);
	write_file(path, "0123456789abcdef\n", 0600);
	ck_assert_int_eq(weft_api_env_secret(&l, &far, &k, &err), WEFT_SUCCESS);
	weft_key_from_u64(&want, 0x0123456789abcdefull);
	ck_assert(key_eq(&k, &want));
	write_file(path, "0123456789abcdef", 0600); /* no newline: fine too */
	ck_assert_int_eq(weft_api_env_secret(&l, &far, &k, &err), WEFT_SUCCESS);
	const char *k64 = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100";
	char text[80];
	snprintf(text, sizeof(text), "%s\n", k64);
	write_file(path, text, 0600);
	ck_assert_int_eq(weft_api_env_secret(&l, &far, &k, &err), WEFT_SUCCESS);
	key_of_hex(&want, k64);
	ck_assert(key_eq(&k, &want));
	write_file(path, "0123456789abcdef\n", 0644); /* others can read it */
	ck_assert_int_eq(weft_api_env_secret(&l, &far, &k, &err), WEFT_ERR_INVALID_ARG);
	ck_assert_msg(strstr(err.msg, "only you can read"), "message: %s", err.msg);
	const char *bad[] = {"not hex at all!!\n", "0x23456789abcdef\n", " 123456789abcdef\n",
			     "0123456789abcdef\n\n", "0123456789abcdef \n"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		write_file(path, bad[i], 0600);
		ck_assert_msg(weft_api_env_secret(&l, &far, &k, &err) == WEFT_ERR_INVALID_ARG,
			      "file content %zu taken", i);
	}
	unlink(path);
	ck_assert_int_ne(weft_api_env_secret(&l, &far, &k, &err), WEFT_SUCCESS); /* missing */
	rmdir(dir);
	clear_env();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("secret");
	TCase *tc = tcase_create("env");
	tcase_add_test(tc, across_hosts_without_secret_fails_clearly);
	tcase_add_test(tc, derived_only_when_allowed);
	tcase_add_test(tc, one_host_uses_the_host_key);
	tcase_add_test(tc, missing_runtime_dir_falls_back);
	tcase_add_test(tc, authentication_failure_hint);
	tcase_add_test(tc, secret_setting);
	tcase_add_test(tc, secret_file);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
