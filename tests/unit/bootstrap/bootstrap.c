/*
 * bootstrap.c — the bootstrap on its own: a root thread in this
 * process, ranks in forked children, strangers on raw sockets. Everything
 * binds and connects to 127.0.0.1 only.
 *
 * Children never call Check; each writes what happened into a shared slot
 * and the parent asserts. Every child arms alarm() so a hang kills it rather
 * than the suite (with SIGALRM's default action: Check's handler, which a
 * forked child inherits, would SIGKILL the test's whole process group).
 *
 * Ranks are started by fork and exec of this program (main's --rank form),
 * never by fork alone: by then the test process has the root's thread, and
 * a child forked from a threaded process inherits every lock one of its
 * threads held at that instant (ASan's allocator's, stdio's, the
 * library's) with no thread left to release it; it hung at its first
 * malloc under ASan. The slots are a memfd, which the exec'd rank maps.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zlib.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/bootstrap_wire.h"
#include "harness.h"
#include "stranger.h"

#define MAX_SLOTS	16
#define SHORT_TIMEOUT_S 1.5

struct slot {
	int status;
	int verified; /* every gathered byte was right */
	double elapsed;
	char msg[WEFT_ERR_MSG_BYTES];
};

enum rank_mode {
	MODE_GATHER,	   /* three allgathers of distinct blocks, a barrier */
	MODE_JOIN,	   /* join and report */
	MODE_MISMATCH,	   /* rank 1 passes a different size */
	MODE_LEAVE,	   /* the last rank exits without closing */
	MODE_LINGER,	   /* join, allgather, stay 0.6 s, barrier */
	MODE_BIG,	   /* an allgather of 300,000-byte blocks (relayed in pieces) */
	MODE_RELAY_LEAVES, /* rank 1 (a relay when the fan-out is 1) exits after the join */
};

struct job {
	struct weft_uid uid;
	int nranks;
	double timeout_s;
	enum rank_mode mode;
};

static struct slot *slots;
static int slots_fd = -1; /* a memfd, inherited across exec by the ranks */

#define SLOTS_BYTES (MAX_SLOTS * sizeof(struct slot))

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_s(double s)
{
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};

	nanosleep(&ts, NULL);
}

static void slots_setup(void)
{
	slots_fd = memfd_create("bootstrap-slots", 0);
	ck_assert_int_ge(slots_fd, 0);
	ck_assert_int_eq(ftruncate(slots_fd, SLOTS_BYTES), 0);
	slots = mmap(NULL, SLOTS_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, slots_fd, 0);
	ck_assert_ptr_ne(slots, MAP_FAILED);
	memset(slots, 0, MAX_SLOTS * sizeof(*slots));
	for (int i = 0; i < MAX_SLOTS; i++)
		slots[i].status = 1; /* "never reported" */
}

static void slots_teardown(void)
{
	munmap(slots, SLOTS_BYTES);
	close(slots_fd);
	slots_fd = -1;
}

static struct sockaddr_in loopback(uint16_t port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

static void start_root(double timeout_s, uint64_t secret, uint16_t port, struct weft_uid *uid)
{
	struct sockaddr_in a = loopback(port);
	struct weft_err err = {0};
	struct weft_key key;
	weft_status_t rc;

	weft_key_from_u64(&key, secret);
	rc =
	    weft_bootstrap_root_start((struct sockaddr *)&a, sizeof(a), &key, timeout_s, uid, &err);
	ck_assert_msg(rc == WEFT_SUCCESS, "root_start: %s", err.msg);
}

static unsigned char pattern(int rank, int op, size_t i)
{
	return (unsigned char)(rank * 31 + op * 7 + i * 13 + 1);
}

static bool gather_check(struct weft_bootstrap *bs, int rank, int nranks, int op, size_t bytes,
			 struct weft_err *err)
{
	unsigned char *buf = calloc((size_t)nranks, bytes);
	bool ok;

	for (size_t i = 0; i < bytes; i++)
		buf[(size_t)rank * bytes + i] = pattern(rank, op, i);
	ok = weft_bootstrap_allgather(bs, buf, bytes, err) == WEFT_SUCCESS;
	for (int r = 0; ok && r < nranks; r++)
		for (size_t i = 0; ok && i < bytes; i++)
			ok = buf[(size_t)r * bytes + i] == pattern(r, op, i);
	free(buf);
	return ok;
}

static void rank_body(const struct job *job, int rank, struct slot *s)
{
	struct weft_err err = {0};
	struct weft_bootstrap *bs = NULL;
	double t0 = now_s();
	weft_status_t rc;
	bool ok = true;

	rc = weft_bootstrap_join(&job->uid, rank, job->nranks, job->timeout_s, &bs, &err);
	if (rc != WEFT_SUCCESS)
		goto report;
	switch (job->mode) {
	case MODE_GATHER: {
		static const size_t sizes[] = {8, 1000, 70001};

		for (int op = 0; ok && op < 3; op++)
			ok = gather_check(bs, rank, job->nranks, op, sizes[op], &err);
		ok = ok && weft_bootstrap_barrier(bs, &err) == WEFT_SUCCESS;
		break;
	}
	case MODE_JOIN: break;
	case MODE_MISMATCH: {
		char buf[16 * MAX_SLOTS];

		ok = weft_bootstrap_allgather(bs, buf, rank == 1 ? 8 : 16, &err) == WEFT_SUCCESS;
		break;
	}
	case MODE_LEAVE:
		if (rank == job->nranks - 1)
			_exit(0); /* the kernel closes the socket; no goodbye */
		sleep_s(0.1);
		ok = gather_check(bs, rank, job->nranks, 0, 8, &err);
		break;
	case MODE_BIG: ok = gather_check(bs, rank, job->nranks, 0, 300000, &err); break;
	case MODE_RELAY_LEAVES:
		if (rank == 1)
			_exit(0);
		ok = gather_check(bs, rank, job->nranks, 0, 8, &err);
		break;
	case MODE_LINGER:
		ok = gather_check(bs, rank, job->nranks, 0, 24, &err);
		sleep_s(0.6);
		ok = ok && weft_bootstrap_barrier(bs, &err) == WEFT_SUCCESS;
		break;
	}
	weft_bootstrap_close(bs);
report:
	s->elapsed = now_s() - t0;
	s->status = err.status;
	s->verified = ok && rc == WEFT_SUCCESS;
	memcpy(s->msg, err.msg, sizeof(s->msg));
}

/* Start one rank (fork and exec: see the top); it reports into slots[slot].
 * Its arguments are made before the fork: between fork and exec the child
 * of a threaded process may only call async-signal-safe functions. */
static pid_t spawn_rank(const struct job *job, int rank, int slot)
{
	char fd[16], r[16], sl[16], hex[2 * sizeof(*job) + 1];
	char *argv[] = {"bootstrap", "--rank", fd, r, sl, hex, NULL};
	const unsigned char *b = (const unsigned char *)job;

	snprintf(fd, sizeof(fd), "%d", slots_fd);
	snprintf(r, sizeof(r), "%d", rank);
	snprintf(sl, sizeof(sl), "%d", slot);
	for (size_t i = 0; i < sizeof(*job); i++)
		snprintf(hex + 2 * i, 3, "%02x", b[i]);
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	return pid;
}

/* main's --rank FD RANK SLOT JOB: one rank, as spawn_rank started it. */
static int rank_main(char **argv)
{
	struct job job;
	int rank = atoi(argv[3]), slot = atoi(argv[4]);
	const char *hex = argv[5];
	unsigned char *b = (unsigned char *)&job;

	if (strlen(hex) != 2 * sizeof(job) || slot < 0 || slot >= MAX_SLOTS)
		return 126;
	for (size_t i = 0; i < sizeof(job); i++)
		if (sscanf(hex + 2 * i, "%2hhx", &b[i]) != 1)
			return 126;
	slots = mmap(NULL, SLOTS_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, atoi(argv[2]), 0);
	if (slots == MAP_FAILED)
		return 126;
	alarm(8);
	rank_body(&job, rank, &slots[slot]);
	return 0;
}

static void reap(const pid_t *pids, int n)
{
	for (int i = 0; i < n; i++) {
		int st = 0;

		if (pids[i] <= 0)
			continue;
		ck_assert_int_eq(waitpid(pids[i], &st, 0), pids[i]);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d died (status 0x%x)",
			      i, st);
	}
}

