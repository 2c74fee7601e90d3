#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""test-httpd - examples/httpd against inputs that once broke it.

Usage: test-httpd.py HTTPD

Starts HTTPD on a port the kernel picks (--port 0, read back from its
"listening on" line) and sends, each on its own connection:
- a body shorter than its Content-Length, then a half-close: the server
  closes without answering and stays up (it used to pass a negative size
  to memmove);
- 304 small GETs in one write, more than its 8 KiB buffer: every one is
  answered, in order, on the open connection (it used to reset it);
- headers longer than the buffer: answered 431, then closed;
- a POST whose body is a request, with its end made uncertain (a NUL
  byte in the headers, a bad or repeated Content-Length, a
  Transfer-Encoding): one 400 or 501 and a close, never a second response;
- a client that sends nothing is closed after --idle-ms (300 here).
Then SIGINT must stop it with exit status 0.  Before that, the options:
--help prints the usage and exits 0; an unknown option, a missing value
and a port, worker count or address out of range each exit 2 with the
option and the value named on stderr, before listening on anything (a
typo once started a server on port 8080, and "--port abc" one on a port
the kernel picked).  Exit 77 (skip) only when
HTTPD is not built (-Dexamples=false).  The timeouts bound a hang; they
are not measurements.
"""

import os
import re
import select
import signal
import socket
import subprocess
import sys

TIMEOUT = 60  # seconds; only a bound on a hang
HTTPD = sys.argv[1]


def start():
    proc = subprocess.Popen([HTTPD, "--port", "0", "--workers", "2",
                             "--idle-ms", "300"],
                            stdout=subprocess.PIPE, text=True)
    ready, _, _ = select.select([proc.stdout], [], [], TIMEOUT)
    line = proc.stdout.readline() if ready else ""
    m = re.search(r"listening on [0-9.]+:(\d+)$", line.strip())
    if not m or int(m.group(1)) == 0:
        proc.kill()
        raise AssertionError("no port in the first line: %r" % line)
    return proc, int(m.group(1))


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    s.settimeout(TIMEOUT)
    return s


def read_all(s):
    """Everything until the server closes; a reset is an error."""
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return data
        data += chunk


def responses(data):
    """Split @data into (status line, body) pairs; the rest is returned."""
    out = []
    while True:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if not sep:
            return out, data
        m = re.search(rb"\r\nContent-Length: *(\d+)", head, re.I)
        n = int(m.group(1)) if m else 0
        if len(rest) < n:
            return out, data
        out.append((head.split(b"\r\n")[0], rest[:n]))
        data = rest[n:]


def get_one(port):
    with connect(port) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        got, rest = responses(read_all(s))
    assert [r[0] for r in got] == [b"HTTP/1.1 200 OK"] and not rest, got


def short_body_then_half_close(port):
    with connect(port) as s:
        s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
                  b"\r\nshort")
        s.shutdown(socket.SHUT_WR)
        data = read_all(s)
    assert data == b"", "answered an incomplete request: %r" % data[:200]
    get_one(port)  # still serving


def pipelined_past_the_buffer(port):
    req = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"
    nr = 304
    assert len(req) * nr > 8192
    with connect(port) as s:
        s.sendall(req * nr)
        data, got = b"", []
        while len(got) < nr:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
            more, data = responses(data)
            got += more
    assert len(got) == nr, "%d of %d answered" % (len(got), nr)
    assert all(r == (b"HTTP/1.1 200 OK", b"Hello from libfiber!\n")
               for r in got), got[:3]
    assert data == b"", data[:200]


def uncertain_ends_are_refused(port):
    """A POST whose body is a GET: each way to misplace the body's end
    gets one refusal and a close, never a second response (smuggling)."""
    smuggled = b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
    n = len(smuggled)
    cases = [
        (b"Content-Length: %d\r\n" % n, b"HTTP/1.1 200 OK"),
        (b"X-A: \0\r\nContent-Length: %d\r\n" % n, b"HTTP/1.1 400 "),
        (b"Content-Length: abc\r\n", b"HTTP/1.1 400 "),
        (b"Content-Length: %d\r\nContent-Length: 0\r\n" % n,
         b"HTTP/1.1 400 "),
        (b"Content-Length: 0\r\nContent-Length: %d\r\n" % n,
         b"HTTP/1.1 400 "),
        (b"Transfer-Encoding: chunked\r\n", b"HTTP/1.1 501 "),
    ]
    for head, want in cases:
        with connect(port) as s:
            s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\n" + head +
                      b"Connection: close\r\n\r\n" + smuggled)
            got, rest = responses(read_all(s))
        statuses = [r[0] for r in got]
        assert len(statuses) == 1 and statuses[0].startswith(want) and \
            not rest, "%r: %r, rest %r" % (head, statuses, rest[:100])


def idle_connection_is_closed(port):
    """--idle-ms 300: a client that sends nothing is closed (EOF)."""
    with connect(port) as s:
        data = read_all(s)
    assert data == b"", data[:200]


def headers_past_the_buffer(port):
    # Exactly a buffer's worth: the server reads it all before it closes,
    # so the close is not a reset that could overtake the answer.
    head = b"GET / HTTP/1.1\r\nX-Long: "
    with connect(port) as s:
        s.sendall(head + b"a" * (8192 - len(head)))
        data = read_all(s)
    assert data.startswith(b"HTTP/1.1 431 "), data[:200]


BAD_OPTIONS = [
    (["--help-me"], "unrecognized option '--help-me'"),
    (["--port"], "option '--port' requires an argument"),
    (["--port=abc"], "--port 'abc' is not a whole number"),
    (["-p", "70000"], "--port '70000' is not a whole number"),
    (["--port", "abc"], "--port 'abc' is not a whole number"),
    (["--port", "65536"], "--port '65536' is not a whole number"),
    (["--port", "-1"], "--port '-1' is not a whole number"),
    (["--port", "80x"], "--port '80x' is not a whole number"),
    (["--workers", "0x4"], "--workers '0x4' is not a whole number"),
    (["--workers", "1025"], "--workers '1025' is not a whole number"),
    (["--idle-ms", "-1"], "--idle-ms '-1' is not a whole number"),
    (["--addr", "localhost"], "--addr 'localhost' is not an IPv4"),
    (["--threads", "8080"], "unexpected argument '8080'"),
]


def options():
    """--help and every bad option; returns the number of failures."""
    failed = 0
    r = subprocess.run([HTTPD, "--help"], capture_output=True, text=True,
                       timeout=TIMEOUT)
    if r.returncode != 0 or not r.stdout.startswith("usage: httpd"):
        failed += 1
        print("FAIL - --help: status %d, %r" % (r.returncode, r.stdout))
    else:
        print("ok - --help prints the usage")
    for args, want in BAD_OPTIONS:
        r = subprocess.run([HTTPD] + args, capture_output=True, text=True,
                           timeout=TIMEOUT)
        if r.returncode != 2 or want not in r.stderr or \
                "listening" in r.stdout:
            failed += 1
            print("FAIL - %s: status %d, stderr %r, stdout %r" %
                  (" ".join(args), r.returncode, r.stderr, r.stdout))
        else:
            print("ok - %s is refused: %s" % (" ".join(args), want))
    return failed


def main():
    if not os.access(HTTPD, os.X_OK):
        print("SKIP: %s not built (-Dexamples=false)" % HTTPD)
        return 77
    failed = options()
    proc, port = start()
    try:
        for t in (short_body_then_half_close, pipelined_past_the_buffer,
                  headers_past_the_buffer, uncertain_ends_are_refused,
                  idle_connection_is_closed):
            try:
                t(port)
                print("ok - %s" % t.__name__)
            except (AssertionError, OSError) as e:
                failed += 1
                print("FAIL - %s: %s" % (t.__name__, e))
            if proc.poll() is not None:
                print("FAIL - httpd died (status %d)" % proc.returncode)
                return 1
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            rc = proc.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = "hung"
    if rc != 0:
        print("FAIL - httpd exited with %s after SIGINT" % rc)
        return 1
    return 1 if failed else 0


sys.exit(main())
