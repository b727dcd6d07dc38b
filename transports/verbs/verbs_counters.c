/* verbs_counters.c — see verbs_counters.h. */
#include "transports/verbs/verbs_counters.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static bool read_u64(const char *path, uint64_t *out)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	bool ok = fscanf(f, "%" SCNu64, out) == 1;
	fclose(f);
	return ok;
}

static void counter_path(char *out, const char *root, const char *dev, int port, const char *group,
			 const char *name)
{
	snprintf(out, WEFT_VERBS_COUNTER_PATH, "%s/class/infiniband/%s/ports/%d/%s/%s",
		 root ? root : "/sys", dev, port, group, name);
}

void weft_verbs_counters_open(struct weft_verbs_counters *c, const char *root, const char *dev,
			      int port)
{
	memset(c, 0, sizeof(*c));
	counter_path(c->tx, root, dev, port, "counters", "port_xmit_packets");
	counter_path(c->cnp, root, dev, port, "hw_counters", "rp_cnp_handled");
	counter_path(c->ecn, root, dev, port, "hw_counters", "np_ecn_marked_roce_packets");
	uint64_t v;
	c->present = read_u64(c->tx, &v) && read_u64(c->cnp, &v);
	if (!read_u64(c->ecn, &v))
		c->ecn[0] = '\0';
}

bool weft_verbs_counters_read(const struct weft_verbs_counters *c, struct weft_verbs_sample *out)
{
	*out = (struct weft_verbs_sample){0};
	if (!c->present || !read_u64(c->tx, &out->tx_packets) ||
	    !read_u64(c->cnp, &out->cnp_handled))
		return false;
	if (c->ecn[0] && !read_u64(c->ecn, &out->ecn_marked))
		out->ecn_marked = 0;
	return true;
}
