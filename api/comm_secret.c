/*
 * comm_secret.c — the key of a weft_comm_init_env job without PMIx, in
 * this order:
 *  1. WEFT_SECRET: 64 hex digits (or 16, the keys of older scripts);
 *  2. WEFT_SECRET_FILE: a file of yours only you can read holding them;
 *  3. one host (the launcher says every rank is here, or the root is
 *     loopback): this user's random host key (a 0600 file in a 0700
 *     directory under the user's runtime directory, made by the first rank
 *     that needs it), mixed with the launcher's job id. Other users of the
 *     host cannot read the host key, so the job key is not theirs to guess,
 *     though the job id is public; no per-job file to race over or leave
 *     behind, and every local launcher (Hydra, mpirun without PMIx,
 *     torchrun, srun on one node) gets it. A same-uid check on each
 *     loopback connection (SO_PEERCRED) would not do: it exists for Unix
 *     sockets, not for the TCP connections Weft makes;
 *  4. across hosts, a key derived from the launcher's job id is guessable
 *     by anyone who can read the job list: init fails naming the ways to
 *     give one, unless WEFT_ALLOW_DERIVED_SECRET=1 says the cluster is
 *     trusted (then with a warning).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"
#include "util/auth.h"
#include "util/log.h"
#include "util/settings.h"

#define SECRET_HINT                                                                                \
	"give every rank the same key: launch with PMIx (srun --mpi=pmix, Open MPI's mpirun), "    \
	"set WEFT_SECRET_FILE to a file on a shared file system holding 64 random hex digits "     \
	"that only you can read (e.g. `od -An -tx1 -N32 /dev/urandom | tr -d ' \\n' > FILE; "      \
	"chmod 600 FILE`), set WEFT_SECRET to them, or use the torch backend (its store hands "    \
	"the key out); WEFT_ALLOW_DERIVED_SECRET=1 accepts a guessable key on a trusted cluster"

/* The content of a key file: the digits and at most one newline. */
static weft_status_t parse_file_key(const char *buf, size_t n, struct weft_key *key,
				    struct weft_err *err)
{
	if (n > 0 && buf[n - 1] == '\n')
		n--;
	return weft_key_parse(key, buf, n, "WEFT_SECRET_FILE's content", err);
}

/* A file that must be this user's and readable by no one else: a key that
 * others can read protects nothing. Reads at most @p cap bytes. */
static weft_status_t read_private(const char *path, const char *what, char *buf, size_t cap,
				  size_t *got, struct weft_err *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return weft_err_errno(err, errno, "%s %s", what, path);
	struct stat sb;
	ssize_t n = -1;
	weft_status_t st = WEFT_SUCCESS;
	if (fstat(fd, &sb) != 0)
		st = weft_err_errno(err, errno, "%s %s", what, path);
	else if (!S_ISREG(sb.st_mode) || sb.st_uid != geteuid() || (sb.st_mode & 077))
		st = weft_err_set(err, WEFT_ERR_INVALID_ARG,
				  "%s %s must be a regular file of yours that only you can read "
				  "(chmod 600)",
				  what, path);
	else if ((n = read(fd, buf, cap)) < 0)
		st = weft_err_errno(err, errno, "%s %s", what, path);
	close(fd);
	*got = n > 0 ? (size_t)n : 0;
	return st;
}

static weft_status_t secret_file(const char *path, struct weft_key *key, struct weft_err *err)
{
	char buf[2 * WEFT_KEY_BYTES + 2];
	size_t n;
	weft_status_t st = read_private(path, "WEFT_SECRET_FILE", buf, sizeof(buf), &n, err);
	if (st == WEFT_SUCCESS)
		st = parse_file_key(buf, n, key, err);
	weft_wipe(buf, sizeof(buf));
	return st;
}

/* A directory of this user's that no one else may enter: made if missing. */
static weft_status_t private_dir(const char *path, struct weft_err *err)
{
	struct stat sb;
	if (mkdir(path, 0700) != 0 && errno != EEXIST)
		return weft_err_errno(err, errno, "the host key's directory %s", path);
	if (lstat(path, &sb) != 0)
		return weft_err_errno(err, errno, "the host key's directory %s", path);
	if (!S_ISDIR(sb.st_mode) || sb.st_uid != geteuid() || (sb.st_mode & 077))
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "the host key's directory %s must be a directory of yours that "
				    "only you can enter (chmod 700); set WEFT_SECRET_FILE instead",
				    path);
	return WEFT_SUCCESS;
}

/* $XDG_RUNTIME_DIR/weft where that directory exists, else /tmp/weft-UID:
 * this user's, on this host. */
static weft_status_t host_key_dir(char *dir, size_t len, struct weft_err *err)
{
	const char *run = getenv("XDG_RUNTIME_DIR");
	struct stat sb;
	/* a runtime directory named but missing (srun passes the login
	 * node's on to nodes where the user has none): /tmp's */
	if (run && run[0] == '/' && stat(run, &sb) == 0 && S_ISDIR(sb.st_mode))
		snprintf(dir, len, "%s/weft", run);
	else
		snprintf(dir, len, "/tmp/weft-%u", (unsigned)geteuid());
	return private_dir(dir, err);
}

