#!/bin/sh
# compile_time.sh [ATTNC] [RUNS] - how long attnc takes to compile each
# model to native code (build + optimize + JIT, from --stats' compile_ms),
# the median and range of RUNS runs, with the machine's load.
attnc=${1:-build/attnc}
runs=${2:-5}
cd "$(dirname "$0")/.." || exit 1
if [ ! -x "$attnc" ]; then
	echo "compile_time.sh: no attnc at '$attnc' (build it, or name it)" >&2
	exit 1
fi
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-28s %10s %10s %10s %8s\n' model median_ms min_ms max_ms kernels
for g in models/*.g; do
	ms=$(for i in $(seq "$runs"); do
		"$attnc" "$g" --jit --stats | sed -n 's/.*"compile_ms": \([0-9.]*\).*/\1/p'
	done | sort -n)
	k=$("$attnc" "$g" --jit --stats | sed -n 's/.*"jit_kernels": \([0-9]*\).*/\1/p')
	n=$(echo "$ms" | wc -l)
	med=$(echo "$ms" | sed -n "$(((n + 1) / 2))p")
	printf '%-28s %10s %10s %10s %8s\n' "$(basename "$g")" "$med" \
		"$(echo "$ms" | head -1)" "$(echo "$ms" | tail -1)" "$k"
done
