/*
 * test_runtime.c - libattnrt's memory and parameter initialization: the
 * aligned blocks and the allocation hook, the size of a params block, and
 * every initializer, checked for exact values (zeros, ones), bounds and
 * statistics (uniform, xavier, normal), and bit for bit against the
 * reference interpreter's interp_params_init for the same seed.
 */
#include "attnrt.h"
#include "interp.h"
#include "testutil.h"

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A hook that counts calls and fails from allocation number fail_at on
 * (counting from 0; -1 never fails). */
typedef struct counting_hook {
	int n_allocs, n_frees, fail_at;
} counting_hook;

static void *counting_alloc(void *ud, void *ptr, size_t size)
{
	counting_hook *h = ud;
	if (size == 0) {
		if (ptr)
			h->n_frees++;
		free(ptr);
		return NULL;
	}
	if (h->fail_at >= 0 && h->n_allocs >= h->fail_at)
		return NULL;
	h->n_allocs++;
	return realloc(ptr, size);
}

START_TEST(test_alloc_gives_aligned_zeroed_blocks_through_the_hook)
{
	counting_hook h = {0, 0, -1};
	attnrt_allocator al = {counting_alloc, &h};
	for (size_t size = 0; size < 300; size += 37) {
		unsigned char *p = attnrt_alloc(&al, size);
		ck_assert_ptr_nonnull(p);
		ck_assert_uint_eq((uintptr_t)p % ATTNRT_ALIGN, 0);
		for (size_t i = 0; i < size; i++)
			ck_assert_uint_eq(p[i], 0);
		memset(p, 0xab, size); /* ASan: the whole block is ours */
		attnrt_free(&al, p);
	}
	ck_assert_int_eq(h.n_allocs, 9);
	ck_assert_int_eq(h.n_frees, 9);
	attnrt_free(&al, NULL);
	ck_assert_int_eq(h.n_frees, 9);
}
END_TEST

START_TEST(test_alloc_returns_null_when_the_hook_fails_or_size_is_absurd)
{
	counting_hook h = {0, 0, 0};
	attnrt_allocator al = {counting_alloc, &h};
	ck_assert_ptr_null(attnrt_alloc(&al, 64));
	ck_assert_ptr_null(attnrt_alloc(NULL, SIZE_MAX - 8));
	void *p = attnrt_alloc(NULL, 100); /* the C library by default */
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq((uintptr_t)p % 64, 0);
	attnrt_free(NULL, p);
}
END_TEST

/* Blocks of 4 MiB or more from the C library ask for huge pages (a
 * hint, whose effect depends on the kernel): they are aligned, zeroed
 * and wholly writable like any other. */
START_TEST(test_large_blocks_are_aligned_zeroed_and_whole)
{
	const size_t mib = (size_t)1 << 20;
	const size_t sizes[] = {4 * mib - 1, 4 * mib, 4 * mib + 37, 9 * mib + 5};
	for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
		unsigned char *p = attnrt_alloc(NULL, sizes[s]);
		ck_assert_ptr_nonnull(p);
		ck_assert_uint_eq((uintptr_t)p % ATTNRT_ALIGN, 0);
		for (size_t i = 0; i < sizes[s]; i++)
			if (p[i])
				ck_abort_msg("byte %zu of %zu is %u", i,
					     sizes[s], p[i]);
		memset(p, 0xab, sizes[s]); /* ASan: the whole block is ours */
		ck_assert_uint_eq(p[sizes[s] - 1], 0xab);
		attnrt_free(NULL, p);
	}
}
END_TEST

START_TEST(test_strerror_names_codes_and_ignores_the_node_bits)
{
	ck_assert_str_eq(attnrt_strerror(ATTNRT_OK), "ok");
	ck_assert_str_eq(attnrt_strerror(ATTNRT_ERR_INDEX | (17 << 8)),
			 "index out of range");
	ck_assert_str_eq(attnrt_strerror(ATTNRT_ERR_NOMEM), "out of memory");
	ck_assert_str_eq(attnrt_strerror(ATTNRT_ERR_FORMAT),
			 "malformed or truncated file");
	ck_assert_str_eq(attnrt_strerror(ATTNRT_ERR_OVERLAP | (3 << 8)),
			 "an output overlaps an input, params or another "
			 "output");
	ck_assert_str_eq(attnrt_strerror(99), "unknown error");
}
END_TEST

/* ---- params block --------------------------------------------------------- */

