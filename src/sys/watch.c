/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include "alloc.h"
#include "log.h"
#include "path-util.h"
#include "watch.h"

/* IN_MODIFY is left out on purpose: a file is complete at IN_CLOSE_WRITE, and a writer's
 * every write() would otherwise be one more event to read. */
#define ROOT_MASK                                                                           \
	(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_CLOSE_WRITE | IN_ATTRIB | \
	 IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK)
#define SUB_MASK (ROOT_MASK | IN_DONT_FOLLOW)
/* Buffers read per drain call: bounds the time one call takes under a storm. */
#define MAX_READS_PER_DRAIN 64

typedef struct SubWatch {
	int wd;
	char *name;
} SubWatch;

struct DirWatch {
	char *path;
	int fd;
	int root_wd; /* -1 while the directory is gone */
	SubWatch *subs;
	size_t n_subs, cap_subs;
};

void watch_changes_add(WatchChanges *c, const char *name, WatchOp op)
{
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->items[i].name, name) == 0) {
			c->items[i].op = op;
			return;
		}
	c->items = xgrow(c->items, &c->cap, c->n + 1, sizeof(*c->items));
	c->items[c->n++] = (WatchChange){.name = xstrdup(name), .op = op};
}

const WatchChange *watch_changes_find(const WatchChanges *c, const char *name)
{
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->items[i].name, name) == 0)
			return &c->items[i];
	return NULL;
}

void watch_changes_merge(WatchChanges *into, WatchChanges *from)
{
	for (size_t i = 0; i < from->n; i++)
		watch_changes_add(into, from->items[i].name, from->items[i].op);
	into->rescan = into->rescan || from->rescan;
	watch_changes_clear(from);
}

void watch_changes_clear(WatchChanges *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->items[i].name);
	free(c->items);
	*c = (WatchChanges){};
}

static SubWatch *sub_by_wd(DirWatch *w, int wd)
{
	for (size_t i = 0; i < w->n_subs; i++)
		if (w->subs[i].wd == wd)
			return &w->subs[i];
	return NULL;
}

static void sub_drop(DirWatch *w, SubWatch *s, bool rm_watch)
{
	if (rm_watch)
		(void)inotify_rm_watch(w->fd, s->wd);
	free(s->name);
	*s = w->subs[--w->n_subs];
}

static void sub_add(DirWatch *w, const char *name)
{
	char p[PATH_MAX];

	if ((size_t)snprintf(p, sizeof(p), "%s/%s", w->path, name) >= sizeof(p))
		return;
	int wd = inotify_add_watch(w->fd, p, SUB_MASK);
	if (wd < 0) {
		/* Gone again or not a directory: the change is reported anyway. */
		log_debug_errno(negative_errno(), "watch %s: cannot watch %s: %m", w->path, name);
		return;
	}
	SubWatch *s = sub_by_wd(w, wd);
	if (s) {
		/* Same inode seen under a new name (after lost events). */
		free(s->name);
		s->name = xstrdup(name);
		return;
	}
	w->subs = xgrow(w->subs, &w->cap_subs, w->n_subs + 1, sizeof(*w->subs));
	w->subs[w->n_subs++] = (SubWatch){.wd = wd, .name = xstrdup(name)};
}

static void sub_drop_name(DirWatch *w, const char *name)
{
	for (size_t i = 0; i < w->n_subs; i++)
		if (strcmp(w->subs[i].name, name) == 0) {
			sub_drop(w, &w->subs[i], true);
			return;
		}
}

static void drop_all(DirWatch *w)
{
	while (w->n_subs > 0)
		sub_drop(w, &w->subs[w->n_subs - 1], true);
	if (w->root_wd >= 0)
		(void)inotify_rm_watch(w->fd, w->root_wd);
	w->root_wd = -1;
}

/* Watches every subfolder present now; used at start, after a lost queue and after the
 * directory came back. The names are not reported one by one: changes->rescan tells the owner
 * to compare everything, so unchanged entries can be recognised as such. */
