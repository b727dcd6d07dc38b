/*
 * describe_host.c — weft_host_describe and weft_settings_describe: what
 * `weft-topo` shows when it runs alone, as JSON, so that the tool needs
 * nothing but the public API.
 */
#include <stdlib.h>
#include <unistd.h>

#include "api/describe.h"
#include "bootstrap/hostid.h"
#include "core/comm.h"
#include "topo/topo.h"
#include "topo/topo_hwloc.h"
#include "topo/topo_local.h"
#include "util/settings.h"

static json_t *interfaces(void)
{
	struct weft_topo_iface *ifs;
	int n, bad = 0;
	struct weft_err ignored = {0};

	/* Without getifaddrs there is still a host to describe: no list. */
	if (weft_topo_list_ifaces(&ifs, &n, &ignored) != WEFT_SUCCESS)
		return json_array();
	json_t *list = json_array();
	for (int i = 0; i < n && !bad; i++)
		bad |= json_array_append_new(
		    list, json_pack("{s:o, s:b, s:b}", "name", weft_describe_text(ifs[i].name),
				    "up", ifs[i].up, "loopback", ifs[i].loopback));
	free(ifs);
	if (bad) {
		json_decref(list);
		return NULL;
	}
	return list;
}

static json_t *host_object(const char *hostname, const char *host_id,
			   const struct weft_topo_card *c)
{
	return json_pack(
	    "{s:o, s:o, s:i, s:i, s:i, s:I, s:o, s:i, s:i, s:o, s:o, s:o, s:o, s:s, s:o}",
	    "hostname", weft_describe_text(hostname), "host", weft_describe_text(host_id),
	    "packages", c->packages, "numa_nodes", c->numa_nodes, "cores", c->cores, "llc_bytes",
	    (json_int_t)c->llc_bytes, "nic", weft_describe_text(c->nic), "nic_numa", c->nic_numa,
	    "numa", c->numa, "leaf", weft_describe_text(c->leaf_name), "leaf_id",
	    weft_describe_text(c->leaf_id), "leaf_port", weft_describe_text(c->leaf_port), "spine",
	    weft_describe_text(c->spine), "leaf_source", weft_topo_leaf_source_name(c->leaf_source),
	    "interfaces", interfaces());
}

weft_status_t weft_host_describe(char **json)
{
	struct weft_err *err = weft_err_init_record();
	char hostname[WEFT_HOSTNAME_BYTES] = "", host_id[WEFT_HOST_ID_BYTES];
	struct weft_topo_card card;
	weft_status_t st;

	weft_err_clear(err);
	if (!json)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG, "weft_host_describe: json is NULL");
	*json = NULL;
	gethostname(hostname, sizeof(hostname) - 1);
	st = weft_host_id(host_id, sizeof(host_id), err);
	if (st == WEFT_SUCCESS)
		st = weft_topo_local_card(&card, hostname, err);
	if (st != WEFT_SUCCESS)
		return st;
	st = weft_describe_dump(host_object(hostname, host_id, &card), json);
	if (st != WEFT_SUCCESS)
		return weft_err_set(err, st, "weft_host_describe: no memory");
	return WEFT_SUCCESS;
}

weft_status_t weft_settings_describe(char **json)
{
	struct weft_err *err = weft_err_init_record();
	size_t n;
	const struct weft_setting *s = weft_settings_all(&n);
	int bad = 0;

	weft_err_clear(err);
	if (!json)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "weft_settings_describe: json is NULL");
	*json = NULL;
	json_t *list = json_array();
	for (size_t i = 0; i < n && !bad; i++)
		bad |= json_array_append_new(list, json_pack("{s:s, s:s?, s:s}", "name", s[i].name,
							     "default", s[i].default_value, "help",
							     s[i].help));
	json_t *root = json_pack("{s:o}", "settings", list);
	if (bad) {
		json_decref(root);
		root = NULL;
	}
	weft_status_t st = weft_describe_dump(root, json);
	if (st != WEFT_SUCCESS)
		return weft_err_set(err, st, "weft_settings_describe: no memory");
	return WEFT_SUCCESS;
}
