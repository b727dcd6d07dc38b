/*
 * fuzz_bootstrap.c — libFuzzer target: the bootstrap root's frame reader
 * (bootstrap/bootstrap_root*.c), over a real connection on loopback.
 * Each input is a byte stream sent to a root listening on 127.0.0.1; when
 * the first byte is odd, every HELLO frame found at a frame boundary gets
 * the right magic and secret, so that the fuzzer gets past the secret and
 * reaches the join, the allgathers and their checks. A root whose job ended
 * (it closes its door) is replaced by a new one.
 */
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/bootstrap_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_SECRET 0x0123456789abcdefull

static struct weft_uid root;
static bool have_root;

static bool start_root(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct weft_err err = {0};
	have_root = weft_bootstrap_root_start((struct sockaddr *)&a, sizeof(a), FUZZ_SECRET, 3600,
					      &root, &err) == WEFT_SUCCESS;
	return have_root;
}

static int connect_root(void)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		if (!have_root && !start_root())
			return -1;
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -1;
		if (connect(fd, &root.addr.sa, root.addr_len) == 0)
			return fd;
		close(fd);
		have_root = false; /* its job is over: its door is closed */
	}
	return -1;
}

static void patch_hellos(uint8_t *s, size_t size)
{
	size_t off = 0;
	while (off + sizeof(struct frame_hdr) <= size) {
		struct frame_hdr h;
		memcpy(&h, s + off, sizeof(h));
		off += sizeof(h);
		if (h.type == FRAME_HELLO && h.len == sizeof(struct hello) &&
		    off + sizeof(struct hello) <= size) {
			struct hello he;
			memcpy(&he, s + off, sizeof(he));
			he.magic = WEFT_UID_MAGIC;
			he.secret = FUZZ_SECRET;
			he.version = WEFT_UID_VERSION;
			if (he.relay_port == 0 || he.relay_port > 65535)
				he.relay_port = 9; /* the root never connects to it */
			memcpy(s + off, &he, sizeof(he));
		}
		off += h.len < size - off ? (size_t)h.len : size - off;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t *s = malloc(size);
	if (!s)
		return 0;
	memcpy(s, data + 1, size - 1);
	if (data[0] & 1)
		patch_hellos(s, size - 1);
	int fd = connect_root();
	if (fd >= 0) {
		(void)send(fd, s, size - 1, MSG_NOSIGNAL);
		shutdown(fd, SHUT_WR);
		/* Let the root read it and answer: up to 5 ms, or its close. */
		struct pollfd p = {.fd = fd, .events = POLLIN};
		char buf[4096];
		while (poll(&p, 1, 5) > 0 && recv(fd, buf, sizeof(buf), 0) > 0)
			;
		close(fd);
	}
	free(s);
	return 0;
}
