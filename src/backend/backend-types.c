/* SPDX-License-Identifier: Apache-2.0 */
/* The list of the backend types volplugd can run: a new one is a folder under src/backend that
 * defines BACKEND_TYPE(name), and its name in BACKEND_TYPES. A build may add types of its own
 * by defining BACKEND_TYPES_EXTRA(X) as more X(name) entries (tests/backend does: one line in
 * its meson.build). */
#include "backend.h"
#include "macro.h"

#ifndef BACKEND_TYPES_EXTRA
#define BACKEND_TYPES_EXTRA(X)
#endif

#define BACKEND_TYPES(X) X(pool) X(flex) X(ebs) BACKEND_TYPES_EXTRA(X)

#define DECLARE(name) extern BACKEND_TYPE(name);
BACKEND_TYPES(DECLARE)

#define ENTRY(name) &name##_backend_type,
static const BackendType *const types[] = {BACKEND_TYPES(ENTRY)};

const BackendType *const *backend_types(size_t *ret_n)
{
	*ret_n = ELEMENTSOF(types);
	return types;
}
