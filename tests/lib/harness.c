/*
 * harness.c — fork N rank processes, give them a communicator, run the
 * test body, and collect how each ended (see harness.h).
 *
 * Forking, the unique id, dying with the parent, the deadline and reaping
 * only the forked PIDs are the shared local launcher's (tools/launch/),
 * with no grace period. On top of it the harness keeps what tests need: the
 * parent and the ranks share one anonymous MAP_SHARED page set per job, a
 * note slot per rank (first failure, last progress) and a small area the
 * test may use (a victim writes the time it died, for instance); hooks
 * before and after init; absent ranks; a summary for ck_assert_msg.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tools/launch/local_launch.h"

struct note_slot {
	char failure[HARNESS_NOTE_BYTES];
	char progress[HARNESS_NOTE_BYTES];
};

struct shared_page {
	struct note_slot slot[HARNESS_MAX_RANKS];
	_Alignas(64) unsigned char user[HARNESS_SHARED_BYTES];
};

/* Set in each rank process after fork; the parent keeps rank -1. */
static struct shared_page *g_shared;
static int g_rank = -1;
/* The job's directory of captured standard errors (capture_stderr), or "". */
static char g_log_dir[64];

double harness_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int harness_rank(void)
{
	return g_rank;
}

void *harness_shared(void)
{
	return g_shared ? g_shared->user : NULL;
}

static void note_failure(const char *text)
{
	fprintf(stderr, "rank %d: %s\n", g_rank, text);
	if (g_shared && g_rank >= 0 && g_shared->slot[g_rank].failure[0] == '\0')
		snprintf(g_shared->slot[g_rank].failure, HARNESS_NOTE_BYTES, "%s", text);
}

int harness_fail(const char *fmt, ...)
{
	char text[HARNESS_NOTE_BYTES];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	note_failure(text);
	return 1;
}

int harness_fail_status(weft_comm_t comm, weft_status_t status, const char *fmt, ...)
{
	char what[HARNESS_NOTE_BYTES / 2];
	char text[HARNESS_NOTE_BYTES];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	const char *last = comm ? weft_comm_last_error(comm) : "";
	snprintf(text, sizeof(text), "%s: %s (%d): \"%s\"", what, weft_status_string(status),
		 (int)status, last ? last : "(null)");
	note_failure(text);
	return 1;
}

