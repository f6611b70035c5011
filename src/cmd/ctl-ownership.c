/* SPDX-License-Identifier: Apache-2.0 */
/* volplugctl ownership apply PATH --gid N: the fsGroup walk alone, to try and time it on a
 * real volume (no daemon needed). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "macro.h"
#include "ownership.h"
#include "parse-util.h"

static const char ownership_usage[] =
	"Usage: volplugctl ownership apply PATH --gid N [OPTIONS]\n"
	"\n"
	"Gives the tree at PATH to group N as Kubernetes' fsGroup does: group N, group\n"
	"read-write (read-only with --read-only), setgid directories; owners unchanged,\n"
	"mode bits only added, symlinks not followed, other mounts not entered.\n"
	"\n"
	"  --gid N                     the group (required)\n"
	"  --policy Always|OnRootMismatch\n"
	"                              OnRootMismatch skips the walk when PATH itself\n"
	"                              already has the group and bits (default Always)\n"
	"  --read-only                 add group read, not write\n"
	"\n"
	"Exits 1 when some entries could not be changed (the first few are listed).\n";

static void on_progress(const OwnershipReport *so_far, _unused_ void *userdata)
{
	fprintf(stderr, "volplugctl: ownership: %llu entries, %llu changed, %llu errors, %.1fs\n",
		(unsigned long long)so_far->entries, (unsigned long long)so_far->changed,
		(unsigned long long)so_far->errors, (double)so_far->elapsed / 1e6);
}

static void print_report(const Ctl *ctl, const char *path, gid_t gid, OwnershipPolicy policy,
			 bool read_only, OwnershipReport *rep)
{
	if (ctl->json) {
		json_t *o = json_object(), *list = json_array();
		char *save = NULL;
		for (char *l = rep->first_errors ? strtok_r(rep->first_errors, "\n", &save) : NULL;
		     l; l = strtok_r(NULL, "\n", &save))
			json_array_append_new(list, json_string(l));
		json_object_set_new(o, "path", json_string(path));
		json_object_set_new(o, "gid", json_integer(gid));
		json_object_set_new(o, "policy", json_string(ownership_policy_to_string(policy)));
		json_object_set_new(o, "readOnly", json_boolean(read_only));
		json_object_set_new(o, "skipped", json_boolean(rep->skipped));
		json_object_set_new(o, "entries", json_integer((json_int_t)rep->entries));
		json_object_set_new(o, "changed", json_integer((json_int_t)rep->changed));
		json_object_set_new(o, "errors", json_integer((json_int_t)rep->errors));
		json_object_set_new(o, "mountsSkipped", json_integer((json_int_t)rep->mounts));
		json_object_set_new(o, "elapsedUs", json_integer((json_int_t)rep->elapsed));
		json_object_set_new(o, "firstErrors", list);
		ctl_print(ctl, o);
		json_decref(o);
		return;
	}
	if (rep->first_errors)
		fputs(rep->first_errors, stdout);
	printf("path: %s\ngid: %u\npolicy: %s\nread-only: %s\nskipped: %s\n"
	       "entries: %llu\nchanged: %llu\nerrors: %llu\nmounts skipped: %llu\n"
	       "elapsed: %.6fs\n",
	       path, (unsigned)gid, ownership_policy_to_string(policy), read_only ? "yes" : "no",
	       rep->skipped ? "yes" : "no", (unsigned long long)rep->entries,
	       (unsigned long long)rep->changed, (unsigned long long)rep->errors,
	       (unsigned long long)rep->mounts, (double)rep->elapsed / 1e6);
}

int ctl_ownership(Ctl *ctl, int argc, char **argv)
{
	static const struct option options[] = {{"gid", required_argument, NULL, 'g'},
						{"policy", required_argument, NULL, 'p'},
						{"read-only", no_argument, NULL, 'r'},
						{"help", no_argument, NULL, 'h'},
						{}};
	OwnershipPolicy policy = OWNERSHIP_ALWAYS;
	OwnershipReport rep = {};
	bool read_only = false, have_gid = false;
	uint32_t gid = 0;
	int opt, r;

	if (argc >= 2 && strcmp(argv[1], "--help") == 0) {
		fputs(ownership_usage, stdout);
		return 0;
	}
	if (argc < 2 || strcmp(argv[1], "apply") != 0)
		return ctl_error(CTL_EXIT_USAGE, "usage: volplugctl ownership apply PATH --gid N "
						 "[--policy Always|OnRootMismatch] [--read-only]");
	argc--, argv++;
	optind = 0; /* re-initialize getopt: main() parsed in "+" mode, here options may follow PATH
		     */
	while ((opt = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
		switch (opt) {
		case 'g':
			if (parse_uint32(optarg, &gid) < 0 || gid == (uint32_t)OWNERSHIP_GID_NONE)
				return ctl_error(CTL_EXIT_USAGE, "--gid '%s': want a group number",
						 optarg);
			have_gid = true;
			break;
		case 'p':
			r = ownership_policy_from_string(optarg);
			if (r < 0)
				return ctl_error(CTL_EXIT_USAGE,
						 "--policy '%s': want Always or OnRootMismatch",
						 optarg);
			policy = r;
			break;
		case 'r':
			read_only = true;
			break;
		case 'h':
			fputs(ownership_usage, stdout);
			return 0;
		default:
			return ctl_error(CTL_EXIT_USAGE, "ownership: unknown option '%s'",
					 argv[optind - 1]);
		}
	}
	if (optind != argc - 1 || !have_gid)
		return ctl_error(CTL_EXIT_USAGE, "ownership apply: want one PATH and --gid N");
	const char *path = argv[optind];

	OwnershipProgress progress = {.func = on_progress};
	r = ownership_apply(path, gid, read_only, policy, &progress, &rep);
	if (r < 0)
		return ctl_error(CTL_EXIT_FAILED, "ownership %s: %s", path, strerror(-r));
	print_report(ctl, path, gid, policy, read_only, &rep);
	ownership_report_done(&rep);
	return rep.errors ? CTL_EXIT_FAILED : 0;
}
