/* handshake.c — see handshake.h. */
#include "util/handshake.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "util/log.h"
#include "util/settings.h"

static const char label_listener[] = "weft handshake v1: listener";
static const char label_connector[] = "weft handshake v1: connector";

/* mac = HMAC(K, label || hello || challenge without its MAC). */
static void transcript_mac(const struct weft_hs *hs, const char *label,
			   unsigned char mac[WEFT_MAC_BYTES])
{
	struct weft_mac_state st;
	weft_mac_init(&st, &hs->key);
	weft_mac_add(&st, label, strlen(label));
	weft_mac_add(&st, &hs->hello, sizeof(hs->hello));
	weft_mac_add(&st, &hs->challenge, offsetof(struct weft_hs_challenge, mac));
	weft_mac_final(&st, mac);
}

/* Every handshake, and most of what follows on its connection, is a few
 * small frames each answering the last: with Nagle on, the second of two
 * writes in a row waits for the peer's delayed ACK (40 ms on Linux), which
 * cost every job ~40 ms at bootstrap. Every TCP connection Weft makes (the
 * bootstrap's, the socket transport's sub-flows and probes, the liveness
 * checks) starts with a handshake, so this is the one place Nagle goes
 * off, at both ends; on a socket that is not TCP (a socketpair in the
 * tests) the call fails and nothing is lost. */