START_TEST(test_params_size_is_the_last_end_rounded_to_64)
{
	attnrt_param_info t[] = {
		{"a", 0, 2, {3, 5}, ATTNRT_INIT_ZEROS, 0, 0}, /* 60 bytes */
		{"b", 64, 1, {17}, ATTNRT_INIT_ZEROS, 0, 0},  /* to 132 */
		{"c", 192, 0, {0}, ATTNRT_INIT_ONES, 0, 0},   /* to 196 */
	};
	ck_assert_uint_eq(attnrt_params_size(t, 0), 0);
	ck_assert_uint_eq(attnrt_params_size(t, 1), 64);
	ck_assert_uint_eq(attnrt_params_size(t, 2), 192);
	ck_assert_uint_eq(attnrt_params_size(t, 3), 256);
}
END_TEST

START_TEST(test_init_fills_zeros_and_ones_exactly_and_leaves_gaps)
{
	attnrt_param_info t[] = {
		{"z", 0, 2, {2, 3}, ATTNRT_INIT_ZEROS, 0, 0},
		{"o", 64, 1, {5}, ATTNRT_INIT_ONES, 0, 0},
		{"s", 128, 0, {0}, ATTNRT_INIT_ONES, 0, 0},
	};
	float *p = attnrt_alloc(NULL, 192);
	for (int i = 0; i < 48; i++)
		p[i] = 7;
	ck_assert_int_eq(attnrt_params_init(t, 3, p, 1), ATTNRT_OK);
	for (int i = 0; i < 6; i++)
		ck_assert_float_eq(p[i], 0);
	ck_assert_float_eq(p[6], 7); /* between parameters: untouched */
	for (int i = 16; i < 21; i++)
		ck_assert_float_eq(p[i], 1);
	ck_assert_float_eq(p[21], 7);
	ck_assert_float_eq(p[32], 1); /* a scalar has one element */
	ck_assert_float_eq(p[33], 7);
	attnrt_free(NULL, p);
}
END_TEST

START_TEST(test_init_rejects_invalid_tables_and_leaves_params_untouched)
{
	float p[64];
	attnrt_param_info bad[][2] = {
		{{"ok", 0, 1, {4}, ATTNRT_INIT_ONES, 0, 0},
		 {"neg", 64, 1, {-1}, ATTNRT_INIT_ONES, 0, 0}},
		{{"ok", 0, 1, {4}, ATTNRT_INIT_ONES, 0, 0},
		 {"rank", 64, 7, {1}, ATTNRT_INIT_ONES, 0, 0}},
		{{"ok", 0, 1, {4}, ATTNRT_INIT_ONES, 0, 0},
		 {"odd", 66, 1, {1}, ATTNRT_INIT_ONES, 0, 0}},
		{{"ok", 0, 1, {4}, ATTNRT_INIT_ONES, 0, 0},
		 {NULL, 64, 1, {1}, ATTNRT_INIT_ONES, 0, 0}},
		{{"ok", 0, 1, {4}, ATTNRT_INIT_ONES, 0, 0},
		 {"kind", 64, 1, {1}, (attnrt_init)42, 0, 0}},
	};
	for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
		for (int i = 0; i < 64; i++)
			p[i] = -3;
		ck_assert_int_eq(attnrt_params_init(bad[k], 2, p, 0),
				 ATTNRT_ERR_ARG);
		for (int i = 0; i < 64; i++)
			ck_assert_float_eq(p[i], -3);
	}
	ck_assert_int_eq(attnrt_params_init(bad[0], 1, NULL, 0), ATTNRT_ERR_ARG);
}
END_TEST

/* Mean and standard deviation of n floats. */
static void moments(const float *x, size_t n, double *mean, double *sd)
{
	double s = 0, ss = 0;
	for (size_t i = 0; i < n; i++)
		s += x[i];
	*mean = s / (double)n;
	for (size_t i = 0; i < n; i++)
		ss += (x[i] - *mean) * (x[i] - *mean);
	*sd = sqrt(ss / (double)(n - 1));
}