void harness_progress(const char *fmt, ...)
{
	if (!g_shared || g_rank < 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(g_shared->slot[g_rank].progress, HARNESS_NOTE_BYTES, fmt, ap);
	va_end(ap);
}

/* --- rank process --- */

static int apply_env(const char *const *env)
{
	for (size_t i = 0; env && env[i]; i++) {
		const char *eq = strchr(env[i], '=');
		if (!eq || eq == env[i])
			return harness_fail("harness: bad env entry \"%s\"", env[i]);
		char key[256];
		size_t len = (size_t)(eq - env[i]);
		if (len >= sizeof(key))
			return harness_fail("harness: env key too long in \"%s\"", env[i]);
		memcpy(key, env[i], len);
		key[len] = '\0';
		if (setenv(key, eq + 1, 1) != 0)
			return harness_fail("harness: setenv %s: %s", key, strerror(errno));
	}
	return 0;
}

/* The unique id from the shared launcher's pipe (rank 0 makes it). */
static int get_id(struct weft_local_job *lj, int rank, weft_unique_id_t *id)
{
	char why[HARNESS_NOTE_BYTES / 2];
	if (weft_local_get_id(lj, rank, id, why, sizeof(why)) == WEFT_SUCCESS)
		return 0;
	harness_fail("harness: %s", why);
	return HARNESS_EXIT_NO_ID;
}

static int init_comm(const struct harness_job *job, int rank, const weft_unique_id_t *id,
		     weft_comm_t *comm)
{
	double t0 = harness_now();
	weft_status_t st;
	harness_progress("init");
	if (job->init == HARNESS_INIT_ENV)
		st = weft_comm_init_env(comm, NULL);
	else
		st = weft_comm_init_rank(comm, job->nranks, *id, rank, NULL);
	if (st == WEFT_SUCCESS) {
		if (*comm != NULL)
			return 0;
		harness_fail("init returned success and a NULL communicator");
		return HARNESS_EXIT_INIT;
	}
	const char *msg = weft_init_last_error();
	if (*comm != NULL)
		harness_fail("init failed but left a non-NULL communicator");
	if (job->init_failed)
		return job->init_failed(rank, job->nranks, st, msg ? msg : "(null)",
					harness_now() - t0, job->arg);
	harness_fail("%s: %s (%d): \"%s\"",
		     job->init == HARNESS_INIT_ENV ? "weft_comm_init_env" : "weft_comm_init_rank",
		     weft_status_string(st), (int)st, msg ? msg : "(null)");
	return HARNESS_EXIT_INIT;
}

static int clamp_code(int code)
{
	if (code < 0 || code > HARNESS_EXIT_BODY_MAX)
		return HARNESS_EXIT_BODY_MAX;
	return code;
}

/* capture_stderr: this rank's standard error goes to its own file. */
static void capture_stderr(int rank)
{
	if (!g_log_dir[0])
		return;
	char path[sizeof(g_log_dir) + 32];
	snprintf(path, sizeof(path), "%s/rank%d.log", g_log_dir, rank);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
	if (fd >= 0) {
		fflush(stderr);
		dup2(fd, STDERR_FILENO);
		close(fd);
	}
}

/* A rank process, as the shared launcher started it (it dies with the
 * parent; its environment has WEFT_RANK, ..., WEFT_ROOT in HARNESS_INIT_ENV). */
static void rank_main(const struct harness_job *job, struct weft_local_job *lj, int rank)
{
	/* A rank killed by SIGPIPE is a library bug; keep the default so it shows. */
	signal(SIGPIPE, SIG_DFL);
	g_rank = rank;
	capture_stderr(rank);

	int code = apply_env(job->env) ? HARNESS_EXIT_SETUP : 0;
	weft_unique_id_t id;
	memset(&id, 0, sizeof(id));
	if (code == 0)
		code = get_id(lj, rank, &id);
	weft_local_free(lj); /* rank 0 failed early: the others see EOF */
	if (code == 0 && job->before_init)
		code = job->before_init(rank, job->nranks, &id, job->arg);

	weft_comm_t comm = NULL;
	if (code == 0)
		code = init_comm(job, rank, &id, &comm);
	if (code == 0 && comm) {
		if (job->body) {
			harness_progress("body");
			code = clamp_code(job->body(comm, rank, job->nranks, job->arg));
		}
		harness_progress("weft_comm_destroy");
		weft_status_t st = weft_comm_destroy(comm);
		if (st != WEFT_SUCCESS && code == 0)
			code = harness_fail("weft_comm_destroy: %s", weft_status_string(st));
		if (job->after_destroy) {
			int after = clamp_code(job->after_destroy(rank, job->nranks, job->arg));
			code = code ? code : after;
		}
	}
	harness_progress("exited with %d", code);
	fflush(NULL);
	_exit(code);
}

/* --- parent --- */

static void append(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void append(char *buf, size_t cap, const char *fmt, ...)
{
	size_t used = strlen(buf);
	if (used + 1 >= cap)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf + used, cap - used, fmt, ap);
	va_end(ap);
}

static void summarise(struct harness_result *res, double timeout_s)
{
	res->ok = true;
	res->summary[0] = '\0';
	for (int r = 0; r < res->nranks; r++) {
		const struct harness_rank_result *rr = &res->rank[r];
		switch (rr->end) {
		case HARNESS_NOT_STARTED: continue;
		case HARNESS_EXITED:
			if (rr->code == 0)
				continue;
			append(res->summary, sizeof(res->summary), "rank %d exited %d after %.1f s",
			       r, rr->code, rr->seconds);
			break;
		case HARNESS_SIGNALED:
			append(res->summary, sizeof(res->summary),
			       "rank %d killed by signal %d (%s) after %.1f s", r, rr->code,
			       strsignal(rr->code), rr->seconds);
			break;
		case HARNESS_HUNG:
			append(res->summary, sizeof(res->summary),
			       "rank %d HUNG (killed at the %.0f s deadline)", r, timeout_s);
			break;
		}
		res->ok = false;
		if (rr->failure[0])
			append(res->summary, sizeof(res->summary), ": %s", rr->failure);
		if (rr->progress[0] && rr->end != HARNESS_EXITED)
			append(res->summary, sizeof(res->summary), " [last step: %s]",
			       rr->progress);
		append(res->summary, sizeof(res->summary), "\n");
	}
	if (res->ok)
		snprintf(res->summary, sizeof(res->summary), "all %d ranks succeeded in %.1f s",
			 res->nranks, res->seconds);
}

/* How each rank ended, as the shared launcher saw it. */
static void copy_ends(struct harness_result *res, const struct weft_local_job *lj)
{
	static const enum harness_end ends[] = {
	    [WEFT_LOCAL_NOT_STARTED] = HARNESS_NOT_STARTED,
	    [WEFT_LOCAL_RUNNING] = HARNESS_HUNG,
	    [WEFT_LOCAL_EXITED] = HARNESS_EXITED,
	    [WEFT_LOCAL_SIGNALED] = HARNESS_SIGNALED,
	    [WEFT_LOCAL_HUNG] = HARNESS_HUNG,
	};
	for (int r = 0; r < lj->nranks && lj->ranks; r++) {
		const struct weft_local_rank *k = &lj->ranks[r];
		res->rank[r].pid = k->pid;
		res->rank[r].end = ends[k->end];
		res->rank[r].code = k->code;
		res->rank[r].seconds = k->seconds;
	}
}

static void copy_notes(struct harness_result *res, const struct shared_page *shared)
{
	memcpy(res->shared, shared->user, HARNESS_SHARED_BYTES);
	for (int r = 0; r < res->nranks; r++) {
		memcpy(res->rank[r].failure, shared->slot[r].failure, HARNESS_NOTE_BYTES);
		memcpy(res->rank[r].progress, shared->slot[r].progress, HARNESS_NOTE_BYTES);
		res->rank[r].failure[HARNESS_NOTE_BYTES - 1] = '\0';
		res->rank[r].progress[HARNESS_NOTE_BYTES - 1] = '\0';
	}
}

/* The whole of @p path into a new string ("" if it is empty or missing). */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap);
	while (buf && f) {
		size_t n = fread(buf + len, 1, cap - len - 1, f);
		len += n;
		if (n == 0)
			break;
		if (len + 1 == cap) {
			char *more = realloc(buf, cap * 2);
			if (!more)
				break;
			buf = more;
			cap *= 2;
		}
	}
	if (f)
		fclose(f);
	if (buf)
		buf[len] = '\0';
	return buf;
}

