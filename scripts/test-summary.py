#!/usr/bin/python3
# Counts test results over meson test logs: every TAP line of every test is one test; a test
# program that failed without reporting a TAP failure counts as one failure. Prints one
# "N passed, N failed, N skipped" line and exits 1 when anything failed.
import json
import re
import sys

passed = failed = skipped = 0


def count_tap(lines):
    ok = bad = skip = 0
    for out in lines:
        if re.match(r"^ok \d+", out):
            if "# SKIP" in out:
                skip += 1
            else:
                ok += 1
        elif re.match(r"^not ok \d+", out):
            bad += 1
        elif re.match(r"^1\.\.0 # SKIP", out):
            skip += 1
    return ok, bad, skip


args = sys.argv[1:]
tap_files = [args[i + 1] for i, a in enumerate(args) if a == "--tap" and i + 1 < len(args)]
logs = [a for i, a in enumerate(args) if a != "--tap" and (i == 0 or args[i - 1] != "--tap")]
for path in tap_files:
    ok, bad, skip = count_tap(open(path).read().splitlines())
    passed, failed, skipped = passed + ok, failed + bad, skipped + skip
for path in logs:
    try:
        lines = open(path).read().splitlines()
    except FileNotFoundError:
        print("test-summary: no log at %s (did the tests run?)" % path, file=sys.stderr)
        failed += 1
        continue
    for line in lines:
        t = json.loads(line)
        tap_ok, tap_fail, tap_skip = count_tap((t.get("stdout") or "").splitlines())
        result = t.get("result")
        if result in ("FAIL", "TIMEOUT", "ERROR", "UNEXPECTEDPASS") and tap_fail == 0:
            tap_fail = 1
            print("test-summary: %s: %s" % (t.get("name"), result), file=sys.stderr)
        if result == "SKIP" and tap_ok + tap_fail + tap_skip == 0:
            tap_skip = 1
        passed += tap_ok
        failed += tap_fail
        skipped += tap_skip
print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
sys.exit(1 if failed else 0)
