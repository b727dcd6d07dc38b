/*
 * ofi_info.c — which provider, which of its domains, and why not.
 *
 * Hints: an RDM endpoint with tagged messages, messages and RMA, directed
 * receives, manual data progress, one thread per domain; the modes Weft
 * handles (FI_CONTEXT, FI_CONTEXT2: every posted operation carries its own
 * context; FI_RX_CQ_DATA: receives are posted for remote CQ data); the
 * mr_mode bits it honours (ofi_mr.c). A provider must carry remote CQ data
 * (at least 4 bytes). Among what fi_getinfo returns, the domain on the
 * interface the job uses (WEFT_SOCKET_IFNAME or the NIC; loopback on one
 * host) is preferred, IPv4 before IPv6, so that the tcp, sockets and udp
 * providers never wander off to another interface.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transports/ofi/ofi.h"
#include "util/log.h"
#include "util/settings.h"

#define OFI_MR_MODES                                                                               \
	(FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED | FI_MR_ENDPOINT)
#define OFI_MODES (FI_CONTEXT | FI_CONTEXT2 | FI_RX_CQ_DATA)
#define OFI_NEEDS                                                                                  \
	"an FI_EP_RDM endpoint with FI_TAGGED, FI_MSG, FI_RMA, directed receives and remote CQ "   \
	"data"

weft_status_t weft_ofi_bad_setting(const struct weft_tp_env *env, const char *name,
				   const char *expected)
{
	return weft_tp_fail(env, WEFT_ERR_INVALID_ARG, "%s=%s: expected %s", name,
			    weft_setting_str(name), expected);
}

static bool list_has(const char *list, const char *name)
{
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", list);
	char *save = NULL;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
		if (strcmp(t, name) == 0)
			return true;
	return false;
}

bool weft_ofi_requested(void)
{
	if (weft_setting_str("WEFT_OFI_PROVIDER") || getenv("FI_PROVIDER"))
		return true;
	const char *spec = weft_setting_str("WEFT_TRANSPORTS");
	if (!spec)
		return false;
	/* "ofi,..." names it; "^socket" leaves it to reach other hosts. */
	if (spec[0] == '^')
		return list_has(spec + 1, "socket") && !list_has(spec + 1, "ofi");
	return list_has(spec, "ofi");
}

bool weft_ofi_hardware_visible(void)
{
	DIR *d = opendir("/sys/class/infiniband"); /* verbs devices: mlx5, efa, irdma, hfi1 */
	bool found = false;
	struct dirent *e;
	while (d && !found && (e = readdir(d)))
		found = e->d_name[0] != '.';
	if (d)
		closedir(d);
	return found || access("/dev/cxi0", F_OK) == 0 || access("/dev/hfi1_0", F_OK) == 0;
}

bool weft_ofi_prov_is_hardware(const char *prov)
{
	static const char *const hw[] = {"verbs", "efa", "cxi", "psm3",
					 "psm2",  "psm", "opx", "usnic"};
	size_t n = strcspn(prov, ";");
	for (size_t i = 0; i < sizeof(hw) / sizeof(hw[0]); i++)
		if (strlen(hw[i]) == n && strncmp(prov, hw[i], n) == 0)
			return true;
	return false;
}

static struct fi_info *make_hints(struct ofi_tp *tp, const char *prov, bool source)
{
	struct fi_info *h = tp->lib.dupinfo(NULL);
	if (!h)
		return NULL;
	h->caps = FI_TAGGED | FI_MSG | FI_RMA | FI_DIRECTED_RECV | (source ? FI_SOURCE : 0);
	h->mode = OFI_MODES;
	h->ep_attr->type = FI_EP_RDM;
	h->domain_attr->mr_mode = OFI_MR_MODES;
	h->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	h->domain_attr->threading = FI_THREAD_DOMAIN;
	if (prov && !(h->fabric_attr->prov_name = strdup(prov))) {
		tp->lib.freeinfo(h);
		return NULL;
	}
	return h;
}

static bool usable(const struct fi_info *i)
{
	return i->domain_attr->cq_data_size >= 4 && !(i->domain_attr->mr_mode & ~OFI_MR_MODES) &&
	       !(i->mode & ~OFI_MODES);
}

/* How well @p i fits the interface @p ifname: 3 the same and IPv4, 2 the
 * same, 1 IPv4, 0 neither. */
static int fit(const struct fi_info *i, const char *ifname)
{
	bool same = i->domain_attr->name && strcmp(i->domain_attr->name, ifname) == 0;
	bool v4 = i->addr_format == FI_SOCKADDR_IN;
	return (same ? 2 : 0) + (v4 ? 1 : 0);
}

