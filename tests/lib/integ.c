/*
 * integ.c — the parameters of an integration suite and its jobs'
 * environment (integ.h).
 */
#include "integ.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ofi_warm_up.h"
#include "verbs_env.h"

static char g_transport[32];
static const char *g_algo;   /* NULL: every algorithm */
static const char *g_nranks; /* NULL: jobs of every size */
static struct integ_hosts g_hosts;

const char *integ_transport(void)
{
	return g_transport;
}

bool integ_over(const char *transport)
{
	return strcmp(g_transport, transport) == 0;
}

/* Whether @p word is one of the words of @p list, @p sep between them. */
static bool listed(const char *list, const char *word, char sep)
{
	size_t len = strlen(word);
	for (const char *p = list; (p = strstr(p, word)); p += len)
		if ((p == list || p[-1] == sep) && (p[len] == sep || p[len] == '\0'))
			return true;
	return false;
}

bool integ_wants(const char *algo)
{
	return !g_algo || listed(g_algo, algo, ',');
}

TCase *integ_tcase(Suite *s, const char *algo, double timeout_s)
{
	if (!integ_wants(algo))
		return NULL;
	TCase *tc = tcase_create(algo);
	tcase_set_timeout(tc, timeout_s);
	suite_add_tcase(s, tc);
	return tc;
}

TCase *integ_tcase_every(Suite *s, double timeout_s)
{
	TCase *tc = tcase_create(g_algo ? g_algo : "every");
	tcase_set_timeout(tc, timeout_s);
	suite_add_tcase(s, tc);
	return tc;
}

void integ_env_add(struct integ_env *e, const char *kv)
{
	if (e->n < INTEG_ENV_MAX)
		e->v[e->n++] = kv;
	e->v[e->n] = NULL;
}

void integ_env_addf(struct integ_env *e, const char *fmt, ...)
{
	char *at = e->text + e->used;
	size_t room = sizeof(e->text) - e->used;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(at, room, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= room)
		return; /* the job then misses a setting and its checks say so */
	e->used += (size_t)n + 1;
	integ_env_add(e, at);
}

void integ_env_add_all(struct integ_env *e, const char *const *list)
{
	for (size_t k = 0; list && list[k]; k++)
		integ_env_add(e, list[k]);
}

void integ_env_init(struct integ_env *e, int timeout_s)
{
	memset(e, 0, sizeof(*e));
	if (integ_over("socket")) {
		integ_env_add(e, "WEFT_TRANSPORTS=socket");
		integ_env_add(e, "WEFT_SOCKET_IFNAME=lo");
	} else if (integ_over("hosts")) {
		integ_env_add(e, "WEFT_SOCKET_IFNAME=lo");
	} else if (integ_over("ofi")) {
		integ_env_add(e, "WEFT_TRANSPORTS=ofi");
		integ_env_add(e, "WEFT_SOCKET_IFNAME=lo");
		integ_env_add(e, "FI_TCP_IFACE=lo");
		integ_env_add(e, "FI_SOCKETS_IFACE=lo");
	} else if (integ_over("verbs")) {
		static const char *const slots[] = {"WEFT_IB_SLOTS=4", "WEFT_IB_SLOT_BYTES=32K",
						    NULL};
		integ_env_add_all(e, verbs_env(slots));
	}
	integ_env_addf(e, "WEFT_TIMEOUT=%d", timeout_s);
}

bool integ_wants_nranks(int nranks)
{
	char word[16];
	snprintf(word, sizeof(word), "%d", nranks);
	return !g_nranks || listed(g_nranks, word, ',');
}

void integ_run(struct harness_job *job, const struct integ_env *e, const char *label)
{
	if (!integ_wants_nranks(job->nranks)) {
		printf("%s: not run (WEFT_TEST_NRANKS=%s)\n", label, g_nranks);
		fflush(stdout);
		return;
	}
	struct harness_result res;
	job->env = e->v;
	harness_run_job(job, &res);
	printf("%s: %.1f s\n", label, res.seconds);
	fflush(stdout);
	ck_assert_msg(res.ok, "%s:\n%s", label, res.summary);
	harness_result_free(&res);
}

