/*
 * trace_signal.c — the communicators a signal dumps, and the handlers.
 *
 * With WEFT_TRACE_DIR set, a fatal signal (SIGSEGV, SIGBUS, SIGFPE,
 * SIGILL, SIGABRT) or SIGTERM (how launchers end a job: mpirun, srun and
 * torchrun send it before SIGKILL) dumps every registered communicator's
 * recorder, then the signal takes its default course (the disposition is
 * restored and the signal raised again), so the process still dies as it
 * would have, core file included. A library must not take a signal from
 * its application: a handler is installed only where the disposition was
 * the default, once per process, when the first communicator registers;
 * where the application handles one itself, Weft leaves it and says so at
 * INFO. With WEFT_TRACE_SIGNAL=1, SIGUSR2 dumps and the job goes on (its
 * default would end the process).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>

#include "core/trace_int.h"
#include "util/log.h"
#include "util/settings.h"

static _Atomic(struct weft_trace *) registry[WEFT_TRACE_REGISTRY];
static pthread_once_t once = PTHREAD_ONCE_INIT;
static _Atomic int fatal_seen;
static _Atomic int in_handler; /* handlers walking the registry now */

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM};

static const char *signal_reason(int sig)
{
	switch (sig) {
	case SIGSEGV: return "signal SIGSEGV";
	case SIGBUS: return "signal SIGBUS";
	case SIGFPE: return "signal SIGFPE";
	case SIGILL: return "signal SIGILL";
	case SIGABRT: return "signal SIGABRT";
	case SIGTERM: return "signal SIGTERM";
	case SIGUSR2: return "signal SIGUSR2";
	default: return "signal";
	}
}

static void dump_all(const char *reason)
{
	atomic_fetch_add(&in_handler, 1); /* before any load: unregister waits for it */
	for (int i = 0; i < WEFT_TRACE_REGISTRY; i++) {
		struct weft_trace *t = atomic_load(&registry[i]);
		if (t)
			weft_trace_dump(t, NULL, reason);
	}
	atomic_fetch_sub(&in_handler, 1);
}

static void on_fatal(int sig)
{
	int saved = errno;
	if (atomic_exchange(&fatal_seen, 1) == 0)
		dump_all(signal_reason(sig));
	/* Its default course: a core file for a fault, death for SIGTERM. */
	signal(sig, SIG_DFL);
	raise(sig);
	errno = saved;
}

static void on_usr2(int sig)
{
	int saved = errno;
	dump_all(signal_reason(sig));
	errno = saved;
}

static bool install(int sig, void (*fn)(int))
{
	struct sigaction old;
	if (sigaction(sig, NULL, &old) != 0 || old.sa_handler != SIG_DFL ||
	    (old.sa_flags & SA_SIGINFO)) {
		weft_log(WEFT_LOG_INFO, WEFT_SUB_INIT,
			 "trace: signal %d has a handler of the application's: not dumping on it",
			 sig);
		return false;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = fn;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	return sigaction(sig, &sa, NULL) == 0;
}

static void install_handlers(void)
{
	if (weft_setting_str("WEFT_TRACE_DIR"))
		for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(fatal_signals[0]); i++)
			install(fatal_signals[i], on_fatal);
	const char *usr2 = weft_setting_str("WEFT_TRACE_SIGNAL");
	if (usr2 && strcmp(usr2, "1") == 0)
		install(SIGUSR2, on_usr2);
}

void weft_trace_register(struct weft_trace *t)
{
	pthread_once(&once, install_handlers);
	for (int i = 0; i < WEFT_TRACE_REGISTRY; i++) {
		struct weft_trace *none = NULL;
		if (atomic_compare_exchange_strong(&registry[i], &none, t))
			return;
	}
	weft_log(WEFT_LOG_INFO, WEFT_SUB_INIT,
		 "trace: more than %d communicators: this one dumps on its own failures only",
		 WEFT_TRACE_REGISTRY);
}

void weft_trace_unregister(struct weft_trace *t)
{
	for (int i = 0; i < WEFT_TRACE_REGISTRY; i++) {
		struct weft_trace *mine = t;
		atomic_compare_exchange_strong(&registry[i], &mine, NULL);
	}
	/* A handler in another thread that may have taken it before it left
	 * the registry finishes first (one in this thread has already). */
	while (atomic_load(&in_handler) > 0 || atomic_load(&t->dumping) > 0)
		sched_yield();
}
