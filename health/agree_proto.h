/*
 * agree_proto.h — the agreement a shrink runs: single-decree Paxos (the
 * "Synod" of Lamport's "Paxos Made Simple") on who is gone, one instance
 * per attempt, over the watch's datagrams. Pure protocol: no socket, lock,
 * clock or communicator; health/agree.c drives it, tests/unit/health/agree.c
 * runs it over a simulated network that drops, repeats and reorders
 * messages and kills ranks at random points.
 *
 * Why Paxos. The survivors must build one communicator, not two: a rank
 * that sees a different failed set than another (it heard a slow rank a
 * moment later, a link is cut one way) must still end up with the same
 * membership, and a rank may die in the middle of the agreement itself —
 * the coordinator included. A coordinator that simply broadcasts its view
 * is wrong when it dies after telling some ranks and not others (the next
 * coordinator may tell the rest something else); two-phase commit blocks
 * when it dies between the phases. Paxos decides one value per instance
 * whatever the timing, as long as any two quorums share a rank; the
 * failure detector only decides how fast it ends, never what it decides.
 *
 * Roles. Every rank of the parent communicator is an acceptor (its watch
 * thread answers, even while the rank computes outside Weft; it promises
 * and accepts only once the rank has called weft_comm_shrink for this
 * instance, so that the membership is the ranks that take part). The
 * proposer is the lowest rank that the caller does not find gone; any
 * rank may become it when the ones below it are gone, with a higher
 * ballot (round << 24 | rank), and one that sees a lower rank's ballot
 * stands back. Everyone learns the decision (DECIDE, or by asking: LEARN).
 *
 *   proposer                         acceptor (every rank's watch thread)
 *   PREPARE(i, b)         ------>    b > promised: promise b, answer
 *                         <------    PROMISE(b, accepted ballot and value)
 *   once every rank promised or      (NACK(promised) if b is lower;
 *   is gone, and they are a quorum:   NOT_JOINED while it has not called
 *   v = the value of the highest      shrink; BUILT to a rank that failed to
 *   accepted ballot, else its own     build the communicator it built)
 *   ACCEPT(i, b, v)       ------>    b >= promised: accept (b, v)
 *                         <------    ACCEPTED(b)
 *   once the promisers accepted
 *   and are a quorum: decided
 *   DECIDE(i, v)          ------>    learn v
 *
 * Quorums. Across hosts: more than half of the parent's ranks (two
 * majorities always share a rank, so two halves of a partition never both
 * decide). On one host, where a pid check makes a death certain: every
 * rank not found gone. Two such sets share a rank unless every rank of
 * the first has died or stopped since — then no rank of it can act on its
 * decision either (the one case left, a rank that was stopped while the
 * others decided and wakes after all of them died, is in
 * docs/reliability.md).
 *
 * Why it is safe (Paxos's invariant): if a value v is chosen with ballot
 * b (accepted by a quorum Q), every ballot b' > b that reaches ACCEPT
 * proposes v, because its proposer heard promises from a quorum Q'
 * sharing a rank with Q, and that rank's promise of b' carried an
 * accepted ballot >= b — so, by induction on the ballots between b and
 * b', the highest accepted value it saw is v. A rank that dies mid-way
 * only stops answering; a promise is never withdrawn; a rank found gone by
 * mistake is only left out of the membership (it learns it was excluded).
 */
#ifndef WEFT_AGREE_PROTO_H
#define WEFT_AGREE_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weft.h"

#define AGREE_MAX_EXCL	 8192 /* ranks one agreement may leave out (the datagram's room) */
#define AGREE_PAST	 4    /* decided instances an acceptor remembers */
#define AGREE_ROOT_BYTES 28   /* a sockaddr_in6, the largest address a root has */
#define AGREE_RESEND_S	 0.02 /* between two sends of one message to a silent rank */
#define AGREE_RANK_BITS	 24   /* a ballot is round << 24 | rank */

enum agree_kind {
	AGREE_MEMBERS = 1, /* the ranks left out; the others build the new communicator */
	AGREE_ABORT = 2,   /* the shrink fails on every rank, for the reason given */
};

enum agree_abort {
	AGREE_ABORT_LISTS = 1,	  /* ranks a and b passed different exclude lists */
	AGREE_ABORT_TOO_MANY = 2, /* more than AGREE_MAX_EXCL ranks would be left out */
	AGREE_ABORT_EMPTY = 3,	  /* every rank would be left out */
};

