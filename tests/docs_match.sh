#!/bin/sh
# docs_match.sh ATTNC SOURCE_DIR - the manuals name everything the program
# has: every pass of the pass table (`attnc --list-passes`) has its
# "## NAME" section in docs/passes.md; every op of ir/ops.def has a row in
# docs/ops.md and in the shape rules of docs/ir.md (a table row whose
# first cell names it in backticks); every attribute the IR printer
# (ir/module_print.c) writes appears as `NAME=` in docs/ir.md. Each thing
# missing is one line on stderr, and the script exits 1.
set -eu
attnc=$1
cd "$2"
fail=0

# The words inside backticks in the first cell of every table row of $1.
first_cells()
{
	awk -F'|' '/^\| *`/ { print $2 }' "$1" | grep -o '`[^`]*`' |
		tr -c 'A-Za-z0-9_\n' '\n' | grep . | sort -u
}

passes=$("$attnc" --list-passes | awk '{ print $1 }')
[ -n "$passes" ] || { echo "docs_match: --list-passes printed nothing" >&2; exit 1; }
for p in $passes; do
	grep -qx "## $p" docs/passes.md ||
		{ echo "docs/passes.md: no section '## $p'" >&2; fail=1; }
done

ops=$(sed -n 's/^X[A-Z_]*( *[A-Z0-9_]*, *"\([a-z0-9_]*\)".*/\1/p' ir/ops.def)
[ -n "$ops" ] || { echo "docs_match: no op rows in ir/ops.def" >&2; exit 1; }
ops_md=$(first_cells docs/ops.md)
ir_md=$(first_cells docs/ir.md)
for op in $ops; do
	printf '%s\n' "$ops_md" | grep -qx "$op" ||
		{ echo "docs/ops.md: no row for op '$op'" >&2; fail=1; }
	printf '%s\n' "$ir_md" | grep -qx "$op" ||
		{ echo "docs/ir.md: no shape rule row for op '$op'" >&2; fail=1; }
done

attrs=$({ grep -o 'pr(p, "[^"]*"' ir/module_print.c |
	grep -o '[{ ,][a-z_][a-z_]*=' | cut -c2-
	sed -n 's/.*pr_list_u32(p, "\([a-z_]*\)".*/\1=/p' ir/module_print.c; } | sort -u)
[ -n "$attrs" ] || { echo "docs_match: no attributes in ir/module_print.c" >&2; exit 1; }
for a in $attrs; do
	grep -qF "$a" docs/ir.md ||
		{ echo "docs/ir.md: attribute '$a' is not shown" >&2; fail=1; }
done

[ $fail -eq 0 ] || exit 1
echo "docs match ok: $(echo $passes | wc -w) passes, $(echo $ops | wc -w) ops, $(echo $attrs | wc -w) attributes"
