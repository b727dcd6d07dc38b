/* proc.c — see proc.h. */
#include "util/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum weft_pid_state weft_pid_state(pid_t pid)
{
	if (pid <= 0 || (kill(pid, 0) != 0 && errno == ESRCH))
		return WEFT_PID_GONE;
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? WEFT_PID_GONE : WEFT_PID_RUNNING;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return WEFT_PID_RUNNING;
	buf[n] = '\0';
	/* The state follows the command's closing parenthesis. */
	const char *p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return WEFT_PID_RUNNING;
	switch (p[2]) {
	case 'Z':
	case 'X': return WEFT_PID_GONE;
	case 'T':
	case 't': return WEFT_PID_STOPPED;
	default: return WEFT_PID_RUNNING;
	}
}

bool weft_pid_alive(pid_t pid)
{
	return weft_pid_state(pid) != WEFT_PID_GONE;
}
