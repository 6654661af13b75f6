/*
 * rt_st_read.c - reading a safetensors file of any named tensors
 * (https://github.com/huggingface/safetensors): the data files of
 * training (`data = tensors()`), the inputs of --inputs, and the first
 * stages of reading a checkpoint (rt_ckpt_read.c).
 *
 * The file is untrusted: it may be truncated, corrupt or from another
 * tool. Reading goes in stages, each trusting only what the one before
 * checked, and stops at the first fault with a message that says where
 * it is:
 *   1. the 8-byte header length against the file's size;
 *   2. the header as strict JSON (rt_json.c), an object;
 *   3. each entry's form: "__metadata__" an object of strings, every
 *      other member {"dtype": known name, "shape": [n, ...] of rank at
 *      most ATTNRT_ST_MAX_RANK, "data_offsets": [begin, end]} with
 *      end - begin the bytes of the shape;
 *   4. the offsets together: sorted, they tile the data exactly (no
 *      overlap, no gap, nothing past the end), and no name twice.
 * What passes is a list of tensors sorted by name, each pointing at its
 * bytes, and the metadata as strings.
 */
#include "rt_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One tensor of the header; name and dtype point into the JSON text. */
typedef struct st_entry {
	const char *name;
	size_t name_len;
	const char *dtype;
	size_t dtype_len;
	uint32_t shape; /* the JSON node of its shape array */
	uint32_t rank;
	uint64_t numel;
	uint64_t begin, end;
} st_entry;

typedef struct st_reader {
	const attnrt_allocator *al;
	rt_json_doc doc;
	st_entry *tensors;
	size_t n_tensors;
	const char *data; /* the bytes after the header */
	uint64_t data_len;
	char *err;
	size_t err_size;
} st_reader;

struct attnrt_st_file {
	const attnrt_allocator *al;
	char *owned;               /* the file's bytes, when read from a path */
	attnrt_st_tensor *tensors; /* sorted by name */
	size_t n_tensors;
	attnrt_meta *meta; /* in file order */
	size_t n_meta;
	char *pool; /* the names, dtypes and metadata, NUL-ended */
};

