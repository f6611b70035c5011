/* SPDX-License-Identifier: Apache-2.0 */
/* volplugctl status: the running daemon's Admin.GetStatus, as a page for a person or as JSON. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ctl.h"
#include "macro.h"

static int64_t num(json_t *o, const char *key)
{
	return json_integer_value(json_object_get(o, key));
}

static const char *str(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key)) ?: "";
}

/* 1536 -> "1.5 KiB". */
static const char *bytes(int64_t v, char buf[static 32])
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double d = (double)v;
	size_t u = 0;

	while (d >= 1024 && u + 1 < ELEMENTSOF(units)) {
		d /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, 32, "%lld B", (long long)v);
	else
		snprintf(buf, 32, "%.1f %s", d, units[u]);
	return buf;
}

static void print_header(json_t *s)
{
	int64_t up = num(s, "uptime_seconds");

	printf("%s %s, mode %s, node %s, up %lldh%02lldm%02llds: %s%s\n", str(s, "driver_name"),
	       str(s, "version"), str(s, "mode"), str(s, "node_id"), (long long)(up / 3600),
	       (long long)(up / 60 % 60), (long long)(up % 60),
	       json_is_true(json_object_get(s, "ready")) ? "ready" : "NOT READY: ",
	       str(s, "not_ready_reason"));
}

/* What may be provisioned: the capacity, or with thin provisioning the capacity times the
 * ratio, and that product spelled out. */
static void print_limit(json_t *p)
{
	json_t *r = json_object_get(p, "overprovision_ratio");
	double ratio = json_is_number(r) ? json_number_value(r) : 1;
	int64_t capacity = num(p, "capacity_bytes");
	long double limit = (long double)capacity * ratio;
	char a[32], b[32];

	if (ratio == 1) {
		fputs(bytes(capacity, a), stdout);
		return;
	}
	printf("%s (%s x overprovision ratio %g)",
	       bytes(limit >= 0x1p63 ? INT64_MAX : (int64_t)limit, a), bytes(capacity, b), ratio);
}

/* The local space a backend keeps its volumes in (the wire calls it "pool"). */
static void print_space(json_t *p)
{
	char a[32], b[32], c[32], d[32];

	if (!p)
		return;
	printf("space %s: %s provisioned of ", str(p, "path"),
	       bytes(num(p, "provisioned_bytes"), a));
	print_limit(p);
	printf(", %s allocated, %s available; filesystem free %s; %lld loop devices\n",
	       bytes(num(p, "allocated_bytes"), b), bytes(num(p, "available_bytes"), c),
	       bytes(num(p, "filesystem_free_bytes"), d), (long long)num(p, "loop_devices"));
}

/* A count a backend gives, or "-" where it counts none here. */
static const char *count(json_t *o, const char *key, char buf[static 24])
{
	json_t *v = json_object_get(o, key);

	if (json_is_integer(v) && json_integer_value(v) < 0)
		return "-";
	snprintf(buf, 24, "%lld", (long long)json_integer_value(v));
	return buf;
}

/* Each backend as it reports itself, then this node's uses over all of them. */
static void print_backends(json_t *s)
{
	json_t *list = json_object_get(s, "backends"), *b;
	char v[24], sn[24], st[24], pu[24];
	size_t i;

	json_array_foreach (list, i, b)
		printf("backend %s: %s volumes, %s snapshots; on this node %s staged, %s "
		       "published\n",
		       str(b, "name"), count(b, "volumes", v), count(b, "snapshots", sn),
		       count(b, "staged", st), count(b, "published", pu));
	printf("on this node: %lld volumes staged, %lld publish targets (every backend)\n",
	       (long long)num(s, "staged"), (long long)num(s, "published"));
}

/* Each volume staged here: its device and what went through it. */
static void print_volumes(json_t *s)
{
	json_t *list = json_object_get(s, "staged_volumes"), *v;
	size_t i;

	if (json_array_size(list) == 0)
		return;
	printf("staged volumes (I/O since attached):\n");
	json_array_foreach (list, i, v) {
		char a[32], b[32];
		printf("  %s  %s  read %s in %lld ops, written %s in %lld ops, busy %.3f s, %lld "
		       "in "
		       "flight\n",
		       str(v, "volume_id"), str(v, "device"), bytes(num(v, "read_bytes"), a),
		       (long long)num(v, "reads"), bytes(num(v, "written_bytes"), b),
		       (long long)num(v, "writes"), (double)num(v, "busy_ms") / 1000,
		       (long long)num(v, "in_flight"));
	}
}