static void run_job(int nranks, enum rank_mode mode, double timeout_s)
{
	struct job job = {.nranks = nranks, .timeout_s = timeout_s, .mode = mode};
	pid_t pids[MAX_SLOTS] = {0};

	start_root(timeout_s, 0x1234abcd5678ef01ull ^ (uint64_t)nranks, 0, &job.uid);
	for (int r = 0; r < nranks; r++)
		pids[r] = spawn_rank(&job, r, r);
	reap(pids, nranks);
}

static void assert_all_verified(int nranks)
{
	for (int r = 0; r < nranks; r++)
		ck_assert_msg(slots[r].verified && slots[r].status == WEFT_SUCCESS,
			      "rank %d: status %d: %s", r, slots[r].status, slots[r].msg);
}

START_TEST(test_uid_check)
{
	struct weft_uid uid, bad;
	struct weft_err err = {0};

	ck_assert_uint_le(sizeof(struct weft_uid), sizeof(weft_unique_id_t));
	start_root(0.5, 42, 0, &uid);
	ck_assert_int_eq(uid.addr.sa.sa_family, AF_INET);
	ck_assert_uint_ne(ntohs(uid.addr.in4.sin_port), 0);
	ck_assert_int_eq(weft_bootstrap_uid_check(&uid, &err), WEFT_SUCCESS);

	bad = uid;
	bad.magic ^= 0x10;
	ck_assert_int_eq(weft_bootstrap_uid_check(&bad, &err), WEFT_ERR_INVALID_ARG);
	ck_assert_msg(strstr(err.msg, "unique id is invalid (bad magic"), "%s", err.msg);

	bad = uid;
	bad.version = 7;
	weft_err_clear(&err);
	ck_assert_int_eq(weft_bootstrap_uid_check(&bad, &err), WEFT_ERR_INVALID_ARG);

	bad = uid;
	bad.addr.sa.sa_family = AF_UNIX;
	weft_err_clear(&err);
	ck_assert_int_eq(weft_bootstrap_uid_check(&bad, &err), WEFT_ERR_INVALID_ARG);

	bad = uid;
	bad.addr_len = 3;
	weft_err_clear(&err);
	ck_assert_int_eq(weft_bootstrap_uid_check(&bad, &err), WEFT_ERR_INVALID_ARG);

	/* join refuses a corrupted id before touching the network */
	{
		struct weft_bootstrap *bs = (struct weft_bootstrap *)1;

		bad = uid;
		memset(&bad, 0xa5, 16);
		weft_err_clear(&err);
		ck_assert_int_eq(weft_bootstrap_join(&bad, 0, 1, 1.0, &bs, &err),
				 WEFT_ERR_INVALID_ARG);
		ck_assert_ptr_null(bs);
	}
}
END_TEST

START_TEST(test_gather_1)
{
	run_job(1, MODE_GATHER, 5.0);
	assert_all_verified(1);
}
END_TEST

START_TEST(test_gather_3)
{
	run_job(3, MODE_GATHER, 5.0);
	assert_all_verified(3);
}
END_TEST

START_TEST(test_gather_8)
{
	run_job(8, MODE_GATHER, 5.0);
	assert_all_verified(8);
}
END_TEST

static int connect_raw(const struct weft_uid *uid)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, &uid->addr.sa, uid->addr_len), 0);
	return fd;
}

/*
 * The door closes once the job is complete: while its ranks still linger
 * in the job (0.6 s after their allgather), a new connection to the root
 * is refused. Before the fix the listener stayed open until every rank
 * had left, so the refusal came only after they exited.
 */
