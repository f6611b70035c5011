/* SPDX-License-Identifier: Apache-2.0 */
/* Driver calls against real drivers (tests/flex-drivers, examples/flexvolume) run as processes:
 * argv and options exactly as Kubernetes builds them, answers, errors, deadlines, secrets. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "call.h"
#include "exec.h"
#include "fileio.h"
#include "flex-drivers.h"
#include "log.h"
#include "redact.h"
#include "registry.h"
#include "strv.h"
#include "tap.h"

/* The recorded argv, joined with '|'. */
static char *recorded(void)
{
	_cleanup_free_ char *dir = xasprintf("%s/test~record", tmpdir);
	_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char *buf;
	size_t len;

	if (read_file_at(fd, ".argv", 1 << 20, &buf, &len) < 0)
		return xstrdup("(none)");
	for (size_t i = 0; i + 1 < len; i++)
		if (buf[i] == 0)
			buf[i] = '|';
	if (len > 0)
		buf[len - 1] = 0;
	(void)unlinkat(fd, ".argv", 0);
	return buf;
}

static size_t count_lines(const char *dir, const char *file, const char *line)
{
	_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_free_ char *buf = NULL;
	size_t len, n = 0;

	if (read_file_at(fd, file, 1 << 20, &buf, &len) < 0)
		return 0;
	for (char *save = NULL, *tok = strtok_r(buf, "\n", &save); tok;
	     tok = strtok_r(NULL, "\n", &save))
		if (strcmp(tok, line) == 0)
			n++;
	return n;
}

static const FlexOption user_options[] = {
	{"size", "1Gi"}, {"kubernetes.io/fsType", "xfs"}, /* the user's value wins */
};
static const FlexVolumeSpec spec = {
	.fs_type = "ext4",
	.pv_or_volume_name = "pv-1",
	.options = user_options,
	.n_options = ELEMENTSOF(user_options),
};
static const FlexOption secrets[] = {{"password", "hunter2"}, {"user", "admin"}};
static const FlexPodInfo pod = {
	.name = "web-0",
	.namespace = "default",
	.uid = "8f1c-42",
	.service_account = "builder",
	.secrets = secrets,
	.n_secrets = ELEMENTSOF(secrets),
	.fs_group = 2000,
};

static const char *const json_plain =
	"{\"kubernetes.io/fsType\":\"xfs\",\"kubernetes.io/pvOrVolumeName\":\"pv-1\","
	"\"kubernetes.io/readwrite\":\"rw\",\"size\":\"1Gi\"}";
static const char *const json_mount =
	"{\"kubernetes.io/fsType\":\"xfs\",\"kubernetes.io/mounterArgs.FsGroup\":\"2000\","
	"\"kubernetes.io/pod.name\":\"web-0\",\"kubernetes.io/pod.namespace\":\"default\","
	"\"kubernetes.io/pod.uid\":\"8f1c-42\",\"kubernetes.io/pvOrVolumeName\":\"pv-1\","
	"\"kubernetes.io/readwrite\":\"rw\",\"kubernetes.io/secret/password\":\"aHVudGVyMg==\","
	"\"kubernetes.io/secret/user\":\"YWRtaW4=\",\"kubernetes.io/serviceAccount.name\":"
	"\"builder\",\"size\":\"1Gi\"}";

static void test_commands(void)
{
	is_str(flex_command_to_string(FLEX_WAITFORATTACH), "waitforattach", "command names");
	is_int(flex_command_from_string("expandfs"), FLEX_EXPANDFS, "command from its name");
	is_int(flex_command_from_string("Mount"), -EINVAL, "command names are exact");
	is_int(flex_call_timeout(NULL, FLEX_WAITFORATTACH), 600 * USEC_PER_SEC,
	       "waitforattach: 10 minutes like Kubernetes");
	is_int(flex_call_timeout(NULL, FLEX_MOUNT), 120 * USEC_PER_SEC, "mount: 2 minutes");
	FlexCallConfig cfg = {.timeout[FLEX_MOUNT] = 5 * USEC_PER_SEC};
	is_int(flex_call_timeout(&cfg, FLEX_MOUNT), 5 * USEC_PER_SEC, "deadline configurable");
	is_int(flex_call_timeout(&cfg, FLEX_INIT), 30 * USEC_PER_SEC, "others keep the default");
}

static void test_options_json(void)
{
	_cleanup_free_ char *a = flex_options_json(&spec, NULL);
	is_str(a, json_plain, "options JSON: sorted compact object, user options win");
	_cleanup_free_ char *b = flex_options_json(&spec, &pod);
	is_str(b, json_mount, "mount options: pod, service account, base64 secrets, fsGroup");

	FlexVolumeSpec bare = {.read_only = true, .pv_or_volume_name = "v"};
	_cleanup_free_ char *c = flex_options_json(&bare, NULL);
	is_str(c,
	       "{\"kubernetes.io/fsType\":\"\",\"kubernetes.io/pvOrVolumeName\":\"v\","
	       "\"kubernetes.io/readwrite\":\"ro\"}",
	       "no fsType sent as \"\", read-only as ro");

	FlexPodInfo nogroup = {.name = "p", .fs_group = -1};
	_cleanup_free_ char *d = flex_options_json(&bare, &nogroup);
	ok(!contains(d, "FsGroup") && contains(d, "\"kubernetes.io/pod.namespace\":\"\""),
	   "no fsGroup key without a group; absent pod fields sent empty: %s", d);

	FlexOption odd[] = {{"k", "a<b>&\"c\"\\\n\x01\xc3\xa9\xe2\x80\xa8\xff"}};
	FlexVolumeSpec esc = {.pv_or_volume_name = "v", .options = odd, .n_options = 1};
	_cleanup_free_ char *e = flex_options_json(&esc, NULL);
	ok(contains(e, "\"k\":\"a\\u003cb\\u003e\\u0026\\\"c\\\"\\\\\\n\\u0001\xc3\xa9\\u2028"
		       "\\ufffd\""),
	   "strings escaped as Go's json.Marshal does: %s", e);
}

