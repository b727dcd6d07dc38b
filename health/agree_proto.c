/* agree_proto.c — the agreement's acceptor and proposer (agree_proto.h
 * says what they do and why that is correct). */
#include "health/agree_proto.h"

#include <stdlib.h>
#include <string.h>

/* ---- values */

struct agree_blob *agree_blob_new(const struct agree_value_hdr *h, const uint32_t *excl)
{
	size_t words = h->kind == AGREE_MEMBERS ? h->nexcl : 0;
	size_t len = sizeof(*h) + words * sizeof(uint32_t);
	struct agree_blob *b = malloc(sizeof(*b) + len);
	if (!b)
		return NULL;
	b->len = (uint32_t)len;
	memcpy(b->bytes, h, sizeof(*h));
	if (words)
		memcpy(b->bytes + sizeof(*h), excl, words * sizeof(uint32_t));
	return b;
}

struct agree_blob *agree_blob_copy(const struct agree_blob *b)
{
	if (!b)
		return NULL;
	struct agree_blob *c = malloc(sizeof(*c) + b->len);
	if (c)
		memcpy(c, b, sizeof(*c) + b->len);
	return c;
}

bool agree_blob_equal(const struct agree_blob *a, const struct agree_blob *b)
{
	return a && b && a->len == b->len && memcmp(a->bytes, b->bytes, a->len) == 0;
}

const struct agree_value_hdr *agree_blob_hdr(const struct agree_blob *b)
{
	return (const struct agree_value_hdr *)(const void *)b->bytes;
}

const uint32_t *agree_blob_excl(const struct agree_blob *b)
{
	return (const uint32_t *)(const void *)(b->bytes + sizeof(struct agree_value_hdr));
}

weft_rank_failure_t agree_blob_left_out(const struct agree_blob *b, int rank)
{
	const struct agree_value_hdr *h = agree_blob_hdr(b);
	const uint32_t *x = agree_blob_excl(b);
	size_t lo = 0, hi = h->kind == AGREE_MEMBERS ? h->nexcl : 0;
	while (lo < hi) { /* sorted by rank */
		size_t mid = (lo + hi) / 2;
		int r = (int)(x[mid] & ((1u << AGREE_RANK_BITS) - 1));
		if (r == rank)
			return (weft_rank_failure_t)(x[mid] >> AGREE_RANK_BITS);
		if (r < rank)
			lo = mid + 1;
		else
			hi = mid;
	}
	return WEFT_RANK_ALIVE;
}

bool agree_blob_valid(const struct agree_blob *b, int nranks)
{
	if (!b || b->len < sizeof(struct agree_value_hdr))
		return false;
	struct agree_value_hdr h;
	memcpy(&h, b->bytes, sizeof(h));
	if (h.proposer < 0 || h.proposer >= nranks)
		return false;
	if (h.kind == AGREE_ABORT)
		return b->len == sizeof(h) && h.nexcl == 0 && h.why >= AGREE_ABORT_LISTS &&
		       h.why <= AGREE_ABORT_EMPTY && h.a >= -1 && h.a < nranks && h.b >= -1 &&
		       h.b < nranks;
	if (h.kind != AGREE_MEMBERS || h.nexcl > AGREE_MAX_EXCL || h.nexcl >= (uint32_t)nranks ||
	    b->len != sizeof(h) + (size_t)h.nexcl * sizeof(uint32_t) || h.root_len < 16 ||
	    h.root_len > AGREE_ROOT_BYTES)
		return false;
	int last = -1;
	for (uint32_t i = 0; i < h.nexcl; i++) {
		uint32_t w;
		memcpy(&w, b->bytes + sizeof(h) + i * sizeof(w), sizeof(w));
		int r = (int)(w & ((1u << AGREE_RANK_BITS) - 1));
		uint32_t how = w >> AGREE_RANK_BITS;
		if (r <= last || r >= nranks || how < WEFT_RANK_KILLED || how > WEFT_RANK_EXCLUDED)
			return false;
		last = r;
	}
	return true;
}

