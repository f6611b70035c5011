/* SPDX-License-Identifier: Apache-2.0 */
/* The snapshot handlers (CreateSnapshot, DeleteSnapshot, ListSnapshots) and the GroupController
 * service on fake backends: the fields the CSI layer checks, its idempotency rules, its
 * in-flight keys, what it hands the backend and the replies it builds. No root, no disk. */
#include <string.h>

#include "csi-test.h"

static Call create_snapshot(Env *env, const char *name, const char *source, const char *more)
{
	return CALL(env, controller_create_snapshot, create_snapshot_request,
		    "{'name':'%s','source_volume_id':'%s'%s}", name, source, more);
}

static void test_create_fields(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);
	_cleanup_(call_done) Call no_name =
		CALL(env, controller_create_snapshot, create_snapshot_request,
		     "{'source_volume_id':'fake-vol-1'}");
	_cleanup_(call_done) Call bad_name = create_snapshot(env, "a/b", "fake-vol-1", "");
	_cleanup_(call_done) Call no_source =
		CALL(env, controller_create_snapshot, create_snapshot_request, "{'name':'s'}");
	_cleanup_(call_done) Call unknown_param =
		create_snapshot(env, "s", "fake-vol-1", ",'parameters':{'color':'blue'}");
	_cleanup_(call_done) Call bad_location =
		create_snapshot(env, "s", "fake-vol-1", ",'parameters':{'location':'tape'}");
	_cleanup_(call_done) Call no_equals = create_snapshot(
		env, "s", "fake-vol-1", ",'parameters':{'tagSpecification_1':'team'}");
	_cleanup_(call_done) Call no_key = create_snapshot(
		env, "s", "fake-vol-1", ",'parameters':{'tagSpecification_2':'=a'}");

	is_status(no_name, "INVALID_ARGUMENT", "name: missing", "CreateSnapshot without a name");
	is_status(bad_name, "INVALID_ARGUMENT",
		  "name: must be 1-128 printable bytes without '/' (got 3 bytes)",
		  "a name with '/'");
	is_status(no_source, "INVALID_ARGUMENT", "source_volume_id: missing",
		  "without a source volume");
	is_status(unknown_param, "INVALID_ARGUMENT",
		  "parameters: 'color' is not a snapshot parameter (want tagSpecification_N or "
		  "location)",
		  "a parameter that is not a tag");
	is_status(bad_location, "INVALID_ARGUMENT",
		  "parameters: location: want local (beside the volume) or store (the snapshot "
		  "store), got 'tape'",
		  "a location that is neither local nor store");
	is_status(no_equals, "INVALID_ARGUMENT",
		  "parameters: tagSpecification_1: want key=value, got 'team'",
		  "a tag without '='");
	is_status(no_key, "INVALID_ARGUMENT",
		  "parameters: tagSpecification_2: want key=value, got '=a'",
		  "a tag without a key");
	is_int(fake_calls(env->fake, FAKE_CREATE_SNAPSHOT), 0,
	       "the backend saw none of the refused requests");
}

