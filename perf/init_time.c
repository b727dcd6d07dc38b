/*
 * init_time.c — how long weft_comm_init_env() takes under a launcher, for
 * perf/bench_slurm.sh (which builds it against build/libweft.so):
 * every rank times weft_launch_query() and weft_comm_init_env(), and rank 0
 * prints the launcher, the rank count and the slowest rank's times, since a
 * job is ready when its last rank is.
 */
#include <stdio.h>
#include <time.h>
#include <weft.h>

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

int main(void)
{
	weft_launch_info_t info = WEFT_LAUNCH_INFO_INIT;
	weft_comm_t comm;
	double t0 = now_ms();
	if (weft_launch_query(&info) != WEFT_SUCCESS) {
		fprintf(stderr, "init_time: %s\n", weft_init_last_error());
		return 1;
	}
	double t1 = now_ms();
	if (weft_comm_init_env(&comm, NULL) != WEFT_SUCCESS) {
		fprintf(stderr, "init_time: rank %d: %s\n", info.rank, weft_init_last_error());
		return 1;
	}
	double t[2] = {t1 - t0, now_ms() - t1};
	weft_status_t st = weft_allreduce(WEFT_IN_PLACE, t, 2, WEFT_FLOAT64, WEFT_MAX, comm);
	if (st == WEFT_SUCCESS && info.rank == 0)
		printf("launcher %s ranks %d query_ms %.1f init_ms %.1f\n", info.launcher,
		       info.nranks, t[0], t[1]);
	weft_comm_destroy(comm);
	return st == WEFT_SUCCESS ? 0 : 1;
}
