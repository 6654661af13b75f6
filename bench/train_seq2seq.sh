#!/bin/bash
# train_seq2seq.sh - trains the book's Transformer and Bahdanau translation
# models with attnc (all cores) and PyTorch (bench/torch_seq2seq.py, at 1
# thread, its fastest setting on a 2-core machine, and at 2), one after
# the other in one run, attnc's first; notes the load before each run and
# prints a table: training seconds, final loss, tokens per second, and
# attnc's tokens per second over PyTorch's fastest run of the same model.
# docs/benchmarks.md gives the numbers measured with it.
#
#   bench/train_seq2seq.sh                   # the book's epochs (5-6 min)
#   bench/train_seq2seq.sh --epochs 10       # a quick look
#   bench/train_seq2seq.sh --models bahdanau --torch-threads 1 --no-attnc
#   bench/train_seq2seq.sh --runs 3 --torch-threads 1   # medians of 3 rounds
#
# With --runs N it runs N rounds (each: attnc's runs, then PyTorch's) and
# adds, per model, the median tokens/s of each side with their spread and
# the ratio of each round's runs, so that one lucky or stalled run does
# not make the figure.
# An attnc that cannot train these models (an older build, a failed run)
# is reported as "attnc: not available" with its first error line; the
# PyTorch rows are still printed. Environment: ATTNC (the compiler, default
# build/attnc), PYTHON (default /usr/bin/python3, which has Debian's torch).
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
attnc=${ATTNC:-$root/build/attnc}
python=${PYTHON:-/usr/bin/python3}
data=$root/../shared/data/fra-eng/fra.txt
models="transformer bahdanau"
torch_threads="1 2"
attnc_threads=$(nproc)
epochs=""
seed=0
run_torch=1
run_attnc=1
runs=1
out=""

usage() {
	sed -n '10,12s/^# *//p' "$0"
	echo "options: --data PATH --epochs N --seed N --models LIST"
	echo "         --torch-threads LIST --attnc-threads N --runs N --no-torch"
	echo "         --no-attnc --out DIR (logs and results; default a temp dir)"
}

die() {
	echo "train_seq2seq.sh: $*" >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case $1 in
	--data | --epochs | --seed | --models | --torch-threads | \
		--attnc-threads | --runs | --out)
		[ $# -ge 2 ] || die "$1 needs a value"
		case $1 in
		--data) data=$2 ;;
		--epochs) epochs=$2 ;;
		--seed) seed=$2 ;;
		--models) models=$2 ;;
		--torch-threads) torch_threads=$2 ;;
		--attnc-threads) attnc_threads=$2 ;;
		--runs) runs=$2 ;;
		--out) out=$2 ;;
		esac
		shift 2
		;;
	--no-torch) run_torch=0; shift ;;
	--no-attnc) run_attnc=0; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown option '$1'" ;;
	esac
done

for m in $models; do
	[ "$m" = transformer ] || [ "$m" = bahdanau ] ||
		die "--models: '$m' is not transformer or bahdanau"
done
case $epochs in
"" | [1-9] | [1-9]*[0-9]) ;;
*) die "--epochs: '$epochs' is not a positive integer" ;;
esac
case $runs in
[1-9] | [1-9][0-9]) ;;
*) die "--runs: '$runs' is not an integer from 1 to 99" ;;
esac
[ -r "$data" ] || die "cannot read the corpus '$data'"
data=$(cd "$(dirname "$data")" && pwd)/$(basename "$data")
if [ -z "$out" ]; then
	out=$(mktemp -d "${TMPDIR:-/tmp}/train_seq2seq.XXXXXX") || exit 2
else
	mkdir -p "$out" || exit 2
fi

# Seconds since the epoch, with nanoseconds.
now() {
	date +%s.%N
}

# Runs the command after "--", its output to $1.log, its peak resident
# memory (KiB) to $1.rss when GNU time is there, and writes $1.run: the
# load averages before the run, its wall time in seconds, its exit status,
# and the 1-minute load average as it ends (which counts the run itself).
timed_run() {
	local base=$1 load start rc
	shift 2
	load=$(cut -d' ' -f1-3 /proc/loadavg)
	start=$(now)
	if [ -x /usr/bin/time ]; then
		/usr/bin/time -f %M -o "$base.rss" "$@" >"$base.log" 2>&1
	else
		"$@" >"$base.log" 2>&1
	fi
	rc=$?
	awk -v a="$(now)" -v b="$start" -v l="$load" -v rc=$rc \
		-v after="$(cut -d' ' -f1 /proc/loadavg)" \
		'BEGIN { printf "%s %.3f %d %s\n", l, a - b, rc, after }' \
		>"$base.run"
	return $rc
}