static void test_parse(void)
{
	FlexReply r;

#define PARSE(out, err) flex_reply_parse((out), strlen(out), (err), strlen(err), &r)
	is_int(PARSE("{\"Status\":\"Success\",\"DEVICE\":\"/dev/loop3\",\"VolumeName\":\"v1\","
		     "\"Attached\":true,\"extra\":{\"a\":[1,2]},\"ActualVolumeSize\":5}\n",
		     ""),
	       0, "parse: keys of any case, unknown keys ignored");
	is_int(r.status, FLEX_STATUS_SUCCESS, "Success");
	is_str(r.device, "/dev/loop3", "device");
	is_str(r.volume_name, "v1", "volumeName");
	ok(r.has_attached && r.attached, "attached");
	ok(!r.has_capabilities && r.capabilities.attach && r.capabilities.selinux_relabel &&
		   !r.capabilities.supports_metrics && r.capabilities.fs_group &&
		   r.capabilities.requires_fs_resize,
	   "no capabilities: the defaults");
	flex_reply_done(&r);

	is_int(PARSE("{\"status\":\"Success\",\"capabilities\":null}", ""), 0, "capabilities null");
	ok(r.capabilities.attach && r.capabilities.fs_group && !r.capabilities.supports_metrics,
	   "capabilities null: all defaults");
	flex_reply_done(&r);

	is_int(PARSE("{\"status\":\"Success\",\"capabilities\":{\"attach\":false}}", ""), 0,
	       "partial capabilities");
	ok(!r.capabilities.attach && r.capabilities.selinux_relabel && r.capabilities.fs_group &&
		   r.capabilities.requires_fs_resize && !r.capabilities.supports_metrics,
	   "an absent capability keeps its default");
	flex_reply_done(&r);

	is_int(PARSE("{\"status\":\"Success\",\"Capabilities\":{\"SELinuxRelabel\":false,"
		     "\"supportsmetrics\":true,\"FSGROUP\":false,\"requiresfsresize\":false}}",
		     ""),
	       0, "capability keys of any case");
	ok(r.capabilities.attach && !r.capabilities.selinux_relabel &&
		   r.capabilities.supports_metrics && !r.capabilities.fs_group &&
		   !r.capabilities.requires_fs_resize,
	   "every capability read");
	flex_reply_done(&r);

	is_int(PARSE("{\"status\":\"Not supported\"}", ""), 0, "Not supported parses");
	is_int(r.status, FLEX_STATUS_NOT_SUPPORTED, "Not supported");
	flex_reply_done(&r);
	is_int(PARSE("{\"status\":\"success\"}", ""), 0, "status value of another case");
	is_int(r.status, FLEX_STATUS_FAILURE, "status values are exact: \"success\" is a failure");
	flex_reply_done(&r);
	is_int(PARSE("{}", ""), 0, "empty object");
	is_int(r.status, FLEX_STATUS_FAILURE, "no status is a failure");
	flex_reply_done(&r);
	is_int(PARSE("{\"status\":\"Failure\",\"Status\":\"Success\"}", ""), 0, "duplicate keys");
	is_int(r.status, FLEX_STATUS_SUCCESS, "the last duplicate wins, as in Go");
	flex_reply_done(&r);

	is_int(PARSE("mounting /dev/x...\nwarning: {weird}\n{\"status\":\"Success\","
		     "\"device\":\"/dev/x\"}\n",
		     ""),
	       0, "debug lines before the answer");
	is_str(r.device, "/dev/x", "the JSON object after them is the answer");
	flex_reply_done(&r);
	is_int(PARSE("{\"x\":{\"y\":1}}\n{\"status\":\"Success\",\"capabilities\":{\"attach\":"
		     "false}}\ndone\n",
		     ""),
	       0, "text after the answer, an object before it");
	ok(r.status == FLEX_STATUS_SUCCESS && !r.capabilities.attach,
	   "the last top-level object with a status is the answer");
	flex_reply_done(&r);
	is_int(PARSE("", "{\"status\":\"Success\",\"device\":\"/dev/e\"}"), 0,
	       "JSON on stderr only (Kubernetes reads both)");
	is_str(r.device, "/dev/e", "answer from stderr");
	flex_reply_done(&r);
	is_int(PARSE("not json", "{\"status\":\"Failure\",\"message\":\"m\"}\n"), 0,
	       "garbage on stdout, JSON on stderr");
	is_str(r.message, "m", "answer from stderr");
	flex_reply_done(&r);
	is_int(PARSE("{\"status\":\"Failure\",\"message\":\"caf\xe9\"}", ""), 0,
	       "invalid UTF-8 accepted like Go");
	is_str(r.message, "caf\xef\xbf\xbd", "invalid byte read as U+FFFD");
	flex_reply_done(&r);

	is_int(PARSE("{\"status\":\"Success\",\"attached\":\"true\"}", ""), -EPROTO,
	       "a known key of the wrong type is refused");
	is_int(PARSE("{\"status\":7}", ""), -EPROTO, "status must be a string");
	is_int(PARSE("Usage: driver {mount|unmount}", ""), -EBADMSG, "garbage: no JSON object");
	is_int(PARSE("", ""), -EBADMSG, "no output");
	is_int(PARSE("[{\"status\":\"Success\"}]", ""), 0, "an object inside an array");
	flex_reply_done(&r);
	is_int(PARSE("\"Success\"", ""), -EBADMSG, "a JSON string is not an answer");
#undef PARSE
}

static void test_argv(void)
{
	_cleanup_free_ char *exe = install("tests/flex-drivers", "record");
	_cleanup_free_ char *json = flex_options_json(&spec, NULL);
	const FlexCallArgs a = {
		.spec = &spec,
		.pod = &pod,
		.node_name = "node-1",
		.volume_name = "vol-1",
		.device = "/dev/loop9",
		.device_mount_path = "/var/lib/kubelet/plugins/test/mounts/pv-1",
		.pod_volume_dir = "/var/lib/kubelet/pods/8f1c-42/volumes/test~record/pv-1",
		.new_size = 2147483648ULL,
		.old_size = 1073741824ULL,
	};
	const struct {
		FlexCommand cmd;
		const char *args; /* after the command; J: options JSON, M: mount's */
	} table[] = {
		{FLEX_INIT, ""},
		{FLEX_GETVOLUMENAME, "J"},
		{FLEX_ATTACH, "J|node-1"},
		{FLEX_ISATTACHED, "J|node-1"},
		{FLEX_DETACH, "vol-1|node-1"},
		{FLEX_WAITFORATTACH, "/dev/loop9|J"},
		{FLEX_MOUNTDEVICE, "/var/lib/kubelet/plugins/test/mounts/pv-1|/dev/loop9|J"},
		{FLEX_UNMOUNTDEVICE, "/var/lib/kubelet/plugins/test/mounts/pv-1"},
		{FLEX_MOUNT, "/var/lib/kubelet/pods/8f1c-42/volumes/test~record/pv-1|M"},
		{FLEX_UNMOUNT, "/var/lib/kubelet/pods/8f1c-42/volumes/test~record/pv-1"},
		{FLEX_EXPANDVOLUME,
		 "J|/var/lib/kubelet/plugins/test/mounts/pv-1|2147483648|1073741824"},
		{FLEX_EXPANDFS, "J|/dev/loop9|/var/lib/kubelet/plugins/test/mounts/pv-1|"
				"2147483648|1073741824"},
	};

	for (size_t i = 0; i < ELEMENTSOF(table); i++) {
		const char *name = flex_command_to_string(table[i].cmd);
		FlexReply rep;
		_cleanup_free_ char *error = NULL;
		int r = flex_call("test/record", exe, NULL, table[i].cmd, &a, &rep, &error);
		is_int(r, 0, "%s: Success", name);
		if (r == 0)
			flex_reply_done(&rep);

		/* Expected argv: exe|command|args, J and M expanded. */
		char *want = xasprintf("%s|%s", exe, name);
		for (const char *p = table[i].args; *p;) {
			const char *end = strchrnul(p, '|');
			_cleanup_free_ char *piece = xstrndup(p, (size_t)(end - p));
			char *next = xasprintf("%s|%s", want,
					       strcmp(piece, "J") == 0	 ? json
					       : strcmp(piece, "M") == 0 ? json_mount
									 : piece);
			free(want);
			want = next;
			p = *end ? end + 1 : end;
		}
		_cleanup_free_ char *got = recorded();
		is_str(got, want, "%s: argv exactly as Kubernetes passes it", name);
		free(want);
	}

	FlexCallArgs no_node = a;
	no_node.node_name = NULL;
	_cleanup_free_ char *error = NULL;
	is_int(flex_call("test/record", exe, NULL, FLEX_ATTACH, &no_node, NULL, &error), -EINVAL,
	       "a missing argument is refused before running anything");
	_cleanup_free_ char *got = recorded();
	is_str(got, "(none)", "the driver did not run");

	char **argv;
	is_int(flex_call_argv(FLEX_DETACH, &a, &argv), 0, "flex_call_argv");
	ok(argv[0] && strcmp(argv[0], "vol-1") == 0 && argv[1] && strcmp(argv[1], "node-1") == 0 &&
		   !argv[2],
	   "argv without the executable and command");
	for (char **p = argv; *p; p++)
		free(*p);
	free(argv);
}