/* Each directory volume of the pool: no device and no I/O counters, what its quota counts. */
static void print_directory_volumes(json_t *s)
{
	json_t *list = json_object_get(s, "directory_volumes"), *v;
	size_t i;

	if (json_array_size(list) == 0)
		return;
	printf("directory volumes (project quota; the kernel counts no I/O per directory):\n");
	json_array_foreach (list, i, v) {
		char a[32], b[32];
		int64_t used = num(v, "used_bytes"), limit = num(v, "limit_bytes");
		printf("  %s  used %s of %s (%lld%%), %lld inodes", str(v, "volume_id"),
		       bytes(used, a), bytes(limit, b),
		       limit > 0 ? (long long)(used * 100 / limit) : 0LL,
		       (long long)num(v, "used_inodes"));
		if (num(v, "limit_inodes") > 0)
			printf(" of %lld", (long long)num(v, "limit_inodes"));
		putchar('\n');
	}
}

/* The snapshot store, when volplugd has one: where it is, what goes up, its last error. */
static void print_store(json_t *st)
{
	const char *endpoint = str(st, "endpoint"), *prefix = str(st, "prefix");
	const char *err = str(st, "last_error");
	char a[32];

	if (!st)
		return;
	printf("snapshot store s3://%s/%s at %s: %lld uploads in progress, %s sent (%lld "
	       "uploads done, %lld failed)\n",
	       str(st, "bucket"), prefix, *endpoint ? endpoint : "AWS S3",
	       (long long)num(st, "uploads_in_progress"), bytes(num(st, "sent_bytes"), a),
	       (long long)num(st, "uploads_done"), (long long)num(st, "uploads_failed"));
	if (*err) {
		time_t t = (time_t)(num(st, "last_error_unix_ms") / 1000);
		char when[32];
		struct tm tm;
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
		printf("  last error %s  %s\n", when, err);
	}
}

static void print_drivers(json_t *s)
{
	json_t *list = json_object_get(s, "flex_drivers"), *d;
	size_t i;

	if (!json_is_true(json_object_get(s, "flex_enabled"))) {
		printf("Flexvolume drivers: off\n");
		return;
	}
	printf("Flexvolume drivers: %zu\n", json_array_size(list));
	json_array_foreach (list, i, d) {
		const char *err = str(d, "last_error");
		printf("  %s  %s%s%s\n", str(d, "name"), str(d, "state"), *err ? ": " : "", err);
	}
}

static void print_problems(json_t *s)
{
	json_t *list = json_object_get(s, "recent_problems"), *p;
	size_t i;

	if (json_array_size(list) == 0) {
		printf("recent problems: none\n");
		return;
	}
	printf("recent problems (newest first):\n");
	json_array_foreach (list, i, p) {
		time_t t = (time_t)(num(p, "time_unix_ms") / 1000);
		char when[32];
		struct tm tm;
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
		const char *ctx = str(p, "context");
		printf("  %s  %s  %s%s%s\n", when, str(p, "what"), ctx, *ctx ? ": " : "",
		       str(p, "message"));
	}
}

int ctl_status(Ctl *ctl, int argc, char **argv)
{
	json_t *reply = NULL, *req;

	(void)argv;
	if (argc != 1)
		return ctl_error(CTL_EXIT_USAGE, "status takes no arguments");
	req = json_object();
	int r = ctl_call(ctl, "GetStatus", req, &reply);
	json_decref(req);
	if (r != 0)
		return r;
	if (ctl->json) {
		ctl_print(ctl, reply);
		json_decref(reply);
		return 0;
	}
	print_header(reply);
	print_space(json_object_get(reply, "pool"));
	print_backends(reply);
	print_volumes(reply);
	print_directory_volumes(reply);
	print_store(json_object_get(reply, "store"));
	printf("calls: %lld answered, %lld in flight\n", (long long)num(reply, "calls"),
	       (long long)num(reply, "calls_in_flight"));
	print_drivers(reply);
	print_problems(reply);
	json_decref(reply);
	return 0;
}
