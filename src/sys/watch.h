/* SPDX-License-Identifier: Apache-2.0 */
/* inotify on a plugin directory and each of its direct subfolders (one level of driver folders).
 * No thread of its own: the owner polls dir_watch_fd() and calls dir_watch_drain(), which turns
 * the events into the set of top-level entry names that changed. The file system stays the
 * truth: the owner looks at each named entry to learn what it now is. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "macro.h"

typedef enum WatchOp {
	WATCH_OP_UPDATE, /* created, written, renamed in, attributes changed */
	WATCH_OP_REMOVE, /* deleted or renamed away */
} WatchOp;

typedef struct WatchChange {
	char *name; /* top-level entry name, never starting with '.' */
	WatchOp op; /* the last event's op: a hint, the file system decides */
} WatchChange;

/* A set of changed top-level names, in first-seen order. */
typedef struct WatchChanges {
	WatchChange *items;
	size_t n, cap;
	bool rescan; /* events were lost or the directory was re-created: anything may have changed
		      */
} WatchChanges;

/* Adds name (copied) or updates its op when already present. */
void watch_changes_add(WatchChanges *c, const char *name, WatchOp op);
/* The entry for name, or NULL. */
const WatchChange *watch_changes_find(const WatchChanges *c, const char *name);
/* Moves every entry of from into into (later ops win) and empties from. */
void watch_changes_merge(WatchChanges *into, WatchChanges *from);
/* Empties the set; it stays usable. */
void watch_changes_clear(WatchChanges *c);

typedef struct DirWatch DirWatch;

/* Creates path (and its parents, mode 0755) when missing, then watches it and each subfolder.
 * Returns 0 and a watcher, or a negative errno (path cannot be created or watched). */
int dir_watch_new(const char *path, DirWatch **ret);
DirWatch *dir_watch_free(DirWatch *w);
DEFINE_TRIVIAL_CLEANUP_FUNC(DirWatch *, dir_watch_free);

/* The inotify fd to poll() for POLLIN; owned by the watcher. */
int dir_watch_fd(const DirWatch *w);
/* The watched path as given. */
const char *dir_watch_path(const DirWatch *w);
/* False after the directory vanished and could not be re-created yet: call dir_watch_drain()
 * again later (e.g. once a second), it retries. */
bool dir_watch_healthy(const DirWatch *w);

/* Reads the pending events without blocking and adds the changed top-level names to *changes
 * (names starting with '.' ignored; events inside a subfolder count for the subfolder; a
 * rename away is a removal). Re-creates and re-watches the directory when it was deleted or
 * moved, and after a lost event queue, setting changes->rescan (the names are then not listed:
 * the owner compares the whole directory). Returns the number of events read (bounded per call, so
 * a storm cannot starve the caller; poll again), or a negative errno when the directory cannot be
 * re-created (the changes gathered so far are kept). */
int dir_watch_drain(DirWatch *w, WatchChanges *changes);
