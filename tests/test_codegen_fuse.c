/*
 * test_codegen_fuse.c - the generated fused attention kernels (forward
 * and gradient) on random shapes: odd sizes, Q != K, head widths from 2
 * to 128, more query rows and keys than one block holds, valid lengths
 * 0, partial, full and past K, per batch and per query, dropout off and
 * on in training. Each case runs loss_grad through the JIT fused and
 * unfused; the fused results must be as close to the float64
 * interpreter as the error-ratio rule asks, and agree with the
 * interpreter's fused kernels (same dropout masks, bit for bit). Also:
 * one thread or two give the same results, and the fused program needs
 * less scratch than the unfused one. Multi-head cases also run with the
 * heads read in place and split by copies: the results are the same bit
 * for bit.
 */
#include "attn_cases.h"
#include "attn_jit.h"
#include "cg_gemm.h"
#include "testutil.h"

#include <check.h>

static void jit_run(tu_graph *x, const ir_module *m, const char *fn,
		    const ac_case *c, int n_threads, const interp_tensor *in,
		    const interp_tensor *params, jit_out *r)
{
	jit_run_vw(x, m, fn, c->seed, c->is_training, n_threads, 0, in, params,
		   r);
}

static interp_tensor *interp_grad(tu_graph *x, const ir_module *m,
				  const ac_case *c, const interp_tensor *in,
				  const interp_tensor *params, bool is_f64)
{
	return interp_grad_at(x, m, c->seed, c->is_training, in, params, is_f64);
}

/* The kernels reading heads in place give what they give on split
 * copies (fuse_heads off), bit for bit. */
static void check_same_as_split(tu_graph *x, const ac_case *c,
				const interp_tensor *in,
				const interp_tensor *params, const jit_out *f1)
{
	ir_module *ms = ac_compile(&x->ctx, c, AC_FUSED_SPLIT);
	jit_out s = {0};
	jit_run(x, ms, "loss_grad", c, 1, in, params, &s);
	ck_assert_uint_eq(s.n, f1->n);
	for (uint32_t o = 0; o < s.n; o++) {
		int64_t n = interp_tensor_numel(&s.t[o]);
		ck_assert_msg(memcmp(s.t[o].data, f1->t[o].data,
				     (size_t)n * 4) == 0,
			      "output %u: heads in place differ from split heads",
			      o);
	}
	jit_out_fini(x, &s);
	ir_module_destroy(ms);
}

static void check_case(const ac_case *c)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	ir_module *mu = ac_compile(&x.ctx, c, AC_UNFUSED);
	ir_module *mf = ac_compile(&x.ctx, c, AC_FUSED);
	interp_tensor in[AJ_MAX_TENSORS], params[AJ_MAX_TENSORS];
	uint32_t n_in = ac_inputs(&x.ctx, c, in);
	aj_params_init(&x, mu, c->seed, params);
	interp_tensor *ref = interp_grad(&x, mu, c, in, params, true);
	interp_tensor *fi = interp_grad(&x, mf, c, in, params, false);
	jit_out u = {0}, f1 = {0}, f2 = {0}, fw = {0}, fc = {0};
	jit_run(&x, mu, "loss_grad", c, 1, in, params, &u);
	aj_run_1_and_2(&x, mf, c->seed, c->is_training, in, params, &f1, &f2);
	/* the other vector width's kernels (AVX2's on an AVX-512 host) */
	int other = cg_gemm_host_vector_width() == 16 ? 8 : 16;
	jit_run_vw(&x, mf, "loss_grad", c->seed, c->is_training, 1, other, in,
		   params, &fw);
	/* code for an AVX2 CPU without AVX-512 (--mcpu x86-64-v3) */
	cg_program_options v3 = {.cpu = "x86-64-v3"};
	jit_run_po(&x, mf, "loss_grad", c->seed, c->is_training, 1, &v3, in,
		   params, &fc);
	const ir_func *f = ir_module_find_func(mu, "loss_grad");
	for (uint32_t o = 0; o < f->n_outputs; o++) {
		const char *name = f->output_names[o];
		ac_check_ratio(&f1.t[o], &u.t[o], &ref[o], name);
		ac_check_ratio(&fw.t[o], &u.t[o], &ref[o], name);
		check_close_to(&f1.t[o], &fi[o], &u.t[o], &ref[o], name);
		check_close_to(&fw.t[o], &fi[o], &u.t[o], &ref[o], name);
		check_close_to(&fc.t[o], &fi[o], &u.t[o], &ref[o], name);
		int64_t n = interp_tensor_numel(&f1.t[o]);
		ck_assert_msg(memcmp(f1.t[o].data, f2.t[o].data,
				     (size_t)n * 4) == 0,
			      "%s: 1 and 2 threads differ", name);
		interp_tensor_fini(&x.ctx, &ref[o]);
		interp_tensor_fini(&x.ctx, &fi[o]);
	}
	if (c->H > 0)
		check_same_as_split(&x, c, in, params, &f1);
	free(ref);
	free(fi);
	jit_out_fini(&x, &u);
	jit_out_fini(&x, &f1);
	jit_out_fini(&x, &f2);
	jit_out_fini(&x, &fw);
	jit_out_fini(&x, &fc);
	aj_tensors_fini(&x, in, n_in);
	aj_tensors_fini(&x, params, mu->n_params);
	ir_module_destroy(mu);
	ir_module_destroy(mf);
	tu_graph_fini(&x);
}

