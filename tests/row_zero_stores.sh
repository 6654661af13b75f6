#!/bin/sh
# row_zero_stores.sh ATTNC SOURCE_DIR - a row-wise kernel that leaves
# rows out sets the dead rows to +0 with stores of its own, not a call
# of memset a batch element: Bahdanau's loss, whose GRU steps' sigmoid,
# add and dropout kernels leave out the batch elements past the step
# (docs/codegen.md, "The forward's padding rows"), calls memset in none
# of its elementwise kernels, for 16- and 8-float vectors.
set -eu
attnc=$1
cd "$2"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for cpu in x86-64-v4 x86-64-v3; do
	"$attnc" models/bahdanau.g --emit=asm --mcpu $cpu -o "$dir/b.s"
	# each kernel's name, then the memset calls in it
	awk '/^[A-Za-z_][A-Za-z0-9_.]*:/ { fn = $1 }
	     /call.*memset/ { print fn }' "$dir/b.s" >"$dir/calls"
	test "$(grep -c '^loss\.k[0-9]*\.sigmoid:' "$dir/b.s")" -gt 0 ||
		{ echo "$cpu: no sigmoid kernel in the loss"; exit 1; }
	if grep -E '\.k[0-9]+\.(sigmoid|tanh|add|sub|mul|dropout):' \
		"$dir/calls"; then
		echo "$cpu: a row kernel calls memset"
		exit 1
	fi
done
echo "row zero stores ok"
