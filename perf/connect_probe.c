/*
 * connect_probe.c — descriptors per rank after init, after a ring
 * AllReduce and after an AllToAll (issue 13: connections at scale), for
 * perf/connect_scale.
 *
 *	connect_probe -np N
 *
 * forks N local ranks (tools/launch/); each counts its open descriptors
 * and, of them, its sockets (/proc/self/fd) at three points: after init,
 * after a ring AllReduce of 64 KiB (WEFT_ALGO=allreduce:ring is set here
 * unless the caller set WEFT_ALGO) and after an AllToAll of 4 bytes per
 * pair, which needs every peer; the ranks wait for each other (in shared
 * memory, outside the library) after each count. Rank 0 prints one line with the fewest and
 * most over the ranks: "N mode fds s_init S_init s_ring S_ring s_a2a
 * S_a2a" (lower case the fewest, upper case the most; fds = all
 * descriptors after init). The counts are taken before the reductions
 * that gather them, which run on connections already up (a ring AllReduce
 * and the AllToAll's). Settings as for any job (WEFT_CONNECT,
 * WEFT_TRANSPORTS, WEFT_SOCKET_NSOCKS).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tools/launch/local_launch.h"
#include "weft.h"

enum { AT_INIT, AT_RING, AT_A2A, NPOINTS };

/* Shared by the forked ranks: a rank ahead in the AllToAll would ask the
 * others for connections before they count, so all wait here, outside the
 * library, between the points. */
static int *arrived;

static void wait_for_all(int nranks, int round)
{
	__atomic_add_fetch(arrived, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(arrived, __ATOMIC_SEQ_CST) < nranks * round)
		usleep(1000);
}

static void count_fds(int64_t *fds, int64_t *socks)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	*fds = *socks = 0;
	while (d && (e = readdir(d))) {
		char path[300], link[64];
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		ssize_t n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = '\0';
		(*fds)++;
		*socks += strncmp(link, "socket:", 7) == 0;
	}
	if (d)
		closedir(d);
	(*fds)--; /* the directory's own */
}

static int fail(weft_comm_t comm, weft_status_t st, const char *what)
{
	fprintf(stderr, "connect_probe: %s: %s: %s\n", what, weft_status_string(st),
		comm ? weft_comm_last_error(comm) : weft_init_last_error());
	return 1;
}

/* Rank 0's line: the fewest and most of each count (the most of -x is
 * the fewest of x). v: sockets at each point, then all descriptors after
 * init. */
#define NVALS (NPOINTS + 1)

static int report(weft_comm_t comm, int rank, int nranks, const int64_t v[NVALS])
{
	int64_t m[2 * NVALS];
	for (int i = 0; i < NVALS; i++) {
		m[i] = -v[i];
		m[NVALS + i] = v[i];
	}
	weft_status_t st = weft_allreduce(WEFT_IN_PLACE, m, 2 * NVALS, WEFT_INT64, WEFT_MAX, comm);
	if (st != WEFT_SUCCESS)
		return fail(comm, st, "gathering the counts");
	if (rank != 0)
		return 0;
	const char *mode = getenv("WEFT_CONNECT");
	printf("%d %s %lld", nranks, mode ? mode : "auto", (long long)m[NVALS + NPOINTS]);
	for (int i = 0; i < NPOINTS; i++)
		printf(" %lld %lld", (long long)-m[i], (long long)m[NVALS + i]);
	printf("\n");
	fflush(stdout);
	return 0;
}

static int probe(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	weft_comm_t comm;
	weft_status_t st = weft_comm_init_rank(&comm, nranks, *id, rank, NULL);
	if (st != WEFT_SUCCESS)
		return fail(NULL, st, "init");
	int64_t v[NVALS];
	count_fds(&v[NPOINTS], &v[AT_INIT]);
	wait_for_all(nranks, 1);
	int64_t fds;
	static float x[16384];
	st = weft_allreduce(WEFT_IN_PLACE, x, 16384, WEFT_FLOAT32, WEFT_SUM, comm);
	if (st != WEFT_SUCCESS)
		return fail(comm, st, "ring allreduce");
	count_fds(&fds, &v[AT_RING]);
	wait_for_all(nranks, 2);
	int32_t *out = calloc((size_t)nranks, 4), *in = calloc((size_t)nranks, 4);
	st = out && in ? weft_alltoall(out, in, 1, WEFT_INT32, comm) : WEFT_ERR_NO_MEMORY;
	free(out);
	free(in);
	if (st != WEFT_SUCCESS)
		return fail(comm, st, "alltoall");
	count_fds(&fds, &v[AT_A2A]);
	int ret = report(comm, rank, nranks, v);
	weft_comm_destroy(comm);
	return ret;
}

int main(int argc, char **argv)
{
	if (argc != 3 || strcmp(argv[1], "-np") != 0 || atoi(argv[2]) < 1) {
		fprintf(stderr, "usage: connect_probe -np N\n");
		return 2;
	}
	setenv("WEFT_ALGO", "allreduce:ring", 0);
	arrived =
	    mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (arrived == MAP_FAILED)
		return 1;
	struct weft_local_job job = {
	    .nranks = atoi(argv[2]), .name = "connect_probe", .grace_s = 10, .timeout_s = 600};
	return weft_local_run(&job, probe, NULL);
}