START_TEST(test_xavier_uniform_stays_within_its_bound_and_fills_it)
{
	/* [64, 32]: bound = sqrt(6 / 96) = 0.25; gain 2 doubles it. */
	attnrt_param_info t[] = {
		{"w", 0, 2, {64, 32}, ATTNRT_INIT_XAVIER_UNIFORM, 1, 0},
		{"g", 8192, 2, {64, 32}, ATTNRT_INIT_XAVIER_UNIFORM, 2, 0},
	};
	float *p = attnrt_alloc(NULL, attnrt_params_size(t, 2));
	ck_assert_int_eq(attnrt_params_init(t, 2, p, 5), ATTNRT_OK);
	for (int k = 0; k < 2; k++) {
		const float *w = p + k * 2048;
		double bound = 0.25 * (k + 1), lo = 1, hi = -1, mean, sd;
		for (int i = 0; i < 2048; i++) {
			ck_assert(fabs(w[i]) <= bound);
			lo = fmin(lo, w[i]);
			hi = fmax(hi, w[i]);
		}
		ck_assert(lo < -0.98 * bound && hi > 0.98 * bound);
		moments(w, 2048, &mean, &sd);
		ck_assert(fabs(mean) < 0.05 * bound);
		/* uniform on [-b, b]: sd = b / sqrt(3) */
		ck_assert(fabs(sd - bound / sqrt(3)) < 0.03 * bound);
	}
	attnrt_free(NULL, p);
}
END_TEST

START_TEST(test_xavier_fans_count_leading_dims_and_vectors_use_their_length)
{
	/* [3, 4, 5]: fans 4*3 and 5*3, bound sqrt(6/27); [24]: sqrt(6/48). */
	attnrt_param_info t[] = {
		{"w3", 0, 3, {3, 4, 5}, ATTNRT_INIT_XAVIER_UNIFORM, 1, 0},
		{"v", 256, 1, {24}, ATTNRT_INIT_XAVIER_UNIFORM, 1, 0},
	};
	float p[96];
	ck_assert_int_eq(attnrt_params_init(t, 2, p, 9), ATTNRT_OK);
	double b3 = sqrt(6.0 / 27), bv = sqrt(6.0 / 48), m3 = 0, mv = 0;
	for (int i = 0; i < 60; i++)
		m3 = fmax(m3, fabs(p[i]));
	for (int i = 64; i < 88; i++)
		mv = fmax(mv, fabs(p[i]));
	ck_assert(m3 <= b3 && m3 > 0.8 * b3);
	ck_assert(mv <= bv && mv > 0.7 * bv);
}
END_TEST

START_TEST(test_normal_and_uniform_have_the_asked_moments)
{
	attnrt_param_info t[] = {
		{"n", 0, 1, {20000}, ATTNRT_INIT_NORMAL, 0.5, 0.01},
		{"u", 80000, 1, {20000}, ATTNRT_INIT_UNIFORM, -3, 1},
	};
	float *p = attnrt_alloc(NULL, attnrt_params_size(t, 2));
	ck_assert_int_eq(attnrt_params_init(t, 2, p, 123), ATTNRT_OK);
	double mean, sd;
	moments(p, 20000, &mean, &sd);
	ck_assert_double_eq_tol(mean, 0.5, 0.0005);
	ck_assert_double_eq_tol(sd, 0.01, 0.0005);
	const float *u = p + 20000;
	for (int i = 0; i < 20000; i++)
		ck_assert(u[i] >= -3 && u[i] < 1);
	moments(u, 20000, &mean, &sd);
	ck_assert_double_eq_tol(mean, -1, 0.04);
	ck_assert_double_eq_tol(sd, 4 / sqrt(12), 0.03);
	attnrt_free(NULL, p);
}
END_TEST

START_TEST(test_init_depends_on_seed_and_table_index_only)
{
	attnrt_param_info t[] = {
		{"a", 0, 1, {8}, ATTNRT_INIT_UNIFORM, 0, 1},
		{"b", 64, 1, {8}, ATTNRT_INIT_UNIFORM, 0, 1},
	};
	float p[32], q[32], r[32];
	attnrt_params_init(t, 2, p, 1);
	attnrt_params_init(t, 2, q, 1);
	attnrt_params_init(t, 2, r, 2);
	ck_assert_mem_eq(p, q, 32);
	ck_assert_mem_eq(p + 16, q + 16, 32);
	ck_assert(memcmp(p, r, 32) != 0);
	ck_assert(memcmp(p, p + 16, 32) != 0); /* a stream per parameter */
}
END_TEST

/* ---- against the reference interpreter -------------------------------------- */