uint64_t agree_list_hash(const int *ranks, int n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (int i = 0; i < n; i++)
		for (int k = 0; k < 4; k++) {
			h ^= (uint64_t)(((unsigned)ranks[i] >> (8 * k)) & 0xff);
			h *= 0x100000001b3ull;
		}
	return h ^ (uint64_t)n;
}

/* ---- the acceptor */

void agree_acceptor_init(struct agree_acceptor *a, int me)
{
	memset(a, 0, sizeof(*a));
	a->me = me;
	a->no_quorum_from = -1;
	a->built_by = -1;
}

void agree_acceptor_free(struct agree_acceptor *a)
{
	free(a->acc);
	free(a->decided);
	for (int i = 0; i < AGREE_PAST; i++)
		free(a->past[i].value);
	memset(a, 0, sizeof(*a));
}

void agree_acceptor_join(struct agree_acceptor *a, uint64_t instance, uint64_t excl_hash)
{
	a->instance = instance;
	a->joined = true;
	a->excl_hash = excl_hash;
	a->no_quorum_from = -1;
	a->built_by = -1;
	a->built = false;
}

void agree_acceptor_leave(struct agree_acceptor *a, bool next, bool built, bool failed)
{
	a->joined = false;
	if (!next)
		return;
	a->retry = failed;
	free(a->past[AGREE_PAST - 1].value);
	memmove(&a->past[1], &a->past[0], (AGREE_PAST - 1) * sizeof(a->past[0]));
	a->past[0] = (struct agree_past){.instance = a->instance, .value = a->decided};
	a->decided = NULL;
	free(a->acc);
	a->acc = NULL;
	a->promised = a->acc_ballot = 0;
	a->built = built;
	a->built_instance = a->instance;
	a->instance++;
}

const struct agree_blob *agree_acceptor_decided(const struct agree_acceptor *a, uint64_t instance)
{
	if (instance == a->instance)
		return a->decided;
	for (int i = 0; i < AGREE_PAST; i++)
		if (a->past[i].value && a->past[i].instance == instance)
			return a->past[i].value;
	return NULL;
}

static void reply(const struct agree_acceptor *a, const struct agree_msg *in, struct agree_msg *out,
		  uint32_t type)
{
	*out = (struct agree_msg){
	    .type = type, .from = a->me, .instance = in->instance, .ballot = in->ballot};
}

static bool tell_decided(const struct agree_acceptor *a, const struct agree_msg *in,
			 struct agree_msg *out)
{
	const struct agree_blob *v = agree_acceptor_decided(a, in->instance);
	if (!v || in->type == AGREE_DECIDE)
		return false;
	reply(a, in, out, AGREE_DECIDE);
	out->value = v;
	return true;
}

/* The caller is not in this instance (or is past it): say why. */
static bool not_here(const struct agree_acceptor *a, const struct agree_msg *in,
		     struct agree_msg *out)
{
	if (in->type == AGREE_DECIDE || in->type == AGREE_NO_QUORUM)
		return false;
	/* Only to a rank that failed to build the instance this one built: a
	 * rank merely ahead (a healthy communicator shrunk again) is told it
	 * has not joined yet. */
	if (a->built && (in->flags & AGREE_F_RETRY) && in->instance == a->built_instance + 1) {
		reply(a, in, out, AGREE_BUILT);
		out->ballot = a->built_instance;
		return true;
	}
	reply(a, in, out, AGREE_NOT_JOINED);
	return true;
}

static bool learn(struct agree_acceptor *a, const struct agree_msg *in)
{
	if (!a->decided && in->value)
		a->decided = agree_blob_copy(in->value);
	return false;
}