/* A value as it crosses the wire: this header, then nexcl words (rank |
 * how << 24, in increasing rank order). Compared byte for byte. */
struct agree_value_hdr {
	uint32_t kind;
	uint32_t nexcl;
	int32_t proposer; /* who composed it: it hosts the new communicator's root */
	uint32_t why;	  /* AGREE_ABORT: enum agree_abort */
	int32_t a, b;	  /* AGREE_ABORT: the ranks it names (-1: none) */
	uint32_t root_len;
	unsigned char root[AGREE_ROOT_BYTES]; /* the root's listening address */
};

_Static_assert(sizeof(struct agree_value_hdr) == 56, "the value header is 56 bytes");

/* An encoded value. */
struct agree_blob {
	uint32_t len;
	unsigned char bytes[];
};

enum agree_type {
	AGREE_PREPARE = 1,
	AGREE_PROMISE,
	AGREE_NACK,
	AGREE_NOT_JOINED,
	AGREE_ACCEPT,
	AGREE_ACCEPTED,
	AGREE_DECIDE,
	AGREE_LEARN,
	AGREE_PENDING,
	AGREE_NO_QUORUM,
	AGREE_BUILT,
	AGREE_TYPE_END
};

/* In agree_msg.flags: the sender's last decided instance was one whose
 * communicator it failed to build (a rank that built it answers BUILT). */
#define AGREE_F_RETRY 1u

/* One message, decoded (health/agree.c carries it). */
struct agree_msg {
	uint32_t type;
	uint32_t flags;
	int32_t from;
	uint64_t instance;
	uint64_t ballot;     /* PREPARE ACCEPT PROMISE ACCEPTED: the ballot; NACK: the higher one
				promised; NO_QUORUM: ranks the proposer reached; BUILT: the
				instance whose communicator this rank built */
	uint64_t acc_ballot; /* PROMISE: the ballot of the value accepted, 0: none */
	uint64_t excl_hash;  /* PROMISE: a hash of the acceptor's own exclude list */
	const struct agree_blob *value; /* PROMISE (if accepted), ACCEPT, DECIDE; else NULL */
};

struct agree_past {
	uint64_t instance;
	struct agree_blob *value;
};

/* What a rank's watch thread keeps for one communicator. */
struct agree_acceptor {
	int me;
	uint64_t instance; /* the caller's current instance, or the next it will take */
	bool joined;	   /* the caller is in weft_comm_shrink for this instance */
	uint64_t excl_hash;
	uint64_t promised, acc_ballot;
	struct agree_blob *acc, *decided; /* of this instance; NULL: none yet */
	int no_quorum_from;		  /* a proposer said there is no quorum; -1: none */
	uint64_t no_quorum_reached;
	bool built;		 /* the caller built the communicator of instance built_instance */
	uint64_t built_instance; /* and has not joined another since */
	bool retry;		 /* the caller failed to build its last decided instance's */
	int built_by;		 /* a rank said it built an earlier instance; -1: none */
	uint64_t built_by_instance;
	struct agree_past past[AGREE_PAST]; /* newest first */
};

void agree_acceptor_init(struct agree_acceptor *a, int me);
void agree_acceptor_free(struct agree_acceptor *a);

/* The caller enters instance @p instance with the hash of its exclude list
 * (its first instance, or the next after a decided one). */
void agree_acceptor_join(struct agree_acceptor *a, uint64_t instance, uint64_t excl_hash);

/* The caller leaves the current instance: it failed without a decision
 * (the instance stays, its promises too), or it is done with a decided
 * one (@p next: the next call takes instance + 1; @p built: the caller
 * built its communicator; @p failed: it was a member and failed to). */
void agree_acceptor_leave(struct agree_acceptor *a, bool next, bool built, bool failed);

/* Take a message; a reply is written to @p out (true) or none is due. A
 * DECIDE or NO_QUORUM changes what the caller's loop sees. */
bool agree_acceptor_take(struct agree_acceptor *a, const struct agree_msg *in,
			 struct agree_msg *out);

/* The decided value of instance @p instance, if this acceptor knows it. */
const struct agree_blob *agree_acceptor_decided(const struct agree_acceptor *a, uint64_t instance);

