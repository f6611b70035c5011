/* SPDX-License-Identifier: Apache-2.0 */
/* The Controller service's volume handlers (CreateVolume, DeleteVolume,
 * ValidateVolumeCapabilities, ListVolumes, ControllerGetVolume, GetCapacity,
 * ControllerGetCapabilities, ControllerPublishVolume, ControllerUnpublishVolume,
 * ControllerExpandVolume, ControllerModifyVolume) on fake backends: each field the CSI layer
 * checks, its idempotency rules, its in-flight keys, the backend it picks, what it hands the
 * backend and the reply it builds. No root, no disk. */
#include <string.h>

#include "csi-test.h"

#define GIB_2 "2147483648"

/* CreateVolume of name with one SINGLE_NODE_WRITER ext4 capability, and more fields (JSON
 * starting with ',', or ""). */
static Call create(Env *env, const char *name, const char *more)
{
	return CALL(env, controller_create_volume, create_volume_request,
		    "{'name':'%s','volume_capabilities':[" CAP_SNW "]%s}", name, more);
}

static void test_create_name(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);
	_cleanup_(call_done) Call none = CALL(env, controller_create_volume, create_volume_request,
					      "{'volume_capabilities':[" CAP_SNW "]}");
	_cleanup_(call_done) Call empty = create(env, "", "");
	_cleanup_(call_done) Call slash = create(env, "a/b", "");
	_cleanup_(call_done) Call dot = create(env, ".", "");
	_cleanup_(call_done) Call dots = create(env, "..", "");
	_cleanup_(call_done) Call control = create(env, "a\\u0007b", "");
	_cleanup_(call_done) Call del = create(env, "a\\u007fb", "");
	_cleanup_(call_done) Call longer = create(env, repeat('n', 129), "");
	_cleanup_(call_done) Call longest = create(env, repeat('n', 128), "");

	is_status(none, "INVALID_ARGUMENT", "name: missing", "CreateVolume without a name");
	is_status(empty, "INVALID_ARGUMENT", "name: missing", "CreateVolume with an empty name");
	is_status(slash, "INVALID_ARGUMENT",
		  "name: must be 1-128 printable bytes without '/' (got 3 bytes)",
		  "a name with '/'");
	is_status(dot, "INVALID_ARGUMENT",
		  "name: must be 1-128 printable bytes without '/' (got 1 bytes)", "the name '.'");
	is_status(dots, "INVALID_ARGUMENT",
		  "name: must be 1-128 printable bytes without '/' (got 2 bytes)", "the name '..'");
	is_status(control, "INVALID_ARGUMENT",
		  "name: must be 1-128 printable bytes without '/' (got 3 bytes)",
		  "a name with a control character");
	is_status(del, "INVALID_ARGUMENT",
		  "name: must be 1-128 printable bytes without '/' (got 3 bytes)",
		  "a name with DEL");
	is_status(longer, "INVALID_ARGUMENT",
		  "name: must be 1-128 printable bytes without '/' (got 129 bytes)",
		  "a name of 129 bytes");
	is_ok(longest, "a name of 128 bytes");
	is_int(fake_calls(env->fake, FAKE_CREATE_VOLUME), 1,
	       "the backend saw none of the refused requests");
}

/* A CreateVolume for a test to change, as the JSON makes it. */
static Csi__V1__CreateVolumeRequest *create_request(const char *name)
{
	return (Csi__V1__CreateVolumeRequest *)request_new(
		&csi__v1__create_volume_request__descriptor,
		name ? "{'name':'pvc-1','volume_capabilities':[" CAP_SNW "]}"
		     : "{'volume_capabilities':[" CAP_SNW "]}");
}

#define ADD_PARAMS(r, field, count, prefix, value)                                            \
	pbmap_add_many((void ***)&(r)->field, &(r)->n_##field,                                \
		       &csi__v1__create_volume_request__##field##_entry__descriptor, (count), \
		       (prefix), (value))

static void test_create_limits(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);
	Csi__V1__CreateVolumeRequest *r;

	/* 100,000 tags, the first malformed: refused on the count, before any key is read */
	r = create_request("pvc-1");
	ADD_PARAMS(r, parameters, 1, "tagSpecification_", "noequals");
	ADD_PARAMS(r, parameters, 99999, "tagSpecification_", "k=v");
	_cleanup_(call_done) Call many = call_message(&env->d, controller_create_volume, &r->base);
	is_status(many, "INVALID_ARGUMENT", "parameters: at most 512 entries, got 100000",
		  "CreateVolume with 100000 parameters: refused, naming the field and the limit");

	r = create_request("pvc-1");
	ADD_PARAMS(r, parameters, 513, "csi.storage.k8s.io/k", "v");
	_cleanup_(call_done) Call c513 = call_message(&env->d, controller_create_volume, &r->base);
	is_status(c513, "INVALID_ARGUMENT", "parameters: at most 512 entries, got 513",
		  "513 parameters, each one ignored otherwise");

	r = create_request("pvc-1");
	ADD_PARAMS(r, mutable_parameters, 100000, "tagSpecification_", "k=v");
	_cleanup_(call_done) Call mut = call_message(&env->d, controller_create_volume, &r->base);
	is_status(mut, "INVALID_ARGUMENT", "mutable_parameters: at most 512 entries, got 100000",
		  "100000 mutable_parameters");

	r = create_request("pvc-1");
	ADD_PARAMS(r, parameters, 1, "tagSpecification_", "noequals");
	ADD_PARAMS(r, parameters, 50, "tagSpecification_", "k=v");
	_cleanup_(call_done) Call tags = call_message(&env->d, controller_create_volume, &r->base);
	is_status(tags, "INVALID_ARGUMENT",
		  "parameters: tagSpecification_N: wanted at most 50 tags, got 51",
		  "51 tag keys: refused on the count, before the malformed one is parsed");

	/* 300 KiB in one value */
	_cleanup_free_ char *big = xmalloc(300 * 1024 + 1);
	memset(big, 'a', 300 * 1024);
	big[300 * 1024] = 0;
	r = create_request("pvc-1");
	ADD_PARAMS(r, parameters, 1, "csi.storage.k8s.io/k", big);
	_cleanup_(call_done) Call bytes = call_message(&env->d, controller_create_volume, &r->base);
	is_status(bytes, "INVALID_ARGUMENT",
		  "parameters: at most 262144 bytes of keys and values, got more",
		  "300 KiB of parameters");
	r = create_request("pvc-1");
	ADD_PARAMS(r, secrets, 1, "k", big);
	_cleanup_(call_done) Call secrets =
		call_message(&env->d, controller_create_volume, &r->base);
	is_ok(secrets, "300 KiB of secrets: a Secret may hold 1 MiB");
	is_int(fake_calls(env->fake, FAKE_CREATE_VOLUME), 1,
	       "the backend saw none of the refused requests");

	/* GetCapacity and ControllerModifyVolume take parameters too */
	Csi__V1__GetCapacityRequest *g = (Csi__V1__GetCapacityRequest *)request_new(
		&csi__v1__get_capacity_request__descriptor, "{}");
	pbmap_add_many((void ***)&g->parameters, &g->n_parameters,
		       &csi__v1__get_capacity_request__parameters_entry__descriptor, 100000,
		       "tagSpecification_", "k=v");
	_cleanup_(call_done) Call cap = call_message(&env->d, controller_get_capacity, &g->base);
	is_status(cap, "INVALID_ARGUMENT", "parameters: at most 512 entries, got 100000",
		  "GetCapacity with 100000 parameters");
	Csi__V1__ControllerModifyVolumeRequest *m =
		(Csi__V1__ControllerModifyVolumeRequest *)request_new(
			&csi__v1__controller_modify_volume_request__descriptor,
			"{'volume_id':'fake-vol-1'}");
	pbmap_add_many(
		(void ***)&m->mutable_parameters, &m->n_mutable_parameters,
		&csi__v1__controller_modify_volume_request__mutable_parameters_entry__descriptor,
		100000, "tagSpecification_", "k=v");
	_cleanup_(call_done) Call mod = call_message(&env->d, controller_modify_volume, &m->base);
	is_status(mod, "INVALID_ARGUMENT", "mutable_parameters: at most 512 entries, got 100000",
		  "ControllerModifyVolume with 100000 mutable_parameters");
	is_int(fake_calls(env->fake, FAKE_CHANGE_VOLUME), 0, "nothing was modified");
}

static void test_create_utf8(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);
	Csi__V1__CreateVolumeRequest *r;

	r = create_request("pvc-1");
	free(r->name);
	r->name = xstrdup("pvc-\xff");
	_cleanup_(call_done) Call name = call_message(&env->d, controller_create_volume, &r->base);
	is_status(name, "INVALID_ARGUMENT", "name: not valid UTF-8", "a name that is not UTF-8");

	/* the handler's own name check, as a caller that skips csi_call() meets it */
	r = create_request("pvc-1");
	free(r->name);
	r->name = xstrdup("pvc-\xc0\xaf");
	ProtobufCMessage *reply = NULL;
	_cleanup_free_ char *error = NULL;
	is_int(controller_create_volume(&env->d, &r->base, &reply, &error), -EINVAL,
	       "the handler itself refuses an overlong form");
	is_str(error, "name: not valid UTF-8", "naming the name");
	protobuf_c_message_free_unpacked(&r->base, NULL);

	r = create_request("pvc-1");
	ADD_PARAMS(r, parameters, 1, "tagSpecification_", "team=\xe2\x80");
	_cleanup_(call_done) Call value = call_message(&env->d, controller_create_volume, &r->base);
	is_status(value, "INVALID_ARGUMENT", "parameters[tagSpecification_1]: not valid UTF-8",
		  "a parameter value that is not UTF-8");
	r = create_request("pvc-1");
	ADD_PARAMS(r, parameters, 1, repeat('k', 70), "\xff");
	_cleanup_(call_done) Call long_key =
		call_message(&env->d, controller_create_volume, &r->base);
	is_status(long_key, "INVALID_ARGUMENT",
		  "parameters: the value of key #1 is not valid UTF-8",
		  "a value not UTF-8 under a long key: named by its position");
	r = create_request("pvc-1");
	ADD_PARAMS(r, parameters, 1, "csi.storage.k8s.io/\xff", "v");
	_cleanup_(call_done) Call key = call_message(&env->d, controller_create_volume, &r->base);
	is_status(key, "INVALID_ARGUMENT", "parameters: key #1 is not valid UTF-8",
		  "a parameter key that is not UTF-8");
	r = create_request("pvc-1");
	ADD_PARAMS(r, secrets, 1, "\xff", "v");
	_cleanup_(call_done) Call secret =
		call_message(&env->d, controller_create_volume, &r->base);
	is_status(secret, "INVALID_ARGUMENT", "secrets: key #1 is not valid UTF-8",
		  "a secrets key that is not UTF-8");
	r = create_request("pvc-1");
	free(r->volume_capabilities[0]->mount->fs_type);
	r->volume_capabilities[0]->mount->fs_type = xstrdup("ext\xff");
	_cleanup_(call_done) Call nested =
		call_message(&env->d, controller_create_volume, &r->base);
	is_status(nested, "INVALID_ARGUMENT",
		  "volume_capabilities[0].mount.fs_type: not valid UTF-8",
		  "a nested string that is not UTF-8: its path");
	_cleanup_(call_done) Call fine = create(env, "pvc-caf\u00e9", "");
	is_ok(fine, "a name in UTF-8 beyond ASCII");
	is_int(fake_calls(env->fake, FAKE_CREATE_VOLUME), 1,
	       "the backend saw none of the refused requests");
}

