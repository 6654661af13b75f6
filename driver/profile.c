/*
 * profile.c - the report of --profile: where a profiled program's time
 * went, read from the counters its entry points keep (cg_program.h,
 * cg_program_profile_counters), shown as PyTorch's profiler shows its
 * key_averages() table: one row per op kind, then one per .g source line
 * and op, each with its calls, total time, share of the kernels' total,
 * and GFLOP/s (matmul, attention) or GB/s (the rest) over that time.
 * In a gradient function the backward's kernels (autodiff's, the
 * recomputation for it included) are rows of their own, "(backward)",
 * as PyTorch's autograd functions (MmBackward0) are.
 *
 * The counters count CPU cycles (the time-stamp counter); their rate is
 * measured against the monotonic clock between the program's compilation
 * and the report, so nothing is assumed about the CPU's frequency.
 */
#include "driver.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Rows of the by-line table printed (all of them go to the JSON). */
#define LINES_SHOWN 25
/* The clock's rate is measured over at least this long. */
#define MIN_CLOCK_SECONDS 0.02
/* A reading of both clocks counts when the monotonic clock moved less
 * than this across the cycle counter's read (none descheduled us). */
#define MAX_READ_SECONDS 20e-6

/* The kernels of one op kind, or of one kind at one .g line, in the
 * forward or in the backward (cg_profile_site.is_backward). */
typedef struct prof_row {
	const char *kind;
	ir_loc loc;
	bool is_backward;
	uint32_t n_fused;
	uint64_t calls, cycles;
	double flops, bytes; /* over all its calls */
} prof_row;

/* One entry point's kernels (the shares are of its kernel_cycles). */
typedef struct prof_sums {
	const char *entry;
	prof_row *kinds, *lines;
	uint32_t n_kinds, n_lines;
	uint64_t kernel_cycles;
	uint64_t backward_cycles; /* of kernel_cycles */
	double cycles_per_s;
} prof_sums;

void drv_profile_clock_read(const cg_program *p, uint64_t *cycles,
			    double *seconds)
{
	for (int tries = 0;; tries++) {
		double s0 = drv_now_seconds();
		*cycles = cg_program_profile_clock(p);
		double s1 = drv_now_seconds();
		*seconds = 0.5 * (s0 + s1);
		if (s1 - s0 < MAX_READ_SECONDS || tries == 100)
			return;
	}
}

/* Cycles per second of the program's counter since it was compiled. */
static double clock_rate(const drv_jit *j)
{
	double s;
	uint64_t c;
	do
		drv_profile_clock_read(j->p, &c, &s);
	while (s - j->prof_seconds < MIN_CLOCK_SECONDS);
	return (double)(c - j->prof_cycles) / (s - j->prof_seconds);
}

static bool same_row(const prof_row *r, const prof_row *x, bool by_line)
{
	if (strcmp(r->kind, x->kind) != 0 || r->is_backward != x->is_backward)
		return false;
	return !by_line ||
	       (r->loc.file == x->loc.file && r->loc.line == x->loc.line);
}

/* Adds x into rows (*n of them) to the row of its kind (and line). */
static void merge(prof_row *rows, uint32_t *n, const prof_row *x, bool by_line)
{
	for (uint32_t i = 0; i < *n; i++)
		if (same_row(&rows[i], x, by_line)) {
			rows[i].calls += x->calls;
			rows[i].cycles += x->cycles;
			rows[i].flops += x->flops;
			rows[i].bytes += x->bytes;
			if (x->n_fused > rows[i].n_fused)
				rows[i].n_fused = x->n_fused;
			return;
		}
	rows[(*n)++] = *x;
}