/* What the proposer needs to know of the world. */
struct agree_env {
	void *ctx;
	int nranks;
	bool one_host; /* quorum: every rank not gone; else more than half */
	/* How rank r stands now: WEFT_RANK_ALIVE, or how it was found gone.
	 * A rank on the exclude list that is alive is not gone: it takes part
	 * (it must promise like the others: so lists that differ are found). */
	weft_rank_failure_t (*gone)(void *ctx, int r);
	/* Is rank r on the caller's exclude list? */
	bool (*listed)(void *ctx, int r);
	void (*send)(void *ctx, int to, const struct agree_msg *m);
	/* Where the new communicator's root will listen (the proposer binds
	 * it before it proposes a value of its own); false: it cannot. */
	bool (*root)(void *ctx, unsigned char addr[AGREE_ROOT_BYTES], uint32_t *len);
};

enum agree_phase { AGREE_IDLE = 0, AGREE_PREPARING, AGREE_ACCEPTING, AGREE_DONE };

enum agree_step {
	AGREE_WAIT = 0,	   /* nothing decided yet: step again */
	AGREE_DECIDED,	   /* the value is chosen (agree_proposer.value) */
	AGREE_NOQUORUM,	   /* the ranks reached are no quorum (agree_proposer.reached) */
	AGREE_STAND_BACK,  /* a lower rank proposes (agree_proposer.rival) */
	AGREE_NO_ROOT,	   /* env->root failed */
	AGREE_OUT_OF_ROOM, /* no memory */
};

enum agree_reply { AGREE_NONE = 0, AGREE_R_PROMISED, AGREE_R_ACCEPTED, AGREE_R_NOT_JOINED };

struct agree_proposer {
	int me, n;
	uint64_t instance;
	enum agree_phase phase;
	uint64_t ballot, max_seen;
	int rival;		     /* the lower rank whose ballot made this one stand back */
	int reached;		     /* NOQUORUM: ranks that promised (this one included) */
	uint32_t flags;		     /* in every message it sends (AGREE_F_RETRY) */
	unsigned char *reply;	     /* [n] enum agree_reply for the current ballot */
	double *sent;		     /* [n] when the current phase's message last went */
	uint64_t *acc_ballot;	     /* [n] from the promises */
	uint64_t *excl_hash;	     /* [n] */
	struct agree_blob **acc;     /* [n] */
	struct agree_blob *value;    /* proposed (ACCEPTING) or decided (DONE) */
	struct agree_blob *composed; /* the value this rank composed, if it did */
};

bool agree_proposer_init(struct agree_proposer *p, int me, int n, uint64_t instance);
void agree_proposer_free(struct agree_proposer *p);

/* A reply addressed to the proposer (PROMISE, ACCEPTED, NACK, NOT_JOINED). */
void agree_proposer_take(struct agree_proposer *p, const struct agree_msg *in);

/* One step at time @p now: (re)send what is due, move on when the replies
 * allow. @p self is this rank's own acceptor (it promises and accepts
 * too). */
enum agree_step agree_proposer_step(struct agree_proposer *p, struct agree_acceptor *self,
				    const struct agree_env *env, double now);

/* Values. */
struct agree_blob *agree_blob_new(const struct agree_value_hdr *h, const uint32_t *excl);
struct agree_blob *agree_blob_copy(const struct agree_blob *b);
bool agree_blob_equal(const struct agree_blob *a, const struct agree_blob *b);
/* The header of @p b (always a valid one: blobs are checked when decoded). */
const struct agree_value_hdr *agree_blob_hdr(const struct agree_blob *b);
const uint32_t *agree_blob_excl(const struct agree_blob *b);
/* How @p rank is left out by @p b, or WEFT_RANK_ALIVE if it is a member. */
weft_rank_failure_t agree_blob_left_out(const struct agree_blob *b, int rank);
/* Is @p b a well-formed value for a communicator of @p nranks? */
bool agree_blob_valid(const struct agree_blob *b, int nranks);

/* The rank that owns ballot @p b. */
static inline int agree_ballot_rank(uint64_t b)
{
	return (int)(b & ((1u << AGREE_RANK_BITS) - 1));
}

/* A hash of an exclude list (sorted, without repeats): ranks that pass
 * different lists get different hashes (FNV-1a, 64 bits). */
uint64_t agree_list_hash(const int *ranks, int n);

#endif
