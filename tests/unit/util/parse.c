/*
 * parse.c — the size parser and the list splitter (util/parse.c):
 * every accepted form, every refused one with the reason it gives, the
 * bounds, and the messages that name the variable and the item.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/parse.h"

struct size_case {
	const char *text;
	uint64_t max;
	unsigned flags;
	uint64_t want;
};

static const struct size_case good_sizes[] = {
    {"0", UINT64_MAX, 0, 0},
    {"1", UINT64_MAX, 0, 1},
    {"007", UINT64_MAX, 0, 7},
    {"4096", UINT64_MAX, 0, 4096},
    {"1k", UINT64_MAX, 0, 1024},
    {"64K", UINT64_MAX, 0, 64 << 10},
    {"3m", UINT64_MAX, 0, 3 << 20},
    {"512M", UINT64_MAX, 0, 512ull << 20},
    {"2g", UINT64_MAX, 0, 2ull << 30},
    {"2G", UINT64_MAX, 0, 2ull << 30},
    {"0K", UINT64_MAX, 0, 0},
    {"18446744073709551615", UINT64_MAX, 0, UINT64_MAX},
    {"17179869183G", UINT64_MAX, 0, 17179869183ull << 30},
    {"100", 100, 0, 100},
    {"1K", 1024, 0, 1024},
    {"inf", 1234, WEFT_PARSE_INF, 1234},
    {"INF", UINT64_MAX, WEFT_PARSE_INF, UINT64_MAX},
    {"Inf", SIZE_MAX, WEFT_PARSE_INF, SIZE_MAX},
    {"64KB", UINT64_MAX, WEFT_PARSE_B_SUFFIX, 64 << 10},
    {"1mb", UINT64_MAX, WEFT_PARSE_B_SUFFIX, 1 << 20},
    {"8B", UINT64_MAX, WEFT_PARSE_B_SUFFIX, 8},
    {"8", UINT64_MAX, WEFT_PARSE_B_SUFFIX, 8},
    {"42", 42, WEFT_PARSE_NO_SUFFIX, 42},
    {"65535", 65535, WEFT_PARSE_NO_SUFFIX, 65535},
};

START_TEST(size_good)
{
	const struct size_case *c = &good_sizes[_i];
	uint64_t v = 99;
	enum weft_parse_fault fault = 0;
	ck_assert_msg(weft_parse_size(c->text, c->max, c->flags, &v, &fault) == WEFT_SUCCESS,
		      "'%s' (flags %u) refused: %s", c->text, c->flags,
		      weft_parse_fault_text(fault));
	ck_assert_msg(v == c->want, "'%s' gave %llu, want %llu", c->text, (unsigned long long)v,
		      (unsigned long long)c->want);
	/* The fault pointer is optional. */
	ck_assert_int_eq(weft_parse_size(c->text, c->max, c->flags, &v, NULL), WEFT_SUCCESS);
}
END_TEST

struct bad_size {
	const char *text;
	uint64_t max;
	unsigned flags;
	enum weft_parse_fault fault;
};

