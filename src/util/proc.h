/* proc.h — facts about other processes on this host. */
#ifndef WEFT_UTIL_PROC_H
#define WEFT_UTIL_PROC_H

#include <stdbool.h>
#include <sys/types.h>

/* False once @p pid has exited. kill(pid, 0) alone is not enough: a killed
 * child stays a zombie until its parent reaps it, and a zombie still
 * "exists", so its state in /proc/<pid>/stat is read too. */
bool weft_pid_alive(pid_t pid);

#endif
