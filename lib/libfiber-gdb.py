# SPDX-License-Identifier: LGPL-2.1-or-later
"""libfiber-gdb.py - gdb commands for programs that use libfiber.

gdb loads it by itself for a program linked with libfiber.so when it is
installed in gdb's auto-load directory (meson installs it as
share/gdb/auto-load/LIBDIR/libfiber.so.VERSION-gdb.py; README.md,
"Diagnostics"); else `source /usr/share/libfiber/libfiber-gdb.py` (or the
path in the source tree).  It works on a live process and on a core file.

  info fibers          every live fiber: id, name, state, worker, stack,
                       saved stack pointer, fiber_t handle, and what a
                       parked fiber waits on
  fiber bt ID [OPTS]   backtrace of a fiber that is not running (parked or
                       runnable), from the context it saved when it last
                       switched out; OPTS go to `backtrace` (full, -N...)
  fiber frame ID       the same context kept until `fiber restore`, so that
                       `frame N`, `up`, `info locals` work on the fiber's
                       frames (numbered from 1; frame 0 stays the thread's)
  fiber restore        back to the thread's own frames

How the runtime is read.  Everything is read from memory by offsets, from
one of two places: the constant struct fb_gdb_layout that the library
carries in its symbol table (lib/sched/dump.c), which a build without
debug information (meson --buildtype=release) still has; or, when that
is missing, libfiber's debug information (struct fb_fiber...).  A library
stripped of both cannot be read: the commands say so, and what to install.
`set libfiber-layout metadata|debug-info|auto` picks the source (auto:
the metadata when present).

Live fibers are found through the per-worker registry (struct fb_worker,
fields live/live_lock; lib/api/fiber.c).  A fiber_t is not an address but a
handle (lib/sched/handle.c); `info fibers` prints each fiber's, so that a
fiber_t seen in a frame can be matched to its fiber.  A running fiber is
the `curr` of its worker: look at it through that worker's thread (`info
threads`).

The wait reason is fiber_dump()'s (lib/sched/dump.c, fb_fiber_describe).
A deadline is printed as the CLOCK_MONOTONIC time it falls due at, in
seconds: a core file has no "now".  On a live process on this machine the
time left is added, from gdb's own reading of the same clock.

`fiber bt` does not touch the registers: it enables a gdb unwinder that
describes the selected thread's frame 0 as called from the fiber's saved
context, so frame 1 is where the fiber switched out, and a frame filter
that leaves frame 0 out of the backtrace; both are off again (and gdb's
frame cache flushed) when the command ends, also on an error.
"""

import struct
import time

import gdb
from gdb.unwinder import Unwinder, register_unwinder

# The saved frame at fiber->sp (lib/sched/arch/switch-x86_64.S): an 8-byte
# slot with MXCSR and the x87 control word, then r15 r14 r13 r12 rbx rbp
# and the return address; after the switch returns, rsp = sp + 64.
X86_64_SLOTS = ["r15", "r14", "r13", "r12", "rbx", "rbp"]

NO_DEADLINE = (1 << 64) - 1
EPOLLIN, EPOLLOUT = 0x1, 0x4
LAYOUT_MAGIC = 0x62646266  # "fbdb"
LAYOUT_VERSION = 1
# struct fb_gdb_layout (lib/sched/dump.c), version 1: u32 fields in this
# order, then the state and wait-kind name tables.
LAYOUT_FIELDS = [
    "magic", "version", "size", "ptr_size",
    "rt_nr_workers", "rt_workers",
    "worker_curr", "worker_live", "list_next",
    "fiber_sp", "fiber_state", "fiber_stack_map", "fiber_stack_map_len",
    "fiber_stack_size", "fiber_pf_prev", "fiber_self", "fiber_id",
    "fiber_name", "fiber_name_len", "fiber_live_node", "fiber_waiter",
    "waiter_kind", "waiter_obj", "waiter_data", "waiter_deadline",
    "nr_states", "nr_kinds", "name_len",
]
LAYOUT_NR_STATES, LAYOUT_NR_KINDS = 8, 24

