/*
 * rt_internal.h - what the files of libattnrt share and programs do not
 * see: allocation through the caller's hook, error messages written into
 * the caller's buffer, the tokens and spans of translation data, and the
 * strict JSON reader the checkpoint loader parses safetensors headers
 * with.
 */
#ifndef ATTNC_RT_INTERNAL_H
#define ATTNC_RT_INTERNAL_H

#include "attnrt.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- memory (rt_alloc.c) -------------------------------------------------- */

/* realloc through the hook (al NULL: the C library's realloc/free);
 * size 0 frees and returns NULL. */
void *rt_mem_realloc(const attnrt_allocator *al, void *ptr, size_t size);
static inline void *rt_mem_alloc(const attnrt_allocator *al, size_t size)
{
	return rt_mem_realloc(al, NULL, size ? size : 1);
}
static inline void rt_mem_free(const attnrt_allocator *al, void *ptr)
{
	if (ptr)
		rt_mem_realloc(al, ptr, 0);
}
/* Grows *arr (elements of elem_size) to hold at least need; doubles the
 * capacity. Returns false (leaving *arr as it was) on failure. */
bool rt_mem_grow(const attnrt_allocator *al, void **arr, size_t *cap,
		 size_t need, size_t elem_size);

/* ---- errors (rt_alloc.c) --------------------------------------------------- */

/* Writes the message into err (err_size bytes, may be NULL/0) and returns
 * code, so that a failure is `return rt_fail(err, n, CODE, "...", ...)`. */
