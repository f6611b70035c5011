/* SPDX-License-Identifier: Apache-2.0 */
#include <expat.h>
#include <limits.h>
#include <string.h>

#include "alloc.h"
#include "aws-xml.h"
#include "dlopen-util.h"
#include "strbuf.h"

/* Loaded at the first reply parsed, not linked: 92 KiB of the resident set of a daemon that
 * never speaks to AWS. */
#define LIBEXPAT "libexpat.so.1"

static struct {
	__typeof__(XML_ParserCreateNS) *ParserCreateNS;
	__typeof__(XML_SetUserData) *SetUserData;
	__typeof__(XML_SetElementHandler) *SetElementHandler;
	__typeof__(XML_SetCharacterDataHandler) *SetCharacterDataHandler;
	__typeof__(XML_SetStartDoctypeDeclHandler) *SetStartDoctypeDeclHandler;
	__typeof__(XML_Parse) *Parse;
	__typeof__(XML_ErrorString) *ErrorString;
	__typeof__(XML_GetErrorCode) *GetErrorCode;
	__typeof__(XML_GetCurrentLineNumber) *GetCurrentLineNumber;
	__typeof__(XML_GetCurrentColumnNumber) *GetCurrentColumnNumber;
	__typeof__(XML_ParserFree) *ParserFree;
	__typeof__(XML_StopParser) *StopParser;
} expat;

static const DlSym expat_syms[] = {
	DL_SYM(expat, ParserCreateNS, "XML_"),
	DL_SYM(expat, SetUserData, "XML_"),
	DL_SYM(expat, SetElementHandler, "XML_"),
	DL_SYM(expat, SetCharacterDataHandler, "XML_"),
	DL_SYM(expat, SetStartDoctypeDeclHandler, "XML_"),
	DL_SYM(expat, Parse, "XML_"),
	DL_SYM(expat, ErrorString, "XML_"),
	DL_SYM(expat, GetErrorCode, "XML_"),
	DL_SYM(expat, GetCurrentLineNumber, "XML_"),
	DL_SYM(expat, GetCurrentColumnNumber, "XML_"),
	DL_SYM(expat, ParserFree, "XML_"),
	DL_SYM(expat, StopParser, "XML_"),
};

static DlLibrary expat_library = DL_LIBRARY(LIBEXPAT, expat_syms);

/* Namespace URI and local name come joined by this byte (a URI never holds it). */
#define NS_SEP '\x01'

typedef struct Builder {
	XML_Parser parser;
	XmlNode *root, *current;
	StrBuf text; /* character data of current so far */
	unsigned depth;
	const char *refused; /* why we stopped the parser, or NULL */
} Builder;

static void on_start(void *userdata, const XML_Char *name, const XML_Char **attrs)
{
	Builder *b = userdata;
	const char *local = strrchr(name, NS_SEP);

	(void)attrs;
	if (++b->depth > XML_DEPTH_MAX) {
		b->refused = "nested too deep";
		expat.StopParser(b->parser, XML_FALSE);
		return;
	}
	XmlNode *n = xnew0(XmlNode, 1);
	n->name = xstrdup(local ? local + 1 : name);
	n->parent = b->current;
	if (!b->current)
		b->root = n;
	else if (b->current->last_child)
		b->current->last_child->next = n;
	else
		b->current->first_child = n;
	if (b->current)
		b->current->last_child = n;
	b->current = n;
	strbuf_done(&b->text); /* text before a child belongs to no leaf */
}

static void on_end(void *userdata, const XML_Char *name)
{
	Builder *b = userdata;
	XmlNode *n = b->current;

	(void)name;
	if (n->first_child)
		strbuf_done(&b->text);
	else
		n->text = strbuf_steal(&b->text);
	b->current = n->parent;
	b->depth--;
}

static void on_text(void *userdata, const XML_Char *s, int len)
{
	Builder *b = userdata;

	if (b->current && !b->current->first_child)
		strbuf_add(&b->text, s, (size_t)len);
}

static void on_doctype(void *userdata, const XML_Char *name, const XML_Char *sysid,
		       const XML_Char *pubid, int has_internal_subset)
{
	Builder *b = userdata;

	(void)name, (void)sysid, (void)pubid, (void)has_internal_subset;
	b->refused = "a document type declaration";
	expat.StopParser(b->parser, XML_FALSE);
}

int xml_parse(const char *data, size_t len, XmlNode **ret, char **ret_error)
{
	Builder b = {};
	int r = 0;

	if (len > INT_MAX) {
		if (ret_error)
			*ret_error = xstrdup("XML: too large");
		return -EBADMSG;
	}
	r = dl_library_load(&expat_library, ret_error);
	if (r < 0)
		return r;
	b.parser = expat.ParserCreateNS(NULL, NS_SEP);
	if (!b.parser)
		abort();
	expat.SetUserData(b.parser, &b);
	expat.SetElementHandler(b.parser, on_start, on_end);
	expat.SetCharacterDataHandler(b.parser, on_text);
	expat.SetStartDoctypeDeclHandler(b.parser, on_doctype);
	if (expat.Parse(b.parser, data, (int)len, XML_TRUE) != XML_STATUS_OK) {
		if (ret_error)
			*ret_error = xasprintf(
				"XML: %s at line %lu, column %lu",
				b.refused ? b.refused
					  : expat.ErrorString(expat.GetErrorCode(b.parser)),
				(unsigned long)expat.GetCurrentLineNumber(b.parser),
				(unsigned long)expat.GetCurrentColumnNumber(b.parser) + 1);
		r = -EBADMSG;
	}
	expat.ParserFree(b.parser);
	strbuf_done(&b.text);
	if (r < 0) {
		xml_free(b.root);
		return r;
	}
	*ret = b.root;
	return 0;
}

void xml_free(XmlNode *n)
{
	while (n) {
		XmlNode *next = n->next;
		xml_free(n->first_child);
		free(n->name);
		free(n->text);
		free(n);
		n = next;
	}
}

const XmlNode *xml_child(const XmlNode *n, const char *name)
{
	for (const XmlNode *c = n ? n->first_child : NULL; c; c = c->next)
		if (strcmp(c->name, name) == 0)
			return c;
	return NULL;
}

const XmlNode *xml_next(const XmlNode *n)
{
	for (const XmlNode *s = n->next; s; s = s->next)
		if (strcmp(s->name, n->name) == 0)
			return s;
	return NULL;
}

const XmlNode *xml_find(const XmlNode *n, const char *path)
{
	char step[256];

	while (n && *path) {
		size_t len = strcspn(path, "/");
		if (len >= sizeof(step))
			return NULL;
		memcpy(step, path, len);
		step[len] = 0;
		n = xml_child(n, step);
		path += len + (path[len] == '/');
	}
	return n;
}

const char *xml_text(const XmlNode *n, const char *path)
{
	const XmlNode *leaf = xml_find(n, path);
	return leaf ? leaf->text : NULL;
}

const XmlNode *xml_search(const XmlNode *n, const char *name)
{
	if (!n)
		return NULL;
	if (strcmp(n->name, name) == 0)
		return n;
	for (const XmlNode *c = n->first_child; c; c = c->next) {
		const XmlNode *found = xml_search(c, name);
		if (found)
			return found;
	}
	return NULL;
}

size_t xml_tags(const XmlNode *n, const char *path, Strmap *tags)
{
	size_t count = 0;

	XML_FOREACH (item, xml_find(n, path), "item") {
		const char *key = xml_text(item, "key"), *value = xml_text(item, "value");
		if (!key)
			continue;
		strmap_set(tags, key, value ? value : "");
		count++;
	}
	return count;
}
