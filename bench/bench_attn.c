/*
 * bench_attn.c - the driver the attention benchmarks share
 * (bench_attn.h): one .g text compiled fused and unfused, fwd and
 * loss_grad of each timed (median of -r runs) on random inputs and
 * parameters, and a table row per sequence length: the four times (the
 * fused ones with GFLOP/s and their share of the peak, when the
 * benchmark counts FLOPs), the four scratch sizes
 * (cg_program_scratch_bytes) and the largest difference between the
 * fused and unfused forward outputs.
 */
#include "bench_attn.h"
#include "bench_util.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cg_program.h"
#include "frontend.h"
#include "passes.h"

#define MAX_SEQS 16
#define MAX_GRADS 8 /* loss_grad's outputs, the loss included */

typedef struct opts {
	const bench_attn *b;
	int reps, threads;
	int seqs[MAX_SEQS], n_seqs;
	double max_gib;
	int width;
	bool is_causal, is_fused_only;
	clockid_t clock; /* CLOCK_MONOTONIC, or the process's CPU time (-C) */
	double peak;     /* GFLOP/s, 0: unknown */
} opts;

/* One compiled variant (fused or not) of one sequence length. */
typedef struct variant {
	ir_module *m;
	cg_program *p;
} variant;

/* The result of one cell: median seconds, scratch bytes, or skipped. */
typedef struct cell {
	double s;
	size_t scratch;
	bool is_skipped;
} cell;

static float *random_floats(const opts *o, size_t n, uint64_t seed)
{
	float *x = aligned_alloc(64, (n * 4 + 63) / 64 * 64);
	if (!x) {
		fprintf(stderr, "%s: out of memory\n", o->b->name);
		exit(1);
	}
	for (size_t i = 0; i < n; i++)
		x[i] = bench_rng_float(&seed);
	return x;
}

static bool compile(ir_ctx *ctx, const bench_attn *b, const bench_attn_cfg *cfg,
		    bool is_fused, variant *v)
{
	char src[2048];
	b->source(src, sizeof src, cfg);
	uint32_t file = ir_ctx_add_source(ctx, b->file, src, strlen(src));
	v->m = fe_compile(ctx, file);
	pass_options po = {.no_fuse = !is_fused};
	if (!v->m || !pass_pipeline_forward(v->m, &po) ||
	    !pass_autodiff(v->m, "loss") || !pass_pipeline_run(v->m, &po))
		return false;
	v->p = cg_program_create(ctx, v->m, NULL, NULL);
	return v->p && cg_program_jit(v->p);
}

static void variant_fini(variant *v)
{
	cg_program_destroy(v->p);
	ir_module_destroy(v->m);
}

/* Median seconds of reps calls of fn with the given inputs; outputs
 * into outs. */
static cell time_fn(const variant *v, const char *fn, const opts *o,
		    const void *const *ins, void *const *outs, void *params)
{
	cell c = {0};
	c.scratch = cg_program_scratch_bytes(v->p, fn);
	if ((double)c.scratch > o->max_gib * 1073741824.0) {
		c.is_skipped = true;
		return c;
	}
	char *scratch = aligned_alloc(64, (c.scratch + 127) / 64 * 64);
	attnrt_entry_fn entry = cg_program_entry(v->p, fn);
	attnrt_run run = {1, 0, 0, o->threads};
	double t[64];
	int n = 0;
	while (n < o->reps) {
		double t0 = bench_now_s(o->clock);
		if (!scratch || entry(&run, params, scratch, ins, outs) != 0) {
			fprintf(stderr, "%s: %s failed\n", o->b->name, fn);
			exit(1);
		}
		t[n++] = bench_now_s(o->clock) - t0;
		if (t[n - 1] > 1.0 && n >= 3)
			break;
	}
	free(scratch);
	bench_sort(t, n);
	c.s = t[n / 2];
	return c;
}

/* The parameter block of a program, every parameter random. */
static void *make_params(const cg_program *p)
{
	size_t bytes = cg_program_params_bytes(p);
	char *block = aligned_alloc(64, bytes ? bytes : 64);
	uint64_t s = 3;
	for (size_t i = 0; block && i + 4 <= bytes; i += 4) {
		float x = bench_rng_float(&s);
		memcpy(block + i, &x, 4);
	}
	return block;
}

static size_t numel(const attnrt_tensor_info *t)
{
	size_t len = 1;
	for (int d = 0; d < t->rank; d++)
		len *= (size_t)t->dims[d];
	return len;
}

/* One random buffer for the gradients loss_grad of p writes, laid out
 * one after another at go[1..] (go[0] is the loss). */
