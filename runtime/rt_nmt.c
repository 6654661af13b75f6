/*
 * rt_nmt.c - d2l's load_data_nmt (rt_nmt.h): reading a Tatoeba-format
 * file, d2l's preprocess_nmt and tokenize_nmt, its Vocab, build_array_nmt,
 * the batches of an epoch, and the helpers that translate one sentence.
 *
 * d2l preprocesses the whole file as one string, so the character before
 * a line's English side is '\n' (nothing for the first line) and the one
 * before its French side is '\t'. Here each side is preprocessed on its
 * own and stored that way (the form a user's sentence is compared with);
 * where d2l would have put a space before the side's first character (a
 * , . ! or ? after the newline or tab), the side's tokens start with the
 * empty token that space gives, as d2l's tokens do.
 *
 * All text lives in one pool (d->text), referred to by offset. The
 * vocabularies are attnrt_vocab (rt_vocab.c), built from the string of
 * their tokens that a checkpoint's metadata keeps, which also encodes a
 * sentence and decodes ids; the span index and the split on spaces are
 * shared with it.
 */
#include "rt_nmt.h"

#include "rt_internal.h"
#include "rt_rng.h"
#include "rt_nmt_default.h" /* generated: rt_nmt_default_text[] */

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The rt_rng stream of epoch e's shuffle is SHUFFLE_STREAM + e: far from
 * the parameters' streams (their index) and dropout's (step << 20). */
#define SHUFFLE_STREAM 0x4e4d540000000000ull /* "NMT" */

static const char *const reserved[] = {"<unk>", "<pad>", "<bos>", "<eos>"};
#define N_RESERVED 4

typedef struct nmt_pair {
	size_t side[2];  /* offsets in d->text of the preprocessed sides */
	bool is_lead[2]; /* d2l's tokens of the side start with "" */
} nmt_pair;

struct rt_nmt_data {
	attnrt_allocator al;
	rt_nmt_stats stats;
	int steps;  /* T */
	char *text; /* the preprocessed sides, each NUL-terminated */
	size_t n_text, text_cap;
	nmt_pair *pairs; /* every usable pair of the file */
	size_t n_pairs, pairs_cap;
	size_t n_rows; /* N: the pairs used, a prefix of pairs */
	attnrt_vocab *vocab[2];
	int32_t *ids[2];   /* (N, T) per side */
	int32_t *valid[2]; /* (N) per side */
};

/* Tokens counted in order of first appearance, as Python's Counter. */
typedef struct nmt_counter {
	rt_span *spans; /* in d->text */
	size_t *counts;
	size_t n, cap;
	rt_span_index index;
} nmt_counter;

/* ---- UTF-8 and d2l's preprocess_nmt --------------------------------------------- */

/* The code point at s[*i] (valid UTF-8), advancing *i past it. */
static uint32_t utf8_next(const unsigned char *s, size_t *i)
{
	uint32_t c = s[(*i)++];
	int more = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
	if (more)
		c &= 0x3Fu >> more;
	while (more--)
		c = (c << 6) | (s[(*i)++] & 0x3Fu);
	return c;
}

/* Where a snprintf-like writer is: bytes past cap are counted, not
 * written. */
typedef struct nmt_out {
	char *buf;
	size_t cap, n;
} nmt_out;

static void out_byte(nmt_out *o, unsigned char b)
{
	if (o->n < o->cap)
		o->buf[o->n] = (char)b;
	o->n++;
}

static void out_utf8(nmt_out *o, uint32_t c)
{
	if (c < 0x80) {
		out_byte(o, (unsigned char)c);
		return;
	}
	int more = c < 0x800 ? 1 : c < 0x10000 ? 2 : 3;
	out_byte(o,
		 (unsigned char)((0xFF00u >> (more + 1)) | (c >> (6 * more))));
	while (more--)
		out_byte(o, (unsigned char)(0x80 | ((c >> (6 * more)) & 0x3F)));
}

/* NUL-terminates the output (cutting it at cap - 1) and returns its full
 * length. */
static size_t out_end(nmt_out *o)
{
	if (o->cap)
		o->buf[o->n < o->cap ? o->n : o->cap - 1] = '\0';
	return o->n;
}

