/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdint.h>
#include <time.h>

typedef uint64_t usec_t;
#define USEC_INFINITY ((usec_t)UINT64_MAX)
#define USEC_PER_MSEC ((usec_t)1000ULL)
#define USEC_PER_SEC ((usec_t)1000000ULL)
#define NSEC_PER_USEC ((uint64_t)1000ULL)

/* Microseconds on the given clock. */
static inline usec_t now_usec(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (usec_t)ts.tv_sec * USEC_PER_SEC + (usec_t)ts.tv_nsec / NSEC_PER_USEC;
}

/* A poll() timeout in ms from now until `until` (USEC_INFINITY: -1, forever), rounded up so
 * that the wake-up is never early, and capped at a minute. */
static inline int poll_timeout_ms(usec_t now, usec_t until)
{
	if (until == USEC_INFINITY)
		return -1;
	if (until <= now)
		return 0;
	usec_t ms = (until - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC;
	return ms > 60000 ? 60000 : (int)ms;
}

/* Parses "1.5s", "250ms", "2m", "10us" or a plain number of seconds. Returns 0 or -EINVAL. */
int parse_duration(const char *s, usec_t *ret);

/* The deadline of the request the calling thread serves (CLOCK_MONOTONIC), for the layers
 * below the one that received it: the CSI layer sets it around each handler, a backend reads
 * it to bound its waits and retries. USEC_INFINITY when none is set or the client gave none. */
void call_deadline_set(usec_t deadline);
usec_t call_deadline(void);
