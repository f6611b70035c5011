/* SPDX-License-Identifier: Apache-2.0 */
/* The conformance check (volplugctl flex test) against real drivers run as processes: which
 * rules each broken answer breaks, how many were checked, where the check stops, the progress
 * callbacks, and that nothing is left in the temporary directory. The attach and mount steps
 * run only as root; their drivers here mount nothing. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "conformance.h"
#include "fileio.h"
#include "flex-drivers.h"
#include "strv.h"
#include "tap.h"

static const FlexVolumeSpec spec = {.fs_type = "ext4"};

/* The labels the callbacks saw: "+label" as a step starts, "-label" once judged. */
static char progress[1024];

static void on_begin(const char *label, _unused_ void *userdata)
{
	size_t n = strlen(progress);
	snprintf(progress + n, sizeof(progress) - n, "+%s ", label);
}

static void on_end(const FlexConformanceStep *step, _unused_ void *userdata)
{
	size_t n = strlen(progress);
	snprintf(progress + n, sizeof(progress) - n, "-%s ", step->label);
}

/* Runs the check; returns its result, Bail out when it cannot run at all. */
static FlexConformance run(const char *exe, const FlexCallConfig *call)
{
	FlexConformanceConfig cfg = {
		.driver = "test/driver",
		.exe = exe,
		.spec = &spec,
		.call = call,
		.tmp_dir = tmpdir,
		.step_begin = on_begin,
		.step_end = on_end,
	};
	_cleanup_free_ char *error = NULL;
	FlexConformance c;

	progress[0] = 0;
	if (flex_conformance_run(&cfg, &c, &error) < 0) {
		printf("Bail out! flex_conformance_run: %s\n", error);
		exit(1);
	}
	return c;
}

/* Nothing of the check's temporary directories is left. */
static bool nothing_left(void)
{
	DIR *d = opendir(tmpdir);
	struct dirent *e;
	bool clean = true;

	while (d && (e = readdir(d)))
		if (strncmp(e->d_name, "volplugctl-flex-test-", 21) == 0)
			clean = false;
	if (d)
		closedir(d);
	return clean;
}

static const char *first_violation(const FlexConformance *c, size_t step)
{
	if (step >= c->n_steps || !c->steps[step].violations)
		return "(none)";
	return c->steps[step].violations[0];
}

/* Answers that stop the check at init: the rule each breaks, and how many rules were checked
 * (the order: in time, a JSON object, typed keys, a status, a known status, then exit status 0
 * with Success or no Failure). */
static void test_init_verdicts(void)
{
	_cleanup_free_ char *rec = install("tests/flex-drivers", "record");
	_cleanup_free_ char *garbage = install("tests/flex-drivers", "garbage");
	_cleanup_free_ char *hang = install("tests/flex-drivers", "hang");
	_cleanup_free_ char *initfail = install("tests/flex-drivers", "initfail");
	const FlexCallConfig fast = {.timeout[FLEX_INIT] = 300 * USEC_PER_MSEC,
				     .kill_grace = 200 * USEC_PER_MSEC};
	const struct {
		const char *what, *exe, *answer; /* answer: what record prints */
		const char *violation;		 /* the whole text, or its start after '~' */
		unsigned checks;
	} table[] = {
		{"garbage", garbage, NULL, "~the output is not a JSON object (exit status 0): ", 2},
		{"a hang", hang, NULL,
		 "no answer within the deadline: timed out after 0.3 s; output: started init", 1},
		{"Failure", initfail, NULL,
		 "answered Failure (exit status 1): kernel module initfail-fs is not loaded", 6},
		{"a capability of the wrong type", rec,
		 "{\"status\":\"Success\",\"capabilities\":{\"attach\":\"no\"}}",
		 "capability \"attach\" is a string, not a bool", 3},
		{"no status", rec, "{\"message\":\"hi\"}", "the answer has no \"status\"", 4},
		{"an unknown status", rec, "{\"status\":\"Splendid\"}",
		 "unknown status \"Splendid\": want Success, Failure or Not supported", 5},
		{"Not supported", rec, "{\"status\":\"Not supported\"}",
		 "init answered Not supported: Kubernetes does not load the driver", 7},
		{"no executable", "/nonexistent/driver", NULL,
		 "cannot run /nonexistent/driver: No such file or directory", 1},
	};

	for (size_t i = 0; i < ELEMENTSOF(table); i++) {
		const char *what = table[i].what, *want = table[i].violation;
		put("record", ".stdout", table[i].answer);
		FlexConformance c = run(table[i].exe, table[i].exe == hang ? &fast : NULL);

		ok(c.n_steps == 1 && strcmp(c.steps[0].label, "init") == 0, "%s: stopped at init",
		   what);
		ok(!c.loaded && !c.root_skipped, "%s: would not be loaded", what);
		is_int(c.violations, 1, "%s: one violation", what);
		is_int(c.checks, table[i].checks, "%s: rules checked", what);
		if (want[0] == '~')
			ok(strncmp(first_violation(&c, 0), want + 1, strlen(want + 1)) == 0,
			   "%s: %s", what, first_violation(&c, 0));
		else
			is_str(first_violation(&c, 0), want, "%s: the violation", what);
		is_str(progress, "+init -init ", "%s: progress", what);
		flex_conformance_done(&c);
	}
	put("record", ".stdout", NULL);
}

