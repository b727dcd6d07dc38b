/*
 * failures.c — the job meets strangers, missing ranks, dead peers and
 * aborts: each gives a clear error in bounded time, never a hang or a crash.
 *
 *  - strangers at the bootstrap port (the address inside the unique id):
 *    one sends garbage and leaves, one sends garbage and stays, one says
 *    nothing and stays, one sends huge length words, and one joins through
 *    the library with the right address but a wrong key. The job must
 *    still initialise and an allreduce be exact; the wrong-key join fails,
 *    the root failing its authentication.
 *  - a rank that never arrives (WEFT_BOOTSTRAP_TIMEOUT=2): the others get
 *    WEFT_ERR_TIMEOUT within ~3 s, and the message names the missing ranks.
 *  - a peer that dies (SIGKILL between operations, SIGKILL from a timer in
 *    the middle of a large operation, _exit without destroying) during a long
 *    sequence of allreduces, over shm and over socket, with WEFT_TIMEOUT=10:
 *    every survivor gets WEFT_ERR_REMOTE or WEFT_ERR_TIMEOUT well before 10 s
 *    (the transports notice the death), its next call fails at once, and the
 *    communicator reports an async error.
 *  - weft_comm_abort on one rank (between calls, and from another thread
 *    while the rank is blocked in an allreduce): that rank gets
 *    WEFT_ERR_ABORTED, the peers fail rather than hang.
 *  - mismatched calls (count, datatype, op, root or collective differing on
 *    one rank), over shm, socket and both ofi paths with WEFT_TIMEOUT=30:
 *    every rank fails with WEFT_ERR_REMOTE or WEFT_ERR_INVALID_ARG within
 *    5 s, and some rank's message names what differs.
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "harness.h"
#include "integ.h"

static const char *const env_shm[] = {"WEFT_TIMEOUT=10", "WEFT_BOOTSTRAP_TIMEOUT=10", NULL};
static const char *const env_socket[] = {"WEFT_TIMEOUT=10", "WEFT_BOOTSTRAP_TIMEOUT=10",
					 "WEFT_TRANSPORTS=socket", "WEFT_SOCKET_IFNAME=lo", NULL};

static void nap(double seconds)
{
	struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* fp32 sum of harness_ar_input over the ranks, salted by the iteration. */
static int checked_allreduce(weft_comm_t comm, int rank, int nranks, float *buf, float *want,
			     size_t count, unsigned salt, weft_status_t *status)
{
	harness_ar_input(buf, count, WEFT_FLOAT32, WEFT_SUM, rank, nranks, salt);
	*status = weft_allreduce(WEFT_IN_PLACE, buf, count, WEFT_FLOAT32, WEFT_SUM, comm);
	if (*status != WEFT_SUCCESS)
		return 0;
	char why[200];
	harness_ar_expected(want, count, WEFT_FLOAT32, WEFT_SUM, nranks, salt);
	if (harness_compare(buf, want, count, WEFT_FLOAT32, why, sizeof(why)) != SIZE_MAX)
		return harness_fail("allreduce salt %u: %s", salt, why);
	return 0;
}

/* --- strangers at the bootstrap port --- */

#define NSTRANGERS 4

struct stranger_state {
	int fds[NSTRANGERS];
	pthread_t secret_thread;
	bool thread_started;
	weft_unique_id_t bad_id;
	int nranks;
	weft_status_t secret_status; /* what the wrong-secret join returned */
	char secret_msg[WEFT_ERR_MSG_BYTES];
	double secret_seconds;
};

static struct stranger_state strangers; /* in rank 0's process only */

static int connect_loopback(const struct weft_uid *uid)
{
	const struct sockaddr *sa = &uid->addr.sa;
	bool loopback =
	    (sa->sa_family == AF_INET && (ntohl(uid->addr.in4.sin_addr.s_addr) >> 24) == 127) ||
	    (sa->sa_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&uid->addr.in6.sin6_addr));
	if (!loopback)
		return -2; /* the test only ever talks to loopback */
	int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct timeval tv = {2, 0};
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, sa, uid->addr_len) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void *wrong_secret_join(void *arg)
{
	struct stranger_state *s = arg;
	weft_config_t cfg = WEFT_CONFIG_INIT;
	cfg.timeout_seconds = 3;
	weft_comm_t comm = NULL;
	double t0 = harness_now();
	s->secret_status = weft_comm_init_rank(&comm, s->nranks, s->bad_id, 1, &cfg);
	s->secret_seconds = harness_now() - t0;
	snprintf(s->secret_msg, sizeof(s->secret_msg), "%s", weft_init_last_error());
	if (comm)
		weft_comm_destroy(comm);
	return NULL;
}