START_TEST(test_door_closes)
{
	struct job job = {.nranks = 2, .timeout_s = 5.0, .mode = MODE_LINGER};
	pid_t pids[2];
	bool refused = false;

	start_root(5.0, 0x1234567812345678ull, 0, &job.uid);
	for (int r = 0; r < 2; r++)
		pids[r] = spawn_rank(&job, r, r);
	for (int i = 0; i < 1000 && !refused; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		ck_assert_int_ge(fd, 0);
		refused = connect(fd, &job.uid.addr.sa, job.uid.addr_len) != 0;
		close(fd);
		if (!refused)
			sleep_s(0.005);
	}
	ck_assert_msg(refused, "the root still accepts connections");
	int alive = 0;
	for (int r = 0; r < 2; r++)
		alive += waitpid(pids[r], NULL, WNOHANG) == 0;
	ck_assert_msg(alive == 2, "the door closed only after %d rank(s) had left", 2 - alive);
	reap(pids, 2);
	for (int r = 0; r < 2; r++)
		ck_assert_msg(slots[r].verified, "rank %d: %s", r, slots[r].msg);
}
END_TEST

/*
 * Strangers: garbage, silence, a wrong key, a duplicate rank and a wrong
 * nranks. The three real ranks still initialise and gather; the wrong-key
 * rank finds that the root fails its authentication (it cannot tell a
 * stale id from an impostor's listener), the others are told why.
 */
START_TEST(test_strangers)
{
	struct job job = {.nranks = 3, .timeout_s = 5.0, .mode = MODE_LINGER};
	struct job wrong_key, wrong_size;
	unsigned char garbage[64];
	pid_t pids[MAX_SLOTS] = {0};
	int garbage_fd, silent_fd;

	start_root(5.0, 0xfeedfacecafebeefull, 0, &job.uid);
	memset(garbage, 0xff, sizeof(garbage)); /* reads as a frame of 2^64-1 bytes */
	garbage_fd = connect_raw(&job.uid);
	ck_assert_int_eq(send(garbage_fd, garbage, sizeof(garbage), MSG_NOSIGNAL),
			 (ssize_t)sizeof(garbage));
	silent_fd = connect_raw(&job.uid);

	wrong_key = job;
	wrong_key.uid.key.b[0] ^= 1;
	wrong_key.mode = MODE_JOIN;
	pids[0] = spawn_rank(&wrong_key, 0, 0);

	for (int r = 0; r < 2; r++)
		pids[1 + r] = spawn_rank(&job, r, 1 + r);
	pids[4] = spawn_rank(&job, 1, 4); /* a second rank 1 */
	sleep_s(0.2);			  /* the job's nranks is known by now */
	wrong_size = job;
	wrong_size.nranks = 4;
	wrong_size.mode = MODE_JOIN;
	pids[5] = spawn_rank(&wrong_size, 3, 5);
	sleep_s(0.2); /* before the job is complete: once it is, the door is closed */
	pids[3] = spawn_rank(&job, 2, 3);
	reap(pids, 6);
	close(garbage_fd);
	close(silent_fd);

	ck_assert_int_eq(slots[0].status, WEFT_ERR_REMOTE);
	ck_assert_msg(strstr(slots[0].msg, "failed authentication"), "%s", slots[0].msg);
	ck_assert_msg(slots[0].elapsed < 1.0, "the wrong key took %.2f s", slots[0].elapsed);

	/* one of the two rank 1s was refused, the other gathered */
	{
		int refused = slots[2].status != WEFT_SUCCESS ? 2 : 4;
		int kept = refused == 2 ? 4 : 2;

		ck_assert_msg(strstr(slots[refused].msg, "rank 1 already joined"), "%s",
			      slots[refused].msg);
		ck_assert_msg(slots[kept].verified, "rank 1: %s", slots[kept].msg);
		slots[2] = slots[kept];
	}
	ck_assert_int_eq(slots[5].status, WEFT_ERR_INVALID_ARG);
	ck_assert_msg(strstr(slots[5].msg, "says nranks 4"), "%s", slots[5].msg);
	for (int r = 0; r < 3; r++)
		ck_assert_msg(slots[1 + r].verified, "rank %d: %s", r, slots[1 + r].msg);
}
END_TEST

START_TEST(test_missing_rank)
{
	struct job job = {.nranks = 4, .timeout_s = SHORT_TIMEOUT_S, .mode = MODE_JOIN};
	pid_t pids[MAX_SLOTS] = {0};

	start_root(SHORT_TIMEOUT_S, 7, 0, &job.uid);
	for (int r = 0; r < 4; r++)
		if (r != 2)
			pids[r] = spawn_rank(&job, r, r);
	reap(pids, 4);
	for (int r = 0; r < 4; r++) {
		if (r == 2)
			continue;
		ck_assert_msg(slots[r].status == WEFT_ERR_TIMEOUT, "rank %d: %d %s", r,
			      slots[r].status, slots[r].msg);
		ck_assert_msg(strstr(slots[r].msg, "rank 2 did not join within 1.5 s"), "%s",
			      slots[r].msg);
		ck_assert_msg(slots[r].elapsed < SHORT_TIMEOUT_S + 1.0, "rank %d took %.2f s", r,
			      slots[r].elapsed);
	}
}
END_TEST

START_TEST(test_member_died)
{
	/* A shrink's root knows the pids of the members on its host: one that
	 * died before it joined fails the job at once, named, not at the
	 * join's timeout (10 s here). Rank 0 comes first and is told; ranks 1
	 * and 3 come after the job failed and are told the same (the root
	 * stays for them: it once closed, and they found no listener). */
	struct job job = {.nranks = 4, .timeout_s = 10.0, .mode = MODE_JOIN};
	pid_t pids[MAX_SLOTS] = {0};
	pid_t dead = fork();
	ck_assert_int_ge(dead, 0);
	if (dead == 0)
		_exit(0);
	ck_assert_int_eq(waitpid(dead, NULL, 0), dead); /* reaped: the pid is gone */
	struct sockaddr_in a = loopback(0);
	struct weft_err err = {0};
	struct weft_key key;
	int fd = -1;
	weft_key_from_u64(&key, 7);
	ck_assert_int_eq(
	    weft_bootstrap_root_listen((struct sockaddr *)&a, sizeof(a), &fd, &job.uid, &err),
	    WEFT_SUCCESS);
	int64_t member_pids[4] = {0, 0, dead, 0};
	ck_assert_msg(weft_bootstrap_root_serve(fd, &key, NULL, 10.0, member_pids, 4, &err) ==
			  WEFT_SUCCESS,
		      "root_serve: %s", err.msg);
	job.uid.reserved = WEFT_UID_LISTENING;
	job.uid.key = key;
	pids[0] = spawn_rank(&job, 0, 0);
	reap(pids, 1);
	pids[1] = spawn_rank(&job, 1, 1);
	pids[3] = spawn_rank(&job, 3, 3);
	reap(pids + 1, 3);
	char want[80];
	snprintf(want, sizeof(want), "rank 2 (pid %d on this host) died before it joined",
		 (int)dead);
	for (int r = 0; r < 4; r++) {
		if (r == 2)
			continue;
		ck_assert_msg(slots[r].status == WEFT_ERR_REMOTE, "rank %d: %d %s", r,
			      slots[r].status, slots[r].msg);
		ck_assert_msg(strstr(slots[r].msg, want), "rank %d: %s", r, slots[r].msg);
		ck_assert_msg(slots[r].elapsed < 3.0, "rank %d took %.2f s", r, slots[r].elapsed);
	}
}
END_TEST

