/* SPDX-License-Identifier: Apache-2.0 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "hashmap.h"
#include "log.h"
#include "metrics.h"

const double metric_duration_buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
					  0.05,	  0.1,	 0.25,	 0.5,	1,    2.5,
					  5,	  10,	 30,	 60,	120,  300};
const size_t metric_duration_n_buckets = ELEMENTSOF(metric_duration_buckets);

struct MetricSeries {
	char *key;		 /* the values joined by '\x1f', the index's key */
	char **values;		 /* one per label */
	double value;		 /* counter, gauge; a histogram's sum */
	uint64_t count;		 /* histogram: observations */
	uint64_t *bucket_counts; /* histogram: per bucket, not cumulative */
};

/* The registry: families and collectors. registry_lock guards families and collectors;
 * collect_lock is held while the collectors run and while their families are written out,
 * so that a render never sees a collected family half refilled. Order: collect_lock, then
 * registry_lock, then a family's lock. */
typedef struct Collector {
	MetricsCollectFunc func;
	void *userdata;
} Collector;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t collect_lock = PTHREAD_MUTEX_INITIALIZER;
static MetricFamily *families;
static Collector *collectors;
static size_t n_collectors;
static usec_t collected_at; /* CLOCK_MONOTONIC; guarded by collect_lock */

void metrics_register(MetricFamily *f)
{
	pthread_mutex_lock(&registry_lock);
	bool known = false;
	for (MetricFamily *i = families; i; i = i->next)
		known = known || i == f;
	if (!known) {
		f->next = families;
		families = f;
	}
	pthread_mutex_unlock(&registry_lock);
}

static size_t family_n_labels(const MetricFamily *f)
{
	size_t n = 0;
	while (n < METRIC_LABELS_MAX && f->labels[n])
		n++;
	return n;
}

static const double *family_buckets(const MetricFamily *f, size_t *ret_n)
{
	if (f->buckets) {
		*ret_n = f->n_buckets;
		return f->buckets;
	}
	*ret_n = metric_duration_n_buckets;
	return metric_duration_buckets;
}

static char *values_key(const char *const *values, size_t n)
{
	StrBuf b = {};
	for (size_t i = 0; i < n; i++) {
		if (i > 0)
			strbuf_add(&b, "\x1f", 1);
		strbuf_adds(&b, values[i] ?: "");
	}
	return strbuf_steal(&b);
}

/* The series of values, made on first use. Hold f->lock. */
static MetricSeries *series_get(MetricFamily *f, const char *const *values, size_t n)
{
	_cleanup_free_ char *key = values_key(values, n);

	if (!f->index)
		f->index = hashmap_new(NULL);
	MetricSeries *s = hashmap_get(f->index, key);
	if (s)
		return s;
	s = xnew0(MetricSeries, 1);
	s->values = xnew0(char *, n + 1);
	for (size_t i = 0; i < n; i++)
		s->values[i] = xstrdup(values[i] ?: "");
	if (f->type == METRIC_HISTOGRAM) {
		size_t nb;
		(void)family_buckets(f, &nb);
		s->bucket_counts = xnew0(uint64_t, nb);
	}
	s->key = TAKE_PTR(key);
	(void)hashmap_put(f->index, s->key, s);
	if (f->n_series == f->cap_series) {
		f->cap_series = f->cap_series ? f->cap_series * 2 : 8;
		f->series = xrealloc(f->series, f->cap_series * sizeof(*f->series));
	}
	f->series[f->n_series++] = s;
	return s;
}

static void series_free(MetricSeries *s)
{
	for (char **v = s->values; v && *v; v++)
		free(*v);
	free(s->values);
	free(s->bucket_counts);
	free(s->key);
	free(s);
}

/* Empties a family. Hold f->lock. */
static void family_clear(MetricFamily *f)
{
	for (size_t i = 0; i < f->n_series; i++)
		series_free(f->series[i]);
	f->n_series = 0;
	hashmap_free(f->index);
	f->index = NULL;
}