/* Success with a non-zero exit: Kubernetes fails the call, so it would not load the driver. */
static void test_bad_exit(void)
{
	_cleanup_free_ char *exe = install("tests/flex-drivers", "badexit");
	FlexConformance c = run(exe, NULL);

	is_str(first_violation(&c, 0), "answered \"Success\" but ended with exit status 3",
	       "init: the violation");
	ok(!c.loaded && c.n_steps == 1, "the driver would not be loaded: the check stops");
	is_int(strv_length(c.steps[0].violations), 1, "init broke one rule");
	ok(nothing_left(), "the temporary directory is gone");
	flex_conformance_done(&c);
}

/* A driver that is not attachable and answers Not supported to the rest. */
static void test_not_supported(void)
{
	_cleanup_free_ char *exe = install("tests/flex-drivers", "notsupported");
	FlexConformance c = run(exe, NULL);

	ok(c.loaded, "loaded");
	ok(c.n_steps >= 2 && strv_length(c.steps[0].notes) == 1 &&
		   strv_length(c.steps[1].notes) == 1,
	   "init and getvolumename each have a note");
	if (c.n_steps >= 2) {
		is_str(c.steps[0].notes[0],
		       "attach=false selinuxRelabel=true supportsMetrics=false fsGroup=true "
		       "requiresFSResize=true",
		       "init: the capabilities");
		is_str(c.steps[1].notes[0], "Not supported: Kubernetes uses the volume's name",
		       "getvolumename: Not supported, and what Kubernetes does instead");
	}
	if (geteuid() != 0) {
		ok(c.root_skipped && c.n_steps == 2 && c.violations == 0,
		   "not root: init and getvolumename only");
		is_str(progress, "+init -init +getvolumename -getvolumename ", "progress");
	} else {
		ok(!c.root_skipped && c.n_steps == 4, "root: the mount steps ran");
		is_str(progress,
		       "+init -init +getvolumename -getvolumename +mount -mount +unmount -unmount ",
		       "progress: mount, then unmount");
		ok(strncmp(first_violation(&c, 2),
			   "mount answered Not supported: a driver that is not attachable must",
			   66) == 0,
		   "mount must be implemented without attach: %s", first_violation(&c, 2));
		ok(c.n_steps == 4 && strv_length(c.steps[3].violations) == 0 &&
			   strv_length(c.steps[3].notes) == 1 &&
			   strcmp(c.steps[3].notes[0],
				  "Not supported: the host unmounts the directory") == 0,
		   "unmount Not supported: the host's fallback");
		is_int(c.violations, 1, "one violation");
	}
	ok(!c.cleanups, "nothing to clean up");
	ok(nothing_left(), "the temporary directory is gone");
	flex_conformance_done(&c);
}

/* Success to everything, not attachable: a mount that mounted nothing is what Kubernetes
 * accepts, a warning. */
