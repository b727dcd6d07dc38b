/*
 * attacks.c — what someone without the job's key sees and can do,
 * tried as an attacker would (each failed on the code that sent the
 * secret in its hellos and put it in segment names):
 *  - a process that binds the root's port before the root records all
 *    that ranks send it and answers as a root would: it gets no key
 *    material (searched for in every encoding: raw bytes, hex in both
 *    cases, base64; a 16-digit key's 64-bit value in both byte orders and
 *    the key derived from it), and every rank fails at once naming its
 *    address and "failed authentication";
 *  - /dev/shm listed again and again while a job over shared memory
 *    initialises and runs shows no name holding the key;
 *  - a rank's whole opening of a join, recorded by a relay between it and
 *    its root, replayed later to the same root and to another job's root:
 *    refused both times (a new challenge each time), and both jobs go on.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "harness.h"
#include "util/auth.h"
#include "util/handshake.h"

#define CAPTURE_MAX (1u << 16)

/* ---- looking for the key ---- */

static bool contains(const unsigned char *hay, size_t n, const void *needle, size_t len)
{
	for (size_t i = 0; len && i + len <= n; i++)
		if (memcmp(hay + i, needle, len) == 0)
			return true;
	return false;
}

static void to_hex(const unsigned char *b, size_t n, bool upper, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, upper ? "%02X" : "%02x", b[i]);
}

static void to_base64(const unsigned char *b, size_t n, char *out)
{
	static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t o = 0;
	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)b[i] << 16 | (i + 1 < n ? (unsigned)b[i + 1] << 8 : 0) |
			     (i + 2 < n ? b[i + 2] : 0);
		out[o++] = t[v >> 18 & 63];
		out[o++] = t[v >> 12 & 63];
		out[o++] = i + 1 < n ? t[v >> 6 & 63] : '=';
		out[o++] = i + 2 < n ? t[v & 63] : '=';
	}
	out[o] = '\0';
}

/* Does @p hay hold @p secret (@p len bytes) in any encoding? Which, in @p how. */
static bool holds_secret(const unsigned char *hay, size_t n, const unsigned char *secret,
			 size_t len, const char **how)
{
	char hex[2 * WEFT_KEY_BYTES + 1], b64[4 * WEFT_KEY_BYTES / 3 + 8];
	unsigned char rev[WEFT_KEY_BYTES];
	for (size_t i = 0; i < len; i++)
		rev[i] = secret[len - 1 - i];
	if ((*how = "raw bytes", contains(hay, n, secret, len)) ||
	    (*how = "reversed bytes", contains(hay, n, rev, len)))
		return true;
	to_hex(secret, len, false, hex);
	if ((*how = "lower-case hex", contains(hay, n, hex, strlen(hex))))
		return true;
	to_hex(secret, len, true, hex);
	if ((*how = "upper-case hex", contains(hay, n, hex, strlen(hex))))
		return true;
	to_base64(secret, len, b64);
	/* the last quantum may straddle: look for all but it */
	return (*how = "base64", contains(hay, n, b64, strlen(b64) - 4));
}

/* Every form a 64-hex key or a 16-hex secret can take. */
static const char *find_key(const unsigned char *hay, size_t n, const char *hexkey)
{
	static char why[96];
	struct weft_key key;
	struct weft_err err = {0};
	const char *how;
	ck_assert_int_eq(weft_key_parse(&key, hexkey, strlen(hexkey), "test", &err), WEFT_SUCCESS);
	if (holds_secret(hay, n, key.b, sizeof(key.b), &how)) {
		snprintf(why, sizeof(why), "the key, as %s", how);
		return why;
	}
	if (strlen(hexkey) == 16) {
		unsigned char raw[8];
		for (int i = 0; i < 8; i++)
			sscanf(hexkey + 2 * i, "%2hhx", &raw[i]);
		if (holds_secret(hay, n, raw, sizeof(raw), &how)) {
			snprintf(why, sizeof(why), "the 64-bit secret, as %s", how);
			return why;
		}
	}
	if (contains(hay, n, hexkey, strlen(hexkey)))
		return "the key's text";
	return NULL;
}

/* ---- 1. an impostor at the root's port ---- */

struct impostor {
	int lfd;
	unsigned port;
	int expect;
	unsigned char capture[CAPTURE_MAX];
	size_t got;
};

static void serve_one(struct impostor *im, int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	bool answered = false;
	size_t start = im->got;
	while (im->got < CAPTURE_MAX && poll(&p, 1, 3000) == 1) {
		ssize_t n = recv(fd, im->capture + im->got, CAPTURE_MAX - im->got, 0);
		if (n <= 0)
			break;
		im->got += (size_t)n;
		if (!answered && im->got - start >= sizeof(struct weft_hs_hello)) {
			/* A root's answer, as far as one can make it without the key. */
			struct weft_hs_challenge c = {
			    .magic = WEFT_HS_MAGIC, .version = WEFT_HS_VERSION, .rank = -1};
			struct weft_err err = {0};
			weft_random(c.nonce, sizeof(c.nonce), &err);
			weft_random(c.mac, sizeof(c.mac), &err);
			send(fd, &c, sizeof(c), MSG_NOSIGNAL);
			answered = true;
		}
	}
	close(fd);
}

