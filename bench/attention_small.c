/*
 * attention_small.c - benchmark of the fused attention kernels at the
 * book's Transformer sizes, where the attentions are many and tiny: batch
 * 64, 4 heads of width 8 side by side in rows of 32, 10 queries and 10
 * keys (docs/fusion.md, "Small attentions"). One .g text gives
 *
 *   fwd(q, k, v, valid)  = merge_heads(dropout(masked_softmax(
 *                            split_heads(q) split_heads(k)^T / sqrt(d),
 *                            valid per head)) split_heads(v))
 *   loss(valid, w)       = sum(that, q, k, v parameters, * w)
 *
 * fused, so that fwd is one fused_attention node reading its heads in
 * place and loss_grad (autodiff) adds one fused_attention_grad; each is
 * timed as a training call (dropout on) in microseconds per call: the
 * median and the fastest of several rounds of many calls.
 *
 *     bench_attention_small [-b B] [-H HEADS] [-d D] [-q Q] [-k K]
 *                           [-v none|batch|causal] [-p P] [-t THREADS]
 *                           [-r ROUNDS] [-n CALLS] [-c wall|cpu] [-S FILE.s]
 *
 * Defaults: the Transformer's encoder self-attention (valid per batch
 * element, dropout 0.1), 1 thread, 15 rounds of 500 calls. -v causal
 * gives query t the keys 0..t (the decoder's self-attention, lengths per
 * query); -c cpu times the process's CPU time instead of the wall clock
 * (with 1 thread, what the kernels take even while other processes hold
 * the core); -S writes the program's assembly instead of timing it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_program.h"

typedef enum valid_kind { VALID_NONE, VALID_BATCH, VALID_CAUSAL } valid_kind;

typedef struct opts {
	int B, H, d, Q, K, threads, rounds, calls;
	double p;
	valid_kind valid;
	const char *asm_path;
	clockid_t clock;
} opts;

static void *random_floats(size_t n, uint64_t seed)
{
	float *x = aligned_alloc(64, (n * 4 + 63) / 64 * 64);
	if (!x) {
		fprintf(stderr, "bench_attention_small: out of memory\n");
		exit(1);
	}
	for (size_t i = 0; i < n; i++)
		x[i] = bench_rng_float(&seed);
	return x;
}

/* The .g text of fwd and loss for o's sizes. */
static void source(const opts *o, char *buf, size_t size)
{
	int w = o->H * o->d;
	char vdecl[64] = "", att[768], sm[384];
	if (o->valid == VALID_BATCH)
		snprintf(vdecl, sizeof vdecl, "valid: i32[%d], ", o->B);
	else if (o->valid == VALID_CAUSAL)
		snprintf(vdecl, sizeof vdecl, "valid: i32[%d, %d], ", o->B,
			 o->Q);
	if (o->valid == VALID_NONE)
		snprintf(sm, sizeof sm,
			 "softmax(split_heads(q, %d) @ split_heads(k, %d).T / sqrt(%d))",
			 o->H, o->H, o->d);
	else
		snprintf(sm, sizeof sm,
			 "masked_softmax(split_heads(q, %d) @ split_heads(k, %d).T / sqrt(%d), "
			 "repeat_interleave(valid, %d, 0))",
			 o->H, o->H, o->d, o->H);
	snprintf(att, sizeof att,
		 "merge_heads(dropout(%s, %g) @ split_heads(v, %d), %d)", sm,
		 o->p, o->H, o->H);
	snprintf(buf, size,
		 "model small\n"
		 "export def fwd(%sq: f32[%d, %d, %d], k: f32[%d, %d, %d], v: f32[%d, %d, %d])\n"
		 "  return %s\n"
		 "export def loss(%sw: f32[%d, %d, %d])\n"
		 "  param q : [%d, %d, %d] = normal(0, 1)\n"
		 "  param k : [%d, %d, %d] = normal(0, 1)\n"
		 "  param v : [%d, %d, %d] = normal(0, 1)\n"
		 "  return sum(%s * w)\n",
		 vdecl, o->B, o->Q, w, o->B, o->K, w, o->B, o->K, w, att, vdecl,
		 o->B, o->Q, w, o->B, o->Q, w, o->B, o->K, w, o->B, o->K, w,
		 att);
}

static cg_program *compile(ir_ctx *ctx, const opts *o, ir_module **m)
{
	static char src[4096];
	source(o, src, sizeof src);
	uint32_t file = ir_ctx_add_source(ctx, "attention_small.g", src,
					  strlen(src));
	*m = fe_compile(ctx, file);
	pass_options po = {0};
	if (!*m || !pass_pipeline_forward(*m, &po) ||
	    !pass_autodiff(*m, "loss") || !pass_pipeline_run(*m, &po))
		return NULL;
	return cg_program_create(ctx, *m, NULL, NULL);
}

/* The valid lengths: random in 1..K per batch element, or t + 1 for
 * query t. */
static int32_t *valid_lengths(const opts *o)
{
	int32_t *v = malloc((size_t)o->B * (size_t)o->Q * sizeof *v);
	uint64_t s = 11;
	for (int b = 0; v && b < o->B; b++)
		for (int t = 0; t < o->Q; t++)
			v[b * o->Q + t] = o->valid == VALID_CAUSAL
						  ? t + 1
						  : (int32_t)(bench_rng_next(&s) %
							      (uint64_t)o->K) +
							    1;
	if (v && o->valid == VALID_BATCH)
		for (int b = 0; b < o->B; b++)
			v[b] = v[b * o->Q];
	return v;
}

/* Microseconds per call of entry point fn (in training mode): the
 * median and the fastest of o's rounds. */
