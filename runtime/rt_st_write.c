/*
 * rt_st_write.c - writing named tensors as a safetensors file
 * (https://github.com/huggingface/safetensors), atomically: checkpoints
 * (rt_ckpt_write.c) and the outputs of --outputs.
 *
 * The file is: the header's length N as 8 bytes little-endian; N bytes of
 * JSON, {"__metadata__": {...}, "name": {"dtype": "F32", "shape": [...],
 * "data_offsets": [begin, end]}, ...}, compact as serde_json writes it and
 * padded with spaces to a multiple of 8 bytes; then the tensors' bytes,
 * packed in the order given. PyTorch's safetensors package reads it.
 *
 * Atomicity: through rt_out (rt_file.c), a temporary file beside the
 * target renamed over it; any failure leaves the target as it was.
 */
#include "rt_file.h"
#include "rt_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "safetensors data is little-endian; this writer copies bytes");

/* A growing byte buffer; is_oom sticks once an append fails. */
typedef struct st_buf {
	const attnrt_allocator *al;
	char *data;
	size_t n, cap;
	bool is_oom;
} st_buf;

static void buf_put(st_buf *b, const char *s, size_t n)
{
	if (b->is_oom ||
	    !rt_mem_grow(b->al, (void **)&b->data, &b->cap, b->n + n, 1)) {
		b->is_oom = true;
		return;
	}
	memcpy(b->data + b->n, s, n);
	b->n += n;
}

static void buf_puts(st_buf *b, const char *s)
{
	buf_put(b, s, strlen(s));
}

static void buf_u64(st_buf *b, uint64_t v)
{
	char num[24];
	snprintf(num, sizeof num, "%llu", (unsigned long long)v);
	buf_puts(b, num);
}

/* A JSON string as serde_json writes it: '"' and '\' escaped, control
 * bytes as \b \f \n \r \t or \u00XX, everything else (UTF-8) as is. */
static void buf_json_string(st_buf *b, const char *s)
{
	buf_put(b, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		char esc[8];
		const char *named = c == '"'    ? "\\\""
				    : c == '\\' ? "\\\\"
				    : c == '\b' ? "\\b"
				    : c == '\f' ? "\\f"
				    : c == '\n' ? "\\n"
				    : c == '\r' ? "\\r"
				    : c == '\t' ? "\\t"
						: NULL;
		if (named) {
			buf_puts(b, named);
		} else if (c < 0x20) {
			snprintf(esc, sizeof esc, "\\u%04x", c);
			buf_puts(b, esc);
		} else {
			buf_put(b, s, 1);
		}
	}
	buf_put(b, "\"", 1);
}

static void buf_tensor_entry(st_buf *b, const attnrt_st_tensor *t,
			     uint64_t begin)
{
	buf_json_string(b, t->name);
	buf_puts(b, ":{\"dtype\":");
	buf_json_string(b, t->dtype);
	buf_puts(b, ",\"shape\":[");
	for (int i = 0; i < t->rank; i++) {
		if (i)
			buf_put(b, ",", 1);
		buf_u64(b, (uint64_t)t->dims[i]);
	}
	buf_puts(b, "],\"data_offsets\":[");
	buf_u64(b, begin);
	buf_put(b, ",", 1);
	buf_u64(b, begin + t->bytes);
	buf_puts(b, "]}");
}

/* The 8-byte length and the padded JSON header, into b. */
static void build_header(st_buf *b, const attnrt_st_tensor *tensors, size_t n,
			 const attnrt_meta *meta, size_t n_meta)
{
	buf_put(b, "\0\0\0\0\0\0\0\0{", 9);
	if (n_meta) {
		buf_puts(b, "\"__metadata__\":{");
		for (size_t i = 0; i < n_meta; i++) {
			if (i)
				buf_put(b, ",", 1);
			buf_json_string(b, meta[i].key);
			buf_put(b, ":", 1);
			buf_json_string(b, meta[i].value);
		}
		buf_put(b, "}", 1);
	}
	uint64_t at = 0;
	for (size_t i = 0; i < n; i++) {
		if (i || n_meta)
			buf_put(b, ",", 1);
		buf_tensor_entry(b, &tensors[i], at);
		at += tensors[i].bytes;
	}
	buf_put(b, "}", 1);
	if (b->is_oom)
		return;
	while ((b->n - 8) % 8)
		buf_put(b, " ", 1);
	if (b->is_oom)
		return;
	uint64_t len = b->n - 8;
	for (int i = 0; i < 8; i++)
		b->data[i] = (char)(len >> (8 * i));
}

