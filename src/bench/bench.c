/* SPDX-License-Identifier: Apache-2.0 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bench.h"

typedef struct BenchRun {
	const BenchSequence *seq;
	BenchSeqConfig *cfg;
	RpcClient *client;
	uint64_t count; /* 0: run for duration */
	usec_t duration;
	usec_t start;
	atomic_uint_fast64_t next; /* next iteration number */
	atomic_uint_fast64_t errors;
	_Atomic(char *) first_error;
} BenchRun;

typedef struct BenchThread {
	BenchRun *run;
	RpcClient *client; /* its own connection, or NULL: the run's */
	unsigned id;
	double *lat[BENCH_MAX_STEPS]; /* microseconds per step */
	size_t n[BENCH_MAX_STEPS], cap[BENCH_MAX_STEPS];
} BenchThread;

void bench_record(BenchThread *t, unsigned step, usec_t us)
{
	t->lat[step] = xgrow(t->lat[step], &t->cap[step], t->n[step] + 1, sizeof(double));
	t->lat[step][t->n[step]++] = (double)us;
}

void bench_fail(BenchThread *t, const char *fmt, ...)
{
	va_list ap;
	char *msg;

	atomic_fetch_add(&t->run->errors, 1);
	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	char *expected = NULL;
	if (!msg || !atomic_compare_exchange_strong(&t->run->first_error, &expected, msg))
		free(msg);
}

static bool run_more(BenchRun *run, uint64_t *ret_i)
{
	uint64_t i = atomic_fetch_add(&run->next, 1);
	if (run->count ? i >= run->count : now_usec(CLOCK_MONOTONIC) - run->start >= run->duration)
		return false;
	*ret_i = i;
	return true;
}

static void *bench_thread(void *userdata)
{
	BenchThread *t = userdata;
	BenchRun *run = t->run;
	uint64_t i;

	while (run_more(run, &i))
		run->seq->iterate(t, t->client ?: run->client, run->cfg, t->id, i);
	return NULL;
}

static void thread_done(BenchThread *t)
{
	for (unsigned s = 0; s < BENCH_MAX_STEPS; s++)
		free(t->lat[s]);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double percentile(const double *sorted, size_t n, double p)
{
	if (n == 0)
		return 0;
	size_t i = (size_t)(p * (double)(n - 1) + 0.5);
	return sorted[MIN(i, n - 1)];
}

/* The resident set size of a process in KiB, or 0. */
static unsigned long rss_kib(long pid)
{
	char path[64], line[256];
	unsigned long kib = 0;

	snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %lu kB", &kib) == 1)
			break;
	return kib;
}

/* Step s over every thread's samples. */
static void step_stats(const BenchThread *threads, unsigned clients, unsigned s, usec_t elapsed,
		       BenchStepStats *ret)
{
	size_t total = 0, k = 0;

	for (unsigned c = 0; c < clients; c++)
		total += threads[c].n[s];
	_cleanup_free_ double *all = xnew0(double, total ? total : 1);
	for (unsigned c = 0; c < clients; c++) {
		if (threads[c].n[s] == 0)
			continue; /* no sample (lat[s] is NULL): failed or skipped */
		memcpy(all + k, threads[c].lat[s], threads[c].n[s] * sizeof(double));
		k += threads[c].n[s];
	}
	qsort_safe(all, total, sizeof(double), cmp_double);
	double secs = (double)elapsed / 1e6;
	ret->calls = total;
	ret->calls_per_sec = secs > 0 ? (double)total / secs : 0;
	ret->p50 = percentile(all, total, 0.50);
	ret->p90 = percentile(all, total, 0.90);
	ret->p99 = percentile(all, total, 0.99);
	ret->max = total ? all[total - 1] : 0;
}

/* Untimed: the channel connects and the server's threads wake up. */
static void warm_up(const BenchSequence *seq, BenchSeqConfig *cfg, RpcClient *client,
		    uint64_t count, unsigned id)
{
	BenchRun run = {.seq = seq, .cfg = cfg, .client = client, .count = count};
	BenchThread warm = {.run = &run, .id = id};
	uint64_t i;

	while (count > 0 && run_more(&run, &i))
		seq->iterate(&warm, client, cfg, warm.id, i + (1ULL << 40));
	thread_done(&warm);
	free(atomic_load(&run.first_error));
}

void bench_row_run(const BenchSequence *seq, BenchSeqConfig *cfg, RpcClient *client,
		   const BenchOptions *opts, unsigned clients, BenchRow *ret)
{
	_cleanup_free_ BenchThread *threads = xnew0(BenchThread, clients);
	_cleanup_free_ pthread_t *tids = xnew0(pthread_t, clients);
	_cleanup_free_ RpcClient **own = xnew0(RpcClient *, clients);

	for (unsigned c = 0; opts->connections && c < clients; c++) {
		if (rpc_client_new(opts->connections, &own[c]) < 0)
			break; /* the endpoint was opened before: it is a unix socket */
		warm_up(seq, cfg, own[c], MAX(opts->warmup / clients, 1), c);
	}
	warm_up(seq, cfg, client, opts->warmup, clients);

	BenchRun run = {
		.seq = seq,
		.cfg = cfg,
		.client = client,
		.count = opts->count,
		.duration = opts->duration,
		.start = now_usec(CLOCK_MONOTONIC),
	};
	for (unsigned c = 0; c < clients; c++) {
		threads[c] = (BenchThread){.run = &run, .client = own[c], .id = c};
		pthread_create(&tids[c], NULL, bench_thread, &threads[c]);
	}
	for (unsigned c = 0; c < clients; c++)
		pthread_join(tids[c], NULL);

	BenchRow row = {
		.clients = clients,
		.elapsed = now_usec(CLOCK_MONOTONIC) - run.start,
		.errors = atomic_load(&run.errors),
		.first_error = atomic_load(&run.first_error),
		.rss_kib = opts->pid > 0 ? rss_kib(opts->pid) : 0,
		.n_steps = seq->n_steps,
	};
	for (unsigned s = 0; s < seq->n_steps; s++) {
		step_stats(threads, clients, s, row.elapsed, &row.steps[s]);
		row.steps[s].step = seq->steps[s];
	}
	for (unsigned c = 0; c < clients; c++) {
		thread_done(&threads[c]);
		rpc_client_free(own[c]);
	}
	*ret = row;
}

void bench_row_done(BenchRow *row)
{
	free(row->first_error);
	*row = (BenchRow){};
}

void bench_row_clean(const BenchSequence *seq, BenchSeqConfig *cfg, RpcClient *client)
{
	if (seq->cleanup)
		seq->cleanup(client, cfg);
}

void bench_finish(const BenchSequence *seq, BenchSeqConfig *cfg, RpcClient *client)
{
	if (seq->finish)
		seq->finish(client, cfg);
}