/* Takes f->lock and returns the series, or NULL (lock not taken) when n is not the family's
 * number of labels: a mistake at the call site, which must not take the process down. */
static MetricSeries *series_lock(MetricFamily *f, const char *const *values, size_t n)
{
	if (n != family_n_labels(f)) {
		log_debug("metric %s: %zu label values for %zu labels, ignored", f->name, n,
			  family_n_labels(f));
		return NULL;
	}
	pthread_mutex_lock(&f->lock);
	return series_get(f, values, n);
}

void metric_add_values(MetricFamily *f, double v, const char *const *values, size_t n)
{
	if (f->type == METRIC_HISTOGRAM || (f->type == METRIC_COUNTER && !(v >= 0)))
		return;
	MetricSeries *s = series_lock(f, values, n);
	if (!s)
		return;
	s->value += v;
	pthread_mutex_unlock(&f->lock);
}

void metric_set_values(MetricFamily *f, double v, const char *const *values, size_t n)
{
	if (f->type != METRIC_GAUGE)
		return;
	MetricSeries *s = series_lock(f, values, n);
	if (!s)
		return;
	s->value = v;
	pthread_mutex_unlock(&f->lock);
}

void metric_observe_values(MetricFamily *f, double v, const char *const *values, size_t n)
{
	size_t nb;
	const double *bounds = family_buckets(f, &nb);

	if (f->type != METRIC_HISTOGRAM || isnan(v))
		return;
	MetricSeries *s = series_lock(f, values, n);
	if (!s)
		return;
	/* Buckets are few: a linear search beats a binary one here. */
	for (size_t i = 0; i < nb; i++)
		if (v <= bounds[i]) {
			s->bucket_counts[i]++;
			break;
		}
	s->count++;
	s->value += v;
	pthread_mutex_unlock(&f->lock);
}

void metrics_collector_add(MetricsCollectFunc func, void *userdata)
{
	pthread_mutex_lock(&registry_lock);
	collectors = xrealloc(collectors, (n_collectors + 1) * sizeof(*collectors));
	collectors[n_collectors++] = (Collector){func, userdata};
	pthread_mutex_unlock(&registry_lock);
	/* The next render asks the newcomer at once. */
	pthread_mutex_lock(&collect_lock);
	collected_at = 0;
	pthread_mutex_unlock(&collect_lock);
}

void metrics_collector_remove(MetricsCollectFunc func, void *userdata)
{
	pthread_mutex_lock(&collect_lock); /* waits for a run in progress */
	pthread_mutex_lock(&registry_lock);
	for (size_t i = 0; i < n_collectors; i++)
		if (collectors[i].func == func && collectors[i].userdata == userdata) {
			memmove(collectors + i, collectors + i + 1,
				(n_collectors - i - 1) * sizeof(*collectors));
			n_collectors--;
			break;
		}
	pthread_mutex_unlock(&registry_lock);
	collected_at = 0;
	pthread_mutex_unlock(&collect_lock);
}

/* Empties the collected families and runs every collector. Hold collect_lock. */
static void collect_locked(void)
{
	pthread_mutex_lock(&registry_lock);
	for (MetricFamily *f = families; f; f = f->next)
		if (f->collected) {
			pthread_mutex_lock(&f->lock);
			family_clear(f);
			pthread_mutex_unlock(&f->lock);
		}
	size_t n = n_collectors;
	Collector *list = xnew0(Collector, n + 1);
	if (n > 0)
		memcpy(list, collectors, n * sizeof(*collectors));
	pthread_mutex_unlock(&registry_lock);

	for (size_t i = 0; i < n; i++)
		list[i].func(list[i].userdata);
	free(list);
	collected_at = now_usec(CLOCK_MONOTONIC);
}

/* Collects when the values are older than the interval. Hold collect_lock. */
static void collect_if_stale(void)
{
	usec_t now = now_usec(CLOCK_MONOTONIC);
	if (collected_at == 0 || now - collected_at >= METRICS_COLLECT_INTERVAL)
		collect_locked();
}

