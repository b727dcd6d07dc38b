/*
 * weft-topo — show what Weft knows of the topology and what it decided.
 *
 *   weft-topo                        this host: hwloc, NICs, LLDP leaf
 *   weft-topo -np 4                  a local job of 4 ranks
 *   mpirun -np 8 weft-topo           the whole job (rank 0 prints)
 *   WEFT_RANK=.. WEFT_NRANKS=.. WEFT_ROOT=.. weft-topo   one process per host
 *   srun -N 2 -n 4 weft-topo --launcher   each process: what Weft reads
 *                                    from its launcher (no communicator)
 *   weft-topo --model topology.conf --ranks-per-host 8 [--order ORDER]
 *                                    a job that is not running, modelled
 *                                    from a topology file (weft_model_describe)
 *   weft-topo --stats FILE...        the files of WEFT_STATS_FILE: each
 *                                    connection's last counters, leaf uplinks
 *   weft-topo --trace FILE...        the flight recorders of a job (WEFT_TRACE_DIR):
 *                                    who never posted what, whom every rank waits on
 *   weft-topo --watch TARGET...      a live view of a running job from its metrics
 *                                    (http://HOST:PORT or files; --once: one frame)
 *   weft-topo --settings [--format text|json|markdown|man]
 *                                    every WEFT_* variable; markdown is
 *                                    docs/settings.md (make docs), man the
 *                                    ENVIRONMENT section of weft(7)
 *   --format text|json|dot   --rankfile   --launcher
 */
#include <errno.h>
#include <getopt.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/launch/local_launch.h"
#include "tools/weft-topo/topo_print.h"
#include "util/parse.h"
#include "weft.h"

struct options {
	enum weft_topo_format format;
	int np;
	bool settings;
	bool launcher;
	bool stats;	   /* --stats: the arguments are files */
	bool trace;	   /* --trace: the arguments are dumps */
	bool watch;	   /* --watch: the arguments are metrics endpoints or files */
	bool once;	   /* --watch --once: one frame as text */
	double interval;   /* --watch --interval */
	const char *model; /* --model: the topology file */
	int ranks_per_host;
	const char *order;
};

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: weft-topo [-np N] [--format text|json|dot] [--rankfile] [--settings]\n"
	    "                 [--launcher]\n"
	    "       weft-topo --model TOPOLOGY_FILE [--ranks-per-host N]\n"
	    "                 [--order block|round-robin|random[:SEED]|RANKFILE] [--format ...]\n"
	    "       weft-topo --stats FILE... [--format text|json]\n"
	    "       weft-topo --trace FILE... [--format text|json]\n"
	    "       weft-topo --watch [--once] [--interval S] URL|FILE...\n"
	    "       weft-topo --settings [--format text|json|markdown|man]\n"
	    "  alone: this host; with -np N, under mpirun/srun, or with WEFT_RANK,\n"
	    "  WEFT_NRANKS and WEFT_ROOT set: the whole job (rank 0 prints).\n"
	    "  --launcher: every process prints one line, what Weft reads from its\n"
	    "  launcher (which one, rank, size, local rank and size), and no job starts.\n"
	    "  --model: the job N ranks on every host of a Slurm topology.conf or Weft\n"
	    "  JSON file would be (default N 1, order block), built without running it,\n"
	    "  with the time and peak memory of each step.\n"
	    "  --stats: the files WEFT_STATS_FILE wrote (every rank's): per connection\n"
	    "  its last counters, and per leaf the bytes sent to other leaves.\n"
	    "  --trace: the flight recorders a job's ranks wrote (WEFT_TRACE_DIR): the\n"
	    "  first operation not every rank posted, and whom every waiter waits on.\n"
	    "  --watch: every rank's /metrics (http://HOST:PORT[/metrics]) or metrics\n"
	    "  file, refreshed every second: hosts by leaf, operations, busbw, links;\n"
	    "  q quits; --once prints one frame as text.\n"
	    "  -h, --help: this text.\n");
}

