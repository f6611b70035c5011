/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "blockfs.h"
#include "ebs-limits.h"
#include "ebs-node.h"
#include "error-util.h"
#include "fileio.h"
#include "imds.h"
#include "log.h"
#include "path-util.h"
#include "pinned-path.h"

#define IMDS_TIMEOUT_DEFAULT (10 * USEC_PER_SEC)
#define DEVICE_POLL (100 * USEC_PER_MSEC)
#define NODE_ID_MAX 128
#define LIMIT_REFRESH_DEFAULT (5 * USEC_PER_SEC)
#define LIMIT_IMDS_TIMEOUT (2 * USEC_PER_SEC)
#define NO_IMDS_FLAGS "--node-id, --zone and --instance-type (or --max-volumes-per-node)"

struct EbsNode {
	char *node_id, *zone, *instance_type;
	uint32_t max_volumes_flag; /* --max-volumes-per-node: fixed; 0: counted */
	Imds *imds;		   /* asked again for ENIs and mappings; NULL: never */
	usec_t limit_refresh;
	/* limit_lock guards the counted limit: one caller counts, the others wait for its
	 * answer, so a burst of NodeGetInfo makes at most one round of metadata calls. */
	pthread_mutex_t limit_lock;
	EbsInstanceShape shape; /* the ENIs and mapped volumes last learnt */
	uint32_t limit;		/* the limit last counted */
	usec_t limit_at;	/* when (CLOCK_MONOTONIC); 0: never */
	char *dir;		/* STATE/ebs */
	int volumes_fd, tmp_fd; /* its volumes/ and tmp/ */
	char *boot_id;		/* this boot: records of another are void */
	char *by_id, *sys;	/* where devices are looked for (NULL: the machine's) */
	EbsDeviceDirs devices;	/* pointing at the two above */
	usec_t device_wait;
	BlockNode block;
};

/* ---- identity ---- */

/* How many lines of a metadata listing start with prefix ("" counts every line). */
static unsigned count_lines(const char *text, const char *prefix)
{
	unsigned n = 0;

	for (const char *p = text; *p;) {
		size_t len = strcspn(p, "\n");
		if (len > 0 && strncmp(p, prefix, strlen(prefix)) == 0)
			n++;
		p += len;
		p += *p == '\n';
	}
	return n;
}

/* The ENIs and the EBS volumes of the block device mapping besides the root one: both take
 * attachment slots. Best effort: without them the limit counts one ENI and no other volume. */
static void imds_slots(Imds *m, usec_t deadline, EbsInstanceShape *inst)
{
	_cleanup_free_ char *macs = NULL, *mapping = NULL;

	if (imds_get(m, "network/interfaces/macs/", deadline, &macs, NULL) == 0)
		inst->enis = count_lines(macs, "");
	if (imds_get(m, "block-device-mapping/", deadline, &mapping, NULL) == 0)
		inst->extra_mappings = count_lines(mapping, "ebs");
}

static int imds_learn(EbsNode *n, const EbsNodeConfig *c, char **ret_error)
{
	static const struct {
		const char *path;
		size_t field;
	} items[] = {
		{"instance-id", offsetof(EbsNode, node_id)},
		{"placement/availability-zone", offsetof(EbsNode, zone)},
		{"instance-type", offsetof(EbsNode, instance_type)},
	};
	usec_t deadline = now_usec(CLOCK_MONOTONIC) + (c->imds_timeout ?: IMDS_TIMEOUT_DEFAULT);
	Imds *m = n->imds = imds_new(&(ImdsConfig){.endpoint = c->imds_endpoint});

	for (size_t i = 0; i < ELEMENTSOF(items); i++) {
		char **field = (char **)((char *)n + items[i].field);
		_cleanup_free_ char *error = NULL;
		if (*field || (i == 2 && c->max_volumes))
			continue;
		int r = imds_get(m, items[i].path, deadline, field, &error);
		if (r < 0)
			return errorf(ret_error, r,
				      "the instance metadata service at %s did not say %s (%s): "
				      "where there is none, give " NO_IMDS_FLAGS,
				      imds_endpoint(m), items[i].path, error ?: strerror(-r));
	}
	if (!c->max_volumes)
		imds_slots(m, deadline, &n->shape);
	return 0;
}

