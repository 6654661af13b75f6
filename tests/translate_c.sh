#!/bin/sh
# translate_c.sh ATTNC SOURCE_DIR - a Transformer trained briefly and
# saved translates with --load alone (the vocabularies read from the
# checkpoint's metadata) exactly as right after training, whatever
# --examples says; examples/translate.c, built against libattnrt.a
# ($ATTNRT_LIB, with $ATTNC_CC and $ATTNC_CFLAGS) and the object of `-c
# --load`, prints the same translations (6 sentences, batches of 4: the
# second padded); a checkpoint without the metadata (keys renamed, as
# one saved before attnc kept them) translates the old way, from the
# data; a missing or corrupt vocabulary is a clear error in both.
set -eu
attnc=$1
src=$2
cd "$src"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
model=models/transformer.g
ck=$dir/tf.safetensors
set -f # no globbing of the sentences' words
nl='
'
sentences="go .${nl}i lost .${nl}I'm home.${nl}he's calm .${nl}Tom is fine!${nl}zorglub ."
run() { # OPTIONS...: attnc translating the sentences
	IFS=$nl
	for s in $sentences; do
		set -- "$@" --translate "$s"
	done
	unset IFS
	"$attnc" $model "$@"
}

run --train --epochs 6 --save "$ck" >"$dir/trained" 2>/dev/null
run --load "$ck" >"$dir/loaded" 2>"$dir/loaded.err"
diff -u "$dir/trained" "$dir/loaded"
grep -q "vocabularies of $ck" "$dir/loaded.err"
[ "$(wc -l <"$dir/loaded")" -eq 6 ]
# Another --examples gives other data vocabularies, not other ids.
run --load "$ck" --examples 100 >"$dir/examples100" 2>/dev/null
diff -u "$dir/loaded" "$dir/examples100"

# The C program: what attnc printed, less the BLEU and the unknown words.
"$attnc" $model -c --load "$ck" --sym B=4 --threads 1 \
	-o "$dir/transformer.o" >/dev/null
# shellcheck disable=SC2086 # ATTNC_CFLAGS is a list of words
"${ATTNC_CC:-cc}" -std=c11 -Wall -Wextra -Werror ${ATTNC_CFLAGS:-} \
	-I"$dir" -Iruntime examples/translate.c "$dir/transformer.o" \
	"$ATTNRT_LIB" -lgomp -lm -o "$dir/translate"
IFS=$nl
# shellcheck disable=SC2086 # the sentences, a line each
set -- $sentences
unset IFS
"$dir/translate" "$ck" "$@" >"$dir/c"
sed 's/ \[[0-9]* words\{0,1\} not in the vocabulary\]$//
s/, bleu [0-9.]*$//
s/ (no reference in the data)$//' "$dir/loaded" >"$dir/want"
diff -u "$dir/want" "$dir/c"

# Without the metadata: the vocabularies come from the data, as before.
# (Renaming a key keeps the header's length, so the file stays valid.)
LC_ALL=C sed 's/"src_vocab"/"src_vocaX"/; s/"tgt_vocab"/"tgt_vocaX"/' \
	"$ck" >"$dir/old.safetensors"
cmp -s "$ck" "$dir/old.safetensors" && { echo "sed changed nothing"; exit 1; }
[ "$(wc -c <"$ck")" -eq "$(wc -c <"$dir/old.safetensors")" ]
run --load "$dir/old.safetensors" >"$dir/old" 2>"$dir/old.err"
diff -u "$dir/loaded" "$dir/old"
grep -q "keeps no vocabularies" "$dir/old.err"

# One vocabulary missing, or corrupt: status 1 and what is wrong.
fails() { # FILE TEXT: attnc and the C program fail on FILE, saying TEXT
	if run --load "$1" >/dev/null 2>"$dir/err"; then
		echo "attnc --load $1 did not fail"; exit 1
	fi
	grep -F "$2" "$dir/err" >/dev/null || { cat "$dir/err"; exit 1; }
	if "$dir/translate" "$1" "go ." >/dev/null 2>"$dir/err"; then
		echo "translate $1 did not fail"; exit 1
	fi
	grep -F "$2" "$dir/err" >/dev/null || { cat "$dir/err"; exit 1; }
}
LC_ALL=C sed 's/"src_vocab"/"src_vocaX"/' "$ck" >"$dir/half.safetensors"
fails "$dir/half.safetensors" \
	"src_vocab: not in the checkpoint's metadata (attnc --save writes it"
LC_ALL=C sed 's/"tgt_vocab":"<unk> <pad>/"tgt_vocab":"<pad> <unk>/' "$ck" \
	>"$dir/bad.safetensors"
fails "$dir/bad.safetensors" \
	"tgt_vocab: vocabulary: token 0 is not <unk> (a vocabulary starts with"
echo "translate c ok"
