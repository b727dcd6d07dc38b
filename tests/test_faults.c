/*
 * test_faults.c — fault injection in a loop: trials of a 4-rank job running
 * mixed collectives (allreduce small and large, allgather, broadcast,
 * barrier) in which one random rank is killed (SIGKILL), stopped (SIGSTOP)
 * or aborted (weft_comm_abort from a second thread of its own while the
 * main one waits in a collective) at a random moment (0–100 ms into the
 * loop, from a timer or that thread in the victim itself), over shm and
 * socket, and ofi (tcp;ofi_rxm on lo) when WEFT_FAULT_OFI=1 (not by
 * default: a survivor or the aborting rank can crash inside libfabric,
 * README), WEFT_TIMEOUT=3. Every survivor must return an error (killed, or
 * the aborting rank itself: within 1 s of the fault in the full loop, 3 s in
 * the short one; stopped, or a peer of the aborted rank: within 2 x
 * WEFT_TIMEOUT), nothing may hang, no /dev/shm/weft-* entry may be left once
 * the job is gone, and every rank that returned holds, after
 * weft_comm_destroy(), no more file descriptors than before its init
 * (/proc/self/fd). A stopped victim is killed by the last survivor to fail.
 *
 * make test runs WEFT_FAULT_TRIALS=6 (the default: each fault once per
 * transport); tests/faults/fault_loop.sh runs 102 and prints the table for
 * the note.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "harness.h"

#define NRANKS	  4
#define TIMEOUT_S 3.0
#define COUNT_BIG (256 * 1024)

enum fault { FAULT_KILL, FAULT_STOP, FAULT_ABORT, FAULT_KINDS };
static const char *const fault_names[FAULT_KINDS] = {"killed", "stopped", "aborted"};
static const char *const fault_signals[FAULT_KINDS] = {"SIGKILL", "SIGSTOP", "abort"};

struct fault_plan {
	int victim;
	enum fault fault;
	int delay_ms;
};

struct fault_shared {
	uint64_t secret; /* the job's: its /dev/shm names carry it */
	_Atomic int failed;
	_Atomic int victim_pid;
	double fault_at; /* harness_now() as the signal was raised */
	double error_at[NRANKS];
	int status[NRANKS];
	int fds_left[NRANKS]; /* after destroy, beyond those open before init */
	char fd_names[NRANKS][96];
};

static const char *const env_shm[] = {"WEFT_TIMEOUT=3", "WEFT_BOOTSTRAP_TIMEOUT=20", NULL};
static const char *const env_socket[] = {"WEFT_TIMEOUT=3", "WEFT_BOOTSTRAP_TIMEOUT=20",
					 "WEFT_TRANSPORTS=socket", "WEFT_SOCKET_IFNAME=lo", NULL};
static const char *const env_ofi[] = {"WEFT_TIMEOUT=3",	     "WEFT_BOOTSTRAP_TIMEOUT=20",
				      "WEFT_TRANSPORTS=ofi", "WEFT_OFI_PROVIDER=tcp;ofi_rxm",
				      "FI_TCP_IFACE=lo",     NULL};

#define NTRANSPORTS 3
static const char *const transport_names[NTRANSPORTS] = {"shm", "socket", "ofi"};
static const char *const *const transport_envs[NTRANSPORTS] = {env_shm, env_socket, env_ofi};

static volatile sig_atomic_t fault_signal;

static void on_timer(int sig)
{
	struct fault_shared *sh = harness_shared();
	sh->fault_at = harness_now();
	raise(fault_signal);
}

struct aborter {
	weft_comm_t comm;
	int delay_ms;
};

static void *abort_later(void *arg)
{
	const struct aborter *a = arg;
	struct timespec ts = {0, (a->delay_ms + 1) * 1000000L};
	nanosleep(&ts, NULL);
	((struct fault_shared *)harness_shared())->fault_at = harness_now();
	weft_comm_abort(a->comm);
	return NULL;
}

static void arm(const struct fault_plan *p)
{
	struct fault_shared *sh = harness_shared();
	atomic_store(&sh->victim_pid, (int)getpid());
	fault_signal = p->fault == FAULT_STOP ? SIGSTOP : SIGKILL;
	signal(SIGALRM, on_timer);
	struct itimerval it = {.it_value = {0, (p->delay_ms + 1) * 1000}};
	setitimer(ITIMER_REAL, &it, NULL);
}

