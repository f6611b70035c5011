/* SPDX-License-Identifier: Apache-2.0 */
/* The prober on a real plugin dir with real inotify: drivers installed, updated, broken,
 * renamed away and deleted while it runs, as a user (or a DaemonSet) would. */
#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "exec.h"
#include "fileio.h"
#include "install.h"
#include "prober.h"
#include "registry.h"
#include "tap.h"

#define INIT_DEADLINE (3 * USEC_PER_SEC)
#define LOAD_TARGET (1500 * USEC_PER_MSEC)

static char root[] = "/tmp/volplug-test-flex-prober-XXXXXX";
static char *plugins;
static FlexRegistry *reg;
static FlexProber *prober;

static atomic_uint callbacks;

static void on_change(FlexDriver *d, void *userdata)
{
	(void)userdata;
	if (d && d->name)
		atomic_fetch_add(&callbacks, 1);
}

static char *src(const char *from, const char *name)
{
	return xasprintf("%s/%s/%s", SOURCE_ROOT, from, name);
}

static int install(const char *vendor, const char *name, const char *from, const char *file)
{
	_cleanup_free_ char *s = src(from, file);
	_cleanup_free_ char *error = NULL;
	int r = flex_install(plugins, vendor, name, s, &error);
	if (r < 0)
		printf("# install %s/%s: %s\n", vendor ?: "", name, error);
	return r;
}

static void run(const char *a0, const char *a1, const char *a2, const char *a3)
{
	const char *argv[] = {a0, a1, a2, a3, NULL};
	ExecResult res;
	if (exec_run(&(ExecOptions){.argv = argv}, &res) == 0)
		exec_result_done(&res);
}

/* Waits until name's snapshot is in state (and, when gen_after != 0, newer than gen_after).
 * Returns the time it took, or USEC_INFINITY. */
static usec_t wait_state(const char *name, FlexDriverState state, uint64_t gen_after,
			 usec_t timeout)
{
	usec_t t0 = now_usec(CLOCK_MONOTONIC);

	for (;;) {
		_cleanup_flex_driver_ FlexDriver *d = NULL;
		if (flex_registry_get(reg, name, &d) == 0 && d->state == state &&
		    d->generation > gen_after)
			return now_usec(CLOCK_MONOTONIC) - t0;
		if (now_usec(CLOCK_MONOTONIC) - t0 > timeout)
			return USEC_INFINITY;
		usleep(2000);
	}
}

static FlexDriver *get(const char *name)
{
	FlexDriver *d = NULL;
	(void)flex_registry_get(reg, name, &d);
	return d;
}

static uint64_t gen_of(const char *name)
{
	_cleanup_flex_driver_ FlexDriver *d = get(name);
	return d ? d->generation : 0;
}

static FlexProberStats stats(void)
{
	FlexProberStats s;
	flex_prober_stats(prober, &s);
	return s;
}

static size_t lines_in(const char *folder, const char *file)
{
	_cleanup_free_ char *dir = xasprintf("%s/%s", plugins, folder);
	_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_free_ char *buf = NULL;
	size_t len, n = 0;

	if (read_file_at(fd, file, 16 << 20, &buf, &len) < 0)
		return 0;
	for (size_t i = 0; i < len; i++)
		n += buf[i] == '\n';
	return n;
}

static char *last_line(const char *folder, const char *file)
{
	_cleanup_free_ char *dir = xasprintf("%s/%s", plugins, folder);
	_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char *buf = NULL;
	size_t len;

	if (read_file_at(fd, file, 16 << 20, &buf, &len) < 0)
		return xstrdup("");
	while (len > 0 && buf[len - 1] == '\n')
		buf[--len] = 0;
	char *nl = strrchr(buf, '\n');
	char *last = xstrdup(nl ? nl + 1 : buf);
	free(buf);
	return last;
}

static void write_file(const char *path, const char *content)
{
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, content, strlen(content)) < 0)
		printf("# cannot write %s\n", path);
}

