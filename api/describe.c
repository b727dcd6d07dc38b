/*
 * describe.c — weft_comm_describe: the communicator describes what it
 * learned of the job and what it decided, as JSON built with jansson (so
 * every name is escaped by construction). The pieces are in describe_*.c;
 * describe.h says how they fail.
 */
#include <stdlib.h>
#include <string.h>

#include "api/describe.h"
#include "core/comm.h"
#include "core/fail.h"

/* Version of the document's layout: raised when a member changes meaning
 * or goes away (new members do not raise it). */
#define DESCRIBE_VERSION 1

json_t *weft_describe_text(const char *s)
{
	json_t *v = json_string(s);
	if (v || !s)
		return v;
	/* Not UTF-8: keep ASCII, replace the rest. */
	char *copy = strdup(s);
	if (!copy)
		return NULL;
	for (char *p = copy; *p; p++)
		if ((unsigned char)*p >= 0x80)
			*p = '?';
	v = json_string(copy);
	free(copy);
	return v;
}

json_t *weft_describe_ints(const int *v, int n)
{
	json_t *a = json_array();
	int bad = 0;
	for (int i = 0; i < n && !bad; i++)
		bad |= json_array_append_new(a, json_integer(v[i]));
	if (bad) {
		json_decref(a);
		return NULL;
	}
	return a;
}

weft_status_t weft_describe_dump(json_t *root, char **out)
{
	/* Compact: the document is for programs, and weft-topo lays it out. */
	size_t flags = JSON_COMPACT | JSON_REAL_PRECISION(9);
	size_t len = root ? json_dumpb(root, NULL, 0, flags) : 0;
	char *buf = len ? malloc(len + 1) : NULL;
	if (buf && json_dumpb(root, buf, len, flags) == len) {
		buf[len] = '\0';
	} else {
		free(buf);
		buf = NULL;
	}
	json_decref(root);
	*out = buf;
	return buf ? WEFT_SUCCESS : WEFT_ERR_NO_MEMORY;
}

/* How this rank waits (WEFT_WAIT, core/wait.h): what was asked, what was
 * decided and why, and how often it slept so far. */
static weft_status_t describe_wait(const struct weft_comm *comm, json_t *root)
{
	static const char *const asked[] = {"spin", "block", "auto"};
	const struct weft_wait *w = &comm->wait;
	int32_t mode = comm->cards[comm->rank].wait.mode;
	json_t *o = json_pack(
	    "{s:s, s:s, s:i, s:b, s:f, s:I, s:I, s:I}", "asked",
	    asked[mode >= 0 && mode < 3 ? mode : 0], "waits", w->block ? "block" : "spin",
	    "compute_threads", (int)comm->cards[comm->rank].wait.compute_threads, "oversubscribed",
	    w->host_over, "spin_us", w->spin_s * 1e6, "sleeps", (json_int_t)atomic_load(&w->sleeps),
	    "timeouts", (json_int_t)atomic_load(&w->timeouts), "woken",
	    (json_int_t)atomic_load(&w->woken));
	return o && json_object_set_new(root, "wait", o) == 0 ? WEFT_SUCCESS : WEFT_ERR_NO_MEMORY;
}

weft_status_t weft_describe_build(const struct weft_comm *comm, json_t *transports,
				  const struct weft_describe_hook *hook, json_t **out)
{
	static const char *const names[] = {"topo", "ring", "trees", "tuner"};
	weft_status_t (*const pieces[])(const struct weft_comm *, json_t *) = {
	    weft_describe_topo, weft_describe_ring, weft_describe_trees, weft_describe_tuner};
	json_t *root =
	    json_pack("{s:i, s:s}", "version", DESCRIBE_VERSION, "library", weft_version());
	weft_status_t st = root ? WEFT_SUCCESS : WEFT_ERR_NO_MEMORY;
	for (int i = 0; i < 4 && st == WEFT_SUCCESS; i++) {
		/* transports go where a reader expects them, before the tuner */
		if (i == 3 && json_object_set(root, "transports", transports))
			st = WEFT_ERR_NO_MEMORY;
		if (st == WEFT_SUCCESS)
			st = pieces[i](comm, root);
		if (st == WEFT_SUCCESS && hook)
			hook->after(hook->ctx, names[i]);
	}
	if (st == WEFT_SUCCESS)
		st = weft_describe_pacer(comm, root);
	if (st == WEFT_SUCCESS)
		st = describe_wait(comm, root);
	if (st != WEFT_SUCCESS) {
		json_decref(root);
		root = NULL;
	}
	*out = root;
	return st;
}

weft_status_t weft_comm_describe(weft_comm_t comm, char **json)
{
	if (json)
		*json = NULL;
	if (!comm)
		return weft_err_set(weft_err_init_record(), WEFT_ERR_INVALID_ARG,
				    "weft_comm_describe: comm is NULL");
	if (!json)
		return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG,
				      "weft_comm_describe: json is NULL");
	/* The collective part first, before anything that could fail locally,
	 * so that no rank leaves the others waiting in the allgather. */
	json_t *transports, *conns, *root;
	weft_status_t st = weft_describe_transports(comm, &transports, &conns);
	if (st != WEFT_SUCCESS)
		return st;
	st = weft_describe_build(comm, transports, NULL, &root);
	json_decref(transports);
	if (st == WEFT_SUCCESS && json_object_set(root, "connections", conns) != 0)
		st = WEFT_ERR_NO_MEMORY;
	json_decref(conns);
	if (st == WEFT_SUCCESS)
		st = weft_describe_dump(root, json);
	if (st != WEFT_SUCCESS)
		return weft_comm_fail(comm, st, "weft_comm_describe: no memory");
	return WEFT_SUCCESS;
}

void weft_describe_free(char *json)
{
	free(json);
}