static const struct bad_size bad_sizes[] = {
    {"", UINT64_MAX, 0, WEFT_PARSE_MALFORMED},
    {NULL, UINT64_MAX, 0, WEFT_PARSE_MALFORMED},
    {" 1", UINT64_MAX, 0, WEFT_PARSE_MALFORMED},
    {"1 ", UINT64_MAX, 0, WEFT_PARSE_MALFORMED},
    {"\t1", UINT64_MAX, 0, WEFT_PARSE_MALFORMED},
    {"+1", UINT64_MAX, 0, WEFT_PARSE_MALFORMED},
    {"-1", UINT64_MAX, 0, WEFT_PARSE_MALFORMED},
    {"-0", UINT64_MAX, 0, WEFT_PARSE_MALFORMED},
    {"0x10", UINT64_MAX, 0, WEFT_PARSE_MALFORMED},
    {"1.5K", UINT64_MAX, 0, WEFT_PARSE_MALFORMED},
    {"1e3", UINT64_MAX, 0, WEFT_PARSE_MALFORMED},
    {"K", UINT64_MAX, 0, WEFT_PARSE_MALFORMED},
    {"1KK", UINT64_MAX, 0, WEFT_PARSE_MALFORMED},
    {"1T", UINT64_MAX, 0, WEFT_PARSE_MALFORMED},
    {"1KiB", UINT64_MAX, WEFT_PARSE_B_SUFFIX, WEFT_PARSE_MALFORMED},
    {"64KB", UINT64_MAX, 0, WEFT_PARSE_MALFORMED},
    {"8B", UINT64_MAX, 0, WEFT_PARSE_MALFORMED},
    {"8BB", UINT64_MAX, WEFT_PARSE_B_SUFFIX, WEFT_PARSE_MALFORMED},
    {"B", UINT64_MAX, WEFT_PARSE_B_SUFFIX, WEFT_PARSE_MALFORMED},
    {"inf", UINT64_MAX, 0, WEFT_PARSE_MALFORMED},
    {"infinity", UINT64_MAX, WEFT_PARSE_INF, WEFT_PARSE_MALFORMED},
    {"1K", UINT64_MAX, WEFT_PARSE_NO_SUFFIX, WEFT_PARSE_MALFORMED},
    {"1k", 4096, WEFT_PARSE_NO_SUFFIX, WEFT_PARSE_MALFORMED},
    {"12abc", UINT64_MAX, 0, WEFT_PARSE_MALFORMED},
    /* Well formed but too large: for 64 bits, or for the caller's bound. */
    {"18446744073709551616", UINT64_MAX, 0, WEFT_PARSE_TOO_LARGE},
    {"99999999999999999999999", UINT64_MAX, 0, WEFT_PARSE_TOO_LARGE},
    {"17179869184G", UINT64_MAX, 0, WEFT_PARSE_TOO_LARGE},
    {"16777216T", UINT64_MAX, 0, WEFT_PARSE_MALFORMED},
    {"101", 100, 0, WEFT_PARSE_TOO_LARGE},
    {"1K", 1023, 0, WEFT_PARSE_TOO_LARGE},
    {"2G", INT32_MAX, 0, WEFT_PARSE_TOO_LARGE},
    {"65536", 65535, WEFT_PARSE_NO_SUFFIX, WEFT_PARSE_TOO_LARGE},
    {"1", 0, 0, WEFT_PARSE_TOO_LARGE},
};

START_TEST(size_bad)
{
	const struct bad_size *c = &bad_sizes[_i];
	uint64_t v = 99;
	enum weft_parse_fault fault = 0;
	weft_status_t st = weft_parse_size(c->text, c->max, c->flags, &v, &fault);
	ck_assert_msg(st == WEFT_ERR_INVALID_ARG, "'%s' (flags %u, max %llu) accepted as %llu",
		      c->text ? c->text : "(null)", c->flags, (unsigned long long)c->max,
		      (unsigned long long)v);
	ck_assert_msg(fault == c->fault, "'%s': fault %d, want %d", c->text ? c->text : "(null)",
		      (int)fault, (int)c->fault);
	ck_assert_msg(v == 99, "'%s': *out changed on failure", c->text ? c->text : "(null)");
	ck_assert_int_eq(weft_parse_size(c->text, c->max, c->flags, &v, NULL),
			 WEFT_ERR_INVALID_ARG);
}
END_TEST

START_TEST(size_fault_text)
{
	ck_assert_str_eq(weft_parse_fault_text(WEFT_PARSE_MALFORMED),
			 "a number with an optional K, M or G suffix");
	ck_assert_str_eq(weft_parse_fault_text(WEFT_PARSE_TOO_LARGE), "too large");
}
END_TEST

/* ---- lists ---- */