static void test_start(void)
{
	struct stat st;

	ok(stat(plugins, &st) < 0, "plugin dir absent before");
	FlexProberConfig cfg = {.dir = plugins,
				.call.timeout[FLEX_INIT] = INIT_DEADLINE,
				.call.kill_grace = 500 * USEC_PER_MSEC,
				.on_change = on_change};
	is_int(flex_prober_new(&cfg, reg, &prober), 0, "prober created");
	ok(stat(plugins, &st) == 0 && S_ISDIR(st.st_mode), "plugin dir created");
	is_int(flex_prober_start(prober), 0, "prober started");
	is_int(flex_prober_wait_settled(prober, 5 * USEC_PER_SEC), 0, "settled");
	is_int(stats().passes, 1, "one initial pass");
}

static void test_install_update(void)
{
	uint64_t inits = stats().inits;
	uint64_t passes = stats().passes;

	is_int(install("example.com", "tmpfs", "examples/flexvolume", "tmpfs"), 0, "install");
	usec_t t = wait_state("example.com/tmpfs", FLEX_DRIVER_LOADED, 0, 5 * USEC_PER_SEC);
	ok(t < LOAD_TARGET, "installed driver loaded in %.3f s (target < 1.5 s)", (double)t / 1e6);
	is_int(flex_prober_wait_settled(prober, 5 * USEC_PER_SEC), 0, "settled");
	is_int(stats().inits - inits, 1, "one init");
	ok(stats().passes - passes <= 2, "install took %llu pass(es)",
	   (unsigned long long)(stats().passes - passes));
	_cleanup_flex_driver_ FlexDriver *old = get("example.com/tmpfs");
	ok(old && !old->capabilities.attach, "tmpfs capabilities: attach false");

	/* An upgrade that changes attachability, renamed over the running one. */
	usec_t t0 = now_usec(CLOCK_MONOTONIC);
	is_int(install("example.com", "tmpfs", "examples/flexvolume", "loop"), 0, "update");
	t = wait_state("example.com/tmpfs", FLEX_DRIVER_LOADED, old->generation, 5 * USEC_PER_SEC);
	ok(t != USEC_INFINITY, "updated driver re-inited in %.3f s",
	   (double)(now_usec(CLOCK_MONOTONIC) - t0) / 1e6);
	_cleanup_flex_driver_ FlexDriver *cur = get("example.com/tmpfs");
	ok(cur && cur->capabilities.attach, "new capabilities: attach true");
	ok(old->state == FLEX_DRIVER_LOADED && !old->capabilities.attach &&
		   strcmp(old->name, "example.com/tmpfs") == 0,
	   "the snapshot held across the reload is intact");

	is_int(install(NULL, "plain", "examples/flexvolume", "tmpfs"), 0, "install plain/plain");
	ok(wait_state("plain", FLEX_DRIVER_LOADED, 0, 5 * USEC_PER_SEC) != USEC_INFINITY,
	   "a folder without vendor is driver \"plain\"");
}

static void test_unchanged_not_reinited(void)
{
	is_int(install("test", "v1", "tests/flex-drivers", "versioned"), 0, "install test/v1");
	ok(wait_state("test/v1", FLEX_DRIVER_LOADED, 0, 5 * USEC_PER_SEC) != USEC_INFINITY,
	   "test/v1 loaded");
	is_int(flex_prober_wait_settled(prober, 5 * USEC_PER_SEC), 0, "settled");
	is_int(lines_in("test~v1", ".inits"), 1, "test/v1 inited once");
	is_int(install("test", "other", "examples/flexvolume", "tmpfs"), 0, "install another");
	ok(wait_state("test/other", FLEX_DRIVER_LOADED, 0, 5 * USEC_PER_SEC) != USEC_INFINITY,
	   "test/other loaded");
	is_int(flex_prober_wait_settled(prober, 5 * USEC_PER_SEC), 0, "settled");
	is_int(lines_in("test~v1", ".inits"), 1, "test/v1 not re-inited for another's change");
}