static void test_create_capabilities(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);
	_cleanup_(call_done) Call none =
		CALL(env, controller_create_volume, create_volume_request, "{'name':'v'}");
	_cleanup_(call_done) Call no_type =
		CALL(env, controller_create_volume, create_volume_request,
		     "{'name':'v','volume_capabilities':[" CAP_NO_TYPE "]}");
	_cleanup_(call_done) Call no_mode =
		CALL(env, controller_create_volume, create_volume_request,
		     "{'name':'v','volume_capabilities':[%s,%s]}", CAP_SNW, CAP_NO_MODE);
	_cleanup_(call_done) Call unknown_mode =
		CALL(env, controller_create_volume, create_volume_request,
		     "{'name':'v','volume_capabilities':[" CAP_UNKNOWN_MODE "]}");
	_cleanup_(call_done) Call vfat =
		CALL(env, controller_create_volume, create_volume_request,
		     "{'name':'v','volume_capabilities':[%s,%s]}", CAP_SNW, CAP_VFAT);

	is_status(none, "INVALID_ARGUMENT", "volume_capabilities: at least one is required",
		  "CreateVolume without capabilities");
	is_status(no_type, "INVALID_ARGUMENT",
		  "volume_capabilities[0]: access_type must be mount or block",
		  "a capability neither mount nor block");
	is_status(no_mode, "INVALID_ARGUMENT", "volume_capabilities[1].access_mode: missing",
		  "the second capability without an access mode: named by its index");
	is_status(unknown_mode, "INVALID_ARGUMENT", "volume_capabilities[0].access_mode: missing",
		  "access mode UNKNOWN");
	is_status(vfat, "INVALID_ARGUMENT",
		  "volume_capabilities[1].mount.fs_type: the fake backend has no vfat",
		  "a filesystem the backend does not serve: its message");
	is_str(fake_last(env->fake, FAKE_CHECK_ACCESS, "field"), "volume_capabilities[1]",
	       "check_access was told which capability it judged");
	is_int(fake_calls(env->fake, FAKE_CREATE_VOLUME), 0, "the backend made nothing");

	fake_drop(env->fake, FAKE_CHECK_ACCESS);
	_cleanup_(call_done) Call any = CALL(env, controller_create_volume, create_volume_request,
					     "{'name':'v','volume_capabilities':[" CAP_MNMW "]}");
	is_ok(any, "a backend without check_access: what the spec allows is taken");
}

static void test_create_capacity(void)
{
	static const struct {
		const char *range;
		const char *code, *message, *size;
	} cases[] = {
		{"", "OK", NULL, "1073741824"},
		{",'capacity_range':{'required_bytes':1}", "OK", NULL, "1048576"},
		{",'capacity_range':{'required_bytes':1572864}", "OK", NULL, "2097152"},
		{",'capacity_range':{'required_bytes':1048577,'limit_bytes':2097152}", "OK", NULL,
		 "2097152"},
		{",'capacity_range':{'required_bytes':3145728,'limit_bytes':3145728}", "OK", NULL,
		 "3145728"},
		{",'capacity_range':{'limit_bytes':10485765}", "OK", NULL, "10485760"},
		{",'capacity_range':{'required_bytes':-1}", "INVALID_ARGUMENT",
		 "capacity_range: bytes must not be negative", NULL},
		{",'capacity_range':{'limit_bytes':-1}", "INVALID_ARGUMENT",
		 "capacity_range: bytes must not be negative", NULL},
		{",'capacity_range':{'required_bytes':2097152,'limit_bytes':1048576}",
		 "OUT_OF_RANGE",
		 "capacity_range: required_bytes 2097152 exceeds limit_bytes 1048576", NULL},
		{",'capacity_range':{'required_bytes':1048577,'limit_bytes':1048676}",
		 "OUT_OF_RANGE",
		 "capacity_range: no size in whole MiB lies between 1048577 and 1048676 bytes",
		 NULL},
		{",'capacity_range':{'limit_bytes':1000}", "OUT_OF_RANGE",
		 "capacity_range: no size in whole MiB lies between 0 and 1000 bytes", NULL},
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);
		_cleanup_(call_done) Call c = create(env, "v", cases[i].range);
		const char *range = *cases[i].range ? cases[i].range + 1 : "no capacity_range";

		if (!cases[i].size) {
			is_status(c, cases[i].code, cases[i].message, "%s: %s", range,
				  cases[i].code);
			is_int(fake_calls(env->fake, FAKE_CREATE_VOLUME), 0,
			       "%s: the backend was not asked", range);
			continue;
		}
		is_ok(c, "%s: created", range);
		is_str(fake_last(env->fake, FAKE_CREATE_VOLUME, "size"), cases[i].size,
		       "%s: the backend is asked for %s bytes", range, cases[i].size);
		const Csi__V1__CreateVolumeResponse *resp = REPLY(c, Csi__V1__CreateVolumeResponse);
		ok(resp && resp->volume->capacity_bytes == strtoll(cases[i].size, NULL, 10),
		   "%s: the reply says %s bytes", range, cases[i].size);
	}
}

static void test_create_parameters(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);
	_cleanup_(call_done) Call io2 = create(
		env, "io2",
		",'capacity_range':{'required_bytes':10737418240},"
		"'parameters':{'type':'io2','iops':'5000','csi.storage.k8s.io/pvc/name':'x'}");

	is_ok(io2, "CreateVolume with StorageClass parameters");
	is_str(fake_last(env->fake, FAKE_CREATE_VOLUME, "params.type"), "io2",
	       "the backend gets the parsed type");
	is_str(fake_last(env->fake, FAKE_CREATE_VOLUME, "params.iops"), "5000", "and iops");
	ok(!fake_last(env->fake, FAKE_CREATE_VOLUME, "params.csi.storage.k8s.io/pvc/name"),
	   "the provisioner's own keys are not passed on");

	_cleanup_(call_done) Call per_gb =
		create(env, "io1",
		       ",'capacity_range':{'required_bytes':10737418240},"
		       "'parameters':{'type':'io1','iopsPerGB':'20'}");
	is_ok(per_gb, "iopsPerGB");
	is_str(fake_last(env->fake, FAKE_CREATE_VOLUME, "params.iops"), "200",
	       "is resolved against the rounded size before the backend sees it");

	_cleanup_(call_done) Call mutable =
		create(env, "gp3",
		       ",'capacity_range':{'required_bytes':10737418240},"
		       "'mutable_parameters':{'iops':'4000','tagSpecification_1':'team=a'}");
	is_ok(mutable, "mutable_parameters at CreateVolume");
	is_str(fake_last(env->fake, FAKE_CREATE_VOLUME, "params.iops"), "4000",
	       "are applied over the parameters");
	is_str(fake_last(env->fake, FAKE_CREATE_VOLUME, "params.tagSpecification_1"), "team=a",
	       "tags included");

	fake_forget_calls(env->fake);
	_cleanup_(call_done) Call unknown = create(env, "u", ",'parameters':{'color':'blue'}");
	_cleanup_(call_done) Call bad_iops = create(env, "u", ",'parameters':{'iops':'many'}");
	_cleanup_(call_done) Call immutable =
		create(env, "u", ",'mutable_parameters':{'blockSize':'4096'}");
	_cleanup_(call_done) Call bad_mutable =
		create(env, "u", ",'mutable_parameters':{'type':'floppy'}");
	_cleanup_(call_done) Call block_fs =
		CALL(env, controller_create_volume, create_volume_request,
		     "{'name':'u','volume_capabilities':[%s],'parameters':{'blockSize':'4096'}}",
		     CAP_BLOCK_SNW);
	_cleanup_(call_done) Call other_fs =
		create(env, "u", ",'parameters':{'csi.storage.k8s.io/fstype':'xfs'}");

	is_status(unknown, "INVALID_ARGUMENT", "parameters: ...",
		  "an unknown parameter: INVALID_ARGUMENT, under 'parameters'");
	ok(unknown.error && strstr(unknown.error, "color"), "naming the key: %s", unknown.error);
	is_status(bad_iops, "INVALID_ARGUMENT", "parameters: ...", "a malformed value");
	ok(bad_iops.error && strstr(bad_iops.error, "iops"), "naming the key: %s", bad_iops.error);
	is_status(immutable, "INVALID_ARGUMENT", "mutable_parameters: ...",
		  "a parameter that cannot be mutable: under 'mutable_parameters'");
	ok(immutable.error && strstr(immutable.error, "blockSize"), "naming the key: %s",
	   immutable.error);
	is_status(bad_mutable, "INVALID_ARGUMENT", "mutable_parameters: ...",
		  "a mutable parameter with a bad value");
	is_status(block_fs, "INVALID_ARGUMENT", "parameters: ...",
		  "filesystem options for a raw block volume");
	is_status(other_fs, "INVALID_ARGUMENT", "parameters: ...",
		  "a parameter fstype other than the capability's");
	is_int(fake_calls(env->fake, FAKE_CREATE_VOLUME), 0,
	       "the backend saw none of the refused requests");
}

/* The parameters are the backend's to judge: asked once a call; a backend without the
 * operation takes none. */
static void test_parameters_are_the_backends(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);
	_cleanup_(call_done) Call made = create(env, "p", ",'parameters':{'type':'gp3'}");

	is_ok(made, "CreateVolume with parameters");
	is_int(fake_calls(env->fake, FAKE_PARSE_PARAMS), 1, "the backend parsed them, once");
	is_str(fake_last(env->fake, FAKE_PARSE_PARAMS, "use"), "create", "for a create");
	is_str(fake_last(env->fake, FAKE_PARSE_PARAMS, "parameters.type"), "gp3",
	       "the parameters as sent");
	_cleanup_(call_done) Call cap = CALL(env, controller_get_capacity, get_capacity_request,
					     "{'parameters':{'type':'st1'}}");
	is_ok(cap, "GetCapacity with parameters");
	is_str(fake_last(env->fake, FAKE_PARSE_PARAMS, "use"), "capacity", "for GetCapacity");

	fake_drop(env->fake, FAKE_PARSE_PARAMS);
	_cleanup_(call_done) Call none = create(env, "q", "");
	_cleanup_(call_done) Call refused = create(env, "r", ",'parameters':{'type':'gp3'}");
	_cleanup_(call_done) Call refused_cap =
		CALL(env, controller_get_capacity, get_capacity_request,
		     "{'parameters':{'type':'st1'}}");
	is_ok(none, "a backend without parse_params: a create without parameters");
	is_status(refused, "INVALID_ARGUMENT", "parameters: type: fake volumes take no parameters",
		  "one with parameters is refused, the key named");
	is_status(refused_cap, "INVALID_ARGUMENT",
		  "parameters: type: fake volumes take no parameters", "GetCapacity as well");
}

