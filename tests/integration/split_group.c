/*
 * split_group.c — weft_comm_split, concurrent operations on a parent
 * and its children, and groups of sends and receives.
 *
 * Split: colours by rank % 2 and by rank < k, keys that reverse the order,
 * equal keys (ordered by parent rank), WEFT_SPLIT_NOCOLOR (NULL child), a
 * nested split, a child of one rank; each child's size and ranks, and its
 * allgather (which shows the order of its members) and allreduce are
 * checked; the parent keeps working while its children live; a negative
 * colour or a NULL newcomm is an invalid argument. Log lines written after a
 * split (whose child ranks differ from the parent's) still carry the
 * parent's rank: a child's init does not take the process's log rank.
 *
 * Concurrency: non-blocking allreduces and allgathers posted on the parent
 * and on two children at once, with different data, posted and completed
 * in a different order every round (blocking waits in one order on every
 * rank, or weft_test polling in an order that differs between ranks): no
 * result may carry another operation's data. A separate case waits with
 * weft_wait in opposite orders on odd and even ranks (WEFT_TIMEOUT=5): a
 * wait on one communicator must not starve the others.
 *
 * Groups: blocking send and receive both ways between partners inside a
 * group (must not deadlock), with every peer, small and > 1 MiB (the shm
 * single-copy path); a ring shift with isend/irecv; two messages to one
 * peer matched in call order; a collective in a group with sends; nested
 * groups (only the outermost end starts anything: a large send recorded in
 * an inner group would hang if the inner end started it); weft_wait on a
 * request whose group has not ended and weft_group_end without a start are
 * invalid arguments; bad peers and buffers.
 *
 * Mismatch: a send and a receive of different lengths fail on both sides,
 * with WEFT_TIMEOUT=10, long before that timeout.
 *
 * Over the transport the suite runs with (tests/lib/integ.h): shm (4, 5, 8
 * ranks and fewer) and socket (4 ranks; 2 and 3 for groups). Its cases:
 * "split" (splits and the concurrent operations) and "groups" (groups and
 * the mismatch).
 */
#include <check.h>
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "integ.h"
#include "util/log.h"

#define JOB_TIMEOUT_S 90.0
#define MAX_RANKS     HARNESS_MAX_RANKS

static bool mentions(const char *msg, const char *word)
{
	if (!msg)
		return false;
	for (const char *p = msg; *p; p++) {
		size_t k = 0;
		while (word[k] && tolower((unsigned char)p[k]) == tolower((unsigned char)word[k]))
			k++;
		if (!word[k])
			return true;
	}
	return false;
}

static int expect_invalid(weft_comm_t comm, weft_status_t st, const char *call, const char *word)
{
	const char *msg = comm ? weft_comm_last_error(comm) : weft_init_last_error();
	if (st != WEFT_ERR_INVALID_ARG)
		return harness_fail(
		    "%s: returned %s (%d), expected invalid argument; message \"%s\"", call,
		    weft_status_string(st), (int)st, msg);
	if (!mentions(msg, word))
		return harness_fail("%s: message \"%s\" does not name '%s'", call, msg, word);
	return 0;
}

/* ================= split ================= */

/* How one split assigns colours and keys to the n ranks of a communicator. */
enum scheme {
	SCHEME_PARITY_REVERSED, /* colour rank % 2, key n - rank: reverses the order */
	SCHEME_LOW_HIGH,	/* colour rank < k (k = n / 2), equal keys: parent order */
	SCHEME_NOCOLOR_LAST,	/* the last rank NOCOLOR, the rest one colour, key rank */
	SCHEME_ALL_REVERSED,	/* one colour, key -rank: the whole communicator reversed */
	SCHEME_ONLY_FIRST,	/* rank 0 alone in a child; the rest NOCOLOR */
};

static const char *const scheme_names[] = {
    [SCHEME_PARITY_REVERSED] = "colour rank%2, reversed keys",
    [SCHEME_LOW_HIGH] = "colour rank<n/2, equal keys",
    [SCHEME_NOCOLOR_LAST] = "last rank NOCOLOR",
    [SCHEME_ALL_REVERSED] = "one colour, reversed keys",
    [SCHEME_ONLY_FIRST] = "rank 0 alone, the rest NOCOLOR",
};

static void scheme_assign(enum scheme s, int n, int *color, int *key)
{
	for (int r = 0; r < n; r++) {
		switch (s) {
		case SCHEME_PARITY_REVERSED:
			color[r] = r % 2;
			key[r] = n - r;
			break;
		case SCHEME_LOW_HIGH:
			color[r] = r < n / 2 ? 3 : 11;
			key[r] = 5;
			break;
		case SCHEME_NOCOLOR_LAST:
			color[r] = r == n - 1 ? WEFT_SPLIT_NOCOLOR : 4;
			key[r] = r;
			break;
		case SCHEME_ALL_REVERSED:
			color[r] = 0;
			key[r] = -r;
			break;
		case SCHEME_ONLY_FIRST:
			color[r] = r == 0 ? 0 : WEFT_SPLIT_NOCOLOR;
			key[r] = 0;
			break;
		}
	}
}

/* Members of @p me's colour, in their new rank order (key, then rank). */
static int members_of(int n, const int *color, const int *key, int me, int *out)
{
	int m = 0;
	for (int r = 0; r < n; r++)
		if (color[r] == color[me])
			out[m++] = r;
	for (int i = 1; i < m; i++) /* insertion sort by (key, rank) */
		for (int j = i; j > 0 && (key[out[j]] < key[out[j - 1]] ||
					  (key[out[j]] == key[out[j - 1]] && out[j] < out[j - 1]));
		     j--) {
			int t = out[j];
			out[j] = out[j - 1];
			out[j - 1] = t;
		}
	return m;
}

/* A communicator and who its ranks are: ids[r] is the job rank of rank r. */
struct group_view {
	weft_comm_t comm;
	int n, me;
	int ids[MAX_RANKS];
};

/* Allgather of each member's job rank pattern (shows the member order)
 * and an allreduce by new rank. */