static int cmp_rows(const void *pa, const void *pb)
{
	const prof_row *a = pa, *b = pb;
	if (a->cycles != b->cycles)
		return a->cycles < b->cycles ? 1 : -1;
	int c = strcmp(a->kind, b->kind);
	if (c)
		return c;
	if (a->is_backward != b->is_backward)
		return a->is_backward ? 1 : -1;
	if (a->loc.file != b->loc.file)
		return a->loc.file < b->loc.file ? -1 : 1;
	return a->loc.line < b->loc.line ? -1 : a->loc.line > b->loc.line;
}

/* The kernel sites of entry point s->entry, merged by kind and by line. */
static bool sum_sites(ir_ctx *ctx, const cg_program *p, prof_sums *s)
{
	uint32_t n;
	const cg_profile_site *site = cg_program_profile_sites(p, s->entry, &n);
	const uint64_t *c = cg_program_profile_counters(p, s->entry);
	s->kinds = ir_alloc(ctx, (n + 1) * sizeof *s->kinds);
	s->lines = ir_alloc(ctx, (n + 1) * sizeof *s->lines);
	if (!s->kinds || !s->lines) {
		ir_error(ctx, (ir_loc){0}, "out of memory");
		return false;
	}
	for (uint32_t i = 1; i < n; i++) {
		/* By the user's line: a linear's matmul at the line that
		 * calls linear, not at the prelude's. */
		prof_row x = {site[i].kind,
			      ir_loc_user(ctx, site[i].loc),
			      site[i].is_backward,
			      site[i].n_fused,
			      c[2 * i],
			      c[2 * i + 1],
			      site[i].flops * (double)c[2 * i],
			      site[i].bytes * (double)c[2 * i]};
		if (!x.calls)
			continue;
		s->kernel_cycles += x.cycles;
		s->backward_cycles += x.is_backward ? x.cycles : 0;
		merge(s->kinds, &s->n_kinds, &x, false);
		merge(s->lines, &s->n_lines, &x, true);
	}
	qsort(s->kinds, s->n_kinds, sizeof *s->kinds, cmp_rows);
	qsort(s->lines, s->n_lines, sizeof *s->lines, cmp_rows);
	return true;
}

/* "  123.4" GFLOP/s or GB/s over ms, or "      -". */
static void rate_cell(char *buf, size_t size, double work, double ms)
{
	if (work > 0 && ms > 0)
		snprintf(buf, size, "%9.1f", work / (ms * 1e6));
	else
		snprintf(buf, size, "%9s", "-");
}

/* A time as PyTorch's tables show it: "812.000us", "12.345ms", "3.210s". */
static void time_cell(char *buf, size_t size, double sec)
{
	if (sec < 1e-3)
		snprintf(buf, size, "%.3fus", sec * 1e6);
	else if (sec < 1)
		snprintf(buf, size, "%.3fms", sec * 1e3);
	else
		snprintf(buf, size, "%.3fs", sec);
}

static void print_row(const prof_row *r, const char *label, int width,
		      const prof_sums *s)
{
	double sec = (double)r->cycles / s->cycles_per_s;
	double share = s->kernel_cycles ? 100.0 * (double)r->cycles /
						  (double)s->kernel_cycles
					: 0;
	char gf[32], gb[32], t[32];
	rate_cell(gf, sizeof gf, r->flops, sec * 1e3);
	rate_cell(gb, sizeof gb, r->flops > 0 ? 0 : r->bytes, sec * 1e3);
	time_cell(t, sizeof t, sec);
	fprintf(stderr, "  %-*s %9llu %12s %6.1f%% %s %s\n", width, label,
		(unsigned long long)r->calls, t, share, gf, gb);
}

/* " (backward)" after the op of a backward row, "" otherwise. */
static const char *phase(const prof_row *r)
{
	return r->is_backward ? " (backward)" : "";
}

/* The label of a by-kind row: "matmul", "matmul (backward)". */
static void kind_label(const prof_row *r, char *buf, size_t size)
{
	snprintf(buf, size, "%s%s", r->kind, phase(r));
}

