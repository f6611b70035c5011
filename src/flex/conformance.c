/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "conformance.h"
#include "mount-util.h"
#include "path-util.h"
#include "random-util.h"
#include "registry.h"
#include "strv.h"

typedef struct Tester {
	const FlexConformanceConfig *cfg;
	const char *driver, *exe;
	FlexConformance *res; /* the last step is the open one */
} Tester;

static char *vformat(const char *fmt, va_list ap)
{
	char *s;
	if (vasprintf(&s, fmt, ap) < 0)
		abort();
	return s;
}

static FlexConformanceStep *current(Tester *t)
{
	return &t->res->steps[t->res->n_steps - 1];
}

static void step_begin(Tester *t, const char *label)
{
	FlexConformance *res = t->res;

	res->steps = xrealloc(res->steps, (res->n_steps + 1) * sizeof(FlexConformanceStep));
	res->steps[res->n_steps++] = (FlexConformanceStep){.label = xstrdup(label)};
	if (t->cfg->step_begin)
		t->cfg->step_begin(label, t->cfg->userdata);
}

static void step_end(Tester *t)
{
	if (t->cfg->step_end)
		t->cfg->step_end(current(t), t->cfg->userdata);
}

static void check(Tester *t, bool ok, const char *fmt, ...) _printf_(3, 4);

/* One rule evaluated: counted, and reported when broken. */
static void check(Tester *t, bool ok, const char *fmt, ...)
{
	FlexConformanceStep *step = current(t);
	va_list ap;

	t->res->checks++;
	if (ok)
		return;
	t->res->violations++;
	va_start(ap, fmt);
	strv_append(&step->violations, vformat(fmt, ap));
	va_end(ap);
}

/* Something Kubernetes accepts but the driver likely did not mean: counted, not a violation. */
static void warn(Tester *t, const char *fmt, ...) _printf_(2, 3);

static void warn(Tester *t, const char *fmt, ...)
{
	FlexConformanceStep *step = current(t);
	va_list ap;

	t->res->warnings++;
	va_start(ap, fmt);
	strv_append(&step->warnings, vformat(fmt, ap));
	va_end(ap);
}

static void note(Tester *t, const char *fmt, ...) _printf_(2, 3);

static void note(Tester *t, const char *fmt, ...)
{
	FlexConformanceStep *step = current(t);
	va_list ap;

	va_start(ap, fmt);
	strv_append(&step->notes, vformat(fmt, ap));
	va_end(ap);
}

/* Runs one command and checks what every answer owes the protocol, in the order of the
 * verdicts: in time, one JSON object with keys of the right types, a known status, exit status
 * 0 with Success, and an output Kubernetes can read (stdout and stderr together). A Failure is
 * a violation too (the check passes valid inputs), or a warning saying if_failure when
 * Kubernetes would only fail later. Fills *run (flex_run_done() it); returns the status, or -1
 * when there is no answer Kubernetes could use. The step stays open for command-specific
 * checks. */
static int run_step(Tester *t, const char *label, FlexCommand cmd, const FlexCallArgs *args,
		    const char *if_failure, FlexRun *run)
{
	step_begin(t, label);
	if (flex_run(t->driver, t->exe, t->cfg->call, cmd, args, run) < 0) {
		*run = (FlexRun){};
		check(t, false, "the check built an incomplete argv (a bug)");
		return -1;
	}
	FlexVerdict v = run->verdict;
	if (v == FLEX_VERDICT_CANNOT_RUN) {
		check(t, false, "cannot run %s: %s", t->exe, strerror(-run->exec_error));
		return -1;
	}
	check(t, v != FLEX_VERDICT_TIMEOUT, "no answer within the deadline: %s; output: %s",
	      exec_describe(&run->res), exec_excerpt(&run->res, 160));
	if (v == FLEX_VERDICT_TIMEOUT)
		return -1;
	check(t, v != FLEX_VERDICT_NOT_JSON, "the output is not a JSON object (%s): %s",
	      exec_describe(&run->res), exec_excerpt(&run->res, 160));
	if (v == FLEX_VERDICT_NOT_JSON)
		return -1;
	check(t, v != FLEX_VERDICT_BAD_TYPE, "%s", run->type_error ?: "");
	if (v == FLEX_VERDICT_BAD_TYPE)
		return -1;
	const FlexReply *rep = &run->reply;
	check(t, v != FLEX_VERDICT_NO_STATUS, "the answer has no \"status\"");
	if (v != FLEX_VERDICT_NO_STATUS)
		check(t, v != FLEX_VERDICT_UNKNOWN_STATUS,
		      "unknown status \"%s\": want Success, Failure or Not supported",
		      rep->status_text);
	if (v == FLEX_VERDICT_SUCCESS || v == FLEX_VERDICT_BAD_EXIT)
		check(t, v != FLEX_VERDICT_BAD_EXIT, "answered \"Success\" but ended with %s",
		      exec_describe(&run->res));
	if (v == FLEX_VERDICT_BAD_EXIT)
		return -1; /* Kubernetes fails the call on the exit status */
	if ((v == FLEX_VERDICT_SUCCESS || v == FLEX_VERDICT_NOT_SUPPORTED) &&
	    !flex_run_kubelet_parses(run)) {
		check(t, false,
		      "the answer is not all the driver printed: Kubernetes reads stdout and "
		      "stderr together as one JSON object and fails the call (volplugd copes); "
		      "output: %s",
		      exec_excerpt(&run->res, 160));
		return -1;
	} else if (v == FLEX_VERDICT_SUCCESS || v == FLEX_VERDICT_NOT_SUPPORTED)
		check(t, true, "Kubernetes reads it");
	if (v == FLEX_VERDICT_FAILURE && if_failure)
		warn(t, "answered Failure (%s): %s; %s", exec_describe(&run->res),
		     rep->message ?: "no message", if_failure);
	else if (v == FLEX_VERDICT_FAILURE)
		check(t, false, "answered Failure (%s): %s", exec_describe(&run->res),
		      rep->message ?: "no message");
	return (int)rep->status;
}

