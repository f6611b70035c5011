/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "devnames.h"
#include "tap.h"

#define N_THREADS 8

static DevNames *shared;

static void *publish_many(void *arg)
{
	long t = (long)arg;
	char vol[64];
	long fails = 0;

	for (int i = 0; i < 9; i++) {
		_cleanup_free_ char *name = NULL;
		snprintf(vol, sizeof(vol), "vol-%ld-%d", t, i);
		if (devnames_allocate(shared, "node-race", vol, &name) < 0)
			fails++;
	}
	return (void *)fails;
}

/* Each thread publishes its own volume to one node with an attach limit of 5. */
static void *publish_limited(void *arg)
{
	_cleanup_free_ char *name = NULL;
	char vol[64];

	snprintf(vol, sizeof(vol), "vol-limited-%ld", (long)arg);
	return (void *)(long)devnames_allocate_max(shared, "node-limit", vol, 5, &name);
}

int main(void)
{
	_cleanup_(devnames_freep) DevNames *d = devnames_new(&(DevNamesConfig){
		.failed_avoid = 100 * USEC_PER_MSEC,
	});
	char *name = NULL;

	/* the list */
	is_str(devnames_name(0), "/dev/xvdba", "the first name is /dev/xvdba");
	is_str(devnames_name(25), "/dev/xvdbz", "the 26th is /dev/xvdbz");
	is_str(devnames_name(26), "/dev/xvdca", "then /dev/xvdca");
	is_str(devnames_name(52), "/dev/xvdda", "then /dev/xvdda");
	is_str(devnames_name(DEVNAMES_MAX - 1), "/dev/xvddx", "the last is /dev/xvddx");
	ok(devnames_name(DEVNAMES_MAX) == NULL, "no name past the end");
	int dups = 0;
	for (size_t i = 0; i < DEVNAMES_MAX; i++)
		for (size_t j = i + 1; j < DEVNAMES_MAX; j++)
			dups += strcmp(devnames_name(i), devnames_name(j)) == 0;
	is_int(dups, 0, "the %d names are distinct", DEVNAMES_MAX);

	/* allocation order and idempotency */
	is_int(devnames_allocate(d, "node-a", "vol-1", &name), 0, "allocate for vol-1");
	is_str(name, "/dev/xvdba", "vol-1 gets the first name");
	free(name);
	is_int(devnames_allocate(d, "node-a", "vol-2", &name), 0, "allocate for vol-2");
	is_str(name, "/dev/xvdbb", "vol-2 gets the second");
	free(name);
	is_int(devnames_allocate(d, "node-a", "vol-1", &name), 0, "vol-1 again");
	is_str(name, "/dev/xvdba", "a retried publish gets the same name");
	free(name);
	is_int(devnames_allocate(d, "node-b", "vol-3", &name), 0, "another node");
	is_str(name, "/dev/xvdba", "each node has its own list");
	free(name);
	is_int(devnames_count(d, "node-a"), 2, "node-a holds two names");
	is_int(devnames_lookup(d, "node-a", "vol-2", &name), 0, "lookup vol-2");
	is_str(name, "/dev/xvdbb", "lookup gives its name");
	free(name);
	name = NULL;
	is_int(devnames_lookup(d, "node-a", "vol-9", &name), -ENOENT, "lookup of no name: -ENOENT");
	ok(name == NULL, "and leaves the output alone");

	/* release frees the name for the next volume; the lowest free name comes first */
	is_int(devnames_release(d, "node-a", "vol-1"), 0, "release vol-1");
	is_int(devnames_release(d, "node-a", "vol-1"), -ENOENT, "a second release: -ENOENT");
	is_int(devnames_allocate(d, "node-a", "vol-4", &name), 0, "allocate for vol-4");
	is_str(name, "/dev/xvdba", "vol-4 reuses the freed first name");
	free(name);

	/* a failed name is avoided for the window */
	is_int(devnames_mark_failed(d, "node-a", "/dev/xvdbc"), 0, "mark /dev/xvdbc failed");
	is_int(devnames_mark_failed(d, "node-a", "/dev/sdz"), -EINVAL,
	       "marking a name not in the list: -EINVAL");
	is_int(devnames_allocate(d, "node-a", "vol-5", &name), 0, "allocate for vol-5");
	is_str(name, "/dev/xvdbd", "vol-5 skips the failed /dev/xvdbc");
	free(name);
	usleep(150 * 1000);
	is_int(devnames_allocate(d, "node-a", "vol-6", &name), 0, "allocate after the window");
	is_str(name, "/dev/xvdbc", "after the window /dev/xvdbc is used again");
	free(name);

	/* forget, then restore: a node's names as the pool records them; failure marks stay */
	is_int(devnames_allocate(d, "node-f", "vol-f1", &name), 0, "vol-f1 on node-f");
	free(name);
	is_int(devnames_allocate(d, "node-f", "vol-f2", &name), 0, "vol-f2 on node-f");
	free(name);
	is_int(devnames_mark_failed(d, "node-f", "/dev/xvdbc"), 0, "mark /dev/xvdbc failed");
	devnames_forget_node(d, "node-f");
	is_int(devnames_count(d, "node-f"), 0, "forgotten: the node holds no name");
	is_int(devnames_lookup(d, "node-f", "vol-f1", &name), -ENOENT, "not even vol-f1's");
	is_int(devnames_restore(d, "node-f", "vol-f2", "/dev/xvdbb"), 0,
	       "restore vol-f2's name (another process released vol-f1)");
	is_int(devnames_allocate(d, "node-f", "vol-f3", &name), 0, "allocate for vol-f3");
	is_str(name, "/dev/xvdba", "vol-f3 gets the name vol-f1 held");
	free(name);
	is_int(devnames_allocate(d, "node-f", "vol-f4", &name), 0, "allocate for vol-f4");
	is_str(name, "/dev/xvdbd", "the failure mark outlived the forget: /dev/xvdbc skipped");
	free(name);
	devnames_forget_node(d, "node-nobody"); /* a node never seen: nothing to do */
	is_int(devnames_count(d, "node-nobody"), 0, "forgetting an unknown node is harmless");

	/* a failed publish: mark, release, retry gets another name */
	is_int(devnames_allocate(d, "node-c", "vol-7", &name), 0, "vol-7 on node-c");
	is_str(name, "/dev/xvdba", "gets /dev/xvdba");
	is_int(devnames_mark_failed(d, "node-c", name), 0, "its attach failed");
	free(name);
	is_int(devnames_release(d, "node-c", "vol-7"), 0, "released");
	is_int(devnames_allocate(d, "node-c", "vol-7", &name), 0, "retry");
	is_str(name, "/dev/xvdbb", "the retry gets a different name");
	free(name);
	devnames_release(d, "node-c", "vol-7");

	/* failed names are the last resort, the oldest failure first */
	_cleanup_(devnames_freep) DevNames *full = devnames_new(NULL);
	char vol[64];
	int fails = 0;
	for (int i = 0; i < DEVNAMES_MAX; i++) {
		snprintf(vol, sizeof(vol), "vol-%d", i);
		fails += devnames_allocate(full, "n", vol, &name) < 0;
		free(name);
	}
	is_int(fails, 0, "all %d names allocated", DEVNAMES_MAX);
	name = NULL;
	is_int(devnames_allocate(full, "n", "vol-extra", &name), -ENOSPC,
	       "one more on a full node: -ENOSPC");
	ok(name == NULL, "and no name");
	devnames_release(full, "n", "vol-3");
	devnames_release(full, "n", "vol-7");
	devnames_mark_failed(full, "n", devnames_name(7));
	usleep(2000);
	devnames_mark_failed(full, "n", devnames_name(3));
	is_int(devnames_allocate(full, "n", "vol-x", &name), 0,
	       "with only failed names free, allocation still succeeds");
	is_str(name, devnames_name(7), "it takes the name that failed longest ago");
	free(name);
	is_int(devnames_allocate(full, "n", "vol-y", &name), 0, "and the next");
	is_str(name, devnames_name(3), "takes the other");
	free(name);

	/* the per-node limit */
	_cleanup_(devnames_freep) DevNames *lim = devnames_new(&(DevNamesConfig){
		.max_per_node = 2,
	});
	fails = 0;
	fails += devnames_allocate(lim, "n", "a", &name) < 0;
	free(name);
	fails += devnames_allocate(lim, "n", "b", &name) < 0;
	free(name);
	is_int(fails, 0, "two volumes within a limit of 2");
	is_int(devnames_allocate(lim, "n", "c", &name), -EMLINK, "a third: -EMLINK");
	is_int(devnames_allocate(lim, "n", "a", &name), 0,
	       "an already published volume still gets its name");
	is_str(name, "/dev/xvdba", "the same name");
	free(name);
	is_int(devnames_allocate(lim, "m", "c", &name), 0, "the limit is per node");
	free(name);

	/* a limit per call: the node's attach limit */
	_cleanup_(devnames_freep) DevNames *al = devnames_new(NULL);
	fails = 0;
	for (int i = 0; i < 3; i++) {
		snprintf(vol, sizeof(vol), "vol-%d", i);
		fails += devnames_allocate_max(al, "n", vol, 3, &name) < 0;
		free(name);
	}
	is_int(fails, 0, "three volumes within an attach limit of 3");
	name = NULL;
	is_int(devnames_allocate_max(al, "n", "vol-3", 3, &name), -EMLINK, "a fourth: -EMLINK");
	ok(name == NULL, "and no name");
	is_int(devnames_allocate_max(al, "n", "vol-1", 3, &name), 0,
	       "a published volume at the limit still gets its name");
	free(name);
	is_int(devnames_allocate_max(al, "n", "vol-3", 4, &name), 0, "a higher limit: success");
	free(name);
	is_int(devnames_count(al, "n"), 4, "four names held");

	/* restore after a restart */
	_cleanup_(devnames_freep) DevNames *r = devnames_new(NULL);
	is_int(devnames_restore(r, "n", "vol-a", "/dev/xvdbb"), 0, "restore vol-a at /dev/xvdbb");
	is_int(devnames_restore(r, "n", "vol-a", "/dev/xvdbb"), 0, "restoring it again is fine");
	is_int(devnames_restore(r, "n", "vol-b", "/dev/xvdbb"), -EEXIST,
	       "another volume at the same name: -EEXIST");
	is_int(devnames_restore(r, "n", "vol-a", "/dev/xvdbc"), -EEXIST,
	       "the same volume at another name: -EEXIST");
	is_int(devnames_restore(r, "n", "vol-c", "/dev/nvme0n1"), -EINVAL,
	       "a name not in the list: -EINVAL");
	is_int(devnames_allocate(r, "n", "vol-a", &name), 0, "allocate for the restored volume");
	is_str(name, "/dev/xvdbb", "gives the restored name");
	free(name);
	is_int(devnames_allocate(r, "n", "vol-d", &name), 0, "a new volume");
	is_str(name, "/dev/xvdba", "takes the first name the restore left free");
	free(name);
	is_int(devnames_allocate(r, "n", "vol-e", &name), 0, "the next new volume");
	is_str(name, "/dev/xvdbc", "skips the restored /dev/xvdbb");
	free(name);

	/* concurrent publishes to one node never share a name */
	_cleanup_(devnames_freep) DevNames *c = devnames_new(NULL);
	shared = c;
	pthread_t th[N_THREADS];
	for (long t = 0; t < N_THREADS; t++)
		pthread_create(&th[t], NULL, publish_many, (void *)t);
	long tf = 0;
	for (int t = 0; t < N_THREADS; t++) {
		void *ret;
		pthread_join(th[t], &ret);
		tf += (long)ret;
	}
	is_int(tf, 0, "%d concurrent publishes all got a name", N_THREADS * 9);
	is_int(devnames_count(c, "node-race"), N_THREADS * 9, "the node holds %d names",
	       N_THREADS * 9);
	int seen[DEVNAMES_MAX] = {}, shared_names = 0;
	for (long t = 0; t < N_THREADS; t++)
		for (int i = 0; i < 9; i++) {
			snprintf(vol, sizeof(vol), "vol-%ld-%d", t, i);
			if (devnames_lookup(c, "node-race", vol, &name) < 0)
				continue;
			for (size_t k = 0; k < DEVNAMES_MAX; k++)
				if (strcmp(devnames_name(k), name) == 0 && seen[k]++)
					shared_names++;
			free(name);
		}
	is_int(shared_names, 0, "no two volumes share a name");

	int n_ok = 0, n_limit = 0;
	for (long t = 0; t < N_THREADS; t++)
		pthread_create(&th[t], NULL, publish_limited, (void *)t);
	for (int t = 0; t < N_THREADS; t++) {
		void *ret;
		pthread_join(th[t], &ret);
		n_ok += (long)ret == 0;
		n_limit += (long)ret == -EMLINK;
	}
	is_int(n_ok, 5, "%d concurrent publishes against a limit of 5: 5 succeed", N_THREADS);
	is_int(n_limit, N_THREADS - 5, "the others get -EMLINK");
	is_int(devnames_count(c, "node-limit"), 5, "the node holds 5 names");

	return tap_done();
}
