/* tp_watchdog.c — see tp_watchdog.h. */
#include "transports/common/tp_watchdog.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/clock.h"

bool weft_watchdog_due(struct weft_watchdog *w, double stall_s)
{
	if (++w->polls < WEFT_WATCHDOG_POLLS)
		return false;
	w->polls = 0;
	double now = weft_now();
	if (w->since == 0) {
		w->since = now;
		return false;
	}
	if (now - w->since < stall_s)
		return false;
	w->since = now;
	return true;
}

bool weft_tp_pid_alive(pid_t pid)
{
	if (kill(pid, 0) != 0 && errno == ESRCH)
		return false;
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno != ENOENT;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return true;
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');
	return !(p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'));
}
