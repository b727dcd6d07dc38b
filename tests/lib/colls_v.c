/*
 * colls_v.c — checked calls of AlltoAllv, Gather and Scatter (colls.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colls.h"

/* Elements rank i sends rank j. */
static size_t v_count(enum coll_v_pattern p, size_t base, int i, int j, int n)
{
	switch (p) {
	case COLL_V_UNEVEN:
		return (i * 7 + j * 3) % 4 == 1 ? 0 : base + (size_t)((i * 5 + j * 11) % 13);
	case COLL_V_ONE_IDLE: return i == n - 1 || j == n - 1 ? 0 : base + (size_t)(i + 2 * j);
	default: return 0;
	}
}

bool coll_v_layout(struct coll_v_layout *l, enum coll_v_pattern p, size_t base, int rank, int n,
		   size_t gap)
{
	l->scount = calloc((size_t)n, sizeof(size_t));
	l->sdispl = calloc((size_t)n, sizeof(size_t));
	l->rcount = calloc((size_t)n, sizeof(size_t));
	l->rdispl = calloc((size_t)n, sizeof(size_t));
	if (!l->scount || !l->sdispl || !l->rcount || !l->rdispl)
		return false;
	size_t off = 0;
	for (int j = n - 1; j >= 0; j--) {
		l->scount[j] = v_count(p, base, rank, j, n);
		l->sdispl[j] = off;
		off += l->scount[j] + gap;
	}
	l->send_elems = off;
	off = 0;
	for (int i = 0; i < n; i++) {
		l->rcount[i] = v_count(p, base, i, rank, n);
		l->rdispl[i] = off;
		off += l->rcount[i] + 1;
	}
	l->recv_elems = off;
	return true;
}

void coll_v_layout_free(struct coll_v_layout *l)
{
	free(l->scount);
	free(l->sdispl);
	free(l->rcount);
	free(l->rdispl);
	memset(l, 0, sizeof(*l));
}

bool coll_v_check(const struct coll_ctx *c, const struct coll_v_layout *l,
		  const unsigned char *recv, weft_datatype_t dt, unsigned salt, char *why,
		  size_t cap)
{
	size_t esz = harness_dtype_size(dt), at = 0;
	unsigned char *want = malloc(l->recv_elems * esz + 1);
	bool ok = want != NULL;
	if (!want)
		snprintf(why, cap, "out of memory");
	for (int i = 0; i < c->nranks && ok; i++) {
		size_t gap_bytes = (l->rdispl[i] - at) * esz;
		if (harness_first_written(recv + at * esz, gap_bytes) != SIZE_MAX) {
			snprintf(why, cap, "the gap before the block from rank %d was written", i);
			ok = false;
			break;
		}
		harness_ag_input(want, l->rcount[i], dt, i * c->nranks + c->rank, salt);
		char more[200];
		if (harness_compare(recv + l->rdispl[i] * esz, want, l->rcount[i], dt, more,
				    sizeof(more)) != SIZE_MAX) {
			snprintf(why, cap, "block from rank %d: %s", i, more);
			ok = false;
		}
		at = l->rdispl[i] + l->rcount[i];
	}
	if (ok && harness_first_written(recv + at * esz, (l->recv_elems - at) * esz) != SIZE_MAX) {
		snprintf(why, cap, "the gap after the last block was written");
		ok = false;
	}
	free(want);
	return ok;
}

static const char *const v_names[COLL_V_PATTERNS] = {"uneven", "one idle", "all empty"};

