/*
 * watch_silence.c — the watch's answer to a transport that can reach a
 * peer on no path (core/watch.c, watch_silence; env->peer_silence): for
 * how long the watch has asked the peer and heard nothing. On a watch
 * double (tests/lib/watch_double.h: no socket, queries sent nowhere) whose
 * datagrams the test hands in itself.
 *
 * Cases: a peer not heard lately is asked at once and is not silent yet
 * (0); unanswered, its silence grows from that first question, and a
 * question goes again at most every 100 ms; any authenticated datagram
 * from it (a reply, a heartbeat) ends the silence; a peer heard within the
 * last 100 ms is not asked; a datagram from another rank does not count.
 */
#include <check.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/watch_int.h"
#include "tests/lib/watch_double.h"
#include "util/clock.h"

static uint64_t seq_of[WATCH_DOUBLE_RANKS];

/* A datagram of @p type from @p from, as its watch would send it. */
static void hear(struct weft_watch *w, int from, uint32_t type)
{
	struct watch_msg m = {.magic = WATCH_MAGIC,
			      .comm_id = w->comm_id,
			      .seq = ++seq_of[from],
			      .type = type,
			      .rank = from};
	weft_mac(&w->key, &m, offsetof(struct watch_msg, mac), m.mac);
	watch_take(w, &m, sizeof(m), &watch_double_addrs[from]);
}

START_TEST(test_silence)
{
	struct weft_watch w;
	watch_double_init(&w, 0);
	memset(seq_of, 0, sizeof(seq_of));
	double t = weft_now();
	/* never heard: asked now, not silent yet */
	ck_assert(watch_silence(&w, 1, t) == 0);
	ck_assert(w.view[1].asked > 0);
	ck_assert(w.view[1].silence_asked == t);
	/* unanswered: silence from the first question; asked again only
	 * after 100 ms */
	ck_assert(watch_silence(&w, 1, t + 0.05) >= 0.04);
	ck_assert(w.view[1].silence_asked == t);
	double later = watch_silence(&w, 1, t + 0.5);
	ck_assert_msg(later > 0.4 && later < 0.6, "silent %.3f s after 0.5 s unanswered", later);
	ck_assert(w.view[1].silence_asked == t + 0.5);
	/* another rank's datagram says nothing of rank 1 */
	hear(&w, 2, WATCH_HEARTBEAT);
	ck_assert(watch_silence(&w, 1, t + 0.55) > 0.4);
	/* its reply ends the silence */
	hear(&w, 1, WATCH_REPLY);
	double now = weft_now();
	double s = watch_silence(&w, 1, now + 0.01);
	ck_assert_msg(s >= 0 && s < 0.05, "silent %.3f s just after a reply", s);
	ck_assert(w.view[1].asked == 0); /* heard 10 ms ago: not asked */
	/* a heartbeat counts as well: heard, then unheard for 0.7 s (and
	 * not asked for 0.2 s): asked again */
	hear(&w, 1, WATCH_HEARTBEAT);
	now = weft_now();
	ck_assert(watch_silence(&w, 1, now + 0.7) >= 0);
	ck_assert(w.view[1].asked > 0);
	/* not a peer */
	ck_assert(watch_silence(&w, 0, now) < 0);
	ck_assert(watch_silence(&w, WATCH_DOUBLE_RANKS, now) < 0);
	ck_assert(watch_silence(&w, -1, now) < 0);
	pthread_mutex_destroy(&w.lock);
	pthread_cond_destroy(&w.changed);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("watch_silence");
	TCase *tc = tcase_create("silence");
	tcase_add_test(tc, test_silence);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
