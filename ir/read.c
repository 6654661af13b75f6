/*
 * read.c - parses the textual form of a module (ir_module_read), the
 * inverse of module_print.c; docs/ir.md has the grammar.
 *
 * The text may come from a user's editor as well as from a dump, so the
 * reader trusts nothing: every name must be defined, every number must fit,
 * every node must pass its shape rule, and the result must pass the
 * verifier. Errors point at the text (file:line:col with a caret); after
 * one, the reader skips to the end of the line and goes on, so that one
 * run reports several mistakes. Constants come after the functions that
 * use them, so nodes are appended as printed (ir_graph_append) and their
 * shape rules run once the whole text is read.
 */
#include "ir.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NAME 4096 /* longest name or string token */
#define MAX_ITEMS 8   /* attributes in one {...} */
#define MAX_LIST 32   /* entries of one attribute list */
#define MAX_DEPTH 16  /* nesting of train values */

typedef enum tok_kind {
	T_EOF,
	T_NL,
	T_IDENT,  /* name, keyword, dtype, inf, nan */
	T_NUM,    /* -12, 0.5, 1e-05, -inf */
	T_STR,    /* "..." (s/len include the quotes) */
	T_NODE,   /* %12 (s/len: the digits) */
	T_GLOBAL, /* @name or @"name" (s/len: after the @) */
	T_PUNCT,  /* one of = : , ( ) [ ] { } * */
	T_BAD,    /* a character that starts no token */
} tok_kind;

typedef struct token {
	tok_kind kind;
	const char *s;
	size_t len;
	uint32_t line, col;
} token;

/* Where a node was printed and whether it parsed; for the checks that run
 * after the whole text is read. */
typedef struct node_pos {
	uint32_t line, col;
	bool is_ok;
} node_pos;

typedef struct func_pos func_pos;

typedef struct reader {
	ir_ctx *ctx;
	uint32_t file;
	const char *text;
	size_t len, pos;
	uint32_t line, col;
	token tok;
	ir_module *m;
	uint32_t main_file;
	bool has_main;
	bool is_failed;
	int depth;
	uint32_t n_consts; /* constant lines numbered so far, good or bad */
	func_pos *funcs;   /* per function of m, for the final checks */
	uint32_t n_funcs, funcs_cap;
} reader;

/* Where a function's header was and where its nodes were. */
struct func_pos {
	uint32_t line, col;
	node_pos *nodes; /* one per node of the function */
};

/* ---- errors --------------------------------------------------------------- */

static bool rerr_at(reader *r, const token *t, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static bool rerr_at(reader *r, const token *t, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ir_verror(r->ctx,
		  (ir_loc){.file = r->file, .line = t->line, .col = t->col},
		  fmt, ap);
	va_end(ap);
	r->is_failed = true;
	return false;
}

/* The current token, shown as the user wrote it, for messages. */
static const char *tok_show(const token *t, char *buf, size_t size)
{
	switch (t->kind) {
	case T_EOF:
		return "end of file";
	case T_NL:
		return "end of line";
	case T_NODE:
		snprintf(buf, size, "'%%%.*s'",
			 (int)(t->len > 40 ? 40 : t->len), t->s);
		return buf;
	case T_GLOBAL:
		snprintf(buf, size, "'@%.*s'", (int)(t->len > 40 ? 40 : t->len),
			 t->s);
		return buf;
	case T_IDENT:
	case T_NUM:
	case T_STR:
	case T_PUNCT:
	case T_BAD:
		break;
	}
	bool is_print = t->s[0] >= 0x20 && t->s[0] < 0x7f;
	if (t->kind == T_BAD && !is_print)
		snprintf(buf, size, "byte 0x%02x", (unsigned char)t->s[0]);
	else
		snprintf(buf, size, "'%.*s'", (int)(t->len > 40 ? 40 : t->len),
			 t->s);
	return buf;
}

/* Reports "expected WHAT, found TOKEN" at the current token. */
static bool expected(reader *r, const char *what)
{
	char buf[64];
	return rerr_at(r, &r->tok, "expected %s, found %s", what,
		       tok_show(&r->tok, buf, sizeof buf));
}

static bool oom(reader *r)
{
	return rerr_at(r, &r->tok, "out of memory");
}

/* ---- lexer ------------------------------------------------------------------ */

static int peekc(const reader *r, size_t ahead)
{
	return r->pos + ahead < r->len ? (unsigned char)r->text[r->pos + ahead]
				       : -1;
}

static bool is_alpha(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_digit(int c)
{
	return c >= '0' && c <= '9';
}

static bool is_name_char(int c)
{
	return is_alpha(c) || is_digit(c) || c == '.';
}

static void advance(reader *r, size_t n)
{
	for (size_t i = 0; i < n && r->pos < r->len; i++) {
		if (r->text[r->pos++] == '\n') {
			r->line++;
			r->col = 1;
		} else {
			r->col++;
		}
	}
}

/* Spaces, tabs, carriage returns and # comments (up to the newline). */
static void skip_blank(reader *r)
{
	for (;;) {
		int c = peekc(r, 0);
		if (c == ' ' || c == '\t' || c == '\r') {
			advance(r, 1);
		} else if (c == '#') {
			while (peekc(r, 0) >= 0 && peekc(r, 0) != '\n')
				advance(r, 1);
		} else {
			return;
		}
	}
}

/* Length of a "..." string at offset `at`; 0 if it does not end on its
 * line. */
static size_t string_len(const reader *r, size_t at)
{
	size_t i = at + 1;
	while (i < r->len && r->text[i] != '"' && r->text[i] != '\n') {
		if (r->text[i] == '\\' && i + 1 < r->len &&
		    r->text[i + 1] != '\n')
			i++;
		i++;
	}
	return i < r->len && r->text[i] == '"' ? i + 1 - at : 0;
}

/* Length of a number: [-] then name characters, with a sign allowed just
 * after an exponent letter. */
static size_t number_len(const reader *r)
{
	size_t n = peekc(r, 0) == '-' ? 1 : 0;
	for (;;) {
		int c = peekc(r, n);
		int prev = n ? (unsigned char)r->text[r->pos + n - 1] : 0;
		if (is_name_char(c) ||
		    ((c == '-' || c == '+') && (prev == 'e' || prev == 'E')))
			n++;
		else
			return n;
	}
}

static size_t name_len(const reader *r, size_t from)
{
	size_t n = from;
	while (is_name_char(peekc(r, n)))
		n++;
	return n;
}

/* The kind and length of the token at the current position. */
static tok_kind scan(const reader *r, size_t *len)
{
	int c = peekc(r, 0), c1 = peekc(r, 1);
	*len = 1;
	if (c < 0)
		return *len = 0, T_EOF;
	if (c == '\n')
		return T_NL;
	if (strchr("=:,()[]{}*", c) && c)
		return T_PUNCT;
	if (c == '"')
		return (*len = string_len(r, r->pos)) ? T_STR
						      : (*len = 1, T_BAD);
	if (c == '%' && is_digit(c1)) {
		for (*len = 1; is_digit(peekc(r, *len));)
			++*len;
		return T_NODE;
	}
	if (c == '@' && c1 == '"' && string_len(r, r->pos + 1))
		return *len = 1 + string_len(r, r->pos + 1), T_GLOBAL;
	if (c == '@' && is_alpha(c1))
		return *len = name_len(r, 1), T_GLOBAL;
	if (is_alpha(c))
		return *len = name_len(r, 0), T_IDENT;
	if (is_digit(c) || (c == '-' && (is_name_char(c1))))
		return *len = number_len(r), T_NUM;
	return T_BAD;
}

static void next(reader *r)
{
	skip_blank(r);
	size_t len;
	tok_kind k = scan(r, &len);
	r->tok = (token){k, r->text + r->pos, len, r->line, r->col};
	if (k == T_NODE || k == T_GLOBAL) {
		r->tok.s++;
		r->tok.len--;
	}
	advance(r, len);
}

/* The token after the current one, without consuming anything. */
static token peek(reader *r)
{
	reader saved = *r;
	next(r);
	token t = r->tok;
	*r = saved;
	return t;
}

static bool is_punct(const reader *r, char c)
{
	return r->tok.kind == T_PUNCT && r->tok.s[0] == c;
}

static bool is_word(const reader *r, const char *w)
{
	return r->tok.kind == T_IDENT && r->tok.len == strlen(w) &&
	       memcmp(r->tok.s, w, r->tok.len) == 0;
}

static bool accept(reader *r, char c)
{
	if (!is_punct(r, c))
		return false;
	next(r);
	return true;
}

static bool expect(reader *r, char c)
{
	char what[8] = {'\'', c, '\'', 0};
	return accept(r, c) || expected(r, what);
}

static bool expect_nl(reader *r)
{
	if (r->tok.kind == T_EOF)
		return true;
	if (r->tok.kind != T_NL)
		return expected(r, "end of line");
	next(r);
	return true;
}

/* Skips the rest of the line after an error. */
static void skip_line(reader *r)
{
	while (r->tok.kind != T_NL && r->tok.kind != T_EOF)
		next(r);
	if (r->tok.kind == T_NL)
		next(r);
}

/* ---- names and strings ---------------------------------------------------------- */

/* Decodes a "..." body (between the quotes) into out (>= len+1 bytes);
 * false on a bad escape. */
static bool unescape(const char *s, size_t len, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] != '\\') {
			out[o++] = s[i];
			continue;
		}
		char e = ++i < len ? s[i] : 0;
		if (e == '"' || e == '\\')
			out[o++] = e;
		else if (e == 'n')
			out[o++] = '\n';
		else if (e == 't')
			out[o++] = '\t';
		else if (e == 'x' && i + 2 < len) {
			char hex[3] = {s[i + 1], s[i + 2], 0}, *end;
			long v = strtol(hex, &end, 16);
			if (*end || v == 0 || hex[0] == '-' || hex[0] == '+')
				return false;
			out[o++] = (char)v;
			i += 2;
		} else {
			return false;
		}
	}
	out[o] = '\0';
	return true;
}

