/* SPDX-License-Identifier: Apache-2.0 */
/* What one bench iteration does: a single RPC, or a lifecycle sequence of several. */
#pragma once

#include <stdint.h>

#include "client.h"
#include "time-util.h"

#define BENCH_MAX_STEPS 8
#define BENCH_MAX_PARAMS 16

typedef struct BenchThread BenchThread;

typedef struct BenchSeqConfig {
	char *keys[BENCH_MAX_PARAMS], *values[BENCH_MAX_PARAMS];
	size_t n_params;
	uint64_t run_id; /* keeps names unique across runs */
	/* for the single-RPC sequence */
	char *path;
	void *request;
	size_t request_size;
	void *state; /* owned by the sequence */
	/* Told what no row counts: a failed set-up or clean-up call, what is left behind. One
	 * line each, from the calling thread. NULL: dropped. */
	void (*warn)(const char *msg, void *userdata);
	void *userdata;
} BenchSeqConfig;

typedef struct BenchSequence {
	const char *name;
	const char *steps[BENCH_MAX_STEPS]; /* names of the timed steps */
	unsigned n_steps;
	/* Checks parameters and sets up what every row uses (may call the driver); returns a
	 * negative errno with *ret_error. Optional. */
	int (*prepare)(RpcClient *client, BenchSeqConfig *cfg, char **ret_error);
	/* One iteration; records each step with bench_record(), failures with bench_fail(). */
	void (*iterate)(BenchThread *t, RpcClient *client, BenchSeqConfig *cfg, unsigned client_id,
			uint64_t i);
	/* After a row: removes what the row left behind. Optional. */
	void (*cleanup)(RpcClient *client, BenchSeqConfig *cfg);
	/* After the last row: removes what prepare made. Optional. */
	void (*finish)(RpcClient *client, BenchSeqConfig *cfg);
} BenchSequence;

void bench_record(BenchThread *t, unsigned step, usec_t us);
void bench_fail(BenchThread *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int bench_seq_config_add(BenchSeqConfig *cfg, const char *key_value);
const char *bench_seq_param(const BenchSeqConfig *cfg, const char *key, const char *fallback);
void bench_seq_config_done(BenchSeqConfig *cfg);

/* Finds a named sequence and runs its prepare step against the driver behind client. Returns
 * -EINVAL (unknown name, bad parameter) or the error of prepare, with *ret_error. Blocks. */
int bench_sequence_find(const char *name, RpcClient *client, BenchSeqConfig *cfg,
			const BenchSequence **ret, char **ret_error);
int bench_sequence_single_rpc(const char *method, const char *request_json, BenchSeqConfig *cfg,
			      const BenchSequence **ret, char **ret_error);
