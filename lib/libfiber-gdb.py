# SPDX-License-Identifier: LGPL-2.1-or-later
"""libfiber-gdb.py - gdb commands for programs that use libfiber.

Load it with `source /usr/share/libfiber/libfiber-gdb.py` (or the path in
the source tree).  It needs libfiber's debug information.

  info fibers          every live fiber: id, name, state, worker, stack,
                       saved stack pointer, and its fiber_t handle
  fiber bt ID          backtrace of a fiber that is not running (parked or
                       runnable), from the context it saved when it last
                       switched out; x86-64 only
  fiber frame ID       the same, but leaves the registers switched so that
                       `frame N`, `info locals` work; `fiber restore` undoes

Live fibers are found through the per-worker registry (struct fb_worker,
fields live/live_lock; lib/api/fiber.c).  A fiber_t is not an address but a
handle (lib/sched/handle.c); `info fibers` prints each fiber's, so that a
fiber_t seen in a frame can be matched to its fiber.  A running fiber is the `curr` of its
worker: look at it through that worker's thread (`info threads`).
"""

import gdb

# The saved frame at fiber->sp (lib/arch/switch-x86_64.S): an 8-byte slot
# with MXCSR and the x87 control word, then r15 r14 r13 r12 rbx rbp and the
# return address; after the switch returns, rsp = sp + 64.
X86_64_SLOTS = ["r15", "r14", "r13", "r12", "rbx", "rbp"]


def _runtime():
    rt = gdb.parse_and_eval("fb_rt")
    if int(rt) == 0:
        raise gdb.GdbError("libfiber: the runtime is not running")
    return rt


def _fiber_type():
    return gdb.lookup_type("struct fb_fiber").pointer()


def _live_offset():
    return int(gdb.parse_and_eval(
        "(unsigned long)&((struct fb_fiber *)0)->live_node"))


def fibers():
    """Yield (fiber, worker running it or None) for every live fiber."""
    rt = _runtime()
    n = int(rt["nr_workers"])
    workers = [rt["workers"][i] for i in range(n)]
    running = {}
    for i, w in enumerate(workers):
        if int(w["curr"]):
            running[int(w["curr"])] = i
    off = _live_offset()
    ftype = _fiber_type()
    for w in workers:
        head = w["live"].address
        node = w["live"]["next"]
        seen = 0
        while int(node) and int(node) != int(head) and seen < 10000000:
            f = gdb.Value(int(node) - off).cast(ftype)
            yield f, running.get(int(f))
            node = node["next"]
            seen += 1


def _state(f):
    v = int(f["state"])
    try:
        for fld in gdb.lookup_type("enum fb_fiber_state").fields():
            if fld.enumval == v:
                return fld.name.replace("FB_FIBER_", "").lower()
    except gdb.error:
        pass
    return str(v)


def _find(fid):
    for f, run in fibers():
        if int(f["id"]) == fid:
            return f, run
    raise gdb.GdbError("libfiber: no live fiber with id %d" % fid)


class InfoFibers(gdb.Command):
    """List libfiber's live fibers: id, name, state, worker, stack, saved
    stack pointer, handle."""

    def __init__(self):
        super().__init__("info fibers", gdb.COMMAND_STATUS)

    def invoke(self, arg, from_tty):
        out = ["%6s  %-20s %-9s %6s  %-37s %-14s %s" %
               ("id", "name", "state", "worker", "stack", "saved sp",
                "handle")]
        for f, run in fibers():
            # The usable stack: the top size bytes of the mapping, above
            # the guard region.
            hi = int(f["stack"]["map"]) + int(f["stack"]["map_len"])
            lo = hi - int(f["stack"]["size"])
            worker = run if run is not None else int(f["pf"]["prev"])
            name = f["name"].string() or "-"
            out.append("%6d  %-20s %-9s %5s%s  0x%x-0x%x %-14s 0x%x" % (
                int(f["id"]), name[:20], _state(f),
                worker, "*" if run is not None else " ", lo, hi,
                "-" if run is not None else "0x%x" % int(f["sp"]),
                int(f["self"])))
        gdb.write("\n".join(out) + "\n")
        gdb.write("(* running now; otherwise the worker it last ran on)\n")


class Fiber(gdb.Command):
    """libfiber: fiber bt ID | fiber frame ID | fiber restore."""

    def __init__(self):
        super().__init__("fiber", gdb.COMMAND_STACK, prefix=True)
        self.saved = None

    def _switch(self, fid):
        arch = gdb.selected_frame().architecture().name()
        if "x86-64" not in arch:
            raise gdb.GdbError("libfiber: fiber bt supports x86-64 only")
        f, run = _find(fid)
        if run is not None:
            raise gdb.GdbError(
                "libfiber: fiber %d is running on worker %d; use its thread"
                % (fid, run))
        if self.saved is None:
            gdb.execute("select-frame 0", to_string=True)
            self.saved = {r: int(gdb.parse_and_eval("$" + r))
                          for r in X86_64_SLOTS + ["rsp", "rip"]}
        sp = int(f["sp"])
        u64 = gdb.lookup_type("unsigned long").pointer()
        slot = gdb.Value(sp).cast(u64)
        for i, r in enumerate(X86_64_SLOTS):
            gdb.execute("set $%s = %d" % (r, int(slot[i + 1])))
        gdb.execute("set $rip = %d" % int(slot[7]))
        gdb.execute("set $rsp = %d" % (sp + 64))

    def restore(self):
        if self.saved is None:
            return
        for r, v in self.saved.items():
            gdb.execute("set $%s = %d" % (r, v))
        self.saved = None


FIBER = Fiber()


class FiberBt(gdb.Command):
    """fiber bt ID - backtrace of a fiber that is not running."""

    def __init__(self):
        super().__init__("fiber bt", gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        try:
            FIBER._switch(int(arg, 0))
            gdb.execute("backtrace")
        finally:
            FIBER.restore()


class FiberFrame(gdb.Command):
    """fiber frame ID - switch the registers to a parked fiber's context
    (until `fiber restore`; do not continue the program before that)."""

    def __init__(self):
        super().__init__("fiber frame", gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        FIBER._switch(int(arg, 0))
        gdb.execute("frame 0")


class FiberRestore(gdb.Command):
    """fiber restore - undo `fiber frame`."""

    def __init__(self):
        super().__init__("fiber restore", gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        FIBER.restore()


InfoFibers()
FiberBt()
FiberFrame()
FiberRestore()
