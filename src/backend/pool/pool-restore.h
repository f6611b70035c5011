/* SPDX-License-Identifier: Apache-2.0 */
/* Restores of store snapshots into new volumes, detached from the call (pool-restore.c). */
#pragma once

#include <stdbool.h>

#include "pool.h"
#include "time-util.h"

typedef struct Store Store;

/* Restores running at once; more wait for a slot. Each fetches the store's `parallel` chunks at
 * once. */
#define POOL_RESTORES_MAX 4
/* How long a restore may run, whatever the call's deadline. */
#define POOL_RESTORE_TIMEOUT (12 * 3600 * USEC_PER_SEC)
/* How long a restore that failed after its call gave up is remembered for the next call. */
#define POOL_RESTORE_FAILURE_KEEP (10 * 60 * USEC_PER_SEC)
/* How long stopping waits for the cancelled restores (a chunk in flight) to end. */
#define POOL_RESTORE_STOP_WAIT (30 * USEC_PER_SEC)

typedef struct PoolRestores PoolRestores;

PoolRestores *pool_restores_new(void);
/* Cancels the restores (the queued never start, the running stop at their next chunk, leaving
 * nothing), waits for them up to POOL_RESTORE_STOP_WAIT, then frees the table and returns
 * true; false (nothing freed) when one still runs: its thread still uses the pool, which must
 * then stay open (a restart removes the half-made volume). Blocks. */
bool pool_restores_free(PoolRestores *rs);

/* -EBUSY with *ret_error naming the volume and its snapshot while a restore into the volume of
 * local ID local runs; else 0. */
int pool_restore_busy(PoolRestores *rs, const char *local, char **ret_error);

/* The failure of the last restore of snapshot into local if it failed within
 * POOL_RESTORE_FAILURE_KEEP after its call had ended: its errno with *ret_error (once: it is
 * forgotten then, and so is one of another snapshot); else 0. */
int pool_restore_failed(PoolRestores *rs, const char *local, const char *snapshot,
			char **ret_error);

/* Restores snapshot store_id of store (snapshot: as the request named it) into a new volume
 * spec of pool (taken; spec->size at least the snapshot's volume size; node_id: the pool's node,
 * for messages) in a thread of its own (rs its table), and
 * waits for it until deadline (CLOCK_MONOTONIC; USEC_INFINITY: no end). Returns 0 once the
 * volume is there; -ETIMEDOUT when the restore goes on past the deadline; -EBUSY when one into
 * that volume runs already; -EEXIST when the volume appeared meanwhile; else the restore's
 * errno with *ret_error: -EUCLEAN for a chunk missing or damaged (named, with its offset),
 * -ENOSPC beyond the pool's space (before any chunk is fetched); nothing is left then. */
int pool_restore_run(PoolRestores *rs, Pool *pool, const char *node_id, Store *store,
		     const char *store_id, const char *snapshot, PoolVolume *spec, usec_t deadline,
		     char **ret_error);
