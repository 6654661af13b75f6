#!/bin/sh
# gpt_step.sh [WIDTH...] - a GPT-style training step (forward, backward,
# Adam) of models/gpt.g made wider (4 blocks, 8 heads, MLP 4x the width,
# 128 steps of context, no dropout: the PyTorch version has none), 8
# sequences of 128 tokens a step (1,024 tokens), at widths 256 and 512 by
# default, printed side by side in one run:
#   - the machine's FMA peak, measured now (bench_fma_peak: independent
#     zmm FMA chains) on 1 and 2 threads;
#   - attnc's step at --threads 1 and 2 (the second epoch's time over its
#     batches; with 2, the threads the tuner settled on are shown), and
#     at 2 with the tuner off (ATTNC_NO_TUNER=1: every step on the team,
#     what the second core gives whatever the tuner decided);
#   - PyTorch's step (bench/gpt_torch.py time, the same weights) at its
#     4 settings of torch and OpenBLAS threads (1/1, 1/2, 2/1, 2/2), the
#     best of them;
#   - the step's activation memory: attnc's scratch of loss_grad
#     (--stats) against the bytes PyTorch saves for its backward
#     (gpt_torch.py memory);
#   - GFLOP/s of the step's matmul and attention FLOPs (forward
#     2 * weights * tokens + 4 * B * T^2 * D a block, backward twice
#     that) and the share of the peak at the same thread count;
# after checking that PyTorch's loss agrees with attnc's on one batch
# (gpt_torch.py check). GPT_STEP_PROFILE=1 also prints attnc's --profile
# of the 1-thread run, its top rows, and of a 2-thread run with the tuner
# off, with the share of the 2 threads' time outside the kernels (waits
# in the static schedule, and descheduled time on a busy machine).
#
# Environment: ATTNC (build/attnc), PEAK (build/bench_fma_peak), TORCH_PY
# (/usr/bin/python3, with torch). The machine is shared: the load is
# printed at the start and the end; compare the ratios of one run.
set -eu
cd "$(dirname "$0")/.."
attnc=${ATTNC:-build/attnc}
peak=${PEAK:-build/bench_fma_peak}
py=${TORCH_PY:-/usr/bin/python3}
widths=${*:-256 512}
data=tests/cli/data/stories-6k.txt
B=8 T=128 L=4 H=8
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for x in "$attnc" "$peak"; do
	[ -x "$x" ] || { echo "gpt_step.sh: no $x (build it)" >&2; exit 1; }
done
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
"$peak" 2 >"$dir/peak"
p1=$(sed -n 's/^fma_peak_gflops threads=1 [a-z]* //p' "$dir/peak")
p2=$(sed -n 's/^fma_peak_gflops threads=2 [a-z]* //p' "$dir/peak")
echo "FMA peak: $p1 GFLOP/s on 1 thread, $p2 on 2"

# The step's FLOPs at width D with vocabulary V.
flops() {
	"$py" -c "D, F, V, B, T, L = $1, 4 * $1, $2, $B, $T, $L
N = B * T
fwd = 2 * N * (L * (4 * D * D + 2 * D * F) + D * V) + L * 4 * B * T * T * D
print(3 * fwd)"
}
# Seconds of one step in the second epoch of metrics file $1, and the
# threads the run ended on; $2: batches an epoch.
step_of() {
	"$py" -c "import json
e = [json.loads(l) for l in open('$1') if '\"epoch\": 2' in l][0]
print('%.6f %d' % (e['seconds'] / $2, e['threads']))"
}
row() { # label seconds flops peak
	"$py" -c "s, f, p = $2, $3, $4
print('  %-34s %9.1f ms %8.1f GFLOP/s %5.1f%% of peak' % ('$1', s * 1e3, f / s / 1e9, 100 * f / s / 1e9 / p))"
}

