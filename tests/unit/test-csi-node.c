/* SPDX-License-Identifier: Apache-2.0 */
/* The Node service's handlers on fake backends: the fields the CSI layer checks, the node:ID
 * in-flight key, the backend it picks, what it hands the backend (paths, access, mount flags,
 * contexts, secrets, the group and how to apply it) and the replies it builds. The fsGroup
 * step runs on a directory of the test's own, as its owner: no root, no mount. */
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "csi-test.h"
#include "ownership.h"

static Call stage(Env *env, const char *id, const char *capability, const char *more)
{
	return CALL(env, node_stage_volume, node_stage_volume_request,
		    "{'volume_id':'%s','staging_target_path':'/staging/%s',"
		    "'volume_capability':%s%s}",
		    id, id, capability, more);
}

static Call publish(Env *env, const char *id, const char *target, const char *capability,
		    const char *more)
{
	return CALL(env, node_publish_volume, node_publish_volume_request,
		    "{'volume_id':'%s','target_path':'%s','volume_capability':%s%s}", id, target,
		    capability, more);
}

static void test_stage_fields(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_NODE);
	_cleanup_(call_done) Call no_id =
		CALL(env, node_stage_volume, node_stage_volume_request,
		     "{'staging_target_path':'/s','volume_capability':" CAP_SNW "}");
	_cleanup_(call_done) Call no_path =
		CALL(env, node_stage_volume, node_stage_volume_request,
		     "{'volume_id':'fake-vol-1','volume_capability':" CAP_SNW "}");
	_cleanup_(call_done) Call no_cap =
		CALL(env, node_stage_volume, node_stage_volume_request,
		     "{'volume_id':'fake-vol-1','staging_target_path':'/s'}");
	_cleanup_(call_done) Call no_type = stage(env, "fake-vol-1", CAP_NO_TYPE, "");
	_cleanup_(call_done) Call no_mode = stage(env, "fake-vol-1", CAP_NO_MODE, "");
	_cleanup_(call_done) Call vfat = stage(env, "fake-vol-1", CAP_VFAT, "");

	is_status(no_id, "INVALID_ARGUMENT", "volume_id: missing", "NodeStageVolume without id");
	is_status(no_path, "INVALID_ARGUMENT", "staging_target_path: missing",
		  "without a staging path");
	is_status(no_cap, "INVALID_ARGUMENT", "volume_capability: missing", "without a capability");
	is_status(no_type, "INVALID_ARGUMENT",
		  "volume_capability: access_type must be mount or block",
		  "a capability neither mount nor block");
	is_status(no_mode, "INVALID_ARGUMENT", "volume_capability.access_mode: missing",
		  "a capability without an access mode");
	is_status(vfat, "INVALID_ARGUMENT",
		  "volume_capability.mount.fs_type: the fake backend has no vfat",
		  "a filesystem the backend does not serve: its message");
	is_int(fake_calls(env->fake, FAKE_STAGE), 0, "nothing was staged");
}

static void test_stage(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_NODE);

	fake_add_volume(env->fake, "fake-vol-1", "one", FAKE_GIB);
	fake_add_volume(env->fake, "fake-vol-2", "two", FAKE_GIB);
	_cleanup_(call_done) Call c = CALL(
		env, node_stage_volume, node_stage_volume_request,
		"{'volume_id':'fake-vol-1','staging_target_path':'/staging/one',"
		"'volume_capability':{'mount':{'fs_type':'xfs','mount_flags':['noatime','nouuid']},"
		"'access_mode':{'mode':'SINGLE_NODE_WRITER'}},"
		"'volume_context':{'blockSize':'4096'},"
		"'publish_context':{'devicePath':'/dev/xvdba'},"
		"'secrets':{'key':'s3cret'}}");

	is_reply(c, "{}", "NodeStageVolume: an empty reply");
	is_str(fake_last(env->fake, FAKE_STAGE, "staging_path"), "/staging/one",
	       "the backend gets the staging path");
	is_str(fake_last(env->fake, FAKE_STAGE, "mount_flags"), "noatime,nouuid",
	       "the mount flags, one each");
	is_str(fake_last(env->fake, FAKE_STAGE, "access.fstype"), "xfs", "the filesystem");
	is_str(fake_last(env->fake, FAKE_STAGE, "access.mode"), "SINGLE_NODE_WRITER",
	       "the access mode");
	is_str(fake_last(env->fake, FAKE_STAGE, "context.blockSize"), "4096", "the volume context");
	is_str(fake_last(env->fake, FAKE_STAGE, "publish_context.devicePath"), "/dev/xvdba",
	       "the publish context");
	is_str(fake_last(env->fake, FAKE_STAGE, "secrets.key"), "s3cret", "the secrets");
	ok(fake_mount(env->fake, "fake-vol-1", "/staging/one", true), "it is staged there");

	_cleanup_(call_done) Call block = stage(env, "fake-vol-2", CAP_BLOCK_SNW, "");
	is_ok(block, "a raw block volume");
	is_str(fake_last(env->fake, FAKE_STAGE, "access.block"), "true", "is staged as one");
	ok(!fake_last(env->fake, FAKE_STAGE, "mount_flags"), "without mount flags");

	_cleanup_(call_done) Call again =
		CALL(env, node_stage_volume, node_stage_volume_request,
		     "{'volume_id':'fake-vol-1','staging_target_path':'/staging/one',"
		     "'volume_capability':" CAP_SNW "}");
	_cleanup_(call_done) Call elsewhere = stage(env, "fake-vol-1", CAP_SNW, "");
	_cleanup_(call_done) Call unknown = stage(env, "fake-vol-9", CAP_SNW, "");
	is_ok(again, "staged again at the same path: success");
	is_status(elsewhere, "ALREADY_EXISTS",
		  "volume fake-vol-1 is staged at /staging/one already",
		  "at another path: the backend's ALREADY_EXISTS");
	is_status(unknown, "NOT_FOUND", "volume_id: volume fake-vol-9 not found",
		  "an unknown volume: the backend's NOT_FOUND");

	fake_add_volume(env->other, "vol-flex", "theirs", FAKE_GIB);
	_cleanup_(call_done) Call theirs = stage(
		env, "vol-flex", CAP_SNW, ",'volume_context':{'" FAKE_CONTEXT_BACKEND "':'other'}");
	is_ok(theirs, "a volume whose context names another backend");
	ok(fake_calls(env->other, FAKE_STAGE) == 1 &&
		   fake_calls(env->other, FAKE_CHECK_ACCESS) == 1,
	   "is staged by that backend, which judged the capability");

	fake_drop(env->fake, FAKE_STAGE);
	_cleanup_(call_done) Call none = stage(env, "fake-vol-2", CAP_SNW, "");
	is_status(none, "UNIMPLEMENTED", "the fake backend has no stage",
		  "a backend without stage: UNIMPLEMENTED");
}

