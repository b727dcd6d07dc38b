/*
 * flood.c — strangers cannot exhaust a listener or slow a job down
 * to failure. While 3 ranks initialise and then loop AllReduces over
 * sockets connected on demand (so every listener stays open: the root and
 * the relay listeners during init, each rank's socket listener, watch
 * socket and /metrics endpoint during the job), a flooder process keeps 2,000 silent
 * connections open across them, opens 10,000 more that send garbage or a
 * well-formed handshake made with the wrong key and leave, and sends
 * 10,000 garbage datagrams to each watch socket. The job loops for 3 s,
 * or until the flood is thick enough to prove anything (a loaded machine
 * makes it slowly). Every AllReduce must be
 * exact, and no rank may hold more than a fixed number of descriptors
 * beyond what it had before the job (the listeners' WEFT_MAX_PENDING
 * handshakes each, and a little slack).
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "harness.h"
#include "stranger.h"

#define NRANKS	      3
#define SILENT	      2000
#define NOISY	      10000
#define DATAGRAMS     10000
#define MAX_PENDING   32
#define FD_SLACK      48
#define MAX_TARGETS   64
#define LOOP_SECONDS  3.0
#define LOOP_MAX_S    30.0 /* ... or longer, until the flood is thick enough to prove anything */
#define METRICS_CONNS "8"  /* the /metrics endpoint's connections (and its epoll, pipe) */

struct flood {
	_Atomic int stop;
	_Atomic int root_port;
	_Atomic int pid[NRANKS];
	_Atomic int baseline[NRANKS]; /* descriptors before init */
	_Atomic int peak[NRANKS];     /* the most seen during the job */
	_Atomic long silent, noisy, datagrams;
	_Atomic long at_root;	  /* connections to the root's port */
	_Atomic long at_metrics;  /* connections to the /metrics endpoints */
	_Atomic int metrics_port; /* the endpoints' base port (rank r: + r) */
	_Atomic int bad[NRANKS];  /* allreduce results that were wrong */
};

static struct flood *fl;

static int fd_count(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

static void note_fds(int rank)
{
	int n = fd_count();
	if (n > fl->peak[rank])
		fl->peak[rank] = n;
}

/* ---- the flooder ---- */

/* TCP ports in LISTEN (tcp = true) or UDP ports bound, of process @p pid. */
static int ports_of(pid_t pid, bool tcp, unsigned *out, int max)
{
	int n = 0;
	FILE *fp = fopen(tcp ? "/proc/net/tcp" : "/proc/net/udp", "r");
	char line[512];
	while (fp && n < max && fgets(line, sizeof(line), fp)) {
		char state[8];
		unsigned long inode;
		unsigned p;
		if (sscanf(line, "%*s %*[0-9A-Fa-f]:%x %*s %7s %*s %*s %*s %*s %*s %lu", &p, state,
			   &inode) == 3 &&
		    (!tcp || strcmp(state, "0A") == 0) && harness_pid_socket(pid, inode))
			out[n++] = p;
	}
	if (fp)
		fclose(fp);
	return n;
}

static int targets(unsigned *tcp, int *ntcp, unsigned *udp, int *nudp)
{
	*ntcp = *nudp = 0;
	if (fl->root_port)
		tcp[(*ntcp)++] = (unsigned)fl->root_port;
	for (int r = 0; r < NRANKS; r++) {
		if (!fl->pid[r])
			continue;
		*ntcp += ports_of(fl->pid[r], true, tcp + *ntcp, MAX_TARGETS - *ntcp);
		*nudp += ports_of(fl->pid[r], false, udp + *nudp, MAX_TARGETS - *nudp);
	}
	return *ntcp + *nudp;
}

static void datagram(unsigned port)
{
	static int fd = -1;
	if (fd < 0)
		fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in to = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	unsigned char junk[176];
	memset(junk, 0x5a, sizeof(junk));
	if (sendto(fd, junk, sizeof(junk), MSG_DONTWAIT, (struct sockaddr *)&to, sizeof(to)) > 0)
		fl->datagrams++;
}

static bool at_metrics(unsigned port)
{
	return port >= (unsigned)fl->metrics_port && port < (unsigned)fl->metrics_port + NRANKS;
}

static void flooder(void)
{
	struct rlimit rl = {SILENT + 256, SILENT + 256};
	setrlimit(RLIMIT_NOFILE, &rl);
	static int silent[SILENT];
	int nsilent = 0;
	unsigned tcp[MAX_TARGETS], udp[MAX_TARGETS];
	int ntcp, nudp;
	double looked = 0;
	ntcp = nudp = 0;
	for (long round = 0; !fl->stop; round++) {
		if (harness_now() - looked > 0.05) { /* the listeners come and go */
			targets(tcp, &ntcp, udp, &nudp);
			looked = harness_now();
		}
		if (!ntcp && !nudp) {
			usleep(1000);
			continue;
		}
		for (int i = 0; i < ntcp; i++) {
			if (nsilent < SILENT) {
				int fd = stranger_dial(tcp[i], STRANGER_SILENT, WEFT_HS_SOCKET,
						       NULL, 0, 0, NULL, 0);
				if (fd >= 0) {
					silent[nsilent++] = fd;
					fl->silent++;
					fl->at_root += (int)tcp[i] == fl->root_port;
					fl->at_metrics += at_metrics(tcp[i]);
				}
			}
			if (fl->noisy < NOISY) {
				enum stranger_kind k =
				    round % 2 ? STRANGER_GARBAGE : STRANGER_SILENT;
				int fd =
				    stranger_dial(tcp[i], k, WEFT_HS_ROOT, NULL, 0, -1, NULL, 0);
				if (fd >= 0) {
					if (k ==
					    STRANGER_SILENT) /* a hello with a wrong key's nonce */
						send(fd,
						     &(struct weft_hs_hello){
							 .magic = WEFT_HS_MAGIC,
							 .version = WEFT_HS_VERSION,
							 .role = WEFT_HS_SOCKET},
						     sizeof(struct weft_hs_hello), MSG_NOSIGNAL);
					close(fd);
					fl->noisy++;
					fl->at_root += (int)tcp[i] == fl->root_port;
					fl->at_metrics += at_metrics(tcp[i]);
				}
			}
		}
		for (int i = 0; i < nudp && fl->datagrams < (long)DATAGRAMS * nudp; i++)
			datagram(udp[i]);
	}
	for (int i = 0; i < nsilent; i++)
		close(silent[i]);
}

/* ---- the job ---- */

static int before(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	struct weft_uid uid;
	memcpy(&uid, id->internal, sizeof(uid));
	if (rank == 0)
		fl->root_port = ntohs(uid.addr.in4.sin_port);
	fl->baseline[rank] = fd_count();
	fl->pid[rank] = (int)getpid();
	/* Init under the flood: the root's door is already crowded. */
	for (double t0 = harness_now(); fl->at_root < 400 && harness_now() - t0 < 5;)
		usleep(1000);
	return 0;
}

/* The flood is thick enough to prove anything (checked again at the end). */
static bool thick(void)
{
	return fl->silent >= 500 && fl->noisy >= 2000 && fl->at_root >= 400 &&
	       fl->at_metrics >= 100 && fl->datagrams >= 1000;
}

static int flood_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	static float x[4096];
	double t0 = harness_now();
	int calls = 0;
	for (int go = 1; go;) {
		for (int i = 0; i < 4096; i++)
			x[i] = (float)(rank + i);
		weft_status_t st =
		    weft_allreduce(WEFT_IN_PLACE, x, 4096, WEFT_FLOAT32, WEFT_SUM, comm);
		if (st != WEFT_SUCCESS)
			return harness_fail_status(comm, st, "allreduce %d under the flood", calls);
		for (int i = 0; i < 4096; i++)
			if (x[i] != (float)(3 + 3 * i)) {
				fl->bad[rank]++;
				return harness_fail("allreduce %d: element %d is %g", calls, i,
						    (double)x[i]);
			}
		if (++calls % 16 == 0)
			note_fds(rank);
		/* every rank stops at the same call */
		double t = harness_now() - t0;
		int mine = t < LOOP_SECONDS || (!thick() && t < LOOP_MAX_S);
		st = weft_allreduce(&mine, &go, 1, WEFT_INT32, WEFT_MIN, comm);
		if (st != WEFT_SUCCESS)
			return harness_fail_status(comm, st, "allreduce %d under the flood", calls);
	}
	note_fds(rank);
	return 0;
}

