/*
 * rt_ckpt_read.c - reading a safetensors checkpoint into a params block.
 *
 * The file is untrusted: it may be truncated, corrupt, from another model
 * or from another tool. Reading goes in stages, each trusting only what
 * the one before checked, and stops at the first fault with a message
 * that says where it is:
 *   1. the 8-byte header length against the file's size;
 *   2. the header as strict JSON (rt_json.c), an object;
 *   3. each entry's form: "__metadata__" an object of strings, every
 *      other member {"dtype": known name, "shape": [n, ...],
 *      "data_offsets": [begin, end]} with end - begin the bytes of the
 *      shape;
 *   4. the offsets together: sorted, they tile the data exactly (no
 *      overlap, no gap, nothing past the end);
 *   5. the names against the model's table (unknown, missing, twice);
 *   6. each tensor's dtype and shape against its parameter.
 * Only then are bytes copied, so params never holds half a checkpoint.
 */
#include "rt_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CKPT_MAX_HEADER 100000000u /* as the safetensors package */

/* One tensor of the header; name and dtype point into the JSON text. */
typedef struct ckpt_tensor {
	const char *name;
	size_t name_len;
	const char *dtype;
	size_t dtype_len;
	uint32_t shape;   /* the JSON node of its shape array */
	uint64_t numel;
	uint64_t begin, end;
	const attnrt_param_info *param; /* matched by name (stage 5) */
} ckpt_tensor;

typedef struct ckpt_reader {
	const attnrt_allocator *al;
	rt_json_doc doc;
	ckpt_tensor *tensors;
	size_t n_tensors;
	const char *data; /* the bytes after the header */
	uint64_t data_len;
	char *err;
	size_t err_size;
} ckpt_reader;

static const struct {
	const char *name;
	unsigned size;
} ckpt_dtypes[] = {
	{"BOOL", 1}, {"U8", 1}, {"I8", 1}, {"F8_E5M2", 1}, {"F8_E4M3", 1},
	{"I16", 2}, {"U16", 2}, {"F16", 2}, {"BF16", 2}, {"I32", 4},
	{"U32", 4}, {"F32", 4}, {"F64", 8}, {"I64", 8}, {"U64", 8},
};

/* Bytes per element of a dtype name, 0 if unknown. */
static unsigned dtype_size(const char *name, size_t n)
{
	for (size_t i = 0; i < sizeof ckpt_dtypes / sizeof *ckpt_dtypes; i++)
		if (strlen(ckpt_dtypes[i].name) == n &&
		    memcmp(ckpt_dtypes[i].name, name, n) == 0)
			return ckpt_dtypes[i].size;
	return 0;
}

static bool key_is(const rt_json_doc *d, const rt_json_node *n,
		   const char *key)
{
	return n->key_len == strlen(key) &&
	       memcmp(rt_json_key(d, n), key, n->key_len) == 0;
}

/* "[32, 16]" from a list of dims, into buf. */
static void dims_format(char *buf, size_t size, const uint64_t *dims,
			size_t rank)
{
	size_t at = (size_t)snprintf(buf, size, "[");
	for (size_t i = 0; i < rank && at < size; i++)
		at += (size_t)snprintf(buf + at, size - at, "%s%llu",
				       i ? ", " : "",
				       (unsigned long long)dims[i]);
	if (at < size)
		snprintf(buf + at, size - at, "]");
}

/* ---- stage 1-2: the header ---------------------------------------------- */