static const ac_case jit_cases[] = {
	/* N, Q, K, d, dv, valid, p, training, seed */
	{2, 3, 5, 2, 3, AC_BATCH, 0, false, 21, 0},
	{3, 7, 4, 5, 7, AC_QUERY, 0, false, 22, 0},
	{2, 1, 9, 16, 1, AC_NONE, 0, false, 23, 0},
	{1, 4, 4, 128, 64, AC_BATCH, 0, false, 24, 0},
	{2, 5, 3, 33, 17, AC_QUERY, 0.5, true, 25, 0},
	{2, 70, 150, 64, 64, AC_QUERY, 0, false, 26, 0},
	{3, 65, 67, 8, 8, AC_BATCH, 0.1, true, 27, 0},
	{1, 130, 9, 31, 47, AC_QUERY, 0.2, true, 28, 0},
	{2, 9, 200, 128, 3, AC_BATCH, 0, false, 29, 0},
	{5, 10, 10, 8, 8, AC_QUERY, 0.1, false, 30, 0},
	{2, 33, 129, 2, 128, AC_NONE, 0.3, true, 31, 0},
	{4, 17, 1, 12, 5, AC_QUERY, 0, false, 32, 0},
};

START_TEST(test_fused_kernels_match_the_unfused_graph_by_the_error_ratio)
{
	check_case(&jit_cases[_i]);
}
END_TEST

/* Multi-head attention, heads read in place: B, Q, K, d, dv (per
 * head), valid, p, training, seed, H. More rows and keys than a block,
 * head widths 2 to 64, the Transformer's shape (10 steps, 4 heads of 8). */
static const ac_case heads_cases[] = {
	{2, 3, 5, 2, 3, AC_BATCH, 0, false, 61, 2},
	{3, 7, 4, 5, 7, AC_QUERY, 0.5, true, 62, 3},
	{2, 70, 150, 64, 64, AC_QUERY, 0, false, 63, 2},
	{3, 65, 67, 8, 8, AC_BATCH, 0.1, true, 64, 4},
	{1, 130, 9, 31, 47, AC_QUERY, 0.2, true, 65, 3},
	{2, 9, 200, 16, 3, AC_NONE, 0.3, true, 66, 5},
	{4, 17, 1, 12, 5, AC_QUERY, 0, false, 67, 2},
	{5, 10, 10, 8, 8, AC_QUERY, 0.1, true, 68, 4},
	{3, 10, 10, 8, 8, AC_BATCH, 0.1, false, 69, 4},
};

START_TEST(test_fused_kernels_reading_heads_in_place_match_the_unfused_graph_and_the_split_form)
{
	check_case(&heads_cases[_i]);
}
END_TEST

/* Both sides of the boundary between the small kernels (at most 16
 * keys, head widths up to 64, cg_lower_attn_small.c) and the blocked
 * ones: K = 16 against 17 with 4 heads, per-query lengths and dropout in
 * training; d = 64 against 65; more query rows than a vector holds (40,
 * 33: a partial last block); one query row; no mask with 3 heads. */
