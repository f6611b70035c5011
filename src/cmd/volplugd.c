/* SPDX-License-Identifier: Apache-2.0 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <grpc/grpc.h>

#include "alloc.h"
#include "daemon-config.h"
#include "driver.h"
#include "exec.h"
#include "failpoint.h"
#include "log.h"
#include "metrics-server.h"
#include "path-util.h"
#include "prober.h"
#include "server.h"
#include "strbuf.h"
#include "version.h"

static void *signal_thread(void *userdata)
{
	RpcServer *server = userdata;
	sigset_t set;
	int sig;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	for (;;) {
		if (sigwait(&set, &sig) != 0)
			continue;
		log_info("received %s: finishing in-flight calls, then exiting", strsignal(sig));
		rpc_server_stop(server);
		return NULL;
	}
}

/* Blocks the signals the daemon handles before any thread exists, so that every thread
 * (gRPC's included) inherits the mask and only the signal thread sees them. */
static void signals_block(void)
{
	sigset_t set;

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
}

/* The prober reports every publication here: the one place a driver's fate is logged. */
static void flex_changed(FlexDriver *drv, void *userdata)
{
	(void)userdata;
	switch (drv->state) {
	case FLEX_DRIVER_LOADED:
		log_info("Flexvolume driver %s loaded from %s (attach=%s, fsGroup=%s, "
			 "requiresFSResize=%s)",
			 drv->name, drv->exe, drv->capabilities.attach ? "true" : "false",
			 drv->capabilities.fs_group ? "true" : "false",
			 drv->capabilities.requires_fs_resize ? "true" : "false");
		break;
	case FLEX_DRIVER_FAILED:
		log_warning("Flexvolume driver %s is not usable: %s", drv->name,
			    drv->error ?: "failed");
		break;
	case FLEX_DRIVER_REMOVED:
		log_info("Flexvolume driver %s removed", drv->name);
		break;
	}
}

/* Flexvolume drivers: the registry the Flexvolume backend serves from, and the prober that
 * fills it from the plugin dir. */
typedef struct Flex {
	FlexRegistry *registry; /* NULL: Flexvolume off */
	FlexProber *prober;
	FlexCallConfig call;
} Flex;

/* Starts watching the plugin dir, before the backends are made (the Flexvolume backend serves
 * from the registry). Without a usable plugin dir the daemon serves on without Flexvolume
 * drivers: the other backends' volumes do not depend on them. */
static void flex_watch(const DaemonConfig *cfg, Flex *f)
{
	if (!*cfg->flexvolume_dir) {
		log_info("Flexvolume drivers off (--flexvolume-dir \"\")");
		return;
	}
	for (size_t i = 0; i < _FLEX_COMMAND_MAX; i++)
		f->call.timeout[i] = cfg->flexvolume_timeout[i];
	f->call.env = cfg->flexvolume_env;
	FlexProberConfig pc = {
		.dir = cfg->flexvolume_dir,
		.call = f->call,
		.on_change = flex_changed,
	};
	f->registry = flex_registry_new();
	int r = flex_prober_new(&pc, f->registry, &f->prober);
	if (r < 0) {
		log_warning_errno(
			r, "--flexvolume-dir %s: cannot watch it (%m): Flexvolume drivers off",
			cfg->flexvolume_dir);
		f->registry = flex_registry_free(f->registry);
	}
}

/* Loads the drivers: after the programs the daemon runs are recorded (their init calls are
 * such programs), before serving. */
static void flex_probe(Flex *f)
{
	if (!f->prober)
		return;
	int r = flex_prober_start(f->prober);
	if (r < 0) {
		log_warning_errno(r, "--flexvolume-dir %s: cannot watch it (%m): no driver loads",
				  flex_prober_dir(f->prober));
		return;
	}
	/* Drivers in place at start answer the first calls, which may be retries of unpublish. */
	if (flex_prober_wait_settled(f->prober, 5 * USEC_PER_SEC) < 0)
		log_info("Flexvolume drivers in %s still initialising", flex_prober_dir(f->prober));
	log_info("Flexvolume plugin dir %s watched", flex_prober_dir(f->prober));
}

