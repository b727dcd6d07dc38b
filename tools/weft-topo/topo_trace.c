/*
 * topo_trace.c — weft-topo --trace FILES...: the flight recorders a job's
 * ranks wrote (WEFT_TRACE_DIR, weft_comm_dump; core/trace.h), merged into
 * a verdict in plain words, for a job that hung or was killed by its
 * launcher before Weft's own timeout could say anything:
 *
 *  - the first operation whose sequence numbers diverge: the lowest
 *    collective number that some ranks posted and others never did (or,
 *    where every rank posted it, whose signatures differ: ranks that
 *    called different collectives or passed different arguments);
 *  - the ranks that never posted it, and what they last did;
 *  - whom each waiting rank waits on (the peer and the message), and the
 *    rank that every chain of waits ends at: the one to look at.
 *
 * Files of several communicators are grouped by communicator id. Anything
 * that is not a Weft dump stops the program with the file named.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tools/weft-topo/topo_print.h"
#include "tools/weft-topo/topo_trace.h"

static const char *bad_dump(const json_t *d)
{
	static const char *const ints[] = {"rank", "nranks", "calls", "dumped_us", "pid"};
	static const char *const strs[] = {"comm", "host", "reason"};
	if (!json_is_object(d) || !json_is_integer(json_object_get(d, "weft_trace")))
		return "weft_trace";
	for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
		if (!json_is_integer(json_object_get(d, ints[i])))
			return ints[i];
	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
		if (!json_is_string(json_object_get(d, strs[i])))
			return strs[i];
	const json_t *ops = json_object_get(d, "ops");
	if (!json_is_array(ops))
		return "ops";
	size_t i;
	const json_t *op;
	json_array_foreach(ops, i, op)
	{
		if (!json_is_object(op) || !json_is_integer(json_object_get(op, "call")) ||
		    !json_is_string(json_object_get(op, "coll")) ||
		    !json_is_string(json_object_get(op, "state")) ||
		    !json_is_integer(json_object_get(op, "waiting_for")))
			return "ops[] (call, coll, state, waiting_for)";
	}
	if (!json_is_array(json_object_get(d, "events")))
		return "events";
	long long r = weft_tool_int(d, "rank"), n = weft_tool_int(d, "nranks");
	if (n < 1 || r < 0 || r >= n)
		return "rank (out of 0 .. nranks-1)";
	return NULL;
}

bool weft_trace_is_p2p(const json_t *op)
{
	const char *c = weft_tool_str(op, "coll");
	return strcmp(c, "send") == 0 || strcmp(c, "recv") == 0;
}

/* The oldest operation not done, and whom it waits on. */
static void find_inflight(struct dump *d)
{
	size_t i;
	const json_t *op;
	d->inflight = NULL;
	d->waits_on = -1;
	json_array_foreach(d->ops, i, op)
	{
		if (strcmp(weft_tool_str(op, "state"), "done") == 0)
			continue;
		d->inflight = op;
		d->waits_on = weft_tool_int(op, "waiting_for");
		return;
	}
}

static bool load(const char *path, struct dump *d)
{
	json_error_t jerr;
	d->path = path;
	d->doc = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (!d->doc) {
		fprintf(stderr, "weft-topo: --trace %s: %s (line %d)\n", path, jerr.text,
			jerr.line);
		return false;
	}
	const char *bad = bad_dump(d->doc);
	if (bad) {
		fprintf(stderr,
			"weft-topo: --trace %s: not a Weft flight recorder: \"%s\" missing or of "
			"the wrong type\n",
			path, bad);
		return false;
	}
	d->comm = weft_tool_str(d->doc, "comm");
	d->rank = weft_tool_int(d->doc, "rank");
	d->nranks = weft_tool_int(d->doc, "nranks");
	d->calls = weft_tool_int(d->doc, "calls");
	d->dumped_us = weft_tool_int(d->doc, "dumped_us");
	d->ops = json_object_get(d->doc, "ops");
	find_inflight(d);
	return true;
}

