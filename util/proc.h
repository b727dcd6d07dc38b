/* proc.h — what can be known of another process of this host. */
#ifndef WEFT_PROC_H
#define WEFT_PROC_H

#include <stdbool.h>
#include <sys/types.h>

/* A process of this host, as /proc shows it now. */
enum weft_pid_state {
	WEFT_PID_GONE = 0, /* no such process, or a zombie (exited, not yet reaped) */
	WEFT_PID_RUNNING,  /* running, sleeping or waiting on I/O: it may answer */
	WEFT_PID_STOPPED,  /* stopped by a signal (SIGSTOP, SIGTSTP) or a tracer */
};

enum weft_pid_state weft_pid_state(pid_t pid);

/* Is process @p pid (on this host) alive? A zombie is not: a killed child
 * stays one until its parent reaps it, and kill(pid, 0) still finds it. */
bool weft_pid_alive(pid_t pid);

#endif