static void test_answers(void)
{
	_cleanup_free_ char *rec = install("tests/flex-drivers", "record");
	_cleanup_free_ char *garbage = install("tests/flex-drivers", "garbage");
	_cleanup_free_ char *badexit = install("tests/flex-drivers", "badexit");
	_cleanup_free_ char *hang = install("tests/flex-drivers", "hang");
	const FlexCallArgs a = {.pod_volume_dir = "/mnt/x", .spec = &spec};
	FlexReply rep;
	char *error = NULL;
	int r;

	put("record", ".stdout", "{\"status\":\"Success\",\"capabilities\":{\"attach\":false}}");
	FlexCapabilities caps;
	is_int(flex_call_init("test/record", rec, NULL, &caps, &error), 0, "init");
	ok(!caps.attach && caps.fs_group && caps.selinux_relabel, "capabilities from init");

	put("record", ".stdout", "{\"status\":\"Failure\",\"message\":\"disk on fire\"}");
	put("record", ".exit", "1");
	r = flex_call("test/record", rec, NULL, FLEX_MOUNT, &a, &rep, &error);
	is_int(r, -EIO, "Failure");
	ok(contains(error, "test/record") && contains(error, "mount") &&
		   contains(error, "exit status 1") && contains(error, "disk on fire"),
	   "failure names the driver, command, exit status, message: %s", error);
	free(TAKE_PTR(error));

	put("record", ".stdout", "{\"status\":\"Not supported\"}");
	put("record", ".exit", "1");
	is_int(flex_call("test/record", rec, NULL, FLEX_MOUNT, &a, &rep, &error), -EOPNOTSUPP,
	       "Not supported, even with a non-zero exit (as Kubernetes)");
	free(TAKE_PTR(error));

	put("record", ".stdout", "{\"status\":\"Bogus\",\"message\":\"what\"}");
	put("record", ".exit", NULL);
	is_int(flex_call("test/record", rec, NULL, FLEX_MOUNT, &a, &rep, &error), -EIO,
	       "unknown status is a failure");
	ok(contains(error, "Bogus") && contains(error, "what"), "status shown: %s", error);
	free(TAKE_PTR(error));

	put("record", ".stdout", "starting\n");
	put("record", ".stderr", "{\"status\":\"Success\",\"device\":\"/dev/sdz\"}\n");
	is_int(flex_call("test/record", rec, NULL, FLEX_MOUNT, &a, &rep, &error), 0,
	       "answer written to stderr is found");
	is_str(rep.device, "/dev/sdz", "device from stderr");
	flex_reply_done(&rep);
	put("record", ".stdout", NULL);
	put("record", ".stderr", NULL);

	r = flex_call("test/garbage", garbage, NULL, FLEX_MOUNT, &a, &rep, &error);
	is_int(r, -EPROTO, "garbage");
	ok(contains(error, "test/garbage") && contains(error, "mount") &&
		   contains(error, "exit status 0") && contains(error, "this is not JSON"),
	   "garbage: driver, command, exit status and an excerpt: %s", error);
	free(TAKE_PTR(error));

	r = flex_call("test/badexit", badexit, NULL, FLEX_MOUNT, &a, &rep, &error);
	is_int(r, -EPROTO, "Success with a non-zero exit");
	ok(contains(error, "test/badexit") && contains(error, "mount") &&
		   contains(error, "exit status 3") && contains(error, "all good, honest"),
	   "non-zero exit with Success: %s", error);
	free(TAKE_PTR(error));

	FlexCallConfig cfg = {.timeout[FLEX_MOUNT] = 300 * USEC_PER_MSEC,
			      .kill_grace = 200 * USEC_PER_MSEC};
	usec_t t0 = now_usec(CLOCK_MONOTONIC);
	r = flex_call("test/hang", hang, &cfg, FLEX_MOUNT, &a, &rep, &error);
	usec_t took = now_usec(CLOCK_MONOTONIC) - t0;
	is_int(r, -ETIMEDOUT, "hanging driver: deadline");
	ok(took < 2 * USEC_PER_SEC, "stopped at its deadline (%.2f s)", (double)took / 1e6);
	ok(contains(error, "test/hang") && contains(error, "mount") &&
		   contains(error, "timed out after") && contains(error, "SIGTERM") &&
		   contains(error, "started mount"),
	   "hang: driver, command, how it ended, output: %s", error);
	free(TAKE_PTR(error));

	is_int(flex_call("test/none", "/nonexistent/driver", NULL, FLEX_INIT, NULL, &rep, &error),
	       -ENOENT, "missing executable");
	ok(contains(error, "test/none") && contains(error, "/nonexistent/driver"),
	   "missing executable named: %s", error);
	free(TAKE_PTR(error));
}

/* flex_run()'s verdict on every kind of answer, and flex_call() returning what that verdict
 * says with the same message: the daemon and volplugctl judge a driver with one piece of code. */
