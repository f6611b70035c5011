/* SPDX-License-Identifier: Apache-2.0 */
/* The attach limit of an instance type, as the AWS EBS CSI driver computes it from the EC2 User
 * Guide's "Amazon EBS volume limits for Amazon EC2 instances" and "Instance store volume
 * limits":
 *
 *   Xen (the previous generations below): 40 EBS volumes, the root volume among them: 39 for
 *     data, less any other EBS volume of the instance's block device mapping.
 *   Nitro, shared limit (most Nitro types): 28 attachment slots shared by EBS volumes, network
 *     interfaces and NVMe instance store volumes: 28 - ENIs - instance store - root - other
 *     EBS volumes of the mapping; a few types cap EBS volumes lower (the caps below).
 *   Nitro, dedicated limit (the 7th- and 8th-generation families, Graviton4 and later, recent
 *     accelerated ones: the list below): a number of EBS volumes of their own by size, the
 *     root volume among them; ENIs apart.
 *
 * Types the rules do not give sit in types[] with EC2's own number: the instance types'
 * MaximumEbsAttachments and AttachmentLimitType (DescribeInstanceTypes, EbsInfo), as the AWS
 * EBS CSI driver's volume limits table had them in August 2026 (1028 Nitro types; with these
 * rows every one of them gets the driver's limit).
 *
 * A family the table does not know is taken for Nitro with the shared limit: every family
 * since 2017 is. The limit never goes below 1 (Kubernetes reads 0 as "no limit"). The
 * --max-volumes-per-node flag overrides all of this. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ebs-limits.h"
#include "macro.h"

#define NITRO_SLOTS 28
#define XEN_DATA_VOLUMES 39

/* Families on Xen; i3 only in its virtualised sizes (i3.metal is Nitro). */
static const char XEN_FAMILIES[] =
	"c1 c3 c4 d2 g2 g3 h1 i2 i3 m1 m2 m3 m4 p2 p3 r3 r4 t1 t2 x1 x1e";

/* Nitro types with a dedicated EBS limit: the families, then limit by size. */
static const char DEDICATED_FAMILIES[] =
	"c7a c7i c7i-flex c8a c8g c8gb c8gd c8gn c8i c8i-flex c8ib c8id c8in c8ine c9g c9gd f2 g6 "
	"g6e "
	"g6f g7 g7e gr6 gr6f hpc7a hpc8a i7i i7ie i8g i8ge m7a m7i m7i-flex m8a m8azn m8g m8gb "
	"m8gd "
	"m8gn m8i m8i-flex m8ib m8id m8idb m8idn m8in m8ine m9g m9gd p4d p4de p5 p5e p5en p6-b200 "
	"p6-b300 r7a r7i r7iz r8a r8g r8gb r8gd r8gn r8i r8i-flex r8ib r8id r8idb r8idn r8in trn2 "
	"u7i "
	"u7i-12tb u7i-6tb u7i-8tb u7in-16tb u7in-24tb u7in-32tb x8aedz x8g x8i";
static const struct {
	const char *sizes;
	uint32_t volumes;
} dedicated[] = {
	{"medium large xlarge 2xlarge 3xlarge 4xlarge 6xlarge 8xlarge 12xlarge", 32},
	{"16xlarge", 48},
	{"24xlarge", 64},
	{"32xlarge", 88},
	{"48xlarge 96xlarge", 128},
	{"metal-16xl metal-24xl", 39},
	{"metal-32xl metal-48xl metal-96xl", 79},
};

