#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""check-doc-citations - every section that the tree cites exists.

Usage: check-doc-citations.py SOURCE_ROOT

Code, tests, benchmarks, examples, the public header, README.md and the
documents themselves cite the project's documents by section number:
"doc/scheduler.md 2.2.2", "doc/design.md 4.2" (also "`doc/design.md` 4.2",
and lists such as "doc/scheduler.md 1.7 to 1.9" or "1.6, 1.8").  This
script collects the numbered headings of doc/scheduler.md and
doc/design.md ("## 2. H1: ...", "### 2.2 Decision rule", "#### 2.2.1 ...")
and fails (exit status 1) when

  - a cited section number is not a heading of the cited document,
  - a document numbers two headings alike,
  - a file cites a document that is not in the repository: one of the
    names below that are not doc/design.md or doc/scheduler.md, or an
    issue number outside a TODO line,
  - no citation is found at all (the pattern would be broken).

A citation may wrap across comment lines ("doc/scheduler.md" at the end of
one line of a C comment, the number at the start of the next).
"""

import os
import re
import sys

DOCS = ("doc/design.md", "doc/scheduler.md")
SCANNED = ("lib", "tests", "bench", "examples", "include", "doc")
SCANNED_FILES = ("README.md", "meson.build", "meson_options.txt", "dev")
SKIP_DIRS = ("corpus",)  # the fuzzers' inputs

HEADING = re.compile(r"^#{2,6}\s+(\d+(?:\.\d+)*)\.?\s")
NUMBER = r"\d+(?:\.\d+)*"
CITATION = re.compile(
    r"doc/(design|scheduler)\.md`?\s+(" + NUMBER + r")"
    r"((?:\s*(?:,|and|or|to)\s*" + NUMBER + r"(?![\w/]))*)")
LIST_ITEM = re.compile(NUMBER)
# Documents that are not in the repository, spelt so that this file does
# not match itself: the old specification, house-style and design pages
# outside doc/, the mails by file number, a script that never existed.
FOREIGN = [
    re.compile(r"heuristics" + r"\.md"),
    re.compile(r"style" + r"\.md"),
    re.compile(r"(?<!doc/)design" + r"\.md"),
    re.compile(r"\bshared" + r"/"),
    re.compile(r"\bseeds?/"),
    re.compile(r"\bseed\s+0\d\d\b"),
    re.compile(r"balance-evidence" + r"\.sh"),
]
# An issue number is no document either: allowed in a TODO only.
ISSUE = re.compile(r"\bissue\s+#\d+", re.IGNORECASE)
# A C/Python/meson comment line break: join the two lines.
WRAP = re.compile(r"[ \t]*\n[ \t]*(?:\*(?!/)|#|//)?[ \t]*")


def sections(root, doc):
    """The section numbers of @doc's headings; duplicates are errors."""
    seen, errors = set(), []
    with open(os.path.join(root, doc), encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            m = HEADING.match(line)
            if not m:
                continue
            num = m.group(1)
            if num in seen:
                errors.append("%s:%d: section %s numbered twice" %
                              (doc, n, num))
            seen.add(num)
    return seen, errors


def files(root):
    for name in SCANNED_FILES:
        path = os.path.join(root, name)
        if os.path.isfile(path):
            yield name
    for top in SCANNED:
        for d, dirs, names in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS)
            for name in sorted(names):
                rel = os.path.relpath(os.path.join(d, name), root)
                if rel != os.path.join("tests", "check-doc-citations.py"):
                    yield rel


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    known, errors = {}, []
    for doc in DOCS:
        if not os.path.isfile(os.path.join(root, doc)):
            print("check-doc-citations: %s is missing" % doc)
            return 1
        known[doc], errs = sections(root, doc)
        errors += errs
    nr = 0
    for rel in files(root):
        try:
            with open(os.path.join(root, rel), encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            continue  # binaries and the like cite nothing
        for pat in FOREIGN:
            for m in pat.finditer(text):
                errors.append("%s:%d: cites a document that is not in the "
                              "repository: %r" %
                              (rel, line_of(text, m.start()), m.group(0)))
        for m in ISSUE.finditer(text):
            start = text.rfind("\n", 0, m.start()) + 1
            if "TODO" not in text[start:m.start()]:
                errors.append("%s:%d: an issue number outside a TODO: %r" %
                              (rel, line_of(text, m.start()), m.group(0)))
        joined = WRAP.sub(" ", text)
        for m in CITATION.finditer(joined):
            doc = "doc/" + m.group(1) + ".md"
            nums = [m.group(2)] + LIST_ITEM.findall(m.group(3))
            for num in nums:
                nr += 1
                if num not in known[doc]:
                    errors.append("%s: cites %s %s, which has no such "
                                  "section" % (rel, doc, num))
    if nr == 0:
        errors.append("no citation of %s found: is the pattern broken?" %
                      " or ".join(DOCS))
    for e in errors:
        print(e)
    print("check-doc-citations: %d citations checked, %d errors" %
          (nr, len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
