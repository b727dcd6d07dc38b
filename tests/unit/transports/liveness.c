/*
 * liveness.c — the liveness listener and probes (transports/common/
 * tp_liveness.c) in one process: two or three ranks' weft_live side by
 * side on loopback, each served or left busy as the case needs.
 *  - a probe says a live peer is alive (even one too busy to serve its
 *    listener: the kernel answers for it) and a closed one gone;
 *  - strangers at the listener (silent, garbage, a wrong key) are held to
 *    WEFT_MAX_PENDING handshakes, a peer's probe still gets in, and a
 *    probe the crowded door drops is made again, never taken for a death;
 *  - a probe that meets a listener with another key says the peer gone.
 */
#include <check.h>
#include <dirent.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "stranger.h"
#include "transports/common/tp_liveness.h"
#include "util/auth.h"

#define NR 3

static const unsigned char comm_id[WEFT_HS_ID_BYTES] = {9, 8, 7};

struct rank {
	struct weft_tp_env env;
	struct weft_key key;
	struct weft_live live;
	struct weft_live_card card;
};

static void rank_open(struct rank *r, int rank, uint64_t key)
{
	memset(r, 0, sizeof(*r));
	weft_key_from_u64(&r->key, key);
	r->env = (struct weft_tp_env){
	    .rank = rank, .nranks = NR, .key = &r->key, .id = comm_id, .timeout_s = 10};
	weft_live_open(&r->live, &r->env, &r->card);
	ck_assert_uint_gt(r->card.len, 0);
}

static unsigned port_of(const struct rank *r)
{
	return ntohs(((const struct sockaddr_in *)&r->card.addr)->sin_port);
}

/* Rank @p a checks @p b until the answer is not UNKNOWN (or 3 s), serving
 * @p b's listener in between unless @p busy. */
static enum weft_live_state check(struct rank *a, struct rank *b, bool busy, char *why, size_t len)
{
	enum weft_live_state st = WEFT_LIVE_UNKNOWN;
	for (double t0 = harness_now(); harness_now() - t0 < 3.0;) {
		st = weft_live_check(&a->live, b->env.rank, &b->card, 2.0, why, len);
		if (st != WEFT_LIVE_UNKNOWN)
			break;
		if (!busy)
			weft_live_serve(&b->live);
		usleep(2000);
	}
	return st;
}

/* Serve @p b and check it from @p a until a's probe is admitted. */
static bool admitted(struct rank *a, struct rank *b)
{
	char why[256];
	for (double t0 = harness_now(); harness_now() - t0 < 3.0; usleep(2000)) {
		weft_live_serve(&b->live);
		enum weft_live_state st =
		    weft_live_check(&a->live, b->env.rank, &b->card, 2.0, why, sizeof(why));
		ck_assert_msg(st != WEFT_LIVE_GONE, "a live peer taken for gone: %s", why);
		if (a->live.fds[b->env.rank] >= 0 && !a->live.probe[b->env.rank] &&
		    b->live.held[a->env.rank] >= 0)
			return true;
	}
	return false;
}

START_TEST(alive_busy_and_gone)
{
	struct rank a, b;
	char why[256] = "";
	rank_open(&a, 0, 1);
	rank_open(&b, 1, 1);
	/* b never serves: its kernel still answers for it */
	ck_assert_int_eq(check(&a, &b, true, why, sizeof(why)), WEFT_LIVE_ALIVE);
	ck_assert_msg(admitted(&a, &b), "the probe was never admitted");
	weft_live_close(&b.live);
	ck_assert_int_eq(check(&a, &b, true, why, sizeof(why)), WEFT_LIVE_GONE);
	ck_assert_msg(strstr(why, "closed") || strstr(why, "reset") || strstr(why, "refuses"), "%s",
		      why);
	weft_live_fini(&a.live);
	weft_live_fini(&b.live);
}
END_TEST

START_TEST(strangers_are_bounded)
{
	setenv("WEFT_MAX_PENDING", "8", 1);
	struct rank a, b;
	rank_open(&a, 0, 1);
	rank_open(&b, 1, 1);
	unsetenv("WEFT_MAX_PENDING");
	int fds[300], n = 0;
	for (int i = 0; i < 300; i++) {
		enum stranger_kind k = i % 3 == 0   ? STRANGER_SILENT
				       : i % 3 == 1 ? STRANGER_GARBAGE
						    : STRANGER_SILENT;
		int fd = stranger_dial(port_of(&b), k, WEFT_HS_LIVE, comm_id, 0, 1, NULL, 0);
		if (fd >= 0)
			fds[n++] = fd;
		weft_live_serve(&b.live);
		b.live.served = 0; /* serve every time here, not every 10 ms */
		ck_assert_int_le(b.live.ndoor, 8);
	}
	ck_assert_int_ge(n, 250);
	/* a's probe gets in through the crowd (dropped ones are made again) */
	ck_assert_msg(admitted(&a, &b), "the probe was never admitted past the strangers");
	int held = 0;
	for (int r = 0; r < NR; r++)
		held += b.live.held[r] >= 0;
	ck_assert_int_eq(held, 1);
	ck_assert_uint_gt(b.live.dropped, 200);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	weft_live_fini(&a.live);
	weft_live_fini(&b.live);
}
END_TEST

START_TEST(crowded_door_is_not_a_death)
{
	setenv("WEFT_MAX_PENDING", "1", 1);
	struct rank a, b;
	rank_open(&a, 0, 1);
	rank_open(&b, 1, 1);
	unsetenv("WEFT_MAX_PENDING");
	char why[256];
	int fds[200], n = 0;
	for (int i = 0; i < 200; i++) {
		int fd = stranger_dial(port_of(&b), STRANGER_SILENT, WEFT_HS_LIVE, comm_id, 0, 1,
				       NULL, 0);
		if (fd >= 0)
			fds[n++] = fd;
		b.live.served = 0;
		weft_live_serve(&b.live);
		enum weft_live_state st =
		    weft_live_check(&a.live, 1, &b.card, 2.0, why, sizeof(why));
		ck_assert_msg(st != WEFT_LIVE_GONE, "check %d: a live peer taken for gone: %s", i,
			      why);
	}
	for (int i = 0; i < n; i++)
		close(fds[i]);
	weft_live_fini(&a.live);
	weft_live_fini(&b.live);
}
END_TEST

START_TEST(another_key_is_gone)
{
	struct rank a, b;
	char why[256] = "";
	rank_open(&a, 0, 1);
	rank_open(&b, 1, 2); /* the same port's owner holds another key */
	ck_assert_int_eq(check(&a, &b, false, why, sizeof(why)), WEFT_LIVE_ALIVE);
	enum weft_live_state st = WEFT_LIVE_ALIVE;
	for (double t0 = harness_now(); st != WEFT_LIVE_GONE && harness_now() - t0 < 3.0;) {
		weft_live_serve(&b.live);
		st = weft_live_check(&a.live, 1, &b.card, 2.0, why, sizeof(why));
		usleep(2000);
	}
	ck_assert_int_eq(st, WEFT_LIVE_GONE);
	ck_assert_msg(strstr(why, "failed authentication"), "%s", why);
	ck_assert_int_eq(b.live.held[0], -1);
	weft_live_fini(&a.live);
	weft_live_fini(&b.live);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("liveness");
	TCase *tc = tcase_create("liveness");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, alive_busy_and_gone);
	tcase_add_test(tc, strangers_are_bounded);
	tcase_add_test(tc, crowded_door_is_not_a_death);
	tcase_add_test(tc, another_key_is_gone);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
