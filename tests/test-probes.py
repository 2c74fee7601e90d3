#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""test-probes - the USDT probes that README.md "Diagnostics" lists are
in libfiber.so (readelf -n, provider libfiber), each with its arguments.

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


def main():
    lib, have_sdt = sys.argv[1], sys.argv[2] == "1"
    if not shutil.which("readelf"):
        print("test-probes: no readelf, skipped")
        return 77
    out = subprocess.run(["readelf", "-n", lib], stdout=subprocess.PIPE,
                         text=True, check=True).stdout
    found = {}
    for m in re.finditer(r"Provider: (\S+)\s+Name: (\S+)\s+"
                         r"Location: .*?\n\s+Arguments: ?(.*)", out):
        prov, name, args = m.groups()
        if prov != "libfiber":
            continue
        found.setdefault(name, set()).add(len(args.split()))
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
    for name in sorted(set(found) - set(PROBES)):
        print("test-probes: libfiber:%s is not in the list" % name)
        bad += 1
    print("test-probes: %d probes, %d problems" % (len(found), bad))
    return 1 if bad else 0


sys.exit(main())
