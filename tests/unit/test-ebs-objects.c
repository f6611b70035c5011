/* SPDX-License-Identifier: Apache-2.0 */
/* EC2's volumes, snapshots, modifications and instances read from replies as EC2 writes them,
 * and what the backend table makes of them: the CSI name and parameters from the tags, the
 * user's tags told apart from volplug's and the extra tags, the zone as topology. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "ebs-objects.h"
#include "strv.h"
#include "tap.h"

#define GiB (UINT64_C(1) << 30)

static const char volumes_reply[] =
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	"<DescribeVolumesResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">\n"
	" <requestId>r-1</requestId>\n"
	" <volumeSet>\n"
	"  <item>\n"
	"   <volumeId>vol-0a1b2c3d4e5f60001</volumeId><size>11</size><snapshotId/>\n"
	"   <availabilityZone>us-east-1a</availabilityZone><status>in-use</status>\n"
	"   <createTime>2024-05-01T12:34:56.789Z</createTime>\n"
	"   <attachmentSet>\n"
	"    <item><volumeId>vol-0a1b2c3d4e5f60001</volumeId>"
	"<instanceId>i-0a000000000000001</instanceId><device>/dev/xvdba</device>"
	"<status>attached</status></item>\n"
	"    <item><volumeId>vol-0a1b2c3d4e5f60001</volumeId>"
	"<instanceId>i-0a000000000000002</instanceId><device>/dev/xvdbb</device>"
	"<status>detached</status></item>\n"
	"   </attachmentSet>\n"
	"   <tagSet>\n"
	"    <item><key>CSIVolumeName</key><value>pvc-1</value></item>\n"
	"    <item><key>volplug.io/driver</key><value>ebs.volplug.io</value></item>\n"
	"    <item><key>volplug.io/parameters</key>"
	"<value>csi.storage.k8s.io/fstype=xfs blockSize=4096</value></item>\n"
	"    <item><key>volplug.io/fstype</key><value>xfs</value></item>\n"
	"    <item><key>volplug.io/kms-key-id</key><value>alias/k</value></item>\n"
	"    <item><key>cluster</key><value>prod</value></item>\n"
	"    <item><key>team</key><value>db</value></item>\n"
	"    <item><key>env</key><value>mine</value></item>\n"
	"   </tagSet>\n"
	"   <volumeType>gp3</volumeType><iops>4000</iops><throughput>250</throughput>\n"
	"   <encrypted>true</encrypted>"
	"<kmsKeyId>arn:aws:kms:us-east-1:123456789012:key/abc</kmsKeyId>\n"
	"   <multiAttachEnabled>false</multiAttachEnabled>\n"
	"  </item>\n"
	"  <item><volumeId>vol-0a1b2c3d4e5f60002</volumeId><size>5</size>"
	"<snapshotId>snap-0a1b2c3d4e5f60009</snapshotId>"
	"<availabilityZone>us-east-1b</availabilityZone><status>error</status>"
	"<volumeType>gp2</volumeType><iops>100</iops><encrypted>false</encrypted></item>\n"
	" </volumeSet>\n"
	"</DescribeVolumesResponse>\n";

static void test_volume(void)
{
	_cleanup_xml_free_ XmlNode *root = NULL;
	EbsVolume v = {}, w = {}, copy = {};
	BackendVolume b = {}, bw = {};
	Strmap extra = {};

	is_int(xml_parse(volumes_reply, strlen(volumes_reply), &root, NULL), 0, "reply parsed");
	const XmlNode *item = xml_find(root, "volumeSet/item");
	is_int(ebs_volume_from_xml(item, &v), 0, "volume read");
	ok(strcmp(v.id, "vol-0a1b2c3d4e5f60001") == 0 && v.size_gib == 11 &&
		   strcmp(v.state, "in-use") == 0 && strcmp(v.zone, "us-east-1a") == 0 &&
		   v.iops == 4000 && v.throughput == 250 && v.encrypted && !v.multi_attach,
	   "its fields");
	ok(strcmp(v.kms_key_id, "arn:aws:kms:us-east-1:123456789012:key/abc") == 0, "its KMS key");
	is_int((int)(v.created / 1000000), 1714566896, "its creation time");
	is_int((int)v.n_attachments, 2, "two attachments");
	const EbsAttachment *a = ebs_volume_attachment(&v, "i-0a000000000000001");
	ok(a && strcmp(a->device, "/dev/xvdba") == 0 && strcmp(a->state, "attached") == 0,
	   "the attachment to i-...1");
	ok(!ebs_volume_attachment(&v, "i-0b000000000000003"), "none to another instance");
	ebs_volume_copy(&v, &copy);
	ok(strcmp(copy.attachments[1].device, "/dev/xvdbb") == 0 &&
		   strcmp(strmap_get(&copy.tags, "team"), "db") == 0 &&
		   copy.attachments != v.attachments,
	   "a deep copy");
	ebs_volume_done(&copy);

	strmap_set(&extra, "cluster", "prod");
	strmap_set(&extra, "env", "ci");
	ebs_volume_to_backend(&v, &extra, &b);
	ok(strcmp(b.id, v.id) == 0 && strcmp(b.name, "pvc-1") == 0 && b.size == 11 * GiB,
	   "name from CSIVolumeName, size in bytes");
	ok(strcmp(b.params.type, "gp3") == 0 && b.params.iops == 4000 && b.params.throughput == 250,
	   "type, IOPS, throughput");
	ok(b.params.encrypted && strcmp(b.params.kms_key_id, "alias/k") == 0,
	   "kmsKeyId as asked, not EC2's ARN");
	ok(strcmp(b.params.fstype, "xfs") == 0 && b.params.block_size == 4096,
	   "the node's parameters from their tag");
	is_int((int)b.params.n_tags, 2, "the user's tags: not volplug's, not an extra tag's");
	ok(strcmp(b.params.tags[0].key, "env") == 0 &&
		   strcmp(b.params.tags[0].value, "mine") == 0 &&
		   strcmp(b.params.tags[1].key, "team") == 0,
	   "env=mine is the user's (the extra tag says env=ci), team=db too");
	ok(strcmp(strmap_get(&b.context, "csi.storage.k8s.io/fstype"), "xfs") == 0 &&
		   strcmp(strmap_get(&b.context, "blockSize"), "4096") == 0 && b.context.n == 2,
	   "the volume context");
	ok(strcmp(strmap_get(&b.topology, "topology.ebs.csi.aws.com/zone"), "us-east-1a") == 0 &&
		   strcmp(strmap_get(&b.topology, "topology.kubernetes.io/zone"), "us-east-1a") ==
			   0,
	   "its zone under both keys");
	ok(strv_length(b.published_nodes) == 1 &&
		   strcmp(b.published_nodes[0], "i-0a000000000000001") == 0,
	   "published to the instance it is attached to, not the one it left");
	ok(!b.abnormal && strcmp(b.condition, "volume is healthy") == 0, "healthy");
	ok(strcmp(b.source_kind, "") == 0, "no source");

	is_int(ebs_volume_from_xml(xml_next(item), &w), 0, "second volume read");
	ebs_volume_to_backend(&w, NULL, &bw);
	ok(strcmp(bw.name, "") == 0 && bw.params.iops == 0 && bw.params.throughput == 0,
	   "gp2: no IOPS asked (EC2's is a baseline); no name tag: no name");
	ok(strcmp(bw.source_kind, "snapshot") == 0 &&
		   strcmp(bw.source_id, "snap-0a1b2c3d4e5f60009") == 0,
	   "made from a snapshot");
	ok(bw.abnormal && strstr(bw.condition, "state error"), "state error: abnormal: %s",
	   bw.condition);
	ok(!bw.params.encrypted && !bw.params.kms_key_id, "not encrypted");

	EbsVolume none = {};
	is_int(ebs_volume_from_xml(root, &none), -EBADMSG, "no volumeId: -EBADMSG");
	backend_volume_done(&b);
	backend_volume_done(&bw);
	ebs_volume_done(&v);
	ebs_volume_done(&w);
	strmap_done(&extra);
}

static const char snapshot_reply[] =
	"<CreateSnapshotResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">"
	"<snapshotId>snap-0a1b2c3d4e5f60009</snapshotId><volumeId>vol-1</volumeId>"
	"<status>pending</status><startTime>2024-05-01T00:00:01.000Z</startTime>"
	"<volumeSize>11</volumeSize><tagSet>"
	"<item><key>CSIVolumeSnapshotName</key><value>snap-a</value></item>"
	"<item><key>volplug.io/driver</key><value>d</value></item>"
	"<item><key>daily</key><value>yes</value></item></tagSet>"
	"</CreateSnapshotResponse>";

static const char modifications_reply[] =
	"<DescribeVolumesModificationsResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">"
	"<volumeModificationSet><item><volumeId>vol-1</volumeId>"
	"<modificationState>optimizing</modificationState><targetSize>20</targetSize>"
	"<targetVolumeType>io2</targetVolumeType><targetIops>5000</targetIops>"
	"<startTime>2024-05-01T00:00:01.000Z</startTime></item></volumeModificationSet>"
	"</DescribeVolumesModificationsResponse>";

static const char instances_reply[] =
	"<DescribeInstancesResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">"
	"<reservationSet><item><instancesSet><item><instanceId>i-1</instanceId>"
	"<instanceState><code>16</code><name>running</name></instanceState>"
	"<instanceType>m5.large</instanceType>"
	"<placement><availabilityZone>us-east-1a</availabilityZone></placement>"
	"<blockDeviceMapping>"
	"<item><deviceName>/dev/xvda</deviceName><ebs><volumeId>vol-root</volumeId></ebs></item>"
	"<item><deviceName>/dev/xvdbc</deviceName><ebs><volumeId>vol-2</volumeId></ebs></item>"
	"</blockDeviceMapping></item></instancesSet></item></reservationSet>"
	"</DescribeInstancesResponse>";

static void test_others(void)
{
	_cleanup_xml_free_ XmlNode *s_root = NULL, *m_root = NULL, *i_root = NULL;
	EbsSnapshot s = {};
	EbsModification m = {};
	EbsInstance inst = {};
	BackendSnapshot b = {};

	xml_parse(snapshot_reply, strlen(snapshot_reply), &s_root, NULL);
	is_int(ebs_snapshot_from_xml(s_root, &s), 0, "CreateSnapshot's reply read");
	ebs_snapshot_to_backend(&s, NULL, &b);
	ok(strcmp(b.id, "snap-0a1b2c3d4e5f60009") == 0 && strcmp(b.name, "snap-a") == 0 &&
		   strcmp(b.source_volume_id, "vol-1") == 0 && b.size == 11 * GiB && !b.ready,
	   "a pending snapshot is not ready");
	ok(b.params.n == 1 && strcmp(strmap_get(&b.params, "tagSpecification_1"), "daily=yes") == 0,
	   "its user tags, as CreateSnapshot's parameters give them");
	backend_snapshot_done(&b);
	free(s.state);
	s.state = xstrdup("completed");
	ebs_snapshot_to_backend(&s, NULL, &b);
	ok(b.ready, "a completed one is ready to use");
	backend_snapshot_done(&b);
	ebs_snapshot_done(&s);

	xml_parse(modifications_reply, strlen(modifications_reply), &m_root, NULL);
	is_int(ebs_modification_from_xml(xml_find(m_root, "volumeModificationSet/item"), &m), 0,
	       "a modification read");
	ok(strcmp(m.state, "optimizing") == 0 && m.target_size_gib == 20 &&
		   strcmp(m.target_type, "io2") == 0 && m.target_iops == 5000,
	   "its state and target");
	ebs_modification_done(&m);

	xml_parse(instances_reply, strlen(instances_reply), &i_root, NULL);
	is_int(ebs_instance_from_xml(xml_find(i_root, "reservationSet/item/instancesSet/item"),
				     &inst),
	       0, "an instance read");
	ok(strcmp(inst.zone, "us-east-1a") == 0 && strcmp(inst.state, "running") == 0 &&
		   strv_length(inst.devices) == 2 && strcmp(inst.devices[1], "/dev/xvdbc") == 0 &&
		   strcmp(inst.volumes[1], "vol-2") == 0,
	   "its zone, state and block device mapping");
	ebs_instance_done(&inst);
}

static void test_tags_and_topology(void)
{
	Strmap extra = {}, t = {};
	bool conflict;

	strmap_set(&extra, "owner", "ops");
	ok(!ebs_tag_is_users("CSIVolumeName", "x", NULL) &&
		   !ebs_tag_is_users("volplug.io/anything", "x", NULL) &&
		   !ebs_tag_is_users("owner", "ops", &extra) &&
		   ebs_tag_is_users("owner", "me", &extra) &&
		   ebs_tag_is_users("team", "db", &extra),
	   "whose tag is whose");
	strmap_done(&extra);

	VolumeParams p = {.block_size = 2048,
			  .fs_group_change_policy = FS_GROUP_CHANGE_POLICY_ALWAYS};
	snprintf(p.fstype, sizeof(p.fstype), "ext4");
	char *enc = ebs_node_params_encode(&p);
	is_str(enc, "csi.storage.k8s.io/fstype=ext4 blockSize=2048 fsGroupChangePolicy=Always",
	       "the node's parameters as one tag value");
	free(enc);
	VolumeParams none = {};
	enc = ebs_node_params_encode(&none);
	is_str(enc, "", "none: empty");
	free(enc);

	ok(ebs_topology_zone(&t, &conflict) == NULL && !conflict, "no zone key: no zone");
	strmap_set(&t, "topology.kubernetes.io/zone", "us-east-1b");
	strmap_set(&t, "kubernetes.io/hostname", "n1");
	is_str(ebs_topology_zone(&t, &conflict), "us-east-1b", "the Kubernetes key");
	strmap_set(&t, "topology.ebs.csi.aws.com/zone", "us-east-1b");
	strmap_set(&t, "topology.volplug.io/zone", "us-east-1b");
	ok(ebs_topology_zone(&t, &conflict) && !conflict, "three keys that agree");
	strmap_set(&t, "topology.ebs.csi.aws.com/zone", "us-east-1c");
	ebs_topology_zone(&t, &conflict);
	ok(conflict, "two that differ: a conflict");
	strmap_done(&t);
}

int main(void)
{
	test_volume();
	test_others();
	test_tags_and_topology();
	return tap_done();
}