/* NVMe instance store volumes, which take shared slots. */
static const struct {
	const char *families, *sizes;
	unsigned volumes;
} instance_store[] = {
	{"c5d", "large xlarge 2xlarge 4xlarge 9xlarge", 1},
	{"c5d", "12xlarge 18xlarge", 2},
	{"c5d", "24xlarge metal", 4},
	{"m5d m5dn r5d r5dn m5ad r5ad", "large xlarge 2xlarge", 1},
	{"m5d m5dn r5d r5dn m5ad r5ad", "4xlarge 8xlarge 12xlarge", 2},
	{"m5d m5dn r5d r5dn m5ad r5ad", "16xlarge 24xlarge metal", 4},
	{"c6gd m6gd r6gd x2gd", "medium large xlarge 2xlarge 4xlarge 8xlarge", 1},
	{"c6gd m6gd r6gd x2gd", "12xlarge 16xlarge metal", 2},
	{"m6id", "large xlarge 2xlarge 4xlarge 8xlarge", 1},
	{"m6id", "12xlarge 16xlarge", 2},
	{"m6id", "24xlarge 32xlarge metal", 4},
	{"i3en", "large xlarge 3xlarge", 1},
	{"i3en", "2xlarge 6xlarge", 2},
	{"i3en", "12xlarge", 4},
	{"i3en", "24xlarge metal", 8},
	{"i3", "metal", 8},
	{"i4i", "large xlarge 2xlarge 4xlarge", 1},
	{"i4i", "8xlarge", 2},
	{"i4i", "16xlarge", 4},
	{"i4i", "32xlarge metal", 8},
	{"z1d", "large xlarge 2xlarge 3xlarge 6xlarge", 1},
	{"z1d", "12xlarge metal", 2},
	{"g4dn", "xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge", 1},
	{"g4dn", "metal", 2},
};

/* Types whose EBS volumes are capped below the shared slots. */
static const struct {
	const char *type;
	uint32_t volumes;
} capped[] = {
	{"d3.8xlarge", 3},    {"d3en.12xlarge", 3}, {"g5.48xlarge", 9},	   {"inf1.xlarge", 26},
	{"inf1.2xlarge", 26}, {"inf1.6xlarge", 23}, {"inf1.24xlarge", 11}, {"mac1.metal", 16},
};

/* Types whose EBS limit the rules above do not give, as EC2's DescribeInstanceTypes says it
 * (EbsInfo: MaximumEbsAttachments and AttachmentLimitType), sorted by type. volumes: for a
 * dedicated limit, EBS volumes with the root one; for a shared one, the slots left to EBS
 * volumes (the root one among them) with one network interface attached, instance store
 * volumes and accelerators already taken. */