static void *impostor_main(void *arg)
{
	struct impostor *im = arg;
	for (int k = 0; k < im->expect; k++) {
		struct pollfd p = {.fd = im->lfd, .events = POLLIN};
		if (poll(&p, 1, 8000) != 1)
			break;
		int fd = accept(im->lfd, NULL, NULL);
		if (fd >= 0)
			serve_one(im, fd);
	}
	return NULL;
}

struct verdict {
	weft_status_t status;
	double seconds;
	char msg[512];
};

/* A rank of a weft_comm_init_env job (as mpirun or a script starts one),
 * in a child; its verdict in @p out (shared). */
static pid_t start_env_rank(unsigned port, const char *key, int rank, struct verdict *out)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid)
		return pid;
	char root[32], r[8];
	snprintf(root, sizeof(root), "127.0.0.1:%u", port);
	snprintf(r, sizeof(r), "%d", rank);
	setenv("WEFT_ROOT", root, 1);
	setenv("WEFT_SECRET", key, 1);
	setenv("WEFT_RANK", r, 1);
	setenv("WEFT_NRANKS", "3", 1);
	setenv("WEFT_BOOTSTRAP_TIMEOUT", "5", 1);
	setenv("WEFT_SOCKET_IFNAME", "lo", 1);
	weft_comm_t comm = NULL;
	double t0 = harness_now();
	out->status = weft_comm_init_env(&comm, NULL);
	out->seconds = harness_now() - t0;
	snprintf(out->msg, sizeof(out->msg), "%s", weft_init_last_error());
	if (comm)
		weft_comm_destroy(comm);
	_exit(0);
}

static void impostor_round(const char *key)
{
	struct impostor *im =
	    mmap(NULL, sizeof(*im), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct verdict *v =
	    mmap(NULL, 2 * sizeof(*v), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert(im != MAP_FAILED && v != MAP_FAILED);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	im->lfd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_eq(bind(im->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(im->lfd, 8), 0);
	ck_assert_int_eq(getsockname(im->lfd, (struct sockaddr *)&a, &len), 0);
	im->port = ntohs(a.sin_port);
	im->expect = 2;
	/* The ranks first, while this process has no other thread (see
	 * start_join): their connections wait in the listener's backlog. */
	pid_t pids[2] = {start_env_rank(im->port, key, 1, &v[0]),
			 start_env_rank(im->port, key, 2, &v[1])};
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, impostor_main, im), 0);
	for (int i = 0; i < 2; i++)
		waitpid(pids[i], NULL, 0);
	pthread_join(t, NULL);
	close(im->lfd);
	char where[32];
	snprintf(where, sizeof(where), "127.0.0.1:%u", im->port);
	for (int i = 0; i < 2; i++) {
		ck_assert_msg(v[i].status != WEFT_SUCCESS, "rank %d joined an impostor", i + 1);
		ck_assert_msg(strstr(v[i].msg, where) && strstr(v[i].msg, "failed authentication"),
			      "rank %d: %s", i + 1, v[i].msg);
		ck_assert_msg(v[i].seconds < 3, "rank %d took %.1f s to refuse", i + 1,
			      v[i].seconds);
	}
	ck_assert_msg(im->got >= 2 * sizeof(struct weft_hs_hello), "captured %zu bytes", im->got);
	const char *found = find_key(im->capture, im->got, key);
	ck_assert_msg(!found, "the impostor's capture holds %s", found ? found : "");
	munmap(im, sizeof(*im));
	munmap(v, 2 * sizeof(*v));
}

START_TEST(impostor_root_learns_nothing)
{
	impostor_round("00112233445566778899aabbccddeeff0123456789abcdef0f1e2d3c4b5a6978");
	impostor_round("0123456789abcdef"); /* a key as scripts had them */
}
END_TEST

/* ---- 2. /dev/shm while a job initialises and runs ---- */

#define NAMES_MAX 4096

struct names {
	_Atomic int stop;
	int n;
	char name[NAMES_MAX][260];
	char key_hex[2 * WEFT_KEY_BYTES + 1];
};

static void scan_devshm(struct names *nm)
{
	while (!nm->stop) {
		DIR *d = opendir("/dev/shm");
		struct dirent *e;
		while (d && (e = readdir(d)))
			if (strncmp(e->d_name, "weft", 4) == 0 && nm->n < NAMES_MAX) {
				bool seen = false;
				for (int i = 0; i < nm->n && !seen; i++)
					seen = strcmp(nm->name[i], e->d_name) == 0;
				if (!seen)
					snprintf(nm->name[nm->n++], sizeof(nm->name[0]), "%s",
						 e->d_name);
			}
		if (d)
			closedir(d);
		usleep(200);
	}
}

static int keep_key(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	struct names *nm = arg;
	struct weft_uid uid;
	memcpy(&uid, id->internal, sizeof(uid));
	if (rank == 0)
		to_hex(uid.key.b, sizeof(uid.key.b), false, nm->key_hex);
	return 0;
}

static int shm_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	float x[256];
	for (int k = 0; k < 20; k++) {
		for (int i = 0; i < 256; i++)
			x[i] = (float)rank;
		weft_status_t st =
		    weft_allreduce(WEFT_IN_PLACE, x, 256, WEFT_FLOAT32, WEFT_SUM, comm);
		if (st != WEFT_SUCCESS)
			return harness_fail_status(comm, st, "allreduce");
	}
	return 0;
}