static int strangers_before_init(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	if (rank != 0)
		return 0;
	struct weft_uid uid;
	memcpy(&uid, id->internal, sizeof(uid));
	static const char garbage[] = "GET / HTTP/1.0\r\n\r\n\x01\x02\x03 not a weft rank at all";
	unsigned char huge[64];
	memset(huge, 0xff, sizeof(huge));
	for (int k = 0; k < NSTRANGERS; k++) {
		strangers.fds[k] = connect_loopback(&uid);
		if (strangers.fds[k] == -2)
			return harness_fail(
			    "the unique id's address is not loopback; not connecting");
		if (strangers.fds[k] < 0)
			return harness_fail("stranger %d: cannot connect to the bootstrap port: %s",
					    k, strerror(errno));
		ssize_t n = 0;
		if (k == 0 || k == 1)
			n = write(strangers.fds[k], garbage, sizeof(garbage));
		else if (k == 3)
			n = write(strangers.fds[k], huge, sizeof(huge));
		if (n < 0)
			return harness_fail("stranger %d: write: %s", k, strerror(errno));
		if (k == 0) { /* says its piece and leaves */
			close(strangers.fds[k]);
			strangers.fds[k] = -1;
		}
	}
	/* The library's own join, with the right address and a wrong key. */
	uid.key.b[0] ^= 0x5a;
	memset(&strangers.bad_id, 0, sizeof(strangers.bad_id));
	memcpy(strangers.bad_id.internal, &uid, sizeof(uid));
	strangers.nranks = nranks;
	if (pthread_create(&strangers.secret_thread, NULL, wrong_secret_join, &strangers) != 0)
		return harness_fail("pthread_create failed");
	strangers.thread_started = true;
	return 0;
}

static int strangers_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	float buf[1000], want[1000];
	weft_status_t st;
	int ret = 0;
	for (unsigned k = 0; k < 3 && !ret; k++) {
		ret = checked_allreduce(comm, rank, nranks, buf, want, 1000, k, &st);
		if (!ret && st != WEFT_SUCCESS)
			ret = harness_fail_status(comm, st, "allreduce after strangers called");
	}
	if (rank != 0)
		return ret;
	if (strangers.thread_started) {
		pthread_join(strangers.secret_thread, NULL);
		if (strangers.secret_status == WEFT_SUCCESS)
			ret = harness_fail("a join with a wrong key succeeded");
		else if (!strangers.secret_msg[0])
			ret =
			    harness_fail("the wrong-secret join failed (%s) with an empty message",
					 weft_status_string(strangers.secret_status));
		/* It fails on its key within its 3 s (the root cannot prove
		 * the key it holds); or, when it comes after the job is
		 * complete, the root's door is closed and its connect is
		 * refused until its bootstrap timeout (WEFT_BOOTSTRAP_TIMEOUT,
		 * 10 s here); or it connects just as the door closes and the
		 * root's close resets it (seen under ASan). */
		else if (strstr(strangers.secret_msg, "failed authentication") &&
			 strangers.secret_seconds > 5.0)
			ret = harness_fail(
			    "the wrong-key join took %.1f s to fail (its timeout was 3 s)",
			    strangers.secret_seconds);
		else if (!strstr(strangers.secret_msg, "failed authentication") &&
			 ((!strstr(strangers.secret_msg, "refused") &&
			   !strstr(strangers.secret_msg, "reset by peer")) ||
			  strangers.secret_seconds > 12.0))
			ret = harness_fail("the late wrong-secret join: %.1f s: %s",
					   strangers.secret_seconds, strangers.secret_msg);
		else
			fprintf(stderr, "rank 0: wrong-secret join failed as it should: %s: %s\n",
				weft_status_string(strangers.secret_status), strangers.secret_msg);
	}
	for (int k = 0; k < NSTRANGERS; k++)
		if (strangers.fds[k] >= 0)
			close(strangers.fds[k]);
	return ret;
}

START_TEST(strangers_at_bootstrap)
{
	struct harness_job job = {
	    .nranks = 3,
	    .env = env_shm,
	    .body = strangers_body,
	    .timeout_s = 40,
	    .before_init = strangers_before_init,
	};
	struct harness_result res;
	harness_run_job(&job, &res);
	ck_assert_msg(res.ok, "strangers at the bootstrap port:\n%s", res.summary);
}
END_TEST

/* --- the simplest life: init, destroy, exit --- */

/* No body: every rank calls weft_comm_init_rank, weft_comm_destroy and
 * exits at once. Rank 0's process hosts the bootstrap root, and its exit must
 * not cut off ranks that are still finishing their init. */
START_TEST(init_then_exit)
{
	static const char *const env[] = {"WEFT_TIMEOUT=10", NULL};
	for (int n = 2; n <= 8; n++) {
		struct harness_result res;
		harness_run(n, env, NULL, NULL, 30, &res);
		ck_assert_msg(res.ok, "init + destroy + exit, nranks %d:\n%s", n, res.summary);
	}
}
END_TEST

/* --- ranks that never arrive --- */

struct missing {
	uint32_t absent; /* mask */
	double max_s;
};

/* True if @p msg contains @p n as a number of its own (not inside "12" or "2.5"). */
static bool names_number(const char *msg, int n)
{
	char want[16];
	int len = snprintf(want, sizeof(want), "%d", n);
	for (const char *p = strstr(msg, want); p; p = strstr(p + 1, want)) {
		bool start = p == msg || (p[-1] < '0' || p[-1] > '9');
		char after = p[len];
		bool end = (after < '0' || after > '9') && after != '.';
		if (start && end)
			return true;
	}
	return false;
}

