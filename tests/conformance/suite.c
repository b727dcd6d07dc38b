/*
 * suite.c — the transport conformance suite's table of configurations and
 * its main: every case of data.c, fail.c and caps.c runs over every line
 * below, one Check suite per line, named after it (CK_RUN_SUITE=NAME runs
 * one configuration, CK_RUN_CASE=CASE one case).
 *
 * A new transport, or a new way of running one, is one more line: its
 * name, the environment of its jobs, the transport every peer must be
 * served by, and what its failures say where it can tell.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "ofi_warm_up.h"
#include "verbs_env.h"

/* libfabric's providers initialised once, pinned to loopback first. */
static void ofi_prepare(void)
{
	static bool done;
	if (done)
		return;
	done = true;
	setenv("FI_TCP_IFACE", "lo", 1);
	setenv("FI_SOCKETS_IFACE", "lo", 1);
	ofi_warm_up();
}

/* What the survivor's error says where the transport can tell (the rank
 * is always checked): TCP sees a killed, unreachable or aborting peer as
 * a closed connection alike; libfabric's providers say too many different
 * things to ask for one. */
static const struct conf confs[] = {
    {.name = "shm",
     .transport = "shm",
     .env = {"WEFT_TRANSPORTS=shm"},
     .says = {.died = "died", .aborted = "abort"}},
    {.name = "shm-nocma",
     .transport = "shm",
     .env = {"WEFT_TRANSPORTS=shm", "WEFT_SHM_CMA=0"},
     .says = {.died = "died", .aborted = "abort"}},
    {.name = "shm-tiny",
     .transport = "shm",
     .env = {"WEFT_TRANSPORTS=shm", "WEFT_SHM_SLOTS=2", "WEFT_SHM_SLOT_BYTES=4K",
	     "WEFT_SHM_CMA_MIN=64K"},
     .says = {.died = "died", .aborted = "abort"}},
    {.name = "socket",
     .transport = "socket",
     .env = {"WEFT_TRANSPORTS=socket", "WEFT_SOCKET_IFNAME=lo", "WEFT_SOCKET_CHUNK=64K",
	     "WEFT_SOCKET_NSOCKS=1"},
     .flags = CONF_HOSTS_APART,
     .says = {.died = "closed the connection",
	      .unreachable = "closed the connection",
	      .aborted = "closed the connection"}},
    {.name = "socket-rr",
     .transport = "socket",
     .env = {"WEFT_TRANSPORTS=socket", "WEFT_SOCKET_IFNAME=lo", "WEFT_SOCKET_CHUNK=64K",
	     "WEFT_SOCKET_NSOCKS=4", "WEFT_SPRAY=rr"},
     .flags = CONF_HOSTS_APART,
     .says = {.died = "closed the connection",
	      .unreachable = "closed the connection",
	      .aborted = "closed the connection"}},
    {.name = "socket-adaptive",
     .transport = "socket",
     .env = {"WEFT_TRANSPORTS=socket", "WEFT_SOCKET_IFNAME=lo", "WEFT_SOCKET_CHUNK=64K",
	     "WEFT_SOCKET_NSOCKS=4", "WEFT_SPRAY=adaptive"},
     .flags = CONF_HOSTS_APART,
     .says = {.died = "closed the connection",
	      .unreachable = "closed the connection",
	      .aborted = "closed the connection"}},
    {.name = "socket-lazy",
     .transport = "socket",
     .env = {"WEFT_TRANSPORTS=socket", "WEFT_SOCKET_IFNAME=lo", "WEFT_SOCKET_CHUNK=64K",
	     "WEFT_SOCKET_NSOCKS=2", "WEFT_CONNECT=lazy"},
     .flags = CONF_HOSTS_APART,
     .says = {.died = "closed the connection",
	      .unreachable = "closed the connection",
	      .aborted = "closed the connection"}},
    {.name = "ofi-tcp-tagged",
     .transport = "ofi",
     .env = {"WEFT_TRANSPORTS=ofi", "FI_TCP_IFACE=lo", "WEFT_OFI_PROVIDER=tcp;ofi_rxm",
	     "WEFT_OFI_PROTO=tagged"},
     .flags = CONF_HOSTS_APART,
     .prepare = ofi_prepare},
    {.name = "ofi-tcp-rma",
     .transport = "ofi",
     .env = {"WEFT_TRANSPORTS=ofi", "FI_TCP_IFACE=lo", "WEFT_OFI_PROVIDER=tcp;ofi_rxm",
	     "WEFT_OFI_PROTO=rma"},
     .flags = CONF_HOSTS_APART,
     .prepare = ofi_prepare},
    {.name = "ofi-sockets-tagged",
     .transport = "ofi",
     .env = {"WEFT_TRANSPORTS=ofi", "FI_SOCKETS_IFACE=lo", "WEFT_OFI_PROVIDER=sockets",
	     "WEFT_OFI_PROTO=tagged"},
     .flags = CONF_HOSTS_APART,
     .prepare = ofi_prepare},
    {.name = "ofi-sockets-rma",
     .transport = "ofi",
     .env = {"WEFT_TRANSPORTS=ofi", "FI_SOCKETS_IFACE=lo", "WEFT_OFI_PROVIDER=sockets",
	     "WEFT_OFI_PROTO=rma"},
     .flags = CONF_HOSTS_APART,
     .prepare = ofi_prepare},
    /* Over the test double (tests/fake_ibverbs), 4 slots of 16 KiB. */
    {.name = "verbs",
     .transport = "verbs",
     .env = {"WEFT_IB_SLOTS=4", "WEFT_IB_SLOT_BYTES=16K"},
     .flags = CONF_HOSTS_APART,
     .says = {.died = "died", .unreachable = "does not answer", .aborted = "aborted"},
     .wrap_env = verbs_env},
};
#define NCONFS (sizeof(confs) / sizeof(confs[0]))

int main(void)
{
	const char *only = getenv("CK_RUN_SUITE");
	int ran = 0, failed = 0;
	for (size_t i = 0; i < NCONFS; i++) {
		const struct conf *c = &confs[i];
		if (only && strcmp(only, c->name) != 0)
			continue;
		conf_now = c;
		if (c->prepare)
			c->prepare();
		Suite *s = suite_create(c->name);
		conf_data_cases(s);
		conf_fail_cases(s);
		conf_caps_cases(s);
		SRunner *sr = srunner_create(s);
		double t0 = harness_now();
		srunner_run_all(sr, CK_NORMAL);
		int f = srunner_ntests_failed(sr);
		printf("conformance %s (%s): %d checks, %d failed, %.1f s\n", c->name, c->transport,
		       srunner_ntests_run(sr), f, harness_now() - t0);
		fflush(stdout);
		srunner_free(sr);
		ran++;
		failed += f != 0;
	}
	if (!ran) {
		fprintf(stderr, "conformance: no configuration named %s\n", only);
		return EXIT_FAILURE;
	}
	printf("conformance: %d configurations, %d failed\n", ran, failed);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