/* The name or string of token t (bare or quoted) in the module's arena;
 * NULL after reporting. */
static char *tok_name(reader *r, const token *t)
{
	bool quoted = t->len >= 2 && t->s[0] == '"';
	size_t len = quoted ? t->len - 2 : t->len;
	if (len > MAX_NAME)
		return rerr_at(r, t, "name too long"), NULL;
	char *out = ir_arena_alloc(&r->m->arena, len + 1);
	if (!out)
		return oom(r), NULL;
	if (!quoted) {
		memcpy(out, t->s, len);
		return out;
	}
	if (!unescape(t->s + 1, len, out))
		return rerr_at(r, t, "bad escape in string"), NULL;
	return out;
}

/* A name: IDENT or STR. Consumes it. */
static char *parse_name(reader *r, const char *what)
{
	if (r->tok.kind != T_IDENT && r->tok.kind != T_STR)
		return expected(r, what), NULL;
	char *s = tok_name(r, &r->tok);
	if (s)
		next(r);
	return s;
}

/* ---- numbers ----------------------------------------------------------------------- */

/* Copies a number token into buf (NUL-terminated); false if too long. */
static bool num_text(const token *t, char *buf, size_t size)
{
	if ((t->kind != T_NUM && t->kind != T_IDENT) || t->len >= size)
		return false;
	memcpy(buf, t->s, t->len);
	buf[t->len] = '\0';
	return true;
}

static bool parse_i64(reader *r, int64_t *v)
{
	char buf[32], *end;
	if (r->tok.kind != T_NUM || !num_text(&r->tok, buf, sizeof buf))
		return expected(r, "an integer");
	errno = 0;
	long long x = strtoll(buf, &end, 10);
	if (*end || errno || end == buf)
		return expected(r, "an integer");
	*v = x;
	next(r);
	return true;
}

/* An integer in [lo, hi]. */
static bool parse_int_in(reader *r, int64_t lo, int64_t hi, int64_t *v)
{
	token t = r->tok;
	if (!parse_i64(r, v))
		return false;
	if (*v < lo || *v > hi)
		return rerr_at(r, &t, "%lld out of range [%lld, %lld]",
			       (long long)*v, (long long)lo, (long long)hi);
	return true;
}

static bool parse_u32(reader *r, uint32_t *v)
{
	int64_t x;
	if (!parse_int_in(r, 0, UINT32_MAX, &x))
		return false;
	*v = (uint32_t)x;
	return true;
}

/* "nan0x<hex bits>" (a NaN with payload) into bits; false otherwise. */
static bool nan_bits(const char *s, uint64_t *bits)
{
	const char *p = s[0] == '-' ? s + 1 : s;
	if (strncmp(p, "nan0x", 5) != 0 || !p[5] || p[5] == '-' || p[5] == '+')
		return false;
	char *end;
	errno = 0;
	unsigned long long b = strtoull(p + 5, &end, 16);
	if (*end || errno)
		return false;
	*bits = b;
	return true;
}

/* A float or double: decimal, inf, -inf, nan, nan0x<bits>. With is_f32
 * the value is read as float (so that it keeps its exact bits). */
static bool parse_real(reader *r, bool is_f32, double *d, float *f)
{
	char buf[64], *end;
	uint64_t bits;
	if (!num_text(&r->tok, buf, sizeof buf))
		return expected(r, "a number");
	bool ok = true;
	if (nan_bits(buf, &bits)) {
		uint32_t b32 = (uint32_t)bits;
		ok = is_f32 ? bits <= UINT32_MAX : true;
		if (is_f32)
			memcpy(f, &b32, sizeof *f);
		else
			memcpy(d, &bits, sizeof *d);
		ok = ok && (is_f32 ? isnan(*f) : isnan(*d));
	} else if (is_f32) {
		*f = strtof(buf, &end);
		ok = *end == '\0' && end != buf;
	} else {
		*d = strtod(buf, &end);
		ok = *end == '\0' && end != buf;
	}
	if (!ok)
		return expected(r, "a number");
	next(r);
	return true;
}

static bool parse_double(reader *r, double *d)
{
	float unused;
	return parse_real(r, false, d, &unused);
}

/* ---- locations, types ------------------------------------------------------------------ */

/* The ctx source named name, registered (empty) if new; "" is file 0. */
static bool file_id(reader *r, const char *name, uint32_t *id)
{
	if (!name[0])
		return *id = 0, true;
	for (uint32_t i = 1; i < r->ctx->n_files; i++)
		if (strcmp(r->ctx->files[i].name, name) == 0)
			return *id = i, true;
	*id = ir_ctx_add_source(r->ctx, name, "", 0);
	return *id != 0 || oom(r);
}

