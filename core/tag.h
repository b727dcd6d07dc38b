/*
 * tag.h — what the 64-bit tag of a message says: which operation it belongs
 * to, what that operation was called with, and the step inside it.
 *
 * Every message carries a tag and the receiver compares it with the tag of
 * the receive it posted (transports/transport.h), so whatever the tag holds
 * is checked at no cost on every message. The upper 32 bits, the operation
 * word, are the same for all messages of one operation; the algorithms put
 * their step in the lower 32 (weft_p2p_tag).
 *
 * Collectives (bit 31 clear) carry a signature of the call, so that ranks
 * that called a collective with different arguments fail at the first
 * message with a message naming the argument, instead of exchanging wrong
 * data or waiting for bytes that never come:
 *
 *   bits 30..19  call number on the communicator, modulo 4096
 *   bits 18..15  the collective (allreduce .. scatter)
 *   bits 14..11  the datatype
 *   bits 10..8   the op (WEFT_SUM for the collectives without one)
 *   bits  7..0   a hash of count and root: a mismatch shows with
 *                probability 255/256 here, and mostly as a length
 *                mismatch of the same message anyway
 *
 * Point-to-point messages (bit 31 set) carry the number of the send or
 * receive between the two ranks in that direction (bits 30..0). Their
 * datatypes need not match, only their lengths, as in NCCL: a receive may
 * take bytes sent under another type.
 *
 * Operations of one communicator run one at a time in call order (only the
 * sends and receives of a group run side by side), so 12 bits of call
 * number keep tags unique among the messages that can be in flight.
 */
#ifndef WEFT_TAG_H
#define WEFT_TAG_H

#include <stddef.h>
#include <stdint.h>

#include "core/task.h"
#include "util/wire_tag.h"

/* The operation word of the @p number-th collective call (its arguments in
 * @p args), or of the @p number-th send/receive to or from one peer. */
uint32_t weft_tag_coll_word(uint64_t number, const struct weft_coll_args *args);
uint32_t weft_tag_p2p_word(uint64_t number);

/* The call number an operation word carries (collectives: modulo 4096),
 * and the public call it belongs to ("weft_allreduce", "a send/receive"). */
uint32_t weft_tag_number(uint32_t word);
const char *weft_tag_call(uint32_t word);

/* How the operation words @p sent (from rank @p peer) and @p want (what
 * this rank expects) differ, as a clause for an error message:
 * "mismatched weft_allreduce: datatype: rank 1 passed float, this rank
 * int32". Empty when they are equal. */
void weft_tag_explain(uint32_t sent, uint32_t want, int peer, char *buf, size_t len);

#endif
