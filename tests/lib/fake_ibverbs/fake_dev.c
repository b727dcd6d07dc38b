/*
 * fake_dev.c — the fake libibverbs' devices (from a fake sysfs tree),
 * contexts, protection domains, memory regions moved onto shared files,
 * the clean-up of dead processes' files, and the calls only tests use.
 * See fake_ibverbs.h.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fake_ibverbs.h"
#include "util/proc.h"

#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr

pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;
struct fake_qp *fake_qps;
static struct fake_dev *devices;
static struct fake_mr *mrs;
static uint32_t next_pd_id = 1, next_key = 0x100;

FAKE_EXPORT const int weft_fake_ibverbs = 1;

/* Under Yama's ptrace_scope 1, sibling processes may not process_vm_writev
 * each other unless the target allows it: this test double does, for the
 * registrations that are not whole pages of their own (fake_ibverbs.h). */
__attribute__((constructor)) static void allow_peer_writes(void)
{
	prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
}

double fake_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void fake_debug(const char *fmt, ...)
{
	static int on = -1;
	if (on < 0)
		on = getenv("FAKE_IBVERBS_DEBUG") != NULL;
	if (!on)
		return;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "fake ibverbs (pid %d): ", (int)getpid());
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* ---- the fake sysfs tree ---- */

static const char *sysfs_root(void)
{
	const char *r = getenv("FAKE_IBVERBS_SYSFS");
	return r && *r ? r : "/sys";
}

static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	char *ok = fgets(buf, (int)len, f);
	fclose(f);
	if (!ok)
		return -1;
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

static int parse_gid(const char *s, union ibv_gid *gid)
{
	unsigned v[8];
	if (sscanf(s, "%4x:%4x:%4x:%4x:%4x:%4x:%4x:%4x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
		   &v[6], &v[7]) != 8)
		return -1;
	for (int i = 0; i < 8; i++) {
		gid->raw[2 * i] = (uint8_t)(v[i] >> 8);
		gid->raw[2 * i + 1] = (uint8_t)v[i];
	}
	return 0;
}

static void load_port(struct fake_dev *d, int p)
{
	struct fake_port *pt = &d->port[p];
	char path[700], buf[128];
	snprintf(path, sizeof(path), "%s/ports/%d/link_layer", d->dir, p);
	pt->link_layer = read_line(path, buf, sizeof(buf)) == 0 && strcmp(buf, "InfiniBand") == 0
			     ? IBV_LINK_LAYER_INFINIBAND
			     : IBV_LINK_LAYER_ETHERNET;
	snprintf(path, sizeof(path), "%s/ports/%d/state", d->dir, p);
	pt->state = read_line(path, buf, sizeof(buf)) == 0 && strstr(buf, "ACTIVE")
			? IBV_PORT_ACTIVE
			: IBV_PORT_DOWN;
	snprintf(path, sizeof(path), "%s/ports/%d/lid", d->dir, p);
	pt->lid = read_line(path, buf, sizeof(buf)) == 0 ? (uint16_t)strtoul(buf, NULL, 0) : 0;
	for (pt->ngids = 0; pt->ngids < FAKE_MAX_GIDS; pt->ngids++) {
		snprintf(path, sizeof(path), "%s/ports/%d/gids/%d", d->dir, p, pt->ngids);
		if (read_line(path, buf, sizeof(buf)) != 0 ||
		    parse_gid(buf, &pt->gid[pt->ngids]) != 0)
			break;
	}
}

static struct fake_dev *load_device(const char *root, const char *name)
{
	struct fake_dev *d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	snprintf(d->dir, sizeof(d->dir), "%s/class/infiniband/%s", root, name);
	snprintf(d->ibv.name, sizeof(d->ibv.name), "%.60s", name);
	snprintf(d->ibv.dev_name, sizeof(d->ibv.dev_name), "uverbs-%.50s", name);
	snprintf(d->ibv.ibdev_path, sizeof(d->ibv.ibdev_path), "%.250s", d->dir);
	d->ibv.node_type = IBV_NODE_CA;
	d->ibv.transport_type = IBV_TRANSPORT_IB;
	for (int p = 1; p <= FAKE_MAX_PORTS; p++) {
		char path[700];
		struct stat st;
		snprintf(path, sizeof(path), "%s/ports/%d", d->dir, p);
		if (stat(path, &st) != 0)
			break;
		d->nports = p;
		load_port(d, p);
	}
	return d;
}

