#!/bin/sh
# clobber.sh ATTNC SOURCE_DIR - a file attnc writes may not be one it
# reads (the model, --data, --valid-data, the train block's data file)
# nor one that another of its
# outputs writes: `--emit=llvm -o m.g` used to replace the model's
# source with LLVM IR, `--save D` the training data with a checkpoint,
# and `--save F --metrics F` lost the log to the checkpoint, all without
# a word. Each is refused before anything runs and leaves the file as it
# was; --load or --resume F with --save F (a run that continues into its
# own checkpoint) and --inputs F with --outputs F stay allowed.
set -eu
attnc=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
cd "$2"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cp tests/cli/data/double.g tests/cli/data/double_in.safetensors \
	tests/cli/data/charlm.g tests/cli/data/small.txt tests/cli/data/cls.g \
	tests/cli/data/cls.safetensors "$dir"
cp "$dir/cls.safetensors" "$dir/cls.keep"
cp "$dir/double.g" "$dir/double.keep"
cp "$dir/small.txt" "$dir/small.keep"
refused() { # expected message, then attnc's arguments
	want=$1
	shift
	st=0
	"$attnc" "$@" >"$dir/out" 2>&1 || st=$?
	if [ "$st" != 1 ] || ! grep -q -- "$want" "$dir/out"; then
		echo "$*: status $st, expected 1 and '$want':" >&2
		cat "$dir/out" >&2
		exit 1
	fi
}
refused "-o would write over the model" "$dir/double.g" --sym N=2 --emit=llvm \
	-o "$dir/double.g"
refused "--outputs would write over the model" "$dir/double.g" --jit \
	--inputs "$dir/double_in.safetensors" --outputs "$dir/double.g"
cmp "$dir/double.g" "$dir/double.keep"
refused "--save would write over --data" "$dir/charlm.g" --train \
	--epochs 1 --batch 4 --data "$dir/small.txt" --save "$dir/small.txt"
cmp "$dir/small.txt" "$dir/small.keep"
refused "--save and --metrics name the same file" "$dir/charlm.g" \
	--train --epochs 1 --batch 4 --data "$dir/small.txt" --save "$dir/w.st" \
	--metrics "$dir/w.st"
[ ! -e "$dir/w.st" ]
# The file the train block reads (data = tensors(file = "cls.safetensors"),
# beside the model), said at the data setting.
refused "cls.g:12:3: error: --save would write over the training data" \
	"$dir/cls.g" --train --save "$dir/cls.safetensors"
(cd "$dir" && refused "--metrics would write over the training data" \
	cls.g --train --metrics ./cls.safetensors)
cmp "$dir/cls.safetensors" "$dir/cls.keep"
# Allowed: a run continued into its own checkpoint, outputs over inputs,
# and several outputs to /dev/null.
"$attnc" "$dir/charlm.g" --train --epochs 1 --batch 4 --data "$dir/small.txt" \
	--save "$dir/w.st" >/dev/null 2>&1
"$attnc" "$dir/charlm.g" --train --epochs 2 --batch 4 --data "$dir/small.txt" \
	--resume "$dir/w.st" --save "$dir/w.st" >/dev/null 2>&1
cp "$dir/double_in.safetensors" "$dir/io.safetensors"
"$attnc" "$dir/double.g" --jit --inputs "$dir/io.safetensors" \
	--outputs "$dir/io.safetensors" >/dev/null
"$attnc" "$dir/charlm.g" --train --epochs 1 --batch 4 --data "$dir/small.txt" \
	--save /dev/null --metrics /dev/null >/dev/null 2>&1
echo "clobber ok"
