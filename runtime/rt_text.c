/*
 * rt_text.c - character vocabularies of UTF-8 texts (rt_text.h).
 *
 * A vocabulary is the sorted array of the distinct code points of its
 * text; looking a character up is a binary search, so building one is
 * O(n log V) and takes memory linear in the text only for the caller's
 * ids.
 */
#include "rt_internal.h"
#include "rt_text.h"

#include "rt_text_default.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rt_text_vocab {
	const attnrt_allocator *al;
	uint32_t *chars; /* code points, sorted, each once */
	int32_t n;
	char *str; /* their UTF-8, NUL-terminated */
};

/* Decodes the code point at s[*at] (of len bytes), advancing *at; returns
 * UINT32_MAX for an invalid sequence (checked by rt_utf8_is_valid). */
static uint32_t next_char(const char *s, size_t len, size_t *at)
{
	const unsigned char *p = (const unsigned char *)s + *at;
	size_t n = p[0] < 0x80 ? 1 : p[0] < 0xe0 ? 2 : p[0] < 0xf0 ? 3 : 4;
	if (*at + n > len || !rt_utf8_is_valid(s + *at, n) || p[0] == 0)
		return UINT32_MAX;
	uint32_t c = n == 1   ? p[0]
		     : n == 2 ? p[0] & 0x1fu
		     : n == 3 ? p[0] & 0x0fu
			      : p[0] & 0x07u;
	for (size_t k = 1; k < n; k++)
		c = c << 6 | (p[k] & 0x3fu);
	*at += n;
	return c;
}

static size_t put_char(uint32_t c, char *out)
{
	unsigned char *o = (unsigned char *)out;
	if (c < 0x80) {
		o[0] = (unsigned char)c;
		return 1;
	}
	if (c < 0x800) {
		o[0] = (unsigned char)(0xc0 | c >> 6);
		o[1] = (unsigned char)(0x80 | (c & 0x3f));
		return 2;
	}
	if (c < 0x10000) {
		o[0] = (unsigned char)(0xe0 | c >> 12);
		o[1] = (unsigned char)(0x80 | (c >> 6 & 0x3f));
		o[2] = (unsigned char)(0x80 | (c & 0x3f));
		return 3;
	}
	o[0] = (unsigned char)(0xf0 | c >> 18);
	o[1] = (unsigned char)(0x80 | (c >> 12 & 0x3f));
	o[2] = (unsigned char)(0x80 | (c >> 6 & 0x3f));
	o[3] = (unsigned char)(0x80 | (c & 0x3f));
	return 4;
}

/* "line L, column C" of byte at of text, into buf. */
static int fail_at(const char *text, size_t at, char *err, size_t err_size,
		   const char *what)
{
	size_t line = 1, col = 1;
	for (size_t i = 0; i < at; i++) {
		if (text[i] == '\n') {
			line++;
			col = 1;
		} else if (((unsigned char)text[i] & 0xc0) != 0x80) {
			col++;
		}
	}
	return rt_fail(err, err_size, ATTNRT_ERR_FORMAT,
		       "%s at line %zu, "
		       "column %zu",
		       what, line, col);
}