static void test_create_source(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);

	fake_add_snapshot(env->fake, "fake-snap-9", "snap", "fake-vol-src", 2 * FAKE_GIB);
	fake_add_volume(env->fake, "fake-vol-src", "src", 3 * FAKE_GIB);
	fake_add_volume(env->fake, "fake-vol-bad", "bad", FAKE_GIB)->v.damage =
		xstrdup("meta.json: not JSON");
	fake_add_volume(env->other, "other-vol-1", "theirs", FAKE_GIB);

	_cleanup_(call_done) Call snap =
		create(env, "from-snap",
		       ",'volume_content_source':{'snapshot':{'snapshot_id':'fake-snap-9'}}");
	is_ok(snap, "CreateVolume from a snapshot");
	is_str(fake_last(env->fake, FAKE_CREATE_VOLUME, "size"), GIB_2,
	       "without a capacity_range: the snapshot's size, when more than the default");
	is_str(fake_last(env->fake, FAKE_CREATE_VOLUME, "source_kind"), "snapshot",
	       "the backend is told the kind of source");
	is_str(fake_last(env->fake, FAKE_CREATE_VOLUME, "source_id"), "fake-snap-9", "and its id");
	const Csi__V1__CreateVolumeResponse *resp = REPLY(snap, Csi__V1__CreateVolumeResponse);
	ok(resp && resp->volume->content_source &&
		   strcmp(resp->volume->content_source->snapshot->snapshot_id, "fake-snap-9") == 0,
	   "the reply names its content source");

	_cleanup_(call_done) Call clone =
		create(env, "clone",
		       ",'capacity_range':{'required_bytes':4294967296},"
		       "'volume_content_source':{'volume':{'volume_id':'fake-vol-src'}}");
	is_ok(clone, "a clone of a volume");
	is_str(fake_last(env->fake, FAKE_CREATE_VOLUME, "source_kind"), "volume",
	       "the backend is told it is a clone");

	fake_forget_calls(env->fake);
	size_t n_volumes = env->fake->n_volumes;
	_cleanup_(call_done) Call small =
		create(env, "small",
		       ",'capacity_range':{'required_bytes':1073741824},"
		       "'volume_content_source':{'volume':{'volume_id':'fake-vol-src'}}");
	_cleanup_(call_done) Call limited =
		create(env, "limited",
		       ",'capacity_range':{'limit_bytes':1073741824},"
		       "'volume_content_source':{'snapshot':{'snapshot_id':'fake-snap-9'}}");
	_cleanup_(call_done) Call no_snap =
		create(env, "x", ",'volume_content_source':{'snapshot':{'snapshot_id':'nope'}}");
	_cleanup_(call_done) Call no_vol =
		create(env, "x", ",'volume_content_source':{'volume':{'volume_id':'nope'}}");
	_cleanup_(call_done) Call damaged = create(
		env, "x", ",'volume_content_source':{'volume':{'volume_id':'fake-vol-bad'}}");
	_cleanup_(call_done) Call theirs =
		create(env, "x", ",'volume_content_source':{'volume':{'volume_id':'other-vol-1'}}");

	is_status(small, "OUT_OF_RANGE",
		  "capacity_range: 1073741824 bytes is smaller than the source volume fake-vol-src "
		  "(3221225472 bytes)",
		  "a clone smaller than its source");
	is_status(limited, "OUT_OF_RANGE",
		  "capacity_range: 1073741824 bytes is smaller than the source snapshot "
		  "fake-snap-9 (2147483648 bytes)",
		  "a limit below the snapshot's size");
	is_status(no_snap, "NOT_FOUND", "volume_content_source: snapshot 'nope' not found",
		  "a snapshot that does not exist");
	is_status(no_vol, "NOT_FOUND", "volume_content_source: volume 'nope' not found",
		  "a source volume that does not exist");
	is_status(damaged, "FAILED_PRECONDITION",
		  "volume fake-vol-bad is damaged: meta.json: not JSON: it can only be deleted",
		  "a damaged source volume: the one answer for a damaged volume");
	is_status(theirs, "NOT_FOUND", "volume_content_source: volume 'other-vol-1' not found",
		  "sources are the default backend's: another backend's volume is not one");
	is_int(env->fake->n_volumes, n_volumes, "the backend made none of them");
	is_int(fake_calls(env->fake, FAKE_CREATE_VOLUME), 3,
	       "a source the backend does not find is its create_volume's to refuse, not the "
	       "sizes' (a damaged one is refused before)");
	is_int(fake_calls(env->other, FAKE_GET_VOLUME), 0, "the other backend was not asked");

	/* A backend's create_volume knows a source of another node from a missing one. */
	fake_fail(env->fake, FAKE_CREATE_VOLUME, -ENOSPC,
		  "volume_content_source.snapshot.snapshot_id: snapshot fake-snap-1.n2 is on node "
		  "n2, not on this node (n1)");
	_cleanup_(call_done) Call elsewhere = create(
		env, "x", ",'volume_content_source':{'snapshot':{'snapshot_id':'fake-snap-1.n2'}}");
	is_status(elsewhere, "RESOURCE_EXHAUSTED",
		  "volume_content_source.snapshot.snapshot_id: snapshot fake-snap-1.n2 is on node "
		  "n2, not on this node (n1)",
		  "a source the backend's get_snapshot did not find: create_volume's answer");
	fake_fail(env->fake, FAKE_CREATE_VOLUME, 0, NULL);

	fake_fail(env->fake, FAKE_GET_SNAPSHOT, -EAGAIN, "snapshot records: busy, try again");
	_cleanup_(call_done) Call busy = create(
		env, "x", ",'volume_content_source':{'snapshot':{'snapshot_id':'fake-snap-9'}}");
	is_status(busy, "UNAVAILABLE", "snapshot records: busy, try again",
		  "a backend failure reading the source is passed on, not called NOT_FOUND");
	fake_fail(env->fake, FAKE_GET_SNAPSHOT, 0, NULL);

	fake_drop(env->fake, FAKE_GET_SNAPSHOT);
	_cleanup_(call_done) Call unimplemented = create(
		env, "x", ",'volume_content_source':{'snapshot':{'snapshot_id':'fake-snap-9'}}");
	is_status(unimplemented, "UNIMPLEMENTED", "the fake backend has no get_snapshot",
		  "a backend without snapshots: UNIMPLEMENTED");
}

static void test_create_idempotent(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);
	const char *more = ",'capacity_range':{'required_bytes':2147483648},"
			   "'parameters':{'type':'gp3','throughput':'200'}";
	_cleanup_(call_done) Call first = create(env, "pvc-1", more);
	_cleanup_(call_done) Call again = create(env, "pvc-1", more);
	_cleanup_free_ char *text1 = reply_text(&first), *text2 = reply_text(&again);

	is_ok(first, "CreateVolume pvc-1");
	is_ok(again, "the same CreateVolume again: success");
	ok(text1 && text2 && strcmp(text1, text2) == 0, "with the same volume: %s", text2);
	is_int(fake_calls(env->fake, FAKE_CREATE_VOLUME), 2,
	       "the backend answered -EEXIST with it, the CSI layer compared");

	fake_add_snapshot(env->fake, "fake-snap-1", "s", "fake-vol-x", FAKE_GIB);
	_cleanup_(call_done) Call smaller =
		create(env, "pvc-1",
		       ",'capacity_range':{'required_bytes':1073741824},"
		       "'parameters':{'type':'gp3','throughput':'200'}");
	_cleanup_(call_done) Call limit =
		create(env, "pvc-1",
		       ",'capacity_range':{'required_bytes':1073741824,'limit_bytes':1073741824},"
		       "'parameters':{'type':'gp3','throughput':'200'}");
	_cleanup_(call_done) Call source =
		create(env, "pvc-1",
		       ",'capacity_range':{'required_bytes':2147483648},"
		       "'parameters':{'type':'gp3','throughput':'200'},"
		       "'volume_content_source':{'snapshot':{'snapshot_id':'fake-snap-1'}}");
	_cleanup_(call_done) Call params = create(env, "pvc-1",
						  ",'capacity_range':{'required_bytes':2147483648},"
						  "'parameters':{'type':'gp3','throughput':'300'}");

	is_ok(smaller, "a smaller required_bytes the existing volume satisfies: success");
	const Csi__V1__CreateVolumeResponse *resp = REPLY(smaller, Csi__V1__CreateVolumeResponse);
	ok(resp && resp->volume->capacity_bytes == 2 * (int64_t)FAKE_GIB,
	   "with the existing volume's size");
	is_status(limit, "ALREADY_EXISTS",
		  "volume 'pvc-1' exists with 2147483648 bytes, outside the requested "
		  "capacity_range",
		  "a range the existing volume is outside of: ALREADY_EXISTS");
	is_status(source, "ALREADY_EXISTS",
		  "volume 'pvc-1' exists with another volume_content_source (none)",
		  "another content source: ALREADY_EXISTS saying the volume has none");
	is_status(params, "ALREADY_EXISTS", "volume 'pvc-1' exists with other parameters",
		  "other parameters: ALREADY_EXISTS");

	_cleanup_(call_done) Call clone =
		create(env, "clone",
		       ",'volume_content_source':{'snapshot':{'snapshot_id':'fake-snap-1'}}");
	_cleanup_(call_done) Call blank = create(env, "clone", "");
	is_ok(clone, "a volume from a snapshot");
	is_status(blank, "ALREADY_EXISTS",
		  "volume 'clone' exists with another volume_content_source (snapshot fake-snap-1)",
		  "the same name without a source: ALREADY_EXISTS naming the source");
}