/* Remove the files of processes that are gone; count those of @p pid. */
static int sweep(int pid)
{
	DIR *dir = opendir("/dev/shm");
	if (!dir)
		return 0;
	int mine = 0;
	struct dirent *e;
	while ((e = readdir(dir))) {
		int owner = -1;
		unsigned a, b;
		if (sscanf(e->d_name, FAKE_SHM_PREFIX "mr-%u-%u", &a, &b) == 2) {
			owner = (int)a;
		} else if (sscanf(e->d_name, FAKE_SHM_PREFIX "qp-%u", &a) == 1) {
			char path[300];
			snprintf(path, sizeof(path), "/dev/shm/%s", e->d_name);
			int fd = open(path, O_RDONLY | O_CLOEXEC);
			struct fake_qp_file hdr;
			if (fd >= 0 &&
			    pread(fd, &hdr, sizeof(hdr.magic) + sizeof(hdr.pid), 0) > 0 &&
			    hdr.magic == FAKE_QP_MAGIC)
				owner = hdr.pid;
			if (fd >= 0)
				close(fd);
		}
		if (owner <= 0)
			continue;
		if (owner == pid)
			mine++;
		else if (!weft_pid_alive(owner))
			unlinkat(dirfd(dir), e->d_name, 0);
	}
	closedir(dir);
	return mine;
}

FAKE_EXPORT struct ibv_device **ibv_get_device_list(int *num)
{
	pthread_mutex_lock(&fake_lock);
	sweep(-1);
	if (!devices) {
		char path[600];
		snprintf(path, sizeof(path), "%s/class/infiniband", sysfs_root());
		DIR *dir = opendir(path);
		struct dirent *e;
		struct fake_dev **tail = &devices;
		while (dir && (e = readdir(dir))) {
			if (e->d_name[0] == '.')
				continue;
			struct fake_dev *d = load_device(sysfs_root(), e->d_name);
			if (d) {
				*tail = d;
				tail = &d->next;
			}
		}
		if (dir)
			closedir(dir);
	}
	int n = 0;
	for (struct fake_dev *d = devices; d; d = d->next)
		n++;
	struct ibv_device **list = calloc((size_t)n + 1, sizeof(*list));
	n = 0;
	for (struct fake_dev *d = devices; list && d; d = d->next)
		list[n++] = &d->ibv;
	if (num)
		*num = list ? n : 0;
	pthread_mutex_unlock(&fake_lock);
	if (!list)
		errno = ENOMEM;
	return list;
}

FAKE_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	free(list); /* the devices stay: contexts may still use them */
}

FAKE_EXPORT const char *ibv_get_device_name(struct ibv_device *dev)
{
	return dev->name;
}

static int no_notify(struct ibv_cq *cq, int solicited_only)
{
	return EOPNOTSUPP;
}

FAKE_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *dev)
{
	struct fake_ctx *c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	c->dev = (struct fake_dev *)dev;
	c->ibv.device = dev;
	c->ibv.cmd_fd = -1;
	c->ibv.async_fd = -1;
	c->ibv.num_comp_vectors = 1;
	/* Not a verbs_context (abi_compat stays NULL): the extended inline
	 * helpers of verbs.h find no extended ops and fall back. */
	c->ibv.ops.post_send = fake_post_send;
	c->ibv.ops.post_recv = fake_post_recv;
	c->ibv.ops.poll_cq = fake_poll_cq;
	c->ibv.ops.req_notify_cq = no_notify;
	pthread_mutex_init(&c->ibv.mutex, NULL);
	return &c->ibv;
}