/* The whole step in one call, for steps with no checks of their own. */
static int simple_step(Tester *t, const char *label, FlexCommand cmd, const FlexCallArgs *args,
		       const char *if_not_supported)
{
	FlexRun run;
	int s = run_step(t, label, cmd, args, NULL, &run);
	if (s == FLEX_STATUS_NOT_SUPPORTED)
		note(t, "Not supported: %s", if_not_supported);
	step_end(t);
	flex_run_done(&run);
	return s;
}

/* getvolumename: Kubernetes calls it before every attach, detach, mountdevice and
 * expandvolume, and a Failure stops them; it ignores the name a Success gives. Only
 * expandvolume needs it for a driver that is not attachable. */
static void getvolumename_step(Tester *t, const FlexVolumeSpec *spec, bool attachable)
{
	FlexRun run;
	int s = run_step(t, "getvolumename", FLEX_GETVOLUMENAME, &(FlexCallArgs){.spec = spec},
			 attachable ? NULL
				    : "Kubernetes calls getvolumename of a driver that is not "
				      "attachable only before expandvolume: its volumes could not "
				      "be expanded",
			 &run);
	if (s == FLEX_STATUS_NOT_SUPPORTED)
		note(t, "Not supported: Kubernetes uses the volume's name");
	else if (s == FLEX_STATUS_SUCCESS && run.reply.volume_name &&
		 strcmp(run.reply.volume_name, spec->pv_or_volume_name) != 0)
		note(t, "volumeName \"%s\": Kubernetes ignores it and uses \"%s\"",
		     run.reply.volume_name, spec->pv_or_volume_name);
	step_end(t);
	flex_run_done(&run);
}

/* The kubelet before mountdevice and mount: Mount only once; else make the directory (and
 * its parents), mode 0750. Returns 1 when path is mounted already (the call is skipped). */
static int prepare_for_mount(Tester *t, const char *path)
{
	if (is_mount_point(path) > 0)
		return 1;
	int r = mkdir_p(path, 0750);
	if (r < 0)
		strv_append(&t->res->cleanups,
			    xasprintf("could not create %s: %s", path, strerror(-r)));
	return 0;
}

/* The kubelet after unmount and unmountdevice answered (or after its own fallback): the
 * directory is removed, and that fails when something is still mounted there or the driver
 * left files in it. */
static void remove_after_unmount(Tester *t, const char *cmd, const char *path)
{
	int m = is_mount_point(path);
	check(t, m <= 0,
	      "%s answered Success but %s is still mounted: Kubernetes fails to remove the "
	      "directory",
	      cmd, path);
	if (m > 0)
		return;
	if (rmdir(path) < 0 && errno != ENOENT)
		check(t, false,
		      "%s answered Success but Kubernetes cannot remove %s afterwards: %s", cmd,
		      path, strerror(errno));
	else
		check(t, true, "removable");
}

/* mountdevice and mount (with the kubelet's directory made first) should leave path mounted;
 * unmount and unmountdevice must leave it removable. Not supported is fine when the host has a
 * fallback (if_not_supported says which), a violation when it has none (NULL). Returns the
 * status. */
