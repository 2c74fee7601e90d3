#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# test-gdb.sh GDB TARGET SCRIPT LIB BUILDDIR PREFIX LIBDIR DATADIR SANITIZE - check
# lib/libfiber-gdb.py (SCRIPT) on TARGET (tests/gdb-target.c, linked with
# libfiber.so, whose real file is LIB), TAP output:
#  - on the live process: `info fibers` lists the parked fibers with their
#    handles and what they wait on, `fiber bt` shows where one parked and
#    leaves the thread's own frames as they were; gdb's gcore saves a core;
#  - on that core file: the same, and `fiber frame` selects a fiber's frame;
#  - with LIB's debug information removed (objcopy --strip-debug, what a
#    release build is), live and on a core: the same, from the layout the
#    library carries (fb_gdb_layout);
#  - `set libfiber-layout debug-info`: the same from debug information,
#    or, without it, a plain message;
#  - with LIB stripped whole: the commands say what is missing;
#  - auto-load: `meson install` into a scratch DESTDIR puts the helper
#    where gdb looks for LIB's script, and gdb loads it from there.
# In a sanitizer build (SANITIZE not "none") only the live checks run: the
# sanitizers reserve terabytes of shadow memory, which gcore cannot save
# in a usable core, and the normal build runs the rest.
gdb=$1 target=$2 script=$3 lib=$4 builddir=$5 prefix=$6 libdir=$7 datadir=$8
sanitize=${9:-none}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# G ARGS...: gdb in batch mode, no init files, nothing fetched.
G() {
	"$gdb" -nx -batch -iex 'set debuginfod enabled off' \
		-iex 'set pagination off' "$@" 2>&1
}
# "fiber CMD" for the fiber named NAME (the ids depend on the build).
by_name() { # by_name CMD NAME
	printf 'python gdb.execute("fiber %s %%d" %% %s)' "$1" \
		"[f.id for f in fibers() if f.name == \"$2\"][0]"
}
BT1=$(by_name bt gdb-sleeper-1)
FRAME2=$(by_name frame gdb-sleeper-2)
# live CORE [GDB-ARGS...]: run the target to gdb_stop_here, look, save CORE.
live() {
	core=$1
	shift
	save="gcore $core"
	[ "$sanitize" = none ] || save='echo'
	G "$@" -ex "source $script" -ex 'break gdb_stop_here' -ex run \
		-ex 'info sharedlibrary' -ex 'info fibers' -ex "$BT1" \
		-ex 'bt 1' -ex "$save" -ex kill "$target"
}
# post CORE [GDB-ARGS...]: look at the target's core file CORE.
post() {
	core=$1
	shift
	G "$@" -ex "source $script" -ex 'info fibers' -ex "$BT1" \
		-ex "$FRAME2" -ex 'frame function parked_in_here' \
		-ex 'fiber restore' -ex 'bt 1' "$target" "$core"
}

n=0
echo "1..28"
# check DESCRIPTION PATTERN: PATTERN (grep -E) is in $out.
check() {
	n=$((n + 1))
	if printf '%s\n' "$out" | grep -Eq -- "$2"; then
		echo "ok $n - $1"
	else
		echo "not ok $n - $1"
		printf '%s\n' "$out" | sed 's/^/# /'
	fi
}
skip() { # skip COUNT REASON
	for _ in $(seq "$1"); do
		n=$((n + 1))
		echo "ok $n # SKIP $2"
	done
}
# fibers WHERE: the checks of `info fibers` and `fiber bt` in $out.
fibers() {
	check "$1: info fibers lists the parked fibers and their wait" \
		'gdb-sleeper-2 +parked .* waits on sem 0x[0-9a-f]+$'
	check "$1: info fibers says a joiner joins" \
		"gdb-joiner .* joins fiber ${first_id:-no-id-printed}\$"
	check "$1: fiber bt shows where a fiber parked" \
		'^#[0-9]+ .*parked_in_here \(\)'
	check "$1: fiber bt leaves the thread's frame 0 alone" \
		'^#0 +(0x[0-9a-f]+ in )?gdb_stop_here \(\)'
}

# 1. Live, with the library as built.
out=$(live "$tmp/core")
first_id=$(printf '%s\n' "$out" | sed -n 's/^first-id \([0-9]*\)$/\1/p')
handle=$(printf '%s\n' "$out" | sed -n 's/^first-handle \(0x[0-9a-f]*\)$/\1/p')
until=$(printf '%s\n' "$out" | sed -n 's/^napper-until \([0-9.]*\)$/\1/p')
fibers live
check "live: info fibers prints the handle main holds" \
	"gdb-sleeper-0 .* ${handle:-no-handle-printed} +waits on sem"