static int read_header(ckpt_reader *r, const char *file, size_t len)
{
	if (len < 8)
		return rt_fail(r->err, r->err_size, ATTNRT_ERR_FORMAT,
			       "file of %zu bytes is too short for a safetensors "
			       "header (8 bytes of length, then JSON)", len);
	uint64_t n = 0;
	for (int i = 7; i >= 0; i--)
		n = n << 8 | (unsigned char)file[i];
	if (n > CKPT_MAX_HEADER)
		return rt_fail(r->err, r->err_size, ATTNRT_ERR_FORMAT,
			       "header length %llu is beyond the %u bytes "
			       "safetensors allows", (unsigned long long)n,
			       CKPT_MAX_HEADER);
	if (n > len - 8)
		return rt_fail(r->err, r->err_size, ATTNRT_ERR_FORMAT,
			       "header length %llu runs past the end of the "
			       "file (%zu bytes after the length)",
			       (unsigned long long)n, len - 8);
	r->data = file + 8 + n;
	r->data_len = len - 8 - n;
	int code = rt_json_parse(&r->doc, r->al, file + 8, (size_t)n, r->err,
				 r->err_size);
	if (code == ATTNRT_OK && r->doc.nodes[0].kind != RT_JSON_OBJECT)
		code = rt_fail(r->err, r->err_size, ATTNRT_ERR_FORMAT,
			       "header is not a JSON object");
	return code;
}

/* ---- stage 3: each entry -------------------------------------------------- */

static int entry_fail(ckpt_reader *r, const ckpt_tensor *t, const char *what)
{
	return rt_fail(r->err, r->err_size, ATTNRT_ERR_FORMAT, "%.*s: %s",
		       (int)t->name_len, t->name, what);
}

static int check_metadata(ckpt_reader *r, const rt_json_node *m)
{
	const rt_json_node *nodes = r->doc.nodes;
	if (m->kind == RT_JSON_NULL)
		return ATTNRT_OK;
	bool ok = m->kind == RT_JSON_OBJECT;
	for (uint32_t c = ok ? m->first : RT_JSON_NONE; c != RT_JSON_NONE;
	     c = nodes[c].next)
		ok &= nodes[c].kind == RT_JSON_STRING;
	return ok ? ATTNRT_OK
		  : rt_fail(r->err, r->err_size, ATTNRT_ERR_FORMAT,
			    "__metadata__ is not an object of strings");
}

/* shape: a list of non-negative integers whose product fits. */
static int read_shape(ckpt_reader *r, ckpt_tensor *t, const rt_json_node *s)
{
	const rt_json_node *nodes = r->doc.nodes;
	if (s->kind != RT_JSON_ARRAY)
		return entry_fail(r, t, "shape is not a list");
	t->numel = 1;
	for (uint32_t c = s->first; c != RT_JSON_NONE; c = nodes[c].next) {
		uint64_t d;
		if (!rt_json_get_u64(&r->doc, &nodes[c], &d))
			return entry_fail(r, t, "shape holds something other "
					  "than non-negative integers");
		if (__builtin_mul_overflow(t->numel, d, &t->numel))
			return entry_fail(r, t, "shape has more elements than "
					  "can be counted");
	}
	t->shape = (uint32_t)(s - nodes);
	return ATTNRT_OK;
}

static int read_offsets(ckpt_reader *r, ckpt_tensor *t, const rt_json_node *o)
{
	const rt_json_node *nodes = r->doc.nodes;
	if (o->kind != RT_JSON_ARRAY || o->n_children != 2 ||
	    !rt_json_get_u64(&r->doc, &nodes[o->first], &t->begin) ||
	    !rt_json_get_u64(&r->doc, &nodes[nodes[o->first].next], &t->end))
		return entry_fail(r, t, "data_offsets is not a list of two "
				  "non-negative integers");
	return ATTNRT_OK;
}

/* One member's field (dtype, shape or data_offsets); *seen marks which
 * were there. */
