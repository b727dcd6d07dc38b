/* hostid.c — host identity: hostname + boot id + network namespace. */
#include "bootstrap/hostid.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/settings.h"

static void read_boot_id(char *out, size_t len)
{
	snprintf(out, len, "noboot");
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
	if (!f)
		return;
	if (fgets(out, (int)len, f))
		out[strcspn(out, "\n")] = '\0';
	fclose(f);
}

weft_status_t weft_host_id(char *buf, size_t len, struct weft_err *err)
{
	const char *forced = weft_setting_str("WEFT_HOSTID");
	if (forced) {
		if (strlen(forced) >= len)
			return weft_err_set(err, WEFT_ERR_INVALID_ARG,
					    "WEFT_HOSTID is longer than %zu characters", len - 1);
		snprintf(buf, len, "%s", forced);
		return WEFT_SUCCESS;
	}
	char host[64] = "";
	char boot[64];
	if (gethostname(host, sizeof(host) - 1) != 0)
		return weft_err_errno(err, errno, "gethostname");
	read_boot_id(boot, sizeof(boot));
	struct stat ns;
	unsigned long long netns = 0;
	if (stat("/proc/self/ns/net", &ns) == 0)
		netns = (unsigned long long)ns.st_ino;
	snprintf(buf, len, "%s/%s/net:%llu", host, boot, netns);
	return WEFT_SUCCESS;
}