START_TEST(test_size_mismatch)
{
	run_job(3, MODE_MISMATCH, 5.0);
	for (int r = 0; r < 3; r++) {
		ck_assert_msg(slots[r].status == WEFT_ERR_INVALID_ARG, "rank %d: %d %s", r,
			      slots[r].status, slots[r].msg);
		ck_assert_msg(strstr(slots[r].msg, "allgather #0") &&
				  strstr(slots[r].msg, "rank 1"),
			      "%s", slots[r].msg);
		ck_assert_msg(slots[r].elapsed < 1.0, "rank %d took %.2f s", r, slots[r].elapsed);
	}
}
END_TEST

START_TEST(test_rank_leaves)
{
	run_job(3, MODE_LEAVE, 5.0);
	for (int r = 0; r < 2; r++) {
		ck_assert_msg(slots[r].status == WEFT_ERR_REMOTE, "rank %d: %d %s", r,
			      slots[r].status, slots[r].msg);
		ck_assert_msg(strstr(slots[r].msg, "rank 2 left the bootstrap"), "%s",
			      slots[r].msg);
	}
}
END_TEST

/* Ranks that start before the root listens keep retrying the connection. */
START_TEST(test_root_late)
{
	struct job job = {.nranks = 2, .timeout_s = 5.0, .mode = MODE_GATHER};
	struct weft_uid again;
	pid_t pids[MAX_SLOTS] = {0};
	uint16_t port;

	start_root(0.2, 99, 0, &job.uid); /* only to learn a free port: gone in 0.2 s */
	port = ntohs(job.uid.addr.in4.sin_port);
	sleep_s(0.4);
	for (int r = 0; r < 2; r++)
		pids[r] = spawn_rank(&job, r, r);
	sleep_s(0.3);
	start_root(5.0, 99, port, &again);
	ck_assert_mem_eq(&again, &job.uid, sizeof(again));
	reap(pids, 2);
	assert_all_verified(2);
}
END_TEST

START_TEST(test_no_root)
{
	struct weft_uid uid;
	struct weft_err err = {0};
	struct weft_bootstrap *bs = NULL;
	double t0;

	start_root(0.1, 5, 0, &uid);
	sleep_s(0.3); /* the root gave up: nobody listens on the port now */
	t0 = now_s();
	ck_assert_int_eq(weft_bootstrap_join(&uid, 0, 2, 0.3, &bs, &err), WEFT_ERR_TIMEOUT);
	ck_assert_msg(strstr(err.msg, "rank 0: bootstrap: connect to root 127.0.0.1:"), "%s",
		      err.msg);
	ck_assert_double_lt(now_s() - t0, 1.0);
	ck_assert_ptr_null(bs);
}
END_TEST

/* A root that never answers: the rank names it and its own timeout. */
START_TEST(test_silent_root)
{
	struct sockaddr_in a = loopback(0);
	socklen_t len = sizeof(a);
	struct weft_uid uid;
	struct weft_err err = {0};
	struct weft_bootstrap *bs = NULL;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(fd, 4), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	start_root(0.1, 5, 0, &uid); /* a valid id, pointed at the silent listener */
	memcpy(&uid.addr.in4, &a, sizeof(a));
	ck_assert_int_eq(weft_bootstrap_join(&uid, 1, 2, 0.3, &bs, &err), WEFT_ERR_TIMEOUT);
	ck_assert_msg(strstr(err.msg, "rank 1: bootstrap: no answer from root 127.0.0.1:"), "%s",
		      err.msg);
	close(fd);
}
END_TEST

/* The relay tree's shapes: a chain (fan-out 1: every result passes
 * through every rank, and a 2.4 MB one in pieces), an uneven binary tree,
 * and the root sending to every rank itself (fan-out past the job). */
static void run_fanout(const char *fanout, int nranks, enum rank_mode mode)
{
	setenv("WEFT_BOOTSTRAP_FANOUT", fanout, 1);
	run_job(nranks, mode, 5.0);
	unsetenv("WEFT_BOOTSTRAP_FANOUT");
	assert_all_verified(nranks);
}

START_TEST(test_relay_chain)
{
	run_fanout("1", 6, MODE_GATHER);
}
END_TEST

START_TEST(test_relay_chain_big)
{
	run_fanout("1", 8, MODE_BIG);
}
END_TEST

START_TEST(test_relay_binary)
{
	run_fanout("2", 13, MODE_GATHER);
}
END_TEST

START_TEST(test_relay_star)
{
	run_fanout("100", 5, MODE_GATHER);
}
END_TEST

/* A relay that dies after the join: the ranks below it are cut off from
 * the results, and every rank fails naming it, well before the timeout. */
START_TEST(test_relay_leaves)
{
	setenv("WEFT_BOOTSTRAP_FANOUT", "1", 1);
	run_job(4, MODE_RELAY_LEAVES, 5.0);
	unsetenv("WEFT_BOOTSTRAP_FANOUT");
	for (int r = 0; r < 4; r++) {
		if (r == 1)
			continue;
		ck_assert_msg(slots[r].status == WEFT_ERR_REMOTE, "rank %d: %d %s", r,
			      slots[r].status, slots[r].msg);
		ck_assert_msg(strstr(slots[r].msg, "rank 1 left the bootstrap"), "rank %d: %s", r,
			      slots[r].msg);
		ck_assert_msg(slots[r].elapsed < 2.5, "rank %d took %.2f s", r, slots[r].elapsed);
	}
}
END_TEST