static void test_dot_names(void)
{
	uint64_t passes = stats().passes, events = stats().events;
	_cleanup_free_ char *hidden = xasprintf("%s/.hidden~x", plugins);
	_cleanup_free_ char *hidden_exe = xasprintf("%s/x", hidden);
	_cleanup_free_ char *swp = xasprintf("%s/test~v1/.v1.swp", plugins);
	_cleanup_free_ char *tool = src("examples/flexvolume", "tmpfs");

	mkdir(hidden, 0755);
	run("/bin/cp", tool, hidden_exe, NULL);
	write_file(swp, "editor swap");
	usleep(1200 * 1000);
	is_int(flex_prober_wait_settled(prober, 5 * USEC_PER_SEC), 0, "settled");
	ok(stats().events > events, "the watcher saw the events (%llu)",
	   (unsigned long long)(stats().events - events));
	is_int(stats().passes - passes, 0, "no probe pass for dot-names");
	_cleanup_flex_driver_ FlexDriver *d = get(".hidden/x");
	ok(!d, "no driver from a dot-folder");
	is_int(lines_in("test~v1", ".inits"), 1, "a dot-file in a folder does not re-init");
}

static void test_bad_init(void)
{
	char *error = NULL;
	FlexDriver *d = NULL;

	is_int(install("test", "initfail", "tests/flex-drivers", "initfail"), 0,
	       "install initfail");
	ok(wait_state("test/initfail", FLEX_DRIVER_FAILED, 0, 5 * USEC_PER_SEC) != USEC_INFINITY,
	   "failing init reported");
	is_int(flex_registry_get_loaded(reg, "test/initfail", &d, &error), -ENOEXEC, "not used");
	ok(error && strstr(error, "kernel module initfail-fs is not loaded") &&
		   strstr(error, "exit status 1") && strstr(error, "test/initfail"),
	   "with the driver's message: %s", error);
	free(error);

	/* A broken upgrade of a working driver: no silent fallback to the old version. */
	uint64_t g = gen_of("test/v1");
	is_int(install("test", "v1", "tests/flex-drivers", "initfail"), 0, "broken upgrade");
	ok(wait_state("test/v1", FLEX_DRIVER_FAILED, g, 5 * USEC_PER_SEC) != USEC_INFINITY,
	   "the upgraded driver is failed, the old version not kept");
	is_int(flex_registry_get_loaded(reg, "test/v1", &d, NULL), -ENOEXEC, "and not usable");
	is_int(flex_prober_wait_settled(prober, 5 * USEC_PER_SEC), 0, "settled");

	/* Retried only when its files change. */
	uint64_t inits = stats().inits;
	usleep(2200 * 1000);
	is_int(stats().inits - inits, 0, "failed inits are not retried on their own");
	g = gen_of("test/v1");
	is_int(install("test", "v1", "tests/flex-drivers", "versioned"), 0, "fixed upgrade");
	ok(wait_state("test/v1", FLEX_DRIVER_LOADED, g, 5 * USEC_PER_SEC) != USEC_INFINITY,
	   "the fixed driver is loaded");
}

static void test_invalid_names(void)
{
	_cleanup_free_ char *a = xasprintf("%s/bad name", plugins);
	_cleanup_free_ char *b = xasprintf("%s/a:b~c", plugins);
	_cleanup_free_ char *ae = xasprintf("%s/bad name/bad name", plugins);
	_cleanup_free_ char *be = xasprintf("%s/a:b~c/c", plugins);
	_cleanup_free_ char *tool = src("examples/flexvolume", "tmpfs");

	mkdir(a, 0755);
	mkdir(b, 0755);
	run("/bin/cp", tool, ae, NULL);
	run("/bin/cp", tool, be, NULL);
	ok(wait_state("bad name", FLEX_DRIVER_FAILED, 0, 5 * USEC_PER_SEC) != USEC_INFINITY,
	   "a name with a space is reported");
	ok(wait_state("a:b/c", FLEX_DRIVER_FAILED, 0, 5 * USEC_PER_SEC) != USEC_INFINITY,
	   "a name with ':' is reported");
	_cleanup_flex_driver_ FlexDriver *d = get("a:b/c");
	ok(d && d->error && strstr(d->error, "invalid driver name \"a:b/c\""), "error: %s",
	   d && d->error ? d->error : "(none)");
	run("/bin/rm", "-rf", a, b);
	ok(wait_state("a:b/c", FLEX_DRIVER_REMOVED, 0, 5 * USEC_PER_SEC) != USEC_INFINITY,
	   "removed again");
}

