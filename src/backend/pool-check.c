/* SPDX-License-Identifier: Apache-2.0 */
/* pool check: reads every object of a pool and reports what is wrong, changing nothing. */
#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "fileio.h"
#include "pool-meta.h"
#include "pool.h"

typedef struct Checker {
	int dir_fd;
	PoolCheckReport *report;
	FILE *out;
	char *buf;
	size_t len;
} Checker;

static void problem(Checker *c, const char *fmt, ...) _printf_(2, 3);
static void problem(Checker *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfprintf(c->out, fmt, ap);
	va_end(ap);
	fputc('\n', c->out);
	c->report->problems++;
}

/* Checks one object directory's data file against the size its metadata records. */
static void check_data(Checker *c, int obj_fd, const char *where, uint64_t size)
{
	struct stat st;
	if (fstatat(obj_fd, "data", &st, AT_SYMLINK_NOFOLLOW) < 0) {
		problem(c, "%s: data file missing", where);
		return;
	}
	if (!S_ISREG(st.st_mode))
		problem(c, "%s: data is not a regular file", where);
	else if ((uint64_t)st.st_size != size)
		problem(c, "%s: data file is %lld bytes, metadata says %llu", where,
			(long long)st.st_size, (unsigned long long)size);
}

static void check_volume(Checker *c, int obj_fd, const char *id, const char *text, size_t len)
{
	PoolVolume *v = NULL;
	char where[64], expect[POOL_ID_MAX];

	snprintf(where, sizeof(where), "volumes/%s", id);
	if (pool_volume_from_json(text, len, &v) < 0) {
		problem(c, "%s: meta.json is damaged", where);
		return;
	}
	if (strcmp(v->id, id) != 0)
		problem(c, "%s: meta.json names another volume (%s)", where, v->id);
	pool_volume_id_for_name(v->name, expect);
	if (strcmp(expect, id) != 0)
		problem(c, "%s: ID does not match its name '%s' (want %s)", where, v->name, expect);
	check_data(c, obj_fd, where, v->size);
	c->report->volumes++;
	pool_volume_free(v);
}

static void check_snapshot(Checker *c, int obj_fd, const char *id, const char *text, size_t len)
{
	PoolSnapshot *s = NULL;
	char where[64];

	snprintf(where, sizeof(where), "snapshots/%s", id);
	if (pool_snapshot_from_json(text, len, &s) < 0) {
		problem(c, "%s: meta.json is damaged", where);
		return;
	}
	if (strcmp(s->id, id) != 0)
		problem(c, "%s: meta.json names another snapshot (%s)", where, s->id);
	check_data(c, obj_fd, where, s->size);
	c->report->snapshots++;
	pool_snapshot_free(s);
}

static void check_dir(Checker *c, const char *sub, bool (*valid)(const char *),
		      void (*check)(Checker *, int, const char *, const char *, size_t))
{
	_cleanup_close_ int fd = openat(c->dir_fd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		problem(c, "%s/: missing or unreadable: %s", sub, strerror(errno));
		return;
	}
	_cleanup_closedir_ DIR *d = fdopendir(fcntl(fd, F_DUPFD_CLOEXEC, 3));
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (!valid(de->d_name)) {
			problem(c, "%s/%s: orphan: not an object of this pool", sub, de->d_name);
			continue;
		}
		_cleanup_close_ int obj =
			openat(fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		_cleanup_free_ char *text = NULL;
		size_t len;
		if (obj < 0 || read_file_at(obj, "meta.json", 1 << 20, &text, &len) < 0) {
			problem(c, "%s/%s: meta.json missing or unreadable", sub, de->d_name);
			continue;
		}
		check(c, obj, de->d_name, text, len);
	}
}

static void check_tmp(Checker *c)
{
	_cleanup_close_ int fd = openat(c->dir_fd, "tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return;
	_cleanup_closedir_ DIR *d = fdopendir(fcntl(fd, F_DUPFD_CLOEXEC, 3));
	struct dirent *de;
	while (d && (de = readdir(d)))
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			problem(c,
				"tmp/%s: left by an interrupted operation (removed when volplugd "
				"next opens the pool)",
				de->d_name);
}

int pool_check(const char *path, PoolCheckReport *ret)
{
	PoolCheckReport report = {};
	Checker c = {.report = &report};

	_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	c.dir_fd = fd;
	c.out = open_memstream(&c.buf, &c.len);
	if (!c.out)
		return -ENOMEM;
	check_dir(&c, "volumes", pool_volume_id_valid, check_volume);
	check_dir(&c, "snapshots", pool_snapshot_id_valid, check_snapshot);
	check_tmp(&c);
	fclose(c.out);
	report.text = c.buf;
	*ret = report;
	return 0;
}
