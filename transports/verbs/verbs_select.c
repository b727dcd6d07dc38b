/* verbs_select.c — device, port and GID choice (verbs_select.h). */
#include "transports/verbs/verbs_select.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/parse.h"

#define GID_SCAN_MAX 256 /* entries of a port's GID table looked at */

/* ---- WEFT_IB_HCA ---- */

/* One "name[:port]"; NULL, or what is wrong with it. */
static const char *parse_entry(const char *tok, struct weft_verbs_hca_entry *e)
{
	const char *colon = strchr(tok, ':');
	size_t nlen = colon ? (size_t)(colon - tok) : strlen(tok);
	if (nlen == 0)
		return "an entry has no device name";
	if (nlen >= sizeof(e->name))
		return "a device name is too long";
	memcpy(e->name, tok, nlen);
	e->name[nlen] = '\0';
	e->port = 0;
	if (colon) {
		char *end;
		long p = strtol(colon + 1, &end, 10);
		if (colon[1] == '\0' || *end != '\0' || p < 1 || p > 255)
			return "the port must be a number from 1 to 255";
		e->port = (int)p;
	}
	return NULL;
}

/* Empty items are skipped, as in every Weft list; '^' and '=' lead the
 * first item. */
weft_status_t weft_verbs_hca_parse(const char *spec, struct weft_verbs_hca_filter *f, char *why,
				   size_t len)
{
	*f = (struct weft_verbs_hca_filter){0};
	if (!spec || !*spec)
		return WEFT_SUCCESS;
	struct weft_list l;
	weft_list_init(&l, "WEFT_IB_HCA", spec, ',');
	while (weft_list_next(&l)) {
		char *tok = l.item;
		if (l.index == 0 && *tok == '^') {
			f->exclude = true;
			tok++;
		}
		if (l.index == 0 && *tok == '=') {
			f->exact = true;
			tok++;
		}
		const char *bad = f->n == WEFT_VERBS_HCA_MAX ? "too many entries"
				  : *tok == '^' || *tok == '='
				      ? "'^' and '=' go before the first name only"
				      : parse_entry(tok, &f->e[f->n]);
		if (bad) {
			weft_list_fail(&l, "'%s': %s", l.item, bad);
			break;
		}
		f->n++;
	}
	if (l.status == WEFT_SUCCESS && f->n == 0)
		weft_list_fail(&l, "names no device");
	if (l.status == WEFT_SUCCESS)
		return WEFT_SUCCESS;
	snprintf(why, len, "%s", l.msg);
	return l.status;
}

bool weft_verbs_hca_match(const struct weft_verbs_hca_filter *f, const char *dev, int port)
{
	if (f->n == 0)
		return true;
	bool listed = false;
	for (int i = 0; i < f->n && !listed; i++) {
		const struct weft_verbs_hca_entry *e = &f->e[i];
		bool name = f->exact ? strcmp(dev, e->name) == 0
				     : strncmp(dev, e->name, strlen(e->name)) == 0;
		listed = name && (e->port == 0 || e->port == port);
	}
	return listed != f->exclude;
}

/* ---- sysfs ---- */

static bool read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	bool ok = fgets(buf, (int)len, f) != NULL;
	fclose(f);
	if (ok)
		buf[strcspn(buf, "\n")] = '\0';
	return ok;
}

static void add_netdev(struct weft_verbs_port *p, const char *name)
{
	if (!*name || p->nnetdevs == WEFT_VERBS_NETDEVS)
		return;
	for (int i = 0; i < p->nnetdevs; i++)
		if (strcmp(p->netdevs[i], name) == 0)
			return;
	snprintf(p->netdevs[p->nnetdevs++], WEFT_VERBS_NAME_BYTES, "%s", name);
}

static void read_netdevs(const char *dir, struct weft_verbs_port *p)
{
	char path[700], buf[WEFT_VERBS_NAME_BYTES];
	for (int i = 0; i < GID_SCAN_MAX; i++) {
		snprintf(path, sizeof(path), "%s/ports/%d/gids/%d", dir, p->port, i);
		if (!read_line(path, buf, sizeof(buf)))
			break;
		snprintf(path, sizeof(path), "%s/ports/%d/gid_attrs/ndevs/%d", dir, p->port, i);
		if (read_line(path, buf, sizeof(buf)))
			add_netdev(p, buf);
	}
	if (p->nnetdevs)
		return;
	/* InfiniBand (IPoIB) and old kernels: the device's interfaces. */
	snprintf(path, sizeof(path), "%s/device/net", dir);
	DIR *d = opendir(path);
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.')
			add_netdev(p, e->d_name);
	if (d)
		closedir(d);
}

