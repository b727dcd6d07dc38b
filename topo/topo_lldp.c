/*
 * topo_lldp.c — the leaf switch above a NIC, as the local lldpd heard it.
 *
 * lldpd listens to the LLDP frames its neighbours send on each port and
 * answers questions on a Unix control socket; liblldpctl speaks that
 * protocol. We ask for the interface list, the port of our NIC, and take its
 * first neighbour: chassis id and name (the leaf), and the leaf's port.
 *
 * liblldpctl's default I/O is a blocking read() on the socket, which would
 * hang init forever if lldpd accepted the connection and then never
 * answered (stopped, wedged, overloaded). So we give it our own send/recv
 * callbacks on a non-blocking socket, and every wait is a poll() bounded by
 * one deadline for the whole query. A missing socket fails at connect().
 *
 * liblldpctl itself is opened with dlopen (topo_lldp_lib.h says why).
 *
 * Nothing here fails: no liblldpctl, no lldpd, no such interface, no
 * neighbour, no answer in time — the card is left as it was and one INFO
 * line says why.
 */
#define _GNU_SOURCE
#include "topo/topo.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util/log.h"
#include "util/settings.h"

#ifdef WEFT_HAVE_LLDPCTL
#include <lldp-const.h>
#include <lldpctl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "topo/topo_lldp_lib.h"

/* Whole query: connect, interface list, port. lldpd answers in
 * milliseconds; this only bounds a daemon that does not answer. */
#define LLDP_TIMEOUT_MS 2000

struct lldp_io {
	int fd;
	struct timespec deadline;
	int error;	/* errno of the failure our callbacks saw, 0 none */
	bool timed_out; /* lldpd did not answer in time */
};

static int ms_left(const struct timespec *deadline)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	long ms =
	    (deadline->tv_sec - now.tv_sec) * 1000 + (deadline->tv_nsec - now.tv_nsec) / 1000000;
	return ms > 0 ? (int)ms : 0;
}

/* Wait for @p events on the socket until the deadline; false on timeout or
 * error (recorded in @p io). */
static bool io_wait(struct lldp_io *io, short events)
{
	for (;;) {
		int left = ms_left(&io->deadline);
		if (left == 0) {
			io->timed_out = true;
			return false;
		}
		struct pollfd p = {.fd = io->fd, .events = events};
		int n = poll(&p, 1, left);
		if (n > 0)
			return true;
		if (n < 0 && errno != EINTR) {
			io->error = errno;
			return false;
		}
	}
}

/* liblldpctl send callback: all of @p data, or a failure. */
static ssize_t io_send(lldpctl_conn_t *conn, const uint8_t *data, size_t length, void *user)
{
	struct lldp_io *io = user;
	size_t done = 0;
	while (done < length) {
		ssize_t n = send(io->fd, data + done, length - done, MSG_NOSIGNAL);
		if (n > 0) {
			done += (size_t)n;
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (!io_wait(io, POLLOUT))
				return LLDPCTL_ERR_CALLBACK_FAILURE;
		} else if (n < 0 && errno != EINTR) {
			io->error = errno;
			return LLDPCTL_ERR_CALLBACK_FAILURE;
		}
	}
	return (ssize_t)done;
}

/* liblldpctl receive callback: whatever arrives first (the library asks
 * again until it holds a whole message), 0 at end of stream. */
static ssize_t io_recv(lldpctl_conn_t *conn, const uint8_t *data, size_t length, void *user)
{
	struct lldp_io *io = user;
	for (;;) {
		ssize_t n = recv(io->fd, (void *)data, length, 0);
		if (n >= 0)
			return n;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			if (!io_wait(io, POLLIN))
				return LLDPCTL_ERR_CALLBACK_FAILURE;
		} else if (errno != EINTR) {
			io->error = errno;
			return LLDPCTL_ERR_CALLBACK_FAILURE;
		}
	}
}

/* Connect to lldpd's control socket; -1 with errno set if it is not there. */
static int lldp_connect(const char *path, struct lldp_io *io)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	/* A non-blocking Unix connect fails at once (ENOENT, ECONNREFUSED,
	 * EACCES) or with EAGAIN while lldpd's backlog is full: retry that. */
	while (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		if ((errno != EAGAIN && errno != EINTR) || ms_left(&io->deadline) == 0) {
			int e = errno == EAGAIN ? ETIMEDOUT : errno;
			close(fd);
			errno = e;
			return -1;
		}
		nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
	}
	return fd;
}