/* The calls that take the key "node:ID", while a stage holds it. */
static void test_node_key(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_ALL);
	Background held = {};

	fake_add_volume(env->fake, "fake-vol-1", "one", FAKE_GIB);
	fake_add_volume(env->fake, "fake-vol-2", "two", FAKE_GIB);
	fake_hold(env->fake, FAKE_STAGE);
	BACKGROUND(&held, env, node_stage_volume, node_stage_volume_request,
		   "{'volume_id':'fake-vol-1','staging_target_path':'/staging/fake-vol-1',"
		   "'volume_capability':" CAP_SNW "}");
	fake_wait_held(env->fake, FAKE_STAGE);

	_cleanup_(call_done) Call again = stage(env, "fake-vol-1", CAP_SNW, "");
	_cleanup_(call_done) Call unstage =
		CALL(env, node_unstage_volume, node_unstage_volume_request,
		     "{'volume_id':'fake-vol-1','staging_target_path':'/staging/fake-vol-1'}");
	_cleanup_(call_done) Call pub = publish(env, "fake-vol-1", "/pods/a", CAP_SNW, "");
	_cleanup_(call_done) Call unpub =
		CALL(env, node_unpublish_volume, node_unpublish_volume_request,
		     "{'volume_id':'fake-vol-1','target_path':'/pods/a'}");
	_cleanup_(call_done) Call expand =
		CALL(env, node_expand_volume, node_expand_volume_request,
		     "{'volume_id':'fake-vol-1','volume_path':'/pods/a'}");
	_cleanup_(call_done) Call stats =
		CALL(env, node_get_volume_stats, node_get_volume_stats_request,
		     "{'volume_id':'fake-vol-1','volume_path':'/pods/a'}");
	_cleanup_(call_done) Call other = stage(env, "fake-vol-2", CAP_SNW, "");
	_cleanup_(call_done) Call controller = CALL(
		env, controller_publish_volume, controller_publish_volume_request,
		"{'volume_id':'fake-vol-1','node_id':'node-1','volume_capability':" CAP_SNW "}");

	is_status(again, "ABORTED", "an operation on volume fake-vol-1 is in progress",
		  "NodeStageVolume while one is in flight: ABORTED");
	is_status(unstage, "ABORTED", "an operation on volume fake-vol-1 is in progress",
		  "NodeUnstageVolume meanwhile: ABORTED");
	is_status(pub, "ABORTED", "an operation on volume fake-vol-1 is in progress",
		  "NodePublishVolume meanwhile: ABORTED");
	is_status(unpub, "ABORTED", "an operation on volume fake-vol-1 is in progress",
		  "NodeUnpublishVolume meanwhile: ABORTED");
	is_status(expand, "ABORTED", "an operation on volume fake-vol-1 is in progress",
		  "NodeExpandVolume meanwhile: ABORTED");
	is_ok(stats, "NodeGetVolumeStats takes no key: served meanwhile");
	is_ok(other, "another volume meanwhile: served");
	is_ok(controller, "the controller's calls have keys of their own");

	fake_release(env->fake, FAKE_STAGE);
	background_join(&held);
	is_ok(held.call, "the held stage completes");
	call_done(&held.call);
	_cleanup_(call_done) Call after = stage(env, "fake-vol-1", CAP_SNW, "");
	is_ok(after, "the volume again once it is done: served");
}