bool weft_verbs_sysfs_port(const char *root, const char *dev, int port, bool all,
			   struct weft_verbs_port *out)
{
	char dir[600], path[700], buf[128];
	snprintf(dir, sizeof(dir), "%s/class/infiniband/%s", root, dev);
	*out = (struct weft_verbs_port){.port = port, .numa = -1};
	snprintf(out->dev, sizeof(out->dev), "%s", dev);
	snprintf(path, sizeof(path), "%s/ports/%d/state", dir, port);
	bool exists = read_line(path, buf, sizeof(buf));
	if (exists && all) {
		out->active = strstr(buf, "ACTIVE") != NULL;
		snprintf(path, sizeof(path), "%s/ports/%d/link_layer", dir, port);
		if (read_line(path, buf, sizeof(buf)))
			out->link = strcmp(buf, "InfiniBand") == 0 ? WEFT_VERBS_LINK_IB
				    : strcmp(buf, "Ethernet") == 0 ? WEFT_VERBS_LINK_ETH
								   : WEFT_VERBS_LINK_UNKNOWN;
		snprintf(path, sizeof(path), "%s/ports/%d/lid", dir, port);
		if (read_line(path, buf, sizeof(buf)))
			out->lid = (uint16_t)strtoul(buf, NULL, 0);
	}
	snprintf(path, sizeof(path), "%s/device/numa_node", dir);
	if (read_line(path, buf, sizeof(buf)))
		out->numa = atoi(buf);
	read_netdevs(dir, out);
	return exists;
}

/* ---- the port ---- */

static const char *skip_reason(const struct weft_verbs_port *p,
			       const struct weft_verbs_hca_filter *f)
{
	if (!weft_verbs_hca_match(f, p->dev, p->port))
		return "not in WEFT_IB_HCA";
	if (!p->active)
		return "not ACTIVE";
	if (p->link == WEFT_VERBS_LINK_UNKNOWN)
		return "unknown link layer";
	if (p->link == WEFT_VERBS_LINK_IB && p->lid == 0)
		return "no LID (subnet manager?)";
	return NULL;
}

static bool has_netdev(const struct weft_verbs_port *p, const char *nic)
{
	for (int i = 0; nic && *nic && i < p->nnetdevs; i++)
		if (strcmp(p->netdevs[i], nic) == 0)
			return true;
	return false;
}

int weft_verbs_pick_port(const struct weft_verbs_port *ports, int n,
			 const struct weft_verbs_hca_filter *f, const char *nic, int local_rank,
			 char *why, size_t len)
{
	int ncand = 0, near = -1;
	for (int i = 0; i < n; i++) {
		if (skip_reason(&ports[i], f))
			continue;
		ncand++;
		if (near < 0 && has_netdev(&ports[i], nic))
			near = i;
	}
	if (near >= 0)
		return near;
	int want = ncand ? (local_rank < 0 ? 0 : local_rank) % ncand : -1;
	for (int i = 0, k = 0; i < n; i++)
		if (!skip_reason(&ports[i], f) && k++ == want)
			return i;
	size_t used = (size_t)snprintf(why, len, "no usable port (%d seen", n);
	for (int i = 0; i < n && used < len; i++)
		used += (size_t)snprintf(why + used, len - used, "%s%s:%d %s", i ? "; " : ": ",
					 ports[i].dev, ports[i].port, skip_reason(&ports[i], f));
	if (used < len)
		snprintf(why + used, len - used, ")");
	return -1;
}

/* ---- the GID ---- */

const char *weft_verbs_gid_type_name(enum weft_verbs_gid_type t, bool ib)
{
	if (ib)
		return "IB";
	return t == WEFT_VERBS_GID_V2 ? "RoCE v2" : t == WEFT_VERBS_GID_V1 ? "RoCE v1" : "?";
}