static int check_traffic(const struct group_view *g, const char *what, unsigned salt)
{
	const size_t ag_count = 257, ar_count = 1001;
	int ret = 0;
	unsigned char *mine = malloc(ag_count * 4), *all = malloc(ag_count * 4 * (size_t)g->n);
	unsigned char *want = malloc(ag_count * 4 * (size_t)g->n);
	uint16_t in[1001], out[1001], exp[1001];
	if (!mine || !all || !want) {
		ret = harness_fail("out of memory");
		goto out_free;
	}
	harness_progress("%s: allgather", what);
	harness_ag_input(mine, ag_count, WEFT_INT32, g->ids[g->me], salt);
	for (int q = 0; q < g->n; q++)
		harness_ag_input(want + (size_t)q * ag_count * 4, ag_count, WEFT_INT32, g->ids[q],
				 salt);
	weft_status_t st = weft_allgather(mine, all, ag_count, WEFT_INT32, g->comm);
	char why[256];
	if (st != WEFT_SUCCESS) {
		ret = harness_fail_status(g->comm, st, "%s: allgather", what);
		goto out_free;
	}
	size_t bad =
	    harness_compare(all, want, ag_count * (size_t)g->n, WEFT_INT32, why, sizeof(why));
	if (bad != SIZE_MAX) {
		ret = harness_fail("%s: allgather: block %zu (expected job rank %d's): %s", what,
				   bad / ag_count, g->ids[bad / ag_count], why);
		goto out_free;
	}
	harness_progress("%s: allreduce", what);
	harness_ar_input(in, ar_count, WEFT_BFLOAT16, WEFT_AVG, g->me, g->n, salt);
	harness_ar_expected(exp, ar_count, WEFT_BFLOAT16, WEFT_AVG, g->n, salt);
	st = weft_allreduce(in, out, ar_count, WEFT_BFLOAT16, WEFT_AVG, g->comm);
	if (st != WEFT_SUCCESS)
		ret = harness_fail_status(g->comm, st, "%s: allreduce", what);
	else if (harness_compare(out, exp, ar_count, WEFT_BFLOAT16, why, sizeof(why)) != SIZE_MAX)
		ret = harness_fail("%s: allreduce bf16 avg: %s", what, why);
out_free:
	free(mine);
	free(all);
	free(want);
	return ret;
}

/* Split @p parent by @p s; check the child (or NULL) and its traffic.
 * On success *child is the view of the new communicator (comm NULL for
 * NOCOLOR), to destroy by the caller. */
static int split_and_check(const struct group_view *parent, enum scheme s, struct group_view *child,
			   unsigned salt)
{
	int color[MAX_RANKS], key[MAX_RANKS], members[MAX_RANKS];
	char what[160];
	snprintf(what, sizeof(what), "split of a %d-rank comm (%s)", parent->n, scheme_names[s]);
	scheme_assign(s, parent->n, color, key);
	memset(child, 0, sizeof(*child));
	harness_progress("%s", what);
	weft_comm_t newcomm = (weft_comm_t)(uintptr_t)1;
	weft_status_t st =
	    weft_comm_split(parent->comm, color[parent->me], key[parent->me], &newcomm);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(parent->comm, st, "%s", what);
	if (color[parent->me] == WEFT_SPLIT_NOCOLOR) {
		if (newcomm != NULL)
			return harness_fail("%s: WEFT_SPLIT_NOCOLOR got a non-NULL communicator",
					    what);
		return 0;
	}
	if (newcomm == NULL)
		return harness_fail("%s: success and a NULL communicator", what);
	child->comm = newcomm;
	child->n = members_of(parent->n, color, key, parent->me, members);
	for (int q = 0; q < child->n; q++) {
		child->ids[q] = parent->ids[members[q]];
		if (members[q] == parent->me)
			child->me = q;
	}
	int got_rank = -1, got_size = -1;
	weft_comm_rank(newcomm, &got_rank);
	weft_comm_size(newcomm, &got_size);
	if (got_rank != child->me || got_size != child->n)
		return harness_fail("%s: rank %d of %d, expected %d of %d", what, got_rank,
				    got_size, child->me, child->n);
	return check_traffic(child, what, salt);
}

static void view_destroy(struct group_view *v, int *ret)
{
	if (!v->comm)
		return;
	weft_status_t st = weft_comm_destroy(v->comm);
	if (st != WEFT_SUCCESS && !*ret)
		*ret = harness_fail("weft_comm_destroy(child): %s", weft_status_string(st));
	v->comm = NULL;
}

static void world_view(struct group_view *w, weft_comm_t comm, int rank, int nranks)
{
	w->comm = comm;
	w->n = nranks;
	w->me = rank;
	for (int r = 0; r < nranks; r++)
		w->ids[r] = r;
}

/* Every scheme (on 3 ranks some children have one rank), the parent in
 * use between them, children destroyed in between, and a nested split. */