/* "allreduce seq 57 (float32 sum, 1048576 elements)" */
void weft_trace_op_text(const json_t *op, char *buf, size_t len)
{
	const char *coll = weft_tool_str(op, "coll");
	long long call = weft_tool_int(op, "call"), count = weft_tool_int(op, "count");
	if (weft_trace_is_p2p(op))
		snprintf(buf, len, "%s #%lld %s rank %lld (%lld elements of %s)", coll, call,
			 strcmp(coll, "send") == 0 ? "to" : "from", weft_tool_int(op, "root"),
			 count, weft_tool_str(op, "dtype"));
	else if (strcmp(coll, "barrier") == 0)
		snprintf(buf, len, "barrier seq %lld", call);
	else
		snprintf(buf, len, "%s seq %lld (%s %s, %lld elements)", coll, call,
			 weft_tool_str(op, "dtype"), weft_tool_str(op, "op"), count);
}

/* The collective number @p call in @p d's ring, NULL if not recorded. */
const json_t *weft_trace_coll_op(const struct dump *d, long long call)
{
	size_t i;
	const json_t *op;
	json_array_foreach(d->ops, i, op)
	{
		if (!weft_trace_is_p2p(op) && weft_tool_int(op, "call") == call)
			return op;
	}
	return NULL;
}

/* "rank 1 (h3, 10.77.5.13)" */
void weft_trace_who(const struct job *j, long long r, char *buf, size_t len)
{
	const struct dump *d = r >= 0 && r < j->nranks ? j->by_rank[r] : NULL;
	if (d)
		snprintf(buf, len, "rank %lld (%s, %s)", r, weft_tool_str(d->doc, "host"),
			 weft_tool_str(d->doc, "addr"));
	else
		snprintf(buf, len, "rank %lld (no dump)", r);
}

/* Put @p d in its communicator's job (a new one if none has its id): two
 * dumps of one rank keep the later. False on a contradiction. */
static bool place(struct dump *d, struct job *jobs, int *njobs)
{
	struct job *j = NULL;
	for (int i = 0; i < *njobs && !j; i++)
		if (strcmp(jobs[i].comm, d->comm) == 0)
			j = &jobs[i];
	if (!j) {
		j = &jobs[(*njobs)++];
		*j = (struct job){.comm = d->comm, .nranks = d->nranks};
		j->by_rank = calloc((size_t)d->nranks, sizeof(*j->by_rank));
		if (!j->by_rank) {
			fprintf(stderr, "weft-topo: --trace: no memory\n");
			return false;
		}
	}
	if (j->nranks != d->nranks) {
		fprintf(stderr,
			"weft-topo: --trace %s: communicator %s has %lld ranks, another dump says "
			"%lld\n",
			d->path, d->comm, d->nranks, j->nranks);
		return false;
	}
	struct dump **slot = &j->by_rank[d->rank];
	if (*slot && (*slot)->dumped_us >= d->dumped_us)
		return true;
	j->ndumps += !*slot;
	*slot = d;
	return true;
}

static void print_json(struct job *jobs, int njobs, FILE *out)
{
	json_t *all = json_array();
	for (int i = 0; i < njobs; i++)
		json_array_append_new(all, weft_trace_verdict_json(&jobs[i]));
	json_t *doc = json_pack("{s:o}", "communicators", all);
	weft_tool_write_json(doc, out);
	json_decref(doc);
}

int weft_tool_print_trace(char *const *paths, int npaths, enum weft_topo_format format, FILE *out)
{
	struct dump *dumps = calloc((size_t)npaths, sizeof(*dumps));
	struct job *jobs = calloc((size_t)npaths, sizeof(*jobs));
	int njobs = 0, rc = dumps && jobs ? 0 : 1;
	if (rc)
		fprintf(stderr, "weft-topo: --trace: no memory\n");
	for (int i = 0; rc == 0 && i < npaths; i++)
		if (!load(paths[i], &dumps[i]) || !place(&dumps[i], jobs, &njobs))
			rc = 1;
	if (rc == 0 && format == WEFT_TOPO_JSON)
		print_json(jobs, njobs, out);
	for (int i = 0; rc == 0 && format != WEFT_TOPO_JSON && i < njobs; i++)
		weft_trace_verdict_text(&jobs[i], out);
	for (int i = 0; jobs && i < njobs; i++)
		free(jobs[i].by_rank);
	for (int i = 0; dumps && i < npaths; i++)
		json_decref(dumps[i].doc);
	free(jobs);
	free(dumps);
	return rc;
}