int rt_fail(char *err, size_t err_size, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* As rt_fail with ATTNRT_ERR_IO, appending ": " and the text of errno
 * value errnum. */
int rt_fail_errno(char *err, size_t err_size, int errnum, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Bytes per element of the safetensors dtype name[0..n), 0 if unknown. */
unsigned rt_st_dtype_size(const char *name, size_t n);

/* What a reader checks in a file's first bytes before the rest is read,
 * so that a file of the wrong kind or a cut one is refused without
 * reading (and holding) all of it: given head[0..have) of a file of
 * file_len bytes (have at least RT_HEAD_FIRST, or all of the file), sets *need to the bytes it must see to go on (more than
 * have, at most file_len), or to 0 when the rest may be read; returns
 * ATTNRT_OK, or an error with a message for what the head shows. */
#define RT_HEAD_FIRST 4096 /* the head's bytes read before a check */
typedef int (*rt_head_fn)(const attnrt_allocator *al, const char *head,
			  size_t have, uint64_t file_len, size_t *need,
			  char *err, size_t err_size);
/* Reads the whole regular file at path (at most max_bytes, else
 * ATTNRT_ERR_FORMAT) into *data from al (*len bytes; free it with al),
 * its head first checked by head (NULL: no check). */
int rt_read_file(const attnrt_allocator *al, const char *path,
		 uint64_t max_bytes, rt_head_fn head, char **data, size_t *len,
		 char *err, size_t err_size);
/* The head checks of the readers: safetensors (rt_st_read.c), and any of
 * the three formats attnrt_tensors_read takes (rt_npz.c). */
int rt_st_head(const attnrt_allocator *al, const char *head, size_t have,
	       uint64_t file_len, size_t *need, char *err, size_t err_size);
int rt_tensors_head(const attnrt_allocator *al, const char *head, size_t have,
		    uint64_t file_len, size_t *need, char *err, size_t err_size);
/* A file of the n tensors (from al; taken, as is pool, freed with the
 * file even on failure), sorted by name; an error when a name repeats.
 * The tensors' data is borrowed (rt_st_own gives the file its bytes). */
int rt_st_adopt(const attnrt_allocator *al, attnrt_st_tensor *tensors, size_t n,
		char *pool, attnrt_st_file **out, char *err, size_t err_size);
/* f frees data (from f's allocator) with itself. */
void rt_st_own(attnrt_st_file *f, char *data);

/* ---- NumPy's .npy (rt_npy.c) ------------------------------------------------ */

/* Whether data starts with the .npy magic. */
bool rt_npy_is(const void *data, size_t len);
/* The one array of the .npy in data (len bytes, borrowed) into *t: its
 * dtype a safetensors name, dims, data; name unset. ATTNRT_ERR_FORMAT
 * with a message for anything else. */
int rt_npy_parse(const void *data, size_t len, attnrt_st_tensor *t, char *err,
		 size_t err_size);
/* rt_head_fn's check of an .npy: its header, and its data's length
 * against the dtype and shape. */
int rt_npy_head(const char *head, size_t have, uint64_t file_len, size_t *need,
		char *err, size_t err_size);

/* Puts "path: " before the message in err (when it fits). */
void rt_prefix_path(const char *path, char *err, size_t err_size);

/* ---- parameters (rt_params.c) ---------------------------------------------- */

/* Elements of a table entry, or -1 if its rank or a dim is invalid or the
 * count overflows. */
int64_t rt_param_numel(const attnrt_param_info *p);
/* Checks every entry of a table (rank, dims, offsets aligned to 4 bytes,
 * names present); on failure writes a message naming the entry and
 * returns ATTNRT_ERR_ARG. */
int rt_params_check(const attnrt_param_info *table, size_t n_params, char *err,
		    size_t err_size);

/* Makes *sorted an array of pointers to the table's entries sorted by
 * name (byte order), allocated through al (free with rt_mem_free even
 * on failure; NULL when n_params is 0). Fails with ATTNRT_ERR_ARG naming
 * a name used twice, or ATTNRT_ERR_NOMEM. */
int rt_params_sort(const attnrt_allocator *al, const attnrt_param_info *table,
		   size_t n_params, const attnrt_param_info ***sorted,
		   char *err, size_t err_size);

/* ---- the tokens of translation data (rt_vocab.c) ------------------------------ */

/* A piece of a text: bytes [off, off + len). */
typedef struct rt_span {
	size_t off, len;
} rt_span;

/* An open-addressing hash index of spans of one text (base): each slot
 * holds the index of a span or -1; cap is a power of two, at least twice
 * the spans. Zeroed, it is empty. */
typedef struct rt_span_index {
	int32_t *slots;
	size_t cap;
} rt_span_index;

/* The slot of key[0..len) in ix: the one whose span (of base) equals it,
 * or the empty slot where it would go. ix must have a slot (cap > 0). */
size_t rt_span_index_slot(const rt_span_index *ix, const char *base,
			  const rt_span *spans, const char *key, size_t len);
/* Makes room for one span more than the n indexed, re-indexing spans
 * 0..n-1 when the table grows. False when out of memory. */
bool rt_span_index_reserve(rt_span_index *ix, const attnrt_allocator *al,
			   const char *base, const rt_span *spans, size_t n);

/* Python's s.split(' ') over a NUL-terminated string, optionally after
 * an empty token (is_lead: d2l's tokens of a side that its whole-file
 * preprocessing gave a space before). Spans are offsets in s. */
typedef struct rt_split {
	const char *s;
	size_t len, at; /* at: where the next token starts; len + 1: done */
	bool is_lead;
} rt_split;

rt_split rt_split_start(const char *s, bool is_lead);
/* The next token into *tok; false after the last. */
bool rt_split_next(rt_split *sp, rt_span *tok);

/* d2l's build_array_nmt for one row: the ids of the tokens of s (split
 * as rt_split, after an empty one when is_lead) in v, <unk> for unknown
 * ones (counted into *n_unknown, which may be NULL), then <eos>,
 * truncated or padded with <pad> to steps ids in row. Returns the number
 * of ids that are not <pad>. */
int32_t rt_vocab_encode_tokens(const attnrt_vocab *v, const char *s,
			       bool is_lead, int32_t steps, int32_t *row,
			       size_t *n_unknown);

/* ---- JSON (rt_json.c) ------------------------------------------------------- */

#define RT_JSON_NONE UINT32_MAX
#define RT_JSON_MAX_DEPTH 64

typedef enum rt_json_kind {
	RT_JSON_NULL,
	RT_JSON_FALSE,
	RT_JSON_TRUE,
	RT_JSON_NUMBER,
	RT_JSON_STRING,
	RT_JSON_ARRAY,
	RT_JSON_OBJECT,
} rt_json_kind;

/* One value. Children (array elements, object members) are linked by
 * index: first child, next sibling. Strings are decoded (escapes
 * resolved) into the document's text pool; a number keeps its source
 * text there too. */
typedef struct rt_json_node {
	rt_json_kind kind;
	uint32_t key, key_len; /* member of an object: its name in text */
	uint32_t str, str_len; /* string: decoded bytes; number: source text */
	uint32_t first, next;  /* first child, next sibling (RT_JSON_NONE) */
	uint32_t n_children;
} rt_json_node;

typedef struct rt_json_doc {
	const attnrt_allocator *al;
	rt_json_node *nodes; /* nodes[0] is the root */
	size_t n_nodes, nodes_cap;
	char *text;
	size_t n_text, text_cap;
} rt_json_doc;

/* Parses len bytes of strict JSON (RFC 8259: UTF-8, no trailing commas,
 * no comments, nesting at most RT_JSON_MAX_DEPTH, whitespace around the
 * value allowed) into doc. Returns ATTNRT_OK, ATTNRT_ERR_FORMAT with a
 * message giving the byte offset of the fault, or ATTNRT_ERR_NOMEM. The
 * document owns its memory; free with rt_json_fini (also after a
 * failure). */
int rt_json_parse(rt_json_doc *doc, const attnrt_allocator *al, const char *src,
		  size_t len, char *err, size_t err_size);
void rt_json_fini(rt_json_doc *doc);

/* Whether s[0..n) is valid UTF-8 (RFC 3629: shortest forms, no
 * surrogates, nothing above U+10FFFF). */
bool rt_utf8_is_valid(const char *s, size_t n);

/* A node's string bytes (not NUL-terminated: use the length). */
static inline const char *rt_json_str(const rt_json_doc *d,
				      const rt_json_node *n)
{
	return d->text + n->str;
}
static inline const char *rt_json_key(const rt_json_doc *d,
				      const rt_json_node *n)
{
	return d->text + n->key;
}
/* Reads a number node that is a non-negative integer written without
 * sign, fraction or exponent and fitting in uint64_t. */
bool rt_json_get_u64(const rt_json_doc *d, const rt_json_node *n,
		     uint64_t *value);

#endif