static void test_create_limits(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);
	const char *json = "{'name':'s','source_volume_id':'fake-vol-1'}";
	Csi__V1__CreateSnapshotRequest *r;

	r = (void *)request_new(&csi__v1__create_snapshot_request__descriptor, json);
	free(r->name);
	r->name = xstrdup("snap-\xff");
	_cleanup_(call_done) Call name =
		call_message(&env->d, controller_create_snapshot, &r->base);
	is_status(name, "INVALID_ARGUMENT", "name: not valid UTF-8",
		  "a snapshot name that is not UTF-8");

	r = (void *)request_new(&csi__v1__create_snapshot_request__descriptor, json);
	pbmap_add_many((void ***)&r->parameters, &r->n_parameters,
		       &csi__v1__create_snapshot_request__parameters_entry__descriptor, 100000,
		       "tagSpecification_", "k=v");
	_cleanup_(call_done) Call many =
		call_message(&env->d, controller_create_snapshot, &r->base);
	is_status(many, "INVALID_ARGUMENT", "parameters: at most 512 entries, got 100000",
		  "CreateSnapshot with 100000 parameters");

	r = (void *)request_new(&csi__v1__create_snapshot_request__descriptor, json);
	pbmap_add_many((void ***)&r->parameters, &r->n_parameters,
		       &csi__v1__create_snapshot_request__parameters_entry__descriptor, 1,
		       "tagSpecification_", "noequals");
	pbmap_add_many((void ***)&r->parameters, &r->n_parameters,
		       &csi__v1__create_snapshot_request__parameters_entry__descriptor, 50,
		       "tagSpecification_", "k=v");
	_cleanup_(call_done) Call tags =
		call_message(&env->d, controller_create_snapshot, &r->base);
	is_status(tags, "INVALID_ARGUMENT",
		  "parameters: tagSpecification_N: wanted at most 50 tags, got 51",
		  "51 snapshot tags: refused on the count, before the malformed one is read");

	Csi__V1__CreateVolumeGroupSnapshotRequest *g =
		(void *)request_new(&csi__v1__create_volume_group_snapshot_request__descriptor,
				    "{'name':'g','source_volume_ids':['fake-vol-1']}");
	free(g->name);
	g->name = xstrdup("group-\xed\xa0\x80");
	_cleanup_(call_done) Call group =
		call_message(&env->d, group_controller_create_snapshot, &g->base);
	is_status(group, "INVALID_ARGUMENT", "name: not valid UTF-8",
		  "a group snapshot name that is not UTF-8 (a surrogate)");
	is_int(fake_calls(env->fake, FAKE_CREATE_SNAPSHOT), 0, "no snapshot was made");
	is_int(fake_calls(env->fake, FAKE_CREATE_GROUP), 0, "no group was made");
}

static void test_create(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);

	fake_add_volume(env->fake, "fake-vol-1", "one", 2 * FAKE_GIB);
	fake_add_volume(env->fake, "fake-vol-2", "two", FAKE_GIB);
	_cleanup_(call_done) Call c =
		create_snapshot(env, "snap-a", "fake-vol-1",
				",'parameters':{'tagSpecification_1':'team=a',"
				"'csi.storage.k8s.io/volumesnapshot/name':'s1'}");

	is_reply(c,
		 "{'snapshot':{'size_bytes':2147483648,'snapshot_id':'fake-snap-1',"
		 "'source_volume_id':'fake-vol-1',"
		 "'creation_time':{'seconds':1700000003,'nanos':123456789},'ready_to_use':true}}",
		 "CreateSnapshot: id, source, size, creation time and readiness from the backend");
	is_str(fake_last(env->fake, FAKE_CREATE_SNAPSHOT, "params.tagSpecification_1"), "team=a",
	       "the backend gets the tags");
	ok(!fake_last(env->fake, FAKE_CREATE_SNAPSHOT,
		      "params.csi.storage.k8s.io/volumesnapshot/name"),
	   "not the snapshotter's own keys");

	_cleanup_(call_done) Call again = create_snapshot(env, "snap-a", "fake-vol-1", "");
	_cleanup_(call_done) Call other = create_snapshot(env, "snap-a", "fake-vol-2", "");
	_cleanup_free_ char *first = reply_text(&c), *second = reply_text(&again);
	is_ok(again, "the same CreateSnapshot again: success");
	ok(first && second && strcmp(first, second) == 0, "with the same snapshot: %s", second);
	is_status(other, "ALREADY_EXISTS",
		  "snapshot 'snap-a' exists for another volume (fake-vol-1)",
		  "the name again for another volume: ALREADY_EXISTS");

	_cleanup_(call_done) Call missing = create_snapshot(env, "snap-b", "fake-vol-9", "");
	is_status(missing, "NOT_FOUND", "source_volume_id: volume fake-vol-9 not found",
		  "of a volume that does not exist: the backend's NOT_FOUND");

	fake_add_volume(env->other, "other-vol-1", "theirs", FAKE_GIB);
	_cleanup_(call_done) Call theirs = create_snapshot(env, "snap-c", "other-vol-1", "");
	is_status(theirs, "NOT_FOUND", "source_volume_id: volume other-vol-1 not found",
		  "snapshots are made by the default backend, whatever claims the source");
	is_int(fake_calls(env->other, FAKE_CREATE_SNAPSHOT), 0, "the other backend is not asked");

	fake_fail(env->fake, FAKE_CREATE_SNAPSHOT, -ENOSPC, "fake: no room for snapshot snap-d");
	_cleanup_(call_done) Call full = create_snapshot(env, "snap-d", "fake-vol-1", "");
	is_status(full, "RESOURCE_EXHAUSTED", "fake: no room for snapshot snap-d",
		  "a backend failure: its errno and message");
	fake_drop(env->fake, FAKE_CREATE_SNAPSHOT);
	_cleanup_(call_done) Call none = create_snapshot(env, "snap-d", "fake-vol-1", "");
	is_status(none, "UNIMPLEMENTED", "the fake backend has no create_snapshot",
		  "a backend without snapshots: UNIMPLEMENTED");
}

