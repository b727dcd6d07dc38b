/*
 * ofi_mr.c — memory registration with the provider's mr_mode honoured:
 *   FI_MR_LOCAL      local buffers need a descriptor too: posts pass
 *                    fi_mr_desc() (the callers register sources then)
 *   FI_MR_VIRT_ADDR  a peer targets virtual addresses; otherwise offsets
 *                    from the region's start (key.addr = 0)
 *   FI_MR_PROV_KEY   the provider picks the key (fi_mr_key); otherwise
 *                    Weft requests one, unique in the domain
 *   FI_MR_ALLOCATED  only allocated memory: every buffer registered here
 *                    is the caller's live memory or Weft's pre-faulted own
 *   FI_MR_ENDPOINT   the region is bound to the endpoint and enabled
 */
#include "transports/ofi/ofi.h"

weft_status_t weft_ofi_mr_reg(struct ofi_tp *tp, void *buf, size_t len, struct weft_mr_reg *out)
{
	const uint64_t mode = tp->info->domain_attr->mr_mode;
	const uint64_t access =
	    FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	struct fid_mr *mr = NULL;
	int ret = fi_mr_reg(tp->domain, buf, len, access, 0, tp->next_key++, 0, &mr, NULL);
	if (ret)
		return weft_ofi_fail(tp, ret, "fi_mr_reg of %zu bytes", len);
	if (mode & FI_MR_ENDPOINT) {
		if ((ret = fi_mr_bind(mr, &tp->ep->fid, 0)) == 0)
			ret = fi_mr_enable(mr);
		if (ret) {
			fi_close(&mr->fid);
			return weft_ofi_fail(tp, ret, "binding a registration to the endpoint");
		}
	}
	uint64_t key = fi_mr_key(mr);
	if (key == FI_KEY_NOTAVAIL) {
		fi_close(&mr->fid);
		return weft_tp_fail(tp->base.env, WEFT_ERR_NOT_SUPPORTED,
				    "ofi: the provider's keys do not fit 64 bits (FI_MR_RAW)");
	}
	*out = (struct weft_mr_reg){
	    .handle = mr,
	    .desc = fi_mr_desc(mr),
	    .key = {.addr = mode & FI_MR_VIRT_ADDR ? (uint64_t)(uintptr_t)buf : 0,
		    .len = len,
		    .key = key},
	};
	return WEFT_SUCCESS;
}

void weft_ofi_mr_dereg(struct ofi_tp *tp, struct weft_mr_reg *reg)
{
	if (reg->handle)
		fi_close(&((struct fid_mr *)reg->handle)->fid);
	reg->handle = NULL;
}
