/* tag.c — the operation word of message tags, and what a mismatch means
 * (see tag.h). */
#include "core/tag.h"

#include <stdbool.h>
#include <stdio.h>

#include "util/dtype.h"

#define NUM_SHIFT   19
#define NUM_MASK    0xfffu
#define COLL_SHIFT  15
#define COLL_MASK   0xfu
#define DTYPE_SHIFT 11
#define DTYPE_MASK  0xfu
#define OP_SHIFT    8
#define OP_MASK	    0x7u
#define ARGS_MASK   0xffu

_Static_assert(WEFT_TAG_SIGNATURE == (1u << NUM_SHIFT) - 1,
	       "transports learn which bits are the signature from transport.h");
_Static_assert(WEFT_COLL_COUNT - 1 <= COLL_MASK, "collectives must fit the tag");
_Static_assert(WEFT_DATATYPE_COUNT - 1 <= DTYPE_MASK, "datatypes must fit the tag");
_Static_assert(WEFT_OP_COUNT - 1 <= OP_MASK, "ops must fit the tag");

/* The public calls, by the collective a tag names. */
static const char *const call_names[COLL_MASK + 1] = {
    [WEFT_COLL_ALLREDUCE] = "weft_allreduce",
    [WEFT_COLL_ALLGATHER] = "weft_allgather",
    [WEFT_COLL_REDUCE_SCATTER] = "weft_reduce_scatter",
    [WEFT_COLL_BROADCAST] = "weft_broadcast",
    [WEFT_COLL_REDUCE] = "weft_reduce",
    [WEFT_COLL_ALLTOALL] = "weft_alltoall",
    [WEFT_COLL_BARRIER] = "weft_barrier",
    [WEFT_COLL_ALLTOALLV] = "weft_alltoallv",
    [WEFT_COLL_GATHER] = "weft_gather",
    [WEFT_COLL_SCATTER] = "weft_scatter",
};

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

uint32_t weft_tag_coll_word(uint64_t number, const struct weft_coll_args *args)
{
	/* AlltoAllv's counts differ from rank to rank by design: each pair's
	 * length check catches its mismatches instead. */
	uint64_t count = args->coll == WEFT_COLL_ALLTOALLV ? 0 : args->count;
	uint32_t h = (uint32_t)mix64(mix64(count) ^ (uint64_t)(uint32_t)args->root);
	return ((uint32_t)(number & NUM_MASK) << NUM_SHIFT) |
	       (((uint32_t)args->coll & COLL_MASK) << COLL_SHIFT) |
	       (((uint32_t)args->dtype & DTYPE_MASK) << DTYPE_SHIFT) |
	       (((uint32_t)args->op & OP_MASK) << OP_SHIFT) | (h & ARGS_MASK);
}

uint32_t weft_tag_p2p_word(uint64_t number)
{
	return WEFT_TAG_P2P | (uint32_t)(number & ~WEFT_TAG_P2P);
}

uint32_t weft_tag_number(uint32_t word)
{
	return word & WEFT_TAG_P2P ? word & ~WEFT_TAG_P2P : (word >> NUM_SHIFT) & NUM_MASK;
}

static unsigned field(uint32_t word, unsigned shift, unsigned mask)
{
	return (word >> shift) & mask;
}

const char *weft_tag_call(uint32_t word)
{
	if (word & WEFT_TAG_P2P)
		return "a send/receive";
	const char *name = call_names[field(word, COLL_SHIFT, COLL_MASK)];
	return name ? name : "an unknown collective";
}

static void append(char *buf, size_t len, size_t *used, const char *text)
{
	int n = snprintf(buf + *used, len - *used, "%s", text);
	if (n > 0)
		*used = *used + (size_t)n < len ? *used + (size_t)n : len - 1;
}

/* Same collective, same call number: name every argument that differs. */
static void explain_args(uint32_t s, uint32_t w, int peer, char *buf, size_t len)
{
	unsigned coll = field(w, COLL_SHIFT, COLL_MASK);
	bool rooted = coll == WEFT_COLL_BROADCAST || coll == WEFT_COLL_REDUCE ||
		      coll == WEFT_COLL_GATHER || coll == WEFT_COLL_SCATTER;
	size_t used = 0;
	char part[128];
	snprintf(part, sizeof(part), "mismatched %s:", weft_tag_call(w));
	append(buf, len, &used, part);
	const char *sep = " ";
	unsigned sd = field(s, DTYPE_SHIFT, DTYPE_MASK), wd = field(w, DTYPE_SHIFT, DTYPE_MASK);
	if (sd != wd) {
		snprintf(part, sizeof(part), "%sdatatype: rank %d passed %s, this rank %s", sep,
			 peer, weft_dtype_name((weft_datatype_t)sd),
			 weft_dtype_name((weft_datatype_t)wd));
		append(buf, len, &used, part);
		sep = "; ";
	}
	unsigned so = field(s, OP_SHIFT, OP_MASK), wo = field(w, OP_SHIFT, OP_MASK);
	if (so != wo) {
		snprintf(part, sizeof(part), "%sop: rank %d passed %s, this rank %s", sep, peer,
			 weft_op_name((weft_op_t)so), weft_op_name((weft_op_t)wo));
		append(buf, len, &used, part);
		sep = "; ";
	}
	if ((s & ARGS_MASK) != (w & ARGS_MASK)) {
		snprintf(part, sizeof(part), "%s%s: rank %d passed a different %s than this rank",
			 sep, rooted ? "count or root" : "count", peer,
			 rooted ? "count or root" : "count");
		append(buf, len, &used, part);
	}
}

void weft_tag_explain(uint32_t s, uint32_t w, int peer, char *buf, size_t len)
{
	if (len == 0)
		return;
	buf[0] = '\0';
	if (s == w)
		return;
	bool p2p = s & WEFT_TAG_P2P, same_number = weft_tag_number(s) == weft_tag_number(w);
	if (p2p != !!(w & WEFT_TAG_P2P) ||
	    (!p2p && same_number &&
	     field(s, COLL_SHIFT, COLL_MASK) != field(w, COLL_SHIFT, COLL_MASK)))
		snprintf(buf, len, "mismatched calls: rank %d is in %s where this rank is in %s",
			 peer, weft_tag_call(s), weft_tag_call(w));
	else if (p2p)
		snprintf(buf, len,
			 "sends and receives out of step: rank %d's send number %u met this rank's "
			 "receive number %u",
			 peer, weft_tag_number(s), weft_tag_number(w));
	else if (!same_number)
		snprintf(
		    buf, len,
		    "collectives out of step: rank %d is at call %u (%s) where this rank is at "
		    "call %u (%s), counted modulo 4096: a call is missing on one of them",
		    peer, weft_tag_number(s), weft_tag_call(s), weft_tag_number(w),
		    weft_tag_call(w));
	else
		explain_args(s, w, peer, buf, len);
}
