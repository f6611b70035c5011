/* SPDX-License-Identifier: Apache-2.0 */
/* volplugctl pool check [--repair] DIR: verifies a pool on disk and the Flexvolume backend's
 * records kept in it (no daemon needed), and with --repair fixes what can be fixed without
 * losing anything, also while daemons serve it. */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "ctl.h"
#include "flex-records.h"
#include "pool.h"

#define MIB (1024ULL * 1024ULL)
#define POOL_USAGE "usage: volplugctl pool check [--repair] POOL_DIR"

static int check(const char *dir, bool repair, PoolCheckReport *ret)
{
	PoolConfig config = {.path = dir, .existing = true};
	Pool *p;

	if (!repair)
		return pool_check(dir, ret);
	int r = pool_open(&config, &p);
	if (r < 0)
		return r;
	r = pool_check_repair(p, ret);
	pool_close(p);
	return r;
}

/* The Flexvolume records' problems, one "FILE: problem" line each. */
static void flex_lines(const FlexRecordsReport *flex,
		       void (*each)(const char *object, const char *problem, void *u),
		       void *userdata)
{
	_cleanup_free_ char *copy = xstrdup(flex->text ?: "");
	char *save = NULL;

	for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char *sep = strstr(l, ": ");
		if (sep)
			*sep = 0;
		each(l, sep ? sep + 2 : "", userdata);
	}
}

static json_t *problem_json(const char *object, const char *problem, const char *repair)
{
	json_t *item = json_object();
	json_object_set_new(item, "object", json_string(object));
	json_object_set_new(item, "problem", json_string(problem));
	if (repair)
		json_object_set_new(item, "repaired", json_string(repair));
	return item;
}

static void flex_json(const char *object, const char *problem, void *list)
{
	json_array_append_new(list, problem_json(object, problem, NULL));
}

static void print_json(Ctl *ctl, const PoolCheckReport *report, const FlexRecordsReport *flex,
		       bool repair)
{
	json_t *o = json_object(), *list = json_array();

	for (size_t i = 0; i < report->n_items; i++)
		json_array_append_new(list, problem_json(report->items[i].object,
							 report->items[i].problem,
							 report->items[i].repair));
	flex_lines(flex, flex_json, list);
	json_object_set_new(o, "volumes", json_integer((json_int_t)report->volumes));
	json_object_set_new(o, "snapshots", json_integer((json_int_t)report->snapshots));
	json_object_set_new(o, "flex_records", json_integer((json_int_t)flex->records));
	json_object_set_new(o, "provisioned_bytes", json_integer((json_int_t)report->provisioned));
	json_object_set_new(o, "allocated_bytes", json_integer((json_int_t)report->allocated));
	json_object_set_new(o, "filesystem_bytes", json_integer((json_int_t)report->fs_size));
	json_object_set_new(o, "filesystem_free_bytes", json_integer((json_int_t)report->fs_free));
	json_object_set_new(o, "problems", list);
	if (repair)
		json_object_set_new(o, "repaired", json_integer((json_int_t)report->repaired));
	ctl_print(ctl, o);
	json_decref(o);
}

static void print_text(const PoolCheckReport *report, const FlexRecordsReport *flex, bool repair)
{
	for (size_t i = 0; i < report->n_items; i++) {
		const PoolCheckItem *it = &report->items[i];
		printf("%s: %s%s%s\n", it->object, it->problem, it->repair ? ": " : "",
		       it->repair ?: "");
	}
	fputs(flex->text ?: "", stdout);
	printf("%llu MiB provisioned, %llu MiB allocated; the pool's filesystem: %llu MiB free of "
	       "%llu MiB\n",
	       (unsigned long long)(report->provisioned / MIB),
	       (unsigned long long)(report->allocated / MIB),
	       (unsigned long long)(report->fs_free / MIB),
	       (unsigned long long)(report->fs_size / MIB));
	printf("%zu volumes, %zu snapshots, %zu Flexvolume records, %zu problems", report->volumes,
	       report->snapshots, flex->records, report->n_items + flex->problems);
	if (repair)
		printf(", %zu repaired", report->repaired);
	putchar('\n');
}

int ctl_pool(Ctl *ctl, int argc, char **argv)
{
	PoolCheckReport report;
	const char *dir = NULL;
	bool repair = false;

	for (int i = 2; i < argc; i++)
		if (strcmp(argv[i], "--repair") == 0 && !repair)
			repair = true;
		else if (argv[i][0] != '-' && !dir)
			dir = argv[i];
		else
			return ctl_error(CTL_EXIT_USAGE, POOL_USAGE);
	if (argc < 2 || strcmp(argv[1], "check") != 0 || !dir)
		return ctl_error(CTL_EXIT_USAGE, POOL_USAGE);
	int r = check(dir, repair, &report);
	if (r < 0)
		return ctl_error(CTL_EXIT_FAILED, "pool %s: cannot %s it: %s", dir,
				 repair ? "open" : "read", strerror(-r));
	_cleanup_free_ char *flex_dir = flex_records_dir(dir);
	FlexRecordsReport flex = {};
	r = flex_records_check(flex_dir, &flex);
	if (r < 0) {
		pool_check_report_done(&report);
		return ctl_error(CTL_EXIT_FAILED, "%s: cannot read the Flexvolume records: %s",
				 flex_dir, strerror(-r));
	}
	if (ctl->json)
		print_json(ctl, &report, &flex, repair);
	else
		print_text(&report, &flex, repair);
	/* With --repair, what is left is what still needs someone. */
	bool left = report.n_items > report.repaired || flex.problems > 0;
	pool_check_report_done(&report);
	flex_records_report_done(&flex);
	return left ? CTL_EXIT_FAILED : 0;
}
