/*
 * topo_file_conf.c — reading Slurm's topology.conf (topology/tree), the
 * format most clusters already keep:
 *
 *     # leaf switches list nodes, spines list switches
 *     SwitchName=leaf1 Nodes=node[01-16,20] LinkSpeed=100
 *     SwitchName=leaf2 Nodes=node[21-36]
 *     SwitchName=spine1 Switches=leaf[1-2]
 *
 * As in Slurm: keys are case-insensitive, '#' starts a comment, a line
 * ending in '\' continues on the next, Nodes= and Switches= take hostlist
 * expressions. A leaf is a switch with Nodes=; its spine is the switch whose
 * Switches= names it (the first such, if several do). Slurm's topology/block
 * lines are read too: BlockName=b1 Nodes=... is a leaf without a spine, and
 * BlockSizes= is ignored. Anything else is an error naming the file and
 * line, rather than a silently ignored typo that would cost a job its
 * placement.
 *
 * Two passes: the first reads every line into switch records (values kept
 * in the file's string pool), the second resolves Switches= (children may
 * be defined after their parent) and expands Nodes= into host records.
 */
#define _GNU_SOURCE /* qsort_r */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "topo/hostlist.h"
#include "topo/topo_file_impl.h"

enum conf_key {
	KEY_SWITCH_NAME,
	KEY_BLOCK_NAME,
	KEY_NODES,
	KEY_SWITCHES,
	KEY_LINK_SPEED,
	KEY_BLOCK_SIZES,
	KEY_COUNT
};

static const char *const key_names[KEY_COUNT] = {
    [KEY_SWITCH_NAME] = "SwitchName",
    [KEY_BLOCK_NAME] = "BlockName",
    [KEY_NODES] = "Nodes",
    [KEY_SWITCHES] = "Switches",
    [KEY_LINK_SPEED] = "LinkSpeed",
    [KEY_BLOCK_SIZES] = "BlockSizes",
};

struct conf_switch {
	size_t name; /* pool offsets; WEFT_TOPO_FILE_NO_STRING if absent */
	size_t nodes;
	size_t switches;
	int parent; /* index, -1 none */
	int line;
};

struct conf_reader {
	struct weft_topo_file *f;
	struct weft_err *err;
	struct conf_switch *sw;
	int nsw, sw_cap;
	int *by_name; /* switch indices sorted by name, for lookups */
	char *buf;    /* the current logical line */
	size_t buf_cap;
};

