/* SPDX-License-Identifier: Apache-2.0 */
#include <pthread.h>

#include "alloc.h"
#include "metrics.h"
#include "tap.h"

METRIC_DEFINE(calls, METRIC_COUNTER, "test_calls_total", "Calls made", "method", "code");
METRIC_DEFINE(plain, METRIC_COUNTER, "test_plain_total", "A counter without labels");
METRIC_DEFINE(level, METRIC_GAUGE, "test_level", "A gauge \\ with\nodd help");
static const double bounds[] = {0.1, 1, 10};
METRIC_DEFINE_FULL(latency, METRIC_HISTOGRAM, "test_latency_seconds", "Latency", false, bounds, 3,
		   "op");
METRIC_DEFINE_FULL(owned, METRIC_GAUGE, "test_owned_bytes", "Collected", true, NULL, 0, "pool");
METRIC_DEFINE(unused, METRIC_COUNTER, "test_unused_total", "Never moved", "x");

static char *render(void)
{
	StrBuf b = {};
	metrics_render(&b);
	return strbuf_steal(&b);
}

static bool has_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	for (const char *p = text; (p = strstr(p, line)); p += n)
		if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == 0))
			return true;
	return false;
}

static void test_format(void)
{
	char buf[32];
	const struct {
		double v;
		const char *want;
	} cases[] = {
		{0, "0"},
		{3, "3"},
		{-2, "-2"},
		{0.1, "0.1"},
		{0.0005, "0.0005"},
		{1e20, "1e+20"},
		{1.0 / 0.0, "+Inf"},
		{-1.0 / 0.0, "-Inf"},
		{0.0 / 0.0, "NaN"},
		{2.5, "2.5"},
		{1.0 / 3, "0.3333333333333333"},
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		metrics_format_double(cases[i].v, buf);
		is_str(buf, cases[i].want, "%s is written as Prometheus reads it", cases[i].want);
	}
}

static void test_exposition(void)
{
	metric_inc(&calls, "CreateVolume", "OK");
	metric_inc(&calls, "CreateVolume", "OK");
	metric_add(&calls, 3, "DeleteVolume", "NOT_FOUND");
	metric_add(&calls, -5, "DeleteVolume", "NOT_FOUND");
	metric_inc(&calls, "Odd", "a\"b\\c\nd");
	metric_inc(&calls, "too few values");
	metric_inc(&plain);
	metric_set(&level, 7.5);
	metric_set(&level, 2);
	metric_observe(&latency, 0.05, "read");
	metric_observe(&latency, 0.1, "read");
	metric_observe(&latency, 5, "read");
	metric_observe(&latency, 50, "read");

	_cleanup_free_ char *text = render();
	ok(has_line(text, "# HELP test_calls_total Calls made"), "HELP line");
	ok(has_line(text, "# TYPE test_calls_total counter"), "TYPE line");
	ok(has_line(text, "test_calls_total{method=\"CreateVolume\",code=\"OK\"} 2"),
	   "labelled counter counted twice");
	ok(has_line(text, "test_calls_total{method=\"DeleteVolume\",code=\"NOT_FOUND\"} 3"),
	   "a negative increment is ignored: counters only go up");
	ok(has_line(text, "test_calls_total{method=\"Odd\",code=\"a\\\"b\\\\c\\nd\"} 1"),
	   "quote, backslash and newline escaped in label values");
	ok(!strstr(text, "too few values"), "a call with the wrong number of values is ignored");
	ok(has_line(text, "test_plain_total 1"), "a counter without labels has no braces");
	ok(has_line(text, "# HELP test_level A gauge \\\\ with\\nodd help"),
	   "backslash and newline escaped in HELP");
	ok(has_line(text, "test_level 2"), "a gauge holds the last value set");
	ok(has_line(text, "test_latency_seconds_bucket{op=\"read\",le=\"0.1\"} 2"),
	   "a value on a bound counts in that bucket");
	ok(has_line(text, "test_latency_seconds_bucket{op=\"read\",le=\"1\"} 2"),
	   "buckets are cumulative");
	ok(has_line(text, "test_latency_seconds_bucket{op=\"read\",le=\"10\"} 3"), "third bucket");
	ok(has_line(text, "test_latency_seconds_bucket{op=\"read\",le=\"+Inf\"} 4"),
	   "+Inf counts everything");
	ok(has_line(text, "test_latency_seconds_sum{op=\"read\"} 55.15"), "sum of observations");
	ok(has_line(text, "test_latency_seconds_count{op=\"read\"} 4"), "count of observations");
	ok(has_line(text, "# TYPE test_unused_total counter") &&
		   !strstr(text, "test_unused_total{"),
	   "a family without series is announced, without samples");
	ok(strstr(text, "# HELP test_calls_total") < strstr(text, "# HELP test_latency_seconds") &&
		   strstr(text, "# HELP test_latency_seconds") < strstr(text, "# HELP test_level"),
	   "families sorted by name");
	ok(strstr(text, "method=\"CreateVolume\"") < strstr(text, "method=\"DeleteVolume\""),
	   "series sorted by label values");
	ok(text[strlen(text) - 1] == '\n', "the text ends with a newline");

	double sum;
	ok(metrics_sum("test_calls_total", &sum) == 0 && sum == 6, "sum over a family's series");
	ok(metrics_sum("test_latency_seconds", &sum) == 0 && sum == 4,
	   "a histogram's sum is its count");
	is_int(metrics_sum("test_unused_total", &sum), -ENOENT, "no series: -ENOENT");
	is_int(metrics_sum("no_such_family", &sum), -ENOENT, "unknown family: -ENOENT");

	MetricSample *samples;
	size_t n;
	is_int(metrics_samples("test_calls_total", &samples, &n), 0, "the series of a family");
	is_int(n, 3, "three series");
	ok(strcmp(samples[0].values[0], "CreateVolume") == 0 &&
		   strcmp(samples[0].values[1], "OK") == 0 && !samples[0].values[2] &&
		   samples[0].value == 2,
	   "the first seen first, its label values in order, its value");
	metric_samples_free(samples, n);
	is_int(metrics_samples("test_unused_total", &samples, &n), 0, "a family without series");
	ok(n == 0 && !samples, "none");
	is_int(metrics_samples("no_such_family", &samples, &n), -ENOENT, "unknown family: -ENOENT");
}

