/* SPDX-License-Identifier: Apache-2.0 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "devnames.h"
#include "hashmap.h"
#include "log.h"

/* "/dev/xvd" + first letter 'b'.. + second letter 'a'..'z', DEVNAMES_MAX names in all: the
 * last row stops at 'x'. */
#define NAME_PREFIX "/dev/xvd"
#define FIRST_LETTER 'b'

static char names[DEVNAMES_MAX][sizeof(NAME_PREFIX) + 2];
static pthread_once_t names_once = PTHREAD_ONCE_INIT;

static void names_init(void)
{
	for (size_t i = 0; i < DEVNAMES_MAX; i++)
		snprintf(names[i], sizeof(names[i]), NAME_PREFIX "%c%c",
			 (char)(FIRST_LETTER + i / 26), (char)('a' + i % 26));
}

const char *devnames_name(size_t i)
{
	if (i >= DEVNAMES_MAX)
		return NULL;
	pthread_once(&names_once, names_init);
	return names[i];
}

static int name_index(const char *name)
{
	for (size_t i = 0; i < DEVNAMES_MAX; i++)
		if (strcmp(devnames_name(i), name) == 0)
			return (int)i;
	return -EINVAL;
}

typedef struct Node {
	char *volume[DEVNAMES_MAX];	/* the volume holding each name, or NULL */
	usec_t failed_at[DEVNAMES_MAX]; /* CLOCK_MONOTONIC of the last failure, 0: none */
	size_t n_used;
} Node;

struct DevNames {
	usec_t failed_avoid;
	size_t max_per_node;

	pthread_mutex_t lock;
	Hashmap *nodes; /* guarded by lock: node id -> Node */
};

static void node_free(void *p)
{
	Node *n = p;
	for (size_t i = 0; i < DEVNAMES_MAX; i++)
		free(n->volume[i]);
	free(n);
}

DevNames *devnames_new(const DevNamesConfig *config)
{
	DevNames *d = xnew0(DevNames, 1);

	d->failed_avoid = config && config->failed_avoid ? config->failed_avoid
							 : DEVNAMES_FAILED_AVOID_DEFAULT;
	d->max_per_node = config && config->max_per_node && config->max_per_node < DEVNAMES_MAX
				  ? config->max_per_node
				  : DEVNAMES_MAX;
	pthread_mutex_init(&d->lock, NULL);
	d->nodes = hashmap_new(node_free);
	pthread_once(&names_once, names_init);
	return d;
}

