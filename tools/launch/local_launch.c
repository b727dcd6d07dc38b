/*
 * local_launch.c — forking the ranks and handing them the unique id (see
 * local_launch.h); local_wait.c waits for them.
 */
#define _GNU_SOURCE
#include "tools/launch/local_launch.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/launch/local_int.h"

double weft_local_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static weft_status_t fail(char *why, size_t why_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static weft_status_t fail(char *why, size_t why_len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, why_len, fmt, ap);
	va_end(ap);
	return WEFT_ERR_SYSTEM;
}

static bool started(const struct weft_local_job *job, int r)
{
	return r == 0 || r >= 64 || !(job->skip & (1ull << r));
}

/* Bind a loopback TCP socket to @p port (0: any) and return it, its port
 * in *got; -1 if the port is taken. */
static int bind_loopback(int port, int *got)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				 .sin_port = htons((uint16_t)port)};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
			getsockname(fd, (struct sockaddr *)&sa, &len) != 0)) {
		close(fd);
		fd = -1;
	}
	*got = fd >= 0 ? ntohs(sa.sin_port) : 0;
	return fd;
}

/* WEFT_ROOT on a loopback port that was free a moment ago (the root binds
 * it with SO_REUSEADDR) and whose next port was free too: a program that
 * runs torch under weft-run may put its c10d store there
 * (examples/ddp_train.py); and a fresh random key (WEFT_SECRET, 64 hex digits). */
static weft_status_t env_mode_setup(struct weft_local_job *job, char *why, size_t why_len)
{
	unsigned char key[32];
	int port = 0;
	for (int tries = 0; tries < 32; tries++) {
		int next, fd = bind_loopback(0, &port);
		if (fd < 0)
			return fail(why, why_len, "finding a free port: %s", strerror(errno));
		int fd2 = port < 65535 ? bind_loopback(port + 1, &next) : -1;
		close(fd);
		if (fd2 >= 0) {
			close(fd2);
			break;
		}
	}
	if (getrandom(key, sizeof(key), 0) != (ssize_t)sizeof(key))
		return fail(why, why_len, "getrandom: %s", strerror(errno));
	snprintf(job->root, sizeof(job->root), "127.0.0.1:%d", port);
	for (size_t i = 0; i < sizeof(key); i++)
		snprintf(job->secret + 2 * i, sizeof(job->secret) - 2 * i, "%02x", key[i]);
	memset(key, 0, sizeof(key));
	return WEFT_SUCCESS;
}

static void set_env_int(const char *name, int v)
{
	char text[16];
	snprintf(text, sizeof(text), "%d", v);
	setenv(name, text, 1);
}

/* A rank must end when the launcher sends SIGTERM, whatever handlers the
 * caller installed (Check's handler, inherited, would signal the whole test
 * process group): the handled ones go back to their defaults, as exec would
 * do; ignored ones stay ignored, and SIGKILL follows. */
static void default_handlers(void)
{
	static const int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGALRM, SIGCHLD};
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		struct sigaction old;
		if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
			signal(sigs[i], SIG_DFL);
	}
}

/* First thing in a rank process. */
static void rank_enter(struct weft_local_job *job, int r)
{
	/* Never outlive the launcher, whatever ends it; it may have died
	 * between fork and prctl, so check. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != job->parent)
		_exit(1);
	default_handlers();
	pthread_sigmask(SIG_SETMASK, &job->saved_mask, NULL);
	if (job->id == WEFT_LOCAL_ID_PIPE) {
		/* Only rank 0 may hold the write end, so that the others see
		 * EOF when it dies before writing. */
		close(r == 0 ? job->fds[0] : job->fds[1]);
		job->fds[r == 0 ? 0 : 1] = -1;
		return;
	}
	if (job->id != WEFT_LOCAL_ID_ENV)
		return;
	set_env_int("WEFT_RANK", r);
	set_env_int("WEFT_NRANKS", job->nranks);
	set_env_int("WEFT_LOCAL_RANK", r);
	set_env_int("WEFT_LOCAL_SIZE", job->nranks);
	setenv("WEFT_ROOT", job->root, 1);
	setenv("WEFT_SECRET", job->secret, 1);
}

static void close_pipe(struct weft_local_job *job)
{
	for (int i = 0; i < 2; i++) {
		if (job->fds[i] >= 0)
			close(job->fds[i]);
		job->fds[i] = -1;
	}
}

/* The launcher's side of a failed start: end what was forked. */
static weft_status_t abandon(struct weft_local_job *job, int forked, int err, char *why,
			     size_t why_len)
{
	for (int r = 0; r < forked; r++)
		if (job->ranks[r].pid > 0)
			kill(job->ranks[r].pid, SIGKILL);
	for (int r = 0; r < forked; r++)
		if (job->ranks[r].pid > 0)
			while (waitpid(job->ranks[r].pid, NULL, 0) < 0 && errno == EINTR)
				;
	close_pipe(job);
	pthread_sigmask(SIG_SETMASK, &job->saved_mask, NULL);
	return fail(why, why_len, "fork of rank %d: %s", forked, strerror(err));
}

static weft_status_t prepare(struct weft_local_job *job, char *why, size_t why_len)
{
	job->fds[0] = job->fds[1] = -1;
	if (job->nranks < 1)
		return fail(why, why_len, "%d ranks: need at least one", job->nranks);
	job->ranks = calloc((size_t)job->nranks, sizeof(*job->ranks));
	if (!job->ranks)
		return fail(why, why_len, "no memory for %d ranks", job->nranks);
	if (job->id == WEFT_LOCAL_ID_PIPE && pipe(job->fds) != 0)
		return fail(why, why_len, "pipe: %s", strerror(errno));
	if (job->id == WEFT_LOCAL_ID_ENV)
		return env_mode_setup(job, why, why_len);
	return WEFT_SUCCESS;
}

