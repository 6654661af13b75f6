/*
 * rt_params.c - the params block described by a table of attnrt_param_info
 * entries: its size, the checks every table goes through, and the
 * initialization of each parameter by its initializer.
 *
 * Initial values must be bit-identical to the reference interpreter's
 * (interp_params_init), so a model compiled ahead of time starts from the
 * same weights as one run under --interp or --jit with the same seed:
 * element i of the parameter at table index p draws its random numbers
 * from (seed, stream p, counter i) of rt_rng, every formula is evaluated
 * in double exactly as the interpreter writes it, and the result is
 * rounded to float once.
 */
#include "rt_internal.h"
#include "rt_rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int64_t rt_param_numel(const attnrt_param_info *p)
{
	if (p->rank < 0 || p->rank > 6)
		return -1;
	int64_t n = 1;
	for (int i = 0; i < p->rank; i++)
		if (p->dims[i] < 0 || __builtin_mul_overflow(n, p->dims[i], &n))
			return -1;
	return n;
}

/* End of the parameter in the block, or 0 with *ok false if it does not
 * fit in a size_t. */
static size_t param_end(const attnrt_param_info *p, bool *ok)
{
	int64_t n = rt_param_numel(p);
	size_t bytes, end;
	if (n < 0 || (uint64_t)n > SIZE_MAX / sizeof(float) ||
	    __builtin_mul_overflow((size_t)n, sizeof(float), &bytes) ||
	    __builtin_add_overflow(p->offset, bytes, &end)) {
		*ok = false;
		return 0;
	}
	return end;
}

int rt_params_check(const attnrt_param_info *table, size_t n_params, char *err,
		    size_t err_size)
{
	if (n_params && !table)
		return rt_fail(err, err_size, ATTNRT_ERR_ARG,
			       "no table for %zu parameters", n_params);
	for (size_t p = 0; p < n_params; p++) {
		const attnrt_param_info *pi = &table[p];
		bool ok = true;
		if (!pi->name)
			return rt_fail(err, err_size, ATTNRT_ERR_ARG,
				       "parameter %zu has no name", p);
		param_end(pi, &ok);
		if (!ok || pi->offset % sizeof(float))
			return rt_fail(err, err_size, ATTNRT_ERR_ARG,
				       "parameter '%s': invalid rank, dims or "
				       "offset in the table",
				       pi->name);
	}
	return ATTNRT_OK;
}

size_t attnrt_params_size(const attnrt_param_info *table, size_t n_params)
{
	size_t size = 0;
	for (size_t p = 0; p < n_params; p++) {
		bool ok = true;
		size_t end = param_end(&table[p], &ok);
		if (ok && end > size)
			size = end;
	}
	if (size > SIZE_MAX - (ATTNRT_ALIGN - 1))
		return size;
	return (size + ATTNRT_ALIGN - 1) & ~(size_t)(ATTNRT_ALIGN - 1);
}

/* Xavier-uniform bound gain * sqrt(6 / (fan_in + fan_out)), with the fans
 * of the interpreter: weights are stored [in, out], so fan_in is
 * dims[rank-2] and fan_out dims[rank-1], each times the product of the
 * leading dims; a vector uses its length for both; a scalar has fans 1. */
static double xavier_bound(const attnrt_param_info *p)
{
	double fan_in = 1, fan_out = 1;
	if (p->rank == 1) {
		fan_in = fan_out = (double)p->dims[0];
	} else if (p->rank >= 2) {
		int64_t receptive = 1;
		for (int i = 0; i < p->rank - 2; i++)
			receptive *= p->dims[i];
		fan_in = (double)p->dims[p->rank - 2] * (double)receptive;
		fan_out = (double)p->dims[p->rank - 1] * (double)receptive;
	}
	return p->a * sqrt(6.0 / (fan_in + fan_out));
}

/* Element i of the parameter at table index p. */
static double init_value(const attnrt_param_info *pi, uint64_t seed, uint64_t p,
			 uint64_t i, double bound)
{
	switch (pi->init) {
	case ATTNRT_INIT_ZEROS:
		return 0;
	case ATTNRT_INIT_ONES:
		return 1;
	case ATTNRT_INIT_NORMAL:
		return pi->a + pi->b * rt_rng_normal(seed, p, i);
	case ATTNRT_INIT_UNIFORM:
		return pi->a + (pi->b - pi->a) * rt_rng_uniform(seed, p, i);
	case ATTNRT_INIT_XAVIER_UNIFORM:
		return -bound + 2 * bound * rt_rng_uniform(seed, p, i);
	}
	return 0; /* unreachable: attnrt_params_init checks the kind */
}

static bool init_kind_is_valid(attnrt_init init)
{
	switch (init) {
	case ATTNRT_INIT_ZEROS:
	case ATTNRT_INIT_ONES:
	case ATTNRT_INIT_NORMAL:
	case ATTNRT_INIT_UNIFORM:
	case ATTNRT_INIT_XAVIER_UNIFORM:
		return true;
	}
	return false;
}

int attnrt_params_init(const attnrt_param_info *table, size_t n_params,
		       void *params, uint64_t seed)
{
	if (rt_params_check(table, n_params, NULL, 0) != ATTNRT_OK ||
	    (n_params && !params))
		return ATTNRT_ERR_ARG;
	for (size_t p = 0; p < n_params; p++)
		if (!init_kind_is_valid(table[p].init))
			return ATTNRT_ERR_ARG;
	for (size_t p = 0; p < n_params; p++) {
		const attnrt_param_info *pi = &table[p];
		float *data = (float *)((char *)params + pi->offset);
		int64_t n = rt_param_numel(pi);
		double bound = n ? xavier_bound(pi) : 0;
		for (int64_t i = 0; i < n; i++)
			data[i] = (float)init_value(pi, seed, p, (uint64_t)i,
						    bound);
	}
	return ATTNRT_OK;
}

static int by_name(const void *a, const void *b)
{
	const attnrt_param_info *const *pa = a, *const *pb = b;
	return strcmp((*pa)->name, (*pb)->name);
}

int rt_params_sort(const attnrt_allocator *al, const attnrt_param_info *table,
		   size_t n_params, const attnrt_param_info ***sorted,
		   char *err, size_t err_size)
{
	*sorted = NULL;
	if (!n_params)
		return ATTNRT_OK;
	if (n_params > SIZE_MAX / sizeof **sorted)
		return rt_fail(err, err_size, ATTNRT_ERR_NOMEM, "out of memory");
	const attnrt_param_info **s = rt_mem_alloc(al, n_params * sizeof *s);
	if (!s)
		return rt_fail(err, err_size, ATTNRT_ERR_NOMEM, "out of memory");
	*sorted = s;
	for (size_t p = 0; p < n_params; p++)
		s[p] = &table[p];
	qsort(s, n_params, sizeof *s, by_name);
	for (size_t p = 1; p < n_params; p++)
		if (strcmp(s[p - 1]->name, s[p]->name) == 0)
			return rt_fail(err, err_size, ATTNRT_ERR_ARG,
				       "two parameters are named '%s'",
				       s[p]->name);
	return ATTNRT_OK;
}
