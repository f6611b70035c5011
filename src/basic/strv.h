/* SPDX-License-Identifier: Apache-2.0 */
/* A strv is a NULL-terminated array of strings that owns them (argv's shape). */
#pragma once

#include <stddef.h>

#include "macro.h"

/* Frees each string, then the array; NULL is a no-op. */
void strv_free(char **v);
static inline void strv_freep(char ***v)
{
	strv_free(*v);
}
#define _cleanup_strv_free_ _cleanup_(strv_freep)

/* Number of strings before the NULL; 0 for NULL. */
size_t strv_length(char *const *v);

/* Appends s (taking ownership) to *v, which holds *n strings in room for *cap entries (start
 * from NULL, 0, 0); *v stays NULL-terminated. */
void strv_push(char ***v, size_t *n, size_t *cap, char *s);
/* Appends s (taking ownership) to the strv *v (NULL: an empty one); finds the end and grows
 * each time, so for short lists: strv_push() where n and cap are at hand. */
void strv_append(char ***v, char *s);

/* Sorts the strings bytewise (strcmp order), in place. */
void strv_sort(char **v);
/* Removes the repeats of a sorted strv of n strings (freed); returns how many are left. */
size_t strv_uniq(char **v, size_t n);