void integ_run_algo(const char *coll, const char *algo, const char *setting, int nranks,
		    harness_body_fn body, void *arg)
{
	struct integ_env e;
	integ_env_init(&e, 60);
	if (algo)
		integ_env_addf(&e, "WEFT_ALGO=%s:%s", coll, algo);
	if (setting)
		integ_env_add(&e, setting);
	char label[256];
	snprintf(label, sizeof(label), "%s %s over %s%s%s, nranks %d", coll, algo ? algo : "auto",
		 integ_transport(), setting ? " " : "", setting ? setting : "", nranks);
	struct harness_job job = {.nranks = nranks, .body = body, .arg = arg, .timeout_s = 120};
	integ_run(&job, &e, label);
}

void integ_hosts(const struct integ_hosts *layout)
{
	g_hosts = layout ? *layout : (struct integ_hosts){0};
}

int integ_set_host(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	if (g_hosts.nhosts < 2)
		return 0;
	int host = g_hosts.of ? g_hosts.of[rank] : rank * g_hosts.nhosts / nranks;
	char value[64];
	snprintf(value, sizeof(value), "%s%d", g_hosts.id ? g_hosts.id : "h", host);
	if (setenv("WEFT_HOSTID", value, 1) != 0)
		return harness_fail("setenv WEFT_HOSTID failed");
	return 0;
}

/* "2,5,8": numbers from 1 to 64, one comma between each two. */
static bool nranks_list_ok(const char *list)
{
	for (const char *p = list;; p++) {
		char *end;
		long n = strtol(p, &end, 10);
		if (end == p || *p == '+' || *p == '-' || n < 1 || n > 64)
			return false;
		p = end;
		if (*p == '\0')
			return true;
		if (*p != ',')
			return false;
	}
}

static int usage(const struct integ_suite *suite, const char *why)
{
	fprintf(stderr,
		"%s: %s\nusage: %s [--transport T] [--algo A] | --transports\n"
		"  T: %s (WEFT_TEST_TRANSPORT); A: an algorithm, or auto (WEFT_TEST_ALGO)\n"
		"  WEFT_TEST_NRANKS: the job sizes to run, commas between (unset: every size)\n",
		suite->name, why, suite->name, suite->transports);
	return 2;
}

int integ_main(int argc, char **argv, const struct integ_suite *suite)
{
	const char *transport = getenv("WEFT_TEST_TRANSPORT");
	g_algo = getenv("WEFT_TEST_ALGO");
	if (g_algo && !*g_algo)
		g_algo = NULL;
	g_nranks = getenv("WEFT_TEST_NRANKS");
	if (g_nranks && !*g_nranks)
		g_nranks = NULL;
	if (g_nranks && !nranks_list_ok(g_nranks))
		return usage(
		    suite, "WEFT_TEST_NRANKS is not a list of job sizes (1 to 64, commas between)");
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--transports") == 0) {
			printf("%s\n", suite->transports);
			return 0;
		}
		if (i + 1 < argc && strcmp(argv[i], "--transport") == 0)
			transport = argv[++i];
		else if (i + 1 < argc && strcmp(argv[i], "--algo") == 0)
			g_algo = argv[++i];
		else
			return usage(suite, "unknown argument");
	}
	if (!transport || !*transport)
		transport = suite->transports; /* its first word */
	snprintf(g_transport, sizeof(g_transport), "%.*s", (int)strcspn(transport, " "), transport);
	if (!listed(suite->transports, g_transport, ' '))
		return usage(suite, "no such transport here");
	if (integ_over("ofi")) {
		setenv("FI_TCP_IFACE", "lo", 1);
		setenv("FI_SOCKETS_IFACE", "lo", 1);
		ofi_warm_up(); /* every forked rank inherits it */
	}

	Suite *s = suite_create(suite->name);
	suite->add(s);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int ran = srunner_ntests_run(sr), failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	if (ran == 0) {
		printf("SKIP: %s has no case over %s%s%s\n", suite->name, g_transport,
		       g_algo ? " forcing " : "", g_algo ? g_algo : "");
		return 77;
	}
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
