#!/bin/sh
# io_roundtrip.sh ATTNC SOURCE_DIR - --outputs of one run read back by
# --inputs of the next: tests/cli/data/double.g doubles a and adds 1 to b,
# so three runs chained through files (the JIT, then the interpreter
# twice, the last printing) give 8a and b + 3.
set -eu
attnc=$1
cd "$2"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
g=tests/cli/data/double.g
"$attnc" $g --jit --inputs tests/cli/data/double_in.safetensors \
	--outputs "$dir/mid.safetensors"
"$attnc" $g --interp --inputs "$dir/mid.safetensors" \
	--outputs "$dir/out.safetensors"
"$attnc" $g --interp --inputs "$dir/out.safetensors" >"$dir/printed"
cat >"$dir/want" <<'END'
a: f32[2, 3]
[[ 4.0000,  8.0000, 12.0000],
 [16.0000, 20.0000, 24.0000]]
b: i32[2]
[10,  2]
END
diff -u "$dir/want" "$dir/printed"
# The file is a safetensors file another reader takes: 8-byte length,
# then a JSON header naming both outputs.
head -c 200 "$dir/mid.safetensors" | tr -d '\0' | grep -q '"a":{"dtype":"F32","shape":\[2,3\]'
echo "io roundtrip ok"