static void test_create_in_flight(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);
	Background first = {};

	fake_add_volume(env->fake, "fake-vol-1", "one", FAKE_GIB);
	fake_hold(env->fake, FAKE_CREATE_SNAPSHOT);
	BACKGROUND(&first, env, controller_create_snapshot, create_snapshot_request,
		   "{'name':'snap-x','source_volume_id':'fake-vol-1'}");
	fake_wait_held(env->fake, FAKE_CREATE_SNAPSHOT);

	_cleanup_(call_done) Call same = create_snapshot(env, "snap-x", "fake-vol-1", "");
	_cleanup_(call_done) Call other = create_snapshot(env, "snap-y", "fake-vol-1", "");
	is_status(same, "ABORTED", "a CreateSnapshot for 'snap-x' is already in progress",
		  "CreateSnapshot of a name being made: ABORTED");
	is_ok(other, "another name meanwhile: served");
	fake_release(env->fake, FAKE_CREATE_SNAPSHOT);
	background_join(&first);
	is_ok(first.call, "the first call completes");
	call_done(&first.call);

	/* Names and ids are keyed apart: a name that is also an id blocks only its own kind. */
	fake_hold(env->fake, FAKE_CREATE_SNAPSHOT);
	BACKGROUND(&first, env, controller_create_snapshot, create_snapshot_request,
		   "{'name':'fake-snap-2','source_volume_id':'fake-vol-1'}");
	fake_wait_held(env->fake, FAKE_CREATE_SNAPSHOT);
	_cleanup_(call_done) Call by_id =
		CALL(env, controller_delete_snapshot, delete_snapshot_request,
		     "{'snapshot_id':'fake-snap-2'}");
	is_ok(by_id, "DeleteSnapshot of an id that is the name being created: served");
	fake_release(env->fake, FAKE_CREATE_SNAPSHOT);
	background_join(&first);
	call_done(&first.call);

	fake_hold(env->fake, FAKE_DELETE_SNAPSHOT);
	BACKGROUND(&first, env, controller_delete_snapshot, delete_snapshot_request,
		   "{'snapshot_id':'fake-snap-1'}");
	fake_wait_held(env->fake, FAKE_DELETE_SNAPSHOT);
	_cleanup_(call_done) Call delete =
		CALL(env, controller_delete_snapshot, delete_snapshot_request,
		     "{'snapshot_id':'fake-snap-1'}");
	is_status(delete, "ABORTED", "an operation on snapshot fake-snap-1 is in progress",
		  "DeleteSnapshot of a snapshot being deleted: ABORTED");
	fake_release(env->fake, FAKE_DELETE_SNAPSHOT);
	background_join(&first);
	is_ok(first.call, "the first delete completes");
	call_done(&first.call);
}

static void test_delete(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);

	fake_add_snapshot(env->fake, "fake-snap-1", "s1", "fake-vol-1", FAKE_GIB);
	BackendSnapshot *grouped =
		fake_add_snapshot(env->fake, "fake-snap-2", "s2", "fake-vol-1", FAKE_GIB);
	free(grouped->group_id);
	grouped->group_id = xstrdup("fake-group-1");
	_cleanup_(call_done) Call none =
		CALL(env, controller_delete_snapshot, delete_snapshot_request, "{}");
	_cleanup_(call_done) Call gone =
		CALL(env, controller_delete_snapshot, delete_snapshot_request,
		     "{'snapshot_id':'fake-snap-1'}");
	_cleanup_(call_done) Call again =
		CALL(env, controller_delete_snapshot, delete_snapshot_request,
		     "{'snapshot_id':'fake-snap-1'}");
	_cleanup_(call_done) Call member =
		CALL(env, controller_delete_snapshot, delete_snapshot_request,
		     "{'snapshot_id':'fake-snap-2'}");

	is_status(none, "INVALID_ARGUMENT", "snapshot_id: missing", "DeleteSnapshot without an id");
	is_reply(gone, "{}", "DeleteSnapshot");
	ok(env->fake->n_snapshots == 1 && strcmp(env->fake->snapshots[0]->id, "fake-snap-2") == 0,
	   "the backend deleted that one");
	is_reply(again, "{}", "DeleteSnapshot of a snapshot that is gone: success");
	is_status(member, "FAILED_PRECONDITION",
		  "snapshot fake-snap-2 is a member of group snapshot fake-group-1: delete the "
		  "group",
		  "a member of a group: the backend's FAILED_PRECONDITION");

	fake_drop(env->fake, FAKE_DELETE_SNAPSHOT);
	_cleanup_(call_done) Call unimplemented =
		CALL(env, controller_delete_snapshot, delete_snapshot_request,
		     "{'snapshot_id':'fake-snap-1'}");
	is_status(unimplemented, "UNIMPLEMENTED", "the fake backend has no delete_snapshot",
		  "a backend without delete_snapshot: UNIMPLEMENTED");
}

