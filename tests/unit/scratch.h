/* SPDX-License-Identifier: Apache-2.0 */
/* A scratch directory for the unit tests that make loop devices and mounts (they need root).
 * scratch_init("loopdev") makes /tmp/volplug-test-loopdev-XXXXXX and undoes, at exit and on
 * SIGTERM or SIGINT, whatever is below it: mounts newest first, then the loop devices its
 * files back (only those: device numbers are reused by other processes as soon as we let go
 * of them), then the files. */
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "loopdev.h"
#include "strv.h"

static char scratch[64];
/* Called first by the clean-up, e.g. to let go of a device held open on purpose. */
static void (*scratch_release)(void);

/* Mount points listed in /proc/self/mountinfo below the scratch directory, oldest first: a strv
 * (NULL: none) in *ret, and their number. */
__attribute__((unused)) static size_t scratch_mounts(char ***ret)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096], target[4096];
	char **list = NULL;
	size_t n = 0, cap = 0, len = strlen(scratch);

	if (f) {
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "%*s %*s %*s %*s %4095s", target) == 1 &&
			    strncmp(target, scratch, len) == 0 &&
			    (target[len] == '/' || !target[len])) {
				strv_push(&list, &n, &cap, xstrdup(target));
			}
		fclose(f);
	}
	*ret = list;
	return n;
}

__attribute__((unused)) static char *scratch_path(const char *name)
{
	return xasprintf("%s/%s", scratch, name);
}

/* A new directory below the scratch directory; its path. Bails out of the test when it fails. */
__attribute__((unused)) static char *scratch_mkdir(const char *name)
{
	char *p = scratch_path(name);
	if (mkdir(p, 0755) < 0) {
		printf("Bail out! mkdir %s: %s\n", p, strerror(errno));
		exit(1);
	}
	return p;
}

/* A sparse file of size bytes below the scratch directory; its path. Bails out when it fails. */
static char *scratch_file(const char *name, uint64_t size)
{
	char *p = scratch_path(name);
	int fd = open(p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)size) < 0) {
		printf("Bail out! cannot create %s: %s\n", p, strerror(errno));
		exit(1);
	}
	close(fd);
	return p;
}

/* A loop device on a new sparse file of size bytes; *ret_file (may be NULL) gets the file. */
__attribute__((unused)) static char *scratch_loop(const char *name, uint64_t size, char **ret_file)
{
	char *file = scratch_file(name, size), *dev = NULL;
	if (loop_attach(file, NULL, &dev) < 0) {
		printf("Bail out! cannot make a loop device on %s\n", file);
		exit(1);
	}
	if (ret_file)
		*ret_file = file;
	else
		free(file);
	return dev;
}

static int scratch_rm_one(const char *path, const struct stat *st, int type, struct FTW *f)
{
	(void)st;
	(void)f;
	return type == FTW_DP ? rmdir(path) : unlink(path), 0;
}

static void scratch_cleanup(void)
{
	char **mounts = NULL;
	LoopInfo *loops;
	size_t n;

	if (scratch_release)
		scratch_release();
	n = scratch_mounts(&mounts);
	for (size_t i = n; i > 0; i--)
		if (umount2(mounts[i - 1], 0) < 0)
			(void)umount2(mounts[i - 1], MNT_DETACH);
	strv_free(mounts);
	if (loop_list_for_dir(scratch, &loops, &n) == 0) {
		for (size_t i = 0; i < n; i++)
			(void)loop_detach(loops[i].devpath);
		loop_info_array_free(loops, n);
	}
	(void)nftw(scratch, scratch_rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

static void scratch_on_signal(int sig)
{
	/* The interrupted code may hold a device open (O_EXCL in loop_detach()): let go of
	 * every descriptor but stdio, or the devices stay busy. */
	(void)close_range(3, ~0U, 0);
	scratch_cleanup();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Makes the directory (bails out of the test when it cannot) and arms the clean-up. */
__attribute__((unused)) static void scratch_init(const char *what)
{
	snprintf(scratch, sizeof(scratch), "/tmp/volplug-test-%s-XXXXXX", what);
	if (!mkdtemp(scratch)) {
		printf("Bail out! mkdtemp: %s\n", strerror(errno));
		exit(1);
	}
	atexit(scratch_cleanup);
	signal(SIGTERM, scratch_on_signal);
	signal(SIGINT, scratch_on_signal);
}
