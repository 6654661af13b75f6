#!/bin/sh
# one_thread.sh ATTNC SOURCE_DIR - `--threads 1` trains on one thread:
# no thread is ever created (strace counts clones with CLONE_THREAD),
# the validation loss included (it once ran on OpenMP's default team
# whatever --threads said). Exit 77 (skipped) without strace.
set -eu
attnc=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
cd "$2/tests/cli/data"
command -v strace >/dev/null || { echo "no strace: skipped"; exit 77; }
log=$(mktemp)
out=$(mktemp)
trap 'rm -f "$log" "$out"' EXIT
# LeakSanitizer cannot run under ptrace: a sanitizer build leaves it off.
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
export ASAN_OPTIONS
strace -f -qq -e trace=clone,clone3 -o "$log" "$attnc" charlm.g --train \
	--threads 1 --epochs 1 --data stories-6k.txt >"$out" 2>&1 || true
if ! grep -q 'epoch 1/1 loss .* valid ' "$out"; then
	echo "the training run under strace failed:" >&2
	cat "$out" >&2
	exit 1
fi
if grep -q CLONE_THREAD "$log"; then
	echo "threads created under --threads 1:" >&2
	cat "$log" >&2
	exit 1
fi
# The check itself sees threads: --threads 2 with its parallel regions.
strace -f -qq -e trace=clone,clone3 -o "$log" "$attnc" charlm.g --train \
	--threads 2 --epochs 1 --data stories-6k.txt >/dev/null 2>&1
grep -q CLONE_THREAD "$log" || { echo "strace saw no thread" >&2; exit 1; }
echo "one thread ok"