/* The label of a by-line row: "models/gpt.g:23 matmul (+2) (backward)". */
static void line_label(const ir_ctx *ctx, const prof_row *r, char *buf,
		       size_t size)
{
	char fused[24] = "";
	if (r->n_fused)
		snprintf(fused, sizeof fused, " (+%u)", r->n_fused);
	snprintf(buf, size, "%s:%u %s%s%s", drv_loc_file(ctx, r->loc),
		 r->loc.line, r->kind, fused, phase(r));
}

/* The width of the label column: the widest label shown, at least 30. */
static int label_width(const ir_ctx *ctx, const prof_sums *s)
{
	size_t w = 30;
	char label[160];
	for (uint32_t i = 0; i < s->n_kinds; i++) {
		kind_label(&s->kinds[i], label, sizeof label);
		w = strlen(label) > w ? strlen(label) : w;
	}
	for (uint32_t i = 0; i < s->n_lines && i < LINES_SHOWN; i++) {
		line_label(ctx, &s->lines[i], label, sizeof label);
		w = strlen(label) > w ? strlen(label) : w;
	}
	return (int)w;
}

static void print_entries(const drv_jit *j, double cycles_per_s,
			  const drv_profile_host *host, uint32_t n_host,
			  double run_s, int width)
{
	char t[32];
	fprintf(stderr, "  %-*s %9s %12s %7s\n", width,
		"entry point or host work", "calls", "total", "of run");
	for (uint32_t e = 0; e < cg_program_n_entries(j->p); e++) {
		const char *fn = cg_program_entry_name(j->p, e);
		const uint64_t *c = cg_program_profile_counters(j->p, fn);
		if (!c[0])
			continue;
		double sec = (double)c[1] / cycles_per_s;
		time_cell(t, sizeof t, sec);
		fprintf(stderr, "  %-*s %9llu %12s %6.1f%%\n", width, fn,
			(unsigned long long)c[0], t, 100.0 * sec / run_s);
	}
	for (uint32_t h = 0; h < n_host; h++) {
		char label[64];
		snprintf(label, sizeof label, "(%s)", host[h].name);
		time_cell(t, sizeof t, host[h].seconds);
		fprintf(stderr, "  %-*s %9llu %12s %6.1f%%\n", width, label,
			(unsigned long long)host[h].calls, t,
			100.0 * host[h].seconds / run_s);
	}
}

static void print_tables(const ir_ctx *ctx, const prof_sums *s, int width)
{
	const char *head = "%9s %12s %7s %9s %9s\n";
	char total[32];
	time_cell(total, sizeof total,
		  (double)s->kernel_cycles / s->cycles_per_s);
	fprintf(stderr, "\n%s: %s in kernels (shares of it)", s->entry, total);
	if (s->backward_cycles) {
		double bw = (double)s->backward_cycles;
		double fw = (double)(s->kernel_cycles - s->backward_cycles);
		char f[32], b[32];
		time_cell(f, sizeof f, fw / s->cycles_per_s);
		time_cell(b, sizeof b, bw / s->cycles_per_s);
		fprintf(stderr, ": forward %s %.1f%%, backward %s %.1f%%", f,
			100.0 * fw / (double)s->kernel_cycles, b,
			100.0 * bw / (double)s->kernel_cycles);
	}
	fprintf(stderr, "\n  %-*s ", width, "op kind");
	fprintf(stderr, head, "calls", "total", "share", "GFLOP/s", "GB/s");
	for (uint32_t i = 0; i < s->n_kinds; i++) {
		char label[160];
		kind_label(&s->kinds[i], label, sizeof label);
		print_row(&s->kinds[i], label, width, s);
	}
	fprintf(stderr, "\n  %-*s ", width, "source line and op (+fused)");
	fprintf(stderr, head, "calls", "total", "share", "GFLOP/s", "GB/s");
	uint64_t rest = 0;
	for (uint32_t i = 0; i < s->n_lines; i++) {
		const prof_row *r = &s->lines[i];
		if (i >= LINES_SHOWN) {
			rest += r->cycles;
			continue;
		}
		char label[160];
		line_label(ctx, r, label, sizeof label);
		print_row(r, label, width, s);
	}
	char t[32];
	time_cell(t, sizeof t, (double)rest / s->cycles_per_s);
	if (rest)
		fprintf(stderr, "  ... %u more lines: %s, %.1f%%\n",
			s->n_lines - LINES_SHOWN, t,
			100.0 * (double)rest / (double)s->kernel_cycles);
}

