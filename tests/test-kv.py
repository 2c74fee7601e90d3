#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""test-kv - examples/kv under redis-benchmark, and against bad input.

Usage: test-kv.py KV

Starts KV with 2 workers on a loopback port the kernel picks (--port 0,
read back from its "listening on" line), then:
- redis-benchmark -t ping,get,set -n 20000 -c 50 --csv: it must exit 0,
  report a rate for each of PING_INLINE, PING_MBULK, SET and GET, and
  print no error;
- SET, INCR, GET and DEL pipelined in one write are answered in order in
  one reply stream;
- INCR of a missing key gives 1, and a value that grows a digit
  ("9" -> "10") is stored whole;
- 400 pipelined GETs of a 100 KiB value (40 MiB of replies to one
  2.4 KiB write) are all answered, while the server's peak memory
  (VmHWM) grows by less than 16 MiB: replies are written out as they
  accumulate, so a hostile pipeline cannot make the server hold them all;
- a malformed request gets "-ERR Protocol error" and its connection is
  closed, while the server keeps answering others;
- a command cut anywhere (right after its "*" too) and sent in pieces
  is answered.
Then SIGINT must stop it with exit status 0.  Exit 77 (skip) when
redis-benchmark is not installed (Debian: redis-tools) or KV is not
built (-Dexamples=false).  The timeouts bound a hang; they are not
measurements.
"""

import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import time

TIMEOUT = 120  # seconds; only a bound on a hang
KV = sys.argv[1]


def start():
    proc = subprocess.Popen([KV, "--port", "0", "--workers", "2"],
                            stdout=subprocess.PIPE, text=True)
    ready, _, _ = select.select([proc.stdout], [], [], TIMEOUT)
    line = proc.stdout.readline() if ready else ""
    m = re.search(r"listening on [0-9.]+:(\d+)$", line.strip())
    if not m or int(m.group(1)) == 0:
        proc.kill()
        raise AssertionError("no port in the first line: %r" % line)
    return proc, int(m.group(1))


def exchange(port, data, want):
    s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    s.sendall(data)
    got = bytearray()
    while len(got) < len(want):
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        got += chunk
    got = bytes(got)
    rest = s.recv(65536) if got == want and b"Protocol" in want else b""
    s.close()
    if got != want:
        raise AssertionError("sent %r, got %r, want %r" % (data, got, want))
    return rest


def exchange_split(port, pieces, want):
    """Send @pieces with pauses between them, so that the server reads
    each on its own: a frame may be cut anywhere."""
    s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    for i, piece in enumerate(pieces):
        if i:
            time.sleep(0.05)
        s.sendall(piece)
    got = bytearray()
    while len(got) < len(want):
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    s.close()
    if bytes(got) != want:
        raise AssertionError("sent %r, got %r, want %r" %
                             (pieces, bytes(got), want))


def hwm(pid):
    with open("/proc/%d/status" % pid) as f:
        m = re.search(r"^VmHWM:\s+(\d+) kB", f.read(), re.M)
    return int(m.group(1)) * 1024


def main():
    bench = shutil.which("redis-benchmark")
    if not bench or not os.path.exists(KV):
        print("skip: redis-benchmark or %s missing" % KV)
        return 77
    proc, port = start()
    try:
        out = subprocess.run([bench, "-h", "127.0.0.1", "-p", str(port),
                              "-t", "ping,get,set", "-n", "20000",
                              "-c", "50", "--csv"],
                             capture_output=True, text=True,
                             timeout=TIMEOUT)
        if out.returncode != 0:
            raise AssertionError("redis-benchmark: %d %s" %
                                 (out.returncode, out.stderr))
        text = out.stdout + out.stderr
        if re.search(r"error|ERR", text, re.I):
            raise AssertionError("errors in: %s" % text)
        rates = dict(re.findall(r'^"([A-Z_]+)","([0-9.]+)"', out.stdout,
                                re.M))
        for name in ("PING_INLINE", "PING_MBULK", "SET", "GET"):
            if float(rates.get(name, 0)) <= 0:
                raise AssertionError("no answers to %s: %s" % (name, text))
        print("redis-benchmark answered: %s" % sorted(rates))

        exchange(port,
                 b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\n41\r\n"
                 b"*2\r\n$4\r\nINCR\r\n$1\r\nk\r\n"
                 b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
                 b"*2\r\n$3\r\nDEL\r\n$1\r\nk\r\nGET k\r\n",
                 b"+OK\r\n:42\r\n$2\r\n42\r\n:1\r\n$-1\r\n")
        exchange(port,
                 b"INCR fresh\r\nSET n 9\r\nINCR n\r\nGET n\r\n",
                 b":1\r\n+OK\r\n:10\r\n$2\r\n10\r\n")
        big = b"v" * 102400
        exchange(port, b"*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$%d\r\n%s\r\n"
                 % (len(big), big), b"+OK\r\n")
        before = hwm(proc.pid)
        one = b"$%d\r\n%s\r\n" % (len(big), big)
        exchange(port, b"GET big\r\n" * 400, one * 400)
        grown = hwm(proc.pid) - before
        if grown >= 16 << 20:
            raise AssertionError("400 pipelined GETs grew VmHWM by %d bytes"
                                 % grown)
        for bad in (b"*2\r\n$-1\r\n", b"*1\r\n$3\r\nGETX\r\n",
                    b"*99999999999\r\n", b"*1\r\n:3\r\n"):
            rest = exchange(port, bad, b"-ERR Protocol error\r\n")
            if rest:
                raise AssertionError("%r: open after the error" % bad)
        exchange(port, b"PING\r\n", b"+PONG\r\n")
        for cut in ([b"*", b"1\r\n$4\r\nPING\r\n"],
                    [b"*1\r", b"\n$4\r\nPI", b"NG\r\n"],
                    [b"*1\r\n$", b"4\r\nPING\r\n"]):
            exchange_split(port, cut, b"+PONG\r\n")
    finally:
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=TIMEOUT)
    if rc != 0:
        raise AssertionError("exit status %d after SIGINT" % rc)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
