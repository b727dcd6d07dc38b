/* coll_blocks.c — the collectives of per-rank blocks that torch needs and
 * the first set lacked: AlltoAllv (a count and a displacement per peer),
 * Gather and Scatter. Same shape as coll.c: check the arguments (each
 * error names the call and the parameter), resolve in place, run. */
#include <stdint.h>

#include "api/api.h"
#include "core/fail.h"
#include "core/task.h"

static bool ranges_overlap(const void *a, size_t alen, const void *b, size_t blen)
{
	uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
	return alen && blen && x < y + blen && y < x + alen;
}

/* One direction of an alltoallv: its arrays, every block within the
 * address space, the buffer there when a block is not empty. @p dir is
 * "send" or "recv"; *total is the elements of all blocks, *extent the
 * bytes from the buffer's start to the end of its farthest block. */
static weft_status_t check_blocks(struct weft_comm *comm, const char *call, const char *dir,
				  const void *buf, const size_t *counts, const size_t *displs,
				  size_t esize, size_t *total, size_t *extent)
{
	const char *dname = dir[0] == 's' ? "sdispls" : "rdispls";
	if (!counts || !displs)
		return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG, "%s: %s%s is NULL", call,
				      counts ? "" : dir, counts ? dname : "counts");
	size_t max = (size_t)PTRDIFF_MAX / esize;
	*total = *extent = 0;
	for (int r = 0; r < comm->nranks; r++) {
		if (counts[r] > max || displs[r] > max - counts[r])
			return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG,
					      "%s: %scounts[%d] = %zu at %s[%d] = %zu overflows "
					      "the address space",
					      call, dir, r, counts[r], dname, r, displs[r]);
		if (*total > SIZE_MAX - counts[r])
			return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG,
					      "%s: the sum of %scounts overflows", call, dir);
		*total += counts[r];
		if (counts[r] && (displs[r] + counts[r]) * esize > *extent)
			*extent = (displs[r] + counts[r]) * esize;
	}
	if (*extent && (!buf || buf == WEFT_IN_PLACE))
		return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG, "%s: %sbuf is %s", call, dir,
				      buf ? "WEFT_IN_PLACE (in place is not supported)" : "NULL");
	return WEFT_SUCCESS;
}

static weft_status_t alltoallv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
			       void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
			       weft_datatype_t dtype, struct weft_comm *comm,
			       weft_request_t *request, const char *call)
{
	weft_status_t st = weft_api_check_comm(comm, call);
	if (st == WEFT_SUCCESS)
		st = weft_api_check_data(comm, call, 0, 1, dtype);
	if (st != WEFT_SUCCESS)
		return st;
	size_t esize = weft_datatype_size(dtype), stotal, sext, rtotal, rext;
	st = check_blocks(comm, call, "send", sendbuf, sendcounts, sdispls, esize, &stotal, &sext);
	if (st == WEFT_SUCCESS)
		st = check_blocks(comm, call, "recv", recvbuf, recvcounts, rdispls, esize, &rtotal,
				  &rext);
	if (st != WEFT_SUCCESS)
		return st;
	int me = comm->rank;
	if (sendcounts[me] != recvcounts[me])
		return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG,
				      "%s: sendcounts[%d] = %zu but recvcounts[%d] = %zu (this "
				      "rank's block to itself)",
				      call, me, sendcounts[me], me, recvcounts[me]);
	if (ranges_overlap(sendbuf, sext, recvbuf, rext))
		return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG,
				      "%s: sendbuf and recvbuf overlap (in place is not supported)",
				      call);
	struct weft_coll_args a =
	    weft_api_args(WEFT_COLL_ALLTOALLV, sendbuf, recvbuf, stotal > rtotal ? stotal : rtotal,
			  dtype, WEFT_SUM, 0);
	a.blocks = (struct weft_coll_blocks){
	    .sendcounts = sendcounts,
	    .sdispls = sdispls,
	    .recvcounts = recvcounts,
	    .rdispls = rdispls,
	    .send_total = stotal,
	    .recv_total = rtotal,
	};
	return weft_api_run(comm, &a, request);
}

weft_status_t weft_alltoallv(const void *sendbuf, const size_t sendcounts[], const size_t sdispls[],
			     void *recvbuf, const size_t recvcounts[], const size_t rdispls[],
			     weft_datatype_t dtype, weft_comm_t comm)
{
	return alltoallv(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, dtype, comm,
			 NULL, "weft_alltoallv");
}

weft_status_t weft_ialltoallv(const void *sendbuf, const size_t sendcounts[],
			      const size_t sdispls[], void *recvbuf, const size_t recvcounts[],
			      const size_t rdispls[], weft_datatype_t dtype, weft_comm_t comm,
			      weft_request_t *request)
{
	weft_status_t st = weft_api_need_request(comm, request, "weft_ialltoallv");
	return st ? st
		  : alltoallv(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, dtype,
			      comm, request, "weft_ialltoallv");
}

/* The checks Gather and Scatter share: comm, datatype, count x nranks, root. */
static weft_status_t check_rooted(struct weft_comm *comm, const char *call, size_t count,
				  weft_datatype_t dtype, int root)
{
	weft_status_t st = weft_api_check_comm(comm, call);
	if (st == WEFT_SUCCESS)
		st = weft_api_check_data(comm, call, count, (size_t)comm->nranks, dtype);
	if (st == WEFT_SUCCESS)
		st = weft_api_check_rank(comm, call, "root", root);
	return st;
}