enum coll_result coll_alltoallv(struct coll_ctx *c, enum coll_v_pattern p, size_t base,
				weft_datatype_t dt, bool nb)
{
	int n = c->nranks, rank = c->rank;
	unsigned salt = ++c->salt;
	size_t esz = harness_dtype_size(dt), gap = salt % 3;
	char name[160], why[256] = "";
	snprintf(name, sizeof(name), "%salltoallv nranks %d %s %s base %zu", nb ? "i" : "", n,
		 harness_dtype_name(dt), v_names[p], base);
	harness_progress("%s", name);
	c->cases++;
	struct coll_v_layout l = {0};
	struct harness_buf send = {0}, recv = {0};
	unsigned char *orig = NULL;
	enum coll_result res;
	if (!coll_v_layout(&l, p, base, rank, n, gap) ||
	    !harness_buf_alloc(&send, l.send_elems * esz) ||
	    !harness_buf_alloc(&recv, l.recv_elems * esz) ||
	    !(orig = malloc(l.send_elems * esz + 1))) {
		res = coll_verdict(c, name, "out of memory");
		c->error = true;
		goto out_free;
	}
	for (int j = 0; j < n; j++)
		harness_ag_input(send.data + l.sdispl[j] * esz, l.scount[j], dt, rank * n + j,
				 salt);
	memcpy(orig, send.data, l.send_elems * esz);
	weft_request_t req = NULL;
	weft_status_t st = nb ? weft_ialltoallv(send.data, l.scount, l.sdispl, recv.data, l.rcount,
						l.rdispl, dt, c->comm, &req)
			      : weft_alltoallv(send.data, l.scount, l.sdispl, recv.data, l.rcount,
					       l.rdispl, dt, c->comm);
	if (nb && st == WEFT_SUCCESS && !req) {
		res = coll_verdict(c, name, "weft_ialltoallv: success and a NULL request");
		goto out_free;
	}
	if ((res = coll_status(c, name, coll_complete(st, &req))) != COLL_OK)
		goto out_free;
	const char *g;
	if (coll_v_check(c, &l, recv.data, dt, salt, why, sizeof(why))) {
		if (*(g = harness_buf_guards(&recv)) || *(g = harness_buf_guards(&send)))
			snprintf(why, sizeof(why), "%s a buffer was written", g);
		else if (memcmp(send.data, orig, l.send_elems * esz) != 0)
			snprintf(why, sizeof(why), "sendbuf was modified");
	}
	res = coll_verdict(c, name, why);
out_free:
	harness_buf_free(&send);
	harness_buf_free(&recv);
	free(orig);
	coll_v_layout_free(&l);
	return res;
}

static const char *const rf_names[COLL_FORMS] = {
    [COLL_OUT] = "out-of-place",
    [COLL_SAME] = "sendbuf==recvbuf",
    [COLL_IN_PLACE] = "WEFT_IN_PLACE",
    [COLL_OFFSET] = "in place by pointer",
};

/* Gather: rank r's block carries seed r + 1; the root's recvbuf gets them all. */
enum coll_result coll_gather(struct coll_ctx *c, const struct coll_case *k)
{
	int n = c->nranks, rank = c->rank, root = k->root;
	unsigned salt = ++c->salt;
	bool is_root = rank == root, null_unused = !is_root && salt % 2;
	size_t blk = k->count * harness_dtype_size(k->dt), all = blk * (size_t)n;
	char name[192], why[256] = "";
	snprintf(name, sizeof(name), "%sgather nranks %d %s count %zu root %d %s%s",
		 k->nb ? "i" : "", n, harness_dtype_name(k->dt), k->count, root, rf_names[k->form],
		 null_unused ? " (NULL recvbuf off the root)" : "");
	harness_progress("%s", name);
	c->cases++;
	struct harness_buf send = {0}, recv = {0};
	unsigned char *want = malloc(all + 1);
	enum coll_result res;
	bool own_send = !is_root || k->form == COLL_OUT;
	if (!want || (own_send && !harness_buf_alloc(&send, blk)) ||
	    ((is_root || !null_unused) && !harness_buf_alloc(&recv, is_root ? all : blk))) {
		res = coll_verdict(c, name, "out of memory");
		c->error = true;
		goto out_free;
	}
	for (int r = 0; r < n; r++)
		harness_ag_input(want + (size_t)r * blk, k->count, k->dt, r + 1, salt);
	unsigned char *mine = is_root ? recv.data + (size_t)root * blk : NULL;
	memcpy(own_send ? send.data : mine, want + (size_t)rank * blk, blk);
	const void *sendarg = own_send			 ? send.data
			      : k->form == COLL_IN_PLACE ? WEFT_IN_PLACE
							 : mine;
	weft_request_t req = NULL;
	weft_status_t st =
	    k->nb ? weft_igather(sendarg, recv.data, k->count, k->dt, root, c->comm, &req)
		  : weft_gather(sendarg, recv.data, k->count, k->dt, root, c->comm);
	if ((res = coll_status(c, name, coll_complete(st, &req))) != COLL_OK)
		goto out_free;
	const char *g;
	if (is_root &&
	    harness_compare(recv.data, want, all, WEFT_UINT8, why, sizeof(why)) != SIZE_MAX) {
		/* why says it */
	} else if (*(g = harness_buf_guards(&recv)) || *(g = harness_buf_guards(&send)))
		snprintf(why, sizeof(why), "%s a buffer was written", g);
	else if (own_send && memcmp(send.data, want + (size_t)rank * blk, blk) != 0)
		snprintf(why, sizeof(why), "sendbuf was modified");
	else if (!is_root && recv.data && harness_first_written(recv.data, blk) != SIZE_MAX)
		snprintf(why, sizeof(why), "a non-root's recvbuf was written");
	res = coll_verdict(c, name, why);
out_free:
	harness_buf_free(&send);
	harness_buf_free(&recv);
	free(want);
	return res;
}

