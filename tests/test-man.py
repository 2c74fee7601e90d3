#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""test-man.py - the man pages cover the public API and render cleanly.

Checks, over the scdoc sources in doc/man/ and the pages meson rendered
into the build's doc/ directory (--out):
  - every FIBER_API function of include/fiber.h has a page or an alias
    page there, and every name a page documents is a FIBER_API function;
  - the NAME line of each source and the alias pages agree: each name
    but the page's own has an alias holding ".so manN/PAGE.N", and each
    alias is listed by the page it points to;
  - each function's prototype is in the SYNOPSIS of its page, exactly as
    fiber.h declares it (up to white space), with #include <fiber.h>;
  - each page has the sections it must have, and every fiber_*(3) or
    libfiber(7) reference names an existing page or alias;
  - libfiber(7) names every counter of lib/sched/counters.h, every
    LIBFIBER_* variable of lib/api/config.h and every man3 page, and
    fiber_sched_features_set(3) every feature of lib/base/features.h;
  - when man(1) is there, each page renders with "man -l" without a
    warning (else with groff, when that is there), and lexgrog(1), when
    there, finds the names of the NAME line (what mandb indexes).

Without --out (meson configured with -Dman=disabled) the pages are
rendered into a temporary directory with --wrapper; only the alias
checks need the build's output.  Exit 77 (skip) when scdoc is missing.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def api_functions(header):
    """The FIBER_API declarations of @header: {name: normalised prototype}."""
    text = open(header, encoding="utf-8").read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"\\\n", " ", text)
    text = "\n".join(l for l in text.split("\n")
                     if not l.lstrip().startswith("#"))
    protos = {}
    for m in re.finditer(r"^\s*FIBER_API\s+([^;]*);", text, flags=re.M):
        proto = " ".join(m.group(1).split()) + ";"
        name = re.match(r"[^(]*?(\w+)\s*\(", proto).group(1)
        protos[name] = proto
    return protos


def normalise(s):
    """C text with white space reduced to what separates words."""
    s = " ".join(s.split())
    s = re.sub(r"\s*([(),;*\[\]])\s*", r"\1", s)
    # Put back the space a word needs before a '*' or '(' that follows it.
    return re.sub(r"(\w)([*(])", r"\1 \2", s)


class Page:
    def __init__(self, path):
        self.path = path
        self.text = open(path, encoding="utf-8").read()
        first = self.text.split("\n", 1)[0]
        m = re.match(r"([\w.-]+)\((\w+)\)", first)
        if not m:
            raise ValueError(path + ": no scdoc preamble")
        self.name, self.section = m.group(1), m.group(2)
        self.sections = self.parse_sections()
        name_text = " ".join(self.sections.get("NAME", "").split())
        names, _, self.whatis = name_text.partition(" - ")
        self.names = [n.strip() for n in names.split(",") if n.strip()]

    def parse_sections(self):
        out, cur = {}, None
        for line in self.text.split("\n")[1:]:
            m = re.match(r"# (.+)$", line)
            if m:
                cur = m.group(1).strip()
                out[cur] = ""
            elif cur:
                out[cur] += line + "\n"
        return out

    def synopsis_code(self):
        """The literal blocks of SYNOPSIS, as one normalised string."""
        blocks = re.findall(r"```\n(.*?)```", self.sections.get("SYNOPSIS", ""),
                            flags=re.S)
        return blocks, normalise(" ".join(blocks))


REQUIRED = {
    "3": ["NAME", "SYNOPSIS", "DESCRIPTION", "RETURN VALUE", "CONTEXT",
          "SEE ALSO"],
    "7": ["NAME", "DESCRIPTION", "CONVENTIONS", "CONFIGURATION",
          "STATISTICS", "LIFETIME", "SEE ALSO"],
}


