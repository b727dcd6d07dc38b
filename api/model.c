/*
 * model.c — weft_model_describe: the self-description of a job that is not
 * running. From a topology file and an order of ranks on its hosts, it
 * builds a communicator with nothing behind it (no bootstrap, no
 * transports, no peers): cards as every rank would send them, the graph,
 * the placement ring, the tuner with its default costs per link class
 * (nothing to measure), and then the same document weft_comm_describe()
 * writes, through the same code, so a model and a real job of the same
 * shape say the same thing. Only "transports" differ: a real job asks each
 * rank, a model counts pairs per link class (model_json.c).
 *
 * Each step is timed, with the process's peak memory after it, in "model":
 * the point is to show how the library's costs grow with the job.
 */
#include <stdlib.h>
#include <string.h>

#include "api/describe.h"
#include "api/model.h"
#include "core/comm.h"
#include "tune/tune.h"
#include "util/clock.h"
#include "util/settings.h"

struct model {
	struct weft_comm comm;
	struct weft_topo_file *file;
	const char **names; /* [host] in the file, strcmp order */
	int *host_of;	    /* [rank] index into names */
	struct weft_model_steps steps;
};

/* One rank's card, as the rank would learn it from WEFT_TOPO_FILE. */
static void fill_card(struct model *m, int r, int local_rank, const char *leaf, const char *spine)
{
	struct weft_card *c = &m->comm.cards[r];
	const char *name = m->names[m->host_of[r]];
	snprintf(c->host_id, sizeof(c->host_id), "%s", name);
	snprintf(c->hostname, sizeof(c->hostname), "%s", name);
	c->rank = r;
	c->pid = -1;
	c->local_rank = (uint32_t)local_rank;
	struct weft_topo_card *t = &c->topo;
	snprintf(t->leaf_name, sizeof(t->leaf_name), "%s", leaf);
	snprintf(t->file_leaf, sizeof(t->file_leaf), "%s", leaf);
	snprintf(t->spine, sizeof(t->spine), "%s", spine);
	snprintf(t->file_spine, sizeof(t->file_spine), "%s", spine);
	t->leaf_source = WEFT_LEAF_FILE;
	t->numa = t->nic_numa = -1; /* a topology file says nothing of NUMA */
}

static weft_status_t make_cards(struct model *m, const char *order, int per_host)
{
	struct weft_comm *comm = &m->comm;
	size_t nh = weft_topo_file_count(m->file);
	const char *leaf, *spine;
	m->names = malloc(nh * sizeof(*m->names));
	if (!m->names)
		return weft_err_set(&comm->err, WEFT_ERR_NO_MEMORY, "model: %zu hosts", nh);
	for (size_t h = 0; h < nh; h++)
		weft_topo_file_host(m->file, h, &m->names[h], &leaf, &spine);
	weft_status_t st = weft_model_order(order, (int)nh, m->names, per_host, &m->host_of,
					    &comm->nranks, &comm->err);
	if (st != WEFT_SUCCESS)
		return st;
	int n = comm->nranks, *count = calloc(nh, sizeof(int));
	comm->cards = calloc((size_t)n, sizeof(*comm->cards));
	if (!count || !comm->cards) {
		free(count);
		return weft_err_set(&comm->err, WEFT_ERR_NO_MEMORY, "model: %d ranks", n);
	}
	for (int r = 0; r < n; r++) {
		weft_topo_file_host(m->file, (size_t)m->host_of[r], &m->names[m->host_of[r]], &leaf,
				    &spine);
		fill_card(m, r, count[m->host_of[r]]++, leaf, spine);
	}
	for (int r = 0; r < n; r++)
		comm->cards[r].local_count = (uint32_t)count[m->host_of[r]];
	free(count);
	return WEFT_SUCCESS;
}

static weft_status_t build_graph(struct model *m)
{
	struct weft_comm *comm = &m->comm;
	int n = comm->nranks;
	struct weft_topo_rank *in = calloc((size_t)n, sizeof(*in));
	if (!in)
		return weft_err_set(&comm->err, WEFT_ERR_NO_MEMORY, "model: %d ranks", n);
	for (int r = 0; r < n; r++) {
		in[r].host_id = comm->cards[r].host_id;
		in[r].hostname = comm->cards[r].hostname;
		in[r].card = &comm->cards[r].topo;
	}
	weft_status_t st = weft_topo_graph_build(&comm->graph, n, in, &comm->err);
	free(in);
	return st;
}

/* The ring, and the pipelining chunk a job of this shape would agree on:
 * the smallest of the transports' chunks (shm inside a host, TCP's
 * between hosts; settings as the transports read them). */
static weft_status_t place(struct model *m)
{
	struct weft_comm *comm = &m->comm;
	const char *mode = weft_setting_str("WEFT_PLACEMENT");
	if (strcmp(mode, "rank") != 0 && strcmp(mode, "topo") != 0)
		return weft_err_set(&comm->err, WEFT_ERR_INVALID_ARG,
				    "WEFT_PLACEMENT=%s: expected topo or rank", mode);
	comm->placement_by_rank = strcmp(mode, "rank") == 0;
	comm->ring = malloc((size_t)comm->nranks * sizeof(int));
	if (!comm->ring)
		return weft_err_set(&comm->err, WEFT_ERR_NO_MEMORY, "model: ring");
	weft_topo_ring_order(&comm->graph, comm->placement_by_rank, comm->ring);
	long shm = 128 << 10, sock = 512 << 10, chunk = WEFT_CHUNK_MAX;
	weft_setting_long("WEFT_SHM_SLOT_BYTES", &shm);
	weft_setting_long("WEFT_SOCKET_CHUNK", &sock);
	if (comm->graph.nhosts < comm->nranks && shm < chunk)
		chunk = shm;
	if (comm->graph.nhosts > 1 && sock < chunk)
		chunk = sock;
	comm->chunk_bytes =
	    comm->nranks == 1 ? WEFT_CHUNK_ALONE : (size_t)(chunk < 64 ? 64 : chunk);
	/* What a job would allocate (nothing here): rhd's doubling path
	 * depends on it. */
	comm->scratch_bytes = weft_comm_scratch_bytes(comm->nranks, comm->chunk_bytes);
	return WEFT_SUCCESS;
}

