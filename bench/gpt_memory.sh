#!/bin/sh
# gpt_memory.sh [WIDTH...] - the activation memory of a GPT-style training
# step (the model of bench/gpt_step.sh: models/gpt.g made wider, 4 blocks,
# 8 heads, MLP 4x the width, no dropout), attnc against PyTorch, at widths
# 256 and 512 by default, GPT_B sequences of GPT_T tokens a step (8 x 128):
#   - attnc: the scratch block of `loss_grad` (--stats' scratch_bytes: the
#     planned slab of activations and temporaries of a forward and backward;
#     the weights, their gradients and Adam's moments live elsewhere), on
#     1 thread and on 2 (a 2-thread schedule runs independent kernels side
#     by side, so more of their buffers are live at once);
#   - PyTorch (bench/gpt_torch.py memory, on attnc's weights): the tensors
#     autograd saves for the backward, and the peak of every allocation a
#     forward and backward make, the weights' gradients included.
# Memory is not timing: the machine's load does not change these numbers.
#
# Environment: ATTNC (build/attnc), TORCH_PY (/usr/bin/python3, with torch),
# GPT_B, GPT_T.
set -eu
cd "$(dirname "$0")/.."
attnc=${ATTNC:-build/attnc}
py=${TORCH_PY:-/usr/bin/python3}
widths=${*:-256 512}
B=${GPT_B:-8} T=${GPT_T:-128} L=4 H=8
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
[ -x "$attnc" ] || { echo "gpt_memory.sh: no $attnc (build it)" >&2; exit 1; }
# one batch of text: the step's sizes, not the epoch's time, matter here
head -c $((T + 32 * B + 1)) tests/cli/data/stories-6k.txt >"$dir/text.txt"
# scratch MODEL THREADS: loss_grad's scratch bytes (and the weights saved)
scratch() {
	"$attnc" "$1" --train --data "$dir/text.txt" --batch "$B" --epochs 1 \
		--threads "$2" --stats --save "$dir/w.safetensors" \
		>"$dir/out" 2>"$dir/err" || { cat "$dir/err" >&2; exit 1; }
	"$py" -c "import json, sys
for l in open(sys.argv[1]):
    if l.startswith('{\"ops\"'):
        print(json.loads(l)['scratch_bytes']['loss_grad'])" "$dir/out"
}
mib() { "$py" -c "print('%.1f' % ($1 / 2**20))"; }
printf '%-6s %-10s %-24s %16s %22s\n' width tokens "attnc scratch (1 / 2 thr)" \
	"PyTorch saved" "PyTorch step peak"
for D in $widths; do
	g=$dir/gpt_$D.g
	sed -e "s/^const D = 64, H = 4, L = 2, F = 256, CTX = 64, P = 0.1/const D = $D, H = $H, L = $L, F = $((4 * D)), CTX = $T, P = 0.0/" \
	    -e "s/valid = 0.1, stride = 8)/valid = 0, stride = 32)/" models/gpt.g >"$g"
	grep -q "^const D = $D," "$g"
	ours1=$(scratch "$g" 1)
	ours2=$(scratch "$g" 2)
	m=$(GPT_HEADS=$H "$py" bench/gpt_torch.py memory "$dir/w.safetensors" "$B" "$T")
	set -- $m
	printf '%-6s %-10s %6s / %6s MiB %15s MiB %12s MiB (%s of grads)\n' \
		"$D" "${B}x$T" "$(mib "$ours1")" "$(mib "$ours2")" "$(mib "$1")" \
		"$(mib "$2")" "$(mib "$3")"
done
