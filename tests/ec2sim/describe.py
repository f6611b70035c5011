# SPDX-License-Identifier: Apache-2.0
"""What the Describe actions share: ID syntax, filters, MaxResults/NextToken paging, tags."""

import base64
import fnmatch
import json
import re

from wire import Ec2Error, combination, invalid

ID_PATTERN = {
    "vol": re.compile(r"^vol-([0-9a-f]{8}|[0-9a-f]{17})$"),
    "snap": re.compile(r"^snap-([0-9a-f]{8}|[0-9a-f]{17})$"),
    "i": re.compile(r"^i-([0-9a-f]{8}|[0-9a-f]{17})$"),
}
MALFORMED = {"vol": "InvalidVolumeID.Malformed", "snap": "InvalidSnapshotID.Malformed",
             "i": "InvalidInstanceID.Malformed"}


def check_id(kind, value):
    """Raises <Kind>ID.Malformed unless value is a well-formed ID of that kind (vol, snap, i)."""
    if not ID_PATTERN[kind].match(value or ""):
        raise Ec2Error(MALFORMED[kind], 'Invalid id: "%s" (expecting "%s-...")' % (value, kind))


def match_filters(filters, fields, obj, tags):
    """True when obj passes every filter. fields maps a filter name to a function giving the
    object's values for it; tag:<key> and tag-key work on tags. Values may use * and ?."""
    for f in filters or []:
        name = f.get("Name")
        values = f.get("Value") or []
        if not name:
            raise invalid("Filter.N.Name", "a filter needs a Name")
        if name.startswith("tag:"):
            have = [tags[name[4:]]] if name[4:] in tags else []
        elif name == "tag-key":
            have = list(tags)
        elif name in fields:
            have = [str(v) for v in fields[name](obj)]
        else:
            raise invalid("Filter", "The filter '%s' is invalid" % name)
        if not any(fnmatch.fnmatchcase(h, v) for h in have for v in values):
            return False
    return True


def bool_text(b):
    return "true" if b else "false"


def page(items, params, kind, lo, hi, ids_param):
    """(one page of items sorted by id, next token or None). Pages only when MaxResults or
    NextToken is given; MaxResults must lie in [lo, hi] and cannot go with explicit IDs."""
    max_results = params.get("MaxResults")
    token = params.get("NextToken")
    if max_results is None and token is None:
        return items, None
    if params.get(ids_param):
        raise combination("The parameter %s cannot be used with the parameter maxResults"
                          % ids_param)
    if max_results is None:
        max_results = hi
    if not lo <= max_results <= hi:
        raise invalid("MaxResults", "Value ( %d ) for parameter maxResults is invalid. "
                      "Expecting a value between %d and %d" % (max_results, lo, hi))
    items = sorted(items, key=lambda o: o.id)
    if token:
        try:
            state = json.loads(base64.urlsafe_b64decode(token.encode()))
            after = state["after"]
            assert state["kind"] == kind and isinstance(after, str)
        except Exception:
            raise Ec2Error("InvalidPaginationToken",
                           "The pagination token %r is invalid" % token) from None
        items = [o for o in items if o.id > after]
    if len(items) <= max_results:
        return items, None
    items = items[:max_results]
    token = base64.urlsafe_b64encode(json.dumps({"kind": kind, "after": items[-1].id}).encode())
    return items, token.decode()


MAX_TAGS = 50


def check_tags(tags, param):
    """{key: value} from a Tag list, checked as EC2 does: keys 1-128 characters, values up to
    256, no aws: prefix, no key twice."""
    out = {}
    for t in tags or []:
        key, value = t.get("Key"), t.get("Value", "")
        if not key:
            raise invalid(param + ".Key", "Tag keys must not be empty")
        if len(key) > 128:
            raise invalid(param + ".Key", "Tag key exceeds the maximum length of 128 characters")
        if len(value) > 256:
            raise invalid(param + ".Value",
                          "Tag value exceeds the maximum length of 256 characters")
        if key.lower().startswith("aws:"):
            raise invalid(param + ".Key", "Tag keys starting with 'aws:' are reserved for "
                          "internal use")
        if key in out:
            raise invalid(param + ".Key", "Duplicate tag key '%s'" % key)
        out[key] = value
    return out


def add_tags(resource, new):
    merged = dict(resource.tags)
    merged.update(new)
    if len(merged) > MAX_TAGS:
        raise Ec2Error("TagLimitExceeded", "The maximum number of tags (%d) for resource '%s' "
                       "has been reached" % (MAX_TAGS, resource.id))
    resource.tags = merged


def tag_set(tags):
    return [{"key": k, "value": v} for k, v in tags.items()] or None
