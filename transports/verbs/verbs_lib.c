/* verbs_lib.c — the dlopen table of libibverbs (verbs_lib.h). */
#include "transports/verbs/verbs_lib.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each entry by the symbol name it is looked up under. */
static const struct {
	const char *symbol;
	size_t offset;
} entries[] = {
    {"ibv_get_device_list", offsetof(struct weft_ibv, get_device_list)},
    {"ibv_free_device_list", offsetof(struct weft_ibv, free_device_list)},
    {"ibv_get_device_name", offsetof(struct weft_ibv, get_device_name)},
    {"ibv_open_device", offsetof(struct weft_ibv, open_device)},
    {"ibv_close_device", offsetof(struct weft_ibv, close_device)},
    {"ibv_query_device", offsetof(struct weft_ibv, query_device)},
    {"ibv_query_port", offsetof(struct weft_ibv, query_port)},
    {"ibv_query_gid", offsetof(struct weft_ibv, query_gid)},
    {"ibv_alloc_pd", offsetof(struct weft_ibv, alloc_pd)},
    {"ibv_dealloc_pd", offsetof(struct weft_ibv, dealloc_pd)},
    {"ibv_reg_mr", offsetof(struct weft_ibv, reg_mr)},
    {"ibv_dereg_mr", offsetof(struct weft_ibv, dereg_mr)},
    {"ibv_create_cq", offsetof(struct weft_ibv, create_cq)},
    {"ibv_destroy_cq", offsetof(struct weft_ibv, destroy_cq)},
    {"ibv_create_qp", offsetof(struct weft_ibv, create_qp)},
    {"ibv_modify_qp", offsetof(struct weft_ibv, modify_qp)},
    {"ibv_destroy_qp", offsetof(struct weft_ibv, destroy_qp)},
    {"ibv_wc_status_str", offsetof(struct weft_ibv, wc_status_str)},
};

#define NENTRIES (sizeof(entries) / sizeof(entries[0]))
#define NLIBS	 4 /* distinct names one process loads (tests load a few) */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct weft_ibv libs[NLIBS];
static int nlibs;

static bool fill(struct weft_ibv *t, char *why, size_t len)
{
	for (size_t i = 0; i < NENTRIES; i++) {
		dlerror();
		void *sym = dlsym(t->handle, entries[i].symbol);
		if (!sym) {
			snprintf(why, len, "%s has no %s", t->name, entries[i].symbol);
			return false;
		}
		/* POSIX: a dlsym result converts to a function pointer. */
		memcpy((char *)t + entries[i].offset, &sym, sizeof(sym));
	}
	t->fake = dlsym(t->handle, WEFT_IBVERBS_FAKE_MARKER) != NULL;
	return true;
}

const struct weft_ibv *weft_verbs_lib_load(const char *name, char *why, size_t len)
{
	if (!name || !*name)
		name = WEFT_IBVERBS_DEFAULT;
	const struct weft_ibv *found = NULL;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < nlibs && !found; i++)
		if (strcmp(libs[i].name, name) == 0)
			found = &libs[i];
	if (found || nlibs == NLIBS) {
		if (!found)
			snprintf(why, len, "too many verbs libraries in one process");
		pthread_mutex_unlock(&lock);
		return found;
	}
	struct weft_ibv t = {.name = strdup(name)};
	t.handle = t.name ? dlopen(name, RTLD_NOW | RTLD_LOCAL) : NULL;
	if (!t.handle) {
		const char *e = t.name ? dlerror() : "no memory";
		snprintf(why, len, "dlopen(%s): %s", name, e ? e : "failed");
	} else if (fill(&t, why, len)) {
		libs[nlibs] = t;
		found = &libs[nlibs++];
	}
	if (!found) {
		/* A library without what Weft needs is of no use; one that
		 * opened is left loaded (see verbs_lib.h). */
		free((char *)t.name);
	}
	pthread_mutex_unlock(&lock);
	return found;
}

int weft_verbs_query_port(const struct weft_ibv *ibv, struct ibv_context *ctx, uint8_t port,
			  struct ibv_port_attr *attr)
{
	memset(attr, 0, sizeof(*attr));
	return ibv->query_port(ctx, port, (struct _compat_ibv_port_attr *)attr);
}

const char *weft_verbs_wc_str(const struct weft_ibv *ibv, enum ibv_wc_status status)
{
	const char *s = ibv->wc_status_str(status);
	return s ? s : "unknown status";
}
