/* tune_flow.c — see tune_flow.h. */
#include "tune/tune_flow.h"

#include "core/comm.h"
#include "tune/tune.h"

const size_t weft_tune_flow_sizes[WEFT_TUNE_FLOW_SIZES] = {8, 65536, 4 << 20, 256 << 20};

double weft_tune_flow_bandwidth(const struct weft_comm *comm, const struct weft_topo_flow *f,
				enum weft_flow_link kind, int index)
{
	const struct weft_cost *cls = comm->tuner->links.cls;
	if (kind == WEFT_FLOW_HOST_UP || kind == WEFT_FLOW_HOST_DOWN)
		return 1.0 / cls[WEFT_LINK_LEAF].beta;
	return (double)f->widest_leaf / cls[WEFT_LINK_SPINE].beta;
}

/* The link that takes longest to carry its bytes. */
static void busiest(const struct weft_comm *comm, const struct weft_topo_flow *f,
		    struct weft_flow_estimate *out)
{
	out->link_seconds = out->link_bytes = 0;
	out->busiest = WEFT_FLOW_LINK_COUNT;
	out->where = -1;
	for (int k = 0; k < WEFT_FLOW_LINK_COUNT; k++) {
		int n = weft_topo_flow_links(f, (enum weft_flow_link)k);
		for (int i = 0; i < n; i++) {
			double b = f->bytes[k][i];
			if (b <= 0)
				continue;
			double t = b / weft_tune_flow_bandwidth(comm, f, (enum weft_flow_link)k, i);
			if (t > out->link_seconds) {
				out->link_seconds = t;
				out->link_bytes = b;
				out->busiest = (enum weft_flow_link)k;
				out->where = i;
			}
		}
	}
}

bool weft_tune_flow(const struct weft_comm *comm, const struct weft_algo *algo,
		    const struct weft_coll_args *args, struct weft_topo_flow *f,
		    struct weft_flow_estimate *out)
{
	if (!algo->flow || !algo->estimate || (algo->supports && !algo->supports(comm, args)))
		return false;
	struct weft_coll_args one = *args;
	one.count = 1;
	weft_topo_flow_clear(f);
	algo->flow(comm, args, f);
	busiest(comm, f, out);
	out->latency = algo->estimate(comm, &comm->tuner->links, &one);
	out->seconds = out->latency + out->link_seconds;
	return true;
}
