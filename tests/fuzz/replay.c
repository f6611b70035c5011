/* SPDX-License-Identifier: Apache-2.0 */
/* Replays a fuzz target's corpus: every file of the given directories once, one TAP line
 * each. A crash or a failed invariant aborts the run, which the test harness reports. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "fuzz.h"
#include "macro.h"

static int cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
	int n = 0;

	for (int i = 1; i < argc; i++) {
		struct dirent **list;
		int k = scandir(argv[i], &list, NULL, alphasort);
		if (k < 0) {
			printf("not ok %d - cannot read corpus %s\n", ++n, argv[i]);
			continue;
		}
		char **names = calloc((size_t)k, sizeof(char *));
		int m = 0;
		for (int j = 0; j < k; j++) {
			if (list[j]->d_name[0] != '.')
				names[m++] = strdup(list[j]->d_name);
			free(list[j]);
		}
		free(list);
		qsort(names, (size_t)m, sizeof(char *), cmp);
		_cleanup_close_ int dir = open(argv[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		for (int j = 0; j < m; j++) {
			_cleanup_free_ char *data = NULL;
			size_t len = 0;
			if (read_file_at(dir, names[j], 1 << 20, &data, &len) < 0) {
				printf("not ok %d - %s/%s unreadable\n", ++n, argv[i], names[j]);
				continue;
			}
			LLVMFuzzerTestOneInput((const uint8_t *)data, len);
			printf("ok %d - %s\n", ++n, names[j]);
			fflush(stdout);
			free(names[j]);
		}
		free(names);
	}
	printf("1..%d\n", n);
	return 0;
}