/* What the flags leave out, from the metadata service; then the attach limit. */
static int identity_learn(EbsNode *n, const EbsNodeConfig *c, char **ret_error)
{
	int r;

	n->node_id = c->node_id ? xstrdup(c->node_id) : NULL;
	n->zone = c->zone ? xstrdup(c->zone) : NULL;
	n->instance_type = c->instance_type ? xstrdup(c->instance_type) : NULL;
	bool complete = n->node_id && n->zone && (n->instance_type || c->max_volumes);
	if (!complete && c->imds_endpoint && !*c->imds_endpoint)
		return errorf(ret_error, -EINVAL,
			      "no instance metadata service: give " NO_IMDS_FLAGS);
	if (!complete && (r = imds_learn(n, c, ret_error)) < 0)
		return r;
	if (strlen(n->node_id) > NODE_ID_MAX || !*n->zone)
		return errorf(ret_error, -EINVAL, "node id '%s' or zone '%s' is not usable",
			      n->node_id, n->zone);
	n->max_volumes_flag = c->max_volumes;
	if (n->max_volumes_flag) {
		imds_freep(&n->imds);
		return 0;
	}
	n->shape.type = n->instance_type;
	if (ebs_attach_limit(&n->shape, &n->limit) < 0)
		return errorf(ret_error, -EINVAL,
			      "instance type '%s' is not one (want family.size, e.g. m5.large)",
			      n->instance_type);
	return 0;
}

/* ---- the state directory ---- */

/* dir_fd/name, a directory made when missing, opened beneath dir_fd without following a
 * symlink (-ELOOP for one, -ENOTDIR for anything else that is not a directory). */
static int open_dir(int dir_fd, const char *name)
{
	if (mkdirat(dir_fd, name, 0700) < 0 && errno != EEXIST)
		return negative_errno();
	return open_beneath(dir_fd, name, O_RDONLY | O_DIRECTORY, 0, S_IFDIR);
}

/* Whether tmp/name is one the node makes: the temporary of a use record's write,
 * '.' + <volume id>.json + ".tmp-" + 16 hex (fileio.h). Anything else is left as it is. */
static bool tmp_name_ours(const char *name)
{
	static const char suffix[] = ".json.tmp-";

	if (!write_file_is_temporary(name))
		return false;
	const char *end = strstr(name, suffix);
	if (!end || strlen(end) != strlen(suffix) + 16)
		return false;
	_cleanup_free_ char *id = xstrndup(name + 1, end - name - 1);
	return ebs_volume_id_valid(id);
}

/* Temporaries a crash left (a live writer holds its flock: it stays). Only regular files of
 * the node's own names go; a symlink, a FIFO or a folder under such a name is nobody's write
 * and stays too (opened without following it, without blocking on a FIFO). */
