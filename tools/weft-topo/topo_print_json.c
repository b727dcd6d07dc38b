/*
 * topo_print_json.c — parsing the library's JSON and writing it back out
 * laid out for people who read JSON: the library's document is compact,
 * one line; here every rank, host and leaf gets a line of its own, and
 * lists of numbers (the ring order, a leaf's ranks) stay on one line
 * however long, as the old hand-written dump had them.
 */
#include <stdbool.h>
#include <string.h>

#include "tools/weft-topo/topo_print.h"

/* jansson's default of 17 digits would print 12.3 as 12.300000000000001;
 * the library writes 9. */
#define INLINE_FLAGS (JSON_REAL_PRECISION(9))
#define INLINE_MAX   160 /* widest nested value kept on one line */

static bool is_container(const json_t *v)
{
	return json_is_object(v) || json_is_array(v);
}

/* A scalar, or an array of scalars. */
static bool is_leaf(const json_t *v)
{
	size_t i;
	const json_t *e;
	if (!json_is_array(v))
		return !json_is_object(v);
	json_array_foreach(v, i, e) if (is_container(e)) return false;
	return true;
}

/* One line: leaves (the ring order, however long), objects of leaves (a
 * rank, a host), and other objects that are short. A list of objects (the
 * ranks, the hosts) always takes a line per element. */
static bool fits_inline(const json_t *v)
{
	const char *key;
	const json_t *m;
	bool flat = true;

	if (is_leaf(v))
		return true;
	if (json_is_array(v))
		return false;
	json_object_foreach((json_t *)v, key, m) flat &= is_leaf(m);
	if (flat)
		return true;
	char probe[INLINE_MAX + 1];
	return json_dumpb(v, probe, sizeof(probe), INLINE_FLAGS) <= INLINE_MAX;
}

static void write_value(const json_t *v, int indent, FILE *out)
{
	if (fits_inline(v)) {
		json_dumpf(v, out, INLINE_FLAGS | JSON_ENCODE_ANY);
		return;
	}
	bool obj = json_is_object(v);
	size_t n = obj ? json_object_size(v) : json_array_size(v), i = 0;
	fputs(obj ? "{\n" : "[\n", out);
	if (obj) {
		const char *key;
		const json_t *m;
		json_object_foreach((json_t *)v, key, m)
		{
			json_t *k = json_string(key);
			fprintf(out, "%*s", indent + 2, "");
			json_dumpf(k, out, JSON_ENCODE_ANY);
			json_decref(k);
			fputs(": ", out);
			write_value(m, indent + 2, out);
			fputs(++i < n ? ",\n" : "\n", out);
		}
	} else {
		const json_t *e;
		size_t k;
		json_array_foreach(v, k, e)
		{
			fprintf(out, "%*s", indent + 2, "");
			write_value(e, indent + 2, out);
			fputs(k + 1 < n ? ",\n" : "\n", out);
		}
	}
	fprintf(out, "%*s%s", indent, "", obj ? "}" : "]");
}

void weft_tool_write_json(const json_t *v, FILE *out)
{
	write_value(v, 0, out);
	fputc('\n', out);
}
