/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon-config.h"
#include "ebs-backend.h"
#include "log.h"
#include "ownership.h"
#include "pool-backend.h"
#include "tap.h"

static int parse(char **argv, DaemonConfig *c, char **error)
{
	int argc = 0;
	while (argv[argc])
		argc++;
	*error = NULL;
	return daemon_config_parse(argc, argv, c, error);
}

/* A backend's own settings, as its options set them. */
#define POOL(c) ((const PoolSettings *)backend_settings_get((c).backend_settings, "pool"))
#define EBS(c) ((const EbsSettings *)backend_settings_get((c).backend_settings, "ebs"))

#define ARGV(...) ((char *[]){"volplugd", __VA_ARGS__, NULL})

int main(void)
{
	DaemonConfig c;
	char *error;

	is_int(parse(ARGV("node", "--endpoint", "unix:///tmp/x.sock", "--node-id", "n7", "--pool",
			  "/tmp/p", "-v", "5", "--max-volumes-per-node", "16",
			  "--modify-coalesce-window", "500ms", "--socket-mode", "0660"),
		     &c, &error),
	       0, "full command line parses");
	is_int(c.mode, DRIVER_MODE_NODE, "mode");
	is_str(c.socket_path, "/tmp/x.sock", "socket path from endpoint");
	is_str(c.node_id, "n7", "node id");
	is_int(c.verbosity, 5, "verbosity");
	is_int(c.max_volumes_per_node, 16, "attach limit");
	is_int(c.modify_coalesce_window, 500000, "coalesce window");
	is_int(c.socket_mode, 0660, "socket mode");
	daemon_config_done(&c);

	is_int(parse(ARGV("--pool", "/tmp/p"), &c, &error), 0, "mode defaults");
	is_int(c.mode, DRIVER_MODE_ALL, "default mode is all");
	is_int(c.socket_mode, 0600, "default socket mode 0600");
	is_int(c.modify_coalesce_window, 2000000, "default window 2 s");
	is_int(c.fs_group_policy, OWNERSHIP_ON_ROOT_MISMATCH, "default ownership policy");
	ok(c.metrics_address == NULL, "metrics off by default");
	is_int(c.log_format, LOG_FORMAT_TEXT, "text logs by default");
	ok(POOL(c)->overprovision == 1, "default overprovision ratio 1: thick");
	is_int(POOL(c)->trim_interval, 600000000, "default trim interval 10 min");
	daemon_config_done(&c);

	is_int(parse(ARGV("--metrics-address", "127.0.0.1:9808", "--log-format", "json"), &c,
		     &error),
	       0, "metrics and log format flags parse");
	is_str(c.metrics_address, "127.0.0.1:9808", "metrics address");
	is_int(c.log_format, LOG_FORMAT_JSON, "json logs");
	daemon_config_done(&c);
	is_int(parse(ARGV("--metrics-address", "127.0.0.1:9808", "--metrics-address", ""), &c,
		     &error),
	       0, "an empty metrics address parses");
	ok(c.metrics_address == NULL, "and turns metrics off again");
	daemon_config_done(&c);

	is_int(parse(ARGV("--overprovision-ratio", "2.5", "--trim-interval", "0"), &c, &error), 0,
	       "thin, never trimmed");
	ok(POOL(c)->overprovision == 2.5, "overprovision ratio 2.5");
	is_int(POOL(c)->trim_interval, 0, "trim interval 0: never");
	daemon_config_done(&c);

	is_int(parse(ARGV("--fs-group-change-policy", "always"), &c, &error), 0,
	       "ownership policy parses, any case");
	is_int(c.fs_group_policy, OWNERSHIP_ALWAYS, "ownership policy Always");

	daemon_config_done(&c);

	is_int(parse(ARGV("--flexvolume-dir", "", "--flexvolume-timeout", "5s",
			  "--flexvolume-timeout", "mount=250ms"),
		     &c, &error),
	       0, "flexvolume flags parse");
	is_str(c.flexvolume_dir, "", "empty plugin dir: Flexvolume off");
	is_int(c.flexvolume_timeout[FLEX_MOUNT], 250000, "per-command deadline");
	is_int(c.flexvolume_timeout[FLEX_INIT], 5000000, "global deadline");
	daemon_config_done(&c);

	is_int(parse(ARGV("--zone=-z", "--flexvolume-dir", ""), &c, &error), 0,
	       "--zone=-z: a value starting with '-', given with '='");
	is_str(c.zone, "-z", "zone");
	daemon_config_done(&c);
	is_int(parse(ARGV("--pool", "/tmp/p"), &c, &error), 0, "flexvolume defaults");
	is_str(c.flexvolume_dir, "/usr/libexec/kubernetes/kubelet-plugins/volume/exec",
	       "default plugin dir");
	is_int(c.flexvolume_timeout[FLEX_MOUNT], 0, "no deadline set: the command's default");
	ok(!c.flexvolume_env, "drivers get volplugd's environment, as the kubelet's");
	daemon_config_done(&c);
	is_int(parse(ARGV("--flexvolume-env", "clean"), &c, &error), 0, "--flexvolume-env clean");
	ok(c.flexvolume_env && strcmp(c.flexvolume_env[1], "LC_ALL=C") == 0 && !c.flexvolume_env[2],
	   "PATH and LC_ALL=C only");
	daemon_config_done(&c);
	setenv("VOLPLUG_TEST_PROXY", "http://p:3128", 1);
	is_int(parse(ARGV("--flexvolume-env", "clean", "--flexvolume-env", "VOLPLUG_TEST_PROXY"),
		     &c, &error),
	       0, "--flexvolume-env NAME: the last one counts");
	ok(c.flexvolume_env && c.flexvolume_env[2] &&
		   strcmp(c.flexvolume_env[2], "VOLPLUG_TEST_PROXY=http://p:3128") == 0,
	   "the variable named, from volplugd's environment");
	daemon_config_done(&c);

	is_int(parse(ARGV("node", "--backend", "ebs", "--state-dir", "/var/lib/x",
			  "--instance-type", "m5.large", "--device-dir", "/tmp/by-id",
			  "--device-wait", "250ms", "--zone", "us-east-1a"),
		     &c, &error),
	       0, "EBS flags parse");
	is_str(c.backend, "ebs", "backend");
	is_str(EBS(c)->state_dir, "/var/lib/x", "state dir");
	is_str(EBS(c)->instance_type, "m5.large", "instance type");
	is_str(EBS(c)->device_dir, "/tmp/by-id", "device dir");
	is_int(EBS(c)->device_wait, 250000, "device wait");
	ok(c.zone_set && !c.node_id_set && !c.max_volumes_set,
	   "which of node id, zone and attach limit were given");
	daemon_config_done(&c);
	is_int(parse(ARGV("node"), &c, &error), 0, "EBS defaults");
	is_str(c.backend, "pool", "the pool by default");
	ok(!EBS(c)->state_dir, "the EBS node's own default state dir");
	ok(!EBS(c)->instance_type && !EBS(c)->device_dir,
	   "instance type and device dir: found, not set");
	is_int(EBS(c)->device_wait, 10000000, "default device wait 10 s");
	ok(!c.zone_set && !c.node_id_set && !c.max_volumes_set, "nothing given");
	daemon_config_done(&c);

	is_int(parse(ARGV("controller", "--backend", "ebs", "--ec2-endpoint",
			  "http://127.0.0.1:5000/", "--extra-volume-tags",
			  "cluster=ci,env=", "--extra-volume-tags", "team=storage"),
		     &c, &error),
	       0, "EBS controller flags parse");
	is_str(EBS(c)->ec2_endpoint, "http://127.0.0.1:5000/", "EC2 endpoint");
	is_int(EBS(c)->extra_tags.n, 3, "extra tags from every --extra-volume-tags");
	is_str(strmap_get(&EBS(c)->extra_tags, "cluster"), "ci", "tag cluster");
	is_str(strmap_get(&EBS(c)->extra_tags, "env"), "", "tag env, an empty value kept");
	is_str(strmap_get(&EBS(c)->extra_tags, "team"), "storage", "tag team");
	is_int(c.workers, 32, "32 workers with --backend ebs");
	daemon_config_done(&c);
	is_int(parse(ARGV("--backend", "ebs", "--workers", "4"), &c, &error), 0, "--workers 4");
	is_int(c.workers, 4, "workers given win over the EBS default");
	ok(!EBS(c)->ec2_endpoint && EBS(c)->extra_tags.n == 0,
	   "EC2's own endpoint, no extra tags by default");
	daemon_config_done(&c);
	is_int(parse(ARGV("--ec2-endpoint=-", "--extra-volume-tags=-k=v"), &c, &error), -EINVAL,
	       "--ec2-endpoint=-: a value starting with '-', then checked");
	is_str(error, "--ec2-endpoint '-': want an http:// or https:// URL",
	       "named as the endpoint's own fault");
	free(error);

	is_int(parse(ARGV("--topology-label", "topology.kubernetes.io/region=eu-1",
			  "--topology-label", "rack=", "--distributed"),
		     &c, &error),
	       0, "topology labels and --distributed parse");
	is_str(strmap_get(&c.topology_labels, "topology.kubernetes.io/region"), "eu-1",
	       "a prefixed key");
	is_str(strmap_get(&c.topology_labels, "rack"), "", "an empty value");
	ok(c.distributed, "distributed");
	daemon_config_done(&c);
	is_int(parse(ARGV("--pool", "/tmp/p"), &c, &error), 0, "topology defaults");
	ok(c.topology_labels.n == 0 && !c.distributed, "no labels, not distributed");
	ok(!POOL(c)->init, "a lost pool is not made again by default");
	daemon_config_done(&c);
	is_int(parse(ARGV("--pool", "/tmp/p", "--pool-init"), &c, &error), 0, "--pool-init");
	ok(POOL(c)->init, "a new pool where one was lost, when asked");
	daemon_config_done(&c);

	const struct {
		char **argv;
		const char *error;
	} bad[] = {
		{ARGV("--backend", "nfs"), "--backend 'nfs': want pool or ebs"},
		/* flex serves beside the pool only: no --backend of its own */
		{ARGV("--backend", "flex"), "--backend 'flex': want pool or ebs"},
		/* a backend's option is checked though another backend runs */
		{ARGV("--backend", "ebs", "--pool-capacity", "lots"),
		 "--pool-capacity 'lots': invalid value"},
		{ARGV("--device-wait", "soon", "--backend", "pool"),
		 "--device-wait 'soon': invalid value"},
		{ARGV("--state-dir", "rel"), "--state-dir 'rel': invalid value"},
		{ARGV("--device-dir", "rel"), "--device-dir 'rel': invalid value"},
		{ARGV("--instance-type", "large"), "--instance-type 'large': invalid value"},
		{ARGV("--device-wait", "soon"), "--device-wait 'soon': invalid value"},
		{ARGV("--topology-label", "rack"), "--topology-label 'rack': want KEY=VALUE in "
						   "Kubernetes label syntax ([prefix/]name, "
						   "a value of at most 63 characters)"},
		{ARGV("--topology-label=-rack=1"),
		 "--topology-label '-rack=1': want KEY=VALUE in Kubernetes label syntax "
		 "([prefix/]name, a value of at most 63 characters)"},
		{ARGV("--topology-label", "a_b/rack=1"),
		 "--topology-label 'a_b/rack=1': want KEY=VALUE in Kubernetes label syntax "
		 "([prefix/]name, a value of at most 63 characters)"},
		{ARGV("--topology-label", "rack=a b"),
		 "--topology-label 'rack=a b': want KEY=VALUE in Kubernetes label syntax "
		 "([prefix/]name, a value of at most 63 characters)"},
		{ARGV("--topology-label", "topology.volplug.io/node=n2"),
		 "--topology-label 'topology.volplug.io/node=n2': topology.volplug.io/node comes "
		 "from --node-id"},
		{ARGV("--topology-label", "topology.volplug.io/zone=z"),
		 "--topology-label 'topology.volplug.io/zone=z': topology.volplug.io/zone comes "
		 "from "
		 "--zone"},
		{ARGV("--flexvolume-timeout", "mnt=5s"),
		 "--flexvolume-timeout 'mnt=5s': unknown command 'mnt'"},
		{ARGV("--flexvolume-timeout", "0"), "--flexvolume-timeout '0': invalid value"},
		{ARGV("--flexvolume-dir", "relative"),
		 "--flexvolume-dir 'relative': invalid value"},
		{ARGV("everything"), "unknown mode 'everything': want all, controller or node"},
		{ARGV("--endpoint", "tcp://1.2.3.4:5"),
		 "--endpoint 'tcp://1.2.3.4:5': want unix:///absolute/path (at most 107 bytes)"},
		{ARGV("--workers", "0"), "--workers '0': out of range"},
		{ARGV("--max-volumes-per-node", "x"), "--max-volumes-per-node 'x': invalid value"},
		{ARGV("--bogus"), "unknown option '--bogus'"},
		{ARGV("--pool"), "--pool: missing its value"},
		{ARGV("-v"), "--verbosity: missing its value"},
		{ARGV("-v", "--pool", "/tmp/p"),
		 "--verbosity: missing its value (next is the option '--pool'; --verbosity=VALUE "
		 "takes a value starting with '-')"},
		{ARGV("--node-id", "-v", "3"),
		 "--node-id: missing its value (next is the option '-v'; --node-id=VALUE takes a "
		 "value starting with '-')"},
		{ARGV("--driver-name=-bad-"),
		 "--driver-name '-bad-': want at most 63 characters of [a-zA-Z0-9.-], starting and "
		 "ending alphanumeric"},
		{ARGV("all", "extra"), "unexpected argument 'extra'"},
		{ARGV("--pool-capacity", "lots"), "--pool-capacity 'lots': invalid value"},
		{ARGV("--overprovision-ratio", "0.5"), "--overprovision-ratio '0.5': out of range"},
		{ARGV("--overprovision-ratio", "1e3"),
		 "--overprovision-ratio '1e3': invalid value"},
		{ARGV("--overprovision-ratio", "nan"),
		 "--overprovision-ratio 'nan': invalid value"},
		{ARGV("--overprovision-ratio", "2x"), "--overprovision-ratio '2x': invalid value"},
		{ARGV("--trim-interval", "often"), "--trim-interval 'often': invalid value"},
		{ARGV("--fs-group-change-policy", "Sometimes"),
		 "--fs-group-change-policy 'Sometimes': invalid value"},
		{ARGV("--flexvolume-env", "HOME PATH"),
		 "--flexvolume-env 'HOME PATH': want inherit, clean or a comma-separated list of "
		 "variable names ('HOME PATH' is none)"},
		{ARGV("--log-format", "xml"), "--log-format 'xml': invalid value"},
		{ARGV("--ec2-endpoint", "ec2.amazonaws.com"),
		 "--ec2-endpoint 'ec2.amazonaws.com': want an http:// or https:// URL"},
		{ARGV("--extra-volume-tags", "cluster"),
		 "--extra-volume-tags 'cluster': want KEY=VALUE"},
		{ARGV("--extra-volume-tags", "a=1,aws:x=2"),
		 "--extra-volume-tags 'a=1,aws:x=2': keys starting with aws: are AWS's"},
		{ARGV("--extra-volume-tags", "volplug.io/driver=x"),
		 "--extra-volume-tags 'volplug.io/driver=x': volplug keeps its records under that "
		 "key"},
		{ARGV("--ec2-endpoint"), "--ec2-endpoint: missing its value"},
		{ARGV("--extra-volume-tags"), "--extra-volume-tags: missing its value"},
		{ARGV("--backend", "ebs", "--ec2-endpoint", "--extra-volume-tags", "a=b"),
		 "--ec2-endpoint: missing its value (next is the option '--extra-volume-tags'; "
		 "--ec2-endpoint=VALUE takes a value starting with '-')"},
		{ARGV("--extra-volume-tags", "-v", "3"),
		 "--extra-volume-tags: missing its value (next is the option '-v'; "
		 "--extra-volume-tags=VALUE takes a value starting with '-')"},

	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		is_int(parse(bad[i].argv, &c, &error), -EINVAL, "rejects %s", bad[i].argv[1]);
		is_str(error, bad[i].error, "message for %s", bad[i].argv[1]);
		free(error);
	}

	/* A backend's option with another backend selected: accepted, kept, not used. */
	is_int(parse(ARGV("--backend", "ebs", "--pool", "/tmp/p", "--pool-init"), &c, &error), 0,
	       "the pool's options with --backend ebs parse");
	is_str(POOL(c)->path, "/tmp/p", "and are the pool's settings");
	daemon_config_done(&c);

	/* --help: each backend's options under its heading, from its type's table. */
	char *help = NULL;
	size_t help_size = 0;
	FILE *f = open_memstream(&help, &help_size);
	daemon_usage_print(f);
	fclose(f);
	const char *pool_head = strstr(help, "\nThe pool (--backend pool, the default)");
	const char *ebs_head = strstr(help, "\nEBS (--backend ebs)");
	const char *capacity = strstr(help, "\n  --pool-capacity SIZE            capacity of");
	const char *endpoint = strstr(help, "\n  --ec2-endpoint URL              controller:");
	ok(pool_head && capacity && capacity > pool_head && (!ebs_head || capacity < ebs_head),
	   "--pool-capacity under the pool's heading");
	ok(ebs_head && endpoint && endpoint > ebs_head, "--ec2-endpoint under EBS's heading");
	ok(strstr(help, "\n  --backend pool or ebs") != NULL, "--backend lists the types");
	ok(strstr(help, "\n  --pool-init                     make a new, empty pool in DIR") &&
		   strstr(help, "\n                                  says a pool was there"),
	   "a flag without a value, its help continued in the column");
	free(help);
	return tap_done();
}