/* place = [ STRING ":" ] INT ":" INT */
static bool parse_place(reader *r, ir_loc *loc)
{
	*loc = (ir_loc){0};
	if (r->tok.kind == T_STR) {
		char *name = tok_name(r, &r->tok);
		if (!name || !file_id(r, name, &loc->file))
			return false;
		next(r);
		if (!expect(r, ':'))
			return false;
	} else if (!r->has_main) {
		return rerr_at(r, &r->tok,
			       "location without a file, and no "
			       "'source' line names the main file");
	} else {
		loc->file = r->main_file;
	}
	return parse_u32(r, &loc->line) && expect(r, ':') &&
	       parse_u32(r, &loc->col);
}

#define MAX_CALL_DEPTH 64

/* loc = "loc" "(" place { "in" STRING "at" place } ")" ; optional: a line
 * in a prelude function, then the calls that lead to it, innermost
 * first (module_print.c), registered outermost first so that each
 * call's loc names an earlier one (ir_loc_prelude_call). */
static bool parse_loc(reader *r, ir_loc *loc)
{
	ir_loc at[MAX_CALL_DEPTH];
	char *callee[MAX_CALL_DEPTH];
	uint32_t n = 0;
	*loc = (ir_loc){0};
	if (!is_word(r, "loc"))
		return true;
	next(r);
	if (!expect(r, '(') || !parse_place(r, loc))
		return false;
	while (is_word(r, "in")) {
		if (n == MAX_CALL_DEPTH)
			return rerr_at(r, &r->tok,
				       "a location with more than %d calls",
				       MAX_CALL_DEPTH);
		next(r);
		if (r->tok.kind != T_STR)
			return expected(r, "the called function's name, a "
					   "string");
		if (!(callee[n] = parse_name(r, "a function's name")))
			return false;
		if (!is_word(r, "at"))
			return expected(r, "'at'");
		next(r);
		if (!parse_place(r, &at[n++]))
			return false;
	}
	uint32_t outer = 0;
	while (n-- > 0) {
		at[n].at = outer;
		outer = ir_ctx_add_call(r->ctx, at[n], callee[n], true);
		if (!outer)
			return oom(r);
	}
	loc->at = outer;
	return expect(r, ')');
}

/* syms = name { "*" name }: the product of the named symbols, which must
 * be declared. */
static bool parse_sym_product(reader *r, int32_t *sym)
{
	int32_t f[IR_SYM_MAX_FACTORS];
	token first = r->tok;
	uint32_t n = 0;
	do {
		token t = r->tok;
		char *name = parse_name(r, "a dimension");
		if (!name)
			return false;
		if (n == IR_SYM_MAX_FACTORS)
			return rerr_at(r, &t,
				       "a product of more than %d symbols",
				       IR_SYM_MAX_FACTORS);
		f[n] = ir_module_find_sym(r->m, name);
		if (f[n] < 0)
			return rerr_at(r, &t, "unknown symbol '%s'", name);
		n++;
	} while (accept(r, '*'));
	*sym = ir_module_find_product_sym(r->m, f, n);
	if (*sym < 0)
		return rerr_at(r, &first, "no 'sym' line declares this product");
	return true;
}

/* dim = INT [ "*" syms ] | syms */
static bool parse_dim(reader *r, ir_dim *d)
{
	*d = ir_dim_static(1);
	if (r->tok.kind == T_NUM) {
		if (!parse_i64(r, &d->coef))
			return false;
		if (!accept(r, '*'))
			return true;
	}
	return parse_sym_product(r, &d->sym);
}

/* type = ("f32" | "i32" | "f64") "[" [ dim { "," dim } ] "]" */
static bool parse_type(reader *r, ir_type *t)
{
	token start = r->tok;
	memset(t, 0, sizeof *t);
	if (is_word(r, "f32"))
		t->dtype = IR_F32;
	else if (is_word(r, "i32"))
		t->dtype = IR_I32;
	else if (is_word(r, "f64"))
		t->dtype = IR_F64;
	else
		return expected(r, "a type (f32, i32 or f64)");
	next(r);
	if (!expect(r, '['))
		return false;
	while (!accept(r, ']')) {
		if (t->rank && !expect(r, ','))
			return false;
		if (t->rank == IR_MAX_RANK)
			return rerr_at(r, &r->tok, "rank above %d", IR_MAX_RANK);
		if (!parse_dim(r, &t->dims[t->rank++]))
			return false;
	}
	if (!ir_type_numel_fits(r->m, t))
		return rerr_at(r, &start,
			       "tensor too large: more than 2^40 "
			       "elements");
	return true;
}

/* ---- module header, symbols, parameters ------------------------------------------------- */

/* "source" STRING NL */
static bool parse_source(reader *r)
{
	token t = r->tok;
	next(r);
	if (r->has_main)
		return rerr_at(r, &t, "second 'source' line");
	if (r->tok.kind != T_STR)
		return expected(r, "a file name string");
	char *name = tok_name(r, &r->tok);
	if (!name || !file_id(r, name, &r->main_file))
		return false;
	r->has_main = true;
	next(r);
	return expect_nl(r);
}

/* "dropout_streams" INT NL */
static bool parse_streams(reader *r)
{
	next(r);
	return parse_u32(r, &r->m->n_dropout_streams) && expect_nl(r);
}

/* The rest of "sym" name "*" name ...: a derived symbol, the product of
 * declared base symbols, first the one whose name was just read. */
static bool parse_derived_sym(reader *r, const char *first, token at)
{
	int32_t f[IR_SYM_MAX_FACTORS];
	uint32_t n = 0;
	const char *name = first;
	for (;;) {
		if (n == IR_SYM_MAX_FACTORS)
			return rerr_at(r, &at,
				       "a product of more than %d symbols",
				       IR_SYM_MAX_FACTORS);
		f[n] = ir_module_find_sym(r->m, name);
		if (f[n] < 0 || r->m->syms[f[n]].n_factors)
			return rerr_at(r, &at, "'%s' is not a declared symbol",
				       name);
		n++;
		if (!accept(r, '*'))
			break;
		at = r->tok;
		if (!(name = parse_name(r, "a symbol name")))
			return false;
	}
	if (ir_module_find_product_sym(r->m, f, n) >= 0)
		return rerr_at(r, &at, "symbol product declared twice");
	ir_loc loc;
	if (!parse_loc(r, &loc))
		return false;
	if (ir_module_product_sym(r->m, f, n, loc) < 0)
		return oom(r);
	return expect_nl(r);
}

/* "sym" name [ "=" INT ] [ loc ] NL
 * | "sym" name "*" name { "*" name } [ loc ] NL */
static bool parse_sym(reader *r)
{
	next(r);
	token t = r->tok;
	char *name = parse_name(r, "a symbol name");
	if (!name)
		return false;
	if (is_punct(r, '*'))
		return parse_derived_sym(r, name, t);
	if (ir_module_find_sym(r->m, name) >= 0)
		return rerr_at(r, &t, "symbol '%s' declared twice", name);
	int64_t fallback = 0;
	ir_loc loc;
	if (accept(r, '=') && !parse_int_in(r, 1, IR_MAX_NUMEL, &fallback))
		return false;
	if (!parse_loc(r, &loc))
		return false;
	int32_t i = ir_module_add_sym(r->m, name, loc);
	if (i < 0)
		return oom(r);
	r->m->syms[i].fallback = fallback;
	return expect_nl(r);
}

