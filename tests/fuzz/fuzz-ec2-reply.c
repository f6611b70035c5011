/* SPDX-License-Identifier: Apache-2.0 */
/* EC2 and STS replies (what an endpoint, or whatever answers in its place, sends back): read
 * into a tree or refused, never a crash; a tree that is built is well formed, and an error
 * reply always gives a message. */
#include <string.h>

#include "aws-xml.h"
#include "ec2.h"
#include "fuzz.h"

/* Parent links, leaf texts and depth hold below n. */
static void check_tree(const XmlNode *n, unsigned depth)
{
	FUZZ_ASSERT(depth <= XML_DEPTH_MAX);
	FUZZ_ASSERT(n->name && (n->first_child ? !n->text : !!n->text));
	for (const XmlNode *c = n->first_child; c; c = c->next) {
		FUZZ_ASSERT(c->parent == n);
		FUZZ_ASSERT(c->next || c == n->last_child);
		check_tree(c, depth + 1);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	XmlNode *root = NULL;
	Ec2Error e;

	if (xml_parse((const char *)data, size, &root, NULL) == 0) {
		check_tree(root, 1);
		XML_FOREACH (vol, root, "volumeSet/item")
			XML_FOREACH (att, vol, "attachmentSet/item")
				(void)xml_text(att, "instanceId");
		XML_FOREACH (res, root, "reservationSet/item")
			XML_FOREACH (inst, res, "instancesSet/item")
				XML_FOREACH (bdm, inst, "blockDeviceMapping/item")
					(void)xml_text(bdm, "ebs/volumeId");
		Strmap tags = {};
		xml_tags(xml_find(root, "snapshotSet/item"), "tagSet", &tags);
		strmap_done(&tags);
		xml_free(root);
	}
	ec2_error_from_reply(400, (const char *)data, size, &e);
	FUZZ_ASSERT(e.message && (!e.code || strncmp(e.message, e.code, strlen(e.code)) == 0));
	ec2_error_done(&e);
	return 0;
}