def check_sources(pages, protos):
    documented = {}
    for p in pages:
        base = os.path.basename(p.path)
        if base != "%s.%s.scd" % (p.name, p.section):
            fail("%s: the preamble names %s(%s)" % (base, p.name, p.section))
        if not p.names or p.names[0] != p.name:
            fail("%s: NAME must start with %s" % (base, p.name))
        if not p.whatis:
            fail("%s: NAME has no ' - description'" % base)
        for s in REQUIRED.get(p.section, []):
            if s not in p.sections:
                fail("%s: no %s section" % (base, s))
        for n in p.names:
            if n in documented:
                fail("%s: %s is documented in %s too"
                     % (base, n, documented[n].name))
            documented[n] = p
            if p.section == "3" and n not in protos:
                fail("%s: %s is not a FIBER_API function" % (base, n))
        for block in re.findall(r"```\n(.*?)```", p.text, flags=re.S):
            if re.search(r"\\[^\\`]", block.replace("\\\\", "")):
                fail("%s: a literal block has a lone backslash (scdoc eats "
                     "it: write \\\\ for one)" % base)
        if p.section != "3":
            continue
        blocks, code = p.synopsis_code()
        if not any("#include <fiber.h>" in b for b in blocks):
            fail("%s: SYNOPSIS lacks #include <fiber.h>" % base)
        for n in p.names:
            if n in protos and normalise(protos[n]) not in code:
                fail("%s: SYNOPSIS lacks the prototype of fiber.h: %s"
                     % (base, protos[n]))
    for f in sorted(protos):
        if f not in documented:
            fail("%s has no page (no NAME line lists it)" % f)
    return documented


def check_references(pages, documented):
    for p in pages:
        for name, sec in re.findall(r"\*((?:fiber_|libfiber)\w*)\*\(([1-9])\)",
                                    p.text):
            target = documented.get(name)
            if not target or target.section != sec:
                fail("%s: refers to %s(%s), which has no page"
                     % (os.path.basename(p.path), name, sec))


def check_overview(pages, lib):
    by_name = {p.name: p for p in pages}
    overview = by_name.get("libfiber")
    if not overview:
        fail("no libfiber(7) page")
        return
    counters = re.findall(r"^FB_COUNTER\(\s*(\w+)",
                          open(os.path.join(lib, "sched", "counters.h")).read(),
                          flags=re.M)
    if not counters:
        fail("no counter found in lib/sched/counters.h")
    for c in counters:
        if "*%s*" % c not in overview.sections.get("STATISTICS", ""):
            fail("libfiber.7: STATISTICS does not list the counter %s" % c)
    env = {"LIBFIBER_" + v for v in
           re.findall(r"^FB_CONFIG\(\s*(\w+)",
                      open(os.path.join(lib, "api", "config.h")).read(),
                      flags=re.M)}
    if not env:
        fail("no LIBFIBER_ variable found in lib/api/config.h")
    for v in sorted(env):
        if "*%s*" % v not in overview.sections.get("CONFIGURATION", ""):
            fail("libfiber.7: CONFIGURATION does not list %s" % v)
    see = overview.sections.get("SEE ALSO", "")
    for p in pages:
        if p.section == "3" and "*%s*(3)" % p.name not in see:
            fail("libfiber.7: SEE ALSO lacks %s(3)" % p.name)
    feats = re.findall(r"^FB_FEAT\((\w+)",
                       open(os.path.join(lib, "base", "features.h")).read(),
                       flags=re.M)
    fpage = by_name.get("fiber_sched_features_set")
    if not feats:
        fail("no feature found in lib/base/features.h")
    for f in feats:
        if fpage and "*%s* (" % f not in fpage.text:
            fail("fiber_sched_features_set.3: the feature %s is missing" % f)


