/* SPDX-License-Identifier: Apache-2.0 */
/* What the pool's own modules share beyond pool.h; not for other layers. */
#pragma once

#include "pool.h"

/* Opens volumes/<id> (O_DIRECTORY, never following a symlink): -ENOENT for a bad or unknown
 * ID. Caller closes. */
int pool_volume_dir_open(const Pool *p, const char *id);

/* Whether volumes/<id> is in place (a volume being deleted is renamed away first). */
bool pool_volume_present(const Pool *p, const char *id);

/* The pool's tmp/ directory (borrowed fd): files are made there and renamed into place. */
int pool_tmp_dir(const Pool *p);

/* This boot of the machine (/proc/sys/kernel/random/boot_id), read at open. */
const char *pool_boot_id(const Pool *p);
