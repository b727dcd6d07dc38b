/* fuzz_topo_file.c — libFuzzer target: the topology file readers, Slurm's
 * topology.conf and Weft's JSON (topo/topo_file*.c, JSON when the first
 * non-blank byte is '{'), then a lookup of each host read. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topo.h"
#include "topo/topo_file_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	struct weft_topo_file *f = NULL;
	struct weft_err err = {0};
	if (weft_topo_file_parse("fuzz", text, size, &f, &err) == WEFT_SUCCESS) {
		char leaf[128], spine[128];
		for (size_t i = 0; i < f->nhosts && i < 8; i++)
			(void)weft_topo_file_lookup(f, weft_topo_file_str(f, f->hosts[i].name),
						    leaf, sizeof(leaf), spine, sizeof(spine));
		(void)weft_topo_file_lookup(f, "no-such-host", leaf, sizeof(leaf), spine,
					    sizeof(spine));
		weft_topo_file_free(f);
	}
	free(text);
	return 0;
}
