/*
 * topo_stats.c — weft-topo --stats: the files that WEFT_STATS_FILE made
 * (one JSON object per line per connection, written every interval; see
 * core/stats.h), read back into two tables: each connection as its
 * last line left it, and each leaf's uplink (the bytes its ranks sent to
 * ranks under other leaves).
 *
 * The files come from a job, maybe one still running or one that died:
 * anything that is not a line Weft writes stops the program with the file
 * and line named, not with a crash or a table that quietly leaves it out.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tools/weft-topo/topo_print.h"

/* The last line of each (rank, peer), in an open-addressed table. */
struct conn {
	long long rank, peer;
	json_t *line; /* NULL: empty slot */
};

struct table {
	struct conn *slots;
	size_t cap, n;
};

static size_t slot_of(const struct table *t, long long rank, long long peer)
{
	uint64_t h =
	    (uint64_t)rank * 0x9e3779b97f4a7c15ull ^ (uint64_t)peer * 0xc2b2ae3d27d4eb4full;
	size_t i = (size_t)(h >> 17) & (t->cap - 1);
	while (t->slots[i].line && (t->slots[i].rank != rank || t->slots[i].peer != peer))
		i = (i + 1) & (t->cap - 1);
	return i;
}

static bool grow(struct table *t)
{
	struct table bigger = {.cap = t->cap ? 2 * t->cap : 64, .n = t->n};
	bigger.slots = calloc(bigger.cap, sizeof(*bigger.slots));
	if (!bigger.slots)
		return false;
	for (size_t i = 0; i < t->cap; i++)
		if (t->slots[i].line)
			bigger.slots[slot_of(&bigger, t->slots[i].rank, t->slots[i].peer)] =
			    t->slots[i];
	free(t->slots);
	*t = bigger;
	return true;
}

/* Keep @p line (taken over) as its connection's last. */
static bool keep(struct table *t, json_t *line)
{
	long long rank = weft_tool_int(line, "rank"), peer = weft_tool_int(line, "peer");
	if (2 * (t->n + 1) > t->cap && !grow(t)) {
		json_decref(line);
		return false;
	}
	struct conn *c = &t->slots[slot_of(t, rank, peer)];
	if (c->line)
		json_decref(c->line);
	else
		t->n++;
	*c = (struct conn){rank, peer, line};
	return true;
}

/* What a line must have, and of which type: a missing "bytes" is a file
 * that is not ours, not a connection that sent nothing. */
static const char *bad_member(const json_t *o)
{
	static const char *const ints[] = {"rank", "peer", "bytes", "msgs"};
	static const char *const nullable_ints[] = {"ce",      "delivered", "cuts",   "failovers",
						    "repaths", "replaced",  "probes", "resent",
						    "dups",    "dark"};
	static const char *const nullable_reals[] = {"rate_MBps", "alpha"};
	static const char *const nullable_strs[] = {"leaf", "peer_leaf"};
	if (!json_is_object(o))
		return "(an object)";
	if (!json_is_number(json_object_get(o, "t")))
		return "t";
	for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
		if (!json_is_integer(json_object_get(o, ints[i])))
			return ints[i];
	if (!json_is_string(json_object_get(o, "transport")))
		return "transport";
	for (size_t i = 0; i < sizeof(nullable_ints) / sizeof(nullable_ints[0]); i++) {
		const json_t *v = json_object_get(o, nullable_ints[i]);
		if (v && !json_is_null(v) && !json_is_integer(v))
			return nullable_ints[i];
	}
	for (size_t i = 0; i < sizeof(nullable_reals) / sizeof(nullable_reals[0]); i++) {
		const json_t *v = json_object_get(o, nullable_reals[i]);
		if (v && !json_is_null(v) && !json_is_number(v))
			return nullable_reals[i];
	}
	for (size_t i = 0; i < sizeof(nullable_strs) / sizeof(nullable_strs[0]); i++) {
		const json_t *v = json_object_get(o, nullable_strs[i]);
		if (v && !json_is_null(v) && !json_is_string(v))
			return nullable_strs[i];
	}
	const json_t *w = json_object_get(o, "weights");
	if (w && !json_is_null(w) && !json_is_array(w))
		return "weights";
	return NULL;
}

/* Every line of @p path into @p t; false after a message naming the file
 * and the line. Blank lines are skipped. */