for D in $widths; do
	g=$dir/gpt_$D.g
	sed -e "s/^const D = 64, H = 4, L = 2, F = 256, CTX = 64, P = 0.1/const D = $D, H = $H, L = $L, F = $((4 * D)), CTX = $T, P = 0.0/" \
	    -e "s/stride = 8)/stride = 32)/" models/gpt.g >"$g"
	grep -q "^const D = $D," "$g"
	echo
	echo "width $D: $L blocks, $H heads, MLP $((4 * D)), $B x $T tokens a step"
	for t in 1 2 f; do # f: 2 threads, the tuner off
		nt=$t off=0
		[ $t = f ] && nt=2 off=1
		ATTNC_NO_TUNER=$off "$attnc" "$g" --train --data $data \
			--batch $B --epochs 2 --threads $nt \
			--metrics "$dir/m$t.json" \
			--save "$dir/w.safetensors" 2>"$dir/err$t" >/dev/null
	done
	nb=$(sed -n 's/^batches: \([0-9]*\) of .*/\1/p' "$dir/err1")
	V=$("$py" -c "import json, struct
b = open('$dir/w.safetensors', 'rb').read()
h = json.loads(b[8:8 + struct.unpack('<Q', b[:8])[0]])
print(h['gpt.embed.table']['shape'][0])")
	f=$(flops "$D" "$V")
	# one batch: attnc's loss against PyTorch's, float32 and float64
	"$py" - "$dir/in.safetensors" "$V" <<PY
import json, random, struct, sys
random.seed(1)
n = $B * $T
tok = [random.randrange(int(sys.argv[2])) for _ in range(n)]
tgt = tok[1:] + tok[:1]
h = {'tokens': {'dtype': 'I32', 'shape': [$B, $T], 'data_offsets': [0, 4 * n]},
     'targets': {'dtype': 'I32', 'shape': [$B, $T], 'data_offsets': [4 * n, 8 * n]}}
j = json.dumps(h).encode()
j += b' ' * (-len(j) % 8)
open(sys.argv[1], 'wb').write(struct.pack('<Q', len(j)) + j +
                              struct.pack('<%di' % (2 * n), *(tok + tgt)))
PY
	# (--inputs binds the dims from the tensors: V as the text fixed it)
	sed "s/^dim V = 60 /dim V = $V /" "$g" >"$dir/gpt_v.g"
	"$attnc" "$dir/gpt_v.g" --jit --entry loss --load "$dir/w.safetensors" \
		--inputs "$dir/in.safetensors" --outputs "$dir/loss.safetensors"
	echo "  check: $(GPT_HEADS=$H "$py" bench/gpt_torch.py check \
		"$dir/w.safetensors" "$dir/in.safetensors" "$dir/loss.safetensors")"
	echo "  $nb batches an epoch; step FLOPs $(echo "$f" | awk '{printf "%.3g", $1}')"
	# activation memory: attnc's scratch of loss_grad (every activation
	# and temporary of the step) against what PyTorch's forward saves
	# for its backward (less than its whole activation memory)
	sa=$("$attnc" "$g" --train --data $data --batch $B --stats 2>/dev/null |
		"$py" -c "import json, sys
print(json.load(sys.stdin)['scratch_bytes']['loss_grad'])")
	st=$(GPT_HEADS=$H "$py" bench/gpt_torch.py memory "$dir/w.safetensors" $B $T |
		cut -d' ' -f1)
	"$py" -c "print('  activations: attnc %.1f MB (loss_grad scratch), PyTorch %.1f MB saved for the backward: %.2fx' % ($sa / 1e6, $st / 1e6, $sa / $st))"
	set -- $(step_of "$dir/m1.json" "$nb")
	s1=$1
	row "attnc, 1 thread" "$s1" "$f" "$p1"
	set -- $(step_of "$dir/m2.json" "$nb")
	s2=$1
	row "attnc, --threads 2 (tuner: $2)" "$s2" "$f" \
		"$([ "$2" = 1 ] && echo "$p1" || echo "$p2")"
	set -- $(step_of "$dir/mf.json" "$nb")
	sf=$1
	row "attnc, 2 threads, tuner off" "$sf" "$f" "$p2"
	"$py" -c "print('  2 threads, tuner off / 1 thread: %.2fx' % ($s1 / $sf))"
	best=1e9 bl=
	for tt in 1 2; do
		for ob in 1 2; do
			s=$(OPENBLAS_NUM_THREADS=$ob GPT_HEADS=$H "$py" bench/gpt_torch.py \
				time "$dir/w.safetensors" $B $T 12 $tt)
			row "PyTorch, torch $tt + OpenBLAS $ob" "$s" "$f" \
				"$([ $tt = 1 ] && [ $ob = 1 ] && echo "$p1" || echo "$p2")"
			best=$("$py" -c "print(min($best, $s))")
			[ "$best" = "$s" ] && bl="torch $tt + OpenBLAS $ob"
		done
	done
	"$py" -c "print('  PyTorch best (%s) / attnc: %.2fx at 1 thread, %.2fx at 2' % ('$bl', $best / $s1, $best / $s2))"
	if [ "${GPT_STEP_PROFILE:-0}" = 1 ]; then
		"$attnc" "$g" --train --data $data --batch $B --epochs 1 \
			--threads 1 --profile 2>&1 >/dev/null | sed -n "/^profile/,\$p"
		echo
		echo "2 threads, tuner off:"
		ATTNC_NO_TUNER=1 "$attnc" "$g" --train --data $data --batch $B \
			--epochs 1 --threads 2 --profile 2>"$dir/prof2" >/dev/null
		sed -n "/^profile/,\$p" "$dir/prof2"
		# loss_grad's calls from start to return (each counted once)
		# against its kernels' time summed over both threads
		"$py" - "$dir/prof2" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
unit = {'s': 1.0, 'ms': 1e-3, 'us': 1e-6}
def sec(v, u):
    return float(v) * unit[u]
m = re.search(r'^  loss_grad +\d+ +([\d.]+)(s|ms|us) ', t, re.M)
k = re.search(r'^loss_grad: ([\d.]+)(s|ms|us) in kernels', t, re.M)
if m and k:
    w, kt = sec(*m.groups()), sec(*k.groups())
    print('  loss_grad on 2 threads: %.3f s of calls, %.3f s of kernels over '
          'both threads: %.1f%% of the 2 threads\' time outside kernels'
          % (w, kt, 100 * (1 - kt / (2 * w))))
PY
	fi
done
echo
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
