#!/bin/sh
# mpi_scaling.sh [EPOCHS] [RUNS] - data-parallel scaling on this machine:
# the book's Transformer trained with the same global batch (64 rows in
# 2 shards) as 1 process x 2 threads (a shard a thread) and as 2 MPI
# ranks x 1 thread (a shard a rank). Prints tokens per second, the median
# over epochs 2.. of each run, for RUNS runs of each, alternating, and
# checks that both give the same losses (they must, to the bit).
# Run from the repository root after building (build/attnc).
set -eu
epochs=${1:-20}
runs=${2:-3}
attnc=build/attnc
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
median_rate() { # metrics file: median tokens_per_sec of epochs 2..
	sed -n 's/.*"epoch": \([0-9]*\),.*"tokens_per_sec": \([^,]*\),.*/\1 \2/p' "$1" |
		awk '$1 > 1 {print $2}' | sort -g |
		awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
losses() { sed 's/.*"loss": \([^,]*\),.*/\1/' "$1" | head -n "$epochs"; }
echo "transformer, $epochs epochs, batch 64 in 2 shards; load: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$runs"); do
	"$attnc" models/transformer.g --train --epochs "$epochs" --threads 2 \
		--metrics "$dir/threads.json" >/dev/null 2>&1
	mpirun -np 2 --oversubscribe "$attnc" models/transformer.g --train \
		--epochs "$epochs" --threads 1 --shards 1 \
		--metrics "$dir/ranks.json" >/dev/null 2>&1
	losses "$dir/threads.json" >"$dir/a"
	losses "$dir/ranks.json" >"$dir/b"
	cmp -s "$dir/a" "$dir/b" || { echo "the losses differ"; exit 1; }
	t=$(median_rate "$dir/threads.json")
	m=$(median_rate "$dir/ranks.json")
	echo "run $r: 1 process x 2 threads $t tokens/s, 2 ranks x 1 thread $m tokens/s, ratio $(echo "$m $t" | awk '{printf "%.2f", $1 / $2}')"
done
