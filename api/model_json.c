/*
 * model_json.c — what a model puts in the self-description beyond a real
 * job's members: "transports" counted per link class from the graph's
 * groups (a real job asks every rank), and "model", its inputs with the
 * time and peak memory of each step.
 */
#include <sys/resource.h>

#include "api/describe.h"
#include "api/model.h"
#include "util/clock.h"

void weft_model_step_end(struct weft_model_steps *s, const char *name)
{
	double now = weft_now();
	struct rusage ru;
	if (s->n < WEFT_MODEL_MAX_STEPS) {
		struct weft_model_step *st = &s->step[s->n++];
		st->name = name;
		st->seconds = now - s->start;
		st->peak_rss_kib = getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
	}
	s->start = weft_now();
}

static const char *model_transport(enum weft_link_class c)
{
	switch (c) {
	case WEFT_LINK_SELF: return "self";
	case WEFT_LINK_NUMA:
	case WEFT_LINK_HOST: return "shm";
	default: return "net";
	}
}

weft_status_t weft_model_transports(const struct weft_topo_graph *g, json_t **out)
{
	uint64_t pairs[WEFT_LINK_CLASS_COUNT];
	weft_status_t st = weft_topo_class_pairs(g, pairs);
	json_t *list = json_array();
	int bad = st != WEFT_SUCCESS || !list;

	for (int c = 0; c < WEFT_LINK_CLASS_COUNT && !bad; c++) {
		if (pairs[c] == 0)
			continue;
		json_int_t p = (json_int_t)pairs[c];
		bad |= json_array_append_new(
		    list, json_pack("{s:s, s:I, s:{s:I}}", "link",
				    weft_topo_link_name((enum weft_link_class)c), "pairs", p,
				    "by_transport", model_transport((enum weft_link_class)c), p));
	}
	if (bad) {
		json_decref(list);
		*out = NULL;
		return WEFT_ERR_NO_MEMORY;
	}
	*out = list;
	return WEFT_SUCCESS;
}

json_t *weft_model_section(const char *path, int per_host, const char *order,
			   const struct weft_model_steps *s)
{
	json_t *steps = json_array();
	int bad = !steps;
	for (int i = 0; i < s->n && !bad; i++)
		bad |= json_array_append_new(steps, json_pack("{s:s, s:f, s:I}", "name",
							      s->step[i].name, "seconds",
							      s->step[i].seconds, "peak_rss_kib",
							      (json_int_t)s->step[i].peak_rss_kib));
	if (bad) {
		json_decref(steps);
		return NULL;
	}
	return json_pack("{s:o, s:i, s:o, s:o}", "topology_file", weft_describe_text(path),
			 "ranks_per_host", per_host, "order", weft_describe_text(order), "steps",
			 steps);
}
