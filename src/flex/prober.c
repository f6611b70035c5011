/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>

#include "alloc.h"
#include "hash-util.h"
#include "install.h"
#include "log.h"
#include "prober.h"
#include "watch.h"

#define DEFAULT_INTERVAL (1 * USEC_PER_SEC)
#define DEFAULT_SETTLE (50 * USEC_PER_MSEC)
#define DEFAULT_MAX_INITS 8
/* A hung init holds one slot; a fixed version may take the second at once. */
#define INITS_PER_DRIVER_MAX 2
/* How often a vanished, not yet re-creatable plugin dir is retried. */
#define RECREATE_RETRY (1 * USEC_PER_SEC)

/* A driver folder the prober has seen. */
typedef struct Entry {
	char *folder;
	char *name;    /* registry key: folder with '~' -> '/' */
	char *exe;     /* executable for the queued init */
	uint64_t want; /* only the init started for this generation may publish */
	bool need_init;
	unsigned inflight;
	bool has_stamp;
	uint64_t stamp; /* the folder's files when last acted on */
} Entry;

struct FlexProber {
	char *dir;
	FlexProberConfig cfg; /* cfg.dir points to dir */
	FlexRegistry *registry;
	DirWatch *watch; /* the prober thread's, once started */
	int wake_fd;	 /* eventfd: stop requested or an init ended */
	pthread_t thread;
	bool started;

	pthread_mutex_t lock; /* guards every field below; taken before the registry's lock */
	pthread_cond_t cond;  /* broadcast when an init ends or the thread goes idle */
	Entry *entries;
	size_t n_entries, cap_entries;
	unsigned inflight; /* inits running, all drivers */
	bool stopping;
	bool busy;    /* the thread is reading events or probing */
	bool pending; /* changes gathered and not probed yet (rate limit, retry) */
	bool healthy; /* the plugin dir is watched */
	FlexProberStats stats;
};

typedef struct InitJob {
	FlexProber *p;
	char *folder, *name, *exe;
	uint64_t gen;
} InitJob;

static void wake(FlexProber *p)
{
	uint64_t one = 1;
	if (write(p->wake_fd, &one, sizeof(one)) < 0) {
		/* the counter is full: the thread is awake anyway */
	}
}

static void notify(FlexProber *p, FlexDriver *d)
{
	if (d && p->cfg.on_change)
		p->cfg.on_change(d, p->cfg.userdata);
	flex_driver_unref(d);
}

static Entry *entry_find(FlexProber *p, const char *folder)
{
	for (size_t i = 0; i < p->n_entries; i++)
		if (strcmp(p->entries[i].folder, folder) == 0)
			return &p->entries[i];
	return NULL;
}

static Entry *entry_get(FlexProber *p, const char *folder, const char *name)
{
	Entry *e = entry_find(p, folder);
	if (e)
		return e;
	p->entries = xgrow(p->entries, &p->cap_entries, p->n_entries + 1, sizeof(*p->entries));
	e = &p->entries[p->n_entries++];
	*e = (Entry){.folder = xstrdup(folder), .name = xstrdup(name)};
	return e;
}

static void *init_thread(void *arg)
{
	InitJob *j = arg;
	FlexProber *p = j->p;
	FlexCapabilities caps;
	_cleanup_free_ char *error = NULL;
	FlexDriver *published = NULL;

	int r = flex_call_init(j->name, j->exe, &p->cfg.call, &caps, &error);
	FlexDriver *d = r >= 0 ? flex_driver_new(j->name, j->folder, j->exe, FLEX_DRIVER_LOADED,
						 &caps, NULL)
			       : flex_driver_new(j->name, j->folder, j->exe, FLEX_DRIVER_FAILED,
						 NULL, error);

	pthread_mutex_lock(&p->lock);
	Entry *e = entry_find(p, j->folder);
	if (e && e->want == j->gen) {
		published = flex_driver_ref(d);
		flex_registry_publish(p->registry, d);
	} else {
		log_debug("flex prober: dropping a stale init result of \"%s\"", j->name);
		flex_driver_unref(d);
	}
	pthread_mutex_unlock(&p->lock);

	/* Still counted in inflight, so p cannot be freed under the callback. */
	notify(p, published);

	pthread_mutex_lock(&p->lock);
	e = entry_find(p, j->folder);
	if (e)
		e->inflight--;
	p->inflight--;
	p->stats.inits++;
	pthread_cond_broadcast(&p->cond);
	wake(p);
	/* Nothing may touch p after this unlock: flex_prober_free() may run. */
	pthread_mutex_unlock(&p->lock);

	free(j->folder);
	free(j->name);
	free(j->exe);
	free(j);
	return NULL;
}