static int missing_init_failed(int rank, int nranks, weft_status_t st, const char *msg,
			       double seconds, void *arg)
{
	const struct missing *m = arg;
	if (st != WEFT_ERR_TIMEOUT)
		return harness_fail("init without all ranks: %s (%d), expected timeout: \"%s\"",
				    weft_status_string(st), (int)st, msg);
	if (seconds > m->max_s)
		return harness_fail("init timed out after %.1f s; WEFT_BOOTSTRAP_TIMEOUT is 2",
				    seconds);
	for (int r = 0; r < nranks; r++)
		if ((m->absent & (1u << r)) && !names_number(msg, r))
			return harness_fail("timeout message does not name missing rank %d: \"%s\"",
					    r, msg);
	return 0;
}

static int must_not_run(weft_comm_t comm, int rank, int nranks, void *arg)
{
	return harness_fail("init succeeded although ranks are missing");
}

static void run_missing(int nranks, uint32_t absent)
{
	static const char *const env[] = {"WEFT_BOOTSTRAP_TIMEOUT=2", "WEFT_TIMEOUT=10", NULL};
	struct missing m = {.absent = absent, .max_s = 3.5};
	struct harness_job job = {
	    .nranks = nranks,
	    .env = env,
	    .body = must_not_run,
	    .arg = &m,
	    .timeout_s = 20,
	    .absent_ranks = absent,
	    .init_failed = missing_init_failed,
	};
	struct harness_result res;
	harness_run_job(&job, &res);
	ck_assert_msg(res.ok, "nranks %d, ranks missing (mask 0x%x):\n%s", nranks, absent,
		      res.summary);
}

START_TEST(missing_rank)
{
	run_missing(3, 1u << 2);
}
END_TEST

START_TEST(missing_ranks)
{
	run_missing(5, (1u << 1) | (1u << 3));
}
END_TEST

/* --- a peer dies or aborts during a sequence of allreduces --- */

enum death {
	DIE_SIGKILL,	   /* kill(getpid(), SIGKILL) between two allreduces */
	DIE_EXIT,	   /* _exit(0) without weft_comm_destroy */
	DIE_TIMER_SIGKILL, /* a thread SIGKILLs the process during an allreduce */
	DIE_ABORT,	   /* weft_comm_abort between two allreduces */
	DIE_ABORT_THREAD,  /* weft_comm_abort from a thread while blocked in one */
};

static const char *const death_names[] = {
    [DIE_SIGKILL] = "SIGKILL between allreduces",
    [DIE_EXIT] = "_exit(0) between allreduces",
    [DIE_TIMER_SIGKILL] = "SIGKILL during a large allreduce",
    [DIE_ABORT] = "weft_comm_abort between allreduces",
    [DIE_ABORT_THREAD] = "weft_comm_abort from a thread during a blocked allreduce",
};

struct sequence {
	enum death how;
	int victim;
	int at_iter;
	size_t count;
	double max_detect_s; /* from the death to each survivor's error */
};

struct shared_clock {
	int64_t death_ns; /* when the victim died or aborted; 0 until then */
};

static void note_death(void)
{
	struct shared_clock *c = harness_shared();
	__atomic_store_n(&c->death_ns, (int64_t)(harness_now() * 1e9), __ATOMIC_SEQ_CST);
}

static double death_time(void)
{
	struct shared_clock *c = harness_shared();
	int64_t ns = __atomic_load_n(&c->death_ns, __ATOMIC_SEQ_CST);
	return ns ? (double)ns * 1e-9 : 0.0;
}

static void *kill_soon(void *arg)
{
	nap(0.05);
	note_death();
	kill(getpid(), SIGKILL);
	return NULL;
}

static void *abort_soon(void *arg)
{
	nap(0.3);
	note_death();
	weft_comm_abort((weft_comm_t)arg);
	return NULL;
}

/* The victim's own outcome after an abort: WEFT_ERR_ABORTED. */
static int victim_after_abort(weft_comm_t comm, weft_status_t st, const char *when)
{
	if (st != WEFT_ERR_ABORTED)
		return harness_fail_status(comm, st, "%s: expected aborted", when);
	weft_status_t async = WEFT_SUCCESS;
	weft_comm_get_async_error(comm, &async);
	if (async != WEFT_ERR_ABORTED)
		return harness_fail("after abort, async error is %s", weft_status_string(async));
	return 0;
}

/* A survivor's error: the right kind, in time, a message; and the
 * communicator stays failed. */
static int survivor_error(weft_comm_t comm, const struct sequence *q, weft_status_t st, int iter,
			  float *buf)
{
	double now = harness_now(), died = death_time();
	const char *msg = weft_comm_last_error(comm);
	if (died == 0.0)
		return harness_fail_status(comm, st, "allreduce %d failed before any rank died",
					   iter);
	if (st != WEFT_ERR_REMOTE && st != WEFT_ERR_TIMEOUT)
		return harness_fail_status(
		    comm, st, "allreduce %d after the victim's %s: expected remote or timeout",
		    iter, death_names[q->how]);
	if (now - died > q->max_detect_s)
		return harness_fail_status(
		    comm, st,
		    "allreduce %d: the error came %.1f s after the victim's %s (limit %.1f s)",
		    iter, now - died, death_names[q->how], q->max_detect_s);
	if (!msg || !*msg)
		return harness_fail("allreduce %d failed (%s) with an empty message", iter,
				    weft_status_string(st));
	fprintf(stderr, "rank %d: failed %.2f s after the death, as it should: %s: %s\n",
		harness_rank(), now - died, weft_status_string(st), msg);
	double t0 = harness_now();
	weft_status_t again =
	    weft_allreduce(WEFT_IN_PLACE, buf, q->count, WEFT_FLOAT32, WEFT_SUM, comm);
	if (again == WEFT_SUCCESS)
		return harness_fail("an allreduce after the failure succeeded");
	if (harness_now() - t0 > 1.0)
		return harness_fail("an allreduce after the failure took %.1f s to fail",
				    harness_now() - t0);
	weft_status_t async = WEFT_SUCCESS;
	if (weft_comm_get_async_error(comm, &async) != WEFT_SUCCESS || async == WEFT_SUCCESS)
		return harness_fail("after the failure the async error is %s",
				    weft_status_string(async));
	return 0;
}

