/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <sys/types.h>

/* Makes the directory path and any missing parents, each with mode (less the umask). Returns 0
 * when path is a directory afterwards (also when it was one already), -ENOTDIR when it or a
 * parent is something else, or mkdir's error. */
int mkdir_p(const char *path, mode_t mode);

/* Makes the missing parents of path, not path itself (a file about to be made there): mkdir_p()
 * of its directory. */
int mkdir_parents(const char *path, mode_t mode);