/*
 * Strangers at a rank's relay listener, there before its child: garbage, a
 * handshake made with another key, one that says nothing, and 200 more
 * silent ones (more than WEFT_MAX_PENDING): the door serves them all at
 * once, the oldest giving up their place, so the child links in at once
 * and the job gathers well within its 6 s. Each stranger's socket is closed
 * by rank 0 by the end (EOF), which shows they reached its door.
 */
#define RELAY_STRANGERS 203

static bool closed_by_peer(int fd)
{
	char c;
	struct pollfd p = {.fd = fd, .events = POLLIN};
	return poll(&p, 1, 2000) == 1 && recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

START_TEST(test_relay_strangers)
{
	struct job job = {.nranks = 2, .timeout_s = 6.0, .mode = MODE_GATHER};
	struct join join = {.nranks = 2};
	pid_t pids[2];
	unsigned port = 0;
	int *fds = calloc(RELAY_STRANGERS, sizeof(int));

	ck_assert_ptr_nonnull(fds);
	setenv("WEFT_BOOTSTRAP_FANOUT", "1", 1);
	start_root(6.0, 0x5151515151515151ull, 0, &job.uid);
	unsetenv("WEFT_BOOTSTRAP_FANOUT");
	pids[0] = spawn_rank(&job, 0, 0); /* its child, rank 1, comes later */
	for (int i = 0; i < 300 && !port; i++) {
		port = harness_listen_port_of(pids[0], ntohs(job.uid.addr.in4.sin_port));
		if (!port)
			sleep_s(0.01);
	}
	ck_assert_msg(port, "rank 0's relay listener not found");
	fds[0] = stranger_dial(port, STRANGER_GARBAGE, WEFT_HS_RELAY, NULL, 1, 0, NULL, 0);
	fds[1] =
	    stranger_dial(port, STRANGER_WRONG_KEY, WEFT_HS_RELAY, NULL, 1, 0, &join, sizeof(join));
	for (int i = 2; i < RELAY_STRANGERS; i++)
		fds[i] = stranger_dial(port, STRANGER_SILENT, WEFT_HS_RELAY, NULL, 0, 0, NULL, 0);
	for (int i = 0; i < RELAY_STRANGERS; i++)
		ck_assert_int_ge(fds[i], 0);
	pids[1] = spawn_rank(&job, 1, 1);
	reap(pids, 2);
	assert_all_verified(2);
	ck_assert_msg(slots[0].elapsed < 3.0, "rank 0 took %.2f s with strangers at its door",
		      slots[0].elapsed);
	for (int i = 0; i < RELAY_STRANGERS; i++) {
		ck_assert_msg(closed_by_peer(fds[i]), "stranger %d was never dropped", i);
		close(fds[i]);
	}
	free(fds);
}
END_TEST

/*
 * The root holds a descriptor per rank. In a child whose limit is too low
 * even at its hard limit, the first hello fails the job at once, naming
 * `ulimit -n`, and so does every later one (then, all told, the root is
 * gone at once: the process that hosts it does not wait out its timeout
 * at exit); where the hard limit allows it,
 * the root raises the soft limit and the job goes on (here it then times
 * out waiting for the ranks that never come).
 */
START_TEST(test_fd_budget)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct rlimit rl = {.rlim_cur = 100, .rlim_max = 4096};
		struct weft_uid uid;
		struct weft_err err = {0};
		struct weft_bootstrap *bs = NULL;
		struct sockaddr_in a = loopback(0);

		signal(SIGALRM, SIG_DFL); /* not Check's: see the top */
		alarm(8);
		/* a hard limit of 4,096 is enough for 300 ranks: the soft one is raised */
		struct weft_key key;

		weft_key_from_u64(&key, 21);
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0 ||
		    weft_bootstrap_root_start((struct sockaddr *)&a, sizeof(a), &key, 0.5, &uid,
					      &err) != WEFT_SUCCESS)
			_exit(2);
		slots[0].status = weft_bootstrap_join(&uid, 0, 300, 0.5, &bs, &err);
		memcpy(slots[0].msg, err.msg, sizeof(slots[0].msg));
		getrlimit(RLIMIT_NOFILE, &rl);
		slots[0].verified = rl.rlim_cur >= 300;
		/* a hard limit of 200 is not enough for 10 ranks (192 to spare) */
		rl.rlim_cur = rl.rlim_max = 200;
		memset(&err, 0, sizeof(err));
		weft_key_from_u64(&key, 22);
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0 ||
		    weft_bootstrap_root_start((struct sockaddr *)&a, sizeof(a), &key, 5.0, &uid,
					      &err) != WEFT_SUCCESS)
			_exit(3);
		for (int r = 0; r < 10; r++) {
			struct slot *s = &slots[r == 0 ? 1 : 2];

			memset(&err, 0, sizeof(err));
			s->status = weft_bootstrap_join(&uid, r, 10, 5.0, &bs, &err);
			memcpy(s->msg, err.msg, sizeof(s->msg));
		}
		/* every rank has been told: the root is gone well before its 5 s */
		slots[3].elapsed = now_s();
		weft_bootstrap_root_drain(&key, 5.0);
		slots[3].elapsed = now_s() - slots[3].elapsed;
		_exit(0);
	}
	{
		int st = 0;

		ck_assert_int_eq(waitpid(pid, &st, 0), pid);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status 0x%x", st);
	}
	ck_assert_msg(slots[0].status == WEFT_ERR_TIMEOUT && strstr(slots[0].msg, "did not join"),
		      "%d %s", slots[0].status, slots[0].msg);
	ck_assert_msg(slots[0].verified, "the soft limit was not raised");
	ck_assert_msg(slots[3].elapsed < 2.0, "the root stayed %.2f s after telling every rank",
		      slots[3].elapsed);
	for (int i = 1; i <= 2; i++) {
		/* the one told, and the one that arrived after: the same status */
		ck_assert_msg(slots[i].status == WEFT_ERR_SYSTEM, "%d %s", slots[i].status,
			      slots[i].msg);
		ck_assert_msg(strstr(slots[i].msg, "10 ranks need about 202 descriptors") &&
				  strstr(slots[i].msg, "ulimit -n"),
			      "%s", slots[i].msg);
	}
}
END_TEST

