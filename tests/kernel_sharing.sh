#!/bin/sh
# kernel_sharing.sh ATTNC SOURCE_DIR - the layers of a model share their
# kernels (docs/codegen.md, "Kernels"): models/gpt.g's training program
# (--train, all entry points, dropout in every layer) compiles as many
# kernels (--stats' jit_kernels) with 4 layers as with 2, since dropout's
# random stream is an argument of the kernel rather than a constant, and
# both still train.
set -eu
attnc=$1
cd "$2"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
kernels() { # kernels LAYERS: jit_kernels of that many layers' program
	sed "s/L = 2,/L = $1,/" models/gpt.g >"$dir/gpt$1.g"
	"$attnc" "$dir/gpt$1.g" --train --epochs 1 --no-cache --stats \
		--data tests/cli/data/stories-6k.txt >"$dir/out$1.txt" 2>&1
	grep -q "^epoch 1/1 loss" "$dir/out$1.txt" ||
		{ echo "$1 layers did not train"; exit 1; }
	sed -n 's/.*"jit_kernels": \([0-9]*\).*/\1/p' "$dir/out$1.txt"
}
k2=$(kernels 2)
k4=$(kernels 4)
test -n "$k2" && test "$k2" -gt 0 || { echo "no kernel count: '$k2'"; exit 1; }
test "$k2" = "$k4" ||
	{ echo "2 layers compile $k2 kernels, 4 layers $k4"; exit 1; }
echo "kernel sharing ok"