static weft_status_t bad_line(struct conf_reader *cr, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static weft_status_t bad_line(struct conf_reader *cr, int line, const char *fmt, ...)
{
	char what[WEFT_ERR_MSG_BYTES];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return weft_err_set(cr->err, WEFT_ERR_INVALID_ARG, "%s:%d: %s", cr->f->path, line, what);
}

static weft_status_t no_memory(struct conf_reader *cr)
{
	return weft_err_set(cr->err, WEFT_ERR_NO_MEMORY, "%s: reading topology", cr->f->path);
}

static const char *str(const struct conf_reader *cr, size_t off)
{
	return weft_topo_file_str(cr->f, off);
}

/* ---- pass 1: lines -------------------------------------------------------- */

/* One KEY=VALUE of a line, pointing into the line buffer. */
struct conf_value {
	const char *s;
	size_t len;
};

static int find_key(const char *k, size_t len)
{
	for (int i = 0; i < KEY_COUNT; i++) {
		if (strlen(key_names[i]) == len && strncasecmp(k, key_names[i], len) == 0)
			return i;
	}
	return -1;
}

static weft_status_t split_token(struct conf_reader *cr, int line, const char *tok, size_t len,
				 struct conf_value *vals)
{
	const char *eq = memchr(tok, '=', len);
	if (!eq || eq == tok)
		return bad_line(cr, line, "expected KEY=VALUE, found \"%.*s\"", (int)len, tok);
	size_t klen = (size_t)(eq - tok);
	int key = find_key(tok, klen);
	if (key < 0)
		return bad_line(cr, line,
				"unknown key \"%.*s\" (topology.conf knows SwitchName, Nodes, "
				"Switches, LinkSpeed, BlockName, BlockSizes)",
				(int)klen, tok);
	if (vals[key].s)
		return bad_line(cr, line, "%s given twice", key_names[key]);
	vals[key].s = eq + 1;
	vals[key].len = len - klen - 1;
	if (vals[key].len == 0)
		return bad_line(cr, line, "%s has no value", key_names[key]);
	return WEFT_SUCCESS;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

static weft_status_t store(struct conf_reader *cr, struct conf_value v, size_t *off)
{
	if (!v.s) {
		*off = WEFT_TOPO_FILE_NO_STRING;
		return WEFT_SUCCESS;
	}
	return weft_topo_file_add_string(cr->f, v.s, v.len, off, cr->err);
}

static weft_status_t add_switch(struct conf_reader *cr, int line, struct conf_value *vals)
{
	struct conf_switch *s;
	weft_status_t st;

	if (cr->nsw == cr->sw_cap) {
		int cap = cr->sw_cap ? cr->sw_cap * 2 : 16;
		s = realloc(cr->sw, (size_t)cap * sizeof(*s));
		if (!s)
			return no_memory(cr);
		cr->sw = s;
		cr->sw_cap = cap;
	}
	s = &cr->sw[cr->nsw];
	s->parent = -1;
	s->line = line;
	st = store(cr, vals[KEY_SWITCH_NAME].s ? vals[KEY_SWITCH_NAME] : vals[KEY_BLOCK_NAME],
		   &s->name);
	if (st == WEFT_SUCCESS)
		st = store(cr, vals[KEY_NODES], &s->nodes);
	if (st == WEFT_SUCCESS)
		st = store(cr, vals[KEY_SWITCHES], &s->switches);
	if (st == WEFT_SUCCESS)
		cr->nsw++;
	return st;
}

/* Which keys may share a line: one SwitchName (with Nodes, Switches,
 * LinkSpeed), or one BlockName (with Nodes), or BlockSizes alone. */
static weft_status_t check_line_keys(struct conf_reader *cr, int line,
				     const struct conf_value *vals)
{
	const struct conf_value *name =
	    vals[KEY_SWITCH_NAME].s ? &vals[KEY_SWITCH_NAME] : &vals[KEY_BLOCK_NAME];

	if (vals[KEY_SWITCH_NAME].s && vals[KEY_BLOCK_NAME].s)
		return bad_line(cr, line, "SwitchName and BlockName on one line");
	if (vals[KEY_BLOCK_SIZES].s) {
		for (int k = 0; k < KEY_COUNT; k++) {
			if (k != KEY_BLOCK_SIZES && vals[k].s)
				return bad_line(cr, line, "BlockSizes shares its line with %s",
						key_names[k]);
		}
		return WEFT_SUCCESS;
	}
	if (!name->s)
		return bad_line(cr, line, "no SwitchName= on this line");
	if (vals[KEY_BLOCK_NAME].s && (vals[KEY_SWITCHES].s || vals[KEY_LINK_SPEED].s))
		return bad_line(cr, line, "BlockName takes only Nodes=");
	if (strcspn(name->s, "[],") < name->len)
		return bad_line(cr, line, "switch name \"%.*s\" is a hostlist; name one switch",
				(int)name->len, name->s);
	return WEFT_SUCCESS;
}

static weft_status_t parse_line(struct conf_reader *cr, int line, const char *s, size_t len)
{
	struct conf_value vals[KEY_COUNT] = {{0}};
	size_t i = 0;
	bool any = false;
	weft_status_t st;

	while (i < len) {
		while (i < len && is_blank(s[i]))
			i++;
		size_t start = i;
		while (i < len && !is_blank(s[i]))
			i++;
		if (i == start)
			break;
		st = split_token(cr, line, s + start, i - start, vals);
		if (st != WEFT_SUCCESS)
			return st;
		any = true;
	}
	if (!any)
		return WEFT_SUCCESS; /* blank or comment */
	st = check_line_keys(cr, line, vals);
	if (st != WEFT_SUCCESS || vals[KEY_BLOCK_SIZES].s)
		return st;
	return add_switch(cr, line, vals);
}

static weft_status_t buf_append(struct conf_reader *cr, const char *s, size_t len, size_t *used)
{
	if (cr->buf_cap - *used < len + 1) {
		size_t cap = cr->buf_cap ? cr->buf_cap : 256;
		while (cap - *used < len + 1)
			cap *= 2;
		char *b = realloc(cr->buf, cap);
		if (!b)
			return no_memory(cr);
		cr->buf = b;
		cr->buf_cap = cap;
	}
	memcpy(cr->buf + *used, s, len);
	*used += len;
	cr->buf[*used] = '\0';
	return WEFT_SUCCESS;
}

/* Every logical line: comments cut, '\' continuations joined; a logical
 * line reports the number of its first physical line. */
static weft_status_t read_lines(struct conf_reader *cr, const char *text, size_t len)
{
	const char *p = text, *end = text + len;
	int line = 0, first = 1;
	size_t used = 0;
	weft_status_t st;

	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *next = eol ? eol + 1 : end;
		if (!eol)
			eol = end;
		line++;
		if (memchr(p, '\0', (size_t)(eol - p)))
			return bad_line(cr, line, "NUL byte; not a text file");
		const char *hash = memchr(p, '#', (size_t)(eol - p));
		const char *stop = hash ? hash : eol;
		while (stop > p && is_blank(stop[-1]))
			stop--;
		bool more = stop > p && stop[-1] == '\\' && !hash;
		if (used == 0)
			first = line;
		st = buf_append(cr, p, (size_t)(stop - p - (more ? 1 : 0)), &used);
		if (st == WEFT_SUCCESS && more)
			st = buf_append(cr, " ", 1, &used);
		if (st == WEFT_SUCCESS && !more) {
			st = parse_line(cr, first, cr->buf, used);
			used = 0;
		}
		if (st != WEFT_SUCCESS)
			return st;
		p = next;
	}
	if (used)
		return parse_line(cr, first, cr->buf, used);
	return WEFT_SUCCESS;
}

/* ---- pass 2: switches and hosts ------------------------------------------ */

static int name_cmp(const void *pa, const void *pb, void *arg)
{
	const struct conf_reader *cr = arg;
	int a = *(const int *)pa, b = *(const int *)pb;
	int c = strcmp(str(cr, cr->sw[a].name), str(cr, cr->sw[b].name));
	return c ? c : (a > b) - (a < b);
}

static weft_status_t index_switches(struct conf_reader *cr)
{
	if (cr->nsw == 0)
		return weft_err_set(cr->err, WEFT_ERR_INVALID_ARG,
				    "%s: no SwitchName= lines; not a topology.conf", cr->f->path);
	cr->by_name = malloc((size_t)cr->nsw * sizeof(*cr->by_name));
	if (!cr->by_name)
		return no_memory(cr);
	for (int i = 0; i < cr->nsw; i++)
		cr->by_name[i] = i;
	qsort_r(cr->by_name, (size_t)cr->nsw, sizeof(*cr->by_name), name_cmp, cr);
	for (int i = 1; i < cr->nsw; i++) {
		const struct conf_switch *a = &cr->sw[cr->by_name[i - 1]];
		const struct conf_switch *b = &cr->sw[cr->by_name[i]];
		if (strcmp(str(cr, a->name), str(cr, b->name)) == 0)
			return bad_line(cr, b->line, "switch %s defined again (first at line %d)",
					str(cr, b->name), a->line);
	}
	return WEFT_SUCCESS;
}

static int find_switch(const struct conf_reader *cr, const char *name)
{
	int lo = 0, hi = cr->nsw;
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;
		int c = strcmp(str(cr, cr->sw[cr->by_name[mid]].name), name);
		if (c == 0)
			return cr->by_name[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/* Context of one hostlist expansion. */
struct expansion {
	struct conf_reader *cr;
	int sw; /* the switch whose list this is */
};

static weft_status_t adopt_child(void *ctx, const char *name)
{
	struct expansion *ex = ctx;
	struct conf_reader *cr = ex->cr;
	const struct conf_switch *parent = &cr->sw[ex->sw];
	int child = find_switch(cr, name);

	if (child < 0)
		return bad_line(cr, parent->line,
				"Switches= names %s, which no SwitchName= defines", name);
	if (child == ex->sw)
		return bad_line(cr, parent->line, "switch %s lists itself in Switches=", name);
	if (cr->sw[child].parent < 0)
		cr->sw[child].parent = ex->sw;
	return WEFT_SUCCESS;
}

static weft_status_t adopt_host(void *ctx, const char *name)
{
	struct expansion *ex = ctx;
	struct conf_reader *cr = ex->cr;
	const struct conf_switch *leaf = &cr->sw[ex->sw];
	size_t off, spine = WEFT_TOPO_FILE_NO_STRING;
	weft_status_t st;

	if (cr->f->nhosts >= WEFT_HOSTLIST_MAX_HOSTS)
		return bad_line(cr, leaf->line, "the file names more than %d hosts",
				WEFT_HOSTLIST_MAX_HOSTS);
	if (leaf->parent >= 0)
		spine = cr->sw[leaf->parent].name;
	st = weft_topo_file_add_string(cr->f, name, strlen(name), &off, cr->err);
	if (st != WEFT_SUCCESS)
		return st;
	return weft_topo_file_add_host(cr->f, off, leaf->name, spine, leaf->line, cr->err);
}

static weft_status_t expand(struct conf_reader *cr, int sw, enum conf_key key, weft_hostlist_fn fn)
{
	const struct conf_switch *s = &cr->sw[sw];
	size_t off = key == KEY_NODES ? s->nodes : s->switches;
	struct expansion ex = {cr, sw};
	char why[160];
	weft_status_t st;

	if (off == WEFT_TOPO_FILE_NO_STRING)
		return WEFT_SUCCESS;
	/* A copy: adding the names it expands to may move the pool. */
	char *list = strdup(str(cr, off));
	if (!list)
		return no_memory(cr);
	why[0] = '\0';
	st = weft_hostlist_expand(list, WEFT_HOSTLIST_MAX_HOSTS, fn, &ex, why, sizeof(why));
	if (st != WEFT_SUCCESS && why[0])
		bad_line(cr, s->line, "bad %s=%s: %s", key_names[key], list, why);
	free(list);
	return st;
}

weft_status_t weft_topo_file_parse_conf(struct weft_topo_file *f, const char *text, size_t len,
					struct weft_err *err)
{
	struct conf_reader cr = {.f = f, .err = err};
	weft_status_t st;

	st = read_lines(&cr, text, len);
	if (st == WEFT_SUCCESS)
		st = index_switches(&cr);
	for (int i = 0; st == WEFT_SUCCESS && i < cr.nsw; i++)
		st = expand(&cr, i, KEY_SWITCHES, adopt_child);
	for (int i = 0; st == WEFT_SUCCESS && i < cr.nsw; i++)
		st = expand(&cr, i, KEY_NODES, adopt_host);
	free(cr.buf);
	free(cr.by_name);
	free(cr.sw);
	return st;
}