/* Paxos's two rules, for an acceptor that takes part in this instance. */
static bool paxos(struct agree_acceptor *a, const struct agree_msg *in, struct agree_msg *out)
{
	switch (in->type) {
	case AGREE_PREPARE:
		if (in->ballot < a->promised) {
			reply(a, in, out, AGREE_NACK);
			out->ballot = a->promised;
			return true;
		}
		a->promised = in->ballot;
		reply(a, in, out, AGREE_PROMISE);
		out->acc_ballot = a->acc_ballot;
		out->excl_hash = a->excl_hash;
		out->value = a->acc;
		return true;
	case AGREE_ACCEPT:
		if (in->ballot < a->promised || !in->value) {
			reply(a, in, out, AGREE_NACK);
			out->ballot = a->promised;
			return true;
		}
		if (a->acc_ballot != in->ballot || !agree_blob_equal(a->acc, in->value)) {
			struct agree_blob *v = agree_blob_copy(in->value);
			if (!v)
				return false; /* no answer: the proposer sends again */
			free(a->acc);
			a->acc = v;
		}
		a->promised = a->acc_ballot = in->ballot;
		reply(a, in, out, AGREE_ACCEPTED);
		return true;
	case AGREE_LEARN: reply(a, in, out, AGREE_PENDING); return true;
	case AGREE_NO_QUORUM:
		if (a->no_quorum_from < 0) {
			a->no_quorum_from = in->from;
			a->no_quorum_reached = in->ballot;
		}
		return false;
	default: return false;
	}
}

bool agree_acceptor_take(struct agree_acceptor *a, const struct agree_msg *in,
			 struct agree_msg *out)
{
	if (in->type == AGREE_BUILT) { /* an answer: the caller's loop reads it */
		if (a->built_by < 0 && in->instance == a->instance) {
			a->built_by = in->from;
			a->built_by_instance = in->ballot;
		}
		return false;
	}
	if (in->instance < a->instance)
		return tell_decided(a, in, out);
	if (in->instance > a->instance)
		return not_here(a, in, out);
	if (in->type == AGREE_DECIDE)
		return learn(a, in);
	if (tell_decided(a, in, out))
		return true;
	if (!a->joined)
		return not_here(a, in, out);
	return paxos(a, in, out);
}

/* ---- the proposer */

bool agree_proposer_init(struct agree_proposer *p, int me, int n, uint64_t instance)
{
	memset(p, 0, sizeof(*p));
	p->me = me;
	p->n = n;
	p->instance = instance;
	p->rival = -1;
	p->reply = calloc((size_t)n, sizeof(*p->reply));
	p->sent = calloc((size_t)n, sizeof(*p->sent));
	p->acc_ballot = calloc((size_t)n, sizeof(*p->acc_ballot));
	p->excl_hash = calloc((size_t)n, sizeof(*p->excl_hash));
	p->acc = calloc((size_t)n, sizeof(*p->acc));
	if (p->reply && p->sent && p->acc_ballot && p->excl_hash && p->acc)
		return true;
	agree_proposer_free(p);
	return false;
}

static void forget_promises(struct agree_proposer *p)
{
	for (int r = 0; r < p->n; r++) {
		free(p->acc[r]);
		p->acc[r] = NULL;
		p->reply[r] = AGREE_NONE;
		p->sent[r] = 0;
		p->acc_ballot[r] = 0;
	}
}

void agree_proposer_free(struct agree_proposer *p)
{
	if (p->acc)
		forget_promises(p);
	free(p->reply);
	free(p->sent);
	free(p->acc_ballot);
	free(p->excl_hash);
	free(p->acc);
	if (p->value != p->composed)
		free(p->composed);
	free(p->value);
	memset(p, 0, sizeof(*p));
}

void agree_proposer_take(struct agree_proposer *p, const struct agree_msg *in)
{
	int r = in->from;
	if (in->instance != p->instance || r < 0 || r >= p->n || p->phase == AGREE_DONE)
		return;
	if (in->ballot > p->max_seen &&
	    (in->type == AGREE_NACK || in->type == AGREE_PROMISE || in->type == AGREE_ACCEPTED))
		p->max_seen = in->ballot;
	if (in->ballot != p->ballot || p->ballot == 0) {
		if (in->type == AGREE_NOT_JOINED && p->reply[r] == AGREE_NONE)
			p->reply[r] = AGREE_R_NOT_JOINED;
		return;
	}
	switch (in->type) {
	case AGREE_PROMISE:
		if (p->phase != AGREE_PREPARING || p->reply[r] == AGREE_R_PROMISED)
			return;
		p->reply[r] = AGREE_R_PROMISED;
		p->acc_ballot[r] = in->acc_ballot;
		p->excl_hash[r] = in->excl_hash;
		free(p->acc[r]);
		p->acc[r] = in->acc_ballot ? agree_blob_copy(in->value) : NULL;
		if (in->acc_ballot && !p->acc[r])
			p->reply[r] = AGREE_NONE; /* no memory: ask again */
		return;
	case AGREE_ACCEPTED:
		if (p->phase == AGREE_ACCEPTING && p->reply[r] == AGREE_R_PROMISED)
			p->reply[r] = AGREE_R_ACCEPTED;
		return;
	case AGREE_NOT_JOINED:
		if (p->reply[r] == AGREE_NONE)
			p->reply[r] = AGREE_R_NOT_JOINED;
		return;
	default: return;
	}
}