static void test_hang_does_not_block(void)
{
	is_int(install("test", "hang", "tests/flex-drivers", "hang"), 0,
	       "install a hanging driver");
	usleep(100 * 1000);
	is_int(install("test", "fast", "examples/flexvolume", "tmpfs"), 0, "and a good one");
	usec_t t = wait_state("test/fast", FLEX_DRIVER_LOADED, 0, 5 * USEC_PER_SEC);
	ok(t < LOAD_TARGET, "the good one loaded in %.3f s despite the hanging init",
	   (double)t / 1e6);
	_cleanup_flex_driver_ FlexDriver *d = get("test/hang");
	ok(!d, "the hanging one is not published while its init runs");
	ok(wait_state("test/hang", FLEX_DRIVER_FAILED, 0, 10 * USEC_PER_SEC) != USEC_INFINITY,
	   "the hanging init fails at its deadline");
	_cleanup_flex_driver_ FlexDriver *h = get("test/hang");
	ok(h && h->error && strstr(h->error, "no answer within the deadline"), "error: %s",
	   h && h->error ? h->error : "(none)");
}

static void test_not_supported_resets(void)
{
	_cleanup_free_ char *exe = xasprintf("%s/test~ns/ns", plugins);
	FlexVolumeSpec spec = {.pv_or_volume_name = "v"};
	FlexCallArgs a = {.spec = &spec, .pod_volume_dir = "/mnt/x"};
	FlexDriver *d = NULL;

	is_int(install("test", "ns", "tests/flex-drivers", "notsupported"), 0, "install ns");
	ok(wait_state("test/ns", FLEX_DRIVER_LOADED, 0, 5 * USEC_PER_SEC) != USEC_INFINITY,
	   "loaded");
	is_int(flex_registry_get_loaded(reg, "test/ns", &d, NULL), 0, "lookup");
	is_int(flex_driver_call(d, NULL, FLEX_MOUNT, &a, NULL, NULL), -EOPNOTSUPP, "mount");
	is_int(flex_driver_call(d, NULL, FLEX_MOUNT, &a, NULL, NULL), -EOPNOTSUPP, "mount again");
	uint64_t g = d->generation;
	flex_driver_unref(d);
	is_int(lines_in("test~ns", ".calls"), 2, "init + one mount ran");

	run("/usr/bin/touch", exe, NULL, NULL);
	ok(wait_state("test/ns", FLEX_DRIVER_LOADED, g, 5 * USEC_PER_SEC) != USEC_INFINITY,
	   "touched driver reloaded");
	is_int(flex_registry_get_loaded(reg, "test/ns", &d, NULL), 0, "lookup");
	ok(!flex_driver_is_unsupported(d, FLEX_MOUNT), "Not supported forgotten on reload");
	is_int(flex_driver_call(d, NULL, FLEX_MOUNT, &a, NULL, NULL), -EOPNOTSUPP, "mount");
	flex_driver_unref(d);
	is_int(lines_in("test~ns", ".calls"), 4, "the reloaded driver was asked again");
}

