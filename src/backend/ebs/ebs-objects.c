/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "blocknode.h"
#include "ebs-node.h"
#include "ebs-objects.h"
#include "aws-credentials.h"
#include "parse-util.h"
#include "strbuf.h"
#include "strv.h"

static char *dup_text(const XmlNode *n, const char *path)
{
	const char *s = xml_text(n, path);
	return xstrdup(s ? s : "");
}

static uint64_t u64_text(const XmlNode *n, const char *path)
{
	const char *s = xml_text(n, path);
	uint64_t v;
	return s && parse_uint64(s, &v) >= 0 ? v : 0;
}

static bool bool_text(const XmlNode *n, const char *path)
{
	const char *s = xml_text(n, path);
	return s && strcmp(s, "true") == 0;
}

static usec_t time_text(const XmlNode *n, const char *path)
{
	const char *s = xml_text(n, path);
	usec_t t;
	return s && aws_parse_time(s, &t) >= 0 ? t : 0;
}

/* ---- volumes ---- */

void ebs_volume_done(EbsVolume *v)
{
	if (!v)
		return;
	free(v->id);
	free(v->zone);
	free(v->state);
	free(v->type);
	free(v->snapshot_id);
	free(v->kms_key_id);
	strmap_done(&v->tags);
	for (size_t i = 0; i < v->n_attachments; i++) {
		free(v->attachments[i].instance_id);
		free(v->attachments[i].device);
		free(v->attachments[i].state);
	}
	free(v->attachments);
	*v = (EbsVolume){};
}

void ebs_volume_free(void *p)
{
	ebs_volume_done(p);
	free(p);
}

int ebs_volume_from_xml(const XmlNode *item, EbsVolume *ret)
{
	const char *id = xml_text(item, "volumeId");
	EbsVolume v = {};

	if (!id || !*id)
		return -EBADMSG;
	v.id = xstrdup(id);
	v.zone = dup_text(item, "availabilityZone");
	v.state = dup_text(item, "status");
	v.type = dup_text(item, "volumeType");
	v.snapshot_id = dup_text(item, "snapshotId");
	v.size_gib = u64_text(item, "size");
	v.iops = (uint32_t)u64_text(item, "iops");
	v.throughput = (uint32_t)u64_text(item, "throughput");
	v.encrypted = bool_text(item, "encrypted");
	v.multi_attach = bool_text(item, "multiAttachEnabled");
	const char *kms = xml_text(item, "kmsKeyId");
	v.kms_key_id = v.encrypted && kms && *kms ? xstrdup(kms) : NULL;
	v.created = time_text(item, "createTime");
	xml_tags(item, "tagSet", &v.tags);
	XML_FOREACH (a, item, "attachmentSet/item") {
		v.attachments =
			xrealloc(v.attachments, (v.n_attachments + 1) * sizeof(EbsAttachment));
		v.attachments[v.n_attachments++] = (EbsAttachment){
			.instance_id = dup_text(a, "instanceId"),
			.device = dup_text(a, "device"),
			.state = dup_text(a, "status"),
		};
	}
	*ret = v;
	return 0;
}

void ebs_volume_copy(const EbsVolume *src, EbsVolume *ret)
{
	*ret = *src;
	ret->id = xstrdup(src->id);
	ret->zone = xstrdup(src->zone);
	ret->state = xstrdup(src->state);
	ret->type = xstrdup(src->type);
	ret->snapshot_id = xstrdup(src->snapshot_id);
	ret->kms_key_id = src->kms_key_id ? xstrdup(src->kms_key_id) : NULL;
	ret->tags = (Strmap){};
	strmap_copy(&ret->tags, &src->tags);
	ret->attachments = xnew0(EbsAttachment, src->n_attachments);
	for (size_t i = 0; i < src->n_attachments; i++)
		ret->attachments[i] = (EbsAttachment){
			.instance_id = xstrdup(src->attachments[i].instance_id),
			.device = xstrdup(src->attachments[i].device),
			.state = xstrdup(src->attachments[i].state),
		};
}