static const ac_case small_cases[] = {
	{2, 16, 16, 8, 8, AC_QUERY, 0.2, true, 81, 4},
	{2, 16, 17, 8, 8, AC_QUERY, 0.2, true, 82, 4},
	{3, 40, 16, 64, 64, AC_BATCH, 0.1, true, 83, 2},
	{2, 12, 10, 65, 3, AC_BATCH, 0, false, 84, 0},
	{3, 1, 7, 3, 9, AC_QUERY, 0.3, true, 85, 0},
	{2, 33, 5, 8, 64, AC_NONE, 0.1, true, 86, 3},
};

START_TEST(test_small_and_blocked_kernels_on_both_sides_of_their_boundary_match_the_unfused_graph)
{
	check_case(&small_cases[_i]);
}
END_TEST

/* The small backward's row vectors (dq, dk, dv) are 8 floats wide where
 * heads are at most 8 wide, else the kernel's vector width: heads of 1,
 * 7 and 8 (partial and whole 8-wide rows), 9 with 8 (both rows in
 * vw-wide vectors), 16 and 17 (one and two vectors of 16, two and three
 * of 8); 1, 10, 16 and 17 queries (a second, partial block of rows) and
 * 1, 10 and 16 keys; lengths per batch, per query (0, 1 .. K, past K) and
 * causal, with dropout in training. */
static const ac_case row_cases[] = {
	{2, 10, 10, 1, 1, AC_QUERY, 0.1, true, 101, 4},
	{2, 10, 10, 7, 7, AC_BATCH, 0.1, true, 102, 3},
	{3, 16, 16, 9, 8, AC_QUERY, 0.2, true, 103, 2},
	{2, 17, 1, 16, 16, AC_BATCH, 0, false, 104, 2},
	{2, 1, 16, 17, 17, AC_QUERY, 0.1, true, 105, 2},
	{2, 10, 10, 8, 8, AC_CAUSAL, 0.1, true, 106, 4},
};

START_TEST(test_small_backward_rows_of_any_width_match_the_unfused_graph)
{
	check_case(&row_cases[_i]);
}
END_TEST

/* The small forward sums its output a row at a time over every key,
 * the weights of the keys a block skips 0: odd numbers of blocks, valid
 * lengths per batch and per query without heads (0 and past K: blocks
 * that visit every key beside blocks that skip), two blocks of rows per
 * attention (20 and 17 queries), causal, value rows of 6, 8 and 3
 * floats (partial vectors of 8), with and without dropout; one and two
 * blocks in all (the pipelined loop's first and last iterations, a
 * thread with one block or none at 2 threads). */
static const ac_case rows_cases[] = {
	{3, 10, 10, 8, 8, AC_QUERY, 0.1, true, 111, 0},
	{5, 10, 7, 4, 6, AC_BATCH, 0.2, true, 112, 0},
	{3, 20, 9, 8, 8, AC_CAUSAL, 0.1, true, 113, 3},
	{7, 3, 12, 8, 8, AC_BATCH, 0, false, 114, 0},
	{5, 17, 16, 16, 3, AC_QUERY, 0.3, true, 115, 0},
	{1, 10, 10, 8, 8, AC_BATCH, 0.1, true, 116, 0},
	{2, 10, 10, 8, 8, AC_QUERY, 0.1, true, 117, 0},
};

START_TEST(test_small_forward_by_rows_matches_the_unfused_graph)
{
	check_case(&rows_cases[_i]);
}
END_TEST

/* The LLVM IR of a case's fused program (free it). */
static char *program_ir(const ac_case *c)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	ir_module *m = ac_compile(&x.ctx, c, AC_FUSED);
	cg_program *p = cg_program_create(&x.ctx, m, NULL, NULL);
	ck_assert(p != NULL);
	char *ir = NULL;
	size_t len = 0;
	ck_assert(cg_program_emit_buffer(p, CG_EMIT_LLVM, &ir, &len));
	cg_program_destroy(p);
	ir_module_destroy(m);
	tu_graph_fini(&x);
	return ir;
}

/* The names of the kernel bodies a case's program defines, read from
 * its LLVM IR: "attn.sfwd." for the small forward, and so on. */
static bool has_body(const char *ir, const char *kind)
{
	char name[32];
	snprintf(name, sizeof name, "@\"attn.%s.", kind);
	return strstr(ir, name) != NULL;
}

/* Whether the case's blocked body of kind ("fwd", "bwd") keeps its
 * rows in a cache (its name ends in ".cached"): the backward's pass 1,
 * the forward's scores over all keys. */
