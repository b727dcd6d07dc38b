/*
 * faults.c — fault injection in a loop: trials of a 4-rank job running
 * mixed collectives (allreduce small and large, allgather, broadcast,
 * barrier) in which one random rank is killed (SIGKILL), stopped (SIGSTOP)
 * or aborted (weft_comm_abort from a second thread of its own while the
 * main one waits in a collective) at a random moment (0–100 ms into the
 * loop, from a timer or that thread in the victim itself), over shm,
 * socket and ofi (tcp;ofi_rxm on lo; WEFT_FAULT_OFI=0 leaves it out),
 * WEFT_TIMEOUT=3. Every survivor must return an error (killed, or
 * the aborting rank itself: within 1 s of the fault in the full loop, 3 s in
 * the short one; stopped, or a peer of the aborted rank: within 2 x
 * WEFT_TIMEOUT), nothing may hang, no /dev/shm/weft-* entry may be left once
 * the job is gone, and every rank that returned holds, after
 * weft_comm_destroy(), no more file descriptors than before its init
 * (/proc/self/fd). A stopped victim is killed by the last survivor to fail.
 *
 * make test runs WEFT_FAULT_TRIALS=9 (the default: each fault once per
 * transport); tests/faults/fault_loop.sh runs 102 and prints the table for
 * the note. WEFT_FAULT_ONLY=shm|socket|ofi and WEFT_FAULT_KIND=kill|stop|abort
 * narrow the loop to one transport or one fault (to chase a rare one). A
 * descriptor left behind is named: its target, and for a TCP socket its
 * state, ports and whether one of the rank's listeners accepted it.
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
#include "core/comm.h"
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
	bool ofi; /* over libfabric: its listeners' leftovers are told apart */
};

struct fault_shared {
	unsigned char id[WEFT_HS_ID_BYTES]; /* the communicator's: its /dev/shm names carry it */
	_Atomic int failed;
	_Atomic int victim_pid;
	double fault_at; /* harness_now() as the signal was raised */
	double error_at[NRANKS];
	int status[NRANKS];
	int fds_left[NRANKS]; /* after destroy, beyond those open before init */
	/* Of those, over ofi, TCP connections libfabric's listener accepted
	 * and never handed on (libfabric 1.17, docs/reliability.md, "Fault injection in a loop").
	 */
	int provider_fds[NRANKS];
	char fd_names[NRANKS][176];
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

static void note_listeners(void);

static int fault_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const struct fault_plan *p = arg;
	struct fault_shared *sh = harness_shared();
	note_listeners();
	if (rank == 0)
		memcpy(sh->id, ((const struct weft_comm *)comm)->id, sizeof(sh->id));
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

#define MAX_FDS 4096

/* Which descriptors this process has open (not the directory being read):
 * open[fd] set for each below MAX_FDS; returns how many there are. */
static int list_fds(bool open[MAX_FDS])
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	memset(open, 0, MAX_FDS * sizeof(bool));
	while ((e = readdir(d))) {
		int fd = atoi(e->d_name);
		if (e->d_name[0] == '.' || fd == dirfd(d))
			continue;
		n++;
		if (fd >= 0 && fd < MAX_FDS)
			open[fd] = true;
	}
	closedir(d);
	return n;
}

static bool fds_before_init[MAX_FDS];

/* One line of /proc/net/tcp{,6}. */
struct tcp_entry {
	unsigned state; /* 1 established, 10 listening */
	unsigned long local_port, remote_port, inode;
};

/* Calls @p fn for every TCP socket of the process's network namespace;
 * stops when it returns true, and returns that. */
static bool tcp_scan(bool (*fn)(const struct tcp_entry *e, void *arg), void *arg)
{
	const char *const tables[] = {"/proc/self/net/tcp", "/proc/self/net/tcp6"};
	bool stop = false;
	for (int t = 0; t < 2 && !stop; t++) {
		FILE *f = fopen(tables[t], "r");
		char line[512];
		while (f && !stop && fgets(line, sizeof(line), f)) {
			char local[64], remote[64];
			struct tcp_entry e;
			if (sscanf(line, " %*d: %63s %63s %x %*s %*s %*s %*d %*d %lu", local,
				   remote, &e.state, &e.inode) != 4)
				continue;
			char *lp = strchr(local, ':'), *rp = strchr(remote, ':');
			e.local_port = lp ? strtoul(lp + 1, NULL, 16) : 0;
			e.remote_port = rp ? strtoul(rp + 1, NULL, 16) : 0;
			stop = fn(&e, arg);
		}
		if (f)
			fclose(f);
	}
	return stop;
}

