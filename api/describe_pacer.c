/*
 * describe_pacer.c — "pacer" of the self-description: the mode, and the
 * state of each of this rank's paced connections (rate, alpha, cuts, CE
 * marks). Only this rank's links, at most its peers: the document stays
 * linear in the job, and rank 0's view is what weft-topo prints.
 */
#include "api/describe.h"
#include "core/comm.h"

static json_t *link_state(const struct weft_p2p_link *link)
{
	const struct weft_pacer *pc = &link->pacer;
	bool limiting = weft_pacer_limiting(pc);
	return json_pack("{s:i, s:b, s:o, s:f, s:f, s:I, s:I, s:I}", "peer", link->peer, "limiting",
			 limiting, "rate_MBps",
			 limiting ? json_real(pc->rc_Bps / 1e6) : json_null(), "line_MBps",
			 pc->line_Bps / 1e6, "alpha", pc->alpha, "cuts", (json_int_t)pc->cuts,
			 "marks", (json_int_t)pc->marks, "delivered", (json_int_t)pc->delivered);
}

weft_status_t weft_describe_pacer(const struct weft_comm *comm, json_t *root)
{
	const struct weft_gate *gate = &comm->gate;
	json_t *pacer = json_pack("{s:s}", "mode", weft_pacer_mode_name(gate->pacer.mode));
	json_t *state = NULL;
	int bad = !pacer;
	if (gate->pacer.mode == WEFT_PACER_OFF) {
		state = json_null();
	} else {
		json_t *links = json_array();
		for (size_t i = 0; i < gate->npaced; i++)
			bad |= json_array_append_new(links, link_state(gate->paced[i]));
		state = json_pack("{s:i, s:I, s:o}", "rank", comm->rank, "paced",
				  (json_int_t)gate->npaced, "links", links);
	}
	bad |= json_object_set_new(pacer, "state", state);
	bad |= json_object_set_new(root, "pacer", pacer);
	return bad ? WEFT_ERR_NO_MEMORY : WEFT_SUCCESS;
}