static void tmp_clean(EbsNode *n)
{
	int dir_fd = openat(n->tmp_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_closedir_ DIR *d = dir_fd >= 0 ? fdopendir(dir_fd) : NULL;
	struct dirent *de;
	struct stat st;

	if (dir_fd >= 0 && !d)
		close(dir_fd);

	while (d && (de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (!tmp_name_ours(de->d_name)) {
			log_debug("ebs: tmp/%s is nothing the node made: left as it is",
				  de->d_name);
			continue;
		}
		_cleanup_close_ int fd = openat(n->tmp_fd, de->d_name,
						O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
			continue;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0 && unlinkat(n->tmp_fd, de->d_name, 0) == 0)
			log_debug("ebs: removed tmp/%s left by a crash", de->d_name);
	}
}

static int state_open(EbsNode *n, const char *state_dir, char **ret_error)
{
	_cleanup_close_ int top = -EBADF, fd = -EBADF;
	const char *top_path = state_dir ?: EBS_STATE_DIR_DEFAULT, *where = top_path;

	/* The state directory is the admin's to place; what is beneath it is the node's, opened
	 * without following a symlink. */
	n->dir = xasprintf("%s/ebs", top_path);
	int r = mkdir_p(top_path, 0700);
	if (r >= 0 && (top = open(top_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		r = negative_errno();
	if (r >= 0 && (where = n->dir, fd = open_dir(top, "ebs")) < 0)
		r = fd;
	if (r >= 0 && (where = "volumes", n->volumes_fd = open_dir(fd, where)) < 0)
		r = n->volumes_fd;
	if (r >= 0 && (where = "tmp", n->tmp_fd = open_dir(fd, where)) < 0)
		r = n->tmp_fd;
	if (r == -ELOOP || r == -ENOTDIR)
		return errorf(ret_error, r,
			      "--state-dir: cannot keep records in %s: %s%s%s is %s, never "
			      "followed or replaced",
			      n->dir, where == n->dir ? "" : n->dir, where == n->dir ? "" : "/",
			      where, r == -ELOOP ? "a symlink" : "not a directory");
	if (r < 0)
		return errorf(ret_error, r, "--state-dir: cannot keep records in %s: %s", n->dir,
			      strerror(-r));
	tmp_clean(n);
	return 0;
}

/* ---- use records: STATE/ebs/volumes/<id>.{json,lock} ---- */

static char *record_name(const char *id, const char *suffix)
{
	return xasprintf("%s.%s", id, suffix);
}

/* A holder that finds the record gone removes the lock file (ebs_use_unlock()): whoever waited
 * on the old one takes the new one instead. */
static int ebs_use_lock(void *userdata, const char *id, int *ret_lock_fd)
{
	EbsNode *n = userdata;
	_cleanup_free_ char *name = NULL;

	if (!ebs_volume_id_valid(id))
		return -ENOENT;
	name = record_name(id, "lock");
	for (;;) {
		struct stat held, now;
		int fd;
		int r = node_use_lock_at(n->volumes_fd, name, &fd);
		if (r < 0)
			return r;
		if (fstat(fd, &held) == 0 &&
		    fstatat(n->volumes_fd, name, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
		    held.st_ino == now.st_ino && held.st_dev == now.st_dev) {
			*ret_lock_fd = fd;
			return 0;
		}
		close(fd);
	}
}

static char *ebs_use_lock_name(void *userdata, const char *id)
{
	EbsNode *n = userdata;
	return xasprintf("%s/volumes/%s.lock", n->dir, id);
}

static void ebs_use_unlock(void *userdata, const char *id, int lock_fd)
{
	EbsNode *n = userdata;
	_cleanup_free_ char *record = record_name(id, "json"), *lock = record_name(id, "lock");

	(void)lock_fd;
	if (faccessat(n->volumes_fd, record, F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
		(void)unlinkat(n->volumes_fd, lock, 0);
}

static int ebs_use_load(void *userdata, const char *id, NodeUse *ret)
{
	EbsNode *n = userdata;

	*ret = (NodeUse){};
	if (!ebs_volume_id_valid(id))
		return 0;
	_cleanup_free_ char *name = record_name(id, "json");
	int r = node_use_load_at(n->volumes_fd, name, n->boot_id, ret);
	if (r < 0)
		return log_debug_errno(r, "ebs: %s/volumes/%s is damaged", n->dir, name);
	return 0;
}

static int ebs_use_save(void *userdata, const char *id, const NodeUse *u, bool durable)
{
	EbsNode *n = userdata;
	_cleanup_free_ char *name = record_name(id, "json");

	return node_use_save_at(n->tmp_fd, n->volumes_fd, name, n->boot_id, u, durable);
}

/* ---- devices ---- */

/* The device path named at attach (the publish context's devicePath), else the one recorded at
 * stage. Caller frees. */
static char *device_hint(EbsNode *n, const char *id, const Strmap *publish_context)
{
	const char *named = publish_context ? strmap_get(publish_context, "devicePath") : NULL;
	NodeUse u = {};

	if (named && *named)
		return xstrdup(named);
	if (ebs_use_load(n, id, &u) < 0)
		return NULL;
	char *recorded = TAKE_PTR(u.device);
	node_use_done(&u);
	return recorded;
}

static int find(EbsNode *n, const char *id, const Strmap *publish_context, BlockDevice *ret,
		char **ret_why)
{
	_cleanup_free_ char *hint = device_hint(n, id, publish_context), *path = NULL;
	dev_t rdev;

	int r = ebs_device_find(&n->devices, id, hint, &path, &rdev, ret_why);
	if (r < 0)
		return r;
	*ret = (BlockDevice){.path = TAKE_PTR(path), .rdev = rdev};
	return 0;
}

static int ebs_device_find_op(void *userdata, const char *id, const Strmap *publish_context,
			      BlockDevice *ret)
{
	return find(userdata, id, publish_context, ret, NULL);
}

/* EC2 attached the volume; udev may still be making its links: wait a little. Its block size
 * is EC2's. */
static int ebs_device_get(void *userdata, const char *id, const Strmap *publish_context,
			  uint32_t block_size_max, BlockDevice *ret, char **ret_error)
{
	EbsNode *n = userdata;
	usec_t until = now_usec(CLOCK_MONOTONIC) + n->device_wait;

	(void)block_size_max;
	for (;;) {
		_cleanup_free_ char *why = NULL;
		int r = find(n, id, publish_context, ret, &why);
		if (r != -ENODEV)
			return r < 0 ? errorf(ret_error, r, "volume %s: looking for its device: %s",
					      id, strerror(-r))
				     : 0;
		if (now_usec(CLOCK_MONOTONIC) >= until)
			return errorf(ret_error, -ENODEV,
				      "volume %s is not attached to this node (waited %llu ms): %s",
				      id, (unsigned long long)(n->device_wait / USEC_PER_MSEC),
				      why);
		usleep(DEVICE_POLL);
	}
}

/* EC2 grows the volume and the kernel sees it (NVMe and Xen both tell): nothing to refresh. */
static int ebs_device_size(void *userdata, const BlockDevice *d, bool refresh, uint64_t *ret)
{
	(void)userdata;
	(void)refresh;
	return blockdev_get_size(d->path, ret);
}

static bool ebs_volume_present(void *userdata, const char *id)
{
	_cleanup_(block_device_done) BlockDevice dev = {};
	NodeUse u = {};

	if (!ebs_volume_id_valid(id))
		return false;
	if (find(userdata, id, NULL, &dev, NULL) == 0)
		return true;
	bool recorded = ebs_use_load(userdata, id, &u) == 0 && !node_use_empty(&u);
	node_use_done(&u);
	return recorded;
}

static char *ebs_not_found(const char *field, const char *id)
{
	if (!ebs_volume_id_valid(id))
		return xasprintf("%s: '%s' is not an EBS volume ID", field, id);
	return xasprintf("%s: volume %s is not attached to this node", field, id);
}

static const BlockNodeOps ebs_block_ops = {
	.device_find = ebs_device_find_op,
	.device_get = ebs_device_get,
	.device_size = ebs_device_size,
	.volume_present = ebs_volume_present,
	.not_found = ebs_not_found,
	.use_lock = ebs_use_lock,
	.lock_name = ebs_use_lock_name,
	.use_unlock = ebs_use_unlock,
	.use_load = ebs_use_load,
	.use_save = ebs_use_save,
};

/* ---- the attach limit, counted again on each NodeGetInfo ---- */

/* Whether the volume is volplug's: it has a use record here (made at stage, from the publish
 * context's volume; removed at unstage). */
static bool volume_ours(EbsNode *n, const char *id)
{
	_cleanup_free_ char *name = record_name(id, "json");

	return faccessat(n->volumes_fd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

/* The EBS volumes attached to this instance now that are not volplug's, the root volume among
 * them: udev's by-id links of EBS NVMe disks (partitions left out). -errno when the directory
 * cannot be read (a Xen instance has no such links: its devices have no serial). */
static int foreign_volumes(EbsNode *n, unsigned *ret)
{
	_cleanup_closedir_ DIR *d = opendir(n->by_id ?: EBS_BY_ID_DIR);
	struct dirent *de;
	unsigned count = 0;

	if (!d)
		return negative_errno();
	while ((de = readdir(d))) {
		size_t len = strlen(EBS_BY_ID_PREFIX);
		if (strncmp(de->d_name, EBS_BY_ID_PREFIX, len) != 0 ||
		    strchr(de->d_name + len, '-'))
			continue;
		const char *serial = de->d_name + len;
		_cleanup_free_ char *id = ebs_serial_volume_id(serial);
		if (id && !volume_ours(n, id))
			count++;
	}
	*ret = count;
	return 0;
}

/* Counts the limit again when the last count is older than limit_refresh: the ENIs and the
 * mapping from the metadata service (at most one round of calls, bounded by
 * LIMIT_IMDS_TIMEOUT; what it does not answer keeps its last value), the EBS volumes not
 * volplug's from the devices. Called with limit_lock held. */
static void limit_count(EbsNode *n)
{
	usec_t now = now_usec(CLOCK_MONOTONIC);
	EbsInstanceShape shape;
	unsigned foreign = 0;
	uint32_t limit;

	if (n->limit_at && now - n->limit_at < n->limit_refresh)
		return;
	if (n->imds)
		imds_slots(n->imds, now + LIMIT_IMDS_TIMEOUT, &n->shape);
	shape = n->shape;
	/* The mapping lists only the volumes the instance was started with; volumes attached
	 * since show as devices. The root volume is in both, the mapping's extra count apart. */
	if (foreign_volumes(n, &foreign) == 0 && foreign > 1 + shape.extra_mappings)
		shape.extra_mappings = foreign - 1;
	if (ebs_attach_limit(&shape, &limit) == 0) {
		if (n->limit_at && limit != n->limit)
			log_debug("ebs: attach limit %u -> %u (%u ENIs, %u other EBS volumes)",
				  n->limit, limit, shape.enis, shape.extra_mappings);
		n->limit = limit;
	}
	n->limit_at = now_usec(CLOCK_MONOTONIC);
}

/* ---- the node ---- */

int ebs_node_new(const EbsNodeConfig *config, EbsNode **ret, char **ret_error)
{
	EbsNode *n = xnew0(EbsNode, 1);
	int r;

	n->volumes_fd = n->tmp_fd = -EBADF;
	n->by_id = config->devices.by_id ? xstrdup(config->devices.by_id) : NULL;
	n->sys = config->devices.sys ? xstrdup(config->devices.sys) : NULL;
	n->devices = (EbsDeviceDirs){.by_id = n->by_id, .sys = n->sys};
	n->device_wait = config->device_wait ?: EBS_DEVICE_WAIT_DEFAULT;
	n->boot_id = node_use_boot_id();
	n->limit_refresh = config->limit_refresh ?: LIMIT_REFRESH_DEFAULT;
	pthread_mutex_init(&n->limit_lock, NULL);
	if ((r = identity_learn(n, config, ret_error)) < 0 ||
	    (r = state_open(n, config->state_dir, ret_error)) < 0) {
		ebs_node_free(n);
		return r;
	}
	n->block = (BlockNode){
		.ops = &ebs_block_ops,
		.userdata = n,
		.node_id = n->node_id,
		.record_device = true,
	};
	*ret = n;
	return 0;
}

void ebs_node_free(EbsNode *n)
{
	if (!n)
		return;
	imds_free(n->imds);
	pthread_mutex_destroy(&n->limit_lock);
	free(n->node_id);
	free(n->zone);
	free(n->instance_type);
	free(n->dir);
	closep(&n->volumes_fd);
	closep(&n->tmp_fd);
	free(n->boot_id);
	free(n->by_id);
	free(n->sys);
	free(n);
}

const BlockNode *ebs_node_block(EbsNode *n)
{
	return &n->block;
}

void ebs_node_info(EbsNode *n, BackendNodeInfo *ret)
{
	uint32_t limit = n->max_volumes_flag;

	if (!limit) {
		pthread_mutex_lock(&n->limit_lock);
		limit_count(n);
		limit = n->limit;
		pthread_mutex_unlock(&n->limit_lock);
	}
	*ret = (BackendNodeInfo){.max_volumes = limit, .node_id = xstrdup(n->node_id)};
	strmap_set(&ret->topology, EBS_TOPOLOGY_ZONE, n->zone);
	strmap_set(&ret->topology, EBS_TOPOLOGY_K8S_ZONE, n->zone);
}

void ebs_node_uses(EbsNode *n, int64_t *ret_staged, int64_t *ret_published)
{
	int fd = fcntl(n->volumes_fd, F_DUPFD_CLOEXEC, 3);
	_cleanup_closedir_ DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	int64_t staged = 0, published = 0;

	if (!d) {
		if (fd >= 0)
			close(fd);
		*ret_staged = *ret_published = -1;
		return;
	}
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		NodeUse u = {};
		if (*de->d_name == '.' || len <= 5 || strcmp(de->d_name + len - 5, ".json") != 0)
			continue;
		if (node_use_load_at(n->volumes_fd, de->d_name, n->boot_id, &u) == 0) {
			staged += u.staging.path != NULL;
			published += (int64_t)u.n_targets;
		}
		node_use_done(&u);
	}
	*ret_staged = staged;
	*ret_published = published;
}

const char *ebs_node_state_dir(EbsNode *n)
{
	return n->dir;
}

int ebs_node_probe(EbsNode *n)
{
	struct stat st;

	if (fstat(n->volumes_fd, &st) < 0 || st.st_nlink == 0)
		return -ENOENT;
	return faccessat(n->volumes_fd, ".", W_OK, AT_EACCESS) < 0 ? negative_errno() : 0;
}