static void test_storm(void)
{
	_cleanup_free_ char *caps = xasprintf("%s/test~storm/caps", plugins);
	const char *last = "{\"attach\":false,\"fsGroup\":false}";

	is_int(install("test", "storm", "tests/flex-drivers", "versioned"), 0, "install storm");
	write_file(caps, "{\"attach\":true}");
	ok(wait_state("test/storm", FLEX_DRIVER_LOADED, 0, 5 * USEC_PER_SEC) != USEC_INFINITY,
	   "loaded");
	is_int(flex_prober_wait_settled(prober, 5 * USEC_PER_SEC), 0, "settled");

	FlexProberStats s0 = stats();
	usec_t t0 = now_usec(CLOCK_MONOTONIC);
	for (int i = 0; i < 10000; i++) {
		write_file(caps, i == 9999    ? last
				 : i % 2 == 0 ? "{\"attach\":true,\"fsGroup\":true}"
					      : "{\"attach\":true,\"fsGroup\":false}");
		if (i % 10 == 0)
			usleep(1000); /* spread over a few seconds */
	}
	usec_t storm = now_usec(CLOCK_MONOTONIC) - t0;
	is_int(flex_prober_wait_settled(prober, 10 * USEC_PER_SEC), 0, "settled after the storm");
	FlexProberStats s1 = stats();
	uint64_t passes = s1.passes - s0.passes;
	uint64_t allowed = storm / USEC_PER_SEC + 2;
	ok(passes <= allowed, "storm of 10000 writes in %.2f s: %llu passes (at most %llu)",
	   (double)storm / 1e6, (unsigned long long)passes, (unsigned long long)allowed);
	ok(passes >= 1, "at least one pass");
	ok(s1.inits - s0.inits <= passes + 1, "%llu inits",
	   (unsigned long long)(s1.inits - s0.inits));
	printf("# storm: %llu events read, %llu passes, %llu inits in %.2f s\n",
	       (unsigned long long)(s1.events - s0.events), (unsigned long long)passes,
	       (unsigned long long)(s1.inits - s0.inits), (double)storm / 1e6);
	_cleanup_flex_driver_ FlexDriver *d = get("test/storm");
	ok(d && d->state == FLEX_DRIVER_LOADED && !d->capabilities.attach &&
		   !d->capabilities.fs_group,
	   "the last version wins");
	_cleanup_free_ char *l = last_line("test~storm", ".inits");
	is_str(l, last, "the last init read the last write");
}

static void test_move_away(void)
{
	_cleanup_free_ char *from = xasprintf("%s/example.com~tmpfs", plugins);
	_cleanup_free_ char *to = xasprintf("%s/moved-away", root);
	_cleanup_free_ char *inside = xasprintf("%s/tmpfs", to);
	char *error = NULL;
	FlexDriver *d = NULL;

	is_int(rename(from, to), 0, "mv the driver folder out of the plugin dir");
	usec_t t = wait_state("example.com/tmpfs", FLEX_DRIVER_REMOVED, 0, 5 * USEC_PER_SEC);
	ok(t < LOAD_TARGET, "removed in %.3f s", (double)t / 1e6);
	is_int(flex_registry_get_loaded(reg, "example.com/tmpfs", &d, &error), -ENOENT,
	       "no longer served");
	ok(error && strstr(error, "was removed"), "%s", error);
	free(error);
	is_int(flex_prober_wait_settled(prober, 5 * USEC_PER_SEC), 0, "settled");

	uint64_t passes = stats().passes;
	run("/usr/bin/touch", inside, NULL, NULL);
	usleep(1200 * 1000);
	is_int(stats().passes - passes, 0, "the moved folder is no longer watched");

	/* The installer's own removal. */
	passes = stats().passes;
	is_int(flex_remove(plugins, "test", "other", NULL), 0, "flex_remove");
	ok(wait_state("test/other", FLEX_DRIVER_REMOVED, 0, 5 * USEC_PER_SEC) < LOAD_TARGET,
	   "removed driver reported removed");
	is_int(flex_prober_wait_settled(prober, 5 * USEC_PER_SEC), 0, "settled");
	is_int(stats().passes - passes, 1, "one pass for a removal");
	is_int(flex_remove(plugins, "test", "other", NULL), -ENOENT, "removing twice: ENOENT");
}

