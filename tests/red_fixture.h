/*
 * red_fixture.h - the graph, random inputs and JIT run that the tests of
 * the reduction kernels share (test_codegen_rowred.c, rows in lanes;
 * test_codegen_colred.c, columns in lanes): one function "f" of up to 4
 * inputs and one output, run with every kernel parallel from the
 * smallest work.
 */
#ifndef ATTNC_TESTS_RED_FIXTURE_H
#define ATTNC_TESTS_RED_FIXTURE_H

#include "cg_program.h"
#include "testutil.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The order of a float sum, the interpreter's (interp/nn.c) and the
 * generated code's (CG_SUM_PLAIN, CG_SUM_BLOCK): an output element of at
 * most RED_SUM_PLAIN inputs sums them left to right; a longer one in
 * blocks of RED_SUM_BLOCK (red_block), the block sums combined pairwise
 * (red_tree). */
#define RED_SUM_PLAIN 256
#define RED_SUM_BLOCK 32

/* The block of a float sum of n elements. */
static inline int64_t red_block(int64_t n)
{
	return n > RED_SUM_PLAIN ? RED_SUM_BLOCK : RED_SUM_PLAIN;
}

/* The pairwise total of the nb block sums b[0 .. nb) in float32, by its
 * definition in docs/ops.md: 0 for none, b[0] for one, else the total of
 * the first p (the largest power of two below nb) plus that of the rest. */
static inline float red_tree(const float *b, int64_t nb)
{
	if (nb <= 1)
		return nb ? b[0] : 0.0f;
	int64_t p = 1;
	while (p * 2 < nb)
		p *= 2;
	return red_tree(b, p) + red_tree(b + p, nb - p);
}

/* The graph and its random inputs. */
typedef struct fx {
	tu_graph g;
	uint64_t rng;
	void *in[4];
} fx;

static void fx_init(fx *x, uint64_t seed)
{
	memset(x, 0, sizeof *x);
	tu_graph_init(&x->g, 4);
	x->rng = seed;
}

static void fx_fini(fx *x)
{
	for (int i = 0; i < 4; i++)
		free(x->in[i]);
	tu_graph_fini(&x->g);
}

static uint32_t rnd(fx *x, uint32_t n)
{
	x->rng = x->rng * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)((x->rng >> 33) % n);
}

/* An input of dims d[0 .. rank), random: floats in [-2, 2) of all
 * magnitudes of rounding, i32 in [-1000, 1000]. */
static ir_id input(fx *x, ir_dtype t, int rank, const int64_t *d)
{
	ir_type ty = rank == 1   ? tu_type(t, 1, d[0])
		     : rank == 2 ? tu_type(t, 2, d[0], d[1])
				 : tu_type(t, 3, d[0], d[1], d[2]);
	uint32_t i = x->g.f->n_inputs;
	int64_t n = 1;
	for (int a = 0; a < rank; a++)
		n *= d[a];
	x->in[i] = malloc((size_t)(n ? n : 1) * 4);
	for (int64_t e = 0; e < n; e++) {
		if (t == IR_I32)
			((int32_t *)x->in[i])[e] = (int32_t)rnd(x, 2001) - 1000;
		else
			((float *)x->in[i])[e] = -2.0f +
						 4.0f * (float)rnd(x, 1 << 24) /
							 (float)(1 << 24);
	}
	return tu_input(&x->g, ty);
}

static ir_id reduce(fx *x, ir_op op, ir_id a, uint32_t axes, bool keepdim)
{
	ir_attr r = {.reduce = {axes, keepdim}};
	return tu_build(&x->g, op, &a, 1, &r, NULL);
}

static ir_id op2(fx *x, ir_op op, ir_id a, ir_id b)
{
	ir_id args[2] = {a, b};
	return tu_build(&x->g, op, args, 2, NULL, NULL);
}

static void ret(fx *x, ir_id id)
{
	x->g.f->output_names[x->g.f->n_outputs] = "out";
	x->g.f->outputs[x->g.f->n_outputs++] = id;
}

/* Compiles f for the JIT with every kernel parallel from the smallest
 * work, so that ranges split at odd places at any thread count. */
static cg_program *compile(fx *x)
{
	cg_program_options po = {.grain = 1};
	cg_program *p = cg_program_create(&x->g.ctx, x->g.m, NULL, &po);
	ck_assert_msg(p && cg_program_jit(p), "%s", tu_graph_diag(&x->g));
	return p;
}

/* Runs p's f on x's inputs with n_threads; returns its one output
 * (malloc'd, n elements). */
static void *run(fx *x, cg_program *p, int n_threads, int64_t n)
{
	size_t sb_n = cg_program_scratch_bytes(p, "f") + 64;
	char *sb = aligned_alloc(64, (sb_n + 63) / 64 * 64);
	memset(sb, 0xff, (sb_n + 63) / 64 * 64);
	void *out = calloc((size_t)n + 1, 4);
	const void *ins[4] = {x->in[0], x->in[1], x->in[2], x->in[3]};
	void *outs[1] = {out};
	attnrt_run r = {1, 1, false, n_threads};
	ck_assert_int_eq(cg_program_entry(p, "f")(&r, NULL, sb, ins, outs), 0);
	free(sb);
	return out;
}

/* Runs f through the JIT on x's inputs with n_threads; returns its one
 * output (malloc'd, n elements) and the number of fused nodes. */
static inline void *jit(fx *x, int n_threads, int64_t n, uint32_t *n_fused)
{
	cg_program *p = compile(x);
	void *out = run(x, p, n_threads, n);
	if (n_fused)
		*n_fused = cg_program_n_fused(p);
	cg_program_destroy(p);
	return out;
}

/* got and want, n floats or int32s, bit for bit (a NaN matches any
 * NaN). */
static void check_bits(const void *got, const void *want, int64_t n,
		       const char *what)
{
	for (int64_t i = 0; i < n; i++) {
		uint32_t a, b;
		memcpy(&a, (const char *)got + 4 * i, 4);
		memcpy(&b, (const char *)want + 4 * i, 4);
		float fa, fb;
		memcpy(&fa, &a, 4);
		memcpy(&fb, &b, 4);
		ck_assert_msg(a == b || (isnan(fa) && isnan(fb)),
			      "%s: element %lld: got %08x (%.9g), want %08x (%.9g)",
			      what, (long long)i, a, fa, b, fb);
	}
}

/* p's f at 1, 2 and 3 threads (one compiled program serves every
 * thread count: it is the run's): each time, bit for bit, want (n
 * elements). */
static void check_program_bits(fx *x, cg_program *p, int64_t n,
			       const void *want, const char *what)
{
	char at[160];
	for (int th = 1; th <= 3; th++) {
		void *got = run(x, p, th, n);
		snprintf(at, sizeof at, "%s, %d threads", what, th);
		check_bits(got, want, n, at);
		free(got);
	}
}

/* f through the JIT at 1, 2 and 3 threads: bit for bit want. */
static void check_bits_at_threads(fx *x, int64_t n, const void *want,
				  const char *what)
{
	cg_program *p = compile(x);
	check_program_bits(x, p, n, want, what);
	cg_program_destroy(p);
}

/* check_bits_at_threads, and the program has n_fused fused nodes. */
static void check_fused_at_threads(fx *x, int64_t n, const void *want,
				   uint32_t n_fused, const char *what)
{
	cg_program *p = compile(x);
	ck_assert_uint_eq(cg_program_n_fused(p), n_fused);
	check_program_bits(x, p, n, want, what);
	cg_program_destroy(p);
}

#endif
