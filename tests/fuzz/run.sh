#!/bin/sh
# run.sh SECONDS - builds the libFuzzer targets with clang 19 in build-fuzz/
# and runs the two side by side for SECONDS each (default 30), seeded with
# tests/fuzz/seeds/, the models, the error tests and their printed IR
# (attnc of build/, if built), with the token dictionaries g.dict and
# ir.dict. The libraries are instrumented too (CMakeLists.txt), so
# coverage can grow; what the fuzzer finds is kept in build-fuzz/corpus/
# for the next run. Any crash, leak or assertion fails the run.
set -e
root=$(cd "$(dirname "$0")/../.." && pwd)
secs=${1:-30}
dir=$root/build-fuzz
CC=clang-19 cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=Debug \
	-DATTNC_FUZZ=ON >/dev/null
cmake --build "$dir" --target fuzz_frontend fuzz_ir -j"$(nproc)" >/dev/null
corpus=$dir/corpus
mkdir -p "$corpus/g" "$corpus/ir"
cp "$root"/models/*.g "$root"/tests/errors/*.g "$root"/tests/fuzz/seeds/g/*.g \
	"$corpus/g/"
# The printed IR of every model, from the Release build if there is one,
# and of the two translation models' training graphs (their gradient
# functions hold the ops only autodiff and fusion make: one_hot,
# embedding_grad, the fused attention gradients); the lines training
# prints after the IR are cut off.
if [ -x "$root/build/attnc" ]; then
	for g in "$root"/models/*.g; do
		"$root/build/attnc" "$g" --dump-ir=parse \
			>"$corpus/ir/$(basename "$g" .g).ir"
	done
	for m in transformer bahdanau; do
		"$root/build/attnc" "$root/models/$m.g" --train --epochs 1 \
			--dump-ir 2>/dev/null | sed '/^data: /,$d' \
			>"$corpus/ir/$m-train.ir"
	done
fi
cp "$root"/tests/golden/*.ir "$corpus/ir/" 2>/dev/null || true
# fuzz NAME ARGS...: runs one target; on a crash prints the end of its
# log and fails (a pipe into tail would hide the status), else prints the
# coverage and corpus size at the start and at the end.
fuzz() {
	name=$1
	shift
	if ! "$dir/$name" -max_total_time="$secs" -timeout=10 -rss_limit_mb=4096 \
		-print_final_stats=1 "$@" >"$dir/$name.log" 2>&1; then
		tail -n 40 "$dir/$name.log"
		echo "fuzz: $name failed (log: $dir/$name.log)"
		exit 1
	fi
	grep -E 'INITED|DONE' "$dir/$name.log" | sed "s/^/$name: /"
}
# The two targets run side by side, one a core on two cores: each gets
# its SECONDS, the run takes SECONDS, not twice that.
fuzz fuzz_frontend -dict="$root/tests/fuzz/g.dict" "$corpus/g" &
frontend=$!
fuzz fuzz_ir -dict="$root/tests/fuzz/ir.dict" "$corpus/ir" &
ir=$!
status=0
wait "$frontend" || status=1
wait "$ir" || status=1
[ "$status" -eq 0 ] || exit 1
echo "fuzz: ok"