static int body_split(weft_comm_t comm, int rank, int nranks, void *arg)
{
	struct group_view world, a = {0}, b = {0}, c = {0}, d = {0}, nested = {0};
	world_view(&world, comm, rank, nranks);
	int ret = 0;
	unsigned salt = 1;

	ret = split_and_check(&world, SCHEME_PARITY_REVERSED, &a, salt++);
	if (!ret)
		ret = check_traffic(&world, "parent after the first split", salt++);
	if (!ret)
		ret = split_and_check(&world, SCHEME_LOW_HIGH, &b, salt++);
	if (!ret)
		ret = split_and_check(&world, SCHEME_NOCOLOR_LAST, &c, salt++);
	/* Interleave: parent, children, parent, while all of them live. */
	if (!ret)
		ret = check_traffic(&world, "parent with three children alive", salt++);
	if (!ret)
		ret = check_traffic(&a, "parity child after later splits", salt++);
	salt++; /* the same on every rank, NOCOLOR ones included */
	if (!ret && c.comm)
		ret = check_traffic(&c, "NOCOLOR-split child after later splits", salt);
	if (!ret)
		ret = split_and_check(&world, SCHEME_ALL_REVERSED, &d, salt++);
	/* Nested: the reversed copy split by parity of its own ranks. */
	if (!ret)
		ret = split_and_check(&d, SCHEME_PARITY_REVERSED, &nested, salt++);
	if (!ret)
		ret = check_traffic(&world, "parent after a nested split", salt++);

	/* Bad arguments: local checks, every rank calls them. */
	if (!ret) {
		weft_comm_t nc = (weft_comm_t)(uintptr_t)1;
		ret |= expect_invalid(comm, weft_comm_split(comm, -5, 0, &nc),
				      "weft_comm_split(color -5)",
				      "weft_comm_split: color -5 is negative");
		if (nc != NULL)
			ret |= harness_fail("weft_comm_split(color -5): *newcomm not NULL");
		/* The parent is there: its last error says it, not the init one. */
		ret |= expect_invalid(comm, weft_comm_split(comm, 0, 0, NULL),
				      "weft_comm_split(newcomm NULL)",
				      "weft_comm_split: newcomm is NULL");
		ret |=
		    expect_invalid(NULL, weft_comm_split(NULL, 0, 0, &nc),
				   "weft_comm_split(comm NULL)", "weft_comm_split: comm is NULL");
		if (!ret)
			ret = check_traffic(&world, "parent after bad splits", salt++);
	}
	view_destroy(&nested, &ret);
	view_destroy(&a, &ret);
	view_destroy(&b, &ret);
	view_destroy(&c, &ret);
	/* The parent outlives its children, and a child its destroyed sibling. */
	if (!ret)
		ret = check_traffic(&d, "reversed child after its siblings were destroyed", salt++);
	view_destroy(&d, &ret);
	if (!ret)
		ret = check_traffic(&world, "parent after destroying every child", salt++);
	return ret;
}

/* One WARN line through weft_log with standard error sent to a file; the
 * line is read back into @p line. 0 on success. */
static int capture_log_line(char *line, size_t cap)
{
	char path[] = "/tmp/weft-split-log-XXXXXX";
	int fd = mkstemp(path), saved = dup(2);
	if (fd < 0 || saved < 0)
		return harness_fail("mkstemp/dup failed");
	unlink(path);
	fflush(stderr);
	dup2(fd, 2);
	weft_log(WEFT_LOG_WARN, WEFT_SUB_COLL, "split log-rank marker");
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	ssize_t n = pread(fd, line, cap - 1, 0);
	close(fd);
	line[n > 0 ? n : 0] = '\0';
	return 0;
}

/* The log rank after a split that reverses the ranks: the parent's (the
 * process's world rank), not the child's, while the child lives and after. */
static int body_log_rank(weft_comm_t comm, int rank, int nranks, void *arg)
{
	struct group_view world, rev = {0};
	world_view(&world, comm, rank, nranks);
	if (getenv("WEFT_DEBUG_FILE"))
		return 0; /* log lines go to that file, not to standard error */
	int ret = split_and_check(&world, SCHEME_ALL_REVERSED, &rev, 31);
	char want[32], line[512];
	int child_rank = rev.me;
	snprintf(want, sizeof(want), ":%d weft WARN COLL split", rank);
	for (int pass = 0; pass < 2 && !ret; pass++) {
		ret = capture_log_line(line, sizeof(line));
		if (!ret && !strstr(line, want))
			ret = harness_fail(
			    "log line %s the split (child rank %d): \"%s\", want \"%s\"",
			    pass ? "after destroying" : "while the child of", child_rank, line,
			    want);
		if (!pass)
			view_destroy(&rev, &ret);
	}
	view_destroy(&rev, &ret);
	return ret;
}

/* A child of one rank: rank 0 alone, the others NOCOLOR; then a split of
 * that one-rank child (on a one-rank job: a split of the job itself). */
static int body_split_one(weft_comm_t comm, int rank, int nranks, void *arg)
{
	struct group_view world, one = {0}, again = {0};
	world_view(&world, comm, rank, nranks);
	int ret = split_and_check(&world, SCHEME_ONLY_FIRST, &one, 21);
	if (!ret && one.comm)
		ret = split_and_check(&one, SCHEME_ALL_REVERSED, &again, 22);
	view_destroy(&again, &ret);
	view_destroy(&one, &ret);
	if (!ret)
		ret = check_traffic(&world, "parent after the one-rank child", 23);
	return ret;
}

/* ================= concurrency on parent and children ================= */

struct op_slot {
	weft_comm_t comm;
	const char *where;
	bool gather;
	weft_datatype_t dt;
	weft_op_t op;
	size_t count;
	int rank, n;
	unsigned salt;
	unsigned char *send, *recv, *want;
	size_t recv_bytes;
	weft_request_t req;
	bool done;
};

static bool slot_init(struct op_slot *s)
{
	size_t bytes = s->count * harness_dtype_size(s->dt);
	s->recv_bytes = s->gather ? bytes * (size_t)s->n : bytes;
	s->send = malloc(bytes);
	s->recv = malloc(s->recv_bytes);
	s->want = malloc(s->recv_bytes);
	if (!s->send || !s->recv || !s->want)
		return false;
	memset(s->recv, 0xcd, s->recv_bytes);
	if (s->gather) {
		harness_ag_input(s->send, s->count, s->dt, s->rank, s->salt);
		for (int q = 0; q < s->n; q++)
			harness_ag_input(s->want + (size_t)q * bytes, s->count, s->dt, q, s->salt);
	} else {
		harness_ar_input(s->send, s->count, s->dt, s->op, s->rank, s->n, s->salt);
		harness_ar_expected(s->want, s->count, s->dt, s->op, s->n, s->salt);
	}
	s->req = NULL;
	s->done = false;
	return true;
}

static void slot_fini(struct op_slot *s)
{
	free(s->send);
	free(s->recv);
	free(s->want);
	s->send = s->recv = s->want = NULL;
}

static weft_status_t slot_post(struct op_slot *s)
{
	harness_progress("post %s on the %s (salt %u)", s->gather ? "iallgather" : "iallreduce",
			 s->where, s->salt);
	if (s->gather)
		return weft_iallgather(s->send, s->recv, s->count, s->dt, s->comm, &s->req);
	return weft_iallreduce(s->send, s->recv, s->count, s->dt, s->op, s->comm, &s->req);
}