/* Whether c is an uppercase letter of Latin Extended-A whose lowercase is
 * the next code point. */
static bool is_upper_ext_a(uint32_t c)
{
	if (c >= 0x100 && c <= 0x137)
		return c % 2 == 0 && c != 0x130;
	if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E))
		return c % 2 == 1;
	if (c >= 0x14A && c <= 0x177)
		return c % 2 == 0;
	return false;
}

/* The first step of d2l's preprocess_nmt for one character: U+202F and
 * U+00A0 become a space, the rest Python's str.lower() (for ASCII, the
 * Latin-1 Supplement and Latin Extended-A). Writes 1 or 2 code points to
 * out and returns how many. */
static int normalize_char(uint32_t c, uint32_t out[2])
{
	if (c == 0x202F || c == 0xA0)
		c = ' ';
	else if ((c >= 'A' && c <= 'Z') || (c >= 0xC0 && c <= 0xDE && c != 0xD7))
		c += 0x20;
	else if (c == 0x178) /* Ÿ */
		c = 0xFF;
	else if (is_upper_ext_a(c))
		c += 1;
	else if (c == 0x130) { /* İ: "i" and a combining dot above */
		out[0] = 'i';
		out[1] = 0x307;
		return 2;
	}
	out[0] = c;
	return 1;
}

static bool is_punct(uint32_t c)
{
	return c == ',' || c == '.' || c == '!' || c == '?';
}

size_t rt_nmt_preprocess(const char *text, size_t len, char *out, size_t cap)
{
	if (len && (memchr(text, 0, len) || !rt_utf8_is_valid(text, len)))
		return SIZE_MAX;
	nmt_out o = {out, cap, 0};
	uint32_t prev = ' '; /* the first character never gets a space */
	for (size_t i = 0; i < len;) {
		uint32_t c[2];
		int n = normalize_char(utf8_next((const unsigned char *)text, &i),
				       c);
		for (int k = 0; k < n; k++) {
			if (is_punct(c[k]) && prev != ' ')
				out_byte(&o, ' ');
			out_utf8(&o, c[k]);
			prev = c[k];
		}
	}
	return out_end(&o);
}

/* ---- reading the lines ---------------------------------------------------------- */

/* One line of the file, without its end. */
typedef struct nmt_line {
	const char *s;
	size_t len;
	size_t index; /* 0-based line number */
} nmt_line;

/* The line at text[*at] (lines end at "\n", "\r\n" or a lone "\r", as
 * Python's universal newlines read them), advancing *at past its end.
 * False at the end of the text. Counts CR endings and an unterminated
 * last line in st. */
static bool line_next(const char *text, size_t len, size_t *at, nmt_line *ln,
		      rt_nmt_stats *st)
{
	if (*at >= len)
		return false;
	size_t i = *at;
	while (i < len && text[i] != '\n' && text[i] != '\r')
		i++;
	ln->s = text + *at;
	ln->len = i - *at;
	ln->index = st->n_lines++;
	if (i == len)
		st->is_unterminated = true;
	else if (text[i] == '\r') {
		st->n_crlf++;
		i += i + 1 < len && text[i + 1] == '\n' ? 2 : 1;
	} else
		i++;
	*at = i;
	return true;
}

/* Appends a preprocessed side to d->text; *off gets its offset. False
 * when out of memory. */
static bool text_add_side(rt_nmt_data *d, const char *s, size_t len, size_t *off)
{
	size_t need = d->n_text + 2 * len + 1;
	if (!rt_mem_grow(&d->al, (void **)&d->text, &d->text_cap, need, 1))
		return false;
	*off = d->n_text;
	d->n_text += rt_nmt_preprocess(s, len, d->text + *off, 2 * len + 1) + 1;
	return true;
}

/* Whether a preprocessed side has nothing but spaces. */
static bool is_blank(const char *s)
{
	return s[strspn(s, " ")] == '\0';
}

/* Counts a skipped line. */
static int skip_line(size_t *count)
{
	++*count;
	return ATTNRT_OK;
}

/* Preprocesses a line's two sides (the bytes before the first tab and up
 * to the next one) and keeps them as a pair, or counts why the line is
 * skipped. is_used: the pair is a row of the arrays. Returns ATTNRT_OK
 * or ATTNRT_ERR_NOMEM. */
