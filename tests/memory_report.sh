#!/bin/sh
# memory_report.sh ATTNC SOURCE_DIR - ATTNC_MEMORY (docs/cli.md, "What
# the scratch slab holds"): models/additive_attention.g's forward on its
# example (B 2, Q 1, K 10, hidden 8) has three buffers live at its
# peak, counted by hand: keys @ W_k (2·10·8 floats, 640 B) and
# queries @ W_q (2·1·8, 64 B), both at line 15, and the tanh of their
# sum (2·1·10·8, 640 B); by line and op, matmul 2 buffers, 704 of
# 1,344 B (52.4%), tanh 1 (47.6%). =buffers lists them; the results
# on stdout are those of a run without it; =0 prints no report.
set -eu
attnc=$1
cd "$2"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export ATTNC_NO_CACHE=1
g=models/additive_attention.g
"$attnc" $g --jit >"$dir/plain.out" 2>"$dir/plain.err"
ATTNC_MEMORY=buffers "$attnc" $g --jit >"$dir/mem.out" 2>"$dir/mem.err"
ATTNC_MEMORY=0 "$attnc" $g --jit >"$dir/off.out" 2>"$dir/off.err"
fail() {
	echo "memory_report: $*" >&2
	cat "$dir/mem.err" >&2
	exit 1
}
cmp -s "$dir/plain.out" "$dir/mem.out" || fail "results differ with ATTNC_MEMORY"
cmp -s "$dir/plain.err" "$dir/off.err" || fail "ATTNC_MEMORY=0 printed something"
grep -q '^scratch of forward (in order): .* live at its peak in 3 buffers$' \
	"$dir/mem.err" || fail "no header with 3 buffers"
grep -Eq '^  models/additive_attention.g:15 matmul +2 +0\.00 +52\.4%$' \
	"$dir/mem.err" || fail "no matmul row of 2 buffers, 52.4%"
grep -Eq '^  models/additive_attention.g:15 tanh +1 +0\.00 +47\.6%$' \
	"$dir/mem.err" || fail "no tanh row of 1 buffer, 47.6%"
sizes=$(sed -n 's/^  %[0-9]* models\/additive_attention.g:15 \([a-z]*\) \([0-9]*\)$/\1 \2/p' \
	"$dir/mem.err" | sort | tr '\n' ' ')
[ "$sizes" = "matmul 64 matmul 640 tanh 640 " ] ||
	fail "buffers listed: '$sizes', not matmul 64, matmul 640, tanh 640"
echo "memory report ok"
