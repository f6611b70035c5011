# SPDX-License-Identifier: Apache-2.0
"""The Query API wire format: form parameters in, XML out.

Parameters are parsed against a per-action spec, so a name the action does not take is refused
(UnknownParameter) instead of silently ignored. A spec maps a parameter name to str, int, bool,
a list [spec] (sent as Name.1, Name.2, ...) or a dict (a structure: Name.Member). Replies are
built from plain dicts: a dict is an element with children, a list is an element of <item>s."""

import uuid
from xml.sax.saxutils import escape

EC2_NS = "http://ec2.amazonaws.com/doc/2016-11-15/"
EC2_VERSION = "2016-11-15"

# HTTP status of the codes whose status is not 400.
STATUS = {
    "AuthFailure": 401,
    "UnauthorizedOperation": 403,
    "DryRunOperation": 412,
    "InternalError": 500,
    "RequestLimitExceeded": 503,
    "ServiceUnavailable": 503,
    "Unavailable": 503,
}


class Ec2Error(Exception):
    """An EC2 error reply: code, message, HTTP status (from STATUS unless given)."""

    def __init__(self, code, message, status=None):
        super().__init__("%s: %s" % (code, message))
        self.code = code
        self.message = message
        self.status = status or STATUS.get(code, 400)


def invalid(param, message):
    """InvalidParameterValue naming the parameter at fault."""
    return Ec2Error("InvalidParameterValue", "%s (parameter %s)" % (message, param))


def combination(message):
    return Ec2Error("InvalidParameterCombination", message)


def missing(param):
    return Ec2Error("MissingParameter", "The request must contain the parameter %s" % param)


def _tree(pairs):
    """Splits dotted names into a tree: Filter.1.Value.2=x becomes
    {"Filter": {"1": {"Value": {"2": x}}}}."""
    tree = {}
    for name, value in pairs:
        node = tree
        parts = name.split(".")
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise Ec2Error("UnknownParameter", "The parameter %s is not recognized" % name)
            node = child
        if isinstance(node.get(parts[-1]), dict):
            raise Ec2Error("UnknownParameter", "The parameter %s is not recognized" % name)
        node[parts[-1]] = value
    return tree


def _convert(spec, value, name):
    if isinstance(spec, list):
        if not isinstance(value, dict):
            raise Ec2Error("UnknownParameter", "The parameter %s is not recognized" % name)
        for k in value:
            if not (k.isdigit() and int(k) > 0):
                raise Ec2Error("UnknownParameter", "The parameter %s.%s is not recognized"
                               % (name, k))
        return [_convert(spec[0], value[k], "%s.%s" % (name, k))
                for k in sorted(value, key=int)]
    if isinstance(spec, dict):
        if not isinstance(value, dict):
            raise Ec2Error("UnknownParameter", "The parameter %s is not recognized" % name)
        out = {}
        for key, sub in value.items():
            if key not in spec:
                raise Ec2Error("UnknownParameter",
                               "The parameter %s.%s is not recognized" % (name, key))
            out[key] = _convert(spec[key], sub, "%s.%s" % (name, key))
        return out
    if isinstance(value, dict):
        raise Ec2Error("UnknownParameter", "The parameter %s.%s is not recognized"
                       % (name, next(iter(value))))
    if spec is int:
        try:
            return int(value, 10)
        except ValueError:
            raise invalid(name, "Value (%s) for parameter %s is invalid. Expected: 'Integer'"
                          % (value, name)) from None
    if spec is bool:
        if value.lower() not in ("true", "false"):
            raise invalid(name, "Value (%s) for parameter %s is invalid. Expected: 'Boolean'"
                          % (value, name))
        return value.lower() == "true"
    return value


def parse(pairs, spec):
    """The parameters of one call as a dict following spec (absent ones missing). Raises
    Ec2Error(UnknownParameter) for a name the spec lacks, InvalidParameterValue for bad types."""
    tree = _tree(pairs)
    out = {}
    for name, value in tree.items():
        if name not in spec:
            if isinstance(value, dict):
                name = "%s.%s" % (name, next(iter(value)))
            raise Ec2Error("UnknownParameter", "The parameter %s is not recognized" % name)
        out[name] = _convert(spec[name], value, name)
    return out


def _xml(tag, value, out):
    if value is None:
        return
    if isinstance(value, bool):
        out.append("<%s>%s</%s>" % (tag, "true" if value else "false", tag))
    elif isinstance(value, dict):
        out.append("<%s>" % tag)
        for k, v in value.items():
            _xml(k, v, out)
        out.append("</%s>" % tag)
    elif isinstance(value, list):
        out.append("<%s>" % tag)
        for v in value:
            _xml("item", v, out)
        out.append("</%s>" % tag)
    else:
        out.append("<%s>%s</%s>" % (tag, escape(str(value)), tag))


def new_request_id():
    return str(uuid.uuid4())


def reply(action, body, request_id, namespace=EC2_NS):
    """The XML of a successful reply: <ActionResponse xmlns=...><requestId/>body...</>."""
    out = ['<?xml version="1.0" encoding="UTF-8"?>\n<%sResponse xmlns="%s">' % (action, namespace),
           "<requestId>%s</requestId>" % request_id]
    for k, v in body.items():
        _xml(k, v, out)
    out.append("</%sResponse>" % action)
    return "".join(out).encode()


def error_reply(err, request_id):
    """The XML of an EC2 error: <Response><Errors><Error><Code/><Message/>...<RequestID/>."""
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>%s</Code>'
            "<Message>%s</Message></Error></Errors><RequestID>%s</RequestID></Response>"
            % (escape(err.code), escape(err.message), request_id)).encode()


def xml_element(tag, value):
    """One element (and its children) as XML text, for replies of other shapes (STS)."""
    out = []
    _xml(tag, value, out)
    return "".join(out)
