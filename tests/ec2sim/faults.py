# SPDX-License-Identifier: Apache-2.0
"""Injected faults: rules from the "faults" setting, each
{"action": name | [names] | "*", "code": ..., "rate": 0..1 (1), "count": N (unlimited),
 "when": "before" | "after" ("before"), "message": ..., "status": ...}.

"before" answers the error instead of acting; "after" acts, then answers the error, as when a
reply is lost: the caller cannot tell whether its call took effect. "*" matches every EC2
action (not STS). The first rule that fires wins; a rule with a count fires that many times."""

import random
import threading

from wire import Ec2Error

MESSAGES = {
    "RequestLimitExceeded": "Request limit exceeded.",
    "InternalError": "An internal error has occurred",
    "ServiceUnavailable": "The service is unavailable. Please try again shortly.",
    "Unavailable": "The server is overloaded and can't handle the request.",
}


class Faults:
    def __init__(self, seed):
        self.lock = threading.Lock()
        self.rng = random.Random(seed)

    def pick(self, cfg, action, when, ec2_action=True):
        """The Ec2Error to answer now for action at this point (before/after), or None."""
        with self.lock:
            for rule in cfg["faults"]:
                if rule.get("when", "before") != when:
                    continue
                want = rule.get("action", "*")
                if want == "*":
                    if not ec2_action:
                        continue
                elif action != want and action not in (want if isinstance(want, list) else []):
                    continue
                if rule.get("count") is not None and rule["count"] <= 0:
                    continue
                if self.rng.random() >= rule.get("rate", 1.0):
                    continue
                if rule.get("count") is not None:
                    rule["count"] -= 1
                code = rule["code"]
                return Ec2Error(code, rule.get("message") or MESSAGES.get(code, "Injected fault"),
                                rule.get("status"))
        return None
