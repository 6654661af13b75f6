#!/bin/sh
# no_tuner.sh ATTNC SOURCE_DIR - ATTNC_NO_TUNER=1 turns the thread tuner
# off: with --threads 2 every epoch ends on 2 threads (the metrics'
# "threads"), so every step ran on the team even on a busy machine, where
# the tuner would have fallen back to 1; the losses are those of
# --threads 1 bit for bit; ATTNC_NO_TUNER=0 leaves the tuner on.
set -eu
attnc=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
cd "$2/tests/cli/data"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
train() { # METRICS THREADS
	"$attnc" charlm.g --train --epochs 3 --data stories-6k.txt \
		--threads "$2" --metrics "$1" >/dev/null 2>&1
}
ATTNC_NO_TUNER=1 train "$dir/team.jsonl" 2
train "$dir/one.jsonl" 1
ATTNC_NO_TUNER=0 train "$dir/tuned.jsonl" 2
n=$(grep -c '"epoch"' "$dir/team.jsonl")
[ "$n" = 3 ] || { echo "want 3 epochs, got $n" >&2; exit 1; }
if [ "$(grep -c '"threads": 2}' "$dir/team.jsonl")" != 3 ]; then
	echo "ATTNC_NO_TUNER=1 --threads 2: an epoch not on 2 threads:" >&2
	cat "$dir/team.jsonl" >&2
	exit 1
fi
losses() { sed 's/.*"loss": \([^,]*\),.*"valid_loss": \([^,]*\),.*/\1 \2/' "$1"; }
for f in one tuned; do
	if [ "$(losses "$dir/team.jsonl")" != "$(losses "$dir/$f.jsonl")" ]; then
		echo "the losses on 2 threads differ from the $f run:" >&2
		cat "$dir/team.jsonl" "$dir/$f.jsonl" >&2
		exit 1
	fi
done
echo "no tuner ok"