static int sequence_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const struct sequence *q = arg;
	float *buf = malloc(q->count * sizeof(float)), *want = malloc(q->count * sizeof(float));
	pthread_t thread;
	int ret = 0;
	if (!buf || !want) {
		ret = harness_fail("out of memory");
		goto out;
	}
	double start = harness_now();
	for (int iter = 0;; iter++) {
		bool victim = rank == q->victim && iter == q->at_iter;
		if (victim && q->how == DIE_SIGKILL) {
			note_death();
			kill(getpid(), SIGKILL);
		}
		if (victim && q->how == DIE_EXIT) {
			note_death();
			_exit(0);
		}
		if (victim && q->how == DIE_ABORT) {
			note_death();
			weft_status_t st = weft_comm_abort(comm);
			if (st != WEFT_SUCCESS)
				ret = harness_fail_status(comm, st, "weft_comm_abort");
			else
				ret =
				    victim_after_abort(comm,
						       weft_allreduce(WEFT_IN_PLACE, buf, q->count,
								      WEFT_FLOAT32, WEFT_SUM, comm),
						       "allreduce after weft_comm_abort");
			goto out;
		}
		if (victim && q->how == DIE_TIMER_SIGKILL &&
		    pthread_create(&thread, NULL, kill_soon, NULL)) {
			ret = harness_fail("pthread_create failed");
			goto out;
		}
		if (victim && q->how == DIE_ABORT_THREAD &&
		    pthread_create(&thread, NULL, abort_soon, comm)) {
			ret = harness_fail("pthread_create failed");
			goto out;
		}
		/* The victim's right neighbour stalls so that the victim blocks in the allreduce.
		 */
		if (q->how == DIE_ABORT_THREAD && iter == q->at_iter &&
		    rank == (q->victim + 1) % nranks)
			nap(1.0);

		harness_progress("allreduce %d", iter);
		weft_status_t st;
		ret =
		    checked_allreduce(comm, rank, nranks, buf, want, q->count, (unsigned)iter, &st);
		if (ret)
			goto out;
		if (st != WEFT_SUCCESS) {
			if (rank == q->victim && q->how == DIE_ABORT_THREAD) {
				pthread_join(thread, NULL);
				ret = victim_after_abort(
				    comm, st, "allreduce blocked when another thread aborted");
			} else {
				ret = survivor_error(comm, q, st, iter, buf);
			}
			goto out;
		}
		if (harness_now() - start > 30.0) {
			ret = harness_fail("no error 30 s into the sequence (%d allreduces); the "
					   "victim's %s was at %d",
					   iter, death_names[q->how], q->at_iter);
			goto out;
		}
	}
out:
	free(buf);
	free(want);
	return ret;
}

/* What the survivors logged after the victim's death: over shm each one
 * names it, with its pid, as the peer that died (the transport checks the
 * pid itself), or names a survivor that aborted its communicator, having
 * seen the death first (one that waits on that survivor may hear of the
 * abort before it looks at the victim); at least one names the victim.
 * Over socket at least one names it as the peer that closed the
 * connection (the others may first hear of a neighbour that gave up).
 * Always on a WARN line of the survivor's own rank. */
static void check_death_logs(const struct harness_result *res, const struct sequence *q, int nranks)
{
	char victim[32], pid[32], line[1024];
	snprintf(victim, sizeof(victim), "peer rank %d ", q->victim);
	snprintf(pid, sizeof(pid), "(pid %d) died", (int)res->rank[q->victim].pid);
	int named = 0;
	for (int r = 0; r < nranks; r++) {
		if (r == q->victim)
			continue;
		char own[32];
		snprintf(own, sizeof(own), " rank %d: ", r);
		bool says =
		    harness_log_line(res, r, line, sizeof(line), " weft WARN ", own, victim,
				     integ_over("shm") ? pid : "closed the connection", NULL);
		named += says;
		bool heard_abort = harness_log_line(res, r, line, sizeof(line), " weft WARN ", own,
						    "aborted its communicator", NULL);
		ck_assert_msg(says || heard_abort || !integ_over("shm"),
			      "%s over shm: rank %d did not log that rank %d %s, nor a peer's "
			      "abort:\n%s",
			      death_names[q->how], r, q->victim, pid,
			      res->rank[r].log ? res->rank[r].log : "(nothing)");
	}
	ck_assert_msg(named > 0, "%s over %s: no survivor logged a WARN line naming rank %d",
		      death_names[q->how], integ_transport(), q->victim);
}

static const char *const *env_of_transport(void)
{
	return integ_over("socket") ? env_socket : env_shm;
}