/* Starts the queued inits there is room for. Lock held. */
static void dispatch_locked(FlexProber *p)
{
	unsigned max = p->cfg.max_parallel_inits;

	for (size_t i = 0; i < p->n_entries && p->inflight < max; i++) {
		Entry *e = &p->entries[i];
		if (!e->need_init || e->inflight >= INITS_PER_DRIVER_MAX)
			continue;
		InitJob *j = xnew0(InitJob, 1);
		*j = (InitJob){.p = p,
			       .folder = xstrdup(e->folder),
			       .name = xstrdup(e->name),
			       .exe = xstrdup(e->exe),
			       .gen = e->want};
		pthread_attr_t attr;
		pthread_t t;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		int r = -pthread_create(&t, &attr, init_thread, j);
		pthread_attr_destroy(&attr);
		if (r < 0) {
			log_debug_errno(r, "flex prober: cannot start init of \"%s\": %m", e->name);
			free(j->folder);
			free(j->name);
			free(j->exe);
			free(j);
			return; /* retried at the next wake-up */
		}
		e->need_init = false;
		e->inflight++;
		p->inflight++;
		p->stats.inits_started++;
	}
}

static uint64_t hash_stat(const char *name, const struct stat *st)
{
	uint64_t h = fnv1a64_update(FNV1A64_OFFSET_BASIS, name, strlen(name) + 1);
	h = fnv1a64_update(h, &st->st_dev, sizeof(st->st_dev));
	h = fnv1a64_update(h, &st->st_ino, sizeof(st->st_ino));
	h = fnv1a64_update(h, &st->st_mode, sizeof(st->st_mode));
	h = fnv1a64_update(h, &st->st_size, sizeof(st->st_size));
	h = fnv1a64_update(h, &st->st_mtim, sizeof(st->st_mtim));
	return fnv1a64_update(h, &st->st_ctim, sizeof(st->st_ctim));
}

typedef enum Kind {
	KIND_GONE,    /* no such folder, or not a directory, or no file in it yet */
	KIND_BROKEN,  /* cannot be a driver: bad name, no executable */
	KIND_DRIVER,  /* worth an init */
	KIND_UNKNOWN, /* could not look: keep what we have */
} Kind;

typedef struct Look {
	Kind kind;
	char *name, *exe, *error;
	uint64_t stamp;
} Look;

static void look_done(Look *l)
{
	free(l->name);
	free(l->exe);
	free(l->error);
}

