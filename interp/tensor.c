/*
 * tensor.c - the interpreter's concrete tensors (allocation through the
 * context's hook, element access, copies) and the small shape and index
 * helpers the kernels share: row-major strides, broadcast strides and
 * multi-index stepping.
 */
#include "interp_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int64_t interp_tensor_numel(const interp_tensor *t)
{
	return interp_dims_prod(t->dims, 0, t->rank);
}

bool interp_tensor_alloc(ir_ctx *ctx, interp_tensor *t, ir_dtype dtype,
			 int rank, const int64_t *dims)
{
	memset(t, 0, sizeof *t);
	if (rank < 0 || rank > IR_MAX_RANK)
		return false;
	int64_t n = 1;
	for (int i = 0; i < rank; i++) {
		if (dims[i] < 0 || __builtin_mul_overflow(n, dims[i], &n))
			return false;
	}
	size_t bytes;
	if (__builtin_mul_overflow((size_t)n, ir_dtype_size(dtype), &bytes))
		return false;
	t->data = ir_alloc(ctx, bytes);
	if (!t->data)
		return false;
	t->dtype = dtype;
	t->rank = rank;
	for (int i = 0; i < rank; i++)
		t->dims[i] = dims[i];
	return true;
}

void interp_tensor_fini(ir_ctx *ctx, interp_tensor *t)
{
	ir_free(ctx, t->data);
	memset(t, 0, sizeof *t);
}

double interp_tensor_get(const interp_tensor *t, int64_t i)
{
	return interp_ld(t, i);
}

bool interp_tensor_copy(ir_ctx *ctx, interp_tensor *dst,
			const interp_tensor *src)
{
	if (!interp_tensor_alloc(ctx, dst, src->dtype, src->rank, src->dims))
		return false;
	size_t bytes = (size_t)interp_tensor_numel(src) *
		       ir_dtype_size(src->dtype);
	if (bytes)
		memcpy(dst->data, src->data, bytes);
	return true;
}

/* ---- shapes and indices ------------------------------------------------- */

int64_t interp_dims_prod(const int64_t *dims, int from, int to)
{
	int64_t n = 1;
	for (int i = from; i < to; i++)
		n *= dims[i];
	return n;
}

void interp_strides(const int64_t *dims, int rank, int64_t *strides)
{
	int64_t s = 1;
	for (int i = rank - 1; i >= 0; i--) {
		strides[i] = s;
		s *= dims[i];
	}
}

bool interp_bcast_strides(const int64_t *dims, int rank, const int64_t *odims,
			  int orank, int64_t unit, int64_t *strides)
{
	if (rank > orank)
		return false;
	int off = orank - rank;
	int64_t s = unit;
	for (int i = orank - 1; i >= 0; i--) {
		int j = i - off;
		if (j < 0) {
			strides[i] = 0;
			continue;
		}
		if (dims[j] == odims[i] && dims[j] != 1)
			strides[i] = s;
		else if (dims[j] == 1)
			strides[i] = 0;
		else
			return false;
		s *= dims[j];
	}
	return true;
}

void interp_index_next(int64_t *idx, const int64_t *dims, int rank)
{
	for (int i = rank - 1; i >= 0; i--) {
		if (++idx[i] < dims[i])
			return;
		idx[i] = 0;
	}
}

void interp_dims_format(const int64_t *dims, int rank, char *buf, size_t size)
{
	size_t used = 0;
	for (int i = -1; i <= rank && used < size; i++) {
		int w;
		if (i < 0)
			w = snprintf(buf, size, "[");
		else if (i == rank)
			w = snprintf(buf + used, size - used, "]");
		else
			w = snprintf(buf + used, size - used, "%s%lld",
				     i ? ", " : "", (long long)dims[i]);
		if (w < 0)
			return;
		used += (size_t)w;
	}
}

/* ---- errors and scratch memory ---------------------------------------- */

bool interp_fail(const interp_kernel *k, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	ir_error(k->ctx, k->node->loc, "%s: %s", ir_op_table[k->node->op].name,
		 msg);
	return false;
}

void *interp_scratch(const interp_kernel *k, size_t bytes)
{
	void *p = ir_alloc(k->ctx, bytes);
	if (!p)
		interp_fail(k, "out of memory");
	return p;
}