static void test_unstage(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_NODE);

	fake_add_volume(env->fake, "fake-vol-1", "one", FAKE_GIB);
	_cleanup_(call_done) Call staged = stage(env, "fake-vol-1", CAP_SNW, "");
	_cleanup_(call_done) Call no_id =
		CALL(env, node_unstage_volume, node_unstage_volume_request,
		     "{'staging_target_path':'/staging/fake-vol-1'}");
	_cleanup_(call_done) Call no_path =
		CALL(env, node_unstage_volume, node_unstage_volume_request,
		     "{'volume_id':'fake-vol-1'}");
	_cleanup_(call_done) Call c =
		CALL(env, node_unstage_volume, node_unstage_volume_request,
		     "{'volume_id':'fake-vol-1','staging_target_path':'/staging/fake-vol-1'}");
	_cleanup_(call_done) Call again =
		CALL(env, node_unstage_volume, node_unstage_volume_request,
		     "{'volume_id':'fake-vol-1','staging_target_path':'/staging/fake-vol-1'}");
	_cleanup_(call_done) Call theirs =
		CALL(env, node_unstage_volume, node_unstage_volume_request,
		     "{'volume_id':'other-vol-1','staging_target_path':'/staging/other-vol-1'}");

	is_ok(staged, "(a staged volume)");
	is_status(no_id, "INVALID_ARGUMENT", "volume_id: missing", "NodeUnstageVolume without id");
	is_status(no_path, "INVALID_ARGUMENT", "staging_target_path: missing",
		  "without a staging path");
	is_reply(c, "{}", "NodeUnstageVolume: an empty reply");
	ok(!fake_mount(env->fake, "fake-vol-1", NULL, true), "it is staged no more");
	is_reply(again, "{}", "unstaged again: success");
	is_int(fake_calls(env->other, FAKE_UNSTAGE), 1,
	       "another backend's volume is unstaged by the backend claiming its id");
	is_str(fake_last(env->other, FAKE_UNSTAGE, "staging_path"), "/staging/other-vol-1",
	       "at the path asked");
	is_ok(theirs, "(success)");

	fake_fail(env->fake, FAKE_UNSTAGE, -EBUSY, "fake: /staging/fake-vol-1 is busy");
	_cleanup_(call_done) Call busy =
		CALL(env, node_unstage_volume, node_unstage_volume_request,
		     "{'volume_id':'fake-vol-1','staging_target_path':'/staging/fake-vol-1'}");
	is_status(busy, "ABORTED", "fake: /staging/fake-vol-1 is busy",
		  "a backend failure: its errno and message");
	fake_drop(env->fake, FAKE_UNSTAGE);
	_cleanup_(call_done) Call none =
		CALL(env, node_unstage_volume, node_unstage_volume_request,
		     "{'volume_id':'fake-vol-1','staging_target_path':'/staging/fake-vol-1'}");
	is_status(none, "UNIMPLEMENTED", "the fake backend has no unstage",
		  "a backend without unstage: UNIMPLEMENTED");
}

static void test_publish_fields(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_NODE);
	_cleanup_(call_done) Call no_id =
		CALL(env, node_publish_volume, node_publish_volume_request,
		     "{'target_path':'/t','volume_capability':" CAP_SNW "}");
	_cleanup_(call_done) Call no_target =
		CALL(env, node_publish_volume, node_publish_volume_request,
		     "{'volume_id':'fake-vol-1','volume_capability':" CAP_SNW "}");
	_cleanup_(call_done) Call no_cap =
		CALL(env, node_publish_volume, node_publish_volume_request,
		     "{'volume_id':'fake-vol-1','target_path':'/t'}");
	_cleanup_(call_done) Call no_mode = publish(env, "fake-vol-1", "/t", CAP_NO_MODE, "");
	_cleanup_(call_done) Call mnmw = publish(env, "fake-vol-1", "/t", CAP_MNMW, "");
	_cleanup_(call_done) Call group_name =
		publish(env, "fake-vol-1", "/t",
			"{'mount':{'volume_mount_group':'wheel'},"
			"'access_mode':{'mode':'SINGLE_NODE_WRITER'}}",
			"");
	_cleanup_(call_done) Call group_none =
		publish(env, "fake-vol-1", "/t",
			"{'mount':{'volume_mount_group':'4294967295'},"
			"'access_mode':{'mode':'SINGLE_NODE_WRITER'}}",
			"");
	_cleanup_(call_done) Call group_big =
		publish(env, "fake-vol-1", "/t",
			"{'mount':{'volume_mount_group':'4294967296'},"
			"'access_mode':{'mode':'SINGLE_NODE_WRITER'}}",
			"");

	is_status(no_id, "INVALID_ARGUMENT", "volume_id: missing", "NodePublishVolume without id");
	is_status(no_target, "INVALID_ARGUMENT", "target_path: missing", "without a target path");
	is_status(no_cap, "INVALID_ARGUMENT", "volume_capability: missing", "without a capability");
	is_status(no_mode, "INVALID_ARGUMENT", "volume_capability.access_mode: missing",
		  "a capability without an access mode");
	is_status(mnmw, "INVALID_ARGUMENT",
		  "volume_capability.access_mode: the fake backend serves no "
		  "MULTI_NODE_MULTI_WRITER",
		  "an access mode the backend does not serve: its message");
	is_status(group_name, "INVALID_ARGUMENT",
		  "volume_capability.mount.volume_mount_group: 'wheel' is not a group id",
		  "a volume_mount_group that is a name");
	is_status(group_none, "INVALID_ARGUMENT",
		  "volume_capability.mount.volume_mount_group: '4294967295' is not a group id",
		  "the group id that means 'none'");
	is_status(group_big, "INVALID_ARGUMENT",
		  "volume_capability.mount.volume_mount_group: '4294967296' is not a group id",
		  "a group id beyond 32 bits");
	is_int(fake_calls(env->fake, FAKE_PUBLISH), 0, "nothing was published");
}

