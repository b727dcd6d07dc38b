/* bootstrap_rank.h — the rank side's state and its links' I/O, shared by
 * bootstrap_rank.c (the protocol: join, relay tree, allgather, close) and
 * bootstrap_rank_io.c (reads, writes, waits and connects on the root
 * connection and the relay links, each watching the root for a verdict).
 * Internal to the bootstrap files. */
#ifndef WEFT_BOOTSTRAP_RANK_H
#define WEFT_BOOTSTRAP_RANK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/bootstrap_wire.h"

#define JOIN_GRACE_S 1.0 /* rank waits this long past its timeout for the root */

struct weft_bootstrap {
	int fd; /* to the root */
	int rank;
	int nranks;
	struct weft_key key;
	unsigned char job_id[WEFT_JOB_ID_BYTES]; /* the root's answer */
	double timeout_s;
	uint32_t seq;
	bool failed;
	char root[ADDR_STR_BYTES];

	/* The relay tree: results come in on up_fd (the root connection when
	 * the root is this rank's parent) and go out to the children. */
	int fanout;
	int parent; /* -1: the root */
	int up_fd;
	int first_child, nchildren;
	int *child_fd;
	int listen_fd; /* open until the children are in */
	uint32_t relay_port;

	uint64_t bytes_in, bytes_out; /* every link, frame headers included */
	/* The link the last failure came from (-1: none, or a connect), and
	 * whether the root's verdict has been read (bs_relay_failed). */
	int broken_fd;
	bool verdict;
};

enum wake { WAKE_TIMEOUT, WAKE_FD, WAKE_ROOT };

/* What a link is called in messages: "root 1.2.3.4:5", "relay parent rank
 * 3", "relay child rank 9". */
void bs_link_name(const struct weft_bootstrap *bs, int fd, char *buf, size_t size);

/*
 * Wait for @p events on @p fd until @p deadline. When @p fd is not the root
 * connection, watch the root too: what it sends then is the job's verdict.
 */
enum wake bs_wait(const struct weft_bootstrap *bs, int fd, short events, double deadline,
		  short *revents);

/* The root spoke while this rank waited on a relay link: it can only be
 * the job's verdict. */
weft_status_t bs_root_verdict(struct weft_bootstrap *bs, double deadline, const char *what,
			      struct weft_err *err);

/* Read exactly @p len bytes from @p fd before @p deadline. */
weft_status_t bs_read(struct weft_bootstrap *bs, int fd, void *buf, size_t len, double deadline,
		      const char *what, struct weft_err *err);

/* bs_read without the watch on the root: for a connection that must say
 * who it is before anything it sends counts (what the root says meanwhile
 * waits for the next bs_read). */
weft_status_t bs_read_alone(struct weft_bootstrap *bs, int fd, void *buf, size_t len,
			    double deadline, const char *what, struct weft_err *err);

/* The root sent an ERROR frame: hand its status and text to the caller. */
weft_status_t bs_read_error(struct weft_bootstrap *bs, const struct frame_hdr *h, double deadline,
			    const char *what, struct weft_err *err);

/*
 * Read one frame header from @p fd and check it is @p type with @p seq and
 * @p len; an ERROR frame from the root instead becomes the caller's error.
 */
weft_status_t bs_expect(struct weft_bootstrap *bs, int fd, uint32_t type, uint32_t seq,
			uint64_t len, double deadline, const char *what, struct weft_err *err);

/*
 * Send a header and @p len payload bytes (either may be empty) on @p fd.
 * While the other end does not read, watch the root: an ERROR (the job
 * failed) must end the wait, not the deadline.
 */
weft_status_t bs_send_all(struct weft_bootstrap *bs, int fd, const struct frame_hdr *h,
			  const void *payload, size_t len, double deadline, const char *what,
			  struct weft_err *err);

weft_status_t bs_send_frame(struct weft_bootstrap *bs, int fd, uint32_t type, uint32_t seq,
			    const void *payload, size_t len, double deadline, const char *what,
			    struct weft_err *err);

/*
 * A relay link failed with @p rc: when its peer died the root knows it too
 * and says so to every rank. Wait a short grace for that verdict, which
 * names the rank that left, and return it instead of the link's error.
 */
weft_status_t bs_relay_failed(struct weft_bootstrap *bs, weft_status_t rc, const char *what,
			      struct weft_err *err);

/*
 * The handshake of util/handshake.h on connected socket @p fd, as the
 * connector: @p role, asking for @p peer, with @p payload. On success the
 * listener's answer (its challenge's payload) is in @p answer. A listener
 * that fails authentication is an error naming @p who; a connection
 * dropped before the challenge sets *dropped (the caller may retry: a
 * listener under a flood drops its oldest handshakes).
 */
weft_status_t bs_handshake(struct weft_bootstrap *bs, int fd, enum weft_hs_role role, int peer,
			   const void *payload, size_t len, double deadline, const char *who,
			   void *answer, size_t answer_len, bool *dropped, struct weft_err *err);

/* Non-blocking connect to @p addr before @p deadline; retried while
 * nothing listens there yet when @p retry_refused. */
weft_status_t bs_connect(struct weft_bootstrap *bs, const struct sockaddr *addr, socklen_t addr_len,
			 bool retry_refused, double deadline, const char *who, int *out,
			 struct weft_err *err);

#endif