void devnames_free(DevNames *d)
{
	if (!d)
		return;
	hashmap_free(d->nodes);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

/* The rest is called with the lock held. */

static Node *node_find(DevNames *d, const char *id)
{
	return hashmap_get(d->nodes, id);
}

static Node *node_get(DevNames *d, const char *id)
{
	Node *n = node_find(d, id);
	if (n)
		return n;
	n = xnew0(Node, 1);
	(void)hashmap_put(d->nodes, id, n); /* cannot fail: id is not there */
	return n;
}

static bool failure_live(const DevNames *d, const Node *n, size_t i, usec_t now)
{
	return n->failed_at[i] != 0 && now - n->failed_at[i] < d->failed_avoid;
}

/* Drops node id (n) when it holds no name and remembers no live failure, so the table does not
 * grow with every node ever seen. */
static void node_maybe_drop(DevNames *d, const char *id, Node *n)
{
	usec_t now = now_usec(CLOCK_MONOTONIC);

	if (n->n_used > 0)
		return;
	for (size_t i = 0; i < DEVNAMES_MAX; i++)
		if (failure_live(d, n, i, now))
			return;
	node_free(hashmap_remove(d->nodes, id));
}

static int volume_index(const Node *n, const char *volume)
{
	for (size_t i = 0; i < DEVNAMES_MAX; i++)
		if (n->volume[i] && strcmp(n->volume[i], volume) == 0)
			return (int)i;
	return -ENOENT;
}

/* The first free name not failed recently; else the free name whose failure is oldest. */
static int pick_free(const DevNames *d, const Node *n)
{
	usec_t now = now_usec(CLOCK_MONOTONIC);
	int fallback = -ENOSPC;

	for (size_t i = 0; i < DEVNAMES_MAX; i++) {
		if (n->volume[i])
			continue;
		if (!failure_live(d, n, i, now))
			return (int)i;
		if (fallback < 0 || n->failed_at[i] < n->failed_at[fallback])
			fallback = (int)i;
	}
	return fallback;
}

int devnames_allocate_max(DevNames *d, const char *node, const char *volume, size_t max,
			  char **ret_name)
{
	int i;

	if (max == 0 || max > d->max_per_node)
		max = d->max_per_node;

	pthread_mutex_lock(&d->lock);
	Node *n = node_get(d, node);
	i = volume_index(n, volume);
	if (i < 0) {
		if (n->n_used >= max && n->n_used < DEVNAMES_MAX)
			i = -EMLINK;
		else
			i = pick_free(d, n);
		if (i < 0) {
			node_maybe_drop(d, node, n);
			pthread_mutex_unlock(&d->lock);
			log_debug_errno(i, "no device name on node %s for volume %s: %m", node,
					volume);
			return i;
		}
		n->volume[i] = xstrdup(volume);
		n->n_used++;
	}
	pthread_mutex_unlock(&d->lock);
	*ret_name = xstrdup(devnames_name((size_t)i));
	return 0;
}

int devnames_allocate(DevNames *d, const char *node, const char *volume, char **ret_name)
{
	return devnames_allocate_max(d, node, volume, 0, ret_name);
}

int devnames_release(DevNames *d, const char *node, const char *volume)
{
	int r = -ENOENT;

	pthread_mutex_lock(&d->lock);
	Node *n = node_find(d, node);
	if (n) {
		int i = volume_index(n, volume);
		if (i >= 0) {
			free(n->volume[i]);
			n->volume[i] = NULL;
			n->n_used--;
			r = 0;
		}
		node_maybe_drop(d, node, n);
	}
	pthread_mutex_unlock(&d->lock);
	return r;
}

int devnames_mark_failed(DevNames *d, const char *node, const char *name)
{
	int i = name_index(name);
	if (i < 0)
		return i;

	pthread_mutex_lock(&d->lock);
	Node *n = node_get(d, node);
	/* 0 means "never failed": a monotonic clock this young is not worth a special case. */
	n->failed_at[i] = MAX(now_usec(CLOCK_MONOTONIC), (usec_t)1);
	pthread_mutex_unlock(&d->lock);
	return 0;
}

int devnames_restore(DevNames *d, const char *node, const char *volume, const char *name)
{
	int i = name_index(name), r = 0;
	if (i < 0)
		return i;

	pthread_mutex_lock(&d->lock);
	Node *n = node_get(d, node);
	int held = volume_index(n, volume);
	if (held == i)
		r = 0;
	else if (held >= 0 || n->volume[i])
		r = -EEXIST;
	else {
		n->volume[i] = xstrdup(volume);
		n->n_used++;
	}
	node_maybe_drop(d, node, n);
	pthread_mutex_unlock(&d->lock);
	return r;
}

void devnames_forget_node(DevNames *d, const char *node)
{
	pthread_mutex_lock(&d->lock);
	Node *n = node_find(d, node);
	if (n) {
		for (size_t i = 0; i < DEVNAMES_MAX; i++) {
			free(n->volume[i]);
			n->volume[i] = NULL;
		}
		n->n_used = 0;
		node_maybe_drop(d, node, n);
	}
	pthread_mutex_unlock(&d->lock);
}

int devnames_lookup(DevNames *d, const char *node, const char *volume, char **ret_name)
{
	int i = -ENOENT;

	pthread_mutex_lock(&d->lock);
	Node *n = node_find(d, node);
	if (n)
		i = volume_index(n, volume);
	pthread_mutex_unlock(&d->lock);
	if (i < 0)
		return i;
	*ret_name = xstrdup(devnames_name((size_t)i));
	return 0;
}

size_t devnames_count(DevNames *d, const char *node)
{
	size_t c = 0;

	pthread_mutex_lock(&d->lock);
	Node *n = node_find(d, node);
	if (n)
		c = n->n_used;
	pthread_mutex_unlock(&d->lock);
	return c;
}