static void test_publish(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_NODE);

	fake_add_volume(env->fake, "fake-vol-1", "one", FAKE_GIB);
	fake_add_volume(env->fake, "fake-vol-2", "two", FAKE_GIB);
	_cleanup_(call_done) Call c = CALL(
		env, node_publish_volume, node_publish_volume_request,
		"{'volume_id':'fake-vol-1','staging_target_path':'/staging/one',"
		"'target_path':'/pods/a','readonly':true,"
		"'volume_capability':{'mount':{'fs_type':'ext4','mount_flags':['noexec'],"
		"'volume_mount_group':'1234'},'access_mode':{'mode':'SINGLE_NODE_READER_ONLY'}},"
		"'volume_context':{'fsGroupChangePolicy':'Always'},"
		"'publish_context':{'devicePath':'/dev/xvdba'},'secrets':{'key':'s3cret'}}");

	is_reply(c, "{}", "NodePublishVolume: an empty reply");
	is_str(fake_last(env->fake, FAKE_PUBLISH, "staging_path"), "/staging/one",
	       "the backend gets the staging path");
	is_str(fake_last(env->fake, FAKE_PUBLISH, "target_path"), "/pods/a", "the target path");
	is_str(fake_last(env->fake, FAKE_PUBLISH, "read_only"), "true", "readonly");
	is_str(fake_last(env->fake, FAKE_PUBLISH, "access.read_only"), "true",
	       "the read-only access mode");
	is_str(fake_last(env->fake, FAKE_PUBLISH, "mount_flags"), "noexec", "the mount flags");
	is_str(fake_last(env->fake, FAKE_PUBLISH, "group"), "1234", "the volume_mount_group");
	is_str(fake_last(env->fake, FAKE_PUBLISH, "prepare"), "true",
	       "and the step that gives the mount to that group");
	is_str(fake_last(env->fake, FAKE_PUBLISH, "context.fsGroupChangePolicy"), "Always",
	       "the volume context");
	is_str(fake_last(env->fake, FAKE_PUBLISH, "publish_context.devicePath"), "/dev/xvdba",
	       "the publish context");
	is_str(fake_last(env->fake, FAKE_PUBLISH, "secrets.key"), "s3cret", "the secrets");
	ok(fake_mount(env->fake, "fake-vol-1", "/pods/a", false), "it is published there");

	_cleanup_(call_done) Call plain = publish(env, "fake-vol-2", "/pods/b", CAP_SNW, "");
	is_ok(plain, "without a group nor a staging path");
	is_str(fake_last(env->fake, FAKE_PUBLISH, "group"), "none", "no group");
	is_str(fake_last(env->fake, FAKE_PUBLISH, "prepare"), "false", "no step for it");
	is_str(fake_last(env->fake, FAKE_PUBLISH, "staging_path"), "",
	       "an empty staging path: the backend says whether it needs one");

	_cleanup_(call_done) Call block = publish(env, "fake-vol-2", "/pods/c", CAP_BLOCK_SNW, "");
	is_ok(block, "a raw block volume");
	ok(strcmp(fake_last(env->fake, FAKE_PUBLISH, "access.block"), "true") == 0 &&
		   !fake_last(env->fake, FAKE_PUBLISH, "mount_flags") &&
		   strcmp(fake_last(env->fake, FAKE_PUBLISH, "prepare"), "false") == 0,
	   "is published as one, without mount flags or a group");

	_cleanup_(call_done) Call again = publish(env, "fake-vol-2", "/pods/b", CAP_SNW, "");
	_cleanup_(call_done) Call ro =
		publish(env, "fake-vol-2", "/pods/b", CAP_SNW, ",'readonly':true");
	_cleanup_(call_done) Call unknown = publish(env, "fake-vol-9", "/pods/d", CAP_SNW, "");
	is_ok(again, "published again at the same target: success");
	is_status(ro, "ALREADY_EXISTS",
		  "volume fake-vol-2 is published at /pods/b with another read-only state",
		  "there again read-only: the backend's ALREADY_EXISTS");
	is_status(unknown, "NOT_FOUND", "volume_id: volume fake-vol-9 not found",
		  "an unknown volume: the backend's NOT_FOUND");

	fake_add_volume(env->other, "vol-flex", "theirs", FAKE_GIB);
	_cleanup_(call_done) Call theirs =
		publish(env, "vol-flex", "/pods/e", CAP_SNW,
			",'volume_context':{'" FAKE_CONTEXT_BACKEND "':'other'}");
	is_ok(theirs, "a volume whose context names another backend");
	ok(fake_calls(env->other, FAKE_PUBLISH) == 1 &&
		   fake_calls(env->other, FAKE_CHECK_ACCESS) == 1,
	   "is published by that backend, which judged the capability");

	fake_drop(env->fake, FAKE_PUBLISH);
	_cleanup_(call_done) Call none = publish(env, "fake-vol-1", "/pods/f", CAP_SNW, "");
	is_status(none, "UNIMPLEMENTED", "the fake backend has no publish",
		  "a backend without publish: UNIMPLEMENTED");
}

/* A directory as a filesystem root that already belongs to the group (OnRootMismatch skips
 * it), holding a file only its owner may read and write. */
static char root[64];
static char file[96];

static void root_make(void)
{
	snprintf(root, sizeof(root), "/tmp/volplug-test-csi-node-XXXXXX");
	if (!mkdtemp(root) || chown(root, (uid_t)-1, getgid()) < 0 || chmod(root, 02770) < 0) {
		printf("Bail out! cannot make %s\n", root);
		exit(1);
	}
	snprintf(file, sizeof(file), "%s/data", root);
	int fd = open(file, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0) {
		printf("Bail out! cannot make %s\n", file);
		exit(1);
	}
	close(fd);
}

