/*
 * tensor_print.c - prints a tensor the way PyTorch's
 * torch.Tensor.__repr__ does, so that a user can hold attnc's output next
 * to the book's:
 *
 *   f32[2, 1, 4]
 *   [[[ 2.0000,  3.0000,  4.0000,  5.0000]],
 *
 *    [[10.0000, 11.0000, 12.0000, 13.0000]]]
 *
 * It follows torch/_tensor_str.py with precision 4, linewidth 80,
 * threshold 1000 and edgeitems 3: every value right-aligned to the widest
 * shown one; floats "%.4f", or "%.4e" when the nonzero finite magnitudes
 * span more than 1000x, exceed 1e8 or go below 1e-4; sub-tensors separated
 * by as many newlines as they have dims; rows wrapped at 80 columns; and,
 * above 1000 elements, every dim longer than 6 shown as its first and last
 * 3 around "...". Unlike PyTorch, integral floats keep their decimals.
 */
#include "interp_impl.h"

#include <stdio.h>
#include <string.h>

enum {
	PRINT_LINEWIDTH = 80,
	PRINT_THRESHOLD = 1000,
	PRINT_EDGE = 3,
};

typedef struct print_fmt {
	bool is_summarized;
	bool is_sci;
	int width;
} print_fmt;

/* Formats element i into buf (unpadded); returns its length. */
static int format_value(const print_fmt *f, const interp_tensor *t, int64_t i,
			char *buf, size_t size)
{
	if (t->dtype == IR_I32)
		return snprintf(buf, size, "%lld", (long long)interp_ldi(t, i));
	double v = interp_ld(t, i);
	if (isnan(v))
		return snprintf(buf, size, "nan");
	if (isinf(v))
		return snprintf(buf, size, v > 0 ? "inf" : "-inf");
	return snprintf(buf, size, f->is_sci ? "%.4e" : "%.4f", v);
}

/* Whether coordinate c of a dim of size n is shown. */
static bool is_shown(const print_fmt *f, int64_t n, int64_t c)
{
	return !f->is_summarized || n <= 2 * PRINT_EDGE || c < PRINT_EDGE ||
	       c >= n - PRINT_EDGE;
}

static bool elem_shown(const print_fmt *f, const interp_tensor *t,
		       const int64_t *idx)
{
	for (int d = 0; d < t->rank; d++)
		if (!is_shown(f, t->dims[d], idx[d]))
			return false;
	return true;
}

/* Chooses fixed or scientific notation from the nonzero finite
 * magnitudes shown, then the width of the widest value shown. */
static void fmt_init(print_fmt *f, const interp_tensor *t)
{
	int64_t n = interp_tensor_numel(t), idx[IR_MAX_RANK] = {0};
	double lo = INFINITY, hi = 0;
	f->is_summarized = n > PRINT_THRESHOLD;
	f->is_sci = false;
	f->width = 1;
	for (int64_t i = 0; i < n && t->dtype != IR_I32; i++) {
		double a = fabs(interp_ld(t, i));
		if (elem_shown(f, t, idx) && isfinite(a) && a != 0) {
			lo = a < lo ? a : lo;
			hi = a > hi ? a : hi;
		}
		interp_index_next(idx, t->dims, t->rank);
	}
	f->is_sci = hi > 0 && (hi / lo > 1000.0 || hi > 1.0e8 || lo < 1.0e-4);
	memset(idx, 0, sizeof idx);
	for (int64_t i = 0; i < n; i++) {
		char buf[64];
		int w = format_value(f, t, i, buf, sizeof buf);
		if (elem_shown(f, t, idx) && w > f->width)
			f->width = w;
		interp_index_next(idx, t->dims, t->rank);
	}
}

static void put_value(const print_fmt *f, const interp_tensor *t, int64_t i,
		      FILE *out)
{
	char buf[64];
	int w = format_value(f, t, i, buf, sizeof buf);
	fprintf(out, "%*s%s", f->width > w ? f->width - w : 0, "", buf);
}

/* The last axis at offset off: values joined by ", ", wrapped into lines
 * of as many values as fit in 80 - indent columns. */
static void put_vector(const print_fmt *f, const interp_tensor *t, int64_t off,
		       int indent, FILE *out)
{
	int64_t n = t->dims[t->rank - 1], item = 0;
	int64_t per_line = (PRINT_LINEWIDTH - indent) / (f->width + 2);
	if (per_line < 1)
		per_line = 1;
	fputc('[', out);
	for (int64_t c = 0; c < n; c++) {
		if (!is_shown(f, n, c) && c != PRINT_EDGE)
			continue;
		if (item > 0)
			fprintf(out, item % per_line ? ", " : ",\n%*s",
				indent + 1, "");
		if (is_shown(f, n, c))
			put_value(f, t, off + c, out);
		else
			fputs(" ...", out);
		item++;
	}
	fputc(']', out);
}

/* The sub-tensor at axis dim and offset off, nested at indent. */
static void put_tensor(const print_fmt *f, const interp_tensor *t, int dim,
		       int64_t off, int indent, FILE *out)
{
	if (dim == t->rank - 1) {
		put_vector(f, t, off, indent, out);
		return;
	}
	int64_t n = t->dims[dim];
	int64_t stride = interp_dims_prod(t->dims, dim + 1, t->rank);
	bool is_first = true;
	fputc('[', out);
	for (int64_t c = 0; c < n; c++) {
		if (!is_shown(f, n, c) && c != PRINT_EDGE)
			continue;
		if (!is_first) {
			fputc(',', out);
			for (int i = 0; i < t->rank - dim - 1; i++)
				fputc('\n', out);
			fprintf(out, "%*s", indent + 1, "");
		}
		is_first = false;
		if (is_shown(f, n, c))
			put_tensor(f, t, dim + 1, off + c * stride, indent + 1,
				   out);
		else
			fputs("...", out);
	}
	fputc(']', out);
}

void interp_tensor_print(const interp_tensor *t, FILE *out)
{
	char dims[160];
	print_fmt f;
	interp_dims_format(t->dims, t->rank, dims, sizeof dims);
	fprintf(out, "%s%s\n", ir_dtype_name(t->dtype), dims);
	if (interp_tensor_numel(t) == 0) {
		fputs("[]", out);
		return;
	}
	fmt_init(&f, t);
	if (t->rank == 0)
		put_value(&f, t, 0, out);
	else
		put_tensor(&f, t, 0, 0, 0, out);
}