void metrics_collect_now(void)
{
	pthread_mutex_lock(&collect_lock);
	collect_locked();
	pthread_mutex_unlock(&collect_lock);
}

void metrics_format_double(double v, char buf[static 32])
{
	if (isnan(v))
		strcpy(buf, "NaN");
	else if (isinf(v))
		strcpy(buf, v > 0 ? "+Inf" : "-Inf");
	else if (v == floor(v) && fabs(v) < 1e15)
		snprintf(buf, 32, "%.0f", v);
	else {
		/* The shortest of %.15g..%.17g that reads back as v. */
		for (int prec = 15; prec <= 17; prec++) {
			snprintf(buf, 32, "%.*g", prec, v);
			if (strtod(buf, NULL) == v)
				break;
		}
	}
}

static void add_escaped(StrBuf *b, const char *s, bool quote)
{
	for (; *s; s++) {
		if (*s == '\\')
			strbuf_adds(b, "\\\\");
		else if (*s == '\n')
			strbuf_adds(b, "\\n");
		else if (quote && *s == '"')
			strbuf_adds(b, "\\\"");
		else
			strbuf_add(b, s, 1);
	}
}

static void add_double(StrBuf *b, double v)
{
	char buf[32];
	metrics_format_double(v, buf);
	strbuf_adds(b, buf);
}

static void add_uint(StrBuf *b, uint64_t v)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	strbuf_adds(b, buf);
}

/* name{a="x",b="y"[,le="..."]} */
static void add_sample_name(StrBuf *b, const MetricFamily *f, const char *suffix,
			    const MetricSeries *s, const char *le)
{
	size_t n = family_n_labels(f);

	strbuf_adds(b, f->name);
	strbuf_adds(b, suffix);
	if (n == 0 && !le) {
		strbuf_adds(b, " ");
		return;
	}
	strbuf_adds(b, "{");
	for (size_t i = 0; i < n; i++) {
		if (i > 0)
			strbuf_adds(b, ",");
		strbuf_adds(b, f->labels[i]);
		strbuf_adds(b, "=\"");
		add_escaped(b, s->values[i], true);
		strbuf_adds(b, "\"");
	}
	if (le) {
		strbuf_adds(b, n > 0 ? ",le=\"" : "le=\"");
		strbuf_adds(b, le);
		strbuf_adds(b, "\"");
	}
	strbuf_adds(b, "} ");
}

static void add_histogram(StrBuf *b, const MetricFamily *f, const MetricSeries *s)
{
	size_t nb;
	const double *bounds = family_buckets(f, &nb);
	uint64_t cumulative = 0;
	char le[32];

	for (size_t i = 0; i < nb; i++) {
		cumulative += s->bucket_counts[i];
		metrics_format_double(bounds[i], le);
		add_sample_name(b, f, "_bucket", s, le);
		add_uint(b, cumulative);
		strbuf_adds(b, "\n");
	}
	add_sample_name(b, f, "_bucket", s, "+Inf");
	add_uint(b, s->count);
	strbuf_adds(b, "\n");
	add_sample_name(b, f, "_sum", s, NULL);
	add_double(b, s->value);
	strbuf_adds(b, "\n");
	add_sample_name(b, f, "_count", s, NULL);
	add_uint(b, s->count);
	strbuf_adds(b, "\n");
}

static int series_cmp(const void *a, const void *b)
{
	return strcmp((*(MetricSeries *const *)a)->key, (*(MetricSeries *const *)b)->key);
}

static const char *const type_names[] = {
	[METRIC_COUNTER] = "counter",
	[METRIC_GAUGE] = "gauge",
	[METRIC_HISTOGRAM] = "histogram",
};