static int read_field(ckpt_reader *r, ckpt_tensor *t, const rt_json_node *f,
		      unsigned *seen)
{
	const rt_json_doc *d = &r->doc;
	unsigned bit = key_is(d, f, "dtype") ? 1u
		       : key_is(d, f, "shape") ? 2u
		       : key_is(d, f, "data_offsets") ? 4u : 0u;
	if (!bit || (*seen & bit))
		return rt_fail(r->err, r->err_size, ATTNRT_ERR_FORMAT,
			       "%.*s: %s field \"%.*s\"", (int)t->name_len,
			       t->name, bit ? "repeated" : "unknown",
			       (int)f->key_len, rt_json_key(d, f));
	*seen |= bit;
	if (bit == 2)
		return read_shape(r, t, f);
	if (bit == 4)
		return read_offsets(r, t, f);
	if (f->kind != RT_JSON_STRING)
		return entry_fail(r, t, "dtype is not a string");
	t->dtype = rt_json_str(d, f);
	t->dtype_len = f->str_len;
	return ATTNRT_OK;
}

/* Size of the tensor's bytes against its dtype and shape. */
static int check_entry_size(ckpt_reader *r, const ckpt_tensor *t)
{
	unsigned size = dtype_size(t->dtype, t->dtype_len);
	uint64_t bytes;
	if (!size)
		return rt_fail(r->err, r->err_size, ATTNRT_ERR_FORMAT,
			       "%.*s: unknown dtype \"%.*s\"", (int)t->name_len,
			       t->name, (int)t->dtype_len, t->dtype);
	if (t->end < t->begin)
		return rt_fail(r->err, r->err_size, ATTNRT_ERR_FORMAT,
			       "%.*s: data_offsets [%llu, %llu] end before they "
			       "begin", (int)t->name_len, t->name,
			       (unsigned long long)t->begin,
			       (unsigned long long)t->end);
	if (__builtin_mul_overflow(t->numel, size, &bytes))
		return entry_fail(r, t, "shape has more bytes than can be "
				  "counted");
	if (bytes != t->end - t->begin)
		return rt_fail(r->err, r->err_size, ATTNRT_ERR_FORMAT,
			       "%.*s: data_offsets [%llu, %llu] hold %llu bytes, "
			       "its dtype and shape need %llu", (int)t->name_len,
			       t->name, (unsigned long long)t->begin,
			       (unsigned long long)t->end,
			       (unsigned long long)(t->end - t->begin),
			       (unsigned long long)bytes);
	return ATTNRT_OK;
}

static int read_entry(ckpt_reader *r, ckpt_tensor *t, const rt_json_node *e)
{
	const rt_json_node *nodes = r->doc.nodes;
	unsigned seen = 0;
	t->name = rt_json_key(&r->doc, e);
	t->name_len = e->key_len;
	if (e->kind != RT_JSON_OBJECT)
		return entry_fail(r, t, "entry is not an object");
	for (uint32_t c = e->first; c != RT_JSON_NONE; c = nodes[c].next) {
		int code = read_field(r, t, &nodes[c], &seen);
		if (code != ATTNRT_OK)
			return code;
	}
	if (seen != 7)
		return entry_fail(r, t, !(seen & 1) ? "no dtype"
					: !(seen & 2) ? "no shape"
					: "no data_offsets");
	return check_entry_size(r, t);
}

static int read_entries(ckpt_reader *r)
{
	const rt_json_node *root = &r->doc.nodes[0], *nodes = r->doc.nodes;
	r->tensors = rt_mem_alloc(r->al, (size_t)root->n_children *
						 sizeof *r->tensors);
	if (!r->tensors)
		return rt_fail(r->err, r->err_size, ATTNRT_ERR_NOMEM,
			       "out of memory");
	bool has_metadata = false;
	for (uint32_t c = root->first; c != RT_JSON_NONE; c = nodes[c].next) {
		int code;
		if (key_is(&r->doc, &nodes[c], "__metadata__")) {
			code = has_metadata ? rt_fail(r->err, r->err_size,
						      ATTNRT_ERR_FORMAT,
						      "__metadata__ appears twice")
					    : check_metadata(r, &nodes[c]);
			has_metadata = true;
		} else {
			ckpt_tensor *t = &r->tensors[r->n_tensors++];
			memset(t, 0, sizeof *t);
			code = read_entry(r, t, &nodes[c]);
		}
		if (code != ATTNRT_OK)
			return code;
	}
	return ATTNRT_OK;
}

