/* SPDX-License-Identifier: Apache-2.0 */
/* Pool IDs derive from CSI names, and a pool on disk is found again only when the same name
 * gives the same ID: these pairs were computed by the pool that made today's pools and must
 * never change. */
#include "macro.h"
#include "pool.h"
#include "tap.h"

static const struct {
	const char *name, *id;
} volumes[] = {
	{"data", "vol-a82daff2fec651b7"},
	{"a", "vol-82a2a958a9bece5b"},
	{"pvc-0b7e3c1a-5f2d-4c6e-9a8b-1d2e3f4a5b6c", "vol-cffc3f607826efc7"},
	{"caf\xc3\xa9 1", "vol-c38c61cad25b907d"},
};

int main(void)
{
	char id[POOL_ID_MAX];

	for (size_t i = 0; i < ELEMENTSOF(volumes); i++) {
		pool_volume_id_for_name(volumes[i].name, id);
		is_str(id, volumes[i].id, "volume \"%s\" keeps its ID", volumes[i].name);
	}
	pool_snapshot_id_for_name("snap-1", id);
	is_str(id, "snap-5d108aca79a1f5a6", "snapshot \"snap-1\" keeps its ID");
	pool_snapshot_id_for_name("data", id);
	is_str(id, "snap-a82daff2fec651b7", "a snapshot's ID has the volume's digits for one name");
	pool_group_id_for_name("data", id);
	is_str(id, "group-a82daff2fec651b7", "group \"data\" keeps its ID");
	return tap_done();
}