static void test_create_request_and_reply(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);
	_cleanup_(call_done) Call c =
		CALL(env, controller_create_volume, create_volume_request,
		     "{'name':'pvc-t','volume_capabilities':[%s,%s],"
		     "'accessibility_requirements':{"
		     "'requisite':[{'segments':{'topology.volplug.io/zone':'zone-a'}},"
		     "{'segments':{'topology.volplug.io/zone':'zone-b'}}],"
		     "'preferred':[{'segments':{'topology.volplug.io/zone':'zone-b'}}]}}",
		     CAP_BLOCK_MNRO, CAP_XFS_MNRO);

	is_reply(c,
		 "{'volume':{'capacity_bytes':1073741824,'volume_id':'fake-vol-1',"
		 "'volume_context':{'fake.volplug.io/backend':'fake',"
		 "'csi.storage.k8s.io/fstype':'xfs'},"
		 "'accessible_topology':[{'segments':{'topology.volplug.io/zone':'zone-a'}}]}}",
		 "CreateVolume: the reply is the backend's volume: id, size, context, topology");
	is_str(fake_last(env->fake, FAKE_CREATE_VOLUME, "access.block"), "true",
	       "access.block: one capability is raw block");
	is_str(fake_last(env->fake, FAKE_CREATE_VOLUME, "access.fstype"), "xfs",
	       "access.fstype: the first mount capability's");
	is_str(fake_last(env->fake, FAKE_CREATE_VOLUME, "access.mode"), "MULTI_NODE_READER_ONLY",
	       "access.mode");
	ok(strcmp(fake_last(env->fake, FAKE_CREATE_VOLUME, "access.multi_node"), "true") == 0 &&
		   strcmp(fake_last(env->fake, FAKE_CREATE_VOLUME, "access.read_only"), "true") ==
			   0,
	   "access: multi-node and read-only");
	is_str(fake_last(env->fake, FAKE_CREATE_VOLUME, "requisite[1].topology.volplug.io/zone"),
	       "zone-b", "the requisite topologies, in order");
	is_str(fake_last(env->fake, FAKE_CREATE_VOLUME, "preferred[0].topology.volplug.io/zone"),
	       "zone-b", "the preferred ones");
	is_int(fake_calls(env->other, FAKE_CREATE_VOLUME), 0,
	       "volumes are made by the default backend only");

	_cleanup_(call_done) Call mount_first =
		CALL(env, controller_create_volume, create_volume_request,
		     "{'name':'pvc-u','volume_capabilities':[%s,%s]}", CAP_MNRO, CAP_BLOCK_MNRO);
	is_ok(mount_first, "a mount capability, then a block one");
	ok(strcmp(fake_last(env->fake, FAKE_CREATE_VOLUME, "access.block"), "true") == 0 &&
		   strcmp(fake_last(env->fake, FAKE_CREATE_VOLUME, "access.fstype"), "ext4") == 0,
	   "access: block whichever capability asks it, the filesystem of the mount one");
}

static void test_create_backend_errors(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);

	env->fake->capacity = FAKE_GIB;
	_cleanup_(call_done) Call full =
		create(env, "big", ",'capacity_range':{'required_bytes':2147483648}");
	is_status(full, "RESOURCE_EXHAUSTED",
		  "capacity_range: 2147483648 bytes do not fit in the fake backend",
		  "the backend's -ENOSPC and message reach the client");

	fake_fail(env->fake, FAKE_CREATE_VOLUME, -EAGAIN, "fake: throttled");
	_cleanup_(call_done) Call busy = create(env, "v", "");
	is_status(busy, "UNAVAILABLE", "fake: throttled", "-EAGAIN: UNAVAILABLE, its message");
	fake_fail(env->fake, FAKE_CREATE_VOLUME, 0, NULL);
	_cleanup_(call_done) Call retry = create(env, "v", "");
	is_ok(retry, "the retry is not ABORTED: a failed call lets go of its key");

	fake_drop(env->fake, FAKE_CREATE_VOLUME);
	_cleanup_(call_done) Call none = create(env, "w", "");
	is_status(none, "UNIMPLEMENTED", "the fake backend has no create_volume",
		  "a backend without create_volume: UNIMPLEMENTED");
}

static void test_create_in_flight(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);
	Background first = {};

	fake_hold(env->fake, FAKE_CREATE_VOLUME);
	BACKGROUND(&first, env, controller_create_volume, create_volume_request,
		   "{'name':'pvc-x','volume_capabilities':[" CAP_SNW "]}");
	fake_wait_held(env->fake, FAKE_CREATE_VOLUME);

	_cleanup_(call_done) Call same = create(env, "pvc-x", "");
	_cleanup_(call_done) Call other = create(env, "pvc-y", "");
	is_status(same, "ABORTED", "a CreateVolume for 'pvc-x' is already in progress",
		  "CreateVolume of a name being created: ABORTED at once");
	is_ok(other, "another name meanwhile: served");

	fake_release(env->fake, FAKE_CREATE_VOLUME);
	background_join(&first);
	is_ok(first.call, "the first call completes");
	_cleanup_(call_done) Call after = create(env, "pvc-x", "");
	is_ok(after, "the name again once it is done: served (the same volume)");
	call_done(&first.call);
}

static void test_delete(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);

	fake_add_volume(env->fake, "fake-vol-1", "one", FAKE_GIB);
	fake_add_volume(env->other, "other-vol-1", "theirs", FAKE_GIB);

	_cleanup_(call_done) Call none =
		CALL(env, controller_delete_volume, delete_volume_request, "{}");
	_cleanup_(call_done) Call gone = CALL(env, controller_delete_volume, delete_volume_request,
					      "{'volume_id':'fake-vol-1'}");
	_cleanup_(call_done) Call again = CALL(env, controller_delete_volume, delete_volume_request,
					       "{'volume_id':'fake-vol-1'}");
	_cleanup_(call_done) Call theirs =
		CALL(env, controller_delete_volume, delete_volume_request,
		     "{'volume_id':'other-vol-1'}");

	is_status(none, "INVALID_ARGUMENT", "volume_id: missing", "DeleteVolume without an id");
	is_reply(gone, "{}", "DeleteVolume of a volume: an empty reply");
	ok(!fake_volume(env->fake, "fake-vol-1"), "the backend deleted it");
	is_reply(again, "{}", "DeleteVolume of a volume that is gone: success");
	is_reply(theirs, "{}", "DeleteVolume of another backend's volume");
	ok(!fake_volume(env->other, "other-vol-1") &&
		   fake_calls(env->other, FAKE_DELETE_VOLUME) == 1 &&
		   fake_calls(env->fake, FAKE_DELETE_VOLUME) == 2,
	   "goes to the backend that claims its id");

	fake_add_volume(env->fake, "fake-vol-2", "two", FAKE_GIB);
	_cleanup_(call_done) Call pub = CALL(
		env, controller_publish_volume, controller_publish_volume_request,
		"{'volume_id':'fake-vol-2','node_id':'node-1','volume_capability':" CAP_SNW "}");
	_cleanup_(call_done) Call busy = CALL(env, controller_delete_volume, delete_volume_request,
					      "{'volume_id':'fake-vol-2'}");
	is_status(busy, "FAILED_PRECONDITION",
		  "volume fake-vol-2 is still published to node node-1: unpublish it first",
		  "a volume in use: the backend's -ENOTEMPTY and message");

	fake_drop(env->fake, FAKE_DELETE_VOLUME);
	_cleanup_(call_done) Call unimplemented = CALL(
		env, controller_delete_volume, delete_volume_request, "{'volume_id':'fake-vol-9'}");
	is_status(unimplemented, "UNIMPLEMENTED", "the fake backend has no delete_volume",
		  "a backend without delete_volume: UNIMPLEMENTED");
}

/* The calls that take the key "vol:ID", while one holds it. */
static void test_volume_key(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_ALL);
	Background held = {};

	fake_add_volume(env->fake, "fake-vol-1", "one", FAKE_GIB);
	fake_add_volume(env->fake, "fake-vol-2", "two", FAKE_GIB);
	fake_hold(env->fake, FAKE_ATTACH);
	BACKGROUND(&held, env, controller_publish_volume, controller_publish_volume_request,
		   "{'volume_id':'fake-vol-1','node_id':'node-1','volume_capability':" CAP_SNW "}");
	fake_wait_held(env->fake, FAKE_ATTACH);

	_cleanup_(call_done) Call publish = CALL(
		env, controller_publish_volume, controller_publish_volume_request,
		"{'volume_id':'fake-vol-1','node_id':'node-2','volume_capability':" CAP_SNW "}");
	_cleanup_(call_done) Call unpublish =
		CALL(env, controller_unpublish_volume, controller_unpublish_volume_request,
		     "{'volume_id':'fake-vol-1','node_id':'node-1'}");
	_cleanup_(call_done) Call delete = CALL(
		env, controller_delete_volume, delete_volume_request, "{'volume_id':'fake-vol-1'}");
	_cleanup_(call_done) Call other = CALL(
		env, controller_publish_volume, controller_publish_volume_request,
		"{'volume_id':'fake-vol-2','node_id':'node-1','volume_capability':" CAP_SNW "}");
	_cleanup_(call_done) Call stage = CALL(
		env, node_stage_volume, node_stage_volume_request,
		"{'volume_id':'fake-vol-1','staging_target_path':'/s','volume_capability':" CAP_SNW
		"}");

	is_status(publish, "ABORTED", "an operation on volume fake-vol-1 is in progress",
		  "ControllerPublishVolume while one is in flight: ABORTED");
	is_status(unpublish, "ABORTED", "an operation on volume fake-vol-1 is in progress",
		  "ControllerUnpublishVolume meanwhile: ABORTED");
	is_status(delete, "ABORTED", "an operation on volume fake-vol-1 is in progress",
		  "DeleteVolume meanwhile: ABORTED");
	is_ok(other, "another volume meanwhile: served");
	is_ok(stage, "the node service's calls have keys of their own");
	is_int(fake_calls(env->fake, FAKE_ATTACH), 2,
	       "the ABORTED calls never reached the backend");

	fake_release(env->fake, FAKE_ATTACH);
	background_join(&held);
	is_ok(held.call, "the held publish completes");
	call_done(&held.call);
}