static const struct {
	const char *name;
	unsigned size;
} st_dtypes[] = {
	{"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
	{"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
	{"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8},
};

unsigned rt_st_dtype_size(const char *name, size_t n)
{
	for (size_t i = 0; i < sizeof st_dtypes / sizeof *st_dtypes; i++)
		if (strlen(st_dtypes[i].name) == n &&
		    memcmp(st_dtypes[i].name, name, n) == 0)
			return st_dtypes[i].size;
	return 0;
}

static bool key_is(const rt_json_doc *d, const rt_json_node *n, const char *key)
{
	return n->key_len == strlen(key) &&
	       memcmp(rt_json_key(d, n), key, n->key_len) == 0;
}

/* ---- stage 1-2: the header ---------------------------------------------- */

/* The header's length n, from the first 8 bytes of a file of len bytes,
 * against the file's size. */
static int header_length(st_reader *r, const char *file, uint64_t len,
			 uint64_t *n)
{
	*n = 0;
	if (len < 8)
		return rt_fail(r->err, r->err_size, ATTNRT_ERR_FORMAT,
			       "file of %llu bytes is too short for a "
			       "safetensors header (8 bytes of length, then "
			       "JSON)",
			       (unsigned long long)len);
	for (int i = 7; i >= 0; i--)
		*n = *n << 8 | (unsigned char)file[i];
	if (*n > ATTNRT_ST_MAX_HEADER)
		return rt_fail(r->err, r->err_size, ATTNRT_ERR_FORMAT,
			       "header length %llu is beyond the %u bytes "
			       "safetensors allows",
			       (unsigned long long)*n, ATTNRT_ST_MAX_HEADER);
	if (*n > len - 8)
		return rt_fail(r->err, r->err_size, ATTNRT_ERR_FORMAT,
			       "header length %llu runs past the end of the "
			       "file (%llu bytes after the length)",
			       (unsigned long long)*n,
			       (unsigned long long)(len - 8));
	return ATTNRT_OK;
}

/* The header of a file of len bytes whose first 8 + its length are at
 * file (r->data, the bytes after it, is the caller's to set). */
static int read_header(st_reader *r, const char *file, uint64_t len)
{
	uint64_t n;
	int code = header_length(r, file, len, &n);
	if (code != ATTNRT_OK)
		return code;
	r->data_len = len - 8 - n;
	code = rt_json_parse(&r->doc, r->al, file + 8, (size_t)n, r->err,
			     r->err_size);
	if (code == ATTNRT_OK && r->doc.nodes[0].kind != RT_JSON_OBJECT)
		code = rt_fail(r->err, r->err_size, ATTNRT_ERR_FORMAT,
			       "header is not a JSON object");
	return code;
}

/* ---- stage 3: each entry -------------------------------------------------- */

static int entry_fail(st_reader *r, const st_entry *t, const char *what)
{
	return rt_fail(r->err, r->err_size, ATTNRT_ERR_FORMAT, "%.*s: %s",
		       (int)t->name_len, t->name, what);
}

static int check_metadata(st_reader *r, const rt_json_node *m)
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
static int read_shape(st_reader *r, st_entry *t, const rt_json_node *s)
{
	const rt_json_node *nodes = r->doc.nodes;
	if (s->kind != RT_JSON_ARRAY)
		return entry_fail(r, t, "shape is not a list");
	if (s->n_children > ATTNRT_ST_MAX_RANK) {
		char what[64];
		snprintf(what, sizeof what, "shape has rank %u, more than %d",
			 s->n_children, ATTNRT_ST_MAX_RANK);
		return entry_fail(r, t, what);
	}
	t->rank = s->n_children;
	t->numel = 1;
	for (uint32_t c = s->first; c != RT_JSON_NONE; c = nodes[c].next) {
		uint64_t d;
		if (!rt_json_get_u64(&r->doc, &nodes[c], &d) || d > INT64_MAX)
			return entry_fail(r, t,
					  "shape holds something other "
					  "than non-negative integers");
		if (__builtin_mul_overflow(t->numel, d, &t->numel))
			return entry_fail(r, t,
					  "shape has more elements than "
					  "can be counted");
	}
	t->shape = (uint32_t)(s - nodes);
	return ATTNRT_OK;
}

static int read_offsets(st_reader *r, st_entry *t, const rt_json_node *o)
{
	const rt_json_node *nodes = r->doc.nodes;
	if (o->kind != RT_JSON_ARRAY || o->n_children != 2 ||
	    !rt_json_get_u64(&r->doc, &nodes[o->first], &t->begin) ||
	    !rt_json_get_u64(&r->doc, &nodes[nodes[o->first].next], &t->end))
		return entry_fail(r, t,
				  "data_offsets is not a list of two "
				  "non-negative integers");
	return ATTNRT_OK;
}

/* One member's field (dtype, shape or data_offsets); *seen marks which
 * were there. */
static int read_field(st_reader *r, st_entry *t, const rt_json_node *f,
		      unsigned *seen)
{
	const rt_json_doc *d = &r->doc;
	unsigned bit = key_is(d, f, "dtype")          ? 1u
		       : key_is(d, f, "shape")        ? 2u
		       : key_is(d, f, "data_offsets") ? 4u
						      : 0u;
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
static int check_entry_size(st_reader *r, const st_entry *t)
{
	unsigned size = rt_st_dtype_size(t->dtype, t->dtype_len);
	uint64_t bytes;
	if (!size)
		return rt_fail(r->err, r->err_size, ATTNRT_ERR_FORMAT,
			       "%.*s: unknown dtype \"%.*s\"", (int)t->name_len,
			       t->name, (int)t->dtype_len, t->dtype);
	if (t->end < t->begin)
		return rt_fail(r->err, r->err_size, ATTNRT_ERR_FORMAT,
			       "%.*s: data_offsets [%llu, %llu] end before they "
			       "begin",
			       (int)t->name_len, t->name,
			       (unsigned long long)t->begin,
			       (unsigned long long)t->end);
	if (__builtin_mul_overflow(t->numel, size, &bytes))
		return entry_fail(r, t,
				  "shape has more bytes than can be "
				  "counted");
	if (bytes != t->end - t->begin)
		return rt_fail(r->err, r->err_size, ATTNRT_ERR_FORMAT,
			       "%.*s: data_offsets [%llu, %llu] hold %llu bytes, "
			       "its dtype and shape need %llu",
			       (int)t->name_len, t->name,
			       (unsigned long long)t->begin,
			       (unsigned long long)t->end,
			       (unsigned long long)(t->end - t->begin),
			       (unsigned long long)bytes);
	return ATTNRT_OK;
}

static int read_entry(st_reader *r, st_entry *t, const rt_json_node *e)
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
		return entry_fail(r, t,
				  !(seen & 1)   ? "no dtype"
				  : !(seen & 2) ? "no shape"
						: "no data_offsets");
	return check_entry_size(r, t);
}

static int read_entries(st_reader *r)
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
			code = has_metadata
				       ? rt_fail(r->err, r->err_size,
						 ATTNRT_ERR_FORMAT,
						 "__metadata__ appears twice")
				       : check_metadata(r, &nodes[c]);
			has_metadata = true;
		} else {
			st_entry *t = &r->tensors[r->n_tensors++];
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
	const st_entry *ta = a, *tb = b;
	if (ta->begin != tb->begin)
		return ta->begin < tb->begin ? -1 : 1;
	return ta->end < tb->end ? -1 : ta->end > tb->end;
}

static int check_tiling(st_reader *r)
{
	qsort(r->tensors, r->n_tensors, sizeof *r->tensors, by_offsets);
	uint64_t at = 0;
	for (size_t i = 0; i < r->n_tensors; i++) {
		const st_entry *t = &r->tensors[i];
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
			       "tensor",
			       (unsigned long long)at,
			       (unsigned long long)gap_end);
	return ATTNRT_OK;
}

/* ---- names: sorted, each once --------------------------------------------- */

static int by_name(const void *a, const void *b)
{
	const st_entry *ta = a, *tb = b;
	size_t n = ta->name_len < tb->name_len ? ta->name_len : tb->name_len;
	int c = memcmp(ta->name, tb->name, n);
	if (c)
		return c;
	return ta->name_len < tb->name_len ? -1 : ta->name_len > tb->name_len;
}

static int check_names(st_reader *r)
{
	qsort(r->tensors, r->n_tensors, sizeof *r->tensors, by_name);
	for (size_t i = 0; i + 1 < r->n_tensors; i++)
		if (by_name(&r->tensors[i], &r->tensors[i + 1]) == 0)
			return rt_fail(r->err, r->err_size, ATTNRT_ERR_FORMAT,
				       "%.*s: the name appears twice in the "
				       "header",
				       (int)r->tensors[i].name_len,
				       r->tensors[i].name);
	return ATTNRT_OK;
}

/* ---- the result ------------------------------------------------------------- */

/* Appends n bytes of s and a NUL to the pool at *at; returns the copy. */
static char *pool_put(char *pool, size_t *at, const char *s, size_t n)
{
	char *out = pool + *at;
	memcpy(out, s, n);
	out[n] = 0;
	*at += n + 1;
	return out;
}

static const rt_json_node *find_metadata(const rt_json_doc *d)
{
	const rt_json_node *nodes = d->nodes;
	for (uint32_t c = nodes[0].first; c != RT_JSON_NONE; c = nodes[c].next)
		if (key_is(d, &nodes[c], "__metadata__") &&
		    nodes[c].kind == RT_JSON_OBJECT)
			return &nodes[c];
	return NULL;
}

/* The bytes the pool needs for names, dtypes and metadata. */
static size_t pool_bytes(const st_reader *r, const rt_json_node *meta)
{
	const rt_json_node *nodes = r->doc.nodes;
	size_t n = 0;
	for (size_t i = 0; i < r->n_tensors; i++)
		n += r->tensors[i].name_len + r->tensors[i].dtype_len + 2;
	for (uint32_t c = meta ? meta->first : RT_JSON_NONE; c != RT_JSON_NONE;
	     c = nodes[c].next)
		n += nodes[c].key_len + nodes[c].str_len + 2;
	return n;
}

static void fill_tensor(const st_reader *r, const st_entry *e,
			attnrt_st_tensor *t, char *pool, size_t *at)
{
	const rt_json_node *nodes = r->doc.nodes;
	t->name = pool_put(pool, at, e->name, e->name_len);
	t->dtype = pool_put(pool, at, e->dtype, e->dtype_len);
	t->rank = (int)e->rank;
	int k = 0;
	for (uint32_t c = nodes[e->shape].first; c != RT_JSON_NONE;
	     c = nodes[c].next) {
		uint64_t d = 0;
		rt_json_get_u64(&r->doc, &nodes[c], &d);
		t->dims[k++] = (int64_t)d;
	}
	t->data = r->data + e->begin;
	t->bytes = (size_t)(e->end - e->begin);
}

static int build_file(st_reader *r, attnrt_st_file *f)
{
	const rt_json_node *nodes = r->doc.nodes, *meta = find_metadata(&r->doc);
	f->n_meta = meta ? meta->n_children : 0;
	f->pool = rt_mem_alloc(r->al, pool_bytes(r, meta));
	f->tensors = rt_mem_alloc(r->al, r->n_tensors * sizeof *f->tensors);
	f->meta = rt_mem_alloc(r->al, f->n_meta * sizeof *f->meta);
	if (!f->pool || !f->tensors || !f->meta)
		return rt_fail(r->err, r->err_size, ATTNRT_ERR_NOMEM,
			       "out of memory");
	size_t at = 0, k = 0;
	for (size_t i = 0; i < r->n_tensors; i++)
		fill_tensor(r, &r->tensors[i], &f->tensors[i], f->pool, &at);
	f->n_tensors = r->n_tensors;
	for (uint32_t c = meta ? meta->first : RT_JSON_NONE; c != RT_JSON_NONE;
	     c = nodes[c].next, k++) {
		f->meta[k].key = pool_put(f->pool, &at,
					  rt_json_key(&r->doc, &nodes[c]),
					  nodes[c].key_len);
		f->meta[k].value = pool_put(f->pool, &at,
					    rt_json_str(&r->doc, &nodes[c]),
					    nodes[c].str_len);
	}
	return ATTNRT_OK;
}

/* ---- the public face ---------------------------------------------------------- */

/* Stages 1-4 over a file of len bytes whose header is at file, and
 * whose data follows it there when has_data (else r->data stays NULL:
 * the head of a file not read yet). */
static int check_stages(st_reader *r, const char *file, uint64_t len,
			bool has_data)
{
	int code = read_header(r, file, len);
	if (code == ATTNRT_OK && has_data)
		r->data = file + (len - r->data_len);
	if (code == ATTNRT_OK)
		code = read_entries(r);
	if (code == ATTNRT_OK)
		code = check_tiling(r);
	if (code == ATTNRT_OK)
		code = check_names(r);
	return code;
}

int attnrt_st_parse(const attnrt_allocator *al, const void *data, size_t len,
		    attnrt_st_file **out, char *err, size_t err_size)
{
	*out = NULL;
	if (len && !data)
		return rt_fail(err, err_size, ATTNRT_ERR_ARG, "no data");
	attnrt_st_file *f = rt_mem_alloc(al, sizeof *f);
	if (!f)
		return rt_fail(err, err_size, ATTNRT_ERR_NOMEM, "out of memory");
	memset(f, 0, sizeof *f);
	f->al = al;
	st_reader r = {.al = al, .err = err, .err_size = err_size};
	int code = check_stages(&r, data, len, true);
	if (code == ATTNRT_OK)
		code = build_file(&r, f);
	rt_mem_free(al, r.tensors);
	rt_json_fini(&r.doc);
	if (code != ATTNRT_OK)
		attnrt_st_free(f);
	else
		*out = f;
	return code;
}

int rt_st_head(const attnrt_allocator *al, const char *head, size_t have,
	       uint64_t file_len, size_t *need, char *err, size_t err_size)
{
	st_reader r = {.al = al, .err = err, .err_size = err_size};
	uint64_t n;
	*need = 0;
	int code = header_length(&r, head, file_len, &n);
	if (code != ATTNRT_OK)
		return code;
	if (have < 8 + n) {
		*need = 8 + (size_t)n;
		return ATTNRT_OK;
	}
	code = check_stages(&r, head, file_len, false);
	rt_mem_free(al, r.tensors);
	rt_json_fini(&r.doc);
	return code;
}

/* Reads up to n bytes from fd into p; *got how many came (fewer at the
 * end of the file). */
static int read_some(int fd, const char *path, char *p, size_t n, size_t *got,
		     char *err, size_t err_size)
{
	*got = 0;
	while (*got < n) {
		ssize_t k = read(fd, p + *got, n - *got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return rt_fail_errno(err, err_size, errno, "%s", path);
		if (k == 0)
			break;
		*got += (size_t)k;
	}
	return ATTNRT_OK;
}

/* Reads the head of the file open at fd (file_len bytes long) into *h
 * (*have bytes, from al): its first RT_HEAD_FIRST bytes (or all of a
 * shorter file), then as much more as check asks for. */
static int read_head(const attnrt_allocator *al, int fd, const char *path,
		     rt_head_fn check, uint64_t file_len, char **h,
		     size_t *have, char *err, size_t err_size)
{
	size_t need = file_len < RT_HEAD_FIRST ? (size_t)file_len
					       : RT_HEAD_FIRST;
	for (;;) {
		size_t got;
		char *grown = rt_mem_realloc(al, *h, need ? need : 1);
		if (!grown)
			return rt_fail(err, err_size, ATTNRT_ERR_NOMEM,
				       "%s: out of memory", path);
		*h = grown;
		int code = read_some(fd, path, *h + *have, need - *have, &got,
				     err, err_size);
		*have += got;
		if (code != ATTNRT_OK || *have < need)
			return code; /* cut short: the whole file's parse says so */
		code = check(al, *h, *have, file_len, &need, err, err_size);
		if (code != ATTNRT_OK && code != ATTNRT_ERR_NOMEM)
			rt_prefix_path(path, err, err_size);
		if (code != ATTNRT_OK || need <= *have || need > file_len)
			return code;
	}
}

int rt_read_file(const attnrt_allocator *al, const char *path,
		 uint64_t max_bytes, rt_head_fn head, char **data, size_t *len,
		 char *err, size_t err_size)
{
	struct stat st;
	*data = NULL;
	*len = 0;
	/* Not blocking: open() of a FIFO no program writes to would wait
	 * for one forever; it is refused below as not a file. */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return rt_fail_errno(err, err_size, errno, "%s", path);
	int code = ATTNRT_OK;
	char *h = NULL;
	size_t have = 0;
	if (fstat(fd, &st) != 0) {
		code = rt_fail_errno(err, err_size, errno, "%s", path);
	} else if (!S_ISREG(st.st_mode)) {
		code = rt_fail(err, err_size, ATTNRT_ERR_IO, "%s: not a file",
			       path);
	} else if ((uint64_t)st.st_size > max_bytes) {
		code = rt_fail(err, err_size, ATTNRT_ERR_FORMAT,
			       "%s: %lld "
			       "bytes, more than the %llu this reader takes",
			       path, (long long)st.st_size,
			       (unsigned long long)max_bytes);
	} else if (head) {
		code = read_head(al, fd, path, head, (uint64_t)st.st_size, &h,
				 &have, err, err_size);
	}
	if (code == ATTNRT_OK && !(*data = rt_mem_alloc(al, (size_t)st.st_size)))
		code = rt_fail(err, err_size, ATTNRT_ERR_NOMEM,
			       "%s: out of "
			       "memory",
			       path);
	size_t n = 0;
	if (code == ATTNRT_OK && have) {
		n = have <= (size_t)st.st_size ? have : (size_t)st.st_size;
		memcpy(*data, h, n);
	}
	rt_mem_free(al, h);
	if (code == ATTNRT_OK) {
		size_t got;
		code = read_some(fd, path, *data + n, (size_t)st.st_size - n,
				 &got, err, err_size);
		n += got;
	}
	close(fd);
	*len = n;
	return code;
}

void rt_prefix_path(const char *path, char *err, size_t err_size)
{
	size_t n = strlen(path) + 2;
	if (err && err_size > n + 1) {
		memmove(err + n, err, err_size - n);
		memcpy(err, path, n - 2);
		memcpy(err + n - 2, ": ", 2);
		err[err_size - 1] = 0;
	}
}

int attnrt_st_read(const attnrt_allocator *al, const char *path,
		   uint64_t max_bytes, attnrt_st_file **out, char *err,
		   size_t err_size)
{
	*out = NULL;
	if (!path)
		return rt_fail(err, err_size, ATTNRT_ERR_ARG, "no path");
	char *data;
	size_t len;
	int code = rt_read_file(al, path, max_bytes, rt_st_head, &data, &len,
				err, err_size);
	if (code == ATTNRT_OK) {
		code = attnrt_st_parse(al, data, len, out, err, err_size);
		if (code != ATTNRT_OK && code != ATTNRT_ERR_NOMEM)
			rt_prefix_path(path, err, err_size);
	}
	if (code != ATTNRT_OK) {
		rt_mem_free(al, data);
		return code;
	}
	(*out)->owned = data;
	return ATTNRT_OK;
}

static int by_tensor_name(const void *a, const void *b)
{
	return strcmp(((const attnrt_st_tensor *)a)->name,
		      ((const attnrt_st_tensor *)b)->name);
}

int rt_st_adopt(const attnrt_allocator *al, attnrt_st_tensor *tensors, size_t n,
		char *pool, attnrt_st_file **out, char *err, size_t err_size)
{
	*out = NULL;
	qsort(tensors, n, sizeof *tensors, by_tensor_name);
	for (size_t i = 0; i + 1 < n; i++)
		if (strcmp(tensors[i].name, tensors[i + 1].name) == 0) {
			rt_fail(err, err_size, ATTNRT_ERR_FORMAT,
				"%s: the name "
				"appears twice",
				tensors[i].name);
			rt_mem_free(al, tensors);
			rt_mem_free(al, pool);
			return ATTNRT_ERR_FORMAT;
		}
	attnrt_st_file *f = rt_mem_alloc(al, sizeof *f);
	if (!f) {
		rt_mem_free(al, tensors);
		rt_mem_free(al, pool);
		return rt_fail(err, err_size, ATTNRT_ERR_NOMEM, "out of memory");
	}
	memset(f, 0, sizeof *f);
	f->al = al;
	f->tensors = tensors;
	f->n_tensors = n;
	f->pool = pool;
	*out = f;
	return ATTNRT_OK;
}

void rt_st_own(attnrt_st_file *f, char *data)
{
	f->owned = data;
}

size_t attnrt_st_count(const attnrt_st_file *f)
{
	return f->n_tensors;
}

const attnrt_st_tensor *attnrt_st_at(const attnrt_st_file *f, size_t i)
{
	return i < f->n_tensors ? &f->tensors[i] : NULL;
}

const attnrt_st_tensor *attnrt_st_find(const attnrt_st_file *f, const char *name)
{
	size_t lo = 0, hi = f->n_tensors;
	st_entry key = {.name = name, .name_len = strlen(name)};
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const attnrt_st_tensor *t = &f->tensors[mid];
		st_entry e = {.name = t->name, .name_len = strlen(t->name)};
		int c = by_name(&e, &key);
		if (c == 0)
			return t;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

const char *attnrt_st_meta(const attnrt_st_file *f, const char *key)
{
	for (size_t i = 0; i < f->n_meta; i++)
		if (strcmp(f->meta[i].key, key) == 0)
			return f->meta[i].value;
	return NULL;
}

void attnrt_st_free(attnrt_st_file *f)
{
	if (!f)
		return;
	rt_mem_free(f->al, f->owned);
	rt_mem_free(f->al, f->tensors);
	rt_mem_free(f->al, f->meta);
	rt_mem_free(f->al, f->pool);
	rt_mem_free(f->al, f);
}
