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
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/weft-topo/topo_print.h"
#include "weft.h"

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

static int parse(int argc, char **argv, struct options *o)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--format") == 0 && i + 1 < argc) {
			const char *f = argv[++i];
			if (strcmp(f, "text") == 0)
				o->format = WEFT_TOPO_TEXT;
			else if (strcmp(f, "json") == 0)
				o->format = WEFT_TOPO_JSON;
			else if (strcmp(f, "dot") == 0)
				o->format = WEFT_TOPO_DOT;
			else {
				fprintf(stderr,
					"weft-topo: --format %s: expected text, json or dot\n", f);
				return 2;
			}
		} else if (strcmp(a, "--rankfile") == 0) {
			o->format = WEFT_TOPO_RANKFILE;
		} else if (strcmp(a, "--settings") == 0) {
			o->settings = true;
		} else if (strcmp(a, "-np") == 0 && i + 1 < argc) {
			char *end;
			long np = strtol(argv[++i], &end, 10);
			if (*end || np < 1 || np > 256) {
				fprintf(stderr, "weft-topo: -np %s: expected 1..256\n", argv[i]);
				return 2;
			}
			o->np = (int)np;
		} else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			exit(0);
		} else {
			fprintf(stderr, "weft-topo: unknown or incomplete option '%s'\n", a);
			usage(stderr);
			return 2;
		}
	}
	return 0;
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

static bool launched(void)
{
	static const char *const vars[] = {"WEFT_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
					   "SLURM_PROCID"};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		if (getenv(vars[i]))
			return true;
	return false;
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

/* Fork @p np ranks; rank 0 makes the id and hands it to the others through a pipe. */
static int local_job(const struct options *o)
{
	int fds[2];
	if (pipe(fds) != 0) {
		perror("weft-topo: pipe");
		return 1;
	}
	pid_t *pids = calloc((size_t)o->np, sizeof(pid_t));
	if (!pids)
		return 1;
	for (int r = 0; r < o->np; r++) {
		pids[r] = fork();
		if (pids[r] < 0) {
			perror("weft-topo: fork");
			for (int k = 0; k < r; k++)
				kill(pids[k], SIGKILL);
			return 1;
		}
		if (pids[r] == 0) {
			weft_unique_id_t id;
			if (r == 0) {
				if (weft_get_unique_id(&id) != WEFT_SUCCESS) {
					fprintf(stderr, "weft-topo: %s\n", weft_init_last_error());
					_exit(1);
				}
				for (int k = 1; k < o->np; k++)
					if (write(fds[1], &id, sizeof(id)) != (ssize_t)sizeof(id))
						_exit(1);
			} else if (read(fds[0], &id, sizeof(id)) != (ssize_t)sizeof(id)) {
				_exit(1);
			}
			close(fds[0]);
			close(fds[1]);
			weft_comm_t comm;
			if (weft_comm_init_rank(&comm, o->np, id, r, NULL) != WEFT_SUCCESS) {
				fprintf(stderr, "weft-topo: rank %d: %s\n", r,
					weft_init_last_error());
				_exit(1);
			}
			_exit(job_rank(comm, o));
		}
	}
	close(fds[0]);
	close(fds[1]);
	int rc = 0;
	for (int r = 0; r < o->np; r++) {
		int status;
		if (waitpid(pids[r], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
			fprintf(stderr, "weft-topo: rank %d failed\n", r);
			rc = 1;
		}
	}
	free(pids);
	return rc;
}

int main(int argc, char **argv)
{
	struct options o = {.format = WEFT_TOPO_TEXT};
	int rc = parse(argc, argv, &o);
	if (rc)
		return rc;
	if (o.settings)
		return print_settings(&o);
	if (o.np > 0)
		return local_job(&o);
	if (launched()) {
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