START_TEST(devshm_names_hold_no_key)
{
	struct names *nm =
	    mmap(NULL, sizeof(*nm), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert(nm != MAP_FAILED);
	memset(nm, 0, sizeof(*nm));
	pid_t scanner = fork();
	ck_assert_int_ge(scanner, 0);
	if (scanner == 0) {
		scan_devshm(nm);
		_exit(0);
	}
	static const char *const env[] = {"WEFT_TRANSPORTS=shm", NULL};
	struct harness_job job = {.nranks = 3,
				  .env = env,
				  .body = shm_body,
				  .arg = nm,
				  .timeout_s = 60,
				  .before_init = keep_key};
	struct harness_result res;
	harness_run_job(&job, &res);
	nm->stop = 1;
	waitpid(scanner, NULL, 0);
	ck_assert_msg(res.ok, "%s", res.summary);
	ck_assert_msg(nm->n > 0, "the scanner saw no segment: it proves nothing");
	for (int i = 0; i < nm->n; i++) {
		const char *found =
		    find_key((const unsigned char *)nm->name[i], strlen(nm->name[i]), nm->key_hex);
		ck_assert_msg(!found, "/dev/shm/%s holds %s", nm->name[i], found ? found : "");
	}
	munmap(nm, sizeof(*nm));
}
END_TEST

/* ---- 3. a recorded opening, replayed ---- */

struct relay {
	int lfd;
	unsigned port;
	struct sockaddr_in root;
	unsigned char rec[1024]; /* what the rank sent */
	size_t got;
	_Atomic int done;
};

/* One connection relayed both ways until either side closes. */
static void *relay_main(void *arg)
{
	struct relay *r = arg;
	int a = accept(r->lfd, NULL, NULL);
	int b = socket(AF_INET, SOCK_STREAM, 0);
	if (a < 0 || connect(b, (struct sockaddr *)&r->root, sizeof(r->root)) != 0)
		return NULL;
	struct pollfd p[2] = {{.fd = a, .events = POLLIN}, {.fd = b, .events = POLLIN}};
	char buf[65536];
	while (!r->done && poll(p, 2, 200) >= 0) {
		for (int s = 0; s < 2; s++) {
			if (!p[s].revents)
				continue;
			ssize_t n = recv(p[s].fd, buf, sizeof(buf), 0);
			if (n <= 0)
				goto out;
			if (s == 0 && r->got + (size_t)n <= sizeof(r->rec)) {
				memcpy(r->rec + r->got, buf, (size_t)n);
				r->got += (size_t)n;
			}
			send(p[1 - s].fd, buf, (size_t)n, MSG_NOSIGNAL);
		}
	}
out:
	close(a);
	close(b);
	return NULL;
}

/* A rank that joins and passes a barrier, in a process of its own made by
 * fork and exec of this program (main's --join form), never by fork alone:
 * this process has the roots' and the relay's threads by then, and a child
 * forked from a threaded process inherits every lock one of them held at
 * that instant (ASan's allocator's, stdio's, the library's) with no thread
 * to release it; under ASan such a rank hung at its first malloc, and its
 * job waited for it. The arguments are made before the fork: between fork
 * and exec only async-signal-safe calls. */
static pid_t start_join(const struct weft_uid *uid, int rank, int nranks)
{
	char hex[2 * sizeof(*uid) + 1], r[16], n[16];
	char *argv[] = {"attacks", "--join", hex, r, n, NULL};
	const unsigned char *b = (const unsigned char *)uid;
	for (size_t i = 0; i < sizeof(*uid); i++)
		snprintf(hex + 2 * i, 3, "%02x", b[i]);
	snprintf(r, sizeof(r), "%d", rank);
	snprintf(n, sizeof(n), "%d", nranks);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	return pid;
}

/* main's --join UID RANK NRANKS: one rank, as start_join started it. */
static int join_main(char **argv)
{
	struct weft_uid uid;
	unsigned char *b = (unsigned char *)&uid;
	int rank = atoi(argv[3]), nranks = atoi(argv[4]);
	if (strlen(argv[2]) != 2 * sizeof(uid))
		return 126;
	for (size_t i = 0; i < sizeof(uid); i++)
		if (sscanf(argv[2] + 2 * i, "%2hhx", &b[i]) != 1)
			return 126;
	struct weft_bootstrap *bs = NULL;
	struct weft_err err = {0};
	int ok = weft_bootstrap_join(&uid, rank, nranks, 10, &bs, &err) == WEFT_SUCCESS &&
		 weft_bootstrap_barrier(bs, &err) == WEFT_SUCCESS;
	if (!ok)
		fprintf(stderr, "rank %d: %s\n", rank, err.msg);
	weft_bootstrap_close(bs);
	return ok ? 0 : 1;
}

/* Replay @p rec to @p port: the listener must answer with a challenge and
 * then close, never accept the join. */
static void replay_refused(unsigned port, const unsigned char *rec, size_t len)
{
	struct sockaddr_in to = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&to, sizeof(to)), 0);
	ck_assert_int_eq(send(fd, rec, len, MSG_NOSIGNAL), (ssize_t)len);
	unsigned char in[4096];
	size_t got = 0;
	struct pollfd p = {.fd = fd, .events = POLLIN};
	while (poll(&p, 1, 8000) == 1) {
		ssize_t n = recv(fd, in + got, sizeof(in) - got, 0);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	ck_assert_msg(got == sizeof(struct weft_hs_challenge),
		      "the replay got %zu bytes back (a challenge is %zu; more is a join)", got,
		      sizeof(struct weft_hs_challenge));
}

