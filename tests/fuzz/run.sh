#!/bin/sh
# run.sh SECONDS - builds the libFuzzer targets with clang 19 in build-fuzz/
# and runs each for SECONDS (default 30), seeded with the models and their
# printed IR (attnc of build/, if built). Any crash, leak or assertion fails the run.
set -e
root=$(cd "$(dirname "$0")/../.." && pwd)
secs=${1:-30}
dir=$root/build-fuzz
CC=clang-19 cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=Debug \
	-DATTNC_FUZZ=ON >/dev/null
cmake --build "$dir" --target fuzz_frontend fuzz_ir -j"$(nproc)" >/dev/null
corpus=$dir/corpus
mkdir -p "$corpus/g" "$corpus/ir"
cp "$root"/models/*.g "$root"/tests/errors/*.g "$corpus/g/"
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
"$dir/fuzz_frontend" -max_total_time="$secs" -timeout=10 -rss_limit_mb=4096 \
	-print_final_stats=1 "$corpus/g" 2>&1 | tail -n 3
"$dir/fuzz_ir" -max_total_time="$secs" -timeout=10 -rss_limit_mb=4096 \
	-print_final_stats=1 "$corpus/ir" 2>&1 | tail -n 3
echo "fuzz: ok"