static int mount_step(Tester *t, FlexCommand cmd, const FlexCallArgs *args, const char *path,
		      const char *if_not_supported)
{
	FlexRun run;
	const char *label = flex_command_to_string(cmd);
	bool mounting = cmd == FLEX_MOUNTDEVICE || cmd == FLEX_MOUNT;

	if (mounting && prepare_for_mount(t, path) > 0) {
		step_begin(t, label);
		note(t, "%s is mounted already: Kubernetes does not call %s", path, label);
		step_end(t);
		return FLEX_STATUS_SUCCESS;
	}
	if (cmd == FLEX_UNMOUNTDEVICE && is_mount_point(path) <= 0) {
		step_begin(t, label);
		note(t, "nothing is mounted at %s: Kubernetes does not call %s", path, label);
		remove_after_unmount(t, label, path);
		step_end(t);
		return FLEX_STATUS_SUCCESS;
	}
	int s = run_step(t, label, cmd, args, NULL, &run);
	if (s == FLEX_STATUS_SUCCESS && mounting && is_mount_point(path) <= 0)
		warn(t, "%s answered Success but nothing is mounted at %s: Kubernetes accepts it",
		     label, path);
	else if (s == FLEX_STATUS_SUCCESS && !mounting)
		remove_after_unmount(t, label, path);
	else if (s == FLEX_STATUS_NOT_SUPPORTED && if_not_supported)
		note(t, "Not supported: %s", if_not_supported);
	else if (s == FLEX_STATUS_NOT_SUPPORTED)
		check(t, false,
		      "%s answered Not supported: a driver that is not attachable must implement "
		      "it (Kubernetes has no device mount path to bind)",
		      label);
	step_end(t);
	flex_run_done(&run);
	return s;
}

/* isattached, right after attach (want true) or detach (want false). Kubernetes reads an
 * absent "attached" as false, and never fails the call over the value. */
static void isattached_step(Tester *t, const char *label, const FlexCallArgs *args, bool want)
{
	FlexRun run;
	int s = run_step(t, label, FLEX_ISATTACHED, args, NULL, &run);
	if (s == FLEX_STATUS_SUCCESS && run.reply.attached != want)
		warn(t, "\"attached\" is %s%s %s: %s", run.reply.attached ? "true" : "false",
		     run.reply.has_attached ? "" : " (absent)",
		     want ? "right after a successful attach" : "after a successful detach",
		     want ? "Kubernetes would take the volume as detached and attach it again"
			  : "Kubernetes never asks after a detach");
	else if (s == FLEX_STATUS_NOT_SUPPORTED)
		note(t, "Not supported: Kubernetes assumes attached");
	step_end(t);
	flex_run_done(&run);
}

/* attach or waitforattach: Success should name the device; Kubernetes passes an empty one on.
 * Returns the device ("" when none) or NULL when the command did not succeed. */
static char *device_step(Tester *t, FlexCommand cmd, const FlexCallArgs *args, int *ret_status)
{
	FlexRun run;
	const char *label = flex_command_to_string(cmd);
	char *device = NULL;

	*ret_status = run_step(t, label, cmd, args, NULL, &run);
	if (*ret_status == FLEX_STATUS_SUCCESS) {
		device = xstrdup(run.reply.device ?: "");
		if (*device)
			note(t, "device %s", device);
		else
			warn(t,
			     "no \"device\" in a Success answer: Kubernetes passes an empty device "
			     "to %s",
			     cmd == FLEX_ATTACH ? "waitforattach" : "mountdevice");
	} else if (*ret_status == FLEX_STATUS_NOT_SUPPORTED)
		note(t, "Not supported: the host goes on %s",
		     cmd == FLEX_ATTACH ? "without a device" : "with attach's device");
	step_end(t);
	flex_run_done(&run);
	return device;
}

/* Whatever the driver left mounted at path is unmounted, so a broken driver leaves nothing
 * behind; then the directory goes if empty. */
static void cleanup_dir(Tester *t, const char *path)
{
	if (umount_all_at(path) > 0)
		strv_append(&t->res->cleanups,
			    xasprintf("unmounted %s, which the driver left mounted", path));
	(void)rmdir(path);
}

/* expandvolume (<device mount path>, as the controller computes it) and, when the driver asks
 * for it, expandfs (the device and the pod's volume directory, as the kubelet's online
 * expansion passes them). */
