/*
 * additive.c - benchmark of fused against unfused additive (Bahdanau)
 * attention in attnc: batch N = 8, projection width H = 64, value width
 * 64, sequence 128 to 2048 (queries = keys), forward alone and forward +
 * backward, each the median of several runs, with the scratch memory
 * each program needs (cg_program_scratch_bytes: the activations, the
 * N x Q x K x H features included when unfused). Both graphs come from
 * one .g text, compiled with and without the fuse_attention pass:
 *
 *   fwd(qp, kp, v, valid) = masked_softmax(squeeze(tanh(unsqueeze(qp, 2)
 *                           + unsqueeze(kp, 1)) @ wv, -1), valid) @ v
 *   loss(w, valid)        = sum(that, with qp, kp, wv, v parameters, * w)
 *
 * and loss_grad (autodiff) gives forward + backward. valid is the full
 * length. A program whose scratch exceeds -m GiB is skipped ("-"): the
 * unfused features alone are N Q K H floats, 8 GiB at 2048.
 *
 *     bench_additive [-r REPS] [-t THREADS] [-s SEQ]... [-m MAX_GIB]
 *
 * The last column is the largest difference between the fused and
 * unfused outputs of one forward run, a sanity check. The run ends with
 * the load average before and after.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cg_program.h"
#include "frontend.h"
#include "passes.h"

#define N_HEADS 8 /* N, the batch */
#define WIDTH 64 /* H, and the values' width */
#define MAX_SEQS 16

typedef struct opts {
	int reps, threads;
	int seqs[MAX_SEQS], n_seqs;
	double max_gib;
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

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static float *random_floats(size_t n, uint64_t seed)
{
	float *x = aligned_alloc(64, (n * 4 + 63) / 64 * 64);
	if (!x) {
		fprintf(stderr, "bench_additive: out of memory\n");
		exit(1);
	}
	for (size_t i = 0; i < n; i++)
		x[i] = (float)((double)(rng_next(&seed) >> 11) / 9007199254740992.0 * 2 - 1);
	return x;
}

static bool compile(ir_ctx *ctx, int seq, bool is_fused, variant *v)
{
	char src[1400];
	snprintf(src, sizeof src,
		 "model additive_bench\n"
		 "def score(qp, kp, wv)\n"
		 "  return squeeze(tanh(unsqueeze(qp, 2) + unsqueeze(kp, 1)) @ wv, -1)\n"
		 "export def fwd(qp: f32[%d, %d, %d], kp: f32[%d, %d, %d], "
		 "v: f32[%d, %d, %d], valid: i32[%d])\n"
		 "  param wv : [%d, 1] = normal(0, 1)\n"
		 "  return masked_softmax(score(qp, kp, wv), valid) @ v\n"
		 "export def loss(w: f32[%d, %d, %d], valid: i32[%d])\n"
		 "  param qp, kp, v : [%d, %d, %d] = normal(0, 1)\n"
		 "  param wv : [%d, 1] = normal(0, 1)\n"
		 "  return sum(masked_softmax(score(qp, kp, wv), valid) @ v * w)\n",
		 N_HEADS, seq, WIDTH, N_HEADS, seq, WIDTH, N_HEADS, seq, WIDTH,
		 N_HEADS, WIDTH, N_HEADS, seq, WIDTH, N_HEADS, N_HEADS, seq, WIDTH,
		 WIDTH);
	uint32_t file = ir_ctx_add_source(ctx, "additive_bench.g", src, strlen(src));
	v->m = fe_compile(ctx, file);
	pass_options po = {.no_fuse = !is_fused};
	if (!v->m || !pass_autodiff(v->m, "loss") || !pass_pipeline_run(v->m, &po))
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
		double t0 = now_s();
		if (!scratch || entry(&run, params, scratch, ins, outs) != 0) {
			fprintf(stderr, "bench_additive: %s failed\n", fn);
			exit(1);
		}
		t[n++] = now_s() - t0;
		if (t[n - 1] > 1.0 && n >= 3)
			break;
	}
	free(scratch);
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
			double x = t[j];
			t[j] = t[j - 1];
			t[j - 1] = x;
		}
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
		float x = (float)((double)(rng_next(&s) >> 11) / 9007199254740992.0 * 2 - 1);
		memcpy(block + i, &x, 4);
	}
	return block;
}

static void print_cell(const cell *c, bool is_time)
{
	if (c->is_skipped)
		printf(" %9s", "-");
	else if (is_time)
		printf(" %9.1f", c->s * 1e3);
	else
		printf(" %9.1f", (double)c->scratch / 1048576.0);
}

