/*
 * verbs_lib.h — libibverbs reached through a table filled with dlopen and
 * dlsym, so that libweft neither links nor needs rdma-core: where it is
 * missing the verbs transport scores 0 and says why.
 *
 * Which entry points. Only functions that libibverbs.so.1 exports are
 * looked up here, by name, at their default symbol version (IBVERBS_1.1 for
 * most: what a program linked today would get). The fast path is not among
 * them: ibv_post_send, ibv_post_recv and ibv_poll_cq are static inline
 * functions of <infiniband/verbs.h> that call through the provider's ops
 * table in struct ibv_context (qp->context->ops.post_send, ...), and
 * libibverbs exports no symbol for them. Weft calls those inline wrappers
 * as they are: they reference no symbol, so nothing ties libweft to the
 * library, and they reach whatever provider (mlx5, rxe, the test double)
 * filled the context. The test double therefore fills ops.post_send,
 * ops.post_recv and ops.poll_cq of the contexts it opens.
 *
 * Three other names in verbs.h are macros over inline helpers that do
 * reference symbols (ibv_get_device_list, ibv_query_port, ibv_reg_mr): Weft
 * never invokes them by those names, only the table's entries, which point
 * at the exported functions. ibv_query_port's export takes the old, shorter
 * struct; it is given a full, zeroed struct ibv_port_attr, which is what
 * the verbs.h helper does when a provider has no extended query.
 * libweft.so is linked with --no-undefined and a test checks that it
 * references no ibv_* symbol, so a slip shows at once.
 *
 * A library stays loaded for the life of the process once found (rdma-core
 * keeps global state and provider plug-ins; unloading it is not safe).
 */
#ifndef WEFT_VERBS_LIB_H
#define WEFT_VERBS_LIB_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stddef.h>

#define WEFT_IBVERBS_DEFAULT "libibverbs.so.1"
/* A symbol only the test double exports (tests/fake_ibverbs/fake_ibverbs_api.h
 * names the same): a library that has it serves peers only when the job asks
 * for verbs by name. */
#define WEFT_IBVERBS_FAKE_MARKER "weft_fake_ibverbs"

struct weft_ibv {
	const char *name; /* as given to dlopen */
	void *handle;
	bool fake; /* the test double (tests/fake_ibverbs) */

	struct ibv_device **(*get_device_list)(int *num_devices);
	void (*free_device_list)(struct ibv_device **list);
	const char *(*get_device_name)(struct ibv_device *device);
	struct ibv_context *(*open_device)(struct ibv_device *device);
	int (*close_device)(struct ibv_context *context);
	int (*query_device)(struct ibv_context *context, struct ibv_device_attr *attr);
	int (*query_port)(struct ibv_context *context, uint8_t port,
			  struct _compat_ibv_port_attr *attr);
	int (*query_gid)(struct ibv_context *context, uint8_t port, int index, union ibv_gid *gid);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *context);
	int (*dealloc_pd)(struct ibv_pd *pd);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t length, int access);
	int (*dereg_mr)(struct ibv_mr *mr);
	struct ibv_cq *(*create_cq)(struct ibv_context *context, int cqe, void *cq_context,
				    struct ibv_comp_channel *channel, int comp_vector);
	int (*destroy_cq)(struct ibv_cq *cq);
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask);
	int (*destroy_qp)(struct ibv_qp *qp);
	const char *(*wc_status_str)(enum ibv_wc_status status);
};

/* The library @p name (NULL: WEFT_IBVERBS_DEFAULT), loaded once per
 * process and name, with every entry found. NULL if it cannot be loaded or
 * lacks an entry; then @p why (len bytes) says which and why. Thread-safe. */
const struct weft_ibv *weft_verbs_lib_load(const char *name, char *why, size_t len);

/* A query of the port through the table, into a full struct. */
int weft_verbs_query_port(const struct weft_ibv *ibv, struct ibv_context *ctx, uint8_t port,
			  struct ibv_port_attr *attr);

/* Text for a work completion status ("transport retry counter exceeded"). */
const char *weft_verbs_wc_str(const struct weft_ibv *ibv, enum ibv_wc_status status);

#endif