static int by_code(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* v->str from v->chars. */
static int make_string(rt_text_vocab *v, char *err, size_t err_size)
{
	v->str = rt_mem_alloc(v->al, (size_t)v->n * 4 + 1);
	if (!v->str)
		return rt_fail(err, err_size, ATTNRT_ERR_NOMEM, "out of memory");
	size_t at = 0;
	for (int32_t i = 0; i < v->n; i++)
		at += put_char(v->chars[i], v->str + at);
	v->str[at] = 0;
	return ATTNRT_OK;
}

/* The distinct characters of text into a new vocabulary; with is_sorted
 * the text must list them sorted, each once. */
static int collect(const attnrt_allocator *al, const char *text, size_t len,
		   bool is_sorted, rt_text_vocab **out, char *err,
		   size_t err_size)
{
	*out = NULL;
	rt_text_vocab *v = rt_mem_alloc(al, sizeof *v);
	uint32_t *all = rt_mem_alloc(al, (len + 1) * sizeof *all);
	if (!v || !all) {
		rt_mem_free(al, v);
		rt_mem_free(al, all);
		return rt_fail(err, err_size, ATTNRT_ERR_NOMEM, "out of memory");
	}
	memset(v, 0, sizeof *v);
	v->al = al;
	size_t n = 0, at = 0;
	int code = ATTNRT_OK;
	while (at < len && code == ATTNRT_OK) {
		size_t start = at;
		uint32_t c = next_char(text, len, &at);
		if (c == UINT32_MAX)
			code = fail_at(text, start, err, err_size,
				       "not UTF-8 text");
		else if (is_sorted && n && c <= all[n - 1])
			code = fail_at(text, start, err, err_size,
				       "a vocabulary "
				       "not sorted or with a character twice");
		all[n++] = c;
	}
	if (code == ATTNRT_OK && n == 0)
		code = rt_fail(err, err_size, ATTNRT_ERR_FORMAT,
			       "no characters");
	qsort(all, n, sizeof *all, by_code);
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (!k || all[i] != all[k - 1])
			all[k++] = all[i];
	v->chars = all;
	v->n = (int32_t)k;
	if (code == ATTNRT_OK)
		code = make_string(v, err, err_size);
	if (code != ATTNRT_OK) {
		rt_text_vocab_free(v);
		return code;
	}
	*out = v;
	return ATTNRT_OK;
}

int rt_text_vocab_build(const attnrt_allocator *al, const char *text, size_t len,
			rt_text_vocab **out, char *err, size_t err_size)
{
	return collect(al, text, len, false, out, err, err_size);
}

int rt_text_vocab_parse(const attnrt_allocator *al, const char *s,
			rt_text_vocab **out, char *err, size_t err_size)
{
	return collect(al, s, strlen(s), true, out, err, err_size);
}

void rt_text_vocab_free(rt_text_vocab *v)
{
	if (!v)
		return;
	rt_mem_free(v->al, v->chars);
	rt_mem_free(v->al, v->str);
	rt_mem_free(v->al, v);
}

int32_t rt_text_vocab_size(const rt_text_vocab *v)
{
	return v->n;
}

const char *rt_text_vocab_string(const rt_text_vocab *v)
{
	return v->str;
}

static int32_t find(const rt_text_vocab *v, uint32_t c)
{
	int32_t lo = 0, hi = v->n;
	while (lo < hi) {
		int32_t mid = lo + (hi - lo) / 2;
		if (v->chars[mid] == c)
			return mid;
		if (v->chars[mid] < c)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

int rt_text_encode(const rt_text_vocab *v, const char *text, size_t len,
		   int32_t *ids, size_t *n, char *err, size_t err_size)
{
	size_t at = 0;
	*n = 0;
	while (at < len) {
		size_t start = at;
		uint32_t c = next_char(text, len, &at);
		int32_t id = c == UINT32_MAX ? -1 : find(v, c);
		if (c == UINT32_MAX)
			return fail_at(text, start, err, err_size,
				       "not UTF-8 text");
		if (id < 0) {
			char ch[8] = {0};
			put_char(c, ch);
			char what[64];
			snprintf(what, sizeof what,
				 "'%s' (U+%04X) is not in the "
				 "vocabulary",
				 c < 0x20 ? "?" : ch, (unsigned)c);
			return fail_at(text, start, err, err_size, what);
		}
		ids[(*n)++] = id;
	}
	return ATTNRT_OK;
}

size_t rt_text_decode(const rt_text_vocab *v, int32_t id, char *out)
{
	if (id < 0 || id >= v->n)
		return 0;
	return put_char(v->chars[id], out);
}

const char *rt_text_default(size_t *len)
{
	if (len)
		*len = sizeof rt_text_default_text - 1;
	return (const char *)rt_text_default_text;
}