/* ---- stage 4: the offsets together ---------------------------------------- */

static int by_offsets(const void *a, const void *b)
{
	const ckpt_tensor *ta = a, *tb = b;
	if (ta->begin != tb->begin)
		return ta->begin < tb->begin ? -1 : 1;
	return ta->end < tb->end ? -1 : ta->end > tb->end;
}

static int check_tiling(ckpt_reader *r)
{
	qsort(r->tensors, r->n_tensors, sizeof *r->tensors, by_offsets);
	uint64_t at = 0;
	for (size_t i = 0; i < r->n_tensors; i++) {
		const ckpt_tensor *t = &r->tensors[i];
		if (t->end > r->data_len)
			return rt_fail(r->err, r->err_size, ATTNRT_ERR_FORMAT,
				       "%.*s: data_offsets [%llu, %llu] run past "
				       "the end of the data (%llu bytes)",
				       (int)t->name_len, t->name,
				       (unsigned long long)t->begin,
				       (unsigned long long)t->end,
				       (unsigned long long)r->data_len);
		if (t->begin < at)
			return rt_fail(r->err, r->err_size, ATTNRT_ERR_FORMAT,
				       "%.*s and %.*s: data_offsets overlap",
				       (int)t[-1].name_len, t[-1].name,
				       (int)t->name_len, t->name);
		if (t->begin > at)
			break;
		at = t->end;
	}
	uint64_t gap_end = at;
	for (size_t i = 0; i < r->n_tensors && gap_end == at; i++)
		if (r->tensors[i].begin > at)
			gap_end = r->tensors[i].begin;
	if (gap_end == at)
		gap_end = r->data_len;
	if (at != r->data_len)
		return rt_fail(r->err, r->err_size, ATTNRT_ERR_FORMAT,
			       "bytes %llu to %llu of the data belong to no "
			       "tensor", (unsigned long long)at,
			       (unsigned long long)gap_end);
	return ATTNRT_OK;
}

/* ---- stage 5-6: against the model ------------------------------------------ */

static int by_name(const void *a, const void *b)
{
	const ckpt_tensor *ta = a, *tb = b;
	size_t n = ta->name_len < tb->name_len ? ta->name_len : tb->name_len;
	int c = memcmp(ta->name, tb->name, n);
	if (c)
		return c;
	return ta->name_len < tb->name_len ? -1 : ta->name_len > tb->name_len;
}

/* The file's name against a table name, in the order of by_name. */
static int name_cmp(const ckpt_tensor *t, const char *name)
{
	ckpt_tensor other = {.name = name, .name_len = strlen(name)};
	return by_name(t, &other);
}

/* Walks the file's tensors and the table, both sorted by name, pairing
 * them; fails on a name used twice, unknown to the model, or missing. */
static int match_names(ckpt_reader *r, const attnrt_param_info **sorted,
		       size_t n_params)
{
	ckpt_tensor *ts = r->tensors;
	qsort(ts, r->n_tensors, sizeof *ts, by_name);
	size_t i = 0, p = 0;
	while (i < r->n_tensors || p < n_params) {
		if (i + 1 < r->n_tensors && by_name(&ts[i], &ts[i + 1]) == 0)
			return rt_fail(r->err, r->err_size, ATTNRT_ERR_FORMAT,
				       "%.*s: the name appears twice in the "
				       "header", (int)ts[i].name_len, ts[i].name);
		int c = i == r->n_tensors ? 1
			: p == n_params	  ? -1
					  : name_cmp(&ts[i], sorted[p]->name);
		if (c == 0) {
			ts[i++].param = sorted[p++];
			continue;
		}
		if (c > 0)
			return rt_fail(r->err, r->err_size, ATTNRT_ERR_MISMATCH,
				       "%s: the model's parameter is missing "
				       "from the checkpoint (%zu tensors in "
				       "the file, %zu parameters in the model)",
				       sorted[p]->name, r->n_tensors, n_params);
		return rt_fail(r->err, r->err_size, ATTNRT_ERR_MISMATCH,
			       "%.*s: the checkpoint has a tensor the model "
			       "does not", (int)ts[i].name_len, ts[i].name);
	}
	return ATTNRT_OK;
}

