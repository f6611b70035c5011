# SPDX-License-Identifier: Apache-2.0
"""The metrics endpoint under slowloris: clients that send a request line, then one header
line a second, and never finish. The server closes each within the request deadline of its
accept however it trickles, and /healthz and /metrics answer promptly while the attack goes
on, with 40 such clients (more than the 32 slots the endpoint had) and with 200 (more than the
64 it has), each reconnecting as soon as it is dropped, as a real attacker would. The attack
runs in a process of its own, so that the probes do not wait on the test's interpreter. A
connection kept alive gets the same deadline for each next request."""

import http.client
import json
import re
import selectors
import socket
import subprocess
import sys
import time

from harness import run, wait_for

ADDR = ["--metrics-address", "127.0.0.1:0"]
DEADLINE = 5.0  # METRICS_SERVER_REQUEST_SEC: a request must be in within this of its accept
SLACK = 1.5  # the test's own scheduling on a loaded machine
ANSWER_WITHIN = 2.0  # what a probe may wait (the kubelet's timeoutSeconds is 1 by default)
ATTACK = 12.0  # seconds: more than two deadlines, so that dropped clients came back


def address(d):
    m = wait_for(lambda: re.search(r"metrics on http://(\S+)/metrics", d.logs()), what="metrics address")
    host, port = m.group(1).rsplit(":", 1)
    return host, int(port)


class Slowloris:
    """n clients, each trickling one header line a second, reconnecting when dropped.
    lifetimes: how long each dropped connection lived, from its connect to the server's close."""

    def __init__(self, host, port, n):
        self.host, self.port, self.n = host, port, n
        self.sel = selectors.DefaultSelector()
        self.born = {}
        self.lines = {}
        self.lifetimes = []
        self.connects = 0

    def connect(self):
        s = socket.create_connection((self.host, self.port), timeout=2)
        s.setblocking(False)
        s.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        self.born[s] = time.monotonic()
        self.lines[s] = 0
        self.sel.register(s, selectors.EVENT_READ)
        self.connects += 1

    def dropped(self, s):
        self.lifetimes.append(time.monotonic() - self.born.pop(s))
        del self.lines[s]
        self.sel.unregister(s)
        s.close()

    def run(self, seconds):
        end = time.monotonic() + seconds
        tick = time.monotonic()
        while True:
            now = time.monotonic()
            if now >= end:
                break
            while len(self.born) < self.n:
                self.connect()
            if now >= tick:  # one more header line on every connection
                for s in list(self.born):
                    try:
                        s.send(b"X-Slow-%d: %s\r\n" % (self.lines[s], b"a" * 8))
                        self.lines[s] += 1
                    except OSError:
                        self.dropped(s)
                tick = now + 1
            for key, _ in self.sel.select(max(0, min(tick, end) - time.monotonic())):
                s = key.fileobj
                try:
                    if s.recv(4096):
                        continue  # an answer to an unfinished request: it closes next
                except OSError:
                    pass
                self.dropped(s)

    def close(self):
        """The ages of the connections still open (never dropped)."""
        now = time.monotonic()
        ages = [now - t for t in self.born.values()]
        for s in list(self.born):
            self.sel.unregister(s)
            s.close()
        self.born.clear()
        return ages


def probe(host, port, path):
    """(status or the error, seconds) of one GET on a new connection, as the kubelet does."""
    t = time.monotonic()
    c = http.client.HTTPConnection(host, port, timeout=5)
    try:
        c.request("GET", path)
        r = c.getresponse()
        body = r.read()
        status = r.status if path != "/healthz" or body == b"ok\n" else (r.status, body)
    except OSError as e:
        status = repr(e)
    finally:
        c.close()
    return status, time.monotonic() - t


def dropped(host, port):
    """volplug_metrics_connections_dropped_total by reason."""
    c = http.client.HTTPConnection(host, port, timeout=5)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    return {m.group(1): float(m.group(2)) for m in re.finditer(
        r'^volplug_metrics_connections_dropped_total\{reason="(\w+)"\} (\S+)$', text, re.M)}