static bool read_file(const char *path, struct table *t)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "weft-topo: --stats %s: %s\n", path, strerror(errno));
		return false;
	}
	char *buf = NULL;
	size_t cap = 0;
	ssize_t len;
	bool ok = true;
	for (long lineno = 1; ok && (len = getline(&buf, &cap, f)) >= 0; lineno++) {
		if (strspn(buf, " \t\r\n") == (size_t)len)
			continue;
		json_error_t jerr;
		json_t *o = json_loadb(buf, (size_t)len, JSON_REJECT_DUPLICATES, &jerr);
		const char *bad = o ? bad_member(o) : NULL;
		if (!o) {
			fprintf(stderr, "weft-topo: %s:%ld: not JSON (column %d: %s)\n", path,
				lineno, jerr.column, jerr.text);
			ok = false;
		} else if (bad) {
			fprintf(stderr,
				"weft-topo: %s:%ld: not a Weft stats line: \"%s\" missing or of "
				"the wrong type\n",
				path, lineno, bad);
			json_decref(o);
			ok = false;
		} else if (!keep(t, o)) {
			fprintf(stderr, "weft-topo: --stats: no memory\n");
			ok = false;
		}
	}
	if (ok && ferror(f)) {
		fprintf(stderr, "weft-topo: --stats %s: %s\n", path, strerror(errno));
		ok = false;
	}
	free(buf);
	fclose(f);
	return ok;
}

static int by_rank_peer(const void *a, const void *b)
{
	const struct conn *x = a, *y = b;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return (x->peer > y->peer) - (x->peer < y->peer);
}

/* The connections in (rank, peer) order, the table's slots compacted. */
static struct conn *sorted(struct table *t)
{
	size_t n = 0;
	for (size_t i = 0; i < t->cap; i++)
		if (t->slots[i].line)
			t->slots[n++] = t->slots[i];
	memset(t->slots + n, 0, (t->cap - n) * sizeof(*t->slots));
	qsort(t->slots, n, sizeof(*t->slots), by_rank_peer);
	return t->slots;
}

/* ---- the tables ---- */

/* "12/3400 (0.0035)", or "-" where the transport gives no signals. */
static void ce_fraction(char *buf, size_t len, const json_t *ce, const json_t *delivered)
{
	if (!json_is_integer(ce) || !json_is_integer(delivered)) {
		snprintf(buf, len, "-");
		return;
	}
	long long c = json_integer_value(ce), d = json_integer_value(delivered);
	snprintf(buf, len, "%lld/%lld (%.4f)", c, d, d > 0 ? (double)c / (double)d : 0.0);
}

/* A number with @p prec decimals, or "-" for null or absent. */
static const char *num(char *buf, size_t len, const json_t *v, int prec)
{
	if (!json_is_number(v))
		return "-";
	snprintf(buf, len, "%.*f", prec, json_number_value(v));
	return buf;
}

static void weights_text(char *buf, size_t len, const json_t *w)
{
	size_t i, n = 0;
	const json_t *e;
	snprintf(buf, len, "-");
	json_array_foreach(w, i, e)
	{
		int k = snprintf(buf + n, len - n, "%s%.2f", i ? " " : "", json_number_value(e));
		if (k < 0 || (size_t)k >= len - n)
			break;
		n += (size_t)k;
	}
}

/* The path failover's counters: "2 (1 replaced)", "+1 moved" when
 * sub-flows were moved off a congested path, ", 1 dark" while sub-flows
 * are dark; "-" in a file from before they were written. */
static void paths_text(char *buf, size_t len, const json_t *o)
{
	const json_t *fo = json_object_get(o, "failovers");
	if (!json_is_integer(fo)) {
		snprintf(buf, len, "-");
		return;
	}
	long long moved = weft_tool_int(o, "repaths"), dark = weft_tool_int(o, "dark");
	int n = snprintf(buf, len, "%lld (%lld replaced)", json_integer_value(fo),
			 weft_tool_int(o, "replaced"));
	if (moved > 0 && n > 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, " +%lld moved", moved);
	if (dark > 0 && n > 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, ", %lld dark", dark);
}

static void conns_text(const struct conn *c, size_t n, FILE *out)
{
	fprintf(out, "connections (the last line of each):\n");
	fprintf(out, "%-14s %-9s %14s %10s %-24s %10s %7s %6s  %-20s  %s\n", "rank -> peer",
		"transport", "bytes", "msgs", "CE marks/delivered", "rate MB/s", "alpha", "cuts",
		"failovers", "sub-flow weights");
	for (size_t i = 0; i < n; i++) {
		const json_t *o = c[i].line;
		char pair[32], ce[48], rate[32], alpha[32], cuts[32], fo[80], w[256];
		snprintf(pair, sizeof(pair), "%lld -> %lld", c[i].rank, c[i].peer);
		ce_fraction(ce, sizeof(ce), json_object_get(o, "ce"),
			    json_object_get(o, "delivered"));
		weights_text(w, sizeof(w), json_object_get(o, "weights"));
		paths_text(fo, sizeof(fo), o);
		fprintf(out, "%-14s %-9s %14lld %10lld %-24s %10s %7s %6s  %-20s  %s\n", pair,
			weft_tool_str(o, "transport"), weft_tool_int(o, "bytes"),
			weft_tool_int(o, "msgs"), ce,
			num(rate, sizeof(rate), json_object_get(o, "rate_MBps"), 1),
			num(alpha, sizeof(alpha), json_object_get(o, "alpha"), 3),
			num(cuts, sizeof(cuts), json_object_get(o, "cuts"), 0), fo, w);
	}
}

