/* SPDX-License-Identifier: Apache-2.0 */
/* volplugctl bench: N concurrent clients drive one RPC or a lifecycle sequence against any
 * CSI endpoint; prints throughput, latency percentiles and the server's RSS. */
#include <getopt.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "bench-seq.h"
#include "ctl.h"
#include "parse-util.h"
#include "pbjson.h"
#include "status.h"

static const char bench_usage[] =
	"Usage: volplugctl bench [OPTIONS]\n"
	"\n"
	"  --rpc METHOD          one RPC per iteration (default GetPluginInfo)\n"
	"  --request JSON        its request (default {})\n"
	"  --sequence NAME       a lifecycle per iteration instead: create-delete,\n"
	"                        stage-publish, publish, snapshot, populate (docs/bench.md)\n"
	"  --param KEY=VALUE     a parameter for the sequence (size=1G, fstype=ext4, ...)\n"
	"  --clients N[,N...]    concurrent clients; one table row per value (default 1)\n"
	"  --count N             iterations per row, shared by the clients (default 10000)\n"
	"  --duration TIME       run each row this long instead of a count\n"
	"  --warmup N            untimed iterations before each row (default 100)\n"
	"  --pid PID             report this server process's RSS\n"
	"  --label TEXT          first column of each row (default: the endpoint)\n";

typedef struct BenchRun {
	Ctl *ctl;
	const BenchSequence *seq;
	BenchSeqConfig seq_config;
	uint64_t count; /* 0: run for duration */
	usec_t duration;
	usec_t start;
	atomic_uint_fast64_t next; /* next iteration number */
	atomic_uint_fast64_t errors;
	_Atomic(char *) first_error;
} BenchRun;

typedef struct BenchThread {
	BenchRun *run;
	unsigned id;
	double *lat[BENCH_MAX_STEPS]; /* microseconds per step */
	size_t n[BENCH_MAX_STEPS], cap[BENCH_MAX_STEPS];
} BenchThread;

void bench_record(BenchThread *t, unsigned step, usec_t us)
{
	if (t->n[step] == t->cap[step]) {
		t->cap[step] = t->cap[step] ? t->cap[step] * 2 : 4096;
		t->lat[step] = xrealloc(t->lat[step], t->cap[step] * sizeof(double));
	}
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
	uint64_t i;

	while (run_more(t->run, &i))
		t->run->seq->iterate(t, t->run->ctl->client, &t->run->seq_config, t->id, i);
	return NULL;
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

static void print_header(void)
{
	printf("%-20s %-26s %7s %9s %7s %10s %9s %9s %9s %9s %9s\n", "target", "step", "clients",
	       "calls", "errors", "calls/s", "p50(us)", "p90(us)", "p99(us)", "max(us)",
	       "rss(KiB)");
}

static void print_rows(BenchRun *run, BenchThread *threads, unsigned clients, usec_t elapsed,
		       const char *label, unsigned long rss)
{
	for (unsigned s = 0; s < run->seq->n_steps; s++) {
		size_t total = 0;
		for (unsigned c = 0; c < clients; c++)
			total += threads[c].n[s];
		double *all = xnew0(double, total ? total : 1);
		size_t k = 0;
		for (unsigned c = 0; c < clients; c++) {
			if (threads[c].n[s] == 0)
				continue; /* no sample (lat[s] is NULL): failed or skipped */
			memcpy(all + k, threads[c].lat[s], threads[c].n[s] * sizeof(double));
			k += threads[c].n[s];
		}
		qsort(all, total, sizeof(double), cmp_double);
		double secs = (double)elapsed / 1e6;
		printf("%-20s %-26s %7u %9zu %7llu %10.0f %9.0f %9.0f %9.0f %9.0f %9lu\n", label,
		       run->seq->steps[s], clients, total,
		       (unsigned long long)atomic_load(&run->errors), secs > 0 ? total / secs : 0,
		       percentile(all, total, 0.50), percentile(all, total, 0.90),
		       percentile(all, total, 0.99), total ? all[total - 1] : 0, rss);
		free(all);
	}
}

static int bench_row(BenchRun *base, unsigned clients, uint64_t warmup, long pid, const char *label)
{
	BenchThread *threads = xnew0(BenchThread, clients);
	pthread_t *tids = xnew0(pthread_t, clients);
	BenchRun run = *base;

	/* Warm-up: the channel connects and the server's threads wake up. */
	BenchThread warm = {.run = &run, .id = clients};
	run.count = warmup;
	atomic_store(&run.next, 0);
	uint64_t i;
	while (run_more(&run, &i))
		run.seq->iterate(&warm, run.ctl->client, &run.seq_config, warm.id,
				 i + (1ULL << 40));
	for (unsigned s = 0; s < BENCH_MAX_STEPS; s++)
		free(warm.lat[s]);

	run = *base;
	atomic_store(&run.next, 0);
	atomic_store(&run.errors, 0);
	atomic_store(&run.first_error, NULL);
	run.start = now_usec(CLOCK_MONOTONIC);
	for (unsigned c = 0; c < clients; c++) {
		threads[c] = (BenchThread){.run = &run, .id = c};
		pthread_create(&tids[c], NULL, bench_thread, &threads[c]);
	}
	for (unsigned c = 0; c < clients; c++)
		pthread_join(tids[c], NULL);
	usec_t elapsed = now_usec(CLOCK_MONOTONIC) - run.start;

	print_rows(&run, threads, clients, elapsed, label, pid > 0 ? rss_kib(pid) : 0);
	fflush(stdout);
	char *err = atomic_load(&run.first_error);
	if (err) {
		fprintf(stderr, "volplugctl: bench: first error: %s\n", err);
		free(err);
	}
	for (unsigned c = 0; c < clients; c++)
		for (unsigned s = 0; s < BENCH_MAX_STEPS; s++)
			free(threads[c].lat[s]);
	free(threads);
	free(tids);
	if (run.seq->cleanup)
		run.seq->cleanup(run.ctl->client, &run.seq_config);
	return atomic_load(&run.errors) ? CTL_EXIT_FAILED : 0;
}

static int parse_clients(const char *s, unsigned *list, size_t max, size_t *ret_n)
{
	_cleanup_free_ char *copy = xstrdup(s);
	char *save = NULL;
	size_t n = 0;

	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		uint32_t v;
		if (n == max || parse_uint32(tok, &v) < 0 || v == 0 || v > 4096)
			return -EINVAL;
		list[n++] = v;
	}
	*ret_n = n;
	return n ? 0 : -EINVAL;
}