def attack(ctx, clients, reason):
    d = ctx.daemon(args=ADDR)
    host, port = address(d)
    loris = subprocess.Popen([sys.executable, __file__, "loris", host, str(port), str(clients)],
                             stdout=subprocess.PIPE, text=True)
    end = time.monotonic() + ATTACK - 0.5
    probes = []
    try:
        time.sleep(1.5)  # the slots are taken by then
        while time.monotonic() < end:
            for path in ("/healthz", "/metrics"):
                probes.append((path,) + probe(host, port, path))
            time.sleep(0.5)
        out, _ = loris.communicate(timeout=30)
    finally:
        if loris.poll() is None:
            loris.kill()
            loris.wait()
    assert loris.returncode == 0, loris.returncode
    result = json.loads(out)
    lifetimes, ages = result["lifetimes"], result["ages"]
    assert d.proc.poll() is None, "volplugd lives"
    lat = sorted(p[2] for p in probes)
    failed = [p for p in probes if p[1] != 200 or p[2] > ANSWER_WITHIN]
    longest = max(lifetimes + ages)
    summary = "%d probes, %d late or failed, latency median %.0f ms max %.0f ms; %d connects, " \
              "%d dropped, longest life %.1f s" % (
                  len(probes), len(failed), 1000 * lat[len(lat) // 2] if lat else -1,
                  1000 * lat[-1] if lat else -1, result["connects"], len(lifetimes), longest)
    assert len(probes) >= 10 and not failed, "%s: %s" % (summary, failed[:6])
    assert lifetimes and longest <= DEADLINE + SLACK, \
        "every slow connection closed within %.0f s of its accept: %s" % (DEADLINE, summary)
    # The endpoint serves as before once the attack is over, and its counter says why it
    # closed what it closed.
    assert probe(host, port, "/healthz")[0] == 200
    counts = dropped(host, port)
    assert counts.get(reason, 0) > 0 and sum(counts.values()) >= len(lifetimes), (counts, summary)
    return summary + "; dropped %s" % counts


def test_slowloris_40(ctx):
    """40 slow clients, more than the 32 slots the endpoint had."""
    return attack(ctx, 40, "request_timeout")


def test_slowloris_200(ctx):
    """200 slow clients, more than the 64 slots: each new client evicts a slow one."""
    return attack(ctx, 200, "evicted")


def test_kept_alive_connection(ctx):
    """A connection kept alive has the request deadline for each next request, counted from
    its previous answer: three scrapes 4 s apart on one connection are answered (the third comes
    8 s after the accept), and one left idle is closed 5 s after its last answer."""
    d = ctx.daemon(args=ADDR)
    host, port = address(d)
    c = http.client.HTTPConnection(host, port, timeout=10)
    for i in range(3):
        if i:
            time.sleep(4)
        c.request("GET", "/metrics")
        r = c.getresponse()
        assert r.status == 200 and b"volplug_metrics_connections_dropped_total" in r.read()
        answered = time.monotonic()
    c.sock.settimeout(10)
    try:
        eof = c.sock.recv(1) == b""
    except OSError:
        eof = True
    idle = time.monotonic() - answered
    c.close()
    assert eof and DEADLINE - 0.5 <= idle <= DEADLINE + SLACK, "closed after %.1f s idle" % idle
    assert dropped(host, port) == {"request_timeout": 1}
    return "closed after %.1f s idle" % idle


def loris_main(host, port, clients):
    """The attacking process: prints what it saw as JSON."""
    loris = Slowloris(host, int(port), int(clients))
    loris.run(ATTACK)
    ages = loris.close()
    json.dump({"connects": loris.connects, "lifetimes": loris.lifetimes, "ages": ages}, sys.stdout)


if __name__ == "__main__":
    if sys.argv[1:2] == ["loris"]:
        loris_main(*sys.argv[2:])
    else:
        run([test_slowloris_40, test_slowloris_200, test_kept_alive_connection])