/* "limit" dim "max" INT [ loc ] NL */
static bool parse_limit(reader *r)
{
	next(r);
	token t = r->tok;
	ir_dim d;
	int64_t max;
	ir_loc loc;
	if (!parse_dim(r, &d))
		return false;
	if (ir_dim_is_static(d))
		return rerr_at(r, &t, "a limit is on a run-time size");
	if (!is_word(r, "max"))
		return expected(r, "'max'");
	next(r);
	if (!parse_int_in(r, 0, INT64_MAX, &max) || !parse_loc(r, &loc))
		return false;
	if (!ir_module_add_limit(r->m, d, max, loc))
		return oom(r);
	return expect_nl(r);
}

static bool init_from_name(const char *s, ir_init_kind *k)
{
	static const char *const names[] = {"zeros", "ones", "normal",
					    "uniform", "xavier_uniform"};
	static const ir_init_kind kinds[] = {IR_INIT_ZEROS, IR_INIT_ONES,
					     IR_INIT_NORMAL, IR_INIT_UNIFORM,
					     IR_INIT_XAVIER_UNIFORM};
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (strcmp(s, names[i]) == 0)
			return *k = kinds[i], true;
	return false;
}

/* init = IDENT [ "(" number [ "," number ] ")" ] */
static bool parse_init(reader *r, ir_init_kind *k, double *a, double *b)
{
	token t = r->tok;
	*a = *b = 0;
	char *name = r->tok.kind == T_IDENT ? tok_name(r, &r->tok) : NULL;
	if (!name || !init_from_name(name, k))
		return rerr_at(r, &t,
			       "expected an initializer (zeros, ones, "
			       "normal, uniform, xavier_uniform)");
	next(r);
	if (!accept(r, '('))
		return true;
	if (!parse_double(r, a))
		return false;
	if (accept(r, ',') && !parse_double(r, b))
		return false;
	return expect(r, ')');
}

/* "param" GLOBAL ":" type "=" init [ loc ] NL */
static bool parse_param(reader *r)
{
	next(r);
	token t = r->tok;
	if (t.kind != T_GLOBAL)
		return expected(r, "a parameter name '@...'");
	char *name = tok_name(r, &t);
	if (!name)
		return false;
	if (ir_module_find_param(r->m, name) >= 0)
		return rerr_at(r, &t, "parameter '@%s' declared twice", name);
	next(r);
	ir_type type;
	ir_init_kind k = IR_INIT_ZEROS;
	double a = 0, b = 0;
	ir_loc loc;
	if (!expect(r, ':') || !parse_type(r, &type) || !expect(r, '=') ||
	    !parse_init(r, &k, &a, &b) || !parse_loc(r, &loc))
		return false;
	if (ir_module_add_param(r->m, name, &type, k, a, b, loc) < 0)
		return oom(r);
	return expect_nl(r);
}

/* ---- train ---------------------------------------------------------------------------------- */

static bool parse_setting(reader *r, ir_setting *s);

/* Keyword arguments of a call value: "(" setting { "," setting } ")". */
static bool parse_call_args(reader *r, ir_value *v)
{
	ir_setting *tmp = NULL;
	uint32_t n = 0, cap = 0;
	bool ok = true;
	while (ok && !accept(r, ')')) {
		ok = (!n || expect(r, ',')) &&
		     (ir_grow(r->ctx, (void **)&tmp, &cap, n + 1, sizeof *tmp) ||
		      oom(r)) &&
		     parse_setting(r, &tmp[n++]);
	}
	if (ok && n) {
		v->args = ir_arena_alloc(&r->m->arena, n * sizeof *tmp);
		ok = v->args || oom(r);
		if (ok)
			memcpy(v->args, tmp, n * sizeof *tmp);
		v->n_args = n;
	}
	ir_free(r->ctx, tmp);
	return ok;
}

static bool is_real_word(const token *t)
{
	char buf[64];
	uint64_t bits;
	return t->kind == T_IDENT && num_text(t, buf, sizeof buf) &&
	       (strcmp(buf, "inf") == 0 || strcmp(buf, "nan") == 0 ||
		nan_bits(buf, &bits));
}

/* value = NUMBER | STRING | name [ "(" args ")" ] */
static bool parse_value(reader *r, ir_value *v)
{
	memset(v, 0, sizeof *v);
	if (r->tok.kind == T_NUM || is_real_word(&r->tok)) {
		v->kind = IR_VAL_NUM;
		return parse_double(r, &v->num);
	}
	if (r->tok.kind == T_STR &&
	    !(peek(r).kind == T_PUNCT && peek(r).s[0] == '(')) {
		v->kind = IR_VAL_STR;
		return (v->str = parse_name(r, "a string")) != NULL;
	}
	v->kind = IR_VAL_CALL;
	if (!(v->str = parse_name(r, "a value")))
		return false;
	if (!accept(r, '('))
		return true;
	if (++r->depth > MAX_DEPTH)
		return rerr_at(r, &r->tok, "values nested too deeply");
	bool ok = parse_call_args(r, v);
	r->depth--;
	return ok;
}

/* setting = name "=" value [ loc ] */
static bool parse_setting(reader *r, ir_setting *s)
{
	memset(s, 0, sizeof *s);
	return (s->key = parse_name(r, "a setting name")) && expect(r, '=') &&
	       parse_value(r, &s->value) && parse_loc(r, &s->loc);
}

/* "train" "{" NL { setting NL } "}" NL */
static bool parse_train(reader *r)
{
	next(r);
	if (!expect(r, '{') || !expect_nl(r))
		return false;
	for (;;) {
		if (r->tok.kind == T_NL) {
			next(r);
			continue;
		}
		if (accept(r, '}'))
			return expect_nl(r);
		if (r->tok.kind == T_EOF)
			return expected(r, "'}' closing the train block");
		ir_module *m = r->m;
		if (!ir_grow(r->ctx, (void **)&m->train, &m->train_cap,
			     m->n_train + 1, sizeof *m->train))
			return oom(r);
		if (parse_setting(r, &m->train[m->n_train]) && expect_nl(r))
			m->n_train++;
		else
			skip_line(r);
	}
}

/* ---- functions ---------------------------------------------------------------------------------- */

/* What a function header and body collect before they go into ir_func. */
typedef struct func_parts {
	ir_func *f;
	node_pos *pos;
	uint32_t pos_cap;
	const char **in_names;
	ir_type *in_types;
	uint32_t n_in, in_cap, names_cap;
	uint32_t *example;
	uint32_t n_example, example_cap;
	ir_id *outs;
	const char **out_names;
	uint32_t n_out, outs_cap, out_names_cap;
	bool has_names, has_out_names, has_example, has_return;
	ir_id *args; /* operand scratch */
	uint32_t args_cap;
} func_parts;

static void parts_fini(reader *r, func_parts *p)
{
	ir_free(r->ctx, p->in_names);
	ir_free(r->ctx, p->in_types);
	ir_free(r->ctx, p->example);
	ir_free(r->ctx, p->outs);
	ir_free(r->ctx, p->out_names);
	ir_free(r->ctx, p->args);
}