static void run_seq(ir_ctx *ctx, int seq, const opts *o)
{
	variant fused = {0}, plain = {0};
	if (!compile(ctx, seq, true, &fused) || !compile(ctx, seq, false, &plain)) {
		fprintf(stderr, "bench_additive: seq %d does not compile\n", seq);
		exit(1);
	}
	size_t n = (size_t)N_HEADS * seq * WIDTH;
	float *q = random_floats(n, 1), *k = random_floats(n, 2),
	      *v = random_floats(n, 3), *w = random_floats(n, 4);
	float *out_f = random_floats(n, 5), *out_u = random_floats(n, 6);
	float *grads = random_floats(4 * n + 4 * WIDTH, 7);
	int32_t valid[N_HEADS];
	for (int i = 0; i < N_HEADS; i++)
		valid[i] = seq;
	void *pf = make_params(fused.p), *pu = make_params(plain.p);
	const void *fwd_in[4] = {q, k, v, valid}, *loss_in[2] = {w, valid};
	float loss;
	void *fo[1] = {out_f}, *uo[1] = {out_u};
	void *go[8] = {&loss};
	uint32_t n_go;
	const attnrt_tensor_info *gi = cg_program_outputs(plain.p, "loss_grad", &n_go);
	size_t at = 0;
	for (uint32_t i = 1; i < n_go && i < 8; i++) {
		go[i] = grads + at;
		size_t len = 1;
		for (int d = 0; d < gi[i].rank; d++)
			len *= (size_t)gi[i].dims[d];
		at += len;
	}
	cell c[4];
	c[0] = time_fn(&fused, "fwd", o, fwd_in, fo, pf);
	c[1] = time_fn(&plain, "fwd", o, fwd_in, uo, pu);
	c[2] = time_fn(&fused, "loss_grad", o, loss_in, go, pf);
	c[3] = time_fn(&plain, "loss_grad", o, loss_in, go, pu);
	double diff = 0;
	for (size_t i = 0; !c[1].is_skipped && i < n; i++)
		diff = fmax(diff, fabs((double)out_f[i] - out_u[i]));
	printf("%6d", seq);
	for (int i = 0; i < 4; i++)
		print_cell(&c[i], true);
	for (int i = 0; i < 4; i++)
		print_cell(&c[i], false);
	printf("  %.1e\n", diff);
	fflush(stdout);
	float *bufs[] = {q, k, v, w, out_f, out_u, grads};
	for (int i = 0; i < 7; i++)
		free(bufs[i]);
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
	*o = (opts){.reps = 5, .threads = 2, .max_gib = 8};
	for (int i = 1; i < argc; i++) {
		bool has_arg = i + 1 < argc;
		if (strcmp(argv[i], "-r") == 0 && has_arg)
			o->reps = atoi(argv[++i]);
		else if (strcmp(argv[i], "-t") == 0 && has_arg)
			o->threads = atoi(argv[++i]);
		else if (strcmp(argv[i], "-m") == 0 && has_arg)
			o->max_gib = atof(argv[++i]);
		else if (strcmp(argv[i], "-s") == 0 && has_arg && o->n_seqs < MAX_SEQS)
			o->seqs[o->n_seqs++] = atoi(argv[++i]);
		else
			return false;
	}
	if (o->n_seqs == 0) {
		static const int all[] = {128, 256, 512, 1024, 2048};
		for (int i = 0; i < 5; i++)
			o->seqs[o->n_seqs++] = all[i];
	}
	return o->reps >= 1 && o->reps <= 64 && o->threads >= 1;
}

int main(int argc, char **argv)
{
	opts o;
	if (!parse(argc, argv, &o)) {
		fprintf(stderr, "usage: bench_additive [-r REPS] [-t THREADS] "
				"[-s SEQ]... [-m MAX_GIB]\n");
		return 2;
	}
	ir_ctx ctx;
	ir_ctx_init(&ctx);
	printf("additive attention: N = %d, H = dv = %d, queries = keys "
	       "= seq, %d thread%s, median of %d\n",
	       N_HEADS, WIDTH, o.threads, o.threads == 1 ? "" : "s", o.reps);
	printf("%6s %19s %19s %19s %19s %9s\n", "", "forward ms",
	       "fwd+bwd ms", "forward scratch MiB", "fwd+bwd scratch MiB", "");
	printf("%6s %9s %9s %9s %9s %9s %9s %9s %9s  %s\n", "seq", "fused",
	       "unfused", "fused", "unfused", "fused", "unfused", "fused",
	       "unfused", "max|diff|");
	double load0 = load_average();
	for (int i = 0; i < o.n_seqs; i++)
		run_seq(&ctx, o.seqs[i], &o);
	printf("load average %.2f before, %.2f after (2 cores)\n", load0,
	       load_average());
	ir_ctx_fini(&ctx);
	return 0;
}
