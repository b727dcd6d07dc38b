/*
 * verbs_dev.c — the verbs transport's device: every port the library
 * reports (with its interfaces from sysfs), the one this rank uses
 * (verbs_select.h), its GID, and a protection domain.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transports/verbs/verbs.h"
#include "util/log.h"
#include "util/settings.h"

#define MAX_PORTS 64

static enum weft_verbs_link link_of(uint8_t link_layer)
{
	/* Old providers leave it unspecified: those are InfiniBand. */
	return link_layer == IBV_LINK_LAYER_ETHERNET ? WEFT_VERBS_LINK_ETH : WEFT_VERBS_LINK_IB;
}

/* The ports of one device, appended to @p ports. */
static int device_ports(struct verbs_tp *tp, struct ibv_device *d, struct weft_verbs_port *ports,
			int n)
{
	const struct weft_ibv *ibv = tp->ibv;
	const char *name = ibv->get_device_name(d);
	struct ibv_context *ctx = ibv->open_device(d);
	struct ibv_device_attr da;
	if (!ctx) {
		weft_log(WEFT_LOG_INFO, WEFT_SUB_NET, "verbs: cannot open %s: %s", name,
			 strerror(errno));
		return n;
	}
	if (ibv->query_device(ctx, &da) == 0) {
		for (int p = 1; p <= da.phys_port_cnt && n < MAX_PORTS; p++) {
			struct ibv_port_attr pa;
			if (weft_verbs_query_port(ibv, ctx, (uint8_t)p, &pa) != 0)
				continue;
			struct weft_verbs_port *out = &ports[n++];
			weft_verbs_sysfs_port(tp->sysfs, name, p, false, out);
			out->active = pa.state == IBV_PORT_ACTIVE;
			out->link = link_of(pa.link_layer);
			out->lid = pa.lid;
		}
	}
	ibv->close_device(ctx);
	return n;
}

/* By device and port: every rank of a host sees the same order, so the
 * spreading of local ranks over ports is the same everywhere. */
static int cmp_port(const void *a, const void *b)
{
	const struct weft_verbs_port *x = a, *y = b;
	int c = strcmp(x->dev, y->dev);
	return c ? c : x->port - y->port;
}

/* Every port of every device; the device list stays for the caller. */
static int list_ports(struct verbs_tp *tp, struct ibv_device ***devs, struct weft_verbs_port *ports)
{
	int ndev = 0, n = 0;
	errno = 0;
	*devs = tp->ibv->get_device_list(&ndev);
	if (!*devs || ndev == 0) {
		int e = errno;
		snprintf(tp->why, sizeof(tp->why), "no RDMA device (%s found none%s%s)",
			 tp->ibv->name, e ? ": " : "", e ? strerror(e) : "");
		return 0;
	}
	for (int i = 0; i < ndev && n < MAX_PORTS; i++)
		n = device_ports(tp, (*devs)[i], ports, n);
	qsort(ports, (size_t)n, sizeof(*ports), cmp_port);
	if (n == 0)
		snprintf(tp->why, sizeof(tp->why),
			 "%d RDMA device(s), but no port could be queried", ndev);
	return n;
}

static bool ipv4_of(const char *ifname, struct in_addr *out)
{
	struct ifaddrs *ifs;
	bool found = false;
	if (!ifname || !*ifname || getifaddrs(&ifs) != 0)
		return false;
	for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
		    strcmp(i->ifa_name, ifname) == 0) {
			*out = ((const struct sockaddr_in *)i->ifa_addr)->sin_addr;
			found = true;
		}
	freeifaddrs(ifs);
	return found;
}

/* The interface whose address this rank offers (or, on one host, the NIC
 * nearest its cores): the GID must be that interface's. */
static const char *used_netdev(const struct verbs_tp *tp)
{
	const struct weft_tp_env *env = tp->base.env;
	return env->ifname ? env->ifname : env->peers[env->rank].nic;
}

static weft_status_t choose_gid(struct verbs_tp *tp, long forced)
{
	bool ib = tp->port.link == WEFT_VERBS_LINK_IB;
	const char *netdev = used_netdev(tp);
	struct in_addr addr;
	bool have_addr = ipv4_of(netdev, &addr);
	char why[VERBS_WHY_BYTES];
	weft_status_t st =
	    weft_verbs_pick_gid(tp->sysfs, tp->port.dev, tp->port.port, ib, netdev,
				have_addr ? &addr : NULL, forced, &tp->gid, why, sizeof(why));
	if (st == WEFT_ERR_INVALID_ARG)
		return weft_tp_fail(tp->base.env, st, "verbs: %s", why);
	if (st != WEFT_SUCCESS && !ib) {
		snprintf(tp->why, sizeof(tp->why), "%s", why);
		return WEFT_ERR_NOT_SUPPORTED;
	}
	if (st != WEFT_SUCCESS) /* InfiniBand goes by LID: the port GID will do */
		tp->gid = (struct weft_verbs_gid){.index = 0, .type = WEFT_VERBS_GID_V1};
	/* The library's word is final: sysfs only chose the index. */
	union ibv_gid g;
	int err = tp->ibv->query_gid(tp->ctx, (uint8_t)tp->port.port, tp->gid.index, &g);
	if (err) {
		snprintf(tp->why, sizeof(tp->why), "ibv_query_gid(%s:%d, %d): %s", tp->port.dev,
			 tp->port.port, tp->gid.index, strerror(err > 0 ? err : errno));
		return WEFT_ERR_NOT_SUPPORTED;
	}
	memcpy(tp->gid.raw, g.raw, sizeof(g.raw));
	return WEFT_SUCCESS;
}

