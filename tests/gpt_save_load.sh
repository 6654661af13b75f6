#!/bin/sh
# gpt_save_load.sh ATTNC SOURCE_DIR - a text model saved after training
# generates, with --load alone (its vocabulary read from the checkpoint's
# metadata), exactly the text it generated right after training.
set -eu
attnc=$1
cd "$2"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
gen='--generate The --temperature 0 --max-tokens 100'
"$attnc" models/gpt.g --train --epochs 1 --data tests/cli/data/stories-6k.txt \
	--save "$dir/gpt.safetensors" $gen >"$dir/trained" 2>/dev/null
"$attnc" models/gpt.g --load "$dir/gpt.safetensors" $gen >"$dir/loaded"
cp "$dir/trained" "$dir/want" # stdout holds the text alone
diff -u "$dir/want" "$dir/loaded"
# 100 characters after the prompt, over the context of 64: the cache slid.
[ "$(tr -d '\n' <"$dir/loaded" | wc -c)" -ge 100 ]
grep -q '"vocab"' "$dir/gpt.safetensors"
echo "gpt save load ok"