weft_status_t weft_local_start(struct weft_local_job *job, int *rank, char *why, size_t why_len)
{
	*rank = -1;
	weft_status_t st = prepare(job, why, why_len);
	if (st != WEFT_SUCCESS) {
		close_pipe(job);
		return st;
	}
	/* SIGCHLD stays blocked in the launcher so that weft_local_wait()
	 * sleeps until a rank ends instead of polling. */
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &chld, &job->saved_mask);
	job->parent = getpid();
	job->t0 = weft_local_now();
	fflush(NULL);
	for (int r = 0; r < job->nranks; r++) {
		if (!started(job, r))
			continue;
		pid_t pid = fork();
		if (pid < 0)
			return abandon(job, r, errno, why, why_len);
		if (pid == 0) {
			rank_enter(job, r);
			*rank = r;
			return WEFT_SUCCESS;
		}
		job->ranks[r].pid = pid;
		job->ranks[r].end = WEFT_LOCAL_RUNNING;
	}
	close_pipe(job);
	return WEFT_SUCCESS;
}

static bool write_full(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
	}
	return true;
}

static bool read_full(int fd, void *buf, size_t len)
{
	char *p = buf;
	while (len > 0) {
		ssize_t n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
	}
	return true;
}

/* Rank 0: one copy per started rank. A rank that died before reading must
 * not kill rank 0 with SIGPIPE, so that is ignored while writing. */
static weft_status_t send_id(struct weft_local_job *job, const weft_unique_id_t *id, char *why,
			     size_t why_len)
{
	struct sigaction ign = {.sa_handler = SIG_IGN}, old;
	bool ok = true;
	sigaction(SIGPIPE, &ign, &old);
	for (int r = 1; r < job->nranks && ok; r++)
		if (started(job, r))
			ok = write_full(job->fds[1], id, sizeof(*id));
	int err = errno;
	sigaction(SIGPIPE, &old, NULL);
	if (!ok)
		return fail(why, why_len, "writing the unique id to the pipe: %s", strerror(err));
	return WEFT_SUCCESS;
}

weft_status_t weft_local_get_id(struct weft_local_job *job, int rank, weft_unique_id_t *id,
				char *why, size_t why_len)
{
	weft_status_t st = WEFT_SUCCESS;
	memset(id, 0, sizeof(*id));
	if (job->id != WEFT_LOCAL_ID_PIPE)
		return WEFT_SUCCESS;
	if (rank == 0) {
		/* Every rank is on this host: the root stays on loopback rather
		 * than the NIC weft_get_unique_id would pick for a job across
		 * hosts (the ranks' own WEFT_ROOT or WEFT_SOCKET_IFNAME wins). */
		bool pin = !getenv("WEFT_ROOT") && !getenv("WEFT_SOCKET_IFNAME");
		if (pin)
			setenv("WEFT_ROOT", "127.0.0.1:0", 1);
		st = weft_get_unique_id(id);
		if (pin)
			unsetenv("WEFT_ROOT");
		if (st != WEFT_SUCCESS)
			snprintf(why, why_len, "weft_get_unique_id: %s: %s", weft_status_string(st),
				 weft_init_last_error());
		else
			st = send_id(job, id, why, why_len);
	} else if (!read_full(job->fds[0], id, sizeof(*id))) {
		st = fail(why, why_len, "no unique id from rank 0 (it ended before sending it)");
	}
	close_pipe(job);
	return st;
}

void weft_local_free(struct weft_local_job *job)
{
	free(job->ranks);
	job->ranks = NULL;
	close_pipe(job);
}

int weft_local_run(struct weft_local_job *job, weft_local_fn fn, void *arg)
{
	char why[256];
	weft_unique_id_t id;
	int rank;
	if (weft_local_start(job, &rank, why, sizeof(why)) != WEFT_SUCCESS) {
		fprintf(stderr, "%s: %s\n", job->name ? job->name : "weft-launch", why);
		weft_local_free(job);
		return 1;
	}
	if (rank >= 0) {
		if (weft_local_get_id(job, rank, &id, why, sizeof(why)) != WEFT_SUCCESS) {
			fprintf(stderr, "%s: rank %d: %s\n", job->name ? job->name : "weft-launch",
				rank, why);
			_exit(1);
		}
		/* _exit: the caller's atexit handlers are the launcher's, not ours. */
		int code = fn(rank, job->nranks, &id, arg);
		fflush(NULL);
		_exit(code);
	}
	int failed = weft_local_wait(job);
	weft_local_free(job);
	return failed ? 1 : 0;
}

int weft_local_exec(struct weft_local_job *job, char *const argv[])
{
	char why[256];
	int rank;
	job->id = WEFT_LOCAL_ID_ENV;
	if (weft_local_start(job, &rank, why, sizeof(why)) != WEFT_SUCCESS) {
		fprintf(stderr, "%s: %s\n", job->name ? job->name : "weft-launch", why);
		weft_local_free(job);
		return 1;
	}
	if (rank >= 0) {
		execvp(argv[0], argv);
		fprintf(stderr, "%s: rank %d: cannot run %s: %s\n",
			job->name ? job->name : "weft-launch", rank, argv[0], strerror(errno));
		_exit(127);
	}
	int failed = weft_local_wait(job);
	weft_local_free(job);
	return failed ? 1 : 0;
}