/* ---- Gather. In place on the root: sendbuf WEFT_IN_PLACE, or recvbuf +
 * root * count elements (its block is already where it belongs). */
static weft_status_t gather(const void *sendbuf, void *recvbuf, size_t count, weft_datatype_t dtype,
			    int root, struct weft_comm *comm, weft_request_t *request,
			    const char *call)
{
	weft_status_t st = check_rooted(comm, call, count, dtype, root);
	if (st != WEFT_SUCCESS)
		return st;
	bool is_root = comm->rank == root;
	size_t block = count * weft_datatype_size(dtype);
	char *mine = is_root && recvbuf ? (char *)recvbuf + (size_t)root * block : NULL;
	bool in_place = is_root && (sendbuf == WEFT_IN_PLACE || (mine && sendbuf == mine));
	if (is_root)
		st = weft_api_check_buf(comm, call, "recvbuf on the root", recvbuf, count);
	if (st == WEFT_SUCCESS && !in_place)
		st = weft_api_check_buf(comm, call,
					is_root ? "sendbuf"
						: "sendbuf (WEFT_IN_PLACE is for the root only)",
					sendbuf == WEFT_IN_PLACE ? NULL : sendbuf, count);
	if (st != WEFT_SUCCESS)
		return st;
	if (is_root && !in_place &&
	    ranges_overlap(sendbuf, block, recvbuf, block * (size_t)comm->nranks))
		return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG,
				      "%s: sendbuf overlaps recvbuf on the root (for in place, "
				      "pass WEFT_IN_PLACE or recvbuf + root * count)",
				      call);
	struct weft_coll_args a =
	    weft_api_args(WEFT_COLL_GATHER, in_place ? mine : sendbuf, is_root ? recvbuf : NULL,
			  count, dtype, WEFT_SUM, root);
	a.in_place = in_place;
	return weft_api_run(comm, &a, request);
}

weft_status_t weft_gather(const void *sendbuf, void *recvbuf, size_t count, weft_datatype_t dtype,
			  int root, weft_comm_t comm)
{
	return gather(sendbuf, recvbuf, count, dtype, root, comm, NULL, "weft_gather");
}

weft_status_t weft_igather(const void *sendbuf, void *recvbuf, size_t count, weft_datatype_t dtype,
			   int root, weft_comm_t comm, weft_request_t *request)
{
	weft_status_t st = weft_api_need_request(comm, request, "weft_igather");
	return st ? st
		  : gather(sendbuf, recvbuf, count, dtype, root, comm, request, "weft_igather");
}

/* ---- Scatter. In place on the root: recvbuf WEFT_IN_PLACE, or sendbuf +
 * root * count elements (its block stays where it is). */
static weft_status_t scatter(const void *sendbuf, void *recvbuf, size_t count,
			     weft_datatype_t dtype, int root, struct weft_comm *comm,
			     weft_request_t *request, const char *call)
{
	weft_status_t st = check_rooted(comm, call, count, dtype, root);
	if (st != WEFT_SUCCESS)
		return st;
	bool is_root = comm->rank == root;
	size_t block = count * weft_datatype_size(dtype);
	const char *mine = is_root && sendbuf && sendbuf != WEFT_IN_PLACE
			       ? (const char *)sendbuf + (size_t)root * block
			       : NULL;
	bool in_place = is_root && (recvbuf == WEFT_IN_PLACE || (mine && recvbuf == mine));
	if (is_root)
		st = weft_api_check_buf(comm, call, "sendbuf on the root",
					sendbuf == WEFT_IN_PLACE ? NULL : sendbuf, count);
	if (st == WEFT_SUCCESS && !in_place)
		st = weft_api_check_buf(comm, call,
					is_root ? "recvbuf"
						: "recvbuf (WEFT_IN_PLACE is for the root only)",
					recvbuf == WEFT_IN_PLACE ? NULL : recvbuf, count);
	if (st != WEFT_SUCCESS)
		return st;
	if (is_root && !in_place &&
	    ranges_overlap(recvbuf, block, sendbuf, block * (size_t)comm->nranks))
		return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG,
				      "%s: recvbuf overlaps sendbuf on the root (for in place, "
				      "pass WEFT_IN_PLACE or sendbuf + root * count)",
				      call);
	struct weft_coll_args a =
	    weft_api_args(WEFT_COLL_SCATTER, is_root ? sendbuf : NULL,
			  in_place ? (void *)mine : recvbuf, count, dtype, WEFT_SUM, root);
	a.in_place = in_place;
	return weft_api_run(comm, &a, request);
}

weft_status_t weft_scatter(const void *sendbuf, void *recvbuf, size_t count, weft_datatype_t dtype,
			   int root, weft_comm_t comm)
{
	return scatter(sendbuf, recvbuf, count, dtype, root, comm, NULL, "weft_scatter");
}

weft_status_t weft_iscatter(const void *sendbuf, void *recvbuf, size_t count, weft_datatype_t dtype,
			    int root, weft_comm_t comm, weft_request_t *request)
{
	weft_status_t st = weft_api_need_request(comm, request, "weft_iscatter");
	return st ? st
		  : scatter(sendbuf, recvbuf, count, dtype, root, comm, request, "weft_iscatter");
}
