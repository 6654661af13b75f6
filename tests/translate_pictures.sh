#!/bin/sh
# translate_pictures.sh ATTNC SOURCE_DIR - the pictures after --load with
# --translate (docs/translation.md's command): a transformer trained for
# 2 epochs and saved, loaded to translate two sentences, draws the
# attention heatmap (SVG) and the checkpoint's loss curve (PNG); a
# checkpoint that records no training has no loss curve to draw.
set -eu
attnc=$1
cd "$2"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$attnc" models/transformer.g --train --epochs 2 --threads 1 \
	--save "$dir/tf.safetensors" >/dev/null 2>&1
"$attnc" models/transformer.g --load "$dir/tf.safetensors" \
	--translate "i'm home ." --translate "go ." --heatmap "$dir/tf.svg" \
	--plot "$dir/loss.png" >"$dir/out" 2>&1
grep -q "^wrote $dir/tf.svg: the attention of \"go .\" => Encoder self-attention (2 layers x 4 heads, 10 x 10)" "$dir/out"
grep -q "^wrote $dir/loss.png: the loss of 2 epochs$" "$dir/out"
head -c 5 "$dir/tf.svg" | grep -q '^<?xml'
grep -q '<svg ' "$dir/tf.svg"
[ "$(head -c 8 "$dir/loss.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]
# --jit --save writes the weights alone: no losses to plot
"$attnc" models/additive_attention.g --jit --save "$dir/a.safetensors" >/dev/null
if "$attnc" models/additive_attention.g --jit --load "$dir/a.safetensors" \
	--plot "$dir/a.svg" >"$dir/err" 2>&1; then
	echo "a checkpoint without losses was plotted"
	exit 1
fi
grep -q "^attnc: error: --plot: $dir/a.safetensors records no training run's losses (a checkpoint that --train --save wrote)$" "$dir/err"
[ ! -e "$dir/a.svg" ]
echo "translate pictures ok"
