/* watch_double.h — a watch without its socket or thread, for the tests and
 * fuzz targets that hand it datagrams themselves: WATCH_DOUBLE_RANKS ranks
 * at loopback addresses (port 40000 + rank), its view zeroed, a fixed key
 * and communicator id, replies sent nowhere (fd -1). Header-only: the fuzz
 * targets link no test library. */
#ifndef WEFT_TEST_WATCH_DOUBLE_H
#define WEFT_TEST_WATCH_DOUBLE_H

#include <netinet/in.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>

#include "core/watch_int.h"

#define WATCH_DOUBLE_RANKS 4

static struct sockaddr_storage watch_double_addrs[WATCH_DOUBLE_RANKS];
static socklen_t watch_double_lens[WATCH_DOUBLE_RANKS];
static struct watch_view watch_double_view[WATCH_DOUBLE_RANKS];

/* The address rank @p rank sends from (any rank number: one past the job's
 * is a stranger's). */
static inline void watch_double_address(struct sockaddr_storage *ss, int rank)
{
	struct sockaddr_in *a = (struct sockaddr_in *)ss;
	memset(ss, 0, sizeof(*ss));
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)(40000 + rank));
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
}

/* @p w as rank @p me sees the job, afresh (the view and addresses reset). */
static inline void watch_double_init(struct weft_watch *w, int me)
{
	*w = (struct weft_watch){.fd = -1,
				 .rank = me,
				 .nranks = WATCH_DOUBLE_RANKS,
				 .comm_id = 0x1122334455667788ull,
				 .addrs = watch_double_addrs,
				 .lens = watch_double_lens,
				 .view = watch_double_view};
	weft_key_from_u64(&w->key, 0xa5a5a5a5a5a5a5a5ull);
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->changed, NULL);
	memset(watch_double_view, 0, sizeof(watch_double_view));
	for (int r = 0; r < WATCH_DOUBLE_RANKS; r++) {
		watch_double_address(&watch_double_addrs[r], r);
		watch_double_lens[r] = sizeof(struct sockaddr_in);
	}
}

#endif
