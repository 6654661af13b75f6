#!/bin/sh
# too_large.sh ATTNC SOURCE_DIR - a model too large for the machine is
# refused before it is compiled, with what it needs and what the machine
# has: models/gpt.g with `D = 1000000` (4 TB a weight) for training (the
# parameters, their gradient and Adam's two moments) and the same for
# one run of its loss. Before the check it spent seconds compiling
# (minutes, when its attention was fused) and ended in "out of memory".
set -eu
attnc=$1
cd "$2"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
sed 's/const D = 64,/const D = 1000000,/' models/gpt.g >"$dir/huge.g"
grep -q 'D = 1000000' "$dir/huge.g" || { echo "no D in models/gpt.g"; exit 1; }
expect() { # what-run, expected text, attnc arguments...
	what=$1 want=$2
	shift 2
	if "$attnc" "$dir/huge.g" "$@" >"$dir/out" 2>&1; then
		echo "$what: not refused"; exit 1
	fi
	grep -q "error: the model needs at least .* GiB: $want" "$dir/out" &&
		grep -q "GiB of memory and swap" "$dir/out" ||
		{ echo "$what:"; cat "$dir/out"; exit 1; }
}
expect train "parameters [0-9.]* GiB and 3 times that for their gradient and the optimizer's state" \
	--train --epochs 1 --data tests/cli/data/stories-6k.txt
expect run "parameters [0-9.]* GiB, scratch" --jit --sym B=2 --sym T=10 \
	--sym V=56 --entry loss --inputs tests/cli/data/gpt_T10.safetensors
echo "too large ok"