static bench_timing time_fn(const cg_program *p, const char *fn, const opts *o,
			    const void *const *ins, void *const *outs,
			    void *params)
{
	bench_calls c = {.rounds = o->rounds,
			 .calls = o->calls,
			 .threads = o->threads,
			 .is_training = 1,
			 .params = params,
			 .clock = o->clock,
			 .who = "bench_attention_small"};
	bench_timing t = bench_time_entry(p, fn, &c, ins, outs);
	return (bench_timing){t.median / 1e3, t.best / 1e3};
}

static int run(ir_ctx *ctx, const opts *o)
{
	ir_module *m = NULL;
	cg_program *p = compile(ctx, o, &m);
	if (!p) {
		fprintf(stderr,
			"bench_attention_small: the program does not compile\n");
		return 1;
	}
	if (o->asm_path) {
		bool is_ok = cg_program_emit(p, CG_EMIT_ASM, o->asm_path);
		cg_program_destroy(p);
		ir_module_destroy(m);
		return is_ok ? 0 : 1;
	}
	if (!cg_program_jit(p))
		return 1;
	size_t nq = (size_t)o->B * o->Q * o->H * o->d,
	       nk = (size_t)o->B * o->K * o->H * o->d;
	float *q = random_floats(nq, 1), *k = random_floats(nk, 2),
	      *v = random_floats(nk, 3);
	float *w = random_floats(nq, 4), *out = random_floats(nq, 5);
	float *grads = random_floats(nq + 2 * nk + 1, 6);
	int32_t *valid = valid_lengths(o);
	size_t pb = cg_program_params_bytes(p);
	void *params = random_floats(pb / 4 + 16, 7);
	int nv = o->valid != VALID_NONE;
	const void *fwd_in[4] = {valid, q, k, v}, *loss_in[2] = {valid, w};
	float loss;
	void *fo[1] = {out},
	     *go[4] = {&loss, grads, grads + nq, grads + nq + nk};
	bench_timing tf = time_fn(p, "fwd", o, fwd_in + 1 - nv, fo, params);
	bench_timing tl = time_fn(p, "loss", o, loss_in + 1 - nv, fo, params);
	bench_timing tg = time_fn(p, "loss_grad", o, loss_in + 1 - nv, go,
				  params);
	static const char *kinds[] = {"none", "batch", "causal"};
	printf("B %d, heads %d, d %d, Q %d, K %d, valid %s, dropout %g, %d thread%s; "
	       "%s us per call, median (fastest) of %d rounds of %d calls:\n"
	       "  fwd %.2f (%.2f), loss %.2f (%.2f), loss_grad %.2f (%.2f)\n",
	       o->B, o->H, o->d, o->Q, o->K, kinds[o->valid], o->p, o->threads,
	       o->threads == 1 ? "" : "s",
	       o->clock == CLOCK_MONOTONIC ? "wall" : "CPU", o->rounds, o->calls,
	       tf.median, tf.best, tl.median, tl.best, tg.median, tg.best);
	void *bufs[] = {q, k, v, w, out, grads, valid, params};
	for (int i = 0; i < 8; i++)
		free(bufs[i]);
	cg_program_destroy(p);
	ir_module_destroy(m);
	return 0;
}

static bool parse_valid(const char *s, valid_kind *v)
{
	static const char *names[] = {"none", "batch", "causal"};
	for (int i = 0; i < 3; i++)
		if (strcmp(s, names[i]) == 0) {
			*v = (valid_kind)i;
			return true;
		}
	return false;
}

static bool parse(int argc, char **argv, opts *o)
{
	*o = (opts){.B = 64,
		    .H = 4,
		    .d = 8,
		    .Q = 10,
		    .K = 10,
		    .threads = 1,
		    .rounds = 15,
		    .calls = 500,
		    .p = 0.1,
		    .valid = VALID_BATCH,
		    .clock = CLOCK_MONOTONIC};
	for (int i = 1; i < argc; i += 2) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int *ints[] = {&o->B, &o->H,       &o->d,      &o->Q,
			       &o->K, &o->threads, &o->rounds, &o->calls};
		const char *flags = "bHdqktrn";
		const char *at = a[0] == '-' && a[1] && !a[2]
					 ? strchr(flags, a[1])
					 : NULL;
		if (!v)
			return false;
		if (at)
			*ints[at - flags] = atoi(v);
		else if (strcmp(a, "-p") == 0)
			o->p = atof(v);
		else if (strcmp(a, "-v") == 0) {
			if (!parse_valid(v, &o->valid))
				return false;
		} else if (strcmp(a, "-S") == 0) {
			o->asm_path = v;
		} else if (strcmp(a, "-c") == 0) {
			o->clock = strcmp(v, "cpu") == 0
					   ? CLOCK_PROCESS_CPUTIME_ID
					   : CLOCK_MONOTONIC;
		} else {
			return false;
		}
	}
	return o->B > 0 && o->H > 0 && o->d > 0 && o->Q > 0 && o->K > 0 &&
	       o->threads > 0 && o->rounds >= 1 && o->rounds <= 64 &&
	       o->calls > 0;
}

int main(int argc, char **argv)
{
	opts o;
	if (!parse(argc, argv, &o)) {
		fprintf(stderr,
			"usage: bench_attention_small [-b B] [-H HEADS] [-d D] "
			"[-q Q] [-k K] [-v none|batch|causal] [-p P] [-t THREADS] "
			"[-r ROUNDS] [-n CALLS] [-c wall|cpu] [-S FILE.s]\n");
		return 2;
	}
	ir_ctx ctx;
	ir_ctx_init(&ctx);
	int rc = run(&ctx, &o);
	ir_ctx_fini(&ctx);
	return rc;
}