static void run_sequence(int nranks, struct sequence q)
{
	bool died = q.how == DIE_SIGKILL || q.how == DIE_TIMER_SIGKILL || q.how == DIE_EXIT;
	struct harness_job job = {
	    .nranks = nranks,
	    .env = env_of_transport(),
	    .body = sequence_body,
	    .arg = &q,
	    .timeout_s = 40,
	    .capture_stderr = died,
	};
	struct harness_result res;
	harness_run_job(&job, &res);
	printf("%s over %s, nranks %d: %.1f s\n", death_names[q.how], integ_transport(), nranks,
	       res.seconds);
	fflush(stdout);
	for (int r = 0; r < nranks; r++) {
		const struct harness_rank_result *rr = &res.rank[r];
		bool killed = r == q.victim && (q.how == DIE_SIGKILL || q.how == DIE_TIMER_SIGKILL);
		if (killed)
			ck_assert_msg(rr->end == HARNESS_SIGNALED && rr->code == SIGKILL,
				      "%s over %s: the victim did not die as planned:\n%s",
				      death_names[q.how], integ_transport(), res.summary);
		else
			ck_assert_msg(rr->end == HARNESS_EXITED && rr->code == 0,
				      "%s over %s, nranks %d, victim rank %d:\n%s",
				      death_names[q.how], integ_transport(), nranks, q.victim,
				      res.summary);
	}
	if (died)
		check_death_logs(&res, &q, nranks);
	harness_result_free(&res);
}

START_TEST(peer_sigkill)
{
	struct sequence q = {
	    .how = DIE_SIGKILL, .victim = 1, .at_iter = 40, .count = 1024, .max_detect_s = 5};
	run_sequence(4, q);
}
END_TEST

START_TEST(peer_exit)
{
	struct sequence q = {
	    .how = DIE_EXIT, .victim = 2, .at_iter = 25, .count = 4099, .max_detect_s = 5};
	run_sequence(4, q);
}
END_TEST

START_TEST(peer_sigkill_during_large)
{
	struct sequence q = {.how = DIE_TIMER_SIGKILL,
			     .victim = 1,
			     .at_iter = 3,
			     .count = (1u << 20) + 3,
			     .max_detect_s = 5};
	run_sequence(3, q);
}
END_TEST

START_TEST(peer_abort)
{
	struct sequence q = {
	    .how = DIE_ABORT, .victim = 0, .at_iter = 20, .count = 4099, .max_detect_s = 5};
	run_sequence(3, q);
}
END_TEST

START_TEST(peer_abort_from_thread)
{
	struct sequence q = {
	    .how = DIE_ABORT_THREAD, .victim = 1, .at_iter = 10, .count = 4099, .max_detect_s = 5};
	run_sequence(3, q);
}
END_TEST

/* --- mismatched calls ---
 *
 * One rank (the odd one) calls a collective with a different count,
 * datatype, op, root or collective than the others. Every rank must fail
 * with WEFT_ERR_REMOTE or WEFT_ERR_INVALID_ARG within 5 s, far below the
 * WEFT_TIMEOUT of 30 s, either in that call or in the barrier it makes next
 * (a rank may finish a call in which it received nothing: a broadcast root,
 * or every rank of a broadcast whose ranks disagree on the root); a timeout
 * does not count. At least one rank's message must name what differs: the
 * tags carry each call's signature (core/tag.h). */

enum mm_call { MM_ALLREDUCE, MM_ALLGATHER, MM_BROADCAST, MM_REDUCE, MM_GATHER };

struct mm_args {
	enum mm_call call;
	size_t count;
	weft_datatype_t dt;
	weft_op_t op;
	int root;
};

struct mismatch {
	const char *name;
	int odd; /* the rank that passes odd_args */
	struct mm_args args, odd_args;
	const char *expect[3]; /* one rank's message must contain all of these */
};

