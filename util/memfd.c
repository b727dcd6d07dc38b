/* memfd.c — the process's shareable allocations (memfd.h). */
#define _GNU_SOURCE
#include "util/memfd.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct weft_memfd_info *table;
static size_t table_len, table_cap;
static uint64_t next_gen = 1;

void weft_memfd_name(char *buf, size_t len, int pid, uint64_t gen)
{
	snprintf(buf, len, "weft:%d:%llu", pid, (unsigned long long)gen);
}

static weft_status_t table_add(const struct weft_memfd_info *a, struct weft_err *err)
{
	if (table_len == table_cap) {
		size_t cap = table_cap ? 2 * table_cap : 16;
		struct weft_memfd_info *t = realloc(table, cap * sizeof(*t));
		if (!t)
			return weft_err_set(err, WEFT_ERR_NO_MEMORY, "weft_mem_alloc: no memory");
		table = t;
		table_cap = cap;
	}
	table[table_len++] = *a;
	return WEFT_SUCCESS;
}

/* Create, size and map the memory file; pages are touched here (first
 * touches cost ~12 us per 4 KiB page on this machine kind: never later). */
static weft_status_t map_new(size_t size, uint64_t gen, struct weft_memfd_info *a,
			     struct weft_err *err)
{
	char name[64];
	weft_memfd_name(name, sizeof(name), (int)getpid(), gen);
	long page = sysconf(_SC_PAGESIZE);
	size_t len = (size + (size_t)page - 1) / (size_t)page * (size_t)page;
	int fd = memfd_create(name, MFD_CLOEXEC);
	if (fd < 0)
		return weft_err_errno(err, errno, "weft_mem_alloc: memfd_create");
	int e = posix_fallocate(fd, 0, (off_t)len);
	if (e) {
		close(fd);
		return e == ENOSPC
			   ? weft_err_set(err, WEFT_ERR_NO_MEMORY,
					  "weft_mem_alloc: no memory for %zu bytes", len)
			   : weft_err_errno(err, e, "weft_mem_alloc: fallocate %zu bytes", len);
	}
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (p == MAP_FAILED) {
		e = errno;
		close(fd);
		return weft_err_errno(err, e, "weft_mem_alloc: mmap %zu bytes", len);
	}
	/* Fewer TLB misses on the big buffers collectives stream through;
	 * where the kernel gives shared memory no huge pages this is a no-op. */
	madvise(p, len, MADV_HUGEPAGE);
	*a = (struct weft_memfd_info){.base = p, .len = len, .fd = fd, .gen = gen};
	return WEFT_SUCCESS;
}

weft_status_t weft_memfd_alloc(size_t size, void **ptr, struct weft_err *err)
{
	pthread_mutex_lock(&table_lock);
	uint64_t gen = next_gen++;
	pthread_mutex_unlock(&table_lock);
	struct weft_memfd_info a;
	weft_status_t st = map_new(size, gen, &a, err);
	if (st != WEFT_SUCCESS)
		return st;
	pthread_mutex_lock(&table_lock);
	st = table_add(&a, err);
	pthread_mutex_unlock(&table_lock);
	if (st != WEFT_SUCCESS) {
		munmap(a.base, a.len);
		close(a.fd);
		return st;
	}
	*ptr = a.base;
	return WEFT_SUCCESS;
}

weft_status_t weft_memfd_free(void *ptr, struct weft_err *err)
{
	pthread_mutex_lock(&table_lock);
	for (size_t i = 0; i < table_len; i++) {
		if (table[i].base != ptr)
			continue;
		struct weft_memfd_info a = table[i];
		table[i] = table[--table_len];
		pthread_mutex_unlock(&table_lock);
		munmap(a.base, a.len);
		close(a.fd);
		return WEFT_SUCCESS;
	}
	pthread_mutex_unlock(&table_lock);
	return weft_err_set(err, WEFT_ERR_INVALID_ARG,
			    "weft_mem_free: %p is not a buffer from weft_mem_alloc (or was freed)",
			    ptr);
}

bool weft_memfd_find(const void *addr, size_t len, struct weft_memfd_info *out)
{
	uintptr_t lo = (uintptr_t)addr;
	bool found = false;
	pthread_mutex_lock(&table_lock);
	for (size_t i = 0; i < table_len && !found; i++) {
		uintptr_t b = (uintptr_t)table[i].base;
		if (lo >= b && lo - b <= table[i].len && len <= table[i].len - (lo - b)) {
			*out = table[i];
			found = true;
		}
	}
	pthread_mutex_unlock(&table_lock);
	return found;
}

size_t weft_memfd_count(void)
{
	pthread_mutex_lock(&table_lock);
	size_t n = table_len;
	pthread_mutex_unlock(&table_lock);
	return n;
}
