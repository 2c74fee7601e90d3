#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""test-symbols.py HEADER MAP LIBRARY - the exported symbols agree.

The FIBER_API functions of include/fiber.h, the names the version script
lists, and the functions the shared library exports (nm -D) must be the
same three sets.  Exit 77 (skip) without nm.
"""
import re
import shutil
import subprocess
import sys


def main():
    header, mapfile, lib = sys.argv[1:4]
    if not shutil.which("nm"):
        print("SKIP: no nm")
        return 77
    api = set(re.findall(r"FIBER_API\s+[^;(]*?\b(fiber_[a-z0-9_]+)\s*\(",
                         open(header).read(), flags=re.S))
    text = open(mapfile).read()
    listed = set(re.findall(r"^\s*(fiber_[a-z0-9_]+);", text, flags=re.M))
    out = subprocess.run(["nm", "-D", "--defined-only", lib],
                         capture_output=True, text=True, check=True).stdout
    exported = {l.split()[-1].split("@")[0] for l in out.splitlines()
                if l.split()[-2:-1] in (["T"], ["W"])}
    ok = True
    for name, a, b in (("fiber.h but not the map", api, listed),
                       ("the map but not fiber.h", listed, api),
                       ("the map but not exported", listed, exported),
                       ("exported but not in the map", exported, listed)):
        if a - b:
            print(f"in {name}: {sorted(a - b)}")
            ok = False
    if "*;" in text.split("local:")[0]:
        print("the version script exports a wildcard")
        ok = False
    print(f"{len(api)} functions in fiber.h, {len(listed)} in the map, "
          f"{len(exported)} exported")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
