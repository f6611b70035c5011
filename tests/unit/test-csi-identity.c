/* SPDX-License-Identifier: Apache-2.0 */
/* The Identity service, the method tables each mode serves, and the Admin service, called as
 * the server calls them, on fake backends: what a client reads. */
#include <string.h>

#include "admin.h"
#include "alloc.h"
#include "admin.pb-c.h"
#include "csi-test.h"

static void test_plugin_info(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_ALL);
	_cleanup_(call_done) Call c =
		CALL(env, identity_get_plugin_info, get_plugin_info_request, "{}");

	is_reply(c, "{'name':'volplug.test.io','vendor_version':'9.8.7'}",
		 "GetPluginInfo: the driver's name and version");
}

static void test_plugin_capabilities(void)
{
	_cleanup_(env_freep) Env *all = env_new(DRIVER_MODE_ALL);
	_cleanup_(env_freep) Env *node = env_new(DRIVER_MODE_NODE);
	_cleanup_(env_freep) Env *controller = env_new(DRIVER_MODE_CONTROLLER);
	_cleanup_(call_done) Call a =
		CALL(all, identity_get_plugin_capabilities, get_plugin_capabilities_request, "{}");
	_cleanup_(call_done) Call n =
		CALL(node, identity_get_plugin_capabilities, get_plugin_capabilities_request, "{}");
	_cleanup_(call_done) Call c = CALL(controller, identity_get_plugin_capabilities,
					   get_plugin_capabilities_request, "{}");

	is_reply(a,
		 "{'capabilities':[{'service':{'type':'CONTROLLER_SERVICE'}},"
		 "{'service':{'type':'GROUP_CONTROLLER_SERVICE'}},"
		 "{'service':{'type':'VOLUME_ACCESSIBILITY_CONSTRAINTS'}},"
		 "{'volume_expansion':{'type':'ONLINE'}}]}",
		 "GetPluginCapabilities (all): controller, group controller, topology, online "
		 "expansion");
	is_reply(c,
		 "{'capabilities':[{'service':{'type':'CONTROLLER_SERVICE'}},"
		 "{'service':{'type':'GROUP_CONTROLLER_SERVICE'}},"
		 "{'service':{'type':'VOLUME_ACCESSIBILITY_CONSTRAINTS'}},"
		 "{'volume_expansion':{'type':'ONLINE'}}]}",
		 "GetPluginCapabilities (controller): the same");
	is_reply(n,
		 "{'capabilities':[{'service':{'type':'VOLUME_ACCESSIBILITY_CONSTRAINTS'}},"
		 "{'volume_expansion':{'type':'ONLINE'}}]}",
		 "GetPluginCapabilities (node): no controller services");
}

static void test_probe(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_ALL);
	_cleanup_(call_done) Call ready = CALL(env, identity_probe, probe_request, "{}");

	is_reply(ready, "{'ready':{'value':true}}", "Probe: ready");
	ok(fake_calls(env->fake, FAKE_PROBE) == 1 && fake_calls(env->other, FAKE_PROBE) == 1,
	   "Probe asks every backend");

	fake_fail(env->other, FAKE_PROBE, -EIO, "other: its service is down");
	_cleanup_(call_done) Call other = CALL(env, identity_probe, probe_request, "{}");
	is_reply(other, "{'ready':{'value':false}}",
		 "a backend that is not ready: not ready (a success, with ready false)");

	fake_fail(env->other, FAKE_PROBE, 0, NULL);
	fake_fail(env->fake, FAKE_PROBE, -EIO, "fake: its pool is gone");
	fake_forget_calls(env->other);
	_cleanup_(call_done) Call first = CALL(env, identity_probe, probe_request, "{}");
	is_reply(first, "{'ready':{'value':false}}", "the default backend not ready: not ready");
	is_int(fake_calls(env->other, FAKE_PROBE), 0, "the others are not asked after one failed");

	fake_fail(env->fake, FAKE_PROBE, 0, NULL);
	fake_drop(env->fake, FAKE_PROBE);
	fake_drop(env->other, FAKE_PROBE);
	_cleanup_(call_done) Call none = CALL(env, identity_probe, probe_request, "{}");
	is_reply(none, "{'ready':{'value':true}}", "backends without a probe: ready");
}

/* The short name of the method of a path ("/csi.v1.Node/NodeGetInfo": "NodeGetInfo"). */
static const char *method_of(const char *path)
{
	return strrchr(path, '/') + 1;
}

static bool table_has(const RpcMethod *t, size_t n, const char *path)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(t[i].path, path) == 0)
			return true;
	return false;
}