/* Why the last liblldpctl call failed, in words. */
static const char *lldp_why(const struct weft_lldpctl *L, lldpctl_conn_t *conn,
			    const struct lldp_io *io)
{
	if (io->timed_out)
		return "no answer in time";
	if (io->error)
		return strerror(io->error);
	return L->strerror(L->last_error(conn));
}

/* Copy an atom's string, "" if it has none. */
static void copy_str(const struct weft_lldpctl *L, char *dst, size_t len, lldpctl_atom_t *atom,
		     lldpctl_key_t key)
{
	const char *s = atom ? L->atom_get_str(atom, key) : NULL;
	snprintf(dst, len, "%s", s ? s : "");
}

/* The port of the neighbour as people name it: its id when that is an
 * interface name or a local label (switches: "Ethernet1/1"), else its
 * description (the id is then a MAC or an address). */
static void neighbour_port(const struct weft_lldpctl *L, char *dst, size_t len,
			   lldpctl_atom_t *neighbour)
{
	long subtype = L->atom_get_int(neighbour, lldpctl_k_port_id_subtype);
	if (subtype != LLDP_PORTID_SUBTYPE_IFNAME && subtype != LLDP_PORTID_SUBTYPE_LOCAL) {
		copy_str(L, dst, len, neighbour, lldpctl_k_port_descr);
		if (dst[0])
			return;
	}
	copy_str(L, dst, len, neighbour, lldpctl_k_port_id);
}

/* The leaf fields from @p neighbour's chassis; false if it names none. */
static bool fill_from_neighbour(const struct weft_lldpctl *L, struct weft_topo_card *card,
				lldpctl_atom_t *neighbour)
{
	char id[WEFT_TOPO_NAME_BYTES], name[WEFT_TOPO_NAME_BYTES];
	lldpctl_atom_t *chassis = L->atom_get(neighbour, lldpctl_k_port_chassis);
	copy_str(L, id, sizeof(id), chassis, lldpctl_k_chassis_id);
	copy_str(L, name, sizeof(name), chassis, lldpctl_k_chassis_name);
	if (chassis)
		L->atom_dec_ref(chassis);
	if (!id[0] && !name[0])
		return false;
	memcpy(card->leaf_id, id, sizeof(id));
	memcpy(card->leaf_name, name, sizeof(name));
	neighbour_port(L, card->leaf_port, sizeof(card->leaf_port), neighbour);
	card->leaf_source = WEFT_LEAF_LLDP;
	return true;
}

/* Fill the leaf fields from the first neighbour on @p port; false if none.
 * The walk is what lldpctl_atom_foreach() expands to, through the table:
 * each value is released as the walk moves past it. */
static bool fill_from_port(const struct weft_lldpctl *L, struct weft_topo_card *card,
			   lldpctl_atom_t *port)
{
	lldpctl_atom_t *neighbours = L->atom_get(port, lldpctl_k_port_neighbors);
	lldpctl_atom_t *neighbour;
	bool found = false;
	for (lldpctl_atom_iter_t *it = neighbours ? L->atom_iter(neighbours) : NULL;
	     it && (neighbour = L->atom_iter_value(neighbours, it));
	     it = L->atom_iter_next(neighbours, it), L->atom_dec_ref(neighbour))
		if (!found)
			found = fill_from_neighbour(L, card, neighbour);
	if (neighbours)
		L->atom_dec_ref(neighbours);
	return found;
}

/* The port atom of interface @p nic in @p ifaces, or NULL; *listed says
 * whether lldpd handles the interface at all. */
static lldpctl_atom_t *find_port(const struct weft_lldpctl *L, lldpctl_atom_t *ifaces,
				 const char *nic, bool *listed)
{
	lldpctl_atom_t *iface, *port = NULL;
	*listed = false;
	for (lldpctl_atom_iter_t *it = L->atom_iter(ifaces);
	     it && (iface = L->atom_iter_value(ifaces, it));
	     it = L->atom_iter_next(ifaces, it), L->atom_dec_ref(iface)) {
		const char *name = L->atom_get_str(iface, lldpctl_k_interface_name);
		if (*listed || !name || strcmp(name, nic) != 0)
			continue;
		*listed = true;
		port = L->get_port(iface);
	}
	return port;
}