const EbsAttachment *ebs_volume_attachment(const EbsVolume *v, const char *instance_id)
{
	for (size_t i = 0; i < v->n_attachments; i++)
		if (strcmp(v->attachments[i].instance_id, instance_id) == 0)
			return &v->attachments[i];
	return NULL;
}

/* ---- snapshots ---- */

void ebs_snapshot_done(EbsSnapshot *s)
{
	if (!s)
		return;
	free(s->id);
	free(s->volume_id);
	free(s->state);
	strmap_done(&s->tags);
	*s = (EbsSnapshot){};
}

void ebs_snapshot_free(void *p)
{
	ebs_snapshot_done(p);
	free(p);
}

void ebs_snapshot_copy(const EbsSnapshot *src, EbsSnapshot *ret)
{
	*ret = (EbsSnapshot){
		.id = xstrdup(src->id),
		.volume_id = xstrdup(src->volume_id),
		.state = xstrdup(src->state),
		.size_gib = src->size_gib,
		.started = src->started,
	};
	strmap_copy(&ret->tags, &src->tags);
}

int ebs_snapshot_from_xml(const XmlNode *item, EbsSnapshot *ret)
{
	const char *id = xml_text(item, "snapshotId");

	if (!id || !*id)
		return -EBADMSG;
	*ret = (EbsSnapshot){
		.id = xstrdup(id),
		.volume_id = dup_text(item, "volumeId"),
		.state = dup_text(item, "status"),
		.size_gib = u64_text(item, "volumeSize"),
		.started = time_text(item, "startTime"),
	};
	xml_tags(item, "tagSet", &ret->tags);
	return 0;
}

/* ---- modifications ---- */

void ebs_modification_done(EbsModification *m)
{
	if (!m)
		return;
	free(m->volume_id);
	free(m->state);
	free(m->message);
	free(m->target_type);
	*m = (EbsModification){};
}

void ebs_modification_free(void *p)
{
	ebs_modification_done(p);
	free(p);
}

int ebs_modification_from_xml(const XmlNode *item, EbsModification *ret)
{
	const char *id = xml_text(item, "volumeId");

	if (!id || !*id)
		return -EBADMSG;
	*ret = (EbsModification){
		.volume_id = xstrdup(id),
		.state = dup_text(item, "modificationState"),
		.message = dup_text(item, "statusMessage"),
		.target_size_gib = u64_text(item, "targetSize"),
		.target_type = dup_text(item, "targetVolumeType"),
		.target_iops = (uint32_t)u64_text(item, "targetIops"),
		.target_throughput = (uint32_t)u64_text(item, "targetThroughput"),
		.started = time_text(item, "startTime"),
	};
	return 0;
}

/* ---- instances ---- */

void ebs_instance_done(EbsInstance *i)
{
	if (!i)
		return;
	free(i->id);
	free(i->zone);
	free(i->type);
	free(i->state);
	strv_free(i->devices);
	strv_free(i->volumes);
	*i = (EbsInstance){};
}

int ebs_instance_from_xml(const XmlNode *item, EbsInstance *ret)
{
	const char *id = xml_text(item, "instanceId");
	EbsInstance i = {};
	size_t n = 0, cap = 0, m = 0, mcap = 0;

	if (!id || !*id)
		return -EBADMSG;
	i.id = xstrdup(id);
	i.zone = dup_text(item, "placement/availabilityZone");
	i.type = dup_text(item, "instanceType");
	i.state = dup_text(item, "instanceState/name");
	XML_FOREACH (b, item, "blockDeviceMapping/item") {
		const char *dev = xml_text(b, "deviceName"), *vol = xml_text(b, "ebs/volumeId");
		if (!dev || !vol)
			continue;
		strv_push(&i.devices, &n, &cap, xstrdup(dev));
		strv_push(&i.volumes, &m, &mcap, xstrdup(vol));
	}
	XML_FOREACH (eni, item, "networkInterfaceSet/item")
		i.enis++;
	*ret = i;
	return 0;
}

/* ---- what the table gives ---- */

bool ebs_tag_is_users(const char *key, const char *value, const Strmap *extra)
{
	const char *e = extra ? strmap_get(extra, key) : NULL;

	if (strcmp(key, EBS_TAG_VOLUME_NAME) == 0 || strcmp(key, EBS_TAG_SNAPSHOT_NAME) == 0 ||
	    strncmp(key, "volplug.io/", 11) == 0)
		return false;
	return !e || strcmp(e, value) != 0;
}

