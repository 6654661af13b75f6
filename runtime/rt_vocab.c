/*
 * rt_vocab.c - the vocabularies of translation data (attnrt.h,
 * "translation vocabularies"): d2l's Vocab as a program that translates
 * needs it, read from the string a checkpoint's metadata keeps; the
 * book's preprocessing of a sentence into the encoder's ids, and ids
 * back into text. rt_nmt.c builds its vocabularies through the same
 * parser, so the data a model trains on and a checkpoint's metadata
 * cannot disagree.
 *
 * A vocabulary keeps its string (the tokens joined by single spaces,
 * NUL-terminated) and a copy in which each space is a NUL, so that a
 * token is a span of it and a NUL-terminated string at once; looking a
 * token up is an open-addressing hash index over the spans. The span
 * index and Python's split(' ') are shared with rt_nmt.c
 * (rt_internal.h).
 */
#include "rt_internal.h"
#include "rt_nmt.h" /* rt_nmt_preprocess */

#include <string.h>

struct attnrt_vocab {
	attnrt_allocator al;
	char *str;       /* the tokens joined by single spaces */
	char *text;      /* str with each space a NUL: the tokens */
	rt_span *tokens; /* idx_to_token: spans of text */
	int32_t n_tokens;
	rt_span_index index; /* token_to_idx */
};

static const char *const reserved[] = {"<unk>", "<pad>", "<bos>", "<eos>"};
#define N_RESERVED 4

/* ---- spans and their index ------------------------------------------------------ */

static uint64_t hash_bytes(const char *s, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
	return h;
}

size_t rt_span_index_slot(const rt_span_index *ix, const char *base,
			  const rt_span *spans, const char *key, size_t len)
{
	size_t mask = ix->cap - 1;
	for (size_t s = hash_bytes(key, len) & mask;; s = (s + 1) & mask) {
		int32_t v = ix->slots[s];
		if (v < 0 ||
		    (spans[v].len == len &&
		     (len == 0 || !memcmp(base + spans[v].off, key, len))))
			return s;
	}
}

bool rt_span_index_reserve(rt_span_index *ix, const attnrt_allocator *al,
			   const char *base, const rt_span *spans, size_t n)
{
	if (2 * (n + 1) <= ix->cap)
		return true;
	size_t cap = ix->cap ? 2 * ix->cap : 64;
	while (cap < 2 * (n + 1))
		cap *= 2;
	int32_t *slots = rt_mem_alloc(al, cap * sizeof *slots);
	if (!slots)
		return false;
	rt_mem_free(al, ix->slots);
	ix->slots = slots;
	ix->cap = cap;
	for (size_t s = 0; s < cap; s++)
		slots[s] = -1;
	for (size_t i = 0; i < n; i++)
		slots[rt_span_index_slot(ix, base, spans, base + spans[i].off,
					 spans[i].len)] = (int32_t)i;
	return true;
}

/* ---- splitting on single spaces ------------------------------------------------- */

rt_split rt_split_start(const char *s, bool is_lead)
{
	return (rt_split){s, strlen(s), 0, is_lead};
}

bool rt_split_next(rt_split *sp, rt_span *tok)
{
	if (sp->is_lead) {
		sp->is_lead = false;
		*tok = (rt_span){0, 0};
		return true;
	}
	if (sp->at > sp->len)
		return false;
	const char *space = memchr(sp->s + sp->at, ' ', sp->len - sp->at);
	size_t end = space ? (size_t)(space - sp->s) : sp->len;
	*tok = (rt_span){sp->at, end - sp->at};
	sp->at = end + 1;
	return true;
}

/* ---- parsing -------------------------------------------------------------------- */

/* What is wrong with the string s of len bytes as a whole, or NULL. */
static const char *string_problem(const char *s, size_t len)
{
	if (s[strcspn(s, "\t\n\r")])
		return "a tab or line end, which no token holds";
	if (!rt_utf8_is_valid(s, len))
		return "bytes that are not UTF-8";
	return NULL;
}

