/* SPDX-License-Identifier: Apache-2.0 */
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <grpc/grpc.h>

#include "alloc.h"
#include "daemon-config.h"
#include "driver.h"
#include "failpoint.h"
#include "log.h"
#include "server.h"
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

static int mkdir_parents(const char *path)
{
	_cleanup_free_ char *copy = xstrdup(path);
	char *dir = dirname(copy);
	struct stat st;

	if (stat(dir, &st) == 0)
		return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
	int r = mkdir_parents(dir);
	if (r < 0)
		return r;
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return negative_errno();
	return 0;
}

static LogLevel level_for_verbosity(int v)
{
	return v >= 4 ? LOG_LEVEL_DEBUG : v >= 1 ? LOG_LEVEL_INFO : LOG_LEVEL_WARNING;
}

static int run(const DaemonConfig *cfg)
{
	Driver driver = {
		.mode = cfg->mode,
		.name = cfg->driver_name,
		.version = VOLPLUG_VERSION,
		.node_id = cfg->node_id,
		.zone = cfg->zone,
		.max_volumes_per_node = cfg->max_volumes_per_node,
		.coalesce_window = cfg->modify_coalesce_window,
	};
	PoolConfig pool_config = {
		.path = cfg->pool,
		.capacity = cfg->pool_capacity,
		.zone = cfg->zone,
	};
	RpcServer *server = NULL;
	pthread_t sig_thread;
	size_t n_methods;
	int r;

	r = pool_open(&pool_config, &driver.pool);
	if (r < 0) {
		fprintf(stderr, "volplugd: --pool %s: cannot use it as a pool: %s\n", cfg->pool,
			strerror(-r));
		return 2;
	}
	r = driver_init(&driver);
	if (r < 0) {
		pool_close(driver.pool);
		return 2;
	}
	r = mkdir_parents(cfg->socket_path);
	if (r < 0) {
		fprintf(stderr, "volplugd: --endpoint %s: cannot create its directory: %s\n",
			cfg->endpoint, strerror(-r));
		pool_close(driver.pool);
		return 2;
	}

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
		pool_close(driver.pool);
		return r == -EADDRINUSE ? 1 : 2;
	}

	pthread_create(&sig_thread, NULL, signal_thread, server);
	log_info("volplugd %s serving %s mode as %s on %s, node %s, pool %s", VOLPLUG_VERSION,
		 driver_mode_to_string(cfg->mode), cfg->driver_name, cfg->socket_path, cfg->node_id,
		 cfg->pool);
	rpc_server_run(server);
	rpc_server_free(server);
	log_info("stopped");
	grpc_shutdown();
	driver_done(&driver);
	pool_close(driver.pool);
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
		fputs(daemon_usage, stdout);
		daemon_config_done(&cfg);
		return 0;
	}
	if (cfg.action == DAEMON_VERSION) {
		printf("volplugd %s\n", VOLPLUG_VERSION);
		daemon_config_done(&cfg);
		return 0;
	}
	log_set_max_level(level_for_verbosity(cfg.verbosity));
	if (failpoints_init() < 0) {
		daemon_config_done(&cfg);
		return 2;
	}
	signals_block();
	int rc = run(&cfg);
	daemon_config_done(&cfg);
	return rc;
}
