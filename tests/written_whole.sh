#!/bin/sh
# written_whole.sh ATTNC SOURCE_DIR - what attnc writes for the user is
# written whole or not at all (runtime/rt_file.c): a --plot, --save, -c
# or --emit that fails half-way (here the file-size limit; a full disk
# is the same) leaves the old file as it was and no temporary file; a
# link is followed (it stays a link, its file gets the bytes); a FIFO
# (like /dev/null) is written in place. Before, a failed --plot left a
# truncated file, and `--save /dev/null` as root replaced /dev/null
# with a regular file.
set -eu
attnc=$1
cd "$2"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export ATTNC_NO_CACHE=1
g=models/nw_param.g
fail() { echo "$*"; exit 1; }

# The file-size limit (ulimit -f, 512-byte blocks) stops each write
# past 2 KiB with EFBIG; SIGXFSZ ignored, so write(2) fails instead.
for f in p.svg p.png w.safetensors t.o t.h t.ll t.ir; do
	echo OLD >"$dir/$f"
done
limited() { # what, attnc arguments...
	what=$1
	shift
	if (trap '' XFSZ; ulimit -f 4; "$attnc" "$@") >"$dir/out" 2>&1; then
		fail "$what: no error under the file-size limit"
	fi
	grep -q "File too large" "$dir/out" || { cat "$dir/out"; fail "$what: no reason"; }
}
limited plot.svg $g --train --epochs 2 --plot "$dir/p.svg"
limited plot.png $g --train --epochs 2 --plot "$dir/p.png"
limited save models/transformer.g --train --epochs 1 --save "$dir/w.safetensors"
limited object models/transformer.g -c -o "$dir/t.o"
limited llvm models/transformer.g --emit=llvm -o "$dir/t.ll"
limited ir models/transformer.g --emit=ir -o "$dir/t.ir"
for f in p.svg p.png w.safetensors t.o t.h t.ll t.ir; do
	[ "$(cat "$dir/$f")" = OLD ] || fail "$f: the old file was lost"
done
left=$(ls "$dir" | grep -c 'tmp' || true)
[ "$left" = 0 ] || { ls "$dir"; fail "temporary files left"; }

# A link: followed; the link stays.
echo OLD >"$dir/real.safetensors"
ln -s real.safetensors "$dir/link.safetensors"
"$attnc" $g --train --epochs 2 --save "$dir/link.safetensors" >/dev/null
[ -L "$dir/link.safetensors" ] || fail "the link was replaced"
[ "$(cat "$dir/real.safetensors")" != OLD ] || fail "the link's file was not written"
"$attnc" $g --jit --load "$dir/link.safetensors" >/dev/null

# A FIFO: written in place, and still a FIFO.
mkfifo "$dir/fifo"
cat "$dir/fifo" >"$dir/got" &
reader=$!
"$attnc" $g --train --epochs 2 --save "$dir/fifo" >/dev/null
wait $reader
[ -p "$dir/fifo" ] || fail "the FIFO was replaced by a file"
cmp -s "$dir/got" "$dir/real.safetensors" || fail "the FIFO did not get the checkpoint"
echo "written whole ok"
