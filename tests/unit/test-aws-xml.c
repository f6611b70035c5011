/* SPDX-License-Identifier: Apache-2.0 */
/* EC2 replies as the client reads them: canned replies of DescribeVolumes, DescribeInstances,
 * DescribeSnapshots and CreateVolume read the same in the 2016-11-15 and 2013-10-15
 * namespaces and with a prefix; hostile or broken XML is refused. */
#include <errno.h>
#include <string.h>

#include "alloc.h"
#include "aws-xml.h"
#include "strbuf.h"
#include "tap.h"

/* @NS@: the namespace's date. */
static const char describe_volumes[] =
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	"<DescribeVolumesResponse xmlns=\"http://ec2.amazonaws.com/doc/@NS@/\">\n"
	"    <requestId>a9f3c1e2-0000-4000-8000-000000000001</requestId>\n"
	"    <volumeSet>\n"
	"        <item>\n"
	"            <volumeId>vol-0123456789abcdef0</volumeId>\n"
	"            <size>10</size>\n"
	"            <snapshotId/>\n"
	"            <availabilityZone>us-east-1a</availabilityZone>\n"
	"            <status>in-use</status>\n"
	"            <createTime>2024-05-01T12:00:00.000Z</createTime>\n"
	"            <attachmentSet>\n"
	"                <item>\n"
	"                    <volumeId>vol-0123456789abcdef0</volumeId>\n"
	"                    <instanceId>i-0aaaaaaaaaaaaaaa1</instanceId>\n"
	"                    <device>/dev/xvdba</device>\n"
	"                    <status>attached</status>\n"
	"                    <attachTime>2024-05-01T12:01:00.000Z</attachTime>\n"
	"                    <deleteOnTermination>false</deleteOnTermination>\n"
	"                </item>\n"
	"            </attachmentSet>\n"
	"            <tagSet>\n"
	"                <item><key>CSIVolumeName</key><value>pvc-1</value></item>\n"
	"                <item><key>note</key><value>a &amp; b &lt;c&gt;</value></item>\n"
	"                <item><key>empty</key><value/></item>\n"
	"            </tagSet>\n"
	"            <volumeType>gp3</volumeType>\n"
	"            <iops>3000</iops>\n"
	"            <throughput>125</throughput>\n"
	"            <encrypted>false</encrypted>\n"
	"        </item>\n"
	"        <item>\n"
	"            <volumeId>vol-0fedcba9876543210</volumeId>\n"
	"            <size>200</size>\n"
	"            <availabilityZone>us-east-1b</availabilityZone>\n"
	"            <status>available</status>\n"
	"            <attachmentSet/>\n"
	"            <volumeType>io2</volumeType>\n"
	"            <iops>10000</iops>\n"
	"        </item>\n"
	"    </volumeSet>\n"
	"    <nextToken>dG9rZW4tMg==</nextToken>\n"
	"</DescribeVolumesResponse>\n";

static const char describe_instances[] =
	"<DescribeInstancesResponse xmlns=\"http://ec2.amazonaws.com/doc/@NS@/\">\n"
	"  <requestId>r-1</requestId>\n"
	"  <reservationSet>\n"
	"    <item>\n"
	"      <reservationId>r-0001</reservationId>\n"
	"      <instancesSet>\n"
	"        <item>\n"
	"          <instanceId>i-0aaaaaaaaaaaaaaa1</instanceId>\n"
	"          <instanceType>m5.large</instanceType>\n"
	"          <placement><availabilityZone>us-east-1a</availabilityZone></placement>\n"
	"          <instanceState><code>16</code><name>running</name></instanceState>\n"
	"          <blockDeviceMapping>\n"
	"            <item><deviceName>/dev/xvda</deviceName>\n"
	"              <ebs><volumeId>vol-root</volumeId><status>attached</status></ebs></item>\n"
	"            <item><deviceName>/dev/xvdba</deviceName>\n"
	"              <ebs><volumeId>vol-0123456789abcdef0</volumeId><status>attached</status>"
	"</ebs></item>\n"
	"          </blockDeviceMapping>\n"
	"        </item>\n"
	"      </instancesSet>\n"
	"    </item>\n"
	"    <item>\n"
	"      <reservationId>r-0002</reservationId>\n"
	"      <instancesSet>\n"
	"        <item><instanceId>i-2</instanceId><instanceType>t3.micro</instanceType>\n"
	"          <blockDeviceMapping/></item>\n"
	"        <item><instanceId>i-3</instanceId><instanceType>c5.xlarge</instanceType>\n"
	"          <blockDeviceMapping><item><deviceName>/dev/xvdbb</deviceName>"
	"<ebs><volumeId>vol-3</volumeId><status>detaching</status></ebs></item>"
	"</blockDeviceMapping></item>\n"
	"      </instancesSet>\n"
	"    </item>\n"
	"  </reservationSet>\n"
	"</DescribeInstancesResponse>\n";