static void test_method_tables(void)
{
	static const struct {
		DriverMode mode;
		size_t n;
		bool controller, node;
	} modes[] = {
		{DRIVER_MODE_ALL, 33, true, true},
		{DRIVER_MODE_CONTROLLER, 25, true, false},
		{DRIVER_MODE_NODE, 13, false, true},
	};

	for (size_t m = 0; m < ELEMENTSOF(modes); m++) {
		const char *name = driver_mode_to_string(modes[m].mode);
		size_t n;
		const RpcMethod *t = csi_methods(modes[m].mode, &n);
		bool typed = true;

		is_int(n, modes[m].n, "mode %s: %zu methods", name, modes[m].n);
		for (size_t i = 0; i < n; i++) {
			_cleanup_free_ char *want = xasprintf("%sRequest", method_of(t[i].path));
			if (strcmp(t[i].request->short_name, want) != 0) {
				printf("# %s decodes a %s\n", t[i].path, t[i].request->name);
				typed = false;
			}
		}
		ok(typed, "mode %s: each method decodes its own request type", name);
		ok(table_has(t, n, "/csi.v1.Identity/Probe") &&
			   table_has(t, n, "/volplug.admin.v1.Admin/ListFlexDrivers") &&
			   table_has(t, n, "/volplug.admin.v1.Admin/GetStatus"),
		   "mode %s: Identity and Admin", name);
		ok(table_has(t, n, "/csi.v1.Controller/CreateVolume") == modes[m].controller &&
			   table_has(t, n, "/csi.v1.GroupController/CreateVolumeGroupSnapshot") ==
				   modes[m].controller,
		   "mode %s: the controller services %s", name,
		   modes[m].controller ? "served" : "not served");
		ok(table_has(t, n, "/csi.v1.SnapshotMetadata/GetMetadataDelta") ==
				   modes[m].controller &&
			   table_has(t, n, "/csi.v1.SnapshotMetadata/GetMetadataAllocated") ==
				   modes[m].controller,
		   "mode %s: the SnapshotMetadata service %s beside the controller", name,
		   modes[m].controller ? "served" : "not served");
		ok(table_has(t, n, "/csi.v1.Node/NodeStageVolume") == modes[m].node,
		   "mode %s: the node service %s", name, modes[m].node ? "served" : "not served");
		is_int(driver_mode_from_string(name), modes[m].mode, "'%s' names its mode", name);
	}
	is_int(driver_mode_from_string("both"), -EINVAL, "'both' is no mode");
}

static void test_admin_flex_off(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_ALL);
	_cleanup_(call_done) Call c =
		call_run(&env->d, admin_list_flex_drivers,
			 &volplug__admin__v1__list_flex_drivers_request__descriptor, "{}");

	is_status(c, "FAILED_PRECONDITION",
		  "Flexvolume drivers are off on this daemon (--flexvolume-dir \"\", or the plugin "
		  "dir could not be watched: see its log)",
		  "ListFlexDrivers with Flexvolume off: FAILED_PRECONDITION saying why");
}

/* GetStatus asks each backend for its status: every backend's volumes staged and published
 * count, not only one's. */
static void test_admin_status_every_backend(void)
{
	_cleanup_(env_freep) Env *env = env_new(DRIVER_MODE_ALL);
	fake_add_volume(env->fake, "fake-vol-x", "x", FAKE_GIB);
	fake_add_volume(env->other, "other-vol-y", "y", FAKE_GIB);
#define STAGE "{'volume_id':'%s','staging_target_path':'/tmp/s-%s','volume_capability':%s}"
	_cleanup_(call_done) Call a = CALL(env, node_stage_volume, node_stage_volume_request, STAGE,
					   "fake-vol-x", "a", CAP_SNW);
	_cleanup_(call_done) Call b = CALL(env, node_stage_volume, node_stage_volume_request, STAGE,
					   "other-vol-y", "b", CAP_SNW);
	is_ok(a, "a volume of the default backend staged");
	is_ok(b, "and one of the other backend");

	_cleanup_(call_done) Call c =
		call_run(&env->d, admin_get_status,
			 &volplug__admin__v1__get_status_request__descriptor, "{}");
	is_ok(c, "GetStatus");
	const Volplug__Admin__V1__GetStatusResponse *r =
		(const Volplug__Admin__V1__GetStatusResponse *)c.reply;
	ok(r && r->n_backends == 2 && strcmp(r->backends[0]->name, "fake") == 0 &&
		   strcmp(r->backends[1]->name, "other") == 0,
	   "one status a backend, the default first");
	ok(r && r->n_backends == 2 && r->backends[0]->staged == 1 && r->backends[1]->staged == 1,
	   "each counts its own stage");
	is_int(r ? r->staged : -1, 2, "staged on this node: every backend's");
	ok(r && r->backends[0]->volumes == 1 && r->backends[1]->volumes == 1,
	   "and its own volumes");
	ok(r && !r->pool, "no backend keeps a local space: no space shown");
}

int main(void)
{
	test_plugin_info();
	test_admin_status_every_backend();
	test_plugin_capabilities();
	test_probe();
	test_method_tables();
	test_admin_flex_off();
	return tap_done();
}