/* indecl = [ name ":" ] type */
static bool parse_input_decl(reader *r, func_parts *p)
{
	const char *name = NULL;
	token nx = peek(r);
	if ((r->tok.kind == T_STR || r->tok.kind == T_IDENT) &&
	    nx.kind == T_PUNCT && nx.s[0] == ':') {
		if (!(name = parse_name(r, "an input name")))
			return false;
		next(r);
		p->has_names = true;
	}
	if (!ir_grow(r->ctx, (void **)&p->in_names, &p->names_cap, p->n_in + 1,
		     sizeof *p->in_names) ||
	    !ir_grow(r->ctx, (void **)&p->in_types, &p->in_cap, p->n_in + 1,
		     sizeof *p->in_types))
		return oom(r);
	p->in_names[p->n_in] = name;
	return parse_type(r, &p->in_types[p->n_in++]);
}

/* "@c" INT: a constant index (the constant may come later in the text). */
static bool parse_const_ref(reader *r, uint32_t *idx)
{
	token t = r->tok;
	char buf[16], *end;
	if (t.kind != T_GLOBAL || t.len < 2 || t.len >= sizeof buf ||
	    t.s[0] != 'c' || !is_digit((unsigned char)t.s[1]))
		return expected(r, "a constant '@cN'");
	memcpy(buf, t.s + 1, t.len - 1);
	buf[t.len - 1] = '\0';
	errno = 0;
	unsigned long v = strtoul(buf, &end, 10);
	if (*end || errno || v > UINT32_MAX)
		return expected(r, "a constant '@cN'");
	*idx = (uint32_t)v;
	next(r);
	return true;
}

/* "example" "(" [ cref { "," cref } ] ")" */
static bool parse_example(reader *r, func_parts *p)
{
	next(r);
	p->has_example = true;
	if (!expect(r, '('))
		return false;
	while (!accept(r, ')')) {
		if (p->n_example && !expect(r, ','))
			return false;
		if (!ir_grow(r->ctx, (void **)&p->example, &p->example_cap,
			     p->n_example + 1, sizeof *p->example))
			return oom(r);
		if (!parse_const_ref(r, &p->example[p->n_example++]))
			return false;
	}
	return true;
}

/* header = [ "export" ] "func" GLOBAL "(" [ indecl { "," indecl } ] ")"
 *          [ example ] [ loc ] "{" NL */
static bool parse_func_header(reader *r, func_parts *p)
{
	bool is_export = is_word(r, "export");
	if (is_export)
		next(r);
	if (!is_word(r, "func"))
		return expected(r, "'func'");
	next(r);
	token t = r->tok;
	if (t.kind != T_GLOBAL)
		return expected(r, "a function name '@...'");
	char *name = tok_name(r, &t);
	if (!name)
		return false;
	if (ir_module_find_func(r->m, name))
		return rerr_at(r, &t, "function '@%s' defined twice", name);
	next(r);
	if (!(p->f = ir_module_add_func(r->m, name, (ir_loc){0})))
		return oom(r);
	p->f->is_export = is_export;
	if (!expect(r, '('))
		return false;
	while (!accept(r, ')'))
		if ((p->n_in && !expect(r, ',')) || !parse_input_decl(r, p))
			return false;
	if (is_word(r, "example") && !parse_example(r, p))
		return false;
	return parse_loc(r, &p->f->loc) && expect(r, '{') && expect_nl(r);
}

/* ---- node attributes --------------------------------------------------------------------------- */

/* [ "," ] KEY "=" : the next attribute, keys in the printed order. */
static bool attr_key(reader *r, const char *key, bool is_first)
{
	if (!is_first && !expect(r, ','))
		return false;
	if (!is_word(r, key)) {
		char what[48];
		snprintf(what, sizeof what, "attribute '%s'", key);
		return expected(r, what);
	}
	next(r);
	return expect(r, '=');
}

/* "[" [ INT { "," INT } ] "]" with each INT in [lo, hi]; at most max. */
static bool parse_int_list(reader *r, int64_t lo, int64_t hi, int64_t *v,
			   int max, int *n)
{
	*n = 0;
	if (!expect(r, '['))
		return false;
	while (!accept(r, ']')) {
		if (*n && !expect(r, ','))
			return false;
		if (*n == max)
			return rerr_at(r, &r->tok, "more than %d entries", max);
		if (!parse_int_in(r, lo, hi, &v[(*n)++]))
			return false;
	}
	return true;
}

static bool parse_bool(reader *r, bool *b)
{
	int64_t v;
	if (!parse_int_in(r, 0, 1, &v))
		return false;
	*b = v != 0;
	return true;
}

static bool parse_i32(reader *r, int32_t *v)
{
	int64_t x;
	if (!parse_int_in(r, INT32_MIN, INT32_MAX, &x))
		return false;
	*v = (int32_t)x;
	return true;
}

/* axes=[...], keepdim=B */
static bool parse_reduce(reader *r, ir_attr *a)
{
	int64_t ax[MAX_LIST];
	int n;
	token t = r->tok;
	if (!attr_key(r, "axes", true) ||
	    !parse_int_list(r, 0, 31, ax, MAX_LIST, &n))
		return false;
	for (int i = 0; i < n; i++) {
		if (a->reduce.axes & (1u << ax[i]))
			return rerr_at(r, &t, "axis %lld listed twice",
				       (long long)ax[i]);
		a->reduce.axes |= 1u << ax[i];
	}
	return attr_key(r, "keepdim", false) &&
	       parse_bool(r, &a->reduce.keepdim);
}

/* perm=[...] or reps=[...]: as many entries as the node's rank, checked
 * once the type is read (*n). */
static bool parse_axes_list(reader *r, ir_attr *a, bool is_perm, int *n)
{
	int64_t v[IR_MAX_RANK];
	if (!attr_key(r, is_perm ? "perm" : "reps", true) ||
	    !parse_int_list(r, is_perm ? 0 : INT64_MIN,
			    is_perm ? IR_MAX_RANK - 1 : INT64_MAX, v,
			    IR_MAX_RANK, n))
		return false;
	for (int i = 0; i < *n; i++) {
		if (is_perm)
			a->permute.perm[i] = (uint8_t)v[i];
		else
			a->repeat.reps[i] = v[i];
	}
	return true;
}

/* scale "=" F "," fill "=" F "," p "=" F "," stream "=" INT
 * [ "," heads "=" INT ]: heads is 1 when absent, as the printer leaves it. */
static bool parse_attention(reader *r, ir_attr *a)
{
	a->attention.heads = 1;
	bool ok = attr_key(r, "scale", true) &&
		  parse_double(r, &a->attention.scale) &&
		  attr_key(r, "fill", false) &&
		  parse_double(r, &a->attention.fill) &&
		  attr_key(r, "p", false) && parse_double(r, &a->attention.p) &&
		  attr_key(r, "stream", false) &&
		  parse_u32(r, &a->attention.stream);
	if (!ok || !is_punct(r, ','))
		return ok;
	return attr_key(r, "heads", false) && parse_u32(r, &a->attention.heads);
}

/* The {...} of a node of attribute kind k; *n_list gets the length of a
 * perm/reps list (-1 for other kinds). */
