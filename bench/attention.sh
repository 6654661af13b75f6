#!/bin/sh
# attention.sh [-t THREADS] [-w WIDTH] [-c] [-r REPS] [SEQ...] - attnc's
# fused attention kernels against PyTorch, side by side in one run:
#   - the machine's FMA peak, measured now (bench_fma_peak) at THREADS;
#   - bench_attention -f (the fused programs only: N = 8, head width
#     WIDTH, queries = keys = SEQ, every key visible or causal with -c):
#     forward and forward + backward, ms, GFLOP/s and share of the peak;
#   - bench/attention_torch.py on the same shapes (d2l's unfused
#     formulation; PyTorch 1.13 has no fused attention on the CPU);
# then one table: seq, attnc ms, GFLOP/s and share of the peak, PyTorch
# ms and the speedup, forward and forward + backward. Defaults: 1 thread,
# width 64, 5 runs, SEQ 128 1024 4096. FLOPs as bench_attention counts
# them (2 N (d + dv) per visible pair forward, twice that backward).
#
# Environment: BENCH (build/bench_attention), PEAK (build/bench_fma_peak),
# TORCH_PY (/usr/bin/python3, with torch). The machine is shared: the
# load is printed at the start and the end; compare the ratios of one run.
set -eu
cd "$(dirname "$0")/.."
bench=${BENCH:-build/bench_attention}
peak=${PEAK:-build/bench_fma_peak}
py=${TORCH_PY:-/usr/bin/python3}
threads=1 width=64 causal= reps=5
while getopts t:w:cr: o; do
	case $o in
	t) threads=$OPTARG ;;
	w) width=$OPTARG ;;
	c) causal=-c ;;
	r) reps=$OPTARG ;;
	*) echo "usage: attention.sh [-t THREADS] [-w WIDTH] [-c] [-r REPS] [SEQ...]" >&2
	   exit 2 ;;
	esac
done
shift $((OPTIND - 1))
seqs=${*:-128 1024 4096}
for x in "$bench" "$peak"; do
	[ -x "$x" ] || { echo "attention.sh: no $x (build it)" >&2; exit 1; }
done
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
"$peak" "$threads" >"$dir/peak"
p=$(sed -n "s/^fma_peak_gflops threads=$threads [a-z]* //p" "$dir/peak")
echo "FMA peak: $p GFLOP/s on $threads thread(s)"
sargs= targs=
for s in $seqs; do
	sargs="$sargs -s $s"
done
# shellcheck disable=SC2086
"$bench" -f -t "$threads" -r "$reps" -w "$width" $causal -p "$p" $sargs \
	| tee "$dir/attnc"
# shellcheck disable=SC2086
"$py" bench/attention_torch.py -t "$threads" -r "$reps" -w "$width" \
	$causal $sargs | tee "$dir/torch"
echo
echo "side by side (head width $width${causal:+, causal}, $threads thread(s)," \
	"peak $p GFLOP/s):"
awk 'FNR == 1 { file++ }
file == 1 && $1 ~ /^[0-9]+$/ && NF >= 7 {
	fm[$1] = $2; fg[$1] = $3; fp[$1] = $4
	bm[$1] = $5; bg[$1] = $6; bp[$1] = $7; order[++n] = $1
}
file == 2 && $1 ~ /^[0-9]+$/ { tf[$1] = $2; tb[$1] = $3 }
END {
	printf "%6s | %9s %7s %5s %9s %6s | %9s %7s %5s %9s %6s\n", "seq",
	       "fwd ms", "GFLOP/s", "peak", "torch ms", "x", "f+b ms",
	       "GFLOP/s", "peak", "torch ms", "x"
	for (i = 1; i <= n; i++) {
		s = order[i]
		printf "%6d | %9.3f %7.1f %5s %9.3f %6.1f | %9.3f %7.1f %5s %9.3f %6.1f\n",
		       s, fm[s], fg[s], fp[s], tf[s], tf[s] / fm[s], bm[s],
		       bg[s], bp[s], tb[s], tb[s] / bm[s]
	}
}' "$dir/attnc" "$dir/torch"
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
