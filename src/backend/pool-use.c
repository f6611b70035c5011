/* SPDX-License-Identifier: Apache-2.0 */
/* Use records: where this machine's node service stages and publishes a volume (pool.h). */
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>

#include "alloc.h"
#include "fileio.h"
#include "log.h"
#include "pool-internal.h"
#include "pool-meta.h"

int pool_volume_use_lock_at(int dir_fd, int *ret_lock_fd)
{
	_cleanup_close_ int fd =
		openat(dir_fd, USE_LOCK, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return negative_errno();
	if (flock(fd, LOCK_EX) < 0)
		return negative_errno();
	*ret_lock_fd = TAKE_FD(fd);
	return 0;
}

int pool_volume_use_lock(Pool *p, const char *id, int *ret_lock_fd)
{
	_cleanup_close_ int dir = pool_volume_dir_open(p, id);
	_cleanup_close_ int fd = -EBADF;

	if (dir < 0)
		return dir;
	int r = pool_volume_use_lock_at(dir, &fd);
	if (r < 0)
		return r;
	/* A delete renames the volume away while holding this lock: look again. */
	if (!pool_volume_dir_current(p, id, dir))
		return -ENOENT;
	*ret_lock_fd = TAKE_FD(fd);
	return 0;
}

void pool_volume_use_done(PoolVolumeUse *u)
{
	if (!u)
		return;
	free(u->node);
	free(u->staging.path);
	free(u->fstype);
	for (size_t i = 0; i < u->n_targets; i++)
		free(u->targets[i].path);
	free(u->targets);
	*u = (PoolVolumeUse){};
}

bool pool_volume_use_empty(const PoolVolumeUse *u)
{
	return !u->staging.path && u->n_targets == 0;
}

int pool_volume_use_load(Pool *p, const char *id, PoolVolumeUse *ret)
{
	_cleanup_free_ char *text = NULL, *boot = NULL;
	size_t len;

	*ret = (PoolVolumeUse){};
	_cleanup_close_ int dir = pool_volume_dir_open(p, id);
	if (dir < 0)
		return dir;
	int r = read_file_at(dir, USE_FILE, USE_MAX, &text, &len);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	r = pool_volume_use_from_json(text, len, ret, &boot);
	if (r < 0)
		return log_debug_errno(r, "pool: volumes/%s/" USE_FILE " is damaged", id);
	if (strcmp(boot, p->boot_id) != 0) {
		log_debug("pool: volumes/%s/" USE_FILE " is from an earlier boot: void", id);
		pool_volume_use_done(ret);
	}
	return 0;
}

/* Written through tmp/ like every record of the pool (a flock'ed temporary renamed into place):
 * a crash leaves the old record or the new one, and any temporary is where the pool's recovery
 * looks. Not synced: the record describes the running machine, and a reboot voids it. */
int pool_volume_use_save(Pool *p, const char *id, const PoolVolumeUse *u)
{
	size_t len;

	_cleanup_close_ int dir = pool_volume_dir_open(p, id);
	if (dir < 0)
		return dir;
	if (pool_volume_use_empty(u)) {
		if (unlinkat(dir, USE_FILE, 0) < 0 && errno != ENOENT)
			return negative_errno();
		return 0;
	}
	_cleanup_free_ char *text = pool_volume_use_to_json(u, p->boot_id, &len);
	return write_file_atomic_via(p->tmp_fd, dir, USE_FILE, text, len, 0600, 0);
}

PoolTarget *pool_volume_use_target(const PoolVolumeUse *u, const char *path)
{
	for (size_t i = 0; i < u->n_targets; i++)
		if (strcmp(u->targets[i].path, path) == 0)
			return &u->targets[i];
	return NULL;
}

void pool_volume_use_remove_target(PoolVolumeUse *u, const char *path)
{
	PoolTarget *t = pool_volume_use_target(u, path);
	if (!t)
		return;
	free(t->path);
	*t = u->targets[--u->n_targets];
}

void pool_volume_use_add_target(PoolVolumeUse *u, const PoolTarget *t)
{
	pool_volume_use_remove_target(u, t->path);
	u->targets = xrealloc(u->targets, (u->n_targets + 1) * sizeof(PoolTarget));
	u->targets[u->n_targets] = *t;
	u->targets[u->n_targets++].path = xstrdup(t->path);
}