static const char describe_snapshots[] =
	"<DescribeSnapshotsResponse xmlns=\"http://ec2.amazonaws.com/doc/@NS@/\">\n"
	"  <requestId>s-1</requestId>\n"
	"  <snapshotSet>\n"
	"    <item><snapshotId>snap-1</snapshotId><volumeId>vol-1</volumeId>"
	"<status>completed</status><progress>100%</progress><volumeSize>10</volumeSize>"
	"<startTime>2024-05-01T13:00:00.000Z</startTime>"
	"<tagSet><item><key>CSIVolumeSnapshotName</key><value>snapshot-1</value></item></tagSet>"
	"</item>\n"
	"    <item><snapshotId>snap-2</snapshotId><volumeId>vol-2</volumeId>"
	"<status>pending</status><progress>42%</progress><volumeSize>20</volumeSize></item>\n"
	"  </snapshotSet>\n"
	"  <nextToken>next-page</nextToken>\n"
	"</DescribeSnapshotsResponse>\n";

static const char create_volume[] =
	"<CreateVolumeResponse xmlns=\"http://ec2.amazonaws.com/doc/@NS@/\">\n"
	"  <requestId>c-1</requestId>\n"
	"  <volumeId>vol-new</volumeId>\n  <size>8</size>\n  <snapshotId></snapshotId>\n"
	"  <availabilityZone>us-east-1a</availabilityZone>\n  <status>creating</status>\n"
	"  <volumeType>gp3</volumeType>\n  <encrypted>true</encrypted>\n"
	"</CreateVolumeResponse>\n";

static const char *const namespaces[] = {"2016-11-15", "2013-10-15"};

static void add(StrBuf *b, const char *s)
{
	strbuf_adds(b, s ? s : "(null)");
}

static void add_tags(StrBuf *b, const XmlNode *n)
{
	Strmap tags = {};
	xml_tags(n, "tagSet", &tags);
	add(b, "{");
	for (size_t i = 0; i < tags.n; i++) {
		add(b, i ? "," : "");
		add(b, tags.keys[i]);
		add(b, "=");
		add(b, tags.values[i]);
	}
	add(b, "}");
	strmap_done(&tags);
}

/* What a caller reads from each reply, as one line. */
static char *read_volumes(const XmlNode *root)
{
	StrBuf b = {};
	XML_FOREACH (vol, root, "volumeSet/item") {
		add(&b, xml_text(vol, "volumeId"));
		add(&b, " ");
		add(&b, xml_text(vol, "status"));
		add(&b, " ");
		add(&b, xml_text(vol, "size"));
		add(&b, "G ");
		add(&b, xml_text(vol, "volumeType"));
		add(&b, " [");
		XML_FOREACH (att, vol, "attachmentSet/item") {
			add(&b, xml_text(att, "instanceId"));
			add(&b, "@");
			add(&b, xml_text(att, "device"));
			add(&b, ":");
			add(&b, xml_text(att, "status"));
		}
		add(&b, "] ");
		add_tags(&b, vol);
		add(&b, "; ");
	}
	add(&b, "next=");
	add(&b, xml_text(root, "nextToken"));
	return strbuf_steal(&b);
}