static bool gid_is_v4(const uint8_t g[16])
{
	static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	return memcmp(g, prefix, 12) == 0;
}

const char *weft_verbs_gid_str(const uint8_t g[16], char *buf, size_t len)
{
	if (gid_is_v4(g)) {
		snprintf(buf, len, "::ffff:%u.%u.%u.%u", g[12], g[13], g[14], g[15]);
		return buf;
	}
	size_t used = 0;
	for (int i = 0; i < 8 && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%02x%02x", i ? ":" : "",
					 g[2 * i], g[2 * i + 1]);
	return buf;
}

static bool parse_gid(const char *s, uint8_t g[16])
{
	unsigned v[8];
	if (sscanf(s, "%4x:%4x:%4x:%4x:%4x:%4x:%4x:%4x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
		   &v[6], &v[7]) != 8)
		return false;
	for (int i = 0; i < 8; i++) {
		g[2 * i] = (uint8_t)(v[i] >> 8);
		g[2 * i + 1] = (uint8_t)v[i];
	}
	return true;
}

/* Entry @p i of the port's table; false if it is missing or empty. */
static bool read_gid(const char *pdir, int i, struct weft_verbs_gid *g, bool *end)
{
	static const uint8_t zero[16];
	char path[700], buf[128];
	*g = (struct weft_verbs_gid){.index = i};
	snprintf(path, sizeof(path), "%s/gids/%d", pdir, i);
	*end = !read_line(path, buf, sizeof(buf));
	if (*end || !parse_gid(buf, g->raw) || memcmp(g->raw, zero, 16) == 0)
		return false;
	snprintf(path, sizeof(path), "%s/gid_attrs/types/%d", pdir, i);
	if (read_line(path, buf, sizeof(buf)))
		g->type = strstr(buf, "v2") ? WEFT_VERBS_GID_V2 : WEFT_VERBS_GID_V1;
	snprintf(path, sizeof(path), "%s/gid_attrs/ndevs/%d", pdir, i);
	if (read_line(path, buf, sizeof(buf)))
		snprintf(g->netdev, sizeof(g->netdev), "%.63s", buf);
	return true;
}

static int gid_rank(const struct weft_verbs_gid *g, const char *netdev, const struct in_addr *addr)
{
	bool v4 = gid_is_v4(g->raw);
	bool same_addr = v4 && addr && memcmp(&g->raw[12], &addr->s_addr, 4) == 0;
	bool link_local = g->raw[0] == 0xfe && (g->raw[1] & 0xc0) == 0x80;
	return (netdev && *netdev && strcmp(g->netdev, netdev) == 0) * 16 +
	       (g->type == WEFT_VERBS_GID_V2) * 8 + same_addr * 4 + v4 * 2 + !link_local;
}

weft_status_t weft_verbs_pick_gid(const char *root, const char *dev, int port, bool ib,
				  const char *netdev, const struct in_addr *addr, long forced,
				  struct weft_verbs_gid *out, char *why, size_t len)
{
	char pdir[600];
	snprintf(pdir, sizeof(pdir), "%s/class/infiniband/%s/ports/%d", root, dev, port);
	int best = -1, seen = 0;
	bool end = false;
	for (int i = 0; i < GID_SCAN_MAX && !end; i++) {
		struct weft_verbs_gid g;
		if (!read_gid(pdir, i, &g, &end))
			continue;
		seen++;
		if (forced >= 0 ? i != forced : (!ib && g.type == WEFT_VERBS_GID_UNKNOWN))
			continue;
		if (forced < 0 && ib && i != 0)
			continue;
		int r = forced >= 0 || ib ? 1 : gid_rank(&g, netdev, addr);
		if (best < 0 || r > best) {
			best = r;
			*out = g;
		}
	}
	if (best >= 0)
		return WEFT_SUCCESS;
	if (forced >= 0) {
		snprintf(why, len,
			 "WEFT_IB_GID_INDEX=%ld: %s:%d has no GID at that index (%d in use)",
			 forced, dev, port, seen);
		return WEFT_ERR_INVALID_ARG;
	}
	snprintf(why, len, "%s:%d has no usable GID (%d entries; read from %s)", dev, port, seen,
		 pdir);
	return WEFT_ERR_NOT_SUPPORTED;
}
