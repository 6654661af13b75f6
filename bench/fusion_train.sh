#!/bin/sh
# fusion_train.sh - training speed of the book's translation models with
# attnc's fusion on and off, side by side: each model is trained RUNS
# times per variant, the variants alternating so that a change of load
# hits both alike. Per run: the median tokens/s of the epochs after the
# first (the first pays for page faults and the thread probe), the median
# step time, the training program's compile time and kernel count
# (--stats), and the peak resident memory (--metrics). The table gives the
# median over the runs and their range.
#
#   bench/fusion_train.sh                          # 30 epochs, 3 runs, fra.txt
#   bench/fusion_train.sh --epochs 10 --runs 5 --threads 1
#   bench/fusion_train.sh --variants "default --no-fuse --disable-pass=fuse_elementwise"
#
# Environment: ATTNC (default build/attnc).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
attnc=${ATTNC:-$root/build/attnc}
data=$root/../shared/data/fra-eng/fra.txt
epochs=30
runs=3
threads=""
models="transformer bahdanau"
variants="default --no-fuse"

die() {
	echo "fusion_train.sh: $*" >&2
	exit 2
}

while [ $# -gt 0 ]; do
	[ $# -ge 2 ] || die "$1 needs a value"
	case $1 in
	--data) data=$2 ;;
	--epochs) epochs=$2 ;;
	--runs) runs=$2 ;;
	--threads) threads=$2 ;;
	--models) models=$2 ;;
	--variants) variants=$2 ;;
	*) die "unknown option '$1' (--data --epochs --runs --threads --models --variants)" ;;
	esac
	shift 2
done
[ -x "$attnc" ] || die "no attnc at '$attnc' (build it, or set ATTNC)"
[ -r "$data" ] || die "cannot read the corpus '$data'"
out=$(mktemp -d "${TMPDIR:-/tmp}/fusion_train.XXXXXX") || exit 2

echo "corpus $data, $epochs epochs, $runs runs, threads ${threads:-default}"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for model in $models; do
	for r in $(seq "$runs"); do
		for v in $variants; do
			flag=$v
			[ "$v" = default ] && flag=""
			base=$out/$model-$(echo "$v" | tr -c 'a-z0-9\n' _)-$r
			"$attnc" "$root/models/$model.g" --train --data "$data" \
				--epochs "$epochs" ${threads:+--threads "$threads"} \
				--metrics "$base.metrics" --stats $flag \
				>"$base.log" 2>&1 || echo "  $model $v run $r failed: see $base.log"
		done
	done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

/usr/bin/python3 - "$out" "$models" "$variants" "$runs" <<'PY'
import glob, json, os, statistics, sys

out, models, variants, runs = sys.argv[1:]


def one(base):
    """tokens/s, step ms, compile ms, kernels, MiB of one run, or None."""
    try:
        recs = [json.loads(l) for l in open(base + '.metrics') if l.startswith('{')]
        stats = [json.loads(l) for l in open(base + '.log') if l.startswith('{"ops"')]
    except (OSError, ValueError):
        return None
    ep = [r for r in recs if 'epoch' in r][1:] or [r for r in recs if 'epoch' in r]
    if not ep or not stats:
        return None
    rate = statistics.median(r['tokens_per_sec'] for r in ep)
    return {'rate': rate, 'compile': stats[0]['compile_ms'],
            'kernels': stats[0]['jit_kernels'],
            'mib': max(r['peak_rss_mib'] for r in ep),
            'threads': ep[-1].get('threads')}


def cell(xs, fmt):
    if not xs:
        return '-'
    m = statistics.median(xs)
    return f"{fmt.format(m)} ({fmt.format(min(xs))}-{fmt.format(max(xs))})"


print(f"{'model':<12} {'variant':<34} {'tokens/s median (range)':>28} "
      f"{'compile ms':>22} {'kernels':>8} {'MiB':>6} {'thr':>4}")
for model in models.split():
    base_rate = None
    for v in variants.split():
        tag = ''.join(c if c.isalnum() or c == '\n' else '_' for c in v.lower())
        rs = [one(os.path.join(out, f'{model}-{tag}-{r}')) for r in range(1, int(runs) + 1)]
        rs = [r for r in rs if r]
        rate = [r['rate'] for r in rs]
        if base_rate is None and rate:
            base_rate = statistics.median(rate)
        print(f"{model:<12} {v:<34} {cell(rate, '{:.0f}'):>28} "
              f"{cell([r['compile'] for r in rs], '{:.0f}'):>22} "
              f"{rs[0]['kernels'] if rs else '-':>8} "
              f"{max((r['mib'] for r in rs), default=0):>6.0f} "
              f"{rs[-1]['threads'] if rs else '-':>4}"
              + (f"   {variants.split()[0]}: {base_rate / statistics.median(rate):.2f}x its speed"
                 if rate and base_rate and v != variants.split()[0] else ''))
print(f"\nlogs in {out}; tokens/s: d2l's count (target tokens) of each epoch "
      "after the first, median per run; kernels: compiled kernels of the "
      "training program; thr: threads in use at the end (the tuner's choice)")
PY
