/*
 * topo_trace_verdict.c — from one communicator's dumps to the verdict
 * (topo_trace.c says what it says): where the ranks' sequences of
 * collectives part, who never posted the operation the others wait in,
 * and the rank every chain of waits ends at.
 */
#include <stdlib.h>
#include <string.h>

#include "tools/weft-topo/topo_print.h"
#include "tools/weft-topo/topo_trace.h"

enum divergence { DIV_NONE = 0, DIV_MISSING, DIV_SIGNATURE };

struct verdict {
	enum divergence kind;
	long long call;		/* the first collective the ranks part on */
	const json_t *op;	/* as a rank that posted it recorded it */
	long long sig_a, sig_b; /* DIV_SIGNATURE: two ranks whose calls differ */
	long long *posted, *missing, *unknown, *ends;
	int nposted, nmissing, nunknown, nends;
};

/* The lowest collective that some dumped rank never posted. */
static long long min_calls(const struct job *j, long long *max)
{
	long long lo = -1;
	*max = -1;
	for (long long r = 0; r < j->nranks; r++) {
		const struct dump *d = j->by_rank[r];
		if (!d)
			continue;
		if (lo < 0 || d->calls < lo)
			lo = d->calls;
		if (d->calls > *max)
			*max = d->calls;
	}
	return lo;
}

/* The first call below @p limit that every dumped rank recorded with
 * different signatures ("word"); -1 none. */
static long long first_signature(const struct job *j, long long limit, struct verdict *v)
{
	long long from = 0;
	for (long long r = 0; r < j->nranks; r++) { /* the oldest call every ring still holds */
		const struct dump *d = j->by_rank[r];
		long long first = -1;
		for (size_t i = 0; d && first < 0 && i < json_array_size(d->ops); i++) {
			const json_t *op = json_array_get(d->ops, i);
			if (!weft_trace_is_p2p(op))
				first = weft_tool_int(op, "call");
		}
		if (first > from)
			from = first;
	}
	for (long long c = from; c < limit; c++) {
		const json_t *ref = NULL;
		long long ref_rank = -1;
		for (long long r = 0; r < j->nranks; r++) {
			const json_t *op =
			    j->by_rank[r] ? weft_trace_coll_op(j->by_rank[r], c) : NULL;
			if (!op)
				continue;
			if (!ref) {
				ref = op;
				ref_rank = r;
			} else if (strcmp(weft_tool_str(op, "word"), weft_tool_str(ref, "word")) !=
				   0) {
				v->sig_a = ref_rank;
				v->sig_b = r;
				v->op = ref;
				return c;
			}
		}
	}
	return -1;
}

static void divergence(const struct job *j, struct verdict *v)
{
	long long max, lo = min_calls(j, &max);
	long long sig = first_signature(j, lo, v);
	if (sig >= 0) {
		v->kind = DIV_SIGNATURE;
		v->call = sig;
		return;
	}
	if (lo < 0 || lo == max)
		return;
	v->kind = DIV_MISSING;
	v->call = lo;
	for (long long r = 0; r < j->nranks; r++) {
		const struct dump *d = j->by_rank[r];
		if (!d)
			v->unknown[v->nunknown++] = r;
		else if (d->calls > lo) {
			v->posted[v->nposted++] = r;
			if (!v->op)
				v->op = weft_trace_coll_op(d, lo);
		} else {
			v->missing[v->nmissing++] = r;
		}
	}
}

/* Where the chain of waits from @p r ends: a rank that waits on no one
 * (or has no dump), or the rank that closes a cycle. */
static long long chain_end(const struct job *j, long long r)
{
	long long steps = 0;
	while (steps++ <= j->nranks) {
		const struct dump *d = j->by_rank[r];
		if (!d || !d->inflight || d->waits_on < 0 || d->waits_on >= j->nranks)
			return r;
		r = d->waits_on;
	}
	return r;
}

static void chain_ends(const struct job *j, struct verdict *v)
{
	for (long long r = 0; r < j->nranks; r++) {
		const struct dump *d = j->by_rank[r];
		if (!d || !d->inflight || d->waits_on < 0)
			continue;
		long long e = chain_end(j, r);
		bool seen = false;
		for (int i = 0; i < v->nends && !seen; i++)
			seen = v->ends[i] == e;
		if (!seen)
			v->ends[v->nends++] = e;
	}
}

