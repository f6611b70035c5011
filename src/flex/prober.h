/* SPDX-License-Identifier: Apache-2.0 */
/* Dynamic discovery of Flexvolume drivers: a thread that watches the plugin directory, probes
 * the driver folders that changed (at most one pass per min_interval, the last change always
 * picked up) and publishes each driver's init result in a FlexRegistry. Inits run on their
 * own threads with a deadline, so one hanging driver never delays another. */
#pragma once

#include <stdint.h>

#include "call.h"
#include "macro.h"
#include "registry.h"
#include "time-util.h"

#define FLEX_DEFAULT_PLUGIN_DIR "/usr/libexec/kubernetes/kubelet-plugins/volume/exec"

typedef struct FlexProberConfig {
	const char *dir;	     /* plugin dir; NULL: FLEX_DEFAULT_PLUGIN_DIR; made absolute */
	usec_t min_interval;	     /* least time between two probe passes; 0: 1 s */
	usec_t settle_delay;	     /* first event -> pass, so an install's steps land in one
					pass; 0: 50 ms */
	unsigned max_parallel_inits; /* 0: 8 */
	FlexCallConfig call;	     /* init deadline: call.timeout[FLEX_INIT] (default 30 s) */
	/* Called after each publication (loaded, failed, removed) with the new snapshot, from
	 * the prober's threads, no lock held: where the daemon logs what happened. May be NULL. */
	void (*on_change)(FlexDriver *d, void *userdata);
	void *userdata;
} FlexProberConfig;

typedef struct FlexProberStats {
	uint64_t passes;	/* probe passes run */
	uint64_t inits_started; /* init calls started */
	uint64_t inits;		/* init calls finished (run), stale ones included */
	uint64_t events;	/* inotify events read */
	uint64_t scan_errors;	/* plugin dir unreadable: cached drivers kept */
	uint64_t removals;	/* drivers marked removed */
} FlexProberStats;

typedef struct FlexProber FlexProber;

/* Creates the plugin dir when missing and starts watching it; publishes into registry, which
 * must outlive the prober. No thread yet. Returns 0, or a negative errno (dir not creatable or
 * watchable). */
int flex_prober_new(const FlexProberConfig *cfg, FlexRegistry *registry, FlexProber **ret);

/* Starts the prober thread; its first pass probes every folder. Returns 0 or a negative errno.
 */
int flex_prober_start(FlexProber *p);

/* Stops the thread and waits for inits still running (each ends by its deadline). Returns
 * NULL. */
FlexProber *flex_prober_free(FlexProber *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(FlexProber *, flex_prober_free);

/* The absolute plugin dir. */
const char *flex_prober_dir(const FlexProber *p);

/* A copy of the counters. */
void flex_prober_stats(FlexProber *p, FlexProberStats *ret);

/* Blocks until nothing is left to do: no unread event, no pending change, no init running or
 * queued, the dir present. For tests and the bench. Returns 0 or -ETIMEDOUT. */
int flex_prober_wait_settled(FlexProber *p, usec_t timeout);