int ctl_bench(Ctl *ctl, int argc, char **argv)
{
	static const struct option options[] = {{"rpc", required_argument, NULL, 'r'},
						{"request", required_argument, NULL, 'q'},
						{"sequence", required_argument, NULL, 's'},
						{"param", required_argument, NULL, 'P'},
						{"clients", required_argument, NULL, 'c'},
						{"count", required_argument, NULL, 'n'},
						{"duration", required_argument, NULL, 'd'},
						{"warmup", required_argument, NULL, 'w'},
						{"pid", required_argument, NULL, 'p'},
						{"label", required_argument, NULL, 'l'},
						{"help", no_argument, NULL, 'h'},
						{}};
	BenchRun run = {.ctl = ctl, .count = 10000};
	const char *rpc = "GetPluginInfo", *request = "{}", *sequence = NULL, *label = NULL;
	unsigned clients[32] = {1};
	size_t n_clients = 1;
	uint64_t warmup = 100, pid = 0;
	int opt;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
		switch (opt) {
		case 'r':
			rpc = optarg;
			break;
		case 'q':
			request = optarg;
			break;
		case 's':
			sequence = optarg;
			break;
		case 'P':
			if (bench_seq_config_add(&run.seq_config, optarg) < 0)
				return ctl_error(CTL_EXIT_USAGE, "--param '%s': want KEY=VALUE",
						 optarg);
			break;
		case 'c':
			if (parse_clients(optarg, clients, ELEMENTSOF(clients), &n_clients) < 0)
				return ctl_error(CTL_EXIT_USAGE, "--clients '%s': want N[,N...]",
						 optarg);
			break;
		case 'n':
			if (parse_uint64(optarg, &run.count) < 0 || run.count == 0)
				return ctl_error(CTL_EXIT_USAGE, "--count '%s': want a number > 0",
						 optarg);
			break;
		case 'd':
			if (parse_duration(optarg, &run.duration) < 0 || run.duration == 0)
				return ctl_error(CTL_EXIT_USAGE, "--duration '%s': want e.g. 10s",
						 optarg);
			run.count = 0;
			break;
		case 'w':
			if (parse_uint64(optarg, &warmup) < 0)
				return ctl_error(CTL_EXIT_USAGE, "--warmup '%s': want a number",
						 optarg);
			break;
		case 'p':
			if (parse_uint64(optarg, &pid) < 0)
				return ctl_error(CTL_EXIT_USAGE, "--pid '%s': want a pid", optarg);
			break;
		case 'l':
			label = optarg;
			break;
		case 'h':
			fputs(bench_usage, stdout);
			return 0;
		default:
			return ctl_error(CTL_EXIT_USAGE, "bench: unknown option '%s'",
					 argv[optind - 1]);
		}
	}
	int r = ctl_connect(ctl);
	if (r != 0)
		return r;
	_cleanup_free_ char *error = NULL;
	if (sequence)
		r = bench_sequence_find(sequence, ctl->client, &run.seq_config, &run.seq, &error);
	else
		r = bench_sequence_single_rpc(rpc, request, &run.seq_config, &run.seq, &error);
	if (r < 0) {
		bench_seq_config_done(&run.seq_config);
		return ctl_error(CTL_EXIT_USAGE, "bench: %s", error);
	}

	print_header();
	int rc = 0;
	for (size_t i = 0; i < n_clients; i++)
		rc |= bench_row(&run, clients[i], warmup, (long)pid, label ? label : ctl->endpoint);
	if (run.seq->finish)
		run.seq->finish(ctl->client, &run.seq_config);
	bench_seq_config_done(&run.seq_config);
	return rc;
}