static bool is_cached(const ac_case *c, const char *kind)
{
	char *ir = program_ir(c);
	char name[32];
	snprintf(name, sizeof name, "@\"attn.%s.", kind);
	const char *at = strstr(ir, name);
	ck_assert(at != NULL);
	const char *end = strchr(at + 2, '"');
	ck_assert(end != NULL);
	bool is_cached = end - at > 8 && strncmp(end - 7, ".cached", 7) == 0;
	free(ir);
	return is_cached;
}

/* The backward's cache of pass 1 (cg_lower_attn_grad.c) at both vector
 * widths: K = 1100 keeps blocks of 64 query rows (and a partial one of
 * 6) with dropout in training, its cache past CG_ATTN_STACK_CACHE on the
 * heap; K = 600 with 2 heads and per-query lengths, all 40 rows in one
 * block on the stack; K = 16500 with 20 query rows would cache fewer
 * than 16, so pass 2 recomputes S and dP. Causal masks (query t sees
 * keys 0 .. t), where the products stop at the keys each tile of rows
 * needs: 130 queries (blocks of 32 and a partial one) with dropout in
 * training, 4 heads of 32, with and without the cache (K = 4500 cached
 * on the heap). Heads of 128 (d + dv = 256): 40 rows of 2100 keys
 * cached on the heap. Causal with 8300 keys and dropout in training:
 * the forward's online softmax (its rows of scores do not fit its
 * cache), the backward cached. */
static const ac_case cache_cases[] = {
	{1, 70, 1100, 16, 16, AC_QUERY, 0.1, true, 91, 0},
	{2, 40, 600, 8, 8, AC_QUERY, 0, false, 92, 2},
	{1, 20, 16500, 4, 4, AC_BATCH, 0, false, 93, 0},
	{2, 130, 130, 32, 32, AC_CAUSAL, 0.1, true, 94, 0},
	{2, 100, 100, 32, 32, AC_CAUSAL, 0, false, 95, 4},
	{1, 20, 4500, 4, 4, AC_CAUSAL, 0, false, 96, 0},
	{1, 40, 2100, 128, 128, AC_BATCH, 0, false, 97, 0},
	{1, 40, 8300, 16, 16, AC_CAUSAL, 0.1, true, 99, 0},
};

/* Heads of 128 with 8300 keys: 31 rows would fit, fewer than the 32
 * such heads need, so no cache (the path itself is cache_cases[2]'s). */
static const ac_case wide_uncached = {1,        40, 8300,  128, 128,
				      AC_BATCH, 0,  false, 98,  0};

START_TEST(test_the_backward_with_and_without_its_cache_matches_the_unfused_graph)
{
	check_case(&cache_cases[_i]);
}
END_TEST

START_TEST(test_the_backward_caches_pass_1_where_enough_query_rows_fit)
{
	ck_assert(is_cached(&cache_cases[0], "bwd"));
	ck_assert(is_cached(&cache_cases[1], "bwd"));
	ck_assert(!is_cached(&cache_cases[2], "bwd"));
	ck_assert(is_cached(&cache_cases[3], "bwd"));
	ck_assert(is_cached(&cache_cases[5], "bwd"));
	ck_assert(is_cached(&cache_cases[6], "bwd"));
	ck_assert(!is_cached(&wide_uncached, "bwd"));
	ck_assert(is_cached(&jit_cases[5], "bwd")); /* Q = 70, K = 150 */
}
END_TEST

/* The forward keeps a block's rows of scores over all keys where they
 * fit CG_ATTN_STACK_CACHE (cg_lower_attn.c), else runs the online
 * softmax: 64 rows of 1100 keys and 40 of 2100 cached, 20 rows of 16500
 * keys and 40 of 8300 not; causal, 32 rows of 130 keys and 20 of 4500
 * cached, 32 of 8300 not.
 * Both paths' numerics: cache_cases. */
START_TEST(test_the_forward_caches_a_block_s_scores_where_its_rows_fit)
{
	ck_assert(is_cached(&cache_cases[0], "fwd"));
	ck_assert(is_cached(&cache_cases[6], "fwd"));
	ck_assert(!is_cached(&cache_cases[2], "fwd"));
	ck_assert(!is_cached(&wide_uncached, "fwd"));
	ck_assert(is_cached(&cache_cases[3], "fwd"));
	ck_assert(is_cached(&cache_cases[5], "fwd"));
	ck_assert(!is_cached(&cache_cases[7], "fwd"));
	ck_assert(is_cached(&cache_cases[7], "bwd"));
}
END_TEST