static int read_pair(rt_nmt_data *d, const nmt_line *ln, bool is_used)
{
	rt_nmt_stats *st = &d->stats;
	if (ln->len == 0)
		return skip_line(&st->n_blank);
	if (memchr(ln->s, 0, ln->len) || !rt_utf8_is_valid(ln->s, ln->len))
		return skip_line(&st->n_bad_utf8);
	const char *tab = memchr(ln->s, '\t', ln->len);
	if (!tab)
		return skip_line(&st->n_no_tab);
	const char *fr = tab + 1, *end = ln->s + ln->len;
	const char *tab2 = memchr(fr, '\t', (size_t)(end - fr));
	nmt_pair p;
	size_t mark = d->n_text;
	if (!text_add_side(d, ln->s, (size_t)(tab - ln->s), &p.side[0]) ||
	    !text_add_side(d, fr, (size_t)((tab2 ? tab2 : end) - fr), &p.side[1]))
		return ATTNRT_ERR_NOMEM;
	if (is_blank(d->text + p.side[0]) || is_blank(d->text + p.side[1])) {
		d->n_text = mark;
		return skip_line(&st->n_empty_side);
	}
	for (int k = 0; k < 2; k++)
		p.is_lead[k] = (k == 1 || ln->index > 0) &&
			       is_punct((unsigned char)d->text[p.side[k]]);
	if (!rt_mem_grow(&d->al, (void **)&d->pairs, &d->pairs_cap,
			 d->n_pairs + 1, sizeof *d->pairs))
		return ATTNRT_ERR_NOMEM;
	d->pairs[d->n_pairs++] = p;
	st->n_extra_fields += tab2 != NULL;
	st->n_pairs++;
	d->n_rows += is_used;
	return ATTNRT_OK;
}

/* Reads every line of text into d's pairs; the pairs of lines 0 ..
 * examples (every line when examples is 0) are the rows, as d2l's
 * tokenize_nmt keeps them. */
static int read_lines(rt_nmt_data *d, const char *text, size_t len,
		      size_t examples)
{
	size_t at = 0;
	if (len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) {
		d->stats.has_bom = true;
		at = 3;
	}
	nmt_line ln;
	while (line_next(text, len, &at, &ln, &d->stats)) {
		int rc = read_pair(d, &ln,
				   examples == 0 || ln.index <= examples);
		if (rc)
			return rc;
	}
	return ATTNRT_OK;
}

/* ---- d2l's Vocab ---------------------------------------------------------------- */

/* Counts one token (a span of d->text) in c. */
static int counter_add(rt_nmt_data *d, nmt_counter *c, rt_span tok)
{
	if (!rt_span_index_reserve(&c->index, &d->al, d->text, c->spans, c->n))
		return ATTNRT_ERR_NOMEM;
	size_t s = rt_span_index_slot(&c->index, d->text, c->spans,
				      d->text + tok.off, tok.len);
	if (c->index.slots[s] >= 0) {
		c->counts[c->index.slots[s]]++;
		return ATTNRT_OK;
	}
	if (c->n >= INT32_MAX - N_RESERVED)
		return ATTNRT_ERR_FORMAT;
	size_t cap = c->cap;
	if (!rt_mem_grow(&d->al, (void **)&c->spans, &c->cap, c->n + 1,
			 sizeof *c->spans) ||
	    !rt_mem_grow(&d->al, (void **)&c->counts, &cap, c->n + 1,
			 sizeof *c->counts))
		return ATTNRT_ERR_NOMEM;
	c->spans[c->n] = tok;
	c->counts[c->n] = 1;
	c->index.slots[s] = (int32_t)c->n++;
	return ATTNRT_OK;
}

/* Counts the tokens of one side of the rows, as collections.Counter does
 * over d2l's token lists. */
static int counter_fill(rt_nmt_data *d, nmt_counter *c, rt_nmt_side side)
{
	for (size_t r = 0; r < d->n_rows; r++) {
		const nmt_pair *p = &d->pairs[r];
		rt_split sp = rt_split_start(d->text + p->side[side],
					     p->is_lead[side]);
		rt_span tok;
		while (rt_split_next(&sp, &tok)) {
			tok.off += p->side[side];
			int rc = counter_add(d, c, tok);
			if (rc)
				return rc;
		}
	}
	return ATTNRT_OK;
}

