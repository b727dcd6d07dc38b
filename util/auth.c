/* auth.c — see auth.h. */
#include "util/auth.h"

#include <pthread.h>
#include <sodium.h>
#include <string.h>

_Static_assert(sizeof(struct weft_mac_state) >= sizeof(crypto_auth_hmacsha256_state),
	       "struct weft_mac_state holds libsodium's HMAC state");
_Static_assert(WEFT_MAC_BYTES == crypto_auth_hmacsha256_BYTES, "HMAC-SHA256 is 32 bytes");

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int sodium_rc;

static void start(void)
{
	sodium_rc = sodium_init(); /* 0 first time, 1 already done, -1 failure */
}

weft_status_t weft_random(void *buf, size_t len, struct weft_err *err)
{
	pthread_once(&once, start);
	if (sodium_rc < 0)
		return weft_err_set(err, WEFT_ERR_SYSTEM,
				    "libsodium could not start (no random source?)");
	randombytes_buf(buf, len);
	return WEFT_SUCCESS;
}

static crypto_auth_hmacsha256_state *state_of(struct weft_mac_state *st)
{
	return (crypto_auth_hmacsha256_state *)(void *)st->opaque;
}

void weft_mac_init(struct weft_mac_state *st, const struct weft_key *key)
{
	crypto_auth_hmacsha256_init(state_of(st), key->b, sizeof(key->b));
}

void weft_mac_add(struct weft_mac_state *st, const void *data, size_t len)
{
	crypto_auth_hmacsha256_update(state_of(st), data, len);
}

void weft_mac_final(struct weft_mac_state *st, unsigned char mac[WEFT_MAC_BYTES])
{
	crypto_auth_hmacsha256_final(state_of(st), mac);
	sodium_memzero(st, sizeof(*st));
}

void weft_mac(const struct weft_key *key, const void *data, size_t len,
	      unsigned char mac[WEFT_MAC_BYTES])
{
	struct weft_mac_state st;
	weft_mac_init(&st, key);
	weft_mac_add(&st, data, len);
	weft_mac_final(&st, mac);
}

bool weft_mac_equal(const unsigned char a[WEFT_MAC_BYTES], const unsigned char b[WEFT_MAC_BYTES])
{
	return sodium_memcmp(a, b, WEFT_MAC_BYTES) == 0;
}

void weft_key_derive(struct weft_key *out, const struct weft_key *parent, const char *label,
		     const void *ctx, size_t ctx_len)
{
	struct weft_mac_state st;
	size_t label_len = strlen(label);
	weft_mac_init(&st, parent);
	/* The label's length first, so that (label, ctx) pairs never collide. */
	weft_mac_add(&st, &label_len, sizeof(label_len));
	weft_mac_add(&st, label, label_len);
	weft_mac_add(&st, ctx, ctx_len);
	weft_mac_final(&st, out->b);
}

void weft_key_from_u64(struct weft_key *out, uint64_t secret)
{
	static const char label[] = "weft key from a 64-bit secret, v1";
	unsigned char in[sizeof(label) + sizeof(secret)];
	memcpy(in, label, sizeof(label));
	memcpy(in + sizeof(label), &secret, sizeof(secret));
	crypto_hash_sha256(out->b, in, sizeof(in));
	sodium_memzero(in, sizeof(in));
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

weft_status_t weft_key_parse(struct weft_key *out, const char *text, size_t len, const char *what,
			     struct weft_err *err)
{
	unsigned char raw[WEFT_KEY_BYTES];
	if (len != 16 && len != 2 * WEFT_KEY_BYTES)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "%s must be 16 or 64 hex digits and nothing else (it has %zu "
				    "characters)",
				    what, len);
	for (size_t i = 0; i < len; i += 2) {
		int hi = hex_value(text[i]), lo = hex_value(text[i + 1]);
		if (hi < 0 || lo < 0) {
			weft_wipe(raw, sizeof(raw));
			return weft_err_set(err, WEFT_ERR_INVALID_ARG,
					    "%s must be 16 or 64 hex digits and nothing else (the "
					    "character at %zu is not one)",
					    what, hi < 0 ? i : i + 1);
		}
		raw[i / 2] = (unsigned char)(hi << 4 | lo);
	}
	if (len == 16) {
		uint64_t secret = 0;
		for (size_t i = 0; i < 8; i++)
			secret = secret << 8 | raw[i];
		weft_key_from_u64(out, secret);
		weft_wipe(&secret, sizeof(secret));
	} else {
		memcpy(out->b, raw, sizeof(out->b));
	}
	weft_wipe(raw, sizeof(raw));
	return WEFT_SUCCESS;
}

void weft_wipe(void *p, size_t len)
{
	sodium_memzero(p, len);
}