static void test_mount_checked(void)
{
	_cleanup_free_ char *exe = install("tests/flex-drivers", "record");
	put("record", ".stdout", "{\"status\":\"Success\",\"capabilities\":{\"attach\":false}}");
	FlexConformance c = run(exe, NULL);

	ok(c.loaded, "loaded");
	if (geteuid() != 0) {
		ok(c.root_skipped && c.violations == 0, "not root: nothing to check");
	} else {
		const char *labels[] = {"init",		"getvolumename", "mount",
					"expandvolume", "expandfs",	 "unmount"};
		ok(c.n_steps == ELEMENTSOF(labels), "%zu steps", c.n_steps);
		for (size_t i = 0; i < MIN(c.n_steps, ELEMENTSOF(labels)); i++)
			is_str(c.steps[i].label, labels[i], "step %zu", i);
		const char *w = c.n_steps > 2 && c.steps[2].warnings ? c.steps[2].warnings[0] : "";
		ok(strncmp(w, "mount answered Success but nothing is mounted at ", 49) == 0 &&
			   contains(w, "/pods/volumes/test~driver/vol") &&
			   contains(w, "Kubernetes accepts it"),
		   "mount: nothing mounted at the pod's volume directory: %s", w);
		is_int(c.violations, 0, "no violation: Kubernetes never checks");
		is_int(c.warnings, 1, "one warning");
		ok(c.checks > 30, "%u rules checked", c.checks);
	}
	ok(nothing_left(), "the temporary directory is gone");
	flex_conformance_done(&c);
	put("record", ".stdout", NULL);
}

/* ---- the verdict against Kubernetes' ---- */

/* A driver that does things right, not attachable: a tmpfs per mount. */
static const char plain_driver[] =
	"init) echo '{\"status\":\"Success\",\"capabilities\":{\"attach\":false}}' ;;\n"
	"mount) mkdir -p \"$2\" && mount -t tmpfs t \"$2\" && echo '{\"status\":\"Success\"}' ;;\n"
	"unmount) umount \"$2\" && echo '{\"status\":\"Success\"}' ;;\n";

/* And an attachable one: a state file says attached, mountdevice mounts a tmpfs, mount is
 * left to the host. */
static const char attach_driver[] =
	"init) echo '{\"status\":\"Success\",\"capabilities\":{\"attach\":true}}' ;;\n"
	"attach) touch \"$d/.attached\"; echo '{\"status\":\"Success\",\"device\":\"/dev/null\"}' "
	";;\n"
	"isattached) if [ -e \"$d/.attached\" ]; then a=true; else a=false; fi\n"
	"  echo \"{\\\"status\\\":\\\"Success\\\",\\\"attached\\\":$a}\" ;;\n"
	"waitforattach) echo \"{\\\"status\\\":\\\"Success\\\",\\\"device\\\":\\\"$2\\\"}\" ;;\n"
	"mountdevice) mount -t tmpfs t \"$2\" && echo '{\"status\":\"Success\"}' ;;\n"
	"unmountdevice) umount \"$2\" && echo '{\"status\":\"Success\"}' ;;\n"
	"detach) rm -f \"$d/.attached\"; echo '{\"status\":\"Success\"}' ;;\n";

/* Writes tmpdir/test~table/table: the branches of `override` first (they win), then those of
 * base, then Not supported for the rest. */
static char *table_driver(const char *base, const char *override)
{
	_cleanup_free_ char *dir = xasprintf("%s/test~table", tmpdir);
	_cleanup_free_ char *text = xasprintf("#!/bin/sh\nd=$(dirname \"$0\")\ncase \"$1\" in\n%s%s"
					      "*) echo '{\"status\":\"Not supported\"}' ;;\nesac\n",
					      override, base);
	(void)mkdir(dir, 0755);
	_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (write_file_atomic_at(fd, "table", text, strlen(text), 0755) < 0) {
		printf("Bail out! cannot write the table driver\n");
		exit(1);
	}
	return xasprintf("%s/table", dir);
}

/* What Kubernetes does with a driver, row by row, and what flex test says: a violation for
 * what fails there, a warning for what it accepts but is likely a bug, nothing for what works.
 * The attach and mount steps need root. */
