/*
 * shm_mem.c — the shared-memory transport's mem ops: a local peer's
 * weft_mem_alloc buffers mapped here, so a reduce stage reads (and a
 * gather stage writes) them in place.
 *
 *   reg    for a buffer inside one of this process's weft_mem allocations
 *          (util/memfd.h): the key names the whole allocation (addr = its
 *          base in our address space, len, key = its memory file's
 *          descriptor, gen = its generation); the caller sends the buffer's
 *          offset beside it. Anything else is WEFT_ERR_NOT_SUPPORTED: "not
 *          mappable", the ordinary path. No state: mr is NULL.
 *   map    opens /proc/<pid>/fd/<fd> of the peer (the permission
 *          process_vm_readv needs; a refusal is remembered and the peer's
 *          buffers are "not mappable" from then on), checks by the file's
 *          name that it is still the allocation of that generation (the
 *          peer may have freed it and reused the descriptor number), maps
 *          it pre-faulted and caches the mapping (shm.h, struct shm_map).
 *   unmap  releases the reference; the mapping stays cached until evicted
 *          or the communicator is destroyed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transports/shm/shm.h"
#include "util/log.h"
#include "util/memfd.h"

weft_status_t weft_tp_shm_reg(struct weft_tp *tp, void *buf, size_t len, struct weft_mr **mr,
			      struct weft_mr_key *key)
{
	struct weft_memfd_info a;
	*mr = NULL;
	if (!weft_memfd_find(buf, len, &a))
		return WEFT_ERR_NOT_SUPPORTED;
	*key = (struct weft_mr_key){
	    .addr = (uint64_t)(uintptr_t)a.base,
	    .len = a.len,
	    .key = (uint64_t)a.fd,
	    .gen = a.gen,
	};
	return WEFT_SUCCESS;
}

void weft_tp_shm_dereg(struct weft_tp *tp, struct weft_mr *mr)
{
}

static struct shm_map *cache_find(struct shm_conn *c, const struct weft_mr_key *key)
{
	for (int i = 0; i < SHM_MAP_CACHE; i++) {
		struct shm_map *m = &c->maps[i];
		if (m->addr && m->fd == key->key && m->gen == key->gen && m->len == key->len)
			return m;
	}
	return NULL;
}

/* A free entry, or the least recently used unreferenced one (unmapped). */
static struct shm_map *cache_slot(struct shm_conn *c)
{
	struct shm_map *victim = NULL;
	for (int i = 0; i < SHM_MAP_CACHE; i++) {
		struct shm_map *m = &c->maps[i];
		if (!m->addr)
			return m;
		if (!m->refs && (!victim || m->last_use < victim->last_use))
			victim = m;
	}
	if (victim) {
		munmap(victim->addr, victim->len);
		victim->addr = NULL;
	}
	return victim;
}

/* Is @p fd (ours) the peer's allocation of generation @p gen? Its link
 * reads "/memfd:weft:<pid>:<gen> (deleted)". */
static bool is_allocation(int fd, int pid, uint64_t gen, size_t len)
{
	char path[64], link[256], want[80];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return false;
	link[n] = '\0';
	char name[64];
	weft_memfd_name(name, sizeof(name), pid, gen);
	snprintf(want, sizeof(want), "/memfd:%s", name);
	size_t w = strlen(want);
	struct stat sb;
	return strncmp(link, want, w) == 0 && (link[w] == '\0' || link[w] == ' ') &&
	       fstat(fd, &sb) == 0 && (uint64_t)sb.st_size >= len;
}

/* Open the peer's memory file: its fd, -1 with *st set otherwise. */
static int open_peer_file(struct shm_conn *c, const struct weft_mr_key *key, weft_status_t *st)
{
	const struct weft_tp_env *env = c->tp->base.env;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd/%llu", (int)c->pid, (unsigned long long)key->key);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0 && (errno == EACCES || errno == EPERM)) {
		c->map_refused = true;
		weft_log(WEFT_LOG_INFO, WEFT_SUB_SHM,
			 "mapping rank %d's buffers refused (%s): they take the ordinary path",
			 c->base.peer, strerror(errno));
		*st = WEFT_ERR_NOT_SUPPORTED;
		return -1;
	}
	if (fd >= 0 && is_allocation(fd, (int)c->pid, key->gen, key->len))
		return fd;
	if (fd >= 0)
		close(fd);
	*st =
	    weft_tp_fail(env, WEFT_ERR_REMOTE,
			 "shm: rank %d's buffer of generation %llu (%llu bytes) is gone: freed "
			 "by its owner while named in a collective",
			 c->base.peer, (unsigned long long)key->gen, (unsigned long long)key->len);
	return -1;
}

weft_status_t weft_tp_shm_map(struct weft_conn *conn, const struct weft_mr_key *key, void **addr)
{
	struct shm_conn *c = weft_container_of(conn, struct shm_conn, base);
	*addr = NULL;
	if (c->map_refused)
		return WEFT_ERR_NOT_SUPPORTED;
	struct shm_map *m = cache_find(c, key);
	if (!m) {
		m = cache_slot(c);
		if (!m)
			return weft_tp_fail(c->tp->base.env, WEFT_ERR_INTERNAL,
					    "shm: more than %d mappings of rank %d in use",
					    SHM_MAP_CACHE, c->base.peer);
		weft_status_t st = WEFT_SUCCESS;
		int fd = open_peer_file(c, key, &st);
		if (fd < 0)
			return st;
		void *p =
		    mmap(NULL, key->len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
		int e = errno;
		close(fd);
		if (p == MAP_FAILED)
			return weft_tp_fail_errno(c->tp->base.env, e,
						  "shm: mmap of rank %d's buffer (%llu bytes)",
						  c->base.peer, (unsigned long long)key->len);
		*m = (struct shm_map){.addr = p, .len = key->len, .fd = key->key, .gen = key->gen};
	}
	m->refs++;
	m->last_use = ++c->map_uses;
	*addr = m->addr;
	return WEFT_SUCCESS;
}

void weft_tp_shm_unmap(struct weft_conn *conn, void *addr, size_t len)
{
	struct shm_conn *c = weft_container_of(conn, struct shm_conn, base);
	for (int i = 0; i < SHM_MAP_CACHE; i++)
		if (c->maps[i].addr == addr && c->maps[i].refs) {
			c->maps[i].refs--;
			return;
		}
}

void weft_tp_shm_unmap_all(struct shm_conn *c)
{
	for (int i = 0; i < SHM_MAP_CACHE; i++)
		if (c->maps[i].addr) {
			munmap(c->maps[i].addr, c->maps[i].len);
			c->maps[i].addr = NULL;
		}
}
