/* SPDX-License-Identifier: Apache-2.0 */
#include <sys/random.h>
#include <unistd.h>

#include "hash-util.h"
#include "random-util.h"
#include "time-util.h"

uint64_t random_u64(void)
{
	uint64_t v;

	if (getrandom(&v, sizeof(v), 0) == sizeof(v))
		return v;
	return hash_mix64((uint64_t)getpid() << 32 ^ now_usec(CLOCK_MONOTONIC));
}