static void test_kubelet_outcomes(void)
{
	const struct {
		const char *what, *base, *override;
		const char *kubelet;   /* the outcome under the kubelet */
		const char *violation; /* NULL: Kubernetes runs the driver; else a part of it */
		unsigned warnings;
	} table[] = {
		{"a driver that does things right", plain_driver, "", "works", NULL, 0},
		{"mount that needs its directory made", plain_driver,
		 "mount) mount -t tmpfs t \"$2\" && echo '{\"status\":\"Success\"}' ;;\n",
		 "works: the kubelet makes it (MkdirAll 0750)", NULL, 0},
		{"mount that mounts nothing", plain_driver,
		 "mount|unmount) echo '{\"status\":\"Success\"}' ;;\n",
		 "works: the kubelet never checks", NULL, 1},
		{"unmount that leaves the mount", plain_driver,
		 "unmount) echo '{\"status\":\"Success\"}' ;;\n",
		 "fails: removing the directory fails", "is still mounted", 0},
		{"unmount that leaves a file", plain_driver,
		 "unmount) umount \"$2\" && touch \"$2/left\" && echo '{\"status\":\"Success\"}' "
		 ";;\n",
		 "fails: removing the directory fails", "cannot remove", 0},
		{"debug lines on stderr", plain_driver,
		 "mount) mkdir -p \"$2\" && mount -t tmpfs t \"$2\" && echo mounted >&2 && "
		 "echo '{\"status\":\"Success\"}' ;;\n",
		 "fails: stdout and stderr are read as one JSON document", "stdout and stderr", 0},
		{"Success with exit status 1", plain_driver,
		 "mount) mkdir -p \"$2\"; echo '{\"status\":\"Success\"}'; exit 1 ;;\n",
		 "fails: the exit status", "ended with exit status 1", 0},
		{"Not supported with exit status 1", plain_driver,
		 "expandvolume) echo '{\"status\":\"Not supported\"}'; exit 1 ;;\n",
		 "works: Not supported whatever the exit status", NULL, 0},
		{"mount Not supported, not attachable", plain_driver,
		 "mount) echo '{\"status\":\"Not supported\"}' ;;\n",
		 "fails: no device mount path to bind", "must implement it", 0},
		{"unknown status", plain_driver,
		 "unmount) umount \"$2\"; echo '{\"status\":\"Done\"}' ;;\n", "fails",
		 "unknown status \"Done\"", 0},
		{"getvolumename Failure, not attachable", plain_driver,
		 "getvolumename) echo '{\"status\":\"Failure\"}'; exit 1 ;;\n",
		 "works (only expandvolume would fail)", NULL, 1},
		{"an attachable driver that does things right", attach_driver, "", "works", NULL,
		 0},
		{"getvolumename Failure, attachable", attach_driver,
		 "getvolumename) echo '{\"status\":\"Failure\"}'; exit 1 ;;\n",
		 "fails: attach never runs", "answered Failure", 0},
		{"attach and waitforattach name no device", attach_driver,
		 "attach) touch \"$d/.attached\"; echo '{\"status\":\"Success\"}' ;;\n"
		 "waitforattach) echo '{\"status\":\"Success\"}' ;;\n",
		 "works: the empty device is passed on", NULL, 2},
		{"isattached without \"attached\"", attach_driver,
		 "isattached) echo '{\"status\":\"Success\"}' ;;\n",
		 "works: read as false, attached again", NULL, 1},
		{"isattached true after detach", attach_driver,
		 "isattached) echo '{\"status\":\"Success\",\"attached\":true}' ;;\n",
		 "works: never asked after a detach", NULL, 1},
	};

	if (geteuid() != 0) {
		printf("# not root: the table of Kubernetes' outcomes needs mounts\n");
		return;
	}
	for (size_t i = 0; i < ELEMENTSOF(table); i++) {
		_cleanup_free_ char *exe = table_driver(table[i].base, table[i].override);
		FlexConformance c = run(exe, NULL);
		_cleanup_free_ char *all = NULL;
		for (size_t k = 0; k < c.n_steps; k++)
			for (size_t j = 0; c.steps[k].violations && c.steps[k].violations[j]; j++) {
				char *n = xasprintf("%s%s | ", all ?: "", c.steps[k].violations[j]);
				free(all);
				all = n;
			}
		if (table[i].violation)
			ok(c.violations > 0 && contains(all, table[i].violation),
			   "%s: Kubernetes %s; flex test: a violation (%s)", table[i].what,
			   table[i].kubelet, all ?: "none");
		else
			is_int(c.violations, 0, "%s: Kubernetes %s; flex test: no violation (%s)",
			       table[i].what, table[i].kubelet, all ?: "");
		is_int(c.warnings, table[i].warnings, "%s: warnings", table[i].what);
		if (strcmp(table[i].violation ?: "", "cannot remove") == 0) {
			ok(c.cleanups && contains(c.cleanups[0], "is left behind"),
			   "%s: the check says what it left", table[i].what);
			_cleanup_free_ char *rm =
				xasprintf("rm -rf %s/volplugctl-flex-test-*", tmpdir);
			(void)system(rm);
		}
		ok(nothing_left(), "%s: nothing left behind", table[i].what);
		flex_conformance_done(&c);
	}
}

int main(void)
{
	drivers_init("flex-conformance");
	test_init_verdicts();
	test_bad_exit();
	test_not_supported();
	test_mount_checked();
	test_kubelet_outcomes();
	drivers_done();
	return tap_done();
}
