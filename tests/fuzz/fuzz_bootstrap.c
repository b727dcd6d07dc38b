/*
 * fuzz_bootstrap.c — libFuzzer target: the bootstrap root
 * (bootstrap/bootstrap_root*.c), its door and its frame reader, over a
 * real connection on loopback. Each input is what one connection sends a
 * root listening on 127.0.0.1. The first byte chooses:
 *   even  the rest is sent as it is (the root's handshake sees it);
 *   odd   the connection first makes a real handshake with the job's key,
 *         as rank data[1] of data[2] ranks (the relay port data[3..4],
 *         never 0), so that the fuzzer reaches the join, the allgathers
 *         and their checks; the rest follows as frames.
 * A root whose job ended (it closes its door) is replaced by a new one;
 * each lives 2 s at most after its job failed, so that they do not pile up.
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
#include "util/handshake.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct weft_key fuzz_key;
static struct weft_uid root;
static bool have_root;

static bool start_root(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct weft_err err = {0};
	setenv("WEFT_DEBUG", "NONE", 1);
	weft_key_from_u64(&fuzz_key, 0x0123456789abcdefull);
	have_root = weft_bootstrap_root_start((struct sockaddr *)&a, sizeof(a), &fuzz_key, 2, &root,
					      &err) == WEFT_SUCCESS;
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

/* The connector's side of the handshake on blocking socket @p fd, with a
 * time limit: true if the root let it in. */
static bool handshake(int fd, const uint8_t *h, size_t n)
{
	struct join join = {.nranks = n > 1 ? h[1] : 1,
			    .relay_port = n > 3 ? (uint32_t)(h[2] | h[3] << 8) : 9};
	struct weft_err err = {0};
	struct weft_hs hs;
	enum weft_hs_result r;
	if (join.relay_port == 0)
		join.relay_port = 9; /* the root never connects to it */
	if (weft_hs_connect(&hs, fd, &fuzz_key, WEFT_HS_ROOT, NULL, n > 0 ? h[0] : 0, -1, &join,
			    sizeof(join), &err) != WEFT_SUCCESS)
		return false;
	while ((r = weft_hs_step(&hs)) == WEFT_HS_AGAIN) {
		struct pollfd p = {.fd = fd, .events = weft_hs_events(&hs)};
		if (poll(&p, 1, 1000) <= 0)
			break;
	}
	weft_hs_clear(&hs);
	return r == WEFT_HS_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	bool real = data[0] & 1;
	data++;
	size--;
	int fd = connect_root();
	if (fd < 0)
		return 0;
	if (real) {
		size_t skip = size < 4 ? size : 4;
		if (!handshake(fd, data, size)) {
			close(fd);
			return 0;
		}
		data += skip;
		size -= skip;
	}
	(void)send(fd, data, size, MSG_NOSIGNAL);
	shutdown(fd, SHUT_WR);
	/* Let the root read it and answer: up to 5 ms, or its close. */
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char buf[4096];
	while (poll(&p, 1, 5) > 0 && recv(fd, buf, sizeof(buf), 0) > 0)
		;
	close(fd);
	return 0;
}
