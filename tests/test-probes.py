#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""test-probes - the USDT probes that README.md "Diagnostics" lists are
in libfiber.so (readelf -n, provider libfiber), each with its arguments
and a semaphore in the .probes section (so that a probe computes its
arguments only while a tracer is attached).

Usage: test-probes.py LIBFIBER_SO HAVE_SDT

HAVE_SDT 0 (built without <sys/sdt.h>): there must be no stapsdt note.
Exit status 77 (skipped) when readelf is missing.
"""

import re
import shutil
import subprocess
import sys

# probe name: how many arguments
PROBES = {"switch": 3, "wake": 5, "park": 4, "create": 2, "migrate": 3,
          "steal": 3, "balance_pull": 3, "stall": 3}


def section(lib, name):
    """[start, end) of section @name of @lib, or None."""
    out = subprocess.run(["readelf", "-SW", lib], stdout=subprocess.PIPE,
                         text=True, check=True).stdout
    for line in out.splitlines():
        f = line.replace("[", " ").replace("]", " ").split()
        if len(f) > 5 and f[1] == name:
            start = int(f[3], 16)
            return start, start + int(f[5], 16)
    return None


def main():
    lib, have_sdt = sys.argv[1], sys.argv[2] == "1"
    if not shutil.which("readelf"):
        print("test-probes: no readelf, skipped")
        return 77
    out = subprocess.run(["readelf", "-n", lib], stdout=subprocess.PIPE,
                         text=True, check=True).stdout
    found = {}
    sems = {}
    for m in re.finditer(r"Provider: (\S+)\s+Name: (\S+)\s+"
                         r"Location: .*?Semaphore: (0x[0-9a-f]+)\n"
                         r"\s+Arguments: ?(.*)", out):
        prov, name, sem, args = m.groups()
        if prov != "libfiber":
            continue
        found.setdefault(name, set()).add(len(args.split()))
        sems.setdefault(name, set()).add(int(sem, 16))
    if not have_sdt:
        if "stapsdt" in out:
            print("test-probes: stapsdt notes without FB_HAVE_SDT")
            return 1
        print("test-probes: built without <sys/sdt.h>: no probes, as meant")
        return 0
    bad = 0
    for name, nargs in PROBES.items():
        if found.get(name) != {nargs}:
            print("test-probes: libfiber:%s: want %d arguments, found %s" %
                  (name, nargs, sorted(found.get(name, []))))
            bad += 1
    probes = section(lib, ".probes")
    for name in sorted(found):
        for sem in sorted(sems[name]):
            if not probes or not probes[0] <= sem < probes[1]:
                print("test-probes: libfiber:%s: semaphore %#x is not in "
                      ".probes %s" % (name, sem, probes))
                bad += 1
        if len(sems[name]) != 1:
            print("test-probes: libfiber:%s: %d semaphores" %
                  (name, len(sems[name])))
            bad += 1
    for name in sorted(set(found) - set(PROBES)):
        print("test-probes: libfiber:%s is not in the list" % name)
        bad += 1
    print("test-probes: %d probes, %d problems" % (len(found), bad))
    return 1 if bad else 0


sys.exit(main())
