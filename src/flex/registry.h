/* SPDX-License-Identifier: Apache-2.0 */
/* The Flexvolume drivers known to the host, keyed by driver name ("vendor/driver"). Each entry
 * is an immutable, refcounted snapshot: a reload publishes a new snapshot and never frees one a
 * caller still holds. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "call.h"
#include "macro.h"
#include "time-util.h"

typedef enum FlexDriverState {
	FLEX_DRIVER_LOADED,  /* init succeeded: capabilities valid, usable */
	FLEX_DRIVER_FAILED,  /* init failed, bad name, no executable: error says which; not used */
	FLEX_DRIVER_REMOVED, /* its folder was deleted or renamed away */
} FlexDriverState;

/* One published version of a driver. Every field but n_ref and unsupported is read-only after
 * flex_driver_new(); those two are atomics, so a snapshot needs no lock. */
typedef struct FlexDriver {
	char *name;   /* "vendor/driver" */
	char *folder; /* "vendor~driver" */
	char *exe;    /* absolute path of the executable (may not exist for FAILED/REMOVED) */
	FlexDriverState state;
	FlexCapabilities capabilities; /* LOADED; defaults otherwise */
	char *error;		       /* FAILED: the message for the user; NULL otherwise */
	uint64_t generation;	       /* set by the registry at publication, increasing */
	usec_t published;	       /* CLOCK_REALTIME of publication */
	atomic_uint n_ref;
	atomic_uint_least32_t unsupported; /* bit (1 << FlexCommand): answered "Not supported" */
} FlexDriver;

const char *flex_driver_state_to_string(FlexDriverState s);

/* Checks a driver name as Kubernetes does (a qualified name: optional DNS-subdomain prefix, one
 * '/', a name part of [A-Za-z0-9_.-] starting and ending alphanumeric, at most 63). Returns 0,
 * or -EINVAL and *ret_error (may be NULL) saying what is wrong. */
int flex_driver_name_validate(const char *name, char **ret_error);

/* Maps a plugin-dir folder to its driver name (each '~' -> '/') and executable name (the part
 * after the last '~'). Returns 0, or -EINVAL for a name that is not valid, with *ret_error;
 * *ret_name is written in both cases (the name the error is reported under). */
int flex_driver_folder_parse(const char *folder, char **ret_name, char **ret_exe_name,
			     char **ret_error);

/* The folder of a driver name ('/' -> '~'). */
char *flex_driver_name_to_folder(const char *name);

/* A new snapshot with one reference; strings are copied, caps NULL means defaults, error is
 * used for FAILED only. */
FlexDriver *flex_driver_new(const char *name, const char *folder, const char *exe,
			    FlexDriverState state, const FlexCapabilities *caps, const char *error);
FlexDriver *flex_driver_ref(FlexDriver *d);
/* Drops a reference; frees the snapshot with the last one. Returns NULL. */
FlexDriver *flex_driver_unref(FlexDriver *d);
DEFINE_TRIVIAL_CLEANUP_FUNC(FlexDriver *, flex_driver_unref);
#define _cleanup_flex_driver_ _cleanup_(flex_driver_unrefp)

/* Whether cmd answered "Not supported" on this snapshot (a reload starts afresh). */
bool flex_driver_is_unsupported(const FlexDriver *d, FlexCommand cmd);

/* flex_call() on a LOADED snapshot, remembering "Not supported": once a command answered it,
 * later calls return -EOPNOTSUPP without running the driver, like Kubernetes. Returns
 * -ENOEXEC (with *ret_error) for a snapshot that is not LOADED. Blocks for the call. */
int flex_driver_call(FlexDriver *d, const FlexCallConfig *cfg, FlexCommand cmd,
		     const FlexCallArgs *args, FlexReply *ret, char **ret_error);

typedef struct FlexRegistry FlexRegistry;

FlexRegistry *flex_registry_new(void);
/* Drops the registry's references; snapshots held elsewhere stay valid. Returns NULL. */
FlexRegistry *flex_registry_free(FlexRegistry *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(FlexRegistry *, flex_registry_free);

/* Publishes d under d->name, replacing the entry in place; takes over the caller's reference
 * and stamps d->generation and d->published. */
void flex_registry_publish(FlexRegistry *r, FlexDriver *d);

/* Replaces name's entry by a REMOVED snapshot. Returns true when there was a live entry. */
bool flex_registry_remove(FlexRegistry *r, const char *name);

/* A new reference to name's current snapshot in any state, or -ENOENT when never seen. */
int flex_registry_get(FlexRegistry *r, const char *name, FlexDriver **ret);

/* A new reference to name's snapshot when LOADED. Otherwise -ENOENT (unknown or removed) or
 * -ENOEXEC (FAILED), with *ret_error (may be NULL) saying why, naming the driver. */
int flex_registry_get_loaded(FlexRegistry *r, const char *name, FlexDriver **ret, char **ret_error);

/* References to every snapshot, sorted by name; free with flex_driver_list_free(). */
void flex_registry_list(FlexRegistry *r, FlexDriver ***ret, size_t *ret_n);
void flex_driver_list_free(FlexDriver **list, size_t n);

/* The generation of the last publication (0: none): a cheap "did anything change". */
uint64_t flex_registry_generation(FlexRegistry *r);
