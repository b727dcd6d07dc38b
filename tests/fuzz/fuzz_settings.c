/* fuzz_settings.c — libFuzzer target: the parsers of WEFT_TRANSPORTS
 * (transports/registry.c), WEFT_TUNE (tune/) and WEFT_ALGO (algorithms/), and the unique-id decoder
 * (weft_bootstrap_uid_check over any 128 bytes, as a user may pass). The
 * first byte picks the parser; the rest is its input. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algo.h"
#include "bootstrap/bootstrap.h"
#include "transports/registry.h"
#include "tune/tune.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void uid(const uint8_t *data, size_t size)
{
	weft_unique_id_t id;
	struct weft_uid u;
	struct weft_err err = {0};
	memset(&id, 0, sizeof(id));
	memcpy(&id, data, size < sizeof(id) ? size : sizeof(id));
	memcpy(&u, &id, sizeof(u));
	(void)weft_bootstrap_uid_check(&u, &err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] % 4 == 3) {
		uid(data + 1, size - 1);
		return 0;
	}
	char *text = malloc(size);
	if (!text)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	struct weft_err err = {0};
	if (data[0] % 4 == 0) {
		bool enabled[64];
		weft_registry_init();
		(void)weft_registry_enabled(text, enabled, &err);
	} else if (data[0] % 4 == 2) {
		const struct weft_algo *forced[WEFT_COLL_COUNT] = {0};
		(void)weft_algo_parse_forced(text, forced, &err);
	} else {
		struct weft_tuner *t = calloc(1, sizeof(*t));
		if (t)
			(void)weft_tune_parse_ranges(text, t, &err);
		free(t);
	}
	free(text);
	return 0;
}