/* Keys packed once per attention and kept for its query blocks
 * (cg_attn_keys): one kernel call runs several attentions (6 of 2
 * heads on 1 thread, split differently over 2), each packing its own
 * keys again; the packed keys on the heap (700 keys of 64, 176 KiB),
 * causal, dropout in training; on the stack (150 keys of 16, per-batch
 * lengths, 130 queries: three query blocks reuse them). Key counts are
 * not multiples of the block. */
static const ac_case keys_cases[] = {
	{3, 70, 700, 64, 64, AC_CAUSAL, 0.1, true, 101, 2},
	{4, 130, 150, 16, 16, AC_BATCH, 0, false, 102, 0},
};

START_TEST(test_keys_packed_once_per_attention_serve_all_its_query_blocks)
{
	check_case(&keys_cases[_i]);
}
END_TEST

/* Key counts that are whole blocks of 64 (cg_attn_scores then leaves
 * out the check of keys past K) over several blocks, so that the row
 * maxima both move and stay put between blocks (an online softmax
 * skips its rescaling where they stay): per-query
 * lengths with dropout in training, the backward cached; 2 heads in
 * place, causal; heads of 128; no mask. */
static const ac_case whole_block_cases[] = {
	{2, 70, 256, 32, 32, AC_QUERY, 0.1, true, 111, 0},
	{2, 65, 128, 64, 64, AC_CAUSAL, 0, false, 112, 2},
	{1, 40, 192, 128, 128, AC_BATCH, 0, false, 113, 0},
	{2, 20, 128, 16, 16, AC_NONE, 0, false, 114, 0},
};

START_TEST(test_key_counts_of_whole_blocks_match_the_unfused_graph)
{
	check_case(&whole_block_cases[_i]);
}
END_TEST

/* Valid lengths where the scores and dP of a tile of rows stop at the
 * vectors of keys its rows need (cg_attn_prod's cols): causal masks at
 * lengths on both sides of the blocks (32 rows of heads of 32, 64 of
 * wider ones) and of the vectors inside them, heads of 32, 64 and 128,
 * in place or not, with dropout in training; per-query lengths (0,
 * past K, K or between: the rows of length 0 need every key's dP) and
 * per-batch lengths, where whole tiles of keys are past every row's
 * length. */
static const ac_case triangle_cases[] = {
	{2, 31, 31, 32, 32, AC_CAUSAL, 0, false, 121, 2},
	{1, 33, 33, 32, 32, AC_CAUSAL, 0.1, true, 122, 0},
	{1, 63, 63, 64, 64, AC_CAUSAL, 0, false, 123, 0},
	{2, 65, 65, 64, 64, AC_QUERY, 0.1, true, 124, 0},
	{1, 129, 129, 128, 128, AC_CAUSAL, 0, false, 125, 0},
	{1, 97, 97, 128, 64, AC_QUERY, 0, false, 126, 2},
	{2, 47, 80, 64, 64, AC_BATCH, 0, false, 127, 0},
};

START_TEST(test_products_stopping_at_the_keys_rows_need_match_the_unfused_graph)
{
	check_case(&triangle_cases[_i]);
}
END_TEST

/* The query rows of the forward's blocks, from its body's name
 * (attn.fwd.VW.BR...). */
static long fwd_block_rows(const ac_case *c)
{
	char *ir = program_ir(c);
	const char *at = strstr(ir, "@\"attn.fwd.");
	ck_assert(at != NULL);
	at = strchr(at + strlen("@\"attn.fwd."), '.');
	ck_assert(at != NULL);
	long rows = strtol(at + 1, NULL, 10);
	free(ir);
	return rows;
}

/* Valid lengths per query (a causal mask) and heads up to 32 wide take
 * blocks of 32 query rows and 32 keys (cg_attn.c, choose_blocks): a
 * block's products stop at the keys its last row needs, so smaller
 * blocks leave out more of the masked half. Wider heads, and lengths
 * per batch element, keep blocks of 64 rows. The numerics of these
 * shapes: cache_cases (causal, 32 wide, 4 heads of 32 in place) and
 * whole_block_cases[0] (per-query lengths, 32 wide, dropout). */
