/*
 * fuzz_handshake.c — libFuzzer target: the handshake (util/handshake.c),
 * both sides at once, with the fuzzer as the man in the middle.
 *
 * A connector and a listener, each on its own socket pair, run the real
 * state machines without blocking; between them the fuzzer reads every
 * chunk one side sends and, as the input says, passes it on, changes a
 * byte of it, cuts it short, adds bytes of its own or closes the line.
 * The listener answers every hello with the job's key, or (as the input
 * says) with another. Beyond crashes, hangs and sanitizer reports, the
 * target checks what the handshake promises:
 *   - untouched, both sides end authenticated;
 *   - whenever the listener ends authenticated, the hello and proof it
 *     took are byte for byte what the connector sent, with the right key
 *     (a change anywhere in them, or a wrong key, must be refused);
 *   - whenever the connector ends authenticated, the challenge it took is
 *     the listener's own, and the listener holds the same key.
 * Input: one byte of flags (bit 0: the listener uses another key), then
 * one operation per chunk crossing the middle (op byte, argument bytes):
 *   0-3 pass; 4 flip byte [a] with [b]; 5 cut to [a] bytes and close;
 *   6 add [a] bytes from the input after the chunk; 7 close the line.
 * When the input runs out, chunks pass untouched.
 */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/handshake.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct input {
	const uint8_t *p;
	size_t n;
};

static int take(struct input *in)
{
	if (!in->n)
		return -1;
	in->n--;
	return *in->p++;
}

/* One direction of the middle: the first bytes that came in and went out
 * (enough to hold every handshake message). */
#define LOG_BYTES 512

struct line {
	int from, to;
	bool closed;
	unsigned char in[LOG_BYTES], out[LOG_BYTES];
	size_t nin, nout;
};

/* Did the first @p n bytes go out as they came in? */
static bool line_intact(const struct line *l, size_t n)
{
	return l->nin >= n && l->nout >= n && memcmp(l->in, l->out, n) == 0;
}

static void record(unsigned char *log, size_t *n, const unsigned char *p, size_t len)
{
	for (size_t i = 0; i < len && *n < LOG_BYTES; i++)
		log[(*n)++] = p[i];
}

static void line_close(struct line *l)
{
	if (!l->closed) {
		shutdown(l->to, SHUT_WR);
		l->closed = true;
	}
}

/* Move one chunk across, as the input says; true if anything moved. */
static bool line_move(struct line *l, struct input *in)
{
	unsigned char buf[1024];
	if (l->closed)
		return false;
	ssize_t n = recv(l->from, buf, LOG_BYTES, MSG_DONTWAIT);
	if (n == 0) {
		line_close(l);
		return true;
	}
	if (n < 0)
		return false;
	size_t len = (size_t)n;
	record(l->in, &l->nin, buf, len);
	int op = take(in);
	switch (op < 0 ? 0 : op % 8) {
	case 4: {
		int at = take(in), x = take(in);
		if (at >= 0 && x >= 0)
			buf[(size_t)at % len] ^= (unsigned char)x;
		break;
	}
	case 5: {
		int a = take(in);
		len = a < 0 ? 0 : (size_t)a % len;
		break;
	}
	case 6: {
		int a = take(in);
		for (int i = 0; i < a && len < sizeof(buf); i++) {
			int b = take(in);
			if (b < 0)
				break;
			buf[len++] = (unsigned char)b;
		}
		break;
	}
	case 7: len = 0; break;
	default: break;
	}
	record(l->out, &l->nout, buf, len);
	if (len && send(l->to, buf, len, MSG_NOSIGNAL) != (ssize_t)len)
		abort(); /* a socket pair's buffer holds far more than one chunk */
	if (op >= 0 && (op % 8 == 5 || op % 8 == 7))
		line_close(l);
	return true;
}

enum end { RUNNING, OK, FAILED };

static enum end end_of(enum weft_hs_result r)
{
	switch (r) {
	case WEFT_HS_OK: return OK;
	case WEFT_HS_REFUSED:
	case WEFT_HS_IO_ERROR: return FAILED;
	default: return RUNNING;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned char id[WEFT_HS_ID_BYTES] = {1, 2, 3};
	struct input in = {data, size};
	int flags = take(&in);
	struct weft_key key, other;
	struct weft_err err = {0};
	int c[2], l[2];
	struct weft_hs cs, ls;
	const uint32_t payload[2] = {8, 4242};

	if (flags < 0)
		return 0;
	weft_key_from_u64(&key, 0x0123456789abcdefull);
	weft_key_from_u64(&other, 0xfedcba9876543210ull);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, c) != 0)
		abort();
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, l) != 0)
		abort();
	/* c[0]: the connector's; c[1] and l[1]: the middle's; l[0]: the listener's */
	struct line up = {.from = c[1], .to = l[1]}, down = {.from = l[1], .to = c[1]};
	if (weft_hs_connect(&cs, c[0], &key, WEFT_HS_SOCKET, id, 3, 5, payload, sizeof(payload),
			    &err) != WEFT_SUCCESS)
		abort();
	weft_hs_accept(&ls, l[0]);
	enum end ce = RUNNING, le = RUNNING;
	bool answered = false, wrong_key = flags & 1;
	for (int idle = 0; idle < 3;) {
		bool moved = false;
		if (ce == RUNNING)
			ce = end_of(weft_hs_step(&cs));
		while (le == RUNNING) {
			enum weft_hs_result r = weft_hs_step(&ls);
			if (r != WEFT_HS_HELLO) {
				le = end_of(r);
				break;
			}
			if (weft_hs_answer(&ls, wrong_key ? &other : &key, 5, NULL, 0, &err) !=
			    WEFT_SUCCESS)
				abort();
			answered = true;
		}
		moved |= line_move(&up, &in);
		moved |= line_move(&down, &in);
		idle = moved ? 0 : idle + 1;
	}
	/* The promises. The welcome carries no MAC: a change in it may only
	 * make the connector refuse. */
	size_t hello_proof = sizeof(struct weft_hs_hello) + sizeof(struct weft_hs_proof);
	size_t challenge = sizeof(struct weft_hs_challenge);
	size_t welcomed = challenge + sizeof(struct weft_hs_welcome);
	if (le == OK &&
	    (!line_intact(&up, hello_proof) || !line_intact(&down, challenge) || wrong_key))
		abort(); /* the listener let in what it should have refused */
	if (ce == OK && (!line_intact(&down, challenge) || wrong_key || !answered))
		abort(); /* the connector believed an impostor */
	if (line_intact(&up, hello_proof) && line_intact(&down, welcomed) && !wrong_key &&
	    (ce != OK || le != OK))
		abort(); /* an honest exchange failed */
	weft_hs_clear(&cs);
	weft_hs_clear(&ls);
	close(c[0]);
	close(c[1]);
	close(l[0]);
	close(l[1]);
	return 0;
}