static mode_t file_mode(void)
{
	struct stat st;

	return stat(file, &st) < 0 ? 0 : st.st_mode & 07777;
}

/* Publishes a new target of fake-vol-1 with the caller's group, the volume's policy in its
 * context (NULL: none); the file's mode after. */
static mode_t publish_with_group(Env *env, const char *context_policy, bool read_only)
{
	static int n;
	_cleanup_free_ char *target = xasprintf("/pods/%d", ++n);
	_cleanup_free_ char *context =
		context_policy ? xasprintf(",'volume_context':{'fsGroupChangePolicy':'%s'}",
					   context_policy)
			       : xstrdup("");
	_cleanup_free_ char *capability = xasprintf(
		"{'mount':{'volume_mount_group':'%u'},'access_mode':{'mode':'%s'}}",
		(unsigned)getgid(), read_only ? "SINGLE_NODE_READER_ONLY" : "SINGLE_NODE_WRITER");

	(void)chmod(file, 0600);
	_cleanup_(call_done) Call c =
		CALL(env, node_publish_volume, node_publish_volume_request,
		     "{'volume_id':'fake-vol-1','target_path':'%s','volume_capability':%s,"
		     "'readonly':%s%s}",
		     target, capability, read_only ? "true" : "false", context);
	if (c.r < 0)
		printf("# publish failed: %s\n", c.error);
	return file_mode();
}

static void test_publish_group(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_NODE);

	root_make();
	fake_add_volume(env->fake, "fake-vol-1", "one", FAKE_GIB);
	env->fake->prepare_dir = root;

	is_int(publish_with_group(env, "OnRootMismatch", false), 0600,
	       "fsGroup, the volume's policy OnRootMismatch, the root done: nothing walked");
	is_int(publish_with_group(env, "Always", false), 0660,
	       "the volume's policy Always: the tree is walked, the file is the group's");
	is_int(publish_with_group(env, "Always", true), 0640, "read-only: the group may read only");
	is_int(publish_with_group(env, NULL, false), 0600,
	       "no policy of the volume: the daemon's (OnRootMismatch)");
	env->d.fs_group_policy = OWNERSHIP_ALWAYS;
	is_int(publish_with_group(env, NULL, false), 0660, "the daemon's Always");
	is_int(publish_with_group(env, "OnRootMismatch", false), 0600,
	       "the volume's policy before the daemon's");
	env->fake->prepare_policy = "Always";
	is_int(publish_with_group(env, "OnRootMismatch", false), 0660,
	       "the backend's policy before the volume's");

	env->fake->prepare_dir = file;
	_cleanup_free_ char *message =
		xasprintf("volume fake-vol-1: giving it to group %u failed: Not a directory",
			  (unsigned)getgid());
	_cleanup_(call_done) Call fails =
		CALL(env, node_publish_volume, node_publish_volume_request,
		     "{'volume_id':'fake-vol-1','target_path':'/pods/x','volume_capability':"
		     "{'mount':{'volume_mount_group':'%u'},"
		     "'access_mode':{'mode':'SINGLE_NODE_WRITER'}}}",
		     (unsigned)getgid());
	is_status(fails, "INTERNAL", message,
		  "the group step fails: the publish fails, saying why");
	ok(!fake_mount(env->fake, "fake-vol-1", "/pods/x", false),
	   "and the backend does not record it published");
	(void)unlink(file);
	(void)rmdir(root);
}

static void test_unpublish(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_NODE);

	fake_add_volume(env->fake, "fake-vol-1", "one", FAKE_GIB);
	_cleanup_(call_done) Call pub = publish(env, "fake-vol-1", "/pods/a", CAP_SNW, "");
	_cleanup_(call_done) Call no_id =
		CALL(env, node_unpublish_volume, node_unpublish_volume_request,
		     "{'target_path':'/pods/a'}");
	_cleanup_(call_done) Call no_target =
		CALL(env, node_unpublish_volume, node_unpublish_volume_request,
		     "{'volume_id':'fake-vol-1'}");
	_cleanup_(call_done) Call c =
		CALL(env, node_unpublish_volume, node_unpublish_volume_request,
		     "{'volume_id':'fake-vol-1','target_path':'/pods/a'}");
	_cleanup_(call_done) Call again =
		CALL(env, node_unpublish_volume, node_unpublish_volume_request,
		     "{'volume_id':'fake-vol-1','target_path':'/pods/a'}");
	_cleanup_(call_done) Call theirs =
		CALL(env, node_unpublish_volume, node_unpublish_volume_request,
		     "{'volume_id':'other-vol-1','target_path':'/pods/b'}");

	is_ok(pub, "(a published volume)");
	is_status(no_id, "INVALID_ARGUMENT", "volume_id: missing",
		  "NodeUnpublishVolume without id");
	is_status(no_target, "INVALID_ARGUMENT", "target_path: missing", "without a target path");
	is_reply(c, "{}", "NodeUnpublishVolume: an empty reply");
	ok(!fake_mount(env->fake, "fake-vol-1", "/pods/a", false), "it is published no more");
	is_reply(again, "{}", "unpublished again: success");
	is_ok(theirs, "another backend's volume");
	is_str(fake_last(env->other, FAKE_UNPUBLISH, "target_path"), "/pods/b",
	       "is unpublished by the backend claiming its id, at the target asked");

	fake_drop(env->fake, FAKE_UNPUBLISH);
	_cleanup_(call_done) Call none =
		CALL(env, node_unpublish_volume, node_unpublish_volume_request,
		     "{'volume_id':'fake-vol-1','target_path':'/pods/a'}");
	is_status(none, "UNIMPLEMENTED", "the fake backend has no unpublish",
		  "a backend without unpublish: UNIMPLEMENTED");
}