/* dtype F32 and the parameter's shape. */
static int check_against_param(ckpt_reader *r, const ckpt_tensor *t)
{
	const attnrt_param_info *p = t->param;
	const rt_json_node *nodes = r->doc.nodes;
	uint64_t file_dims[8], want[6];
	size_t rank = 0;
	bool is_same = true;
	for (uint32_t c = nodes[t->shape].first; c != RT_JSON_NONE;
	     c = nodes[c].next, rank++) {
		uint64_t d = 0;
		rt_json_get_u64(&r->doc, &nodes[c], &d);
		if (rank < 8)
			file_dims[rank] = d;
		is_same &= (int)rank < p->rank && d == (uint64_t)p->dims[rank];
	}
	is_same &= rank == (size_t)p->rank;
	if (t->dtype_len != 3 || memcmp(t->dtype, "F32", 3) != 0)
		return rt_fail(r->err, r->err_size, ATTNRT_ERR_MISMATCH,
			       "%s: dtype %.*s in file, model wants F32",
			       p->name, (int)t->dtype_len, t->dtype);
	if (is_same)
		return ATTNRT_OK;
	char got[160], exp[160];
	for (int i = 0; i < p->rank; i++)
		want[i] = (uint64_t)p->dims[i];
	dims_format(got, sizeof got, file_dims, rank < 8 ? rank : 8);
	if (rank > 8)
		snprintf(got, sizeof got, "of rank %zu", rank);
	dims_format(exp, sizeof exp, want, (size_t)p->rank);
	return rt_fail(r->err, r->err_size, ATTNRT_ERR_MISMATCH,
		       "%s: shape %s in file, model wants %s", p->name, got, exp);
}

static int check_model(ckpt_reader *r, const attnrt_param_info *table,
		       size_t n_params)
{
	const attnrt_param_info **sorted;
	int code = rt_params_sort(r->al, table, n_params, &sorted, r->err,
				  r->err_size);
	if (code == ATTNRT_OK)
		code = match_names(r, sorted, n_params);
	rt_mem_free(r->al, sorted);
	for (size_t i = 0; code == ATTNRT_OK && i < r->n_tensors; i++)
		code = check_against_param(r, &r->tensors[i]);
	return code;
}

/* ---- the public face ---------------------------------------------------------- */

/* The caller's table, before anything is read: valid entries, unique
 * names. */
static int check_table(const attnrt_allocator *al,
		       const attnrt_param_info *table, size_t n_params,
		       char *err, size_t err_size)
{
	int code = rt_params_check(table, n_params, err, err_size);
	if (code != ATTNRT_OK)
		return code;
	const attnrt_param_info **sorted;
	code = rt_params_sort(al, table, n_params, &sorted, err, err_size);
	rt_mem_free(al, sorted);
	return code;
}

