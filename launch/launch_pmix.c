/*
 * launch_pmix.c — PMIx as the launcher interface: rank, job size, local rank
 * and size from the PMIx server that started this process (Slurm's
 * `srun --mpi=pmix`, Open MPI's mpirun, PRRTE), and a way for rank 0 to hand
 * every rank a few bytes (the bootstrap id) through PMIx_Put, PMIx_Commit,
 * PMIx_Fence and PMIx_Get, so a job needs no WEFT_ROOT and no shared secret.
 *
 * libpmix is opened with dlopen the first time PMIx variables are seen: libweft
 * does not link it, so it loads and runs where libpmix is missing (then the
 * launcher's own variables are read instead). The types and constants come
 * from pmix.h when pkg-config found it at build time (WEFT_HAVE_PMIX); a
 * library built without it reads the environment only.
 *
 * The client is initialised once per process and finalised at exit, not
 * after each use: OpenPMIx 4.2 re-initialised after PMIx_Finalize gives wrong
 * answers (a local rank of 0 on every rank, then errors), and Open MPI's
 * mpirun counts a process that initialised PMIx and exits without finalising
 * it as an abnormal termination, failing the whole job.
 */
#include "launch/launch.h"

#include <stdio.h>
#include <string.h>

#include "util/settings.h"

#ifndef WEFT_HAVE_PMIX

weft_status_t weft_launch_pmix(struct weft_launch *l, char *why, size_t len)
{
	snprintf(why, len, "this libweft was built without PMIx's headers (libpmix-dev)");
	return WEFT_ERR_NOT_SUPPORTED;
}

weft_status_t weft_launch_pmix_share(void *buf, size_t len, bool publish, double timeout_s,
				     struct weft_err *err)
{
	return weft_err_set(err, WEFT_ERR_INTERNAL, "PMIx share without PMIx support");
}

#else /* WEFT_HAVE_PMIX */

#include <dlfcn.h>
#include <limits.h>
#include <pmix.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include <stdarg.h>

#include "util/log.h"

/* The PMIx calls Weft makes, filled by dlsym. */
struct pmix_lib {
	pmix_status_t (*init)(pmix_proc_t *proc, pmix_info_t info[], size_t ninfo);
	pmix_status_t (*finalize)(const pmix_info_t info[], size_t ninfo);
	pmix_status_t (*get)(const pmix_proc_t *proc, const char key[], const pmix_info_t info[],
			     size_t ninfo, pmix_value_t **val);
	pmix_status_t (*put)(pmix_scope_t scope, const char key[], pmix_value_t *val);
	pmix_status_t (*commit)(void);
	pmix_status_t (*fence)(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[],
			       size_t ninfo);
	const char *(*error_string)(pmix_status_t status);
	const char *(*get_version)(void);
};

#define WHY_BYTES 256

/* One client per process, behind one lock: detection may run on several
 * threads, and a share is a collective that must not interleave with
 * another on the same process. */
static struct {
	pthread_mutex_t lock;
	bool tried;	      /* dlopen and PMIx_Init were attempted (never twice) */
	weft_status_t status; /* their outcome */
	char why[WHY_BYTES];  /* what failed, when status is not success */
	pid_t pid;	      /* who initialised: a forked child must not finalise */
	pmix_proc_t me;
	unsigned shares; /* keys used so far: every rank counts the same */
	struct pmix_lib lib;
} pmix = {.lock = PTHREAD_MUTEX_INITIALIZER};

static const char *const lib_names[] = {
    "libpmix.so.2",
#ifdef WEFT_PMIX_LIBDIR
    WEFT_PMIX_LIBDIR "/libpmix.so.2",
#endif
};

static void *open_lib(void)
{
	const char *path = weft_setting_str("WEFT_PMIX_LIB");
	if (path) {
		void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		if (!h)
			snprintf(pmix.why, sizeof(pmix.why), "WEFT_PMIX_LIB=%s: %s", path,
				 dlerror());
		return h;
	}
	for (size_t i = 0; i < sizeof(lib_names) / sizeof(lib_names[0]); i++) {
		void *h = dlopen(lib_names[i], RTLD_NOW | RTLD_LOCAL);
		if (h)
			return h;
		snprintf(pmix.why, sizeof(pmix.why), "libpmix is not installed (%s)", dlerror());
	}
	return NULL;
}

