#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# scdoc.sh SCDOC VERSION IN OUT - render the scdoc page IN into the roff
# page OUT, with @VERSION@ replaced by VERSION.  scdoc turns hyphenation
# off before .TH, which turns it on again; a .nh after .TH keeps
# identifiers such as FIBER_CREATE_DETACHED whole.  OUT appears only
# when complete.
set -eu
scdoc=$1 version=$2 in=$3 out=$4
sed "s/@VERSION@/$version/g" "$in" >"$out.scd.tmp"
"$scdoc" <"$out.scd.tmp" >"$out.roff.tmp"
sed '/^\.TH /a\
.nh' "$out.roff.tmp" >"$out.tmp"
rm -f "$out.scd.tmp" "$out.roff.tmp"
mv "$out.tmp" "$out"