FAKE_EXPORT int ibv_close_device(struct ibv_context *ctx)
{
	pthread_mutex_destroy(&ctx->mutex);
	free(ctx);
	return 0;
}

FAKE_EXPORT int ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr)
{
	struct fake_dev *d = ((struct fake_ctx *)ctx)->dev;
	memset(attr, 0, sizeof(*attr));
	snprintf(attr->fw_ver, sizeof(attr->fw_ver), "fake-1");
	attr->max_mr_size = UINT64_MAX;
	attr->page_size_cap = FAKE_PAGE;
	attr->max_qp = 1 << 16;
	attr->max_qp_wr = FAKE_MAX_WR;
	attr->max_sge = FAKE_MAX_SGE;
	attr->max_cq = 1 << 16;
	attr->max_cqe = 1 << 22;
	attr->max_mr = 1 << 16;
	attr->max_pd = 1 << 16;
	attr->max_qp_rd_atom = 16;
	attr->max_qp_init_rd_atom = 16;
	attr->phys_port_cnt = (uint8_t)d->nports;
	return 0;
}

/* The exported ibv_query_port is given a full struct ibv_port_attr by
 * callers of any rdma-core since v17 (the verbs.h macro, and Weft). */
FAKE_EXPORT int ibv_query_port(struct ibv_context *ctx, uint8_t port,
			       struct _compat_ibv_port_attr *compat)
{
	struct ibv_port_attr *attr = (struct ibv_port_attr *)compat;
	struct fake_dev *d = ((struct fake_ctx *)ctx)->dev;
	if (port < 1 || port > d->nports)
		return EINVAL;
	const struct fake_port *pt = &d->port[port];
	memset(attr, 0, sizeof(*attr));
	attr->state = pt->state;
	attr->max_mtu = IBV_MTU_4096;
	attr->active_mtu =
	    pt->link_layer == IBV_LINK_LAYER_INFINIBAND ? IBV_MTU_4096 : IBV_MTU_1024;
	attr->gid_tbl_len = pt->ngids;
	attr->max_msg_sz = 1u << 31;
	attr->pkey_tbl_len = 1;
	attr->lid = pt->lid;
	attr->active_width = 2;	 /* 4X */
	attr->active_speed = 32; /* EDR: 25 Gb/s a lane */
	attr->phys_state = pt->state == IBV_PORT_ACTIVE ? 5 : 3;
	attr->link_layer = (uint8_t)pt->link_layer;
	return 0;
}

int fake_port_gid(struct fake_dev *d, int port, int index, union ibv_gid *gid)
{
	if (port < 1 || port > d->nports || index < 0 || index >= d->port[port].ngids)
		return EINVAL;
	*gid = d->port[port].gid[index];
	return 0;
}

FAKE_EXPORT int ibv_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid)
{
	return fake_port_gid(((struct fake_ctx *)ctx)->dev, port, index, gid);
}

FAKE_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *ctx)
{
	struct fake_pd *pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&fake_lock);
	pd->id = next_pd_id++;
	pthread_mutex_unlock(&fake_lock);
	pd->ibv.context = ctx;
	pd->ibv.handle = pd->id;
	return &pd->ibv;
}

FAKE_EXPORT int ibv_dealloc_pd(struct ibv_pd *ibv)
{
	struct fake_pd *pd = (struct fake_pd *)ibv;
	if (pd->users)
		return EBUSY;
	free(pd);
	return 0;
}

/* ---- memory regions ---- */

struct fake_mr *fake_mr_find(uint32_t lkey)
{
	for (struct fake_mr *m = mrs; m; m = m->next)
		if (m->ibv.lkey == lkey)
			return m;
	return NULL;
}

static bool pages_taken(uint64_t base, uint64_t span)
{
	for (struct fake_mr *m = mrs; m; m = m->next)
		if (base < m->base + m->span && m->base < base + span)
			return true;
	return false;
}

/* Is [base, base + span) exactly one mapping of the process (an mmap of
 * its own, as a transport's region or a large malloc block is)? Pages of a
 * larger mapping (the heap) may hold other objects that other threads
 * write while they would be copied: those stay where they are. */