static bool parse_attr_body(reader *r, ir_attr_kind k, ir_attr *a, int *n_list)
{
	switch (k) {
	case IR_ATTR_NONE:
	case IR_ATTR_PARAM:
	case IR_ATTR_CONST:
		return expected(r, "no attributes");
	case IR_ATTR_INPUT:
		return attr_key(r, "index", true) &&
		       parse_u32(r, &a->input_index);
	case IR_ATTR_MATMUL:
		return attr_key(r, "ta", true) && parse_bool(r, &a->matmul.ta) &&
		       attr_key(r, "tb", false) && parse_bool(r, &a->matmul.tb);
	case IR_ATTR_REDUCE:
		return parse_reduce(r, a);
	case IR_ATTR_FILL:
		return attr_key(r, "fill", true) && parse_double(r, &a->fill);
	case IR_ATTR_EPS:
		return attr_key(r, "eps", true) && parse_double(r, &a->eps);
	case IR_ATTR_DROPOUT:
		return attr_key(r, "p", true) &&
		       parse_double(r, &a->dropout.p) &&
		       attr_key(r, "stream", false) &&
		       parse_u32(r, &a->dropout.stream);
	case IR_ATTR_PERM:
	case IR_ATTR_REPS:
		return parse_axes_list(r, a, k == IR_ATTR_PERM, n_list);
	case IR_ATTR_SLICE:
		return attr_key(r, "axis", true) &&
		       parse_i32(r, &a->slice.axis) &&
		       attr_key(r, "start", false) &&
		       parse_i64(r, &a->slice.start) &&
		       attr_key(r, "end", false) &&
		       parse_i64(r, &a->slice.end) &&
		       attr_key(r, "step", false) &&
		       parse_i64(r, &a->slice.step);
	case IR_ATTR_AXIS:
		return attr_key(r, "axis", true) && parse_i32(r, &a->axis);
	case IR_ATTR_INTERLEAVE:
		return attr_key(r, "axis", true) &&
		       parse_i32(r, &a->interleave.axis) &&
		       attr_key(r, "n", false) && parse_i64(r, &a->interleave.n);
	case IR_ATTR_ATTENTION:
		return parse_attention(r, a);
	case IR_ATTR_ARANGE:
		return attr_key(r, "start", true) &&
		       parse_double(r, &a->arange.start) &&
		       attr_key(r, "step", false) &&
		       parse_double(r, &a->arange.step);
	}
	return expected(r, "attributes");
}

/* [ "{" attrs "}" ], required exactly when the op has attributes (leaves
 * PARAM and CONST name theirs as operands). */
static bool parse_attrs(reader *r, ir_op op, ir_attr *a, int *n_list)
{
	ir_attr_kind k = ir_op_table[op].attr;
	bool has = k != IR_ATTR_NONE && k != IR_ATTR_PARAM && k != IR_ATTR_CONST;
	*n_list = -1;
	if (!has)
		return true;
	return expect(r, '{') && parse_attr_body(r, k, a, n_list) &&
	       expect(r, '}');
}

/* ---- nodes --------------------------------------------------------------------------------------- */

/* NODE: a reference to a node defined before the one being read. */
static bool parse_ref(reader *r, const func_parts *p, ir_id *id)
{
	token t = r->tok;
	char buf[16], *end;
	if (t.kind != T_NODE)
		return expected(r, "a value '%N'");
	snprintf(buf, sizeof buf, "%.*s", (int)(t.len < 15 ? t.len : 15), t.s);
	unsigned long v = strtoul(buf, &end, 10);
	if (t.len > 10 || v >= p->f->g.n_nodes)
		return rerr_at(r, &t, "'%%%s' is not defined before this point",
			       buf);
	*id = (ir_id)v;
	next(r);
	return true;
}

static bool parse_param_ref(reader *r, ir_attr *a)
{
	token t = r->tok;
	if (t.kind != T_GLOBAL)
		return expected(r, "a parameter '@...'");
	char *name = tok_name(r, &t);
	if (!name)
		return false;
	int32_t i = ir_module_find_param(r->m, name);
	if (i < 0)
		return rerr_at(r, &t, "unknown parameter '@%s'", name);
	a->param_index = (uint32_t)i;
	next(r);
	return true;
}

/* The operands of a node: "@name" for param, "@cN" for const, else
 * [ NODE { "," NODE } ]. */
static bool parse_operands(reader *r, func_parts *p, ir_op op, ir_attr *a,
			   uint32_t *n)
{
	*n = 0;
	if (op == IR_OP_CONST)
		return parse_const_ref(r, &a->const_index);
	if (op == IR_OP_PARAM)
		return parse_param_ref(r, a);
	if (r->tok.kind != T_NODE)
		return true;
	do {
		if (!ir_grow(r->ctx, (void **)&p->args, &p->args_cap, *n + 1,
			     sizeof *p->args))
			return oom(r);
		if (!parse_ref(r, p, &p->args[(*n)++]))
			return false;
	} while (accept(r, ','));
	return true;
}

/* Reads "%N" and checks that N is the next node's number. */
static bool parse_node_number(reader *r, const func_parts *p)
{
	token t = r->tok;
	char buf[16];
	snprintf(buf, sizeof buf, "%.*s", (int)(t.len < 15 ? t.len : 15), t.s);
	char want[16];
	snprintf(want, sizeof want, "%u", p->f->g.n_nodes);
	if (strcmp(buf, want) != 0 || t.len > 10)
		return rerr_at(r, &t,
			       "expected node %%%s here (nodes are "
			       "numbered in order)",
			       want);
	next(r);
	return expect(r, '=');
}

static bool parse_op(reader *r, ir_op *op)
{
	char buf[32];
	if (r->tok.kind != T_IDENT || r->tok.len >= sizeof buf)
		return expected(r, "an op name");
	memcpy(buf, r->tok.s, r->tok.len);
	buf[r->tok.len] = '\0';
	*op = ir_op_from_name(buf);
	if (*op == IR_OP_COUNT)
		return rerr_at(r, &r->tok, "unknown op '%s'", buf);
	next(r);
	return true;
}

/* node = NODE "=" OP operands [ "{" attrs "}" ] ":" type [ loc ] NL */
static bool parse_node(reader *r, func_parts *p)
{
	ir_op op = IR_OP_COUNT;
	ir_attr a;
	ir_type type;
	ir_loc loc;
	uint32_t n;
	int n_list;
	memset(&a, 0, sizeof a);
	token t = r->tok;
	if (!parse_node_number(r, p) || !parse_op(r, &op) ||
	    !parse_operands(r, p, op, &a, &n) ||
	    !parse_attrs(r, op, &a, &n_list) || !expect(r, ':'))
		return false;
	token tt = r->tok;
	if (!parse_type(r, &type) || !parse_loc(r, &loc) || !expect_nl(r))
		return false;
	if (n_list >= 0 && n_list != type.rank)
		return rerr_at(r, &tt, "%s list has %d entries for rank %u",
			       op == IR_OP_PERMUTE ? "perm" : "reps", n_list,
			       type.rank);
	if (!ir_grow(r->ctx, (void **)&p->pos, &p->pos_cap, p->f->g.n_nodes + 1,
		     sizeof *p->pos) ||
	    ir_graph_append(r->ctx, &p->f->g, op, p->args, n, &a, &type, loc) ==
		    IR_NONE)
		return oom(r);
	p->pos[p->f->g.n_nodes - 1] = (node_pos){t.line, t.col, true};
	return true;
}

