/* SPDX-License-Identifier: Apache-2.0 */
/* volplugctl pool check [--repair] DIR: verifies a pool on disk (no daemon needed), and with
 * --repair fixes what can be fixed without losing anything, also while daemons serve it. */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "ctl.h"
#include "pool.h"

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

static void print_json(Ctl *ctl, const PoolCheckReport *report, bool repair)
{
	json_t *o = json_object(), *list = json_array();

	for (size_t i = 0; i < report->n_items; i++) {
		const PoolCheckItem *it = &report->items[i];
		json_t *item = json_object();
		json_object_set_new(item, "object", json_string(it->object));
		json_object_set_new(item, "problem", json_string(it->problem));
		if (it->repair)
			json_object_set_new(item, "repaired", json_string(it->repair));
		json_array_append_new(list, item);
	}
	json_object_set_new(o, "volumes", json_integer((json_int_t)report->volumes));
	json_object_set_new(o, "snapshots", json_integer((json_int_t)report->snapshots));
	json_object_set_new(o, "problems", list);
	if (repair)
		json_object_set_new(o, "repaired", json_integer((json_int_t)report->repaired));
	ctl_print(ctl, o);
	json_decref(o);
}

static void print_text(const PoolCheckReport *report, bool repair)
{
	for (size_t i = 0; i < report->n_items; i++) {
		const PoolCheckItem *it = &report->items[i];
		printf("%s: %s%s%s\n", it->object, it->problem, it->repair ? ": " : "",
		       it->repair ?: "");
	}
	printf("%zu volumes, %zu snapshots, %zu problems", report->volumes, report->snapshots,
	       report->n_items);
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
	if (ctl->json)
		print_json(ctl, &report, repair);
	else
		print_text(&report, repair);
	/* With --repair, what is left is what still needs someone. */
	bool left = report.n_items > report.repaired;
	pool_check_report_done(&report);
	return left ? CTL_EXIT_FAILED : 0;
}
