/* fuzz_hostlist.c — libFuzzer target: Slurm hostlist expressions
 * ("h[1-3,07],x"), as topology.conf and SLURM_STEP_NODELIST hold them. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "topo/hostlist.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static weft_status_t count(void *ctx, const char *name)
{
	*(size_t *)ctx += strlen(name) + 1;
	return WEFT_SUCCESS;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	size_t bytes = 0;
	char why[256];
	(void)weft_hostlist_expand(text, 4096, count, &bytes, why, sizeof(why));
	free(text);
	return 0;
}
