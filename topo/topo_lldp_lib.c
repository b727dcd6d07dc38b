/* topo_lldp_lib.c — the dlopen table of liblldpctl (topo_lldp_lib.h). Built
 * where liblldpctl's header is (WEFT_HAVE_LLDPCTL), as topo_lldp.c is. */
#ifdef WEFT_HAVE_LLDPCTL
#include "topo/topo_lldp_lib.h"

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
    {"lldpctl_get_default_transport", offsetof(struct weft_lldpctl, get_default_transport)},
    {"lldpctl_new_name", offsetof(struct weft_lldpctl, new_name)},
    {"lldpctl_release", offsetof(struct weft_lldpctl, release)},
    {"lldpctl_last_error", offsetof(struct weft_lldpctl, last_error)},
    {"lldpctl_strerror", offsetof(struct weft_lldpctl, strerror)},
    {"lldpctl_get_interfaces", offsetof(struct weft_lldpctl, get_interfaces)},
    {"lldpctl_get_port", offsetof(struct weft_lldpctl, get_port)},
    {"lldpctl_atom_get", offsetof(struct weft_lldpctl, atom_get)},
    {"lldpctl_atom_get_str", offsetof(struct weft_lldpctl, atom_get_str)},
    {"lldpctl_atom_get_int", offsetof(struct weft_lldpctl, atom_get_int)},
    {"lldpctl_atom_dec_ref", offsetof(struct weft_lldpctl, atom_dec_ref)},
    {"lldpctl_atom_iter", offsetof(struct weft_lldpctl, atom_iter)},
    {"lldpctl_atom_iter_next", offsetof(struct weft_lldpctl, atom_iter_next)},
    {"lldpctl_atom_iter_value", offsetof(struct weft_lldpctl, atom_iter_value)},
};

#define NENTRIES (sizeof(entries) / sizeof(entries[0]))
#define NLIBS	 2 /* distinct names one process loads (a test loads a missing one) */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct loaded {
	char *name;
	struct weft_lldpctl table;
} libs[NLIBS];
static int nlibs;

static int fill(void *handle, const char *name, struct weft_lldpctl *t, char *why, size_t len)
{
	for (size_t i = 0; i < NENTRIES; i++) {
		void *sym = dlsym(handle, entries[i].symbol);
		if (!sym) {
			snprintf(why, len, "%s has no %s", name, entries[i].symbol);
			return -1;
		}
		/* POSIX: a dlsym result converts to a function pointer. */
		memcpy((char *)t + entries[i].offset, &sym, sizeof(sym));
	}
	return 0;
}

const struct weft_lldpctl *weft_topo_lldp_lib(const char *name, char *why, size_t len)
{
	if (!name || !*name)
		name = WEFT_LLDPCTL_DEFAULT;
	const struct weft_lldpctl *found = NULL;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < nlibs && !found; i++)
		if (strcmp(libs[i].name, name) == 0)
			found = &libs[i].table;
	if (found || nlibs == NLIBS) {
		if (!found)
			snprintf(why, len, "too many liblldpctl names in one process");
		pthread_mutex_unlock(&lock);
		return found;
	}
	void *handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	struct loaded l = {.name = strdup(name)};
	if (!handle) {
		const char *e = dlerror();
		snprintf(why, len, "dlopen(%s): %s", name, e ? e : "failed");
	} else if (!l.name) {
		snprintf(why, len, "out of memory");
	} else if (fill(handle, name, &l.table, why, len) == 0) {
		libs[nlibs] = l;
		found = &libs[nlibs++].table;
	}
	if (!found)
		free(l.name); /* a library that opened stays loaded (topo_lldp_lib.h) */
	pthread_mutex_unlock(&lock);
	return found;
}
#endif /* WEFT_HAVE_LLDPCTL */