/* dlsym into a function pointer: POSIX guarantees the conversion. */
static bool find(void *h, const char *name, void *slot)
{
	void *sym = dlsym(h, name);
	if (!sym) {
		snprintf(pmix.why, sizeof(pmix.why), "libpmix lacks %s", name);
		return false;
	}
	memcpy(slot, &sym, sizeof(sym));
	return true;
}

static bool load_lib(void)
{
	void *h = open_lib();
	struct pmix_lib *f = &pmix.lib;
	/* Never dlclose: PMIx leaves threads and atexit work behind. */
	return h && find(h, "PMIx_Init", &f->init) && find(h, "PMIx_Finalize", &f->finalize) &&
	       find(h, "PMIx_Get", &f->get) && find(h, "PMIx_Put", &f->put) &&
	       find(h, "PMIx_Commit", &f->commit) && find(h, "PMIx_Fence", &f->fence) &&
	       find(h, "PMIx_Error_string", &f->error_string) &&
	       find(h, "PMIx_Get_version", &f->get_version);
}

static const char *pmix_str(pmix_status_t rc)
{
	const char *s = pmix.lib.error_string ? pmix.lib.error_string(rc) : NULL;
	return s ? s : "unknown PMIx status";
}

static void finalize_at_exit(void)
{
	if (getpid() != pmix.pid)
		return;
	pmix_status_t rc = pmix.lib.finalize(NULL, 0);
	if (rc != PMIX_SUCCESS)
		weft_log(WEFT_LOG_WARN, WEFT_SUB_INIT, "PMIx_Finalize at exit: %s", pmix_str(rc));
}

/* Under the lock, once: load, initialise, arrange the finalize. */
static void start_locked(void)
{
	pmix.tried = true;
	pmix.status = WEFT_ERR_NOT_SUPPORTED;
	if (!load_lib())
		return;
	pmix_status_t rc = pmix.lib.init(&pmix.me, NULL, 0);
	if (rc != PMIX_SUCCESS) {
		snprintf(pmix.why, sizeof(pmix.why), "PMIx_Init: %s (no PMIx server reachable)",
			 pmix_str(rc));
		return;
	}
	pmix.pid = getpid();
	if (atexit(finalize_at_exit) != 0)
		weft_log(WEFT_LOG_WARN, WEFT_SUB_INIT,
			 "atexit failed: PMIx will not be finalised at exit");
	pmix.status = WEFT_SUCCESS;
	pmix.why[0] = '\0';
}

/* PMIx answers sizes in its own integer types (uint16 local ranks, uint32
 * sizes); take any unsigned or non-negative one. */
static bool value_uint(const pmix_value_t *v, uint64_t *out)
{
	switch (v->type) {
	case PMIX_UINT8: *out = v->data.uint8; return true;
	case PMIX_UINT16: *out = v->data.uint16; return true;
	case PMIX_UINT32: *out = v->data.uint32; return true;
	case PMIX_UINT64: *out = v->data.uint64; return true;
	case PMIX_SIZE: *out = v->data.size; return true;
	case PMIX_INT: *out = (uint64_t)v->data.integer; return v->data.integer >= 0;
	case PMIX_INT32: *out = (uint64_t)v->data.int32; return v->data.int32 >= 0;
	default: return false;
	}
}

/* What PMIX_VALUE_RELEASE does for the types Weft asks for; the macro
 * itself calls into libpmix by name, which a dlopen'd library cannot serve. */
static void value_release(pmix_value_t *v)
{
	if (!v)
		return;
	if (v->type == PMIX_STRING)
		free(v->data.string);
	else if (v->type == PMIX_BYTE_OBJECT)
		free(v->data.bo.bytes);
	free(v);
}

/* Reading is allowed to fail quietly (the launcher's variables are read
 * instead): the reason goes to a buffer, not to the error log. */
struct why {
	char *buf;
	size_t len;
};

static weft_status_t why_set(struct why *why, weft_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static weft_status_t why_set(struct why *why, weft_status_t st, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why->buf, why->len, fmt, ap);
	va_end(ap);
	return st;
}

/* @p key of @p rank (PMIX_RANK_WILDCARD: the job's) as an integer in
 * 0..@p max; *found false when the server does not know it. */
