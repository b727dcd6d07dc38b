/*
 * auth.h — the job key and what is proven with it, on libsodium.
 *
 * Every connection (bootstrap root and relay, the socket transport's data
 * connections and lazy calls) and every watch datagram proves knowledge of
 * the communicator's 256-bit key without sending it: HMAC-SHA256 over what
 * both sides said (util/handshake.h), or over the datagram and a sequence
 * number (core/watch.c). libsodium rather than OpenSSL's libcrypto: one
 * small, well-kept library whose whole API is the few primitives needed
 * here (HMAC-SHA256, constant-time comparison, the kernel's random bytes,
 * wiping), with no engine or configuration that could change what they do.
 *
 * Keys are derived, never sent: a split child's key comes from its
 * parent's (weft_key_derive), so every member computes it and no wire
 * carries it.
 */
#ifndef WEFT_AUTH_H
#define WEFT_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

#define WEFT_KEY_BYTES	 32
#define WEFT_MAC_BYTES	 32
#define WEFT_NONCE_BYTES 32

struct weft_key {
	unsigned char b[WEFT_KEY_BYTES];
};

/* A MAC being computed over several pieces. */
struct weft_mac_state {
	_Alignas(16) unsigned char opaque[208]; /* crypto_auth_hmacsha256_state */
};

/* Fill @p buf with @p len bytes from the kernel's random source. Fails
 * only if libsodium cannot start (then with a status and a message). */
weft_status_t weft_random(void *buf, size_t len, struct weft_err *err);

/* HMAC-SHA256 with @p key: start, add pieces, finish into @p mac. */
void weft_mac_init(struct weft_mac_state *st, const struct weft_key *key);
void weft_mac_add(struct weft_mac_state *st, const void *data, size_t len);
void weft_mac_final(struct weft_mac_state *st, unsigned char mac[WEFT_MAC_BYTES]);

/* One-piece MAC, and its check in constant time. */
void weft_mac(const struct weft_key *key, const void *data, size_t len,
	      unsigned char mac[WEFT_MAC_BYTES]);
bool weft_mac_equal(const unsigned char a[WEFT_MAC_BYTES], const unsigned char b[WEFT_MAC_BYTES]);

/* A key for one purpose from @p parent: HMAC-SHA256(parent, label || ctx).
 * Distinct labels give independent keys. */
void weft_key_derive(struct weft_key *out, const struct weft_key *parent, const char *label,
		     const void *ctx, size_t ctx_len);

/* The 256-bit key of a 64-bit secret written as 16 hex digits (the keys
 * of scripts made before keys were widened): a fixed derivation, so every
 * rank given the same 16 digits has the same key. */
void weft_key_from_u64(struct weft_key *out, uint64_t secret);

/* Parse a key written as exactly 16 or 64 hex digits (upper or lower
 * case), nothing else: no sign, no 0x, no spaces. @p what names it in the
 * error ("WEFT_SECRET"). */
weft_status_t weft_key_parse(struct weft_key *out, const char *text, size_t len, const char *what,
			     struct weft_err *err);

/* Overwrite @p len bytes at @p p so that the compiler cannot skip it. */
void weft_wipe(void *p, size_t len);

#endif
