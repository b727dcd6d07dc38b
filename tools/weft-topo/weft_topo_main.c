/*
 * weft-topo — show what Weft knows of the topology and what it decided.
 *
 *   weft-topo                        this host: hwloc, NICs, LLDP leaf
 *   weft-topo -np 4                  a local job of 4 ranks
 *   mpirun -np 8 weft-topo           the whole job (rank 0 prints)
 *   WEFT_RANK=.. WEFT_NRANKS=.. WEFT_ROOT=.. weft-topo   one process per host
 *   --format text|json|dot   --rankfile   --settings
 */
#include <errno.h>
#include <getopt.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bootstrap/hostid.h"
#include "core/comm.h"
#include "tools/launch/local_launch.h"
#include "topo/topo_dump.h"
#include "topo/topo_local.h"
#include "util/parse.h"
#include "util/settings.h"

struct options {
	enum weft_topo_format format;
	int np;
	bool settings;
};

static void usage(FILE *out)
{
	fprintf(out, "usage: weft-topo [-np N] [--format text|json|dot] [--rankfile] [--settings]\n"
		     "  alone: this host; with -np N, under mpirun/srun, or with WEFT_RANK,\n"
		     "  WEFT_NRANKS and WEFT_ROOT set: the whole job (rank 0 prints).\n");
}

enum { OPT_NP = 256, OPT_FORMAT, OPT_RANKFILE, OPT_SETTINGS };

/* getopt_long_only: "-np 4" as well as "--np 4", "-format json". */
static const struct option long_opts[] = {
    {"np", required_argument, NULL, OPT_NP},
    {"format", required_argument, NULL, OPT_FORMAT},
    {"rankfile", no_argument, NULL, OPT_RANKFILE},
    {"settings", no_argument, NULL, OPT_SETTINGS},
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
	else {
		fprintf(stderr, "weft-topo: --format %s: expected text, json or dot\n", f);
		return 2;
	}
	return 0;
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
	if (rc == 0 && optind < argc) {
		fprintf(stderr, "weft-topo: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	return rc;
}

static void print_settings(void)
{
	size_t n;
	const struct weft_setting *s = weft_settings_all(&n);
	printf("%-24s %-10s %s\n", "variable", "default", "help");
	for (size_t i = 0; i < n; i++)
		printf("%-24s %-10s %s\n", s[i].name, s[i].default_value ? s[i].default_value : "-",
		       s[i].help);
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

static int host_mode(const struct options *o)
{
	struct weft_err err = {0};
	char hostname[WEFT_HOSTNAME_BYTES] = "", host_id[WEFT_HOST_ID_BYTES];
	gethostname(hostname, sizeof(hostname) - 1);
	struct weft_topo_card card;
	if (weft_host_id(host_id, sizeof(host_id), &err) != WEFT_SUCCESS ||
	    weft_topo_local_card(&card, hostname, &err) != WEFT_SUCCESS) {
		fprintf(stderr, "weft-topo: %s\n", err.msg);
		return 1;
	}
	bool json = o->format == WEFT_TOPO_JSON;
	if (json)
		printf("{\"hostname\": \"%s\", \"host\": \"%s\", \"packages\": %d, \"numa_nodes\": "
		       "%d, "
		       "\"cores\": %d, \"nic\": \"%s\", \"nic_numa\": %d, \"numa\": %d, \"leaf\": "
		       "\"%s\", "
		       "\"leaf_id\": \"%s\", \"leaf_port\": \"%s\", \"leaf_source\": \"%s\", "
		       "\"interfaces\": [",
		       hostname, host_id, card.packages, card.numa_nodes, card.cores, card.nic,
		       card.nic_numa, card.numa, card.leaf_name, card.leaf_id, card.leaf_port,
		       weft_topo_leaf_source_name(card.leaf_source));
	else
		printf(
		    "host %s (id %s)\n  %d package(s), %d NUMA node(s), %d core(s); this process "
		    "on NUMA %d\n  nic: %s (NUMA %d)\n  leaf: %s (id %s, port %s, learned by %s)\n"
		    "  interfaces:\n",
		    hostname, host_id, card.packages, card.numa_nodes, card.cores, card.numa,
		    card.nic[0] ? card.nic : "-", card.nic_numa,
		    card.leaf_name[0] ? card.leaf_name : "-", card.leaf_id[0] ? card.leaf_id : "-",
		    card.leaf_port[0] ? card.leaf_port : "-",
		    weft_topo_leaf_source_name(card.leaf_source));
	struct ifaddrs *ifs;
	bool first = true;
	if (getifaddrs(&ifs) == 0) {
		for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
			if (!i->ifa_addr || i->ifa_addr->sa_family != AF_PACKET)
				continue;
			bool up = i->ifa_flags & IFF_UP, lo = i->ifa_flags & IFF_LOOPBACK;
			if (json)
				printf("%s{\"name\": \"%s\", \"up\": %s, \"loopback\": %s}",
				       first ? "" : ", ", i->ifa_name, up ? "true" : "false",
				       lo ? "true" : "false");
			else
				printf("    %-16s %s%s\n", i->ifa_name, up ? "up" : "down",
				       lo ? " loopback" : "");
			first = false;
		}
		freeifaddrs(ifs);
	}
	if (json)
		printf("]}\n");
	return 0;
}

static int job_rank(weft_comm_t comm, const struct options *o)
{
	struct weft_topo_job job;
	weft_status_t st = weft_topo_job_gather(comm, &job);
	if (st == WEFT_SUCCESS && comm->rank == 0) {
		weft_topo_dump(&job, o->format, stdout);
		fflush(stdout);
	}
	if (st != WEFT_SUCCESS)
		fprintf(stderr, "weft-topo: rank %d: %s: %s\n", comm->rank, weft_status_string(st),
			weft_comm_last_error(comm));
	weft_topo_job_free(&job);
	weft_comm_destroy(comm);
	return st == WEFT_SUCCESS ? 0 : 1;
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
	if (o.settings) {
		print_settings();
		return 0;
	}
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