/* capture_stderr, after the job: each rank's log into the result and onto
 * this process's standard error (the suite's log keeps it), then the
 * files go. */
static void collect_logs(struct harness_result *res)
{
	for (int r = 0; r < res->nranks; r++) {
		char path[sizeof(g_log_dir) + 32];
		snprintf(path, sizeof(path), "%s/rank%d.log", g_log_dir, r);
		res->rank[r].log = slurp(path);
		if (res->rank[r].log)
			fputs(res->rank[r].log, stderr);
		unlink(path);
	}
	rmdir(g_log_dir);
	g_log_dir[0] = '\0';
}

void harness_result_free(struct harness_result *res)
{
	for (int r = 0; r < HARNESS_MAX_RANKS; r++) {
		free(res->rank[r].log);
		res->rank[r].log = NULL;
	}
}

bool harness_log_line(const struct harness_result *res, int rank, char *line, size_t cap, ...)
{
	const char *log = rank >= 0 && rank < res->nranks ? res->rank[rank].log : NULL;
	for (const char *p = log; p && *p;) {
		const char *end = strchr(p, '\n');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		bool all = true;
		va_list ap;
		va_start(ap, cap);
		for (const char *needle; all && (needle = va_arg(ap, const char *));)
			all = memmem(p, len, needle, strlen(needle)) != NULL;
		va_end(ap);
		if (all) {
			if (line && cap)
				snprintf(line, cap, "%.*s", (int)len, p);
			return true;
		}
		p = end ? end + 1 : p + len;
	}
	return false;
}

