/* SPDX-License-Identifier: Apache-2.0 */
/* Each fuzz target defines this; libFuzzer drives it in a fuzzing build, replay.c runs it over
 * the checked-in corpus in every test run. */
#pragma once

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Aborts (a finding) when an invariant of the target does not hold. */
#define FUZZ_ASSERT(x)                    \
	do {                              \
		if (!(x))                 \
			__builtin_trap(); \
	} while (0)