/* return = "return" [ NODE [ "as" name ] { "," NODE [ "as" name ] } ] NL */
static bool parse_return(reader *r, func_parts *p)
{
	next(r);
	while (r->tok.kind != T_NL && r->tok.kind != T_EOF) {
		if (p->n_out && !expect(r, ','))
			return false;
		if (!ir_grow(r->ctx, (void **)&p->outs, &p->outs_cap,
			     p->n_out + 1, sizeof *p->outs) ||
		    !ir_grow(r->ctx, (void **)&p->out_names, &p->out_names_cap,
			     p->n_out + 1, sizeof *p->out_names))
			return oom(r);
		p->out_names[p->n_out] = NULL;
		if (!parse_ref(r, p, &p->outs[p->n_out]))
			return false;
		if (is_word(r, "as")) {
			next(r);
			p->has_out_names = true;
			if (!(p->out_names[p->n_out] =
				      parse_name(r, "a result name")))
				return false;
		}
		p->n_out++;
	}
	return expect_nl(r);
}

/* ---- function bodies ------------------------------------------------------------------------------ */

static bool is_toplevel_word(const reader *r)
{
	return is_word(r, "sym") || is_word(r, "limit") ||
	       is_word(r, "param") || is_word(r, "train") ||
	       is_word(r, "func") || is_word(r, "export") || is_word(r, "const");
}

/* A node line; after an error a placeholder keeps the numbering of the
 * following lines (it and its users are skipped by the final checks). */
static void parse_node_line(reader *r, func_parts *p)
{
	uint32_t before = p->f->g.n_nodes;
	if (parse_node(r, p))
		return;
	skip_line(r);
	if (p->f->g.n_nodes != before)
		return;
	ir_type none = {0};
	if (!ir_grow(r->ctx, (void **)&p->pos, &p->pos_cap, before + 1,
		     sizeof *p->pos) ||
	    ir_graph_append(r->ctx, &p->f->g, IR_OP_INPUT, NULL, 0, NULL, &none,
			    (ir_loc){0}) == IR_NONE) {
		oom(r);
		return;
	}
	p->pos[before] = (node_pos){0, 0, false};
}

/* body = { node NL } return "}" NL */
static bool parse_body(reader *r, func_parts *p)
{
	for (;;) {
		if (r->tok.kind == T_NL) {
			next(r);
		} else if (r->tok.kind == T_EOF || is_toplevel_word(r)) {
			return expected(r, "'}' closing the function");
		} else if (is_punct(r, '}')) {
			break;
		} else if (p->has_return) {
			rerr_at(r, &r->tok, "nothing may follow 'return'");
			skip_line(r);
		} else if (is_word(r, "return")) {
			p->has_return = true;
			if (!parse_return(r, p))
				skip_line(r);
		} else if (r->tok.kind == T_NODE) {
			parse_node_line(r, p);
		} else {
			expected(r, "a node '%N = ...' or 'return'");
			skip_line(r);
		}
	}
	if (!p->has_return)
		rerr_at(r, &r->tok, "function has no 'return'");
	next(r);
	return expect_nl(r);
}

/* Copies n elements of size sz into the module's arena (NULL if n is 0
 * and is_always is false). */
static bool arena_copy(reader *r, void **dst, const void *src, uint32_t n,
		       size_t sz, bool is_always)
{
	*dst = NULL;
	if (!n && !is_always)
		return true;
	*dst = ir_arena_alloc(&r->m->arena, n ? n * sz : 1);
	if (!*dst)
		return oom(r);
	if (n && src)
		memcpy(*dst, src, n * sz);
	return true;
}

/* Binds f->inputs from the INPUT nodes and checks them against the
 * header's declarations. */
static bool bind_inputs(reader *r, func_parts *p, const token *hdr,
			bool is_clean)
{
	ir_func *f = p->f;
	ir_id *in = f->inputs;
	for (uint32_t k = 0; k < p->n_in; k++)
		in[k] = IR_NONE;
	for (ir_id i = 0; i < f->g.n_nodes; i++) {
		const ir_node *n = &f->g.nodes[i];
		uint32_t k = n->attr.input_index;
		token at = {T_NL, "", 0, p->pos[i].line, p->pos[i].col};
		if (!p->pos[i].is_ok || n->op != IR_OP_INPUT)
			continue;
		if (k >= p->n_in || in[k] != IR_NONE)
			rerr_at(r, &at,
				"input index %u is out of range or used "
				"twice",
				k);
		else if (!ir_type_eq(&n->type, &p->in_types[k]))
			rerr_at(r, &at,
				"input %u's type differs from the "
				"function header",
				k);
		else
			in[k] = i;
	}
	for (uint32_t k = 0; is_clean && k < p->n_in; k++)
		if (in[k] == IR_NONE)
			rerr_at(r, hdr, "input %u has no input node", k);
	return true;
}

/* Moves what the header, body and return collected into the ir_func. */
static bool finish_func(reader *r, func_parts *p, const token *hdr,
			bool is_clean)
{
	ir_func *f = p->f;
	void *v;
	if (p->has_example && p->n_example != p->n_in)
		rerr_at(r, hdr, "example gives %u values for %u inputs",
			p->n_example, p->n_in);
	f->n_inputs = p->n_in;
	f->n_outputs = p->n_out;
	if (!arena_copy(r, &v, NULL, p->n_in, sizeof *f->inputs, true))
		return false;
	f->inputs = v;
	if (!arena_copy(r, &v, p->outs, p->n_out, sizeof *p->outs, false))
		return false;
	f->outputs = v;
	if (p->has_names &&
	    arena_copy(r, &v, p->in_names, p->n_in, sizeof *p->in_names, true))
		f->input_names = v;
	if (p->has_out_names && arena_copy(r, &v, p->out_names, p->n_out,
					   sizeof *p->out_names, true))
		f->output_names = v;
	if (p->has_example && p->n_example == p->n_in &&
	    arena_copy(r, &v, p->example, p->n_in, sizeof *p->example, true))
		f->example = v;
	return bind_inputs(r, p, hdr, is_clean);
}

/* Skips to the line after the next line that starts with "}". */
static void skip_block(reader *r)
{
	while (r->tok.kind != T_EOF) {
		skip_line(r);
		if (is_punct(r, '}')) {
			skip_line(r);
			return;
		}
	}
}

/* func = header body; recovers by itself. */
static bool parse_func(reader *r)
{
	func_parts p;
	memset(&p, 0, sizeof p);
	token hdr = r->tok;
	int errors = r->ctx->n_errors;
	bool ok = parse_func_header(r, &p);
	func_pos *fp = NULL;
	if (p.f && ir_grow(r->ctx, (void **)&r->funcs, &r->funcs_cap,
			   r->n_funcs + 1, sizeof *r->funcs)) {
		fp = &r->funcs[r->n_funcs++];
		*fp = (func_pos){hdr.line, hdr.col, NULL};
	} else if (p.f) {
		ok = oom(r);
	}
	if (!ok)
		skip_block(r);
	else if (parse_body(r, &p))
		finish_func(r, &p, &hdr, r->ctx->n_errors == errors);
	if (fp)
		fp->nodes = p.pos;
	else
		ir_free(r->ctx, p.pos);
	parts_fini(r, &p);
	return true;
}

/* ---- constants ---------------------------------------------------------------------------------------- */

