/* agree.c — the shrink's agreement on the wire (agree_int.h): its
 * datagrams, checked and authenticated as the watch's are, and the
 * acceptor that answers them in the watch's thread. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/watch_int.h"
#include "health/agree_int.h"
#include "util/clock.h"

struct weft_agree *weft_agree_new(struct weft_watch *w)
{
	struct weft_agree *ag = calloc(1, sizeof(*ag));
	if (!ag)
		return NULL;
	agree_acceptor_init(&ag->acc, w->rank);
	ag->tx = malloc(AGREE_DATAGRAM_MAX);
	ag->rxval = malloc(sizeof(struct agree_blob) + AGREE_VALUE_MAX);
	if (ag->tx && ag->rxval)
		return ag;
	weft_agree_free(ag);
	return NULL;
}

void weft_agree_free(struct weft_agree *ag)
{
	if (!ag)
		return;
	agree_acceptor_free(&ag->acc);
	free(ag->tx);
	free(ag->rxval);
	free(ag);
}

/* The types whose sender waits for an answer from the receiver. */
static bool asks(uint32_t type)
{
	return type == AGREE_PREPARE || type == AGREE_ACCEPT || type == AGREE_LEARN;
}

void weft_agree_send(struct weft_watch *w, int to, const struct agree_msg *m, unsigned char *buf)
{
	struct agree_wire h = {
	    .magic = AGREE_MAGIC,
	    .comm_id = w->comm_id,
	    .seq = atomic_fetch_add(&w->seq, 1) + 1,
	    .type = m->type,
	    .rank = w->rank,
	    .instance = m->instance,
	    .ballot = m->ballot,
	    .acc_ballot = m->acc_ballot,
	    .excl_hash = m->excl_hash,
	    .value_len = m->value ? m->value->len : 0,
	    .pad = m->flags,
	};
	if (h.value_len > AGREE_VALUE_MAX)
		return;
	memcpy(buf, &h, sizeof(h));
	if (h.value_len)
		memcpy(buf + sizeof(h), m->value->bytes, h.value_len);
	size_t len = sizeof(h) + h.value_len;
	weft_mac(&w->key, buf, len, buf + len);
	if (asks(m->type))
		watch_asked(w, to, weft_now());
	watch_sendto(w, to, buf, len + WEFT_MAC_BYTES);
}

/* Which types carry a value, and must. */
static bool value_expected(uint32_t type, uint64_t acc_ballot)
{
	return type == AGREE_ACCEPT || type == AGREE_DECIDE ||
	       (type == AGREE_PROMISE && acc_ballot != 0);
}

/* Everything but the sequence: size, magic, communicator, sender and its
 * address, MAC, type, and the value's form. */
static bool wire_ok(struct weft_watch *w, const unsigned char *buf, ssize_t len,
		    const struct sockaddr_storage *from, struct agree_wire *h)
{
	if (len < (ssize_t)(sizeof(*h) + WEFT_MAC_BYTES) || len > (ssize_t)AGREE_DATAGRAM_MAX)
		return false;
	memcpy(h, buf, sizeof(*h));
	size_t body = sizeof(*h) + h->value_len;
	if (h->magic != AGREE_MAGIC || h->comm_id != w->comm_id || h->value_len > AGREE_VALUE_MAX ||
	    (size_t)len != body + WEFT_MAC_BYTES || !watch_from_rank(w, h->rank, from))
		return false;
	unsigned char mac[WEFT_MAC_BYTES];
	weft_mac(&w->key, buf, body, mac);
	if (!weft_mac_equal(mac, buf + body))
		return false;
	if (h->type < AGREE_PREPARE || h->type >= AGREE_TYPE_END ||
	    value_expected(h->type, h->acc_ballot) != (h->value_len != 0))
		return false;
	return true;
}

/* With w->lock held: the datagram is newer than any taken from its rank. */
static bool fresh(struct weft_watch *w, const struct agree_wire *h)
{
	struct watch_view *v = &w->view[h->rank];
	if (h->seq <= v->last_seq)
		return false;
	v->last_seq = h->seq;
	v->heard = weft_now();
	v->asked = 0;
	return true;
}

static void dispatch(struct weft_watch *w, const struct agree_msg *m)
{
	struct weft_agree *ag = agree_of(w);
	struct agree_msg out;
	switch (m->type) {
	case AGREE_PROMISE:
	case AGREE_ACCEPTED:
	case AGREE_NACK:
	case AGREE_NOT_JOINED:
		if (ag->prop)
			agree_proposer_take(ag->prop, m);
		return;
	case AGREE_PENDING: return; /* alive: fresh() noted it */
	default:
		if (agree_acceptor_take(&ag->acc, m, &out))
			weft_agree_send(w, m->from, &out, ag->tx);
	}
}

void weft_agree_take(struct weft_watch *w, const unsigned char *buf, ssize_t len,
		     const struct sockaddr_storage *from)
{
	struct agree_wire h;
	struct weft_agree *ag = agree_of(w);
	if (!ag || !wire_ok(w, buf, len, from, &h)) {
		w->dropped++;
		return;
	}
	struct agree_msg m = {.type = h.type,
			      .flags = h.pad,
			      .from = h.rank,
			      .instance = h.instance,
			      .ballot = h.ballot,
			      .acc_ballot = h.acc_ballot,
			      .excl_hash = h.excl_hash};
	if (h.value_len) {
		ag->rxval->len = h.value_len;
		memcpy(ag->rxval->bytes, buf + sizeof(h), h.value_len);
		if (!agree_blob_valid(ag->rxval, w->nranks)) {
			w->dropped++;
			return;
		}
		m.value = ag->rxval;
	}
	pthread_mutex_lock(&w->lock);
	if (!fresh(w, &h)) {
		pthread_mutex_unlock(&w->lock);
		w->dropped++;
		return;
	}
	dispatch(w, &m);
	pthread_cond_broadcast(&w->changed);
	pthread_mutex_unlock(&w->lock);
}

static bool serve_take(void *ctx, struct weft_watch *w, const unsigned char *buf, ssize_t len,
		       const struct sockaddr_storage *from)
{
	weft_agree_take(w, buf, len, from); /* the last to look: what it refuses is dropped */
	return true;
}

static void serve_fini(void *ctx)
{
	weft_agree_free(ctx);
}

const struct weft_watch_service weft_agree_watch = {
    .size = sizeof(struct weft_watch_service),
    .name = "the shrink's agreement",
    .take = serve_take,
    .fini = serve_fini,
};
