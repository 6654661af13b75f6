/*
 * test_codegen.c - the generated sgemm against a naive triple loop
 * accumulating in double, on odd shapes, transposed operands, leading
 * dimensions and beta = 1, with every packing choice; that results do not
 * depend on the thread count; that the micro-kernel comes out as FMA on
 * <8 x float>; the plan's choices; and the cg_module life cycle (JIT,
 * object emission, errors).
 *
 * Check forks a child per test and libgomp is not fork-safe once a team
 * exists, so OpenMP threads start only inside test bodies.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cg.h"
#include "cg_gemm.h"
#include "testutil.h"

typedef void (*gemm_fn)(const float *A, const float *B, float *C);

/* Operands of one test case, allocated with their leading dimensions. */
typedef struct gemm_case {
	cg_gemm_spec spec;
	cg_gemm_plan plan;
	float *a, *b, *c;
	size_t n_a, n_b, n_c;
} gemm_case;

static float rand_unit(uint64_t *state)
{
	*state = *state * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((*state >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

static float *rand_matrix(size_t n, uint64_t *state)
{
	float *x = malloc(n * sizeof *x);
	ck_assert_ptr_nonnull(x);
	for (size_t i = 0; i < n; i++)
		x[i] = rand_unit(state);
	return x;
}

/* Floats spanned by `batch` matrices of `one` floats, `stride` apart. */
static size_t span(const gemm_case *t, int64_t one, int64_t stride)
{
	return (size_t)(one + (t->plan.batch - 1) * stride);
}

static void case_init(gemm_case *t, cg_gemm_spec spec, uint64_t seed)
{
	char err[256];
	memset(t, 0, sizeof *t);
	t->spec = spec;
	ck_assert_msg(cg_gemm_plan_make(&spec, &t->plan, err, sizeof err), "%s",
		      err);
	t->n_a = span(t, (spec.ta ? spec.k : spec.m) * t->plan.lda,
		      spec.stride_a);
	t->n_b = span(t, (spec.tb ? spec.n : spec.k) * t->plan.ldb,
		      spec.stride_b);
	t->n_c = span(t, spec.m * t->plan.ldc, spec.stride_c);
	t->a = rand_matrix(t->n_a, &seed);
	t->b = rand_matrix(t->n_b, &seed);
	t->c = rand_matrix(t->n_c, &seed);
}

static void case_fini(gemm_case *t)
{
	free(t->a);
	free(t->b);
	free(t->c);
}

static double a_at(const gemm_case *t, int64_t item, int64_t i, int64_t p)
{
	const float *a = t->a +
			 (t->plan.batch > 1 ? item * t->spec.stride_a : 0);
	return t->spec.ta ? a[p * t->plan.lda + i] : a[i * t->plan.lda + p];
}

static double b_at(const gemm_case *t, int64_t item, int64_t p, int64_t j)
{
	const float *b = t->b +
			 (t->plan.batch > 1 ? item * t->spec.stride_b : 0);
	return t->spec.tb ? b[j * t->plan.ldb + p] : b[p * t->plan.ldb + j];
}

/* Largest |got - want| over sum_p |a_ip b_pj| (plus |c| when
 * accumulating) in product `item`: the float rounding error relative to
 * its natural scale. Marks the elements it checked in `seen`. */
static double item_error(const gemm_case *t, int64_t item, const float *got,
			 bool *seen)
{
	const cg_gemm_spec *s = &t->spec;
	size_t base = (size_t)(t->plan.batch > 1 ? item * s->stride_c : 0);
	double worst = 0;
	for (int64_t i = 0; i < s->m; i++) {
		for (int64_t j = 0; j < s->n; j++) {
			size_t at = base + (size_t)(i * t->plan.ldc + j);
			double want = s->accumulate ? t->c[at] : 0.0;
			double scale = fabs(want) + 1e-30;
			for (int64_t p = 0; p < s->k; p++) {
				double ab = a_at(t, item, i, p) *
					    b_at(t, item, p, j);
				want += ab;
				scale += fabs(ab);
			}
			double e = fabs(got[at] - want) / scale;
			worst = isnan(e) ? INFINITY : fmax(worst, e);
			seen[at] = true;
		}
	}
	return worst;
}

/* The largest error over the batch (item_error); also checks that what
 * lies in C around and between the products is untouched. */
static double case_error(const gemm_case *t, const float *got)
{
	bool *seen = calloc(t->n_c, sizeof *seen);
	double worst = 0;
	ck_assert_ptr_nonnull(seen);
	for (int64_t item = 0; item < t->plan.batch; item++)
		worst = fmax(worst, item_error(t, item, got, seen));
	for (size_t at = 0; at < t->n_c; at++)
		if (!seen[at])
			ck_assert_float_eq(got[at], t->c[at]);
	free(seen);
	return worst;
}

/* JIT-compiles the case's spec as `name` in m; fails the test on error. */
static gemm_fn jit_gemm(cg_module *m, const cg_gemm_spec *spec)
{
	ck_assert_ptr_nonnull(m);
	ck_assert_msg(cg_gemm_add(m, "gemm", spec), "%s", cg_module_error(m));
	ck_assert_msg(cg_module_jit(m), "%s", cg_module_error(m));
	gemm_fn fn;
	void *addr = cg_module_lookup(m, "gemm");
	ck_assert_msg(addr != NULL, "%s", cg_module_error(m));
	memcpy(&fn, &addr, sizeof fn);
	return fn;
}

/* One JIT compile of a spec, to run as often as a test likes: each
 * compile costs far more than a run of these sizes. */
typedef struct gemm_jit {
	cg_module *m;
	gemm_fn fn;
} gemm_jit;

static gemm_jit jit_open(const cg_gemm_spec *spec)
{
	gemm_jit j = {.m = cg_module_create("test")};
	j.fn = jit_gemm(j.m, spec);
	return j;
}

static void jit_close(gemm_jit *j)
{
	cg_module_destroy(j->m);
}

/* Runs j on the case's operands on `threads` threads into a copy of C,
 * returned. */
static float *jit_run(const gemm_jit *j, const gemm_case *t, int threads)
{
	float *c = malloc(t->n_c * sizeof *c);
	ck_assert_ptr_nonnull(c);
	memcpy(c, t->c, t->n_c * sizeof *c);
	cg_threads_set(threads);
	j->fn(t->a, t->b, c);
	return c;
}

/* Runs the case on `threads` threads into a copy of C, returned. */
static float *case_run(const gemm_case *t, int threads)
{
	gemm_jit j = jit_open(&t->spec);
	float *c = jit_run(&j, t, threads);
	jit_close(&j);
	return c;
}

/* Runs j (of spec) on 2 threads on operands from seed and checks the
 * product against the naive loop. */
static void check_jit(const gemm_jit *j, cg_gemm_spec spec, uint64_t seed)
{
	gemm_case t;
	case_init(&t, spec, seed);
	float *c = jit_run(j, &t, 2);
	double e = case_error(&t, c);
	ck_assert_msg(e < 1e-5,
		      "%lldx%lldx%lld x%lld ta=%d tb=%d acc=%d pack=%d vw=%d: error %g",
		      (long long)spec.m, (long long)spec.n, (long long)spec.k,
		      (long long)t.plan.batch, spec.ta, spec.tb,
		      spec.accumulate, (int)spec.pack, t.plan.vw, e);
	free(c);
	case_fini(&t);
}

/* A test's sweep of specs, compiled together: one module holding an
 * sgemm a spec (gemm0, gemm1, ...) and one JIT compile, where a compile
 * a spec cost far more than the runs (the micro-kernels the specs share
 * compile once). Each item's spec, operand seed and what its check
 * needs besides. */
typedef struct sweep_item {
	cg_gemm_spec spec;
	uint64_t seed;
	size_t s;          /* sweep_add_zero_rows: the shape's index */
	int64_t keep_step; /* sweep_add_zero_rows: 0 for check_jit */
	int v;
} sweep_item;

enum { SWEEP_MAX = 128 };
typedef struct spec_sweep {
	size_t n;
	sweep_item item[SWEEP_MAX];
} spec_sweep;

static sweep_item *sweep_add(spec_sweep *w, cg_gemm_spec spec, uint64_t seed)
{
	ck_assert_uint_lt(w->n, SWEEP_MAX);
	sweep_item *it = &w->item[w->n++];
	*it = (sweep_item){.spec = spec, .seed = seed};
	return it;
}

static void check_zero_rows_of(const gemm_jit *j, const sweep_item *it);

/* Compiles the sweep's specs in one module and checks each: by
 * check_zero_rows_of where it has a keep_step, else by check_jit. */
static void sweep_check(const spec_sweep *w)
{
	cg_module *m = cg_module_create("sweep");
	ck_assert_ptr_nonnull(m);
	char name[32];
	for (size_t i = 0; i < w->n; i++) {
		snprintf(name, sizeof name, "gemm%zu", i);
		ck_assert_msg(cg_gemm_add(m, name, &w->item[i].spec), "%s",
			      cg_module_error(m));
	}
	ck_assert_msg(cg_module_jit(m), "%s", cg_module_error(m));
	for (size_t i = 0; i < w->n; i++) {
		snprintf(name, sizeof name, "gemm%zu", i);
		gemm_jit j = {.m = m};
		void *addr = cg_module_lookup(m, name);
		ck_assert_msg(addr != NULL, "%s", cg_module_error(m));
		memcpy(&j.fn, &addr, sizeof j.fn);
		const sweep_item *it = &w->item[i];
		if (it->keep_step)
			check_zero_rows_of(&j, it);
		else
			check_jit(&j, it->spec, it->seed);
	}
	cg_module_destroy(m);
}

static cg_gemm_spec shape(int64_t m, int64_t n, int64_t k)
{
	return (cg_gemm_spec){.m = m, .n = n, .k = k};
}

static const int64_t odd_shapes[][3] = {
	{1, 1, 1},      {7, 13, 5},    {6, 16, 1},     {65, 33, 17},
	{640, 32, 200}, {640, 32, 32}, {640, 200, 32}, {10, 10, 8},
	{5, 40, 3},     {12, 32, 600}, {97, 211, 300}, {3, 700, 9},
};
#define N_ODD (sizeof odd_shapes / sizeof odd_shapes[0])

/* ---- numerics -------------------------------------------------------------- */

/* Both micro-kernel widths run on any host with AVX2: LLVM splits
 * <16 x float> where the CPU has no AVX-512. */
static const int widths[] = {8, 16};

START_TEST(test_gemm_matches_naive_loop_on_odd_shapes)
{
	spec_sweep sw = {0};
	for (size_t w = 0; w < 2; w++) {
		for (size_t s = 0; s < N_ODD; s++) {
			const int64_t *d = odd_shapes[s];
			cg_gemm_spec spec = shape(d[0], d[1], d[2]);
			spec.vector_width = widths[w];
			sweep_add(&sw, spec, 1 + s);
		}
	}
	sweep_check(&sw);
}
END_TEST

START_TEST(test_gemm_matches_naive_loop_with_every_packing)
{
	spec_sweep sw = {0};
	static const cg_gemm_pack packs[] = {CG_GEMM_PACK_NONE, CG_GEMM_PACK_B,
					     CG_GEMM_PACK_AB};
	for (size_t p = 0; p < 3; p++) {
		for (size_t s = p % TU_SWEEP_STRIDE; s < N_ODD;
		     s += TU_SWEEP_STRIDE) {
			const int64_t *d = odd_shapes[s];
			cg_gemm_spec spec = shape(d[0], d[1], d[2]);
			spec.pack = packs[p];
			spec.vector_width = widths[s % 2];
			sweep_add(&sw, spec, 100 + s);
		}
	}
	sweep_check(&sw);
}
END_TEST

START_TEST(test_gemm_reads_transposed_operands)
{
	spec_sweep sw = {0};
	static const int64_t shapes[][3] = {
		{1, 1, 1},   {7, 13, 5},     {65, 33, 17},
		{10, 10, 8}, {640, 32, 200}, {40, 300, 270},
	};
	for (size_t s = 0; s < 6; s++) {
		for (int tr = 1; tr < 4; tr++) {
			for (int pack = (int)(s + (size_t)tr) % TU_SWEEP_STRIDE;
			     pack < 4; pack += TU_SWEEP_STRIDE) {
				cg_gemm_spec spec = shape(shapes[s][0],
							  shapes[s][1],
							  shapes[s][2]);
				spec.ta = tr & 1;
				spec.tb = tr & 2;
				spec.pack = (cg_gemm_pack)pack;
				spec.vector_width = widths[(s + (size_t)pack) % 2];
				sweep_add(&sw, spec, 200 + s);
			}
		}
	}
	sweep_check(&sw);
}
END_TEST

/* Packing A^T and row-major B goes a run of 8 stored rows at a time and
 * then the rows left one by one, with partial panels at the edges
 * (cg_gemm_kernel.c): shapes whose k-blocks have whole runs and a
 * remainder (kc = 23, 150 of 300, 135 of 270), only a remainder (7) or
 * only runs (8), with rows and columns past the last whole panel and
 * padded leading dimensions. Packing copies, so each product must be
 * near the naive loop and the same bits as with both operands read in
 * place (B^T: packed both ways). */
START_TEST(test_gemm_packs_runs_of_rows_and_the_rows_left)
{
	static const int64_t shapes[][3] = {
		{13, 40, 23}, {150, 70, 300}, {6, 32, 8},
		{20, 33, 7},  {40, 300, 270},
	};
	static const cg_gemm_pack packs[] = {CG_GEMM_PACK_AB, CG_GEMM_PACK_NONE};
	spec_sweep sw = {0};
	for (size_t s = 0; s < 5; s++)
		for (int tr = 0; tr < 4; tr++)
			for (int p = 0; p < 2; p++) {
				cg_gemm_spec spec = shape(shapes[s][0],
							  shapes[s][1],
							  shapes[s][2]);
				spec.ta = tr & 1;
				spec.tb = tr & 2;
				spec.lda = (spec.ta ? spec.m : spec.k) + 3;
				spec.ldb = (spec.tb ? spec.k : spec.n) + 5;
				spec.pack = packs[p];
				spec.vector_width = widths[(s + (size_t)tr) % 2];
				sweep_add(&sw, spec, 900 + s);
			}
	cg_module *m = cg_module_create("sweep");
	char name[32];
	for (size_t i = 0; i < sw.n; i++) {
		snprintf(name, sizeof name, "gemm%zu", i);
		ck_assert_msg(cg_gemm_add(m, name, &sw.item[i].spec), "%s",
			      cg_module_error(m));
	}
	ck_assert_msg(cg_module_jit(m), "%s", cg_module_error(m));
	for (size_t i = 0; i < sw.n; i += 2) {
		gemm_case t;
		gemm_jit packed = {.m = m}, in_place = {.m = m};
		void *addr;
		snprintf(name, sizeof name, "gemm%zu", i);
		addr = cg_module_lookup(m, name);
		memcpy(&packed.fn, &addr, sizeof addr);
		snprintf(name, sizeof name, "gemm%zu", i + 1);
		addr = cg_module_lookup(m, name);
		memcpy(&in_place.fn, &addr, sizeof addr);
		check_jit(&packed, sw.item[i].spec, sw.item[i].seed);
		check_jit(&in_place, sw.item[i + 1].spec, sw.item[i].seed);
		case_init(&t, sw.item[i].spec, sw.item[i].seed);
		ck_assert(t.plan.pack_a && t.plan.pack_b);
		float *c0 = jit_run(&packed, &t, 1);
		float *c1 = jit_run(&in_place, &t, 1);
		ck_assert_msg(memcmp(c0, c1, t.n_c * sizeof *c0) == 0,
			      "%lldx%lldx%lld ta=%d tb=%d: packed and in "
			      "place differ",
			      (long long)t.spec.m, (long long)t.spec.n,
			      (long long)t.spec.k, t.spec.ta, t.spec.tb);
		free(c0);
		free(c1);
		case_fini(&t);
	}
	cg_module_destroy(m);
}
END_TEST

START_TEST(test_gemm_adds_to_c_when_accumulating)
{
	spec_sweep sw = {0};
	for (size_t s = 0; s < N_ODD; s++) {
		const int64_t *d = odd_shapes[s];
		cg_gemm_spec spec = shape(d[0], d[1], d[2]);
		spec.accumulate = true;
		sweep_add(&sw, spec, 300 + s);
		spec.pack = CG_GEMM_PACK_AB;
		spec.vector_width = widths[s % 2];
		sweep_add(&sw, spec, 400 + s);
	}
	sweep_check(&sw);
}
END_TEST

/* Zeroes B's k rows p with p % 10 >= keep (keep 0: all), as a
 * masked loss's gradient is zero at padding tokens. */
static void zero_b_rows(gemm_case *t, int64_t keep)
{
	for (int64_t p = 0; p < t->spec.k; p++)
		if (p % 10 >= keep)
			for (int64_t j = 0; j < t->spec.n; j++)
				t->b[p * t->plan.ldb + j] = 0;
}

/* Zeroes A's rows i with i % 10 >= keep (keep 0: all). */
static void zero_a_rows(gemm_case *t, int64_t keep)
{
	for (int64_t i = 0; i < t->spec.m; i++)
		if (i % 10 >= keep)
			for (int64_t p = 0; p < t->spec.k; p++)
				t->a[t->spec.ta ? p * t->plan.lda + i
						: i * t->plan.lda + p] = 0;
}

/* Adds to sw spec (skip_zero_k or skip_zero_m) with the rows it leaves
 * out zeroed in B or A as zero_*_rows(keep) does, for keep = 0,
 * keep_step, ... up to 10; variant v of (ta, tb, accumulate) in bits 1,
 * 4, 2, a packing from s and v and a vector width from s and keep,
 * leading dimensions wider than the rows with is_strided: one item a
 * vector width, checked by check_zero_rows_of. */
static void sweep_add_zero_rows(spec_sweep *sw, cg_gemm_spec spec, size_t s,
				int64_t keep_step, int v, bool is_strided,
				uint64_t seed)
{
	spec.ta = v & 1;
	spec.tb = v & 4;
	spec.accumulate = v & 2;
	spec.pack = (cg_gemm_pack)((s + (size_t)v) % 4);
	if (is_strided) {
		spec.lda = (spec.ta ? spec.m : spec.k) + 3;
		spec.ldb = (spec.tb ? spec.k : spec.n) + 5;
		spec.ldc = spec.n + 1;
	}
	for (size_t w = 0; w < 2; w++) {
		spec.vector_width = widths[w];
		sweep_item *it = sweep_add(sw, spec, seed);
		it->s = s;
		it->keep_step = keep_step;
		it->v = v;
	}
}

/* The item's keeps of its vector width (keep with (s + keep) % 2 the
 * width's index): the product is the naive loop's over every k (a row
 * of C left out is +0, or C's own when accumulating), on 1 thread and 2
 * alike to the bit. */
static void check_zero_rows_of(const gemm_jit *j, const sweep_item *it)
{
	const cg_gemm_spec spec = it->spec;
	size_t w = spec.vector_width == widths[1];
	for (int64_t keep = 0; keep <= 10; keep += it->keep_step) {
		if ((it->s + (size_t)keep) % 2 != w)
			continue;
		gemm_case t;
		case_init(&t, spec, it->seed);
		if (spec.skip_zero_m)
			zero_a_rows(&t, keep);
		else
			zero_b_rows(&t, keep);
		float *c1 = jit_run(j, &t, 1), *c2 = jit_run(j, &t, 2);
		double e = case_error(&t, c1);
		ck_assert_msg(e < 1e-5,
			      "%lldx%lldx%lld keep %lld ta=%d tb=%d "
			      "acc=%d: error %g",
			      (long long)spec.m, (long long)spec.n,
			      (long long)spec.k, (long long)keep, spec.ta,
			      spec.tb, spec.accumulate, e);
		for (int64_t i = keep;
		     spec.skip_zero_m && !spec.accumulate && i < spec.m; i++)
			if (i % 10 >= keep)
				ck_assert(!signbit(c1[i * t.plan.ldc]));
		ck_assert_msg(memcmp(c1, c2, t.n_c * sizeof *c1) == 0,
			      "%lldx%lldx%lld keep %lld v %d pack %d: "
			      "1 and 2 threads differ",
			      (long long)spec.m, (long long)spec.n,
			      (long long)spec.k, (long long)keep, it->v,
			      (int)spec.pack);
		free(c1);
		free(c2);
		case_fini(&t);
	}
}

/* skip_zero_k leaves out the k rows of B that are all zero (B not
 * transposed: v without bit 4), kept rows or none. */
START_TEST(test_gemm_leaves_out_zero_rows_of_b)
{
	spec_sweep sw = {0};
	static const int64_t shapes[][3] = {
		{32, 202, 320}, {7, 13, 5},  {65, 33, 300},
		{1, 1, 1},      {6, 40, 30},
	};
	for (size_t s = 0; s < 5; s++)
		for (int v = 0; v < 4; v++) {
			cg_gemm_spec spec = shape(shapes[s][0], shapes[s][1],
						  shapes[s][2]);
			spec.skip_zero_k = true;
			sweep_add_zero_rows(&sw, spec, s, 5, v, s == 2, 900 + s);
		}
	sweep_check(&sw);
}
END_TEST

/* A zero row of B meets an inf or NaN of A's column: 0 inf is NaN, so
 * that k stays in the product and the NaN reaches C's row. */
START_TEST(test_gemm_keeps_a_zero_row_of_b_against_a_non_finite_a)
{
	const float bad[2] = {INFINITY, NAN};
	for (int ta = 0; ta < 2; ta++)
		for (int b = 0; b < 2; b++) {
			cg_gemm_spec spec = shape(9, 20, 30);
			spec.skip_zero_k = true;
			spec.ta = ta;
			gemm_case t;
			case_init(&t, spec, 950);
			zero_b_rows(&t, 5);
			int64_t i = 4, p = 17; /* p % 10 >= 5: a zero row */
			t.a[ta ? p * t.plan.lda + i : i * t.plan.lda + p] = bad[b];
			float *c = case_run(&t, 1);
			for (int64_t r = 0; r < spec.m; r++)
				for (int64_t j = 0; j < spec.n; j++)
					ck_assert_msg(
						isnan(c[r * t.plan.ldc + j]) ==
							(r == i),
						"ta=%d C(%lld, %lld) = %g", ta,
						(long long)r, (long long)j,
						(double)c[r * t.plan.ldc + j]);
			free(c);
			case_fini(&t);
		}
}
END_TEST

/* skip_zero_m leaves out the rows of A that are all zero, in a row or
 * a column split. */
START_TEST(test_gemm_leaves_out_zero_rows_of_a)
{
	spec_sweep sw = {0};
	static const int64_t shapes[][3] = {
		{320, 32, 202}, {7, 13, 5},     {65, 33, 300}, {1, 1, 1},
		{300, 70, 30},  {13, 600, 100}, /* threads split columns: each keeps all rows */
	};
	for (size_t s = 0; s < 6; s++)
		for (int v = (int)(s % TU_SWEEP_STRIDE); v < 8;
		     v += TU_SWEEP_STRIDE) {
			cg_gemm_spec spec = shape(shapes[s][0], shapes[s][1],
						  shapes[s][2]);
			spec.skip_zero_m = true;
			sweep_add_zero_rows(&sw, spec, s, 3, v, s == 2, 970 + s);
		}
	sweep_check(&sw);
}
END_TEST

/* A zero row of A meets an inf or NaN of B: 0 inf is NaN, so every row
 * stays in the product and the NaN reaches all of C's column. B stored
 * k×n or transposed (W^T, which the scan reads along its rows), its
 * rows dense or wider than n (v: bit 1 tb, bit 2 strided), the bad
 * value anywhere: its first, an inner or its last element. */
START_TEST(test_gemm_keeps_zero_rows_of_a_against_a_non_finite_b)
{
	const float bad[2] = {INFINITY, NAN};
	static const int64_t at[3][2] = {{0, 0}, {4, 11}, {8, 19}};
	for (int v = 0; v < 4; v++)
		for (int b = 0; b < 2; b++) {
			cg_gemm_spec spec = shape(30, 20, 9);
			spec.skip_zero_m = true;
			spec.tb = v & 1;
			if (v & 2)
				spec.ldb = (spec.tb ? spec.k : spec.n) + 3;
			gemm_case t;
			case_init(&t, spec, 990);
			zero_a_rows(&t, 5);
			int64_t p = at[(v + b) % 3][0], j = at[(v + b) % 3][1];
			t.b[spec.tb ? j * t.plan.ldb + p : p * t.plan.ldb + j] =
				bad[b];
			float *c = case_run(&t, 1);
			for (int64_t r = 0; r < spec.m; r++)
				for (int64_t q = 0; q < spec.n; q++) {
					float x = c[r * t.plan.ldc + q];
					bool is_zero_row = r % 10 >= 5;
					ck_assert_msg(q == j ? !isfinite(x) &&
								       (isnan(x) ||
									!is_zero_row)
							     : isfinite(x),
						      "C(%lld, %lld) = %g",
						      (long long)r,
						      (long long)q, (double)x);
				}
			free(c);
			case_fini(&t);
		}
}
END_TEST

/* Whether x and y are the same float, bit for bit, or both NaN. */
static bool same_or_both_nan(float x, float y)
{
	return memcmp(&x, &y, sizeof x) == 0 || (isnan(x) && isnan(y));
}

/* skip's product of t on 1 thread and on 2 has the bits of c0 (the plain
 * product's), NaN for NaN; v and what name the case in a failure. */
static void expect_plain_bits(gemm_jit *skip, gemm_case *t, const float *c0,
			      int v, int what)
{
	const cg_gemm_spec *s = &t->spec;
	for (int threads = 1; threads <= 2; threads++) {
		float *c = jit_run(skip, t, threads);
		for (size_t at = 0; at < t->n_c; at++)
			ck_assert_msg(same_or_both_nan(c[at], c0[at]),
				      "%lldx%lldx%lld v %d case %d, %d "
				      "threads: C[%zu] = %g, plainly %g",
				      (long long)s->m, (long long)s->n,
				      (long long)s->k, v, what, threads, at,
				      (double)c[at], (double)c0[at]);
		free(c);
	}
}

/* Case `what` of test_gemm_leaving_out_zero_rows_of_a_keeps_the_bits: 0
 * and 1 an inf or a NaN in B, 2 an inf in a row of A that is kept, 3 a
 * NaN in B with every row of A zero, 4 every row of A zero. */
static void set_bad_operands(gemm_case *t, int what)
{
	const cg_gemm_spec *s = &t->spec;
	zero_a_rows(t, what >= 3 ? 0 : 5);
	int64_t p = s->k / 2, j = s->n - 2, i = 2; /* i % 10 < 5: kept */
	if (what == 2)
		t->a[i * t->plan.lda + p] = INFINITY;
	else if (what != 4)
		t->b[s->tb ? j * t->plan.ldb + p : p * t->plan.ldb + j] =
			what == 0 ? INFINITY : NAN;
}

/* With an inf or NaN in A or B, or no row of A kept, skip_zero_m gives
 * the plain product's bits (0 inf is NaN: no row may be left out when B
 * holds one), accumulating or not, B transposed or not, the threads
 * splitting rows (30x20) or columns (13x600), on 1 thread and 2. */
START_TEST(test_gemm_leaving_out_zero_rows_of_a_keeps_the_bits)
{
	static const int64_t shapes[2][3] = {{30, 20, 9}, {13, 600, 40}};
	for (int sh = 0; sh < 2; sh++)
		for (int v = 0; v < 4; v++) {
			cg_gemm_spec spec = shape(shapes[sh][0], shapes[sh][1],
						  shapes[sh][2]);
			spec.tb = v & 1;
			spec.accumulate = v & 2;
			gemm_jit plain = jit_open(&spec);
			spec.skip_zero_m = true;
			gemm_jit skip = jit_open(&spec);
			for (int what = 0; what < 5; what++) {
				gemm_case t;
				case_init(&t, spec,
					  1100 + (uint64_t)(v * 5 + what));
				set_bad_operands(&t, what);
				float *c0 = jit_run(&plain, &t, 1);
				expect_plain_bits(&skip, &t, c0, v, what);
				free(c0);
				case_fini(&t);
			}
			jit_close(&plain);
			jit_close(&skip);
		}
}
END_TEST

/* Accumulating, a row of A left out adds the plain product's +0 to its
 * row of C, which turns a -0 there into +0 as the plain product does
 * (it stayed -0 before); the other zeros and values stay. A in place or
 * packed, B transposed or not, rows or columns split, on 1 thread and
 * 2. */
START_TEST(test_gemm_leaving_out_zero_rows_of_a_adds_plus_zero_to_c)
{
	static const int64_t shapes[2][3] = {{30, 20, 9}, {13, 600, 40}};
	for (int sh = 0; sh < 2; sh++)
		for (int v = 0; v < 4; v++) {
			cg_gemm_spec spec = shape(shapes[sh][0], shapes[sh][1],
						  shapes[sh][2]);
			spec.tb = v & 1;
			spec.pack = v & 2 ? CG_GEMM_PACK_AB : CG_GEMM_PACK_AUTO;
			spec.accumulate = true;
			gemm_jit plain = jit_open(&spec);
			spec.skip_zero_m = true;
			gemm_jit skip = jit_open(&spec);
			gemm_case t;
			case_init(&t, spec, 1150 + (uint64_t)v);
			zero_a_rows(&t, 5);
			for (int64_t i = 0; i < spec.m;
			     i++) /* kept and left out */
				for (int64_t j = 0; j < spec.n; j += 3)
					t.c[i * t.plan.ldc + j] = j % 2 ? -0.0f
									: 0.0f;
			float *c0 = jit_run(&plain, &t, 1);
			ck_assert(!signbit(c0[5 * t.plan.ldc + 3])); /* left out */
			expect_plain_bits(&skip, &t, c0, v, 0);
			free(c0);
			case_fini(&t);
			jit_close(&plain);
			jit_close(&skip);
		}
}
END_TEST

/* Zeroes the rows of B that case `what` of
 * test_gemm_leaving_out_zero_rows_of_b_keeps_the_bits leaves out: 0
 * those of a padded batch (rows p with p % 10 >= 4), 1 every row of the
 * first k-block and the last row, 2 every row but one in each k-block, 3
 * every row, 4 none; 5 as 0 with an inf in a column of A whose row of B
 * is zero (that k stays in the product), 6 as 0 with an inf in a column
 * of A whose row of B is kept (A is not all finite, yet no k left out
 * is kept), 7 as 0 with NaN in A's last element, whose row of B (the
 * last, k - 1: 9 mod 10 in every shape) is zero. kc is the plan's
 * k-block. */
static void zero_b_rows_for(gemm_case *t, int what, int64_t kc)
{
	const cg_gemm_spec *s = &t->spec;
	for (int64_t p = 0; p < s->k; p++) {
		bool is_zero = what == 0 || what >= 5 ? p % 10 >= 4
			       : what == 1            ? p < kc || p == s->k - 1
			       : what == 2            ? p % kc != kc / 2
						      : what == 3;
		for (int64_t j = 0; is_zero && j < s->n; j++)
			t->b[p * t->plan.ldb + j] = 0;
	}
	if (what == 5 || what == 6) {
		/* 7 % 10 >= 4: a zero row; 2 % 10 < 4: a row kept */
		int64_t i = s->m / 2, p = what == 5 ? 7 : 2;
		t->a[s->ta ? p * t->plan.lda + i : i * t->plan.lda + p] = INFINITY;
	}
	if (what == 7) {
		int64_t i = s->m - 1, p = s->k - 1;
		t->a[s->ta ? p * t->plan.lda + i : i * t->plan.lda + p] = NAN;
	}
}

/* skip_zero_k gives the bits of the product that keeps every k, however
 * many k-blocks K makes (320: two of 160, the Transformer's X^T dY; 600:
 * three of 200) and whichever rows of B are zero, a whole k-block
 * included; A transposed or not, accumulating or not, packed (the k kept
 * copied) or not (read in place through their numbers), rows wider than
 * the matrices or not (the last shape), an inf or NaN in A, on 1 thread
 * and 2. */
START_TEST(test_gemm_leaving_out_zero_rows_of_b_keeps_the_bits)
{
	static const int64_t shapes[4][3] = {{32, 32, 320},
					     {9, 70, 600},
					     {13, 20, 100},
					     {64, 32, 320}};
	for (int sh = 0; sh < 4; sh++)
		for (int v = 0; v < 8; v++) {
			cg_gemm_spec spec = shape(shapes[sh][0], shapes[sh][1],
						  shapes[sh][2]);
			if (sh == 3) {
				spec.lda = (v & 1 ? spec.m : spec.k) + 3;
				spec.ldb = spec.n + 5;
				spec.ldc = spec.n + 1;
			}
			spec.ta = v & 1;
			spec.accumulate = v & 2;
			spec.pack = v & 4 ? CG_GEMM_PACK_AB : CG_GEMM_PACK_NONE;
			spec.vector_width = widths[(sh + v) % 2];
			gemm_jit plain = jit_open(&spec);
			spec.skip_zero_k = true;
			gemm_jit skip = jit_open(&spec);
			for (int what = 0; what < 8; what++) {
				gemm_case t;
				case_init(&t, spec,
					  1200 + (uint64_t)(sh * 50 + v * 8 +
							    what));
				zero_b_rows_for(&t, what, t.plan.kc);
				float *c0 = jit_run(&plain, &t, 1);
				expect_plain_bits(&skip, &t, c0, v, what);
				free(c0);
				case_fini(&t);
			}
			jit_close(&plain);
			jit_close(&skip);
		}
}
END_TEST

START_TEST(test_gemm_accumulates_one_hand_computed_product)
{
	/* A = [1 2; 3 4], B = [5 6; 7 8], C = [1 1; 1 1]: C + AB. */
	const float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
	float c[4] = {1, 1, 1, 1};
	cg_gemm_spec spec = shape(2, 2, 2);
	spec.accumulate = true;
	cg_module *m = cg_module_create("hand");
	gemm_fn fn = jit_gemm(m, &spec);
	fn(a, b, c);
	ck_assert_float_eq(c[0], 20);
	ck_assert_float_eq(c[1], 23);
	ck_assert_float_eq(c[2], 44);
	ck_assert_float_eq(c[3], 51);
	fn(a, b, c); /* once more: adds again */
	ck_assert_float_eq(c[0], 39);
	ck_assert_float_eq(c[3], 101);
	cg_module_destroy(m);
}
END_TEST

START_TEST(test_gemm_keeps_to_leading_dimensions)
{
	spec_sweep sw = {0};
	for (int tr = 0; tr < 4; tr++) {
		for (int pack = 0; pack < 4; pack++) {
			cg_gemm_spec spec = shape(23, 37, 19);
			spec.ta = tr & 1;
			spec.tb = tr & 2;
			spec.lda = 41;
			spec.ldb = 50;
			spec.ldc = 45; /* columns 37..44 of C must stay as they are */
			spec.pack = (cg_gemm_pack)pack;
			spec.vector_width = widths[pack % 2];
			sweep_add(&sw, spec, 500 + (uint64_t)tr);
		}
	}
	sweep_check(&sw);
}
END_TEST

START_TEST(test_gemm_multiplies_each_product_of_a_batch)
{
	spec_sweep sw = {0};
	static const struct {
		int64_t m, n, k, batch, sa, sb, sc;
		bool tb;
	} cases[] = {
		{7, 13, 5, 5, 7 * 5, 5 * 13, 7 * 13 + 3, false}, /* gaps in C */
		{10, 10, 8, 64, 80, 80, 100, true}, /* attention scores q·k^T */
		{65, 33, 17, 3, 65 * 17, 0, 65 * 33, false}, /* one B for all */
		{6, 40, 70, 4, 0, 70 * 40, 6 * 40, false},   /* one A for all */
	};
	for (size_t c = 0; c < 4; c++) {
		for (int pack = 0; pack < 4; pack++) {
			cg_gemm_spec spec = shape(cases[c].m, cases[c].n,
						  cases[c].k);
			spec.batch = cases[c].batch;
			spec.stride_a = cases[c].sa;
			spec.stride_b = cases[c].sb;
			spec.stride_c = cases[c].sc;
			spec.tb = cases[c].tb;
			spec.pack = (cg_gemm_pack)pack;
			spec.vector_width = widths[(c + (size_t)pack) % 2];
			spec.grain = pack == 3 ? 1
					       : 0; /* threads inside products */
			sweep_add(&sw, spec, 800 + c);
		}
	}
	sweep_check(&sw);
}
END_TEST

/* ---- threads --------------------------------------------------------------- */

START_TEST(test_gemm_results_do_not_depend_on_thread_count)
{
	static const int64_t shapes[][3] = {
		{300, 200, 600}, /* rows split, three k-blocks */
		{12, 700, 100},  /* few rows: columns split */
		{640, 200, 32},  /* B read in place */
		{97, 211, 300},
	};
	for (size_t s = 0; s < 8; s++) {
		gemm_case t;
		cg_gemm_spec spec = shape(shapes[s % 4][0], shapes[s % 4][1],
					  shapes[s % 4][2]);
		spec.grain = 1000; /* start threads even for these sizes */
		spec.vector_width = widths[s / 4];
		case_init(&t, spec, 600 + s);
		ck_assert_int_ge(t.plan.max_threads, 2);
		gemm_jit j = jit_open(&t.spec);
		float *one = jit_run(&j, &t, 1), *two = jit_run(&j, &t, 2);
		jit_close(&j);
		ck_assert_int_eq(memcmp(one, two, t.n_c * sizeof *one), 0);
		ck_assert_double_lt(case_error(&t, two), 1e-5);
		free(one);
		free(two);
		case_fini(&t);
	}
}
END_TEST

/* Products of 16-float vectors 256 to 512 columns wide, whose k-blocks
 * are at most 128 (the GPT step's 256 columns by K = 1,024 tokens: 8;
 * K = 300: 3 of 100; one of 513 columns: 2 of 150, for comparison), in
 * every layout, accumulating or not: near the naive loop, and the same
 * bits on 1 and 2 threads. */
START_TEST(test_gemm_narrow_products_of_short_k_blocks_are_right)
{
	static const int64_t shapes[][3] = {{200, 256, 1024},
					    {150, 512, 300},
					    {64, 513, 300}};
	for (size_t s = 0; s < 3; s++)
		for (int v = 0; v < 4; v++) {
			gemm_case t;
			cg_gemm_spec spec = shape(shapes[s][0], shapes[s][1],
						  shapes[s][2]);
			spec.ta = v & 1;
			spec.tb = v & 2;
			spec.accumulate = s == 1 && v == 3;
			spec.grain = 1000;
			spec.vector_width = 16;
			case_init(&t, spec, 1700 + 4 * s + (uint64_t)v);
			ck_assert_int_eq(t.plan.kc, s == 0   ? 128
						    : s == 1 ? 100
							     : 150);
			gemm_jit j = jit_open(&t.spec);
			float *one = jit_run(&j, &t, 1),
			      *two = jit_run(&j, &t, 2);
			jit_close(&j);
			ck_assert_int_eq(memcmp(one, two, t.n_c * sizeof *one),
					 0);
			ck_assert_msg(case_error(&t, two) < 1e-5,
				      "%lldx%lldx%lld v %d: error %g",
				      (long long)spec.m, (long long)spec.n,
				      (long long)spec.k, v, case_error(&t, two));
			free(one);
			free(two);
			case_fini(&t);
		}
}
END_TEST

typedef void (*gemm_range_fn)(const float *A, const float *B, float *C,
			      int64_t lo, int64_t hi, int64_t n);

/* NAME.range over uneven cuts of [0, n), parts in reverse order, gives C
 * bit for bit as NAME does in one call. */
START_TEST(test_gemm_range_parts_make_the_whole_product)
{
	static const struct {
		int64_t m, n, k, batch;
		cg_gemm_pack pack;
	} cases[] = {
		{640, 201, 32, 1, CG_GEMM_PACK_AUTO}, /* rows split */
		{12, 700, 100, 1, CG_GEMM_PACK_AB},   /* columns split */
		{13, 40, 50, 7, CG_GEMM_PACK_NONE}, /* panels across a batch */
		{5, 3, 9, 1, CG_GEMM_PACK_AUTO}, /* fewer panels than parts */
	};
	for (size_t c = 0; c < 4; c++) {
		gemm_case t;
		cg_gemm_spec spec = shape(cases[c].m, cases[c].n, cases[c].k);
		spec.batch = cases[c].batch;
		spec.stride_a = spec.m * spec.k;
		spec.stride_b = spec.k * spec.n;
		spec.stride_c = spec.m * spec.n;
		spec.pack = cases[c].pack;
		spec.vector_width = widths[c % 2];
		case_init(&t, spec, 900 + c);
		float *whole = case_run(&t, 1);
		cg_module *m = cg_module_create("range");
		(void)jit_gemm(m, &t.spec);
		void *addr = cg_module_lookup(m, "gemm.range");
		ck_assert_msg(addr != NULL, "%s", cg_module_error(m));
		gemm_range_fn fn;
		memcpy(&fn, &addr, sizeof fn);
		for (int64_t n = 1; n <= 7; n += 3) {
			float *c2 = malloc(t.n_c * sizeof *c2);
			ck_assert_ptr_nonnull(c2);
			for (size_t i = 0; i < t.n_c; i++)
				c2[i] = -7777.0f;
			int64_t cut = n / 3; /* [cut, n), then [0, cut) */
			fn(t.a, t.b, c2, cut, n, n);
			size_t left = 0;
			for (size_t i = 0; i < t.n_c; i++)
				left += c2[i] == -7777.0f;
			/* The first part wrote its share only: the rest is left
			 * when the cut takes panels (4 of them: 5x3 has 1). */
			if (cut > 0 && c != 3)
				ck_assert(left > 0 && left < t.n_c);
			fn(t.a, t.b, c2, 0, cut, n);
			ck_assert_msg(memcmp(whole, c2, t.n_c * sizeof *c2) == 0,
				      "case %zu, %lld parts", c, (long long)n);
			free(c2);
		}
		cg_module_destroy(m);
		free(whole);
		case_fini(&t);
	}
}
END_TEST

typedef void (*gemm_rows_fn)(const float *A, const float *B, float *C,
			     int64_t lo, int64_t hi, int64_t n,
			     const int32_t *live);

/* is_rows_given: NAME.range computes the rows live flags and clears the
 * others to +0, each row with the plain product's bits, over any cut of
 * the parts, in a row or a column split; a NULL list computes them all,
 * and so does NAME. */
START_TEST(test_gemm_computes_the_rows_given)
{
	static const int64_t shapes[][3] = {
		{320, 32, 32}, {7, 13, 5},    {65, 33, 64},
		{300, 70, 30}, {12, 200, 20}, /* threads split columns */
	};
	for (size_t c = 0; c < 5; c++) {
		gemm_case t;
		cg_gemm_spec plain = shape(shapes[c][0], shapes[c][1],
					   shapes[c][2]);
		plain.vector_width = widths[c % 2];
		plain.tb = c % 3 == 1;
		case_init(&t, plain, 1100 + c);
		float *whole = case_run(&t, 1);
		cg_gemm_spec spec = plain;
		spec.is_rows_given = true;
		cg_module *m = cg_module_create("rows");
		gemm_fn all = jit_gemm(m, &spec);
		void *addr = cg_module_lookup(m, "gemm.range");
		ck_assert_msg(addr != NULL, "%s", cg_module_error(m));
		gemm_rows_fn fn;
		memcpy(&fn, &addr, sizeof fn);
		int32_t *live = malloc((size_t)spec.m * sizeof *live);
		float *c2 = malloc(t.n_c * sizeof *c2);
		ck_assert(live && c2);
		for (int64_t keep = -1; keep <= 10; keep += 4) {
			for (int64_t i = 0; i < spec.m; i++)
				live[i] = i % 10 < keep;
			for (int64_t n = 1; n <= 7; n += 3) {
				for (size_t i = 0; i < t.n_c; i++)
					c2[i] = -7777.0f;
				int64_t cut = n / 3;
				fn(t.a, t.b, c2, cut, n, n,
				   keep < 0 ? NULL : live);
				fn(t.a, t.b, c2, 0, cut, n,
				   keep < 0 ? NULL : live);
				for (int64_t i = 0; i < spec.m; i++) {
					const float *w = whole + i * t.plan.ldc;
					const float *g = c2 + i * t.plan.ldc;
					bool is_live = keep < 0 || live[i];
					for (int64_t j = 0; j < spec.n; j++)
						ck_assert_msg(
							is_live ? memcmp(&w[j],
									 &g[j],
									 4) == 0
								: g[j] == 0 &&
									  !signbit(
										  g[j]),
							"case %zu keep %lld n %lld: "
							"C(%lld, %lld) = %g",
							c, (long long)keep,
							(long long)n,
							(long long)i,
							(long long)j,
							(double)g[j]);
				}
			}
		}
		for (size_t i = 0; i < t.n_c; i++)
			c2[i] = -7777.0f;
		all(t.a, t.b, c2);
		ck_assert(memcmp(whole, c2, t.n_c * sizeof *c2) == 0);
		free(live);
		free(c2);
		cg_module_destroy(m);
		free(whole);
		case_fini(&t);
	}
}
END_TEST

typedef void (*gemm_rows_e1_fn)(const float *A, const float *B, float *C,
				const float *E0, int64_t lo, int64_t hi,
				int64_t n, const int32_t *live);
typedef void (*gemm_rows_e2_fn)(const float *A, const float *B, float *C,
				const float *E0, const float *E1, int64_t lo,
				int64_t hi, int64_t n, const int32_t *live);

/* is_rows_given with an epilogue (a bias row, a matrix read at the rows
 * given, or both): the rows live get the plain product's bits plus the
 * terms added one at a time, the others +0 (not the terms), over any
 * cut of the parts, in a row or a column split, odd m included. */
START_TEST(test_gemm_computes_the_rows_given_with_an_epilogue)
{
	static const int64_t shapes[][3] = {
		{320, 32, 32}, {7, 13, 5},    {65, 33, 64},
		{301, 70, 30}, {13, 200, 20}, /* threads split columns */
	};
	for (size_t c = 0; c < 5; c++) {
		for (int v = 0; v < 3; v++) { /* bias, matrix, both */
			gemm_case t;
			cg_gemm_spec plain = shape(shapes[c][0], shapes[c][1],
						   shapes[c][2]);
			plain.vector_width = widths[(c + (size_t)v) % 2];
			plain.tb = c % 3 == 1;
			plain.ldc = v == 1 ? plain.n + 3 : 0;
			case_init(&t, plain, 1200 + 3 * c + (uint64_t)v);
			float *want = case_run(&t, 1);
			int64_t rs = plain.n + (c % 2 ? 5 : 0);
			uint64_t seed = 300 + c;
			float *e0 = rand_matrix((size_t)(plain.m * rs), &seed);
			float *e1 = rand_matrix((size_t)(plain.m * rs), &seed);
			cg_gemm_spec spec = plain;
			spec.is_rows_given = true;
			spec.n_epilogue = v == 2 ? 2 : 1;
			spec.epilogue_rs[0] = v == 1 ? rs : 0;
			spec.epilogue_rs[1] = rs;
			for (int64_t i = 0; i < spec.m; i++)
				for (int64_t j = 0; j < spec.n; j++) {
					float *w = &want[i * t.plan.ldc + j];
					*w = *w +
					     e0[i * spec.epilogue_rs[0] + j];
					if (v == 2)
						*w = *w + e1[i * rs + j];
				}
			cg_module *m = cg_module_create("rows");
			ck_assert_ptr_nonnull(m);
			ck_assert_msg(cg_gemm_add(m, "gemm", &spec), "%s",
				      cg_module_error(m));
			ck_assert_msg(cg_module_jit(m), "%s",
				      cg_module_error(m));
			void *addr = cg_module_lookup(m, "gemm.range");
			ck_assert_msg(addr != NULL, "%s", cg_module_error(m));
			gemm_rows_e1_fn f1;
			gemm_rows_e2_fn f2;
			memcpy(&f1, &addr, sizeof f1);
			memcpy(&f2, &addr, sizeof f2);
			int32_t *live = malloc((size_t)spec.m * sizeof *live);
			float *c2 = malloc(t.n_c * sizeof *c2);
			ck_assert(live && c2);
			for (int64_t keep = -1; keep <= 10; keep += 4) {
				for (int64_t i = 0; i < spec.m; i++)
					live[i] = (i * 7 + 3) % 10 < keep;
				for (int64_t n = 1; n <= 7; n += 3) {
					for (size_t i = 0; i < t.n_c; i++)
						c2[i] = -7777.0f;
					int64_t cut = n / 3;
					const int32_t *l = keep < 0 ? NULL
								    : live;
					if (v == 2) {
						f2(t.a, t.b, c2, e0, e1, cut, n,
						   n, l);
						f2(t.a, t.b, c2, e0, e1, 0, cut,
						   n, l);
					} else {
						f1(t.a, t.b, c2, e0, cut, n, n,
						   l);
						f1(t.a, t.b, c2, e0, 0, cut, n,
						   l);
					}
					for (int64_t i = 0; i < spec.m; i++) {
						const float *w = want +
								 i * t.plan.ldc;
						const float *g = c2 +
								 i * t.plan.ldc;
						bool is_live = keep < 0 ||
							       live[i];
						for (int64_t j = 0; j < spec.n;
						     j++)
							ck_assert_msg(
								is_live ? memcmp(&w[j],
										 &g[j],
										 4) ==
										  0
									: g[j] == 0 &&
										  !signbit(
											  g[j]),
								"case %zu v %d keep %lld n %lld: "
								"C(%lld, %lld) = %g",
								c, v,
								(long long)keep,
								(long long)n,
								(long long)i,
								(long long)j,
								(double)g[j]);
					}
				}
			}
			free(live);
			free(c2);
			cg_module_destroy(m);
			free(e0);
			free(e1);
			free(want);
			case_fini(&t);
		}
	}
}
END_TEST

START_TEST(test_gemm_batch_results_do_not_depend_on_thread_count)
{
	for (int w = 0; w < 2; w++) {
		gemm_case t;
		cg_gemm_spec spec = shape(13, 40,
					  50); /* 3 row panels a product */
		spec.batch = 7;
		spec.stride_a = 13 * 50;
		spec.stride_b = 50 * 40;
		spec.stride_c = 13 * 40;
		spec.grain = 1;
		spec.vector_width = widths[w];
		case_init(&t, spec, 900);
		gemm_jit j = jit_open(&t.spec);
		float *one = jit_run(&j, &t, 1);
		for (int threads = 2; threads <= 4; threads++) {
			float *more = jit_run(&j, &t, threads);
			ck_assert_int_eq(memcmp(one, more, t.n_c * sizeof *one),
					 0);
			free(more);
		}
		ck_assert_double_lt(case_error(&t, one), 1e-5);
		free(one);
		jit_close(&j);
		case_fini(&t);
	}
}
END_TEST

/* Products with fewer rows than columns split their columns over the
 * threads (each thread packs all of A, the smaller operand, and its part
 * of B): packed A, A^T, B and B^T blocks, edge tiles on both sides,
 * several k-blocks, accumulating; 1, 2 and 3 threads give the same bits,
 * and the float64 product. */
START_TEST(test_gemm_columns_split_keeps_the_bits)
{
	static const struct {
		int64_t m, n, k;
		bool ta, tb, accumulate;
		cg_gemm_pack pack;
	} cases[] = {
		{97, 517, 300, true, false, false, CG_GEMM_PACK_AUTO},
		{61, 600, 260, false, true, true, CG_GEMM_PACK_AUTO},
		{250, 1000, 70, false, false, false, CG_GEMM_PACK_AB},
		{100, 530, 40, true, false, true, CG_GEMM_PACK_NONE},
	};
	for (size_t c = 0; c < 8; c++) {
		gemm_case t;
		cg_gemm_spec spec = shape(cases[c % 4].m, cases[c % 4].n,
					  cases[c % 4].k);
		spec.ta = cases[c % 4].ta;
		spec.tb = cases[c % 4].tb;
		spec.accumulate = cases[c % 4].accumulate;
		spec.pack = cases[c % 4].pack;
		spec.grain = 1000;
		spec.vector_width = widths[c / 4];
		case_init(&t, spec, 1300 + c);
		ck_assert_msg(!t.plan.split_rows, "case %zu splits rows", c);
		ck_assert_int_ge(t.plan.max_threads, 3);
		gemm_jit j = jit_open(&t.spec);
		float *one = jit_run(&j, &t, 1);
		for (int threads = 2; threads <= 3; threads++) {
			float *more = jit_run(&j, &t, threads);
			ck_assert_msg(memcmp(one, more, t.n_c * sizeof *one) == 0,
				      "case %zu: %d threads differ", c, threads);
			free(more);
		}
		double e = case_error(&t, one);
		ck_assert_msg(e < 1e-5, "case %zu: error %g", c, e);
		free(one);
		jit_close(&j);
		case_fini(&t);
	}
}
END_TEST

typedef void (*gemm_nt_fn)(const float *A, const float *B, float *C,
			   int n_threads);

START_TEST(test_gemm_takes_the_thread_count_as_an_argument)
{
	gemm_case t;
	cg_gemm_spec spec = shape(300, 200, 100);
	spec.is_threads_arg = true;
	spec.grain = 1000;
	case_init(&t, spec, 950);
	cg_module *m = cg_module_create("nt");
	ck_assert(cg_gemm_add(m, "gemm_nt", &spec));
	ck_assert_msg(cg_module_jit(m), "%s", cg_module_error(m));
	void *addr = cg_module_lookup(m, "gemm_nt");
	gemm_nt_fn fn;
	memcpy(&fn, &addr, sizeof fn);
	float *c[3];
	for (int i = 0; i < 3; i++) { /* 0 (OpenMP's default), 1, 2 */
		c[i] = malloc(t.n_c * sizeof *c[i]);
		memcpy(c[i], t.c, t.n_c * sizeof *c[i]);
		fn(t.a, t.b, c[i], i);
	}
	ck_assert_double_lt(case_error(&t, c[0]), 1e-5);
	ck_assert_int_eq(memcmp(c[0], c[1], t.n_c * sizeof *c[0]), 0);
	ck_assert_int_eq(memcmp(c[0], c[2], t.n_c * sizeof *c[0]), 0);
	for (int i = 0; i < 3; i++)
		free(c[i]);
	cg_module_destroy(m);
	case_fini(&t);
}
END_TEST

START_TEST(test_gemm_runs_on_more_threads_than_row_panels)
{
	cg_gemm_spec spec = shape(13, 40, 50); /* 3 row panels, 4 threads */
	spec.grain = 1;
	gemm_case t;
	case_init(&t, spec, 700);
	float *c = case_run(&t, 4);
	ck_assert_double_lt(case_error(&t, c), 1e-5);
	free(c);
	case_fini(&t);
}
END_TEST

/* ---- generated code -------------------------------------------------------- */

static cg_gemm_plan plan_of(cg_gemm_spec spec)
{
	cg_gemm_plan p;
	char err[256];
	ck_assert_msg(cg_gemm_plan_make(&spec, &p, err, sizeof err), "%s", err);
	return p;
}

static char *emit_text(const cg_gemm_spec *spec, cg_emit_kind kind)
{
	cg_module *m = cg_module_create("text");
	char *text = NULL;
	size_t len = 0;
	ck_assert_msg(cg_gemm_add(m, "sgemm", spec), "%s", cg_module_error(m));
	ck_assert_msg(cg_module_emit_buffer(m, kind, &text, &len), "%s",
		      cg_module_error(m));
	ck_assert_uint_eq(strlen(text), len);
	cg_module_destroy(m);
	return text;
}

/* The number of FMA calls in the optimized IR of a module with an sgemm
 * of spec named "a" and, when twice, the same one named "b". */
static int fma_calls(const cg_gemm_spec *spec, bool twice)
{
	cg_module *m = cg_module_create("merge");
	ck_assert_msg(cg_gemm_add(m, "a", spec), "%s", cg_module_error(m));
	if (twice)
		ck_assert_msg(cg_gemm_add(m, "b", spec), "%s",
			      cg_module_error(m));
	char *ir = NULL;
	size_t len = 0;
	ck_assert_msg(cg_module_emit_buffer(m, CG_EMIT_LLVM, &ir, &len), "%s",
		      cg_module_error(m));
	int n = 0;
	for (const char *at = ir;
	     (at = strstr(at, "call <8 x float> @llvm.fma")); at++)
		n++;
	free(ir);
	cg_module_destroy(m);
	return n;
}

/* The pipeline starts with MergeFunctions: a second sgemm whose code is
 * the first's compiles to a call of the first, not to a copy. */
START_TEST(test_module_merges_functions_of_the_same_code)
{
	cg_gemm_spec spec = shape(96, 64, 48);
	spec.vector_width = 8;
	int once = fma_calls(&spec, false);
	ck_assert_int_gt(once, 0);
	ck_assert_int_eq(fma_calls(&spec, true), once);
}
END_TEST

/* The optimized IR (malloc'd) of a module with an sgemm of each spec
 * (n of them, named g0, g1, ...). */
static char *gemms_ir(const cg_gemm_spec *specs, int n)
{
	cg_module *m = cg_module_create("gemms");
	char name[16], *ir = NULL;
	size_t len = 0;
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof name, "g%d", i);
		ck_assert_msg(cg_gemm_add(m, name, &specs[i]), "%s",
			      cg_module_error(m));
	}
	ck_assert_msg(cg_module_emit_buffer(m, CG_EMIT_LLVM, &ir, &len), "%s",
		      cg_module_error(m));
	cg_module_destroy(m);
	return ir;
}

/* The functions whose name holds `part` that the optimized IR of a
 * module with an sgemm of each spec (n of them, named g0, g1, ...)
 * defines. */
static int defined_fns(const cg_gemm_spec *specs, int n, const char *part)
{
	char *ir = gemms_ir(specs, n);
	int k = 0;
	for (const char *at = ir; at;
	     at = strchr(at, '\n'), at = at ? at + 1 : at) {
		const char *eol = strchr(at, '\n'), *u = strstr(at, part);
		k += strncmp(at, "define ", 7) == 0 && u && (!eol || u < eol);
	}
	free(ir);
	return k;
}

/* The micro-kernels defined in a module with an sgemm of each spec. */
static int micro_kernels(const cg_gemm_spec *specs, int n)
{
	return defined_fns(specs, n, "@sgemm.ukr.");
}

/* Two sgemms of one shape whose strides differ (leading dimensions
 * passed to the shared micro-kernels as arguments) in one module: each
 * gives, bit for bit, what it gives in a module of its own. */
static void check_shared_pair(cg_gemm_spec s0, cg_gemm_spec s1)
{
	gemm_case t[2];
	const cg_gemm_spec specs[2] = {s0, s1};
	cg_module *m = cg_module_create("pair");
	case_init(&t[0], s0, 71);
	case_init(&t[1], s1, 72);
	ck_assert(cg_gemm_add(m, "g0", &s0));
	ck_assert(cg_gemm_add(m, "g1", &s1));
	ck_assert_msg(cg_module_jit(m), "%s", cg_module_error(m));
	for (int i = 0; i < 2; i++) {
		gemm_fn fn;
		void *addr = cg_module_lookup(m, i ? "g1" : "g0");
		ck_assert_ptr_nonnull(addr);
		memcpy(&fn, &addr, sizeof fn);
		float *c = malloc(t[i].n_c * sizeof *c);
		ck_assert_ptr_nonnull(c);
		memcpy(c, t[i].c, t[i].n_c * sizeof *c);
		cg_threads_set(2);
		fn(t[i].a, t[i].b, c);
		float *alone = case_run(&t[i], 2);
		ck_assert_mem_eq(c, alone, t[i].n_c * sizeof *c);
		ck_assert_double_lt(case_error(&t[i], c), 1e-5);
		free(alone);
		free(c);
		case_fini(&t[i]);
	}
	cg_module_destroy(m);
	ck_assert_int_gt(micro_kernels(specs, 1), 0);
	if (s0.m == s1.m && s0.n == s1.n)
		ck_assert_int_eq(micro_kernels(specs, 2),
				 micro_kernels(specs, 1));
}

/* Sgemms of different sizes whose code is of one kind (how A and B are
 * stored and packed, the epilogue, the zero rows left out) share one
 * loop nest, the sizes its arguments: one function in the module for
 * all of them, and each product, with or without tails (M not a
 * multiple of 6, N not of NR), gives bit for bit what it gives in a
 * module of its own, close to the float64 reference. */
START_TEST(test_gemm_shapes_share_one_loop_nest)
{
	static const int64_t sizes[][3] = {{97, 211, 300},
					   {65, 33, 17},
					   {640, 64, 200},
					   {12, 32, 600}};
	for (int kind = 0; kind < 3; kind++) {
		cg_gemm_spec specs[4];
		for (int i = 0; i < 4; i++) {
			specs[i] = shape(sizes[i][0], sizes[i][1], sizes[i][2]);
			/* skip_zero_m shares the nest that multiplies the
			 * rows kept in place (A not packed). */
			specs[i].pack = kind == 2 ? CG_GEMM_PACK_B
						  : CG_GEMM_PACK_AB;
			specs[i].ta = kind == 1;
			specs[i].tb = kind == 2;
			specs[i].skip_zero_k = kind == 1;
			specs[i].skip_zero_m = kind == 2;
		}
		ck_assert_int_eq(defined_fns(specs, 4, "@sgemm.nest."), 1);
		for (int i = 0; i < 3; i++)
			check_shared_pair(specs[i], specs[i + 1]);
	}
	/* Not packed, reading A and B in place: one nest too. */
	cg_gemm_spec flat[3] = {shape(7, 13, 5), shape(65, 33, 17),
				shape(10, 10, 8)};
	ck_assert_int_eq(defined_fns(flat, 3, "@sgemm.nest."), 1);
	check_shared_pair(flat[0], flat[1]);
}
END_TEST

/* The sgemm variants of a module share their micro-kernels by tile
 * shape: their strides in place are arguments. */
START_TEST(test_gemm_variants_share_micro_kernels)
{
	for (int tr = 0; tr < 4; tr++) {
		for (int pack = 0; pack < 4; pack++) {
			cg_gemm_spec s0 = shape(23, 37, 19), s1 = s0;
			s0.ta = s1.ta = tr & 1;
			s0.tb = s1.tb = tr & 2;
			s0.pack = s1.pack = (cg_gemm_pack)pack;
			s0.vector_width = s1.vector_width = widths[pack % 2];
			s1.lda = 41;
			s1.ldb = 50;
			s1.ldc = 45;
			check_shared_pair(s0, s1);
		}
	}
	/* With an epilogue of two terms: their row strides differ too. */
	cg_gemm_spec s0 = shape(13, 40, 24), s1 = s0;
	s0.n_epilogue = s1.n_epilogue = 2;
	s1.epilogue_rs[0] = 40;
	s1.epilogue_rs[1] = 0;
	s0.epilogue_rs[0] = 0;
	s0.epilogue_rs[1] = 40;
	const cg_gemm_spec specs[2] = {s0, s1};
	ck_assert_int_gt(micro_kernels(specs, 1), 0);
	ck_assert_int_eq(micro_kernels(specs, 2), micro_kernels(specs, 1));
}
END_TEST

/* The packing routines stay functions of their own through O3, not
 * inlined into each loop nest that calls them (each copy would be
 * optimized and compiled again), and two sgemms that pack alike share
 * one of each: C's row stride differs, and so do A's and B's, which
 * are the routines' argument (each constant in its own routine, they
 * made one routine a sgemm). */
START_TEST(test_gemm_packing_is_one_function_per_code)
{
	for (int tr = 0; tr < 4; tr++) {
		cg_gemm_spec s0 = shape(23, 37, 19), s1 = s0;
		s0.ta = s1.ta = tr & 1;
		s0.tb = s1.tb = tr & 2;
		s0.pack = s1.pack = CG_GEMM_PACK_AB;
		s1.lda = 41;
		s1.ldb = 50;
		s1.ldc = 45;
		const cg_gemm_spec specs[2] = {s0, s1};
		ck_assert_int_eq(defined_fns(specs, 1, "@sgemm.pack_a."), 1);
		ck_assert_int_eq(defined_fns(specs, 1, "@sgemm.pack_b."), 1);
		ck_assert_int_eq(defined_fns(specs, 2, "@sgemm.pack_a."), 1);
		ck_assert_int_eq(defined_fns(specs, 2, "@sgemm.pack_b."), 1);
		check_shared_pair(s0, s1);
	}
}
END_TEST

/* How many times `what` occurs in the body of the function named
 * `fn` in the optimized IR of a module with the sgemm g0 of spec. */
static int count_in_fn(const cg_gemm_spec *spec, const char *fn,
		       const char *what)
{
	char *ir = gemms_ir(spec, 1), head[64];
	/* A name ending in '.' is the start of one. */
	snprintf(head, sizeof head, "@%s%s", fn,
		 fn[strlen(fn) - 1] == '.' ? "" : "(");
	const char *at = strstr(ir, head), *end = at ? strstr(at, "\n}") : NULL;
	ck_assert_msg(at && end, "no function %s", fn);
	int n = 0;
	for (; (at = strstr(at, what)) && at < end; at++)
		n++;
	free(ir);
	return n;
}

/* The packing routines' loops are not unrolled: packing A^T in runs of
 * 8 stored rows stores each row's piece of a panel once in the run's
 * loop over the panels and once for the last partial panel, and a row
 * packed alone the same, 18 masked stores; O3's unswitching on whether
 * there is a partial panel copies the two loops over the panels (27).
 * Unrolled, they were 99. */
START_TEST(test_gemm_packing_loops_are_not_unrolled)
{
	cg_gemm_spec spec = shape(23, 37, 19);
	spec.ta = true;
	spec.pack = CG_GEMM_PACK_AB;
	ck_assert_int_eq(count_in_fn(&spec, "sgemm.pack_a.t.r5",
				     "call void @llvm.masked.store"),
			 27);
}
END_TEST

/* How many times `what` occurs in the optimized IR of a module with
 * the sgemm g0 of spec. */
static int count_in_module(const cg_gemm_spec *spec, const char *what)
{
	char *ir = gemms_ir(spec, 1);
	int n = 0;
	for (const char *at = ir; (at = strstr(at, what)); at++)
		n++;
	free(ir);
	return n;
}

/* The loop nest stays rolled: 256 columns are 8 panels of NR = 32
 * (their count known), and O3 unrolled the tile loop over them, one
 * call of a tile's micro-kernel per panel: 8 calls (16 when the kernels
 * were called directly, by a switch), where the rolled loop has one,
 * of the kernel it chose (full rows or the last 4), through a pointer. */
START_TEST(test_gemm_loop_nest_is_not_unrolled)
{
	cg_gemm_spec spec = shape(64, 256, 64);
	spec.vector_width = 16;
	spec.pack = CG_GEMM_PACK_AB;
	ck_assert_int_eq(count_in_module(&spec, ", !callees !"), 1);
}
END_TEST

/* The scan for a row of zeros (skip_zero_m's rows of A, 56 floats
 * each: the 12-layer GPT's gradients) stays a rolled loop that stops
 * at the first nonzero: O3 unrolled it in full, 56 compares and
 * branches in every sgemm that skips zero rows. */
START_TEST(test_gemm_zero_row_scan_is_not_unrolled)
{
	cg_gemm_spec spec = shape(2048, 64, 56);
	spec.skip_zero_m = true;
	ck_assert_int_lt(count_in_module(&spec, "fcmp une float"), 8);
}
END_TEST

/* skip_zero_k's table of where each k-block starts is filled by a loop
 * in the call's buffer: the code does not grow with K. It was a stack
 * array filled by one store a block, unrolled in the IR: the
 * Transformer's weight gradients at --batch 1000000 (K = 10,000,000
 * rows) spent minutes in InstCombine, and a table that large would not
 * fit a thread's stack. */
START_TEST(test_gemm_skip_zero_k_code_does_not_grow_with_k)
{
	int lines[2];
	for (int i = 0; i < 2; i++) {
		cg_gemm_spec spec = shape(64, 64, i ? 1000000 : 100000);
		spec.ta = true;
		spec.skip_zero_k = true;
		lines[i] = count_in_module(&spec, "\n");
	}
	ck_assert_int_lt(lines[1], lines[0] + 20);
}
END_TEST

START_TEST(test_gemm_micro_kernel_is_fma_on_eight_floats)
{
	cg_gemm_spec spec = shape(1024, 1024, 1024);
	spec.vector_width = 8;
	char *ir = emit_text(&spec, CG_EMIT_LLVM);
	ck_assert_ptr_nonnull(strstr(ir, "@llvm.fma.v8f32(<8 x float>"));
	ck_assert_ptr_nonnull(
		strstr(ir, "define void @sgemm(ptr noalias nocapture readonly"));
	ck_assert_ptr_nonnull(strstr(ir, "@GOMP_parallel"));
	free(ir);
	char *as = emit_text(&spec, CG_EMIT_ASM);
	ck_assert_ptr_nonnull(strstr(as, "vfmadd231ps\t%ymm"));
	ck_assert_ptr_nonnull(strstr(as, "vbroadcastss"));
	free(as);
}
END_TEST

START_TEST(test_gemm_micro_kernel_is_fma_on_sixteen_floats_with_avx512)
{
	cg_gemm_spec spec = shape(1024, 1024, 1024);
	spec.vector_width = 16;
	char *ir = emit_text(&spec, CG_EMIT_LLVM);
	ck_assert_ptr_nonnull(strstr(ir, "@llvm.fma.v16f32(<16 x float>"));
	free(ir);
	cg_gemm_plan host = plan_of(shape(8, 8, 8));
	if (host.vw == 16) { /* the host has AVX-512: zmm registers */
		char *as = emit_text(&spec, CG_EMIT_ASM);
		ck_assert_ptr_nonnull(strstr(as, "vfmadd231ps\t%zmm"));
		free(as);
	}
}
END_TEST

/* The micro-kernel asks for its C tile's lines before its k-loop (for
 * writing), and packing A^T asks for the stored rows ahead (for
 * reading); prefetches are hints, so the numerics tests above cover
 * what they compute, past the end of A^T too. */
START_TEST(test_gemm_prefetches_c_and_transposed_a)
{
	cg_gemm_spec spec = shape(1024, 256, 1024);
	spec.vector_width = 16;
	char *ir = emit_text(&spec, CG_EMIT_LLVM);
	ck_assert_ptr_nonnull(strstr(ir, "@llvm.prefetch.p0(ptr"));
	ck_assert_ptr_nonnull(strstr(ir, "i32 1, i32 3, i32 1)"));
	free(ir);
	ck_assert_int_eq(count_in_fn(&spec, "sgemm.pack_a.n.r4",
				     "i32 0, i32 3, i32 1)"),
			 0);
	spec.ta = true;
	ck_assert_int_gt(count_in_fn(&spec, "sgemm.pack_a.t.r4",
				     "i32 0, i32 3, i32 1)"),
			 0);
	char *as = emit_text(&spec, CG_EMIT_ASM); /* prefetchw needs PRFCHW */
	ck_assert_ptr_nonnull(strstr(as, "prefetcht0\t"));
	free(as);
}
END_TEST

/* The loop nest asks for the next blocks that packing will read while
 * the tiles of this one run: A's next rows (or its first rows at the
 * next k-block) and B's next k-block; with nothing packed, nothing.
 * Prefetches are hints: the numerics tests (operands packed, k-blocks
 * and row blocks past one, lines past the operands' ends) cover what
 * the products compute. */
START_TEST(test_gemm_prefetches_the_next_blocks_to_pack)
{
	const char *read = "i32 0, i32 3, i32 1)";
	cg_gemm_spec spec = shape(1024, 256, 1024);
	spec.pack = CG_GEMM_PACK_AB;
	int ab = count_in_fn(&spec, "sgemm.nest.", read);
	spec.pack = CG_GEMM_PACK_B;
	int b = count_in_fn(&spec, "sgemm.nest.", read);
	ck_assert_int_gt(b, 0);
	ck_assert_int_gt(ab, b);
	spec.pack = CG_GEMM_PACK_NONE;
	ck_assert_int_eq(count_in_fn(&spec, "sgemm.nest.", read), 0);
}
END_TEST

START_TEST(test_gemm_of_tiny_shape_starts_no_threads)
{
	cg_gemm_spec spec = shape(10, 10, 8);
	char *ir = emit_text(&spec, CG_EMIT_LLVM);
	ck_assert_ptr_null(strstr(ir, "GOMP_parallel"));
	ck_assert_ptr_null(strstr(ir, "aligned_alloc"));
	free(ir);
}
END_TEST

/* With A in place, skip_zero_m multiplies the rows it keeps where they
 * are: its full-height micro-kernels (`.mg`) read A's rows and write C's
 * through a list of their numbers, and the call's buffer is that list
 * (on the stack), not copies of the rows and of their product (80 KB
 * for the Transformer's dY W^T, 320x32 with K = 32: a heap allocation a
 * call). With A packed, it copies them. */
START_TEST(test_gemm_multiplies_the_rows_it_keeps_in_place)
{
	cg_gemm_spec spec = shape(320, 32, 32);
	spec.tb = true;
	spec.skip_zero_m = true;
	ck_assert(!plan_of(spec).pack_a);
	char *ir = emit_text(&spec, CG_EMIT_LLVM);
	ck_assert_ptr_nonnull(strstr(ir, ".6x32.an.bp.e0.mg("));
	ck_assert_ptr_null(strstr(ir, "aligned_alloc"));
	free(ir);
	spec.pack = CG_GEMM_PACK_AB;
	ir = emit_text(&spec, CG_EMIT_LLVM);
	ck_assert_ptr_null(strstr(ir, ".mg("));
	free(ir);
}
END_TEST

/* Unpacked, skip_zero_k reads the k it keeps in place: its micro-kernels
 * (`.kg`) step through a list of their numbers, and the call's buffer
 * is that list (on the stack), not copies of A's columns and B's rows
 * (80 KB for the Transformer's X^T dY, 32x32 with K = 320: a heap
 * allocation a call). Packed, it copies them. */
START_TEST(test_gemm_reads_the_k_it_keeps_in_place_when_unpacked)
{
	cg_gemm_spec spec = shape(32, 32, 320);
	spec.ta = true;
	spec.skip_zero_k = true;
	ck_assert(!plan_of(spec).pack_a && !plan_of(spec).pack_b);
	char *ir = emit_text(&spec, CG_EMIT_LLVM);
	ck_assert_ptr_nonnull(strstr(ir, ".e0.kg("));
	ck_assert_ptr_null(strstr(ir, "aligned_alloc"));
	free(ir);
	spec.pack = CG_GEMM_PACK_AB;
	ir = emit_text(&spec, CG_EMIT_LLVM);
	ck_assert_ptr_null(strstr(ir, ".kg("));
	free(ir);
}
END_TEST

/* ---- plan -------------------------------------------------------------------- */

START_TEST(test_plan_reads_the_books_small_shapes_in_place)
{
	cg_gemm_plan p = plan_of(shape(640, 200, 32));
	ck_assert(p.vw == 8 || p.vw == 16);
	ck_assert_int_eq(p.nr, 2 * p.vw);
	ck_assert(!p.pack_a && !p.pack_b);
	ck_assert_int_eq(p.kc, 32);
	ck_assert(p.split_rows);
	p = plan_of((cg_gemm_spec){.m = 10, .n = 10, .k = 8, .tb = true});
	ck_assert(!p.pack_a && p.pack_b); /* B^T rows are not contiguous */
	ck_assert_int_eq(p.max_threads, 1);
}
END_TEST

/* A weight gradient that leaves out the k of B's rows of zeros reads A
 * and B in place while B holds at most 128K floats (the Transformer's
 * vocabulary head, 32x170 by K = 320: 54K), where a plain product packs
 * B from 32K; a larger one (the GPT's 256x1024 by K = 1,024) packs. */
START_TEST(test_plan_reads_a_gradient_leaving_out_k_in_place_up_to_128k)
{
	cg_gemm_spec spec = shape(32, 170, 320);
	spec.ta = true;
	cg_gemm_plan p = plan_of(spec);
	ck_assert(p.pack_a && p.pack_b);
	spec.skip_zero_k = true;
	p = plan_of(spec);
	ck_assert(!p.pack_a && !p.pack_b);
	spec.n = 409; /* 409 x 320 = 130,880 floats: the most in place */
	ck_assert(!plan_of(spec).pack_b);
	spec.n = 410;
	p = plan_of(spec);
	ck_assert(p.pack_a && p.pack_b);
	spec = shape(256, 1024, 1024);
	spec.ta = true;
	spec.skip_zero_k = true;
	ck_assert(plan_of(spec).pack_b);
}
END_TEST

static cg_gemm_plan plan_vw(int64_t m, int64_t n, int64_t k, int vw)
{
	cg_gemm_spec spec = shape(m, n, k);
	spec.vector_width = vw;
	return plan_of(spec);
}

START_TEST(test_plan_packs_and_blocks_large_shapes)
{
	cg_gemm_plan p = plan_vw(1024, 1024, 1024, 8);
	ck_assert(p.pack_a && p.pack_b);
	ck_assert_int_eq(p.kc, 256);
	ck_assert_int_eq(p.mc, 144);
	ck_assert_int_eq(p.nc, 1024);
	ck_assert_int_eq(p.max_threads, 171); /* one per row panel */
	p = plan_vw(100, 100, 300, 8);        /* two balanced k-blocks */
	ck_assert_int_eq(p.kc, 150);
	ck_assert_int_eq(p.mc, 102);
	p = plan_vw(12, 5000, 64, 8);
	ck_assert(!p.split_rows);
	ck_assert_int_eq(p.nr, 16);
	ck_assert_int_eq(p.nc, 2512); /* two n-blocks of 157 panels */
	p = plan_vw(12, 5000, 64, 16);
	ck_assert_int_eq(p.nr, 32);
	ck_assert_int_eq(p.nc, 2528); /* two n-blocks of 79 panels */
}
END_TEST

/* With 16-float vectors a product 256 to 512 columns wide takes
 * k-blocks of at most 128 (a B panel of 16 KB, which stays in L1),
 * balanced as the longer ones; a narrower or wider one, or 8-float
 * vectors, 256 (the book's products keep their sums). */
START_TEST(test_plan_takes_short_k_blocks_for_narrow_products_of_zmm)
{
	ck_assert_int_eq(plan_vw(1024, 256, 1024, 16).kc, 128);
	ck_assert_int_eq(plan_vw(1024, 256, 256, 16).kc, 128);
	ck_assert_int_eq(plan_vw(256, 512, 1024, 16).kc, 128);
	ck_assert_int_eq(plan_vw(100, 300, 300, 16).kc, 100);
	ck_assert_int_eq(plan_vw(100, 255, 300, 16).kc, 150);
	ck_assert_int_eq(plan_vw(32, 64, 640, 16).kc, 214);
	ck_assert_int_eq(plan_vw(1024, 513, 1024, 16).kc, 256);
	ck_assert_int_eq(plan_vw(1024, 1024, 256, 16).kc, 256);
	ck_assert_int_eq(plan_vw(1024, 256, 1024, 8).kc, 256);
}
END_TEST

/* Threads split the side that leaves them the smaller operand to read
 * whole: a weight gradient X^T dY of 256×1024 (K = 1,024 tokens) splits
 * its columns (each thread packs A, 1 MB, not B, 4 MB), a square one or
 * one with more rows its rows, a batch its rows across the products. */
START_TEST(test_plan_splits_the_side_of_the_larger_operand)
{
	cg_gemm_spec spec = shape(256, 1024, 1024);
	spec.ta = true;
	spec.vector_width = 16;
	cg_gemm_plan p = plan_of(spec);
	ck_assert(!p.split_rows);
	ck_assert_int_eq(p.parts, 32);
	spec.n = 512; /* the tied head's weight gradient */
	ck_assert(!plan_of(spec).split_rows);
	spec.n = 256; /* q, k, v, o: the same size either way */
	ck_assert(plan_of(spec).split_rows);
	ck_assert(plan_vw(1024, 256, 1024, 16).split_rows);
	ck_assert(plan_vw(1024, 1024, 256, 16).split_rows);
	ck_assert(plan_vw(100, 400, 64, 16).split_rows); /* 13 column panels */
	ck_assert(!plan_vw(100, 400, 64, 8).split_rows); /* 25 of 16 columns */
	spec = shape(64, 1024, 64);
	spec.batch = 4;
	spec.stride_a = 64 * 64;
	spec.stride_b = 64 * 1024;
	spec.stride_c = 64 * 1024;
	ck_assert(!plan_of(spec).split_rows); /* as before: 11 row panels */
	spec.m = 96;
	spec.stride_a = 96 * 64;
	spec.stride_c = 96 * 1024;
	ck_assert(plan_of(spec).split_rows); /* 16 row panels a product */
}
END_TEST

START_TEST(test_plan_fills_in_dense_leading_dimensions)
{
	cg_gemm_plan p = plan_of(
		(cg_gemm_spec){.m = 3, .n = 4, .k = 5, .ta = true});
	ck_assert_int_eq(p.lda, 3);
	ck_assert_int_eq(p.ldb, 4);
	ck_assert_int_eq(p.ldc, 4);
	p = plan_of((cg_gemm_spec){.m = 3, .n = 4, .k = 5, .tb = true});
	ck_assert_int_eq(p.lda, 5);
	ck_assert_int_eq(p.ldb, 5);
}
END_TEST

START_TEST(test_plan_rejects_bad_specs)
{
	static const cg_gemm_spec bad[] = {
		{.m = 0, .n = 4, .k = 4},
		{.m = 4, .n = 4, .k = -1},
		{.m = 4, .n = 8, .k = 4, .lda = 3},
		{.m = 4, .n = 8, .k = 4, .ta = true, .lda = 3},
		{.m = 4, .n = 8, .k = 4, .ldb = 7},
		{.m = 4, .n = 8, .k = 4, .tb = true, .ldb = 3},
		{.m = 4, .n = 8, .k = 4, .ldc = 7},
		{.m = 4, .n = 8, .k = 4, .grain = -1},
		{.m = 4, .n = 8, .k = 4, .vector_width = 4},
		{.m = 4, .n = 8, .k = 4, .batch = -1},
		{.m = 4, .n = 8, .k = 4, .batch = 2, .stride_c = 31}, /* overlap */
		{.m = 4, .n = 8, .k = 4, .batch = 2, .stride_a = -1, .stride_c = 32},
		{.m = 4, .n = 8, .k = 4, .tb = true, .skip_zero_k = true},
		{.m = 4,
		 .n = 8,
		 .k = 4,
		 .batch = 2,
		 .stride_c = 32,
		 .skip_zero_k = true},
		{.m = 4,
		 .n = 8,
		 .k = 4,
		 .batch = 2,
		 .stride_c = 32,
		 .skip_zero_m = true},
		{.m = 4, .n = 8, .k = 4, .skip_zero_k = true, .skip_zero_m = true},
		{.m = 4, .n = 8, .k = 4, .n_epilogue = 3},
		{.m = 4, .n = 8, .k = 4, .n_epilogue = 1, .epilogue_rs = {7}},
		{.m = 4, .n = 8, .k = 4, .n_epilogue = 1, .accumulate = true},
		{.m = 4, .n = 8, .k = 4, .n_epilogue = 1, .skip_zero_m = true},
		{.m = 4,
		 .n = 8,
		 .k = 4,
		 .batch = 2,
		 .stride_c = 32,
		 .n_epilogue = 1},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cg_gemm_plan p;
		char err[256] = "";
		ck_assert(!cg_gemm_plan_make(&bad[i], &p, err, sizeof err));
		ck_assert_msg(strstr(err, "gemm") != NULL, "case %zu: '%s'", i,
			      err);
	}
}
END_TEST

/* ---- the module ------------------------------------------------------------- */

START_TEST(test_module_reports_a_bad_gemm_and_stays_failed)
{
	cg_module *m = cg_module_create("bad");
	cg_gemm_spec spec = shape(4, 4, 4);
	spec.ldc = 2;
	ck_assert_ptr_null(cg_module_error(m));
	ck_assert(!cg_gemm_add(m, "g", &spec));
	ck_assert_ptr_nonnull(
		strstr(cg_module_error(m), "gemm g: gemm leading dimension"));
	ck_assert(!cg_module_jit(m));
	ck_assert_ptr_null(cg_module_lookup(m, "g"));
	cg_module_destroy(m);
}
END_TEST

START_TEST(test_module_rejects_a_name_twice)
{
	cg_module *m = cg_module_create("twice");
	cg_gemm_spec spec = shape(4, 4, 4);
	ck_assert(cg_gemm_add(m, "g", &spec));
	ck_assert(!cg_gemm_add(m, "g", &spec));
	ck_assert_ptr_nonnull(strstr(cg_module_error(m), "name is taken"));
	cg_module_destroy(m);
}
END_TEST

START_TEST(test_module_closes_after_optimization)
{
	cg_module *m = cg_module_create("closed");
	cg_gemm_spec spec = shape(4, 4, 4);
	ck_assert(cg_gemm_add(m, "g", &spec));
	ck_assert(cg_module_optimize(m));
	ck_assert(cg_module_optimize(m)); /* idempotent */
	ck_assert(!cg_gemm_add(m, "h", &spec));
	ck_assert_ptr_nonnull(strstr(cg_module_error(m), "closed"));
	cg_module_destroy(m);
}
END_TEST

START_TEST(test_module_lookup_of_unknown_name_fails)
{
	cg_module *m = cg_module_create("lookup");
	cg_gemm_spec spec = shape(4, 4, 4);
	ck_assert(cg_gemm_add(m, "g", &spec));
	ck_assert_ptr_null(cg_module_lookup(m, "g")); /* before the JIT */
	cg_module_destroy(m);
	m = cg_module_create("lookup");
	ck_assert(cg_gemm_add(m, "g", &spec));
	ck_assert(cg_module_jit(m));
	ck_assert_ptr_null(cg_module_lookup(m, "nope"));
	ck_assert_ptr_nonnull(strstr(cg_module_error(m), "nope"));
	cg_module_destroy(m);
}
END_TEST

/* Whether the NUL-terminated string s occurs in buf[0..n). */
static bool has_bytes(const unsigned char *buf, size_t n, const char *s)
{
	size_t len = strlen(s) + 1;
	for (size_t i = 0; i + len <= n; i++)
		if (memcmp(buf + i, s, len) == 0)
			return true;
	return false;
}

START_TEST(test_module_emits_a_relocatable_pic_object)
{
	cg_module *m = cg_module_create("obj");
	cg_gemm_spec spec = shape(256, 64, 64); /* big enough for threads */
	char path[] = "/tmp/attnc_cg_XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert(cg_gemm_add(m, "sgemm_256", &spec));
	ck_assert_msg(cg_module_emit(m, CG_EMIT_OBJ, path), "%s",
		      cg_module_error(m));

	FILE *fp = fopen(path, "rb");
	unsigned char buf[1 << 16];
	size_t n = fread(buf, 1, sizeof buf, fp);
	fclose(fp);
	unlink(path);
	ck_assert_uint_gt(n, 64);
	ck_assert_int_eq(memcmp(buf, "\177ELF", 4), 0);
	ck_assert_int_eq(buf[4], 2);   /* 64-bit */
	ck_assert_int_eq(buf[16], 1);  /* e_type ET_REL */
	ck_assert_int_eq(buf[18], 62); /* EM_X86_64 */
	ck_assert(has_bytes(buf, n, "sgemm_256"));
	ck_assert(has_bytes(buf, n, "GOMP_parallel"));

	/* The module is still whole: it runs after emission. */
	ck_assert(cg_module_jit(m));
	ck_assert_ptr_nonnull(cg_module_lookup(m, "sgemm_256"));
	ck_assert(!cg_module_emit(m, CG_EMIT_OBJ, path));
	ck_assert_ptr_nonnull(strstr(cg_module_error(m), "JIT"));
	cg_module_destroy(m);
}
END_TEST

/* A C program that multiplies ones (256×64) by B[p][j] = j (64×64):
 * every C[i][j] must be 64·j. */
static const char link_main[] =
	"#include <stdio.h>\n"
	"void sgemm_256(const float *A, const float *B, float *C);\n"
	"static float a[256 * 64], b[64 * 64], c[256 * 64];\n"
	"int main(void) {\n"
	"  for (int i = 0; i < 256 * 64; i++) a[i] = 1;\n"
	"  for (int i = 0; i < 64 * 64; i++) b[i] = (float)(i % 64);\n"
	"  sgemm_256(a, b, c);\n"
	"  for (int i = 0; i < 256 * 64; i++)\n"
	"    if (c[i] != 64.0f * (float)(i % 64)) { puts(\"wrong\"); return 1; }\n"
	"  puts(\"ok\");\n"
	"  return 0;\n"
	"}\n";

START_TEST(test_module_object_links_into_a_program_that_runs_it)
{
	char dir[] = "/tmp/attnc_cg_link_XXXXXX", path[512], cmd[2048];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	cg_module *m = cg_module_create("link");
	cg_gemm_spec spec = shape(256, 64, 64);
	ck_assert(cg_gemm_add(m, "sgemm_256", &spec));
	snprintf(path, sizeof path, "%s/sgemm.o", dir);
	ck_assert_msg(cg_module_emit(m, CG_EMIT_OBJ, path), "%s",
		      cg_module_error(m));
	cg_module_destroy(m);
	snprintf(path, sizeof path, "%s/main.c", dir);
	FILE *fp = fopen(path, "w");
	ck_assert_ptr_nonnull(fp);
	fputs(link_main, fp);
	fclose(fp);

	/* The compiler's default is a PIE executable: the object must be PIC. */
	snprintf(cmd, sizeof cmd,
		 "cd %s && cc -o prog main.c sgemm.o -lgomp && ./prog > out.txt",
		 dir);
	int rc = system(cmd);
	snprintf(path, sizeof path, "%s/out.txt", dir);
	char out[64] = "";
	fp = fopen(path, "r");
	if (fp) {
		if (!fgets(out, sizeof out, fp))
			out[0] = '\0';
		fclose(fp);
	}
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(rc, 0);
	ck_assert_str_eq(out, "ok\n");
}
END_TEST

START_TEST(test_module_counts_functions_and_times_compilation)
{
	cg_module *m = cg_module_create("stats");
	cg_gemm_spec spec = shape(65, 33, 17);
	ck_assert(cg_gemm_add(m, "g", &spec));
	ck_assert(cg_module_jit(m));
	cg_module_stats st = cg_module_stats_get(m);
	/* 4 micro-kernels (65x33 has both edges), work, entry, range; too
	 * small for threads (no par) or packing. */
	ck_assert_int_eq(st.n_functions, 7);
	ck_assert_double_gt(st.opt_ms, 0);
	ck_assert_double_gt(st.jit_ms, 0);
	cg_module_destroy(m);
}
END_TEST

START_TEST(test_threads_set_is_read_back)
{
	cg_threads_set(3);
	ck_assert_int_eq(cg_threads_get(), 3);
	cg_threads_set(0);
	ck_assert_int_eq(cg_threads_get(), 1);
}
END_TEST

/* ---- the epilogue ---------------------------------------------------------- */

typedef void (*gemm_epi_fn)(const float *A, const float *B, float *C,
			    const float *E0, const float *E1, int n_threads);

/* Runs spec (with its epilogue of two terms e0, e1), compiled once with
 * the thread count an argument, on 1 and 2 threads, each into a copy of
 * C: *c1 and *c2. */
static void epilogue_run(const gemm_case *t, const float *e0, const float *e1,
			 float **c1, float **c2)
{
	cg_module *m = cg_module_create("test");
	cg_gemm_spec spec = t->spec;
	spec.is_threads_arg = true;
	ck_assert_ptr_nonnull(m);
	ck_assert_msg(cg_gemm_add(m, "gemm", &spec), "%s", cg_module_error(m));
	ck_assert_msg(cg_module_jit(m), "%s", cg_module_error(m));
	void *addr = cg_module_lookup(m, "gemm");
	gemm_epi_fn fn;
	memcpy(&fn, &addr, sizeof fn);
	float **out[2] = {c1, c2};
	for (int i = 0; i < 2; i++) {
		float *c = malloc(t->n_c * sizeof *c);
		ck_assert_ptr_nonnull(c);
		memcpy(c, t->c, t->n_c * sizeof *c);
		fn(t->a, t->b, c, e0, e1, i + 1);
		*out[i] = c;
	}
	cg_module_destroy(m);
}

/* The shapes (one to three k-blocks, edge tiles), transposes, packings
 * and widths of the epilogue cases. */
static const int64_t epi_shapes[][3] = {
	{1, 1, 1}, {7, 13, 5}, {65, 33, 17}, {97, 211, 300}, {40, 300, 600},
};

/* The sgemm with a bias (row stride 0) and a residual (row stride rs)
 * in its epilogue stores what the plain sgemm's product gives after two
 * separate float adds, to the bit, on 1 thread and 2. */
START_TEST(test_gemm_epilogue_is_the_product_then_two_adds)
{
	for (size_t s = 0; s < 5; s++) {
		for (int v = 0; v < 8; v++) {
			cg_gemm_spec spec = shape(epi_shapes[s][0],
						  epi_shapes[s][1],
						  epi_shapes[s][2]);
			spec.ta = v & 1;
			spec.tb = v & 2;
			spec.pack = (cg_gemm_pack)((s + (size_t)v) % 4);
			spec.vector_width = widths[(v >> 2) & 1];
			spec.ldc = v & 4 ? spec.n + 2 : 0;
			int64_t rs = spec.n + (v & 4 ? 3 : 0);
			gemm_case t;
			case_init(&t, spec, 900 + s);
			uint64_t seed = 77 + s;
			float *e0 = rand_matrix((size_t)spec.n, &seed);
			float *e1 = rand_matrix((size_t)(spec.m * rs), &seed);
			float *want = case_run(&t, 1);
			for (int64_t i = 0; i < spec.m; i++)
				for (int64_t j = 0; j < spec.n; j++) {
					float *w = &want[i * t.plan.ldc + j];
					*w = *w + e0[j];
					*w = *w + e1[i * rs + j];
				}
			t.spec.n_epilogue = 2;
			t.spec.epilogue_rs[0] = 0;
			t.spec.epilogue_rs[1] = rs;
			float *c1, *c2;
			epilogue_run(&t, e0, e1, &c1, &c2);
			ck_assert_msg(memcmp(c1, want, t.n_c * sizeof *c1) == 0,
				      "%lldx%lldx%lld v %d: fused differs",
				      (long long)spec.m, (long long)spec.n,
				      (long long)spec.k, v);
			ck_assert(memcmp(c1, c2, t.n_c * sizeof *c1) == 0);
			free(c1);
			free(c2);
			free(want);
			free(e0);
			free(e1);
			case_fini(&t);
		}
	}
}
END_TEST

static Suite *codegen_suite(void)
{
	Suite *s = suite_create("codegen");
	TCase *num = tcase_create("gemm numerics");
	tcase_set_timeout(num, 120);
	tcase_add_test(num, test_gemm_matches_naive_loop_on_odd_shapes);
	tcase_add_test(num, test_gemm_matches_naive_loop_with_every_packing);
	tcase_add_test(num, test_gemm_reads_transposed_operands);
	tcase_add_test(num, test_gemm_packs_runs_of_rows_and_the_rows_left);
	tcase_add_test(num, test_gemm_adds_to_c_when_accumulating);
	tcase_add_test(num,
		       test_gemm_narrow_products_of_short_k_blocks_are_right);
	tcase_add_test(num, test_gemm_leaves_out_zero_rows_of_b);
	tcase_add_test(num,
		       test_gemm_keeps_a_zero_row_of_b_against_a_non_finite_a);
	tcase_add_test(num, test_gemm_leaves_out_zero_rows_of_a);
	tcase_add_test(num,
		       test_gemm_keeps_zero_rows_of_a_against_a_non_finite_b);
	tcase_add_test(num, test_gemm_leaving_out_zero_rows_of_a_keeps_the_bits);
	tcase_add_test(num,
		       test_gemm_leaving_out_zero_rows_of_a_adds_plus_zero_to_c);
	tcase_add_test(num, test_gemm_leaving_out_zero_rows_of_b_keeps_the_bits);
	tcase_add_test(num,
		       test_gemm_reads_the_k_it_keeps_in_place_when_unpacked);
	tcase_add_test(num, test_gemm_multiplies_the_rows_it_keeps_in_place);
	tcase_add_test(num, test_gemm_accumulates_one_hand_computed_product);
	tcase_add_test(num, test_gemm_keeps_to_leading_dimensions);
	tcase_add_test(num, test_gemm_multiplies_each_product_of_a_batch);
	tcase_add_test(num, test_gemm_results_do_not_depend_on_thread_count);
	tcase_add_test(num, test_gemm_range_parts_make_the_whole_product);
	tcase_add_test(num, test_gemm_computes_the_rows_given);
	tcase_add_test(num,
		       test_gemm_batch_results_do_not_depend_on_thread_count);
	tcase_add_test(num, test_gemm_takes_the_thread_count_as_an_argument);
	tcase_add_test(num, test_gemm_runs_on_more_threads_than_row_panels);
	tcase_add_test(num, test_gemm_columns_split_keeps_the_bits);
	suite_add_tcase(s, num);

	TCase *epi = tcase_create("gemm epilogue");
	tcase_set_timeout(epi, 120);
	tcase_add_test(epi, test_gemm_epilogue_is_the_product_then_two_adds);
	tcase_add_test(epi, test_gemm_computes_the_rows_given_with_an_epilogue);
	suite_add_tcase(s, epi);

	TCase *code = tcase_create("generated code and plan");
	tcase_set_timeout(code, 60);
	tcase_add_test(code, test_gemm_micro_kernel_is_fma_on_eight_floats);
	tcase_add_test(code, test_module_merges_functions_of_the_same_code);
	tcase_add_test(code, test_gemm_variants_share_micro_kernels);
	tcase_add_test(code, test_gemm_packing_is_one_function_per_code);
	tcase_add_test(code, test_gemm_packing_loops_are_not_unrolled);
	tcase_add_test(code, test_gemm_loop_nest_is_not_unrolled);
	tcase_add_test(code, test_gemm_shapes_share_one_loop_nest);
	tcase_add_test(code, test_gemm_zero_row_scan_is_not_unrolled);
	tcase_add_test(code, test_gemm_skip_zero_k_code_does_not_grow_with_k);
	tcase_add_test(code,
		       test_gemm_micro_kernel_is_fma_on_sixteen_floats_with_avx512);
	tcase_add_test(code, test_gemm_prefetches_c_and_transposed_a);
	tcase_add_test(code, test_gemm_prefetches_the_next_blocks_to_pack);
	tcase_add_test(code, test_gemm_of_tiny_shape_starts_no_threads);
	tcase_add_test(code, test_plan_reads_the_books_small_shapes_in_place);
	tcase_add_test(code,
		       test_plan_reads_a_gradient_leaving_out_k_in_place_up_to_128k);
	tcase_add_test(code, test_plan_packs_and_blocks_large_shapes);
	tcase_add_test(code,
		       test_plan_takes_short_k_blocks_for_narrow_products_of_zmm);
	tcase_add_test(code, test_plan_splits_the_side_of_the_larger_operand);
	tcase_add_test(code, test_plan_fills_in_dense_leading_dimensions);
	tcase_add_test(code, test_plan_rejects_bad_specs);
	suite_add_tcase(s, code);

	TCase *mod = tcase_create("module");
	tcase_set_timeout(mod, 60);
	tcase_add_test(mod, test_module_reports_a_bad_gemm_and_stays_failed);
	tcase_add_test(mod, test_module_rejects_a_name_twice);
	tcase_add_test(mod, test_module_closes_after_optimization);
	tcase_add_test(mod, test_module_lookup_of_unknown_name_fails);
	tcase_add_test(mod, test_module_emits_a_relocatable_pic_object);
	tcase_add_test(mod,
		       test_module_object_links_into_a_program_that_runs_it);
	tcase_add_test(mod, test_module_counts_functions_and_times_compilation);
	tcase_add_test(mod, test_threads_set_is_read_back);
	suite_add_tcase(s, mod);
	return s;
}

int main(void)
{
	return tu_run_suite(codegen_suite());
}