/* A JSON string: s with quotes, backslashes and control bytes escaped. */
static void put_json_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			fprintf(out, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(out, "\\u%04x", ch);
		else
			fputc(ch, out);
	}
	fputc('"', out);
}

static void put_json_rows(FILE *out, const ir_ctx *ctx, const prof_row *rows,
			  uint32_t n, const prof_sums *s, bool by_line)
{
	for (uint32_t i = 0; i < n; i++) {
		const prof_row *r = &rows[i];
		fprintf(out, "%s{\"entry\": ", i ? ", " : "");
		put_json_string(out, s->entry);
		fprintf(out, ", \"kind\": ");
		put_json_string(out, r->kind);
		fprintf(out, ", \"backward\": %s",
			r->is_backward ? "true" : "false");
		if (by_line) {
			fprintf(out, ", \"file\": ");
			put_json_string(out, drv_loc_file(ctx, r->loc));
			fprintf(out, ", \"line\": %u, \"fused\": %u",
				r->loc.line, r->n_fused);
		}
		fprintf(out,
			", \"calls\": %llu, \"ms\": %.9g, \"share\": %.9g, "
			"\"flops\": %.17g, \"bytes\": %.17g}",
			(unsigned long long)r->calls,
			(double)r->cycles / s->cycles_per_s * 1e3,
			s->kernel_cycles
				? (double)r->cycles / (double)s->kernel_cycles
				: 0.0,
			r->flops, r->bytes);
	}
}

/* The entry points that ran: sums[0 .. *n), sharing one clock rate. */
static bool sum_entries(ir_ctx *ctx, const cg_program *p, double cycles_per_s,
			prof_sums *sums, uint32_t *n)
{
	*n = 0;
	for (uint32_t e = 0; e < cg_program_n_entries(p); e++) {
		const char *fn = cg_program_entry_name(p, e);
		if (!cg_program_profile_counters(p, fn)[0])
			continue;
		prof_sums *s = &sums[(*n)++];
		*s = (prof_sums){.entry = fn, .cycles_per_s = cycles_per_s};
		if (!sum_sites(ctx, p, s))
			return false;
	}
	return true;
}

static void put_json_tables(FILE *out, const ir_ctx *ctx, const prof_sums *sums,
			    uint32_t n, bool by_line)
{
	bool first = true;
	for (uint32_t e = 0; e < n; e++) {
		const prof_sums *s = &sums[e];
		uint32_t k = by_line ? s->n_lines : s->n_kinds;
		if (!k)
			continue;
		if (!first)
			fprintf(out, ", ");
		put_json_rows(out, ctx, by_line ? s->lines : s->kinds, k, s,
			      by_line);
		first = false;
	}
}

