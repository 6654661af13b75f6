/*
 * memory.c - the scratch report of ATTNC_MEMORY=1: for each entry point
 * of a compiled program, its scratch slab (every activation and
 * temporary of a call), the bytes live at its fullest step and which
 * buffers those are, summed by .g source line and op, as a memory
 * planner's dump (TVM's, PyTorch's memory profiler) shows them.
 */
#include "driver.h"

#include <stdlib.h>
#include <string.h>

/* Rows of the by-line table printed. */
#define LINES_SHOWN 25

/* The buffers of one op kind at one .g line. */
typedef struct mem_row {
	const char *kind;
	ir_loc loc;
	uint32_t buffers;
	uint64_t bytes;
} mem_row;

static int cmp_rows(const void *pa, const void *pb)
{
	const mem_row *x = pa, *y = pb;
	if (x->bytes != y->bytes)
		return x->bytes > y->bytes ? -1 : 1;
	if (x->loc.file != y->loc.file)
		return x->loc.file < y->loc.file ? -1 : 1;
	if (x->loc.line != y->loc.line)
		return x->loc.line < y->loc.line ? -1 : 1;
	return strcmp(x->kind, y->kind);
}

/* Sums pk's buffers by (the user's line, kind) into rows; returns how
 * many. */
static uint32_t group(const ir_ctx *ctx, const cg_scratch_peak *pk,
		      mem_row *rows)
{
	uint32_t n = 0;
	for (uint32_t b = 0; b < pk->n; b++) {
		const cg_scratch_buffer *x = &pk->buffers[b];
		ir_loc loc = ir_loc_user(ctx, x->loc);
		uint32_t r = 0;
		while (r < n && !(rows[r].loc.file == loc.file &&
				  rows[r].loc.line == loc.line &&
				  strcmp(rows[r].kind, x->kind) == 0))
			r++;
		if (r == n)
			rows[n++] = (mem_row){x->kind, loc, 0, 0};
		rows[r].buffers++;
		rows[r].bytes += x->bytes;
	}
	qsort(rows, n, sizeof *rows, cmp_rows);
	return n;
}

static double mib(uint64_t bytes)
{
	return (double)bytes / (1024.0 * 1024.0);
}

static bool report_entry(const ir_ctx *ctx, const cg_scratch_peak *pk,
			 const char *fn, FILE *out)
{
	char layout[48] = "in order";
	if (pk->threads > 1)
		snprintf(layout, sizeof layout, "%u threads' schedule",
			 pk->threads);
	fprintf(out,
		"scratch of %s (%s): %.1f MiB, %.1f MiB live at its peak in "
		"%u buffers\n",
		fn, layout, mib(pk->slab), mib(pk->live), pk->n);
	if (!pk->n)
		return true;
	mem_row *rows = calloc(pk->n, sizeof *rows);
	if (!rows)
		return false;
	uint32_t n = group(ctx, pk, rows);
	fprintf(out, "  %-40s %7s %12s %6s\n", "source line and op", "buffers",
		"MiB", "share");
	for (uint32_t r = 0; r < n && r < LINES_SHOWN; r++) {
		char label[160];
		snprintf(label, sizeof label, "%s:%u %s",
			 drv_loc_file(ctx, rows[r].loc), rows[r].loc.line,
			 rows[r].kind);
		fprintf(out, "  %-40s %7u %12.2f %5.1f%%\n", label,
			rows[r].buffers, mib(rows[r].bytes),
			100.0 * (double)rows[r].bytes / (double)pk->live);
	}
	if (n > LINES_SHOWN)
		fprintf(out, "  (%u lines more)\n", n - LINES_SHOWN);
	free(rows);
	return true;
}

/* ATTNC_MEMORY=buffers: every buffer live at the peak, by itself. */
static void list_buffers(const ir_ctx *ctx, const cg_scratch_peak *pk, FILE *out)
{
	for (uint32_t b = 0; b < pk->n; b++) {
		const cg_scratch_buffer *x = &pk->buffers[b];
		ir_loc loc = ir_loc_user(ctx, x->loc);
		fprintf(out, "  %%%u %s:%u %s %llu\n", x->node,
			drv_loc_file(ctx, loc), loc.line, x->kind,
			(unsigned long long)x->bytes);
	}
}

bool drv_scratch_report(ir_ctx *ctx, const cg_program *p, FILE *out)
{
	for (uint32_t i = 0; i < cg_program_n_entries(p); i++) {
		const char *fn = cg_program_entry_name(p, i);
		if (!report_entry(ctx, cg_program_scratch_peak(p, fn), fn, out)) {
			ir_error(ctx, (ir_loc){0}, "out of memory");
			return false;
		}
		const char *v = getenv("ATTNC_MEMORY");
		if (strcmp(v ? v : "", "buffers") == 0)
			list_buffers(ctx, cg_program_scratch_peak(p, fn), out);
	}
	return true;
}
