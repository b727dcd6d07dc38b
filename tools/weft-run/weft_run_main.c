/*
 * weft-run — Weft's own local launcher for programs: starts N copies of a
 * program on this host, each with WEFT_RANK, WEFT_NRANKS, WEFT_LOCAL_RANK,
 * WEFT_LOCAL_SIZE, WEFT_ROOT (a free loopback port) and a random
 * WEFT_SECRET, which weft_comm_init_env(), weft.Comm.from_env() and
 * weft.launch_info() read (the one launcher table, launch/).
 *
 *   weft-run -np 2 /usr/bin/python3 examples/ddp_train.py --backend weft
 *
 * When one rank fails the others get a few seconds to notice, then are
 * stopped; the exit status is 0 only when every rank exited 0. With
 * --keep-going (or WEFT_KEEP_GOING=1) a rank that dies of a signal is
 * lost and the others run on — to shrink their communicators and finish
 * without it (docs/reliability.md); the exit status is then 0 when every
 * rank that ended on its own exited 0.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/launch/local_launch.h"

#define MAX_RANKS 256

static void usage(FILE *out)
{
	fprintf(out, "usage: weft-run [--keep-going] -np N PROGRAM [ARGS...]\n"
		     "  runs N ranks of PROGRAM on this host with WEFT_RANK, WEFT_NRANKS,\n"
		     "  WEFT_LOCAL_RANK, WEFT_LOCAL_SIZE, WEFT_ROOT and WEFT_SECRET set\n"
		     "  --keep-going          a rank killed by a signal is lost, the others run\n"
		     "                        on (as WEFT_KEEP_GOING=1); first if given\n"
		     "  -np N, --np N, -n N   the number of ranks, 1 to 256 (then)\n"
		     "  -h, --help            this text\n");
}

/* N of "-np N" (or "--np N"): 1..MAX_RANKS, or 0 after a message. */
static int parse_np(const char *flag, const char *value)
{
	if (strcmp(flag, "-np") != 0 && strcmp(flag, "--np") != 0 && strcmp(flag, "-n") != 0) {
		fprintf(stderr, "weft-run: expected -np N first, not '%s'\n", flag);
		return 0;
	}
	char *end = NULL;
	long n = value ? strtol(value, &end, 10) : 0;
	if (!value || end == value || *end || n < 1 || n > MAX_RANKS) {
		fprintf(stderr, "weft-run: -np %s: expected a number of ranks from 1 to %d\n",
			value ? value : "(missing)", MAX_RANKS);
		return 0;
	}
	return (int)n;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		usage(stdout);
		return 0;
	}
	bool keep_going = argc >= 2 && strcmp(argv[1], "--keep-going") == 0;
	if (keep_going) {
		argv++;
		argc--;
	}
	if (argc < 4) {
		usage(stderr);
		return 2;
	}
	int np = parse_np(argv[1], argv[2]);
	if (np == 0)
		return 2;
	struct weft_local_job job = {
	    .nranks = np,
	    .id = WEFT_LOCAL_ID_ENV,
	    .name = "weft-run",
	    .grace_s = 5,
	    .keep_going = keep_going,
	};
	return weft_local_exec(&job, argv + 3);
}
