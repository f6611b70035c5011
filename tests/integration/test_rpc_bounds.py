# SPDX-License-Identifier: Apache-2.0
"""volplugd's gRPC socket under abuse: raw HTTP/2 floods (rapid reset, pipelined calls,
CONTINUATION), over-size messages and metadata. Each flood runs against a fresh daemon while
another connection keeps calling GetPluginInfo; the daemon's resident set grows by less than
GROWTH_MAX (64 MiB), the abusive connection is closed (GOAWAY or EOF) and the other client is
answered within LATENCY_MAX (2 s) during and after."""

import os
import select
import socket
import struct
import sys
import threading
import time

import grpc

try:
    import hpack  # Debian's python3-hpack, which python3-h2 brings
except ImportError:
    sys.exit("test_rpc_bounds: no hpack module: install python3-h2 (scripts/install-deps)")

from harness import run

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = (
    0, 1, 3, 4, 6, 7, 8, 9)
END_STREAM, ACK, END_HEADERS = 1, 1, 4
CANCEL = 8
SETTINGS_MAX_CONCURRENT_STREAMS, SETTINGS_INITIAL_WINDOW_SIZE = 3, 4
SETTINGS_MAX_HEADER_LIST_SIZE = 6
MIB = 1 << 20

# What the daemon may grow by under any one flood (its resident set starts near 16 MiB).
GROWTH_MAX = 64 * MIB
# How long the other client may wait for GetPluginInfo while a flood runs.
LATENCY_MAX = 2.0

# Under AddressSanitizer (make test in CI), freed memory waits in a quarantine of 256 MiB
# before it is used again, and the resident set measures the quarantine: keep it small.
DAEMON_ENV = {"ASAN_OPTIONS": ":".join(filter(None, [os.environ.get("ASAN_OPTIONS"),
                                                      "quarantine_size_mb=8"]))}

PLUGIN_INFO = "/csi.v1.Identity/GetPluginInfo"
EMPTY_MESSAGE = b"\0\0\0\0\0"  # a gRPC frame holding an empty protobuf message


def frame(kind, flags, stream, payload=b""):
    n = len(payload)
    return struct.pack(">BHBBL", n >> 16, n & 0xFFFF, kind, flags, stream) + payload


def request_headers(path=PLUGIN_INFO, extra=()):
    """The header block of a gRPC call, literal only (it does not touch HPACK's table, so one
    encoding serves any number of streams)."""
    enc = hpack.Encoder()
    enc.header_table_size = 0
    headers = [(":method", "POST"), (":scheme", "http"), (":path", path),
               (":authority", "localhost"), ("content-type", "application/grpc"),
               ("te", "trailers")] + list(extra)
    return enc.encode([hpack.NeverIndexedHeaderTuple(k, v) for k, v in headers])


def literal(name, value_len):
    """An HPACK literal without indexing, a new name, value of value_len bytes 'a' (no
    Huffman): its head, to which the value's bytes follow."""
    def integer(v, prefix_bits, first=0):
        limit = (1 << prefix_bits) - 1
        if v < limit:
            return bytes([first | v])
        out = [first | limit]
        v -= limit
        while v >= 128:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
        return bytes(out)
    return b"\x00" + integer(len(name), 7) + name + integer(value_len, 7)


