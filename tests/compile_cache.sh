#!/bin/sh
# compile_cache.sh ATTNC SOURCE_DIR - the object cache of the JIT
# (docs/codegen.md): the first run compiles and stores the program's
# entry and one entry per unit, the second reads the program's back
# (--stats says "miss", then "hit") and prints the same results bit for
# bit; an entry with one byte changed, or cut short, is found out
# ("corrupt"), compiled again and replaced; without the program's entry
# the units' entries serve (every unit a hit), and a unit's entry with
# one byte changed is found out (units_corrupt), compiled again and
# replaced; --no-cache and ATTNC_NO_CACHE=1 leave the cache alone
# ("off"); no temporary file is left behind.
set -eu
attnc=$1
cd "$2"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export XDG_CACHE_HOME="$dir/xdg"
unset ATTNC_NO_CACHE || true
g=models/additive_attention.g
cache() { "$attnc" $g --jit --stats "$@" | sed -n 's/.*"cache": "\([a-z]*\)".*/\1/p'; }
# units: a run's --stats into $dir/stats; field F: a number of it
# (units, units_hit, units_corrupt)
units() { "$attnc" $g --jit --stats >"$dir/stats"; }
field() { sed -n "s/.*\"$1\": \([0-9]*\).*/\1/p" "$dir/stats"; }
hex='[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'
programs() { ls "$dir/xdg/attnc"/$hex$hex$hex$hex.o 2>/dev/null; }
parts() { ls "$dir/xdg/attnc"/$hex$hex$hex$hex.part.o 2>/dev/null; }
expect() { # expect WANT GOT WHAT
	test "$1" = "$2" || { echo "$3: cache '$2', expected '$1'"; exit 1; }
}
"$attnc" $g --jit --no-cache >"$dir/ref.txt"
expect miss "$(cache)" "first run"
n=$(programs | wc -l)
test "$n" = 1 || { echo "expected one program's entry, found $n"; exit 1; }
n_parts=$(parts | wc -l)
test "$n_parts" -ge 2 || { echo "expected units' entries, found $n_parts"; exit 1; }
entry=$(programs)
expect hit "$(cache)" "second run"
"$attnc" $g --jit >"$dir/hit.txt"
cmp -s "$dir/ref.txt" "$dir/hit.txt" || { echo "results differ on a hit"; exit 1; }
# One byte of the object changed (past the 48-byte header).
size=$(wc -c <"$entry")
at=$((size / 2))
byte=$(dd if="$entry" bs=1 skip=$at count=1 2>/dev/null | od -An -tu1 | tr -d ' ')
printf "$(printf '\\%03o' $(((byte + 1) % 256)))" |
	dd of="$entry" bs=1 seek=$at conv=notrunc 2>/dev/null
expect corrupt "$(cache)" "a changed byte"
expect hit "$(cache)" "after replacing a changed entry"
# Cut short.
head -c $((size - 100)) "$entry" >"$dir/short" && mv "$dir/short" "$entry"
expect corrupt "$(cache)" "a truncated entry"
"$attnc" $g --jit >"$dir/again.txt"
cmp -s "$dir/ref.txt" "$dir/again.txt" || { echo "results differ after repair"; exit 1; }
# Not an entry at all: an empty file.
: >"$entry"
expect corrupt "$(cache)" "an empty entry"
# Without the program's entry every unit is found, and the results are
# the same.
rm "$entry"
units
test "$(field units_hit)" = "$(field units)" || { echo "units missed"; exit 1; }
rm "$entry"
"$attnc" $g --jit >"$dir/units.txt"
cmp -s "$dir/ref.txt" "$dir/units.txt" || { echo "results differ from units"; exit 1; }
# A unit's entry with one byte changed: found out, compiled again and
# replaced.
part=$(parts | head -n 1)
size=$(wc -c <"$part")
at=$((size - 10))
byte=$(dd if="$part" bs=1 skip=$at count=1 2>/dev/null | od -An -tu1 | tr -d ' ')
printf "$(printf '\\%03o' $(((byte + 1) % 256)))" |
	dd of="$part" bs=1 seek=$at conv=notrunc 2>/dev/null
rm "$entry"
units
test "$(field units_corrupt)" = 1 || { echo "a changed unit was used"; exit 1; }
test "$(field units_hit)" = $(($(field units) - 1)) || { echo "units missed"; exit 1; }
rm "$entry"
units
test "$(field units_corrupt)" = 0 || { echo "a changed unit was kept"; exit 1; }
"$attnc" $g --jit >"$dir/repaired.txt"
cmp -s "$dir/ref.txt" "$dir/repaired.txt" || { echo "results differ after a unit's repair"; exit 1; }
expect off "$(cache --no-cache)" "--no-cache"
expect off "$(ATTNC_NO_CACHE=1 cache)" "ATTNC_NO_CACHE=1"
left=$(ls -A "$dir/xdg/attnc" | grep -c '^\.tmp' || true)
test "$left" = 0 || { echo "temporary files left: $left"; exit 1; }
echo "compile cache ok"