static weft_status_t one_round(weft_comm_t comm, float *big, float *gather, int i)
{
	float x = 1;
	switch (i % 5) {
	case 0: return weft_allreduce(WEFT_IN_PLACE, &x, 1, WEFT_FLOAT32, WEFT_SUM, comm);
	case 1: return weft_allreduce(WEFT_IN_PLACE, big, COUNT_BIG, WEFT_FLOAT32, WEFT_SUM, comm);
	case 2: return weft_allgather(big, gather, 1024, WEFT_FLOAT32, comm);
	case 3: return weft_broadcast(WEFT_IN_PLACE, big, 4096, WEFT_FLOAT32, i % NRANKS, comm);
	default: return weft_barrier(comm);
	}
}

static int fault_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const struct fault_plan *p = arg;
	struct fault_shared *sh = harness_shared();
	float *big = calloc(COUNT_BIG, sizeof(float));
	float *gather = calloc((size_t)1024 * nranks, sizeof(float));
	if (!big || !gather)
		return harness_fail("no memory");
	bool aborts = rank == p->victim && p->fault == FAULT_ABORT;
	struct aborter ab = {comm, p->delay_ms};
	pthread_t thread;
	if (aborts && pthread_create(&thread, NULL, abort_later, &ab))
		return harness_fail("pthread_create failed");
	if (rank == p->victim && !aborts)
		arm(p);
	weft_status_t st = WEFT_SUCCESS;
	double t0 = harness_now();
	for (int i = 0; st == WEFT_SUCCESS && harness_now() - t0 < 30; i++)
		st = one_round(comm, big, gather, i);
	free(big);
	free(gather);
	sh->error_at[rank] = harness_now();
	sh->status[rank] = st;
	if (aborts)
		pthread_join(thread, NULL);
	if (st == WEFT_SUCCESS)
		return harness_fail("no error within 30 s of collectives");
	if (aborts && st != WEFT_ERR_ABORTED)
		return harness_fail_status(comm, st, "aborted from a thread: expected aborted");
	if (atomic_fetch_add(&sh->failed, 1) + 1 == nranks - 1 && p->fault == FAULT_STOP)
		kill((pid_t)atomic_load(&sh->victim_pid), SIGKILL);
	return 0;
}

/* Open descriptors of this process (not the directory being read), and in
 * @p last (when not NULL) what the highest-numbered one points to. */
static int count_fds(char *last, size_t cap)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || atoi(e->d_name) == dirfd(d))
			continue;
		n++;
		char path[300];
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		ssize_t len = last ? readlink(path, last, cap - 1) : -1;
		if (len >= 0)
			last[len] = '\0';
	}
	closedir(d);
	return n;
}

static int fds_before_init;

static int fds_after_destroy(int rank, int nranks, void *arg)
{
	struct fault_shared *sh = harness_shared();
	char last[96] = "";
	int n = count_fds(last, sizeof(last));
	sh->fds_left[rank] = n - fds_before_init;
	snprintf(sh->fd_names[rank], sizeof(sh->fd_names[rank]), "%s", last);
	return 0;
}

/* Rank 0's id holds the secret (bootstrap.h's layout). */
static int keep_secret(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	struct weft_uid uid;
	memcpy(&uid, id, sizeof(uid));
	if (rank == 0)
		((struct fault_shared *)harness_shared())->secret = uid.secret;
	fds_before_init = count_fds(NULL, 0);
	return 0;
}

/* /dev/shm entries of this job's shm transport (other jobs on the machine
 * have their own secret in their names). */
static int shm_entries(uint64_t secret)
{
	int n = 0;
	char prefix[32];
	snprintf(prefix, sizeof(prefix), "weft-%016llx-", (unsigned long long)secret);
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	while (d && (e = readdir(d)))
		n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
	if (d)
		closedir(d);
	return n;
}

/* The transports in the loop: shm and socket, and ofi with WEFT_FAULT_OFI=1. */
static int ntransports(void)
{
	const char *s = getenv("WEFT_FAULT_OFI");
	return s && strcmp(s, "1") == 0 ? NTRANSPORTS : NTRANSPORTS - 1;
}

static int trials(void)
{
	const char *s = getenv("WEFT_FAULT_TRIALS");
	int n = s ? atoi(s) : ntransports() * FAULT_KINDS;
	return n > 0 ? n : ntransports() * FAULT_KINDS;
}

struct tally {
	int trials, hangs, late, leftovers, fd_leaks;
	double max_s;
};

/* The descriptors rank @p r kept after destroy (0 for a rank that did not
 * return), and one of them in @p name. */