/* The ports this rank listened on during its job (its TCP listeners, the
 * transports' and libfabric's): an accepted connection left behind has
 * one of them as its local port. */
static unsigned long listen_ports[32];
static int nlisten_ports;

static bool add_listener(const struct tcp_entry *e, void *arg)
{
	(void)arg;
	if (e->state == 10 && nlisten_ports < 32 && harness_own_socket(e->inode))
		listen_ports[nlisten_ports++] = e->local_port;
	return false;
}

static void note_listeners(void)
{
	nlisten_ports = 0;
	tcp_scan(add_listener, NULL);
}

struct socket_query {
	unsigned long inode;
	char *out;
	size_t cap;
	bool accepted; /* on a listener of this rank */
};

static bool describe_socket(const struct tcp_entry *e, void *arg)
{
	struct socket_query *q = arg;
	if (e->inode != q->inode)
		return false;
	for (int i = 0; i < nlisten_ports; i++)
		q->accepted |= listen_ports[i] == e->local_port;
	size_t used = strlen(q->out);
	snprintf(q->out + used, q->cap - used, ", tcp state %u, port %lu -> %lu%s", e->state,
		 e->local_port, e->remote_port,
		 q->accepted ? " (accepted on a listener of ours)" : "");
	return true;
}

/* For a TCP socket ("socket:[INODE]"): its state and ports appended to
 * @p out; true if one of this rank's listeners accepted it. */
static bool tcp_socket_note(const char *target, char *out, size_t cap)
{
	struct socket_query q = {.out = out, .cap = cap};
	if (sscanf(target, "socket:[%lu]", &q.inode) == 1)
		tcp_scan(describe_socket, &q);
	return q.accepted;
}

/* The descriptors open now and not before init, and in the shared record
 * what the first of them points to. Over ofi, a TCP connection accepted on
 * a listener of this rank (libfabric's: the rank has no other) is counted
 * apart, as the provider's. */
static int fds_after_destroy(int rank, int nranks, void *arg)
{
	const struct fault_plan *p = arg;
	struct fault_shared *sh = harness_shared();
	static bool now[MAX_FDS];
	list_fds(now);
	sh->fds_left[rank] = sh->provider_fds[rank] = 0;
	sh->fd_names[rank][0] = '\0';
	for (int fd = 0; fd < MAX_FDS; fd++) {
		if (!now[fd] || fds_before_init[fd])
			continue;
		char path[64], target[64] = "", note[160];
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		ssize_t len = readlink(path, target, sizeof(target) - 1);
		target[len > 0 ? len : 0] = '\0';
		snprintf(note, sizeof(note), "%s", target);
		bool accepted = tcp_socket_note(target, note, sizeof(note));
		if (p->ofi && accepted)
			sh->provider_fds[rank]++;
		else
			sh->fds_left[rank]++;
		if (!sh->fd_names[rank][0] || !(p->ofi && accepted))
			snprintf(sh->fd_names[rank], sizeof(sh->fd_names[rank]), "%d -> %s", fd,
				 note);
	}
	return 0;
}

static int keep_fds(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	list_fds(fds_before_init);
	return 0;
}

/* /dev/shm entries of this job's shm transport (other jobs on the machine
 * have their own random id in their names). */
static int shm_entries(const unsigned char *id)
{
	int n = 0;
	char prefix[64];
	int len = snprintf(prefix, sizeof(prefix), "weft-");
	for (int i = 0; i < WEFT_HS_ID_BYTES; i++)
		len += snprintf(prefix + len, sizeof(prefix) - (size_t)len, "%02x", id[i]);
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	while (d && (e = readdir(d)))
		n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
	if (d)
		closedir(d);
	return n;
}

/* The transports in the loop: shm, socket and ofi (not with
 * WEFT_FAULT_OFI=0); WEFT_FAULT_ONLY=NAME keeps one of them. */
static int chosen[NTRANSPORTS];

static int ntransports(void)
{
	const char *only = getenv("WEFT_FAULT_ONLY");
	const char *s = getenv("WEFT_FAULT_OFI");
	int n = 0;
	for (int t = 0; t < NTRANSPORTS; t++) {
		bool ofi = strcmp(transport_names[t], "ofi") == 0;
		if (only && *only ? strcmp(only, transport_names[t]) == 0
				  : !ofi || !s || strcmp(s, "0") != 0)
			chosen[n++] = t;
	}
	return n;
}

/* The fault of the @p n-th trial of a transport: each in turn, or the one
 * WEFT_FAULT_KIND names (kill, stop or abort). */
static const char *const fault_kinds[FAULT_KINDS] = {"kill", "stop", "abort"};

