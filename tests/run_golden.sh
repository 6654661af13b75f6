#!/bin/sh
# run_golden.sh ATTNC SOURCE_DIR - runs attnc on the golden inputs and diffs.
#
#   tests/errors/NAME.g      must exit 1 and print exactly NAME.err on stderr
#   tests/cli/NAME.args      arguments (one line, shell words); the combined
#                            stdout+stderr must equal NAME.out and the exit
#                            status NAME.status (0 if absent); where
#                            NAME.stdout exists, stdout alone must equal it
#
# Paths inside the files are relative to SOURCE_DIR, where attnc runs.
# With ATTNC_UPDATE_GOLDEN=1 the expected files are rewritten instead.
set -u
attnc=$1
cd "$2" || exit 2
failed=0 passed=0
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

check() { # name expected-file actual-file
	if [ "${ATTNC_UPDATE_GOLDEN:-0}" = 1 ]; then
		cp "$3" "$2"
	elif ! diff -u "$2" "$3"; then
		echo "FAIL: $1"
		failed=$((failed + 1))
		return
	fi
	passed=$((passed + 1))
}

for g in tests/errors/*.g; do
	[ -e "$g" ] || continue
	"$attnc" "$g" >/dev/null 2>"$tmp"
	st=$?
	if [ $st -ne 1 ]; then
		echo "FAIL: $g: exit status $st, expected 1"
		failed=$((failed + 1))
		continue
	fi
	check "$g" "${g%.g}.err" "$tmp"
done

for a in tests/cli/*.args; do
	[ -e "$a" ] || continue
	base=${a%.args}
	want=0
	[ -f "$base.status" ] && want=$(cat "$base.status")
	eval "set -- $(cat "$a")"
	"$attnc" "$@" >"$tmp" 2>&1
	st=$?
	if [ "$st" != "$want" ]; then
		echo "FAIL: $a: exit status $st, expected $want"
		cat "$tmp"
		failed=$((failed + 1))
		continue
	fi
	check "$a" "$base.out" "$tmp"
	if [ -f "$base.stdout" ]; then
		"$attnc" "$@" >"$tmp" 2>/dev/null
		check "$a (stdout)" "$base.stdout" "$tmp"
	fi
done

echo "golden: $passed passed, $failed failed"
[ $failed -eq 0 ]
