#!/bin/sh
# compile_units.sh ATTNC SOURCE_DIR - the object cache keeps each unit of
# a program (a kernel with its helpers) under a key of its own IR
# (docs/codegen.md, "The object cache"): models/gpt.g's training program
# with 3 layers, compiled after the one with 2 has filled the cache,
# finds all its kernels' units there but two (--stats' units_hit; those
# two differ in their IR, docs/codegen.md; a kernel that can fail names
# no node, so it is the same in both programs) and trains to the same weights, bit for bit, as with --no-cache, at 1
# thread and at 2; two processes filling one cache at the same time
# both train to those weights, leave no temporary file, and a third
# run finds every unit they stored; the training program compiles only
# the functions training calls.
set -eu
attnc=$1
cd "$2"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export XDG_CACHE_HOME="$dir/xdg"
unset ATTNC_NO_CACHE || true
head -c 1500 tests/cli/data/stories-6k.txt >"$dir/data.txt"
for l in 2 3; do sed "s/L = 2,/L = $l,/" models/gpt.g >"$dir/gpt$l.g"; done
# train LAYERS NAME [ARGS...]: weights to $dir/NAME.st, --stats to $dir/NAME.txt
train() {
	l=$1 name=$2
	shift 2
	"$attnc" "$dir/gpt$l.g" --train --epochs 1 --data "$dir/data.txt" \
		--stats --save "$dir/$name.st" "$@" >"$dir/$name.txt" 2>&1 ||
		{ cat "$dir/$name.txt"; exit 1; }
}
field() { sed -n "s/.*\"$2\": \"*\([0-9a-z]*\).*/\1/p" "$dir/$1.txt"; }
same() { cmp -s "$dir/$1.st" "$dir/$2.st" || { echo "$1 and $2 differ"; exit 1; }; }
for t in 1 2; do
	rm -rf "$dir/xdg"
	train 3 ref$t --no-cache --threads $t
	train 2 two$t --threads $t
	test "$(field two$t units_hit)" = 0 || { echo "an empty cache hit"; exit 1; }
	train 3 three$t --threads $t
	test "$(field three$t cache)" = miss || { echo "3 layers found as a program"; exit 1; }
	n=$(field three$t units)
	hit=$(field three$t units_hit)
	test "$n" -gt 20 && test "$hit" -ge $((n - 2)) ||
		{ echo "3 layers after 2: $hit of $n units found"; exit 1; }
	same ref$t three$t
done
same ref1 ref2
# The training program holds the functions the run calls: the gradient
# and the loss of the held-out samples, not decode_step (--generate
# compiles its own).
grep -q '"kernel_calls": {"loss": [0-9]*, "loss_grad": [0-9]*}' \
	"$dir/ref1.txt" || { echo "training compiled more than it calls"; exit 1; }
# Two at once into an empty cache, then one that finds all they stored.
rm -rf "$dir/xdg"
train 3 a &
pa=$!
train 3 b &
pb=$!
wait $pa
wait $pb
same ref2 a
same ref2 b
left=$(ls -A "$dir/xdg/attnc" | grep -c '^\.tmp' || true)
test "$left" = 0 || { echo "temporary files left: $left"; exit 1; }
rm "$dir/xdg/attnc"/*[0-9a-f].o
train 3 c
test "$(field c units_hit)" = "$(field c units)" || { echo "units missed"; exit 1; }
same ref2 c
echo "compile units ok"
