/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "call.h"
#include "driver.h"
#include "strmap.h"
#include "time-util.h"

typedef struct DaemonConfig {
	DriverMode mode;
	char *endpoint;
	char *socket_path; /* derived from endpoint */
	mode_t socket_mode;
	char *node_id;
	char *driver_name;
	char *backend; /* the type --backend names: it and its companions serve */
	BackendSettings *backend_settings;	     /* every type's options (backend.h) */
	bool node_id_set, zone_set, max_volumes_set; /* given on the command line */
	char *zone;
	Strmap topology_labels; /* --topology-label KEY=VALUE */
	bool distributed;
	uint32_t max_volumes_per_node;
	unsigned workers;
	int verbosity;
	int log_format;	       /* LogFormat */
	char *metrics_address; /* "HOST:PORT" of /metrics and /healthz; NULL: off */
	usec_t modify_coalesce_window;
	usec_t shutdown_grace;
	char *flexvolume_dir; /* "": Flexvolume off */
	int fs_group_policy;  /* OwnershipPolicy */
	bool workers_set;
	usec_t flexvolume_timeout[_FLEX_COMMAND_MAX]; /* 0: the command's default */
	char **flexvolume_env; /* a strv (flex_env_parse()); NULL: volplugd's own */
	enum {
		DAEMON_RUN,
		DAEMON_HELP,
		DAEMON_VERSION
	} action;
} DaemonConfig;

/* Parses volplugd's command line into *ret (which it initialises). On a bad flag returns
 * -EINVAL and writes one line naming it to *ret_error (malloc'ed). */
int daemon_config_parse(int argc, char **argv, DaemonConfig *ret, char **ret_error);
void daemon_config_done(DaemonConfig *c);

/* Prints the --help text: the generic options, then each backend type's under its heading. */
void daemon_usage_print(FILE *f);
