/*
 * test_faults.c — fault injection in a loop: trials of a 4-rank job running
 * mixed collectives (allreduce small and large, allgather, broadcast,
 * barrier) in which one random rank is killed (SIGKILL) or stopped
 * (SIGSTOP) at a random moment (0–100 ms into the loop, from a timer in the
 * victim itself), over shm and socket, WEFT_TIMEOUT=3. Every survivor must
 * return an error (killed: within 1 s of the fault in the full loop, 3 s in
 * the short one; stopped: within 2 x WEFT_TIMEOUT), nothing may hang, and
 * no /dev/shm/weft-* entry may be left once the job is gone. A stopped
 * victim is killed by the last survivor to fail.
 *
 * make test runs WEFT_FAULT_TRIALS=4 (the default, two per transport);
 * tests/faults/fault_loop.sh runs 100 and prints the table for the note.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "harness.h"

#define NRANKS	  4
#define TIMEOUT_S 3.0
#define COUNT_BIG (256 * 1024)

struct fault_plan {
	int victim;
	bool stop; /* SIGSTOP, else SIGKILL */
	int delay_ms;
};

struct fault_shared {
	uint64_t secret; /* the job's: its /dev/shm names carry it */
	_Atomic int failed;
	_Atomic int victim_pid;
	double fault_at; /* harness_now() as the signal was raised */
	double error_at[NRANKS];
	int status[NRANKS];
};

static const char *const env_shm[] = {"WEFT_TIMEOUT=3", "WEFT_BOOTSTRAP_TIMEOUT=20", NULL};
static const char *const env_socket[] = {"WEFT_TIMEOUT=3", "WEFT_BOOTSTRAP_TIMEOUT=20",
					 "WEFT_TRANSPORTS=socket", "WEFT_SOCKET_IFNAME=lo", NULL};

static volatile sig_atomic_t fault_signal;

static void on_timer(int sig)
{
	struct fault_shared *sh = harness_shared();
	sh->fault_at = harness_now();
	raise(fault_signal);
}

static void arm(const struct fault_plan *p)
{
	struct fault_shared *sh = harness_shared();
	atomic_store(&sh->victim_pid, (int)getpid());
	fault_signal = p->stop ? SIGSTOP : SIGKILL;
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
	if (rank == p->victim)
		arm(p);
	weft_status_t st = WEFT_SUCCESS;
	double t0 = harness_now();
	for (int i = 0; st == WEFT_SUCCESS && harness_now() - t0 < 30; i++)
		st = one_round(comm, big, gather, i);
	free(big);
	free(gather);
	sh->error_at[rank] = harness_now();
	sh->status[rank] = st;
	if (st == WEFT_SUCCESS)
		return harness_fail("no error within 30 s of collectives");
	if (atomic_fetch_add(&sh->failed, 1) + 1 == nranks - 1 && p->stop)
		kill((pid_t)atomic_load(&sh->victim_pid), SIGKILL);
	return 0;
}

/* Rank 0's id holds the secret (bootstrap.h's layout). */
static int keep_secret(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	struct weft_uid uid;
	memcpy(&uid, id, sizeof(uid));
	((struct fault_shared *)harness_shared())->secret = uid.secret;
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

static int trials(void)
{
	const char *s = getenv("WEFT_FAULT_TRIALS");
	int n = s ? atoi(s) : 4;
	return n > 0 ? n : 4;
}

struct tally {
	int trials, hangs, late, leftovers;
	double max_s;
};

static void run_trial(int t, bool full, struct tally tally[2][2])
{
	bool socket = t % 2, stop = (t / 2) % 2;
	struct fault_plan plan = {
	    .victim = rand() % NRANKS, .stop = stop, .delay_ms = rand() % 100};
	struct harness_job job = {.nranks = NRANKS,
				  .env = socket ? env_socket : env_shm,
				  .body = fault_body,
				  .arg = &plan,
				  .timeout_s = 60,
				  .before_init = keep_secret};
	struct harness_result res;
	harness_run_job(&job, &res);
	struct fault_shared sh;
	memcpy(&sh, res.shared, sizeof(sh));
	struct tally *ty = &tally[socket][stop];
	double bound = stop ? 2 * TIMEOUT_S : full ? 1.0 : TIMEOUT_S, worst = 0;
	ty->trials++;
	for (int r = 0; r < NRANKS; r++) {
		const struct harness_rank_result *rr = &res.rank[r];
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
	printf("trial %3d: %s, rank %d %s after %3d ms: survivors failed within %.2f s%s\n", t,
	       socket ? "socket" : "shm", plan.victim, stop ? "stopped" : "killed", plan.delay_ms,
	       worst, left ? ", /dev/shm entries left" : "");
	fflush(stdout);
	ck_assert_msg(worst <= bound, "trial %d: a survivor took %.2f s (bound %.1f s)", t, worst,
		      bound);
	ck_assert_msg(left == 0, "trial %d: %d /dev/shm entries of the job left", t, left);
}

START_TEST(fault_loop)
{
	int n = trials();
	bool full = n >= 20;
	struct tally tally[2][2] = {0};
	srand((unsigned)getpid());
	for (int t = 0; t < n; t++)
		run_trial(t, full, tally);
	printf("| transport | fault | trials | max time to error | hangs | over bound | "
	       "/dev/shm left |\n|---|---|---|---|---|---|---|\n");
	for (int s = 0; s < 2; s++)
		for (int k = 0; k < 2; k++)
			printf("| %s | %s | %d | %.2f s | %d | %d | %d |\n", s ? "socket" : "shm",
			       k ? "SIGSTOP" : "SIGKILL", tally[s][k].trials, tally[s][k].max_s,
			       tally[s][k].hangs, tally[s][k].late, tally[s][k].leftovers);
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
