#!/bin/sh
# fsize_limit.sh ATTNC SOURCE_DIR - a save that passes the file-size
# limit (ulimit -f) fails with a message and status 1, keeps the old
# file as it was and leaves no temporary file: attnc used to die of
# SIGXFSZ (status 153, no message, the temporary file left behind).
set -eu
attnc=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
cd "$2"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf 'the old checkpoint\n' >"$dir/w.safetensors"
cp "$dir/w.safetensors" "$dir/old"
run() { # what, then attnc's arguments; under a limit of 2 blocks
	what=$1
	shift
	st=0
	(ulimit -f 2 && "$attnc" "$@" --no-cache) >"$dir/out" 2>&1 || st=$?
	if [ "$st" != 1 ] || ! grep -q "cannot write: File too large" "$dir/out"; then
		echo "$what: status $st, expected 1 and 'File too large':" >&2
		cat "$dir/out" >&2
		exit 1
	fi
}
run "--save" examples/xattn.g --train --epochs 1 --save "$dir/w.safetensors"
cmp "$dir/w.safetensors" "$dir/old" || {
	echo "--save changed the old file" >&2
	exit 1
}
run "-c" examples/xattn.g -c -o "$dir/x.o"
left=$(ls "$dir" | grep -c 'tmp-' || true)
if [ "$left" != 0 ] || [ -e "$dir/x.o" ]; then
	echo "files left behind:" >&2
	ls -la "$dir" >&2
	exit 1
fi
echo "fsize limit ok"