/* Publish a fresh key at @p path: written under a private name, then
 * linked into place, so that no rank ever reads half a key; the first
 * rank's link wins and the others read it. */
static weft_status_t make_host_key(const char *dir, const char *path, struct weft_err *err)
{
	char tmp[PATH_MAX];
	unsigned char key[WEFT_KEY_BYTES];
	snprintf(tmp, sizeof(tmp), "%s/.key.%d", dir, (int)getpid());
	weft_status_t st = weft_random(key, sizeof(key), err);
	if (st != WEFT_SUCCESS)
		return st;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		weft_wipe(key, sizeof(key));
		return weft_err_errno(err, errno, "the host key %s", tmp);
	}
	ssize_t n = write(fd, key, sizeof(key));
	int e = errno;
	close(fd);
	weft_wipe(key, sizeof(key));
	if (n != (ssize_t)sizeof(key)) {
		unlink(tmp);
		return weft_err_errno(err, n < 0 ? e : EIO, "writing the host key %s", tmp);
	}
	if (link(tmp, path) != 0 && errno != EEXIST) {
		e = errno;
		unlink(tmp);
		return weft_err_errno(err, e, "the host key %s", path);
	}
	unlink(tmp);
	return WEFT_SUCCESS;
}

static weft_status_t host_key(struct weft_key *key, struct weft_err *err)
{
	char dir[PATH_MAX - 32], path[PATH_MAX];
	weft_status_t st = host_key_dir(dir, sizeof(dir), err);
	if (st != WEFT_SUCCESS)
		return st;
	snprintf(path, sizeof(path), "%s/host.key", dir);
	if (access(path, F_OK) != 0 && (st = make_host_key(dir, path, err)) != WEFT_SUCCESS)
		return st;
	size_t n;
	st = read_private(path, "the host key", (char *)key->b, sizeof(key->b), &n, err);
	if (st == WEFT_SUCCESS && n != sizeof(key->b))
		st = weft_err_set(err, WEFT_ERR_INVALID_ARG,
				  "the host key %s holds %zu bytes, not %zu: remove it", path, n,
				  sizeof(key->b));
	return st;
}

static bool is_loopback(const struct sockaddr_storage *a)
{
	if (a->ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr) >> 24) == 127;
	if (a->ss_family == AF_INET6) {
		const struct in6_addr *x = &((const struct sockaddr_in6 *)a)->sin6_addr;
		return IN6_IS_ADDR_LOOPBACK(x);
	}
	return false;
}

/* The job id the launcher's ranks share, under @p base. */
static void job_key(struct weft_key *key, const struct weft_key *base, const struct weft_launch *l)
{
	weft_key_derive(key, base, "weft job key from the launcher's job id", &l->job_key,
			sizeof(l->job_key));
}

weft_status_t weft_api_env_secret(const struct weft_launch *l, const struct sockaddr_storage *root,
				  struct weft_key *key, struct weft_err *err)
{
	const char *s = weft_setting_str("WEFT_SECRET");
	if (s)
		return weft_key_parse(key, s, strlen(s), "WEFT_SECRET", err);
	const char *file = weft_setting_str("WEFT_SECRET_FILE");
	if (file)
		return secret_file(file, key, err);
	const char *from = l->job_key_from ? l->job_key_from : "the parent's pid";
	if (l->one_host || is_loopback(root)) {
		struct weft_key base;
		weft_status_t st = host_key(&base, err);
		if (st == WEFT_SUCCESS)
			job_key(key, &base, l);
		weft_wipe(&base, sizeof(base));
		if (st == WEFT_SUCCESS)
			weft_log(WEFT_LOG_INFO, WEFT_SUB_BOOT,
				 "the job's key: this user's host key and %s", from);
		return st;
	}
	long allow = 0;
	weft_setting_long("WEFT_ALLOW_DERIVED_SECRET", &allow);
	if (allow != 1 || !l->job_key_from)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "no key for a job across hosts (%s, root not on loopback): %s",
				    l->name, SECRET_HINT);
	static bool warned;
	if (!warned)
		weft_log(
		    WEFT_LOG_WARN, WEFT_SUB_BOOT,
		    "WEFT_ALLOW_DERIVED_SECRET=1: the job's key is derived from %s, which other "
		    "users of these hosts can guess: they could join or disrupt the job",
		    from);
	warned = true;
	struct weft_key zero = {{0}};
	job_key(key, &zero, l);
	return WEFT_SUCCESS;
}

void weft_api_env_secret_hint(const struct weft_launch *l, struct weft_err *err)
{
	if (l->pmix || l->job_key_from || weft_setting_str("WEFT_SECRET") ||
	    weft_setting_str("WEFT_SECRET_FILE") || !strstr(err->msg, "failed authentication"))
		return;
	size_t n = strlen(err->msg);
	snprintf(err->msg + n, sizeof(err->msg) - n,
		 " (this rank's key is this user's host key with its parent's pid, %d: ranks "
		 "started by different parent processes hold different keys; start them from one "
		 "process, or give every rank the same WEFT_SECRET)",
		 (int)getppid());
	weft_log(WEFT_LOG_WARN, WEFT_SUB_INIT, "%s", err->msg);
}
