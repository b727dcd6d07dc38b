/* comm_env.c — weft_get_unique_id, weft_launch_query and weft_comm_init_env:
 * where the root listens, and rank/size/secret from the launcher (the table
 * is launch/launch_env.c). Under PMIx rank 0's id, with a fresh random
 * key, reaches the other ranks through PMIx; otherwise every rank derives
 * the root's address from the launcher's variables and takes the key from
 * comm_secret.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "bootstrap/bootstrap.h"
#include "core/comm_init.h"
#include "health/health.h"
#include "launch/launch.h"
#include "topo/topo.h"
#include "util/log.h"
#include "util/netaddr.h"
#include "util/settings.h"

static double bootstrap_timeout(void)
{
	double t = 300;
	weft_setting_double("WEFT_TIMEOUT", &t);
	weft_setting_double("WEFT_BOOTSTRAP_TIMEOUT", &t);
	return t > 0 ? t : 300;
}

static weft_status_t random_key(struct weft_key *key, struct weft_err *err)
{
	return weft_random(key->b, sizeof(key->b), err);
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
	struct weft_key key;
	st = random_key(&key, err);
	if (st != WEFT_SUCCESS)
		return st;
	struct weft_uid uid;
	memset(&uid, 0, sizeof(uid));
	st = weft_bootstrap_root_start((struct sockaddr *)&addr, len, &key, bootstrap_timeout(),
				       &uid, err);
	weft_wipe(&key, sizeof(key));
	if (st != WEFT_SUCCESS)
		return st;
	memset(id, 0, sizeof(*id));
	memcpy(id->internal, &uid, sizeof(uid));
	weft_wipe(&uid, sizeof(uid));
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

/* Where rank 0 of a PMIx job listens: WEFT_ROOT if set; loopback when
 * every rank is on this host; else WEFT_SOCKET_IFNAME's address, or that of
 * the NIC nearest this process's cores. Port 0: any free one, since the id
 * carries it. */
static weft_status_t pmix_root_addr(const struct weft_launch *l, struct sockaddr_storage *addr,
				    socklen_t *len, struct weft_err *err)
{
	const char *root = weft_setting_str("WEFT_ROOT");
	if (root)
		return weft_addr_parse(root, "WEFT_ROOT", addr, len, err);
	const char *ifname = weft_setting_str("WEFT_SOCKET_IFNAME");
	char nic[WEFT_TOPO_NAME_BYTES] = "";
	if (!ifname && !l->one_host) {
		weft_status_t st = weft_topo_pick_nic(nic, sizeof(nic), NULL, err);
		if (st != WEFT_SUCCESS)
			return st;
		if (!nic[0])
			return weft_err_set(err, WEFT_ERR_INVALID_ARG,
					    "rank 0 of a PMIx job across hosts found no network "
					    "interface that is up to listen on: set "
					    "WEFT_SOCKET_IFNAME or WEFT_ROOT");
		ifname = nic;
	}
	return weft_addr_of_interface(ifname, addr, len, err);
}

/* Rank 0 starts the root and hands its id to every rank through PMIx. It
 * hands an empty id when it could not start one, so that the others stop
 * at once instead of waiting out the timeout. */
static weft_status_t pmix_uid(const struct weft_launch *l, struct weft_uid *uid,
			      struct weft_err *err)
{
	double timeout = bootstrap_timeout();
	weft_status_t st = WEFT_SUCCESS;
	memset(uid, 0, sizeof(*uid));
	if (l->rank == 0) {
		struct sockaddr_storage addr;
		socklen_t len;
		struct weft_key key;
		st = pmix_root_addr(l, &addr, &len, err);
		if (st == WEFT_SUCCESS)
			st = random_key(&key, err);
		if (st == WEFT_SUCCESS)
			st = weft_bootstrap_root_start((struct sockaddr *)&addr, len, &key, timeout,
						       uid, err);
		weft_wipe(&key, sizeof(key));
		if (st != WEFT_SUCCESS)
			memset(uid, 0, sizeof(*uid));
		struct weft_err share_err = {0};
		weft_status_t shared =
		    weft_launch_pmix_share(uid, sizeof(*uid), true, timeout, &share_err);
		if (st == WEFT_SUCCESS && shared != WEFT_SUCCESS)
			st = weft_err_set(err, shared, "%s", share_err.msg);
		return st;
	}
	st = weft_launch_pmix_share(uid, sizeof(*uid), false, timeout, err);
	if (st == WEFT_SUCCESS && uid->magic == 0)
		return weft_err_set(
		    err, WEFT_ERR_REMOTE,
		    "rank 0 handed no bootstrap id through PMIx: it could not start "
		    "the bootstrap root (its log says why)");
	return st == WEFT_SUCCESS ? weft_bootstrap_uid_check(uid, err) : st;
}

/* Every rank derives the root's address from the launcher's variables (or
 * WEFT_ROOT) and the secret (comm_secret.c). */
static weft_status_t env_uid(const struct weft_launch *l, struct weft_uid *uid,
			     struct weft_err *err)
{
	struct sockaddr_storage addr;
	socklen_t len;
	memset(uid, 0, sizeof(*uid));
	weft_status_t st = weft_launch_root(l, &addr, &len, err);
	if (st == WEFT_SUCCESS)
		st = weft_api_env_secret(l, &addr, &uid->key, err);
	if (st != WEFT_SUCCESS)
		return st;
	if (l->rank == 0) {
		struct weft_key key = uid->key;
		st = weft_bootstrap_root_start((struct sockaddr *)&addr, len, &key,
					       bootstrap_timeout(), uid, err);
		weft_wipe(&key, sizeof(key));
		return st;
	}
	uid->magic = WEFT_UID_MAGIC;
	uid->version = WEFT_UID_VERSION;
	uid->addr_len = (uint32_t)len;
	memcpy(&uid->addr, &addr, len);
	return WEFT_SUCCESS;
}

static void log_launcher(const struct weft_launch *l)
{
	if (l->pmix)
		weft_log(WEFT_LOG_INFO, WEFT_SUB_INIT,
			 "launcher interface PMIx: rank %d of %d, local rank %d of %d (%s); the "
			 "bootstrap id travels through PMIx",
			 l->rank, l->nranks, l->local_rank, l->local_size, l->detail);
	else
		weft_log(WEFT_LOG_INFO, WEFT_SUB_INIT,
			 "launcher interface environment: %s rank %d of %d (%s)%s%s", l->name,
			 l->rank, l->nranks, l->detail,
			 l->pmix_seen ? "; PMIx variables set but not used: " : "",
			 l->pmix_seen ? l->pmix_why : "");
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
	log_launcher(&l);

	struct weft_uid uid;
	st = l.pmix ? pmix_uid(&l, &uid, err) : env_uid(&l, &uid, err);
	if (st != WEFT_SUCCESS)
		return st;
	struct weft_comm *c;
	st = weft_comm_create(&c, l.nranks, &uid, l.rank, config, NULL, &weft_health_service);
	if (st != WEFT_SUCCESS)
		weft_api_env_secret_hint(&l, err);
	return st == WEFT_SUCCESS ? weft_api_comm_finish(c, comm) : st;
}