static Call node_expand(Env *env, const char *id, const char *more)
{
	return CALL(env, node_expand_volume, node_expand_volume_request,
		    "{'volume_id':'%s','volume_path':'/pods/a'%s}", id, more);
}

static void test_expand(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_NODE);

	fake_add_volume(env->fake, "fake-vol-1", "one", FAKE_GIB);
	_cleanup_(call_done) Call no_id = CALL(env, node_expand_volume, node_expand_volume_request,
					       "{'volume_path':'/pods/a'}");
	_cleanup_(call_done) Call no_path = CALL(
		env, node_expand_volume, node_expand_volume_request, "{'volume_id':'fake-vol-1'}");
	_cleanup_(call_done) Call negative =
		node_expand(env, "fake-vol-1", ",'capacity_range':{'required_bytes':-1}");
	_cleanup_(call_done) Call negative_limit =
		node_expand(env, "fake-vol-1", ",'capacity_range':{'limit_bytes':-1}");
	_cleanup_(call_done) Call inverted = node_expand(
		env, "fake-vol-1", ",'capacity_range':{'required_bytes':3,'limit_bytes':2}");
	_cleanup_(call_done) Call no_mode =
		node_expand(env, "fake-vol-1", ",'volume_capability':" CAP_NO_MODE);

	is_status(no_id, "INVALID_ARGUMENT", "volume_id: missing", "NodeExpandVolume without id");
	is_status(no_path, "INVALID_ARGUMENT", "volume_path: missing", "without a volume path");
	is_status(negative, "INVALID_ARGUMENT", "capacity_range.required_bytes: negative",
		  "a negative required_bytes");
	is_status(negative_limit, "INVALID_ARGUMENT", "capacity_range.limit_bytes: negative",
		  "a negative limit_bytes");
	is_status(inverted, "INVALID_ARGUMENT",
		  "capacity_range: required_bytes 3 is more than limit_bytes 2",
		  "required above limit");
	is_status(no_mode, "INVALID_ARGUMENT", "volume_capability.access_mode: missing",
		  "a capability given without an access mode");
	is_int(fake_calls(env->fake, FAKE_NODE_EXPAND), 0, "the backend was not asked");

	_cleanup_(call_done) Call grow = node_expand(
		env, "fake-vol-1",
		",'staging_target_path':'/staging/one',"
		"'capacity_range':{'required_bytes':2147483648,'limit_bytes':4294967296},"
		"'volume_capability':" CAP_VFAT);
	is_reply(grow, "{'capacity_bytes':2147483648}",
		 "NodeExpandVolume: the size the backend reports");
	is_str(fake_last(env->fake, FAKE_NODE_EXPAND, "required"), "2147483648",
	       "the backend gets required_bytes");
	is_str(fake_last(env->fake, FAKE_NODE_EXPAND, "limit"), "4294967296", "limit_bytes");
	is_str(fake_last(env->fake, FAKE_NODE_EXPAND, "staging_path"), "/staging/one",
	       "the staging path");
	is_str(fake_last(env->fake, FAKE_NODE_EXPAND, "access.fstype"), "vfat",
	       "and the capability, checked for its form only (the volume exists already)");
	is_str(fake_last(env->fake, FAKE_NODE_EXPAND, "grow"), "false",
	       "a controller expanded the volume: the node only grows the filesystem");
	is_int(fake_calls(env->fake, FAKE_CHECK_ACCESS), 0,
	       "the backend was not asked to judge it");

	_cleanup_(call_done) Call plain = node_expand(env, "fake-vol-1", "");
	is_reply(plain, "{'capacity_bytes':1073741824}", "without a range: the volume's size");
	ok(!fake_last(env->fake, FAKE_NODE_EXPAND, "access.mode") &&
		   strcmp(fake_last(env->fake, FAKE_NODE_EXPAND, "required"), "0") == 0,
	   "no capability, no range are passed on as such");

	env->d.distributed = true;
	_cleanup_(call_done) Call distributed =
		node_expand(env, "fake-vol-1", ",'capacity_range':{'required_bytes':2147483648}");
	is_reply(distributed, "{'capacity_bytes':2147483648}", "NodeExpandVolume, --distributed");
	is_str(fake_last(env->fake, FAKE_NODE_EXPAND, "grow"), "true",
	       "no controller expands: the backend is told to grow the volume itself");
	env->d.distributed = false;

	_cleanup_(call_done) Call unknown = node_expand(env, "fake-vol-9", "");
	is_status(unknown, "NOT_FOUND", "volume_id: volume fake-vol-9 not found",
		  "an unknown volume: the backend's NOT_FOUND");
	fake_add_volume(env->other, "other-vol-1", "theirs", 3 * FAKE_GIB);
	_cleanup_(call_done) Call theirs = node_expand(env, "other-vol-1", "");
	is_reply(theirs, "{'capacity_bytes':3221225472}",
		 "another backend's volume: expanded by the backend claiming its id");
	fake_drop(env->fake, FAKE_NODE_EXPAND);
	_cleanup_(call_done) Call none = node_expand(env, "fake-vol-1", "");
	is_status(none, "UNIMPLEMENTED", "the fake backend has no node_expand",
		  "a backend without node_expand: UNIMPLEMENTED");
}