static const struct type_limit {
	const char *type;
	uint16_t volumes;
	bool dedicated;
} types[] = {
	{"a1.metal", 31, false},
	{"c5.metal", 31, false},
	{"c5ad.12xlarge", 25, false},
	{"c5ad.16xlarge", 25, false},
	{"c5ad.24xlarge", 25, false},
	{"c5ad.2xlarge", 26, false},
	{"c5ad.4xlarge", 25, false},
	{"c5ad.8xlarge", 25, false},
	{"c5ad.large", 26, false},
	{"c5ad.xlarge", 26, false},
	{"c5d.metal", 31, false},
	{"c5n.metal", 31, false},
	{"c6a.metal", 31, false},
	{"c6g.metal", 31, false},
	{"c6gd.metal", 31, false},
	{"c6i.metal", 31, false},
	{"c6id.12xlarge", 25, false},
	{"c6id.16xlarge", 25, false},
	{"c6id.24xlarge", 23, false},
	{"c6id.2xlarge", 26, false},
	{"c6id.32xlarge", 23, false},
	{"c6id.4xlarge", 26, false},
	{"c6id.8xlarge", 26, false},
	{"c6id.large", 26, false},
	{"c6id.metal", 31, false},
	{"c6id.xlarge", 26, false},
	{"c6in.metal", 31, false},
	{"c7g.metal", 31, false},
	{"c7gd.12xlarge", 25, false},
	{"c7gd.16xlarge", 25, false},
	{"c7gd.2xlarge", 26, false},
	{"c7gd.4xlarge", 26, false},
	{"c7gd.8xlarge", 26, false},
	{"c7gd.large", 26, false},
	{"c7gd.medium", 26, false},
	{"c7gd.metal", 31, false},
	{"c7gd.xlarge", 26, false},
	{"c7gn.metal", 31, false},
	{"c8a.metal-24xl", 64, true},
	{"c8gb.metal-48xl", 78, true},
	{"c8gn.metal-48xl", 78, true},
	{"c8i.metal-48xl", 64, true},
	{"c8ib.metal-48xl", 64, true},
	{"c8ib.metal-96xl", 78, true},
	{"c8id.metal-48xl", 64, true},
	{"c8in.metal-48xl", 64, true},
	{"c8in.metal-96xl", 78, true},
	{"d3.2xlarge", 21, false},
	{"d3.4xlarge", 15, false},
	{"d3.8xlarge", 3, false},
	{"d3.xlarge", 24, false},
	{"d3en.12xlarge", 3, false},
	{"d3en.2xlarge", 23, false},
	{"d3en.4xlarge", 19, false},
	{"d3en.6xlarge", 15, false},
	{"d3en.8xlarge", 11, false},
	{"d3en.xlarge", 25, false},
	{"dl2q.24xlarge", 19, false},
	{"g4ad.16xlarge", 21, false},
	{"g4ad.2xlarge", 25, false},
	{"g4ad.4xlarge", 25, false},
	{"g4ad.8xlarge", 24, false},
	{"g4ad.xlarge", 25, false},
	{"g4dn.12xlarge", 22, false},
	{"g4dn.16xlarge", 25, false},
	{"g4dn.2xlarge", 25, false},
	{"g4dn.4xlarge", 25, false},
	{"g4dn.8xlarge", 25, false},
	{"g4dn.metal", 31, false},
	{"g4dn.xlarge", 25, false},
	{"g5.12xlarge", 22, false},
	{"g5.16xlarge", 25, false},
	{"g5.24xlarge", 22, false},
	{"g5.2xlarge", 25, false},
	{"g5.48xlarge", 9, false},
	{"g5.4xlarge", 25, false},
	{"g5.8xlarge", 25, false},
	{"g5.xlarge", 25, false},
	{"g5g.16xlarge", 25, false},
	{"g5g.2xlarge", 26, false},
	{"g5g.4xlarge", 26, false},
	{"g5g.8xlarge", 26, false},
	{"g5g.metal", 31, false},
	{"g5g.xlarge", 26, false},
	{"hpc6id.32xlarge", 23, false},
	{"hpc7a.12xlarge", 27, true},
	{"hpc7a.24xlarge", 27, true},
	{"hpc7a.48xlarge", 27, true},
	{"hpc7a.96xlarge", 27, true},
	{"hpc8a.96xlarge", 27, true},
	{"i3en.metal", 31, false},
	{"i4g.16xlarge", 23, false},
	{"i4g.2xlarge", 26, false},
	{"i4g.4xlarge", 26, false},
	{"i4g.8xlarge", 25, false},
	{"i4g.large", 26, false},
	{"i4g.xlarge", 26, false},
	{"i4i.12xlarge", 24, false},
	{"i4i.24xlarge", 21, false},
	{"i4i.metal", 31, false},
	{"i7ie.18xlarge", 48, true},
	{"i8ge.18xlarge", 48, true},
	{"im4gn.16xlarge", 23, false},
	{"im4gn.2xlarge", 26, false},
	{"im4gn.4xlarge", 26, false},
	{"im4gn.8xlarge", 25, false},
	{"im4gn.large", 26, false},
	{"im4gn.xlarge", 26, false},
	{"inf1.24xlarge", 11, false},
	{"inf1.2xlarge", 26, false},
	{"inf1.6xlarge", 23, false},
	{"inf1.xlarge", 26, false},
	{"inf2.24xlarge", 28, false},
	{"inf2.48xlarge", 28, false},
	{"inf2.8xlarge", 26, false},
	{"inf2.xlarge", 26, false},
	{"is4gen.2xlarge", 26, false},
	{"is4gen.4xlarge", 25, false},
	{"is4gen.8xlarge", 23, false},
	{"is4gen.large", 26, false},
	{"is4gen.medium", 26, false},
	{"is4gen.xlarge", 26, false},
	{"m5.metal", 31, false},
	{"m5d.metal", 31, false},
	{"m5dn.metal", 31, false},
	{"m5n.metal", 31, false},
	{"m5zn.metal", 31, false},
	{"m6a.metal", 31, false},
	{"m6g.metal", 31, false},
	{"m6gd.metal", 31, false},
	{"m6i.metal", 31, false},
	{"m6id.metal", 31, false},
	{"m6idn.12xlarge", 25, false},
	{"m6idn.16xlarge", 25, false},
	{"m6idn.24xlarge", 23, false},
	{"m6idn.2xlarge", 26, false},
	{"m6idn.32xlarge", 23, false},
	{"m6idn.4xlarge", 26, false},
	{"m6idn.8xlarge", 26, false},
	{"m6idn.large", 26, false},
	{"m6idn.metal", 31, false},
	{"m6idn.xlarge", 26, false},
	{"m6in.metal", 31, false},
	{"m7g.metal", 31, false},
	{"m7gd.12xlarge", 25, false},
	{"m7gd.16xlarge", 25, false},
	{"m7gd.2xlarge", 26, false},
	{"m7gd.4xlarge", 26, false},
	{"m7gd.8xlarge", 26, false},
	{"m7gd.large", 26, false},
	{"m7gd.medium", 26, false},
	{"m7gd.metal", 31, false},
	{"m7gd.xlarge", 26, false},
	{"m8a.metal-24xl", 64, true},
	{"m8azn.12xlarge", 64, true},
	{"m8azn.24xlarge", 128, true},
	{"m8azn.metal-12xl", 64, true},
	{"m8azn.metal-24xl", 79, true},
	{"m8gb.metal-48xl", 78, true},
	{"m8gn.metal-48xl", 78, true},
	{"m8i.metal-48xl", 64, true},
	{"m8ib.metal-48xl", 64, true},
	{"m8ib.metal-96xl", 78, true},
	{"m8id.metal-48xl", 64, true},
	{"m8idb.metal-48xl", 64, true},
	{"m8idb.metal-96xl", 78, true},
	{"m8idn.metal-48xl", 64, true},
	{"m8idn.metal-96xl", 78, true},
	{"m8in.metal-48xl", 64, true},
	{"m8in.metal-96xl", 78, true},
	{"mac-m3ultra.metal", 10, false},
	{"mac-m4.metal", 31, false},
	{"mac-m4max.metal", 10, false},
	{"mac-m4pro.metal", 31, false},
	{"mac1.metal", 16, false},
	{"mac2-m1ultra.metal", 10, false},
	{"mac2-m2.metal", 10, false},
	{"mac2-m2pro.metal", 10, false},
	{"mac2.metal", 10, false},
	{"p3dn.24xlarge", 17, false},
	{"p4d.24xlarge", 28, true},
	{"p4de.24xlarge", 28, true},
	{"p5.48xlarge", 64, true},
	{"p5e.48xlarge", 64, true},
	{"p5en.48xlarge", 64, true},
	{"p6-b200.48xlarge", 64, true},
	{"p6-b300.48xlarge", 64, true},
	{"r5.metal", 31, false},
	{"r5b.metal", 31, false},
	{"r5d.metal", 31, false},
	{"r5dn.metal", 31, false},
	{"r5n.metal", 31, false},
	{"r6a.metal", 31, false},
	{"r6g.metal", 31, false},
	{"r6gd.metal", 31, false},
	{"r6i.metal", 31, false},
	{"r6id.12xlarge", 25, false},
	{"r6id.16xlarge", 25, false},
	{"r6id.24xlarge", 23, false},
	{"r6id.2xlarge", 26, false},
	{"r6id.32xlarge", 23, false},
	{"r6id.4xlarge", 26, false},
	{"r6id.8xlarge", 26, false},
	{"r6id.large", 26, false},
	{"r6id.metal", 31, false},
	{"r6id.xlarge", 26, false},
	{"r6idn.12xlarge", 25, false},
	{"r6idn.16xlarge", 25, false},
	{"r6idn.24xlarge", 23, false},
	{"r6idn.2xlarge", 26, false},
	{"r6idn.32xlarge", 23, false},
	{"r6idn.4xlarge", 26, false},
	{"r6idn.8xlarge", 26, false},
	{"r6idn.large", 26, false},
	{"r6idn.metal", 31, false},
	{"r6idn.xlarge", 26, false},
	{"r6in.metal", 31, false},
	{"r7g.metal", 31, false},
	{"r7gd.12xlarge", 25, false},
	{"r7gd.16xlarge", 25, false},
	{"r7gd.2xlarge", 26, false},
	{"r7gd.4xlarge", 26, false},
	{"r7gd.8xlarge", 26, false},
	{"r7gd.large", 26, false},
	{"r7gd.medium", 26, false},
	{"r7gd.metal", 31, false},
	{"r7gd.xlarge", 26, false},
	{"r8a.metal-24xl", 64, true},
	{"r8gb.metal-48xl", 78, true},
	{"r8gn.metal-48xl", 78, true},
	{"r8i.metal-48xl", 64, true},
	{"r8ib.metal-48xl", 64, true},
	{"r8ib.metal-96xl", 78, true},
	{"r8id.metal-48xl", 64, true},
	{"r8idb.metal-48xl", 64, true},
	{"r8idb.metal-96xl", 78, true},
	{"r8idn.metal-48xl", 64, true},
	{"r8idn.metal-96xl", 78, true},
	{"r8in.metal-48xl", 64, true},
	{"r8in.metal-96xl", 78, true},
	{"trn1.2xlarge", 25, false},
	{"trn1.32xlarge", 28, false},
	{"trn1n.32xlarge", 28, false},
	{"trn2.48xlarge", 64, true},
	{"u7i-12tb.224xlarge", 128, true},
	{"u7i-6tb.112xlarge", 128, true},
	{"u7i-8tb.112xlarge", 128, true},
	{"u7in-16tb.224xlarge", 128, true},
	{"u7in-24tb.224xlarge", 128, true},
	{"u7in-32tb.224xlarge", 128, true},
	{"vt1.3xlarge", 25, false},
	{"vt1.6xlarge", 23, false},
	{"x2gd.metal", 31, false},
	{"x2idn.16xlarge", 26, false},
	{"x2idn.24xlarge", 25, false},
	{"x2idn.32xlarge", 25, false},
	{"x2idn.metal", 31, false},
	{"x2iedn.16xlarge", 26, false},
	{"x2iedn.24xlarge", 25, false},
	{"x2iedn.2xlarge", 26, false},
	{"x2iedn.32xlarge", 25, false},
	{"x2iedn.4xlarge", 26, false},
	{"x2iedn.8xlarge", 26, false},
	{"x2iedn.metal", 31, false},
	{"x2iedn.xlarge", 26, false},
	{"x2iezn.metal", 31, false},
	{"x8aedz.12xlarge", 64, true},
	{"x8aedz.24xlarge", 128, true},
	{"x8aedz.metal-12xl", 64, true},
	{"x8aedz.metal-24xl", 79, true},
	{"x8i.64xlarge", 128, true},
	{"x8i.metal-48xl", 64, true},
	{"z1d.metal", 31, false},
};