static int slot_check(const struct op_slot *s, int round)
{
	char why[256];
	weft_datatype_t dt = s->gather ? WEFT_UINT8 : s->dt;
	size_t n = s->gather ? s->recv_bytes : s->count;
	if (harness_compare(s->recv, s->want, n, dt, why, sizeof(why)) != SIZE_MAX)
		return harness_fail("round %d: %s on the %s (salt %u): %s", round,
				    s->gather ? "iallgather" : "iallreduce", s->where, s->salt,
				    why);
	return 0;
}

#define NCONC 6

static int body_concurrent(weft_comm_t comm, int rank, int nranks, void *arg)
{
	bool cross = arg != NULL;
	struct group_view world, par = {0}, rev = {0};
	world_view(&world, comm, rank, nranks);
	int ret = split_and_check(&world, SCHEME_PARITY_REVERSED, &par, 1);
	if (!ret)
		ret = split_and_check(&world, SCHEME_ALL_REVERSED, &rev, 2);
	for (int round = 0; round < 6 && !ret; round++) {
		/* Same collectives and sizes on purpose: only the tags keep them apart. */
		struct op_slot s[NCONC] = {
		    {.comm = comm,
		     .where = "parent",
		     .dt = WEFT_FLOAT32,
		     .op = WEFT_SUM,
		     .count = 262147},
		    {.comm = par.comm,
		     .where = "parity child",
		     .dt = WEFT_FLOAT32,
		     .op = WEFT_SUM,
		     .count = 262147},
		    {.comm = rev.comm,
		     .where = "reversed child",
		     .dt = WEFT_FLOAT32,
		     .op = WEFT_SUM,
		     .count = 262147},
		    {.comm = comm,
		     .where = "parent",
		     .gather = true,
		     .dt = WEFT_INT32,
		     .count = 4099},
		    {.comm = par.comm,
		     .where = "parity child",
		     .gather = true,
		     .dt = WEFT_INT32,
		     .count = 4099},
		    {.comm = rev.comm,
		     .where = "reversed child",
		     .dt = WEFT_INT32,
		     .op = WEFT_MAX,
		     .count = 4099},
		};
		const struct group_view *views[NCONC] = {&world, &par, &rev, &world, &par, &rev};
		for (int k = 0; k < NCONC; k++) {
			s[k].rank = views[k]->me;
			s[k].n = views[k]->n;
			s[k].salt = (unsigned)(round * NCONC + k + 3);
			if (!slot_init(&s[k]))
				ret = harness_fail("out of memory");
		}
		/* Post in an order that changes every round (the same on every
		 * rank: operations of one communicator must be called in the
		 * same order everywhere). */
		for (int j = 0; j < NCONC && !ret; j++) {
			int k = (j * (round % 2 ? 5 : 1) + round) % NCONC;
			weft_status_t st = slot_post(&s[k]);
			if (st != WEFT_SUCCESS)
				ret = harness_fail_status(s[k].comm, st, "round %d: post on the %s",
							  round, s[k].where);
		}
		if (!ret && round % 3 != 2) {
			/* Blocking waits: children first, or parent first; in the
			 * same order on every rank, or (cross) the opposite order
			 * on odd ranks. */
			bool backwards = (round % 3 == 0) != (cross && rank % 2);
			for (int j = 0; j < NCONC && !ret; j++) {
				int k = backwards ? NCONC - 1 - j : j;
				harness_progress("round %d: weft_wait slot %d on the %s", round, k,
						 s[k].where);
				weft_status_t st = weft_wait(&s[k].req);
				if (st != WEFT_SUCCESS)
					ret = harness_fail_status(s[k].comm, st,
								  "round %d: weft_wait on the %s",
								  round, s[k].where);
				s[k].done = true;
			}
		} else if (!ret) {
			/* weft_test polling, in an order that differs between ranks. */
			double deadline = harness_now() + 60;
			harness_progress("round %d: weft_test polling", round);
			for (int left = NCONC; left > 0 && !ret;) {
				for (int j = 0; j < NCONC && !ret; j++) {
					int k = (j + rank) % NCONC;
					if (rank % 2)
						k = NCONC - 1 - k;
					if (s[k].done)
						continue;
					weft_status_t st = weft_test(&s[k].req);
					if (st == WEFT_INPROGRESS)
						continue;
					if (st != WEFT_SUCCESS)
						ret = harness_fail_status(
						    s[k].comm, st, "round %d: weft_test on the %s",
						    round, s[k].where);
					s[k].done = true;
					left--;
				}
				if (!ret && harness_now() > deadline)
					ret = harness_fail(
					    "round %d: %d operations unfinished after 60 s", round,
					    left);
			}
		}
		for (int k = 0; k < NCONC && !ret; k++)
			ret = slot_check(&s[k], round);
		for (int k = 0; k < NCONC; k++)
			slot_fini(&s[k]);
	}
	view_destroy(&par, &ret);
	view_destroy(&rev, &ret);
	return ret;
}

/* ================= groups ================= */

/* Sender @p from's message to @p to, salted: bytes that differ per pair. */
static void pair_fill(unsigned char *buf, size_t bytes, int from, int to, unsigned salt)
{
	harness_ag_input(buf, bytes, WEFT_UINT8, from * 16 + to, salt);
}

static int pair_check(const unsigned char *got, size_t bytes, int from, int to, unsigned salt,
		      const char *what)
{
	unsigned char *want = malloc(bytes ? bytes : 1);
	if (!want)
		return harness_fail("out of memory");
	pair_fill(want, bytes, from, to, salt);
	char why[256];
	int ret = 0;
	if (harness_compare(got, want, bytes, WEFT_UINT8, why, sizeof(why)) != SIZE_MAX)
		ret = harness_fail("%s: message from rank %d (%zu bytes): %s", what, from, bytes,
				   why);
	free(want);
	return ret;
}

/* Blocking send then blocking receive with the partner (rank ^ 1), both
 * ways at once: only a group makes this legal. */
