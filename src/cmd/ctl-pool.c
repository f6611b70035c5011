/* SPDX-License-Identifier: Apache-2.0 */
/* volplugctl pool check DIR: verifies a pool on disk (no daemon needed). */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "ctl.h"
#include "pool.h"

int ctl_pool(Ctl *ctl, int argc, char **argv)
{
	PoolCheckReport report;

	if (argc != 3 || strcmp(argv[1], "check") != 0)
		return ctl_error(CTL_EXIT_USAGE, "usage: volplugctl pool check POOL_DIR");
	int r = pool_check(argv[2], &report);
	if (r < 0)
		return ctl_error(CTL_EXIT_FAILED, "pool %s: cannot read it: %s", argv[2],
				 strerror(-r));
	if (ctl->json) {
		json_t *o = json_object(), *list = json_array();
		char *save = NULL;
		for (char *l = strtok_r(report.text, "\n", &save); l;
		     l = strtok_r(NULL, "\n", &save))
			json_array_append_new(list, json_string(l));
		json_object_set_new(o, "volumes", json_integer((json_int_t)report.volumes));
		json_object_set_new(o, "snapshots", json_integer((json_int_t)report.snapshots));
		json_object_set_new(o, "problems", list);
		ctl_print(ctl, o);
		json_decref(o);
	} else {
		fputs(report.text, stdout);
		printf("%zu volumes, %zu snapshots, %zu problems\n", report.volumes,
		       report.snapshots, report.problems);
	}
	free(report.text);
	return report.problems ? CTL_EXIT_FAILED : 0;
}