/* Whether word is one of the space-separated words of list. */
static bool word_in(const char *list, const char *word, size_t len)
{
	for (const char *p = list; *p;) {
		size_t n = strcspn(p, " ");
		if (n == len && strncmp(p, word, len) == 0)
			return true;
		p += n;
		p += *p == ' ';
	}
	return false;
}

bool ebs_instance_type_valid(const char *type)
{
	const char *dot = type ? strchr(type, '.') : NULL;

	if (!dot || dot == type || !dot[1] || strchr(dot + 1, '.') || strlen(type) > 64)
		return false;
	for (const char *p = type; *p; p++)
		if (!islower((unsigned char)*p) && !isdigit((unsigned char)*p) && *p != '-' &&
		    p != dot)
			return false;
	return true;
}

static bool is_xen(const char *type, size_t family_len)
{
	return word_in(XEN_FAMILIES, type, family_len) && strcmp(type, "i3.metal") != 0;
}

const char *ebs_instance_hypervisor(const char *type)
{
	return is_xen(type, strcspn(type, ".")) ? "xen" : "nitro";
}

static uint32_t dedicated_limit(const char *type, size_t family_len)
{
	const char *size = type + family_len + 1;

	if (!word_in(DEDICATED_FAMILIES, type, family_len))
		return 0;
	for (size_t i = 0; i < ELEMENTSOF(dedicated); i++)
		if (word_in(dedicated[i].sizes, size, strlen(size)))
			return dedicated[i].volumes;
	return 0;
}

