/*
 * memfd.h — the process's shareable allocations (weft_mem_alloc).
 *
 * Each allocation is an anonymous memory file (memfd_create), sized, mapped
 * MAP_SHARED and pre-faulted, with huge pages asked for (MADV_HUGEPAGE);
 * its file descriptor stays open so that a process on the same host that
 * may read ours (the permission process_vm_readv needs) can open it as
 * /proc/<pid>/fd/<fd> and map the same pages. Nothing has a name in
 * /dev/shm, so nothing is left behind when a process dies.
 *
 * Every allocation gets a generation, a number this process never gives
 * out twice; the file's name carries it ("weft:<pid>:<gen>"), so a peer
 * that opens the descriptor can check that it still names the allocation
 * it was told of, and a mapping a peer cached of a freed allocation is
 * never taken for a new one. The table is process-wide (an allocation is
 * not tied to one communicator) and thread-safe.
 */
#ifndef WEFT_UTIL_MEMFD_H
#define WEFT_UTIL_MEMFD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

struct weft_memfd_info {
	void *base;   /* the allocation's first byte (what weft_memfd_alloc returned) */
	size_t len;   /* its mapped length (the size asked for, rounded up to pages) */
	int fd;	      /* the memory file, open for as long as the allocation lives */
	uint64_t gen; /* never reused in this process */
};

/* Allocate @p size bytes (> 0), pre-faulted. WEFT_ERR_NO_MEMORY or
 * WEFT_ERR_SYSTEM (with the errno text in @p err) on failure. */
weft_status_t weft_memfd_alloc(size_t size, void **ptr, struct weft_err *err);

/* Free an allocation by its base; WEFT_ERR_INVALID_ARG if @p ptr is not
 * one (a pointer inside one included). */
weft_status_t weft_memfd_free(void *ptr, struct weft_err *err);

/* The allocation holding all of [addr, addr + len), if any. */
bool weft_memfd_find(const void *addr, size_t len, struct weft_memfd_info *out);

/* The memory file's name for (pid, gen), as the kernel shows it in
 * /proc/<pid>/fd/<fd> ("/memfd:weft:<pid>:<gen> (deleted)"): what a peer
 * checks after opening it. */
void weft_memfd_name(char *buf, size_t len, int pid, uint64_t gen);

/* Allocations alive in this process (tests). */
size_t weft_memfd_count(void);

#endif
