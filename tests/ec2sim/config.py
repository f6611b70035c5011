# SPDX-License-Identifier: Apache-2.0
"""The simulator's settings: defaults, and checked changes (from flags, a --config file or
POST /_sim/config). A change is all or nothing: on a bad key or value nothing is applied."""

import copy
import re

DELAY_KINDS = ("create", "attach", "detach", "modify", "optimize", "snapshot", "delete")
DEFAULT_ACCESS_KEY = "AKIAEC2SIMULATOR0001"
DEFAULT_SECRET_KEY = "ec2sim/secret/key/for/tests/only/00000000"
FAULT_KEYS = {"action", "code", "message", "status", "rate", "count", "when"}


def defaults(region="us-east-1"):
    """A fresh settings dict for region."""
    zones = [region + z for z in "abc"]
    return {
        "region": region,
        "zones": zones,
        "account_id": "123456789012",
        "seed": None,
        "instances": [
            {"id": "i-0a000000000000001", "type": "m5.large", "zone": zones[0]},
            {"id": "i-0a000000000000002", "type": "m5.large", "zone": zones[0]},
            {"id": "i-0b000000000000003", "type": "t2.medium", "zone": zones[1]},
        ],
        "state_delay": 0.0,
        "delays": {},
        "consistency_window": 0.0,
        "modify_limit": 4,
        "modify_period": 24 * 3600.0,
        "enis": 1,
        "nitro_attachment_slots": 28,
        "xen_attachment_limit": 40,
        "create_error_next": 0,
        "create_error_rate": 0.0,
        "snapshot_error_next": 0,
        "modify_fail_next": 0,
        "faults": [],
        "latency": 0.0,
        "auth": True,
        "client_tokens": True,
        "single_attach": True,
        "attachment_limits": True,
        "credentials": [{"access_key": DEFAULT_ACCESS_KEY, "secret_key": DEFAULT_SECRET_KEY}],
        "max_clock_skew": 300.0,
        "credential_ttl": 3600.0,
        "web_identity_tokens": [],
        "role_name": "ec2sim-role",
        "imds_instance": None,
        "imds_v1": False,
        "imds_ebs_mappings": 0,
    }


def _number(lo=0.0, hi=None, integer=False):
    def check(v):
        ok = isinstance(v, int) if integer else isinstance(v, (int, float))
        if not ok or isinstance(v, bool) or v < lo or (hi is not None and v > hi):
            return "a%s number %s%s" % ("n integer" if integer else "", ">= %g" % lo,
                                        " and <= %g" % hi if hi is not None else "")
        return None
    return check


def _bool(v):
    return None if isinstance(v, bool) else "true or false"


def _delays(v):
    if not isinstance(v, dict) or any(k not in DELAY_KINDS or _number()(s) for k, s in v.items()):
        return "an object of seconds by kind (%s)" % ", ".join(DELAY_KINDS)
    return None


def _faults(v):
    if not isinstance(v, list):
        return "a list of fault rules"
    for rule in v:
        if not isinstance(rule, dict) or set(rule) - FAULT_KEYS or "code" not in rule:
            return "fault rules with a code and only the keys %s" % ", ".join(sorted(FAULT_KEYS))
        if _number(0, 1)(rule.get("rate", 1.0)) or rule.get("when", "before") not in \
                ("before", "after") or _number(0, integer=True)(rule.get("count", 0)):
            return "fault rules with rate 0..1, count >= 0, when before|after"
        action = rule.get("action", "*")
        if not isinstance(action, str) and _strings(action):
            return "fault rules whose action is a name, a list of names or *"
        if _number(100, 599, integer=True)(rule.get("status", 500)):
            return "fault rules whose status is an HTTP status"
    return None


def _credentials(v):
    if not isinstance(v, list) or any(
            not isinstance(c, dict) or set(c) - {"access_key", "secret_key", "token"}
            or not c.get("access_key") or not c.get("secret_key") for c in v):
        return "a list of {access_key, secret_key[, token]}"
    return None


def _strings(v):
    if not isinstance(v, list) or not all(isinstance(s, str) and s for s in v):
        return "a list of strings"
    return None


def _account(v):
    return None if isinstance(v, str) and re.match(r"^\d{12}$", v) else "12 digits"


def _optional_string(v):
    return None if v is None or isinstance(v, str) else "a string or null"


def _seed(v):
    return None if v is None or (isinstance(v, int) and not isinstance(v, bool)) else \
        "an integer or null"


def _instances(v):
    return None if isinstance(v, list) and all(isinstance(i, dict) for i in v) else \
        "a list of {id, type, zone[, state, enis, tags]}"


# key -> (check, may change while running). The others change only with POST /_sim/reset.
CHECKS = {
    "region": (lambda v: None if isinstance(v, str) and re.match(r"^[a-z]+(-[a-z]+)+-\d$", v)
               else "a region name such as us-east-1", False),
    "zones": (_strings, False),
    "account_id": (_account, False),
    "seed": (_seed, False),
    "instances": (_instances, False),
    "state_delay": (_number(), True),
    "delays": (_delays, True),
    "consistency_window": (_number(), True),
    "modify_limit": (_number(0, integer=True), True),
    "modify_period": (_number(), True),
    "enis": (_number(0, integer=True), True),
    "nitro_attachment_slots": (_number(1, integer=True), True),
    "xen_attachment_limit": (_number(1, integer=True), True),
    "create_error_next": (_number(0, integer=True), True),
    "create_error_rate": (_number(0, 1), True),
    "snapshot_error_next": (_number(0, integer=True), True),
    "modify_fail_next": (_number(0, integer=True), True),
    "faults": (_faults, True),
    "latency": (_number(), True),
    "auth": (_bool, True),
    "client_tokens": (_bool, True),
    "single_attach": (_bool, True),
    "attachment_limits": (_bool, True),
    "credentials": (_credentials, True),
    "max_clock_skew": (_number(1), True),
    "credential_ttl": (_number(1), True),
    "web_identity_tokens": (lambda v: None if isinstance(v, list) and all(
        isinstance(s, str) for s in v) else "a list of strings", True),
    "role_name": (lambda v: None if v is None or isinstance(v, str) and re.match(
        r"^[\w+=,.@-]{1,64}$", v) else "an IAM role name or null (no role)", True),
    "imds_instance": (_optional_string, True),
    "imds_v1": (_bool, True),
    "imds_ebs_mappings": (_number(0, 26, integer=True), True),
}


class ConfigError(ValueError):
    pass


def merged(cfg, changes, running=True):
    """cfg with changes applied (a new dict; delays merge key by key). Raises ConfigError naming
    the key at fault. running: refuse keys that change only with a reset."""
    if not isinstance(changes, dict):
        raise ConfigError("the configuration must be a JSON object")
    out = copy.deepcopy(cfg)
    for key, value in changes.items():
        if key not in CHECKS:
            raise ConfigError("unknown setting %r (known: %s)" % (key, ", ".join(sorted(CHECKS))))
        check, live = CHECKS[key]
        if running and not live:
            raise ConfigError("%s changes only with POST /_sim/reset" % key)
        problem = check(value)
        if problem:
            raise ConfigError("%s must be %s, not %r" % (key, problem, value))
        if key == "delays":
            out["delays"].update(value)
        else:
            out[key] = copy.deepcopy(value)
    if "region" in changes:
        fresh = defaults(out["region"])
        for key in ("zones", "instances"):
            if key not in changes:
                out[key] = fresh[key]
    return out
