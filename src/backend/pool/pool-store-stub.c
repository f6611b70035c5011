/* SPDX-License-Identifier: Apache-2.0 */
/* Until the pool's store (pool-store.h) is here. */
#include <string.h>

#include "error-util.h"
#include "pool-backend.h"
#include "pool-restore.h"
#include "store.h"

int pool_backend_store(PoolBackend *pb, const Strmap *secrets, Store **ret, char **ret_error)
{
	(void)pb;
	(void)secrets;
	(void)ret;
	return errorf(ret_error, -ENOMEDIUM, "volplugd has no snapshot store");
}

const char *pool_store_id_of(const char *snapshot_id)
{
	if (strncmp(snapshot_id, "store:", 6) != 0 || !store_id_valid(snapshot_id + 6))
		return NULL;
	return snapshot_id + 6;
}
