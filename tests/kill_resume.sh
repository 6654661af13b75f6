#!/bin/sh
# kill_resume.sh ATTNC SOURCE_DIR - a training run killed with SIGKILL
# and resumed from its last --save-every checkpoint ends with the loss
# curve of the run that was never interrupted, to the bit (the losses of
# --metrics, written with 9 digits, compared as text), and so does one
# stopped after its third epoch and resumed for more with --epochs.
set -eu
attnc=$1
cd "$2"
dir=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
train="models/gpt.g --train --epochs 5 --data tests/cli/data/stories-2k.txt"
losses() { sed 's/.*"loss": \([^,]*\), \(.*"valid_loss": [^,]*\)\{0,1\}.*/\1 \2/' "$1"; }

"$attnc" $train --metrics "$dir/full.json" >/dev/null 2>&1
[ "$(wc -l <"$dir/full.json")" -eq 5 ]

# Killed after its second epoch (while the third runs), then resumed.
"$attnc" $train --save "$dir/ck.safetensors" --save-every 1 \
	--metrics "$dir/run.json" >/dev/null 2>&1 &
pid=$!
while [ "$(cat "$dir/run.json" 2>/dev/null | wc -l)" -lt 2 ]; do
	kill -0 "$pid" 2>/dev/null || { echo "run ended before it was killed"; exit 1; }
	sleep 0.05
done
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
pid=
[ -f "$dir/ck.safetensors" ]
"$attnc" models/gpt.g --resume "$dir/ck.safetensors" --epochs 5 \
	--data tests/cli/data/stories-2k.txt --save "$dir/ck.safetensors" \
	--save-every 1 --metrics "$dir/run.json" >"$dir/resumed.out" 2>&1
grep -q '^resuming ' "$dir/resumed.out"
! grep -q 'warning' "$dir/resumed.out" || { cat "$dir/resumed.out"; exit 1; }
losses "$dir/full.json" >"$dir/want"
losses "$dir/run.json" >"$dir/got"
diff -u "$dir/want" "$dir/got"
# No temporary file of a save is left beside the checkpoint.
[ "$(ls "$dir" | grep -c 'ck.safetensors.tmp-')" -eq 0 ]

# Stopped after 3 epochs, then resumed for 2 more.
"$attnc" $train --epochs 3 --save "$dir/three.safetensors" \
	--metrics "$dir/three.json" >/dev/null 2>&1
"$attnc" models/gpt.g --resume "$dir/three.safetensors" --epochs 5 \
	--data tests/cli/data/stories-2k.txt --metrics "$dir/three.json" \
	>/dev/null 2>&1
losses "$dir/three.json" >"$dir/got"
diff -u "$dir/want" "$dir/got"

# Data of the same size but other characters or tokens is refused: the
# ids the weights were trained on would name other characters.
refused() { # want-message args...
	want=$1
	shift
	if "$attnc" "$@" --epochs 9 >"$dir/refused.out" 2>&1; then
		echo "resumed on other data: $*"
		exit 1
	fi
	grep -q "$want" "$dir/refused.out" || { cat "$dir/refused.out"; exit 1; }
}
tr z 0 <tests/cli/data/stories-2k.txt >"$dir/other.txt"
refused "the characters of this run's data are not those" models/gpt.g \
	--resume "$dir/three.safetensors" --data "$dir/other.txt"
"$attnc" models/bahdanau.g --train --epochs 1 --data tests/cli/messy.txt \
	--save "$dir/nmt.safetensors" >/dev/null 2>&1
sed 's/^Go home/Go house/' tests/cli/messy.txt >"$dir/src.txt"
refused "the source tokens of this run's data" models/bahdanau.g \
	--resume "$dir/nmt.safetensors" --data "$dir/src.txt"
sed 's/Rentre/Retourne/' tests/cli/messy.txt >"$dir/tgt.txt"
refused "the target tokens of this run's data" models/bahdanau.g \
	--resume "$dir/nmt.safetensors" --data "$dir/tgt.txt"
# Samples of other values, as many, are refused too (here one held-out
# sample differs), and the same samples from an .npz resume.
"$attnc" tests/cli/data/cls.g --train --epochs 2 --save "$dir/cls.safetensors" \
	>/dev/null 2>&1
refused "this run's data are not those of the run of" tests/cli/data/cls.g \
	--resume "$dir/cls.safetensors" \
	--data tests/cli/data/cls_valid_inf.safetensors
"$attnc" tests/cli/data/cls.g --resume "$dir/cls.safetensors" \
	--data tests/cli/data/cls.npz >"$dir/npz.out" 2>&1 || {
	cat "$dir/npz.out"
	exit 1
}
# A checkpoint of another model says so, not that its batches differ.
refused "three.safetensors is not a checkpoint of this model: it holds no parameter 'linear_0.W'" \
	tests/cli/data/cls.g --resume "$dir/three.safetensors"
# Another batch or shard count is refused, even where an epoch has as
# many batches: the resumed batches and dropout masks would not be the
# interrupted run's.
refused "took batches of 32 rows in 1 shard, this one 31 in 1" models/gpt.g \
	--resume "$dir/three.safetensors" --data tests/cli/data/stories-2k.txt \
	--batch 31
refused "took batches of 32 rows in 1 shard, this one 32 in 2" models/gpt.g \
	--resume "$dir/three.safetensors" --data tests/cli/data/stories-2k.txt \
	--shards 2
# Another learning rate is allowed (a lower one to fine-tune, say), with a
# warning that the epochs after are not the interrupted run's.
"$attnc" models/gpt.g --resume "$dir/three.safetensors" --epochs 4 \
	--data tests/cli/data/stories-2k.txt --lr 0.001 >"$dir/lr.out" 2>&1 ||
	{ cat "$dir/lr.out"; exit 1; }
grep -q "warning: --resume: $dir/three.safetensors was trained with lr 0.01, this run has 0.001: its epochs from here on are not those of the run it continues" \
	"$dir/lr.out" || { cat "$dir/lr.out"; exit 1; }
# A NaN in Adam's state (the last tensor: optim:v:...) is a corrupt file,
# not a learning rate too large.
cp "$dir/three.safetensors" "$dir/nan.safetensors"
size=$(wc -c <"$dir/nan.safetensors")
printf '\377\377\377\177' | dd of="$dir/nan.safetensors" bs=1 \
	seek=$((size - 4)) conv=notrunc 2>/dev/null
refused "optim:v:gpt.linear.b' holds nan at element 50: the checkpoint is corrupt" \
	models/gpt.g --resume "$dir/nan.safetensors" \
	--data tests/cli/data/stories-2k.txt
echo "kill resume ok"
