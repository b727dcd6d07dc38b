/* health.h — the services that watch and mend a communicator's health
 * from above the core: the metrics and their exporter (metrics.h), the
 * slow-rank detector (slowdet.h), and the survivors' agreement that
 * weft_comm_shrink runs (agree.h), all plugged in through the core's
 * hooks (core/service.h, core/watch.h). */
#ifndef WEFT_HEALTH_H
#define WEFT_HEALTH_H

#include "core/service.h"

/* What api/ hands every communicator it creates (weft_comm_create). */
extern const struct weft_comm_service weft_health_service;

#endif