# PyTorch with N threads for its intra-op pool, OpenMP and OpenBLAS alike.
# The files of round $1: no suffix for a single round, -rK of several.
round_suffix() {
	[ "$runs" = 1 ] || echo "-r$1"
}

run_torch_model() {
	local model=$1 n=$2 base=$out/torch-$1-$2$3
	echo "pytorch $model, $n thread(s), load $(cut -d' ' -f1-3 /proc/loadavg) ..."
	timed_run "$base" -- env OMP_NUM_THREADS="$n" OPENBLAS_NUM_THREADS="$n" \
		MKL_NUM_THREADS="$n" "$python" "$root/bench/torch_seq2seq.py" \
		--model "$model" --data "$data" --threads "$n" --seed "$seed" \
		${epochs:+--epochs "$epochs"} ||
		echo "  pytorch failed: see $base.log"
}

run_attnc_model() {
	local model=$1 n=$attnc_threads base=$out/attnc-$1$2
	echo "attnc $model, $n thread(s), load $(cut -d' ' -f1-3 /proc/loadavg) ..."
	if [ ! -x "$attnc" ]; then
		echo "no compiler at $attnc (build it: ./attnc --version)" >"$base.log"
		echo "  attnc: not available"
		return
	fi
	rm -f "$base.metrics"
	timed_run "$base" -- env OMP_NUM_THREADS="$n" OPENBLAS_NUM_THREADS=1 \
		"$attnc" "$root/models/$model.g" --jit --train --data "$data" \
		--threads "$n" --seed "$seed" --metrics "$base.metrics" \
		${epochs:+--epochs "$epochs"} ||
		echo "  attnc: not available ($(grep -m1 -i error "$base.log" || tail -n1 "$base.log"))"
}

# attnc's runs first: a run right after PyTorch's 2-thread runs went
# 25-30% slower in every epoch (docs/benchmarks.md, 2026-12-06), and
# attnc's few seconds leave no such trace on PyTorch's minutes.
for k in $(seq 1 "$runs"); do
	[ "$runs" = 1 ] || echo "round $k of $runs"
	sfx=$(round_suffix "$k")
	if [ $run_attnc = 1 ]; then
		for model in $models; do
			run_attnc_model "$model" "$sfx"
		done
	fi
	if [ $run_torch = 1 ]; then
		for model in $models; do
			for n in $torch_threads; do
				run_torch_model "$model" "$n" "$sfx"
			done
		done
	fi
done

echo
book="the book's"
echo "corpus $data, seed $seed, epochs ${epochs:-$book}; logs in $out"
"$python" - "$out" "$models" "$torch_threads" "$run_torch" "$run_attnc" \
	"$attnc_threads" "$runs" <<'EOF'
# Reads the runs' files in OUT and prints the table.
import json, os, statistics, sys

out, models, torch_threads, run_torch, run_attnc, attnc_threads, runs = \
    sys.argv[1:]
runs = int(runs)


def sfx(k):
    return '' if runs == 1 else f'-r{k}'


def tag(k):
    return '' if runs == 1 else f' #{k}'


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ''


def common(base):
    """Load, wall seconds, exit status and peak MiB of one run, or None."""
    run = read(base + '.run').split()
    if len(run) != 6:
        return None
    rss = read(base + '.rss').strip().splitlines()
    peak = int(rss[-1]) / 1024 if rss and rss[-1].isdigit() else None
    return {'load': ' '.join(run[:3]), 'wall': float(run[3]),
            'rc': int(run[4]), 'after': run[5], 'peak': peak}


def torch_row(model, n, k=1):
    base = os.path.join(out, f'torch-{model}-{n}{sfx(k)}')
    r = common(base)
    lines = [l for l in read(base + '.log').splitlines() if l.startswith('{')]
    if r is None or r['rc'] != 0 or not lines:
        return None
    j = json.loads(lines[-1])
    r.update(name=f'pytorch {n} thr{tag(k)}', seconds=j['seconds'],
             loss=j['loss'],
             rate=j['tokens'] / j['seconds'], last=j['tokens_per_sec'],
             translations=j['translations'])
    return r


