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
 *   Nitro, dedicated limit (the 7th-generation Intel and AMD families below): a number of EBS
 *     volumes of their own by size, the root volume among them.
 *
 * A family the table does not know is taken for Nitro with the shared limit: every family
 * since 2017 is. The limit never goes below 1 (Kubernetes reads 0 as "no limit"). The
 * --max-volumes-per-node flag overrides all of this. */
#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "ebs-limits.h"
#include "macro.h"

#define NITRO_SLOTS 28
#define XEN_DATA_VOLUMES 39

/* Families on Xen; i3 only in its virtualised sizes (i3.metal is Nitro). */
static const char XEN_FAMILIES[] =
	"c1 c3 c4 d2 g2 g3 h1 i2 i3 m1 m2 m3 m4 p2 p3 r3 r4 t1 t2 x1 x1e";

/* Nitro types with a dedicated EBS limit: the families, then limit by size. */
static const char DEDICATED_FAMILIES[] = "c7a c7i m7a m7i r7a r7i r7iz u7i";
static const struct {
	const char *sizes;
	uint32_t volumes;
} dedicated[] = {
	{"medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge", 32},
	{"16xlarge", 48},
	{"24xlarge", 64},
	{"32xlarge", 88},
	{"48xlarge", 128},
	{"metal-16xl metal-24xl", 31},
	{"metal-32xl metal-48xl", 79},
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