static bool analyse(const struct job *j, struct verdict *v)
{
	memset(v, 0, sizeof(*v));
	size_t n = (size_t)j->nranks;
	v->posted = calloc(n, sizeof(long long));
	v->missing = calloc(n, sizeof(long long));
	v->unknown = calloc(n, sizeof(long long));
	v->ends = calloc(n, sizeof(long long));
	if (!v->posted || !v->missing || !v->unknown || !v->ends)
		return false;
	divergence(j, v);
	chain_ends(j, v);
	return true;
}

static void release(struct verdict *v)
{
	free(v->posted);
	free(v->missing);
	free(v->unknown);
	free(v->ends);
}

/* ---- text ---- */

static void ranks_text(FILE *out, const long long *r, int n)
{
	for (int i = 0; i < n; i++)
		fprintf(out, "%s%lld", i ? "," : "", r[i]);
}

static double age_s(const struct dump *d, const json_t *op, const char *key)
{
	const json_t *t = json_object_get(op, key);
	return json_is_integer(t) ? (d->dumped_us - json_integer_value(t)) / 1e6 : -1;
}

/* One line per rank: why it dumped, and what it was doing. */
static void rank_line(const struct job *j, long long r, FILE *out)
{
	const struct dump *d = j->by_rank[r];
	char w[160], what[200];
	weft_trace_who(j, r, w, sizeof(w));
	if (!d) {
		fprintf(out,
			"  %s: no dump (dead before it could write, or WEFT_TRACE_DIR unset)\n", w);
		return;
	}
	fprintf(out, "  %s: %s; %lld collectives called; ", w, weft_tool_str(d->doc, "reason"),
		d->calls);
	if (d->inflight) {
		weft_trace_op_text(d->inflight, what, sizeof(what));
		fprintf(out, "in %s, %s for %.1f s", what, weft_tool_str(d->inflight, "state"),
			age_s(d, d->inflight, "posted_us"));
		if (d->waits_on >= 0) {
			const json_t *step = json_object_get(d->inflight, "wait_step");
			fprintf(out, ", waiting for rank %lld (%s", d->waits_on,
				weft_tool_str(d->inflight, "wait"));
			if (json_is_integer(step))
				fprintf(out, ", step %lld", (long long)json_integer_value(step));
			fprintf(out, ")");
		}
		fprintf(out, "\n");
		return;
	}
	size_t n = json_array_size(d->ops);
	const json_t *last = n ? json_array_get(d->ops, n - 1) : NULL;
	if (!last) {
		fprintf(out, "nothing recorded\n");
		return;
	}
	weft_trace_op_text(last, what, sizeof(what));
	fprintf(out, "idle: its last, %s, finished %.1f s before the dump\n", what,
		age_s(d, last, "finished_us"));
}

static void waits_text(const struct job *j, FILE *out)
{
	bool any = false;
	for (long long r = 0; r < j->nranks; r++) {
		const struct dump *d = j->by_rank[r];
		if (!d || !d->inflight || d->waits_on < 0)
			continue;
		fprintf(out, "%s rank %lld on rank %lld", any ? ";" : "  waiting:", r, d->waits_on);
		any = true;
	}
	if (any)
		fprintf(out, ".\n");
}

static void divergence_text(const struct job *j, const struct verdict *v, FILE *out)
{
	char what[200] = "", a[160], b[160];
	if (v->op)
		weft_trace_op_text(v->op, what, sizeof(what));
	if (v->kind == DIV_SIGNATURE) {
		const json_t *other = weft_trace_coll_op(j->by_rank[v->sig_b], v->call);
		char theirs[200];
		weft_trace_op_text(other, theirs, sizeof(theirs));
		weft_trace_who(j, v->sig_a, a, sizeof(a));
		weft_trace_who(j, v->sig_b, b, sizeof(b));
		fprintf(out,
			"verdict: collective %lld is where the ranks part: %s called %s, %s called "
			"%s (different collectives or arguments)\n",
			v->call, a, what, b, theirs);
	} else if (v->kind == DIV_MISSING) {
		fprintf(out, "verdict: %s%s is the first operation not every rank posted: ",
			v->op ? what : "collective seq ", v->op ? "" : "");
		if (!v->op)
			fprintf(out, "%lld: ", v->call);
		fprintf(out, "rank%s ", v->nposted == 1 ? "" : "s");
		ranks_text(out, v->posted, v->nposted);
		fprintf(out, " posted it; rank%s ", v->nmissing == 1 ? "" : "s");
		ranks_text(out, v->missing, v->nmissing);
		fprintf(out, " never did");
		if (v->nunknown) {
			fprintf(out, " (nothing known of rank%s ", v->nunknown == 1 ? "" : "s");
			ranks_text(out, v->unknown, v->nunknown);
			fprintf(out, ": no dump)");
		}
		fprintf(out, ".\n");
	} else {
		fprintf(out, "verdict: every dumped rank posted the same collectives");
	}
}