static void test_validate(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);

	fake_add_volume(env->fake, "fake-vol-1", "one", FAKE_GIB);
	fake_add_volume(env->fake, "fake-vol-bad", "bad", FAKE_GIB)->v.damage =
		xstrdup("meta.json: not JSON");
	fake_add_volume(env->other, "vol-elsewhere", "theirs", FAKE_GIB);

	_cleanup_(call_done) Call no_id =
		CALL(env, controller_validate_volume_capabilities,
		     validate_volume_capabilities_request, "{'volume_capabilities':[" CAP_SNW "]}");
	_cleanup_(call_done) Call no_caps =
		CALL(env, controller_validate_volume_capabilities,
		     validate_volume_capabilities_request, "{'volume_id':'fake-vol-1'}");
	_cleanup_(call_done) Call unknown = CALL(
		env, controller_validate_volume_capabilities, validate_volume_capabilities_request,
		"{'volume_id':'nope','volume_capabilities':[" CAP_SNW "]}");
	_cleanup_(call_done) Call damaged = CALL(
		env, controller_validate_volume_capabilities, validate_volume_capabilities_request,
		"{'volume_id':'fake-vol-bad','volume_capabilities':[" CAP_SNW "]}");
	_cleanup_(call_done) Call yes = CALL(
		env, controller_validate_volume_capabilities, validate_volume_capabilities_request,
		"{'volume_id':'fake-vol-1','volume_capabilities':[%s,%s],"
		"'volume_context':{'a':'1'},'parameters':{'type':'gp3'}}",
		CAP_SNW, CAP_BLOCK_SNW);
	_cleanup_(call_done) Call vfat = CALL(
		env, controller_validate_volume_capabilities, validate_volume_capabilities_request,
		"{'volume_id':'fake-vol-1','volume_capabilities':[%s,%s]}", CAP_SNW, CAP_VFAT);
	_cleanup_(call_done) Call no_mode = CALL(
		env, controller_validate_volume_capabilities, validate_volume_capabilities_request,
		"{'volume_id':'fake-vol-1','volume_capabilities':[" CAP_NO_MODE "]}");
	_cleanup_(call_done) Call theirs = CALL(
		env, controller_validate_volume_capabilities, validate_volume_capabilities_request,
		"{'volume_id':'vol-elsewhere','volume_capabilities':[" CAP_SNW "],"
		"'volume_context':{'" FAKE_CONTEXT_BACKEND "':'other'}}");

	is_status(no_id, "INVALID_ARGUMENT", "volume_id: missing",
		  "ValidateVolumeCapabilities without a volume id");
	is_status(no_caps, "INVALID_ARGUMENT", "volume_capabilities: at least one is required",
		  "without capabilities");
	is_status(unknown, "NOT_FOUND", "volume_id: volume nope not found",
		  "an unknown volume: the backend's NOT_FOUND");
	is_status(damaged, "FAILED_PRECONDITION",
		  "volume fake-vol-bad is damaged: meta.json: not JSON: it can only be deleted",
		  "a damaged volume: FAILED_PRECONDITION, saying what is damaged");
	is_reply(yes,
		 "{'confirmed':{'volume_context':{'a':'1'},'parameters':{'type':'gp3'},"
		 "'volume_capabilities':[" CAP_SNW "," CAP_BLOCK_SNW "]}}",
		 "served capabilities: confirmed, echoing capabilities, context and parameters");
	is_reply(vfat,
		 "{'message':'volume_capabilities[1].mount.fs_type: the fake backend has no vfat'}",
		 "one the backend does not serve: not confirmed, the backend's reason");
	is_reply(no_mode, "{'message':'volume_capabilities[0].access_mode: missing'}",
		 "one without an access mode: not confirmed, the reason");
	is_ok(theirs, "a volume whose context names another backend");
	is_int(fake_calls(env->other, FAKE_GET_VOLUME), 1, "is looked up in that backend");
	is_str(fake_last(env->other, FAKE_CHECK_ACCESS, "field"), "volume_capabilities[0]",
	       "which judges the capability");

	fake_drop(env->fake, FAKE_GET_VOLUME);
	_cleanup_(call_done) Call unimplemented = CALL(
		env, controller_validate_volume_capabilities, validate_volume_capabilities_request,
		"{'volume_id':'fake-vol-1','volume_capabilities':[" CAP_SNW "]}");
	is_status(unimplemented, "UNIMPLEMENTED", "the fake backend has no get_volume",
		  "a backend without get_volume: UNIMPLEMENTED");
}

static void test_list(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);

	fake_add_volume(env->fake, "fake-vol-1", "one", FAKE_GIB);
	FakeVolume *sick = fake_add_volume(env->fake, "fake-vol-2", "two", 2 * FAKE_GIB);
	sick->v.abnormal = true;
	sick->v.condition = xstrdup("its data file is missing");
	sick->v.damage = xstrdup("data: missing");
	fake_add_volume(env->fake, "fake-vol-3", "three", FAKE_GIB);

	_cleanup_(call_done) Call negative =
		CALL(env, controller_list_volumes, list_volumes_request, "{'max_entries':-1}");
	is_status(negative, "INVALID_ARGUMENT", "max_entries: must not be negative",
		  "ListVolumes with a negative max_entries");

	_cleanup_(call_done) Call pub = CALL(
		env, controller_publish_volume, controller_publish_volume_request,
		"{'volume_id':'fake-vol-1','node_id':'node-2','volume_capability':" CAP_SNW "}");
	_cleanup_(call_done) Call page1 =
		CALL(env, controller_list_volumes, list_volumes_request, "{'max_entries':2}");
	is_reply(page1,
		 "{'entries':["
		 "{'volume':{'volume_id':'fake-vol-1','capacity_bytes':1073741824,"
		 "'volume_context':{'fake.volplug.io/backend':'fake'},"
		 "'accessible_topology':[{'segments':{'topology.volplug.io/zone':'zone-a'}}]},"
		 "'status':{'published_node_ids':['node-2'],'volume_condition':{}}},"
		 "{'volume':{'volume_id':'fake-vol-2','capacity_bytes':2147483648,"
		 "'volume_context':{'fake.volplug.io/backend':'fake'},"
		 "'accessible_topology':[{'segments':{'topology.volplug.io/zone':'zone-a'}}]},"
		 "'status':{'volume_condition':{'abnormal':true,"
		 "'message':'its data file is missing'}}}],"
		 "'next_token':'fake-token-2'}",
		 "ListVolumes, a page of 2: volumes, published nodes, conditions (a damaged one "
		 "too), the next token");
	is_str(fake_last(env->fake, FAKE_LIST_VOLUMES, "max_entries"), "2",
	       "the backend is asked for 2");

	_cleanup_(call_done) Call page2 = CALL(env, controller_list_volumes, list_volumes_request,
					       "{'max_entries':2,'starting_token':'fake-token-2'}");
	const Csi__V1__ListVolumesResponse *r2 = REPLY(page2, Csi__V1__ListVolumesResponse);
	ok(r2 && r2->n_entries == 1 &&
		   strcmp(r2->entries[0]->volume->volume_id, "fake-vol-3") == 0 && !*r2->next_token,
	   "the next page: the last volume, no next token");
	is_str(fake_last(env->fake, FAKE_LIST_VOLUMES, "starting_token"), "fake-token-2",
	       "the token is the backend's to read");

	_cleanup_(call_done) Call all =
		CALL(env, controller_list_volumes, list_volumes_request, "{}");
	const Csi__V1__ListVolumesResponse *r3 = REPLY(all, Csi__V1__ListVolumesResponse);
	ok(r3 && r3->n_entries == 3, "without max_entries: the backend's default page");
	is_str(fake_last(env->fake, FAKE_LIST_VOLUMES, "max_entries"), "0",
	       "max_entries 0 is passed on as 'the backend's default'");

	_cleanup_(call_done) Call bogus = CALL(env, controller_list_volumes, list_volumes_request,
					       "{'starting_token':'bogus'}");
	is_status(bogus, "ABORTED", "starting_token: 'bogus' is not a token ListVolumes gave",
		  "a token the backend never gave: its -EALREADY is ABORTED, as the spec asks");

	fake_drop(env->fake, FAKE_LIST_VOLUMES);
	_cleanup_(call_done) Call unimplemented =
		CALL(env, controller_list_volumes, list_volumes_request, "{}");
	is_status(unimplemented, "UNIMPLEMENTED", "the fake backend has no list_volumes",
		  "a backend without list_volumes: UNIMPLEMENTED");
}

static void test_get_volume(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);
	fake_add_volume(env->fake, "fake-vol-1", "one", FAKE_GIB);
	FakeVolume *bad = fake_add_volume(env->fake, "fake-vol-bad", "bad", FAKE_GIB);
	bad->v.damage = xstrdup("meta.json: not JSON");
	bad->v.abnormal = true;
	bad->v.condition = xstrdup("its record is damaged: meta.json: not JSON");
	fake_add_volume(env->other, "other-vol-1", "theirs", 3 * FAKE_GIB);

	for (int n = 1; n <= 2; n++) {
		_cleanup_(call_done) Call pub =
			CALL(env, controller_publish_volume, controller_publish_volume_request,
			     "{'volume_id':'fake-vol-1','node_id':'node-%d',"
			     "'volume_capability':%s,'readonly':true}",
			     n, CAP_MNRO);
		is_ok(pub, "ControllerPublishVolume to node-%d (MULTI_NODE_READER_ONLY)", n);
	}
	_cleanup_(call_done) Call none =
		CALL(env, controller_get_volume, controller_get_volume_request, "{}");
	_cleanup_(call_done) Call unknown = CALL(
		env, controller_get_volume, controller_get_volume_request, "{'volume_id':'x'}");
	_cleanup_(call_done) Call one =
		CALL(env, controller_get_volume, controller_get_volume_request,
		     "{'volume_id':'fake-vol-1'}");
	_cleanup_(call_done) Call damaged =
		CALL(env, controller_get_volume, controller_get_volume_request,
		     "{'volume_id':'fake-vol-bad'}");
	_cleanup_(call_done) Call theirs =
		CALL(env, controller_get_volume, controller_get_volume_request,
		     "{'volume_id':'other-vol-1'}");

	is_status(none, "INVALID_ARGUMENT", "volume_id: missing", "ControllerGetVolume without id");
	is_status(unknown, "NOT_FOUND", "volume_id: volume x not found",
		  "an unknown volume: the backend's NOT_FOUND");
	is_reply(one,
		 "{'volume':{'volume_id':'fake-vol-1','capacity_bytes':1073741824,"
		 "'volume_context':{'fake.volplug.io/backend':'fake'},"
		 "'accessible_topology':[{'segments':{'topology.volplug.io/zone':'zone-a'}}]},"
		 "'status':{'published_node_ids':['node-1','node-2'],'volume_condition':{}}}",
		 "ControllerGetVolume: the volume, the nodes it is published to, its condition");
	is_reply(damaged,
		 "{'volume':{'volume_id':'fake-vol-bad','capacity_bytes':1073741824,"
		 "'volume_context':{'fake.volplug.io/backend':'fake'},"
		 "'accessible_topology':[{'segments':{'topology.volplug.io/zone':'zone-a'}}]},"
		 "'status':{'volume_condition':{'abnormal':true,"
		 "'message':'its record is damaged: meta.json: not JSON'}}}",
		 "a damaged volume is shown, abnormal, so that it can be found and deleted");
	const Csi__V1__ControllerGetVolumeResponse *r =
		REPLY(theirs, Csi__V1__ControllerGetVolumeResponse);
	ok(r && r->volume->capacity_bytes == 3 * (int64_t)FAKE_GIB &&
		   fake_calls(env->other, FAKE_GET_VOLUME) == 1,
	   "another backend's volume comes from that backend");

	fake_drop(env->fake, FAKE_GET_VOLUME);
	_cleanup_(call_done) Call unimplemented =
		CALL(env, controller_get_volume, controller_get_volume_request,
		     "{'volume_id':'fake-vol-1'}");
	is_status(unimplemented, "UNIMPLEMENTED", "the fake backend has no get_volume",
		  "a backend without get_volume: UNIMPLEMENTED");
}