START_TEST(test_causal_masks_with_narrow_heads_take_blocks_of_32_rows)
{
	ck_assert_int_eq(fwd_block_rows(&cache_cases[3]), 32);
	ck_assert_int_eq(fwd_block_rows(&cache_cases[4]), 32);
	ck_assert_int_eq(fwd_block_rows(&whole_block_cases[0]), 32);
	ck_assert_int_eq(fwd_block_rows(&jit_cases[5]), 64);  /* 64 wide */
	ck_assert_int_eq(fwd_block_rows(&keys_cases[1]), 64); /* per batch */
}
END_TEST

START_TEST(test_the_small_kernels_serve_at_most_16_keys_and_heads_up_to_64_wide)
{
	/* small_cases: K = 16 and d = 64 small, K = 17 and d = 65 blocked */
	static const bool is_small[] = {true, false, true, false, true, true};
	for (size_t i = 0; i < sizeof is_small / sizeof is_small[0]; i++) {
		char *ir = program_ir(&small_cases[i]);
		ck_assert_msg(has_body(ir, "sfwd") == is_small[i], "case %zu",
			      i);
		ck_assert_msg(has_body(ir, "sbwd") == is_small[i], "case %zu",
			      i);
		ck_assert_msg(has_body(ir, "fwd") == !is_small[i], "case %zu",
			      i);
		ck_assert_msg(has_body(ir, "bwd") == !is_small[i], "case %zu",
			      i);
		free(ir);
	}
}
END_TEST

/* Runs fwd(valid, q, k, v) = merged heads of masked_softmax(q k^T /
 * sqrt(d), valid) v, fused with the heads in place, on B = 2 batch
 * elements whose valid lengths are 0 and 3; checks each output row
 * against a float64 reference: the mean of the values for length 0,
 * the weighted mean of the first 3 for the other. With is_near (d = 1)
 * key j scores -1e6 + gap + j, exactly: with gap 0 the keys past the
 * valid length, at the fill -1e6, still weigh e^-2 against the largest
 * valid one, and a kernel that skipped them would be far off; with gap
 * 60 the kernels visit no key block past the valid lengths (the row's
 * maximum is more than CG_ATTN_FILL_MARGIN above the fill), but the
 * masked keys of the blocks they visit still weigh e^-62, not exactly
 * 0, and count. */
static void check_valid_at(int Q, int K, int d, int h, bool is_near, int gap)
{
	enum { B = 2 };
	char src[1024];
	snprintf(src, sizeof src,
		 "model z\n"
		 "export def fwd(valid: i32[%d], q: f32[%d, %d, %d], k: f32[%d, %d, %d], "
		 "v: f32[%d, %d, %d])\n"
		 "  return merge_heads(masked_softmax(split_heads(q, %d) @ "
		 "split_heads(k, %d).T / sqrt(%d), repeat_interleave(valid, %d, 0)) @ "
		 "split_heads(v, %d), %d)\n",
		 B, B, Q, h * d, B, K, h * d, B, K, h * d, h, h, d, h, h, h);
	tu_graph x;
	tu_graph_init_ctx(&x);
	uint32_t file = ir_ctx_add_source(&x.ctx, "z.g", src, strlen(src));
	ir_module *m = fe_compile(&x.ctx, file);
	pass_options po = {.verify_each = true};
	ck_assert(m && pass_pipeline_run(m, &po));
	ck_assert_uint_eq(ac_count(m, "fwd", IR_OP_FUSED_ATTENTION), 1);
	ac_expect_heads(m, "fwd", (uint32_t)h);
	cg_program *p = cg_program_create(&x.ctx, m, NULL, NULL);
	ck_assert(p && cg_program_jit(p));
	int w = h * d;
	float *q = malloc(sizeof(float) * B * Q * w),
	      *k = malloc(sizeof(float) * B * K * w);
	float *v = malloc(sizeof(float) * B * K * w),
	      *o = malloc(sizeof(float) * B * Q * w);
	uint64_t s = 7;
	for (int i = 0; i < B * Q * w; i++)
		q[i] = is_near ? 64 : (float)(ac_next(&s) % 2001) / 500.0f - 2;
	for (int i = 0; i < B * K * w; i++) {
		k[i] = (float)(ac_next(&s) % 2001) / 500.0f - 2;
		v[i] = (float)(ac_next(&s) % 2001) / 1000.0f - 1;
		if (is_near)
			k[i] = -15625.0f + (float)(gap + i / w % K) / 64;
	}
	int32_t valid[B] = {0, 3};
	char *scratch = aligned_alloc(64, (cg_program_scratch_bytes(p, "fwd") +
					   127) / 64 *
						  64);
	const void *ins[4] = {valid, q, k, v};
	void *outs[1] = {o};
	attnrt_run run = {1, 0, 0, 1};
	ck_assert_int_eq(cg_program_entry(p, "fwd")(&run, NULL, scratch, ins,
						    outs),
			 0);
	for (int b = 0; b < B; b++)
		for (int t = 0; t < Q; t++)
			for (int j = 0; j < h; j++) {
				double e[64], l = 0, mx = -1e300;
				for (int kk = 0; kk < K; kk++) {
					double dot = 0;
					for (int c = 0; c < d; c++)
						dot += (double)q[(b * Q + t) * w +
								 j * d + c] *
						       k[(b * K + kk) * w +
							 j * d + c];
					e[kk] = kk < valid[b]
							? dot / sqrt((double)d)
							: -1e6;
					mx = fmax(mx, e[kk]);
				}
				for (int kk = 0; kk < K; kk++)
					l += e[kk] = exp(e[kk] - mx);
				for (int c = 0; c < d; c++) {
					double want = 0;
					for (int kk = 0; kk < K; kk++)
						want += e[kk] / l *
							v[(b * K + kk) * w +
							  j * d + c];
					double got = o[(b * Q + t) * w + j * d + c];
					ck_assert_msg(fabs(got - want) < 1e-5,
						      "b %d t %d head %d c %d: "
						      "%g, want %g",
						      b, t, j, c, got, want);
				}
			}
	free(scratch);
	free(q);
	free(k);
	free(v);
	free(o);
	cg_program_destroy(p);
	ir_module_destroy(m);
	tu_graph_fini(&x);
}

