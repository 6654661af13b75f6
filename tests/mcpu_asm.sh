#!/bin/sh
# mcpu_asm.sh ATTNC SOURCE_DIR - --mcpu picks the CPU of the code: the
# additive attention's assembly (--emit=asm) and its object (-c, read
# back with objdump) for x86-64-v3 use no zmm register (no AVX-512),
# while x86-64-v4's do (so the check can see them), and so does the
# default on a host whose /proc/cpuinfo says avx512f.
set -eu
attnc=$1
cd "$2"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
g=models/additive_attention.g
zmm() { grep -c '%zmm' "$1" || true; }
"$attnc" $g --emit=asm --mcpu x86-64-v3 -o "$dir/v3.s"
"$attnc" $g --emit=asm --mcpu=x86-64-v4 -o "$dir/v4.s"
"$attnc" $g --emit=asm -o "$dir/host.s"
"$attnc" $g -c --mcpu x86-64-v3 -o "$dir/v3.o" 2>/dev/null
objdump -d "$dir/v3.o" >"$dir/v3.dis"
test "$(grep -c '%ymm' "$dir/v3.s")" -gt 0 || { echo "v3: no ymm"; exit 1; }
test "$(zmm "$dir/v3.s")" = 0 || { echo "v3.s uses zmm"; exit 1; }
test "$(zmm "$dir/v3.dis")" = 0 || { echo "v3.o uses zmm"; exit 1; }
test "$(zmm "$dir/v4.s")" -gt 0 || { echo "v4.s uses no zmm"; exit 1; }
if grep -qw avx512f /proc/cpuinfo; then
	test "$(zmm "$dir/host.s")" -gt 0 || { echo "host.s uses no zmm"; exit 1; }
fi
echo "mcpu ok"
