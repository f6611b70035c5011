/* SPDX-License-Identifier: Apache-2.0 */
/* An in-memory backend for the CSI handlers' unit tests: every operation of backend.h, on
 * volumes, snapshots, groups, attachments and node records kept in memory (no disk, no root),
 * with what backend.h promises (-EEXIST with the existing object, deletes of unknown ids
 * succeed, attach is idempotent, list tokens it never gave are -EALREADY...), so that a test
 * sees what the CSI layer adds to it.
 *
 * Knobs a test sets: an operation fails with an errno and a message (fake_fail), the next call
 * of an operation is held until the test lets it go (fake_hold: a second thread then meets the
 * in-flight key), an operation is missing (fake_drop: UNIMPLEMENTED). What it records: the
 * number of calls of each operation, and the last request of each, flattened into a Strmap a
 * test reads with fake_last() ("size", "access.mode", "params.iops", "context.KEY",
 * "requisite[0].KEY", ...; numbers in decimal, booleans "true"/"false", lists joined with
 * ','; a NULL pointer leaves its key out).
 *
 * A fake made with a claim prefix claims the volumes whose id starts with it, or whose volume
 * context names the fake (FAKE_CONTEXT_BACKEND), as the Flexvolume backend claims its own: a
 * test puts it second in the driver's backends to see which one a handler picks. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend.h"

#define FAKE_MIB (1024ULL * 1024ULL)
#define FAKE_GIB (1024ULL * FAKE_MIB)

/* The volume context key naming the fake that serves a volume. */
#define FAKE_CONTEXT_BACKEND "fake.volplug.io/backend"

/* The operations: X(ENUM_NAME, field of BackendOps). */
#define FAKE_OPS(X)                         \
	X(PROBE, probe)                     \
	X(CHECK_ACCESS, check_access)       \
	X(PARSE_PARAMS, parse_params)       \
	X(CREATE_VOLUME, create_volume)     \
	X(DELETE_VOLUME, delete_volume)     \
	X(GET_VOLUME, get_volume)           \
	X(LIST_VOLUMES, list_volumes)       \
	X(GET_CAPACITY, get_capacity)       \
	X(ATTACH, attach)                   \
	X(DETACH, detach)                   \
	X(CHANGE_VOLUME, change_volume)     \
	X(CREATE_SNAPSHOT, create_snapshot) \
	X(DELETE_SNAPSHOT, delete_snapshot) \
	X(GET_SNAPSHOT, get_snapshot)       \
	X(LIST_SNAPSHOTS, list_snapshots)   \
	X(CREATE_GROUP, create_group)       \
	X(DELETE_GROUP, delete_group)       \
	X(GET_GROUP, get_group)             \
	X(STAGE, stage)                     \
	X(UNSTAGE, unstage)                 \
	X(PUBLISH, publish)                 \
	X(UNPUBLISH, unpublish)             \
	X(NODE_EXPAND, node_expand)         \
	X(NODE_STATS, node_stats)           \
	X(NODE_INFO, node_info)             \
	X(STATUS, status)

#define FAKE_OP_ENUM(NAME, field) FAKE_##NAME,
typedef enum FakeOp {
	FAKE_OPS(FAKE_OP_ENUM) _FAKE_OP_MAX,
} FakeOp;
#undef FAKE_OP_ENUM

/* One attachment of a volume to a node (ControllerPublishVolume). */
typedef struct FakeAttachment {
	char *node;
	bool read_only;
	Strmap publish_context;
} FakeAttachment;

/* A volume as the fake keeps it: what get_volume answers, and its attachments. */
typedef struct FakeVolume {
	BackendVolume v;
	FakeAttachment *attachments;
	size_t n_attachments;
} FakeVolume;

/* A staging or publish record of the node service. */
typedef struct FakeMount {
	char *volume_id;
	char *path;
	bool staged; /* a staging path, else a target path */
	bool block;
	bool read_only;
} FakeMount;