static void expand_steps(Tester *t, bool requires_fs_resize, FlexCallArgs *args, const char *devmnt,
			 const char *vol_dir)
{
	args->new_size = 2ULL << 30;
	args->old_size = 1ULL << 30;
	args->device_mount_path = devmnt;
	simple_step(t, "expandvolume", FLEX_EXPANDVOLUME, args,
		    "Kubernetes takes the volume as grown");
	args->device_mount_path = vol_dir;
	if (requires_fs_resize)
		simple_step(t, "expandfs", FLEX_EXPANDFS, args,
			    "Kubernetes grows the file system it finds on the device, if any");
}

/* The steps of an attachable driver: attach ... detach. */
static void attachable(Tester *t, const FlexVolumeSpec *spec, bool requires_fs_resize,
		       FlexCallArgs *args, FlexPodInfo *pod, const char *vol_dir,
		       const char *devmnt)
{
	bool mounted = false, staged = false;
	int s;

	_cleanup_free_ char *device = device_step(t, FLEX_ATTACH, args, &s);
	bool attached = s == FLEX_STATUS_SUCCESS || s == FLEX_STATUS_NOT_SUPPORTED;
	if (attached) {
		isattached_step(t, "isattached", args, true);
		args->device = device ?: "";
		_cleanup_free_ char *dev2 = device_step(t, FLEX_WAITFORATTACH, args, &s);
		if (s == FLEX_STATUS_SUCCESS || s == FLEX_STATUS_NOT_SUPPORTED) {
			/* Kubernetes: the device waitforattach named, even none. */
			args->device = s == FLEX_STATUS_SUCCESS ? dev2 : device ?: "";
			args->device_mount_path = devmnt;
			s = mount_step(t, FLEX_MOUNTDEVICE, args, devmnt,
				       *args->device ? "the host formats a blank device and "
						       "mounts it"
						     : "no device: Kubernetes does nothing");
			staged = true;
			if (s == FLEX_STATUS_SUCCESS || s == FLEX_STATUS_NOT_SUPPORTED) {
				args->pod_volume_dir = vol_dir;
				args->pod = pod;
				s = mount_step(t, FLEX_MOUNT, args, vol_dir,
					       "the host bind-mounts the device mount path");
				args->pod = NULL;
				mounted = true;
			}
		}
		if (mounted && (s == FLEX_STATUS_SUCCESS || s == FLEX_STATUS_NOT_SUPPORTED))
			expand_steps(t, requires_fs_resize, args, devmnt, vol_dir);
		if (mounted)
			mount_step(t, FLEX_UNMOUNT, args, vol_dir,
				   "the host unmounts the directory");
		args->device_mount_path = devmnt;
		if (staged)
			mount_step(t, FLEX_UNMOUNTDEVICE, args, devmnt,
				   "the host unmounts the device mount path");
	}
	/* Kubernetes retries detach after a failed attach too. */
	args->volume_name = spec->pv_or_volume_name;
	simple_step(t, "detach", FLEX_DETACH, args, "Kubernetes takes it as detached");
	if (attached)
		isattached_step(t, "isattached (detached)", args, false);
}

/* The steps of a driver that is not attachable: mount ... unmount. */
static void not_attachable(Tester *t, bool requires_fs_resize, FlexCallArgs *args, FlexPodInfo *pod,
			   const char *vol_dir, const char *devmnt)
{
	args->pod_volume_dir = vol_dir;
	args->pod = pod;
	int s = mount_step(t, FLEX_MOUNT, args, vol_dir, NULL);
	args->pod = NULL;
	if (s == FLEX_STATUS_SUCCESS) {
		args->device = ""; /* no attach: no device */
		expand_steps(t, requires_fs_resize, args, devmnt, vol_dir);
	}
	mount_step(t, FLEX_UNMOUNT, args, vol_dir, "the host unmounts the directory");
}