/* Splits v->text (a copy of v->str) into its tokens. */
static int split_tokens(attnrt_vocab *v, size_t len, char *err, size_t err_size)
{
	size_t n = 1;
	for (size_t i = 0; i < len; i++)
		n += v->str[i] == ' ';
	if (n > INT32_MAX)
		return rt_fail(err, err_size, ATTNRT_ERR_FORMAT,
			       "vocabulary: more than %d tokens", INT32_MAX);
	v->tokens = rt_mem_alloc(&v->al, n * sizeof *v->tokens);
	if (!v->tokens)
		return rt_fail(err, err_size, ATTNRT_ERR_NOMEM, "out of memory");
	rt_split sp = rt_split_start(v->str, false);
	rt_span tok;
	while (rt_split_next(&sp, &tok)) {
		v->text[tok.off + tok.len] = '\0';
		v->tokens[v->n_tokens++] = tok;
	}
	return ATTNRT_OK;
}

/* Checks the reserved tokens and indexes every token, refusing one seen
 * twice. */
static int index_tokens(attnrt_vocab *v, char *err, size_t err_size)
{
	for (int i = 0; i < N_RESERVED; i++)
		if (i >= v->n_tokens ||
		    strcmp(v->text + v->tokens[i].off, reserved[i]) != 0)
			return rt_fail(err, err_size, ATTNRT_ERR_FORMAT,
				       "vocabulary: token %d is not %s (a "
				       "vocabulary starts with <unk> <pad> <bos> "
				       "<eos>)",
				       i, reserved[i]);
	for (int32_t i = 0; i < v->n_tokens; i++) {
		rt_span t = v->tokens[i];
		if (!rt_span_index_reserve(&v->index, &v->al, v->text,
					   v->tokens, (size_t)i))
			return rt_fail(err, err_size, ATTNRT_ERR_NOMEM,
				       "out of memory");
		size_t s = rt_span_index_slot(&v->index, v->text, v->tokens,
					      v->text + t.off, t.len);
		if (v->index.slots[s] >= 0)
			return rt_fail(err, err_size, ATTNRT_ERR_FORMAT,
				       "vocabulary: token %d '%.64s' is token %d "
				       "again",
				       i, v->text + t.off, v->index.slots[s]);
		v->index.slots[s] = i;
	}
	return ATTNRT_OK;
}

static int build(attnrt_vocab *v, const char *s, char *err, size_t err_size)
{
	size_t len = strlen(s);
	const char *why = string_problem(s, len);
	if (why)
		return rt_fail(err, err_size, ATTNRT_ERR_FORMAT,
			       "vocabulary: %s", why);
	v->str = rt_mem_alloc(&v->al, len + 1);
	v->text = rt_mem_alloc(&v->al, len + 1);
	if (!v->str || !v->text)
		return rt_fail(err, err_size, ATTNRT_ERR_NOMEM, "out of memory");
	memcpy(v->str, s, len + 1);
	memcpy(v->text, s, len + 1);
	int rc = split_tokens(v, len, err, err_size);
	return rc ? rc : index_tokens(v, err, err_size);
}

int attnrt_vocab_parse(const attnrt_allocator *al, const char *s,
		       attnrt_vocab **out, char *err, size_t err_size)
{
	*out = NULL;
	if (!s)
		return rt_fail(err, err_size, ATTNRT_ERR_ARG,
			       "vocabulary: NULL");
	attnrt_vocab *v = rt_mem_alloc(al, sizeof *v);
	if (!v)
		return rt_fail(err, err_size, ATTNRT_ERR_NOMEM, "out of memory");
	*v = (attnrt_vocab){0};
	if (al)
		v->al = *al;
	int rc = build(v, s, err, err_size);
	if (rc) {
		attnrt_vocab_free(v);
		return rc;
	}
	*out = v;
	return ATTNRT_OK;
}

int attnrt_vocab_take(const attnrt_allocator *al, const attnrt_st_file *f,
		      const char *key, attnrt_vocab **out, char *err,
		      size_t err_size)
{
	*out = NULL;
	const char *s = attnrt_st_meta(f, key);
	if (!s)
		return rt_fail(err, err_size, ATTNRT_ERR_FORMAT,
			       "%s: not in the "
			       "checkpoint's metadata (attnc --save writes it for "
			       "a model trained on data = nmt(...))",
			       key);
	int rc = attnrt_vocab_parse(al, s, out, err, err_size);
	if (rc)
		rt_prefix_path(key, err, err_size);
	return rc;
}

int attnrt_vocab_load(const attnrt_allocator *al, const char *path,
		      const char *key, attnrt_vocab **out, char *err,
		      size_t err_size)
{
	attnrt_st_file *f;
	*out = NULL;
	int rc = attnrt_st_read(al, path, UINT64_MAX, &f, err, err_size);
	if (rc)
		return rc; /* the message names the path */
	rc = attnrt_vocab_take(al, f, key, out, err, err_size);
	if (rc)
		rt_prefix_path(path, err, err_size);
	attnrt_st_free(f);
	return rc;
}