START_TEST(flood_every_listener)
{
	fl = mmap(NULL, sizeof(*fl), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert(fl != MAP_FAILED);
	memset(fl, 0, sizeof(*fl));
	pid_t fp = fork();
	ck_assert_int_ge(fp, 0);
	if (fp == 0) {
		flooder();
		_exit(0);
	}
	char pending[32], metrics[48];
	snprintf(pending, sizeof(pending), "WEFT_MAX_PENDING=%d", MAX_PENDING);
	fl->metrics_port = 30000 + (int)(getpid() % 20000);
	snprintf(metrics, sizeof(metrics), "WEFT_METRICS_PORT=%d", fl->metrics_port);
	const char *const env[] = {"WEFT_TRANSPORTS=socket",
				   "WEFT_SOCKET_IFNAME=lo",
				   "WEFT_CONNECT=lazy",
				   "WEFT_SOCKET_NSOCKS=2",
				   "WEFT_TIMEOUT=60",
				   "WEFT_HANDSHAKE_TIMEOUT=2",
				   pending,
				   metrics,
				   "WEFT_METRICS_CONNECTIONS=" METRICS_CONNS,
				   NULL};
	struct harness_job job = {.nranks = NRANKS,
				  .env = env,
				  .body = flood_body,
				  .timeout_s = 90,
				  .before_init = before};
	struct harness_result res;
	harness_run_job(&job, &res);
	fl->stop = 1;
	waitpid(fp, NULL, 0);
	fprintf(stderr,
		"flood: %ld silent, %ld noisy connections (%ld at the root, %ld at /metrics), %ld "
		"datagrams\n",
		fl->silent, fl->noisy, fl->at_root, fl->at_metrics, fl->datagrams);
	ck_assert_msg(res.ok, "%s", res.summary);
	ck_assert_msg(thick(),
		      "the flood was too thin to prove anything (%ld silent, %ld noisy, %ld at the "
		      "root, %ld at /metrics, %ld datagrams)",
		      fl->silent, fl->noisy, fl->at_root, fl->at_metrics, fl->datagrams);
	/* the root's door (in rank 0), a relay door, the socket listener, and
	 * the /metrics endpoint: its connections, listener, epoll and pipe */
	int bound = 3 * MAX_PENDING + atoi(METRICS_CONNS) + 4 + FD_SLACK;
	for (int r = 0; r < NRANKS; r++)
		ck_assert_msg(fl->peak[r] - fl->baseline[r] <= bound,
			      "rank %d held %d descriptors more than before init (bound %d)", r,
			      fl->peak[r] - fl->baseline[r], bound);
	munmap(fl, sizeof(*fl));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("flood");
	TCase *tc = tcase_create("flood");
	tcase_set_timeout(tc, 150);
	tcase_add_test(tc, flood_every_listener);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