static enum fault fault_kind(int n)
{
	const char *const *kinds = fault_kinds;
	const char *only = getenv("WEFT_FAULT_KIND");
	for (int k = 0; only && k < FAULT_KINDS; k++)
		if (strcmp(only, kinds[k]) == 0)
			return (enum fault)k;
	return (enum fault)(n % FAULT_KINDS);
}

static int trials(void)
{
	const char *s = getenv("WEFT_FAULT_TRIALS");
	int n = s ? atoi(s) : ntransports() * FAULT_KINDS;
	return n > 0 ? n : ntransports() * FAULT_KINDS;
}

struct tally {
	int trials, hangs, late, leftovers, fd_leaks, provider_leaks;
	double max_s;
};

/* The descriptors rank @p r kept after destroy (0 for a rank that did not
 * return), beside libfabric's (*provider), and one of them in @p name. */
static int fds_kept(const struct fault_shared *sh, int r, int *provider, char *name, size_t cap)
{
	if (sh->fds_left[r] > 0 || sh->provider_fds[r] > 0)
		snprintf(name, cap, "rank %d kept %d, libfabric %d (fd %s)", r, sh->fds_left[r],
			 sh->provider_fds[r], sh->fd_names[r]);
	*provider += sh->provider_fds[r];
	return sh->fds_left[r] > 0 ? sh->fds_left[r] : 0;
}

static void run_trial(int t, bool full, struct tally tally[NTRANSPORTS][FAULT_KINDS])
{
	int tp = chosen[t % ntransports()];
	enum fault fault = fault_kind(t / ntransports());
	bool stop = fault == FAULT_STOP;
	struct fault_plan plan = {.victim = rand() % NRANKS,
				  .fault = fault,
				  .delay_ms = rand() % 100,
				  .ofi = strcmp(transport_names[tp], "ofi") == 0};
	struct harness_job job = {.nranks = NRANKS,
				  .env = transport_envs[tp],
				  .body = fault_body,
				  .arg = &plan,
				  .timeout_s = 60,
				  .before_init = keep_fds,
				  .after_destroy = fds_after_destroy};
	struct harness_result res;
	harness_run_job(&job, &res);
	struct fault_shared sh;
	memcpy(&sh, res.shared, sizeof(sh));
	struct tally *ty = &tally[tp][fault];
	/* An aborted rank is alive: its shm peers may only see it stall. */
	double bound = stop || fault == FAULT_ABORT ? 2 * TIMEOUT_S : full ? 1.0 : TIMEOUT_S;
	double worst = 0;
	char fd_note[256] = "";
	int fds = 0, provider = 0;
	ty->trials++;
	for (int r = 0; r < NRANKS; r++) {
		const struct harness_rank_result *rr = &res.rank[r];
		fds += fds_kept(&sh, r, &provider, fd_note, sizeof(fd_note));
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
	int left = shm_entries(sh.id);
	ty->leftovers += left > 0;
	ty->fd_leaks += fds > 0;
	ty->provider_leaks += provider > 0;
	printf("trial %3d: %s, rank %d %s after %3d ms: survivors failed within %.2f s%s%s%s\n", t,
	       transport_names[tp], plan.victim, fault_names[fault], plan.delay_ms, worst,
	       left ? ", /dev/shm entries left" : "", fds || provider ? ", descriptors left: " : "",
	       fd_note);
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
	       "/dev/shm left | fds left | libfabric's fds left |\n"
	       "|---|---|---|---|---|---|---|---|---|\n");
	for (int i = 0; i < ntransports(); i++)
		for (int k = 0, s = chosen[i]; k < FAULT_KINDS; k++)
			printf("| %s | %s | %d | %.2f s | %d | %d | %d | %d | %d |\n",
			       transport_names[s], fault_signals[k], tally[s][k].trials,
			       tally[s][k].max_s, tally[s][k].hangs, tally[s][k].late,
			       tally[s][k].leftovers, tally[s][k].fd_leaks,
			       tally[s][k].provider_leaks);
}
END_TEST

int main(void)
{
	if (ntransports() == 0) {
		fprintf(stderr,
			"faults: WEFT_FAULT_ONLY=%s names no transport (shm, socket, "
			"ofi)\n",
			getenv("WEFT_FAULT_ONLY"));
		return EXIT_FAILURE;
	}
	const char *kind = getenv("WEFT_FAULT_KIND");
	bool known = !kind || !*kind;
	for (int k = 0; !known && k < FAULT_KINDS; k++)
		known = strcmp(kind, fault_kinds[k]) == 0;
	if (!known) {
		fprintf(stderr, "faults: WEFT_FAULT_KIND=%s is not kill, stop or abort\n", kind);
		return EXIT_FAILURE;
	}
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