static void counter_fini(rt_nmt_data *d, nmt_counter *c)
{
	rt_mem_free(&d->al, c->spans);
	rt_mem_free(&d->al, c->counts);
	rt_mem_free(&d->al, c->index.slots);
}

/* A token kept in the vocabulary, for sorting. */
typedef struct nmt_rank {
	size_t count, first;
} nmt_rank;

/* Decreasing count, ties by first appearance: Python's stable
 * sorted(counter.items(), key=count, reverse=True). */
static int rank_cmp(const void *a, const void *b)
{
	const nmt_rank *x = a, *y = b;
	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	return x->first < y->first ? -1 : x->first > y->first;
}

static bool is_reserved(const char *s, size_t len)
{
	for (int i = 0; i < N_RESERVED; i++)
		if (strlen(reserved[i]) == len && !memcmp(reserved[i], s, len))
			return true;
	return false;
}

/* Makes *out from the ranked tokens of c: the reserved ones, then those
 * (not reserved) in rank order, joined by spaces into the string that a
 * checkpoint's metadata keeps, parsed as any such string is. */
static int vocab_fill(rt_nmt_data *d, attnrt_vocab **out, const nmt_counter *c,
		      const nmt_rank *ranks, size_t n_ranks)
{
	size_t bytes = 6 * N_RESERVED + 1, at = 0;
	for (size_t i = 0; i < n_ranks; i++)
		bytes += c->spans[ranks[i].first].len + 1;
	char *s = rt_mem_alloc(&d->al, bytes);
	if (!s)
		return ATTNRT_ERR_NOMEM;
	for (int i = 0; i < N_RESERVED; i++)
		at += (size_t)sprintf(s + at, "%s%s", i ? " " : "", reserved[i]);
	for (size_t i = 0; i < n_ranks; i++) {
		rt_span t = c->spans[ranks[i].first];
		if (is_reserved(d->text + t.off, t.len))
			continue;
		s[at++] = ' ';
		memcpy(s + at, d->text + t.off, t.len);
		at += t.len;
	}
	s[at] = '\0';
	int rc = attnrt_vocab_parse(&d->al, s, out, NULL, 0);
	assert(rc != ATTNRT_ERR_FORMAT); /* corpus tokens are unique, spaceless */
	rt_mem_free(&d->al, s);
	return rc;
}

/* d2l's Vocab(tokens, min_freq=2, reserved_tokens=['<pad>', '<bos>',
 * '<eos>']) over one side of the rows. */
static int vocab_build(rt_nmt_data *d, rt_nmt_side side)
{
	nmt_counter c = {0};
	nmt_rank *ranks = NULL;
	int rc = counter_fill(d, &c, side);
	if (rc)
		goto out;
	rc = ATTNRT_ERR_NOMEM;
	ranks = rt_mem_alloc(&d->al, c.n * sizeof *ranks);
	if (!ranks)
		goto out;
	size_t n_ranks = 0;
	for (size_t i = 0; i < c.n; i++)
		if (c.counts[i] >= RT_NMT_MIN_FREQ)
			ranks[n_ranks++] = (nmt_rank){c.counts[i], i};
	qsort(ranks, n_ranks, sizeof *ranks, rank_cmp);
	rc = vocab_fill(d, &d->vocab[side], &c, ranks, n_ranks);
out:
	rt_mem_free(&d->al, ranks);
	counter_fini(d, &c);
	return rc;
}

/* ---- d2l's build_array_nmt ------------------------------------------------------ */

static int arrays_build(rt_nmt_data *d)
{
	size_t T = (size_t)d->steps, cells;
	if (__builtin_mul_overflow(d->n_rows, T * sizeof(int32_t), &cells))
		return ATTNRT_ERR_NOMEM;
	for (int k = 0; k < 2; k++) {
		d->ids[k] = rt_mem_alloc(&d->al, cells);
		d->valid[k] = rt_mem_alloc(&d->al, d->n_rows * sizeof(int32_t));
		if (!d->ids[k] || !d->valid[k])
			return ATTNRT_ERR_NOMEM;
		for (size_t r = 0; r < d->n_rows; r++) {
			const nmt_pair *p = &d->pairs[r];
			d->valid[k][r] = rt_vocab_encode_tokens(
				d->vocab[k], d->text + p->side[k], p->is_lead[k],
				d->steps, d->ids[k] + r * T, NULL);
		}
	}
	return ATTNRT_OK;
}

