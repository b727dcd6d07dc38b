/*
 * verbs_env.h — for the verbs suites: where the test double and the fake
 * sysfs tree are, and the environment that points a job at them.
 *
 * The double is build/tests/libfake_ibverbs.so, in the test program's
 * directory or one above it (so build-asan/ finds its own); the tree is
 * tests/fixtures/sysfs, found by harness_source_path (from the working
 * directory, where make test runs, or above the program). Jobs over the double name verbs in
 * WEFT_TRANSPORTS: the transport serves no peer on the double otherwise.
 */
#ifndef WEFT_TEST_VERBS_ENV_H
#define WEFT_TEST_VERBS_ENV_H

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#define VERBS_ENV_MAX 24

static char verbs_fake_path[PATH_MAX], verbs_sysfs_path[PATH_MAX], verbs_exe_dir[PATH_MAX];

/* The first of @p dir and the directories above it that holds @p rel
 * (the programs sit below build/tests/, at various depths). */
static inline bool verbs_find_up(const char *dir, const char *rel, char *out, size_t cap)
{
	char d[PATH_MAX];
	struct stat st;
	snprintf(d, sizeof(d), "%s", dir);
	for (;;) {
		snprintf(out, cap, "%.3000s/%s", d, rel);
		if (stat(out, &st) == 0)
			return true;
		char *slash = strrchr(d, '/');
		if (!slash || slash == d)
			return false;
		*slash = '\0';
	}
}

static inline void verbs_find_paths(void)
{
	if (verbs_fake_path[0])
		return;
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';
	char *slash = strrchr(exe, '/');
	if (slash)
		*slash = '\0';
	snprintf(verbs_exe_dir, sizeof(verbs_exe_dir), "%s", exe);
	if (!verbs_find_up(exe, "libfake_ibverbs.so", verbs_fake_path, sizeof(verbs_fake_path)))
		snprintf(verbs_fake_path, sizeof(verbs_fake_path), "%.3000s/libfake_ibverbs.so",
			 exe);
	char rel[PATH_MAX];
	if (!harness_source_path("tests/fixtures/sysfs", rel, sizeof(rel)) ||
	    !realpath(rel, verbs_sysfs_path))
		snprintf(verbs_sysfs_path, sizeof(verbs_sysfs_path), "tests/fixtures/sysfs");
}

/* "KEY=VALUE" strings that must outlive the call: one static set. */
static char verbs_env_buf[4][PATH_MAX + 32];
static const char *verbs_env_list[VERBS_ENV_MAX];

/* The environment of a job over the double on the RoCE ports mlx5_0 and
 * mlx5_1, then @p extra (NULL-terminated, may be NULL; later entries win). */
static inline const char *const *verbs_env(const char *const *extra)
{
	verbs_find_paths();
	snprintf(verbs_env_buf[0], sizeof(verbs_env_buf[0]), "WEFT_IBVERBS_LIB=%s",
		 verbs_fake_path);
	snprintf(verbs_env_buf[1], sizeof(verbs_env_buf[1]), "FAKE_IBVERBS_SYSFS=%s",
		 verbs_sysfs_path);
	snprintf(verbs_env_buf[2], sizeof(verbs_env_buf[2]), "WEFT_IB_SYSFS=%s", verbs_sysfs_path);
	size_t k = 0;
	verbs_env_list[k++] = "WEFT_TRANSPORTS=verbs";
	verbs_env_list[k++] = verbs_env_buf[0];
	verbs_env_list[k++] = verbs_env_buf[1];
	verbs_env_list[k++] = verbs_env_buf[2];
	verbs_env_list[k++] = "WEFT_IB_HCA=mlx5_0,mlx5_1";
	verbs_env_list[k++] = "WEFT_TIMEOUT=20";
	for (size_t i = 0; extra && extra[i] && k < VERBS_ENV_MAX - 1; i++)
		verbs_env_list[k++] = extra[i];
	verbs_env_list[k] = NULL;
	return verbs_env_list;
}

#endif
