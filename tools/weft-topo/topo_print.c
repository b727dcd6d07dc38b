/*
 * topo_print.c — weft-topo's writers: parse the library's JSON, then hand
 * it to the writer for the format asked. Host mode and --settings are
 * short enough to live here.
 */
#include <string.h>

#include "tools/weft-topo/topo_print.h"

json_t *weft_tool_parse(const char *json, const char *what)
{
	json_error_t jerr;
	json_t *v = json_loads(json, JSON_REJECT_DUPLICATES, &jerr);
	if (!v)
		fprintf(stderr, "weft-topo: %s is not JSON (%d:%d: %s)\n", what, jerr.line,
			jerr.column, jerr.text);
	return v;
}

/* A job's or a model's description (@p what) in @p format; the two differ
 * only in their text form. */
static int print_doc(const char *json, const char *what,
		     int (*print_text)(const json_t *doc, FILE *out), enum weft_topo_format format,
		     FILE *out)
{
	json_t *doc = weft_tool_parse(json, what);
	int rc = 1;
	if (!doc)
		return 1;
	switch (format) {
	case WEFT_TOPO_TEXT: rc = print_text(doc, out); break;
	case WEFT_TOPO_JSON:
		weft_tool_write_json(doc, out);
		rc = 0;
		break;
	case WEFT_TOPO_DOT: rc = weft_tool_print_job_dot(doc, out); break;
	case WEFT_TOPO_RANKFILE: rc = weft_tool_print_job_rankfile(doc, out); break;
	case WEFT_TOPO_MARKDOWN: /* refused with anything but --settings (weft_topo_main.c) */
	case WEFT_TOPO_MAN:
		fprintf(stderr, "weft-topo: --format %s: only with --settings\n",
			format == WEFT_TOPO_MAN ? "man" : "markdown");
		break;
	}
	json_decref(doc);
	return rc;
}

int weft_tool_print_job(const char *json, enum weft_topo_format format, FILE *out)
{
	return print_doc(json, "the communicator's description", weft_tool_print_job_text, format,
			 out);
}

int weft_tool_print_model(const char *json, enum weft_topo_format format, FILE *out)
{
	return print_doc(json, "the model's description", weft_tool_print_model_text, format, out);
}

static void host_text(const json_t *h, FILE *out)
{
	size_t i;
	const json_t *f;
	fprintf(
	    out,
	    "host %s (id %s)\n  %lld package(s), %lld NUMA node(s), %lld core(s); this "
	    "process on NUMA %lld\n  nic: %s (NUMA %lld)\n  leaf: %s (id %s, port %s, "
	    "learned by %s)\n",
	    weft_tool_str(h, "hostname"), weft_tool_str(h, "host"), weft_tool_int(h, "packages"),
	    weft_tool_int(h, "numa_nodes"), weft_tool_int(h, "cores"), weft_tool_int(h, "numa"),
	    weft_tool_dash(weft_tool_str(h, "nic")), weft_tool_int(h, "nic_numa"),
	    weft_tool_dash(weft_tool_str(h, "leaf")), weft_tool_dash(weft_tool_str(h, "leaf_id")),
	    weft_tool_dash(weft_tool_str(h, "leaf_port")), weft_tool_str(h, "leaf_source"));
	if (weft_tool_str(h, "spine")[0])
		fprintf(out, "  spine: %s\n", weft_tool_str(h, "spine"));
	fprintf(out, "  interfaces:\n");
	json_array_foreach(json_object_get(h, "interfaces"), i, f)
	{
		fprintf(out, "    %-16s %s%s\n", weft_tool_str(f, "name"),
			json_is_true(json_object_get(f, "up")) ? "up" : "down",
			json_is_true(json_object_get(f, "loopback")) ? " loopback" : "");
	}
}

int weft_tool_print_host(const char *json, enum weft_topo_format format, FILE *out)
{
	json_t *doc = weft_tool_parse(json, "the host's description");
	if (!doc)
		return 1;
	if (format == WEFT_TOPO_JSON)
		weft_tool_write_json(doc, out);
	else
		host_text(doc, out);
	json_decref(doc);
	return 0;
}

/* One table cell of docs/settings.md: the characters Markdown would read
 * as a column break, emphasis, code or HTML are escaped. */