/* All items of @p text joined by '|', or the error message. */
static void collect(const char *text, char sep, char *out, size_t len)
{
	struct weft_list l;
	out[0] = '\0';
	weft_list_init(&l, "WEFT_X", text, sep);
	while (weft_list_next(&l)) {
		if (out[0])
			strncat(out, "|", len - strlen(out) - 1);
		strncat(out, l.item, len - strlen(out) - 1);
	}
	if (l.status != WEFT_SUCCESS)
		snprintf(out, len, "error: %s", l.msg);
}

struct list_case {
	const char *text;
	char sep;
	const char *want;
};

static const struct list_case lists[] = {
    {"a;b;c", ';', "a|b|c"},
    {"allreduce:ring", ';', "allreduce:ring"},
    {"a,b", ';', "a,b"},
    {"a,b", ',', "a|b"},
    {";a;;b;", ';', "a|b"},
    {";;;", ';', ""},
    {"", ';', ""},
    {NULL, ';', ""},
    {" a ; b ", ';', " a | b "}, /* items are not trimmed: callers refuse spaces */
    {"INIT,NET", ',', "INIT|NET"},
};

START_TEST(list_items)
{
	const struct list_case *c = &lists[_i];
	char got[WEFT_LIST_MSG_BYTES + 16];
	collect(c->text, c->sep, got, sizeof(got));
	ck_assert_msg(strcmp(got, c->want) == 0, "'%s' split at '%c': got '%s', want '%s'",
		      c->text ? c->text : "(null)", c->sep, got, c->want);
}
END_TEST

START_TEST(list_index_and_editing)
{
	struct weft_list l;
	weft_list_init(&l, "WEFT_X", "a:1;;b:2", ';');
	ck_assert(weft_list_next(&l));
	ck_assert_int_eq(l.index, 0);
	char *colon = strchr(l.item, ':');
	ck_assert_ptr_nonnull(colon);
	*colon = '\0'; /* the item is the caller's to cut up */
	ck_assert_str_eq(l.item, "a");
	ck_assert(weft_list_next(&l));
	ck_assert_int_eq(l.index, 1); /* empty items do not count */
	ck_assert_str_eq(l.item, "b:2");
	ck_assert(!weft_list_next(&l));
	ck_assert(!weft_list_next(&l)); /* stays at the end */
	ck_assert_int_eq(l.status, WEFT_SUCCESS);
	ck_assert_str_eq(l.msg, "");
}
END_TEST

START_TEST(list_longest_item)
{
	char text[2 * WEFT_LIST_ITEM_BYTES + 8];
	/* WEFT_LIST_ITEM_BYTES - 1 characters fit... */
	memset(text, 'x', WEFT_LIST_ITEM_BYTES - 1);
	strcpy(text + WEFT_LIST_ITEM_BYTES - 1, ";y");
	struct weft_list l;
	weft_list_init(&l, "WEFT_X", text, ';');
	ck_assert(weft_list_next(&l));
	ck_assert_uint_eq(strlen(l.item), WEFT_LIST_ITEM_BYTES - 1);
	ck_assert(weft_list_next(&l));
	ck_assert_str_eq(l.item, "y");
	ck_assert(!weft_list_next(&l));
	ck_assert_int_eq(l.status, WEFT_SUCCESS);

	/* ... one more is an error that names the variable and the item. */
	text[0] = 'y';
	text[1] = ';';
	memset(text + 2, 'z', WEFT_LIST_ITEM_BYTES);
	text[2 + WEFT_LIST_ITEM_BYTES] = '\0';
	weft_list_init(&l, "WEFT_TUNE", text, ';');
	ck_assert(weft_list_next(&l));
	ck_assert(!weft_list_next(&l));
	ck_assert_int_eq(l.status, WEFT_ERR_INVALID_ARG);
	ck_assert_msg(strncmp(l.msg, "WEFT_TUNE=y;zzz", 15) == 0, "%s", l.msg);
	ck_assert_msg(
	    strstr(l.msg, "item 2 'zzzzzzzzzzzzzzzzzzzz...' is longer than 255 characters"), "%s",
	    l.msg);
	ck_assert(!weft_list_next(&l));
}
END_TEST

