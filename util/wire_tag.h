/*
 * wire_tag.h — the layout of the 64-bit tag every message carries, which
 * the core writes (core/tag.h) and a transport that matches by tag reads
 * (ofi's tagged messages).
 *
 * The upper 32 bits are the operation word: bit 31 set for sends and
 * receives (the rest their number); clear for a collective, whose bits
 * 30..19 are the call number and WEFT_TAG_SIGNATURE the signature of its
 * arguments. The lower 32 bits are the step inside the operation. The
 * signature only checks the call: a transport that matches by tag may
 * leave it out of the match and compare it when the message lands, so
 * that mismatched calls fail at once instead of never matching.
 */
#ifndef WEFT_WIRE_TAG_H
#define WEFT_WIRE_TAG_H

#define WEFT_TAG_P2P	   (1u << 31)
#define WEFT_TAG_SIGNATURE 0x0007ffffu

#endif
