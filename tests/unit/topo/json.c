/*
 * json.c — Weft's JSON topology files (WEFT_TOPO_FILE) as jansson
 * reads them: names with escapes and UTF-8, the host-id rules for hostnames
 * that several hosts share, syntax errors named by line and column, depth
 * bounded, content errors named by member. The fixtures and the dump's
 * round trip are in topo.c; a real job's description read back is in
 * unit/api/describe.c.
 */
#include <check.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "topo/topo.h"

static void expect_host(const struct weft_topo_file *f, const char *host, const char *leaf,
			const char *spine)
{
	char l[WEFT_TOPO_NAME_BYTES], s[WEFT_TOPO_NAME_BYTES];
	bool found = weft_topo_file_lookup(f, host, l, sizeof(l), s, sizeof(s));
	if (!leaf) {
		ck_assert_msg(!found, "%s found under %s", host, l);
		return;
	}
	ck_assert_msg(found, "%s not found", host);
	ck_assert_str_eq(l, leaf);
	ck_assert_str_eq(s, spine);
}

/* Write @p text to a fresh file; its path is in @p path (PATH_MAX bytes). */
static void write_temp(char *path, const char *text)
{
	snprintf(path, PATH_MAX, "/tmp/weft_topo_XXXXXX");
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	FILE *fp = fdopen(fd, "w");
	ck_assert_ptr_nonnull(fp);
	fputs(text, fp);
	ck_assert_int_eq(fclose(fp), 0);
}

/* Names with escapes and UTF-8 come through as the bytes they stand for;
 * members the reader does not know may hold anything. */
START_TEST(test_json_names)
{
	char path[PATH_MAX];
	struct weft_topo_file *f;
	struct weft_err err = {0};

	write_temp(path,
		   "{\"ranks\": [\n"
		   " {\"hostname\": \"caf\\u00e9\", \"leaf\": \"l\\u00e9af \\ud83d\\ude00\","
		   "  \"spine\": \"s\\/1\", \"extra\": {\"deep\": [[[null]]]}, \"n\": 1.5e3},\n"
		   " {\"hostname\": \"tab\\there\", \"leaf\": \"x\\\"y\\\\z\"}\n"
		   "], \"more\": [true, false, null, -0.0, \"\\b\\f\\n\\r\\t\"]}\n");
	ck_assert_msg(weft_topo_file_load(path, &f, &err) == WEFT_SUCCESS, "%s", err.msg);
	expect_host(f, "caf\xc3\xa9",
		    "l\xc3\xa9"
		    "af \xf0\x9f\x98\x80",
		    "s/1");
	expect_host(f, "tab\there", "x\"y\\z", "");
	weft_topo_file_free(f);
	unlink(path);
}
END_TEST

/* Namespaces of one machine as hosts: one hostname, several host ids under
 * different leaves. The hostname then names no host; each host id names its
 * own. A hostname with one host id names it, and so does the id. */
START_TEST(test_json_shared_hostname)
{
	char path[PATH_MAX];
	struct weft_topo_file *f;
	struct weft_err err = {0};

	write_temp(path, "{\"ranks\": [\n"
			 " {\"hostname\": \"vm\", \"host\": \"ns1\", \"leaf\": \"leaf1\"},\n"
			 " {\"hostname\": \"vm\", \"host\": \"ns2\", \"leaf\": \"leaf2\"},\n"
			 " {\"hostname\": \"vm\", \"host\": \"ns1\", \"leaf\": \"leaf1\"},\n"
			 " {\"hostname\": \"solo\", \"host\": \"solo/boot/net:1\", \"leaf\": "
			 "\"leaf3\", \"spine\": \"sp\"}\n"
			 "]}\n");
	ck_assert_msg(weft_topo_file_load(path, &f, &err) == WEFT_SUCCESS, "%s", err.msg);
	expect_host(f, "vm", NULL, NULL);
	expect_host(f, "ns1", "leaf1", "");
	expect_host(f, "ns2", "leaf2", "");
	expect_host(f, "solo", "leaf3", "sp");
	expect_host(f, "solo/boot/net:1", "leaf3", "sp");
	weft_topo_file_free(f);
	unlink(path);

	/* One host id under two leaves is still a contradiction. */
	write_temp(path,
		   "{\"ranks\": [{\"hostname\": \"vm\", \"host\": \"ns1\", \"leaf\": \"a\"},\n"
		   " {\"hostname\": \"vm2\", \"host\": \"ns1\", \"leaf\": \"b\"}]}\n");
	f = (void *)1;
	ck_assert_int_eq(weft_topo_file_load(path, &f, &err), WEFT_ERR_INVALID_ARG);
	ck_assert_ptr_null(f);
	ck_assert_msg(strstr(err.msg, "host ns1 is under leaf"), "%s", err.msg);
	unlink(path);
}
END_TEST

/* Bad JSON: the message names the file, jansson's line and column and what
 * it found. Nothing here reaches the reader's own checks. */
