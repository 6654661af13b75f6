/*
 * attn_jit.h - running the attention test modules through the JIT and
 * the interpreter, shared by test_codegen_fuse.c,
 * test_codegen_fuse_additive.c, test_codegen_fuse_nonfinite.c and
 * test_codegen_small_cache.c: their parameters, the outputs of a JIT run, the interpreter's gradient, and the closeness
 * rules between them (for values that are not finite too).
 *
 * Header-only (static inline), like attn_cases.h.
 */
#ifndef ATTNC_TESTS_ATTN_JIT_H
#define ATTNC_TESTS_ATTN_JIT_H

#include "attn_cases.h"
#include "cg_program.h"

/* Outputs of one JIT run, as f32 tensors, and the scratch it needed. */
typedef struct jit_out {
	interp_tensor t[8];
	uint32_t n;
	size_t scratch;
} jit_out;

/* The most parameters and inputs a test module of attn_cases.h has: the
 * size of the arrays the tests hold them in. */
enum { AJ_MAX_TENSORS = 4 };

/* m's parameters drawn from seed into params (aj_tensors_fini frees
 * them, m->n_params of them). */
static inline void aj_params_init(tu_graph *x, const ir_module *m, uint64_t seed,
				  interp_tensor params[AJ_MAX_TENSORS])
{
	int64_t syms[1] = {0};
	ck_assert_uint_le(m->n_params, AJ_MAX_TENSORS);
	ck_assert(interp_params_init(&x->ctx, m, syms, seed, false, params));
}

static inline void aj_tensors_fini(tu_graph *x, interp_tensor *t, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		interp_tensor_fini(&x->ctx, &t[i]);
}

static inline size_t aj_round64(size_t n)
{
	return (n + 63) / 64 * 64 + 64;
}

/* m lowered with options po and compiled by the JIT, to run as often
 * as a test likes (a compile costs far more than a run here). */
static inline cg_program *aj_compile(tu_graph *x, const ir_module *m,
				     const cg_program_options *po)
{
	cg_program *p = cg_program_create(&x->ctx, m, NULL, po);
	ck_assert_msg(p != NULL, "lowering failed: %s", tu_graph_diag(x));
	ck_assert_msg(cg_program_jit(p), "jit failed: %s", tu_graph_diag(x));
	return p;
}

/* Runs function fn of p (compiled from m) on in and params (f32), step
 * 2 of seed (dropout active when is_training), on n_threads. */
static inline void aj_run(const cg_program *p, const ir_module *m,
			  const char *fn, uint64_t seed, bool is_training,
			  int n_threads, const interp_tensor *in,
			  const interp_tensor *params, tu_graph *x, jit_out *r)
{
	const ir_func *f = ir_module_find_func(m, fn);
	attnrt_entry_fn entry = cg_program_entry(p, fn);
	ck_assert(entry != NULL);
	uint32_t np;
	const attnrt_param_info *pi = cg_program_params(p, &np);
	char *pb = aligned_alloc(64, aj_round64(cg_program_params_bytes(p)));
	for (uint32_t i = 0; i < np; i++)
		memcpy(pb + pi[i].offset, params[i].data,
		       (size_t)interp_tensor_numel(&params[i]) * 4);
	r->scratch = cg_program_scratch_bytes(p, fn);
	char *sb = aligned_alloc(64, aj_round64(r->scratch));
	memset(sb, 0xff, aj_round64(r->scratch));
	const void *ins[8];
	void *outs[8];
	for (uint32_t i = 0; i < f->n_inputs; i++)
		ins[i] = in[i].data;
	uint32_t no;
	const attnrt_tensor_info *oi = cg_program_outputs(p, fn, &no);
	r->n = no;
	for (uint32_t o = 0; o < no; o++) {
		int64_t dims[IR_MAX_RANK];
		for (int d = 0; d < oi[o].rank; d++)
			dims[d] = oi[o].dims[d];
		ck_assert(interp_tensor_alloc(&x->ctx, &r->t[o], IR_F32,
					      oi[o].rank, dims));
		outs[o] = r->t[o].data;
	}
	attnrt_run run = {seed, 2, is_training, n_threads};
	ck_assert_int_eq(entry(&run, pb, sb, ins, outs), 0);
	free(pb);
	free(sb);
}

/* Runs function "f" of x (its inputs in, one output, no parameters),
 * compiled into p, through the JIT at 1 and 2 threads (step 3 of seed;
 * the output filled with NaNs first, so that an element left unwritten
 * shows; the two runs the same bits) into out, and through the float32
 * interpreter into ref. */
static inline void aj_run_f_against_interp(tu_graph *x, cg_program *p,
					   const interp_tensor *in, int n_in,
					   uint64_t seed, bool is_training,
					   interp_tensor *out,
					   interp_tensor *ref)
{
	interp_opts o = {.is_training = is_training, .seed = seed, .step = 3};
	ck_assert_msg(interp_run(&x->ctx, x->m, x->f, &o, NULL, in, ref), "%s",
		      tu_graph_diag(x));
	int64_t n = interp_tensor_numel(ref);
	interp_tensor two;
	ck_assert(interp_tensor_alloc(&x->ctx, out, IR_F32, 1, &n));
	ck_assert(interp_tensor_alloc(&x->ctx, &two, IR_F32, 1, &n));
	size_t sb_bytes = cg_program_scratch_bytes(p, "f") + 64;
	char *sb = aligned_alloc(64, (sb_bytes + 63) / 64 * 64);
	const void *ins[8];
	ck_assert_int_le(n_in, 8);
	for (int i = 0; i < n_in; i++)
		ins[i] = in[i].data;
	for (int t = 1; t <= 2; t++) {
		void *outs[1] = {t == 1 ? out->data : two.data};
		memset(outs[0], 0xff, (size_t)n * 4);
		attnrt_run run = {seed, 3, is_training, t};
		ck_assert_int_eq(cg_program_entry(p, "f")(&run, NULL, sb, ins,
							  outs),
				 0);
	}
	ck_assert_msg(memcmp(out->data, two.data, (size_t)n * 4) == 0,
		      "1 and 2 threads differ");
	interp_tensor_fini(&x->ctx, &two);
	free(sb);
}