def attnc_row(model, k=1):
    base = os.path.join(out, f'attnc-{model}{sfx(k)}')
    r = common(base)
    records = [json.loads(l) for l in read(base + '.metrics').splitlines()
               if l.startswith('{')]
    epochs = [e for e in records if 'epoch' in e]
    if r is None or r['rc'] != 0 or not epochs:
        return None
    seconds = sum(e['seconds'] for e in epochs)
    tokens = sum(e['seconds'] * e['tokens_per_sec'] for e in epochs)
    r.update(name=f'attnc {attnc_threads} thr{tag(k)}', seconds=seconds,
             loss=epochs[-1]['loss'], rate=tokens / seconds if seconds else 0,
             last=epochs[-1]['tokens_per_sec'],
             translations=[t for t in records if 'src' in t])
    decoded = [t for t in records if 'translated' in t]
    if decoded:
        r['decode'] = decoded[-1]
    return r


def fmt(r, best):
    peak = f"{r['peak']:.0f}" if r['peak'] is not None else '-'
    ratio = f"{r['rate'] / best:.2f}x" if best else '-'
    return (f"{r['name']:<17} {r['load']:<15} {r['after']:>5} "
            f"{r['seconds']:>8.2f} "
            f"{r['wall']:>7.2f} {r['loss']:>8.4f} {r['rate']:>10.0f} "
            f"{r['last']:>10.0f} {peak:>6} {ratio:>8}")


print(f"{'model':<12} {'run':<17} {'load before':<15} {'after':>5} "
      f"{'train s':>8} "
      f"{'wall s':>7} {'loss':>8} {'tokens/s':>10} {'last ep.':>10} "
      f"{'MiB':>6} {'vs torch':>8}")
summary = []
for model in models.split():
    mine, theirs, ratios = [], [], []
    for k in range(1, runs + 1):
        rows = []
        if run_torch == '1':
            for n in torch_threads.split():
                r = torch_row(model, n, k)
                print(f'{model:<12} ' + (fmt(r, None) if r else
                      f'pytorch {n} thr{tag(k)}: failed (see '
                      f'torch-{model}-{n}{sfx(k)}.log)'))
                rows.append(r)
        done = [r for r in rows if r]
        best = max(r['rate'] for r in done) if done else None
        if best:
            theirs.append(best)
        if run_attnc == '1':
            r = attnc_row(model, k)
            print(f'{model:<12} ' + (fmt(r, best) if r else
                  f'attnc{tag(k)}: not available (see attnc-{model}'
                  f'{sfx(k)}.log)'))
            if r:
                mine.append(r['rate'])
                if best:
                    ratios.append(r['rate'] / best)
    summary.append((model, mine, theirs, ratios))


def spread(v, unit=''):
    return (f'median {statistics.median(v):.0f}{unit} '
            f'[{min(v):.0f} .. {max(v):.0f}] of {len(v)}')


if runs > 1:
    print()
    for model, mine, theirs, ratios in summary:
        if mine:
            print(f'{model:<12} attnc tokens/s: {spread(mine)}')
        if theirs:
            print(f'{model:<12} pytorch tokens/s (fastest thread setting '
                  f'of each round): {spread(theirs)}')
        if mine and theirs:
            each = ', '.join(f'{x:.2f}x' for x in ratios)
            print(f'{model:<12} attnc over pytorch: '
                  f'{statistics.median(mine) / statistics.median(theirs):.2f}x '
                  f'(medians); each round: {each}')
print("""
load before: the 1, 5 and 15-minute load averages as the run starts;
after: the 1-minute one as it ends (the run's own threads included);
train s: the epochs' time; wall s: the whole command (start-up, compiling,
data, translating); tokens/s: all epochs' target tokens (d2l's count) over
train s; last ep.: the last epoch's tokens/s, the figure d2l prints;
MiB: peak resident memory; vs torch: attnc's tokens/s over the fastest
PyTorch run's (of the same round with --runs).""")


def said(t):
    """One translation and its BLEU (none when attnc found no reference)."""
    score = 'no reference' if t.get('bleu') is None else f"bleu {t['bleu']:.3f}"
    return f"{t['src']} => {t['pred']} ({score})"


for model in models.split():
    # the translations of the last round
    rows = [(f'pytorch {n} thr', torch_row(model, n, runs))
            for n in (torch_threads.split() if run_torch == '1' else [])]
    if run_attnc == '1':
        rows.append((f'attnc {attnc_threads} thr', attnc_row(model, runs)))
    for name, r in rows:
        if r:
            print(f'{model}, {name}: ' + ('; '.join(map(said, r['translations']))
                                         or 'no translations'))
        if r and 'decode' in r:
            d = r['decode']
            print(f"{model}, {name}: greedy decoding of {d['translated']} "
                  f"sentences as one batch: {d['decode_ms']:.2f} ms "
                  f"({d['ms_per_sentence']:.3f} ms a sentence), after "
                  f"{d['compile_seconds']:.2f} s compiling encode and "
                  f"decode_step")
EOF