static void ends_text(const struct job *j, const struct verdict *v, FILE *out)
{
	char w[160];
	if (v->nends == 1) {
		weft_trace_who(j, v->ends[0], w, sizeof(w));
		fprintf(out,
			"  every waiter waits, directly or through others, on %s: look there "
			"first.\n",
			w);
	} else if (v->nends > 1) {
		fprintf(out, "  the waits end at ranks ");
		ranks_text(out, v->ends, v->nends);
		fprintf(out, ".\n");
	} else if (v->kind == DIV_NONE) {
		fprintf(out, ", and none waits: no hang in what was recorded.\n");
	}
}

static void events_text(const struct job *j, FILE *out)
{
	bool any = false;
	for (long long r = 0; r < j->nranks; r++) {
		const struct dump *d = j->by_rank[r];
		size_t i;
		const json_t *e;
		json_array_foreach(d ? json_object_get(d->doc, "events") : NULL, i, e)
		{
			fprintf(out, "  rank %lld, %.1f s before its dump: %s: %s\n", r,
				(d->dumped_us - weft_tool_int(e, "t_us")) / 1e6,
				weft_tool_str(e, "kind"), weft_tool_str(e, "text"));
			any = true;
		}
	}
	if (!any)
		fprintf(out, "  none recorded\n");
}

void weft_trace_verdict_text(const struct job *j, FILE *out)
{
	struct verdict v;
	fprintf(out, "communicator %s: %lld ranks, %d dumps\n", j->comm, j->nranks, j->ndumps);
	for (long long r = 0; r < j->nranks; r++)
		rank_line(j, r, out);
	if (!analyse(j, &v)) {
		fprintf(out, "verdict: none (no memory)\n");
		release(&v);
		return;
	}
	divergence_text(j, &v, out);
	waits_text(j, out);
	ends_text(j, &v, out);
	fprintf(out, "events:\n");
	events_text(j, out);
	release(&v);
}

/* ---- JSON ---- */

static json_t *ranks_json(const long long *r, int n)
{
	json_t *a = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(a, json_integer(r[i]));
	return a;
}

json_t *weft_trace_verdict_json(const struct job *j)
{
	struct verdict v;
	json_t *waits = json_array(), *missing_dumps = json_array();
	for (long long r = 0; r < j->nranks; r++) {
		const struct dump *d = j->by_rank[r];
		if (!d)
			json_array_append_new(missing_dumps, json_integer(r));
		else if (d->inflight && d->waits_on >= 0)
			json_array_append_new(
			    waits, json_pack("{s:I, s:I, s:s, s:O}", "rank", r, "on", d->waits_on,
					     "wait", weft_tool_str(d->inflight, "wait"), "step",
					     json_object_get(d->inflight, "wait_step")));
	}
	bool ok = analyse(j, &v);
	static const char *const kinds[] = {"none", "missing", "signature"};
	json_t *o = json_pack("{s:s, s:I, s:i, s:o, s:o}", "comm", j->comm, "nranks", j->nranks,
			      "dumps", j->ndumps, "no_dump", missing_dumps, "waits", waits);
	if (ok) {
		json_object_set_new(o, "divergence", json_string(kinds[v.kind]));
		json_object_set_new(o, "call", v.kind ? json_integer(v.call) : json_null());
		json_object_set_new(o, "posted_by", ranks_json(v.posted, v.nposted));
		json_object_set_new(o, "never_posted_by", ranks_json(v.missing, v.nmissing));
		json_object_set_new(o, "chains_end_at", ranks_json(v.ends, v.nends));
		json_object_set_new(o, "op", v.op ? json_deep_copy(v.op) : json_null());
	}
	release(&v);
	return o;
}