nap="gdb-napper +parked .* sleeps \(until ${until:-no-deadline} s"
check "live: a sleeper's deadline and the time left" \
	"$nap CLOCK_MONOTONIC; [0-9.]+ s left\)\$"
if [ "$sanitize" != none ]; then
	skip 22 "a $sanitize build: no usable core file (shadow memory)"
	exit 0
fi
check "live: gcore saved a core file" "Saved corefile $tmp/core"

# 2. The core file.
out=$(post "$tmp/core")
fibers core
check "core: a sleeper's deadline, no time left without a clock" \
	"$nap CLOCK_MONOTONIC\)\$"
check "core: fiber frame, then frame function, selects a fiber's frame" \
	'^#[0-9]+ +0x[0-9a-f]+ in parked_in_here \(\)'
# The layout from debug information alone, where the library has it.
out=$(G -ex "source $script" -ex 'set libfiber-layout debug-info' \
	-ex 'info fibers' "$target" "$tmp/core")
if readelf -S "$lib" 2>/dev/null | grep -q '\.debug_info'; then
	check "core, debug information only: info fibers" \
		'gdb-sleeper-2 +parked .* waits on sem 0x[0-9a-f]+$'
else
	check "core, debug information only: says it is missing" \
		'no debug information for libfiber .*-Ddebug=true'
fi

# 3. No debug information: the layout the library carries.
if command -v objcopy >/dev/null && command -v readelf >/dev/null; then
	soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
	mkdir "$tmp/nodebug" "$tmp/stripped"
	objcopy --strip-debug "$lib" "$tmp/nodebug/$soname"
	objcopy --strip-all "$lib" "$tmp/stripped/$soname"
	out=$(live "$tmp/core-nodebug" \
		-iex "set environment LD_LIBRARY_PATH $tmp/nodebug")
	check "no debug info: the program runs with the copy without it" \
		"$tmp/nodebug/$soname"
	fibers "no debug info, live"
	out=$(post "$tmp/core-nodebug" \
		-iex "set solib-search-path $tmp/nodebug")
	fibers "no debug info, core"
	out=$(G -iex "set solib-search-path $tmp/nodebug" \
		-ex "source $script" -ex 'set libfiber-layout debug-info' \
		-ex 'info fibers' "$target" "$tmp/core-nodebug")
	check "no debug info, debug information only: says it is missing" \
		'no debug information for libfiber .*-Ddebug=true'
	out=$(G -iex "set environment LD_LIBRARY_PATH $tmp/stripped" \
		-ex "source $script" -ex 'break gdb_stop_here' -ex run \
		-ex 'info fibers' -ex 'fiber bt 1' -ex kill "$target")
	check "stripped: info fibers says the symbols are needed" \
		'neither debug information nor its symbol table.*-dbg'
else
	skip 11 "objcopy and readelf (binutils) are not installed"
fi

# 4. The helper installed where gdb auto-loads it for the library: gdb
# looks for SCRIPTS-DIR/<the library's real path>-gdb.py, here with the
# library's build directory standing in for the installed one.
if command -v meson >/dev/null; then
	dest=$tmp/dest
	case $datadir in /*) ;; *) datadir=$prefix/$datadir ;; esac
	case $libdir in /*) ;; *) libdir=$prefix/$libdir ;; esac
	real=$(readlink -f "$lib")
	inst=$dest$datadir/gdb/auto-load$libdir/$(basename "$real")-gdb.py
	out=$(meson install -C "$builddir" --destdir "$dest" --no-rebuild \
		--quiet 2>&1; ls "$inst" 2>&1)
	check "meson install puts the helper in auto-load, as LIB's real name" \
		"^$inst\$"
	sd=$tmp/scripts$(dirname "$real")
	mkdir -p "$sd" && rmdir "$sd"
	ln -s "$dest$datadir/gdb/auto-load$libdir" "$sd"
	out=$(G -iex "set auto-load scripts-directory $tmp/scripts" \
		-iex "set auto-load safe-path $tmp" \
		-ex 'break gdb_stop_here' -ex run \
		-ex 'info auto-load python-scripts' -ex 'info fibers' \
		-ex kill "$target")
	check "auto-load: gdb loaded the installed helper" \
		"^Yes +$tmp/scripts.*/$(basename "$real")-gdb.py *$"
	check "auto-load: info fibers works without source" \
		'gdb-sleeper-2 +parked .* waits on sem'
else
	skip 3 "meson is not on PATH"
fi
