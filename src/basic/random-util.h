/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdint.h>

/* 64 bits for names that must not collide (temporary files, test pod UIDs): getrandom(), which
 * blocks only in early boot until the kernel's pool is ready; should it fail, the pid mixed
 * with the monotonic clock. Not for secrets. */
uint64_t random_u64(void);