static void test_list(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);

	fake_add_snapshot(env->fake, "fake-snap-1", "s1", "fake-vol-1", FAKE_GIB);
	fake_add_snapshot(env->fake, "fake-snap-2", "s2", "fake-vol-2", 2 * FAKE_GIB);
	fake_add_snapshot(env->fake, "fake-snap-3", "s3", "fake-vol-1", FAKE_GIB)->ready = false;

	_cleanup_(call_done) Call negative =
		CALL(env, controller_list_snapshots, list_snapshots_request, "{'max_entries':-3}");
	is_status(negative, "INVALID_ARGUMENT", "max_entries: must not be negative",
		  "ListSnapshots with a negative max_entries");

	_cleanup_(call_done) Call page1 =
		CALL(env, controller_list_snapshots, list_snapshots_request, "{'max_entries':2}");
	is_reply(page1,
		 "{'entries':["
		 "{'snapshot':{'size_bytes':1073741824,'snapshot_id':'fake-snap-1',"
		 "'source_volume_id':'fake-vol-1',"
		 "'creation_time':{'seconds':1700000001,'nanos':123456789},'ready_to_use':true}},"
		 "{'snapshot':{'size_bytes':2147483648,'snapshot_id':'fake-snap-2',"
		 "'source_volume_id':'fake-vol-2',"
		 "'creation_time':{'seconds':1700000002,'nanos':123456789},'ready_to_use':true}}],"
		 "'next_token':'fake-token-2'}",
		 "ListSnapshots, a page of 2: the snapshots and the next token");
	ok(!*fake_last(env->fake, FAKE_LIST_SNAPSHOTS, "source_volume_id") &&
		   !*fake_last(env->fake, FAKE_LIST_SNAPSHOTS, "snapshot_id"),
	   "no filter: both passed on empty");

	_cleanup_(call_done) Call page2 =
		CALL(env, controller_list_snapshots, list_snapshots_request,
		     "{'max_entries':2,'starting_token':'fake-token-2'}");
	is_reply(page2,
		 "{'entries':[{'snapshot':{'size_bytes':1073741824,'snapshot_id':'fake-snap-3',"
		 "'source_volume_id':'fake-vol-1',"
		 "'creation_time':{'seconds':1700000003,'nanos':123456789}}}]}",
		 "the next page: the last one (not ready), no next token");

	_cleanup_(call_done) Call of_volume =
		CALL(env, controller_list_snapshots, list_snapshots_request,
		     "{'source_volume_id':'fake-vol-1'}");
	const Csi__V1__ListSnapshotsResponse *r = REPLY(of_volume, Csi__V1__ListSnapshotsResponse);
	ok(r && r->n_entries == 2 &&
		   strcmp(r->entries[1]->snapshot->snapshot_id, "fake-snap-3") == 0,
	   "by source volume");
	is_str(fake_last(env->fake, FAKE_LIST_SNAPSHOTS, "source_volume_id"), "fake-vol-1",
	       "the filter is passed on");

	_cleanup_(call_done) Call one = CALL(env, controller_list_snapshots, list_snapshots_request,
					     "{'snapshot_id':'fake-snap-2'}");
	r = REPLY(one, Csi__V1__ListSnapshotsResponse);
	ok(r && r->n_entries == 1 &&
		   strcmp(r->entries[0]->snapshot->snapshot_id, "fake-snap-2") == 0,
	   "by snapshot id");
	is_str(fake_last(env->fake, FAKE_LIST_SNAPSHOTS, "snapshot_id"), "fake-snap-2",
	       "the id is passed on");

	_cleanup_(call_done) Call bogus = CALL(env, controller_list_snapshots,
					       list_snapshots_request, "{'starting_token':'zz'}");
	is_status(bogus, "ABORTED", "starting_token: 'zz' is not a token ListSnapshots gave",
		  "a token the backend never gave: ABORTED");

	fake_drop(env->fake, FAKE_LIST_SNAPSHOTS);
	_cleanup_(call_done) Call unimplemented =
		CALL(env, controller_list_snapshots, list_snapshots_request, "{}");
	is_status(unimplemented, "UNIMPLEMENTED", "the fake backend has no list_snapshots",
		  "a backend without list_snapshots: UNIMPLEMENTED");
}