NEED_SYMBOLS = (
    "libfiber: cannot read the runtime: this libfiber has neither debug "
    "information nor its symbol table (fb_gdb_layout, fb_rt), so it was "
    "stripped (or the program does not use libfiber).  Use an unstripped "
    "libfiber.so (do not strip it at install), or install its debug "
    "information (the distribution's -dbg or -dbgsym package), or build "
    "it with debug information (meson setup -Ddebug=true).")


class LayoutParam(gdb.Parameter):
    """Where libfiber-gdb.py takes libfiber's layout from: auto (the
    library's fb_gdb_layout when present, else debug information),
    metadata, or debug-info."""

    set_doc = "Set where libfiber's data layout is read from."
    show_doc = "Show where libfiber's data layout is read from."

    def __init__(self):
        super().__init__("libfiber-layout", gdb.COMMAND_DATA, gdb.PARAM_ENUM,
                         ["auto", "metadata", "debug-info"])
        self.value = "auto"

    def get_show_string(self, svalue):
        return "libfiber's layout is read from: %s" % svalue


LAYOUT_PARAM = LayoutParam()


def _addr_of(name):
    """The address of symbol NAME (debug information or the symbol table),
    or None."""
    try:
        return int(gdb.parse_and_eval("(unsigned long)&%s" % name))
    except gdb.error:
        return None


def _read(addr, n):
    try:
        return bytes(gdb.selected_inferior().read_memory(addr, n))
    except gdb.MemoryError:
        raise gdb.GdbError("libfiber: cannot read memory at 0x%x" % addr)


def _u32(addr):
    return struct.unpack("<I", _read(addr, 4))[0]


def _i32(addr):
    return struct.unpack("<i", _read(addr, 4))[0]


def _u64(addr):
    return struct.unpack("<Q", _read(addr, 8))[0]


def _cstr(raw):
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def _layout_from_metadata():
    addr = _addr_of("fb_gdb_layout")
    if addr is None:
        return None
    head = struct.unpack("<4I", _read(addr, 16))
    if head[0] != LAYOUT_MAGIC:
        raise gdb.GdbError("libfiber: fb_gdb_layout at 0x%x has a wrong "
                           "magic number" % addr)
    if head[1] != LAYOUT_VERSION:
        raise gdb.GdbError(
            "libfiber: this libfiber-gdb.py reads layout version %d, the "
            "library has version %d: use the helper installed with the "
            "library" % (LAYOUT_VERSION, head[1]))
    raw = _read(addr, head[2])
    n = len(LAYOUT_FIELDS)
    lay = dict(zip(LAYOUT_FIELDS, struct.unpack_from("<%dI" % n, raw)))
    if lay["ptr_size"] != 8:
        raise gdb.GdbError("libfiber: only 64-bit programs are supported")
    w, off = lay["name_len"], 4 * n
    lay["states"] = [_cstr(raw[off + i * w:off + (i + 1) * w])
                     for i in range(lay["nr_states"])]
    off += LAYOUT_NR_STATES * w
    lay["kinds"] = [_cstr(raw[off + i * w:off + (i + 1) * w])
                    for i in range(lay["nr_kinds"])]
    lay["source"] = "metadata"
    return lay


