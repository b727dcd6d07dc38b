/* pacer_settings.h — the WEFT_PACER* settings (declared when the library
 * loads, pacer_settings.c). */
#ifndef WEFT_PACER_SETTINGS_H
#define WEFT_PACER_SETTINGS_H

#include <stddef.h>

#include "util/settings.h"

extern const struct weft_setting weft_pacer_settings[];
extern const size_t weft_pacer_nsettings;

#endif
