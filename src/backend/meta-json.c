/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "meta-json.h"

const char *meta_json_string(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

int meta_json_u64(json_t *o, const char *key, uint64_t *ret)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -EBADMSG;
	*ret = (uint64_t)json_integer_value(v);
	return 0;
}

char *meta_json_dump(json_t *o, size_t *ret_len)
{
	char *s = json_dumps(o, JSON_INDENT(1) | JSON_SORT_KEYS);
	json_decref(o);
	if (!s)
		abort(); /* only on out of memory */
	*ret_len = strlen(s);
	return s;
}
