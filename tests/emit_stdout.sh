#!/bin/sh
# emit_stdout.sh ATTNC SOURCE_DIR - `--emit=KIND -o -` writes to standard
# output for every kind, the same bytes as `-o FILE`, and creates no
# file named '-' (it used to, for llvm, asm and obj); `-c -o -` is
# refused, since -c writes an object file and a header beside it.
set -eu
attnc=$1
g=$2/models/additive_attention.g
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
for kind in ir llvm asm obj; do
	"$attnc" "$g" --emit=$kind -o "file.$kind"
	"$attnc" "$g" --emit=$kind -o - >"stdout.$kind"
	cmp "file.$kind" "stdout.$kind" || { echo "$kind: -o - differs"; exit 1; }
	test -s "stdout.$kind" || { echo "$kind: nothing written"; exit 1; }
	test ! -e ./- || { echo "$kind: wrote a file named '-'"; exit 1; }
done
if "$attnc" "$g" -c -o - >out 2>&1; then
	echo "-c -o - was not refused"; exit 1
fi
grep -q "standard output, is for --emit" out || { cat out; exit 1; }
test ! -e ./- && test ! -e ./-.h || { echo "-c -o - wrote files"; exit 1; }
echo "emit stdout ok"
