/* proc.h — what can be known of another process of this host. */
#ifndef WEFT_PROC_H
#define WEFT_PROC_H

#include <stdbool.h>
#include <sys/types.h>

/* Is process @p pid (on this host) alive? A zombie is not: a killed child
 * stays one until its parent reaps it, and kill(pid, 0) still finds it. */
bool weft_pid_alive(pid_t pid);

#endif