class RawH2:
    """A raw HTTP/2 client on volplugd's unix socket that answers SETTINGS and PING, reads
    whatever the server sends and remembers a GOAWAY or the end of the connection."""

    def __init__(self, path, ack_settings=True):
        self.ack_settings = ack_settings
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        # A server that stops reading without closing must not hang the test.
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 5, 0))
        self.stalled = False
        self.lock = threading.Lock()
        self.settings = None
        self.goaway = None  # (last stream, error code, debug text)
        self.closed = threading.Event()
        self.got_settings = threading.Event()
        self.rst_received = 0
        self.trailers = 0
        self.next_stream = 1
        self.send_failed = False
        self.send(PREFACE + frame(SETTINGS, 0, 0, struct.pack(">HL", SETTINGS_INITIAL_WINDOW_SIZE,
                                                               (1 << 31) - 1)) +
                  frame(WINDOW_UPDATE, 0, 0, struct.pack(">L", (1 << 31) - 1 - 65535)))
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        assert self.got_settings.wait(10), "no SETTINGS from the server"

    def send(self, data):
        if self.send_failed:
            return False
        try:
            with self.lock:
                self.sock.sendall(data)
            return True
        except BlockingIOError:
            self.stalled = True
            self.send_failed = True
            return False
        except OSError:
            self.send_failed = True
            return False

    def _read(self):
        buf = b""
        try:
            while True:
                chunk = self.sock.recv(1 << 20)
                if not chunk:
                    break
                buf += chunk
                while len(buf) >= 9:
                    n = (buf[0] << 16) | (buf[1] << 8) | buf[2]
                    if len(buf) < 9 + n:
                        break
                    kind, flags = buf[3], buf[4]
                    stream = struct.unpack(">L", buf[5:9])[0] & 0x7FFFFFFF
                    payload = buf[9:9 + n]
                    buf = buf[9 + n:]
                    self._frame(kind, flags, stream, payload)
        except OSError:
            pass
        self.closed.set()

    def _frame(self, kind, flags, stream, payload):
        if kind == SETTINGS and not flags & ACK:
            self.settings = {struct.unpack(">H", payload[i:i + 2])[0]:
                             struct.unpack(">L", payload[i + 2:i + 6])[0]
                             for i in range(0, len(payload), 6)}
            if self.ack_settings:
                self.send(frame(SETTINGS, ACK, 0))
            self.got_settings.set()
        elif kind == PING and not flags & ACK:
            self.send(frame(PING, ACK, 0, payload))
        elif kind == GOAWAY:
            last, code = struct.unpack(">LL", payload[:8])
            self.goaway = (last & 0x7FFFFFFF, code, payload[8:].decode(errors="replace"))
        elif kind == RST_STREAM:
            self.rst_received += 1
        elif kind == HEADERS and flags & END_STREAM:
            self.trailers += 1

    def streams(self, n):
        first = self.next_stream
        self.next_stream += 2 * n
        return range(first, first + 2 * n, 2)

    def flood(self, chunks, seconds=20):
        """Sends the chunks until the server stops reading (or for at most seconds); returns
        the bytes it took."""
        sent = 0
        deadline = time.monotonic() + seconds
        for chunk in chunks:
            if self.closed.is_set() or time.monotonic() > deadline or not self.send(chunk):
                break
            sent += len(chunk)
        return sent

    def wait_closed(self, timeout):
        """True when the server ended the connection (a GOAWAY, or EOF) within timeout."""
        self.closed.wait(timeout)
        return self.closed.is_set() or self.goaway is not None

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.reader.join(5)