/* "a, b, c": the providers that fit the hints (without a provider name). */
static void would_work(struct ofi_tp *tp, bool source, char *buf, size_t len)
{
	struct fi_info *h = make_hints(tp, NULL, source), *list = NULL;
	size_t used = 0;
	buf[0] = '\0';
	if (h && tp->lib.getinfo(OFI_API, NULL, NULL, 0, h, &list) == 0) {
		for (struct fi_info *i = list; i && used < len; i = i->next) {
			const char *p = i->fabric_attr->prov_name;
			if (!usable(i) || strstr(buf, p))
				continue;
			used +=
			    (size_t)snprintf(buf + used, len - used, "%s%s", used ? ", " : "", p);
		}
		tp->lib.freeinfo(list);
	}
	if (h)
		tp->lib.freeinfo(h);
	if (!buf[0])
		snprintf(buf, len, "none%s",
			 getenv("FI_PROVIDER") ? " (FI_PROVIDER filters "
						 "libfabric's own list too)"
					       : "");
}

static bool prov_exists(struct ofi_tp *tp, const char *prov)
{
	struct fi_info *h = tp->lib.dupinfo(NULL), *list = NULL;
	if (!h)
		return false;
	h->fabric_attr->prov_name = strdup(prov);
	bool found = h->fabric_attr->prov_name &&
		     tp->lib.getinfo(OFI_API, NULL, NULL, 0, h, &list) == 0 && list;
	if (list)
		tp->lib.freeinfo(list);
	tp->lib.freeinfo(h);
	return found;
}

static weft_status_t no_provider(struct ofi_tp *tp, const char *prov, bool source, int ret)
{
	char works[256];
	would_work(tp, source, works, sizeof(works));
	const char *from =
	    weft_setting_str("WEFT_OFI_PROVIDER") ? "WEFT_OFI_PROVIDER" : "FI_PROVIDER";
	if (!prov)
		return weft_tp_fail(tp->base.env, WEFT_ERR_NOT_SUPPORTED,
				    "ofi: no libfabric provider offers " OFI_NEEDS " (%s)",
				    weft_ofi_strerror(tp, ret));
	if (!prov_exists(tp, prov))
		return weft_tp_fail(tp->base.env, WEFT_ERR_INVALID_ARG,
				    "ofi: %s=%s: libfabric offers no such provider here (no such "
				    "name, or no device for it); providers that would work: %s",
				    from, prov, works);
	return weft_tp_fail(tp->base.env, WEFT_ERR_NOT_SUPPORTED,
			    "ofi: %s=%s: the provider lacks what Weft needs (" OFI_NEEDS
			    "); providers that would work: %s",
			    from, prov, works);
}

/* The best entry of fi_getinfo's answer, duplicated; NULL if none fits. */
static struct fi_info *pick(struct ofi_tp *tp, struct fi_info *list)
{
	const char *ifname = tp->base.env->ifname ? tp->base.env->ifname : "lo";
	struct fi_info *best = NULL;
	for (struct fi_info *i = list; i; i = i->next)
		if (usable(i) && (!best || fit(i, ifname) > fit(best, ifname)))
			best = i;
	return best ? tp->lib.dupinfo(best) : NULL;
}

static weft_status_t query(struct ofi_tp *tp, const char *prov, bool source)
{
	struct fi_info *h = make_hints(tp, prov, source), *list = NULL;
	if (!h)
		return weft_tp_fail(tp->base.env, WEFT_ERR_NO_MEMORY, "ofi: no memory");
	int ret = tp->lib.getinfo(OFI_API, NULL, NULL, 0, h, &list);
	tp->lib.freeinfo(h);
	if (ret == 0) {
		tp->info = pick(tp, list);
		tp->lib.freeinfo(list);
	}
	return tp->info ? WEFT_SUCCESS : no_provider(tp, prov, source, ret ? ret : -FI_ENODATA);
}

weft_status_t weft_ofi_choose(struct ofi_tp *tp)
{
	const char *prov = weft_setting_str("WEFT_OFI_PROVIDER");
	if (!prov)
		prov = getenv("FI_PROVIDER");
	weft_status_t st = query(tp, prov, false);
	if (st != WEFT_SUCCESS)
		return st;
	/* The writer's rank rides in the upper half of 8-byte CQ data; with
	 * less, the completion must name its source. */
	tp->rank_in_data = tp->info->domain_attr->cq_data_size >= 8;
	if (!tp->rank_in_data && tp->proto == OFI_PROTO_RMA) {
		tp->lib.freeinfo(tp->info);
		tp->info = NULL;
		if ((st = query(tp, prov, true)) != WEFT_SUCCESS)
			return st;
	}
	const struct fi_info *i = tp->info;
	tp->hardware = weft_ofi_prov_is_hardware(i->fabric_attr->prov_name);
	weft_log(WEFT_LOG_INFO, WEFT_SUB_NET,
		 "ofi: provider %s, fabric %s, domain %s, mr_mode %#llx, mode %#llx, cq data %zu "
		 "bytes, inject %zu",
		 i->fabric_attr->prov_name, i->fabric_attr->name, i->domain_attr->name,
		 (unsigned long long)i->domain_attr->mr_mode, (unsigned long long)i->mode,
		 i->domain_attr->cq_data_size, i->tx_attr->inject_size);
	return WEFT_SUCCESS;
}