static weft_status_t get_uint(pmix_rank_t rank, const char *key, uint64_t max, uint64_t *out,
			      bool *found, struct why *err)
{
	pmix_proc_t who = pmix.me;
	pmix_value_t *v = NULL;
	who.rank = rank;
	pmix_status_t rc = pmix.lib.get(&who, key, NULL, 0, &v);
	*found = rc == PMIX_SUCCESS && v;
	if (rc == PMIX_ERR_NOT_FOUND || (rc == PMIX_SUCCESS && !v))
		return WEFT_SUCCESS;
	if (rc != PMIX_SUCCESS)
		return why_set(err, WEFT_ERR_SYSTEM, "PMIx_Get(%s): %s", key, pmix_str(rc));
	bool ok = value_uint(v, out) && *out <= max;
	int type = v->type;
	value_release(v);
	if (!ok)
		return why_set(err, WEFT_ERR_SYSTEM,
			       "PMIx_Get(%s): PMIx type %d, not an integer in 0..%llu", key, type,
			       (unsigned long long)max);
	return WEFT_SUCCESS;
}

static uint64_t nspace_key(const char *nspace)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (const char *s = nspace; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ull;
	}
	return h;
}

/* Under the lock, PMIx up: fill @p l from the server. */
static weft_status_t read_locked(struct weft_launch *l, struct why *err)
{
	uint64_t size = 0, local_rank = 0, local_size = 0, nodes = 0;
	bool have_size, have_lrank, have_lsize, have_nodes;
	weft_status_t st =
	    get_uint(PMIX_RANK_WILDCARD, PMIX_JOB_SIZE, INT_MAX, &size, &have_size, err);
	if (st == WEFT_SUCCESS)
		st =
		    get_uint(pmix.me.rank, PMIX_LOCAL_RANK, INT_MAX, &local_rank, &have_lrank, err);
	if (st == WEFT_SUCCESS)
		st = get_uint(PMIX_RANK_WILDCARD, PMIX_LOCAL_SIZE, INT_MAX, &local_size,
			      &have_lsize, err);
	if (st == WEFT_SUCCESS)
		st =
		    get_uint(PMIX_RANK_WILDCARD, PMIX_NUM_NODES, INT_MAX, &nodes, &have_nodes, err);
	if (st != WEFT_SUCCESS)
		return st;
	if (!have_size || size < 1 || pmix.me.rank >= size)
		return why_set(err, WEFT_ERR_SYSTEM,
			       "PMIx: rank %u of namespace %s, job size %s%llu: not a rank below "
			       "the size",
			       pmix.me.rank, pmix.me.nspace, have_size ? "" : "unknown, ",
			       (unsigned long long)size);
	l->found = true;
	l->pmix = true;
	l->name = "PMIx";
	l->rank_var = "PMIX_RANK";
	l->size_var = "PMIX_JOB_SIZE";
	l->rank = (int)pmix.me.rank;
	l->nranks = (int)size;
	l->local_size = have_lsize && local_size >= 1 && local_size <= size ? (int)local_size : -1;
	l->local_rank =
	    have_lrank && l->local_size > 0 && local_rank < local_size ? (int)local_rank : -1;
	l->one_host = (have_nodes && nodes == 1) || l->local_size == l->nranks;
	l->job_key = nspace_key(pmix.me.nspace);
	l->job_key_from = "the PMIx namespace";
	/* "OpenPMIx 4.2.2rc2 (PMIx Standard: 4.2, ...)": up to the parenthesis. */
	const char *version = pmix.lib.get_version ? pmix.lib.get_version() : NULL;
	if (!version)
		version = "PMIx";
	int vlen = (int)strcspn(version, "(");
	while (vlen > 0 && version[vlen - 1] == ' ')
		vlen--;
	snprintf(l->detail, sizeof(l->detail), "%.*s, namespace %.200s", vlen > 40 ? 40 : vlen,
		 version, pmix.me.nspace);
	return WEFT_SUCCESS;
}

weft_status_t weft_launch_pmix(struct weft_launch *l, char *why_buf, size_t why_len)
{
	struct why why = {why_buf, why_len};
	const char *use = weft_setting_str("WEFT_PMIX");
	if (use && strcmp(use, "0") == 0)
		return why_set(&why, WEFT_ERR_NOT_SUPPORTED, "WEFT_PMIX=0");
	pthread_mutex_lock(&pmix.lock);
	if (!pmix.tried)
		start_locked();
	weft_status_t st = pmix.status;
	if (st != WEFT_SUCCESS)
		why_set(&why, st, "%s", pmix.why);
	else
		st = read_locked(l, &why);
	pthread_mutex_unlock(&pmix.lock);
	return st;
}