static bool put_json(ir_ctx *ctx, FILE *out, const drv_jit *j, const char *what,
		     const prof_sums *sums, uint32_t n, uint64_t kernel_cycles,
		     const drv_profile_host *host, uint32_t n_host, double run_s)
{
	double rate = n ? sums[0].cycles_per_s : 1;
	fprintf(out, "{\"profile\": ");
	put_json_string(out, what);
	fprintf(out,
		", \"run_ms\": %.9g, \"kernel_ms\": %.9g, "
		"\"cycles_per_sec\": %.6g, \"entries\": [",
		run_s * 1e3, (double)kernel_cycles / rate * 1e3, rate);
	for (uint32_t e = 0; e < cg_program_n_entries(j->p); e++) {
		const char *fn = cg_program_entry_name(j->p, e);
		const uint64_t *c = cg_program_profile_counters(j->p, fn);
		uint64_t k = 0, bw = 0;
		for (uint32_t i = 0; i < n; i++)
			if (strcmp(sums[i].entry, fn) == 0) {
				k += sums[i].kernel_cycles;
				bw += sums[i].backward_cycles;
			}
		fprintf(out, "%s{\"name\": ", e ? ", " : "");
		put_json_string(out, fn);
		fprintf(out,
			", \"calls\": %llu, \"ms\": %.9g, \"kernel_ms\": %.9g, "
			"\"backward_ms\": %.9g}",
			(unsigned long long)c[0], (double)c[1] / rate * 1e3,
			(double)k / rate * 1e3, (double)bw / rate * 1e3);
	}
	fprintf(out, "], \"host\": [");
	for (uint32_t h = 0; h < n_host; h++) {
		fprintf(out, "%s{\"name\": ", h ? ", " : "");
		put_json_string(out, host[h].name);
		fprintf(out, ", \"calls\": %llu, \"ms\": %.9g}",
			(unsigned long long)host[h].calls,
			host[h].seconds * 1e3);
	}
	fprintf(out, "], \"by_kind\": [");
	put_json_tables(out, ctx, sums, n, false);
	fprintf(out, "], \"by_line\": [");
	put_json_tables(out, ctx, sums, n, true);
	fprintf(out, "]}\n");
	if (fflush(out) == 0 && !ferror(out))
		return true;
	ir_error(ctx, (ir_loc){0}, "--metrics: cannot write the profile: %s",
		 strerror(errno));
	return false;
}

static void print_report(const ir_ctx *ctx, const drv_jit *j, const char *what,
			 const prof_sums *sums, uint32_t n,
			 uint64_t kernel_cycles, const drv_profile_host *host,
			 uint32_t n_host, double run_s, double rate)
{
	char run_t[32], kern_t[32];
	time_cell(run_t, sizeof run_t, run_s);
	time_cell(kern_t, sizeof kern_t, (double)kernel_cycles / rate);
	fflush(stdout);
	fprintf(stderr, "profile (%s): %s since compiling, %s in kernels\n",
		what, run_t, kern_t);
	int width = 30;
	for (uint32_t e = 0; e < n; e++) {
		int w = label_width(ctx, &sums[e]);
		width = w > width ? w : width;
	}
	print_entries(j, rate, host, n_host, run_s, width);
	for (uint32_t e = 0; e < n; e++)
		print_tables(ctx, &sums[e], width);
}

bool drv_profile_report(ir_ctx *ctx, const drv_jit *j, const char *what,
			const drv_profile_host *host, uint32_t n_host,
			FILE *metrics)
{
	double run_s = drv_now_seconds() - j->prof_seconds;
	double rate = clock_rate(j);
	uint32_t n_entries = cg_program_n_entries(j->p), n = 0;
	prof_sums *sums = ir_alloc(ctx, (n_entries + 1) * sizeof *sums);
	bool ok = sums && sum_entries(ctx, j->p, rate, sums, &n);
	if (!sums)
		ir_error(ctx, (ir_loc){0}, "out of memory");
	uint64_t kernel_cycles = 0;
	for (uint32_t e = 0; e < n; e++)
		kernel_cycles += sums[e].kernel_cycles;
	if (ok) {
		print_report(ctx, j, what, sums, n, kernel_cycles, host, n_host,
			     run_s, rate);
		ok = !metrics || put_json(ctx, metrics, j, what, sums, n,
					  kernel_cycles, host, n_host, run_s);
	}
	for (uint32_t e = 0; sums && e < n; e++) {
		ir_free(ctx, sums[e].kinds);
		ir_free(ctx, sums[e].lines);
	}
	ir_free(ctx, sums);
	return ok;
}