static Call stats(Env *env, const char *id, const char *path)
{
	return CALL(env, node_get_volume_stats, node_get_volume_stats_request,
		    "{'volume_id':'%s','volume_path':'%s'}", id, path);
}

static void test_stats(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_NODE);

	fake_add_volume(env->fake, "fake-vol-1", "one", FAKE_GIB);
	fake_add_volume(env->fake, "fake-vol-2", "two", 2 * FAKE_GIB);
	env->fake->stats = (BlockfsStats){
		.bytes_total = 1000000,
		.bytes_used = 250000,
		.bytes_available = 700000,
		.inodes_total = 6400,
		.inodes_used = 11,
		.inodes_free = 6389,
	};
	_cleanup_(call_done) Call fs = publish(env, "fake-vol-1", "/pods/a", CAP_SNW, "");
	_cleanup_(call_done) Call block = publish(env, "fake-vol-2", "/pods/b", CAP_BLOCK_SNW, "");
	_cleanup_(call_done) Call no_id =
		CALL(env, node_get_volume_stats, node_get_volume_stats_request,
		     "{'volume_path':'/pods/a'}");
	_cleanup_(call_done) Call no_path =
		CALL(env, node_get_volume_stats, node_get_volume_stats_request,
		     "{'volume_id':'fake-vol-1'}");
	_cleanup_(call_done) Call mounted = stats(env, "fake-vol-1", "/pods/a");
	_cleanup_(call_done) Call raw = stats(env, "fake-vol-2", "/pods/b");
	_cleanup_(call_done) Call not_there = stats(env, "fake-vol-1", "/pods/z");
	_cleanup_(call_done) Call unknown = stats(env, "fake-vol-9", "/pods/a");

	is_ok(fs, "(a filesystem volume published)");
	is_ok(block, "(a block volume published)");
	is_status(no_id, "INVALID_ARGUMENT", "volume_id: missing", "NodeGetVolumeStats without id");
	is_status(no_path, "INVALID_ARGUMENT", "volume_path: missing", "without a volume path");
	is_reply(mounted,
		 "{'usage':[{'available':700000,'total':1000000,'used':250000,'unit':'BYTES'},"
		 "{'available':6389,'total':6400,'used':11,'unit':'INODES'}],"
		 "'volume_condition':{}}",
		 "NodeGetVolumeStats of a filesystem: bytes and inodes, a normal condition");
	is_reply(raw, "{'usage':[{'total':2147483648,'unit':'BYTES'}],'volume_condition':{}}",
		 "of a raw block volume: its size only");
	is_reply(not_there,
		 "{'volume_condition':{'abnormal':true,"
		 "'message':'volume fake-vol-1 is not mounted at /pods/z'}}",
		 "where it is not mounted: no usage, an abnormal condition saying why");
	is_status(unknown, "NOT_FOUND", "volume_id: volume fake-vol-9 not found",
		  "an unknown volume: the backend's NOT_FOUND");

	FakeVolume *fv = fake_volume(env->fake, "fake-vol-1");
	fv->v.abnormal = true;
	fv->v.condition = xstrdup("I/O errors on its device");
	_cleanup_(call_done) Call sick = stats(env, "fake-vol-1", "/pods/a");
	const Csi__V1__NodeGetVolumeStatsResponse *r =
		REPLY(sick, Csi__V1__NodeGetVolumeStatsResponse);
	ok(r && r->n_usage == 2 && r->volume_condition->abnormal &&
		   strcmp(r->volume_condition->message, "I/O errors on its device") == 0,
	   "an abnormal volume: usage and the backend's condition");
	is_str(fake_last(env->fake, FAKE_NODE_STATS, "volume_path"), "/pods/a",
	       "the backend gets the volume path");

	fake_add_volume(env->other, "other-vol-1", "theirs", FAKE_GIB);
	_cleanup_(call_done) Call theirs = stats(env, "other-vol-1", "/pods/c");
	is_ok(theirs, "another backend's volume");
	is_int(fake_calls(env->other, FAKE_NODE_STATS), 1, "is asked of the backend claiming it");
	fake_drop(env->fake, FAKE_NODE_STATS);
	_cleanup_(call_done) Call none = stats(env, "fake-vol-1", "/pods/a");
	is_status(none, "UNIMPLEMENTED", "the fake backend has no node_stats",
		  "a backend without node_stats: UNIMPLEMENTED");
}

static void test_capabilities(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_NODE);
	_cleanup_(call_done) Call c =
		CALL(env, node_get_capabilities, node_get_capabilities_request, "{}");

	is_reply(c,
		 "{'capabilities':["
		 "{'rpc':{'type':'STAGE_UNSTAGE_VOLUME'}},"
		 "{'rpc':{'type':'EXPAND_VOLUME'}},"
		 "{'rpc':{'type':'GET_VOLUME_STATS'}},"
		 "{'rpc':{'type':'VOLUME_CONDITION'}},"
		 "{'rpc':{'type':'SINGLE_NODE_MULTI_WRITER'}},"
		 "{'rpc':{'type':'VOLUME_MOUNT_GROUP'}}]}",
		 "NodeGetCapabilities: the six RPC capabilities");
}

