/*
 * conformance.h — the transport conformance suite: one body of
 * point-to-point and contract cases (transports/transport.h), written once
 * and run over every transport configuration of the table in suite.c, in
 * the spirit of libfabric's fabtests.
 *
 * A configuration is a name, the environment of its jobs and the transport
 * every peer must be served by; a new transport (or a new way of running
 * one) gets every case by adding one line to the table. Every job's body
 * first checks that the configuration took: weft_comm_peer_transport names
 * the configuration's transport for every peer, and the connection mode is
 * the one WEFT_CONNECT asked for.
 *
 * The cases drive the transports only through the point-to-point layer at
 * the level of their messages (core/p2p_msg.h, struct weft_msg) and the
 * communicator's progress (core/progress.h), on forked ranks
 * (tests/lib/harness.h), except where a case is about an op group itself
 * (abort, signals, mem, rma): those call the transport's ops.
 */
#ifndef WEFT_TEST_CONFORMANCE_H
#define WEFT_TEST_CONFORMANCE_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/comm.h"
#include "core/p2p_msg.h"
#include "harness.h"
#include "p2p_exchange.h"

#define CONF_ENV_MAX  16
#define CONF_WAIT_S   10.0 /* any exchange that should succeed */
#define CONF_JOB_S    40.0 /* a whole job, hung ranks killed after it */
#define CONF_NOTICE_S 2.0  /* a peer's mismatch, abort or close is known by then */

enum conf_flags {
	/* The transport serves ranks on different hosts (WEFT_HOSTID apart):
	 * a killed peer is then also tried where no pid can be checked. */
	CONF_HOSTS_APART = 1u << 0,
};

/* What the survivor's error must say beyond the peer's rank, where the
 * transport can tell (NULL: the rank alone). */
struct conf_says {
	const char *died;	 /* a peer killed on this host */
	const char *unreachable; /* a peer killed on another host */
	const char *aborted;	 /* a peer that aborted its communicator */
};

struct conf {
	const char *name;	       /* printed, and what CK_RUN_SUITE selects */
	const char *transport;	       /* weft_comm_peer_transport of every peer */
	const char *env[CONF_ENV_MAX]; /* "KEY=VALUE" of every rank, NULL-terminated */
	unsigned flags;		       /* enum conf_flags */
	struct conf_says says;
	/* Optional: completes env where a value is only known at run time
	 * (the verbs test double's paths: tests/lib/verbs_env.h). */
	const char *const *(*wrap_env)(const char *const *env);
	/* Optional: in the test process before the configuration's first job
	 * (libfabric loaded once, so that the ranks inherit it). */
	void (*prepare)(void);
};

/* The configuration under test (suite.c sets it before its cases run). */
extern const struct conf *conf_now;

/* ---- Running jobs (util.c) ---- */

/* Run @p body on @p nranks ranks of conf_now and assert that every rank
 * succeeded. The body runs after the configuration check; with @p sync_end
 * every rank exchanges a word with every peer after it, so that none
 * leaves while a peer still waits for its bytes. */
void conf_run(int nranks, harness_body_fn body, void *arg, bool sync_end);

/* The same for a whole job (its env and body are wrapped; hooks kept),
 * leaving the result to the caller. */
void conf_run_job(const struct harness_job *job, struct harness_result *res);

/* before_init: each rank a host of its own (WEFT_HOSTID). */
int conf_hosts_apart(int rank, int nranks, const weft_unique_id_t *id, void *arg);

/* ---- Inside a rank (util.c) ---- */

/* Exchange a word with every peer (tag step @p step). */
int conf_sync(weft_comm_t comm, uint32_t step);

/* The transport serving @p peer, and what it says of itself. */
struct weft_tp *conf_tp(weft_comm_t comm, int peer);
bool conf_ordered(weft_comm_t comm, int peer);
/* Its pipelining chunk (0 when it names none): sizes around it are boundaries. */
size_t conf_chunk(weft_comm_t comm);

/* Waiting and patterned bytes: p2p_wait, p2p_fill, p2p_verify (p2p_exchange.h). */

/* Guard bytes after (or before) a receive buffer: filled, then checked. */
#define CONF_GUARD 64
void conf_guard_fill(void *guard);
bool conf_guard_ok(const void *guard);

/* Does @p msg contain every one of the NULL-terminated strings? Fails
 * naming the first missing one (returns 1) or returns 0. */
int conf_says_all(const char *what, const char *msg, const char *const *want);

/* Add case @p name to @p s: one test case of @p variants loop runs
 * (util.c). Each file below adds its own (suite.c calls them). */
void conf_add_case(Suite *s, const char *name, const TTest *test, int variants);
void conf_data_cases(Suite *s); /* data.c: what must arrive, and how */
void conf_fail_cases(Suite *s); /* fail.c: mismatches, deaths and closes */
void conf_caps_cases(Suite *s); /* caps.c: properties, signals, mem and rma */

#endif
