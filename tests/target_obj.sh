#!/bin/sh
# target_obj.sh ATTNC SOURCE_DIR - --target TRIPLE makes -c objects for
# another machine: the ELF header's e_machine (bytes 18-19, read with
# od) is x86-64's (62) for x86_64-linux-gnu and AArch64's (183) for
# aarch64-linux-gnu (where this LLVM has that target); x86_64-linux-gnu
# with --mcpu x86-64-v3 uses ymm but no zmm registers; an unknown
# triple, a non-Linux or 32-bit one, --jit for another machine and an
# x86-64 --mcpu for AArch64 are refused with one error line, status 1.
set -eu
attnc=$1
cd "$2"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
g=models/additive_attention.g
machine() { od -An -tu2 -j18 -N2 "$1" | tr -d ' '; }
"$attnc" $g -c --target x86_64-linux-gnu --mcpu x86-64-v3 -o "$dir/v3.o" >/dev/null
test "$(machine "$dir/v3.o")" = 62 || { echo "v3.o: e_machine $(machine "$dir/v3.o")"; exit 1; }
objdump -d "$dir/v3.o" >"$dir/v3.dis"
test "$(grep -c '%ymm' "$dir/v3.dis")" -gt 0 || { echo "v3.o: no ymm"; exit 1; }
test "$(grep -c '%zmm' "$dir/v3.dis" || true)" = 0 || { echo "v3.o uses zmm"; exit 1; }
if "$attnc" $g -c --target=aarch64-linux-gnu -o "$dir/a64.o" >/dev/null 2>"$dir/a64.err"; then
	test "$(machine "$dir/a64.o")" = 183 || { echo "a64.o: e_machine $(machine "$dir/a64.o")"; exit 1; }
	test -s "$dir/a64.h" || { echo "no a64.h"; exit 1; }
else
	grep -q "unknown target 'aarch64-linux-gnu'" "$dir/a64.err" ||
		{ cat "$dir/a64.err"; exit 1; }
	echo "(this LLVM has no AArch64 target)"
fi
refused() { # refused TEXT ARGS...: exits 1 with one line containing TEXT
	want=$1
	shift
	if "$attnc" $g "$@" >"$dir/out" 2>"$dir/err"; then
		echo "accepted: $*"; exit 1
	fi
	grep -q "$want" "$dir/err" || { echo "$*:"; cat "$dir/err"; exit 1; }
	test "$(wc -l <"$dir/err")" = 1 || { echo "$*: more than one line"; exit 1; }
}
refused "unknown target 'foo-bar-baz'" -c --target foo-bar-baz -o "$dir/x.o"
refused "not a Linux one" -c --target x86_64-apple-darwin -o "$dir/x.o"
refused "not a 64-bit little-endian" -c --target i686-linux-gnu -o "$dir/x.o"
refused "cannot run here" --jit --target aarch64-linux-gnu
refused "the CPU is 'generic'" -c --target aarch64-linux-gnu --mcpu znver3 -o "$dir/x.o"
"$attnc" $g --jit --target x86_64-linux-gnu --mcpu x86-64-v3 >/dev/null ||
	{ echo "--jit for the host's own triple failed"; exit 1; }
echo "target ok"
