#!/bin/sh
# docs_output.sh ATTNC SOURCE_DIR [--real] [--update] - the runs the
# manuals show are the program's current output.
#
# A block of output in docs/*.md is a fenced block right after a line
#
#   <!-- output: ARGS -->
#
# ARGS are attnc's arguments, run from the source directory with stdout
# and stderr together; $DIR in them is a temporary directory shared by
# the blocks of one file, which run in order (a block may --save weights
# that the next one --loads); quotes group words. The block may start
# with a "$ attnc ..." line (continued by a trailing backslash), shown
# to the reader and not compared, and may hold one "..."
# line: the lines before it must be the output's first lines, those
# after it its last ones. Blocks whose ARGS name ../shared/data (the
# real corpus, minutes of training) run only with --real, which exits 77
# (skipped) when the corpus is missing. --update rewrites each block
# with the output instead of comparing, keeping its "$" line and its
# "..." split, for when a change moves the numbers on purpose.
set -eu
attnc=$1
src=$2
shift 2
is_real=0 is_update=0
for a in "$@"; do
	case $a in
	--real) is_real=1 ;;
	--update) is_update=1 ;;
	*) echo "docs_output: unknown option $a" >&2; exit 2 ;;
	esac
done
cd "$src"
if [ $is_real -eq 1 ] && [ ! -d ../shared/data ]; then
	echo "docs_output: ../shared/data is missing: skipped"
	exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0 n_checked=0

# Splits $1 into $tmp/b<N>.args, .want (the block's lines) and prints N.
split_blocks()
{
	awk -v dir="$tmp" '
	/^<!-- output: .* -->$/ && !inb {
		args = $0; sub(/^<!-- output: /, "", args); sub(/ -->$/, "", args)
		n++; print args > (dir "/b" n ".args"); close(dir "/b" n ".args")
		printf "" > (dir "/b" n ".want"); wantfence = 1; next
	}
	wantfence && /^```/ { wantfence = 0; inb = 1; next }
	wantfence { wantfence = 0 }
	inb && /^```/ { inb = 0; close(dir "/b" n ".want"); next }
	inb { print > (dir "/b" n ".want") }
	END { print n + 0 }' "$1"
}

# Is the run's output $2 what block $1 shows? Or, with --update, writes
# the block's new lines to $1.new.
check_block()
{
	awk -v out="$2" -v upd="$is_update" -v newf="$1.new" '
	NR == 1 && /^\$ / { shown = $0; cont = /\\$/; next }
	cont { shown = shown "\n" $0; cont = /\\$/; next }
	/^\.\.\.$/ { cut = 1; next }
	{ if (cut) tail[nt++] = $0; else head[nh++] = $0 }
	END {
		while ((getline line < out) > 0) o[no++] = line
		if (upd) {
			if (shown != "") print shown > newf
			if (!cut) { for (i = 0; i < no; i++) print o[i] > newf; exit 0 }
			for (i = 0; i < nh && i < no; i++) print o[i] > newf
			print "..." > newf
			for (i = no - nt; i < no; i++) if (i >= nh) print o[i] > newf
			exit 0
		}
		bad = cut ? no < nh + nt : no != nh
		for (i = 0; !bad && i < nh; i++) bad = o[i] != head[i]
		for (i = 0; !bad && i < nt; i++) bad = o[no - nt + i] != tail[i]
		exit bad
	}' "$1"
}

for doc in docs/*.md; do
	grep -q '^<!-- output: ' "$doc" || continue
	rm -f "$tmp"/b*
	mkdir -p "$tmp/run"
	n=$(split_blocks "$doc")
	i=1
	while [ $i -le "$n" ]; do
		b=$tmp/b$i
		args=$(sed "s|\\\$DIR|$tmp/run|g" "$b.args")
		case $args in
		*../shared/data*) is_block_real=1 ;;
		*) is_block_real=0 ;;
		esac
		if [ $is_block_real -ne $is_real ]; then
			cp "$b.want" "$b.want.new"
			i=$((i + 1))
			continue
		fi
		# ARGS are shell words: quotes group a sentence.
		eval "set -- $args"
		"$attnc" "$@" >"$b.out" 2>&1 || true
		# The blocks show the files $DIR holds by their names alone, as
		# the command lines above them do.
		sed "s|$tmp/run/||g" "$b.out" >"$b.out.named" && mv "$b.out.named" "$b.out"
		n_checked=$((n_checked + 1))
		if [ $is_update -eq 1 ]; then
			: >"$b.want.new"
			check_block "$b.want" "$b.out"
		elif ! check_block "$b.want" "$b.out"; then
			echo "$doc: the output of 'attnc $(cat "$b.args")' differs:" >&2
			diff "$b.want" "$b.out" >&2 || true
			fail=1
		fi
		i=$((i + 1))
	done
	if [ $is_update -eq 1 ]; then
		awk -v dir="$tmp" '
		/^<!-- output: .* -->$/ && !inb { print; n++; wantfence = 1; next }
		wantfence && /^```/ { print; wantfence = 0; inb = 1
			f = dir "/b" n ".want.new"
			while ((getline l < f) > 0) print l
			next }
		wantfence { wantfence = 0 }
		inb && /^```/ { inb = 0; print; next }
		inb { next }
		{ print }' "$doc" >"$tmp/doc" && cat "$tmp/doc" >"$doc"
	fi
done
[ $fail -eq 0 ] || exit 1
echo "docs output ok: $n_checked runs"