static void no_delay(int fd)
{
	int one = 1;
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

weft_status_t weft_hs_connect(struct weft_hs *hs, int fd, const struct weft_key *key,
			      enum weft_hs_role role, const unsigned char id[WEFT_HS_ID_BYTES],
			      int rank, int peer, const void *payload, size_t len,
			      struct weft_err *err)
{
	memset(hs, 0, sizeof(*hs));
	no_delay(fd);
	hs->fd = fd;
	hs->key = *key;
	hs->phase = WEFT_HS_SEND_HELLO;
	hs->hello.magic = WEFT_HS_MAGIC;
	hs->hello.version = WEFT_HS_VERSION;
	hs->hello.role = (uint32_t)role;
	if (id)
		memcpy(hs->hello.id, id, WEFT_HS_ID_BYTES);
	hs->hello.rank = rank;
	hs->hello.peer = peer;
	if (len > WEFT_HS_PAYLOAD_BYTES)
		return weft_err_set(err, WEFT_ERR_INTERNAL, "handshake payload of %zu bytes", len);
	if (len)
		memcpy(hs->hello.payload, payload, len);
	return weft_random(hs->hello.nonce, sizeof(hs->hello.nonce), err);
}

void weft_hs_accept(struct weft_hs *hs, int fd)
{
	memset(hs, 0, sizeof(*hs));
	no_delay(fd);
	hs->fd = fd;
	hs->phase = WEFT_HS_RECV_HELLO;
}

weft_status_t weft_hs_answer(struct weft_hs *hs, const struct weft_key *key, int rank,
			     const void *payload, size_t len, struct weft_err *err)
{
	if (hs->phase != WEFT_HS_HELLO_IN || len > WEFT_HS_PAYLOAD_BYTES)
		return weft_err_set(err, WEFT_ERR_INTERNAL, "handshake answered out of turn");
	hs->key = *key;
	hs->challenge.magic = WEFT_HS_MAGIC;
	hs->challenge.version = WEFT_HS_VERSION;
	hs->challenge.rank = rank;
	if (len)
		memcpy(hs->challenge.payload, payload, len);
	weft_status_t st = weft_random(hs->challenge.nonce, sizeof(hs->challenge.nonce), err);
	if (st != WEFT_SUCCESS)
		return st;
	transcript_mac(hs, label_listener, hs->challenge.mac);
	hs->phase = WEFT_HS_SEND_CHALLENGE;
	hs->done = 0;
	return WEFT_SUCCESS;
}

/* Move @p len bytes of @p buf in or out; true when all are through. On a
 * false return hs->errnum is the errno (EAGAIN: not yet; 0: end of file). */
static bool move(struct weft_hs *hs, void *buf, size_t len, bool out)
{
	while (hs->done < len) {
		char *p = (char *)buf + hs->done;
		ssize_t n = out ? send(hs->fd, p, len - hs->done, MSG_NOSIGNAL | MSG_DONTWAIT)
				: recv(hs->fd, p, len - hs->done, MSG_DONTWAIT);
		if (n > 0) {
			hs->done += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		hs->errnum = n == 0 ? 0 : errno;
		return false;
	}
	hs->done = 0;
	return true;
}

static enum weft_hs_result stalled(struct weft_hs *hs, const char *what)
{
	if (hs->errnum == EAGAIN || hs->errnum == EWOULDBLOCK)
		return WEFT_HS_AGAIN;
	hs->phase = WEFT_HS_FAILED;
	hs->why = what;
	return WEFT_HS_IO_ERROR;
}

static enum weft_hs_result refuse(struct weft_hs *hs, const char *why)
{
	hs->phase = WEFT_HS_FAILED;
	hs->why = why;
	weft_hs_clear(hs);
	return WEFT_HS_REFUSED;
}

static enum weft_hs_result connector_step(struct weft_hs *hs)
{
	unsigned char mac[WEFT_MAC_BYTES];
	switch (hs->phase) {
	case WEFT_HS_SEND_HELLO:
		if (!move(hs, &hs->hello, sizeof(hs->hello), true))
			return stalled(hs, "sending the hello");
		hs->phase = WEFT_HS_RECV_CHALLENGE;
		/* fall through */
	case WEFT_HS_RECV_CHALLENGE:
		if (!move(hs, &hs->challenge, sizeof(hs->challenge), false))
			return stalled(hs, "waiting for the challenge");
		if (hs->challenge.magic != WEFT_HS_MAGIC ||
		    hs->challenge.version != WEFT_HS_VERSION)
			return refuse(hs, "answered with something that is not a Weft challenge");
		if (hs->challenge.rank != hs->hello.peer)
			return refuse(hs, "answered as another rank than the one it should be");
		transcript_mac(hs, label_listener, mac);
		if (!weft_mac_equal(mac, hs->challenge.mac))
			return refuse(hs, "failed authentication (it does not hold the job's key)");
		hs->proof.magic = WEFT_HS_MAGIC;
		transcript_mac(hs, label_connector, hs->proof.mac);
		hs->phase = WEFT_HS_SEND_PROOF;
		/* fall through */
	case WEFT_HS_SEND_PROOF:
		if (!move(hs, &hs->proof, sizeof(hs->proof), true))
			return stalled(hs, "sending the proof");
		weft_hs_clear(hs);
		hs->phase = WEFT_HS_RECV_WELCOME;
		/* fall through */
	case WEFT_HS_RECV_WELCOME:
		if (!move(hs, &hs->welcome, sizeof(hs->welcome), false))
			return stalled(hs, "waiting to be admitted (after the proof)");
		if (hs->welcome.magic != WEFT_HS_WELCOME_MAGIC)
			return refuse(hs,
				      "answered the proof with something that is not a welcome");
		hs->phase = WEFT_HS_DONE;
		return WEFT_HS_OK;
	default: return hs->phase == WEFT_HS_DONE ? WEFT_HS_OK : WEFT_HS_REFUSED;
	}
}

static enum weft_hs_result listener_step(struct weft_hs *hs)
{
	unsigned char mac[WEFT_MAC_BYTES];
	switch (hs->phase) {
	case WEFT_HS_RECV_HELLO:
		if (!move(hs, &hs->hello, sizeof(hs->hello), false))
			return stalled(hs, "waiting for the hello");
		if (hs->hello.magic != WEFT_HS_MAGIC || hs->hello.version != WEFT_HS_VERSION)
			return refuse(hs, "not a Weft handshake of this version");
		hs->phase = WEFT_HS_HELLO_IN;
		return WEFT_HS_HELLO;
	case WEFT_HS_HELLO_IN: return WEFT_HS_HELLO;
	case WEFT_HS_SEND_CHALLENGE:
		if (!move(hs, &hs->challenge, sizeof(hs->challenge), true))
			return stalled(hs, "sending the challenge");
		hs->phase = WEFT_HS_RECV_PROOF;
		/* fall through */
	case WEFT_HS_RECV_PROOF:
		if (!move(hs, &hs->proof, sizeof(hs->proof), false))
			return stalled(hs, "waiting for the proof");
		transcript_mac(hs, label_connector, mac);
		if (hs->proof.magic != WEFT_HS_MAGIC || !weft_mac_equal(mac, hs->proof.mac))
			return refuse(hs, "failed authentication (it does not hold the job's key)");
		weft_hs_clear(hs);
		hs->welcome.magic = WEFT_HS_WELCOME_MAGIC;
		hs->phase = WEFT_HS_SEND_WELCOME;
		/* fall through */
	case WEFT_HS_SEND_WELCOME:
		if (!move(hs, &hs->welcome, sizeof(hs->welcome), true))
			return stalled(hs, "admitting it");
		hs->phase = WEFT_HS_DONE;
		return WEFT_HS_OK;
	default: return hs->phase == WEFT_HS_DONE ? WEFT_HS_OK : WEFT_HS_REFUSED;
	}
}

enum weft_hs_result weft_hs_step(struct weft_hs *hs)
{
	bool connector = hs->phase <= WEFT_HS_RECV_WELCOME;
	return connector ? connector_step(hs) : listener_step(hs);
}

short weft_hs_events(const struct weft_hs *hs)
{
	switch (hs->phase) {
	case WEFT_HS_SEND_HELLO:
	case WEFT_HS_SEND_PROOF:
	case WEFT_HS_SEND_CHALLENGE:
	case WEFT_HS_SEND_WELCOME: return POLLOUT;
	default: return POLLIN;
	}
}

bool weft_hs_droppable(const struct weft_hs *hs)
{
	return hs->phase != WEFT_HS_SEND_WELCOME && hs->phase != WEFT_HS_DONE;
}

bool weft_hs_drop_first(const struct weft_hs *a, double a_since, const struct weft_hs *b,
			double b_since)
{
	bool a_silent = a->phase == WEFT_HS_RECV_HELLO, b_silent = b->phase == WEFT_HS_RECV_HELLO;
	if (a_silent != b_silent)
		return a_silent;
	return a_since < b_since;
}

void weft_hs_clear(struct weft_hs *hs)
{
	weft_wipe(&hs->key, sizeof(hs->key));
}

int weft_hs_max_pending(void)
{
	long v = 0;
	if (weft_setting_long("WEFT_MAX_PENDING", &v) && v >= 1 && v <= 65536)
		return (int)v;
	weft_log(WEFT_LOG_WARN, WEFT_SUB_NET, "WEFT_MAX_PENDING=%s: expected 1 to 65536; using 64",
		 weft_setting_str("WEFT_MAX_PENDING"));
	return 64;
}

double weft_hs_timeout_s(void)
{
	double v = 0;
	if (weft_setting_double("WEFT_HANDSHAKE_TIMEOUT", &v) && v > 0)
		return v;
	weft_log(WEFT_LOG_WARN, WEFT_SUB_NET,
		 "WEFT_HANDSHAKE_TIMEOUT=%s: expected a positive number of seconds; using 5",
		 weft_setting_str("WEFT_HANDSHAKE_TIMEOUT"));
	return 5;
}