/* ---- loading -------------------------------------------------------------------- */

const char *rt_nmt_default_corpus(size_t *len)
{
	if (len)
		*len = sizeof rt_nmt_default_text - 1;
	return (const char *)rt_nmt_default_text;
}

/* The error for no row: what the lines were. */
static int fail_no_pair(const rt_nmt_data *d, const char *name, size_t examples,
			char *err, size_t err_size)
{
	const rt_nmt_stats *st = &d->stats;
	char among[64] = "";
	if (st->n_pairs)
		snprintf(among, sizeof among, " among its first %zu lines",
			 examples + 1);
	return rt_fail(err, err_size, ATTNRT_ERR_FORMAT,
		       "%s: no English<TAB>French pair%s (%zu lines: %zu "
		       "blank, %zu without a tab, %zu with an empty side, %zu "
		       "not UTF-8)",
		       name, among, st->n_lines, st->n_blank, st->n_no_tab,
		       st->n_empty_side, st->n_bad_utf8);
}

/* Everything after reading: vocabularies and arrays. */
static int data_build(rt_nmt_data *d, const char *text, size_t len,
		      const char *name, size_t examples, char *err,
		      size_t err_size)
{
	int rc = read_lines(d, text, len, examples);
	if (rc == ATTNRT_OK && d->n_rows == 0)
		return fail_no_pair(d, name, examples, err, err_size);
	if (rc == ATTNRT_OK)
		rc = vocab_build(d, RT_NMT_SRC);
	if (rc == ATTNRT_OK)
		rc = vocab_build(d, RT_NMT_TGT);
	if (rc == ATTNRT_OK)
		rc = arrays_build(d);
	if (rc == ATTNRT_ERR_FORMAT)
		return rt_fail(err, err_size, rc,
			       "%s: too many distinct tokens", name);
	if (rc)
		return rt_fail(err, err_size, rc, "%s: out of memory", name);
	return ATTNRT_OK;
}

int rt_nmt_load_text(const attnrt_allocator *al, const char *text, size_t len,
		     const char *name, size_t examples, int steps,
		     rt_nmt_data **out, char *err, size_t err_size)
{
	*out = NULL;
	if (!name)
		name = "text";
	if (steps < 1)
		return rt_fail(err, err_size, ATTNRT_ERR_ARG,
			       "%s: steps must be at least 1, not %d", name,
			       steps);
	if (len == 0)
		return rt_fail(err, err_size, ATTNRT_ERR_FORMAT,
			       "%s: the file is empty", name);
	rt_nmt_data *d = rt_mem_alloc(al, sizeof *d);
	if (!d)
		return rt_fail(err, err_size, ATTNRT_ERR_NOMEM,
			       "%s: out of memory", name);
	*d = (rt_nmt_data){.steps = steps};
	if (al)
		d->al = *al;
	int rc = data_build(d, text, len, name, examples, err, err_size);
	if (rc) {
		rt_nmt_free(d);
		return rc;
	}
	*out = d;
	return ATTNRT_OK;
}

/* Reads all of the file at path into *buf (allocated through al). A
 * regular file's size is checked against the cap before any of it is
 * read; a pipe's as it comes. */