enum {
	OPT_NP = 256,
	OPT_FORMAT,
	OPT_RANKFILE,
	OPT_SETTINGS,
	OPT_LAUNCHER,
	OPT_MODEL,
	OPT_PER_HOST,
	OPT_ORDER,
	OPT_STATS,
	OPT_TRACE,
	OPT_WATCH,
	OPT_ONCE,
	OPT_INTERVAL
};

/* getopt_long_only: "-np 4" as well as "--np 4", "-format json". */
static const struct option long_opts[] = {
    {"np", required_argument, NULL, OPT_NP},
    {"format", required_argument, NULL, OPT_FORMAT},
    {"rankfile", no_argument, NULL, OPT_RANKFILE},
    {"settings", no_argument, NULL, OPT_SETTINGS},
    {"launcher", no_argument, NULL, OPT_LAUNCHER},
    {"model", required_argument, NULL, OPT_MODEL},
    {"ranks-per-host", required_argument, NULL, OPT_PER_HOST},
    {"order", required_argument, NULL, OPT_ORDER},
    {"stats", no_argument, NULL, OPT_STATS},
    {"trace", no_argument, NULL, OPT_TRACE},
    {"watch", no_argument, NULL, OPT_WATCH},
    {"once", no_argument, NULL, OPT_ONCE},
    {"interval", required_argument, NULL, OPT_INTERVAL},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static int parse_format(const char *f, struct options *o)
{
	if (strcmp(f, "text") == 0)
		o->format = WEFT_TOPO_TEXT;
	else if (strcmp(f, "json") == 0)
		o->format = WEFT_TOPO_JSON;
	else if (strcmp(f, "dot") == 0)
		o->format = WEFT_TOPO_DOT;
	else if (strcmp(f, "markdown") == 0)
		o->format = WEFT_TOPO_MARKDOWN;
	else if (strcmp(f, "man") == 0)
		o->format = WEFT_TOPO_MAN;
	else {
		fprintf(stderr,
			"weft-topo: --format %s: expected text, json, dot, markdown or man\n", f);
		return 2;
	}
	return 0;
}

/* --stats, --trace and --watch take files (or URLs) and nothing that
 * starts a job. */
static int check_files(int argc, const struct options *o)
{
	const char *opt = o->stats ? "--stats" : o->trace ? "--trace" : "--watch";
	if (o->stats + o->trace + o->watch > 1) {
		fprintf(stderr, "weft-topo: one of --stats, --trace and --watch at a time\n");
		return 2;
	}
	if (o->np || o->model || o->settings || o->launcher) {
		fprintf(stderr,
			"weft-topo: %s reads files: no -np, --model, --settings or --launcher with "
			"it\n",
			opt);
		return 2;
	}
	if (o->format != WEFT_TOPO_TEXT && (o->watch || o->format != WEFT_TOPO_JSON)) {
		fprintf(stderr, "weft-topo: %s: --format text%s\n", opt,
			o->watch ? "" : " or json");
		return 2;
	}
	if (optind >= argc) {
		fprintf(stderr, "weft-topo: %s: no %s given\n", opt,
			o->watch ? "endpoints or files" : "files");
		return 2;
	}
	return 0;
}

static bool parse_seconds(const char *a, double *out)
{
	char *end;
	double v = strtod(a, &end);
	if (end == a || *end || !(v >= 0.1) || !(v <= 3600)) {
		fprintf(stderr, "weft-topo: --interval %s: expected seconds, 0.1 to 3600\n", a);
		return false;
	}
	*out = v;
	return true;
}

static int parse(int argc, char **argv, struct options *o)
{
	uint64_t np;
	int c, rc = 0;
	opterr = 0;
	optind = 1;
	while (rc == 0 && (c = getopt_long_only(argc, argv, ":h", long_opts, NULL)) != -1) {
		const char *a = argv[optind - 1];
		switch (c) {
		case OPT_FORMAT: rc = parse_format(optarg, o); break;
		case OPT_RANKFILE: o->format = WEFT_TOPO_RANKFILE; break;
		case OPT_SETTINGS: o->settings = true; break;
		case OPT_LAUNCHER: o->launcher = true; break;
		case OPT_STATS: o->stats = true; break;
		case OPT_TRACE: o->trace = true; break;
		case OPT_WATCH: o->watch = true; break;
		case OPT_ONCE: o->once = true; break;
		case OPT_INTERVAL:
			if (!parse_seconds(optarg, &o->interval))
				return 2;
			break;
		case OPT_MODEL: o->model = optarg; break;
		case OPT_ORDER: o->order = optarg; break;
		case OPT_PER_HOST:
			if (weft_parse_size(optarg, 1000000, WEFT_PARSE_NO_SUFFIX, &np, NULL) ||
			    np < 1) {
				fprintf(stderr,
					"weft-topo: --ranks-per-host %s: expected 1..1000000\n",
					optarg);
				return 2;
			}
			o->ranks_per_host = (int)np;
			break;
		case OPT_NP:
			if (weft_parse_size(optarg, 256, WEFT_PARSE_NO_SUFFIX, &np, NULL) ||
			    np < 1) {
				fprintf(stderr, "weft-topo: -np %s: expected 1..256\n", optarg);
				return 2;
			}
			o->np = (int)np;
			break;
		case 'h': usage(stdout); exit(0);
		default:
			fprintf(stderr, "weft-topo: unknown or incomplete option '%s'\n", a);
			usage(stderr);
			return 2;
		}
	}
	if (rc == 0 && !o->model && (o->ranks_per_host || o->order)) {
		fprintf(stderr, "weft-topo: --ranks-per-host and --order need --model\n");
		return 2;
	}
	if (rc == 0 && o->model && o->np) {
		fprintf(stderr, "weft-topo: --model and -np: a model runs no job\n");
		return 2;
	}
	if (rc == 0 && (o->format == WEFT_TOPO_MARKDOWN || o->format == WEFT_TOPO_MAN) &&
	    !o->settings) {
		fprintf(stderr, "weft-topo: --format %s: only with --settings\n",
			o->format == WEFT_TOPO_MAN ? "man" : "markdown");
		return 2;
	}
	if (rc == 0 && (o->once || o->interval > 0) && !o->watch) {
		fprintf(stderr, "weft-topo: --once and --interval need --watch\n");
		return 2;
	}
	if (rc == 0 && (o->stats || o->trace || o->watch))
		return check_files(argc, o);
	if (rc == 0 && optind < argc) {
		fprintf(stderr, "weft-topo: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	return rc;
}

static int print_settings(const struct options *o)
{
	char *json;
	if (weft_settings_describe(&json) != WEFT_SUCCESS) {
		fprintf(stderr, "weft-topo: %s\n", weft_init_last_error());
		return 1;
	}
	int rc = weft_tool_print_settings(json, o->format, stdout);
	weft_describe_free(json);
	return rc;
}

/* Whether a launcher started this process, and how many ranks it
 * started. Variables that are there but unusable end the program: a job
 * must not turn into one-rank views of itself. */
static bool launched(int *nranks)
{
	weft_launch_info_t info = WEFT_LAUNCH_INFO_INIT;
	weft_status_t st = weft_launch_query(&info);
	if (st != WEFT_SUCCESS) {
		fprintf(stderr, "weft-topo: cannot tell this process's rank: %s\n",
			weft_init_last_error());
		exit(1);
	}
	*nranks = info.nranks;
	return strcmp(info.launcher, "none") != 0;
}

/* --launcher: one line per process, so that `srun weft-topo --launcher`
 * shows what every task was told, even where no job could start. */
static int print_launcher(void)
{
	weft_launch_info_t info = WEFT_LAUNCH_INFO_INIT;
	char host[256] = "?";
	gethostname(host, sizeof(host) - 1);
	if (weft_launch_query(&info) != WEFT_SUCCESS) {
		fprintf(stderr, "weft-topo: %s: %s\n", host, weft_init_last_error());
		return 1;
	}
	printf("launcher %s host %s rank %d nranks %d local_rank %d local_size %d\n", info.launcher,
	       host, info.rank, info.nranks, info.local_rank, info.local_size);
	return 0;
}

static int host_mode(const struct options *o)
{
	char *json;
	if (weft_host_describe(&json) != WEFT_SUCCESS) {
		fprintf(stderr, "weft-topo: %s\n", weft_init_last_error());
		return 1;
	}
	int rc = weft_tool_print_host(json, o->format, stdout);
	weft_describe_free(json);
	return rc;
}

/* --model: the library builds the job's description; the text ends with
 * the whole program's time and peak memory (the library's steps, then
 * parsing and printing the document here). */
static int model_mode(const struct options *o)
{
	struct timespec t0, t1;
	char *json;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* text prints a summary: no need to write and read every rank */
	unsigned flags = o->format == WEFT_TOPO_TEXT ? WEFT_MODEL_BRIEF : 0;
	if (weft_model_describe(o->model, o->ranks_per_host ? o->ranks_per_host : 1,
				o->order ? o->order : "block", flags, &json) != WEFT_SUCCESS) {
		fprintf(stderr, "weft-topo: --model %s: %s\n", o->model, weft_init_last_error());
		return 1;
	}
	int rc = weft_tool_print_model(json, o->format, stdout);
	weft_describe_free(json);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	struct rusage ru;
	if (rc == 0 && o->format == WEFT_TOPO_TEXT && getrusage(RUSAGE_SELF, &ru) == 0)
		printf("  %-12s %10.3f   %8.1f\n", "weft-topo",
		       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9,
		       (double)ru.ru_maxrss / 1024.0);
	return rc;
}

/* Every rank describes (a collective); rank 0 prints. */
static int job_rank(weft_comm_t comm, const struct options *o)
{
	char *json = NULL;
	int rank = -1, rc = 0;
	weft_comm_rank(comm, &rank);
	weft_status_t st = weft_comm_describe(comm, &json);
	if (st != WEFT_SUCCESS) {
		fprintf(stderr, "weft-topo: rank %d: %s: %s\n", rank, weft_status_string(st),
			weft_comm_last_error(comm));
		rc = 1;
	} else if (rank == 0) {
		rc = weft_tool_print_job(json, o->format, stdout);
		fflush(stdout);
	}
	weft_describe_free(json);
	weft_comm_destroy(comm);
	return rc;
}

static int local_rank(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	weft_comm_t comm;
	if (weft_comm_init_rank(&comm, nranks, *id, rank, NULL) != WEFT_SUCCESS) {
		fprintf(stderr, "weft-topo: rank %d: %s\n", rank, weft_init_last_error());
		return 1;
	}
	return job_rank(comm, arg);
}

/* -np: the shared local launcher forks the ranks; rank 0 makes the id. */
static int local_job(const struct options *o)
{
	int nranks;
	if (launched(&nranks) && nranks > 1) {
		fprintf(stderr, "weft-topo: -np: a launcher already started %d ranks\n", nranks);
		return 2;
	}
	struct weft_local_job job = {.nranks = o->np, .name = "weft-topo", .grace_s = 5};
	return weft_local_run(&job, local_rank, (void *)o);
}

int main(int argc, char **argv)
{
	struct options o = {.format = WEFT_TOPO_TEXT};
	int rc = parse(argc, argv, &o);
	if (rc)
		return rc;
	if (o.stats)
		return weft_tool_print_stats(argv + optind, argc - optind, o.format, stdout);
	if (o.trace)
		return weft_tool_print_trace(argv + optind, argc - optind, o.format, stdout);
	if (o.watch)
		return weft_tool_watch(argv + optind, argc - optind, o.once,
				       o.interval > 0 ? o.interval : 1.0);
	if (o.settings)
		return print_settings(&o);
	if (o.launcher)
		return print_launcher();
	if (o.model)
		return model_mode(&o);
	if (o.np > 0)
		return local_job(&o);
	int nranks;
	if (launched(&nranks)) {
		weft_comm_t comm;
		if (weft_comm_init_env(&comm, NULL) != WEFT_SUCCESS) {
			fprintf(stderr, "weft-topo: %s\n", weft_init_last_error());
			return 1;
		}
		return job_rank(comm, &o);
	}
	if (o.format == WEFT_TOPO_DOT || o.format == WEFT_TOPO_RANKFILE) {
		fprintf(
		    stderr,
		    "weft-topo: --format dot and --rankfile need a job (-np N or a launcher)\n");
		return 2;
	}
	return host_mode(&o);
}