START_TEST(test_fanout_setting)
{
	static const char *bad[] = {"0", "-1", "two", "1000001"};
	struct sockaddr_in a = loopback(0);
	struct weft_uid uid;

	struct weft_key key = {{1}};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct weft_err err = {0};

		setenv("WEFT_BOOTSTRAP_FANOUT", bad[i], 1);
		ck_assert_int_eq(weft_bootstrap_root_start((struct sockaddr *)&a, sizeof(a), &key,
							   1.0, &uid, &err),
				 WEFT_ERR_INVALID_ARG);
		ck_assert_msg(strstr(err.msg, "WEFT_BOOTSTRAP_FANOUT=") && strstr(err.msg, bad[i]),
			      "%s", err.msg);
	}
	unsetenv("WEFT_BOOTSTRAP_FANOUT");
}
END_TEST

/* The handshake is the one place Nagle goes off (util/handshake.c), at
 * both ends: with it on, a bootstrap waited 40 ms for a delayed ACK. */
static void assert_nagle_off(int fd, const char *end)
{
	int on = 0;
	socklen_t len = sizeof(on);

	ck_assert_int_eq(getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, &len), 0);
	ck_assert_msg(on, "%s: TCP_NODELAY is off after the handshake's start", end);
}

/* A root by hand: the listener's side of the handshake, with @p key. */
static void fake_root_handshake(int fd, const struct weft_key *key)
{
	struct root_answer answer = {{7}};
	struct weft_err err = {0};
	struct weft_hs hs;
	struct join join;

	weft_hs_accept(&hs, fd);
	assert_nagle_off(fd, "the accepting end");
	for (;;) {
		enum weft_hs_result r = weft_hs_step(&hs);
		struct pollfd p = {.fd = fd, .events = weft_hs_events(&hs)};

		if (r == WEFT_HS_OK)
			break;
		if (r == WEFT_HS_AGAIN) {
			ck_assert_int_eq(poll(&p, 1, 2000), 1);
			continue;
		}
		ck_assert_int_eq(r, WEFT_HS_HELLO);
		ck_assert_int_eq(hs.hello.role, WEFT_HS_ROOT);
		ck_assert_int_eq(weft_hs_answer(&hs, key, -1, &answer, sizeof(answer), &err),
				 WEFT_SUCCESS);
	}
	memcpy(&join, hs.hello.payload, sizeof(join));
	ck_assert_uint_ne(join.relay_port, 0);
}

static void read_exact(int fd, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = recv(fd, (char *)buf + got, len - got, 0);

		ck_assert_int_gt(n, 0);
		got += (size_t)n;
	}
}

/* A root (here, by hand) whose result is not a zlib stream of the right
 * size: the rank says it is garbled, and does not return it. */