int attnrt_checkpoint_parse(const attnrt_allocator *al, const void *data,
			    size_t len, const attnrt_param_info *table,
			    size_t n_params, void *params, char *err,
			    size_t err_size)
{
	if ((len && !data) || (n_params && !params))
		return rt_fail(err, err_size, ATTNRT_ERR_ARG,
			       "no data or no params block");
	int code = check_table(al, table, n_params, err, err_size);
	if (code != ATTNRT_OK)
		return code;
	ckpt_reader r = {.al = al, .err = err, .err_size = err_size};
	code = read_header(&r, data, len);
	if (code == ATTNRT_OK)
		code = read_entries(&r);
	if (code == ATTNRT_OK)
		code = check_tiling(&r);
	if (code == ATTNRT_OK)
		code = check_model(&r, table, n_params);
	for (size_t i = 0; code == ATTNRT_OK && i < r.n_tensors; i++) {
		const ckpt_tensor *t = &r.tensors[i];
		memcpy((char *)params + t->param->offset, r.data + t->begin,
		       (size_t)(t->end - t->begin));
	}
	rt_mem_free(al, r.tensors);
	rt_json_fini(&r.doc);
	return code;
}

/* Reads the whole file at path into a buffer from al; a file larger than
 * any checkpoint of a model whose data is max_data bytes is refused. */
static int read_file(const attnrt_allocator *al, const char *path,
		     uint64_t max_data, char **data, size_t *len, char *err,
		     size_t err_size)
{
	struct stat st;
	*data = NULL;
	*len = 0;
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return rt_fail_errno(err, err_size, errno, "%s", path);
	int code = ATTNRT_OK;
	if (fstat(fd, &st) != 0) {
		code = rt_fail_errno(err, err_size, errno, "%s", path);
	} else if (!S_ISREG(st.st_mode)) {
		code = rt_fail(err, err_size, ATTNRT_ERR_IO, "%s: not a file",
			       path);
	} else if ((uint64_t)st.st_size > 8 + CKPT_MAX_HEADER + max_data) {
		code = rt_fail(err, err_size, ATTNRT_ERR_FORMAT, "%s: %lld "
			       "bytes, more than any checkpoint of this model "
			       "can hold", path, (long long)st.st_size);
	} else if (!(*data = rt_mem_alloc(al, (size_t)st.st_size))) {
		code = rt_fail(err, err_size, ATTNRT_ERR_NOMEM, "%s: out of "
			       "memory", path);
	}
	size_t n = 0, want = code == ATTNRT_OK ? (size_t)st.st_size : 0;
	while (n < want) {
		ssize_t k = read(fd, *data + n, want - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			code = rt_fail_errno(err, err_size, errno, "%s", path);
		if (k <= 0)
			break;
		n += (size_t)k;
	}
	close(fd);
	*len = n;
	return code;
}

int attnrt_checkpoint_load(const attnrt_allocator *al, const char *path,
			   const attnrt_param_info *table, size_t n_params,
			   void *params, char *err, size_t err_size)
{
	if (!path)
		return rt_fail(err, err_size, ATTNRT_ERR_ARG, "no path");
	int code = check_table(al, table, n_params, err, err_size);
	if (code != ATTNRT_OK)
		return code;
	uint64_t max_data = 0; /* as if every tensor were F64 */
	for (size_t p = 0; p < n_params; p++) {
		uint64_t bytes;
		if (__builtin_mul_overflow((uint64_t)rt_param_numel(&table[p]),
					   8u, &bytes) ||
		    __builtin_add_overflow(max_data, bytes, &max_data) ||
		    max_data > UINT64_MAX / 4)
			max_data = UINT64_MAX / 4;
	}
	char *data;
	size_t len;
	code = read_file(al, path, max_data, &data, &len, err, err_size);
	if (code == ATTNRT_OK) {
		code = attnrt_checkpoint_parse(al, data, len, table, n_params,
					       params, err, err_size);
		if (code != ATTNRT_OK && code != ATTNRT_ERR_NOMEM) {
			/* Say which file the fault is in. */
			size_t n = strlen(path) + 2;
			if (err && err_size > n + 1) {
				memmove(err + n, err, err_size - n);
				memcpy(err, path, n - 2);
				memcpy(err + n - 2, ": ", 2);
				err[err_size - 1] = 0;
			}
		}
	}
	rt_mem_free(al, data);
	return code;
}
