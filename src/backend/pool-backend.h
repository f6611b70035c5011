/* SPDX-License-Identifier: Apache-2.0 */
/* The pool backend (backend.h's table over the pool). */
#pragma once

#include "backend.h"
#include "pool.h"

/* The pool a pool backend serves (borrowed). */
Pool *pool_backend_pool(Backend *b);
