/* SPDX-License-Identifier: Apache-2.0 */
/* Use records (node-use.h) of the pool's volumes: volumes/<id>/node.json under node.lock. */
#include <fcntl.h>

#include "alloc.h"
#include "log.h"
#include "pool-internal.h"

int pool_volume_use_lock_at(int dir_fd, int *ret_lock_fd)
{
	return node_use_lock_at(dir_fd, USE_LOCK, ret_lock_fd);
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

int pool_volume_use_load(Pool *p, const char *id, NodeUse *ret)
{
	*ret = (NodeUse){};
	_cleanup_close_ int dir = pool_volume_dir_open(p, id);
	if (dir < 0)
		return dir;
	int r = node_use_load_at(dir, USE_FILE, p->boot_id, ret);
	if (r < 0)
		return log_debug_errno(r, "pool: volumes/%s/" USE_FILE " is damaged", id);
	return 0;
}

/* Written through tmp/ like every record of the pool: any temporary a crash leaves is where the
 * pool's recovery looks. On a full filesystem with the reserve, so that a volume can still be
 * unpublished and unstaged there. */
int pool_volume_use_save(Pool *p, const char *id, const NodeUse *u, bool durable)
{
	_cleanup_close_ int dir = pool_volume_dir_open(p, id);
	if (dir < 0)
		return dir;
	int r = node_use_save_at(p->tmp_fd, dir, USE_FILE, p->boot_id, u, durable);
	if (r == -ENOSPC && pool_reserve_release(p))
		r = node_use_save_at(p->tmp_fd, dir, USE_FILE, p->boot_id, u, durable);
	return r;
}