static void send_to(struct agree_proposer *p, const struct agree_env *env, int r, uint32_t type,
		    double now)
{
	struct agree_msg m = {.type = type,
			      .flags = p->flags,
			      .from = p->me,
			      .instance = p->instance,
			      .ballot = p->ballot,
			      .value = type == AGREE_ACCEPT ? p->value : NULL};
	env->send(env->ctx, r, &m);
	p->sent[r] = now;
}

static bool due(const struct agree_proposer *p, int r, double now)
{
	return p->sent[r] == 0 || now - p->sent[r] >= AGREE_RESEND_S;
}

/* This rank's own acceptor answers as the others do. */
static void self_take(struct agree_proposer *p, struct agree_acceptor *self, uint32_t type)
{
	struct agree_msg in = {.type = type,
			       .from = p->me,
			       .instance = p->instance,
			       .ballot = p->ballot,
			       .value = type == AGREE_ACCEPT ? p->value : NULL},
			 out;
	if (agree_acceptor_take(self, &in, &out))
		agree_proposer_take(p, &out);
}

static void start_ballot(struct agree_proposer *p, struct agree_acceptor *self)
{
	uint64_t seen = p->max_seen > self->promised ? p->max_seen : self->promised;
	uint64_t round = (seen >> AGREE_RANK_BITS) + 1;
	p->ballot = round << AGREE_RANK_BITS | (uint64_t)p->me;
	forget_promises(p);
	if (p->value != p->composed)
		free(p->value);
	p->value = NULL;
	p->phase = AGREE_PREPARING;
	self_take(p, self, AGREE_PREPARE);
}

static bool quorum(const struct agree_proposer *p, const struct agree_env *env, int have)
{
	return env->one_host ? have >= 1 : 2 * have > p->n;
}

/* The value this proposer puts forward when no promise carried one: every
 * rank found gone left out, with how; or an abort that every rank will
 * report alike. */
static struct agree_blob *compose(struct agree_proposer *p, const struct agree_env *env)
{
	struct agree_value_hdr h = {.kind = AGREE_MEMBERS, .proposer = p->me, .a = -1, .b = -1};
	uint32_t *excl = malloc(AGREE_MAX_EXCL * sizeof(*excl));
	if (!excl)
		return NULL;
	uint64_t mine = p->excl_hash[p->me];
	for (int r = 0; r < p->n; r++) {
		weft_rank_failure_t how = env->gone(env->ctx, r);
		if (how == WEFT_RANK_ALIVE && env->listed(env->ctx, r))
			how = WEFT_RANK_EXCLUDED;
		if (p->reply[r] == AGREE_R_PROMISED && p->excl_hash[r] != mine && h.why == 0) {
			h = (struct agree_value_hdr){.kind = AGREE_ABORT,
						     .proposer = p->me,
						     .why = AGREE_ABORT_LISTS,
						     .a = p->me,
						     .b = r};
		} else if (how != WEFT_RANK_ALIVE && h.kind == AGREE_MEMBERS) {
			if (h.nexcl == AGREE_MAX_EXCL)
				h = (struct agree_value_hdr){.kind = AGREE_ABORT,
							     .proposer = p->me,
							     .why = AGREE_ABORT_TOO_MANY,
							     .a = -1,
							     .b = -1};
			else
				excl[h.nexcl++] = (uint32_t)r | (uint32_t)how << AGREE_RANK_BITS;
		}
	}
	if (h.kind == AGREE_MEMBERS && h.nexcl >= (uint32_t)p->n)
		h = (struct agree_value_hdr){.kind = AGREE_ABORT,
					     .proposer = p->me,
					     .why = AGREE_ABORT_EMPTY,
					     .a = -1,
					     .b = -1};
	if (h.kind == AGREE_MEMBERS && !env->root(env->ctx, h.root, &h.root_len)) {
		free(excl);
		return NULL;
	}
	struct agree_blob *b = agree_blob_new(&h, excl);
	free(excl);
	return b;
}

