/* SPDX-License-Identifier: Apache-2.0 */
/* EBS's type: its options on volplugd's command line, and how it serves. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "alloc.h"
#include "ebs-backend.h"
#include "error-util.h"
#include "time-util.h"

static const BackendOption options[] = {
	{"ec2-endpoint", "URL",
	 "controller: EC2's endpoint (default\n"
	 "https://ec2.REGION.amazonaws.com/; a VPC endpoint,\n"
	 "a test peer)"},
	{"extra-volume-tags", "K=V,...",
	 "controller: tags added to every volume and snapshot\n"
	 "it makes (repeatable)"},
	{"instance-type", "TYPE",
	 "node: e.g. m5.large (default: from the metadata\n"
	 "service): the attach limit when\n"
	 "--max-volumes-per-node is not given"},
	{"state-dir", "DIR", "node: node-local records (default /var/lib/volplug)"},
	{"device-dir", "DIR", "node: the volumes' by-id links (default\n/dev/disk/by-id)"},
	{"device-wait", "TIME",
	 "node: how long NodeStageVolume waits for an attached\n"
	 "volume's device to appear (default 10s)"},
	{},
};

static void *settings_new(void)
{
	EbsSettings *s = xnew0(EbsSettings, 1);

	s->device_wait = 10 * USEC_PER_SEC;
	return s;
}

static void settings_free(void *settings)
{
	EbsSettings *s = settings;

	free(s->state_dir);
	free(s->instance_type);
	free(s->device_dir);
	free(s->ec2_endpoint);
	strmap_done(&s->extra_tags);
	free(s);
}

static void set_string(char **field, const char *value)
{
	free(*field);
	*field = xstrdup(value);
}

/* "k=v,k=v": EC2's rules for tag keys and values, and none of the keys volplug keeps its own
 * record in. */
static int extra_tags_apply(EbsSettings *s, const char *arg, char **ret_error)
{
	_cleanup_free_ char *copy = xstrdup(arg);
	char *save = NULL;

	for (char *kv = strtok_r(copy, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(kv, '=');
		const char *why = NULL;
		if (!eq || eq == kv)
			why = "want KEY=VALUE";
		else {
			*eq = 0;
			if (strlen(kv) > 128 || strlen(eq + 1) > 256)
				why = "keys have at most 128 characters, values 256";
			else if (strncasecmp(kv, "aws:", 4) == 0)
				why = "keys starting with aws: are AWS's";
			else if (strncmp(kv, "volplug.io/", 11) == 0 ||
				 strcmp(kv, "CSIVolumeName") == 0 ||
				 strcmp(kv, "CSIVolumeSnapshotName") == 0)
				why = "volplug keeps its records under that key";
		}
		if (why)
			return errorf(ret_error, -EINVAL, "--extra-volume-tags '%s': %s", arg, why);
		strmap_set(&s->extra_tags, kv, eq + 1);
	}
	if (s->extra_tags.n > 40)
		return errorf(ret_error, -EINVAL,
			      "--extra-volume-tags: %zu tags, want at most 40 (EC2 takes 50 a "
			      "volume, volplug uses some)",
			      s->extra_tags.n);
	return 0;
}

static int settings_set(void *settings, const char *option, const char *value, char **ret_error)
{
	EbsSettings *s = settings;

	if (strcmp(option, "state-dir") == 0 || strcmp(option, "device-dir") == 0) {
		if (value[0] != '/')
			return -EINVAL;
		set_string(strcmp(option, "state-dir") == 0 ? &s->state_dir : &s->device_dir,
			   value);
		return 0;
	}
	if (strcmp(option, "instance-type") == 0) {
		if (!*value || strlen(value) > 64 || !strchr(value, '.'))
			return -EINVAL;
		set_string(&s->instance_type, value);
		return 0;
	}
	if (strcmp(option, "device-wait") == 0)
		return parse_duration(value, &s->device_wait);
	if (strcmp(option, "ec2-endpoint") == 0) {
		if (strncmp(value, "https://", 8) != 0 && strncmp(value, "http://", 7) != 0)
			return errorf(ret_error, -EINVAL,
				      "--ec2-endpoint '%s': want an http:// or https:// URL",
				      value);
		set_string(&s->ec2_endpoint, value);
		return 0;
	}
	if (strcmp(option, "extra-volume-tags") == 0)
		return extra_tags_apply(s, value, ret_error);
	return -ENOENT;
}

/* The instance metadata service as the AWS SDKs find it; "" when it is switched off. */
const char *ebs_imds_endpoint(void)
{
	const char *disabled = getenv("AWS_EC2_METADATA_DISABLED");

	if (disabled && strcasecmp(disabled, "true") == 0)
		return "";
	return getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT");
}

BACKEND_NEW(ebs);
BACKEND_TYPE(ebs) = {
	.name = "ebs",
	.heading = "EBS (--backend ebs): credentials and region as the AWS SDKs find them\n"
		   "(AWS_REGION, or the instance metadata service); a node never reads a\n"
		   "credential, and takes --node-id and --zone from the instance metadata\n"
		   "service (AWS_EC2_METADATA_SERVICE_ENDPOINT) when they are not given",
	.options = options,
	.settings_new = settings_new,
	.settings_set = settings_set,
	.settings_free = settings_free,
	.new = ebs_backend_new,
	.selectable = true,
	/* EBS calls wait for EC2 (seconds): more of them at once */
	.workers = 32,
};