static int group_pair_exchange(weft_comm_t comm, int rank, int nranks, size_t bytes, unsigned salt)
{
	int partner = rank ^ 1;
	if (partner >= nranks)
		return 0;
	char what[96];
	snprintf(what, sizeof(what), "group: send+recv with rank %d, %zu bytes", partner, bytes);
	harness_progress("%s", what);
	unsigned char *out = malloc(bytes), *in = malloc(bytes);
	int ret = 0;
	if (!out || !in) {
		ret = harness_fail("out of memory");
		goto out_free;
	}
	pair_fill(out, bytes, rank, partner, salt);
	memset(in, 0xcd, bytes);
	weft_group_start();
	weft_status_t st = weft_send(out, bytes, WEFT_UINT8, partner, comm);
	weft_status_t st2 = weft_recv(in, bytes, WEFT_UINT8, partner, comm);
	weft_status_t st3 = weft_group_end();
	if (st != WEFT_SUCCESS || st2 != WEFT_SUCCESS || st3 != WEFT_SUCCESS)
		ret = harness_fail_status(comm,
					  st	? st
					  : st2 ? st2
						: st3,
					  "%s (send %d, recv %d, end %d)", what, (int)st, (int)st2,
					  (int)st3);
	else
		ret = pair_check(in, bytes, partner, rank, salt, what);
out_free:
	free(out);
	free(in);
	return ret;
}

/* Blocking send to and receive from every other rank, in one group:
 * sends first, in rank order, like an alltoall written by hand. */
static int group_all_peers(weft_comm_t comm, int rank, int nranks, size_t bytes, unsigned salt)
{
	if (nranks < 2)
		return 0;
	char what[96];
	snprintf(what, sizeof(what), "group: send+recv with every peer, %zu bytes", bytes);
	harness_progress("%s", what);
	unsigned char *out = malloc(bytes * (size_t)nranks), *in = malloc(bytes * (size_t)nranks);
	int ret = 0;
	if (!out || !in) {
		ret = harness_fail("out of memory");
		goto out_free;
	}
	weft_group_start();
	for (int p = 0; p < nranks; p++) {
		if (p == rank)
			continue;
		pair_fill(out + (size_t)p * bytes, bytes, rank, p, salt);
		weft_status_t st = weft_send(out + (size_t)p * bytes, bytes, WEFT_UINT8, p, comm);
		if (st != WEFT_SUCCESS && !ret)
			ret = harness_fail_status(comm, st, "%s: weft_send to %d", what, p);
	}
	for (int p = 0; p < nranks; p++) {
		if (p == rank)
			continue;
		memset(in + (size_t)p * bytes, 0xcd, bytes);
		weft_status_t st = weft_recv(in + (size_t)p * bytes, bytes, WEFT_UINT8, p, comm);
		if (st != WEFT_SUCCESS && !ret)
			ret = harness_fail_status(comm, st, "%s: weft_recv from %d", what, p);
	}
	weft_status_t st = weft_group_end();
	if (st != WEFT_SUCCESS && !ret)
		ret = harness_fail_status(comm, st, "%s: weft_group_end", what);
	for (int p = 0; p < nranks && !ret; p++)
		if (p != rank)
			ret = pair_check(in + (size_t)p * bytes, bytes, p, rank, salt, what);
out_free:
	free(out);
	free(in);
	return ret;
}

/* isend to the next rank, irecv from the previous, in a group; then the
 * requests are waited for (receive first). */
static int group_ring_shift(weft_comm_t comm, int rank, int nranks, size_t bytes, unsigned salt)
{
	if (nranks < 2)
		return 0;
	int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
	char what[96];
	snprintf(what, sizeof(what), "group: ring shift isend/irecv, %zu bytes", bytes);
	harness_progress("%s", what);
	unsigned char *out = malloc(bytes), *in = malloc(bytes);
	int ret = 0;
	if (!out || !in) {
		ret = harness_fail("out of memory");
		goto out_free;
	}
	pair_fill(out, bytes, rank, next, salt);
	memset(in, 0xcd, bytes);
	weft_request_t sreq = NULL, rreq = NULL;
	weft_group_start();
	weft_status_t st = weft_isend(out, bytes, WEFT_UINT8, next, comm, &sreq);
	weft_status_t st2 = weft_irecv(in, bytes, WEFT_UINT8, prev, comm, &rreq);
	weft_status_t st3 = weft_group_end();
	if (st || st2 || st3 || !sreq || !rreq) {
		ret = harness_fail_status(comm,
					  st	? st
					  : st2 ? st2
						: st3,
					  "%s: isend %d, irecv %d, end %d, requests %p %p", what,
					  (int)st, (int)st2, (int)st3, (void *)sreq, (void *)rreq);
		goto out_free;
	}
	if ((st = weft_wait(&rreq)) != WEFT_SUCCESS || (st = weft_wait(&sreq)) != WEFT_SUCCESS)
		ret = harness_fail_status(comm, st, "%s: weft_wait", what);
	else if (sreq || rreq)
		ret = harness_fail("%s: weft_wait left a request non-NULL", what);
	else
		ret = pair_check(in, bytes, prev, rank, salt, what);
out_free:
	free(out);
	free(in);
	return ret;
}

/* Two messages of different lengths to the same peer, in one group: the
 * receives match the sends in call order. Pairs (rank ^ 1). */
static int group_two_messages(weft_comm_t comm, int rank, int nranks, unsigned salt)
{
	int partner = rank ^ 1;
	if (partner >= nranks)
		return 0;
	const size_t len[2] = {400, 12000};
	unsigned char out[2][12000], in[2][12000];
	harness_progress("group: two messages to one peer");
	weft_group_start();
	for (int k = 0; k < 2; k++) {
		pair_fill(out[k], len[k], rank, partner, salt + (unsigned)k);
		weft_send(out[k], len[k], WEFT_UINT8, partner, comm);
	}
	for (int k = 0; k < 2; k++) {
		memset(in[k], 0xcd, len[k]);
		weft_recv(in[k], len[k], WEFT_UINT8, partner, comm);
	}
	weft_status_t st = weft_group_end();
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "group: two messages to one peer");
	int ret = 0;
	for (int k = 0; k < 2 && !ret; k++)
		ret = pair_check(in[k], len[k], partner, rank, salt + (unsigned)k,
				 k ? "second of two messages" : "first of two messages");
	return ret;
}