void attnrt_vocab_free(attnrt_vocab *v)
{
	if (!v)
		return;
	attnrt_allocator al = v->al;
	rt_mem_free(&al, v->str);
	rt_mem_free(&al, v->text);
	rt_mem_free(&al, v->tokens);
	rt_mem_free(&al, v->index.slots);
	rt_mem_free(&al, v);
}

/* ---- lookups -------------------------------------------------------------------- */

int32_t attnrt_vocab_size(const attnrt_vocab *v)
{
	return v->n_tokens;
}

const char *attnrt_vocab_token(const attnrt_vocab *v, int32_t id)
{
	if (id < 0 || id >= v->n_tokens)
		return NULL;
	return v->text + v->tokens[id].off;
}

int32_t attnrt_vocab_lookup(const attnrt_vocab *v, const char *token, size_t len)
{
	int32_t id = v->index.slots[rt_span_index_slot(&v->index, v->text,
						       v->tokens, token, len)];
	return id < 0 ? ATTNRT_VOCAB_UNK : id;
}

const char *attnrt_vocab_string(const attnrt_vocab *v)
{
	return v->str;
}

/* ---- sentences ------------------------------------------------------------------ */

int32_t rt_vocab_encode_tokens(const attnrt_vocab *v, const char *s,
			       bool is_lead, int32_t steps, int32_t *row,
			       size_t *n_unknown)
{
	rt_split sp = rt_split_start(s, is_lead);
	rt_span tok;
	int32_t t = 0;
	while (t < steps && rt_split_next(&sp, &tok)) {
		row[t] = attnrt_vocab_lookup(v, s + tok.off, tok.len);
		if (n_unknown && row[t] == ATTNRT_VOCAB_UNK)
			++*n_unknown;
		t++;
	}
	if (t < steps)
		row[t++] = ATTNRT_VOCAB_EOS;
	while (t < steps)
		row[t++] = ATTNRT_VOCAB_PAD;
	int32_t valid = 0;
	for (t = 0; t < steps; t++)
		valid += row[t] != ATTNRT_VOCAB_PAD;
	return valid;
}

int attnrt_vocab_encode(const attnrt_vocab *v, const char *sentence,
			int32_t steps, int32_t *ids, int32_t *valid,
			size_t *n_unknown, char *err, size_t err_size)
{
	size_t len = strlen(sentence);
	if (steps < 1)
		return rt_fail(err, err_size, ATTNRT_ERR_ARG,
			       "steps must be at "
			       "least 1, not %d",
			       (int)steps);
	if (len > (SIZE_MAX - 1) / 2)
		return rt_fail(err, err_size, ATTNRT_ERR_NOMEM,
			       "sentence too long");
	char *s = rt_mem_alloc(&v->al, 2 * len + 1);
	if (!s)
		return rt_fail(err, err_size, ATTNRT_ERR_NOMEM, "out of memory");
	int rc = ATTNRT_OK;
	if (rt_nmt_preprocess(sentence, len, s, 2 * len + 1) == SIZE_MAX) {
		rc = rt_fail(err, err_size, ATTNRT_ERR_ARG,
			     "the sentence is not valid UTF-8");
	} else {
		if (n_unknown)
			*n_unknown = 0;
		*valid = rt_vocab_encode_tokens(v, s, false, steps, ids,
						n_unknown);
	}
	rt_mem_free(&v->al, s);
	return rc;
}

/* Appends len bytes to out (cap bytes), counting those past cap. */
static void put(char *out, size_t cap, size_t *n, const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++, ++*n)
		if (*n < cap)
			out[*n] = s[i];
}

size_t attnrt_vocab_decode(const attnrt_vocab *v, const int32_t *ids, size_t n,
			   char *out, size_t cap)
{
	size_t at = 0;
	for (size_t i = 0; i < n && ids[i] != ATTNRT_VOCAB_EOS; i++) {
		const char *tok = attnrt_vocab_token(v, ids[i]);
		if (!tok)
			tok = reserved[ATTNRT_VOCAB_UNK];
		if (i)
			put(out, cap, &at, " ", 1);
		put(out, cap, &at, tok, strlen(tok));
	}
	if (cap)
		out[at < cap ? at : cap - 1] = '\0';
	return at;
}
