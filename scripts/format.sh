#!/bin/sh
# format.sh [--check | --fix] [FILE...] - the C sources in .clang-format's
# style (clang-format 14, Debian's clang-format-14 or clang-format).
#
# --check (the default) changes nothing: it prints, per file that is not
# formatted, how many lines clang-format would change, then the total
# per top-level directory, and exits 1 if any. --fix rewrites the files
# in place. Without FILEs: every tracked .c and .h file (the .def tables
# keep their hand-aligned columns). CLANG_FORMAT names another binary.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mode=check
case ${1-} in
--check) shift ;;
--fix) mode=fix; shift ;;
-*) echo "usage: scripts/format.sh [--check | --fix] [FILE...]" >&2; exit 2 ;;
esac
cf=${CLANG_FORMAT-}
if [ -z "$cf" ]; then
	for c in clang-format-14 clang-format; do
		if command -v "$c" >/dev/null 2>&1; then
			cf=$c
			break
		fi
	done
fi
if [ -z "$cf" ]; then
	echo "format.sh: no clang-format (apt-get install clang-format-14)" >&2
	exit 2
fi
case $("$cf" --version) in
*" 14."*) ;;
*) echo "format.sh: warning: $("$cf" --version): the style is tuned for 14" >&2 ;;
esac
if [ $# -eq 0 ]; then
	set -- $(git ls-files '*.c' '*.h')
fi
if [ $mode = fix ]; then
	"$cf" -i --style=file "$@"
	exit 0
fi
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
for f in "$@"; do
	n=$("$cf" --style=file "$f" | diff "$f" - | grep -c '^<' || true)
	[ "$n" -eq 0 ] || echo "${f%%/*} $f $n" >>"$tmp"
done
[ -s "$tmp" ] || { echo "format.sh: all $# files formatted"; exit 0; }
awk '{ print $2 ": " $3 " lines"; per[$1] += $3; all += $3 }
END { for (d in per) printf "%s/: %d lines\n", d, per[d] | "sort"
      close("sort"); printf "total: %d lines to change in %d files\n", all, NR }' "$tmp"
exit 1