static void test_capacity(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);
	_cleanup_(call_done) Call all =
		CALL(env, controller_get_capacity, get_capacity_request, "{}");

	is_reply(all,
		 "{'available_capacity':107374182400,'maximum_volume_size':{'value':107374182400},"
		 "'minimum_volume_size':{'value':1048576}}",
		 "GetCapacity: available, maximum and minimum volume size");
	ok(!fake_last(env->fake, FAKE_GET_CAPACITY, "topology.topology.volplug.io/zone"),
	   "no topology: none asked");

	env->fake->max_volume_size = 16 * FAKE_GIB;
	_cleanup_(call_done) Call zone =
		CALL(env, controller_get_capacity, get_capacity_request,
		     "{'volume_capabilities':[" CAP_SNW "],"
		     "'accessible_topology':{'segments':{'topology.volplug.io/zone':'zone-b'}}}");
	is_reply(zone,
		 "{'maximum_volume_size':{'value':17179869184},"
		 "'minimum_volume_size':{'value':1048576}}",
		 "in a zone the backend does not serve: 0 available (left out, as proto3 does)");
	is_str(fake_last(env->fake, FAKE_GET_CAPACITY, "topology.topology.volplug.io/zone"),
	       "zone-b", "the topology is the backend's to judge");

	_cleanup_(call_done) Call no_mode = CALL(env, controller_get_capacity, get_capacity_request,
						 "{'volume_capabilities':[{'block':{}}]}");
	_cleanup_(call_done) Call vfat = CALL(env, controller_get_capacity, get_capacity_request,
					      "{'volume_capabilities':[" CAP_VFAT "]}");
	is_status(no_mode, "INVALID_ARGUMENT", "volume_capabilities[0].access_mode: missing",
		  "a capability without an access mode");
	is_status(vfat, "INVALID_ARGUMENT",
		  "volume_capabilities[0].mount.fs_type: the fake backend has no vfat",
		  "a capability the backend does not serve");

	_cleanup_(call_done) Call node =
		CALL(env, controller_get_capacity, get_capacity_request,
		     "{'accessible_topology':{'segments':{'topology.volplug.io/node':'node-1'}}}");
	is_reply(node,
		 "{'maximum_volume_size':{'value':17179869184},"
		 "'minimum_volume_size':{'value':1048576}}",
		 "a segment with a key the backend's node does not have: 0 available");

	_cleanup_(call_done) Call sc1 = CALL(env, controller_get_capacity, get_capacity_request,
					     "{'parameters':{'type':'sc1'}}");
	is_ok(sc1, "GetCapacity with a StorageClass's parameters");
	is_str(fake_last(env->fake, FAKE_GET_CAPACITY, "min_size"), "133143986177",
	       "the backend gets the smallest size the class's type allows (above 124 GiB)");
	is_str(fake_last(env->fake, FAKE_GET_CAPACITY, "max_size"), "17592186044416",
	       "and the largest (16 TiB)");
	_cleanup_(call_done) Call plain = CALL(env, controller_get_capacity, get_capacity_request,
					       "{'parameters':{'blockSize':'4096'}}");
	ok(plain.r == 0 && strcmp(fake_last(env->fake, FAKE_GET_CAPACITY, "min_size"), "0") == 0 &&
		   strcmp(fake_last(env->fake, FAKE_GET_CAPACITY, "max_size"), "0") == 0,
	   "parameters that name no type: no bound");
	fake_forget_calls(env->fake);
	_cleanup_(call_done) Call bad_type =
		CALL(env, controller_get_capacity, get_capacity_request,
		     "{'parameters':{'type':'gp9'}}");
	_cleanup_(call_done) Call bad_key = CALL(env, controller_get_capacity, get_capacity_request,
						 "{'parameters':{'colour':'red'}}");
	is_status(bad_type, "INVALID_ARGUMENT", "parameters: ...",
		  "a StorageClass naming a type there is none of");
	is_status(bad_key, "INVALID_ARGUMENT", "parameters: ...", "a key no StorageClass has");
	ok(bad_key.error && strstr(bad_key.error, "colour"), "naming the key: %s", bad_key.error);
	is_int(fake_calls(env->fake, FAKE_GET_CAPACITY), 0, "the backend saw neither");

	fake_fail(env->fake, FAKE_GET_CAPACITY, -EAGAIN, "fake: statfs: try again");
	_cleanup_(call_done) Call busy =
		CALL(env, controller_get_capacity, get_capacity_request, "{}");
	is_status(busy, "UNAVAILABLE", "fake: statfs: try again", "a backend failure, passed on");
	fake_drop(env->fake, FAKE_GET_CAPACITY);
	_cleanup_(call_done) Call unimplemented =
		CALL(env, controller_get_capacity, get_capacity_request, "{}");
	is_status(unimplemented, "UNIMPLEMENTED", "the fake backend has no get_capacity",
		  "a backend without get_capacity: UNIMPLEMENTED");
}

static void test_capabilities(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);
	_cleanup_(call_done) Call c =
		CALL(env, controller_get_capabilities, controller_get_capabilities_request, "{}");

	is_reply(c,
		 "{'capabilities':["
		 "{'rpc':{'type':'CREATE_DELETE_VOLUME'}},"
		 "{'rpc':{'type':'PUBLISH_UNPUBLISH_VOLUME'}},"
		 "{'rpc':{'type':'LIST_VOLUMES'}},"
		 "{'rpc':{'type':'GET_CAPACITY'}},"
		 "{'rpc':{'type':'CREATE_DELETE_SNAPSHOT'}},"
		 "{'rpc':{'type':'LIST_SNAPSHOTS'}},"
		 "{'rpc':{'type':'CLONE_VOLUME'}},"
		 "{'rpc':{'type':'PUBLISH_READONLY'}},"
		 "{'rpc':{'type':'EXPAND_VOLUME'}},"
		 "{'rpc':{'type':'LIST_VOLUMES_PUBLISHED_NODES'}},"
		 "{'rpc':{'type':'VOLUME_CONDITION'}},"
		 "{'rpc':{'type':'GET_VOLUME'}},"
		 "{'rpc':{'type':'SINGLE_NODE_MULTI_WRITER'}},"
		 "{'rpc':{'type':'MODIFY_VOLUME'}}]}",
		 "ControllerGetCapabilities: the fourteen RPC capabilities");

	env->d.distributed = true;
	_cleanup_(call_done) Call own =
		CALL(env, controller_get_capabilities, controller_get_capabilities_request, "{}");
	is_reply(own,
		 "{'capabilities':["
		 "{'rpc':{'type':'CREATE_DELETE_VOLUME'}},"
		 "{'rpc':{'type':'LIST_VOLUMES'}},"
		 "{'rpc':{'type':'GET_CAPACITY'}},"
		 "{'rpc':{'type':'CREATE_DELETE_SNAPSHOT'}},"
		 "{'rpc':{'type':'LIST_SNAPSHOTS'}},"
		 "{'rpc':{'type':'CLONE_VOLUME'}},"
		 "{'rpc':{'type':'VOLUME_CONDITION'}},"
		 "{'rpc':{'type':'GET_VOLUME'}},"
		 "{'rpc':{'type':'SINGLE_NODE_MULTI_WRITER'}}]}",
		 "--distributed: no publish, read-only publish, published nodes, expand or modify "
		 "(Kubernetes sends them to one controller, not to the volume's node)");
}

/* ControllerPublishVolume of id to node with capability, and more (JSON after ','). */
static Call publish(Env *env, const char *id, const char *node, const char *capability,
		    const char *more)
{
	return CALL(env, controller_publish_volume, controller_publish_volume_request,
		    "{'volume_id':'%s','node_id':'%s','volume_capability':%s%s}", id, node,
		    capability, more);
}

static void test_publish_fields(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);
	_cleanup_(call_done) Call no_volume =
		CALL(env, controller_publish_volume, controller_publish_volume_request,
		     "{'node_id':'node-1','volume_capability':" CAP_SNW "}");
	_cleanup_(call_done) Call no_node =
		CALL(env, controller_publish_volume, controller_publish_volume_request,
		     "{'volume_id':'fake-vol-1','volume_capability':" CAP_SNW "}");
	_cleanup_(call_done) Call no_cap =
		CALL(env, controller_publish_volume, controller_publish_volume_request,
		     "{'volume_id':'fake-vol-1','node_id':'node-1'}");
	_cleanup_(call_done) Call no_mode = publish(env, "fake-vol-1", "node-1", CAP_NO_MODE, "");
	_cleanup_(call_done) Call multi_writer = publish(env, "fake-vol-1", "node-1", CAP_MNMW, "");

	is_status(no_volume, "INVALID_ARGUMENT", "volume_id: missing",
		  "ControllerPublishVolume without a volume id");
	is_status(no_node, "INVALID_ARGUMENT", "node_id: missing", "without a node id");
	is_status(no_cap, "INVALID_ARGUMENT", "volume_capability: missing", "without a capability");
	is_status(no_mode, "INVALID_ARGUMENT", "volume_capability.access_mode: missing",
		  "a capability without an access mode");
	is_status(multi_writer, "INVALID_ARGUMENT",
		  "volume_capability.access_mode: the fake backend serves no "
		  "MULTI_NODE_MULTI_WRITER",
		  "an access mode the backend does not serve: its message");
	is_int(fake_calls(env->fake, FAKE_ATTACH), 0, "nothing was attached");
}