/* An allreduce and a partner exchange in one group. */
static int group_with_collective(weft_comm_t comm, int rank, int nranks, unsigned salt)
{
	int partner = rank ^ 1;
	bool paired = partner < nranks;
	float in[515], out[515], want[515];
	unsigned char sbuf[3000], rbuf[3000];
	harness_ar_input(in, 515, WEFT_FLOAT32, WEFT_SUM, rank, nranks, salt);
	harness_ar_expected(want, 515, WEFT_FLOAT32, WEFT_SUM, nranks, salt);
	pair_fill(sbuf, sizeof(sbuf), rank, partner, salt);
	harness_progress("group: allreduce + send/recv");
	weft_group_start();
	weft_status_t st = weft_allreduce(in, out, 515, WEFT_FLOAT32, WEFT_SUM, comm);
	if (paired) {
		weft_send(sbuf, sizeof(sbuf), WEFT_UINT8, partner, comm);
		weft_recv(rbuf, sizeof(rbuf), WEFT_UINT8, partner, comm);
	}
	weft_status_t end = weft_group_end();
	if (st != WEFT_SUCCESS || end != WEFT_SUCCESS)
		return harness_fail_status(comm, st ? st : end, "group: allreduce + send/recv");
	char why[256];
	if (harness_compare(out, want, 515, WEFT_FLOAT32, why, sizeof(why)) != SIZE_MAX)
		return harness_fail("group: allreduce in a group: %s", why);
	return paired ? pair_check(rbuf, sizeof(rbuf), partner, rank, salt,
				   "group: send/recv next to an allreduce")
		      : 0;
}

/* Nested groups: a large blocking send recorded in an inner group (its end
 * must start nothing: the receive it needs is only posted at the outer
 * end), an irecv whose weft_wait before the outer end is an error. */
static int group_nested(weft_comm_t comm, int rank, int nranks, unsigned salt)
{
	if (nranks < 2)
		return 0;
	const size_t bytes = (2u << 20) + 5;
	int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
	unsigned char *out = malloc(bytes), *in = malloc(bytes);
	int ret = 0;
	if (!out || !in) {
		ret = harness_fail("out of memory");
		goto out_free;
	}
	pair_fill(out, bytes, rank, next, salt);
	memset(in, 0xcd, bytes);
	harness_progress("nested groups: inner group with a blocking send");
	weft_group_start();
	weft_group_start();
	weft_status_t st = weft_send(out, bytes, WEFT_UINT8, next, comm);
	weft_status_t end = weft_group_end();
	if (st != WEFT_SUCCESS || end != WEFT_SUCCESS)
		ret = harness_fail_status(comm, st ? st : end,
					  "nested groups: inner send %d, inner end %d", (int)st,
					  (int)end);
	weft_request_t rreq = NULL;
	st = weft_irecv(in, bytes, WEFT_UINT8, prev, comm, &rreq);
	if (st != WEFT_SUCCESS && !ret)
		ret = harness_fail_status(comm, st, "nested groups: irecv");
	harness_progress("nested groups: weft_wait before the outer end");
	if (!ret) {
		ret = expect_invalid(comm, weft_wait(&rreq), "weft_wait before weft_group_end",
				     "weft_wait: the request's group has not ended");
		if (!rreq && !ret)
			ret = harness_fail("weft_wait before weft_group_end cleared the request");
	}
	harness_progress("nested groups: outer end");
	end = weft_group_end();
	if (end != WEFT_SUCCESS && !ret)
		ret = harness_fail_status(comm, end, "nested groups: outer weft_group_end");
	if (rreq) {
		st = weft_wait(&rreq);
		if (st != WEFT_SUCCESS && !ret)
			ret = harness_fail_status(comm, st,
						  "nested groups: weft_wait after the outer end");
	}
	if (!ret)
		ret = pair_check(in, bytes, prev, rank, salt, "nested groups");
out_free:
	free(out);
	free(in);
	return ret;
}

static int group_bad_input(weft_comm_t comm, int rank, int nranks)
{
	int ret = 0;
	char buf[16];
	weft_request_t req;
	harness_progress("group/p2p bad input");
	weft_status_t st = weft_group_end();
	if (st != WEFT_ERR_INVALID_ARG ||
	    !mentions(weft_init_last_error(), "weft_group_end without weft_group_start"))
		ret |= harness_fail("weft_group_end without start: %s (%d), message \"%s\"",
				    weft_status_string(st), (int)st, weft_init_last_error());
	char self_says[64], nranks_says[64], dtype_says[64];
	snprintf(self_says, sizeof(self_says), "weft_send: peer %d is this rank", rank);
	snprintf(dtype_says, sizeof(dtype_says), "weft_recv: invalid datatype %d",
		 (int)WEFT_DATATYPE_COUNT);
	snprintf(nranks_says, sizeof(nranks_says), "weft_recv: peer %d is not a rank", nranks);
	ret |= expect_invalid(comm, weft_send(buf, 4, WEFT_UINT8, rank, comm), "weft_send to self",
			      self_says);
	ret |= expect_invalid(comm, weft_recv(buf, 4, WEFT_UINT8, nranks, comm),
			      "weft_recv from nranks", nranks_says);
	ret |= expect_invalid(comm, weft_send(buf, 4, WEFT_UINT8, -1, comm), "weft_send to -1",
			      "weft_send: peer -1 is not a rank");
	if (nranks > 1) {
		int peer = (rank + 1) % nranks;
		ret |= expect_invalid(comm, weft_send(NULL, 4, WEFT_UINT8, peer, comm),
				      "weft_send(NULL)", "weft_send: buf is NULL");
		ret |= expect_invalid(comm, weft_recv(buf, 4, WEFT_DATATYPE_COUNT, peer, comm),
				      "weft_recv(bad datatype)", dtype_says);
		ret |= expect_invalid(comm, weft_isend(buf, 4, WEFT_UINT8, peer, comm, NULL),
				      "weft_isend(NULL request)", "weft_isend: request is NULL");
		req = (weft_request_t)(uintptr_t)1;
		ret |= expect_invalid(comm, weft_irecv(NULL, 4, WEFT_UINT8, peer, comm, &req),
				      "weft_irecv(NULL)", "weft_irecv: buf is NULL");
		if (req)
			ret |= harness_fail("weft_irecv(NULL) failed but left a request");
		/* Count 0: a message like any other (as in MPI), which meets
		 * the peer's count-0 receive; a NULL buffer is fine. */
		int prev = (rank + nranks - 1) % nranks;
		weft_group_start();
		st = weft_send(NULL, 0, WEFT_UINT8, peer, comm);
		weft_status_t st2 = weft_recv(NULL, 0, WEFT_UINT8, prev, comm);
		weft_status_t end0 = weft_group_end();
		if (st != WEFT_SUCCESS || st2 != WEFT_SUCCESS || end0 != WEFT_SUCCESS)
			ret |= harness_fail_status(comm,
						   st	 ? st
						   : st2 ? st2
							 : end0,
						   "weft_send and weft_recv of count 0");
	}
	/* A bad call inside a group fails at once and leaves the group usable. */
	weft_group_start();
	st = weft_send(buf, 4, WEFT_UINT8, rank, comm);
	weft_status_t end = weft_group_end();
	ret |= expect_invalid(comm, st, "weft_send to self in a group", self_says);
	if (end != WEFT_SUCCESS)
		ret |= harness_fail("weft_group_end after a rejected call: %s",
				    weft_status_string(end));
	return ret ? 1 : 0;
}

