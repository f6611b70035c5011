/* SPDX-License-Identifier: Apache-2.0 */
#include "random-util.h"
#include "tap.h"

int main(void)
{
	uint64_t seen[64];
	size_t repeats = 0;
	uint64_t all_or = 0, all_and = UINT64_MAX;

	for (size_t i = 0; i < 64; i++) {
		seen[i] = random_u64();
		for (size_t k = 0; k < i; k++)
			repeats += seen[k] == seen[i];
		all_or |= seen[i];
		all_and &= seen[i];
	}
	is_int(repeats, 0, "64 values, no repeat");
	ok(all_or == UINT64_MAX && all_and == 0, "every bit seen both set and clear");
	return tap_done();
}
