/*
 * ofi_warm_up.h — for the suites over libfabric: load it and let it
 * initialise its providers once, in the test process, so that every forked
 * rank inherits what costs ~0.2 s per process. Set the providers' FI_*
 * settings (FI_TCP_IFACE=lo, ...) before: they are read here.
 */
#ifndef WEFT_TEST_OFI_WARM_UP_H
#define WEFT_TEST_OFI_WARM_UP_H

#include <dlfcn.h>
#include <rdma/fabric.h>
#include <stddef.h>

static inline void ofi_warm_up(void)
{
	void *h = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	int (*getinfo)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *,
		       struct fi_info **) = h ? dlsym(h, "fi_getinfo") : NULL;
	void (*freeinfo)(struct fi_info *) = h ? dlsym(h, "fi_freeinfo") : NULL;
	struct fi_info *info = NULL;
	if (getinfo && freeinfo && getinfo(FI_VERSION(1, 17), NULL, NULL, 0, NULL, &info) == 0)
		freeinfo(info);
}

#endif
