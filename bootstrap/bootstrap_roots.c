/* bootstrap_roots.c — the root threads running in this process, by the
 * key of the unique id each serves: a process that hosts a root must not
 * leave (ending the thread) before the root has served everyone
 * (weft_bootstrap_root_drain). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/bootstrap_root.h"
#include "util/clock.h"

/* Root threads alive in this process, by job, so that the process that
 * hosts a root does not leave (ending the thread) before the root has
 * served everyone: see weft_bootstrap_root_drain(). */
struct running_root {
	struct weft_key key; /* which unique id it serves */
	struct running_root *next;
};

static pthread_mutex_t roots_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t roots_cond = PTHREAD_COND_INITIALIZER;
static struct running_root *roots;

bool weft_bootstrap_roots_add(const struct weft_key *key)
{
	struct running_root *e = malloc(sizeof(*e));

	if (!e)
		return false;
	e->key = *key;
	pthread_mutex_lock(&roots_lock);
	e->next = roots;
	roots = e;
	pthread_mutex_unlock(&roots_lock);
	return true;
}

void weft_bootstrap_roots_remove(const struct weft_key *key)
{
	pthread_mutex_lock(&roots_lock);
	for (struct running_root **p = &roots; *p; p = &(*p)->next) {
		if (memcmp(&(*p)->key, key, sizeof(*key)) == 0) {
			struct running_root *e = *p;

			*p = e->next;
			weft_wipe(e, sizeof(*e));
			free(e);
			break;
		}
	}
	pthread_cond_broadcast(&roots_cond);
	pthread_mutex_unlock(&roots_lock);
}

static bool root_running(const struct weft_key *key)
{
	for (const struct running_root *e = roots; e; e = e->next)
		if (memcmp(&e->key, key, sizeof(*key)) == 0)
			return true;
	return false;
}

void weft_bootstrap_root_drain(const struct weft_key *key, double timeout_s)
{
	struct timespec deadline = weft_wall_after(timeout_s);
	pthread_mutex_lock(&roots_lock);
	while (root_running(key))
		if (pthread_cond_timedwait(&roots_cond, &roots_lock, &deadline) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&roots_lock);
}
