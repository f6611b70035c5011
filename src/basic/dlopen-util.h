/* SPDX-License-Identifier: Apache-2.0 */
/* Libraries loaded when a feature is first asked for, not linked: a library the daemon maps
 * at start costs its resident set the pages the loader touches (relocations, constructors,
 * symbol tables) whether or not it is ever called, and those of every library it needs.
 *
 *     static struct { __typeof__(ZSTD_compress) *compress; } zstd;
 *     static const DlSym zstd_syms[] = { DL_SYM(zstd, compress, "ZSTD_"), };
 *     static DlLibrary zstd_library = DL_LIBRARY("libzstd.so.1", zstd_syms);
 *     r = dl_library_load(&zstd_library, &error);      ... zstd.compress(...)
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "macro.h"

typedef struct DlSym {
	const char *name;
	void **fn;
} DlSym;

/* The symbol prefix + field of the library, into table.field (a pointer declared with
 * __typeof__ of the library's own prototype). */
#define DL_SYM(table, field, prefix)                   \
	{                                              \
		prefix #field, (void **)&(table).field \
	}

typedef struct DlLibrary {
	const char *soname; /* "libzstd.so.1": the ABI the headers describe */
	const DlSym *syms;
	size_t n_syms;
	pthread_mutex_t lock; /* guards the fields below, until loaded is set */
	bool loaded, tried;
	int result;
	char *error;
} DlLibrary;

/* table: an array of DL_SYM(). */
#define DL_LIBRARY(name, table)                                                 \
	{                                                                       \
		.soname = (name), .syms = (table), .n_syms = ELEMENTSOF(table), \
		.lock = PTHREAD_MUTEX_INITIALIZER                               \
	}

/* Loads the library and resolves every symbol of its table, once for the process's life (the
 * library is never unloaded); later calls return the first one's result at once. Returns 0,
 * or -ENOENT (the library cannot be loaded) or -ENOSYS (a symbol is missing) with *ret_error
 * naming the library and what failed (ret_error may be NULL). Thread-safe; blocks while the
 * first call reads the library. */
int dl_library_load(DlLibrary *lib, char **ret_error);