static int scan_root(DirWatch *w, WatchChanges *changes)
{
	_cleanup_closedir_ DIR *d = opendir(w->path);
	struct dirent *de;

	if (!d)
		return negative_errno();
	while ((errno = 0, de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		bool is_dir = de->d_type == DT_DIR;
		if (de->d_type == DT_UNKNOWN) {
			struct stat st;
			is_dir = fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
				 S_ISDIR(st.st_mode);
		}
		if (is_dir)
			sub_add(w, de->d_name);
	}
	if (errno > 0)
		return negative_errno();
	if (changes)
		changes->rescan = true;
	return 0;
}

static int watch_root(DirWatch *w, WatchChanges *changes)
{
	int r = mkdir_p(w->path, 0755);
	if (r < 0)
		return r;
	int wd = inotify_add_watch(w->fd, w->path, ROOT_MASK);
	if (wd < 0)
		return negative_errno();
	w->root_wd = wd;
	r = scan_root(w, changes);
	if (r < 0) {
		drop_all(w);
		return r;
	}
	return 0;
}

int dir_watch_new(const char *path, DirWatch **ret)
{
	DirWatch *w = xnew0(DirWatch, 1);
	int r;

	w->path = xstrdup(path);
	w->root_wd = -1;
	w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (w->fd < 0) {
		r = negative_errno();
		dir_watch_free(w);
		return r;
	}
	r = watch_root(w, NULL);
	if (r < 0) {
		dir_watch_free(w);
		return r;
	}
	*ret = w;
	return 0;
}

DirWatch *dir_watch_free(DirWatch *w)
{
	if (!w)
		return NULL;
	for (size_t i = 0; i < w->n_subs; i++)
		free(w->subs[i].name);
	free(w->subs);
	closep(&w->fd);
	free(w->path);
	free(w);
	return NULL;
}

int dir_watch_fd(const DirWatch *w)
{
	return w->fd;
}

const char *dir_watch_path(const DirWatch *w)
{
	return w->path;
}

bool dir_watch_healthy(const DirWatch *w)
{
	return w->root_wd >= 0;
}

static void handle_root_event(DirWatch *w, const struct inotify_event *ev, WatchChanges *changes)
{
	if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT)) {
		/* The watch follows the inode: after a move it would watch the wrong place. */
		log_debug("watch %s: directory deleted or moved, re-creating", w->path);
		drop_all(w);
		changes->rescan = true;
		return;
	}
	if (ev->len == 0 || ev->name[0] == '.')
		return;
	bool gone = ev->mask & (IN_DELETE | IN_MOVED_FROM);
	if (ev->mask & IN_ISDIR) {
		if (ev->mask & (IN_CREATE | IN_MOVED_TO))
			sub_add(w, ev->name);
		else if (gone)
			/* A renamed-away folder keeps its watch: drop it so its later events are
			 * not taken for the old name. */
			sub_drop_name(w, ev->name);
	}
	watch_changes_add(changes, ev->name, gone ? WATCH_OP_REMOVE : WATCH_OP_UPDATE);
}

static void handle_sub_event(DirWatch *w, SubWatch *s, const struct inotify_event *ev,
			     WatchChanges *changes)
{
	if (ev->mask & IN_IGNORED) {
		/* The folder itself is gone: the root's event says so, the check tells what is
		 * left. */
		watch_changes_add(changes, s->name, WATCH_OP_UPDATE);
		sub_drop(w, s, false);
		return;
	}
	/* Installers write ".name.tmp" files and rename them into place. */
	if (ev->len > 0 && ev->name[0] == '.')
		return;
	watch_changes_add(changes, s->name, WATCH_OP_UPDATE);
}

int dir_watch_drain(DirWatch *w, WatchChanges *changes)
{
	char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	int n_events = 0;

	for (int reads = 0; w->root_wd >= 0 && reads < MAX_READS_PER_DRAIN; reads++) {
		ssize_t n = read(w->fd, buf, sizeof(buf));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			return negative_errno();
		}
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;
			p += sizeof(*ev) + ev->len;
			n_events++;
			if (ev->mask & IN_Q_OVERFLOW) {
				log_debug("watch %s: event queue overflowed, rescanning", w->path);
				(void)scan_root(w, changes);
				changes->rescan = true;
				continue;
			}
			if (w->root_wd >= 0 && ev->wd == w->root_wd) {
				handle_root_event(w, ev, changes);
				continue;
			}
			SubWatch *s = sub_by_wd(w, ev->wd);
			if (s)
				handle_sub_event(w, s, ev, changes);
		}
	}
	if (w->root_wd < 0) {
		/* Events still queued for the old watches would carry stale descriptors. */
		while (read(w->fd, buf, sizeof(buf)) > 0)
			;
		int r = watch_root(w, changes);
		if (r < 0)
			return log_debug_errno(r, "watch %s: cannot re-create: %m", w->path);
	}
	return n_events;
}