static char *read_instances(const XmlNode *root)
{
	StrBuf b = {};
	XML_FOREACH (res, root, "reservationSet/item")
		XML_FOREACH (inst, res, "instancesSet/item") {
			add(&b, xml_text(inst, "instanceId"));
			add(&b, " ");
			add(&b, xml_text(inst, "instanceType"));
			add(&b, ":");
			XML_FOREACH (bdm, inst, "blockDeviceMapping/item") {
				add(&b, " ");
				add(&b, xml_text(bdm, "deviceName"));
				add(&b, "=");
				add(&b, xml_text(bdm, "ebs/volumeId"));
				add(&b, "/");
				add(&b, xml_text(bdm, "ebs/status"));
			}
			add(&b, "; ");
		}
	return strbuf_steal(&b);
}

static char *read_snapshots(const XmlNode *root)
{
	StrBuf b = {};
	XML_FOREACH (s, root, "snapshotSet/item") {
		add(&b, xml_text(s, "snapshotId"));
		add(&b, " of ");
		add(&b, xml_text(s, "volumeId"));
		add(&b, " ");
		add(&b, xml_text(s, "status"));
		add(&b, " ");
		add(&b, xml_text(s, "progress"));
		add(&b, " ");
		add_tags(&b, s);
		add(&b, "; ");
	}
	add(&b, "next=");
	add(&b, xml_text(root, "nextToken"));
	return strbuf_steal(&b);
}

static char *read_created(const XmlNode *root)
{
	return xasprintf("%s %s %s snapshot='%s' %s", root->name, xml_text(root, "volumeId"),
			 xml_text(root, "status"), xml_text(root, "snapshotId"),
			 xml_text(root, "encrypted"));
}

typedef struct Reply {
	const char *what, *format;
	char *(*read)(const XmlNode *root);
	const char *want;
} Reply;

static const Reply replies[] = {
	{"DescribeVolumes", describe_volumes, read_volumes,
	 "vol-0123456789abcdef0 in-use 10G gp3 [i-0aaaaaaaaaaaaaaa1@/dev/xvdba:attached] "
	 "{CSIVolumeName=pvc-1,note=a & b <c>,empty=}; "
	 "vol-0fedcba9876543210 available 200G io2 [] {}; next=dG9rZW4tMg=="},
	{"DescribeInstances", describe_instances, read_instances,
	 "i-0aaaaaaaaaaaaaaa1 m5.large: /dev/xvda=vol-root/attached "
	 "/dev/xvdba=vol-0123456789abcdef0/attached; i-2 t3.micro:; "
	 "i-3 c5.xlarge: /dev/xvdbb=vol-3/detaching; "},
	{"DescribeSnapshots", describe_snapshots, read_snapshots,
	 "snap-1 of vol-1 completed 100% {CSIVolumeSnapshotName=snapshot-1}; "
	 "snap-2 of vol-2 pending 42% {}; next=next-page"},
	{"CreateVolume", create_volume, read_created,
	 "CreateVolumeResponse vol-new creating snapshot='' true"},
};

/* The template with its namespace's date filled in. */
static char *with_namespace(const char *template, const char *date)
{
	const char *at = strstr(template, "@NS@");
	return xasprintf("%.*s%s%s", (int)(at - template), template, date, at + 4);
}

/* The reply with its default namespace turned into the prefix ec2:. */
static char *prefixed(const char *xml)
{
	StrBuf b = {};

	for (const char *p = xml; *p;) {
		if (p[0] == '<' && (p[1] == '/' || (p[1] != '?' && p[1] != '!'))) {
			size_t skip = p[1] == '/' ? 2 : 1;
			strbuf_add(&b, p, skip);
			strbuf_adds(&b, "ec2:");
			p += skip;
		} else if (strncmp(p, "xmlns=", 6) == 0) {
			strbuf_adds(&b, "xmlns:ec2=");
			p += 6;
		} else {
			strbuf_add(&b, p++, 1);
		}
	}
	return strbuf_steal(&b);
}