static weft_status_t tune(struct model *m)
{
	const char *cal = weft_setting_str("WEFT_TUNE_CALIBRATE");
	if (cal && strcmp(cal, "0") != 0 && cal[0])
		return weft_err_set(&m->comm.err, WEFT_ERR_INVALID_ARG,
				    "model: WEFT_TUNE_CALIBRATE=%s measures links, and a model has "
				    "none (unset it)",
				    cal);
	return weft_tune_init(&m->comm);
}

/* The document's pieces as steps: "tuner" there is the table of
 * estimates, not the tuner's init. */
static void after_piece(void *ctx, const char *piece)
{
	static const char *const names[][2] = {
	    {"topo", "json topo"},
	    {"ring", "json ring"},
	    {"trees", "trees"},
	    {"tuner", "tuner table"},
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(piece, names[i][0]) == 0)
			weft_model_step_end(ctx, names[i][1]);
}

/* WEFT_MODEL_BRIEF: every list with an entry per rank, host or leaf cut
 * to its first BRIEF_ENTRIES. */
#define BRIEF_ENTRIES 8

static void cut(json_t *list)
{
	while (json_array_size(list) > BRIEF_ENTRIES)
		json_array_remove(list, json_array_size(list) - 1);
}

static int make_brief(json_t *root)
{
	static const char *const top[] = {"ranks", "hosts", "leaves", "spines"};
	json_t *trees = json_object_get(root, "trees");
	for (size_t i = 0; i < sizeof(top) / sizeof(top[0]); i++)
		cut(json_object_get(root, top[i]));
	cut(json_object_get(json_object_get(root, "ring"), "order"));
	cut(json_object_get(trees, "host_leaders"));
	cut(json_object_get(trees, "leaf_leaders"));
	cut(json_object_get(json_object_get(trees, "leader_ring"), "order"));
	return json_object_set_new(root, "brief", json_true());
}

static weft_status_t describe(struct model *m, const char *path, int per_host, const char *order,
			      unsigned flags, char **json)
{
	json_t *transports, *root;
	weft_status_t st = weft_model_transports(&m->comm.graph, &transports);
	if (st != WEFT_SUCCESS)
		return weft_err_set(&m->comm.err, st, "model: no memory");
	weft_model_step_end(&m->steps, "transports");
	struct weft_describe_hook hook = {after_piece, &m->steps};
	st = weft_describe_build(&m->comm, transports, &hook, &root);
	json_decref(transports);
	if (st == WEFT_SUCCESS &&
	    json_object_set_new(root, "model",
				weft_model_section(path, per_host, order, &m->steps)))
		st = WEFT_ERR_NO_MEMORY;
	if (st == WEFT_SUCCESS && (flags & WEFT_MODEL_BRIEF) && make_brief(root))
		st = WEFT_ERR_NO_MEMORY;
	if (st == WEFT_SUCCESS)
		st = weft_describe_dump(root, json);
	else
		json_decref(root);
	return st == WEFT_SUCCESS ? st : weft_err_set(&m->comm.err, st, "model: no memory");
}

static void model_free(struct model *m)
{
	struct weft_comm *comm = &m->comm;
	if (comm->tuner_free)
		comm->tuner_free(comm->tuner);
	weft_topo_graph_free(&comm->graph);
	free(comm->ring);
	free(comm->cards);
	free(m->host_of);
	free(m->names);
	weft_topo_file_free(m->file);
}

static weft_status_t run(struct model *m, const char *path, int per_host, const char *order,
			 unsigned flags, char **json)
{
	weft_status_t st = weft_topo_file_load(path, &m->file, &m->comm.err);
	weft_model_step_end(&m->steps, "load");
	if (st == WEFT_SUCCESS)
		st = make_cards(m, order, per_host);
	weft_model_step_end(&m->steps, "ranks");
	if (st == WEFT_SUCCESS)
		st = build_graph(m);
	weft_model_step_end(&m->steps, "graph");
	if (st == WEFT_SUCCESS)
		st = place(m);
	weft_model_step_end(&m->steps, "placement");
	if (st == WEFT_SUCCESS)
		st = tune(m);
	weft_model_step_end(&m->steps, "tuner init");
	if (st == WEFT_SUCCESS)
		st = describe(m, path, per_host, order, flags, json);
	return st;
}

weft_status_t weft_model_describe(const char *topology_file, int ranks_per_host, const char *order,
				  unsigned flags, char **json)
{
	struct weft_err *err = weft_err_init_fresh();
	if (json)
		*json = NULL;
	if (!topology_file || !json)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG, "weft_model_describe: %s is NULL",
				    topology_file ? "json" : "topology_file");
	struct model *m = calloc(1, sizeof(*m));
	if (!m)
		return weft_err_set(err, WEFT_ERR_NO_MEMORY, "weft_model_describe: no memory");
	m->steps.start = weft_now();
	weft_status_t st =
	    run(m, topology_file, ranks_per_host, order ? order : "block", flags, json);
	if (st != WEFT_SUCCESS)
		weft_err_set(err, st, "%s", m->comm.err.msg);
	model_free(m);
	free(m);
	return st;
}
