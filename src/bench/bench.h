/* SPDX-License-Identifier: Apache-2.0 */
/* The bench engine: N client threads drive a sequence (bench-seq.h) against one CSI endpoint
 * and every timed step comes back as calls, throughput and latency percentiles. */
#pragma once

#include <stdint.h>

#include "bench-seq.h"
#include "client.h"
#include "time-util.h"

typedef struct BenchOptions {
	uint64_t count;	 /* iterations per row, shared by the clients; 0: run for duration */
	usec_t duration; /* how long a row runs when count is 0 */
	uint64_t warmup; /* untimed iterations before each row */
	long pid;	 /* > 0: the server process whose RSS each row reports */
	/* Non-NULL: each client thread calls over a connection of its own to this endpoint,
	 * as separate sidecars do; NULL: they share the one given. */
	const char *connections;
} BenchOptions;

typedef struct BenchStepStats {
	const char *step; /* the sequence's name for it */
	size_t calls;
	double calls_per_sec;
	double p50, p90, p99, max; /* microseconds */
} BenchStepStats;

typedef struct BenchRow {
	unsigned clients;
	usec_t elapsed;
	uint64_t errors;       /* failures in the row, all steps together */
	char *first_error;     /* the first failure's message, or NULL */
	unsigned long rss_kib; /* the server's RSS at the end of the row; 0: no pid */
	BenchStepStats steps[BENCH_MAX_STEPS];
	unsigned n_steps;
} BenchRow;

/* Runs one row of seq (prepared, see bench_sequence_find()) with clients threads sharing
 * client: opts->warmup untimed iterations, then the timed ones. Blocks until the row is done.
 * What the row's failed iterations left behind stays until bench_row_clean(). */
void bench_row_run(const BenchSequence *seq, BenchSeqConfig *cfg, RpcClient *client,
		   const BenchOptions *opts, unsigned clients, BenchRow *ret);
void bench_row_done(BenchRow *row);

/* Removes what a row left behind (the sequence's cleanup). Blocks. */
void bench_row_clean(const BenchSequence *seq, BenchSeqConfig *cfg, RpcClient *client);

/* After the last row: removes what the sequence's prepare made. Blocks. */
void bench_finish(const BenchSequence *seq, BenchSeqConfig *cfg, RpcClient *client);