static int body_groups(weft_comm_t comm, int rank, int nranks, void *arg)
{
	int ret = group_bad_input(comm, rank, nranks);
	unsigned salt = 1;
	static const size_t sizes[] = {1, 1000, (3u << 19) + 3}; /* the last > 1 MiB */
	for (size_t k = 0; k < 3 && !ret; k++)
		ret = group_pair_exchange(comm, rank, nranks, sizes[k], salt++);
	for (size_t k = 1; k < 3 && !ret; k++)
		ret = group_all_peers(comm, rank, nranks, sizes[k], salt++);
	static const size_t ring_sizes[] = {7, 65536, (2u << 20) + 5};
	for (size_t k = 0; k < 3 && !ret; k++)
		ret = group_ring_shift(comm, rank, nranks, ring_sizes[k], salt++);
	if (!ret)
		ret = group_two_messages(comm, rank, nranks, salt++);
	if (!ret)
		ret = group_with_collective(comm, rank, nranks, salt++);
	if (!ret)
		ret = group_nested(comm, rank, nranks, salt++);
	/* And everything still works after. */
	if (!ret)
		ret = group_ring_shift(comm, rank, nranks, 4099, salt++);
	return ret;
}

/* ================= length mismatch ================= */

struct mismatch {
	size_t send_bytes, recv_bytes;
};

#define MISMATCH_LIMIT_S 5.0 /* WEFT_TIMEOUT is 10 */

static int body_mismatch(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const struct mismatch *m = arg;
	size_t bytes = rank == 0 ? m->send_bytes : m->recv_bytes;
	size_t other = rank == 0 ? m->recv_bytes : m->send_bytes;
	const char *call = rank == 0 ? "send" : "recv";
	unsigned char *buf = calloc(bytes, 1);
	if (!buf)
		return harness_fail("out of memory");
	harness_progress("%s %zu bytes (the peer: %zu)", call, bytes, other);
	double t0 = harness_now();
	weft_status_t st = rank == 0 ? weft_send(buf, bytes, WEFT_UINT8, 1, comm)
				     : weft_recv(buf, bytes, WEFT_UINT8, 0, comm);
	double dt = harness_now() - t0;
	free(buf);
	char msg[512];
	snprintf(msg, sizeof(msg), "%s", weft_comm_last_error(comm));
	if (getenv("TEST_TIMES"))
		fprintf(stderr, "  mismatch %zu -> %zu: rank %d: %s after %.3f s: %s\n",
			m->send_bytes, m->recv_bytes, rank, weft_status_string(st), dt, msg);
	/* Whatever the call said, the communicator is broken on at least one
	 * side: the next collective must fail, not hang. */
	harness_progress("barrier after the mismatched %s", call);
	double t1 = harness_now();
	weft_status_t after = weft_barrier(comm);
	double dt_after = harness_now() - t1;
	/* weft.h: the receive fails naming both sizes; a send may already have
	 * returned success (its bytes left), but then the communicator fails
	 * at the next call. */
	if (st == WEFT_SUCCESS && rank == 0) {
		if (after == WEFT_SUCCESS || dt_after > MISMATCH_LIMIT_S)
			return harness_fail(
			    "send of %zu bytes against %zu: success, and the barrier "
			    "after it: %s after %.2f s",
			    bytes, other, weft_status_string(after), dt_after);
		return 0;
	}
	if (st == WEFT_SUCCESS)
		return harness_fail(
		    "%s of %zu bytes against %zu: success (a barrier after it: %s after %.2f s)",
		    call, bytes, other, weft_status_string(after), dt_after);
	char want_a[32], want_b[32];
	snprintf(want_a, sizeof(want_a), "%zu", bytes);
	snprintf(want_b, sizeof(want_b), "%zu", other);
	if (rank == 1 && (!strstr(msg, want_a) || !strstr(msg, want_b)))
		return harness_fail("recv of %zu bytes against %zu: the message does not name both "
				    "sizes: \"%s\"",
				    bytes, other, msg);
	if (dt > MISMATCH_LIMIT_S)
		return harness_fail(
		    "%s of %zu bytes against %zu: failed only after %.1f s (%s): \"%s\"", call,
		    bytes, other, dt, weft_status_string(st), msg);
	if (!msg[0])
		return harness_fail("%s of %zu bytes against %zu: %s and no message", call, bytes,
				    other, weft_status_string(st));
	if (after == WEFT_SUCCESS || dt_after > MISMATCH_LIMIT_S)
		return harness_fail("barrier after a failed %s: %s after %.1f s", call,
				    weft_status_string(after), dt_after);
	return 0;
}

