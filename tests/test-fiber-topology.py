#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""test-fiber-topology - the fiber-topology tool's answers to good and
bad topologies.

Usage: test-fiber-topology.py FIBER_TOPOLOGY

- a small synthetic machine prints its domains and exits 0;
- more PUs than a view can have (4608), with no --workers, exits 2 with a
  message that names --workers and the bound; with --workers it prints,
  up to that bound (the view's 4096, not the runtime's 1024), and a
  --workers above it exits 2 naming the same bound;
- a synthetic description too large to load is refused (exit 1) with a
  message that names LIBFIBER_TOPOLOGY, the value and the bounds; given
  with --topology, exit 2 with a message that names --topology.
Exit 77 (skip) when the tool is not built.
"""

import os
import subprocess
import sys


def run(tool, topology, *args):
    env = dict(os.environ, LIBFIBER_TOPOLOGY=topology)
    p = subprocess.run([tool, *args], env=env, capture_output=True,
                       text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def expect(what, cond, detail):
    if not cond:
        print(f"FAIL: {what}\n{detail}")
        sys.exit(1)


def main():
    tool = sys.argv[1]
    if not os.access(tool, os.X_OK):
        print(f"skip: {tool} is not built")
        return 77
    rc, out, err = run(tool, "pack:2 l3:2 core:2 pu:2")
    expect("a small machine", rc == 0 and "worker" in out, out + err)
    rc, out, err = run(tool, "pack:9 l3:4 core:32 pu:4")
    expect("4608 PUs without --workers", rc == 2 and "4608 PUs" in err
           and "--workers from 1 to 4096" in err, f"rc {rc}\n{err}")
    rc, out, err = run(tool, "pack:9 l3:4 core:32 pu:4", "--workers", "8")
    expect("4608 PUs with --workers 8", rc == 0, f"rc {rc}\n{err}")
    # --workers took only 0 to 1024 while the message above asks for up
    # to 4096.
    rc, out, err = run(tool, "pack:9 l3:4 core:32 pu:4", "--workers", "2000")
    expect("4608 PUs with --workers 2000", rc == 0
           and "workers 2000," in out, f"rc {rc}\n{err}")
    for bad in ("4097", "0"):
        rc, out, err = run(tool, "pack:9 l3:4 core:32 pu:4", "--workers",
                           bad)
        expect(f"--workers {bad}", rc == 2 and f"--workers '{bad}' is not "
               "a whole number from 1 to 4096" in err, f"rc {rc}\n{err}")
    rc, out, err = run(tool, "pu:5000")
    expect("a flat level of 5000", rc == 1
           and 'LIBFIBER_TOPOLOGY="pu:5000"' in err
           and "at most 4096 objects per level" in err, f"rc {rc}\n{err}")
    # --topology's errors named LIBFIBER_TOPOLOGY, which was not set.
    rc, out, err = run(tool, "", "--topology", "pu:5000")
    expect("--topology pu:5000", rc == 2
           and err.startswith('fiber-topology: --topology="pu:5000": ')
           and "LIBFIBER_TOPOLOGY" not in err, f"rc {rc}\n{err}")
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