static int check_meta(const attnrt_meta *meta, size_t n_meta, char *err,
		      size_t err_size)
{
	for (size_t i = 0; i < n_meta; i++)
		if (!meta[i].key || !meta[i].value ||
		    !rt_utf8_is_valid(meta[i].key, strlen(meta[i].key)) ||
		    !rt_utf8_is_valid(meta[i].value, strlen(meta[i].value)))
			return rt_fail(err, err_size, ATTNRT_ERR_ARG,
				       "metadata entry %zu is not a pair of "
				       "UTF-8 strings",
				       i);
	return ATTNRT_OK;
}

/* One tensor's name, dtype, rank and size against its bytes. */
static int check_tensor(const attnrt_st_tensor *t, size_t i, char *err,
			size_t err_size)
{
	if (!t->name || !rt_utf8_is_valid(t->name, strlen(t->name)))
		return rt_fail(err, err_size, ATTNRT_ERR_ARG,
			       "tensor %zu: name is not UTF-8", i);
	if (strcmp(t->name, "__metadata__") == 0)
		return rt_fail(err, err_size, ATTNRT_ERR_ARG,
			       "a tensor cannot be named __metadata__");
	unsigned size = t->dtype ? rt_st_dtype_size(t->dtype, strlen(t->dtype))
				 : 0;
	uint64_t numel = 1;
	bool ok = size && t->rank >= 0 && t->rank <= ATTNRT_ST_MAX_RANK &&
		  (t->data || !t->bytes);
	for (int d = 0; ok && d < t->rank; d++)
		ok = t->dims[d] >= 0 &&
		     !__builtin_mul_overflow(numel, (uint64_t)t->dims[d],
					     &numel);
	if (!ok || numel * size != t->bytes) /* size <= 8: no overflow past */
		return rt_fail(err, err_size, ATTNRT_ERR_ARG,
			       "%s: dtype, shape and bytes do not agree",
			       t->name);
	return ATTNRT_OK;
}

static int by_name(const void *a, const void *b)
{
	return strcmp((*(const attnrt_st_tensor *const *)a)->name,
		      (*(const attnrt_st_tensor *const *)b)->name);
}

static int check_unique(const attnrt_allocator *al,
			const attnrt_st_tensor *tensors, size_t n, char *err,
			size_t err_size)
{
	const attnrt_st_tensor **sorted = rt_mem_alloc(al, n * sizeof *sorted);
	if (!sorted)
		return rt_fail(err, err_size, ATTNRT_ERR_NOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		sorted[i] = &tensors[i];
	qsort(sorted, n, sizeof *sorted, by_name);
	int code = ATTNRT_OK;
	for (size_t i = 0; i + 1 < n && code == ATTNRT_OK; i++)
		if (strcmp(sorted[i]->name, sorted[i + 1]->name) == 0)
			code = rt_fail(err, err_size, ATTNRT_ERR_ARG,
				       "%s: the name is used twice",
				       sorted[i]->name);
	rt_mem_free(al, sorted);
	return code;
}

/* Writes header and data through rt_out (rt_file.c): to a temporary
 * file beside path, renamed over it. */
static int write_atomically(const char *path, const st_buf *header,
			    const attnrt_st_tensor *tensors, size_t n,
			    char *err, size_t err_size)
{
	rt_out o;
	int code = rt_out_open(&o, path, err, err_size);
	if (code != ATTNRT_OK)
		return code;
	rt_out_write(&o, header->data, header->n);
	for (size_t i = 0; i < n; i++)
		rt_out_write(&o, tensors[i].data, tensors[i].bytes);
	return rt_out_commit(&o, path, err, err_size);
}

int attnrt_st_write(const attnrt_allocator *al, const char *path,
		    const attnrt_st_tensor *tensors, size_t n,
		    const attnrt_meta *meta, size_t n_meta, char *err,
		    size_t err_size)
{
	if (!path || (n && !tensors) || (n_meta && !meta))
		return rt_fail(err, err_size, ATTNRT_ERR_ARG,
			       "no path, tensors or metadata");
	int code = check_meta(meta, n_meta, err, err_size);
	for (size_t i = 0; code == ATTNRT_OK && i < n; i++)
		code = check_tensor(&tensors[i], i, err, err_size);
	if (code == ATTNRT_OK)
		code = check_unique(al, tensors, n, err, err_size);
	if (code != ATTNRT_OK)
		return code;
	st_buf header = {.al = al};
	build_header(&header, tensors, n, meta, n_meta);
	if (header.is_oom)
		code = rt_fail(err, err_size, ATTNRT_ERR_NOMEM,
			       "out of memory building the header of %s", path);
	else
		code = write_atomically(path, &header, tensors, n, err,
					err_size);
	rt_mem_free(al, header.data);
	return code;
}
