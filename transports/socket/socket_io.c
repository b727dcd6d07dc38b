/*
 * socket_io.c — the system calls the TCP transport makes on its sockets,
 * behind a table (struct weft_sock_io): the kernel's here, a fake network
 * in tests/unit/transports/failover.c, which loses, holds back and
 * reorders what the sockets carry to test acknowledgements, failover and
 * duplicate dropping without a fabric.
 */
#define _GNU_SOURCE
#include <linux/tcp.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transports/socket/socket.h"

static int kernel_tcp_info(int fd, struct tcp_info *ti)
{
	socklen_t len = sizeof(*ti);
	memset(ti, 0, sizeof(*ti));
	return getsockopt(fd, IPPROTO_TCP, TCP_INFO, ti, &len);
}

const struct weft_sock_io weft_sock_io_kernel = {
    .socket = socket,
    .connect = connect,
    .accept4 = accept4,
    .sendmsg = sendmsg,
    .recv = recv,
    .tcp_info = kernel_tcp_info,
    .shutdown = shutdown,
    .close = close,
};

const struct weft_sock_io *weft_sock_io_default = &weft_sock_io_kernel;

uint16_t weft_tp_socket_port(int fd, bool local)
{
	struct sockaddr_storage a;
	socklen_t len = sizeof(a);
	if (fd < 0 || (local ? getsockname(fd, (struct sockaddr *)&a, &len)
			     : getpeername(fd, (struct sockaddr *)&a, &len)) != 0)
		return 0;
	if (a.ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)&a)->sin_port);
	if (a.ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)&a)->sin6_port);
	return 0;
}