static void test_publish(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);

	fake_add_volume(env->fake, "fake-vol-1", "one", FAKE_GIB);
	fake_add_volume(env->fake, "fake-vol-2", "two", FAKE_GIB);
	fake_add_volume(env->fake, "fake-vol-ro", "ro", FAKE_GIB);
	_cleanup_(call_done) Call first =
		publish(env, "fake-vol-1", "node-1", CAP_SNW, ",'volume_context':{'k':'v'}");
	_cleanup_(call_done) Call again =
		publish(env, "fake-vol-1", "node-1", CAP_SNW, ",'volume_context':{'k':'v'}");

	is_reply(first, "{'publish_context':{'devicePath':'/dev/fake1'}}",
		 "ControllerPublishVolume: the backend's publish context");
	is_str(fake_last(env->fake, FAKE_ATTACH, "node_id"), "node-1", "attach gets the node");
	is_str(fake_last(env->fake, FAKE_ATTACH, "context.k"), "v", "and the volume context");
	is_str(fake_last(env->fake, FAKE_ATTACH, "access.mode"), "SINGLE_NODE_WRITER",
	       "and the access mode");
	is_reply(again, "{'publish_context':{'devicePath':'/dev/fake1'}}",
		 "published again to the same node: the same publish context");

	_cleanup_(call_done) Call ro =
		publish(env, "fake-vol-1", "node-1", CAP_SNW, ",'readonly':true");
	_cleanup_(call_done) Call elsewhere = publish(env, "fake-vol-1", "node-2", CAP_SNW, "");
	_cleanup_(call_done) Call no_node = publish(env, "fake-vol-2", "node-9", CAP_SNW, "");
	_cleanup_(call_done) Call no_volume = publish(env, "fake-vol-9", "node-1", CAP_SNW, "");
	is_status(ro, "ALREADY_EXISTS",
		  "volume fake-vol-1 is attached to node node-1 read-write already",
		  "again read-only: the backend's ALREADY_EXISTS");
	is_status(elsewhere, "FAILED_PRECONDITION",
		  "volume fake-vol-1 is attached to node node-1 already",
		  "to a second node in a single-node mode: the backend's FAILED_PRECONDITION");
	is_status(no_node, "NOT_FOUND", "node_id: node node-9 not found",
		  "an unknown node: NOT_FOUND");
	is_status(no_volume, "NOT_FOUND", "volume_id: volume fake-vol-9 not found",
		  "an unknown volume: NOT_FOUND");

	_cleanup_(call_done) Call reader =
		publish(env, "fake-vol-ro", "node-3", CAP_XFS_MNRO, ",'readonly':true");
	is_ok(reader, "a read-only publish");
	is_str(fake_last(env->fake, FAKE_ATTACH, "read_only"), "true", "attach gets readonly");
	is_str(fake_last(env->fake, FAKE_ATTACH, "access.multi_node"), "true",
	       "and that the mode lets several nodes attach");

	env->fake->max_per_node = 2;
	_cleanup_(call_done) Call full = publish(env, "fake-vol-2", "node-1", CAP_SNW, "");
	_cleanup_(call_done) Call full2 = publish(env, "fake-vol-2", "node-3", CAP_SNW, "");
	is_ok(full, "the node's second volume");
	is_status(full2, "FAILED_PRECONDITION",
		  "volume fake-vol-2 is attached to node node-1 already",
		  "(a single-node volume on another node)");
	fake_add_volume(env->fake, "fake-vol-3", "three", FAKE_GIB);
	_cleanup_(call_done) Call limit = publish(env, "fake-vol-3", "node-1", CAP_SNW, "");
	is_status(limit, "RESOURCE_EXHAUSTED", "node node-1 has 2 volumes attached, its limit",
		  "beyond the node's limit: the backend's -EMLINK is RESOURCE_EXHAUSTED");

	fake_add_volume(env->other, "vol-elsewhere", "theirs", FAKE_GIB);
	_cleanup_(call_done) Call theirs =
		publish(env, "vol-elsewhere", "node-1", CAP_SNW,
			",'volume_context':{'" FAKE_CONTEXT_BACKEND "':'other'}");
	is_ok(theirs, "a volume whose context names another backend");
	ok(fake_calls(env->other, FAKE_ATTACH) == 1 &&
		   fake_calls(env->other, FAKE_CHECK_ACCESS) == 1,
	   "is attached by that backend, which judged the capability");

	fake_drop(env->fake, FAKE_ATTACH);
	_cleanup_(call_done) Call unimplemented = publish(env, "fake-vol-3", "node-2", CAP_SNW, "");
	is_status(unimplemented, "UNIMPLEMENTED", "the fake backend has no attach",
		  "a backend without attach: UNIMPLEMENTED");
}

/* Which modes let several nodes in, and what check_access learns: the parameters a volume is
 * made with (EBS Multi-Attach wants io1 or io2), the volume it validates. */
static void test_access_modes(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);

	_cleanup_(call_done) Call mnsw =
		CALL(env, controller_create_volume, create_volume_request,
		     "{'name':'pvc-mnsw','volume_capabilities':[" CAP_BLOCK_MNSW "],"
		     "'capacity_range':{'required_bytes':10737418240},"
		     "'parameters':{'type':'io2','iops':'1000'}}");
	is_ok(mnsw, "CreateVolume MULTI_NODE_SINGLE_WRITER");
	is_str(fake_last(env->fake, FAKE_CREATE_VOLUME, "access.multi_node"), "true",
	       "MULTI_NODE_SINGLE_WRITER lets several nodes attach");
	is_str(fake_last(env->fake, FAKE_CHECK_ACCESS, "params.type"), "io2",
	       "check_access is told the parameters the volume is made with");
	_cleanup_(call_done) Call snsw =
		CALL(env, controller_create_volume, create_volume_request,
		     "{'name':'pvc-snsw','volume_capabilities':[" CAP_BLOCK_SNSW "]}");
	is_ok(snsw, "CreateVolume SINGLE_NODE_SINGLE_WRITER");
	is_str(fake_last(env->fake, FAKE_CREATE_VOLUME, "access.multi_node"), "false",
	       "SINGLE_NODE_SINGLE_WRITER: one node");

	_cleanup_(call_done) Call v = CALL(
		env, controller_validate_volume_capabilities, validate_volume_capabilities_request,
		"{'volume_id':'fake-vol-1','volume_capabilities':[" CAP_BLOCK_MNSW "]}");
	is_ok(v, "ValidateVolumeCapabilities MULTI_NODE_SINGLE_WRITER");
	is_str(fake_last(env->fake, FAKE_CHECK_ACCESS, "volume.id"), "fake-vol-1",
	       "check_access is told the volume it validates");
	is_str(fake_last(env->fake, FAKE_CHECK_ACCESS, "access.multi_node"), "true",
	       "as a multi-node mode");

	_cleanup_(call_done) Call one = publish(env, "fake-vol-1", "node-1", CAP_BLOCK_MNSW, "");
	_cleanup_(call_done) Call two = publish(env, "fake-vol-1", "node-2", CAP_BLOCK_MNSW, "");
	is_ok(one, "ControllerPublishVolume MULTI_NODE_SINGLE_WRITER to node-1");
	is_ok(two, "and to node-2: the mode lets several nodes attach");
	is_str(fake_last(env->fake, FAKE_ATTACH, "access.multi_node"), "true", "attach is told so");
}

static void test_unpublish(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);

	fake_add_volume(env->fake, "fake-vol-1", "one", FAKE_GIB);
	fake_add_volume(env->other, "other-vol-1", "theirs", FAKE_GIB);
	for (int n = 1; n <= 2; n++) {
		_cleanup_(call_done) Call c =
			publish(env, "fake-vol-1", n == 1 ? "node-1" : "node-2", CAP_MNRO,
				",'readonly':true");
		is_ok(c, "published to node-%d", n);
	}
	_cleanup_(call_done) Call none =
		CALL(env, controller_unpublish_volume, controller_unpublish_volume_request,
		     "{'node_id':'node-1'}");
	_cleanup_(call_done) Call one =
		CALL(env, controller_unpublish_volume, controller_unpublish_volume_request,
		     "{'volume_id':'fake-vol-1','node_id':'node-1'}");
	is_status(none, "INVALID_ARGUMENT", "volume_id: missing",
		  "ControllerUnpublishVolume without a volume id");
	is_reply(one, "{}", "ControllerUnpublishVolume from one node");
	FakeVolume *fv = fake_volume(env->fake, "fake-vol-1");
	ok(fv->n_attachments == 1 && strcmp(fv->attachments[0].node, "node-2") == 0,
	   "only that node's attachment went");

	_cleanup_(call_done) Call all =
		CALL(env, controller_unpublish_volume, controller_unpublish_volume_request,
		     "{'volume_id':'fake-vol-1'}");
	is_reply(all, "{}", "without a node id");
	is_str(fake_last(env->fake, FAKE_DETACH, "node_id"), "",
	       "the backend is asked to detach it from every node");
	ok(fv->n_attachments == 0, "it is attached nowhere");

	_cleanup_(call_done) Call unknown =
		CALL(env, controller_unpublish_volume, controller_unpublish_volume_request,
		     "{'volume_id':'fake-vol-9','node_id':'node-1'}");
	_cleanup_(call_done) Call theirs =
		CALL(env, controller_unpublish_volume, controller_unpublish_volume_request,
		     "{'volume_id':'other-vol-1','node_id':'node-1'}");
	is_reply(unknown, "{}", "an unknown volume: success, nothing to detach");
	is_ok(theirs, "another backend's volume");
	is_int(fake_calls(env->other, FAKE_DETACH), 1, "is detached by the backend claiming it");

	fake_fail(env->fake, FAKE_DETACH, -EAGAIN, "fake: the node's lock is busy");
	_cleanup_(call_done) Call busy =
		CALL(env, controller_unpublish_volume, controller_unpublish_volume_request,
		     "{'volume_id':'fake-vol-1','node_id':'node-1'}");
	is_status(busy, "UNAVAILABLE", "fake: the node's lock is busy", "a backend failure");
	fake_drop(env->fake, FAKE_DETACH);
	_cleanup_(call_done) Call unimplemented =
		CALL(env, controller_unpublish_volume, controller_unpublish_volume_request,
		     "{'volume_id':'fake-vol-1','node_id':'node-1'}");
	is_status(unimplemented, "UNIMPLEMENTED", "the fake backend has no detach",
		  "a backend without detach: UNIMPLEMENTED");
}

static Call expand(Env *env, const char *id, const char *range)
{
	return CALL(env, controller_expand_volume, controller_expand_volume_request,
		    "{'volume_id':'%s','capacity_range':%s}", id, range);
}