/* The lifecycle Kubernetes runs, mounts in the temporary directory tmp. */
static void lifecycle(Tester *t, const FlexCapabilities *caps, const FlexVolumeSpec *spec,
		      const char *tmp)
{
	char node[HOST_NAME_MAX + 1] = "localhost";
	_cleanup_free_ char *folder = flex_driver_name_to_folder(t->driver);
	_cleanup_free_ char *pods = xasprintf("%s/pods", tmp);
	_cleanup_free_ char *volumes = xasprintf("%s/pods/volumes", tmp);
	_cleanup_free_ char *pod_dir = xasprintf("%s/pods/volumes/%s", tmp, folder);
	_cleanup_free_ char *dev_dir = xasprintf("%s/mounts", tmp);
	_cleanup_free_ char *vol_dir = xasprintf("%s/vol", pod_dir);
	_cleanup_free_ char *devmnt = xasprintf("%s/mounts/%s", tmp, spec->pv_or_volume_name);
	_cleanup_free_ char *uid = xasprintf("%016" PRIx64, random_u64());
	FlexPodInfo pod = {.name = "volplugctl-flex-test",
			   .namespace = "default",
			   .uid = uid,
			   .service_account = "default",
			   .fs_group = -1};
	FlexCallArgs args = {.spec = spec, .node_name = node};

	(void)gethostname(node, sizeof(node) - 1);
	if (caps->attach)
		attachable(t, spec, caps->requires_fs_resize, &args, &pod, vol_dir, devmnt);
	else
		not_attachable(t, caps->requires_fs_resize, &args, &pod, vol_dir, devmnt);
	cleanup_dir(t, vol_dir);
	cleanup_dir(t, devmnt);
	(void)rmdir(pod_dir);
	(void)rmdir(volumes);
	(void)rmdir(pods);
	(void)rmdir(dev_dir);
}

static char *capabilities_text(const FlexCapabilities *c)
{
	return xasprintf("attach=%s selinuxRelabel=%s supportsMetrics=%s fsGroup=%s "
			 "requiresFSResize=%s",
			 c->attach ? "true" : "false", c->selinux_relabel ? "true" : "false",
			 c->supports_metrics ? "true" : "false", c->fs_group ? "true" : "false",
			 c->requires_fs_resize ? "true" : "false");
}

/* init: without a Success the driver would not be loaded at all. Returns the status. */
static int init_step(Tester *t, FlexCapabilities *ret_caps)
{
	FlexRun run;
	int s = run_step(t, "init", FLEX_INIT, NULL, NULL, &run);

	*ret_caps = s >= 0 ? run.reply.capabilities : FLEX_CAPABILITIES_DEFAULT;
	if (s == FLEX_STATUS_NOT_SUPPORTED)
		check(t, false, "init answered Not supported: Kubernetes does not load the driver");
	if (s == FLEX_STATUS_SUCCESS) {
		_cleanup_free_ char *text = capabilities_text(ret_caps);
		note(t, "%s%s", text,
		     run.reply.has_capabilities ? "" : " (no capabilities: the defaults)");
	}
	step_end(t);
	flex_run_done(&run);
	return s;
}

/* Everything after init and getvolumename, as root in a temporary directory. */
static int with_mounts(Tester *t, const FlexCapabilities *caps, const FlexVolumeSpec *spec,
		       char **ret_error)
{
	const char *parent = t->cfg->tmp_dir ?: "/tmp";
	_cleanup_free_ char *tmp = xasprintf("%s/volplugctl-flex-test-XXXXXX", parent);

	if (!mkdtemp(tmp)) {
		int r = -errno;
		*ret_error = xasprintf("cannot make a temporary directory in %s: %s", parent,
				       strerror(errno));
		return r;
	}
	lifecycle(t, caps, spec, tmp);
	if (rmdir(tmp) < 0)
		strv_append(&t->res->cleanups,
			    xasprintf("%s is left behind: the driver put files in it", tmp));
	return 0;
}

int flex_conformance_run(const FlexConformanceConfig *cfg, FlexConformance *ret, char **ret_error)
{
	FlexConformance res = {};
	Tester t = {.cfg = cfg, .driver = cfg->driver, .exe = cfg->exe, .res = &res};
	FlexVolumeSpec spec = *cfg->spec;
	_cleanup_free_ char *vol_name = NULL;
	FlexCapabilities caps;
	int r = 0;

	if (!spec.pv_or_volume_name) {
		vol_name = xasprintf("flex-test-%08" PRIx32, (uint32_t)random_u64());
		spec.pv_or_volume_name = vol_name;
	}

	res.loaded = init_step(&t, &caps) == FLEX_STATUS_SUCCESS;
	if (res.loaded) {
		getvolumename_step(&t, &spec, caps.attach);
		res.root_skipped = geteuid() != 0;
		if (!res.root_skipped)
			r = with_mounts(&t, &caps, &spec, ret_error);
	}
	if (r < 0) {
		flex_conformance_done(&res);
		return r;
	}
	*ret = res;
	return 0;
}

void flex_conformance_done(FlexConformance *c)
{
	for (size_t i = 0; i < c->n_steps; i++) {
		free(c->steps[i].label);
		strv_free(c->steps[i].violations);
		strv_free(c->steps[i].warnings);
		strv_free(c->steps[i].notes);
	}
	free(c->steps);
	strv_free(c->cleanups);
	*c = (FlexConformance){};
}