/* Every rank has promised or is gone, and the promisers are a quorum:
 * propose the value of the highest accepted ballot, or one's own. */
static enum agree_step to_accept(struct agree_proposer *p, struct agree_acceptor *self,
				 const struct agree_env *env, double now)
{
	int best = -1, have = 0;
	for (int r = 0; r < p->n; r++) {
		if (p->reply[r] != AGREE_R_PROMISED)
			continue;
		have++;
		if (p->acc_ballot[r] && (best < 0 || p->acc_ballot[r] > p->acc_ballot[best]))
			best = r;
	}
	if (!quorum(p, env, have)) {
		p->reached = have;
		return AGREE_NOQUORUM;
	}
	if (best >= 0) {
		p->value = agree_blob_copy(p->acc[best]);
	} else {
		if (!p->composed)
			p->composed = compose(p, env);
		if (!p->composed)
			return AGREE_NO_ROOT;
		p->value = p->composed;
	}
	if (!p->value)
		return AGREE_OUT_OF_ROOM;
	p->phase = AGREE_ACCEPTING;
	for (int r = 0; r < p->n; r++)
		p->sent[r] = 0;
	self_take(p, self, AGREE_ACCEPT);
	(void)now;
	return AGREE_WAIT;
}

static enum agree_step preparing(struct agree_proposer *p, struct agree_acceptor *self,
				 const struct agree_env *env, double now)
{
	bool ready = true;
	for (int r = 0; r < p->n; r++) {
		if (r == p->me || p->reply[r] == AGREE_R_PROMISED)
			continue;
		if (env->gone(env->ctx, r) != WEFT_RANK_ALIVE)
			continue;
		ready = false;
		if (due(p, r, now))
			send_to(p, env, r, AGREE_PREPARE, now);
	}
	if (p->reply[p->me] != AGREE_R_PROMISED) /* a higher ballot came first */
		ready = false;
	return ready ? to_accept(p, self, env, now) : AGREE_WAIT;
}

static enum agree_step accepting(struct agree_proposer *p, const struct agree_env *env, double now)
{
	int accepted = 0, pending = 0;
	for (int r = 0; r < p->n; r++) {
		if (p->reply[r] == AGREE_R_ACCEPTED) {
			accepted++;
			continue;
		}
		if (p->reply[r] != AGREE_R_PROMISED || env->gone(env->ctx, r) != WEFT_RANK_ALIVE)
			continue;
		pending++;
		if (r != p->me && due(p, r, now))
			send_to(p, env, r, AGREE_ACCEPT, now);
	}
	if (!quorum(p, env, accepted + pending)) {
		p->reached = accepted + pending;
		return AGREE_NOQUORUM;
	}
	if (pending || p->reply[p->me] != AGREE_R_ACCEPTED)
		return AGREE_WAIT;
	p->phase = AGREE_DONE;
	return AGREE_DECIDED;
}

enum agree_step agree_proposer_step(struct agree_proposer *p, struct agree_acceptor *self,
				    const struct agree_env *env, double now)
{
	if (p->phase == AGREE_DONE)
		return AGREE_DECIDED;
	/* A higher ballot than ours was seen: a lower rank's makes us stand
	 * back (it has the right of way), any other a new round. */
	if (p->phase != AGREE_IDLE && p->max_seen > p->ballot) {
		int owner = agree_ballot_rank(p->max_seen);
		p->phase = AGREE_IDLE;
		if (owner < p->me && env->gone(env->ctx, owner) == WEFT_RANK_ALIVE) {
			p->rival = owner;
			return AGREE_STAND_BACK;
		}
	}
	if (p->phase == AGREE_IDLE)
		start_ballot(p, self);
	if (p->phase == AGREE_PREPARING)
		return preparing(p, self, env, now);
	return accepting(p, env, now);
}