START_TEST(list_fail_message)
{
	struct weft_list l;
	weft_list_init(&l, "WEFT_ALGO", "allreduce:ring;bogus", ';');
	ck_assert(weft_list_next(&l));
	ck_assert(weft_list_next(&l));
	ck_assert_int_eq(weft_list_fail(&l, "unknown collective '%s'", l.item),
			 WEFT_ERR_INVALID_ARG);
	ck_assert_str_eq(l.msg, "WEFT_ALGO=allreduce:ring;bogus: unknown collective 'bogus'");
	/* The first error is kept, and the iteration is over. */
	ck_assert_int_eq(weft_list_fail(&l, "second"), WEFT_ERR_INVALID_ARG);
	ck_assert_str_eq(l.msg, "WEFT_ALGO=allreduce:ring;bogus: unknown collective 'bogus'");
	ck_assert(!weft_list_next(&l));
}
END_TEST

START_TEST(list_fail_long_value)
{
	/* A value too long to quote whole is cut, and the reason still fits. */
	char text[2000];
	for (size_t i = 0; i + 1 < sizeof(text); i++)
		text[i] = (i % 10 == 9) ? ';' : 'a';
	text[sizeof(text) - 1] = '\0';
	struct weft_list l;
	weft_list_init(&l, "WEFT_X", text, ';');
	ck_assert(weft_list_next(&l));
	weft_list_fail(&l, "the reason '%s'", l.item);
	ck_assert_msg(strstr(l.msg, "...: the reason 'aaaaaaaaa'"), "%s", l.msg);
	ck_assert_uint_lt(strlen(l.msg), WEFT_LIST_MSG_BYTES);
}
END_TEST

START_TEST(list_inner)
{
	const char *spec = "allreduce:0-1K:rhd,1K-inf:ring;allgather:0-8:bruck,bad";
	struct weft_list outer, inner;
	weft_list_init(&outer, "WEFT_TUNE", spec, ';');
	ck_assert(weft_list_next(&outer));
	weft_list_init_inner(&inner, &outer, strchr(outer.item, ':') + 1, ',');
	ck_assert(weft_list_next(&inner));
	ck_assert_str_eq(inner.item, "0-1K:rhd");
	ck_assert(weft_list_next(&inner));
	ck_assert_str_eq(inner.item, "1K-inf:ring");
	ck_assert(!weft_list_next(&inner));
	ck_assert(weft_list_next(&outer));
	weft_list_init_inner(&inner, &outer, strchr(outer.item, ':') + 1, ',');
	ck_assert(weft_list_next(&inner));
	ck_assert(weft_list_next(&inner));
	ck_assert_str_eq(inner.item, "bad");
	weft_list_fail(&inner, "range '%s' is not lo-hi:algo", inner.item);
	/* The error lands in the outer list and quotes the whole value. */
	ck_assert_int_eq(outer.status, WEFT_ERR_INVALID_ARG);
	char want[256];
	snprintf(want, sizeof(want), "WEFT_TUNE=%s: range 'bad' is not lo-hi:algo", spec);
	ck_assert_str_eq(outer.msg, want);
	ck_assert(!weft_list_next(&outer));
}
END_TEST

static Suite *parse_suite(void)
{
	Suite *s = suite_create("parse");
	TCase *tc = tcase_create("size");
	tcase_add_loop_test(tc, size_good, 0, (int)(sizeof(good_sizes) / sizeof(good_sizes[0])));
	tcase_add_loop_test(tc, size_bad, 0, (int)(sizeof(bad_sizes) / sizeof(bad_sizes[0])));
	tcase_add_test(tc, size_fault_text);
	suite_add_tcase(s, tc);
	tc = tcase_create("list");
	tcase_add_loop_test(tc, list_items, 0, (int)(sizeof(lists) / sizeof(lists[0])));
	tcase_add_test(tc, list_index_and_editing);
	tcase_add_test(tc, list_longest_item);
	tcase_add_test(tc, list_fail_message);
	tcase_add_test(tc, list_fail_long_value);
	tcase_add_test(tc, list_inner);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(parse_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