static void test_info(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_NODE);

	env->fake->max_per_node = 16;
	_cleanup_(call_done) Call c = CALL(env, node_get_info, node_get_info_request, "{}");
	is_reply(c,
		 "{'node_id':'node-1','max_volumes_per_node':16,"
		 "'accessible_topology':{'segments':{'topology.volplug.io/zone':'zone-a'}}}",
		 "NodeGetInfo: the driver's node id, the backend's limit and topology");
	is_int(fake_calls(env->other, FAKE_NODE_INFO), 0, "asked of the default backend only");

	env->fake->max_per_node = 0;
	_cleanup_(call_done) Call unlimited = CALL(env, node_get_info, node_get_info_request, "{}");
	is_reply(unlimited,
		 "{'node_id':'node-1',"
		 "'accessible_topology':{'segments':{'topology.volplug.io/zone':'zone-a'}}}",
		 "no limit: max_volumes_per_node left out");

	fake_fail(env->fake, FAKE_NODE_INFO, -EAGAIN, "fake: instance metadata: try again");
	_cleanup_(call_done) Call busy = CALL(env, node_get_info, node_get_info_request, "{}");
	is_status(busy, "UNAVAILABLE", "fake: instance metadata: try again",
		  "a backend failure: its errno and message");
	fake_drop(env->fake, FAKE_NODE_INFO);
	_cleanup_(call_done) Call none = CALL(env, node_get_info, node_get_info_request, "{}");
	is_status(none, "UNIMPLEMENTED", "the fake backend has no node_info",
		  "a backend without node_info: UNIMPLEMENTED");
}

/* Contexts and secrets of 100,000 entries, and strings that are not UTF-8: refused before the
 * handler builds a map of them or picks a backend. */
static void test_limits(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_NODE);
	const char *json = "{'volume_id':'fake-vol-1','staging_target_path':'/staging/x',"
			   "'volume_capability':" CAP_SNW "}";
	const char *pjson = "{'volume_id':'fake-vol-1','staging_target_path':'/staging/x',"
			    "'target_path':'/target/x','volume_capability':" CAP_SNW "}";
	Csi__V1__NodeStageVolumeRequest *s;
	Csi__V1__NodePublishVolumeRequest *p;

	s = (void *)request_new(&csi__v1__node_stage_volume_request__descriptor, json);
	pbmap_add_many((void ***)&s->volume_context, &s->n_volume_context,
		       &csi__v1__node_stage_volume_request__volume_context_entry__descriptor,
		       100000, "key", "value");
	_cleanup_(call_done) Call ctx = call_message(&env->d, node_stage_volume, &s->base);
	is_status(ctx, "INVALID_ARGUMENT", "volume_context: at most 512 entries, got 100000",
		  "NodeStageVolume with 100000 volume_context entries");

	s = (void *)request_new(&csi__v1__node_stage_volume_request__descriptor, json);
	pbmap_add_many((void ***)&s->publish_context, &s->n_publish_context,
		       &csi__v1__node_stage_volume_request__publish_context_entry__descriptor, 513,
		       "key", "value");
	_cleanup_(call_done) Call pctx = call_message(&env->d, node_stage_volume, &s->base);
	is_status(pctx, "INVALID_ARGUMENT", "publish_context: at most 512 entries, got 513",
		  "NodeStageVolume with 513 publish_context entries");

	s = (void *)request_new(&csi__v1__node_stage_volume_request__descriptor, json);
	pbmap_add_many((void ***)&s->secrets, &s->n_secrets,
		       &csi__v1__node_stage_volume_request__secrets_entry__descriptor, 100000,
		       "key", "value");
	_cleanup_(call_done) Call sec = call_message(&env->d, node_stage_volume, &s->base);
	is_status(sec, "INVALID_ARGUMENT", "secrets: at most 512 entries, got 100000",
		  "NodeStageVolume with 100000 secrets");

	p = (void *)request_new(&csi__v1__node_publish_volume_request__descriptor, pjson);
	pbmap_add_many((void ***)&p->volume_context, &p->n_volume_context,
		       &csi__v1__node_publish_volume_request__volume_context_entry__descriptor,
		       100000, "key", "value");
	_cleanup_(call_done) Call pub = call_message(&env->d, node_publish_volume, &p->base);
	is_status(pub, "INVALID_ARGUMENT", "volume_context: at most 512 entries, got 100000",
		  "NodePublishVolume with 100000 volume_context entries");

	s = (void *)request_new(&csi__v1__node_stage_volume_request__descriptor, json);
	pbmap_add_many((void ***)&s->volume_context, &s->n_volume_context,
		       &csi__v1__node_stage_volume_request__volume_context_entry__descriptor, 1,
		       "\xff", "value");
	_cleanup_(call_done) Call key = call_message(&env->d, node_stage_volume, &s->base);
	is_status(key, "INVALID_ARGUMENT", "volume_context: key #1 is not valid UTF-8",
		  "a volume_context key that is not UTF-8");

	p = (void *)request_new(&csi__v1__node_publish_volume_request__descriptor, pjson);
	free(p->target_path);
	p->target_path = xstrdup("/target/\xff");
	_cleanup_(call_done) Call path = call_message(&env->d, node_publish_volume, &p->base);
	is_status(path, "INVALID_ARGUMENT", "target_path: not valid UTF-8",
		  "a target_path that is not UTF-8");
	is_int(fake_calls(env->fake, FAKE_STAGE), 0, "nothing was staged");
	is_int(fake_calls(env->fake, FAKE_PUBLISH), 0, "nothing was published");
}

int main(void)
{
	test_stage_fields();
	test_stage();
	test_node_key();
	test_unstage();
	test_publish_fields();
	test_publish();
	test_publish_group();
	test_unpublish();
	test_expand();
	test_stats();
	test_capabilities();
	test_info();
	test_limits();
	return tap_done();
}
