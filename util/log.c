/* log.c — WEFT_DEBUG, WEFT_DEBUG_SUBSYS, WEFT_DEBUG_FILE. */
#include "util/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "util/parse.h"
#include "util/settings.h"

static enum weft_log_level level = WEFT_LOG_WARN;
static unsigned mask = WEFT_SUB_ALL;
static FILE *out;
static int log_rank = -1;
static char host[64];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static const struct {
	const char *name;
	enum weft_subsys bit;
} subsys_names[] = {
    {"INIT", WEFT_SUB_INIT}, {"BOOT", WEFT_SUB_BOOT}, {"COLL", WEFT_SUB_COLL},
    {"TUNE", WEFT_SUB_TUNE}, {"TOPO", WEFT_SUB_TOPO}, {"SHM", WEFT_SUB_SHM},
    {"NET", WEFT_SUB_NET},   {"PACE", WEFT_SUB_PACE}, {"ALL", WEFT_SUB_ALL},
};

/* Unknown names are warned about and skipped: a typo in a debugging aid
 * should not stop the job. weft_log cannot report here (it is starting). */
static void parse_subsys(const char *s)
{
	struct weft_list l;
	weft_list_init(&l, "WEFT_DEBUG_SUBSYS", s, ',');
	mask = 0;
	while (weft_list_next(&l)) {
		bool known = false;
		for (size_t i = 0; i < sizeof(subsys_names) / sizeof(subsys_names[0]); i++) {
			if (strcasecmp(l.item, subsys_names[i].name) == 0) {
				mask |= subsys_names[i].bit;
				known = true;
			}
		}
		if (!known)
			fprintf(stderr, "weft: WEFT_DEBUG_SUBSYS: unknown subsystem '%s' ignored\n",
				l.item);
	}
	if (l.status != WEFT_SUCCESS)
		fprintf(stderr, "weft: %s\n", l.msg);
}

static void open_file(const char *pattern)
{
	char path[512];
	size_t n = 0;
	for (const char *p = pattern; *p && n + 32 < sizeof(path); p++) {
		if (p[0] == '%' && p[1] == 'h') {
			n += (size_t)snprintf(path + n, sizeof(path) - n, "%s", host);
			p++;
		} else if (p[0] == '%' && p[1] == 'p') {
			n += (size_t)snprintf(path + n, sizeof(path) - n, "%d", (int)getpid());
			p++;
		} else {
			path[n++] = *p;
		}
	}
	path[n] = '\0';
	out = fopen(path, "a");
	if (!out) {
		fprintf(stderr, "weft: WEFT_DEBUG_FILE: cannot open %s, logging to stderr\n", path);
		out = stderr;
	} else {
		setvbuf(out, NULL, _IOLBF, 0);
	}
}

static void init(void)
{
	gethostname(host, sizeof(host) - 1);
	const char *lv = weft_setting_str("WEFT_DEBUG");
	if (lv) {
		if (strcasecmp(lv, "NONE") == 0 || strcasecmp(lv, "OFF") == 0)
			level = WEFT_LOG_NONE;
		else if (strcasecmp(lv, "WARN") == 0)
			level = WEFT_LOG_WARN;
		else if (strcasecmp(lv, "INFO") == 0)
			level = WEFT_LOG_INFO;
		else if (strcasecmp(lv, "TRACE") == 0)
			level = WEFT_LOG_TRACE;
		else
			fprintf(
			    stderr,
			    "weft: WEFT_DEBUG=%s is not NONE, WARN, INFO or TRACE; using WARN\n",
			    lv);
	}
	parse_subsys(weft_setting_str("WEFT_DEBUG_SUBSYS"));
	const char *file = weft_setting_str("WEFT_DEBUG_FILE");
	if (file)
		open_file(file);
	else
		out = stderr;
}

bool weft_log_enabled(enum weft_log_level lv, enum weft_subsys subsys)
{
	pthread_once(&once, init);
	return lv <= level && (mask & subsys);
}

void weft_log_set_rank(int rank)
{
	log_rank = rank;
}

void weft_log(enum weft_log_level lv, enum weft_subsys subsys, const char *fmt, ...)
{
	if (!weft_log_enabled(lv, subsys))
		return;
	static const char *const lvname[] = {"", "WARN", "INFO", "TRACE"};
	const char *sname = "";
	for (size_t i = 0; i < sizeof(subsys_names) / sizeof(subsys_names[0]); i++)
		if (subsys_names[i].bit == subsys)
			sname = subsys_names[i].name;
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(out, "%s:%d:%d weft %s %s %s\n", host, (int)getpid(), log_rank, lvname[lv], sname,
		msg);
}
