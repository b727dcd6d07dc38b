/*
 * integ.h — what an integration suite (tests/integration/) runs with: the
 * transport and the algorithm, and the jobs' settings that follow.
 *
 *   build/tests/integration/allreduce [--transport T] [--algo A]
 *   build/tests/integration/allreduce --transports
 *
 * WEFT_TEST_TRANSPORT and WEFT_TEST_ALGO say the same (the command line
 * wins); --transports prints the transports the suite has cases for, one
 * line, which is how tests/run finds the runs of a suite. T is one of
 *   shm     shared memory, the default on one host
 *   socket  TCP over lo (WEFT_TRANSPORTS=socket)
 *   hosts   several fake hosts on this machine (WEFT_HOSTID per rank):
 *           shm inside a host, socket between hosts
 *   ofi     libfabric over lo (WEFT_TRANSPORTS=ofi)
 *   verbs   the test double for libibverbs (tests/lib/fake_ibverbs)
 * and the default is the suite's first. A is an algorithm's name, "auto"
 * (the tuner's choice), several of them with commas between, or unset:
 * every case the suite has. WEFT_TEST_NRANKS (job sizes, "1,2,5,8") leaves
 * out the jobs of other sizes: the reruns under settings that do not
 * depend on the job's size (Makefile) run a case at each shape that
 * matters (one rank, two, an odd count, the largest) rather than all.
 *
 * A suite's cases are Check test cases (TCase) named after the algorithm
 * they force ("auto" for none; the suites that cut across collectives name
 * theirs in their opening comment); integ_tcase() leaves out the ones A
 * does not want, so `--algo rhd` runs what forces rhd and nothing else.
 */
#ifndef WEFT_TEST_INTEG_H
#define WEFT_TEST_INTEG_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>

#include "harness.h"

struct integ_suite {
	const char *name;	/* the Check suite's name: "allreduce" */
	const char *transports; /* those it has cases for, first the default: "shm socket" */
	/* Add the test cases for integ_transport() to @p s. */
	void (*add)(Suite *s);
};

/* Parse the parameters, build the suite, run it; main()'s return value
 * (77 when the suite has no case for the transport and algorithm asked). */
int integ_main(int argc, char **argv, const struct integ_suite *suite);

const char *integ_transport(void);
bool integ_over(const char *transport);
/* Whether the cases that force @p algo ("auto": none) are to run. */
bool integ_wants(const char *algo);
/* A new test case for @p algo with a timeout of @p timeout_s, added to
 * @p s; NULL (add nothing to it) when integ_wants(@p algo) is false. */
TCase *integ_tcase(Suite *s, const char *algo, double timeout_s);
/* For cases whose jobs go through every algorithm themselves (asking
 * integ_wants for each): named after the algorithm asked, or "every". */
TCase *integ_tcase_every(Suite *s, double timeout_s);

/* The environment of one job: "KEY=VALUE" strings, later ones winning. */
#define INTEG_ENV_MAX  32
#define INTEG_ENV_TEXT 2048
struct integ_env {
	const char *v[INTEG_ENV_MAX + 1]; /* NULL-terminated */
	int n;
	char text[INTEG_ENV_TEXT]; /* copies of what integ_env_addf wrote */
	size_t used;
};

/* WEFT_TIMEOUT=@p timeout_s and what selects the transport: socket over
 * lo; libfabric over lo; the verbs double, its fake sysfs tree and small
 * slots (WEFT_IB_SLOTS=4, 32 KiB); for hosts, sockets over lo. */
void integ_env_init(struct integ_env *e, int timeout_s);
void integ_env_add(struct integ_env *e, const char *kv); /* kept by pointer */
void integ_env_addf(struct integ_env *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Every string of @p list (NULL-terminated, may be NULL). */
void integ_env_add_all(struct integ_env *e, const char *const *list);

/* Whether WEFT_TEST_NRANKS leaves jobs of @p nranks ranks in. */
bool integ_wants_nranks(int nranks);
/* Run @p job (its env replaced by @p e's) and assert that every rank
 * succeeded; prints "@p label: S s" for the suite's log, or that the job
 * was not run when WEFT_TEST_NRANKS leaves its size out. */
void integ_run(struct harness_job *job, const struct integ_env *e, const char *label);

/* One job of @p coll's suite: @p nranks ranks run @p body (@p arg) with
 * integ_env_init(60), WEFT_ALGO=@p coll:@p algo unless @p algo is NULL, and
 * @p setting unless it is NULL; labelled "<coll> <algo> over <transport>
 * [setting], nranks N", asserted as integ_run does (120 s deadline). */
void integ_run_algo(const char *coll, const char *algo, const char *setting, int nranks,
		    harness_body_fn body, void *arg);

/* hosts: which fake host each rank is on. integ_hosts() sets the layout
 * of the next jobs; integ_set_host is the before_init hook that gives each
 * rank its WEFT_HOSTID ("<id><host>": h0, h1, ...). */
struct integ_hosts {
	int nhosts;	/* < 2: every rank keeps this machine's own host id */
	const int *of;	/* the host of each rank; NULL: rank * nhosts / nranks */
	const char *id; /* prefix of the ids; NULL: "h" */
};
void integ_hosts(const struct integ_hosts *layout);
int integ_set_host(int rank, int nranks, const weft_unique_id_t *id, void *arg);

#endif
