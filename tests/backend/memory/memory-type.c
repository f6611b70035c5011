/* SPDX-License-Identifier: Apache-2.0 */
/* The memory backend: the in-memory backend of the CSI handlers' unit tests (fake-backend.c)
 * as a type volplugd serves (volplugd-test-backend --backend memory): proof that a backend is a
 * folder and one line. Its volumes live as long as the process. */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "backend.h"
#include "fake-backend.h"
#include "parse-util.h"
#include "strv.h"

typedef struct MemorySettings {
	uint64_t capacity;
} MemorySettings;

static const BackendOption options[] = {
	{"memory-capacity", "SIZE", "bytes its volumes may take in all (default 100G)"},
	{},
};

static void *settings_new(void)
{
	MemorySettings *s = xnew0(MemorySettings, 1);

	s->capacity = 100 * FAKE_GIB;
	return s;
}

static void settings_free(void *settings)
{
	free(settings);
}

static int settings_set(void *settings, const char *option, const char *value, char **ret_error)
{
	MemorySettings *s = settings;

	(void)ret_error;
	if (strcmp(option, "memory-capacity") == 0)
		return parse_size(value, &s->capacity);
	return -ENOENT;
}

/* This node is one attach knows, beside the fake's own. */
BACKEND_NEW(memory);
BACKEND_NEW(memory)
{
	const MemorySettings *s = config->settings;
	FakeBackend *f = fake_backend_new("memory", NULL);

	(void)ret_error;
	f->capacity = s ? s->capacity : 100 * FAKE_GIB;
	bool known = false;
	for (char **n = f->nodes; config->node_id && *n; n++)
		known = known || strcmp(*n, config->node_id) == 0;
	if (config->node_id && !known)
		strv_append(&f->nodes, xstrdup(config->node_id));
	*ret = &f->base;
	return 0;
}

BACKEND_TYPE(memory) = {
	.name = "memory",
	.heading = "The memory backend (--backend memory, tests only): volumes kept in memory",
	.options = options,
	.settings_new = settings_new,
	.settings_set = settings_set,
	.settings_free = settings_free,
	.new = memory_backend_new,
	.selectable = true,
};
