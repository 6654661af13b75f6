#!/bin/sh
# fifo_inputs.sh ATTNC SOURCE_DIR - a FIFO named where attnc reads a
# regular file (--data of text(...) and tensors(...), --load with --jit
# and with -c, --resume, --inputs) is refused at once as "not a file",
# as /dev/null and a folder are: open() of a FIFO that no program writes
# to used to wait for a writer forever, so each of these runs hung.
set -eu
attnc=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
cd "$2"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkfifo "$dir/fifo"
data=tests/cli/data
check() { # expected message, then attnc's arguments
	want=$1
	shift
	st=0
	timeout 30 "$attnc" "$@" >"$dir/out" 2>&1 || st=$?
	if [ "$st" != 1 ] || ! grep -qF -e "$want" "$dir/out"; then
		echo "attnc $*: status $st, expected 1 and '$want':" >&2
		cat "$dir/out" >&2
		exit 1
	fi
}
check "--data: $dir/fifo: not a file" $data/charlm.g --train --data "$dir/fifo"
check "$dir/fifo: not a file" $data/cls.g --train --data "$dir/fifo"
check "--load: $dir/fifo: not a file" examples/xattn.g --jit --load "$dir/fifo"
check "--load: $dir/fifo: not a file" examples/xattn.g -c \
	-o "$dir/x.o" --load "$dir/fifo"
check "--resume: $dir/fifo: not a file" examples/xattn.g --resume "$dir/fifo"
check "--inputs: $dir/fifo: not a file" $data/single.g --jit \
	--inputs "$dir/fifo"
echo "fifo inputs ok"