typedef struct FakeBackend {
	Backend base; /* first: the CSI layer sees a Backend */
	BackendOps ops;
	char *name;
	char *claim_prefix; /* NULL: claims nothing (a default backend) */

	/* Knobs, set by the test before the calls. */
	uint64_t capacity;	    /* bytes the volumes may take in all */
	uint64_t max_volume_size;   /* GetCapacity's answer; 0: what is available */
	uint32_t max_per_node;	    /* attachments a node takes; 0: no limit */
	const char *zone;	    /* where its volumes are (BACKEND_TOPOLOGY_ZONE) */
	char **nodes;		    /* the node ids attach knows (strv) */
	BlockfsStats stats;	    /* node_stats of a mounted filesystem */
	const char *prepare_dir;    /* publish calls r->prepare on it (a file: it fails) */
	const char *prepare_policy; /* the policy publish hands to r->prepare */
	size_t page_default;	    /* list entries per page when max_entries is 0 */

	/* State; every field below is guarded by lock. */
	pthread_mutex_t lock;
	pthread_cond_t changed; /* a held call arrived or was let go */
	FakeVolume **volumes;
	size_t n_volumes;
	BackendSnapshot **snapshots;
	size_t n_snapshots;
	BackendGroup **groups; /* members are copies: snapshots has them too */
	size_t n_groups;
	FakeMount *mounts;
	size_t n_mounts;
	unsigned serial;  /* ids and device names */
	int64_t clock_ns; /* creation times: fixed, one second apart */
	unsigned calls[_FAKE_OP_MAX];
	Strmap last[_FAKE_OP_MAX];
	int fail[_FAKE_OP_MAX];
	char *fail_message[_FAKE_OP_MAX];
	bool hold[_FAKE_OP_MAX]; /* the next call waits */
	bool held[_FAKE_OP_MAX]; /* a call is waiting */
} FakeBackend;

/* A new fake named name ("fake": ids "fake-vol-1", "fake-snap-1"), claiming the ids that start
 * with claim_prefix (NULL: none, and no claims operation), with 100 GiB of capacity, zone
 * "zone-a", nodes node-1 to node-3. Never fails. Free with its ops->free or backends_free(). */
FakeBackend *fake_backend_new(const char *name, const char *claim_prefix);

/* Each later call of op fails with err (negative) and a copy of message; err 0 ends it. */
void fake_fail(FakeBackend *f, FakeOp op, int err, const char *message);
/* Removes op from the table: the CSI layer answers UNIMPLEMENTED. */
void fake_drop(FakeBackend *f, FakeOp op);
/* The next call of op waits, once counted and recorded, until fake_release(). */
void fake_hold(FakeBackend *f, FakeOp op);
/* Blocks until a call of op is held. */
void fake_wait_held(FakeBackend *f, FakeOp op);
/* Lets the held call of op go on. */
void fake_release(FakeBackend *f, FakeOp op);

/* Calls of op so far. */
unsigned fake_calls(FakeBackend *f, FakeOp op);
/* A field of op's last request (see above), or NULL when it had none; valid until the next
 * call of op. */
const char *fake_last(FakeBackend *f, FakeOp op, const char *key);
/* Forgets the calls counted and the requests recorded. */
void fake_forget_calls(FakeBackend *f);

/* Seeds a volume, as if made earlier: id, name, size, no source, reachable in the fake's zone;
 * the returned object stays the fake's (the test may set its fields before the calls). */
FakeVolume *fake_add_volume(FakeBackend *f, const char *id, const char *name, uint64_t size);
/* Seeds a ready snapshot of source. */
BackendSnapshot *fake_add_snapshot(FakeBackend *f, const char *id, const char *name,
				   const char *source, uint64_t size);
/* Removes a snapshot as no rule of the fake would (a group's member lost behind its back). */
void fake_lose_snapshot(FakeBackend *f, const char *id);
/* The volume of that id, or NULL. */
FakeVolume *fake_volume(FakeBackend *f, const char *id);
/* The node record (stage: staged) of a volume at path, or NULL. */
FakeMount *fake_mount(FakeBackend *f, const char *volume_id, const char *path, bool staged);
