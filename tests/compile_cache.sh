#!/bin/sh
# compile_cache.sh ATTNC SOURCE_DIR - the object cache of the JIT
# (docs/codegen.md): the first run compiles and stores, the second reads
# the object back (--stats says "miss", then "hit") and prints the same
# results bit for bit; an entry with one byte changed, or cut short, is
# found out ("corrupt"), compiled again and replaced; --no-cache and
# ATTNC_NO_CACHE=1 leave the cache alone ("off"); no temporary file is
# left behind.
set -eu
attnc=$1
cd "$2"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export XDG_CACHE_HOME="$dir/xdg"
unset ATTNC_NO_CACHE || true
g=models/additive_attention.g
cache() { "$attnc" $g --jit --stats "$@" | sed -n 's/.*"cache": "\([a-z]*\)".*/\1/p'; }
expect() { # expect WANT GOT WHAT
	test "$1" = "$2" || { echo "$3: cache '$2', expected '$1'"; exit 1; }
}
"$attnc" $g --jit --no-cache >"$dir/ref.txt"
expect miss "$(cache)" "first run"
n=$(ls "$dir/xdg/attnc" | wc -l)
test "$n" = 1 || { echo "expected one entry, found $n"; exit 1; }
entry=$(ls "$dir/xdg/attnc"/*.o)
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
expect off "$(cache --no-cache)" "--no-cache"
expect off "$(ATTNC_NO_CACHE=1 cache)" "ATTNC_NO_CACHE=1"
left=$(ls -A "$dir/xdg/attnc" | grep -c '^\.tmp' || true)
test "$left" = 0 || { echo "temporary files left: $left"; exit 1; }
echo "compile cache ok"
