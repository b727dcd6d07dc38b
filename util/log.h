/* log.h — WEFT_DEBUG levels and WEFT_DEBUG_SUBSYS subsystems. */
#ifndef WEFT_LOG_H
#define WEFT_LOG_H

#include <stdbool.h>

enum weft_log_level {
	WEFT_LOG_NONE = 0,
	WEFT_LOG_WARN,
	WEFT_LOG_INFO,
	WEFT_LOG_TRACE,
};

enum weft_subsys {
	WEFT_SUB_INIT = 1u << 0,
	WEFT_SUB_BOOT = 1u << 1,
	WEFT_SUB_COLL = 1u << 2,
	WEFT_SUB_TUNE = 1u << 3,
	WEFT_SUB_TOPO = 1u << 4,
	WEFT_SUB_SHM = 1u << 5,
	WEFT_SUB_NET = 1u << 6,
	WEFT_SUB_PACE = 1u << 7,
	WEFT_SUB_ALL = 0xffu,
};

bool weft_log_enabled(enum weft_log_level level, enum weft_subsys subsys);

/* Print one line "host:pid:rank LEVEL SUBSYS message" to WEFT_DEBUG_FILE or stderr. */
void weft_log(enum weft_log_level level, enum weft_subsys subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Rank shown in log lines of this process (-1 until a communicator exists). */
void weft_log_set_rank(int rank);

#endif