static void info_flag(pmix_info_t *info, const char *key, bool flag)
{
	memset(info, 0, sizeof(*info));
	snprintf(info->key, sizeof(info->key), "%s", key);
	info->value.type = PMIX_BOOL;
	info->value.data.flag = flag;
}

static void info_int(pmix_info_t *info, const char *key, int value)
{
	memset(info, 0, sizeof(*info));
	snprintf(info->key, sizeof(info->key), "%s", key);
	info->value.type = PMIX_INT;
	info->value.data.integer = value;
}

static weft_status_t publish_locked(const char *key, void *buf, size_t len, struct weft_err *err)
{
	pmix_value_t v;
	memset(&v, 0, sizeof(v));
	v.type = PMIX_BYTE_OBJECT;
	v.data.bo.bytes = buf;
	v.data.bo.size = len;
	pmix_status_t rc = pmix.lib.put(PMIX_GLOBAL, key, &v);
	if (rc == PMIX_SUCCESS)
		rc = pmix.lib.commit();
	if (rc != PMIX_SUCCESS)
		return weft_err_set(err, WEFT_ERR_SYSTEM, "PMIx_Put/PMIx_Commit(%s): %s", key,
				    pmix_str(rc));
	return WEFT_SUCCESS;
}

static weft_status_t fetch_locked(const char *key, void *buf, size_t len, struct weft_err *err)
{
	pmix_proc_t root = pmix.me;
	pmix_value_t *v = NULL;
	root.rank = 0;
	pmix_status_t rc = pmix.lib.get(&root, key, NULL, 0, &v);
	if (rc != PMIX_SUCCESS || !v)
		return weft_err_set(err, WEFT_ERR_REMOTE, "PMIx_Get(%s) of rank 0: %s", key,
				    rc != PMIX_SUCCESS ? pmix_str(rc) : "no value");
	weft_status_t st = WEFT_SUCCESS;
	if (v->type != PMIX_BYTE_OBJECT || v->data.bo.size != len)
		st = weft_err_set(err, WEFT_ERR_REMOTE,
				  "PMIx_Get(%s) of rank 0: PMIx type %d, %zu bytes; expected %zu "
				  "bytes (another Weft version on rank 0?)",
				  key, (int)v->type,
				  v->type == PMIX_BYTE_OBJECT ? v->data.bo.size : (size_t)0, len);
	else
		memcpy(buf, v->data.bo.bytes, len);
	value_release(v);
	return st;
}

weft_status_t weft_launch_pmix_share(void *buf, size_t len, bool publish, double timeout_s,
				     struct weft_err *err)
{
	char key[64];
	pmix_info_t info[2];
	weft_status_t st = WEFT_SUCCESS;
	pthread_mutex_lock(&pmix.lock);
	if (pmix.status != WEFT_SUCCESS || !pmix.tried) {
		pthread_mutex_unlock(&pmix.lock);
		return weft_err_set(err, WEFT_ERR_INTERNAL, "PMIx share before PMIx started");
	}
	/* A new key per share: a job may create several communicators. */
	snprintf(key, sizeof(key), "weft.share.%u", ++pmix.shares);
	if (publish)
		st = publish_locked(key, buf, len, err);
	/* Rank 0 takes part in the fence even when its put failed: the others
	 * then find no value and fail at once instead of waiting. */
	pmix_proc_t all = pmix.me;
	all.rank = PMIX_RANK_WILDCARD;
	info_flag(&info[0], PMIX_COLLECT_DATA, true);
	info_int(&info[1], PMIX_TIMEOUT, timeout_s >= INT_MAX ? INT_MAX : (int)timeout_s + 1);
	pmix_status_t rc = pmix.lib.fence(&all, 1, info, 2);
	if (rc != PMIX_SUCCESS && st == WEFT_SUCCESS)
		st = weft_err_set(err, rc == PMIX_ERR_TIMEOUT ? WEFT_ERR_TIMEOUT : WEFT_ERR_SYSTEM,
				  "PMIx_Fence for %s (every rank of namespace %s): %s", key,
				  pmix.me.nspace, pmix_str(rc));
	if (st == WEFT_SUCCESS && !publish)
		st = fetch_locked(key, buf, len, err);
	pthread_mutex_unlock(&pmix.lock);
	return st;
}

#endif /* WEFT_HAVE_PMIX */