def _layout_from_debug_info():
    try:
        gdb.lookup_type("struct fb_fiber")
    except gdb.error:
        return None

    def off(expr):
        return int(gdb.parse_and_eval("(unsigned long)&((%s *)0)->%s"
                                      % tuple(expr.split(":"))))

    lay = {
        "rt_nr_workers": off("struct fb_runtime:nr_workers"),
        "rt_workers": off("struct fb_runtime:workers"),
        "worker_curr": off("struct fb_worker:curr"),
        "worker_live": off("struct fb_worker:live"),
        "list_next": off("struct fb_list:next"),
        "fiber_sp": off("struct fb_fiber:sp"),
        "fiber_state": off("struct fb_fiber:state"),
        "fiber_stack_map": off("struct fb_fiber:stack.map"),
        "fiber_stack_map_len": off("struct fb_fiber:stack.map_len"),
        "fiber_stack_size": off("struct fb_fiber:stack.size"),
        "fiber_pf_prev": off("struct fb_fiber:pf.prev"),
        "fiber_self": off("struct fb_fiber:self"),
        "fiber_id": off("struct fb_fiber:id"),
        "fiber_name": off("struct fb_fiber:name"),
        "fiber_name_len":
            gdb.lookup_type("struct fb_fiber")["name"].type.sizeof,
        "fiber_live_node": off("struct fb_fiber:live_node"),
        "fiber_waiter": off("struct fb_fiber:waiter"),
        "waiter_kind": off("struct fb_waiter:kind"),
        "waiter_obj": off("struct fb_waiter:obj"),
        "waiter_data": off("struct fb_waiter:data"),
        "waiter_deadline": off("struct fb_waiter:deadline"),
    }

    def names(enum, prefix):
        out = {}
        for fld in gdb.lookup_type(enum).fields():
            name = fld.name.replace(prefix, "").lower().replace("_", " ")
            out[fld.enumval] = name
        return [out.get(i, str(i)) for i in range(max(out) + 1)]

    lay["states"] = names("enum fb_fiber_state", "FB_FIBER_")
    lay["kinds"] = names("enum fb_wait_kind", "FB_WAIT_")
    lay["source"] = "debug-info"
    return lay


def layout():
    """The offsets and names the commands read by (a dict)."""
    how = LAYOUT_PARAM.value
    lay = None
    if how in ("auto", "metadata"):
        lay = _layout_from_metadata()
    if lay is None and how in ("auto", "debug-info"):
        lay = _layout_from_debug_info()
    if lay is None:
        if how == "metadata":
            raise gdb.GdbError(
                "libfiber: no fb_gdb_layout in the program's symbols "
                "(`set libfiber-layout auto` also tries debug information)")
        if how == "debug-info":
            raise gdb.GdbError(
                "libfiber: no debug information for libfiber (struct "
                "fb_fiber): build it with -Ddebug=true or install its "
                "-dbg package, or `set libfiber-layout auto`")
        raise gdb.GdbError(NEED_SYMBOLS)
    return lay


class Fiber:
    """One live fiber, as read from memory."""

    def __init__(self, lay, addr, running):
        self.addr = addr
        self.running = running  # the worker running it, or None
        self.id = _u64(addr + lay["fiber_id"])
        self.name = _cstr(_read(addr + lay["fiber_name"],
                                lay["fiber_name_len"]))
        self.state = _i32(addr + lay["fiber_state"])
        states = lay["states"]
        self.state_name = (states[self.state]
                           if 0 <= self.state < len(states)
                           else str(self.state))
        self.sp = _u64(addr + lay["fiber_sp"])
        hi = (_u64(addr + lay["fiber_stack_map"]) +
              _u64(addr + lay["fiber_stack_map_len"]))
        # The usable stack: the top size bytes of the mapping, above the
        # guard region.
        self.stack = (hi - _u64(addr + lay["fiber_stack_size"]), hi)
        self.prev = _i32(addr + lay["fiber_pf_prev"])
        self.handle = _u64(addr + lay["fiber_self"])
        self.what = _describe(lay, self)


def _describe(lay, f):
    """What @f waits on, as fiber_dump() says it; None unless it waits."""
    if f.state_name not in ("parking", "parked") or f.running is not None:
        return None
    w = _u64(f.addr + lay["fiber_waiter"])
    if not w:
        return "exiting"
    kind = _i32(w + lay["waiter_kind"])
    obj = _u64(w + lay["waiter_obj"])
    data = _u64(w + lay["waiter_data"])
    deadline = _u64(w + lay["waiter_deadline"])
    kinds = lay["kinds"]
    name = kinds[kind] if 0 <= kind < len(kinds) else "?"
    if name == "fd":
        ev = data & 0xffffffff
        rd, wr = bool(ev & EPOLLIN), bool(ev & EPOLLOUT)
        how = ("reading and writing" if rd and wr else "reading" if rd
               else "writing" if wr else "events")
        fd = obj & 0xffffffff
        s = "waits on fd %d for %s" % (fd - (1 << 32) if fd >> 31 else fd,
                                       how)
    elif name == "sleep":
        s = "sleeps"
    elif name == "join":  # data: the joinee's id (api/fiber.c)
        s = "joins fiber %d" % data
    else:
        s = "waits on %s 0x%x" % (name, obj)
    if deadline != NO_DEADLINE:
        s += " (until %.6f s CLOCK_MONOTONIC%s)" % (deadline / 1e9,
                                                    _time_left(deadline))
    return s