static void test_replies(void)
{
	for (size_t i = 0; i < ELEMENTSOF(replies); i++) {
		const Reply *r = &replies[i];
		for (size_t n = 0; n < ELEMENTSOF(namespaces); n++) {
			_cleanup_free_ char *xml = with_namespace(r->format, namespaces[n]);
			_cleanup_free_ char *pxml = prefixed(xml);
			_cleanup_xml_free_ XmlNode *root = NULL, *proot = NULL;
			_cleanup_free_ char *got = NULL, *pgot = NULL;

			ok(xml_parse(xml, strlen(xml), &root, NULL) == 0, "%s %s: parsed", r->what,
			   namespaces[n]);
			got = r->read(root);
			is_str(got, r->want, "%s %s: read", r->what, namespaces[n]);
			ok(xml_parse(pxml, strlen(pxml), &proot, NULL) == 0,
			   "%s %s with a prefix: parsed", r->what, namespaces[n]);
			pgot = r->read(proot);
			is_str(pgot, r->want, "%s %s with a prefix: read the same", r->what,
			       namespaces[n]);
		}
	}
}

static void test_tree(void)
{
	static const char xml[] = "<a xmlns=\"urn:x\"> <b>one</b> <c><b> two </b></c>"
				  "<b><![CDATA[<three>]]></b><d/></a>";
	_cleanup_xml_free_ XmlNode *root = NULL;

	ok(xml_parse(xml, strlen(xml), &root, NULL) == 0, "small tree parsed");
	is_str(root->name, "a", "root element, local name");
	ok(root->text == NULL, "an element with children has no text (whitespace dropped)");
	is_str(xml_text(root, "b"), "one", "first b");
	is_str(xml_text(xml_next(xml_child(root, "b")), ""), "<three>",
	       "next b (CDATA kept as text), skipping c");
	is_str(xml_text(root, "c/b"), " two ", "a leaf's text is kept as it is");
	is_str(xml_text(root, "d"), "", "an empty element has empty text");
	ok(!xml_text(root, "c"), "an element with children has no text");
	ok(!xml_find(root, "x/y") && !xml_text(NULL, "b"), "a missing path is NULL");
	ok(xml_search(root, "b") == xml_child(root, "b"), "search finds the first b, depth first");
	size_t count = 0;
	XML_FOREACH (b, root, "b")
		count++;
	is_int(count, 2, "XML_FOREACH walks the same-named siblings only");
}

static void test_refused(void)
{
	static const char *const bad[][2] = {
		{"", "no element found"},
		{"<a><b></a>", "mismatched tag"},
		{"<a></a><b/>", "junk after document element"},
		{"<x:a/>", "unbound prefix"},
		{"<?xml version=\"1.0\"?><!DOCTYPE lolz [<!ENTITY lol \"lol\">"
		 "<!ENTITY lol2 \"&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;\">]>"
		 "<lolz>&lol2;</lolz>",
		 "a document type declaration"},
		{"<!DOCTYPE a SYSTEM \"file:///etc/passwd\"><a>&x;</a>",
		 "a document type declaration"},
	};

	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		XmlNode *root = NULL;
		char *error = NULL;
		is_int(xml_parse(bad[i][0], strlen(bad[i][0]), &root, &error), -EBADMSG,
		       "refused: %.40s", bad[i][0]);
		ok(error && strstr(error, bad[i][1]) && strstr(error, "line"),
		   "...saying '%s' and where: %s", bad[i][1], error ? error : "(null)");
		ok(!root, "...and nothing returned");
		free(error);
	}

	StrBuf deep = {};
	for (int i = 0; i < XML_DEPTH_MAX + 1; i++)
		strbuf_adds(&deep, "<a>");
	for (int i = 0; i < XML_DEPTH_MAX + 1; i++)
		strbuf_adds(&deep, "</a>");
	XmlNode *root = NULL;
	char *error = NULL;
	is_int(xml_parse(deep.s, deep.len, &root, &error), -EBADMSG, "nesting past %d refused",
	       XML_DEPTH_MAX);
	ok(error && strstr(error, "nested too deep"), "...saying so: %s", error ? error : "(null)");
	free(error);
	strbuf_done(&deep);
	for (int i = 0; i < XML_DEPTH_MAX; i++)
		strbuf_adds(&deep, "<a>");
	for (int i = 0; i < XML_DEPTH_MAX; i++)
		strbuf_adds(&deep, "</a>");
	ok(xml_parse(deep.s, deep.len, &root, NULL) == 0, "nesting of %d accepted", XML_DEPTH_MAX);
	xml_free(root);
	strbuf_done(&deep);
}

int main(void)
{
	test_replies();
	test_tree();
	test_refused();
	return tap_done();
}