/* Ask lldpd at @p path about @p nic. Returns nothing: every outcome other
 * than a filled card is an INFO line. */
static void query(const struct weft_lldpctl *L, struct weft_topo_card *card, const char *nic,
		  const char *path)
{
	struct lldp_io io = {.fd = -1};
	clock_gettime(CLOCK_MONOTONIC, &io.deadline);
	io.deadline.tv_sec += LLDP_TIMEOUT_MS / 1000;
	io.deadline.tv_nsec += (LLDP_TIMEOUT_MS % 1000) * 1000000L;
	if (io.deadline.tv_nsec >= 1000000000L) {
		io.deadline.tv_sec++;
		io.deadline.tv_nsec -= 1000000000L;
	}

	io.fd = lldp_connect(path, &io);
	if (io.fd < 0) {
		weft_log(WEFT_LOG_INFO, WEFT_SUB_TOPO,
			 "LLDP: cannot reach lldpd at %s (%s): leaf of %s unknown", path,
			 strerror(errno), nic);
		return;
	}
	lldpctl_conn_t *conn = L->new_name(path, io_send, io_recv, &io);
	if (!conn) {
		weft_log(WEFT_LOG_INFO, WEFT_SUB_TOPO, "LLDP: out of memory: leaf of %s unknown",
			 nic);
		goto out_close;
	}
	lldpctl_atom_t *ifaces = L->get_interfaces(conn);
	if (!ifaces) {
		weft_log(WEFT_LOG_INFO, WEFT_SUB_TOPO,
			 "LLDP: lldpd at %s did not list its interfaces (%s): leaf of %s unknown",
			 path, lldp_why(L, conn, &io), nic);
		goto out_release;
	}
	bool listed;
	lldpctl_atom_t *port = find_port(L, ifaces, nic, &listed);
	if (!listed)
		weft_log(WEFT_LOG_INFO, WEFT_SUB_TOPO,
			 "LLDP: lldpd at %s does not handle %s: leaf unknown", path, nic);
	else if (!port)
		weft_log(WEFT_LOG_INFO, WEFT_SUB_TOPO,
			 "LLDP: lldpd at %s did not describe port %s (%s): leaf unknown", path, nic,
			 lldp_why(L, conn, &io));
	else if (!fill_from_port(L, card, port))
		weft_log(WEFT_LOG_INFO, WEFT_SUB_TOPO,
			 "LLDP: no neighbour seen on %s: leaf unknown", nic);
	else
		weft_log(WEFT_LOG_INFO, WEFT_SUB_TOPO,
			 "LLDP: %s is on leaf '%s' (chassis %s) port '%s'", nic, card->leaf_name,
			 card->leaf_id, card->leaf_port);
	if (port)
		L->atom_dec_ref(port);
	L->atom_dec_ref(ifaces);
out_release:
	L->release(conn);
out_close:
	close(io.fd);
}
#endif /* WEFT_HAVE_LLDPCTL */

weft_status_t weft_topo_lldp_fill(struct weft_topo_card *card, const char *nic,
				  const char *socket_path, struct weft_err *err)
{
	const char *enabled = weft_setting_str("WEFT_LLDP");
	if (enabled && strcmp(enabled, "0") == 0) {
		weft_log(WEFT_LOG_INFO, WEFT_SUB_TOPO, "LLDP: off (WEFT_LLDP=0)");
		return WEFT_SUCCESS;
	}
	if (!nic || !*nic) {
		weft_log(WEFT_LOG_INFO, WEFT_SUB_TOPO, "LLDP: no NIC chosen: leaf unknown");
		return WEFT_SUCCESS;
	}
#ifdef WEFT_HAVE_LLDPCTL
	char why[256];
	const struct weft_lldpctl *L =
	    weft_topo_lldp_lib(weft_setting_str("WEFT_LLDP_LIB"), why, sizeof(why));
	if (!L) {
		weft_log(WEFT_LOG_INFO, WEFT_SUB_TOPO,
			 "LLDP: no liblldpctl (%s): leaf of %s unknown", why, nic);
		return WEFT_SUCCESS;
	}
	query(L, card, nic, socket_path ? socket_path : L->get_default_transport());
#else
	weft_log(WEFT_LOG_INFO, WEFT_SUB_TOPO,
		 "LLDP: Weft was built without liblldpctl: leaf of %s unknown", nic);
#endif
	return WEFT_SUCCESS;
}
