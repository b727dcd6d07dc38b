/* settings.h — every WEFT_* environment variable, declared once with its
 * default and a line of help (weft-topo --settings): the core's in
 * settings.c, a transport's beside it (transports/registry.c adds them). */
#ifndef WEFT_SETTINGS_H
#define WEFT_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>

struct weft_setting {
	const char *name;
	const char *default_value; /* NULL: unset by default */
	const char *help;
};

/* The value of a declared setting: the environment's, else its default
 * (which may be NULL). Asking for an undeclared name aborts: it is a bug. */
const char *weft_setting_str(const char *name);

/* Parse a declared integer setting with weft_parse_size() (decimal, K/M/G
 * suffixes as powers of two, no sign). Returns false (and leaves *out
 * unchanged) if the value is unset, malformed or above LONG_MAX. */
bool weft_setting_long(const char *name, long *out);
bool weft_setting_double(const char *name, double *out);

/* Every declared setting, *count of them. */
const struct weft_setting *weft_settings_all(size_t *count);

/* Declare more settings (a module's own table, kept by reference-free
 * copy); names already declared are skipped. Thread-safe. */
void weft_settings_add(const struct weft_setting *table, size_t n);

#endif