static bool wait_scan_error(uint64_t before, usec_t timeout)
{
	usec_t t0 = now_usec(CLOCK_MONOTONIC);
	while (stats().scan_errors <= before) {
		if (now_usec(CLOCK_MONOTONIC) - t0 > timeout)
			return false;
		usleep(5000);
	}
	return true;
}

static void test_scan_failure(void)
{
	_cleanup_free_ char *file = xasprintf("%s/not-a-dir", root);
	uint64_t g = gen_of("test/v1"), inits = stats().inits, errors = stats().scan_errors;

	write_file(file, "x");
	/* The plugin dir path becomes a file in one step: it cannot be read or re-created. */
	is_int(renameat2(AT_FDCWD, plugins, AT_FDCWD, file, RENAME_EXCHANGE), 0,
	       "plugin dir swapped with a file");
	ok(wait_scan_error(errors, 5 * USEC_PER_SEC), "the failed scan is counted");
	_cleanup_flex_driver_ FlexDriver *d = get("test/v1");
	ok(d && d->state == FLEX_DRIVER_LOADED && d->generation == g,
	   "cached drivers kept while the dir cannot be read");

	is_int(renameat2(AT_FDCWD, plugins, AT_FDCWD, file, RENAME_EXCHANGE), 0, "swapped back");
	is_int(flex_prober_wait_settled(prober, 5 * USEC_PER_SEC), 0, "settled");
	is_int(gen_of("test/v1"), g, "still the same snapshot");
	is_int(stats().inits - inits, 0, "no driver re-inited: their files did not change");
	unlink(file);
}

static void test_plugin_dir_deleted(void)
{
	struct stat st;

	run("/bin/rm", "-rf", plugins, NULL);
	ok(wait_state("test/v1", FLEX_DRIVER_REMOVED, 0, 5 * USEC_PER_SEC) != USEC_INFINITY,
	   "drivers removed with the plugin dir");
	is_int(flex_prober_wait_settled(prober, 5 * USEC_PER_SEC), 0, "settled");
	ok(stat(plugins, &st) == 0 && S_ISDIR(st.st_mode), "plugin dir re-created");
	_cleanup_flex_driver_ FlexDriver *d = get("test/storm");
	ok(d && d->state == FLEX_DRIVER_REMOVED, "every driver removed");

	/* Idle for longer than the rate limit: the first change is taken at once. */
	usleep(1100 * 1000);
	is_int(install("example.com", "again", "examples/flexvolume", "tmpfs"), 0,
	       "install into the re-created dir");
	usec_t t = wait_state("example.com/again", FLEX_DRIVER_LOADED, 0, 5 * USEC_PER_SEC);
	/* Under the 1 s rate limit a waiting prober would need; margin for a loaded machine. */
	ok(t < 1000 * USEC_PER_MSEC, "loaded in %.3f s: the new dir is watched, no wait when idle",
	   (double)t / 1e6);
}

int main(void)
{
	if (!mkdtemp(root)) {
		printf("Bail out! mkdtemp\n");
		return 1;
	}
	plugins = xasprintf("%s/kubelet-plugins/volume/exec", root);
	reg = flex_registry_new();

	test_start();
	test_install_update();
	test_unchanged_not_reinited();
	test_dot_names();
	test_bad_init();
	test_invalid_names();
	test_hang_does_not_block();
	test_not_supported_resets();
	test_storm();
	test_move_away();
	test_scan_failure();
	test_plugin_dir_deleted();

	is_int(flex_prober_wait_settled(prober, 5 * USEC_PER_SEC), 0, "settled at the end");
	is_int(atomic_load(&callbacks), flex_registry_generation(reg),
	       "on_change called once per publication");
	prober = flex_prober_free(prober);
	reg = flex_registry_free(reg);
	run("/bin/rm", "-rf", root, NULL);
	free(plugins);
	return tap_done();
}
