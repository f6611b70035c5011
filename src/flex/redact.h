/* SPDX-License-Identifier: Apache-2.0 */
/* Keeping secrets out of what a driver printed before it reaches a message or a log. A driver
 * gets each secret base64-encoded in its options and may print it back in any form: as it got
 * it, decoded, inside a JSON string its own encoder escaped, as hex. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Every form of the secret value that a driver is likely to print: the value, its base64
 * (padded or not, standard or URL alphabet), the value as a JSON string escapes it (the minimal
 * escaping of jq and Python, Go's with <, >, &, U+2028 and U+2029, \u escapes of all non-ASCII,
 * "\/", upper-case hex digits; escaped twice), the base64 with "\/", and the value in hex,
 * lower and upper case. Appended to *forms (a strv), each once; nothing for "". Never fails. */
void flex_secret_forms(const char *value, char ***forms);

/* A copy of the len bytes of text in which every occurrence of a form (overlapping ones
 * merged) is replaced by "(redacted)". truncated says that text is the head of a longer output
 * cut at its end (the capture limit): then a form that begins in its last bytes and was cut
 * there goes too, so a secret is never half-shown. forms may be NULL. NUL-terminated; never
 * fails. */
char *flex_redact(const char *text, size_t len, bool truncated, char *const *forms);
