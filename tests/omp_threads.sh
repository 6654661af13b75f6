#!/bin/sh
# omp_threads.sh ATTNC SOURCE_DIR - OpenMP's thread count, the default of
# --threads, keeps --threads' limit: OMP_NUM_THREADS=100000 is refused
# with a message (it crashed libgomp in the first parallel region of
# training, a segmentation fault), --threads N overrides it, and a
# count within the limit trains as before.
set -eu
attnc=$1
cd "$2"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
train="models/nw_param.g --train --epochs 2"
if OMP_NUM_THREADS=100000 "$attnc" $train >"$out" 2>&1; then
	echo "OMP_NUM_THREADS=100000 not refused"; exit 1
fi
grep -q "^attnc: error: OMP_NUM_THREADS=100000: 100000 threads is more than the 256 allowed" "$out" ||
	{ cat "$out"; exit 1; }
OMP_NUM_THREADS=100000 "$attnc" $train --threads 2 >"$out" 2>&1 ||
	{ cat "$out"; exit 1; }
OMP_NUM_THREADS=3 "$attnc" $train >"$out" 2>&1 || { cat "$out"; exit 1; }
echo "omp threads ok"