static float *make_grads(const opts *o, const cg_program *p, void **go)
{
	uint32_t n_go;
	const attnrt_tensor_info *gi = cg_program_outputs(p, "loss_grad", &n_go);
	size_t total = 0;
	for (uint32_t i = 1; i < n_go && i < MAX_GRADS; i++)
		total += numel(&gi[i]);
	float *grads = random_floats(o, total + 1, 7);
	size_t at = 0;
	for (uint32_t i = 1; i < n_go && i < MAX_GRADS; i++) {
		go[i] = grads + at;
		at += numel(&gi[i]);
	}
	return grads;
}

static void print_cell(const cell *c, bool is_time)
{
	if (c->is_skipped)
		printf(" %9s", "-");
	else if (is_time)
		printf(" %9.3f", c->s * 1e3);
	else
		printf(" %9.1f", (double)c->scratch / 1048576.0);
}

/* GFLOP/s and percent of the peak of flops in cell c (blanks without). */
static void print_rate(const opts *o, const cell *c, double flops)
{
	if (!o->b->fwd_flops || c->is_skipped) {
		printf(" %7s %5s", "-", "-");
		return;
	}
	double g = flops / c->s * 1e-9;
	if (o->peak > 0)
		printf(" %7.1f %4.0f%%", g, 100.0 * g / o->peak);
	else
		printf(" %7.1f %5s", g, "-");
}

/* c: fused fwd, unfused fwd, fused fwd+bwd, unfused fwd+bwd. */
static void print_row(const opts *o, const bench_attn_cfg *cfg, const cell *c,
		      double diff)
{
	double f = o->b->fwd_flops ? o->b->fwd_flops(cfg) : 0;
	printf("%6d", cfg->seq);
	print_cell(&c[0], true);
	print_rate(o, &c[0], f);
	print_cell(&c[2], true);
	print_rate(o, &c[2], 3 * f);
	print_cell(&c[1], true);
	print_cell(&c[3], true);
	for (int i = 0; i < 4; i++)
		print_cell(&c[i], false);
	if (c[1].is_skipped)
		printf("  %7s\n", "-");
	else
		printf("  %.1e\n", diff);
	fflush(stdout);
}

/* The valid lengths: seq for every batch element, or t + 1 for query t
 * of each when causal. */
static int32_t *make_valid(const opts *o, int seq)
{
	size_t n = o->is_causal ? (size_t)BENCH_N * seq : BENCH_N;
	int32_t *valid = malloc(n * sizeof *valid);
	if (!valid) {
		fprintf(stderr, "%s: out of memory\n", o->b->name);
		exit(1);
	}
	for (size_t i = 0; i < n; i++)
		valid[i] = o->is_causal ? (int32_t)(i % (size_t)seq) + 1 : seq;
	return valid;
}

static void run_seq(ir_ctx *ctx, int seq, const opts *o)
{
	bench_attn_cfg cfg = {seq, o->width, o->is_causal};
	variant fused = {0}, plain = {0};
	if (!compile(ctx, o->b, &cfg, true, &fused) ||
	    !compile(ctx, o->b, &cfg, false, &plain)) {
		fprintf(stderr, "%s: seq %d does not compile\n", o->b->name,
			seq);
		exit(1);
	}
	size_t n = (size_t)BENCH_N * seq * o->width;
	float *q = random_floats(o, n, 1), *k = random_floats(o, n, 2),
	      *v = random_floats(o, n, 3), *w = random_floats(o, n, 4);
	float *out_f = random_floats(o, n, 5), *out_u = random_floats(o, n, 6);
	int32_t *valid = make_valid(o, seq);
	void *pf = make_params(fused.p), *pu = make_params(plain.p);
	const void *fwd_in[4] = {q, k, v, valid}, *loss_in[2] = {w, valid};
	float loss;
	void *fo[1] = {out_f}, *uo[1] = {out_u}, *go[MAX_GRADS] = {&loss};
	float *grads = make_grads(o, plain.p, go);
	cell c[4];
	opts unfused = *o;
	if (o->is_fused_only)
		unfused.max_gib = -1;
	c[0] = time_fn(&fused, "fwd", o, fwd_in, fo, pf);
	c[1] = time_fn(&plain, "fwd", &unfused, fwd_in, uo, pu);
	c[2] = time_fn(&fused, "loss_grad", o, loss_in, go, pf);
	c[3] = time_fn(&plain, "loss_grad", &unfused, loss_in, go, pu);
	double diff = 0;
	for (size_t i = 0; !c[1].is_skipped && i < n; i++)
		diff = fmax(diff, fabs((double)out_f[i] - out_u[i]));
	print_row(o, &cfg, c, diff);
	float *bufs[] = {q, k, v, w, out_f, out_u, grads};
	for (int i = 0; i < 7; i++)
		free(bufs[i]);
	free(valid);
	free(pf);
	free(pu);
	variant_fini(&fused);
	variant_fini(&plain);
}

