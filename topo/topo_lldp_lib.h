/*
 * topo_lldp_lib.h — liblldpctl reached through a table filled with dlopen
 * and dlsym, so that libweft neither links nor needs it. In Debian the
 * library comes with the lldpd daemon itself (package lldpd): a link would
 * make every install of libweft pull in a daemon that speaks LLDP on every
 * port. Where the library is missing, the leaf is unknown to LLDP and one
 * INFO line says why (topo_lldp.c), as when lldpd is not running.
 *
 * The entries take their types from <lldpctl.h> (__typeof__), so a
 * prototype cannot drift from the header the build sees; the header's
 * macros over them (lldpctl_last_strerror, lldpctl_atom_foreach) are
 * written out where they are used. Once loaded, the
 * library stays for the life of the process; the table never changes.
 */
#ifndef WEFT_TOPO_LLDP_LIB_H
#define WEFT_TOPO_LLDP_LIB_H

#include <lldpctl.h>
#include <stddef.h>

/* liblldpctl's soname (lldpd 1.0's ABI); WEFT_LLDP_LIB names another. */
#define WEFT_LLDPCTL_DEFAULT "liblldpctl.so.4"

struct weft_lldpctl {
	__typeof__(lldpctl_get_default_transport) *get_default_transport;
	__typeof__(lldpctl_new_name) *new_name;
	__typeof__(lldpctl_release) *release;
	__typeof__(lldpctl_last_error) *last_error;
	__typeof__(lldpctl_strerror) *strerror;
	__typeof__(lldpctl_get_interfaces) *get_interfaces;
	__typeof__(lldpctl_get_port) *get_port;
	__typeof__(lldpctl_atom_get) *atom_get;
	__typeof__(lldpctl_atom_get_str) *atom_get_str;
	__typeof__(lldpctl_atom_get_int) *atom_get_int;
	__typeof__(lldpctl_atom_dec_ref) *atom_dec_ref;
	__typeof__(lldpctl_atom_iter) *atom_iter;
	__typeof__(lldpctl_atom_iter_next) *atom_iter_next;
	__typeof__(lldpctl_atom_iter_value) *atom_iter_value;
};

/* The table of @p name (NULL or "": WEFT_LLDPCTL_DEFAULT), loaded on the
 * first call for that name; NULL with the reason in @p why (dlopen's
 * message, or the entry the library lacks). Thread-safe. */
const struct weft_lldpctl *weft_topo_lldp_lib(const char *name, char *why, size_t len);

#endif
