#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""check-layers.py SOURCE_ROOT - the layers of lib/ point down only.

Each folder of lib/ is a layer (lib/README.md draws them).  A file of a
layer may include the headers of its own layer and of the layers below,
never of a layer above or of a sibling (sync and io stand side by side on
sched).  No header may sit in lib/ itself, where it could shadow a system
header of the same name.  The link side of the rule is checked by the
layer-check programs and by the placement tests, which link the lower
layers alone (tests/meson.build).
"""
import os
import re
import sys

# layer: the layers it may include (itself and everything below).
BELOW = {
    "base": {"base"},
    "topo": {"base", "topo"},
    "place": {"base", "topo", "place"},
    "sched": {"base", "topo", "place", "sched"},
    "sync": {"base", "topo", "place", "sched", "sync"},
    "io": {"base", "topo", "place", "sched", "io"},
    "api": {"base", "topo", "place", "sched", "sync", "io", "api"},
}


def main():
    lib = os.path.join(sys.argv[1], "lib")
    errors = 0
    for name in sorted(os.listdir(lib)):
        path = os.path.join(lib, name)
        if os.path.isfile(path) and name.endswith(".h"):
            print(f"lib/{name}: a header at the top of lib/")
            errors += 1
        if os.path.isdir(path) and name not in BELOW:
            print(f"lib/{name}/: not a layer (add it to BELOW and the README)")
            errors += 1
    checked = 0
    for layer, allowed in BELOW.items():
        for root, _, files in os.walk(os.path.join(lib, layer)):
            for f in sorted(files):
                if not f.endswith((".c", ".h")):
                    continue
                rel = os.path.relpath(os.path.join(root, f), lib)
                for n, line in enumerate(open(os.path.join(root, f)), 1):
                    m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                    if not m:
                        continue
                    checked += 1
                    inc = m.group(1)
                    top = inc.split("/")[0] if "/" in inc else None
                    if top is None:
                        if inc != "version.h":  # generated at build time
                            print(f"lib/{rel}:{n}: \"{inc}\" names no layer")
                            errors += 1
                    elif top not in allowed:
                        print(f"lib/{rel}:{n}: {layer} includes {inc}, "
                              f"a header of {top}")
                        errors += 1
    print(f"check-layers: {checked} includes checked, {errors} errors")
    return 1 if errors or not checked else 0


if __name__ == "__main__":
    sys.exit(main())