/* Looks at one top-level entry; no lock. */
static void look_at(FlexProber *p, int dfd, const char *folder, Look *ret)
{
	_cleanup_free_ char *exe_name = NULL, *name_error = NULL;
	struct stat st;
	Look l = {.kind = KIND_UNKNOWN};

	int r = flex_driver_folder_parse(folder, &l.name, &exe_name, &name_error);
	if (fstatat(dfd, folder, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		l.kind = errno == ENOENT ? KIND_GONE : KIND_UNKNOWN;
		*ret = l;
		return;
	}
	if (!S_ISDIR(st.st_mode)) {
		l.kind = KIND_GONE; /* files at the top level are not drivers */
		*ret = l;
		return;
	}
	int fd = openat(dfd, folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		l.kind = errno == ENOENT || errno == ENOTDIR ? KIND_GONE : KIND_UNKNOWN;
		*ret = l;
		return;
	}
	_cleanup_closedir_ DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		*ret = l;
		return;
	}
	/* Order-independent, so readdir order does not matter. */
	uint64_t stamp = 0;
	size_t n_files = 0;
	struct dirent *de;
	while ((errno = 0, de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		stamp ^= hash_stat(de->d_name, &st);
		n_files++;
	}
	if (errno > 0) {
		*ret = l;
		return;
	}
	if (n_files == 0) {
		/* An installer's fresh folder, or one emptied: no driver (yet). */
		l.kind = KIND_GONE;
		*ret = l;
		return;
	}
	l.stamp = stamp ^ n_files;
	if (r < 0) {
		l.kind = KIND_BROKEN;
		l.error = TAKE_PTR(name_error);
		*ret = l;
		return;
	}
	l.exe = xasprintf("%s/%s/%s", p->dir, folder, exe_name);
	if (fstatat(dirfd(d), exe_name, &st, 0) < 0) {
		l.kind = KIND_BROKEN;
		l.error = xasprintf("no executable \"%s\" in the driver folder %s/%s", exe_name,
				    p->dir, folder);
	} else if (!S_ISREG(st.st_mode) || faccessat(dirfd(d), exe_name, X_OK, 0) < 0) {
		l.kind = KIND_BROKEN;
		l.error = xasprintf("%s is not an executable file", l.exe);
	} else {
		l.kind = KIND_DRIVER;
		/* The target of a symlinked executable counts as one of the files. */
		l.stamp ^= hash_stat("", &st);
	}
	*ret = l;
}

/* Probes one folder. forced: an event named it, so its files changed even when the stamp
 * (coarse timestamps) cannot tell. Returns false when it could not look (retry later). */
static bool probe_folder(FlexProber *p, int dfd, const char *folder, bool forced)
{
	Look l;
	FlexDriver *changed = NULL;

	look_at(p, dfd, folder, &l);
	if (l.kind == KIND_UNKNOWN) {
		log_debug("flex prober: cannot look at %s/%s, keeping what is known", p->dir,
			  folder);
		look_done(&l);
		return false;
	}

	pthread_mutex_lock(&p->lock);
	Entry *e = l.kind == KIND_GONE ? entry_find(p, folder) : entry_get(p, folder, l.name);
	if (l.kind == KIND_GONE) {
		if (e) {
			e->want++; /* an init still running for it must not publish */
			e->need_init = false;
			e->has_stamp = false;
			if (flex_registry_remove(p->registry, e->name)) {
				p->stats.removals++;
				(void)flex_registry_get(p->registry, e->name, &changed);
			}
		}
	} else if (forced || !e->has_stamp || e->stamp != l.stamp) {
		e->has_stamp = true;
		e->stamp = l.stamp;
		e->want++;
		if (l.kind == KIND_BROKEN) {
			e->need_init = false;
			FlexDriver *d = flex_driver_new(e->name, folder, l.exe, FLEX_DRIVER_FAILED,
							NULL, l.error);
			changed = flex_driver_ref(d);
			flex_registry_publish(p->registry, d);
		} else {
			e->need_init = true;
			free(e->exe);
			e->exe = TAKE_PTR(l.exe);
		}
	}
	pthread_mutex_unlock(&p->lock);
	notify(p, changed);
	look_done(&l);
	return true;
}

/* One probe pass over the names in *ch (everything when ch->rescan). Leaves in *ch what must be
 * retried. Returns 0, or a negative errno when the plugin dir could not be read (cache kept). */
static int run_pass(FlexProber *p, WatchChanges *ch)
{
	WatchChanges todo = {}, retry = {};
	_cleanup_close_ int dfd = -EBADF;

	pthread_mutex_lock(&p->lock);
	p->stats.passes++;
	FlexProberStats s = p->stats;
	pthread_mutex_unlock(&p->lock);
	/* One line per pass: how the rate limit behaves is visible in the log (bench/). */
	log_debug("flex prober: pass %" PRIu64 ": %zu changed name(s)%s; %" PRIu64
		  " events read, %" PRIu64 " inits started so far",
		  s.passes, ch->n, ch->rescan ? " and a rescan" : "", s.events, s.inits_started);

	dfd = open(p->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		goto scan_failed;
	if (ch->rescan) {
		int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			goto scan_failed;
		_cleanup_closedir_ DIR *d = fdopendir(fd);
		if (!d) {
			close(fd);
			goto scan_failed;
		}
		struct dirent *de;
		while ((errno = 0, de = readdir(d)))
			if (de->d_name[0] != '.')
				watch_changes_add(&todo, de->d_name, WATCH_OP_UPDATE);
		if (errno > 0) {
			watch_changes_clear(&todo);
			goto scan_failed;
		}
		/* Folders known before and absent now are gone. */
		pthread_mutex_lock(&p->lock);
		for (size_t i = 0; i < p->n_entries; i++)
			if (!watch_changes_find(&todo, p->entries[i].folder))
				watch_changes_add(&todo, p->entries[i].folder, WATCH_OP_REMOVE);
		pthread_mutex_unlock(&p->lock);
	}
	for (size_t i = 0; i < ch->n; i++)
		if (!watch_changes_find(&todo, ch->items[i].name))
			watch_changes_add(&todo, ch->items[i].name, ch->items[i].op);

	for (size_t i = 0; i < todo.n; i++) {
		const char *folder = todo.items[i].name;
		bool forced = watch_changes_find(ch, folder) != NULL;
		if (!probe_folder(p, dfd, folder, forced))
			watch_changes_add(&retry, folder, WATCH_OP_UPDATE);
	}
	watch_changes_clear(&todo);
	watch_changes_clear(ch);
	*ch = retry;
	return 0;

scan_failed : {
	int r = negative_errno();
	log_debug_errno(r, "flex prober: cannot read %s, keeping the drivers known: %m", p->dir);
	pthread_mutex_lock(&p->lock);
	p->stats.scan_errors++;
	pthread_mutex_unlock(&p->lock);
	return r;
}
}

static void *prober_thread(void *arg)
{
	FlexProber *p = arg;
	WatchChanges ch = {.rescan = true}; /* the first pass looks at everything */
	usec_t first_pending = now_usec(CLOCK_MONOTONIC), last_pass = 0;
	bool passed = false;

	for (;;) {
		bool has = ch.n > 0 || ch.rescan;
		bool healthy = dir_watch_healthy(p->watch);
		usec_t due = USEC_INFINITY;
		if (has) {
			/* Trailing edge: a change arriving during the wait is in the next pass. */
			due = first_pending + p->cfg.settle_delay;
			if (passed)
				due = MAX(due, last_pass + p->cfg.min_interval);
		}
		usec_t now = now_usec(CLOCK_MONOTONIC);

		pthread_mutex_lock(&p->lock);
		if (p->stopping) {
			pthread_mutex_unlock(&p->lock);
			break;
		}
		p->pending = has;
		p->healthy = healthy;
		p->busy = false;
		dispatch_locked(p);
		pthread_cond_broadcast(&p->cond);
		pthread_mutex_unlock(&p->lock);

		usec_t wake_at = healthy ? due : MIN(due, now + RECREATE_RETRY);
		struct pollfd pfd[2] = {
			{.fd = dir_watch_fd(p->watch), .events = POLLIN},
			{.fd = p->wake_fd, .events = POLLIN},
		};
		if (poll(pfd, 2, poll_timeout_ms(now, wake_at)) < 0 && errno != EINTR) {
			log_debug_errno(negative_errno(), "flex prober: poll: %m");
			continue;
		}
		if (pfd[1].revents & POLLIN) {
			uint64_t v;
			if (read(p->wake_fd, &v, sizeof(v)) < 0) {
				/* nothing to read after all */
			}
		}

		pthread_mutex_lock(&p->lock);
		p->busy = true;
		pthread_mutex_unlock(&p->lock);

		if ((pfd[0].revents & POLLIN) || !healthy) {
			int r = dir_watch_drain(p->watch, &ch);
			if (r > 0) {
				pthread_mutex_lock(&p->lock);
				p->stats.events += (uint64_t)r;
				pthread_mutex_unlock(&p->lock);
			}
			if (!has && (ch.n > 0 || ch.rescan))
				first_pending = now_usec(CLOCK_MONOTONIC);
		}
		if (ch.n == 0 && !ch.rescan)
			continue;
		due = first_pending + p->cfg.settle_delay;
		if (passed)
			due = MAX(due, last_pass + p->cfg.min_interval);
		now = now_usec(CLOCK_MONOTONIC);
		if (now < due)
			continue;
		last_pass = now;
		passed = true;
		if (run_pass(p, &ch) < 0 || ch.n > 0)
			first_pending = now; /* retried after the interval */
	}
	watch_changes_clear(&ch);
	return NULL;
}

int flex_prober_new(const FlexProberConfig *cfg, FlexRegistry *registry, FlexProber **ret)
{
	_cleanup_(flex_prober_freep) FlexProber *p = xnew0(FlexProber, 1);
	pthread_condattr_t ca;

	p->wake_fd = -EBADF;
	pthread_mutex_init(&p->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cond, &ca);
	pthread_condattr_destroy(&ca);

	p->cfg = *cfg;
	p->dir = flex_path_absolute(cfg->dir ?: FLEX_DEFAULT_PLUGIN_DIR);
	if (!p->dir)
		return negative_errno();
	p->cfg.dir = p->dir;
	if (p->cfg.min_interval == 0)
		p->cfg.min_interval = DEFAULT_INTERVAL;
	if (p->cfg.settle_delay == 0)
		p->cfg.settle_delay = DEFAULT_SETTLE;
	if (p->cfg.max_parallel_inits == 0)
		p->cfg.max_parallel_inits = DEFAULT_MAX_INITS;
	p->registry = registry;

	p->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (p->wake_fd < 0)
		return negative_errno();
	int r = dir_watch_new(p->dir, &p->watch);
	if (r < 0)
		return log_debug_errno(r, "flex prober: cannot watch %s: %m", p->dir);
	p->healthy = true;
	p->pending = true; /* the first pass has not run */
	*ret = TAKE_PTR(p);
	return 0;
}

int flex_prober_start(FlexProber *p)
{
	if (p->started)
		return -EALREADY;
	int r = -pthread_create(&p->thread, NULL, prober_thread, p);
	if (r < 0)
		return r;
	p->started = true;
	return 0;
}

FlexProber *flex_prober_free(FlexProber *p)
{
	if (!p)
		return NULL;
	pthread_mutex_lock(&p->lock);
	p->stopping = true;
	pthread_mutex_unlock(&p->lock);
	if (p->started) {
		wake(p);
		pthread_join(p->thread, NULL);
	}
	pthread_mutex_lock(&p->lock);
	while (p->inflight > 0)
		pthread_cond_wait(&p->cond, &p->lock);
	pthread_mutex_unlock(&p->lock);

	for (size_t i = 0; i < p->n_entries; i++) {
		free(p->entries[i].folder);
		free(p->entries[i].name);
		free(p->entries[i].exe);
	}
	free(p->entries);
	dir_watch_free(p->watch);
	closep(&p->wake_fd);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p->dir);
	free(p);
	return NULL;
}

const char *flex_prober_dir(const FlexProber *p)
{
	return p->dir;
}

void flex_prober_stats(FlexProber *p, FlexProberStats *ret)
{
	pthread_mutex_lock(&p->lock);
	*ret = p->stats;
	pthread_mutex_unlock(&p->lock);
}

/* Lock held. */
static bool settled_locked(FlexProber *p)
{
	if (p->busy || p->pending || !p->healthy || p->inflight > 0)
		return false;
	for (size_t i = 0; i < p->n_entries; i++)
		if (p->entries[i].need_init)
			return false;
	/* An event queued but not read yet: the thread sets busy before reading, under this
	 * lock, so it is seen either here or as busy. */
	struct pollfd pfd = {.fd = dir_watch_fd(p->watch), .events = POLLIN};
	return poll(&pfd, 1, 0) == 0;
}

int flex_prober_wait_settled(FlexProber *p, usec_t timeout)
{
	usec_t deadline =
		timeout == USEC_INFINITY ? USEC_INFINITY : now_usec(CLOCK_MONOTONIC) + timeout;
	int r = 0;

	pthread_mutex_lock(&p->lock);
	while (!settled_locked(p)) {
		usec_t now = now_usec(CLOCK_MONOTONIC);
		if (now >= deadline) {
			r = -ETIMEDOUT;
			break;
		}
		/* Wake up now and then: a queued event signals nobody. */
		usec_t until = MIN(deadline, now + 10 * USEC_PER_MSEC);
		struct timespec ts = {.tv_sec = (time_t)(until / USEC_PER_SEC),
				      .tv_nsec = (long)(until % USEC_PER_SEC) * 1000};
		pthread_cond_timedwait(&p->cond, &p->lock, &ts);
	}
	pthread_mutex_unlock(&p->lock);
	return r;
}