/* check_valid_at with the keys' scores at -1e6 + j when is_near. */
static void check_valid(int Q, int K, int d, int h, bool is_near)
{
	check_valid_at(Q, K, d, h, is_near, 0);
}

START_TEST(test_rows_of_valid_length_0_average_the_values_in_both_kernels)
{
	check_valid(10, 10, 8, 4, false); /* small: the Transformer's shape */
	/* one head: a block that visits every key (length 0), then one
	 * that skips */
	check_valid(10, 10, 8, 1, false);
	check_valid(20, 40, 8, 2, false); /* blocked */
}
END_TEST

START_TEST(test_rows_whose_scores_are_near_the_fill_see_their_masked_keys_in_both_kernels)
{
	check_valid(10, 6, 1, 2, true);
	check_valid(10, 6, 1, 1, true); /* after a block of length 0 */
	check_valid(20, 40, 1, 2, true);
	check_valid_at(20, 40, 1, 2, true, 60);
}
END_TEST

/* The fused forward and backward of a long sequence need no Q x K
 * buffer: far less scratch than the unfused graph. */
START_TEST(test_fused_forward_needs_no_weights_buffer)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	ac_case c = {2, 256, 1024, 16, 16, AC_BATCH, 0, false, 40, 0};
	ir_module *mu = ac_compile(&x.ctx, &c, AC_UNFUSED);
	ir_module *mf = ac_compile(&x.ctx, &c, AC_FUSED);
	cg_program *pu = cg_program_create(&x.ctx, mu, NULL, NULL);
	cg_program *pf = cg_program_create(&x.ctx, mf, NULL, NULL);
	ck_assert(pu && pf);
	size_t weights = (size_t)c.N * c.Q * c.K * 4;
	ck_assert_uint_ge(cg_program_scratch_bytes(pu, "loss"), weights);
	ck_assert_uint_lt(cg_program_scratch_bytes(pf, "loss"), weights / 16);
	ck_assert_uint_ge(cg_program_scratch_bytes(pu, "loss_grad"), weights);
	/* the packed gradient and its three slices, linear in K */
	ck_assert_uint_lt(cg_program_scratch_bytes(pf, "loss_grad"),
			  weights / 2);
	cg_program_destroy(pu);
	cg_program_destroy(pf);
	ir_module_destroy(mu);
	ir_module_destroy(mf);
	tu_graph_fini(&x);
}
END_TEST

/* Dropout in an evaluation run is the identity: the fused kernel then
 * gives the same as without dropout. */