static void test_verdicts(void)
{
	_cleanup_free_ char *rec = install("tests/flex-drivers", "record");
	_cleanup_free_ char *garbage = install("tests/flex-drivers", "garbage");
	_cleanup_free_ char *badexit = install("tests/flex-drivers", "badexit");
	_cleanup_free_ char *hang = install("tests/flex-drivers", "hang");
	/* A data file (mode 0644, no x bit): not even root may run it. */
	_cleanup_free_ char *noexec = xasprintf("%s/test~record/.stdout", tmpdir);
	const FlexCallArgs a = {.pod_volume_dir = "/mnt/x", .spec = &spec};
	const FlexCallConfig fast = {.timeout[FLEX_MOUNT] = 300 * USEC_PER_MSEC,
				     .kill_grace = 200 * USEC_PER_MSEC};
	const struct {
		const char *what, *driver, *exe;
		const char *out, *err, *exit; /* what record answers: .stdout, .stderr, .exit */
		FlexVerdict verdict;
		int error;
		bool parsed;
		const char *problem; /* the whole message, or a part of it after '~' */
	} table[] = {
		{"Success", "test/record", rec, NULL, NULL, NULL, FLEX_VERDICT_SUCCESS, 0, true,
		 NULL},
		{"Success on stderr after debug lines", "test/record", rec, "starting\n",
		 "{\"status\":\"Success\"}", NULL, FLEX_VERDICT_SUCCESS, 0, true, NULL},
		{"Not supported, exit status ignored", "test/record", rec,
		 "{\"status\":\"Not supported\"}", NULL, "1", FLEX_VERDICT_NOT_SUPPORTED,
		 -EOPNOTSUPP, true, "driver \"test/record\" mount: Not supported (exit status 1)"},
		{"Failure with a message", "test/record", rec,
		 "{\"status\":\"Failure\",\"message\":\"disk on fire\"}", NULL, "1",
		 FLEX_VERDICT_FAILURE, -EIO, true,
		 "driver \"test/record\" mount failed (exit status 1): disk on fire"},
		{"Failure without a message: the output instead", "test/record", rec,
		 "{\"status\":\"Failure\"}\n", "see\nthe log\n", "1", FLEX_VERDICT_FAILURE, -EIO,
		 true,
		 "driver \"test/record\" mount failed (exit status 1): stdout "
		 "\"{\"status\":\"Failure\"}\"; stderr \"see the log\""},
		{"Failure with an empty message: the output instead", "test/record", rec,
		 "{\"status\":\"Failure\",\"message\":\"\"}\n", "mount: no such device\n", "1",
		 FLEX_VERDICT_FAILURE, -EIO, true,
		 "driver \"test/record\" mount failed (exit status 1): stdout "
		 "\"{\"status\":\"Failure\",\"message\":\"\"}\"; stderr \"mount: no such device\""},
		{"no status", "test/record", rec, "{\"message\":\"hm\"}", NULL, NULL,
		 FLEX_VERDICT_NO_STATUS, -EIO, true,
		 "driver \"test/record\" mount failed (exit status 0, no \"status\"): hm"},
		{"unknown status", "test/record", rec,
		 "{\"status\":\"success\",\"message\":\"so so\"}", NULL, NULL,
		 FLEX_VERDICT_UNKNOWN_STATUS, -EIO, true,
		 "driver \"test/record\" mount failed (exit status 0, unknown status \"success\"): "
		 "so so"},
		{"a bool of the wrong type", "test/record", rec,
		 "{\"status\":\"Success\",\"attached\":\"yes\"}", NULL, NULL, FLEX_VERDICT_BAD_TYPE,
		 -EPROTO, false,
		 "driver \"test/record\" mount: the answer has a key of the wrong type: "
		 "\"attached\" "
		 "is a string, not a bool (exit status 0); stdout "
		 "\"{\"status\":\"Success\",\"attached\":\"yes\"}\""},
		{"a capability of the wrong type", "test/record", rec,
		 "{\"status\":\"Success\",\"Capabilities\":{\"FSGroup\":1}}", NULL, NULL,
		 FLEX_VERDICT_BAD_TYPE, -EPROTO, false,
		 "~wrong type: capability \"FSGroup\" is a number, not a bool (exit status 0)"},
		{"capabilities not an object", "test/record", rec,
		 "{\"status\":\"Success\",\"capabilities\":[true]}", NULL, NULL,
		 FLEX_VERDICT_BAD_TYPE, -EPROTO, false,
		 "~wrong type: \"capabilities\" is an array, not an object"},
		{"a status that is no string", "test/record", rec, "{\"status\":7}", NULL, NULL,
		 FLEX_VERDICT_BAD_TYPE, -EPROTO, false,
		 "~wrong type: \"status\" is a number, not a "
		 "string"},
		{"no JSON and a non-zero exit", "test/record", rec, "oops\n", NULL, "4",
		 FLEX_VERDICT_NOT_JSON, -EPROTO, false,
		 "driver \"test/record\" mount: the answer is not a JSON object (exit status 4); "
		 "stdout \"oops\""},
		{"no output at all", "test/record", rec, "", NULL, "2", FLEX_VERDICT_NOT_JSON,
		 -EPROTO, false,
		 "driver \"test/record\" mount: the answer is not a JSON object (exit status 2); "
		 "no "
		 "output"},
		{"garbage", "test/garbage", garbage, NULL, NULL, NULL, FLEX_VERDICT_NOT_JSON,
		 -EPROTO, false,
		 "~{mount|unmount} <<< this is not JSON debug: {unbalanced [brace\""},
		{"Success with a non-zero exit", "test/badexit", badexit, NULL, NULL, NULL,
		 FLEX_VERDICT_BAD_EXIT, -EPROTO, true,
		 "driver \"test/badexit\" mount: answered \"Success\" but ended with exit status "
		 "3; "
		 "stdout \"{\"status\":\"Success\",\"message\":\"all good, honest\"}\""},
		{"no answer in time", "test/hang", hang, NULL, NULL, NULL, FLEX_VERDICT_TIMEOUT,
		 -ETIMEDOUT, false, "~s, stopped with SIGTERM); stdout \"started mount\""},
		{"no such executable", "test/none", "/nonexistent/driver", NULL, NULL, NULL,
		 FLEX_VERDICT_CANNOT_RUN, -ENOENT, false,
		 "driver \"test/none\" mount: cannot run /nonexistent/driver: No such file or "
		 "directory"},
		{"not executable", "test/noexec", noexec, "{}", NULL, NULL, FLEX_VERDICT_CANNOT_RUN,
		 -EACCES, false, "~: Permission denied"},
	};

	for (size_t i = 0; i < ELEMENTSOF(table); i++) {
		const char *what = table[i].what, *want = table[i].problem;
		const FlexCallConfig *cfg = table[i].exe == hang ? &fast : NULL;
		_cleanup_free_ char *error = NULL;
		FlexRun run;

		put("record", ".stdout", table[i].out);
		put("record", ".stderr", table[i].err);
		put("record", ".exit", table[i].exit);
		if (!is_int(flex_run(table[i].driver, table[i].exe, cfg, FLEX_MOUNT, &a, &run), 0,
			    "%s: run", what))
			continue;
		is_int(run.verdict, table[i].verdict, "%s: verdict", what);
		is_int(flex_verdict_to_errno(&run), table[i].error, "%s: errno", what);
		is_int(run.parsed, table[i].parsed, "%s: answer parsed", what);
		ok(run.argv && strcmp(run.argv[0], table[i].exe) == 0 &&
			   strcmp(run.argv[1], "mount") == 0 && strcmp(run.argv[2], "/mnt/x") == 0,
		   "%s: argv kept", what);
		if (!want)
			ok(!run.problem, "%s: no problem (%s)", what, run.problem ?: "");
		else if (want[0] == '~')
			ok(contains(run.problem, want + 1), "%s: message has '%s': %s", what,
			   want + 1, run.problem ?: "(null)");
		else
			is_str(run.problem, want, "%s: message", what);

		int r = flex_call(table[i].driver, table[i].exe, cfg, FLEX_MOUNT, &a, NULL, &error);
		is_int(r, table[i].error, "%s: flex_call returns the verdict's errno", what);
		ok(error == run.problem ||
			   (error && run.problem && strcmp(error, run.problem) == 0),
		   "%s: flex_call says the same: %s", what, error ?: "(nothing)");
		flex_run_done(&run);
	}
	put("record", ".stdout", NULL);
	put("record", ".stderr", NULL);
	put("record", ".exit", NULL);

	FlexRun run = {};
	is_int(flex_run("test/record", rec, NULL, FLEX_ATTACH, &a, &run), -EINVAL,
	       "a missing argument: refused");
	ok(!run.argv && !run.problem, "nothing ran, nothing to free");
	is_int(flex_run("test/record", rec, NULL, _FLEX_COMMAND_MAX, &a, &run), -EINVAL,
	       "an unknown command: refused");
}