static void family_render(StrBuf *b, MetricFamily *f)
{
	strbuf_adds(b, "# HELP ");
	strbuf_adds(b, f->name);
	strbuf_adds(b, " ");
	add_escaped(b, f->help, false);
	strbuf_adds(b, "\n# TYPE ");
	strbuf_adds(b, f->name);
	strbuf_adds(b, " ");
	strbuf_adds(b, type_names[f->type]);
	strbuf_adds(b, "\n");

	pthread_mutex_lock(&f->lock);
	qsort_safe(f->series, f->n_series, sizeof(*f->series), series_cmp);
	for (size_t i = 0; i < f->n_series; i++) {
		const MetricSeries *s = f->series[i];
		if (f->type == METRIC_HISTOGRAM) {
			add_histogram(b, f, s);
			continue;
		}
		add_sample_name(b, f, "", s, NULL);
		add_double(b, s->value);
		strbuf_adds(b, "\n");
	}
	pthread_mutex_unlock(&f->lock);
}

static int family_cmp(const void *a, const void *b)
{
	return strcmp((*(MetricFamily *const *)a)->name, (*(MetricFamily *const *)b)->name);
}

/* The registered families sorted by name. Hold registry_lock; free the array. */
static MetricFamily **families_sorted(size_t *ret_n)
{
	size_t n = 0, i = 0;
	for (MetricFamily *f = families; f; f = f->next)
		n++;
	MetricFamily **list = xnew0(MetricFamily *, n + 1);
	for (MetricFamily *f = families; f; f = f->next)
		list[i++] = f;
	qsort(list, n, sizeof(*list), family_cmp);
	*ret_n = n;
	return list;
}

void metrics_render(StrBuf *out)
{
	size_t n;

	pthread_mutex_lock(&collect_lock);
	collect_if_stale();
	pthread_mutex_lock(&registry_lock);
	_cleanup_free_ MetricFamily **list = families_sorted(&n);
	pthread_mutex_unlock(&registry_lock);
	for (size_t i = 0; i < n; i++)
		family_render(out, list[i]);
	pthread_mutex_unlock(&collect_lock);
}

static MetricFamily *family_find(const char *name)
{
	MetricFamily *f = NULL;

	pthread_mutex_lock(&registry_lock);
	for (MetricFamily *i = families; i && !f; i = i->next)
		if (strcmp(i->name, name) == 0)
			f = i;
	pthread_mutex_unlock(&registry_lock);
	return f;
}

int metrics_samples(const char *name, MetricSample **ret, size_t *ret_n)
{
	MetricSample *list = NULL;
	size_t n = 0;

	pthread_mutex_lock(&collect_lock);
	collect_if_stale();
	MetricFamily *f = family_find(name);
	if (f) {
		size_t n_labels = family_n_labels(f);
		pthread_mutex_lock(&f->lock);
		n = f->n_series;
		list = n ? xnew0(MetricSample, n) : NULL;
		for (size_t i = 0; i < n; i++) {
			const MetricSeries *s = f->series[i];
			list[i].values = xnew0(char *, n_labels + 1);
			for (size_t j = 0; j < n_labels; j++)
				list[i].values[j] = xstrdup(s->values[j]);
			list[i].value = f->type == METRIC_HISTOGRAM ? (double)s->count : s->value;
		}
		pthread_mutex_unlock(&f->lock);
	}
	pthread_mutex_unlock(&collect_lock);
	if (!f)
		return -ENOENT;
	*ret = list;
	*ret_n = n;
	return 0;
}

void metric_samples_free(MetricSample *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		for (char **v = s[i].values; v && *v; v++)
			free(*v);
		free(s[i].values);
	}
	free(s);
}

int metrics_sum(const char *name, double *ret)
{
	MetricFamily *f = NULL;
	double sum = 0;
	size_t n = 0;

	pthread_mutex_lock(&collect_lock);
	collect_if_stale();
	f = family_find(name);
	if (f) {
		pthread_mutex_lock(&f->lock);
		n = f->n_series;
		for (size_t i = 0; i < n; i++)
			sum += f->type == METRIC_HISTOGRAM ? (double)f->series[i]->count
							   : f->series[i]->value;
		pthread_mutex_unlock(&f->lock);
	}
	pthread_mutex_unlock(&collect_lock);
	if (n == 0)
		return -ENOENT;
	*ret = sum;
	return 0;
}