static int read_file(const attnrt_allocator *al, const char *path, char **buf,
		     size_t *len, char *err, size_t err_size)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return rt_fail_errno(err, err_size, errno, "%s", path);
	size_t cap = 0, n = 0, got;
	int rc = ATTNRT_OK;
	struct stat st;
	if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) &&
	    (uint64_t)st.st_size > RT_NMT_MAX_FILE) {
		fclose(f);
		return rt_fail(err, err_size, ATTNRT_ERR_FORMAT,
			       "%s: %llu bytes, more than the %u MiB a corpus "
			       "may have",
			       path, (unsigned long long)st.st_size,
			       RT_NMT_MAX_FILE >> 20);
	}
	do {
		if (n > RT_NMT_MAX_FILE) {
			rc = rt_fail(err, err_size, ATTNRT_ERR_FORMAT,
				     "%s: larger "
				     "than %u MiB, the most a corpus may have",
				     path, RT_NMT_MAX_FILE >> 20);
			break;
		}
		if (!rt_mem_grow(al, (void **)buf, &cap, n + 65536, 1)) {
			rc = rt_fail(err, err_size, ATTNRT_ERR_NOMEM,
				     "%s: out of memory", path);
			break;
		}
		got = fread(*buf + n, 1, cap - n, f);
		n += got;
	} while (got > 0);
	if (rc == ATTNRT_OK && ferror(f))
		rc = rt_fail_errno(err, err_size, errno, "%s", path);
	fclose(f);
	*len = n;
	return rc;
}

int rt_nmt_load(const attnrt_allocator *al, const char *path, size_t examples,
		int steps, rt_nmt_data **out, char *err, size_t err_size)
{
	if (!path) {
		size_t len;
		const char *text = rt_nmt_default_corpus(&len);
		return rt_nmt_load_text(al, text, len, "built-in corpus",
					examples, steps, out, err, err_size);
	}
	*out = NULL;
	char *buf = NULL;
	size_t len = 0;
	int rc = read_file(al, path, &buf, &len, err, err_size);
	if (rc == ATTNRT_OK)
		rc = rt_nmt_load_text(al, buf, len, path, examples, steps, out,
				      err, err_size);
	rt_mem_free(al, buf);
	return rc;
}

void rt_nmt_free(rt_nmt_data *d)
{
	if (!d)
		return;
	attnrt_allocator al = d->al;
	for (int k = 0; k < 2; k++) {
		attnrt_vocab_free(d->vocab[k]);
		rt_mem_free(&al, d->ids[k]);
		rt_mem_free(&al, d->valid[k]);
	}
	rt_mem_free(&al, d->text);
	rt_mem_free(&al, d->pairs);
	rt_mem_free(&al, d);
}

/* ---- accessors ------------------------------------------------------------------ */

const rt_nmt_stats *rt_nmt_data_stats(const rt_nmt_data *d)
{
	return &d->stats;
}

size_t rt_nmt_rows(const rt_nmt_data *d)
{
	return d->n_rows;
}

int rt_nmt_steps(const rt_nmt_data *d)
{
	return d->steps;
}

const attnrt_vocab *rt_nmt_vocab(const rt_nmt_data *d, rt_nmt_side side)
{
	return d->vocab[side];
}

int32_t rt_nmt_vocab_size(const rt_nmt_data *d, rt_nmt_side side)
{
	return attnrt_vocab_size(d->vocab[side]);
}

const char *rt_nmt_vocab_token(const rt_nmt_data *d, rt_nmt_side side,
			       int32_t id)
{
	return attnrt_vocab_token(d->vocab[side], id);
}

int32_t rt_nmt_vocab_lookup(const rt_nmt_data *d, rt_nmt_side side,
			    const char *token, size_t len)
{
	return attnrt_vocab_lookup(d->vocab[side], token, len);
}

const int32_t *rt_nmt_array(const rt_nmt_data *d, rt_nmt_side side,
			    const int32_t **valid)
{
	if (valid)
		*valid = d->valid[side];
	return d->ids[side];
}

/* ---- batches -------------------------------------------------------------------- */

size_t rt_nmt_batch_count(const rt_nmt_data *d, size_t B)
{
	return B ? (d->n_rows + B - 1) / B : 0;
}

void rt_nmt_shuffle(const rt_nmt_data *d, uint64_t seed, uint64_t epoch,
		    size_t *order)
{
	rt_rng_permutation(seed, SHUFFLE_STREAM + epoch, d->n_rows, order);
}

/* Row r of one side's ids and valid lengths (each may be NULL) from
 * data row `row`, or a padding row when row is SIZE_MAX. */