def _live_here():
    """True when the inferior is a live process on this machine, whose
    CLOCK_MONOTONIC is gdb's."""
    inf = gdb.selected_inferior()
    conn = getattr(inf, "connection", None)
    return inf.pid != 0 and conn is not None and conn.type == "native"


def _time_left(deadline):
    if not _live_here():
        return ""
    left = deadline / 1e9 - time.clock_gettime(time.CLOCK_MONOTONIC)
    return "; %.3f s left" % left if left > 0 else "; due"


def fibers():
    """Every live fiber (a Fiber) of the runtime, worker by worker."""
    lay = layout()
    rt_at = _addr_of("fb_rt")
    if rt_at is None:
        raise gdb.GdbError(NEED_SYMBOLS)
    rt = _u64(rt_at)
    if rt == 0:
        raise gdb.GdbError("libfiber: the runtime is not running")
    n = _i32(rt + lay["rt_nr_workers"])
    warr = _u64(rt + lay["rt_workers"])
    workers = [_u64(warr + 8 * i) for i in range(n)]
    running = {}
    for i, w in enumerate(workers):
        curr = _u64(w + lay["worker_curr"])
        if curr:
            running[curr] = i
    out = []
    for w in workers:
        head = w + lay["worker_live"]
        node = _u64(head + lay["list_next"])
        seen = 0
        while node and node != head and seen < 10000000:
            addr = node - lay["fiber_live_node"]
            out.append(Fiber(lay, addr, running.get(addr)))
            node = _u64(node + lay["list_next"])
            seen += 1
    return out


def _find(fid):
    for f in fibers():
        if f.id == fid:
            return f
    raise gdb.GdbError("libfiber: no live fiber with id %d" % fid)


class InfoFibers(gdb.Command):
    """List libfiber's live fibers: id, name, state, worker, stack, saved
    stack pointer, handle, and what a parked fiber waits on."""

    def __init__(self):
        super().__init__("info fibers", gdb.COMMAND_STATUS)

    def invoke(self, arg, from_tty):
        out = ["%6s  %-20s %-9s %6s  %-37s %-14s %-14s %s" %
               ("id", "name", "state", "worker", "stack", "saved sp",
                "handle", "waits")]
        for f in fibers():
            run = f.running
            worker = run if run is not None else f.prev
            out.append("%6d  %-20s %-9s %5s%s  0x%x-0x%x %-14s %-14s %s" % (
                f.id, (f.name or "-")[:20],
                "running" if run is not None else f.state_name,
                worker, "*" if run is not None else " ",
                f.stack[0], f.stack[1],
                "-" if run is not None else "0x%x" % f.sp,
                "0x%x" % f.handle, f.what or "-"))
        gdb.write("\n".join(out) + "\n")
        gdb.write("(* running now; otherwise the worker it last ran on)\n")


class _FrameId:
    """A frame id for gdb's unwinder API: the attributes sp and pc."""

    def __init__(self, sp, pc):
        self.sp = sp
        self.pc = pc