static bool own_mapping(uint64_t base, uint64_t span)
{
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return false;
	char line[512];
	bool own = false;
	while (!own && fgets(line, sizeof(line), f)) {
		unsigned long lo = 0, hi = 0;
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2)
			own = lo == base && hi == base + span;
		if (!strchr(line, '\n')) /* a long line: skip its tail */
			for (int ch = fgetc(f); ch != EOF && ch != '\n'; ch = fgetc(f))
				;
	}
	fclose(f);
	return own;
}

/* Copy the pages into a new file and map it back over them; or, for a
 * registration that is not whole pages of its own (@p m->cma), only the
 * header page: peers then write with process_vm_writev. */
static int move_pages(struct fake_mr *m)
{
	int fd = shm_open(m->path + strlen("/dev/shm"), O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		return errno;
	int err = 0;
	size_t body = m->cma ? 0 : m->span;
	if (ftruncate(fd, (off_t)(FAKE_PAGE + body)) != 0 ||
	    (body && pwrite(fd, (void *)(uintptr_t)m->base, body, FAKE_PAGE) != (ssize_t)body))
		err = errno ? errno : EIO;
	void *hdr =
	    err ? MAP_FAILED : mmap(NULL, FAKE_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (!err && hdr == MAP_FAILED)
		err = errno;
	if (!err && body &&
	    mmap((void *)(uintptr_t)m->base, body, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
		 fd, FAKE_PAGE) == MAP_FAILED)
		err = errno;
	close(fd);
	if (err) {
		if (hdr != MAP_FAILED)
			munmap(hdr, FAKE_PAGE);
		shm_unlink(m->path + strlen("/dev/shm"));
		return err;
	}
	m->hdr = hdr;
	return 0;
}

static uint64_t mr_regs, mr_deregs; /* under fake_lock */

FAKE_EXPORT void weft_fake_ibv_mr_counts(uint64_t *regs, uint64_t *deregs)
{
	pthread_mutex_lock(&fake_lock);
	*regs = mr_regs;
	*deregs = mr_deregs;
	pthread_mutex_unlock(&fake_lock);
}

FAKE_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *ibv_pd, void *addr, size_t len, int access)
{
	struct fake_pd *pd = (struct fake_pd *)ibv_pd;
	/* As the verbs require: remote write needs local write. */
	if (!addr || !len ||
	    ((access & IBV_ACCESS_REMOTE_WRITE) && !(access & IBV_ACCESS_LOCAL_WRITE))) {
		errno = EINVAL;
		return NULL;
	}
	struct fake_mr *m = calloc(1, sizeof(*m));
	if (!m) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&fake_lock);
	m->base = (uint64_t)(uintptr_t)addr & ~(uint64_t)(FAKE_PAGE - 1);
	m->span = ((uint64_t)(uintptr_t)addr + len + FAKE_PAGE - 1 - m->base) &
		  ~(uint64_t)(FAKE_PAGE - 1);
	/* Only a mapping of its own that nobody else registered is moved: a
	 * buffer that shares its pages (malloc's heap) stays put, and so do
	 * its neighbours. */
	m->cma = pages_taken(m->base, m->span) || m->base != (uint64_t)(uintptr_t)addr ||
		 m->span != len || !own_mapping(m->base, m->span);
	if (m->cma)
		fake_debug("reg_mr(%p, %zu): not a mapping of its own: peers write with "
			   "process_vm_writev",
			   addr, len);
	m->ibv.lkey = m->ibv.rkey = next_key++;
	snprintf(m->path, sizeof(m->path), "/dev/shm/" FAKE_SHM_PREFIX "mr-%d-%u", (int)getpid(),
		 m->ibv.rkey);
	int err = move_pages(m);
	if (err) {
		pthread_mutex_unlock(&fake_lock);
		free(m);
		errno = err;
		return NULL;
	}
	*m->hdr = (struct fake_mr_file){.magic = FAKE_MR_MAGIC,
					.rkey = m->ibv.rkey,
					.pd_id = pd->id,
					.access = (uint32_t)access,
					.addr = (uint64_t)(uintptr_t)addr,
					.len = len,
					.base = m->base,
					.pid = (int32_t)getpid(),
					.cma = m->cma};
	atomic_store(&m->hdr->valid, 1);
	m->ibv.context = ibv_pd->context;
	m->ibv.pd = ibv_pd;
	m->ibv.addr = addr;
	m->ibv.length = len;
	m->ibv.handle = m->ibv.lkey;
	m->pd = pd;
	m->access = access;
	pd->users++;
	mr_regs++;
	m->next = mrs;
	mrs = m;
	pthread_mutex_unlock(&fake_lock);
	return &m->ibv;
}

