/* SPDX-License-Identifier: Apache-2.0 */
/* The drivers of tests/flex-drivers and examples/flexvolume installed in a temporary plugin
 * directory, for the unit tests that run drivers as processes. drivers_init("flex-call") makes
 * /tmp/volplug-test-flex-call-XXXXXX; drivers_done() removes it. */
#pragma once

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "exec.h"
#include "fileio.h"
#include "install.h"

static char *tmpdir;

static void drivers_init(const char *test)
{
	tmpdir = xasprintf("/tmp/volplug-test-%s-XXXXXX", test);
	if (!mkdtemp(tmpdir)) {
		printf("Bail out! mkdtemp\n");
		exit(1);
	}
}

static void drivers_done(void)
{
	const char *argv[] = {"/bin/rm", "-rf", tmpdir, NULL};
	ExecResult res;
	if (exec_run(&(ExecOptions){.argv = argv}, &res) == 0)
		exec_result_done(&res);
	free(tmpdir);
}

/* Installs <from>/<name> of the source tree (tests/flex-drivers or examples/flexvolume) as
 * test~<name> and returns the executable's path. */
static char *install(const char *from, const char *name)
{
	_cleanup_free_ char *src = xasprintf("%s/%s/%s", SOURCE_ROOT, from, name);
	_cleanup_free_ char *error = NULL;
	int r = flex_install(tmpdir, "test", name, src, &error);
	if (r < 0) {
		printf("Bail out! cannot install %s: %s\n", src, error);
		exit(1);
	}
	return xasprintf("%s/test~%s/%s", tmpdir, name, name);
}

/* Writes file next to the installed driver name (content NULL: removes it): how the record
 * driver is told what to answer. */
__attribute__((unused)) static void put(const char *name, const char *file, const char *content)
{
	_cleanup_free_ char *dir = xasprintf("%s/test~%s", tmpdir, name);
	_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (content)
		(void)write_file_atomic_at(fd, file, content, strlen(content), 0644);
	else
		(void)unlinkat(fd, file, 0);
}

__attribute__((unused)) static bool contains(const char *haystack, const char *needle)
{
	return haystack && strstr(haystack, needle);
}