static void test_group_capabilities(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);
	_cleanup_(call_done) Call c = CALL(env, group_controller_get_capabilities,
					   group_controller_get_capabilities_request, "{}");

	is_reply(c, "{'capabilities':[{'rpc':{'type':'CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT'}}]}",
		 "GroupControllerGetCapabilities");
}

static Call create_group(Env *env, const char *name, const char *sources, const char *more)
{
	return CALL(env, group_controller_create_snapshot, create_volume_group_snapshot_request,
		    "{'name':'%s','source_volume_ids':[%s]%s}", name, sources, more);
}

static void test_group_create(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);

	fake_add_volume(env->fake, "fake-vol-1", "one", FAKE_GIB);
	fake_add_volume(env->fake, "fake-vol-2", "two", 2 * FAKE_GIB);
	_cleanup_(call_done) Call no_name =
		CALL(env, group_controller_create_snapshot, create_volume_group_snapshot_request,
		     "{'source_volume_ids':['fake-vol-1']}");
	_cleanup_(call_done) Call no_sources = create_group(env, "g", "", "");
	_cleanup_(call_done) Call bad_param =
		create_group(env, "g", "'fake-vol-1'", ",'parameters':{'iops':'100'}");
	_cleanup_(call_done) Call elsewhere =
		create_group(env, "g", "'fake-vol-1'", ",'parameters':{'location':'elsewhere'}");
	is_status(no_name, "INVALID_ARGUMENT", "name: missing",
		  "CreateVolumeGroupSnapshot without a name");
	is_status(no_sources, "INVALID_ARGUMENT", "source_volume_ids: at least one is required",
		  "without source volumes");
	is_status(bad_param, "INVALID_ARGUMENT",
		  "parameters: 'iops' is not a snapshot parameter (want tagSpecification_N or "
		  "location)",
		  "a parameter that is not a tag");
	is_status(elsewhere, "INVALID_ARGUMENT",
		  "parameters: location: want local (beside the volume) or store (the snapshot "
		  "store), got 'elsewhere'",
		  "a location that is neither local nor store");
	is_int(fake_calls(env->fake, FAKE_CREATE_GROUP), 0, "the backend saw none of them");

	_cleanup_(call_done) Call c = create_group(env, "g1", "'fake-vol-1','fake-vol-2'",
						   ",'parameters':{'tagSpecification_1':'a=b',"
						   "'location':'store'}");
	is_reply(c,
		 "{'group_snapshot':{'group_snapshot_id':'fake-group-1',"
		 "'creation_time':{'seconds':1700000003,'nanos':123456789},'ready_to_use':true,"
		 "'snapshots':["
		 "{'size_bytes':1073741824,'snapshot_id':'fake-snap-2',"
		 "'source_volume_id':'fake-vol-1',"
		 "'creation_time':{'seconds':1700000003,'nanos':123456789},'ready_to_use':true,"
		 "'group_snapshot_id':'fake-group-1'},"
		 "{'size_bytes':2147483648,'snapshot_id':'fake-snap-3',"
		 "'source_volume_id':'fake-vol-2',"
		 "'creation_time':{'seconds':1700000003,'nanos':123456789},'ready_to_use':true,"
		 "'group_snapshot_id':'fake-group-1'}]}}",
		 "CreateVolumeGroupSnapshot: the group and its members, each naming the group");
	is_str(fake_last(env->fake, FAKE_CREATE_GROUP, "volume_ids"), "fake-vol-1,fake-vol-2",
	       "the backend gets the source volumes in order");
	is_str(fake_last(env->fake, FAKE_CREATE_GROUP, "params.tagSpecification_1"), "a=b",
	       "and the tags");
	is_str(fake_last(env->fake, FAKE_CREATE_GROUP, "location"), "store",
	       "and the location, which the backend takes or refuses");

	_cleanup_(call_done) Call again = create_group(env, "g1", "'fake-vol-1','fake-vol-2'", "");
	_cleanup_(call_done) Call order = create_group(env, "g1", "'fake-vol-2','fake-vol-1'", "");
	_cleanup_(call_done) Call fewer = create_group(env, "g1", "'fake-vol-1'", "");
	_cleanup_free_ char *first = reply_text(&c), *second = reply_text(&again);
	is_ok(again, "the same request again: success");
	ok(first && second && strcmp(first, second) == 0, "with the same group");
	is_status(order, "ALREADY_EXISTS", "group snapshot 'g1' exists for other source volumes",
		  "the name with the sources in another order: ALREADY_EXISTS");
	is_status(fewer, "ALREADY_EXISTS", "group snapshot 'g1' exists for other source volumes",
		  "with fewer sources: ALREADY_EXISTS");

	fake_lose_snapshot(env->fake, "fake-snap-3");
	_cleanup_(call_done) Call broken = create_group(env, "g1", "'fake-vol-1','fake-vol-2'", "");
	is_status(broken, "ALREADY_EXISTS", "group snapshot 'g1' exists for other source volumes",
		  "the same request for a group that lost a member: ALREADY_EXISTS, not the broken "
		  "group");

	_cleanup_(call_done) Call missing =
		create_group(env, "g2", "'fake-vol-1','fake-vol-9'", "");
	is_status(missing, "NOT_FOUND", "source_volume_ids: volume fake-vol-9 not found",
		  "a source volume that does not exist: the backend's NOT_FOUND");

	fake_drop(env->fake, FAKE_CREATE_GROUP);
	_cleanup_(call_done) Call none = create_group(env, "g3", "'fake-vol-1'", "");
	is_status(none, "UNIMPLEMENTED", "the fake backend has no create_group",
		  "a backend without groups: UNIMPLEMENTED");
}