/* Scatter: block r of the root's sendbuf carries seed r + 1. */
enum coll_result coll_scatter(struct coll_ctx *c, const struct coll_case *k)
{
	int n = c->nranks, rank = c->rank, root = k->root;
	unsigned salt = ++c->salt;
	bool is_root = rank == root, null_unused = !is_root && salt % 2;
	size_t blk = k->count * harness_dtype_size(k->dt), all = blk * (size_t)n;
	char name[192], why[256] = "";
	snprintf(name, sizeof(name), "%sscatter nranks %d %s count %zu root %d %s%s",
		 k->nb ? "i" : "", n, harness_dtype_name(k->dt), k->count, root, rf_names[k->form],
		 null_unused ? " (NULL sendbuf off the root)" : "");
	harness_progress("%s", name);
	c->cases++;
	struct harness_buf send = {0}, recv = {0};
	unsigned char *want = malloc(all + 1);
	enum coll_result res;
	bool own_recv = !is_root || k->form == COLL_OUT;
	if (!want || (own_recv && !harness_buf_alloc(&recv, blk)) ||
	    ((is_root || !null_unused) && !harness_buf_alloc(&send, is_root ? all : blk))) {
		res = coll_verdict(c, name, "out of memory");
		c->error = true;
		goto out_free;
	}
	for (int r = 0; r < n; r++)
		harness_ag_input(want + (size_t)r * blk, k->count, k->dt, r + 1, salt);
	if (is_root)
		memcpy(send.data, want, all);
	unsigned char *mine = is_root ? send.data + (size_t)root * blk : NULL;
	void *recvarg = own_recv		   ? recv.data
			: k->form == COLL_IN_PLACE ? (void *)WEFT_IN_PLACE
						   : mine;
	weft_request_t req = NULL;
	weft_status_t st =
	    k->nb ? weft_iscatter(send.data, recvarg, k->count, k->dt, root, c->comm, &req)
		  : weft_scatter(send.data, recvarg, k->count, k->dt, root, c->comm);
	if ((res = coll_status(c, name, coll_complete(st, &req))) != COLL_OK)
		goto out_free;
	const unsigned char *got = own_recv ? recv.data : mine;
	const char *g;
	if (harness_compare(got, want + (size_t)rank * blk, blk, WEFT_UINT8, why, sizeof(why)) !=
	    SIZE_MAX) {
		/* why says it */
	} else if (*(g = harness_buf_guards(&recv)) || *(g = harness_buf_guards(&send)))
		snprintf(why, sizeof(why), "%s a buffer was written", g);
	else if (is_root && memcmp(send.data, want, all) != 0)
		snprintf(why, sizeof(why), "the root's sendbuf was modified");
	else if (!is_root && send.data && harness_first_written(send.data, blk) != SIZE_MAX)
		snprintf(why, sizeof(why), "a non-root's sendbuf was written");
	res = coll_verdict(c, name, why);
out_free:
	harness_buf_free(&send);
	harness_buf_free(&recv);
	free(want);
	return res;
}