static const struct mismatch mismatches[] = {
    {"counts 1000 and 3000",
     0,
     {MM_ALLREDUCE, 3000, WEFT_FLOAT32, WEFT_SUM, 0},
     {MM_ALLREDUCE, 1000, WEFT_FLOAT32, WEFT_SUM, 0},
     {"mismatched weft_allreduce: count: rank ", "passed a different count"}},
    /* 70000 and 70001 int32: the first chunks have the same length */
    {"broadcast counts 70000 and 70001",
     2,
     {MM_BROADCAST, 70000, WEFT_INT32, WEFT_SUM, 0},
     {MM_BROADCAST, 70001, WEFT_INT32, WEFT_SUM, 0},
     {"mismatched weft_broadcast: count or root: rank "}},
    /* count 0 returns at once, so the odd rank's barrier meets the others' allreduce */
    {"count 0 on one rank",
     1,
     {MM_ALLREDUCE, 1000, WEFT_FLOAT32, WEFT_SUM, 0},
     {MM_ALLREDUCE, 0, WEFT_FLOAT32, WEFT_SUM, 0},
     {"mismatched calls: rank ", "weft_barrier", "weft_allreduce"}},
    {"datatypes of one size (float, int32)",
     1,
     {MM_ALLREDUCE, 1000, WEFT_FLOAT32, WEFT_SUM, 0},
     {MM_ALLREDUCE, 1000, WEFT_INT32, WEFT_SUM, 0},
     {"mismatched weft_allreduce: datatype: rank ", "int32", "float"}},
    {"datatypes of two sizes (float, double)",
     2,
     {MM_ALLGATHER, 500, WEFT_FLOAT32, WEFT_SUM, 0},
     {MM_ALLGATHER, 500, WEFT_FLOAT64, WEFT_SUM, 0},
     {"mismatched weft_allgather: datatype: rank ", "double", "float"}},
    {"datatypes half and bfloat16",
     0,
     {MM_ALLREDUCE, 999, WEFT_FLOAT16, WEFT_SUM, 0},
     {MM_ALLREDUCE, 999, WEFT_BFLOAT16, WEFT_SUM, 0},
     {"mismatched weft_allreduce: datatype: rank ", "half", "bfloat16"}},
    {"ops sum and max",
     2,
     {MM_ALLREDUCE, 1000, WEFT_FLOAT32, WEFT_SUM, 0},
     {MM_ALLREDUCE, 1000, WEFT_FLOAT32, WEFT_MAX, 0},
     {"mismatched weft_allreduce: op: rank ", "max", "sum"}},
    {"broadcast roots 0 and 1",
     1,
     {MM_BROADCAST, 1000, WEFT_INT32, WEFT_SUM, 0},
     {MM_BROADCAST, 1000, WEFT_INT32, WEFT_SUM, 1},
     {"mismatched weft_broadcast: count or root: rank "}},
    {"reduce roots 0 and 2",
     2,
     {MM_REDUCE, 1000, WEFT_FLOAT32, WEFT_SUM, 0},
     {MM_REDUCE, 1000, WEFT_FLOAT32, WEFT_SUM, 2},
     {"mismatched weft_reduce: count or root: rank "}},
    {"allgather against allreduce",
     0,
     {MM_ALLREDUCE, 1000, WEFT_FLOAT32, WEFT_SUM, 0},
     {MM_ALLGATHER, 1000, WEFT_FLOAT32, WEFT_SUM, 0},
     {"mismatched calls: rank ", "weft_allgather", "weft_allreduce"}},
    /* the collectives past the first eight must have tags of their own */
    {"gather against allgather",
     0,
     {MM_ALLGATHER, 1000, WEFT_FLOAT32, WEFT_SUM, 0},
     {MM_GATHER, 1000, WEFT_FLOAT32, WEFT_SUM, 0},
     {"mismatched calls: rank ", "weft_allgather", "weft_gather"}},
};
#define NMISMATCHES	 ((int)(sizeof(mismatches) / sizeof(mismatches[0])))
#define MISMATCH_RANKS	 3
#define MISMATCH_BOUND_S 5.0

static weft_status_t mm_run(const struct mm_args *a, void *send, void *recv, int rank,
			    weft_comm_t comm)
{
	switch (a->call) {
	case MM_ALLREDUCE: return weft_allreduce(send, recv, a->count, a->dt, a->op, comm);
	case MM_ALLGATHER: return weft_allgather(send, recv, a->count, a->dt, comm);
	case MM_BROADCAST:
		return weft_broadcast(rank == a->root ? send : NULL, recv, a->count, a->dt, a->root,
				      comm);
	case MM_GATHER: return weft_gather(send, recv, a->count, a->dt, a->root, comm);
	default: return weft_reduce(send, recv, a->count, a->dt, a->op, a->root, comm);
	}
}

/* What each rank leaves in harness_shared() for the parent. */
struct mm_report {
	int named; /* ranks whose message names the mismatch */
};

static int mismatch_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const struct mismatch *m = arg;
	const struct mm_args *a = rank == m->odd ? &m->odd_args : &m->args;
	/* Room for the largest case: allgather of nranks blocks of doubles. */
	size_t bytes = (m->args.count > m->odd_args.count ? m->args.count : m->odd_args.count) * 8 *
		       (size_t)nranks;
	void *send = calloc(1, bytes), *recv = calloc(1, bytes);
	if (!send || !recv) {
		free(send);
		free(recv);
		return harness_fail("out of memory");
	}
	harness_progress("%s: the mismatched call", m->name);
	double t0 = harness_now();
	const char *in = "the mismatched call";
	weft_status_t st = mm_run(a, send, recv, rank, comm);
	if (st == WEFT_SUCCESS) {
		harness_progress("%s: the barrier after it", m->name);
		in = "the barrier after the mismatched call";
		st = weft_barrier(comm);
	}
	double took = harness_now() - t0;
	free(send);
	free(recv);
	const char *msg = weft_comm_last_error(comm);
	if (st == WEFT_SUCCESS)
		return harness_fail("%s: the mismatch went unnoticed on this rank", m->name);
	if (st != WEFT_ERR_REMOTE && st != WEFT_ERR_INVALID_ARG)
		return harness_fail_status(comm, st,
					   "%s: in %s, expected remote failure or "
					   "invalid argument, not this",
					   m->name, in);
	if (took > MISMATCH_BOUND_S)
		return harness_fail("%s: failed after %.1f s in %s, more than %.0f s: %s", m->name,
				    took, in, MISMATCH_BOUND_S, msg);
	bool named = true;
	for (int k = 0; k < 3 && m->expect[k]; k++)
		named = named && msg && strstr(msg, m->expect[k]);
	if (named)
		__atomic_add_fetch(&((struct mm_report *)harness_shared())->named, 1,
				   __ATOMIC_SEQ_CST);
	return 0;
}

