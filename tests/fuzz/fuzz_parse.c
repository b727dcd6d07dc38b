/* fuzz_parse.c — libFuzzer target: the size parser and the ';'/',' list
 * iterator of util/parse.c (WEFT_TUNE-style nesting), on any bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	uint64_t v = 0;
	enum weft_parse_fault fault;
	if (weft_parse_size(text, UINT64_MAX, 0, &v, &fault) != WEFT_SUCCESS)
		(void)weft_parse_fault_text(fault);
	(void)weft_parse_size(text, 1u << 20, 0, &v, NULL);
	struct weft_list outer, inner;
	weft_list_init(&outer, "FUZZ", text, ';');
	while (weft_list_next(&outer)) {
		weft_list_init_inner(&inner, &outer, outer.item, ',');
		while (weft_list_next(&inner))
			if (inner.index == 3)
				weft_list_fail(&inner, "item '%s'", inner.item);
	}
	free(text);
	return 0;
}
