/*
 * fuzz_bootstrap_rank.c — libFuzzer target: the rank side of the bootstrap
 * (bootstrap/bootstrap_rank*.c) reading what a root sends. Each input
 * is the byte stream a root on 127.0.0.1 sends to rank 0 of a 1-rank job
 * (rank 0's relay parent is always the root, so nothing in the input can
 * make the rank connect anywhere else) after the handshake, which this
 * root makes properly with the job's key; the rank joins,
 * allgathers 8 bytes and leaves a barrier. The first byte chooses how
 * much of the stream is made well-formed, so that the fuzzer reaches the
 * READY checks, the GATHER frame's checks and the inflate of its result:
 *   0  the rest as it is
 *   1  a valid READY, then a GATHER #0 header over the rest (not zlib)
 *   2  a valid READY, a GATHER #0 of the rest's first 8 bytes deflated,
 *      then the rest as it is (the barrier's frame, or garbage)
 */
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/bootstrap_wire.h"
#include "util/handshake.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int listen_fd = -1;
static struct weft_uid uid;

static bool setup(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);

	if (listen_fd >= 0)
		return true;
	setenv("WEFT_DEBUG", "NONE", 1);
	listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(listen_fd, 4) < 0 || getsockname(listen_fd, (struct sockaddr *)&a, &len) < 0)
		abort();
	uid.magic = WEFT_UID_MAGIC;
	uid.version = WEFT_UID_VERSION;
	weft_key_from_u64(&uid.key, 0x0123456789abcdefull);
	uid.addr_len = sizeof(a);
	memcpy(&uid.addr.in4, &a, sizeof(a));
	return true;
}

static void *rank_main(void *arg)
{
	struct weft_bootstrap *bs = NULL;
	struct weft_err err = {0};
	unsigned char block[8] = {1, 2, 3, 4, 5, 6, 7, 8};

	(void)arg;
	if (weft_bootstrap_join(&uid, 0, 1, 0.5, &bs, &err) == WEFT_SUCCESS) {
		if (weft_bootstrap_allgather(bs, block, sizeof(block), &err) == WEFT_SUCCESS)
			(void)weft_bootstrap_barrier(bs, &err);
		weft_bootstrap_close(bs);
	}
	return NULL;
}

/* The root's side of the handshake on blocking socket @p fd, with a time
 * limit: true if the rank proved the key. */
static bool root_handshake(int fd)
{
	struct root_answer answer = {{0x5a}};
	struct weft_err err = {0};
	struct weft_hs hs;
	enum weft_hs_result r;

	weft_hs_accept(&hs, fd);
	for (;;) {
		r = weft_hs_step(&hs);
		if (r == WEFT_HS_HELLO) {
			if (weft_hs_answer(&hs, &uid.key, -1, &answer, sizeof(answer), &err) !=
			    WEFT_SUCCESS)
				break;
			continue;
		}
		if (r != WEFT_HS_AGAIN)
			break;
		struct pollfd p = {.fd = fd, .events = weft_hs_events(&hs)};
		if (poll(&p, 1, 1000) <= 0)
			break;
	}
	weft_hs_clear(&hs);
	return r == WEFT_HS_OK;
}

static void put(unsigned char *buf, size_t *len, const void *p, size_t n)
{
	memcpy(buf + *len, p, n);
	*len += n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned char *out;
	size_t len = 0;
	pthread_t tid;
	int mode, fd;

	if (size < 1 || !setup())
		return 0;
	mode = data[0] % 3;
	data++;
	size--;
	out = malloc(size + 256);
	if (!out)
		return 0;
	if (mode > 0) {
		struct frame_hdr h = {.type = FRAME_READY, .len = sizeof(struct ready)};
		struct ready r = {.fanout = 1 + (size ? data[0] % 8 : 0)};

		put(out, &len, &h, sizeof(h));
		put(out, &len, &r, sizeof(r));
	}
	if (mode == 1) {
		struct frame_hdr h = {.type = FRAME_GATHER, .seq = 0, .len = size};

		put(out, &len, &h, sizeof(h));
	} else if (mode == 2) {
		unsigned char raw[8] = {0}, packed[64];
		uLongf plen = sizeof(packed);
		size_t take = size < 8 ? size : 8;
		struct frame_hdr h = {.type = FRAME_GATHER, .seq = 0};

		memcpy(raw, data, take);
		if (compress2(packed, &plen, raw, sizeof(raw), 1) != Z_OK)
			abort();
		h.len = plen;
		put(out, &len, &h, sizeof(h));
		put(out, &len, packed, plen);
		data += take;
		size -= take;
	}
	put(out, &len, data, size);

	if (pthread_create(&tid, NULL, rank_main, NULL) != 0)
		abort();
	{
		struct pollfd l = {.fd = listen_fd, .events = POLLIN};

		fd = poll(&l, 1, 2000) > 0 ? accept(listen_fd, NULL, NULL) : -1;
	}
	if (fd >= 0 && !root_handshake(fd)) {
		close(fd);
		fd = -1;
	}
	if (fd >= 0) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		char sink[4096];

		(void)send(fd, out, len, MSG_NOSIGNAL);
		shutdown(fd, SHUT_WR);
		/* What the rank sends back (its block, a goodbye) until it closes. */
		while (poll(&p, 1, 1000) > 0 && recv(fd, sink, sizeof(sink), 0) > 0)
			;
		close(fd);
	}
	pthread_join(tid, NULL);
	free(out);
	return 0;
}
