/* SPDX-License-Identifier: Apache-2.0 */
/* The process's metrics: counters, gauges and histograms with labels, in one registry, written
 * out in the Prometheus text format (version 0.0.4).
 *
 * A family is defined once, beside the code it measures, and registers itself before main():
 *
 *     METRIC_DEFINE(calls, METRIC_HISTOGRAM, "volplug_csi_operation_duration_seconds",
 *                   "Duration of CSI calls", "method", "code");
 *     ...
 *     metric_observe(&calls, seconds, "CreateVolume", "OK");
 *
 * Label values follow in the order the labels were named; a call with another number of
 * values is ignored. Every update takes the family's mutex for a hash lookup: cheap enough
 * for every RPC, not for an inner loop.
 *
 * Values that are costly to compute (a pool's capacity, counts of objects on disk) come from
 * collectors: functions registered by the objects that own the values, run by metrics_render()
 * at most once per METRICS_COLLECT_INTERVAL. Families marked .collected are emptied before the
 * collectors run, so that an owner that is gone leaves no stale series and several owners of
 * one series (metric_add) add up. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strbuf.h"
#include "time-util.h"

typedef enum MetricType {
	METRIC_COUNTER,
	METRIC_GAUGE,
	METRIC_HISTOGRAM,
} MetricType;

#define METRIC_LABELS_MAX 4

typedef struct MetricSeries MetricSeries;

typedef struct MetricFamily {
	const char *name; /* "volplug_<subsystem>_<what>_<unit>[_total]" */
	const char *help;
	MetricType type;
	const char *labels[METRIC_LABELS_MAX + 1]; /* label names, NULL-terminated */
	bool collected;				   /* set by collectors only (see above) */
	const double *buckets;			   /* histograms: upper bounds, increasing */
	size_t n_buckets;			   /* buckets NULL: the duration buckets */

	/* The registry's: */
	pthread_mutex_t lock;  /* guards series, n_series, cap_series, index */
	MetricSeries **series; /* in the order first seen */
	size_t n_series, cap_series;
	struct Hashmap *index;	   /* label values, joined -> series */
	struct MetricFamily *next; /* registry list, guarded by the registry's lock */
} MetricFamily;

/* Bucket bounds for durations in seconds, from 0.5 ms to 5 min. */
extern const double metric_duration_buckets[];
extern const size_t metric_duration_n_buckets;

/* Defines a static family and registers it before main(). Optional fields (.collected,
 * .buckets) go through METRIC_DEFINE_FULL. */
#define METRIC_DEFINE(var, type_, name_, help_, ...) \
	METRIC_DEFINE_FULL(var, type_, name_, help_, false, NULL, 0, ##__VA_ARGS__)

#define METRIC_DEFINE_FULL(var, type_, name_, help_, collected_, buckets_, n_buckets_, ...) \
	static MetricFamily var = {                                                         \
		.name = name_,                                                              \
		.help = help_,                                                              \
		.type = type_,                                                              \
		.labels = {__VA_ARGS__},                                                    \
		.collected = collected_,                                                    \
		.buckets = buckets_,                                                        \
		.n_buckets = n_buckets_,                                                    \
		.lock = PTHREAD_MUTEX_INITIALIZER,                                          \
	};                                                                                  \
	__attribute__((constructor)) static void var##_register(void)                       \
	{                                                                                   \
		metrics_register(&var);                                                     \
	}

/* Adds a family to the registry (once; METRIC_DEFINE calls it). */
void metrics_register(MetricFamily *f);

/* The updates. values: one per label of f, in order (NULL is taken as ""). Counters ignore
 * negative increments; metric_set is for gauges. Thread-safe; never fail. */
void metric_add_values(MetricFamily *f, double v, const char *const *values, size_t n);
void metric_set_values(MetricFamily *f, double v, const char *const *values, size_t n);
void metric_observe_values(MetricFamily *f, double v, const char *const *values, size_t n);

#define METRIC_VALUES_(...) ((const char *const[]){NULL, ##__VA_ARGS__} + 1)
#define METRIC_N_VALUES_(...) \
	(sizeof((const char *const[]){NULL, ##__VA_ARGS__}) / sizeof(char *) - 1)
#define metric_add(f, v, ...) \
	metric_add_values((f), (v), METRIC_VALUES_(__VA_ARGS__), METRIC_N_VALUES_(__VA_ARGS__))
#define metric_inc(f, ...) metric_add((f), 1, ##__VA_ARGS__)
#define metric_set(f, v, ...) \
	metric_set_values((f), (v), METRIC_VALUES_(__VA_ARGS__), METRIC_N_VALUES_(__VA_ARGS__))
#define metric_observe(f, v, ...) \
	metric_observe_values((f), (v), METRIC_VALUES_(__VA_ARGS__), METRIC_N_VALUES_(__VA_ARGS__))

/* Seconds between two CLOCK_MONOTONIC readings, for metric_observe(). */
static inline double metric_seconds_since(usec_t start)
{
	return (double)(now_usec(CLOCK_MONOTONIC) - start) / 1e6;
}

/* A collector: sets the .collected families it owns (metric_set, metric_add). Runs on the
 * thread that renders, with no family lock held; it may block briefly (a directory listing). */
typedef void (*MetricsCollectFunc)(void *userdata);

/* Registers a collector; the pair (func, userdata) names it for metrics_collector_remove(),
 * which waits for a run in progress to finish. */
void metrics_collector_add(MetricsCollectFunc func, void *userdata);
void metrics_collector_remove(MetricsCollectFunc func, void *userdata);

/* How long collected values are reused: a storm of scrapes runs the collectors once a second. */
#define METRICS_COLLECT_INTERVAL USEC_PER_SEC

/* Appends every registered family in the text format, families sorted by name, series by
 * label values; runs the collectors first when their values are older than the interval.
 * Families without a series are written with HELP and TYPE only. Blocks for the collectors. */
void metrics_render(StrBuf *out);

/* The sum over every series of the family named name (a histogram: of its observations'
 * count), collectors run as for metrics_render(). -ENOENT when no such family is registered
 * or it has no series. */
int metrics_sum(const char *name, double *ret);

/* One series of a family: its label values (in the family's order) and its value (a
 * histogram: its observations' count). */
typedef struct MetricSample {
	char **values; /* NULL-terminated */
	double value;
} MetricSample;

/* Every series of the family named name, collectors run as for metrics_render(), in the order
 * first seen. -ENOENT when no such family is registered (none of it: 0 and *ret NULL). Free with
 * metric_samples_free(). */
int metrics_samples(const char *name, MetricSample **ret, size_t *ret_n);
void metric_samples_free(MetricSample *s, size_t n);

/* Runs the collectors now, whatever their age: for tests. */
void metrics_collect_now(void);

/* A number as Prometheus writes it: shortest form that reads back the same, +Inf, -Inf, NaN. */
void metrics_format_double(double v, char buf[static 32]);
