/*
 * ring_pipeline.h — the engine under the ring algorithms.
 *
 * A ring collective is a sequence of steps; at step s every rank sends one
 * block to the next rank of the ring and receives one block from the
 * previous one. Each block is cut into chunks, and chunk j of step s may be
 * sent as soon as chunk j of step s-1 has arrived, so the steps overlap: a
 * pipeline. The algorithm supplies the geometry (which bytes each chunk of
 * each step sends and receives, and whether a receive reduces); the engine
 * keeps up to WEFT_RING_WINDOW messages in flight each way and posts them in
 * order, which is also the order the peer posts them.
 */
#ifndef WEFT_RING_PIPELINE_H
#define WEFT_RING_PIPELINE_H

#include <stdint.h>

#include "core/task.h"
#include "transports/transport.h"

#define WEFT_RING_WINDOW 8

struct weft_ring_chunk {
	char *buf;	       /* send: source; receive: destination */
	size_t bytes;	       /* 0: nothing to move for this chunk */
	weft_reduce_fn reduce; /* receive only */
	const char *local;     /* receive with reduce: local operand */
};

struct weft_ring_pipeline;

struct weft_ring_geometry {
	void (*send_chunk)(const struct weft_task *task, uint32_t step, uint32_t chunk,
			   struct weft_ring_chunk *out);
	void (*recv_chunk)(const struct weft_task *task, uint32_t step, uint32_t chunk,
			   struct weft_ring_chunk *out);
	/* Called once a received chunk is complete; may be NULL. */
	void (*recv_done)(const struct weft_task *task, uint32_t step, uint32_t chunk);
};

struct weft_ring_pipeline {
	const struct weft_ring_geometry *geo;
	int next, prev; /* ranks */
	uint32_t nsteps, nchunks, total;
	uint32_t send_posted, send_done, recv_posted, recv_done;
	struct weft_msg sends[WEFT_RING_WINDOW];
	struct weft_msg recvs[WEFT_RING_WINDOW];
};

/* Set up the pipeline of @p task (its state lives at the start of task->priv,
 * algorithms put their own after it). */
void weft_ring_pipeline_init(struct weft_ring_pipeline *rp, const struct weft_task *task,
			     const struct weft_ring_geometry *geo, uint32_t nsteps,
			     uint32_t nchunks);

/* Post what can be posted, reap what finished. WEFT_SUCCESS when every
 * message of the pipeline is done. */
weft_status_t weft_ring_pipeline_progress(struct weft_ring_pipeline *rp, struct weft_task *task);

/* Chunks per block of @p max_elems elements at the communicator's chunk size. */
uint32_t weft_ring_nchunks(const struct weft_task *task, size_t max_elems, size_t *chunk_elems);

#endif