char *ebs_node_params_encode(const VolumeParams *p)
{
	ParamKV *kv;
	size_t n;
	StrBuf b = {};

	volume_params_to_kv(p, VOLUME_PARAMS_NODE, &kv, &n);
	for (size_t i = 0; i < n; i++)
		strbuf_printf(&b, "%s%s=%s", i ? " " : "", kv[i].key, kv[i].value);
	param_kv_free_many(kv, n);
	return strbuf_steal(&b);
}

/* The node parameters of the tag, into p (whose filesystem fields it sets). */
static void node_params_decode(const char *s, VolumeParams *p)
{
	_cleanup_free_ char *copy = xstrdup(s ?: "");
	ParamKV kv[32];
	size_t n = 0;
	char *save = NULL;
	VolumeParams node = {};

	for (char *tok = strtok_r(copy, " ", &save); tok && n < ELEMENTSOF(kv);
	     tok = strtok_r(NULL, " ", &save)) {
		char *eq = strchr(tok, '=');
		if (!eq)
			continue;
		*eq = 0;
		kv[n++] = (ParamKV){.key = tok, .value = eq + 1};
	}
	if (n == 0 || volume_params_load(kv, n, &node, NULL) < 0)
		return;
	memcpy(p->fstype, node.fstype, sizeof(p->fstype));
	p->block_size = node.block_size;
	p->inode_size = node.inode_size;
	p->bytes_per_inode = node.bytes_per_inode;
	p->number_of_inodes = node.number_of_inodes;
	p->ext4_bigalloc = node.ext4_bigalloc;
	p->ext4_cluster_size = node.ext4_cluster_size;
	p->ext4_encryption = node.ext4_encryption;
	p->ext4_fast_commit = node.ext4_fast_commit;
	p->fs_group_change_policy = node.fs_group_change_policy;
	volume_params_done(&node);
}

static bool type_has_iops(const char *type)
{
	return strcmp(type, "gp3") == 0 || strcmp(type, "io1") == 0 || strcmp(type, "io2") == 0;
}

/* What the volume was made with, as volume_params_parse() would have resolved it. */
static void volume_params_of(const EbsVolume *v, const Strmap *extra, VolumeParams *ret)
{
	VolumeParams p = {};
	ParamKV *kv = xnew0(ParamKV, v->tags.n + 1);
	size_t n = 0;

	snprintf(p.type, sizeof(p.type), "%s", v->type);
	p.iops = type_has_iops(v->type) ? v->iops : 0; /* gp2's are a baseline, not asked */
	p.throughput = strcmp(v->type, "gp3") == 0 ? v->throughput : 0;
	p.encrypted = v->encrypted;
	const char *kms = strmap_get(&v->tags, EBS_TAG_KMS_KEY);
	p.kms_key_id = kms ? xstrdup(kms) : NULL;
	node_params_decode(strmap_get(&v->tags, EBS_TAG_PARAMETERS), &p);
	/* the user's tags, sorted and checked as volume_params_load() keeps them */
	for (size_t i = 0; i < v->tags.n; i++)
		if (ebs_tag_is_users(v->tags.keys[i], v->tags.values[i], extra))
			kv[n++] = (ParamKV){
				.key = xasprintf("tagSpecification_%zu", n + 1),
				.value = xasprintf("%s=%s", v->tags.keys[i], v->tags.values[i]),
			};
	VolumeParams tags = {};
	if (n > 0 && volume_params_load(kv, n, &tags, NULL) == 0) {
		p.tags = TAKE_PTR(tags.tags);
		p.n_tags = tags.n_tags;
		tags.n_tags = 0;
	}
	volume_params_done(&tags);
	param_kv_free_many(kv, n);
	*ret = p;
}

static const char *condition_of(const EbsVolume *v, bool *ret_abnormal)
{
	*ret_abnormal = true;
	if (strcmp(v->state, "error") == 0)
		return "EC2 reports the volume in state error: its data cannot be used";
	if (strcmp(v->state, "deleting") == 0 || strcmp(v->state, "deleted") == 0)
		return "the volume is being deleted";
	*ret_abnormal = false;
	if (strcmp(v->state, "creating") == 0)
		return "the volume is being created";
	return "volume is healthy";
}

