/* comm_env.c — weft_get_unique_id, weft_launch_query and weft_comm_init_env:
 * where the root listens, and rank/size/secret from the launcher's
 * environment (the table is src/launch/launch_env.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "api/api.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/netaddr.h"
#include "launch/launch.h"
#include "topo/topo.h"
#include "util/log.h"
#include "util/settings.h"

static double bootstrap_timeout(void)
{
	double t = 300;
	weft_setting_double("WEFT_TIMEOUT", &t);
	weft_setting_double("WEFT_BOOTSTRAP_TIMEOUT", &t);
	return t > 0 ? t : 300;
}

static weft_status_t random_secret(uint64_t *secret, struct weft_err *err)
{
	if (getrandom(secret, sizeof(*secret), 0) != (ssize_t)sizeof(*secret))
		return weft_err_errno(err, errno, "getrandom for the bootstrap secret");
	return WEFT_SUCCESS;
}

/* Where weft_get_unique_id's root listens: WEFT_ROOT; else the address of
 * WEFT_SOCKET_IFNAME; else of the NIC nearest this process's cores, the
 * address a rank of a multi-host job offers its peers: the id may travel
 * to other hosts (a torch job sends it through its c10d store), and the
 * ranks on this host reach that address too. Loopback only when this
 * host has no such NIC. */
static weft_status_t unique_id_addr(struct sockaddr_storage *addr, socklen_t *len,
				    struct weft_err *err)
{
	const char *root = weft_setting_str("WEFT_ROOT");
	if (root)
		return weft_addr_parse(root, "WEFT_ROOT", addr, len, err);
	const char *ifname = weft_setting_str("WEFT_SOCKET_IFNAME");
	char nic[WEFT_TOPO_NAME_BYTES] = "";
	if (!ifname) {
		weft_status_t st = weft_topo_pick_nic(nic, sizeof(nic), NULL, err);
		if (st != WEFT_SUCCESS)
			return st;
		ifname = nic[0] ? nic : NULL;
	}
	weft_log(WEFT_LOG_INFO, WEFT_SUB_BOOT, "weft_get_unique_id: root on %s (%s)",
		 ifname ? ifname : "loopback",
		 nic[0]	  ? "the NIC nearest this process"
		 : ifname ? "WEFT_SOCKET_IFNAME"
			  : "no NIC with an address");
	return weft_addr_of_interface(ifname, addr, len, err);
}

weft_status_t weft_get_unique_id(weft_unique_id_t *id)
{
	struct weft_err *err = weft_err_init_record();
	weft_err_clear(err);
	if (!id)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG, "weft_get_unique_id: id is NULL");
	struct sockaddr_storage addr;
	socklen_t len;
	weft_status_t st = unique_id_addr(&addr, &len, err);
	if (st != WEFT_SUCCESS)
		return st;
	uint64_t secret;
	st = random_secret(&secret, err);
	if (st != WEFT_SUCCESS)
		return st;
	struct weft_uid uid;
	memset(&uid, 0, sizeof(uid));
	st = weft_bootstrap_root_start((struct sockaddr *)&addr, len, secret, bootstrap_timeout(),
				       &uid, err);
	if (st != WEFT_SUCCESS)
		return st;
	memset(id, 0, sizeof(*id));
	memcpy(id->internal, &uid, sizeof(uid));
	return WEFT_SUCCESS;
}

/* Without WEFT_SECRET, every rank of a job derives the same secret from
 * the launcher's job key: it keeps jobs apart, not a hostile local user. */
static weft_status_t env_secret(const struct weft_launch *l, uint64_t *secret, struct weft_err *err)
{
	const char *s = weft_setting_str("WEFT_SECRET");
	if (s) {
		char *end;
		errno = 0;
		unsigned long long x = strtoull(s, &end, 16);
		if (errno || strlen(s) != 16 || *end)
			return weft_err_set(err, WEFT_ERR_INVALID_ARG,
					    "WEFT_SECRET must be 16 hex digits");
		*secret = x;
		return WEFT_SUCCESS;
	}
	*secret = l->job_key ^ 0x9e3779b97f4a7c15ull;
	return WEFT_SUCCESS;
}

static void copy_info(weft_launch_info_t *info, const struct weft_launch *l)
{
	info->rank = l->rank;
	info->nranks = l->nranks;
	info->local_rank = l->local_rank;
	info->local_size = l->local_size;
	snprintf(info->launcher, sizeof(info->launcher), "%s", l->name);
}

weft_status_t weft_launch_query(weft_launch_info_t *info)
{
	struct weft_err *err = weft_err_init_record();
	weft_err_clear(err);
	if (!info)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG, "weft_launch_query: info is NULL");
	/* Fields added later are filled only where info->size says they fit. */
	if (info->size < sizeof(weft_launch_info_t))
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "weft_launch_query: info->size is %zu, expected at least %zu "
				    "(initialise with WEFT_LAUNCH_INFO_INIT)",
				    info->size, sizeof(weft_launch_info_t));
	struct weft_launch l;
	weft_status_t st = weft_launch_detect(&l, err);
	if (st != WEFT_SUCCESS)
		return st;
	copy_info(info, &l);
	return WEFT_SUCCESS;
}

weft_status_t weft_comm_init_env(weft_comm_t *comm, const weft_config_t *config)
{
	struct weft_err *err = weft_err_init_record();
	weft_err_clear(err);
	if (!comm)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG, "weft_comm_init_env: comm is NULL");
	*comm = NULL;
	weft_status_t st = weft_api_config_check(config, "weft_comm_init_env", err);
	if (st != WEFT_SUCCESS)
		return st;
	struct weft_launch l;
	st = weft_launch_detect(&l, err);
	if (st != WEFT_SUCCESS)
		return st;
	if (!l.found)
		return weft_err_set(
		    err, WEFT_ERR_INVALID_ARG,
		    "weft_comm_init_env: no rank in the environment (set WEFT_RANK and "
		    "WEFT_NRANKS, or launch with mpirun, srun or torchrun)");
	weft_log(WEFT_LOG_INFO, WEFT_SUB_INIT, "launcher %s%s: rank %d of %d (%s, %s)", l.name,
		 l.pmix_seen ? " (PMIx variables set, not read)" : "", l.rank, l.nranks, l.rank_var,
		 l.size_var);

	struct weft_uid uid;
	memset(&uid, 0, sizeof(uid));
	struct sockaddr_storage addr;
	socklen_t len;
	st = env_secret(&l, &uid.secret, err);
	if (st == WEFT_SUCCESS)
		st = weft_launch_root(&l, &addr, &len, err);
	if (st != WEFT_SUCCESS)
		return st;
	if (l.rank == 0) {
		st = weft_bootstrap_root_start((struct sockaddr *)&addr, len, uid.secret,
					       bootstrap_timeout(), &uid, err);
		if (st != WEFT_SUCCESS)
			return st;
	} else {
		uid.magic = WEFT_UID_MAGIC;
		uid.version = WEFT_UID_VERSION;
		uid.addr_len = (uint32_t)len;
		memcpy(&uid.addr, &addr, len);
	}
	struct weft_comm *c;
	st = weft_comm_create(&c, l.nranks, &uid, l.rank, config, NULL);
	return st == WEFT_SUCCESS ? weft_api_comm_finish(c, comm) : st;
}