void harness_run_job(const struct harness_job *job, struct harness_result *res)
{
	memset(res, 0, sizeof(*res));
	res->nranks = job->nranks;
	if (job->nranks < 1 || job->nranks > HARNESS_MAX_RANKS || (job->absent_ranks & 1u)) {
		snprintf(res->summary, sizeof(res->summary),
			 "harness: bad job (nranks %d, absent mask 0x%x)", job->nranks,
			 job->absent_ranks);
		return;
	}
	struct shared_page *shared =
	    mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED) {
		snprintf(res->summary, sizeof(res->summary), "harness: mmap: %s", strerror(errno));
		return;
	}
	/* No grace period: a test decides how long survivors of a failure
	 * may take (its own timeouts); only the deadline ends them. */
	struct weft_local_job lj = {
	    .nranks = job->nranks,
	    .id = job->init == HARNESS_INIT_ENV ? WEFT_LOCAL_ID_ENV : WEFT_LOCAL_ID_PIPE,
	    .grace_s = -1,
	    .timeout_s = job->timeout_s,
	    .skip = job->absent_ranks,
	};
	struct shared_page *saved = g_shared;
	char why[256];
	int rank;
	g_shared = shared;
	if (job->capture_stderr) {
		snprintf(g_log_dir, sizeof(g_log_dir), "/tmp/weft-harness.XXXXXX");
		if (!mkdtemp(g_log_dir))
			g_log_dir[0] = '\0';
	}
	if (weft_local_start(&lj, &rank, why, sizeof(why)) != WEFT_SUCCESS) {
		snprintf(res->summary, sizeof(res->summary), "harness: %s", why);
	} else {
		if (rank >= 0)
			rank_main(job, &lj, rank);
		weft_local_wait(&lj);
		res->seconds = harness_now() - lj.t0;
		copy_ends(res, &lj);
		copy_notes(res, shared);
		summarise(res, job->timeout_s);
	}
	if (g_log_dir[0])
		collect_logs(res);
	weft_local_free(&lj);
	g_shared = saved;
	munmap(shared, sizeof(*shared));
}

void harness_run(int nranks, const char *const env[], harness_body_fn body, void *arg,
		 double timeout_s, struct harness_result *res)
{
	struct harness_job job = {
	    .nranks = nranks,
	    .env = env,
	    .body = body,
	    .arg = arg,
	    .timeout_s = timeout_s,
	};
	harness_run_job(&job, res);
}

bool harness_pid_socket(pid_t pid, unsigned long inode)
{
	char dir[64];
	snprintf(dir, sizeof(dir), "/proc/%ld/fd", (long)pid);
	DIR *d = opendir(dir);
	bool found = false;
	struct dirent *e;
	while (d && !found && (e = readdir(d))) {
		char path[64 + sizeof(e->d_name)], link[64];
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
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

bool harness_own_socket(unsigned long inode)
{
	return harness_pid_socket(getpid(), inode);
}

unsigned harness_listen_port_of(pid_t pid, unsigned except)
{
	const char *files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
	unsigned port = 0;
	for (int f = 0; f < 2 && !port; f++) {
		FILE *fp = fopen(files[f], "r");
		char line[512];
		while (fp && !port && fgets(line, sizeof(line), fp)) {
			char state[8];
			unsigned long inode;
			unsigned p;
			if (sscanf(line, "%*s %*[0-9A-Fa-f]:%x %*s %7s %*s %*s %*s %*s %*s %lu", &p,
				   state, &inode) == 3 &&
			    strcmp(state, "0A") == 0 && p != except &&
			    harness_pid_socket(pid, inode))
				port = p;
		}
		if (fp)
			fclose(fp);
	}
	return port;
}

int harness_count_in_file(const char *path, const char *needle)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	char line[1024];
	int n = 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, needle) != NULL;
	fclose(f);
	return n;
}

bool harness_mentions(const char *msg, const char *word)
{
	for (const char *p = msg; p && *p; p++) {
		size_t k = 0;
		while (word[k] && tolower((unsigned char)p[k]) == tolower((unsigned char)word[k]))
			k++;
		if (!word[k])
			return true;
	}
	return msg && !*word;
}

int harness_expect_invalid(weft_comm_t comm, weft_status_t st, const char *call, const char *says,
			   const char *also)
{
	const char *msg = comm ? weft_comm_last_error(comm) : weft_init_last_error();
	if (st != WEFT_ERR_INVALID_ARG)
		return harness_fail(
		    "%s: returned %s (%d), expected invalid argument; message \"%s\"", call,
		    weft_status_string(st), (int)st, msg ? msg : "(null)");
	if (!harness_mentions(msg, says) || (also && !harness_mentions(msg, also)))
		return harness_fail("%s: message \"%s\" does not say \"%s\"%s%s", call,
				    msg ? msg : "(null)", says, also ? " and " : "",
				    also ? also : "");
	return 0;
}

bool harness_source_path(const char *rel, char *out, size_t cap)
{
	struct stat st;
	snprintf(out, cap, "%s", rel);
	if (stat(out, &st) == 0)
		return true;
	char dir[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
	dir[n > 0 ? n : 0] = '\0';
	for (char *slash; (slash = strrchr(dir, '/')) && slash != dir;) {
		*slash = '\0';
		snprintf(out, cap, "%.3000s/%s", dir, rel);
		if (stat(out, &st) == 0)
			return true;
	}
	return false;
}