static void flex_stop(Flex *f)
{
	f->prober = flex_prober_free(f->prober);
	f->registry = flex_registry_free(f->registry);
}

/* A previous volplugd died while programs it ran were still running: each is named once. */
static void leftover_killed(const ExecLeftover *l, void *userdata)
{
	(void)userdata;
	log_warning("killed %s (%zu process%s in process group %d), left running by a volplugd "
		    "that died%s",
		    l->program, l->n_processes, l->n_processes == 1 ? "" : "es", (int)l->pid,
		    l->gone ? "" : ": still there after 10 s");
}

/* The programs the daemon runs are recorded in the state its default backend names, where the
 * next volplugd looks for what a crash left running. Without the registry they still die with
 * the daemon; only what they leave in their process group would not be found. A backend that
 * runs no program here names none. */
static void exec_registry_start(Backend *b)
{
	const char *state = b->ops->state_dir ? b->ops->state_dir(b) : NULL;

	if (!state)
		return;
	_cleanup_free_ char *dir = xasprintf("%s/run/children", state);
	int r = mkdir_p(state, 0700);
	if (r >= 0)
		r = exec_registry_open(state, "run/children", leftover_killed, NULL);
	if (r == -ELOOP || r == -ENOTDIR)
		/* Someone put something else there: never follow it, never clean it. */
		log_error("%s: run/ or run/children is %s, not a directory of volplugd's own: "
			  "refusing to use it (nothing there is read or removed); what a crash "
			  "leaves running will not be found until it is replaced by a directory",
			  dir, r == -ELOOP ? "a symbolic link" : "no directory");
	else if (r < 0)
		log_warning_errno(r,
				  "%s: cannot record the programs volplugd runs (%m): what a "
				  "crash leaves running will not be found",
				  dir);
}

/* The backends the daemon serves: the type --backend names, and the companions it brings
 * (backend.h). */
static int backends_start(const DaemonConfig *cfg, Driver *driver, const Flex *flex)
{
	_cleanup_free_ char *error = NULL;
	BackendConfig bc = {
		.roles = (driver_has_controller(driver) ? BACKEND_ROLE_CONTROLLER : 0) |
			 (driver_has_node(driver) ? BACKEND_ROLE_NODE : 0),
		.node_id = cfg->node_id,
		.max_volumes_per_node = cfg->max_volumes_per_node,
		.zone = cfg->zone,
		.topology_labels = &cfg->topology_labels,
		.flex = flex->registry,
		.flex_call = &flex->call,
		.node_id_set = cfg->node_id_set,
		.zone_set = cfg->zone_set,
		.max_volumes_set = cfg->max_volumes_set,
		.driver_name = cfg->driver_name,
		.report = driver_backend_report,
	};

	int r = backends_new(cfg->backend, &bc, cfg->backend_settings, &driver->backends, &error);
	if (r < 0) {
		fprintf(stderr, "volplugd: %s\n", error ?: strerror(-r));
		return r;
	}
	return 0;
}

/* What the start line says of the backends: each one's own words. */
static char *backends_describe(Backend **backends)
{
	StrBuf b = {};

	for (Backend **p = backends; *p; p++) {
		_cleanup_free_ char *d = (*p)->ops->describe ? (*p)->ops->describe(*p) : NULL;
		strbuf_printf(&b, "%s%s", p == backends ? "" : "; ", d ?: (*p)->ops->name);
	}
	return strbuf_steal(&b);
}

static int health(void *userdata, char **ret_error)
{
	return driver_probe(userdata, ret_error);
}

/* /metrics and /healthz, when asked for: after the CSI socket, so that health is the socket's. */
static int metrics_start(const DaemonConfig *cfg, Driver *driver, MetricsServer **ret)
{
	_cleanup_free_ char *error = NULL;

	*ret = NULL;
	if (!cfg->metrics_address)
		return 0;
	MetricsServerConfig mc = {
		.address = cfg->metrics_address, .health = health, .userdata = driver};
	int r = metrics_server_new(&mc, ret, &error);
	if (r < 0) {
		fprintf(stderr, "volplugd: %s\n", error);
		return r;
	}
	log_info("metrics on http://%s/metrics, readiness on /healthz",
		 metrics_server_address(*ret));
	return 0;
}