/* ================= jobs ================= */

static const char *const env_shm[] = {"WEFT_TIMEOUT=60", NULL};
static const char *const env_socket[] = {"WEFT_TIMEOUT=60", "WEFT_TRANSPORTS=socket",
					 "WEFT_SOCKET_IFNAME=lo", NULL};
static const char *const env_shm_fifo[] = {"WEFT_TIMEOUT=60", "WEFT_SHM_CMA=0", NULL};
static const char *const env_shm_t10[] = {"WEFT_TIMEOUT=10", NULL};
static const char *const env_socket_t10[] = {"WEFT_TIMEOUT=10", "WEFT_TRANSPORTS=socket",
					     "WEFT_SOCKET_IFNAME=lo", NULL};

struct variant {
	const char *label;
	const char *const *env;
	int nranks;
};

static void run(const char *what, harness_body_fn body, void *arg, const struct variant *v)
{
	struct harness_result res;
	harness_run(v->nranks, v->env, body, arg, JOB_TIMEOUT_S, &res);
	printf("%s %s nranks %d: %.1f s\n", what, v->label, v->nranks, res.seconds);
	fflush(stdout);
	ck_assert_msg(res.ok, "%s over %s, nranks %d:\n%s", what, v->label, v->nranks, res.summary);
}

static const struct variant split_variants[] = {
    {"shm", env_shm, 3}, {"shm", env_shm, 4},	    {"shm", env_shm, 5},
    {"shm", env_shm, 8}, {"socket", env_socket, 4},
};

START_TEST(split)
{
	run("comm_split", body_split, NULL, &split_variants[_i]);
}
END_TEST

START_TEST(log_rank)
{
	const struct variant v = {"shm", env_shm, 4};
	run("log rank after a split", body_log_rank, NULL, &v);
}
END_TEST

START_TEST(split_one)
{
	const struct variant v = {"shm", env_shm, _i};
	run("comm_split to one rank", body_split_one, NULL, &v);
}
END_TEST

static const struct variant conc_variants[] = {
    {"shm", env_shm, 4},
    {"shm", env_shm, 5},
    {"socket", env_socket, 4},
};

START_TEST(concurrent)
{
	run("concurrent parent/child operations", body_concurrent, NULL, &conc_variants[_i]);
}
END_TEST

/* Blocking weft_wait in opposite orders on different ranks: a wait must
 * not stall the other communicators' operations that peers wait for. */
START_TEST(concurrent_cross_wait)
{
	static const char *const env[] = {"WEFT_TIMEOUT=5", NULL};
	static const struct variant v = {"shm", env, 4};
	run("concurrent parent/child operations, waits in opposite orders", body_concurrent,
	    (void *)1, &v);
}
END_TEST

static const struct variant group_variants[] = {
    {"shm", env_shm, 2},       {"shm", env_shm, 3},
    {"shm", env_shm, 4},       {"shm without single copy", env_shm_fifo, 3},
    {"socket", env_socket, 2}, {"socket", env_socket, 3},
};

START_TEST(groups)
{
	run("groups", body_groups, NULL, &group_variants[_i]);
}
END_TEST

struct mismatch_variant {
	struct variant v;
	struct mismatch m;
};

static const struct mismatch_variant mismatch_variants[] = {
    {{"shm", env_shm_t10, 2}, {4000, 3996}},
    {{"shm", env_shm_t10, 2}, {1000, 4000}},
    {{"shm", env_shm_t10, 2}, {(1u << 20) + 4096, 2u << 20}}, /* single-copy sizes */
    {{"shm", env_shm_t10, 2}, {3u << 20, 2u << 20}},
    {{"socket", env_socket_t10, 2}, {4000, 3996}},
    {{"socket", env_socket_t10, 2}, {1u << 20, 3u << 20}},
};

START_TEST(length_mismatch)
{
	const struct mismatch_variant *mv = &mismatch_variants[_i];
	char what[96];
	snprintf(what, sizeof(what), "send %zu / recv %zu bytes", mv->m.send_bytes,
		 mv->m.recv_bytes);
	run(what, body_mismatch, (void *)&mv->m, &mv->v);
}
END_TEST

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* @p test looped over those of the @p n variants (@p stride bytes apart,
 * each starting with a struct variant) that run over the suite's
 * transport: they are grouped by transport. */
static void add_span(TCase *tc, const TTest *test, const void *variants, size_t stride, int n)
{
	const char *t = integ_transport();
	int lo = n, hi = n;
	for (int i = 0; i < n; i++) {
		const struct variant *v =
		    (const void *)((const char *)variants + (size_t)i * stride);
		if (strncmp(v->label, t, strlen(t)) != 0)
			continue;
		if (lo == n)
			lo = i;
		hi = i + 1;
	}
	if (lo < hi)
		tcase_add_loop_test(tc, test, lo, hi);
}

static void add(Suite *s)
{
	TCase *tc = integ_tcase(s, "split", JOB_TIMEOUT_S + 30);
	if (tc) {
		add_span(tc, split, split_variants, sizeof(split_variants[0]), N(split_variants));
		add_span(tc, concurrent, conc_variants, sizeof(conc_variants[0]), N(conc_variants));
		if (integ_over("shm")) {
			tcase_add_loop_test(tc, split_one, 1, 3);
			tcase_add_test(tc, log_rank);
			tcase_add_test(tc, concurrent_cross_wait);
		}
	}
	if ((tc = integ_tcase(s, "groups", JOB_TIMEOUT_S + 30))) {
		add_span(tc, groups, group_variants, sizeof(group_variants[0]), N(group_variants));
		add_span(tc, length_mismatch, mismatch_variants, sizeof(mismatch_variants[0]),
			 N(mismatch_variants));
	}
}

int main(int argc, char **argv)
{
	static const struct integ_suite suite = {"split_group", "shm socket", add};
	return integ_main(argc, argv, &suite);
}
