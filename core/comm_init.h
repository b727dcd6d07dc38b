/* comm_init.h — making and unmaking a communicator (comm_init.c): the
 * steps every rank takes together at init, and freeing it all. */
#ifndef WEFT_COMM_INIT_H
#define WEFT_COMM_INIT_H

#include "weft.h"

struct weft_comm;
struct weft_comm_service;
struct weft_topo_card;
struct weft_uid;

/* Create a communicator (after the public entry points checked their
 * arguments): bootstrap, cards, placement, transports, connections and
 * chunk size. The bootstrap stays open for what the layers above set up
 * (the tuner); weft_comm_ready closes it. @p known: this rank's topology
 * card if already learned (a split keeps its parent's), else NULL to learn
 * it. @p service: what plugs into it (core/service.h; NULL: nothing), its
 * steps called at their points of init and free. On failure the message
 * is in weft_init_last_error(). */
weft_status_t weft_comm_create(struct weft_comm **out, int nranks, const struct weft_uid *uid,
			       int rank, const weft_config_t *config,
			       const struct weft_topo_card *known,
			       const struct weft_comm_service *service);

/* The same, with the bootstrap's timeout given (> 0) rather than read
 * from WEFT_BOOTSTRAP_TIMEOUT: a shrink's survivors are all there already,
 * and one that does not come soon is gone (api/comm_shrink.c). */
weft_status_t weft_comm_create_within(struct weft_comm **out, int nranks,
				      const struct weft_uid *uid, int rank,
				      const weft_config_t *config,
				      const struct weft_topo_card *known, double boot_timeout_s,
				      const struct weft_comm_service *service);

/* Every rank got this far: the closing barrier, and the bootstrap closes.
 * On failure the communicator is freed and the message is in
 * weft_init_last_error(). */
weft_status_t weft_comm_ready(struct weft_comm *comm);

/* A communicator whose init failed after weft_comm_create: move its
 * message to weft_init_last_error() and free it. Returns @p status. */
weft_status_t weft_comm_abandon(struct weft_comm *comm, weft_status_t status);

/* Free everything (weft_comm_destroy). */
void weft_comm_free(struct weft_comm *comm);

#endif