/* The pages stay where they are (on the unlinked file) and keep their
 * contents: only the name and the key go. */
FAKE_EXPORT int ibv_dereg_mr(struct ibv_mr *ibv)
{
	struct fake_mr *m = (struct fake_mr *)ibv;
	pthread_mutex_lock(&fake_lock);
	for (struct fake_mr **p = &mrs; *p; p = &(*p)->next)
		if (*p == m) {
			*p = m->next;
			break;
		}
	atomic_store(&m->hdr->valid, 0);
	munmap(m->hdr, FAKE_PAGE);
	shm_unlink(m->path + strlen("/dev/shm"));
	m->pd->users--;
	mr_deregs++;
	pthread_mutex_unlock(&fake_lock);
	free(m);
	return 0;
}

/* ---- status strings (this fake's own wording) ---- */

FAKE_EXPORT const char *ibv_wc_status_str(enum ibv_wc_status status)
{
	switch (status) {
	case IBV_WC_SUCCESS: return "success";
	case IBV_WC_LOC_PROT_ERR: return "local protection error";
	case IBV_WC_WR_FLUSH_ERR: return "work request flushed";
	case IBV_WC_REM_ACCESS_ERR: return "remote access error";
	case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
	case IBV_WC_RNR_RETRY_EXC_ERR: return "RNR retry counter exceeded";
	case IBV_WC_GENERAL_ERR: return "general error";
	default: return "other error";
	}
}

/* ---- for tests ---- */

FAKE_EXPORT int weft_fake_ibv_qp_attr(uint32_t qpn, struct weft_fake_qp_attr *out)
{
	char name[64];
	snprintf(name, sizeof(name), "/" FAKE_SHM_PREFIX "qp-%u", qpn);
	int fd = shm_open(name, O_RDONLY, 0);
	if (fd < 0)
		return -1;
	struct fake_qp_file f;
	ssize_t n = pread(fd, &f, offsetof(struct fake_qp_file, in_head), 0);
	close(fd);
	if (n != (ssize_t)offsetof(struct fake_qp_file, in_head) || f.magic != FAKE_QP_MAGIC)
		return -1;
	*out = (struct weft_fake_qp_attr){
	    .pid = f.pid,
	    .state = atomic_load(&f.state),
	    .port = f.port,
	    .link_layer = f.link_layer,
	    .mtu = f.mtu,
	    .sgid_index = f.sgid_index,
	    .dest_qpn = f.dest_qpn,
	    .rq_psn = f.rq_psn,
	    .sq_psn = f.sq_psn,
	    .dlid = f.dlid,
	    .slid = f.slid,
	    .is_global = f.is_global,
	    .sl = f.sl,
	    .traffic_class = f.traffic_class,
	    .timeout = f.timeout,
	    .retry_cnt = f.retry_cnt,
	    .rnr_retry = f.rnr_retry,
	};
	memcpy(out->sgid, f.sgid, 16);
	memcpy(out->dgid, f.dgid, 16);
	return 0;
}

FAKE_EXPORT int weft_fake_ibv_files(int pid)
{
	pthread_mutex_lock(&fake_lock);
	int n = sweep(pid);
	pthread_mutex_unlock(&fake_lock);
	return n;
}
