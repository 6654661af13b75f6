#!/bin/sh
# compile_time.sh [ATTNC] [RUNS] - how long attnc takes to compile to
# native code (build + optimize + machine code + link, --stats'
# compile_ms, with its parts), the median of RUNS runs, cold (an empty
# object cache each run) and warm (the cache filled by the run before),
# with the machine's load and the CPU seconds of the cold runs (wall
# time on a shared machine is mostly waiting):
#   - the training program (--train, all entry points) of models/gpt.g
#     with 2, 4, 8 and 12 layers (its `L = 2` rewritten; one epoch on
#     tests/cli/data/stories-6k.txt, whose time is not counted);
#   - the book's seq2seq models' training programs (--train, 16
#     examples, one epoch);
#   - every models/*.g's --jit program;
#   - models/gpt.g's training program with 4, 8 and 12 layers compiled
#     after the 2-layer one has filled an empty cache: not the program's
#     entry but most of its kernels' units are found there
#     (docs/codegen.md, "Kernels cached one by one"): its compile_ms,
#     units found of all, and the CPU seconds of the whole run.
attnc=${1:-build/attnc}
runs=${2:-3}
cd "$(dirname "$0")/.." || exit 1
if [ ! -x "$attnc" ]; then
	echo "compile_time.sh: no attnc at '$attnc' (build it, or name it)" >&2
	exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export XDG_CACHE_HOME="$tmp/cache"
unset ATTNC_NO_CACHE || true
field() { sed -n "s/.*\"$1\": \"*\([0-9a-z.]*\).*/\1/p"; }
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
# measure NAME ARGS...: one line of medians, cold then warm.
measure() {
	name=$1
	shift
	: >"$tmp/cold" && : >"$tmp/warm" && : >"$tmp/cpu" && : >"$tmp/parts"
	for i in $(seq "$runs"); do
		rm -rf "$tmp/cache"
		/usr/bin/env time -f %U -o "$tmp/u" "$attnc" "$@" --stats \
			>"$tmp/s" 2>/dev/null
		if ! grep -q '"compile_ms"' "$tmp/s"; then
			printf '%-22s (no native run: %s)\n' "$name" "$*"
			return
		fi
		field compile_ms <"$tmp/s" >>"$tmp/cold"
		echo "$(field opt_ms <"$tmp/s") $(field codegen_ms <"$tmp/s")" >>"$tmp/parts"
		cat "$tmp/u" >>"$tmp/cpu"
		"$attnc" "$@" --stats 2>/dev/null >"$tmp/s"
		test "$(field cache <"$tmp/s")" = hit || echo "$name: no cache hit" >&2
		field compile_ms <"$tmp/s" >>"$tmp/warm"
	done
	printf '%-22s %10s %10s %10s %10s %10s\n' "$name" "$(median <"$tmp/cold")" \
		"$(cut -d' ' -f1 "$tmp/parts" | median)" \
		"$(cut -d' ' -f2 "$tmp/parts" | median)" "$(median <"$tmp/cpu")" \
		"$(median <"$tmp/warm")"
}
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-22s %10s %10s %10s %10s %10s\n' program cold_ms opt_ms codegen_ms \
	cold_cpu_s warm_ms
for l in 2 4 8 12; do
	sed "s/L = 2,/L = $l,/" models/gpt.g >"$tmp/gpt$l.g"
	measure "gpt train, $l layers" "$tmp/gpt$l.g" --train --epochs 1 \
		--data tests/cli/data/stories-6k.txt
done
for m in transformer bahdanau; do
	measure "$m train" models/$m.g --train --epochs 1 --examples 16
done
for g in models/*.g; do
	measure "$(basename "$g" .g)" "$g" --jit
done
printf '%-22s %10s %10s %10s\n' "after 2 layers" compile_ms units_hit cpu_s
for l in 4 8 12; do
	: >"$tmp/after" && : >"$tmp/hit" && : >"$tmp/cpu"
	for i in $(seq "$runs"); do
		rm -rf "$tmp/cache"
		"$attnc" "$tmp/gpt2.g" --train --epochs 1 \
			--data tests/cli/data/stories-6k.txt >/dev/null 2>&1
		/usr/bin/env time -f %U -o "$tmp/u" "$attnc" "$tmp/gpt$l.g" \
			--train --epochs 1 --data tests/cli/data/stories-6k.txt \
			--stats >"$tmp/s" 2>/dev/null
		field compile_ms <"$tmp/s" >>"$tmp/after"
		echo "$(field units_hit <"$tmp/s")/$(field units <"$tmp/s")" >>"$tmp/hit"
		cat "$tmp/u" >>"$tmp/cpu"
	done
	printf '%-22s %10s %10s %10s\n' "gpt train, $l layers" \
		"$(median <"$tmp/after")" "$(head -n 1 "$tmp/hit")" \
		"$(median <"$tmp/cpu")"
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
