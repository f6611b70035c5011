/* SPDX-License-Identifier: Apache-2.0 */
/* The Flexvolume answer parser: whatever a driver prints on stdout and stderr (split at the
 * first NUL of the input) is parsed or refused, never crashes. */
#include <string.h>

#include "call.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *out = (const char *)data, *err = "";
	size_t out_len = size, err_len = 0;
	const char *nul = memchr(data, 0, size);
	FlexReply reply = {};

	if (nul) {
		out_len = (size_t)(nul - out);
		err = nul + 1;
		err_len = size - out_len - 1;
	}
	if (flex_reply_parse(out, out_len, err, err_len, &reply) == 0)
		flex_reply_done(&reply);
	return 0;
}
