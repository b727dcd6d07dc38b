/* util.c — running the conformance cases' jobs over the configuration
 * under test, and what their bodies share (conformance.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "core/progress.h"
#include "transports/transport.h"

const struct conf *conf_now;

/* ---- Jobs ---- */

/* Every job of every configuration: a bound on any wait that the cases'
 * own bounds stay well inside. */
static const char *const common_env[] = {"WEFT_TIMEOUT=20", NULL};

static const char *env_list[3 * CONF_ENV_MAX];

/* common_env, then the configuration's, then the job's own (later wins). */
static const char *const *job_env(const char *const *extra)
{
	size_t k = 0, cap = sizeof(env_list) / sizeof(env_list[0]) - 1;
	const char *const *parts[] = {common_env, conf_now->env, extra};
	for (size_t p = 0; p < 3; p++)
		for (size_t i = 0; parts[p] && parts[p][i] && k < cap; i++)
			env_list[k++] = parts[p][i];
	env_list[k] = NULL;
	return conf_now->wrap_env ? conf_now->wrap_env(env_list) : env_list;
}

/* The case's job, kept for the wrappers below (the harness forks: the
 * ranks see the parent's copy). */
struct wrapped {
	struct harness_job job;
	bool sync_end;
};

/* Every peer is served by the configuration's transport, in the connection
 * mode WEFT_CONNECT asked for; lazily, no peer is connected before its
 * first message (unless its transport connects at init). */
static int check_conf(weft_comm_t comm)
{
	for (int p = 0; p < comm->nranks; p++) {
		if (p == comm->rank)
			continue;
		const char *tp = weft_comm_peer_transport(comm, p);
		if (strcmp(tp, conf_now->transport) != 0)
			return harness_fail("%s: peer %d is served by %s, not %s", conf_now->name,
					    p, tp, conf_now->transport);
		if (comm->connect_mode == WEFT_CONNECT_LAZY && comm->peers[p].conn &&
		    !comm->peers[p].tp->connect_at_init)
			return harness_fail("%s: peer %d connected before any message (lazy)",
					    conf_now->name, p);
	}
	const char *mode = getenv("WEFT_CONNECT");
	if (mode && strcmp(weft_comm_connect_mode_name(comm), mode) != 0)
		return harness_fail("%s: connections %s, WEFT_CONNECT=%s", conf_now->name,
				    weft_comm_connect_mode_name(comm), mode);
	return 0;
}

static int wrapped_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const struct wrapped *w = arg;
	if (check_conf(comm))
		return 1;
	int ret = w->job.body(comm, rank, nranks, w->job.arg);
	if (ret == 0 && w->sync_end)
		ret = conf_sync(comm, 0xfffe);
	return ret;
}

static int wrapped_before(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	const struct wrapped *w = arg;
	return w->job.before_init(rank, nranks, id, w->job.arg);
}

static int wrapped_after(int rank, int nranks, void *arg)
{
	const struct wrapped *w = arg;
	return w->job.after_destroy(rank, nranks, w->job.arg);
}

static void run_wrapped(const struct harness_job *job, bool sync_end, struct harness_result *res)
{
	struct wrapped w = {.job = *job, .sync_end = sync_end};
	struct harness_job run = *job;
	run.env = job_env(job->env);
	run.body = wrapped_body;
	run.arg = &w;
	run.before_init = job->before_init ? wrapped_before : NULL;
	run.after_destroy = job->after_destroy ? wrapped_after : NULL;
	if (!run.timeout_s)
		run.timeout_s = CONF_JOB_S;
	harness_run_job(&run, res);
}

void conf_run_job(const struct harness_job *job, struct harness_result *res)
{
	run_wrapped(job, false, res);
}

void conf_run(int nranks, harness_body_fn body, void *arg, bool sync_end)
{
	struct harness_job job = {.nranks = nranks, .body = body, .arg = arg};
	struct harness_result res;
	run_wrapped(&job, sync_end, &res);
	ck_assert_msg(res.ok, "%s: %s", conf_now->name, res.summary);
}

int conf_hosts_apart(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	char host[32];
	snprintf(host, sizeof(host), "conformance-host-%d", rank);
	return setenv("WEFT_HOSTID", host, 1) ? HARNESS_EXIT_SETUP : 0;
}

void conf_add_case(Suite *s, const char *name, const TTest *test, int variants)
{
	TCase *tc = tcase_create(name);
	tcase_set_timeout(tc, 4 * CONF_JOB_S);
	tcase_add_loop_test(tc, test, 0, variants);
	suite_add_tcase(s, tc);
}

/* ---- In a rank ---- */

int conf_sync(weft_comm_t comm, uint32_t step)
{
	uint64_t out = 1, in[HARNESS_MAX_RANKS];
	struct weft_msg m[2 * HARNESS_MAX_RANKS];
	struct weft_msg *p[2 * HARNESS_MAX_RANKS];
	int n = 0;
	uint64_t tag = weft_p2p_tag(0xffff, step);
	for (int r = 0; r < comm->nranks; r++) {
		if (r == comm->rank)
			continue;
		m[n] = (struct weft_msg){.buf = &out, .len = 8, .tag = tag};
		m[n + 1] = (struct weft_msg){.buf = &in[r], .len = 8, .tag = tag};
		if (weft_p2p_isend_msg(comm, r, &m[n]) || weft_p2p_irecv_msg(comm, r, &m[n + 1]))
			return harness_fail_status(comm, m[n].status, "sync: posting to %d", r);
		p[n] = &m[n];
		p[n + 1] = &m[n + 1];
		n += 2;
	}
	weft_status_t st = p2p_wait(comm, p, n, CONF_WAIT_S);
	return st == WEFT_SUCCESS ? 0 : harness_fail_status(comm, st, "sync %u", step);
}

struct weft_tp *conf_tp(weft_comm_t comm, int peer)
{
	return comm->peers[peer].tp;
}

bool conf_ordered(weft_comm_t comm, int peer)
{
	struct weft_tp *tp = conf_tp(comm, peer);
	struct weft_tp_props props;
	memset(&props, 0, sizeof(props));
	tp->ops->prop.props(tp, peer, &props);
	return props.ordered;
}

size_t conf_chunk(weft_comm_t comm)
{
	return conf_tp(comm, comm->rank == 0 ? 1 : 0)->chunk_bytes;
}

void conf_guard_fill(void *guard)
{
	memset(guard, 0xee, CONF_GUARD);
}

bool conf_guard_ok(const void *guard)
{
	const unsigned char *g = guard;
	for (size_t i = 0; i < CONF_GUARD; i++)
		if (g[i] != 0xee)
			return false;
	return true;
}

int conf_says_all(const char *what, const char *msg, const char *const *want)
{
	for (size_t i = 0; want[i]; i++)
		if (!strstr(msg, want[i]))
			return harness_fail("%s: \"%s\" does not say \"%s\"", what, msg, want[i]);
	return 0;
}