START_TEST(recorded_opening_replayed)
{
	struct weft_err err = {0};
	struct weft_key k1, k2;
	weft_random(&k1, sizeof(k1), &err);
	weft_random(&k2, sizeof(k2), &err);
	struct sockaddr_in lo = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct weft_uid uid, uid2;
	ck_assert_int_eq(
	    weft_bootstrap_root_start((struct sockaddr *)&lo, sizeof(lo), &k1, 20, &uid, &err),
	    WEFT_SUCCESS);
	/* rank 0 joins through a relay that records it */
	struct relay *r = calloc(1, sizeof(*r));
	socklen_t len = sizeof(lo);
	r->lfd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_eq(bind(r->lfd, (struct sockaddr *)&lo, sizeof(lo)), 0);
	ck_assert_int_eq(listen(r->lfd, 4), 0);
	struct sockaddr_in ra;
	ck_assert_int_eq(getsockname(r->lfd, (struct sockaddr *)&ra, &len), 0);
	memcpy(&r->root, &uid.addr.in4, sizeof(r->root));
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, relay_main, r), 0);
	struct weft_uid via = uid;
	memcpy(&via.addr.in4, &ra, sizeof(ra));
	pid_t pids[3] = {start_join(&via, 0, 3), start_join(&uid, 1, 3), 0};
	for (int i = 0;
	     i < 200 && r->got < sizeof(struct weft_hs_hello) + sizeof(struct weft_hs_proof); i++)
		usleep(10000);
	size_t opening = sizeof(struct weft_hs_hello) + sizeof(struct weft_hs_proof);
	ck_assert_msg(r->got >= opening, "recorded %zu bytes of the rank's opening", r->got);
	/* the same job, later: rank 2 has not joined, the door is open */
	replay_refused(ntohs(uid.addr.in4.sin_port), r->rec, opening);
	/* another job's root */
	ck_assert_int_eq(
	    weft_bootstrap_root_start((struct sockaddr *)&lo, sizeof(lo), &k2, 20, &uid2, &err),
	    WEFT_SUCCESS);
	replay_refused(ntohs(uid2.addr.in4.sin_port), r->rec, opening);
	/* both jobs go on */
	pids[2] = start_join(&uid, 2, 3);
	pid_t other = start_join(&uid2, 0, 1);
	for (int i = 0; i < 3; i++) {
		int st = 0;
		waitpid(pids[i], &st, 0);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d of the job failed",
			      i);
	}
	int st = 0;
	waitpid(other, &st, 0);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the other job failed");
	r->done = 1;
	pthread_join(t, NULL);
	close(r->lfd);
	free(r);
}
END_TEST

int main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[1], "--join") == 0)
		_exit(join_main(argv)); /* as the forked ranks did: no exit handlers */
	Suite *s = suite_create("attacks");
	TCase *tc = tcase_create("attacks");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, impostor_root_learns_nothing);
	tcase_add_test(tc, devshm_names_hold_no_key);
	tcase_add_test(tc, recorded_opening_replayed);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
