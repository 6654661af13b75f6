#!/bin/sh
# perf_jit.sh ATTNC SOURCE_DIR - ATTNC_PERF_JIT=1 has the JIT write a
# jitdump file (perf's format: the magic "JiTD", then a record per
# function with its name) under $JITDUMPDIR/.debug/jit, naming the
# program's entry points and kernels (ENTRY.kN.OP), with the cache cold
# and warm; the results are those
# of a run without it; ATTNC_PERF_JIT=0 writes none. Skipped (77) when
# this LLVM has no perf listener.
set -eu
attnc=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
cd "$2"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export XDG_CACHE_HOME="$dir/cache"
run() { # OUT [ENV=VALUE]
	out=$1
	shift
	env JITDUMPDIR="$dir/dump" "$@" "$attnc" models/dot_product_attention.g \
		--jit >"$out" 2>&1
}
dumps() { find "$dir/dump" -name 'jit-*.dump' 2>/dev/null | wc -l; }
run "$dir/plain.out"
if ! run "$dir/cold.out" ATTNC_PERF_JIT=1; then
	if grep -q 'no perf listener' "$dir/cold.out"; then
		echo "perf_jit: this LLVM has no perf listener: skipped"
		exit 77
	fi
	cat "$dir/cold.out" >&2
	exit 1
fi
run "$dir/warm.out" ATTNC_PERF_JIT=1
[ "$(dumps)" = 2 ] || { echo "want 2 jitdump files, got $(dumps)" >&2; exit 1; }
for f in $(find "$dir/dump" -name 'jit-*.dump'); do
	[ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = DTiJ ] ||
		[ "$(head -c 4 "$f")" = JiTD ] ||
		{ echo "$f: not a jitdump file" >&2; exit 1; }
	grep -aq 'dot_product_attention_forward' "$f" ||
		{ echo "$f names no entry point" >&2; exit 1; }
	grep -aq 'forward\.k[0-9]*\.masked_softmax' "$f" ||
		{ echo "$f names no kernel" >&2; exit 1; }
done
for f in cold warm; do
	cmp -s "$dir/plain.out" "$dir/$f.out" ||
		{ echo "the $f run's output differs:" >&2; diff "$dir/plain.out" "$dir/$f.out" >&2; exit 1; }
done
rm -rf "$dir/dump"
run "$dir/off.out" ATTNC_PERF_JIT=0
[ "$(dumps)" = 0 ] || { echo "ATTNC_PERF_JIT=0 wrote a jitdump file" >&2; exit 1; }
echo "perf jit ok"
