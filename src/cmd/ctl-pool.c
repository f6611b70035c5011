/* SPDX-License-Identifier: Apache-2.0 */
/* volplugctl pool check DIR: verifies a pool on disk, and the Flexvolume backend's records kept
 * in it (no daemon needed). */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "ctl.h"
#include "flex-records.h"
#include "pool.h"

static void print_json(Ctl *ctl, const PoolCheckReport *pool, const FlexRecordsReport *flex)
{
	json_t *o = json_object(), *list = json_array();
	const char *texts[] = {pool->text, flex->text};

	for (size_t i = 0; i < ELEMENTSOF(texts); i++) {
		_cleanup_free_ char *copy = xstrdup(texts[i]);
		char *save = NULL;
		for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
			json_array_append_new(list, json_string(l));
	}
	json_object_set_new(o, "volumes", json_integer((json_int_t)pool->volumes));
	json_object_set_new(o, "snapshots", json_integer((json_int_t)pool->snapshots));
	json_object_set_new(o, "flex_records", json_integer((json_int_t)flex->records));
	json_object_set_new(o, "problems", list);
	ctl_print(ctl, o);
	json_decref(o);
}

int ctl_pool(Ctl *ctl, int argc, char **argv)
{
	PoolCheckReport report;
	FlexRecordsReport flex;

	if (argc != 3 || strcmp(argv[1], "check") != 0)
		return ctl_error(CTL_EXIT_USAGE, "usage: volplugctl pool check POOL_DIR");
	int r = pool_check(argv[2], &report);
	if (r < 0)
		return ctl_error(CTL_EXIT_FAILED, "pool %s: cannot read it: %s", argv[2],
				 strerror(-r));
	_cleanup_free_ char *dir = flex_records_dir(argv[2]);
	r = flex_records_check(dir, &flex);
	if (r < 0) {
		free(report.text);
		return ctl_error(CTL_EXIT_FAILED, "%s: cannot read the Flexvolume records: %s", dir,
				 strerror(-r));
	}
	size_t problems = report.problems + flex.problems;
	if (ctl->json)
		print_json(ctl, &report, &flex);
	else {
		fputs(report.text, stdout);
		fputs(flex.text, stdout);
		printf("%zu volumes, %zu snapshots, %zu Flexvolume records, %zu problems\n",
		       report.volumes, report.snapshots, flex.records, problems);
	}
	free(report.text);
	flex_records_report_done(&flex);
	return problems ? CTL_EXIT_FAILED : 0;
}