/* Per source leaf: the connections to other leaves, their bytes and CE
 * counts. @p c is in (rank, peer) order, so a leaf's ranks are not
 * together: gather the cross-leaf ones and sort them by leaf. */
struct uplink {
	const char *leaf;
	long long bytes, ce, delivered, conns;
};

static int by_leaf(const void *a, const void *b)
{
	return strcmp(((const struct uplink *)a)->leaf, ((const struct uplink *)b)->leaf);
}

/* The uplinks, one per leaf, into *out (caller frees); their count. */
static size_t uplinks(const struct conn *c, size_t n, struct uplink **out)
{
	struct uplink *u = calloc(n ? n : 1, sizeof(*u));
	size_t m = 0, k = 0;
	*out = u;
	for (size_t i = 0; u && i < n; i++) {
		const char *a = json_string_value(json_object_get(c[i].line, "leaf"));
		const char *b = json_string_value(json_object_get(c[i].line, "peer_leaf"));
		if (!a || !b || strcmp(a, b) == 0)
			continue;
		u[m++] = (struct uplink){
		    .leaf = a,
		    .bytes = weft_tool_int(c[i].line, "bytes"),
		    .ce = weft_tool_int(c[i].line, "ce"),
		    .delivered = weft_tool_int(c[i].line, "delivered"),
		    .conns = 1,
		};
	}
	if (m)
		qsort(u, m, sizeof(*u), by_leaf);
	for (size_t i = 0; i < m; i++) {
		if (k > 0 && strcmp(u[k - 1].leaf, u[i].leaf) == 0) {
			u[k - 1].bytes += u[i].bytes;
			u[k - 1].ce += u[i].ce;
			u[k - 1].delivered += u[i].delivered;
			u[k - 1].conns++;
		} else {
			u[k++] = u[i];
		}
	}
	return k;
}

static void uplinks_text(const struct uplink *u, size_t n, FILE *out)
{
	if (n == 0) {
		fprintf(out, "\nleaf uplinks: none (no connection between two known leaves)\n");
		return;
	}
	fprintf(out, "\nleaf uplinks (bytes sent to ranks under other leaves):\n");
	fprintf(out, "%-20s %16s %12s  %s\n", "leaf", "bytes", "connections", "CE marks/delivered");
	for (size_t i = 0; i < n; i++) {
		char ce[64];
		snprintf(ce, sizeof(ce), "%lld/%lld (%.4f)", u[i].ce, u[i].delivered,
			 u[i].delivered > 0 ? (double)u[i].ce / (double)u[i].delivered : 0.0);
		fprintf(out, "%-20s %16lld %12lld  %s\n", u[i].leaf, u[i].bytes, u[i].conns, ce);
	}
}

static int stats_json(const struct conn *c, size_t n, const struct uplink *u, size_t nu, FILE *out)
{
	json_t *conns = json_array(), *ups = json_array();
	int bad = 0;
	for (size_t i = 0; i < n; i++)
		bad |= json_array_append(conns, c[i].line);
	for (size_t i = 0; i < nu; i++)
		bad |= json_array_append_new(
		    ups,
		    json_pack("{s:s, s:I, s:I, s:I, s:I}", "leaf", u[i].leaf, "bytes",
			      (json_int_t)u[i].bytes, "connections", (json_int_t)u[i].conns, "ce",
			      (json_int_t)u[i].ce, "delivered", (json_int_t)u[i].delivered));
	json_t *doc = json_pack("{s:o, s:o}", "connections", conns, "leaf_uplinks", ups);
	if (bad || !doc) {
		json_decref(doc);
		fprintf(stderr, "weft-topo: --stats: no memory\n");
		return 1;
	}
	weft_tool_write_json(doc, out);
	json_decref(doc);
	return 0;
}

static int print_conns(const struct conn *c, size_t n, enum weft_topo_format format, FILE *out)
{
	struct uplink *u;
	size_t nu = uplinks(c, n, &u);
	int rc = 0;
	if (!u) {
		fprintf(stderr, "weft-topo: --stats: no memory\n");
		return 1;
	}
	if (format == WEFT_TOPO_JSON) {
		rc = stats_json(c, n, u, nu, out);
	} else {
		conns_text(c, n, out);
		uplinks_text(u, nu, out);
	}
	free(u);
	return rc;
}

int weft_tool_print_stats(char *const *paths, int npaths, enum weft_topo_format format, FILE *out)
{
	struct table t = {0};
	bool ok = true;
	for (int i = 0; ok && i < npaths; i++)
		ok = read_file(paths[i], &t);
	int rc = 1;
	if (ok && t.n == 0)
		fprintf(stderr, "weft-topo: --stats: no lines in %d file%s\n", npaths,
			npaths == 1 ? "" : "s");
	else if (ok)
		rc = print_conns(sorted(&t), t.n, format, out);
	for (size_t i = 0; i < t.cap; i++)
		if (t.slots[i].line)
			json_decref(t.slots[i].line);
	free(t.slots);
	return rc;
}