static void md_cell(const char *s, FILE *out)
{
	for (; *s; s++) {
		if (*s == '<')
			fputs("&lt;", out);
		else if (*s == '>')
			fputs("&gt;", out);
		else {
			if (strchr("|*`\\", *s))
				fputc('\\', out);
			fputc(*s, out);
		}
	}
}

/* docs/settings.md: the page is the tool's output and nothing else, so
 * that make lint can tell when the checked-in copy is stale. */
static void settings_markdown(const json_t *doc, FILE *out)
{
	size_t i;
	const json_t *s;
	fputs("<!-- Generated: `make docs` writes this file from the settings the library\n"
	      "     declares (build/weft-topo --settings --format markdown), and `make lint`\n"
	      "     fails when it is stale. Edit the declaration, not this file. -->\n"
	      "# Settings: every `WEFT_*` variable\n\n"
	      "Every environment variable Weft reads, in the order the library declares\n"
	      "them: each is declared once, with its default and a line of help, beside\n"
	      "the module that reads it (`util/settings.h`). `build/weft-topo --settings`\n"
	      "prints the same table as text, `--format json` as JSON\n"
	      "(`weft_settings_describe()` in `include/weft.h`).\n\n"
	      "A default of - means unset: the help says what happens then. Sizes take\n"
	      "K, M or G (powers of two) and digits only: no sign, hex or spaces. The\n"
	      "guides in this folder say when to change which.\n\n"
	      "| variable | default | what it does |\n"
	      "|---|---|---|\n",
	      out);
	json_array_foreach(json_object_get(doc, "settings"), i, s)
	{
		const char *def = json_string_value(json_object_get(s, "default"));
		fprintf(out, "| `%s` | ", weft_tool_str(s, "name"));
		if (def) {
			fputc('`', out);
			fputs(def, out);
			fputc('`', out);
		} else {
			fputc('-', out);
		}
		fputs(" | ", out);
		md_cell(weft_tool_str(s, "help"), out);
		fputs(" |\n", out);
	}
}

/* Text for roff: a backslash is \e, a hyphen \- (a minus that copies as
 * one, not a typographic hyphen: values such as 0-64K are typed), and
 * the line starts with \& so that a leading dot or quote is text. */
static void roff_text(const char *s, FILE *out)
{
	fputs("\\&", out);
	for (; *s; s++) {
		if (*s == '\\')
			fputs("\\e", out);
		else if (*s == '-')
			fputs("\\-", out);
		else if (*s == '\n')
			fputs("\n\\&", out);
		else
			fputc(*s, out);
	}
}

/* weft(7)'s ENVIRONMENT entries: a tagged paragraph per setting, in the
 * order the library declares them; the page around them is
 * docs/man/weft.7.in (make man puts them together). */
static void settings_man(const json_t *doc, FILE *out)
{
	size_t i;
	const json_t *s;
	fputs(".\\\" Generated by weft-topo --settings --format man from the declared settings.\n",
	      out);
	json_array_foreach(json_object_get(doc, "settings"), i, s)
	{
		const char *def = json_string_value(json_object_get(s, "default"));
		fprintf(out, ".TP\n.B %s\n", weft_tool_str(s, "name"));
		roff_text(weft_tool_str(s, "help"), out);
		fputc('\n', out);
		if (def) {
			fputs(".br\nDefault: \\fB", out);
			roff_text(def, out);
			fputs("\\fP.\n", out);
		}
	}
}

int weft_tool_print_settings(const char *json, enum weft_topo_format format, FILE *out)
{
	json_t *doc = weft_tool_parse(json, "the settings table");
	size_t i;
	const json_t *s;
	if (!doc)
		return 1;
	if (format == WEFT_TOPO_JSON) {
		weft_tool_write_json(doc, out);
		json_decref(doc);
		return 0;
	}
	if (format == WEFT_TOPO_MARKDOWN || format == WEFT_TOPO_MAN) {
		if (format == WEFT_TOPO_MARKDOWN)
			settings_markdown(doc, out);
		else
			settings_man(doc, out);
		json_decref(doc);
		return 0;
	}
	fprintf(out, "%-24s %-10s %s\n", "variable", "default", "help");
	json_array_foreach(json_object_get(doc, "settings"), i, s)
	{
		const char *def = json_string_value(json_object_get(s, "default"));
		fprintf(out, "%-24s %-10s %s\n", weft_tool_str(s, "name"), def ? def : "-",
			weft_tool_str(s, "help"));
	}
	json_decref(doc);
	return 0;
}