static double lanes(uint8_t width)
{
	switch (width) {
	case 1: return 1;
	case 2: return 4;
	case 4: return 8;
	case 8: return 12;
	case 16: return 2;
	default: return 1;
	}
}

static double lane_gbps(uint8_t speed)
{
	switch (speed) {
	case 1: return 2.5;
	case 2: return 5;
	case 4: /* fall through: QDR and FDR10 */
	case 8: return 10;
	case 16: return 14;
	case 32: return 25;
	case 64: return 50;
	case 128: return 100;
	default: return 2.5;
	}
}

static weft_status_t read_dev_settings(struct verbs_tp *tp, struct weft_verbs_hca_filter *f,
				       long *forced)
{
	const struct weft_tp_env *env = tp->base.env;
	char why[VERBS_WHY_BYTES];
	if (weft_verbs_hca_parse(weft_setting_str("WEFT_IB_HCA"), f, why, sizeof(why)) !=
	    WEFT_SUCCESS)
		return weft_tp_fail(env, WEFT_ERR_INVALID_ARG, "verbs: %s", why);
	*forced = -1;
	const char *gi = weft_setting_str("WEFT_IB_GID_INDEX");
	if (gi && (!weft_setting_long("WEFT_IB_GID_INDEX", forced) || *forced < 0 || *forced > 255))
		return weft_tp_fail(env, WEFT_ERR_INVALID_ARG,
				    "verbs: WEFT_IB_GID_INDEX=%s: expected an index from 0 to 255",
				    gi);
	return WEFT_SUCCESS;
}

static struct ibv_context *open_named(struct verbs_tp *tp, struct ibv_device **devs)
{
	for (int i = 0; devs[i]; i++)
		if (strcmp(tp->ibv->get_device_name(devs[i]), tp->port.dev) == 0)
			return tp->ibv->open_device(devs[i]);
	errno = ENODEV;
	return NULL;
}

/* Open the chosen port: its context, attributes, GID and PD. */
static weft_status_t open_port(struct verbs_tp *tp, struct ibv_device **devs, long forced)
{
	const struct weft_ibv *ibv = tp->ibv;
	const char *dev = tp->port.dev;
	int port = tp->port.port;
	tp->ctx = open_named(tp, devs);
	if (!tp->ctx) {
		snprintf(tp->why, sizeof(tp->why), "ibv_open_device(%s): %s", dev, strerror(errno));
		return WEFT_ERR_NOT_SUPPORTED;
	}
	struct ibv_device_attr da;
	int err = ibv->query_device(tp->ctx, &da);
	if (!err)
		err = weft_verbs_query_port(ibv, tp->ctx, (uint8_t)port, &tp->pattr);
	if (err) {
		snprintf(tp->why, sizeof(tp->why), "querying %s:%d: %s", dev, port, strerror(err));
		return WEFT_ERR_NOT_SUPPORTED;
	}
	tp->max_wr = (uint32_t)da.max_qp_wr;
	tp->port_Bps = lanes(tp->pattr.active_width) * lane_gbps(tp->pattr.active_speed) * 1e9 / 8;
	weft_status_t st = choose_gid(tp, forced);
	if (st != WEFT_SUCCESS)
		return st;
	tp->pd = ibv->alloc_pd(tp->ctx);
	if (!tp->pd) {
		snprintf(tp->why, sizeof(tp->why), "ibv_alloc_pd(%s): %s", dev, strerror(errno));
		return WEFT_ERR_NOT_SUPPORTED;
	}
	return WEFT_SUCCESS;
}

weft_status_t weft_verbs_dev_open(struct verbs_tp *tp, bool *found)
{
	*found = false;
	struct weft_verbs_hca_filter filter;
	long forced;
	weft_status_t st = read_dev_settings(tp, &filter, &forced);
	if (st != WEFT_SUCCESS)
		return st;
	struct weft_verbs_port *ports = calloc(MAX_PORTS, sizeof(*ports));
	if (!ports)
		return weft_tp_fail(tp->base.env, WEFT_ERR_NO_MEMORY, "verbs: no memory");
	struct ibv_device **devs = NULL;
	int n = list_ports(tp, &devs, ports);
	const struct weft_tp_env *env = tp->base.env;
	int pick = n ? weft_verbs_pick_port(ports, n, &filter, env->peers[env->rank].nic,
					    env->local_rank, tp->why, sizeof(tp->why))
		     : -1;
	if (pick >= 0) {
		tp->port = ports[pick];
		st = open_port(tp, devs, forced);
		*found = st == WEFT_SUCCESS;
		if (st == WEFT_ERR_NOT_SUPPORTED)
			st = WEFT_SUCCESS; /* tp->why says it; the job goes on without verbs */
	}
	if (devs)
		tp->ibv->free_device_list(devs);
	free(ports);
	if (!*found)
		weft_verbs_dev_close(tp);
	return st;
}

void weft_verbs_dev_close(struct verbs_tp *tp)
{
	if (tp->pd && tp->ibv->dealloc_pd(tp->pd) != 0)
		weft_log(WEFT_LOG_WARN, WEFT_SUB_NET, "verbs: ibv_dealloc_pd: still in use");
	tp->pd = NULL;
	if (tp->ctx)
		tp->ibv->close_device(tp->ctx);
	tp->ctx = NULL;
}