START_TEST(test_garbled_result)
{
	static const char *kinds[] = {"garbage", "short", "long"};

	for (int k = 0; k < 3; k++) {
		struct sockaddr_in a = loopback(0);
		socklen_t len = sizeof(a);
		struct job job = {.nranks = 1, .timeout_s = 2.0, .mode = MODE_GATHER};
		int lfd = socket(AF_INET, SOCK_STREAM, 0), fd;
		struct frame_hdr h;
		struct ready ready = {.fanout = 4};
		unsigned char block[8], packed[64], out[64];
		uLongf plen = sizeof(packed);
		pid_t pid;

		ck_assert_int_eq(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
		ck_assert_int_eq(listen(lfd, 4), 0);
		ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&a, &len), 0);
		start_root(0.1, 5, 0, &job.uid);
		memcpy(&job.uid.addr.in4, &a, sizeof(a));
		pid = spawn_rank(&job, 0, k);
		fd = accept(lfd, NULL, NULL);
		ck_assert_int_ge(fd, 0);
		fake_root_handshake(fd, &job.uid.key);
		h = (struct frame_hdr){.type = FRAME_READY, .len = sizeof(ready)};
		ck_assert_int_eq(send(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
		ck_assert_int_eq(send(fd, &ready, sizeof(ready), 0), (ssize_t)sizeof(ready));
		read_exact(fd, &h, sizeof(h));
		ck_assert_int_eq(h.len, 8); /* MODE_GATHER's first block */
		read_exact(fd, block, sizeof(block));
		memset(out, 0x5a, sizeof(out));
		if (k == 0) {
			memset(packed, 0xa5, 16);
			plen = 16;
		} else {
			ck_assert_int_eq(compress2(packed, &plen, out, k == 1 ? 7 : 9, 1), Z_OK);
		}
		h = (struct frame_hdr){.type = FRAME_GATHER, .seq = 0, .len = plen};
		ck_assert_int_eq(send(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
		ck_assert_int_eq(send(fd, packed, plen, 0), (ssize_t)plen);
		reap(&pid, 1);
		close(fd);
		close(lfd);
		ck_assert_msg(slots[k].status == WEFT_ERR_REMOTE, "%s: %d %s", kinds[k],
			      slots[k].status, slots[k].msg);
		ck_assert_msg(strstr(slots[k].msg, k == 0   ? "is garbled (zlib: "
						   : k == 1 ? "inflates to 7 bytes, not 8"
							    : "inflates past its 8 bytes"),
			      "%s: %s", kinds[k], slots[k].msg);
	}
}
END_TEST

/*
 * A root under a flood may drop a rank's connection after the rank sent
 * its proof but before the root read it. The rank must not take the
 * connection for admitted (it would wait for a READY that never comes, or
 * fail with "closed during join"): it waits for the welcome, sees the
 * close, and knocks again. The fake root here reads the proof and closes
 * without welcoming; the second connection is admitted and the job ends.
 */
START_TEST(test_dropped_before_welcome)
{
	struct sockaddr_in a = loopback(0);
	socklen_t len = sizeof(a);
	struct job job = {.nranks = 1, .timeout_s = 4.0, .mode = MODE_JOIN};
	struct ready ready = {.fanout = 4};
	struct frame_hdr h = {.type = FRAME_READY, .len = sizeof(ready)};
	struct root_answer answer = {{7}};
	struct weft_hs_proof proof;
	struct weft_err err = {0};
	struct weft_hs hs;
	int lfd = socket(AF_INET, SOCK_STREAM, 0), fd;
	pid_t pid;

	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(lfd, 4), 0);
	ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&a, &len), 0);
	job.uid = (struct weft_uid){
	    .magic = WEFT_UID_MAGIC, .version = WEFT_UID_VERSION, .addr_len = sizeof(a)};
	memcpy(&job.uid.addr.in4, &a, sizeof(a));
	weft_key_from_u64(&job.uid.key, 9);
	pid = spawn_rank(&job, 0, 0);
	fd = accept(lfd, NULL, NULL);
	ck_assert_int_ge(fd, 0);
	weft_hs_accept(&hs, fd);
	while (weft_hs_step(&hs) == WEFT_HS_AGAIN) {
		struct pollfd p = {.fd = fd, .events = POLLIN};

		ck_assert_int_eq(poll(&p, 1, 2000), 1);
	}
	ck_assert_int_eq(hs.phase, WEFT_HS_HELLO_IN);
	ck_assert_int_eq(weft_hs_answer(&hs, &job.uid.key, -1, &answer, sizeof(answer), &err),
			 WEFT_SUCCESS);
	ck_assert_int_eq(send(fd, &hs.challenge, sizeof(hs.challenge), 0),
			 (ssize_t)sizeof(hs.challenge));
	read_exact(fd, &proof, sizeof(proof)); /* the proof is in: drop it unwelcomed */
	close(fd);
	fd = accept(lfd, NULL, NULL);
	ck_assert_int_ge(fd, 0);
	fake_root_handshake(fd, &job.uid.key);
	ck_assert_int_eq(send(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	ck_assert_int_eq(send(fd, &ready, sizeof(ready), 0), (ssize_t)sizeof(ready));
	reap(&pid, 1);
	close(fd);
	close(lfd);
	ck_assert_msg(slots[0].status == WEFT_SUCCESS, "rank 0: %s", slots[0].msg);
}
END_TEST

/* The connector's side of a handshake, blocking: what weft_hs_step ended with. */
static enum weft_hs_result hs_connect_blocking(int fd, const struct weft_key *key,
					       enum weft_hs_role role, const unsigned char *id,
					       int rank, int peer, const void *payload, size_t len)
{
	struct weft_err err = {0};
	struct weft_hs hs;
	enum weft_hs_result r;

	ck_assert_int_eq(weft_hs_connect(&hs, fd, key, role, id, rank, peer, payload, len, &err),
			 WEFT_SUCCESS);
	assert_nagle_off(fd, "the connecting end");
	while ((r = weft_hs_step(&hs)) == WEFT_HS_AGAIN) {
		struct pollfd p = {.fd = fd, .events = weft_hs_events(&hs)};

		ck_assert_int_eq(poll(&p, 1, 2000), 1);
	}
	if (r != WEFT_HS_OK)
		fprintf(stderr, "handshake as rank %d: %s (%s)\n", rank, hs.why ? hs.why : "?",
			strerror(hs.errnum));
	return r;
}

/*
 * A relay child that holds the key (and the job's id) but claims rank
 * INT_MIN, or a rank past its parent's children: refused by a range check
 * that no longer subtracts the first child's number from what it claims
 * (a signed overflow UBSan reports: asan-quick). The real child then links
 * in. The root is the test's own, so that it knows the job's id.
 */
START_TEST(test_relay_child_out_of_range)
{
	static const unsigned char job_id[WEFT_JOB_ID_BYTES] = {7};
	struct sockaddr_in a = loopback(0);
	socklen_t len = sizeof(a);
	struct job job = {.nranks = 2, .timeout_s = 4.0, .mode = MODE_JOIN};
	struct ready ready = {.fanout = 1};
	struct frame_hdr h = {.type = FRAME_READY, .len = sizeof(ready)};
	struct join join = {.nranks = 2};
	int lfd = socket(AF_INET, SOCK_STREAM, 0), fd;
	unsigned port = 0;
	pid_t pid;

	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(lfd, 4), 0);
	ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&a, &len), 0);
	/* An id by hand, pointed at our root (a root thread of the library
	 * would leave a second listener in the rank, where the search for its
	 * relay listener below could find it). */
	job.uid = (struct weft_uid){
	    .magic = WEFT_UID_MAGIC, .version = WEFT_UID_VERSION, .addr_len = sizeof(a)};
	memcpy(&job.uid.addr.in4, &a, sizeof(a));
	weft_key_from_u64(&job.uid.key, 5);
	pid = spawn_rank(&job, 0, 0);
	fd = accept(lfd, NULL, NULL);
	ck_assert_int_ge(fd, 0);
	fake_root_handshake(fd, &job.uid.key);
	ck_assert_int_eq(send(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	ck_assert_int_eq(send(fd, &ready, sizeof(ready), 0), (ssize_t)sizeof(ready));
	for (int i = 0; i < 300 && !port; i++) {
		port = harness_listen_port_of(pid, ntohs(a.sin_port));
		if (!port)
			sleep_s(0.01);
	}
	ck_assert_msg(port, "rank 0's relay listener not found");
	const int claims[] = {INT_MIN, INT_MAX, 2, 0};
	for (size_t i = 0; i < sizeof(claims) / sizeof(claims[0]); i++) {
		struct sockaddr_in to = loopback((uint16_t)port);
		int c = socket(AF_INET, SOCK_STREAM, 0);

		ck_assert_int_eq(connect(c, (struct sockaddr *)&to, sizeof(to)), 0);
		ck_assert_int_eq(hs_connect_blocking(c, &job.uid.key, WEFT_HS_RELAY, job_id,
						     claims[i], 0, &join, sizeof(join)),
				 WEFT_HS_OK);
		ck_assert_msg(closed_by_peer(c), "a child claiming rank %d was kept", claims[i]);
		close(c);
	}
	{ /* the real child */
		struct sockaddr_in to = loopback((uint16_t)port);
		int c = socket(AF_INET, SOCK_STREAM, 0);

		ck_assert_int_eq(connect(c, (struct sockaddr *)&to, sizeof(to)), 0);
		ck_assert_int_eq(hs_connect_blocking(c, &job.uid.key, WEFT_HS_RELAY, job_id, 1, 0,
						     &join, sizeof(join)),
				 WEFT_HS_OK);
		reap(&pid, 1);
		close(c);
	}
	close(fd);
	close(lfd);
	ck_assert_msg(slots[0].status == WEFT_SUCCESS, "rank 0: %s", slots[0].msg);
}
END_TEST

/*
 * A rank (the test's, by hand, with the key) that says goodbye before the
 * job has formed: the root fails the job at once and tells it why. It used
 * to take the goodbye, count the rank as joined and gone when it closed,
 * and send READY through a NULL connection when the last rank arrived
 * (found by fuzz_bootstrap).
 */
START_TEST(test_bye_before_ready)
{
	struct job job = {.nranks = 2, .timeout_s = 4.0, .mode = MODE_JOIN};
	struct join join = {.nranks = 2, .relay_port = 9};
	struct frame_hdr h = {.type = FRAME_BYE};
	struct sockaddr_in to;
	char text[MAX_ERROR_BYTES + 1] = {0};
	int c = socket(AF_INET, SOCK_STREAM, 0);
	struct pollfd p = {.fd = c, .events = POLLIN};

	start_root(job.timeout_s, 0x5eed, 0, &job.uid);
	memcpy(&to, &job.uid.addr.in4, sizeof(to));
	ck_assert_int_eq(connect(c, (struct sockaddr *)&to, sizeof(to)), 0);
	ck_assert_int_eq(
	    hs_connect_blocking(c, &job.uid.key, WEFT_HS_ROOT, NULL, 0, -1, &join, sizeof(join)),
	    WEFT_HS_OK);
	ck_assert_int_eq(send(c, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	ck_assert_msg(poll(&p, 1, 2000) == 1, "the root took a goodbye before READY silently");
	read_exact(c, &h, sizeof(h));
	ck_assert_int_eq(h.type, FRAME_ERROR);
	ck_assert_uint_gt(h.len, sizeof(int32_t));
	ck_assert_uint_le(h.len, MAX_ERROR_BYTES);
	read_exact(c, text, (size_t)h.len);
	ck_assert_msg(strstr(text + sizeof(int32_t), "rank 0 sent an unexpected frame (type 5"),
		      "%s", text + sizeof(int32_t));
	close(c);
}
END_TEST

START_TEST(test_too_big)
{
	struct job job = {.nranks = 1, .timeout_s = 2.0};
	struct weft_err err = {0};
	struct weft_bootstrap *bs = NULL;
	char c = 0;

	start_root(2.0, 11, 0, &job.uid);
	ck_assert_int_eq(weft_bootstrap_join(&job.uid, 0, 1, 2.0, &bs, &err), WEFT_SUCCESS);
	ck_assert_int_eq(weft_bootstrap_allgather(bs, &c, (size_t)1025 << 20, &err),
			 WEFT_ERR_INVALID_ARG);
	ck_assert_msg(strstr(err.msg, "limit"), "%s", err.msg);
	weft_bootstrap_close(bs);
}
END_TEST

/* A size beyond the 4,096 ranks of old is a job like any other (two of
 * its 5,000 ranks join, the rest are named missing when the join times
 * out), and one past WEFT_MAX_RANKS is refused before anything connects. */
START_TEST(test_many_ranks)
{
	struct job job = {.nranks = 5000, .timeout_s = SHORT_TIMEOUT_S, .mode = MODE_JOIN};
	pid_t pids[MAX_SLOTS] = {0};
	struct weft_err err = {0};
	struct weft_bootstrap *bs = NULL;

	struct rlimit rl;
	/* the root needs some 5,200 descriptors (test_fd_budget) */
	bool room = getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
		    (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= 5300);

	start_root(SHORT_TIMEOUT_S, 13, 0, &job.uid);
	pids[0] = spawn_rank(&job, 0, 0);
	pids[1] = spawn_rank(&job, 4999, 1);
	reap(pids, 2);
	for (int s = 0; s < 2; s++) {
		ck_assert_msg(slots[s].status != WEFT_SUCCESS, "slot %d joined", s);
		ck_assert_msg(
		    strstr(slots[s].msg, room ? "ranks 1-4998 did not join" : "ulimit -n"), "%s",
		    slots[s].msg);
	}
	ck_assert_int_eq(weft_bootstrap_join(&job.uid, 0, WEFT_MAX_RANKS + 1, 1.0, &bs, &err),
			 WEFT_ERR_INVALID_ARG);
	ck_assert_msg(strstr(err.msg, "out of range (1..1000000 ranks)"), "%s", err.msg);
}
END_TEST

static Suite *bootstrap_suite(void)
{
	Suite *s = suite_create("bootstrap");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, slots_setup, slots_teardown);
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_uid_check);
	tcase_add_test(tc, test_gather_1);
	tcase_add_test(tc, test_gather_3);
	tcase_add_test(tc, test_gather_8);
	tcase_add_test(tc, test_strangers);
	tcase_add_test(tc, test_door_closes);
	tcase_add_test(tc, test_missing_rank);
	tcase_add_test(tc, test_member_died);
	tcase_add_test(tc, test_size_mismatch);
	tcase_add_test(tc, test_rank_leaves);
	tcase_add_test(tc, test_root_late);
	tcase_add_test(tc, test_no_root);
	tcase_add_test(tc, test_silent_root);
	tcase_add_test(tc, test_relay_chain);
	tcase_add_test(tc, test_relay_chain_big);
	tcase_add_test(tc, test_relay_binary);
	tcase_add_test(tc, test_relay_star);
	tcase_add_test(tc, test_relay_leaves);
	tcase_add_test(tc, test_relay_strangers);
	tcase_add_test(tc, test_relay_child_out_of_range);
	tcase_add_test(tc, test_bye_before_ready);
	tcase_add_test(tc, test_fd_budget);
	tcase_add_test(tc, test_fanout_setting);
	tcase_add_test(tc, test_garbled_result);
	tcase_add_test(tc, test_dropped_before_welcome);
	tcase_add_test(tc, test_too_big);
	tcase_add_test(tc, test_many_ranks);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	if (argc == 6 && strcmp(argv[1], "--rank") == 0)
		_exit(rank_main(argv)); /* as the forked ranks did: no exit handlers */
	SRunner *sr = srunner_create(bootstrap_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