class FiberUnwinder(Unwinder):
    """While a fiber is shown: the selected thread's frame 0 unwinds to
    the fiber's saved context (frame 1 is where it switched out)."""

    def __init__(self):
        super().__init__("libfiber")
        self.enabled = False
        self.ptid = None
        self.sp = 0
        self.regs = {}

    def __call__(self, pending):
        if self.ptid is None or pending.level() != 0:
            return None
        t = gdb.selected_thread()
        if t is None or t.ptid != self.ptid:
            return None
        # The id's stack address is the fiber's saved sp, below all of
        # its frames, so the fiber's frames are outer to this one
        # wherever the thread's own stack is.
        info = pending.create_unwind_info(
            _FrameId(gdb.Value(self.sp), pending.read_register("rip")))
        for r, v in self.regs.items():
            info.add_saved_register(r, gdb.Value(v))
        return info

    def show(self, f):
        """Describe @f's saved context as frame 0's caller."""
        slot = struct.unpack("<8Q", _read(f.sp, 64))
        self.regs = {r: slot[i + 1] for i, r in enumerate(X86_64_SLOTS)}
        self.regs["rip"] = slot[7]
        self.regs["rsp"] = f.sp + 64
        self.sp = f.sp
        self.ptid = gdb.selected_thread().ptid
        self.enabled = True
        gdb.invalidate_cached_frames()

    def hide(self):
        was = self.ptid is not None
        self.ptid = None
        self.enabled = False
        gdb.invalidate_cached_frames()
        return was

    def shows_frame(self, frame):
        """True for the frame 0 that stands in for the fiber's caller."""
        if self.ptid is None or frame.level() != 0:
            return False
        t = gdb.selected_thread()
        return t is not None and t.ptid == self.ptid


UNWINDER = FiberUnwinder()
register_unwinder(None, UNWINDER, replace=True)


class FiberFrameFilter:
    """Leaves out frame 0 while the unwinder shows a fiber: the backtrace
    is the fiber's."""

    def __init__(self):
        self.name = "libfiber"
        self.priority = 100
        self.enabled = True
        gdb.frame_filters[self.name] = self

    def filter(self, frames):
        return (d for d in frames
                if not UNWINDER.shows_frame(d.inferior_frame()))


FiberFrameFilter()


def _on_cont(event):
    # The program runs on: the saved context it showed is gone.
    if UNWINDER.ptid is not None:
        UNWINDER.hide()


gdb.events.cont.connect(_on_cont)


def _show(arg, cmd):
    words = arg.split(None, 1)
    if not words:
        raise gdb.GdbError("usage: fiber %s ID" % cmd)
    try:
        fid = int(words[0], 0)
    except ValueError:
        raise gdb.GdbError("libfiber: %s is not a fiber id" % words[0])
    if gdb.selected_thread() is None:
        raise gdb.GdbError("libfiber: no thread to show the fiber through")
    arch = gdb.selected_inferior().architecture().name()
    if "x86-64" not in arch:
        raise gdb.GdbError("libfiber: fiber %s supports x86-64 only" % cmd)
    f = _find(fid)
    if f.running is not None:
        raise gdb.GdbError(
            "libfiber: fiber %d is running on worker %d; use its thread"
            % (fid, f.running))
    UNWINDER.show(f)
    return words[1] if len(words) > 1 else ""


class Fiber_(gdb.Command):
    """libfiber: fiber bt ID | fiber frame ID | fiber restore."""

    def __init__(self):
        super().__init__("fiber", gdb.COMMAND_STACK, prefix=True)


class FiberBt(gdb.Command):
    """fiber bt ID [BACKTRACE-OPTIONS] - backtrace of a fiber that is not
    running, from the context it saved."""

    def __init__(self):
        super().__init__("fiber bt", gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        try:
            rest = _show(arg, "bt")
            gdb.execute("backtrace " + rest, from_tty)
        finally:
            UNWINDER.hide()


class FiberFrame(gdb.Command):
    """fiber frame ID - show a fiber that is not running until `fiber
    restore`: `bt`, `frame N`, `up`, `info locals` then see its frames,
    numbered from 1 (frame 0 stays the thread's own).  Works on a core
    file; on a live process, continuing ends it."""

    def __init__(self):
        super().__init__("fiber frame", gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        try:
            _show(arg, "frame")
            gdb.execute("frame 1", from_tty)
        except BaseException:
            UNWINDER.hide()
            raise


class FiberRestore(gdb.Command):
    """fiber restore - back to the thread's own frames after `fiber
    frame`."""

    def __init__(self):
        super().__init__("fiber restore", gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        if UNWINDER.hide():
            gdb.execute("frame 0", from_tty)


Fiber_()
InfoFibers()
FiberBt()
FiberFrame()
FiberRestore()