START_TEST(test_init_is_bit_identical_to_interp_params_init)
{
	ir_ctx ctx;
	ir_ctx_init(&ctx);
	ir_module *m = ir_module_create(&ctx, "m");
	static const struct {
		const char *name;
		int rank;
		int64_t dims[3];
		ir_init_kind init;
		double a, b;
	} ps[] = {
		{"enc.W_q", 2, {20, 8}, IR_INIT_XAVIER_UNIFORM, 1, 0},
		{"enc.b", 1, {8}, IR_INIT_ZEROS, 0, 0},
		{"norm.gamma", 1, {32}, IR_INIT_ONES, 0, 0},
		{"w", 3, {2, 3, 7}, IR_INIT_XAVIER_UNIFORM, 1.5, 0},
		{"n", 2, {5, 9}, IR_INIT_NORMAL, -0.25, 0.01},
		{"u", 1, {33}, IR_INIT_UNIFORM, -0.1, 0.3},
		{"s", 0, {0}, IR_INIT_NORMAL, 0, 1},
		{"v", 1, {13}, IR_INIT_XAVIER_UNIFORM, 1, 0},
	};
	enum { N = sizeof ps / sizeof *ps };
	attnrt_param_info table[N];
	size_t at = 0;
	for (int i = 0; i < N; i++) {
		ir_type ty = {.dtype = IR_F32, .rank = (uint8_t)ps[i].rank};
		table[i] = (attnrt_param_info){ps[i].name,
					       at,
					       ps[i].rank,
					       {0},
					       (attnrt_init)ps[i].init,
					       ps[i].a,
					       ps[i].b};
		int64_t n = 1;
		for (int k = 0; k < ps[i].rank; k++) {
			ty.dims[k] = ir_dim_static(ps[i].dims[k]);
			table[i].dims[k] = ps[i].dims[k];
			n *= ps[i].dims[k];
		}
		ck_assert_int_ge(ir_module_add_param(m, ps[i].name, &ty,
						     ps[i].init, ps[i].a,
						     ps[i].b, (ir_loc){0}),
				 0);
		at = (at + (size_t)n * 4 + 63) / 64 * 64;
	}
	for (uint64_t seed = 0; seed < 3; seed++) {
		interp_tensor ref[N];
		int64_t syms[1] = {0};
		ck_assert(interp_params_init(&ctx, m, syms, seed * 977, false,
					     ref));
		float *block = attnrt_alloc(NULL, at);
		ck_assert_int_eq(attnrt_params_init(table, N, block, seed * 977),
				 ATTNRT_OK);
		for (int i = 0; i < N; i++) {
			ck_assert_int_eq(ref[i].dtype, IR_F32);
			size_t bytes = (size_t)interp_tensor_numel(&ref[i]) * 4;
			ck_assert_mem_eq((char *)block + table[i].offset,
					 ref[i].data, bytes);
			interp_tensor_fini(&ctx, &ref[i]);
		}
		attnrt_free(NULL, block);
	}
	ir_module_destroy(m);
	ir_ctx_fini(&ctx);
}
END_TEST

static Suite *runtime_suite(void)
{
	Suite *s = suite_create("runtime");
	TCase *tc = tcase_create("memory");
	tcase_add_test(tc,
		       test_alloc_gives_aligned_zeroed_blocks_through_the_hook);
	tcase_add_test(
		tc,
		test_alloc_returns_null_when_the_hook_fails_or_size_is_absurd);
	tcase_add_test(tc, test_large_blocks_are_aligned_zeroed_and_whole);
	tcase_add_test(tc, test_strerror_names_codes_and_ignores_the_node_bits);
	tcase_add_test(tc, test_params_size_is_the_last_end_rounded_to_64);
	suite_add_tcase(s, tc);
	tc = tcase_create("init");
	tcase_add_test(tc,
		       test_init_fills_zeros_and_ones_exactly_and_leaves_gaps);
	tcase_add_test(tc,
		       test_init_rejects_invalid_tables_and_leaves_params_untouched);
	tcase_add_test(tc,
		       test_xavier_uniform_stays_within_its_bound_and_fills_it);
	tcase_add_test(
		tc,
		test_xavier_fans_count_leading_dims_and_vectors_use_their_length);
	tcase_add_test(tc, test_normal_and_uniform_have_the_asked_moments);
	tcase_add_test(tc, test_init_depends_on_seed_and_table_index_only);
	tcase_add_test(tc, test_init_is_bit_identical_to_interp_params_init);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(runtime_suite());
}