def status_kib(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError("no %s in /proc/%d/status" % (field, pid))


class Watch:
    """While a flood runs: the daemon's resident set sampled, and another connection calling
    GetPluginInfo over and over; what each saw, afterwards."""

    def __init__(self, d):
        self.d = d
        self.pid = d.proc.pid
        # AddressSanitizer's redzones, shadow and quarantine double what a call costs.
        with open("/proc/%d/maps" % self.pid) as f:
            self.growth_max = GROWTH_MAX * (2 if "libasan" in f.read() else 1)
        self.start_rss = status_kib(self.pid, "VmRSS") * 1024
        self.peak_rss = self.start_rss
        self.latencies = []
        self.errors = []
        self.stop = threading.Event()
        self.channel = grpc.insecure_channel("unix:" + d.socket)
        self.stub = self.channel.unary_unary(PLUGIN_INFO)
        self.stub(b"", timeout=10)  # connected before the flood starts
        self.threads = [threading.Thread(target=self._sample, daemon=True),
                        threading.Thread(target=self._call, daemon=True)]
        for t in self.threads:
            t.start()
        self.t0 = time.monotonic()

    def _sample(self):
        while not self.stop.is_set():
            try:
                self.peak_rss = max(self.peak_rss, status_kib(self.pid, "VmRSS") * 1024)
            except (FileNotFoundError, ProcessLookupError, AssertionError):
                return  # the daemon is gone (a zombie shows no VmRSS)
            time.sleep(0.01)

    def _call(self):
        while not self.stop.is_set():
            t = time.monotonic()
            try:
                self.stub(b"", timeout=LATENCY_MAX * 5)
                self.latencies.append(time.monotonic() - t)
            except grpc.RpcError as e:
                self.errors.append("%s: %s" % (e.code(), e.details()))
            time.sleep(0.05)

    def finish(self):
        """Stops watching; returns a line of figures."""
        self.seconds = time.monotonic() - self.t0
        self.stop.set()
        for t in self.threads:
            t.join(LATENCY_MAX * 6)
        self.peak_rss = max(self.peak_rss, status_kib(self.pid, "VmHWM") * 1024)
        self.end_rss = status_kib(self.pid, "VmRSS") * 1024
        self.channel.close()
        self.note = "RSS %.0f -> peak %.0f, after %.0f MiB in %.1fs; other client: %d calls, slowest %.2fs" % (
            self.start_rss / MIB, self.peak_rss / MIB, self.end_rss / MIB, self.seconds,
            len(self.latencies), max(self.latencies or [0]))
        print("# " + self.note, flush=True)
        return self.note

    def check(self):
        assert not self.errors, "the other client failed: %s (%s)" % (self.errors[:3], self.note)
        assert self.latencies, "the other client got no answer (%s)" % self.note
        slowest = max(self.latencies)
        assert slowest < LATENCY_MAX, "the other client waited %.2fs (%s)" % (slowest, self.note)
        growth = self.peak_rss - self.start_rss
        assert growth < self.growth_max, "volplugd grew by %.0f MiB, bound %d MiB (%s)" % (
            growth / MIB, self.growth_max // MIB, self.note)
        # Answered promptly after the flood, too; and it still stops when told.
        self.d.call("GetPluginInfo", timeout=LATENCY_MAX)
        rc = self.d.stop(timeout=15)
        assert rc == 0, "volplugd exited with %s after the flood" % rc


def closed_note(c):
    if c.goaway is not None:
        return "GOAWAY(code %d, %r)" % (c.goaway[1], c.goaway[2][:60])
    return "EOF" if c.closed.is_set() else "still open"


def test_advertises_stream_and_header_limits(ctx):
    d = ctx.daemon()
    c = RawH2(d.socket)
    s = c.settings
    c.close()
    assert s.get(SETTINGS_MAX_CONCURRENT_STREAMS, 1 << 32) <= 1024, s
    assert s.get(SETTINGS_MAX_HEADER_LIST_SIZE, 1 << 32) <= 64 * 1024, s
    return "SETTINGS %s" % sorted(s.items())


def test_rapid_reset_flood(ctx):
    """(a) 100,000 HEADERS+RST_STREAM pairs on one connection, twice."""
    d = ctx.daemon(env=DAEMON_ENV)
    w = Watch(d)
    notes = []
    for _ in range(2):
        c = RawH2(d.socket)
        block = request_headers()
        pairs = [frame(HEADERS, END_HEADERS, s, block) +
                 frame(RST_STREAM, 0, s, struct.pack(">L", CANCEL))
                 for s in c.streams(100000)]
        sent = c.flood(b"".join(pairs[i:i + 500]) for i in range(0, len(pairs), 500))
        closed = c.wait_closed(15)
        c.close()
        assert closed, "the flooding connection is still open (%d bytes taken)" % sent
        notes.append("%s after %d of %d bytes" % (closed_note(c), sent, sum(map(len, pairs))))
    note = w.finish()
    w.check()
    return "%s; %s" % (", ".join(notes), note)


def test_calls_without_a_message(ctx):
    """(a) Streams that end without their request message, each answered before the next 50
    are sent (what a HEADERS+RST_STREAM flood becomes when gRPC reads each stream's end before
    its reset, so that every call is answered INVALID_ARGUMENT and none counts as cancelled):
    counted like resets, the connection is shut down after 1000 of them."""
    d = ctx.daemon(env=DAEMON_ENV)
    w = Watch(d)
    c = RawH2(d.socket)
    block = request_headers()
    sent = 0
    while sent < 3000 and not c.wait_closed(0):
        c.send(b"".join(frame(HEADERS, END_HEADERS | END_STREAM, s, block)
                        for s in c.streams(50)))
        sent += 50
        deadline = time.monotonic() + 10
        while c.trailers + c.rst_received < sent and not c.closed.is_set() and \
                time.monotonic() < deadline:
            time.sleep(0.002)
    closed = c.wait_closed(5)
    note = w.finish()
    c.close()
    w.check()
    assert closed, "the connection is still open after %d calls without a message (%d answers)" % (
        sent, c.trailers)
    assert c.trailers <= 1000 + 200, "%d calls without a message answered" % c.trailers
    return "%s after %d answers to %d streams; %s" % (closed_note(c), c.trailers, sent, note)


def pipeline(ctx, ack_settings):
    d = ctx.daemon(env=DAEMON_ENV)
    w = Watch(d)
    c = RawH2(d.socket, ack_settings)
    block = request_headers()
    calls = [frame(HEADERS, END_HEADERS, s, block) + frame(DATA, END_STREAM, s, EMPTY_MESSAGE)
             for s in c.streams(50000)]
    sent = c.flood(b"".join(calls[i:i + 500]) for i in range(0, len(calls), 500))
    closed = c.wait_closed(15)
    note = w.finish()
    c.close()
    w.check()
    assert closed, "the pipelining connection is still open (%d answers)" % c.trailers
    return "%s after %d answers; %d of %d bytes taken; %s" % (
        closed_note(c), c.trailers, sent, sum(map(len, calls)), note)


def test_pipelined_calls(ctx):
    """(b) 50,000 calls sent on one connection without waiting for any answer."""
    return pipeline(ctx, ack_settings=True)


def test_pipelined_calls_settings_unacknowledged(ctx):
    """(b) The same from a client that never acknowledges the server's SETTINGS (gRPC holds
    it to the stream limit only once it did)."""
    return pipeline(ctx, ack_settings=False)


def test_continuation_flood(ctx):
    """(c) 200 MiB of CONTINUATION frames on one stream: small headers, then one header
    whose value never ends."""
    notes = []
    for kind in ("many headers", "one endless value"):
        d = ctx.daemon(env=DAEMON_ENV, name=kind.replace(" ", "-"))
        w = Watch(d)
        c = RawH2(d.socket)
        s = c.streams(1)[0]
        if kind == "many headers":
            one = literal(b"x-flood", 1000) + b"a" * 1000
            piece = one * (16384 // len(one))
        else:
            piece = b"a" * 16384
        head = request_headers()
        if kind != "many headers":
            head += literal(b"x-flood", 200 * MIB)
        total = 200 * MIB // len(piece)
        sent = c.flood(_chunks(frame(HEADERS, 0, s, head), frame(CONTINUATION, 0, s, piece),
                               total))
        closed = c.wait_closed(15)
        note = w.finish()
        c.close()
        w.check()
        assert closed, "%s: the connection is still open after %d MiB" % (kind, sent // MIB)
        notes.append("%s: %s after %.1f MiB; %s" % (kind, closed_note(c), sent / MIB, note))
    return " | ".join(notes)


def _chunks(first, repeated, n, per_chunk=64):
    yield first
    block = repeated * per_chunk
    for _ in range(n // per_chunk):
        yield block
    yield repeated * (n % per_chunk)


def test_control_frame_floods(ctx):
    """(e) PING frames from a client that reads the answers: gRPC's ping strikes end it.
    SETTINGS frames from a client that reads nothing: their ACKs back up, gRPC stops
    reading, and the connection's unread bytes end it."""
    d = ctx.daemon(env=DAEMON_ENV)
    w = Watch(d)
    c = RawH2(d.socket)
    # Past its strikes gRPC 1.51 queues a GOAWAY of some KiB for every PING it reads: 2,000.
    sent = c.flood(frame(PING, 0, 0, struct.pack(">Q", i)) * 10 for i in range(200))
    assert c.wait_closed(10), "the PING flood's connection is still open"
    assert c.goaway is not None and c.goaway[2] == "too_many_pings", closed_note(c)
    c.close()
    notes = ["PING: %s after %d bytes" % (closed_note(c), sent)]

    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 1, 0))
    s.connect(d.socket)
    s.sendall(PREFACE + frame(SETTINGS, 0, 0))
    chunk = frame(SETTINGS, 0, 0) * 10000
    sent, start = 0, time.monotonic()
    try:
        while time.monotonic() - start < 20:
            s.sendall(chunk)
            sent += len(chunk)
    except OSError:
        pass  # the server takes no more (or a part of a frame went): it must end it now
    p = select.poll()
    p.register(s, select.POLLRDHUP)
    ended = bool(p.poll(15000))
    s.close()
    assert ended, "the SETTINGS flood's connection is still open after %.0fs" % (
        time.monotonic() - start)
    notes.append("SETTINGS unread: ended after %.1fs, %d bytes" % (time.monotonic() - start,
                                                                   sent))
    note = w.finish()
    w.check()
    return "; ".join(notes) + "; " + note


def test_oversize_message_and_metadata(ctx):
    """(d) A message over the limit is refused with RESOURCE_EXHAUSTED; so is metadata over
    the limit; the daemon keeps serving."""
    d = ctx.daemon(env=DAEMON_ENV)
    w = Watch(d)
    channel = grpc.insecure_channel("unix:" + d.socket)
    stub = channel.unary_unary(PLUGIN_INFO)
    codes = []
    try:
        stub(b"\x0a" + b"\x80\x80\x80\x04" + b"a" * (8 * MIB), timeout=20)
        raise AssertionError("an 8 MiB message was taken")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, (e.code(), e.details())
        codes.append("message: %s %s" % (e.code().name, e.details()))
    try:
        stub(b"", timeout=20, metadata=[("x-big", "a" * (256 * 1024))])
        raise AssertionError("256 KiB of metadata was taken")
    except grpc.RpcError as e:
        assert e.code() in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.INTERNAL), (
            e.code(), e.details())
        codes.append("metadata: %s %s" % (e.code().name, e.details()))
    channel.close()
    note = w.finish()
    w.check()
    return "; ".join(codes) + "; " + note


TESTS = [
    test_advertises_stream_and_header_limits,
    test_rapid_reset_flood,
    test_calls_without_a_message,
    test_pipelined_calls,
    test_pipelined_calls_settings_unacknowledged,
    test_continuation_flood,
    test_control_frame_floods,
    test_oversize_message_and_metadata,
]

if __name__ == "__main__":
    run([t for t in TESTS if len(sys.argv) < 2 or t.__name__ in sys.argv[1:]])