static void test_not_supported_memory(void)
{
	_cleanup_free_ char *exe = install("tests/flex-drivers", "notsupported");
	_cleanup_free_ char *dir = xasprintf("%s/test~notsupported", tmpdir);
	const FlexCallArgs a = {.pod_volume_dir = "/mnt/x", .spec = &spec};
	_cleanup_free_ char *error = NULL;

	_cleanup_flex_driver_ FlexDriver *d = flex_driver_new(
		"test/notsupported", "test~notsupported", exe, FLEX_DRIVER_LOADED, NULL, NULL);
	is_int(flex_driver_call(d, NULL, FLEX_MOUNT, &a, NULL, &error), -EOPNOTSUPP,
	       "Not supported");
	free(TAKE_PTR(error));
	ok(flex_driver_is_unsupported(d, FLEX_MOUNT), "remembered for mount");
	ok(!flex_driver_is_unsupported(d, FLEX_UNMOUNT), "not for unmount");
	is_int(flex_driver_call(d, NULL, FLEX_MOUNT, &a, NULL, &error), -EOPNOTSUPP,
	       "still Not supported");
	ok(contains(error, "test/notsupported") && contains(error, "mount"), "message: %s", error);
	free(TAKE_PTR(error));
	is_int(count_lines(dir, ".calls", "mount"), 1, "the second call did not run the driver");

	/* A reload is a new snapshot: the memory starts afresh. */
	_cleanup_flex_driver_ FlexDriver *d2 = flex_driver_new(
		"test/notsupported", "test~notsupported", exe, FLEX_DRIVER_LOADED, NULL, NULL);
	is_int(flex_driver_call(d2, NULL, FLEX_MOUNT, &a, NULL, &error), -EOPNOTSUPP,
	       "reloaded driver asked again");
	free(TAKE_PTR(error));
	is_int(count_lines(dir, ".calls", "mount"), 2, "the reloaded driver ran");

	_cleanup_flex_driver_ FlexDriver *failed = flex_driver_new(
		"test/broken", "test~broken", exe, FLEX_DRIVER_FAILED, NULL, "init: boom");
	is_int(flex_driver_call(failed, NULL, FLEX_MOUNT, &a, NULL, &error), -ENOEXEC,
	       "a failed driver is not called");
	ok(contains(error, "init: boom"), "with its init error: %s", error);
}

static void test_secrets(void)
{
	_cleanup_free_ char *exe = install("tests/flex-drivers", "echoargs");
	const FlexCallArgs a = {.pod_volume_dir = "/mnt/x", .spec = &spec, .pod = &pod};
	_cleanup_free_ char *error = NULL, *logged = NULL;
	char logfile[] = "/tmp/volplug-test-flex-log-XXXXXX";

	_cleanup_free_ char *red = flex_options_redact(json_mount);
	ok(!contains(red, "aHVudGVyMg==") && !contains(red, "YWRtaW4=") &&
		   contains(red, "\"kubernetes.io/secret/password\":\"(redacted)\"") &&
		   contains(red, "\"kubernetes.io/pod.name\":\"web-0\""),
	   "redacted options: %s", red);
	_cleanup_free_ char *red2 = flex_options_redact("not json hunter2");
	ok(!contains(red2, "hunter2"), "unparseable options hidden whole: %s", red2);

	/* Everything the library logs at debug level goes to a file for a moment. */
	_cleanup_close_ int logfd = mkstemp(logfile);
	int saved = dup(STDERR_FILENO);
	LogLevel level = log_get_max_level();
	fflush(stderr);
	dup2(logfd, STDERR_FILENO);
	log_set_max_level(LOG_LEVEL_DEBUG);
	int r = flex_call("test/echoargs", exe, NULL, FLEX_MOUNT, &a, NULL, &error);
	log_set_max_level(level);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);

	is_int(r, -EIO, "driver echoing its arguments fails");
	ok(contains(error, "web-0") && contains(error, "(redacted)"),
	   "its message is passed on, secrets cut out: %s", error);
	ok(!contains(error, "hunter2") && !contains(error, "aHVudGVyMg==") &&
		   !contains(error, "YWRtaW4="),
	   "no secret in the error message");

	size_t len;
	is_int(read_file_at(AT_FDCWD, logfile, 1 << 20, &logged, &len), 0, "debug log captured");
	ok(contains(logged, "mount: running /") && contains(logged, "(redacted)"),
	   "the call was logged, redacted");
	ok(!contains(logged, "hunter2") && !contains(logged, "aHVudGVyMg==") &&
		   !contains(logged, "YWRtaW4="),
	   "no secret in the debug log");
	unlink(logfile);
}