void ebs_volume_to_backend(const EbsVolume *v, const Strmap *extra, BackendVolume *ret)
{
	const char *name = strmap_get(&v->tags, EBS_TAG_VOLUME_NAME);
	const char *source = strmap_get(&v->tags, EBS_TAG_SOURCE_VOLUME);
	const char *fstype = strmap_get(&v->tags, EBS_TAG_FSTYPE);
	bool abnormal;

	*ret = (BackendVolume){
		.id = xstrdup(v->id),
		.name = xstrdup(name ?: ""),
		.size = v->size_gib * EBS_GIB,
		.created_ns = (int64_t)v->created * 1000,
		.source_kind = xstrdup(source		 ? "volume"
				       : *v->snapshot_id ? "snapshot"
							 : ""),
		.source_id = xstrdup(source ?: v->snapshot_id),
		/* all EC2 tells of it: Multi-Attach or not */
		.access_mode = xstrdup(v->multi_attach ? EBS_MULTI_ATTACH_MODE : ""),
	};
	volume_params_of(v, extra, &ret->params);
	volume_params_to_strmap(&ret->params, VOLUME_PARAMS_NODE, &ret->context);
	if (fstype && *fstype && !strmap_get(&ret->context, BLOCKNODE_CONTEXT_FSTYPE))
		strmap_set(&ret->context, BLOCKNODE_CONTEXT_FSTYPE, fstype);
	ebs_topology_for_zone(v->zone, &ret->topology);
	for (size_t i = 0; i < v->n_attachments; i++)
		if (strcmp(v->attachments[i].state, "detached") != 0)
			strv_append(&ret->published_nodes, xstrdup(v->attachments[i].instance_id));
	ret->condition = xstrdup(condition_of(v, &abnormal));
	ret->abnormal = abnormal;
}

void ebs_snapshot_to_backend(const EbsSnapshot *s, const Strmap *extra, BackendSnapshot *ret)
{
	const char *name = strmap_get(&s->tags, EBS_TAG_SNAPSHOT_NAME);

	*ret = (BackendSnapshot){
		.id = xstrdup(s->id),
		.name = xstrdup(name ?: ""),
		.source_volume_id = xstrdup(s->volume_id),
		.size = s->size_gib * EBS_GIB,
		.created_ns = (int64_t)s->started * 1000,
		.ready = strcmp(s->state, "completed") == 0,
		.group_id = xstrdup(strmap_get(&s->tags, EBS_TAG_GROUP_ID) ?: ""),
	};
	/* the user's tags, as CreateSnapshot's parameters give them */
	for (size_t i = 0, n = 0; i < s->tags.n; i++)
		if (ebs_tag_is_users(s->tags.keys[i], s->tags.values[i], extra)) {
			_cleanup_free_ char *key = xasprintf("tagSpecification_%zu", ++n);
			_cleanup_free_ char *kv =
				xasprintf("%s=%s", s->tags.keys[i], s->tags.values[i]);
			strmap_set(&ret->params, key, kv);
		}
}

static const char *const zone_keys[] = {EBS_TOPOLOGY_ZONE, EBS_TOPOLOGY_K8S_ZONE,
					BACKEND_TOPOLOGY_ZONE};

const char *ebs_topology_zone(const BackendTopology *t, bool *ret_conflict)
{
	const char *zone = NULL;

	*ret_conflict = false;
	for (size_t k = 0; k < ELEMENTSOF(zone_keys); k++) {
		const char *z = strmap_get(t, zone_keys[k]);
		if (!z)
			continue;
		if (zone && strcmp(zone, z) != 0)
			*ret_conflict = true;
		zone = zone ?: z;
	}
	return zone;
}

void ebs_topology_for_zone(const char *zone, BackendTopology *ret)
{
	strmap_set(ret, EBS_TOPOLOGY_ZONE, zone);
	strmap_set(ret, EBS_TOPOLOGY_K8S_ZONE, zone);
}