/* Frees what run() set up, in the order it needs: the backends borrow the Flexvolume registry. */
static void run_done(Driver *driver, Flex *flex)
{
	driver_done(driver);
	backends_free(driver->backends);
	flex_stop(flex);
}

static int run(const DaemonConfig *cfg)
{
	Driver driver = {
		.mode = cfg->mode,
		.name = cfg->driver_name,
		.version = VOLPLUG_VERSION,
		.node_id = cfg->node_id,
		.coalesce_window = cfg->modify_coalesce_window,
		.fs_group_policy = cfg->fs_group_policy,
		.distributed = cfg->distributed,
	};
	RpcServer *server = NULL;
	MetricsServer *metrics = NULL;
	Flex flex = {};
	pthread_t sig_thread;
	size_t n_methods;
	int r;

	if (backend_type_find(cfg->backend)->flex_drivers)
		flex_watch(cfg, &flex);
	driver.flex = flex.registry;
	if (backends_start(cfg, &driver, &flex) < 0) {
		flex_stop(&flex);
		return 2;
	}
	Backend *def = backend_default(driver.backends);
	exec_registry_start(def);
	r = driver_init(&driver);
	if (r < 0) {
		run_done(&driver, &flex);
		return 2;
	}
	r = mkdir_parents(cfg->socket_path, 0755);
	if (r < 0) {
		fprintf(stderr, "volplugd: --endpoint %s: cannot create its directory: %s\n",
			cfg->endpoint, strerror(-r));
		run_done(&driver, &flex);
		return 2;
	}
	flex_probe(&flex);

	grpc_init();
	const RpcMethod *methods = csi_methods(cfg->mode, &n_methods);
	RpcServerConfig server_config = {
		.socket_path = cfg->socket_path,
		.socket_mode = cfg->socket_mode,
		.workers = cfg->workers,
		.methods = methods,
		.n_methods = n_methods,
		.userdata = &driver,
		.shutdown_grace = cfg->shutdown_grace,
	};
	r = rpc_server_new(&server_config, &server);
	if (r < 0) {
		if (r == -EADDRINUSE)
			fprintf(stderr,
				"volplugd: --endpoint %s: another server is listening there\n",
				cfg->endpoint);
		else
			fprintf(stderr, "volplugd: --endpoint %s: cannot listen: %s\n",
				cfg->endpoint, strerror(-r));
		grpc_shutdown();
		run_done(&driver, &flex);
		return r == -EADDRINUSE ? 1 : 2;
	}

	if (metrics_start(cfg, &driver, &metrics) < 0) {
		rpc_server_free(server);
		grpc_shutdown();
		run_done(&driver, &flex);
		return 2;
	}

	pthread_create(&sig_thread, NULL, signal_thread, server);
	_cleanup_free_ char *where = backends_describe(driver.backends);
	log_info("volplugd %s serving %s mode as %s on %s, %s", VOLPLUG_VERSION,
		 driver_mode_to_string(cfg->mode), cfg->driver_name, cfg->socket_path, where);
	rpc_server_run(server);
	metrics_server_free(metrics);
	rpc_server_free(server);
	log_info("stopped");
	grpc_shutdown();
	run_done(&driver, &flex);
	return 0;
}

int main(int argc, char **argv)
{
	_cleanup_free_ char *error = NULL;
	DaemonConfig cfg;

	if (daemon_config_parse(argc, argv, &cfg, &error) < 0) {
		fprintf(stderr, "volplugd: %s (see --help)\n", error);
		return 2;
	}
	if (cfg.action == DAEMON_HELP) {
		daemon_usage_print(stdout);
		daemon_config_done(&cfg);
		return 0;
	}
	if (cfg.action == DAEMON_VERSION) {
		printf("volplugd %s\n", VOLPLUG_VERSION);
		daemon_config_done(&cfg);
		return 0;
	}
	log_set_verbosity(cfg.verbosity);
	log_set_format(cfg.log_format);
	if (failpoints_init() < 0) {
		daemon_config_done(&cfg);
		return 2;
	}
	signals_block();
	int rc = run(&cfg);
	daemon_config_done(&cfg);
	return rc;
}
