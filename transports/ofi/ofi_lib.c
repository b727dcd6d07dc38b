/*
 * ofi_lib.c — libfabric through dlopen, and its errors turned into
 * statuses.
 *
 * libweft does not link libfabric. Loading it costs this machine about
 * 0.2 s per process (Debian's build pulls in libpsm_infinipath, whose
 * constructor sleeps in a loop, and the first fi_getinfo reads
 * /proc/kallsyms), which every program linked against libweft would pay
 * whether it ever used ofi or not; and the library then runs where
 * libfabric is missing. Only five functions are exported by libfabric;
 * the rest of its API is inline over the objects' ops tables.
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "transports/ofi/ofi.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"
#include "util/settings.h"

bool weft_ofi_lib_load(struct ofi_lib *lib, char *why, size_t len)
{
	const char *name = weft_setting_str("WEFT_OFI_LIB");
	memset(lib, 0, sizeof(*lib));
	/* RTLD_NODELETE: providers keep threads and handlers that must not
	 * outlive their code; libfabric is never unloaded. */
	lib->handle = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (!lib->handle) {
		snprintf(why, len, "cannot load %s (WEFT_OFI_LIB): %s", name, dlerror());
		return false;
	}
	*(void **)&lib->getinfo = dlsym(lib->handle, "fi_getinfo");
	*(void **)&lib->freeinfo = dlsym(lib->handle, "fi_freeinfo");
	*(void **)&lib->dupinfo = dlsym(lib->handle, "fi_dupinfo");
	*(void **)&lib->fabric = dlsym(lib->handle, "fi_fabric");
	*(void **)&lib->strerror = dlsym(lib->handle, "fi_strerror");
	if (!lib->getinfo || !lib->freeinfo || !lib->dupinfo || !lib->fabric || !lib->strerror) {
		snprintf(why, len, "%s is not libfabric (fi_getinfo, fi_fabric missing)", name);
		memset(lib, 0, sizeof(*lib));
		return false;
	}
	return true;
}

const char *weft_ofi_strerror(const struct ofi_tp *tp, int ret)
{
	int e = ret < 0 ? -ret : ret;
	return tp->lib.strerror ? tp->lib.strerror(e) : "libfabric not loaded";
}

#define OFI_CONNECT_RETRY_S 5.0

int weft_ofi_retry_connect(struct ofi_conn *c, int ret)
{
	if (ret != -FI_ENOENT) {
		if (ret == 0)
			c->connect_failing_since = 0;
		return ret;
	}
	double now = weft_now();
	if (c->connect_failing_since == 0) {
		c->connect_failing_since = now;
		weft_log(WEFT_LOG_INFO, WEFT_SUB_NET,
			 "ofi: a post to rank %d found no connection (%s); retrying for %.0f s",
			 c->base.peer, weft_ofi_strerror(c->tp, ret), OFI_CONNECT_RETRY_S);
	}
	return now - c->connect_failing_since < OFI_CONNECT_RETRY_S ? -FI_EAGAIN : ret;
}

weft_status_t weft_ofi_fail(struct ofi_tp *tp, int ret, const char *fmt, ...)
{
	char what[WEFT_ERR_MSG_BYTES];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return weft_tp_fail(tp->base.env, WEFT_ERR_SYSTEM, "ofi: %s: %s", what,
			    weft_ofi_strerror(tp, ret));
}