START_TEST(test_fused_dropout_is_off_outside_training)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	ac_case on = {2, 6, 7, 4, 4, AC_BATCH, 0.5, false, 41, 0};
	ac_case off = on;
	off.p = 0;
	ir_module *mon = ac_compile(&x.ctx, &on, AC_FUSED);
	ir_module *moff = ac_compile(&x.ctx, &off, AC_FUSED);
	interp_tensor in[AJ_MAX_TENSORS], params[AJ_MAX_TENSORS];
	uint32_t n_in = ac_inputs(&x.ctx, &on, in);
	aj_params_init(&x, mon, 1, params);
	jit_out a = {0}, b = {0};
	jit_run(&x, mon, "loss", &on, 1, in, params, &a);
	jit_run(&x, moff, "loss", &off, 1, in, params, &b);
	ck_assert_float_eq(((float *)a.t[0].data)[0], ((float *)b.t[0].data)[0]);
	jit_out_fini(&x, &a);
	jit_out_fini(&x, &b);
	aj_tensors_fini(&x, in, n_in);
	aj_tensors_fini(&x, params, mon->n_params);
	ir_module_destroy(mon);
	ir_module_destroy(moff);
	tu_graph_fini(&x);
}
END_TEST

static Suite *fuse_suite(void)
{
	Suite *s = suite_create("codegen_fuse");
	TCase *tc = tcase_create("kernels");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(
		tc,
		test_fused_kernels_match_the_unfused_graph_by_the_error_ratio,
		0, (int)(sizeof jit_cases / sizeof jit_cases[0]));
	tcase_add_loop_test(
		tc,
		test_fused_kernels_reading_heads_in_place_match_the_unfused_graph_and_the_split_form,
		0, (int)(sizeof heads_cases / sizeof heads_cases[0]));
	tcase_add_loop_test(
		tc,
		test_small_and_blocked_kernels_on_both_sides_of_their_boundary_match_the_unfused_graph,
		0, (int)(sizeof small_cases / sizeof small_cases[0]));
	tcase_add_loop_test(
		tc,
		test_small_backward_rows_of_any_width_match_the_unfused_graph,
		0, (int)(sizeof row_cases / sizeof row_cases[0]));
	tcase_add_test(
		tc,
		test_the_small_kernels_serve_at_most_16_keys_and_heads_up_to_64_wide);
	tcase_add_loop_test(
		tc,
		test_the_backward_with_and_without_its_cache_matches_the_unfused_graph,
		0, (int)(sizeof cache_cases / sizeof cache_cases[0]));
	tcase_add_test(tc,
		       test_the_backward_caches_pass_1_where_enough_query_rows_fit);
	tcase_add_test(
		tc,
		test_rows_of_valid_length_0_average_the_values_in_both_kernels);
	tcase_add_test(
		tc,
		test_rows_whose_scores_are_near_the_fill_see_their_masked_keys_in_both_kernels);
	tcase_add_test(tc, test_fused_forward_needs_no_weights_buffer);
	tcase_add_test(tc,
		       test_the_forward_caches_a_block_s_scores_where_its_rows_fit);
	tcase_add_test(tc, test_fused_dropout_is_off_outside_training);
	suite_add_tcase(s, tc);
	TCase *tk = tcase_create("packed_keys");
	tcase_set_timeout(tk, 300);
	tcase_add_loop_test(
		tk,
		test_keys_packed_once_per_attention_serve_all_its_query_blocks,
		0, (int)(sizeof keys_cases / sizeof keys_cases[0]));
	tcase_add_loop_test(
		tk, test_key_counts_of_whole_blocks_match_the_unfused_graph, 0,
		(int)(sizeof whole_block_cases / sizeof whole_block_cases[0]));
	tcase_add_test(tk,
		       test_causal_masks_with_narrow_heads_take_blocks_of_32_rows);
	tcase_add_loop_test(
		tk,
		test_products_stopping_at_the_keys_rows_need_match_the_unfused_graph,
		0, (int)(sizeof triangle_cases / sizeof triangle_cases[0]));
	suite_add_tcase(s, tk);
	TCase *tp = tcase_create("small_rows");
	tcase_set_timeout(tp, 300);
	tcase_add_loop_test(tp,
			    test_small_forward_by_rows_matches_the_unfused_graph,
			    0, (int)(sizeof rows_cases / sizeof rows_cases[0]));
	suite_add_tcase(s, tp);
	return s;
}

int main(void)
{
	return tu_run_suite(fuse_suite());
}
