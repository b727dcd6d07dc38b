/*
 * verbs_env.h — for the verbs suites: where the test double and the fake
 * sysfs tree are, and the environment that points a job at them.
 *
 * The double is build/tests/libfake_ibverbs.so, next to the test program
 * (so build-asan/ finds its own); the tree is tests/fixtures/sysfs, found
 * from the working directory (make test runs from the top) or from the
 * program. Jobs over the double name verbs in WEFT_TRANSPORTS: the
 * transport serves no peer on the double otherwise.
 */
#ifndef WEFT_TEST_VERBS_ENV_H
#define WEFT_TEST_VERBS_ENV_H

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define VERBS_ENV_MAX 24

static char verbs_fake_path[PATH_MAX], verbs_sysfs_path[PATH_MAX], verbs_exe_dir[PATH_MAX];

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
	snprintf(verbs_fake_path, sizeof(verbs_fake_path), "%.3000s/libfake_ibverbs.so", exe);
	if (!realpath("tests/fixtures/sysfs", verbs_sysfs_path)) {
		char rel[PATH_MAX];
		snprintf(rel, sizeof(rel), "%.3000s/../../tests/fixtures/sysfs", exe);
		if (!realpath(rel, verbs_sysfs_path))
			snprintf(verbs_sysfs_path, sizeof(verbs_sysfs_path), "%s", rel);
	}
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