static void test_expand(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);

	fake_add_volume(env->fake, "fake-vol-1", "one", 2 * FAKE_GIB);
	fake_add_volume(env->fake, "fake-vol-bad", "bad", FAKE_GIB)->v.damage = xstrdup("bad");
	_cleanup_(call_done) Call no_id =
		CALL(env, controller_expand_volume, controller_expand_volume_request,
		     "{'capacity_range':{'required_bytes':1}}");
	_cleanup_(call_done) Call no_range =
		CALL(env, controller_expand_volume, controller_expand_volume_request,
		     "{'volume_id':'fake-vol-1'}");
	_cleanup_(call_done) Call bad_cap =
		CALL(env, controller_expand_volume, controller_expand_volume_request,
		     "{'volume_id':'fake-vol-1','capacity_range':{'required_bytes':1},"
		     "'volume_capability':" CAP_NO_MODE "}");
	_cleanup_(call_done) Call negative = expand(env, "fake-vol-1", "{'required_bytes':-5}");
	_cleanup_(call_done) Call inverted =
		expand(env, "fake-vol-1", "{'required_bytes':3221225472,'limit_bytes':2147483648}");
	_cleanup_(call_done) Call unknown = expand(env, "nope", "{'required_bytes':1}");
	_cleanup_(call_done) Call damaged = expand(env, "fake-vol-bad", "{'required_bytes':1}");
	_cleanup_(call_done) Call shrink =
		expand(env, "fake-vol-1", "{'required_bytes':1073741824,'limit_bytes':1073741824}");

	is_status(no_id, "INVALID_ARGUMENT", "volume_id: missing",
		  "ControllerExpandVolume without a volume id");
	is_status(no_range, "INVALID_ARGUMENT", "capacity_range: missing",
		  "without a capacity range");
	is_status(bad_cap, "INVALID_ARGUMENT", "volume_capability.access_mode: missing",
		  "with a capability without an access mode");
	is_status(negative, "INVALID_ARGUMENT", "capacity_range: bytes must not be negative",
		  "a negative size");
	is_status(inverted, "OUT_OF_RANGE",
		  "capacity_range: required_bytes 3221225472 exceeds limit_bytes 2147483648",
		  "required above limit");
	is_status(unknown, "NOT_FOUND", "volume_id: volume nope not found", "an unknown volume");
	is_status(damaged, "FAILED_PRECONDITION",
		  "volume fake-vol-bad is damaged: bad: it can only be deleted",
		  "a damaged volume");
	is_status(shrink, "OUT_OF_RANGE",
		  "capacity_range.limit_bytes: volume fake-vol-1 is 2147483648 bytes already, more "
		  "than 1073741824 (volumes never shrink)",
		  "a limit below the volume's size");
	is_int(fake_calls(env->fake, FAKE_CHANGE_VOLUME), 0, "nothing was changed");

	_cleanup_(call_done) Call smaller = expand(env, "fake-vol-1", "{'required_bytes':1048576}");
	_cleanup_(call_done) Call same = expand(env, "fake-vol-1", "{'required_bytes':2147483648}");
	is_reply(smaller, "{'capacity_bytes':2147483648,'node_expansion_required':true}",
		 "a size the volume has already: its size, and the node refreshes");
	is_reply(same, "{'capacity_bytes':2147483648,'node_expansion_required':true}",
		 "exactly its size: the same");
	is_int(fake_calls(env->fake, FAKE_CHANGE_VOLUME), 0, "without a change");

	_cleanup_(call_done) Call grow = expand(env, "fake-vol-1", "{'required_bytes':3221225473}");
	is_reply(grow, "{'capacity_bytes':3222274048,'node_expansion_required':true}",
		 "ControllerExpandVolume: the size the backend reports after the change");
	is_str(fake_last(env->fake, FAKE_CHANGE_VOLUME, "new_size"), "3222274048",
	       "the backend is asked for the size rounded up to a MiB");
	is_str(fake_last(env->fake, FAKE_CHANGE_VOLUME, "volume_id"), "fake-vol-1",
	       "of that volume");

	env->fake->capacity = 4 * FAKE_GIB;
	_cleanup_(call_done) Call full = expand(env, "fake-vol-1", "{'required_bytes':8589934592}");
	is_status(full, "RESOURCE_EXHAUSTED", "volume fake-vol-1: 8589934592 bytes do not fit",
		  "more than the backend has: its RESOURCE_EXHAUSTED and message");

	fake_add_volume(env->other, "other-vol-1", "theirs", FAKE_GIB);
	_cleanup_(call_done) Call theirs =
		expand(env, "other-vol-1", "{'required_bytes':2147483648}");
	is_reply(theirs, "{'capacity_bytes':2147483648,'node_expansion_required':true}",
		 "another backend's volume");
	ok(fake_calls(env->other, FAKE_CHANGE_VOLUME) == 1 &&
		   fake_calls(env->other, FAKE_GET_VOLUME) == 1,
	   "is looked up and grown by that backend");

	fake_drop(env->fake, FAKE_CHANGE_VOLUME);
	_cleanup_(call_done) Call unimplemented =
		expand(env, "fake-vol-1", "{'required_bytes':4294967296}");
	is_status(unimplemented, "UNIMPLEMENTED", "the fake backend has no change_volume",
		  "a backend without change_volume: UNIMPLEMENTED");
}

static Call modify(Env *env, const char *id, const char *params)
{
	return CALL(env, controller_modify_volume, controller_modify_volume_request,
		    "{'volume_id':'%s','mutable_parameters':%s}", id, params);
}

static void test_modify(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);

	fake_add_volume(env->fake, "fake-vol-1", "one", 10 * FAKE_GIB);
	_cleanup_(call_done) Call no_id =
		CALL(env, controller_modify_volume, controller_modify_volume_request,
		     "{'mutable_parameters':{'iops':'4000'}}");
	_cleanup_(call_done) Call immutable = modify(env, "fake-vol-1", "{'blockSize':'4096'}");
	_cleanup_(call_done) Call unknown = modify(env, "nope", "{'iops':'4000'}");
	_cleanup_(call_done) Call nothing = modify(env, "fake-vol-1", "{}");

	is_status(no_id, "INVALID_ARGUMENT", "volume_id: missing",
		  "ControllerModifyVolume without a volume id");
	is_status(immutable, "INVALID_ARGUMENT", "mutable_parameters: ...",
		  "a parameter that cannot be modified: under 'mutable_parameters'");
	ok(immutable.error && strstr(immutable.error, "blockSize"), "naming it: %s",
	   immutable.error);
	is_status(unknown, "NOT_FOUND", "volume_id: volume nope not found", "an unknown volume");
	is_reply(nothing, "{}", "nothing to change: success");
	is_int(fake_calls(env->fake, FAKE_CHANGE_VOLUME), 0, "without a call to the backend");

	_cleanup_(call_done) Call iops =
		modify(env, "fake-vol-1", "{'iops':'4000','tagSpecification_3':'team=a'}");
	is_reply(iops, "{}", "ControllerModifyVolume");
	is_str(fake_last(env->fake, FAKE_CHANGE_VOLUME, "params.iops"), "4000",
	       "the backend gets the parameter");
	is_str(fake_last(env->fake, FAKE_CHANGE_VOLUME, "params.tagSpecification_1"), "team=a",
	       "and the tag, renumbered by the merge");
	is_str(fake_last(env->fake, FAKE_CHANGE_VOLUME, "new_size"), "0", "and no new size");
	ok(fake_volume(env->fake, "fake-vol-1")->v.params.iops == 4000,
	   "the volume has the new value");

	_cleanup_(call_done) Call too_many = modify(env, "fake-vol-1", "{'iops':'90000'}");
	is_status(too_many, "INVALID_ARGUMENT", "mutable_parameters: ...",
		  "a value the backend refuses for this volume: its INVALID_ARGUMENT");

	fake_add_volume(env->other, "other-vol-1", "theirs", 10 * FAKE_GIB);
	_cleanup_(call_done) Call theirs = modify(env, "other-vol-1", "{'throughput':'500'}");
	is_ok(theirs, "another backend's volume");
	is_str(fake_last(env->other, FAKE_CHANGE_VOLUME, "params.throughput"), "500",
	       "is changed by that backend");

	fake_drop(env->fake, FAKE_CHANGE_VOLUME);
	_cleanup_(call_done) Call unimplemented = modify(env, "fake-vol-1", "{'iops':'5000'}");
	is_status(unimplemented, "UNIMPLEMENTED", "the fake backend has no change_volume",
		  "a backend without change_volume: UNIMPLEMENTED");
}

/* Two requests for one volume that do not agree, while a change of it is being applied: both
 * join the next batch, whichever comes second is ABORTED naming what conflicts, the other is
 * applied. No timing: the first change is held in the backend until one of them returned. */
static void conflict(CsiHandler handler, const ProtobufCMessageDescriptor *type, const char *first,
		     const char *a, const char *b, const char *message)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_CONTROLLER);
	Background held = {}, ba = {}, bb = {};
	bool a_done = false, b_done = false;

	fake_add_volume(env->fake, "fake-vol-1", "one", 10 * FAKE_GIB);
	fake_hold(env->fake, FAKE_CHANGE_VOLUME);
	background_start(&held, &env->d, handler, type, "%s", first);
	fake_wait_held(env->fake, FAKE_CHANGE_VOLUME);
	ba.finished = &a_done;
	bb.finished = &b_done;
	background_start(&ba, &env->d, handler, type, "%s", a);
	background_start(&bb, &env->d, handler, type, "%s", b);
	pthread_mutex_lock(&background_lock);
	while (!a_done && !b_done)
		pthread_cond_wait(&background_changed, &background_lock);
	pthread_mutex_unlock(&background_lock);
	fake_release(env->fake, FAKE_CHANGE_VOLUME);
	background_join(&held);
	background_join(&ba);
	background_join(&bb);

	Call *aborted = ba.call.r < 0 ? &ba.call : &bb.call;
	Call *applied = ba.call.r < 0 ? &bb.call : &ba.call;
	is_ok(held.call, "%s: the held change is applied", type->short_name);
	is_status(*aborted, "ABORTED", message,
		  "%s: the request that conflicts with a concurrent one: ABORTED",
		  type->short_name);
	is_ok(*applied, "%s: the one it conflicts with is applied", type->short_name);
	is_int(fake_calls(env->fake, FAKE_CHANGE_VOLUME), 2, "%s: two changes reached the backend",
	       type->short_name);
	call_done(&held.call);
	call_done(&ba.call);
	call_done(&bb.call);
}

static void test_conflicts(void)
{
	conflict(controller_expand_volume, &csi__v1__controller_expand_volume_request__descriptor,
		 "{'volume_id':'fake-vol-1','capacity_range':{'required_bytes':11811160064}}",
		 "{'volume_id':'fake-vol-1','capacity_range':{'required_bytes':12884901888}}",
		 "{'volume_id':'fake-vol-1','capacity_range':{'required_bytes':13958643712}}",
		 "capacity_range.required_bytes: conflicts with ... requested by a concurrent "
		 "call");
	conflict(controller_modify_volume, &csi__v1__controller_modify_volume_request__descriptor,
		 "{'volume_id':'fake-vol-1','mutable_parameters':{'iops':'3500'}}",
		 "{'volume_id':'fake-vol-1','mutable_parameters':{'iops':'4000'}}",
		 "{'volume_id':'fake-vol-1','mutable_parameters':{'iops':'4500'}}",
		 "iops: conflicts with ... requested by a concurrent call");
}

int main(void)
{
	test_create_name();
	test_create_limits();
	test_create_utf8();
	test_create_capabilities();
	test_create_capacity();
	test_create_parameters();
	test_parameters_are_the_backends();
	test_create_source();
	test_create_idempotent();
	test_create_request_and_reply();
	test_create_backend_errors();
	test_create_in_flight();
	test_delete();
	test_volume_key();
	test_validate();
	test_list();
	test_get_volume();
	test_capacity();
	test_capabilities();
	test_publish_fields();
	test_publish();
	test_access_modes();
	test_unpublish();
	test_expand();
	test_modify();
	test_conflicts();
	return tap_done();
}