/* The example drivers for real: a tmpfs mount, a loop device through the attach chain. */
static void test_examples(void)
{
	_cleanup_free_ char *tmpfs = install("examples/flexvolume", "tmpfs");
	_cleanup_free_ char *loop = install("examples/flexvolume", "loop");
	_cleanup_free_ char *mnt = xasprintf("%s/pod-volume", tmpdir);
	_cleanup_free_ char *dmnt = xasprintf("%s/device-mount", tmpdir);
	_cleanup_free_ char *images = xasprintf("%s/images", tmpdir);
	_cleanup_free_ char *error = NULL;
	FlexCapabilities caps;
	FlexReply rep;

	is_int(flex_call_init("test/tmpfs", tmpfs, NULL, &caps, &error), 0, "tmpfs: init");
	ok(!caps.attach, "tmpfs: not attachable");
	is_int(flex_call_init("test/loop", loop, NULL, &caps, &error), 0, "loop: init");
	ok(caps.attach, "loop: attachable");
	if (geteuid() != 0) {
		ok(1, "# SKIP mounts and loop devices need root");
		return;
	}

	FlexOption topts[] = {{"size", "8m"}};
	FlexVolumeSpec tspec = {.pv_or_volume_name = "t1", .options = topts, .n_options = 1};
	FlexPodInfo tpod = {.name = "p", .fs_group = -1};
	FlexCallArgs ta = {.spec = &tspec, .pod = &tpod, .pod_volume_dir = mnt};
	is_int(flex_call("test/tmpfs", tmpfs, NULL, FLEX_MOUNT, &ta, NULL, &error), 0,
	       "tmpfs: mount %s", error ?: "");
	_cleanup_free_ char *findmnt = NULL;
	{
		const char *argv[] = {"/usr/bin/findmnt", "-n", "-o", "FSTYPE,OPTIONS", mnt, NULL};
		ExecResult res;
		if (exec_run(&(ExecOptions){.argv = argv}, &res) == 0) {
			findmnt = xstrdup(res.out);
			exec_result_done(&res);
		}
	}
	ok(contains(findmnt, "tmpfs") && contains(findmnt, "size=8192k"),
	   "tmpfs: mounted with the size option: %s", findmnt ?: "");
	is_int(flex_call("test/tmpfs", tmpfs, NULL, FLEX_MOUNT, &ta, NULL, &error), 0,
	       "tmpfs: mount again is idempotent");
	is_int(flex_call("test/tmpfs", tmpfs, NULL, FLEX_UNMOUNT, &ta, NULL, &error), 0,
	       "tmpfs: unmount");
	is_int(flex_call("test/tmpfs", tmpfs, NULL, FLEX_UNMOUNT, &ta, NULL, &error), 0,
	       "tmpfs: unmount again is idempotent");
	is_int(flex_call("test/tmpfs", tmpfs, NULL, FLEX_ATTACH,
			 &(FlexCallArgs){.spec = &tspec, .node_name = "n"}, NULL, &error),
	       -EOPNOTSUPP, "tmpfs: attach Not supported");
	free(TAKE_PTR(error));

	FlexOption lopts[] = {{"dir", images}, {"size", "64M"}};
	FlexVolumeSpec lspec = {.fs_type = "ext4",
				.pv_or_volume_name = "pv-loop-test",
				.options = lopts,
				.n_options = 2};
	FlexCallArgs la = {.spec = &lspec, .node_name = "n1", .device_mount_path = dmnt};
	int r = flex_call("test/loop", loop, NULL, FLEX_ATTACH, &la, &rep, &error);
	is_int(r, 0, "loop: attach %s", error ?: "");
	if (r < 0) {
		free(TAKE_PTR(error));
		la.volume_name = "pv-loop-test";
		(void)flex_call("test/loop", loop, NULL, FLEX_DETACH, &la, NULL, NULL);
		return;
	}
	_cleanup_free_ char *dev = xstrdup(rep.device ?: "");
	flex_reply_done(&rep);
	ok(strncmp(dev, "/dev/loop", 9) == 0, "loop: device %s", dev);
	la.device = dev;
	is_int(flex_call("test/loop", loop, NULL, FLEX_ISATTACHED, &la, &rep, &error), 0,
	       "loop: isattached");
	ok(rep.has_attached && rep.attached, "loop: attached true");
	flex_reply_done(&rep);
	is_int(flex_call("test/loop", loop, NULL, FLEX_WAITFORATTACH, &la, &rep, &error), 0,
	       "loop: waitforattach");
	is_str(rep.device, dev, "loop: waitforattach echoes the device");
	flex_reply_done(&rep);
	is_int(flex_call("test/loop", loop, NULL, FLEX_MOUNTDEVICE, &la, NULL, &error), 0,
	       "loop: mountdevice (formats the blank device) %s", error ?: "");
	_cleanup_free_ char *probe = xasprintf("%s/lost+found", dmnt);
	struct stat st;
	ok(stat(probe, &st) == 0, "loop: an ext4 file system is mounted at the device mount path");
	is_int(flex_call("test/loop", loop, NULL, FLEX_MOUNT,
			 &(FlexCallArgs){.spec = &lspec, .pod_volume_dir = mnt}, NULL, &error),
	       -EOPNOTSUPP, "loop: mount Not supported (the host bind-mounts)");
	free(TAKE_PTR(error));
	is_int(flex_call("test/loop", loop, NULL, FLEX_UNMOUNTDEVICE, &la, NULL, &error), 0,
	       "loop: unmountdevice");
	ok(stat(probe, &st) < 0, "loop: unmounted");
	la.volume_name = "pv-loop-test";
	is_int(flex_call("test/loop", loop, NULL, FLEX_DETACH, &la, NULL, &error), 0,
	       "loop: detach");
	is_int(flex_call("test/loop", loop, NULL, FLEX_ISATTACHED, &la, &rep, &error), 0,
	       "loop: isattached after detach");
	if (!ok(rep.has_attached && !rep.attached, "loop: attached false")) {
		const char *argv[] = {"/usr/sbin/losetup", "-a", NULL};
		ExecResult res;
		if (exec_run(&(ExecOptions){.argv = argv}, &res) == 0) {
			printf("# losetup -a: %s\n", res.out);
			exec_result_done(&res);
		}
		(void)flex_call("test/loop", loop, NULL, FLEX_DETACH, &la, NULL, NULL);
	}
	flex_reply_done(&rep);
}

static void test_names(void)
{
	_cleanup_free_ char *name = NULL, *exe = NULL, *error = NULL;

	is_int(flex_driver_folder_parse("k8s.io~nfs", &name, &exe, &error), 0, "k8s.io~nfs");
	is_str(name, "k8s.io/nfs", "folder name: '~' becomes '/'");
	is_str(exe, "nfs", "executable: the part after the last '~'");
	free(TAKE_PTR(name));
	free(TAKE_PTR(exe));
	is_int(flex_driver_folder_parse("foo", &name, &exe, &error), 0, "plain foo");
	ok(strcmp(name, "foo") == 0 && strcmp(exe, "foo") == 0, "foo/foo");
	free(TAKE_PTR(name));
	free(TAKE_PTR(exe));

	const char *bad[] = {
		"bad name", "a:b~c",
		"a~b~c",    "Vendor.io~x",
		"~x",	    "x~",
		"-x",	    "x~aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		int r = flex_driver_folder_parse(bad[i], &name, &exe, &error);
		is_int(r, -EINVAL, "folder \"%s\" is not a valid driver: %s", bad[i],
		       error ?: "(no message)");
		ok(name && error && strstr(error, name), "the message names the driver");
		free(TAKE_PTR(name));
		free(TAKE_PTR(error));
	}
	_cleanup_free_ char *f = flex_driver_name_to_folder("example.com/tmpfs");
	is_str(f, "example.com~tmpfs", "name to folder");
}

