/* SPDX-License-Identifier: Apache-2.0 */
/* volplugctl bench: N concurrent clients drive one RPC or a lifecycle sequence against any
 * CSI endpoint; prints throughput, latency percentiles and the server's RSS. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "bench.h"
#include "ctl.h"
#include "parse-util.h"

static const char bench_usage[] =
	"Usage: volplugctl bench [OPTIONS]\n"
	"\n"
	"  --rpc METHOD          one RPC per iteration (default GetPluginInfo)\n"
	"  --request JSON        its request (default {})\n"
	"  --sequence NAME       a lifecycle per iteration instead: create-delete,\n"
	"                        stage-publish, publish, snapshot, populate, create-publish\n"
	"                        (docs/bench.md)\n"
	"  --param KEY=VALUE     a parameter for the sequence (size=1G, fstype=ext4, ...)\n"
	"  --clients N[,N...]    concurrent clients; one table row per value (default 1)\n"
	"  --connections         each client over a connection of its own (default: one\n"
	"                        connection shared by all)\n"
	"  --count N             iterations per row, shared by the clients (default 10000)\n"
	"  --duration TIME       run each row this long instead of a count\n"
	"  --warmup N            untimed iterations before each row (default 100)\n"
	"  --pid PID             report this server process's RSS\n"
	"  --label TEXT          first column of each row (default: the endpoint)\n";

static void print_header(void)
{
	printf("%-20s %-26s %7s %9s %7s %10s %9s %9s %9s %9s %9s\n", "target", "step", "clients",
	       "calls", "errors", "calls/s", "p50(us)", "p90(us)", "p99(us)", "max(us)",
	       "rss(KiB)");
}

/* One line per step, then the first failure on stderr. */
static void print_row(const BenchRow *row, const char *label)
{
	for (unsigned s = 0; s < row->n_steps; s++) {
		const BenchStepStats *st = &row->steps[s];
		printf("%-20s %-26s %7u %9zu %7llu %10.0f %9.0f %9.0f %9.0f %9.0f %9lu\n", label,
		       st->step, row->clients, st->calls, (unsigned long long)row->errors,
		       st->calls_per_sec, st->p50, st->p90, st->p99, st->max, row->rss_kib);
	}
	fflush(stdout);
	if (row->first_error)
		fprintf(stderr, "volplugctl: bench: first error: %s\n", row->first_error);
}

static void bench_warn(const char *msg, _unused_ void *userdata)
{
	fprintf(stderr, "volplugctl: bench: %s\n", msg);
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
						{"connections", no_argument, NULL, 'C'},
						{"count", required_argument, NULL, 'n'},
						{"duration", required_argument, NULL, 'd'},
						{"warmup", required_argument, NULL, 'w'},
						{"pid", required_argument, NULL, 'p'},
						{"label", required_argument, NULL, 'l'},
						{"help", no_argument, NULL, 'h'},
						{}};
	BenchOptions o = {.count = 10000, .warmup = 100};
	BenchSeqConfig seq_config = {.warn = bench_warn};
	const BenchSequence *seq;
	const char *rpc = "GetPluginInfo", *request = "{}", *sequence = NULL, *label = NULL;
	unsigned clients[32] = {1};
	size_t n_clients = 1;
	uint64_t pid = 0;
	bool connections = false;
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
			if (bench_seq_config_add(&seq_config, optarg) < 0)
				return ctl_error(CTL_EXIT_USAGE, "--param '%s': want KEY=VALUE",
						 optarg);
			break;
		case 'c':
			if (parse_clients(optarg, clients, ELEMENTSOF(clients), &n_clients) < 0)
				return ctl_error(CTL_EXIT_USAGE, "--clients '%s': want N[,N...]",
						 optarg);
			break;
		case 'C':
			connections = true;
			break;
		case 'n':
			if (parse_uint64(optarg, &o.count) < 0 || o.count == 0)
				return ctl_error(CTL_EXIT_USAGE, "--count '%s': want a number > 0",
						 optarg);
			break;
		case 'd':
			if (parse_duration(optarg, &o.duration) < 0 || o.duration == 0)
				return ctl_error(CTL_EXIT_USAGE, "--duration '%s': want e.g. 10s",
						 optarg);
			o.count = 0;
			break;
		case 'w':
			if (parse_uint64(optarg, &o.warmup) < 0)
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
		r = bench_sequence_find(sequence, ctl->client, &seq_config, &seq, &error);
	else
		r = bench_sequence_single_rpc(rpc, request, &seq_config, &seq, &error);
	if (r < 0) {
		bench_seq_config_done(&seq_config);
		return ctl_error(CTL_EXIT_USAGE, "bench: %s", error);
	}

	o.pid = (long)pid;
	o.connections = connections ? ctl->endpoint : NULL;
	print_header();
	int rc = 0;
	for (size_t i = 0; i < n_clients; i++) {
		BenchRow row;
		bench_row_run(seq, &seq_config, ctl->client, &o, clients[i], &row);
		print_row(&row, label ? label : ctl->endpoint);
		rc |= row.errors ? CTL_EXIT_FAILED : 0;
		bench_row_done(&row);
		bench_row_clean(seq, &seq_config, ctl->client);
	}
	bench_finish(seq, &seq_config, ctl->client);
	bench_seq_config_done(&seq_config);
	return rc;
}