def check_output(pages, documented, out):
    """The pages and alias pages meson made in @out."""
    for p in pages:
        if not os.path.isfile(os.path.join(out, "%s.%s" % (p.name, p.section))):
            fail("%s.%s was not rendered into %s" % (p.name, p.section, out))
        for n in p.names[1:]:
            alias = os.path.join(out, "%s.%s" % (n, p.section))
            want = ".so man%s/%s.%s" % (p.section, p.name, p.section)
            if not os.path.isfile(alias):
                fail("%s: no alias page %s (add it to doc/meson.build)"
                     % (p.name, os.path.basename(alias)))
            elif open(alias).read().strip() != want:
                fail("%s does not hold '%s'" % (alias, want))
    for f in sorted(os.listdir(out)):
        m = re.match(r"(\w+)\.(\d)$", f)
        if not m:
            continue
        text = open(os.path.join(out, f), errors="replace").read()
        so = re.match(r"\.so man(\d)/(\w+)\.(\d)\s*$", text)
        if not so:
            continue
        target = documented.get(m.group(1))
        if not target or target.name != so.group(2):
            fail("alias page %s points to %s, whose NAME does not list %s"
                 % (f, so.group(2), m.group(1)))


def render(pages, wrapper, scdoc, version, into):
    for p in pages:
        out = os.path.join(into, "%s.%s" % (p.name, p.section))
        r = subprocess.run(["sh", wrapper, scdoc, version, p.path, out],
                           capture_output=True, text=True)
        if r.returncode:
            fail("scdoc failed on %s: %s" % (p.path, r.stderr.strip()))


def check_rendering(pages, out):
    man = shutil.which("man")
    groff = shutil.which("groff")
    lexgrog = shutil.which("lexgrog")
    env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8", MANPAGER="cat",
               PAGER="cat")
    if not man and not groff:
        print("# neither man nor groff: pages not rendered")
    for p in pages:
        f = os.path.join(out, "%s.%s" % (p.name, p.section))
        if not os.path.isfile(f):
            continue
        if man:
            cmd = [man, "--warnings=w", "-E", "UTF-8", "-l", f]
        elif groff:
            cmd = [groff, "-man", "-Tutf8", "-ww", "-z", f]
        else:
            cmd = None
        if cmd:
            r = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if r.returncode or r.stderr.strip():
                fail("%s: %s: rc %d: %s" % (os.path.basename(f), cmd[0],
                                            r.returncode, r.stderr.strip()))
            elif man and p.whatis.split()[0] not in " ".join(r.stdout.split()):
                fail("%s: the rendered page lacks its description"
                     % os.path.basename(f))
        if lexgrog:
            r = subprocess.run([lexgrog, f], capture_output=True, text=True,
                               env=env)
            found = re.findall(r'"(\S+) - ', r.stdout)
            if found != p.names:
                fail("%s: lexgrog finds %s, NAME lists %s"
                     % (os.path.basename(f), found, p.names))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--header", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--src", required=True)
    ap.add_argument("--out", default="")
    ap.add_argument("--scdoc", default="")
    ap.add_argument("--wrapper", required=True)
    ap.add_argument("--version", default="")
    a = ap.parse_args()

    if not a.scdoc:
        print("scdoc not found: the man pages are not built; skipping")
        return 77

    protos = api_functions(a.header)
    if len(protos) < 50:
        fail("only %d FIBER_API functions found in %s" % (len(protos),
                                                          a.header))
    pages = [Page(os.path.join(a.src, f)) for f in sorted(os.listdir(a.src))
             if f.endswith(".scd")]
    documented = check_sources(pages, protos)
    check_references(pages, documented)
    check_overview(pages, a.lib)

    tmp = None
    out = a.out
    if out:
        check_output(pages, documented, out)
    else:
        tmp = tempfile.mkdtemp(prefix="test-man-")
        out = tmp
        render(pages, a.wrapper, a.scdoc, a.version, out)
        print("# rendered into %s (meson was configured without the man "
              "pages): alias pages not checked" % out)
    check_rendering(pages, out)
    if tmp:
        shutil.rmtree(tmp)

    print("%d functions, %d pages, %d failures"
          % (len(protos), len(pages), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
