/* SPDX-License-Identifier: Apache-2.0 */
/* AWS Query API replies (EC2, STS) as a small tree, parsed with expat. Element names keep
 * their local part only, so a reply in the 2013-10-15 namespace reads as one in 2016-11-15,
 * and prefixed names read as unprefixed ones. A leaf keeps its character data; an element
 * with children keeps only the children (the whitespace between them is dropped).
 *
 * Walking a list:
 *
 *     XML_FOREACH(vol, reply, "volumeSet/item") {
 *             const char *id = xml_text(vol, "volumeId");
 *             XML_FOREACH(att, vol, "attachmentSet/item")
 *                     ... xml_text(att, "instanceId") ...
 *     }
 *
 * Replies are untrusted input: no DTD is accepted (so no entity expansion), nesting stops at
 * XML_DEPTH_MAX and the size at the caller's cap. */
#pragma once

#include <stddef.h>

#include "macro.h"
#include "strmap.h"

#define XML_DEPTH_MAX 64

typedef struct XmlNode XmlNode;
struct XmlNode {
	char *name; /* local name, without namespace or prefix */
	char *text; /* a leaf's character data ("" when empty); NULL when it has children */
	XmlNode *parent, *first_child, *last_child, *next;
};

/* Parses the len bytes at data into a tree; *ret is its root element. Returns 0, or -EBADMSG
 * (malformed, a DTD, too deep) with *ret_error (may be NULL) saying where, or -ENOENT when
 * libexpat, which the first call loads, cannot be loaded. */
int xml_parse(const char *data, size_t len, XmlNode **ret, char **ret_error);
/* Frees n and everything below it; NULL is a no-op. */
void xml_free(XmlNode *n);
DEFINE_TRIVIAL_CLEANUP_FUNC(XmlNode *, xml_free);
#define _cleanup_xml_free_ _cleanup_(xml_freep)

/* The first child of n named name, or NULL (n may be NULL). */
const XmlNode *xml_child(const XmlNode *n, const char *name);
/* The next sibling of n with n's name, or NULL. */
const XmlNode *xml_next(const XmlNode *n);
/* The node at path below n, "a/b/c" following the first child of each name; path "" is n.
 * NULL when a step is missing (n may be NULL). */
const XmlNode *xml_find(const XmlNode *n, const char *path);
/* The text of the leaf at path below n; NULL when missing or not a leaf. */
const char *xml_text(const XmlNode *n, const char *path);
/* The first element named name anywhere below n, depth first (n included); NULL if none. */
const XmlNode *xml_search(const XmlNode *n, const char *name);
/* Adds every item/key -> item/value of the tag list at path (a tagSet) to *tags. Returns how
 * many there were. */
size_t xml_tags(const XmlNode *n, const char *path, Strmap *tags);

/* Each node at path below n, then its same-named siblings: the items of a list. */
#define XML_FOREACH(it, n, path) \
	for (const XmlNode *it = xml_find((n), (path)); it; it = xml_next(it))