/* How volplugctl finds a driver: by name in a plugin dir (a relative one too), or by path. */
static void test_locate(void)
{
	_cleanup_free_ char *rec = install("tests/flex-drivers", "record");
	_cleanup_free_ char *exe = NULL, *name = NULL, *error = NULL;
	char cwd[4096];

	ok(getcwd(cwd, sizeof(cwd)) && chdir(tmpdir) == 0, "into the plugin dir");
	is_int(flex_driver_locate(".", "test/record", &exe, &name, &error), 0,
	       "a driver name in a relative plugin dir");
	is_str(exe, rec, "its executable, as an absolute path");
	is_str(name, "test/record", "named by its driver name");
	free(TAKE_PTR(exe));
	free(TAKE_PTR(name));
	is_int(flex_driver_locate("/nonexistent", "./test~record/record", &exe, &name, &error), 0,
	       "a path starting with '.'");
	is_str(exe, rec, "made absolute");
	is_str(name, "record", "named by its file");
	free(TAKE_PTR(exe));
	free(TAKE_PTR(name));
	/* One program installed under several names, telling them apart by argv[0]. */
	ok(mkdir("test~alias", 0755) == 0 && symlink(rec, "test~alias/alias") == 0, "a symlink");
	_cleanup_free_ char *alias = xasprintf("%s/test~alias/alias", tmpdir);
	is_int(flex_driver_locate("./", "test/alias", &exe, &name, &error), 0,
	       "a symlinked driver");
	is_str(exe, alias, "run by its own path, as the kubelet runs it");
	free(TAKE_PTR(exe));
	free(TAKE_PTR(name));
	is_int(flex_driver_locate("/nonexistent", "test~alias/alias", &exe, &name, &error), 0,
	       "by a relative path");
	is_str(exe, alias, "its own path");
	is_str(name, "alias", "and its own name");
	free(TAKE_PTR(exe));
	free(TAKE_PTR(name));
	ok(chdir(cwd) == 0, "back");

	is_int(flex_driver_locate(tmpdir, "test/none", &exe, &name, &error), -ENOENT,
	       "a driver that is not installed");
	ok(contains(error, "driver \"test/none\": ") && contains(error, "test~none/none"),
	   "the message names the driver and where it was looked for: %s", error);
	free(TAKE_PTR(error));
	is_int(flex_driver_locate(tmpdir, "bad name", &exe, &name, &error), -EINVAL,
	       "an invalid driver name");
	ok(contains(error, "bad name"), "named: %s", error);
	free(TAKE_PTR(error));
	is_int(flex_driver_locate(tmpdir, "/nonexistent/driver", &exe, &name, &error), -ENOENT,
	       "a path that does not exist");
	is_str(error, "/nonexistent/driver: No such file or directory", "its message");
}

static void test_registry(void)
{
	_cleanup_(flex_registry_freep) FlexRegistry *reg = flex_registry_new();
	FlexDriver *d = NULL, **list;
	char *error = NULL;
	size_t n;

	is_int(flex_registry_get_loaded(reg, "x/a", &d, &error), -ENOENT, "unknown driver");
	ok(error && strstr(error, "x/a"), "%s", error);
	free(TAKE_PTR(error));
	FlexCapabilities caps = FLEX_CAPABILITIES_DEFAULT;
	caps.attach = false;
	flex_registry_publish(reg,
			      flex_driver_new("x/b", "x~b", "/b", FLEX_DRIVER_LOADED, &caps, NULL));
	flex_registry_publish(
		reg, flex_driver_new("x/a", "x~a", "/a", FLEX_DRIVER_FAILED, NULL, "init: no"));
	is_int(flex_registry_get_loaded(reg, "x/a", &d, &error), -ENOEXEC, "failed driver");
	ok(error && strstr(error, "init: no"), "%s", error);
	free(TAKE_PTR(error));
	is_int(flex_registry_get_loaded(reg, "x/b", &d, NULL), 0, "loaded driver");
	ok(!d->capabilities.attach && d->generation == 1, "its snapshot");
	flex_registry_list(reg, &list, &n);
	ok(n == 2 && strcmp(list[0]->name, "x/a") == 0 && strcmp(list[1]->name, "x/b") == 0,
	   "list sorted by name");
	flex_driver_list_free(list, n);
	ok(flex_registry_remove(reg, "x/b"), "remove");
	ok(!flex_registry_remove(reg, "x/b"), "remove twice: nothing to do");
	is_int(flex_registry_get_loaded(reg, "x/b", &list[0], &error), -ENOENT, "removed");
	ok(error && strstr(error, "was removed"), "%s", error);
	free(TAKE_PTR(error));
	ok(d->state == FLEX_DRIVER_LOADED && strcmp(d->exe, "/b") == 0,
	   "a held snapshot survives its removal");
	is_int(flex_registry_generation(reg), 3, "generation counts publications");
	flex_driver_unref(d);
}

/* Every form a driver may print a secret in, and nothing else, is cut out; a form the capture
 * limit cut in two is cut out too. */