static int fds_kept(const struct fault_shared *sh, int r, char *name, size_t cap)
{
	if (sh->fds_left[r] > 0)
		snprintf(name, cap, "rank %d kept %d (fd -> %s)", r, sh->fds_left[r],
			 sh->fd_names[r]);
	return sh->fds_left[r] > 0 ? sh->fds_left[r] : 0;
}

static void run_trial(int t, bool full, struct tally tally[NTRANSPORTS][FAULT_KINDS])
{
	int tp = t % ntransports();
	enum fault fault = (enum fault)((t / ntransports()) % FAULT_KINDS);
	bool stop = fault == FAULT_STOP;
	struct fault_plan plan = {
	    .victim = rand() % NRANKS, .fault = fault, .delay_ms = rand() % 100};
	struct harness_job job = {.nranks = NRANKS,
				  .env = transport_envs[tp],
				  .body = fault_body,
				  .arg = &plan,
				  .timeout_s = 60,
				  .before_init = keep_secret,
				  .after_destroy = fds_after_destroy};
	struct harness_result res;
	harness_run_job(&job, &res);
	struct fault_shared sh;
	memcpy(&sh, res.shared, sizeof(sh));
	struct tally *ty = &tally[tp][fault];
	/* An aborted rank is alive: its shm peers may only see it stall. */
	double bound = stop || fault == FAULT_ABORT ? 2 * TIMEOUT_S : full ? 1.0 : TIMEOUT_S;
	double worst = 0;
	char fd_note[160] = "";
	int fds = 0;
	ty->trials++;
	for (int r = 0; r < NRANKS; r++) {
		const struct harness_rank_result *rr = &res.rank[r];
		fds += fds_kept(&sh, r, fd_note, sizeof(fd_note));
		if (r == plan.victim && fault == FAULT_ABORT) {
			double s = sh.error_at[r] - sh.fault_at;
			ck_assert_msg(rr->end == HARNESS_EXITED && rr->code == 0,
				      "trial %d: the aborting rank %d: %s", t, r, rr->failure);
			ck_assert_msg(
			    s <= (full ? 1.0 : TIMEOUT_S),
			    "trial %d: the aborted rank's collective returned after %.2f s", t, s);
		}
		if (r == plan.victim)
			continue;
		ck_assert_msg(rr->end != HARNESS_HUNG, "trial %d: rank %d hung: %s", t, r,
			      rr->progress);
		ck_assert_msg(rr->end == HARNESS_EXITED && rr->code == 0, "trial %d: rank %d: %s",
			      t, r, rr->failure);
		double s = sh.error_at[r] - sh.fault_at;
		worst = s > worst ? s : worst;
	}
	ty->hangs += res.rank[plan.victim].end == HARNESS_HUNG;
	ty->late += worst > bound;
	ty->max_s = worst > ty->max_s ? worst : ty->max_s;
	int left = shm_entries(sh.secret);
	ty->leftovers += left > 0;
	ty->fd_leaks += fds > 0;
	printf("trial %3d: %s, rank %d %s after %3d ms: survivors failed within %.2f s%s%s%s\n", t,
	       transport_names[tp], plan.victim, fault_names[fault], plan.delay_ms, worst,
	       left ? ", /dev/shm entries left" : "", fds ? ", descriptors left: " : "", fd_note);
	fflush(stdout);
	ck_assert_msg(worst <= bound, "trial %d: a survivor took %.2f s (bound %.1f s)", t, worst,
		      bound);
	ck_assert_msg(left == 0, "trial %d: %d /dev/shm entries of the job left", t, left);
	ck_assert_msg(fds == 0, "trial %d: descriptors left after destroy: %s", t, fd_note);
}

START_TEST(fault_loop)
{
	int n = trials();
	bool full = n >= 20;
	struct tally tally[NTRANSPORTS][FAULT_KINDS] = {0};
	srand((unsigned)getpid());
	for (int t = 0; t < n; t++)
		run_trial(t, full, tally);
	printf("| transport | fault | trials | max time to error | hangs | over bound | "
	       "/dev/shm left | fds left |\n|---|---|---|---|---|---|---|---|\n");
	for (int s = 0; s < ntransports(); s++)
		for (int k = 0; k < FAULT_KINDS; k++)
			printf("| %s | %s | %d | %.2f s | %d | %d | %d | %d |\n",
			       transport_names[s], fault_signals[k], tally[s][k].trials,
			       tally[s][k].max_s, tally[s][k].hangs, tally[s][k].late,
			       tally[s][k].leftovers, tally[s][k].fd_leaks);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("faults");
	TCase *tc = tcase_create("loop");
	tcase_set_timeout(tc, 60.0 * (trials() + 1));
	tcase_add_test(tc, fault_loop);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