/* The transports the mismatches run over: both of the ofi paths too (the
 * tagged one leaves the signature out of its match and checks it when the
 * message lands; the rma one compares whole tags). */
static const struct {
	const char *name;
	const char *env[8];
} mm_transports[] = {
    {"shm", {"WEFT_TIMEOUT=30", "WEFT_BOOTSTRAP_TIMEOUT=10", NULL}},
    {"socket",
     {"WEFT_TIMEOUT=30", "WEFT_BOOTSTRAP_TIMEOUT=10", "WEFT_TRANSPORTS=socket",
      "WEFT_SOCKET_IFNAME=lo", NULL}},
    {"ofi tagged",
     {"WEFT_TIMEOUT=30", "WEFT_BOOTSTRAP_TIMEOUT=10", "WEFT_TRANSPORTS=ofi",
      "WEFT_SOCKET_IFNAME=lo", "WEFT_OFI_PROVIDER=tcp;ofi_rxm", "FI_TCP_IFACE=lo",
      "WEFT_OFI_PROTO=tagged", NULL}},
    {"ofi rma",
     {"WEFT_TIMEOUT=30", "WEFT_BOOTSTRAP_TIMEOUT=10", "WEFT_TRANSPORTS=ofi",
      "WEFT_SOCKET_IFNAME=lo", "WEFT_OFI_PROVIDER=tcp;ofi_rxm", "FI_TCP_IFACE=lo",
      "WEFT_OFI_PROTO=rma", NULL}},
};
/* The mm_transports of the suite's transport: [first, first + count). */
static int mm_first(void)
{
	return integ_over("socket") ? 1 : integ_over("ofi") ? 2 : 0;
}

static int mm_count(void)
{
	return integ_over("ofi") ? 2 : 1;
}

/* The rank @p line names as the one whose call differs: "rank X" after
 * "mismatched", else the "peer rank X" the message is about (ofi's tagged
 * path only knows that a peer's message does not fit); -1 if neither. */
static int mismatch_names(const char *line)
{
	const char *p = strstr(line, "mismatched");
	const char *at = p ? strstr(p, "rank ") : NULL;
	if (at)
		return atoi(at + 5);
	at = strstr(line, "peer rank ");
	return at ? atoi(at + 10) : -1;
}

/* What the ranks logged: some rank's WARN line names the mismatch; each
 * such line of a rank names the odd rank as the one that differs (the odd
 * rank's, one of the others), never a rank that called what it did. */
static void check_mismatch_logs(const struct harness_result *res, const struct mismatch *m,
				const char *over)
{
	int named = 0;
	for (int r = 0; r < MISMATCH_RANKS; r++) {
		const char *log = res->rank[r].log ? res->rank[r].log : "";
		char own[32];
		snprintf(own, sizeof(own), " rank %d: ", r);
		for (const char *p = strstr(log, "mismatched"); p;
		     p = strstr(p + 1, "mismatched")) {
			const char *start = p;
			while (start > log && start[-1] != '\n')
				start--;
			const char *end = strchr(p, '\n');
			char line[1024];
			snprintf(line, sizeof(line), "%.*s",
				 (int)(end ? (size_t)(end - start) : strlen(start)), start);
			if (!strstr(line, " weft WARN ") || !strstr(line, own))
				continue;
			int x = mismatch_names(line);
			bool right = r == m->odd ? x >= 0 && x != m->odd : x == m->odd;
			ck_assert_msg(right,
				      "%s over %s: rank %d (the odd one: %d) names rank %d: %s",
				      m->name, over, r, m->odd, x, line);
			named += strstr(line, m->expect[0]) != NULL;
		}
	}
	ck_assert_msg(named > 0, "%s over %s: no rank logged a WARN line with \"%s\"", m->name,
		      over, m->expect[0]);
}

START_TEST(mismatched_calls)
{
	const struct mismatch *m = &mismatches[_i / mm_count()];
	int t = mm_first() + _i % mm_count();
	const char *over = mm_transports[t].name;
	/* Not over ofi's tagged path: there a message matches by its step, and
	 * the odd rank's barrier sends on steps that the others' allreduce
	 * never posts, so nothing lands to compare (a stall, the timeout's to
	 * end; docs/transports.md, "ofi"). The rma path compares in order. */
	if (m->odd_args.count == 0 && strcmp(over, "ofi tagged") == 0)
		return;
	struct harness_job job = {
	    .nranks = MISMATCH_RANKS,
	    .env = mm_transports[t].env,
	    .body = mismatch_body,
	    .arg = (void *)m,
	    .timeout_s = 60,
	    .capture_stderr = true,
	};
	struct harness_result res;
	harness_run_job(&job, &res);
	printf("mismatch %s over %s: %.1f s\n", m->name, over, res.seconds);
	ck_assert_msg(res.ok, "%s over %s:\n%s", m->name, over, res.summary);
	struct mm_report report;
	memcpy(&report, res.shared, sizeof(report));
	ck_assert_msg(report.named > 0,
		      "%s over %s: every rank failed, but no message contains \"%s\"%s%s (see "
		      "stderr)",
		      m->name, over, m->expect[0], m->expect[1] ? " and " : "",
		      m->expect[1] ? m->expect[1] : "");
	check_mismatch_logs(&res, m, over);
	harness_result_free(&res);
}
END_TEST