/* Elements of a static type, or -1 (reported) if symbolic or too big. */
static int64_t const_numel(reader *r, const ir_type *t, const token *at)
{
	int64_t n = 1;
	for (int i = 0; i < t->rank; i++)
		if (!ir_dim_is_static(t->dims[i]) || t->dims[i].coef < 0 ||
		    __builtin_mul_overflow(n, t->dims[i].coef, &n))
			return rerr_at(r, at, "a constant needs a static shape"),
			       -1;
	/* Each value takes at least two characters of text. */
	if (n > (int64_t)(r->len - r->pos) / 2 + 1)
		return rerr_at(r, at, "more values than the text holds"), -1;
	return n;
}

static void skip_nl(reader *r)
{
	while (r->tok.kind == T_NL)
		next(r);
}

static bool parse_elem(reader *r, ir_dtype dt, void *buf, int64_t i)
{
	int64_t v;
	double d;
	switch (dt) {
	case IR_F32:
		return parse_real(r, true, &d, (float *)buf + i);
	case IR_F64:
		return parse_real(r, false, (double *)buf + i, NULL);
	case IR_I32:
		if (!parse_int_in(r, INT32_MIN, INT32_MAX, &v))
			return false;
		((int32_t *)buf)[i] = (int32_t)v;
		return true;
	}
	return false;
}

/* "[" [ value { "," value } ] "]", newlines allowed between values;
 * exactly n values. */
static bool parse_values(reader *r, ir_dtype dt, void *buf, int64_t n)
{
	int64_t i = 0;
	if (!expect(r, '['))
		return false;
	for (skip_nl(r); !is_punct(r, ']'); skip_nl(r)) {
		if (i && !expect(r, ','))
			return false;
		skip_nl(r);
		if (i == n)
			return rerr_at(r, &r->tok, "more than %lld values",
				       (long long)n);
		if (!parse_elem(r, dt, buf, i++))
			return false;
	}
	if (i != n)
		return rerr_at(r, &r->tok, "%lld values for %lld elements",
			       (long long)i, (long long)n);
	next(r);
	return true;
}

/* const = "const" "@c" INT ":" type "=" values NL */
static bool parse_const_body(reader *r)
{
	next(r);
	token t = r->tok;
	uint32_t idx;
	ir_type type;
	if (!parse_const_ref(r, &idx))
		return false;
	if (idx != r->n_consts)
		return rerr_at(r, &t,
			       "expected @c%u here (constants are "
			       "numbered in order)",
			       r->n_consts);
	r->n_consts++;
	if (!expect(r, ':') || !parse_type(r, &type) || !expect(r, '='))
		return false;
	int64_t n = const_numel(r, &type, &t);
	if (n < 0)
		return false;
	void *buf = ir_alloc(r->ctx, (size_t)n * ir_dtype_size(type.dtype));
	if (!buf)
		return oom(r);
	bool ok = parse_values(r, type.dtype, buf, n) &&
		  (ir_module_add_const(r->m, &type, buf) >= 0 || oom(r));
	ir_free(r->ctx, buf);
	return ok && expect_nl(r);
}

/* A constant; after an error skips past its closing "]". */
static bool parse_const(reader *r)
{
	if (parse_const_body(r))
		return true;
	while (r->tok.kind != T_EOF && !is_punct(r, ']'))
		next(r);
	skip_line(r);
	return true;
}

/* ---- module --------------------------------------------------------------------------------------------- */

static bool parse_item(reader *r)
{
	if (is_word(r, "sym"))
		return parse_sym(r);
	if (is_word(r, "limit"))
		return parse_limit(r);
	if (is_word(r, "param"))
		return parse_param(r);
	if (is_word(r, "train"))
		return parse_train(r);
	if (is_word(r, "source"))
		return parse_source(r);
	if (is_word(r, "dropout_streams"))
		return parse_streams(r);
	if (is_word(r, "func") || is_word(r, "export"))
		return parse_func(r);
	if (is_word(r, "const"))
		return parse_const(r);
	return expected(r, "'sym', 'param', 'train', 'func' or 'const'");
}

/* "module" name NL: creates r->m. */
static bool parse_module_line(reader *r)
{
	skip_nl(r);
	if (!is_word(r, "module"))
		return expected(r, "'module'");
	next(r);
	if (r->tok.kind != T_IDENT && r->tok.kind != T_STR)
		return expected(r, "a module name");
	r->m = ir_module_create(r->ctx, "");
	if (!r->m)
		return oom(r);
	char *name = tok_name(r, &r->tok);
	if (!name)
		return false;
	r->m->name = name;
	next(r);
	return expect_nl(r);
}

/* Runs every node's shape rule now that constants are known; a node whose
 * operand failed is skipped (its error is already out). */
static void check_func(reader *r, ir_func *f, func_pos *fp)
{
	for (ir_id i = 0; i < f->g.n_nodes; i++) {
		node_pos *np = &fp->nodes[i];
		const ir_node *n = &f->g.nodes[i];
		for (uint32_t k = 0; np->is_ok && k < n->n_args; k++)
			np->is_ok = fp->nodes[ir_arg(&f->g, i, k)].is_ok;
		if (!np->is_ok)
			continue;
		ir_node copy = *n;
		copy.loc = (ir_loc){.file = r->file,
				    .line = np->line,
				    .col = np->col};
		token at = {T_NL, "", 0, np->line, np->col};
		if (!ir_infer_type(r->ctx, r->m, &f->g, &copy)) {
			np->is_ok = false;
			r->is_failed = true;
		} else if (!ir_type_eq(&copy.type, &n->type)) {
			rerr_at(r, &at,
				"%%%u: the printed type differs from "
				"the one its shape rule gives",
				i);
			np->is_ok = false;
		}
	}
	for (uint32_t k = 0; f->example && k < f->n_inputs; k++)
		if (f->example[k] >= r->m->n_consts) {
			token at = {T_NL, "", 0, fp->line, fp->col};
			rerr_at(r, &at,
				"example names @c%u, which is not "
				"defined",
				f->example[k]);
		}
}

static void read_all(reader *r)
{
	next(r);
	if (!parse_module_line(r))
		return;
	while (r->tok.kind != T_EOF) {
		if (r->tok.kind == T_NL)
			next(r);
		else if (!parse_item(r))
			skip_line(r);
	}
	if (r->ctx->is_oom || r->n_funcs != r->m->n_funcs)
		return;
	for (uint32_t i = 0; i < r->n_funcs; i++)
		if (r->funcs[i].nodes || !r->m->funcs[i]->g.n_nodes)
			check_func(r, r->m->funcs[i], &r->funcs[i]);
}

ir_module *ir_module_read(ir_ctx *ctx, uint32_t source_file)
{
	reader r;
	memset(&r, 0, sizeof r);
	r.ctx = ctx;
	r.file = source_file;
	r.line = r.col = 1;
	if (source_file >= ctx->n_files) {
		ir_error(ctx, (ir_loc){0}, "no source file %u", source_file);
		return NULL;
	}
	r.text = ctx->files[source_file].text;
	r.len = ctx->files[source_file].len;
	read_all(&r);
	if (r.m && !r.is_failed && !ir_module_verify(r.m))
		r.is_failed = true;
	for (uint32_t i = 0; i < r.n_funcs; i++)
		ir_free(ctx, r.funcs[i].nodes);
	ir_free(ctx, r.funcs);
	if (r.is_failed || ctx->is_oom) {
		ir_module_destroy(r.m);
		return NULL;
	}
	return r.m;
}