static int collector_runs;

static void collect_pool(void *userdata)
{
	collector_runs++;
	metric_add(&owned, 100, (const char *)userdata);
}

static void test_collectors(void)
{
	collector_runs = 0;
	metrics_collector_add(collect_pool, (void *)"a");
	metrics_collector_add(collect_pool, (void *)"b");
	metrics_collector_add(collect_pool, (void *)"a"); /* a second owner of one series */
	_cleanup_free_ char *text = render();
	is_int(collector_runs, 3, "every collector ran for the scrape");
	ok(has_line(text, "test_owned_bytes{pool=\"a\"} 200"), "two owners of a series add up");
	ok(has_line(text, "test_owned_bytes{pool=\"b\"} 100"), "the other series");

	for (int i = 0; i < 50; i++)
		free(render());
	is_int(collector_runs, 3, "scrapes within the interval reuse the values");

	metrics_collector_remove(collect_pool, (void *)"b");
	_cleanup_free_ char *after = render();
	ok(!strstr(after, "pool=\"b\""), "a removed owner leaves no stale series");
	ok(has_line(after, "test_owned_bytes{pool=\"a\"} 200"), "the others stay, not doubled");
	metrics_collector_remove(collect_pool, (void *)"a");
	metrics_collector_remove(collect_pool, (void *)"a");
	metrics_collect_now();
	double sum;
	is_int(metrics_sum("test_owned_bytes", &sum), -ENOENT, "no owner left: no series");
}

#define THREADS 8
#define ROUNDS 20000

static void *hammer(void *arg)
{
	char name[16];
	snprintf(name, sizeof(name), "t%d", (int)(intptr_t)arg % 2);
	for (int i = 0; i < ROUNDS; i++) {
		metric_inc(&calls, "Hammer", name);
		metric_observe(&latency, 0.5, name);
	}
	return NULL;
}

static void *scrape(void *arg)
{
	(void)arg;
	for (int i = 0; i < 200; i++)
		free(render());
	return NULL;
}

static void test_threads(void)
{
	pthread_t t[THREADS], s;

	pthread_create(&s, NULL, scrape, NULL);
	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, hammer, (void *)(intptr_t)i);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	pthread_join(s, NULL);
	_cleanup_free_ char *text = render();
	char want[128];
	snprintf(want, sizeof(want), "test_calls_total{method=\"Hammer\",code=\"t0\"} %d",
		 THREADS / 2 * ROUNDS);
	ok(has_line(text, want), "no increment lost across %d threads while scraping", THREADS);
	snprintf(want, sizeof(want), "test_latency_seconds_count{op=\"t1\"} %d",
		 THREADS / 2 * ROUNDS);
	ok(has_line(text, want), "no observation lost");
}

int main(void)
{
	test_format();
	test_exposition();
	test_collectors();
	test_threads();
	return tap_done();
}