/* One kind of each element: NaN, +inf, -inf or finite. */
static inline int aj_kind(float x)
{
	return isnan(x) ? 0 : isinf(x) ? (x > 0 ? 1 : 2) : 3;
}

/* out and ref have NaN and infinities (of the same sign) in the same
 * elements, and their finite elements are close (check_close's rule
 * over the finite ones). Returns the number of elements not finite. */
static inline int64_t aj_compare_nonfinite(const interp_tensor *out,
					   const interp_tensor *ref,
					   const char *what)
{
	const float *o = out->data, *r = ref->data;
	double e = 0, mag = 0;
	int64_t n_bad = 0;
	for (int64_t i = 0; i < interp_tensor_numel(ref); i++) {
		ck_assert_msg(aj_kind(o[i]) == aj_kind(r[i]),
			      "%s: element %lld: %g, interpreter %g", what,
			      (long long)i, o[i], r[i]);
		if (aj_kind(r[i]) == 3) {
			e = fmax(e, fabs((double)o[i] - r[i]));
			mag = fmax(mag, fabs((double)r[i]));
		} else {
			n_bad++;
		}
	}
	ck_assert_msg(e <= 2e-5 * (mag + 1e-3),
		      "%s: JIT and interpreter differ by %g (largest %g)", what,
		      e, mag);
	return n_bad;
}

/* Compiles m with options po and runs fn once (aj_compile, aj_run). */
static inline void jit_run_po(tu_graph *x, const ir_module *m, const char *fn,
			      uint64_t seed, bool is_training, int n_threads,
			      const cg_program_options *po,
			      const interp_tensor *in,
			      const interp_tensor *params, jit_out *r)
{
	cg_program *p = aj_compile(x, m, po);
	aj_run(p, m, fn, seed, is_training, n_threads, in, params, x, r);
	cg_program_destroy(p);
}

/* m's loss_grad compiled once (default options) and run on 1 thread
 * into r1 and on 2 into r2. */
static inline void aj_run_1_and_2(tu_graph *x, const ir_module *m, uint64_t seed,
				  bool is_training, const interp_tensor *in,
				  const interp_tensor *params, jit_out *r1,
				  jit_out *r2)
{
	cg_program *p = aj_compile(x, m, NULL);
	aj_run(p, m, "loss_grad", seed, is_training, 1, in, params, x, r1);
	aj_run(p, m, "loss_grad", seed, is_training, 2, in, params, x, r2);
	cg_program_destroy(p);
}

/* jit_run_po with its kernels built for vectors of vw floats (0: the
 * host's widest). */
static inline void jit_run_vw(tu_graph *x, const ir_module *m, const char *fn,
			      uint64_t seed, bool is_training, int n_threads,
			      int vw, const interp_tensor *in,
			      const interp_tensor *params, jit_out *r)
{
	cg_program_options po = {.vector_width = vw};
	jit_run_po(x, m, fn, seed, is_training, n_threads, &po, in, params, r);
}

static inline void jit_out_fini(tu_graph *x, jit_out *r)
{
	for (uint32_t o = 0; o < r->n; o++)
		interp_tensor_fini(&x->ctx, &r->t[o]);
}

/* The outputs of m's loss_grad in the interpreter (caller frees them),
 * at step 2 of seed, in float64 if is_f64. */
static inline interp_tensor *interp_grad_at(tu_graph *x, const ir_module *m,
					    uint64_t seed, bool is_training,
					    const interp_tensor *in,
					    const interp_tensor *params,
					    bool is_f64)
{
	const ir_func *f = ir_module_find_func(m, "loss_grad");
	interp_tensor *out = calloc(f->n_outputs, sizeof *out);
	interp_opts o = {.is_f64 = is_f64,
			 .is_training = is_training,
			 .seed = seed,
			 .step = 2};
	ck_assert_msg(interp_run(&x->ctx, m, f, &o, params, in, out), "%s",
		      tu_graph_diag(x));
	return out;
}

/* The JIT's fused result agrees with the interpreter's fused kernels:
 * relative to the output's largest value, within float32 summation
 * order differences, plus slack. A sum whose terms cancel (a scalar
 * loss) is much smaller than its terms, and so is its largest value, so
 * its rounding is not: the slack is 4 times the largest error of the
 * unfused float32 program against float64 (unfused, ref), the rounding
 * of this output's own sums. Without unfused, no slack. */
static inline void check_close_to(const interp_tensor *got,
				  const interp_tensor *want,
				  const interp_tensor *unfused,
				  const interp_tensor *ref, const char *what)
{
	double e, mag, slack = 0, ref_mag;
	ac_errors(got, want, &e, &mag);
	if (unfused)
		ac_errors(unfused, ref, &slack, &ref_mag);
	ck_assert_msg(e <= 2e-5 * (mag + 1e-3) + 4 * slack,
		      "%s: JIT and interpreter differ "
		      "by %g (largest %g, float32 rounding %g)",
		      what, e, mag, slack);
}

static inline void check_close(const interp_tensor *got,
			       const interp_tensor *want, const char *what)
{
	check_close_to(got, want, NULL, NULL, what);
}

#endif