/* The 1-minute load average: the machine is shared, and another busy
 * process takes the second thread's core. */
static double load_average(void)
{
	double l = -1;
	FILE *f = fopen("/proc/loadavg", "r");
	if (f) {
		if (fscanf(f, "%lf", &l) != 1)
			l = -1;
		fclose(f);
	}
	return l;
}

static bool parse(int argc, char **argv, opts *o)
{
	const bench_attn *b = o->b;
	*o = (opts){.b = b,
		    .reps = 5,
		    .threads = 2,
		    .max_gib = 8,
		    .width = BENCH_WIDTH,
		    .clock = CLOCK_MONOTONIC};
	for (int i = 1; i < argc; i++) {
		bool has_arg = i + 1 < argc;
		if (strcmp(argv[i], "-c") == 0 && b->has_causal)
			o->is_causal = true;
		else if (strcmp(argv[i], "-C") == 0)
			o->clock = CLOCK_PROCESS_CPUTIME_ID;
		else if (strcmp(argv[i], "-f") == 0)
			o->is_fused_only = true;
		else if (strcmp(argv[i], "-w") == 0 && has_arg)
			o->width = atoi(argv[++i]);
		else if (strcmp(argv[i], "-p") == 0 && has_arg)
			o->peak = atof(argv[++i]);
		else if (strcmp(argv[i], "-r") == 0 && has_arg)
			o->reps = atoi(argv[++i]);
		else if (strcmp(argv[i], "-t") == 0 && has_arg)
			o->threads = atoi(argv[++i]);
		else if (strcmp(argv[i], "-m") == 0 && has_arg)
			o->max_gib = atof(argv[++i]);
		else if (strcmp(argv[i], "-s") == 0 && has_arg &&
			 o->n_seqs < MAX_SEQS)
			o->seqs[o->n_seqs++] = atoi(argv[++i]);
		else
			return false;
	}
	for (int i = 0; o->n_seqs == 0 && i < b->n_seqs && i < MAX_SEQS; i++)
		o->seqs[i] = b->seqs[i];
	if (o->n_seqs == 0)
		o->n_seqs = b->n_seqs < MAX_SEQS ? b->n_seqs : MAX_SEQS;
	return o->reps >= 1 && o->reps <= 64 && o->threads >= 1 &&
	       o->width >= 1 && o->width <= 1024;
}

static void print_header(const opts *o)
{
	const bench_attn *b = o->b;
	printf("%s: N = %d%s, %s %d, queries = keys = seq%s, %d thread%s, "
	       "median of %d%s",
	       b->what, BENCH_N, b->n_note, b->w_name, o->width,
	       o->is_causal ? " (causal)" : "", o->threads,
	       o->threads == 1 ? "" : "s", o->reps,
	       o->clock == CLOCK_MONOTONIC ? "" : " (CPU time)");
	if (o->peak > 0)
		printf(", peak %.1f GFLOP/s", o->peak);
	printf("\n%6s %33s %33s %19s %19s %19s\n", "", "fused forward",
	       "fused fwd+bwd", "unfused ms", "forward scratch MiB",
	       "fwd+bwd scratch MiB");
	printf("%6s %9s %7s %5s %9s %7s %5s %9s %9s %9s %9s %9s %9s  %s\n",
	       "seq", "ms", "GFLOP/s", "peak", "ms", "GFLOP/s", "peak", "fwd",
	       "fwd+bwd", "fused", "unfused", "fused", "unfused", "max|diff|");
}

int bench_attn_main(const bench_attn *b, int argc, char **argv)
{
	opts o = {.b = b};
	if (!parse(argc, argv, &o)) {
		fprintf(stderr,
			"usage: %s [-r REPS] [-t THREADS] "
			"[-s SEQ]... [-m MAX_GIB] [-w WIDTH] [-f] [-C] [-p PEAK]%s\n",
			b->name, b->has_causal ? " [-c]" : "");
		return 2;
	}
	ir_ctx ctx;
	ir_ctx_init(&ctx);
	print_header(&o);
	double load0 = load_average();
	for (int i = 0; i < o.n_seqs; i++)
		run_seq(&ctx, o.seqs[i], &o);
	printf("load average %.2f before, %.2f after (2 cores)\n", load0,
	       load_average());
	ir_ctx_fini(&ctx);
	return 0;
}