static void test_group_in_flight(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);
	Background first = {};

	fake_add_volume(env->fake, "fake-vol-1", "one", FAKE_GIB);
	fake_hold(env->fake, FAKE_CREATE_GROUP);
	BACKGROUND(&first, env, group_controller_create_snapshot,
		   create_volume_group_snapshot_request,
		   "{'name':'g','source_volume_ids':['fake-vol-1']}");
	fake_wait_held(env->fake, FAKE_CREATE_GROUP);
	_cleanup_(call_done) Call same = create_group(env, "g", "'fake-vol-1'", "");
	is_status(same, "ABORTED", "a CreateVolumeGroupSnapshot for 'g' is in progress",
		  "CreateVolumeGroupSnapshot of a name being made: ABORTED");
	fake_release(env->fake, FAKE_CREATE_GROUP);
	background_join(&first);
	is_ok(first.call, "the first call completes");
	call_done(&first.call);

	fake_hold(env->fake, FAKE_DELETE_GROUP);
	BACKGROUND(&first, env, group_controller_delete_snapshot,
		   delete_volume_group_snapshot_request, "{'group_snapshot_id':'fake-group-1'}");
	fake_wait_held(env->fake, FAKE_DELETE_GROUP);
	_cleanup_(call_done) Call delete =
		CALL(env, group_controller_delete_snapshot, delete_volume_group_snapshot_request,
		     "{'group_snapshot_id':'fake-group-1'}");
	_cleanup_(call_done) Call get =
		CALL(env, group_controller_get_snapshot, get_volume_group_snapshot_request,
		     "{'group_snapshot_id':'fake-group-1'}");
	is_status(delete, "ABORTED", "an operation on group snapshot fake-group-1 is in progress",
		  "DeleteVolumeGroupSnapshot of a group being deleted: ABORTED");
	is_ok(get, "GetVolumeGroupSnapshot meanwhile takes no key: served");
	fake_release(env->fake, FAKE_DELETE_GROUP);
	background_join(&first);
	is_ok(first.call, "the delete completes");
	call_done(&first.call);
}