START_TEST(test_json_syntax)
{
	static const struct {
		const char *text;
		int line, column;
		const char *says;
	} cases[] = {
	    {"{", 1, 1, "expected near end of file"},
	    {"{\"ranks\": [1,\n2,\n]}", 3, 1, "unexpected token near ']'"},
	    {"{\"a\":1,}", 1, 8, "string or '}' expected near '}'"},
	    {"{\"a\" 1}", 1, 6, "':' expected near '1'"},
	    {"{a: 1}", 1, 2, "string or '}' expected near 'a'"},
	    {"{\"a\": [01]}", 1, 8, "invalid token"},
	    {"{\"a\": [1.]}", 1, 9, "invalid token near '1.'"},
	    {"{\"a\": [tru]}", 1, 10, "invalid token near 'tru'"},
	    {"{\"a\": \"a\nb\"}", 1, 8, "unexpected newline"},
	    {"{\"a\": \"a\tb\"}", 1, 8, "control character 0x9"},
	    {"{\"a\": \"\\x\"}", 1, 9, "invalid escape"},
	    {"{\"a\": \"\\u0000\"}", 1, 14, "\\u0000 is not allowed"},
	    {"{\"a\": \"\\ud800\"}", 1, 14, "invalid Unicode"},
	    {"{\"a\": \"\xc3\x28\"}", 1, 7, "unable to decode byte 0xc3"},
	    {"{\"a\": \"\xc0\xaf\"}", 1, 7, "unable to decode byte 0xc0"},
	    {"{} {}", 1, 4, "end of file expected near '{'"},
	    {"\n\n{\"k\": 1, \"k\": 2}", 3, 12, "duplicate object key near '\"k\"'"},
	    {"{\"a\": 1}\n// comment", 2, 1, "end of file expected near '/'"},
	};
	char path[PATH_MAX], where[PATH_MAX + 32];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct weft_topo_file *f = (void *)1;
		struct weft_err err = {0};
		write_temp(path, cases[i].text);
		weft_status_t st = weft_topo_file_load(path, &f, &err);
		unlink(path);
		ck_assert_msg(st == WEFT_ERR_INVALID_ARG, "case %zu: status %d", i, st);
		ck_assert_ptr_null(f);
		snprintf(where, sizeof(where), "%s:%d:%d: ", path, cases[i].line, cases[i].column);
		ck_assert_msg(strstr(err.msg, where) && strstr(err.msg, cases[i].says),
			      "case %zu: \"%s\", expected \"%s\" and \"%s\"", i, err.msg, where,
			      cases[i].says);
	}
}
END_TEST

/* Deep nesting is bounded (jansson stops at 2048 levels) and named. */
START_TEST(test_json_depth)
{
	static char text[2 * 3000 + 64];
	char path[PATH_MAX];
	struct weft_topo_file *f;
	struct weft_err err = {0};

	for (int depth = 100; depth <= 3000; depth += 2900) {
		int n = snprintf(text, sizeof(text), "{\"x\": ");
		memset(text + n, '[', (size_t)depth);
		memset(text + n + depth, ']', (size_t)depth);
		snprintf(text + n + 2 * depth, sizeof(text) - (size_t)(n + 2 * depth),
			 ", \"ranks\": [{\"hostname\": \"h\", \"leaf\": \"l\"}]}");
		write_temp(path, text);
		weft_status_t st = weft_topo_file_load(path, &f, &err);
		unlink(path);
		if (depth == 100) {
			ck_assert_msg(st == WEFT_SUCCESS, "depth %d: %s", depth, err.msg);
			expect_host(f, "h", "l", "");
			weft_topo_file_free(f);
		} else {
			ck_assert_int_eq(st, WEFT_ERR_INVALID_ARG);
			ck_assert_msg(strstr(err.msg, "maximum parsing depth"), "%s", err.msg);
		}
	}
}
END_TEST

/* Content the reader cannot use, named by member. */
START_TEST(test_json_content)
{
	static const struct {
		const char *text;
		const char *says;
	} cases[] = {
	    {"{\"ring\": {}}", ": no \"ranks\" array"},
	    {"{\"ranks\": [7]}", ": ranks[0] must be an object, not number"},
	    {"{\"ranks\": [{\"hostname\": \"h\", \"leaf\": \"l\"}, {\"leaf\": \"l\"}]}",
	     ": ranks[1] has neither \"hostname\" nor \"host\""},
	    {"{\"ranks\": [{\"hostname\": [], \"leaf\": \"l\"}]}",
	     ": ranks[0]: \"hostname\" must be a string, not array"},
	    {"{\"ranks\": [{\"hostname\": \"h\", \"leaf\": \"l\", \"spine\": true}]}",
	     ": ranks[0]: \"spine\" must be a string, not boolean"},
	    {"{\"ranks\": [{\"hostname\": \"h\", \"leaf\": \"l\", \"leaf_source\": \"none\"}]}",
	     ": the file names no hosts (no rank in it has a leaf learned"},
	};
	char path[PATH_MAX], want[PATH_MAX + 128];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct weft_topo_file *f = (void *)1;
		struct weft_err err = {0};
		write_temp(path, cases[i].text);
		weft_status_t st = weft_topo_file_load(path, &f, &err);
		unlink(path);
		ck_assert_msg(st == WEFT_ERR_INVALID_ARG, "case %zu: status %d", i, st);
		ck_assert_ptr_null(f);
		snprintf(want, sizeof(want), "%s%s", path, cases[i].says);
		ck_assert_msg(strstr(err.msg, want), "case %zu: \"%s\", expected \"%s\"", i,
			      err.msg, want);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("topo_json");
	TCase *tc = tcase_create("json");
	tcase_add_test(tc, test_json_names);
	tcase_add_test(tc, test_json_shared_hostname);
	tcase_add_test(tc, test_json_syntax);
	tcase_add_test(tc, test_json_depth);
	tcase_add_test(tc, test_json_content);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
