/* SPDX-License-Identifier: Apache-2.0 */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "strv.h"

void strv_free(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

size_t strv_length(char *const *v)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	return n;
}

void strv_push(char ***v, size_t *n, size_t *cap, char *s)
{
	*v = xgrow(*v, cap, *n + 2, sizeof(char *));
	(*v)[(*n)++] = s;
	(*v)[*n] = NULL;
}

void strv_append(char ***v, char *s)
{
	size_t n = strv_length(*v), cap = n + 1; /* the room a strv of n has at least */
	strv_push(v, &n, &cap, s);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void strv_sort(char **v)
{
	size_t n = strv_length(v);
	if (n > 1)
		qsort(v, n, sizeof(char *), cmp_str);
}

size_t strv_uniq(char **v, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		if (k > 0 && strcmp(v[k - 1], v[i]) == 0) {
			free(v[i]);
			continue;
		}
		v[k++] = v[i];
	}
	if (v)
		v[k] = NULL;
	return k;
}