static void test_group_delete_get(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);

	fake_add_volume(env->fake, "fake-vol-1", "one", FAKE_GIB);
	fake_add_volume(env->fake, "fake-vol-2", "two", FAKE_GIB);
	_cleanup_(call_done) Call made = create_group(env, "g", "'fake-vol-1','fake-vol-2'", "");
	is_ok(made, "a group of two (fake-snap-2, fake-snap-3)");

	_cleanup_(call_done) Call get_none =
		CALL(env, group_controller_get_snapshot, get_volume_group_snapshot_request, "{}");
	_cleanup_(call_done) Call get_unknown =
		CALL(env, group_controller_get_snapshot, get_volume_group_snapshot_request,
		     "{'group_snapshot_id':'fake-group-9'}");
	_cleanup_(call_done) Call get =
		CALL(env, group_controller_get_snapshot, get_volume_group_snapshot_request,
		     "{'group_snapshot_id':'fake-group-1',"
		     "'snapshot_ids':['fake-snap-3','fake-snap-2']}");
	_cleanup_(call_done) Call get_wrong =
		CALL(env, group_controller_get_snapshot, get_volume_group_snapshot_request,
		     "{'group_snapshot_id':'fake-group-1','snapshot_ids':['fake-snap-2']}");
	_cleanup_free_ char *made_text = reply_text(&made), *get_text = reply_text(&get);

	is_status(get_none, "INVALID_ARGUMENT", "group_snapshot_id: missing",
		  "GetVolumeGroupSnapshot without an id");
	is_status(get_unknown, "NOT_FOUND",
		  "group_snapshot_id: group snapshot fake-group-9 not found",
		  "an unknown group: the backend's NOT_FOUND");
	is_ok(get, "GetVolumeGroupSnapshot with its members' ids");
	ok(made_text && get_text && strcmp(made_text, get_text) == 0,
	   "the same group as CreateVolumeGroupSnapshot answered");
	is_str(fake_last(env->fake, FAKE_GET_GROUP, "snapshot_ids"), "fake-snap-2",
	       "the member ids are the backend's to check");
	is_status(get_wrong, "INVALID_ARGUMENT",
		  "snapshot_ids: not the members of group snapshot fake-group-1",
		  "ids that are not its members: the backend's INVALID_ARGUMENT");

	_cleanup_(call_done) Call del_none = CALL(env, group_controller_delete_snapshot,
						  delete_volume_group_snapshot_request, "{}");
	_cleanup_(call_done) Call del_wrong =
		CALL(env, group_controller_delete_snapshot, delete_volume_group_snapshot_request,
		     "{'group_snapshot_id':'fake-group-1','snapshot_ids':['fake-snap-9']}");
	_cleanup_(call_done) Call del =
		CALL(env, group_controller_delete_snapshot, delete_volume_group_snapshot_request,
		     "{'group_snapshot_id':'fake-group-1'}");
	_cleanup_(call_done) Call del_again =
		CALL(env, group_controller_delete_snapshot, delete_volume_group_snapshot_request,
		     "{'group_snapshot_id':'fake-group-1'}");
	is_status(del_none, "INVALID_ARGUMENT", "group_snapshot_id: missing",
		  "DeleteVolumeGroupSnapshot without an id");
	is_status(del_wrong, "INVALID_ARGUMENT",
		  "snapshot_ids: not the members of group snapshot fake-group-1",
		  "with ids that are not its members: refused");
	is_reply(del, "{}", "DeleteVolumeGroupSnapshot");
	is_int(env->fake->n_snapshots, 0, "its members went with it");
	is_reply(del_again, "{}", "a group that is gone: success");

	fake_drop(env->fake, FAKE_GET_GROUP);
	fake_drop(env->fake, FAKE_DELETE_GROUP);
	_cleanup_(call_done) Call get_unimplemented =
		CALL(env, group_controller_get_snapshot, get_volume_group_snapshot_request,
		     "{'group_snapshot_id':'fake-group-1'}");
	_cleanup_(call_done) Call del_unimplemented =
		CALL(env, group_controller_delete_snapshot, delete_volume_group_snapshot_request,
		     "{'group_snapshot_id':'fake-group-1'}");
	is_status(get_unimplemented, "UNIMPLEMENTED", "the fake backend has no get_group",
		  "a backend without get_group: UNIMPLEMENTED");
	is_status(del_unimplemented, "UNIMPLEMENTED", "the fake backend has no delete_group",
		  "a backend without delete_group: UNIMPLEMENTED");
}

int main(void)
{
	test_create_fields();
	test_create_limits();
	test_create();
	test_create_in_flight();
	test_delete();
	test_list();
	test_group_capabilities();
	test_group_create();
	test_group_in_flight();
	test_group_delete_get();
	return tap_done();
}
