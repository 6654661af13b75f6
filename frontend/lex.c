/*
 * lex.c - the .g lexer: source text to tokens.
 *
 * Blocks are given by indentation as in Python: at the start of each
 * logical line the lexer compares the indentation with a stack of open
 * levels and emits INDENT or DEDENT tokens; each logical line ends with a
 * NEWLINE. Blank and comment-only lines produce nothing, and inside ( )
 * or [ ] line breaks and indentation are ignored. Errors (invalid bytes,
 * inconsistent indentation, unterminated strings) are reported with their
 * location and lexing goes on, so that any input ends in FE_T_EOF.
 */
#include "syntax.h"

#include <stdlib.h>
#include <string.h>

#define MAX_LEVELS 100 /* nested indentation levels */

static const char *const fe_keywords[] = {
	"model",   "dim", "const", "def", "export", "return", "param",
	"repeat",  "for", "in",    "as",  "if",     "else",   "train",
	"example", "and", "or",    "not", "true",   "false",
};
_Static_assert(sizeof fe_keywords / sizeof *fe_keywords ==
		       FE_T_FALSE - FE_T_MODEL + 1,
	       "fe_keywords and fe_tok_kind disagree");

typedef struct lexer {
	ir_ctx *ctx;
	ir_arena *arena;
	fe_tokens *out;
	uint32_t file;
	const char *text;
	size_t len, pos;
	uint32_t line;
	size_t line_start; /* offset of the current line's first byte */
	int depth;         /* open brackets */
	int levels[MAX_LEVELS];
	int n_levels;
	bool seen_tab, seen_space, reported_mix;
	bool is_oom;
} lexer;

static ir_loc loc_at(const lexer *lx, size_t pos)
{
	return (ir_loc){.file = lx->file,
			.line = lx->line,
			.col = (uint32_t)(pos - lx->line_start + 1)};
}

static int peek(const lexer *lx, size_t ahead)
{
	size_t p = lx->pos + ahead;
	return p < lx->len ? (unsigned char)lx->text[p] : -1;
}

static fe_token *push(lexer *lx, fe_tok_kind kind, ir_loc loc, size_t start,
		      size_t end)
{
	fe_tokens *t = lx->out;
	if (!ir_grow(lx->ctx, (void **)&t->toks, &t->cap, t->n + 1,
		     sizeof *t->toks)) {
		lx->is_oom = true;
		return NULL;
	}
	fe_token *tok = &t->toks[t->n++];
	memset(tok, 0, sizeof *tok);
	tok->kind = kind;
	tok->loc = loc;
	tok->text = ir_arena_strndup(lx->arena, lx->text + start, end - start);
	if (!tok->text)
		lx->is_oom = true;
	return tok;
}

static fe_tok_kind last_kind(const lexer *lx)
{
	return lx->out->n ? lx->out->toks[lx->out->n - 1].kind : FE_T_NEWLINE;
}

