/*
 * stranger.h — what a process without the job's key can send to a Weft
 * listener, for the tests that check it is refused: garbage, silence, or
 * a well-formed handshake (util/handshake.h) made with the wrong key, whose
 * proof then fails. Header-only: the tests that need it include it.
 */
#ifndef WEFT_TEST_STRANGER_H
#define WEFT_TEST_STRANGER_H

#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/handshake.h"

enum stranger_kind {
	STRANGER_SILENT,    /* connects and says nothing */
	STRANGER_GARBAGE,   /* 104 bytes of 0xab where a hello goes */
	STRANGER_WRONG_KEY, /* the whole handshake, with a key of its own */
};

/* Connect to 127.0.0.1:@p port and act as @p kind, asking for @p role,
 * communicator @p id (NULL: zeros), as rank @p rank for @p peer with
 * @p payload. Returns the socket (left open for the caller to close), or
 * -1 if it could not connect. A wrong-key stranger reads the challenge
 * (at most 2 s) and answers it with a proof of its own key. */
static inline int stranger_dial(unsigned port, enum stranger_kind kind, enum weft_hs_role role,
				const unsigned char *id, int rank, int peer, const void *payload,
				size_t len)
{
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (const struct sockaddr *)&to, sizeof(to)) != 0) {
		close(fd);
		return -1;
	}
	if (kind == STRANGER_GARBAGE) {
		unsigned char garbage[sizeof(struct weft_hs_hello)];
		memset(garbage, 0xab, sizeof(garbage));
		if (send(fd, garbage, sizeof(garbage), MSG_NOSIGNAL) < 0) {
			close(fd);
			return -1;
		}
	}
	if (kind != STRANGER_WRONG_KEY)
		return fd;
	struct weft_key key;
	struct weft_hs hs;
	struct weft_err err = {0};
	memset(&key, 0x5a, sizeof(key));
	if (weft_hs_connect(&hs, fd, &key, role, id, rank, peer, payload, len, &err) !=
	    WEFT_SUCCESS) {
		close(fd);
		return -1;
	}
	if (send(fd, &hs.hello, sizeof(hs.hello), MSG_NOSIGNAL) != (ssize_t)sizeof(hs.hello))
		return fd;
	struct pollfd p = {.fd = fd, .events = POLLIN};
	size_t got = 0;
	while (got < sizeof(hs.challenge) && poll(&p, 1, 2000) > 0) {
		ssize_t n = recv(fd, (char *)&hs.challenge + got, sizeof(hs.challenge) - got, 0);
		if (n <= 0)
			return fd;
		got += (size_t)n;
	}
	/* It cannot check the listener's MAC, nor make its own: it sends one
	 * of its key anyway, which the listener must refuse. */
	struct weft_hs_proof proof = {.magic = WEFT_HS_MAGIC};
	weft_mac(&key, &hs.challenge, sizeof(hs.challenge), proof.mac);
	send(fd, &proof, sizeof(proof), MSG_NOSIGNAL);
	return fd;
}

#endif
