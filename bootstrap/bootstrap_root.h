/* bootstrap_root.h — the root listener's objects, shared by
 * bootstrap_root.c (the protocol: hellos, the join, allgathers, deadlines,
 * the thread) and bootstrap_root_io.c (connections, output queues, accept). */
#ifndef WEFT_BOOTSTRAP_ROOT_H
#define WEFT_BOOTSTRAP_ROOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bootstrap/bootstrap_wire.h"

#define CLOSING_S 2.0 /* a refused rank's ERROR frame gets this long to leave */
#define FD_SLACK  128 /* descriptors the root's process keeps for all else */

struct blob {
	size_t refs;
	size_t len;
	unsigned char data[];
};

struct out_msg {
	struct out_msg *next;
	struct frame_hdr hdr;
	struct blob *blob; /* payload, NULL when empty */
	size_t off;	   /* bytes of hdr + payload already sent */
};

enum conn_phase {
	CONN_HELLO,   /* connected, owes the handshake by its deadline */
	CONN_JOINED,  /* a rank of the job */
	CONN_CLOSING, /* refused: flush the ERROR frame, then close */
	CONN_DEAD,    /* closed, freed at the end of the poll round */
};

struct conn {
	int fd;
	enum conn_phase phase;
	int rank;
	bool bye;   /* the rank said goodbye: its EOF is not a failure */
	bool drain; /* read and drop everything from now on */
	double deadline;
	double accepted; /* when: the oldest unauthenticated goes first */
	char peer[ADDR_STR_BYTES];
	union weft_uid_addr addr; /* the peer's, as accepted */
	socklen_t addr_len;
	/* input: a header, then its payload into in_dst */
	struct frame_hdr hdr;
	size_t hdr_got;
	unsigned char *in_dst;
	size_t in_len, in_got;
	/* the handshake, then who it proved to be */
	struct weft_hs hs;
	struct join join;
	/* output */
	struct out_msg *out_head, *out_tail;
};

struct root {
	int listen_fd;
	struct weft_key key;
	unsigned char job_id[WEFT_JOB_ID_BYTES]; /* random, handed to every rank */
	double timeout_s;
	double handshake_s; /* WEFT_HANDSHAKE_TIMEOUT */
	int max_pending;    /* WEFT_MAX_PENDING */
	int npending;	    /* connections in CONN_HELLO */
	uint64_t refused;   /* connections that failed the handshake */
	double start;
	char addr[ADDR_STR_BYTES];
	int fanout; /* of the relay tree (bootstrap_wire.h) */

	struct conn **conns;
	size_t nconns, conns_cap;

	int nranks; /* 0 until the first valid hello sets it */
	int nranks_from;
	struct conn **by_rank;
	bool *gone; /* the rank's connection has closed */
	bool *scratch;
	int joined;
	bool all_joined;
	double join_start;
	/* [rank]: its pid on this host, 0 if elsewhere (weft_bootstrap_root_serve) */
	int64_t *local_pids;
	int npids;

	/* the allgather in progress */
	uint32_t op_seq;
	bool op_pending;
	size_t op_bytes;
	int op_first;
	int op_count;
	bool *op_have;
	struct blob *op_blob;
	double op_start;

	bool failed;
	weft_status_t fail_status; /* what root_fail told the joined ranks */
	double fail_time;
	char fail_text[400]; /* why, for ranks that arrive later */
	/* Failed before the job was sized: its size, and hellos refused since
	 * (once all are told, the thread may end: root_done) */
	int fail_nranks;
	int told;
	/* accept() ran out of descriptors: the listener rests until then
	 * rather than wake poll() at once again */
	double accept_rest_until;

	/* What the root moved, for the INFO line at its end (perf/bootstrap_scale
	 * fits how it grows with the job): bytes read and written on every
	 * connection, frame headers included, and the most connections open. */
	uint64_t bytes_in, bytes_out;
	size_t peak_conns;
};

/* bootstrap_roots.c: the registry of running roots (false: no memory). */
bool weft_bootstrap_roots_add(const struct weft_key *key);
void weft_bootstrap_roots_remove(const struct weft_key *key);

/* bootstrap_root.c: a joined rank's connection closed or broke. */
void root_conn_lost(struct root *r, struct conn *c, const char *why);
/* bootstrap_root.c: the root's thread (bootstrap_root_start.c starts it). */
void *root_main(void *arg);

/* bootstrap_root_io.c */
struct blob *blob_new(size_t len);
void blob_put(struct blob *b);
/* @p b's bytes as one zlib stream, in a new blob; NULL without memory. */
struct blob *blob_deflate(const struct blob *b);
void conn_close(struct conn *c);
void conn_queue(struct conn *c, uint32_t type, uint32_t seq, struct blob *blob);
struct blob *error_blob(weft_status_t status, const char *text);
void conn_send_error(struct conn *c, weft_status_t status, const char *text);
void conn_refuse(struct root *r, struct conn *c, weft_status_t status, const char *text);
void root_write(struct root *r, struct conn *c);
void root_accept(struct root *r);
/* A connection leaves CONN_HELLO (joined, refused or dropped). */
void conn_left_hello(struct root *r, struct conn *c);
void root_free(struct root *r);
void root_compact(struct root *r);

#endif