static unsigned instance_store_volumes(const char *type, size_t family_len)
{
	const char *size = type + family_len + 1;

	for (size_t i = 0; i < ELEMENTSOF(instance_store); i++)
		if (word_in(instance_store[i].families, type, family_len) &&
		    word_in(instance_store[i].sizes, size, strlen(size)))
			return instance_store[i].volumes;
	return 0;
}

/* The cap of EBS volumes of a shared-limit type, 0 for none. */
static uint32_t cap(const char *type, size_t family_len)
{
	bool metal = strcmp(type + family_len + 1, "metal") == 0;

	for (size_t i = 0; i < ELEMENTSOF(capped); i++)
		if (strcmp(capped[i].type, type) == 0)
			return capped[i].volumes;
	if (strncmp(type, "u-", 2) == 0) /* high memory */
		return metal ? 19 : 27;
	return metal ? 31 : 0;
}

static int type_cmp(const void *key, const void *elem)
{
	return strcmp(key, ((const struct type_limit *)elem)->type);
}

static const struct type_limit *type_limit(const char *type)
{
	return bsearch(type, types, ELEMENTSOF(types), sizeof(types[0]), type_cmp);
}

static uint32_t at_least_one(int64_t n)
{
	return n < 1 ? 1 : (uint32_t)n;
}

int ebs_attach_limit(const EbsInstanceShape *instance, uint32_t *ret)
{
	const char *type = instance->type;

	if (!ebs_instance_type_valid(type))
		return -EINVAL;
	size_t family_len = strcspn(type, ".");
	int64_t extra = instance->extra_mappings;
	if (is_xen(type, family_len)) {
		*ret = at_least_one(XEN_DATA_VOLUMES - extra);
		return 0;
	}
	const struct type_limit *known = type_limit(type);
	if (known) {
		int64_t more_enis = instance->enis > 1 ? instance->enis - 1 : 0;
		*ret = at_least_one((int64_t)known->volumes - 1 - extra -
				    (known->dedicated ? 0 : more_enis));
		return 0;
	}
	uint32_t dedicated_volumes = dedicated_limit(type, family_len);
	if (dedicated_volumes) {
		*ret = at_least_one((int64_t)dedicated_volumes - 1 - extra);
		return 0;
	}
	int64_t slots = NITRO_SLOTS;
	uint32_t c = cap(type, family_len);
	if (c && c < slots)
		slots = c;
	slots -= (instance->enis ? instance->enis : 1) + instance_store_volumes(type, family_len);
	*ret = at_least_one(slots - 1 - extra);
	return 0;
}
