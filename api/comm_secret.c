/* comm_secret.c — the bootstrap secret of a weft_comm_init_env job without
 * PMIx: WEFT_SECRET, else WEFT_SECRET_FILE, else one derived from the
 * launcher's job id (with a warning: a job id is guessable), else — ranks
 * on one host, all children of one parent — from the parent's pid. A job
 * across hosts with none of these fails here, saying what to set, rather
 * than at the root with "wrong secret". */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"
#include "util/log.h"
#include "util/settings.h"

#define SECRET_HINT                                                                                \
	"set WEFT_SECRET to the same 16 random hex digits on every rank (e.g. from "               \
	"`od -An -tx8 -N8 /dev/urandom`), or WEFT_SECRET_FILE to a file holding them that only "   \
	"you can read"

static weft_status_t parse_secret(const char *s, size_t n, const char *what, uint64_t *secret,
				  struct weft_err *err)
{
	char hex[17];
	while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' '))
		n--;
	if (n != 16)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG, "%s must be 16 hex digits", what);
	memcpy(hex, s, 16);
	hex[16] = '\0';
	char *end;
	errno = 0;
	unsigned long long x = strtoull(hex, &end, 16);
	if (errno || *end || hex[0] == '-' || hex[0] == '+' || hex[0] == ' ')
		return weft_err_set(err, WEFT_ERR_INVALID_ARG, "%s must be 16 hex digits", what);
	*secret = x;
	return WEFT_SUCCESS;
}

/* The file must be this user's and readable by no one else: a secret that
 * others can read protects nothing. */
static weft_status_t secret_file(const char *path, uint64_t *secret, struct weft_err *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return weft_err_errno(err, errno, "WEFT_SECRET_FILE %s", path);
	struct stat sb;
	char buf[64];
	ssize_t n = -1;
	weft_status_t st = WEFT_SUCCESS;
	if (fstat(fd, &sb) != 0)
		st = weft_err_errno(err, errno, "WEFT_SECRET_FILE %s", path);
	else if (!S_ISREG(sb.st_mode) || sb.st_uid != geteuid() || (sb.st_mode & 077))
		st = weft_err_set(err, WEFT_ERR_INVALID_ARG,
				  "WEFT_SECRET_FILE %s must be a regular file of yours that only "
				  "you can read (chmod 600)",
				  path);
	else if ((n = read(fd, buf, sizeof(buf))) < 0)
		st = weft_err_errno(err, errno, "WEFT_SECRET_FILE %s", path);
	close(fd);
	if (st == WEFT_SUCCESS)
		st = parse_secret(buf, (size_t)n, "WEFT_SECRET_FILE's content", secret, err);
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

weft_status_t weft_api_env_secret(const struct weft_launch *l, const struct sockaddr_storage *root,
				  uint64_t *secret, struct weft_err *err)
{
	const char *s = weft_setting_str("WEFT_SECRET");
	if (s)
		return parse_secret(s, strlen(s), "WEFT_SECRET", secret, err);
	const char *file = weft_setting_str("WEFT_SECRET_FILE");
	if (file)
		return secret_file(file, secret, err);
	if (!l->job_key_from && !l->one_host && !is_loopback(root))
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "no bootstrap secret for a job across hosts (%s with a root "
				    "that is not loopback): %s",
				    l->name, SECRET_HINT);
	static bool warned;
	if (!warned)
		weft_log(WEFT_LOG_WARN, WEFT_SUB_BOOT,
			 "the bootstrap secret is derived from %s, which other users of these "
			 "hosts can guess: they could join or disrupt the job's bootstrap; %s",
			 l->job_key_from ? l->job_key_from : "the parent's pid", SECRET_HINT);
	warned = true;
	*secret = l->job_key ^ 0x9e3779b97f4a7c15ull;
	return WEFT_SUCCESS;
}