static void test_redaction(void)
{
	_cleanup_strv_free_ char **forms = NULL;
	const char *secret = "p\"\\/<é>?~\n";

	flex_secret_forms(secret, &forms);
	flex_secret_forms("", &forms);
	const char *want[] = {
		"p\"\\/<é>?~\n",		  /* raw */
		"cCJcLzzDqT4/fgo=",		  /* base64, as the driver got it */
		"cCJcLzzDqT4/fgo",		  /* unpadded */
		"cCJcLzzDqT4_fgo=",		  /* URL alphabet */
		"cCJcLzzDqT4_fgo",		  /* URL, unpadded */
		"cCJcLzzDqT4\\/fgo=",		  /* base64 in JSON with \/ */
		"p\\\"\\\\/<é>?~\\n",		  /* JSON: jq, Python, jansson */
		"p\\\"\\\\/\\u003cé\\u003e?~\\n", /* JSON: Go */
		"p\\\"\\\\/<\\u00e9>?~\\n",	  /* JSON: Python's ensure_ascii */
		"p\\\"\\\\\\/<é>?~\\n",		  /* JSON with \/ */
		"p\\\"\\\\/<\\u00E9>?~\\n",	  /* JSON, upper-case hex */
		"p\\\\\\\"\\\\\\\\/<é>?~\\\\n",	  /* JSON in JSON */
		"70225c2f3cc3a93e3f7e0a",	  /* hex */
		"70225C2F3CC3A93E3F7E0A",	  /* HEX */
		"cCJcLzzDqT4/fgo\\u003d",	  /* never: no encoder escapes = */
	};
	for (size_t i = 0; i < ELEMENTSOF(want); i++) {
		bool found = false, expected = i + 1 < ELEMENTSOF(want);
		for (size_t k = 0; forms && forms[k]; k++)
			found = found || strcmp(forms[k], want[i]) == 0;
		ok(found == expected, "form %zu %s: %s", i, expected ? "made" : "not made",
		   want[i]);
	}
	is_int(strv_length(forms), ELEMENTSOF(want) - 1, "each form once, none for \"\"");

	_cleanup_free_ char *text =
		xasprintf("a %s b %s c %s d", forms[0], forms[1], "70225c2f3cc3a93e3f7e0a");
	_cleanup_free_ char *red = flex_redact(text, strlen(text), false, forms);
	is_str(red, "a (redacted) b (redacted) c (redacted) d", "each form cut out");
	_cleanup_strv_free_ char **abc = NULL;
	strv_append(&abc, xstrdup("abc"));
	strv_append(&abc, xstrdup("cab"));
	_cleanup_free_ char *merged = flex_redact("xabcabcy", 8, false, abc);
	is_str(merged, "x(redacted)y", "overlapping forms cut out as one");
	_cleanup_free_ char *tail = flex_redact("out: ab", 7, true, abc);
	is_str(tail, "out: (redacted)", "truncated: the head of a form at the end goes too");
	_cleanup_free_ char *whole = flex_redact("out: ab", 7, false, abc);
	is_str(whole, "out: ab", "not truncated: it was no secret");
	_cleanup_free_ char *nul = flex_redact("a\0abc", 5, false, abc);
	ok(memcmp(nul, "a\0(redacted)", 13) == 0, "NUL bytes do not end the search");
	_cleanup_free_ char *none = flex_redact(NULL, 0, true, NULL);
	is_str(none, "", "nothing: \"\"");
}

/* Drivers run with this process's environment, as the kubelet runs them with its own; a clean
 * one or an allow-list on request. */
static void test_environment(void)
{
	_cleanup_free_ char *exe = install("tests/flex-drivers", "envconf");
	_cleanup_free_ char *log = xasprintf("%s/envconf.log", tmpdir);
	_cleanup_free_ char *error = NULL;
	char **env = NULL;

	is_int(flex_env_parse("inherit", &env, &error), 0, "inherit");
	ok(!env, "no list: this process's environment");
	is_int(flex_env_parse("clean", &env, &error), 0, "clean");
	ok(strv_length(env) == 2 && strncmp(env[0], "PATH=/", 6) == 0 &&
		   strcmp(env[1], "LC_ALL=C") == 0,
	   "PATH and LC_ALL=C");
	strv_free(env);
	is_int(flex_env_parse("x y", &env, &error), -EINVAL, "a name that is none");
	ok(contains(error, "'x y'") && contains(error, "inherit, clean"), "%s", error);
	is_int(flex_env_parse("A,", &env, &error), -EINVAL, "an empty name");

	setenv("ENVCONF_LOG", log, 1);
	setenv("https_proxy", "http://proxy.test:3128", 1);
	FlexReply rep;
	is_int(flex_call("test/envconf", exe, NULL, FLEX_UNMOUNTDEVICE,
			 &(FlexCallArgs){.device_mount_path = "/m"}, &rep, &error),
	       -EOPNOTSUPP, "inherited: the driver found its settings");
	ok(count_lines(tmpdir, "envconf.log", "unmountdevice proxy=http://proxy.test:3128") == 1,
	   "and its proxy");
	is_int(flex_env_parse("ENVCONF_LOG,NOT_SET_ANYWHERE", &env, &error), 0, "an allow-list");
	ok(strv_length(env) == 3 && contains(env[2], "ENVCONF_LOG="), "PATH, LC_ALL, ENVCONF_LOG");
	FlexCallConfig cfg = {.env = env};
	is_int(flex_call("test/envconf", exe, &cfg, FLEX_UNMOUNTDEVICE,
			 &(FlexCallArgs){.device_mount_path = "/m"}, &rep, &error),
	       -EOPNOTSUPP, "allowed: found");
	ok(count_lines(tmpdir, "envconf.log", "unmountdevice proxy=") == 1, "not the proxy");
	strv_free(env);
	is_int(flex_env_parse("clean", &env, &error), 0, "clean");
	cfg.env = env;
	is_int(flex_call("test/envconf", exe, &cfg, FLEX_UNMOUNTDEVICE,
			 &(FlexCallArgs){.device_mount_path = "/m"}, &rep, &error),
	       -EIO, "clean: the driver misses its settings");
	ok(contains(error, "ENVCONF_LOG is not set"), "%s", error);
	strv_free(env);
	unsetenv("ENVCONF_LOG");
	unsetenv("https_proxy");
}

/* Whether Kubernetes, reading stdout and stderr as one, finds the answer volplug found. */
static void test_kubelet_parses(void)
{
	_cleanup_free_ char *exe = install("tests/flex-drivers", "record");
	const struct {
		const char *out, *err;
		bool kubelet;
	} table[] = {
		{"{\"status\":\"Success\"}\n", NULL, true},
		{"  {\"status\":\"Success\"}  \n", " \n", true},
		{NULL, "{\"status\":\"Not supported\"}", true},
		{"{\"status\":\"Success\"}", "debug: mounted\n", false},
		{"mounting...\n{\"status\":\"Success\"}", NULL, false},
		{"{\"status\":\"Success\"}\n{\"status\":\"Success\"}", NULL, false},
	};

	for (size_t i = 0; i < ELEMENTSOF(table); i++) {
		FlexRun run;
		put("record", ".stdout", table[i].out ?: "");
		put("record", ".stderr", table[i].err);
		is_int(flex_run("test/record", exe, NULL, FLEX_INIT, NULL, &run), 0, "run %zu", i);
		ok(run.parsed, "volplug finds the answer");
		ok(flex_run_kubelet_parses(&run) == table[i].kubelet, "Kubernetes %s",
		   table[i].kubelet ? "finds it too" : "does not");
		flex_run_done(&run);
	}
	put("record", ".stdout", NULL);
	put("record", ".stderr", NULL);
}

int main(void)
{
	drivers_init("flex-call");
	test_commands();
	test_names();
	test_locate();
	test_registry();
	test_options_json();
	test_parse();
	test_argv();
	test_answers();
	test_verdicts();
	test_not_supported_memory();
	test_secrets();
	test_redaction();
	test_environment();
	test_kubelet_parses();
	test_examples();

	drivers_done();
	return tap_done();
}