/* --- verbs: a rank killed (SIGKILL) between allreduces, and a rank that
 * aborts: every survivor fails with WEFT_ERR_REMOTE within 5 s, with a
 * message from the verbs transport, including the ranks that only hear of
 * it from another survivor. --- */

struct verbs_death {
	bool abort; /* weft_comm_abort instead of SIGKILL */
	int victim, at_iter;
};

static int verbs_death_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const struct verbs_death *d = arg;
	enum { N = 4099 };
	int64_t *died_ns = harness_shared();
	float *buf = malloc(N * sizeof(float));
	if (!buf)
		return harness_fail("out of memory");
	for (int iter = 0; iter < 10000; iter++) {
		if (rank == d->victim && iter == d->at_iter) {
			__atomic_store_n(died_ns, (int64_t)(harness_now() * 1e9), __ATOMIC_SEQ_CST);
			if (!d->abort)
				kill(getpid(), SIGKILL);
			weft_comm_abort(comm);
			weft_status_t st =
			    weft_allreduce(WEFT_IN_PLACE, buf, N, WEFT_FLOAT32, WEFT_SUM, comm);
			free(buf);
			return st == WEFT_ERR_ABORTED ? 0 : harness_fail("after abort: %d", st);
		}
		for (int i = 0; i < N; i++)
			buf[i] = 1.0f;
		harness_progress("allreduce %d", iter);
		weft_status_t st =
		    weft_allreduce(WEFT_IN_PLACE, buf, N, WEFT_FLOAT32, WEFT_SUM, comm);
		if (st == WEFT_SUCCESS) {
			if (buf[N - 1] != (float)nranks)
				return harness_fail("allreduce %d: %g", iter, buf[N - 1]);
			continue;
		}
		int64_t died = __atomic_load_n(died_ns, __ATOMIC_SEQ_CST);
		double after = harness_now() - (double)died * 1e-9;
		const char *msg = weft_comm_last_error(comm);
		free(buf);
		if (!died)
			return harness_fail_status(comm, st, "allreduce %d failed first", iter);
		if (st != WEFT_ERR_REMOTE)
			return harness_fail_status(comm, st, "expected WEFT_ERR_REMOTE");
		if (after > 5.0)
			return harness_fail("noticed %.1f s after the victim's end", after);
		if (!msg || !strstr(msg, "verbs"))
			return harness_fail("message \"%s\" does not come from verbs", msg);
		fprintf(stderr, "rank %d: failed %.2f s after rank %d's %s: %s\n", rank, after,
			d->victim, d->abort ? "abort" : "death", msg);
		return 0;
	}
	return harness_fail("no error after 10000 allreduces");
}

static void run_verbs_death(int nranks, struct verbs_death d)
{
	struct integ_env e;
	integ_env_init(&e, 20);
	struct harness_job job = {
	    .nranks = nranks, .env = e.v, .body = verbs_death_body, .arg = &d, .timeout_s = 120};
	struct harness_result res;
	harness_run_job(&job, &res);
	printf("verbs: rank %d %s, nranks %d: %.1f s\n", d.victim, d.abort ? "aborts" : "killed",
	       nranks, res.seconds);
	for (int r = 0; r < nranks; r++) {
		const struct harness_rank_result *rr = &res.rank[r];
		if (r == d.victim && !d.abort)
			ck_assert_msg(rr->end == HARNESS_SIGNALED, "the victim lived: %s",
				      res.summary);
		else
			ck_assert_msg(rr->end == HARNESS_EXITED && rr->code == 0, "%s",
				      res.summary);
	}
}

START_TEST(verbs_peer_killed)
{
	run_verbs_death(4, (struct verbs_death){.victim = 1 + _i, .at_iter = 15});
}
END_TEST

START_TEST(verbs_peer_aborts)
{
	run_verbs_death(3, (struct verbs_death){.abort = true, .victim = 2, .at_iter = 10});
}
END_TEST

static void add(Suite *s)
{
	TCase *tc = integ_tcase(s, "auto", 60);
	if (!tc)
		return;
	if (integ_over("verbs")) {
		tcase_add_loop_test(tc, verbs_peer_killed, 0, 2);
		tcase_add_test(tc, verbs_peer_aborts);
		return;
	}
	if (integ_over("shm")) {
		tcase_add_test(tc, strangers_at_bootstrap);
		tcase_add_test(tc, init_then_exit);
		tcase_add_test(tc, missing_rank);
		tcase_add_test(tc, missing_ranks);
	}
	if (!integ_over("ofi")) {
		tcase_add_test(tc, peer_sigkill);
		tcase_add_test(tc, peer_exit);
		tcase_add_test(tc, peer_sigkill_during_large);
		tcase_add_test(tc, peer_abort);
		tcase_add_test(tc, peer_abort_from_thread);
	}
	tcase_add_loop_test(tc, mismatched_calls, 0, mm_count() * NMISMATCHES);
}

int main(int argc, char **argv)
{
	static const struct integ_suite suite = {"failures", "shm socket ofi verbs", add};
	return integ_main(argc, argv, &suite);
}