static bool is_ident_start(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_digit(int c)
{
	return c >= '0' && c <= '9';
}

/* True if the line starting at pos begins, in column 1, with a word that
 * only starts a top-level declaration: an unclosed bracket cannot reach
 * past it, which keeps one missing ')' from swallowing the file. */
static bool starts_toplevel(const lexer *lx, size_t pos)
{
	static const char *const words[] = {"def", "export", "example", "train",
					    "dim", "const",  "model"};
	for (size_t i = 0; i < sizeof words / sizeof *words; i++) {
		size_t n = strlen(words[i]);
		if (pos + n < lx->len &&
		    strncmp(lx->text + pos, words[i], n) == 0 &&
		    (lx->text[pos + n] == ' ' || lx->text[pos + n] == '\t'))
			return true;
	}
	return false;
}

/* Measures the indentation of the line at lx->pos; returns its width in
 * columns (tabs to the next multiple of 8) and moves past it. */
static int measure_indent(lexer *lx)
{
	int width = 0;
	bool tab = false, space = false;
	for (;;) {
		int c = peek(lx, 0);
		if (c == ' ') {
			width++;
			space = true;
		} else if (c == '\t') {
			width = (width / 8 + 1) * 8;
			tab = true;
		} else if (c == '\f' || c == '\r') {
			/* ignored */
		} else {
			break;
		}
		lx->pos++;
	}
	if (width > 0 && !lx->reported_mix &&
	    ((tab && (space || lx->seen_space)) || (space && lx->seen_tab))) {
		ir_error(lx->ctx, loc_at(lx, lx->line_start),
			 "indentation mixes tabs and spaces");
		lx->reported_mix = true;
	}
	lx->seen_tab |= tab;
	lx->seen_space |= space;
	return width;
}

/* Emits the INDENT or DEDENTs that take the block structure to width. */
static void set_level(lexer *lx, int width)
{
	ir_loc loc = loc_at(lx, lx->pos);
	int top = lx->levels[lx->n_levels - 1];
	if (width > top) {
		if (lx->n_levels == MAX_LEVELS) {
			ir_error(lx->ctx, loc, "too many nested blocks");
			return;
		}
		lx->levels[lx->n_levels++] = width;
		push(lx, FE_T_INDENT, loc, lx->pos, lx->pos);
		return;
	}
	while (width < lx->levels[lx->n_levels - 1]) {
		if (width > lx->levels[lx->n_levels - 2]) {
			/* Between two open levels: report it and take the line
			 * as part of the inner block, the likelier intent. */
			ir_error(lx->ctx, loc,
				 "unindent does not match any outer "
				 "indentation level");
			lx->levels[lx->n_levels - 1] = width;
			return;
		}
		lx->n_levels--;
		push(lx, FE_T_DEDENT, loc, lx->pos, lx->pos);
	}
}

/* At the start of a physical line outside brackets: skips blank and
 * comment-only lines, then sets the block level of the next one. */
static void line_start(lexer *lx)
{
	for (;;) {
		int width = measure_indent(lx);
		int c = peek(lx, 0);
		if (c == '#')
			while (peek(lx, 0) >= 0 && peek(lx, 0) != '\n')
				lx->pos++;
		c = peek(lx, 0);
		if (c == '\n') {
			lx->pos++;
			lx->line++;
			lx->line_start = lx->pos;
			continue;
		}
		if (c < 0)
			return;
		set_level(lx, width);
		return;
	}
}

static void lex_ident(lexer *lx)
{
	size_t start = lx->pos;
	ir_loc loc = loc_at(lx, start);
	while (is_ident_start(peek(lx, 0)) || is_digit(peek(lx, 0)))
		lx->pos++;
	size_t n = lx->pos - start;
	fe_tok_kind kind = FE_T_IDENT;
	for (size_t i = 0; i < sizeof fe_keywords / sizeof *fe_keywords; i++)
		if (strlen(fe_keywords[i]) == n &&
		    memcmp(fe_keywords[i], lx->text + start, n) == 0)
			kind = (fe_tok_kind)(FE_T_MODEL + (int)i);
	push(lx, kind, loc, start, lx->pos);
}

/* Reads digits; returns false if there were none. */
static bool skip_digits(lexer *lx)
{
	size_t start = lx->pos;
	while (is_digit(peek(lx, 0)))
		lx->pos++;
	return lx->pos > start;
}

// number = digits [ "." digits ] [ ("e"|"E") ["+"|"-"] digits ] | "." digits ...
static void lex_number(lexer *lx)
{
	size_t start = lx->pos;
	ir_loc loc = loc_at(lx, start);
	bool is_real = false;
	skip_digits(lx);
	if (peek(lx, 0) == '.' && is_digit(peek(lx, 1))) {
		lx->pos++;
		skip_digits(lx);
		is_real = true;
	}
	int e = peek(lx, 0);
	if (e == 'e' || e == 'E') {
		size_t k = (peek(lx, 1) == '+' || peek(lx, 1) == '-') ? 2 : 1;
		if (is_digit(peek(lx, k))) {
			lx->pos += k;
			skip_digits(lx);
			is_real = true;
		}
	}
	fe_token *t = push(lx, is_real ? FE_T_REAL : FE_T_INT, loc, start,
			   lx->pos);
	if (!t || !t->text)
		return;
	t->rval = strtod(t->text, NULL);
	if (is_real)
		return;
	int64_t v = 0;
	for (const char *p = t->text; *p; p++) {
		if (__builtin_mul_overflow(v, 10, &v) ||
		    __builtin_add_overflow(v, *p - '0', &v)) {
			ir_error(lx->ctx, loc,
				 "integer literal '%s' is too large", t->text);
			v = 0;
			break;
		}
	}
	t->ival = v;
}

/* Decodes one escape after a backslash; returns the character or -1. */
static int decode_escape(int c)
{
	switch (c) {
	case '"':
		return '"';
	case '\\':
		return '\\';
	case 'n':
		return '\n';
	case 't':
		return '\t';
	default:
		return -1;
	}
}

/* Bytes from after the opening quote at start to the closing quote or
 * the end of the line: the decoded text is no longer. Reserving that,
 * not the rest of the file, keeps memory linear however many strings
 * the input has. */
static size_t string_extent(const lexer *lx, size_t start)
{
	const char *t = lx->text;
	size_t q = start + 1;
	while (q < lx->len && t[q] != '"' && t[q] != '\n') {
		bool is_escape = t[q] == '\\' && q + 1 < lx->len &&
				 t[q + 1] != '\n';
		q += is_escape ? 2 : 1;
	}
	return q - (start + 1);
}

// string = '"' { char | "\" ( '"' | "\" | "n" | "t" ) } '"'
static void lex_string(lexer *lx)
{
	size_t start = lx->pos++;
	ir_loc loc = loc_at(lx, start);
	char *buf = ir_arena_alloc(lx->arena, string_extent(lx, start) + 1);
	size_t n = 0;
	if (!buf) {
		lx->is_oom = true;
		return;
	}
	for (;;) {
		int c = peek(lx, 0);
		if (c < 0 || c == '\n') {
			ir_error(lx->ctx, loc, "unterminated string");
			break;
		}
		lx->pos++;
		if (c == '"')
			break;
		if (c == '\\') {
			int d = decode_escape(peek(lx, 0));
			if (d < 0) {
				ir_error(lx->ctx, loc_at(lx, lx->pos - 1),
					 "invalid escape in string");
				continue;
			}
			lx->pos++;
			c = d;
		}
		buf[n++] = (char)c;
	}
	fe_token *t = push(lx, FE_T_STRING, loc, start, start);
	if (t)
		t->text = buf;
}

/* Punctuation of one or two characters; returns false if c starts none. */
static bool lex_punct(lexer *lx, int c)
{
	static const struct {
		const char *s;
		fe_tok_kind kind;
	} puncts[] = {
		{"**", FE_T_POW},    {"<=", FE_T_LE},    {">=", FE_T_GE},
		{"==", FE_T_EQ},     {"!=", FE_T_NE},    {"..", FE_T_DOTDOT},
		{"(", FE_T_LPAREN},  {")", FE_T_RPAREN}, {"[", FE_T_LBRACK},
		{"]", FE_T_RBRACK},  {",", FE_T_COMMA},  {":", FE_T_COLON},
		{"=", FE_T_ASSIGN},  {"+", FE_T_PLUS},   {"-", FE_T_MINUS},
		{"*", FE_T_STAR},    {"/", FE_T_SLASH},  {"@", FE_T_AT},
		{"%", FE_T_PERCENT}, {"<", FE_T_LT},     {">", FE_T_GT},
		{".", FE_T_DOT},
	};
	for (size_t i = 0; i < sizeof puncts / sizeof *puncts; i++) {
		size_t n = strlen(puncts[i].s);
		if (c != puncts[i].s[0] ||
		    (n == 2 && peek(lx, 1) != puncts[i].s[1]))
			continue;
		ir_loc loc = loc_at(lx, lx->pos);
		push(lx, puncts[i].kind, loc, lx->pos, lx->pos + n);
		lx->pos += n;
		if (puncts[i].kind == FE_T_LPAREN ||
		    puncts[i].kind == FE_T_LBRACK)
			lx->depth++;
		else if ((puncts[i].kind == FE_T_RPAREN ||
			  puncts[i].kind == FE_T_RBRACK) &&
			 lx->depth > 0)
			lx->depth--;
		return true;
	}
	return false;
}

/* Reports a byte no token starts with and leaves an ERROR token, which
 * makes the parser drop the statement without a second message. */
static void invalid_char(lexer *lx, int c)
{
	ir_loc loc = loc_at(lx, lx->pos);
	if (c > 0x20 && c < 0x7f)
		ir_error(lx->ctx, loc, "invalid character '%c'", c);
	else
		ir_error(lx->ctx, loc, "invalid character (byte 0x%02x)", c);
	push(lx, FE_T_ERROR, loc, lx->pos, lx->pos);
	lx->pos++;
}

/* Handles a line break: a NEWLINE token outside brackets, then the next
 * line's indentation. */
static void lex_newline(lexer *lx)
{
	ir_loc loc = loc_at(lx, lx->pos);
	lx->pos++;
	lx->line++;
	lx->line_start = lx->pos;
	if (lx->depth > 0 && starts_toplevel(lx, lx->pos))
		lx->depth = 0; /* the parser reports the missing bracket */
	if (lx->depth > 0)
		return;
	if (lx->out->n && last_kind(lx) != FE_T_NEWLINE)
		push(lx, FE_T_NEWLINE, loc, lx->pos - 1, lx->pos - 1);
	line_start(lx);
}

static void lex_one(lexer *lx)
{
	int c = peek(lx, 0);
	if (c == ' ' || c == '\t' || c == '\r' || c == '\f')
		lx->pos++;
	else if (c == '#')
		while (peek(lx, 0) >= 0 && peek(lx, 0) != '\n')
			lx->pos++;
	else if (c == '\n')
		lex_newline(lx);
	else if (is_ident_start(c))
		lex_ident(lx);
	else if (is_digit(c) || (c == '.' && is_digit(peek(lx, 1))))
		lex_number(lx);
	else if (c == '"')
		lex_string(lx);
	else if (!lex_punct(lx, c))
		invalid_char(lx, c);
}

bool fe_lex(ir_ctx *ctx, uint32_t file, ir_arena *arena, fe_tokens *out)
{
	lexer lx = {.ctx = ctx,
		    .arena = arena,
		    .out = out,
		    .file = file,
		    .text = ctx->files[file].text,
		    .len = ctx->files[file].len,
		    .line = 1,
		    .n_levels = 1};
	memset(out, 0, sizeof *out);
	line_start(&lx);
	while (lx.pos < lx.len && !lx.is_oom)
		lex_one(&lx);
	ir_loc end = loc_at(&lx, lx.pos);
	fe_tok_kind k = last_kind(&lx);
	if (k != FE_T_NEWLINE && k != FE_T_INDENT && k != FE_T_DEDENT)
		push(&lx, FE_T_NEWLINE, end, lx.pos, lx.pos);
	while (lx.n_levels > 1) {
		lx.n_levels--;
		push(&lx, FE_T_DEDENT, end, lx.pos, lx.pos);
	}
	push(&lx, FE_T_EOF, end, lx.pos, lx.pos);
	return !lx.is_oom;
}

void fe_tokens_fini(ir_ctx *ctx, fe_tokens *t)
{
	ir_free(ctx, t->toks);
	memset(t, 0, sizeof *t);
}

const char *fe_tok_describe(const fe_token *t, char *buf, size_t size)
{
	switch (t->kind) {
	case FE_T_EOF:
		return "end of file";
	case FE_T_NEWLINE:
		return "end of line";
	case FE_T_INDENT:
		return "an indented block";
	case FE_T_DEDENT:
		return "the end of the block";
	case FE_T_STRING:
		return "a string";
	default:
		snprintf(buf, size, "'%s'", t->text ? t->text : "");
		return buf;
	}
}