static void fill_side(const rt_nmt_data *d, int k, int32_t *ids, int32_t *valid,
		      size_t r, size_t row)
{
	size_t T = (size_t)d->steps;
	if (ids && row == SIZE_MAX)
		for (size_t t = 0; t < T; t++)
			ids[r * T + t] = RT_NMT_PAD;
	else if (ids)
		memcpy(ids + r * T, d->ids[k] + row * T, T * sizeof *ids);
	if (valid)
		valid[r] = row == SIZE_MAX ? 0 : d->valid[k][row];
}

/* Row r of the batch from data row `row`, or a padding row when row is
 * SIZE_MAX. */
static void fill_row(const rt_nmt_data *d, rt_nmt_batch *b, size_t r, size_t row)
{
	size_t T = (size_t)d->steps;
	fill_side(d, RT_NMT_SRC, b->src, b->src_valid, r, row);
	fill_side(d, RT_NMT_TGT, b->tgt, b->tgt_valid, r, row);
	if (b->tgt_in) {
		int32_t *in = b->tgt_in + r * T;
		in[0] = RT_NMT_BOS;
		for (size_t t = 1; t < T; t++)
			in[t] = row == SIZE_MAX
					? RT_NMT_PAD
					: d->ids[RT_NMT_TGT][row * T + t - 1];
	}
	if (row != SIZE_MAX)
		b->n_tokens += d->valid[RT_NMT_TGT][row];
}

int rt_nmt_fill_batch(const rt_nmt_data *d, const size_t *order,
		      size_t batch_index, size_t B, rt_nmt_batch *b)
{
	if (batch_index >= rt_nmt_batch_count(d, B))
		return ATTNRT_ERR_ARG;
	size_t first = batch_index * B, n = d->n_rows - first;
	if (n > B)
		n = B;
	for (size_t r = 0; order && r < n; r++)
		if (order[first + r] >= d->n_rows)
			return ATTNRT_ERR_ARG;
	b->n_rows = n;
	b->n_tokens = 0;
	for (size_t r = 0; r < B; r++)
		fill_row(d, b, r,
			 r >= n  ? SIZE_MAX
			 : order ? order[first + r]
				 : first + r);
	return ATTNRT_OK;
}

/* ---- translating one sentence --------------------------------------------------- */

/* The sentence preprocessed into *out (allocated through d's hook). */
static int preprocess_alloc(const rt_nmt_data *d, const char *sentence,
			    char **out, char *err, size_t err_size)
{
	size_t len = strlen(sentence);
	*out = NULL;
	if (len > (SIZE_MAX - 1) / 2)
		return rt_fail(err, err_size, ATTNRT_ERR_NOMEM,
			       "sentence too long");
	char *buf = rt_mem_alloc(&d->al, 2 * len + 1);
	if (!buf)
		return rt_fail(err, err_size, ATTNRT_ERR_NOMEM, "out of memory");
	if (rt_nmt_preprocess(sentence, len, buf, 2 * len + 1) == SIZE_MAX) {
		rt_mem_free(&d->al, buf);
		return rt_fail(err, err_size, ATTNRT_ERR_ARG,
			       "the sentence is not valid UTF-8");
	}
	*out = buf;
	return ATTNRT_OK;
}

int rt_nmt_encode_sentence(const rt_nmt_data *d, const char *sentence,
			   int32_t *ids, int32_t *valid, size_t *n_unknown,
			   char *err, size_t err_size)
{
	return attnrt_vocab_encode(d->vocab[RT_NMT_SRC], sentence, d->steps,
				   ids, valid, n_unknown, err, err_size);
}

size_t rt_nmt_decode_ids(const rt_nmt_data *d, rt_nmt_side side,
			 const int32_t *ids, size_t n, char *out, size_t cap)
{
	return attnrt_vocab_decode(d->vocab[side], ids, n, out, cap);
}

int rt_nmt_reference(const rt_nmt_data *d, const char *sentence,
		     const char **ref, char *err, size_t err_size)
{
	char *s;
	*ref = NULL;
	int rc = preprocess_alloc(d, sentence, &s, err, err_size);
	if (rc)
		return rc;
	for (size_t i = 0; i < d->n_pairs && !*ref; i++)
		if (!strcmp(d->text + d->pairs[i].side[0], s))
			*ref = d->text + d->pairs[i].side[1];
	rt_mem_free(&d->al, s);
	return ATTNRT_OK;
}
