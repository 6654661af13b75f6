/*
 * parse.c - the .g parser: tokens to a syntax tree, by recursive descent.
 *
 * Each function parses one rule of the grammar written above it (the same
 * grammar as docs/language.md). On a syntax error the parser reports
 * "expected X, found Y" once, gives up on the statement and synchronizes at
 * the next line (skipping the indented block of a broken header), so one
 * run reports the errors of several statements. Every loop consumes a
 * token or stops, and nesting is capped, so no input hangs or overflows
 * the stack.
 *
 * After each def is parsed its call sites are numbered per callee name,
 * which the elaborator needs to name parameters (`linear_0`, `linear_1`).
 */
#include "syntax.h"

#include <string.h>

#define MAX_NESTING 200 /* expressions nested in expressions */

typedef struct parser {
	ir_ctx *ctx;
	ir_arena *arena;
	const fe_token *toks;
	uint32_t n, pos;
	int nesting;
	bool is_prelude;
	bool is_panic; /* an error was reported in this statement */
	bool is_oom;
} parser;

/* A growable array built in ctx memory, moved to the arena when done. */
typedef struct vec {
	void *data;
	uint32_t n, cap;
	size_t elem;
} vec;

static bool vec_push(parser *p, vec *v, const void *item)
{
	if (!ir_grow(p->ctx, &v->data, &v->cap, v->n + 1, v->elem)) {
		p->is_oom = true;
		return false;
	}
	memcpy((char *)v->data + v->n * v->elem, item, v->elem);
	v->n++;
	return true;
}

static void *vec_finish(parser *p, vec *v, uint32_t *n)
{
	void *out = NULL;
	*n = v->n;
	if (v->n) {
		out = ir_arena_alloc(p->arena, v->n * v->elem);
		if (out)
			memcpy(out, v->data, v->n * v->elem);
		else
			p->is_oom = true;
	}
	ir_free(p->ctx, v->data);
	v->data = NULL;
	return out;
}

/* ---- tokens ------------------------------------------------------------------ */

static const fe_token *cur(const parser *p)
{
	return &p->toks[p->pos];
}

static bool at(const parser *p, fe_tok_kind k)
{
	return p->toks[p->pos].kind == k;
}

static bool at_next(const parser *p, fe_tok_kind k)
{
	return p->pos + 1 < p->n && p->toks[p->pos + 1].kind == k;
}

static const fe_token *advance(parser *p)
{
	const fe_token *t = &p->toks[p->pos];
	if (t->kind != FE_T_EOF)
		p->pos++;
	return t;
}

static bool accept(parser *p, fe_tok_kind k)
{
	if (!at(p, k))
		return false;
	advance(p);
	return true;
}

/* Reports "expected WHAT, found <current token>" once per statement. */
static void error_expected(parser *p, const char *what)
{
	char buf[96];
	if (p->is_panic)
		return;
	p->is_panic = true;
	if (at(p, FE_T_ERROR))
		return; /* the lexer has reported it */
	ir_error(p->ctx, cur(p)->loc, "expected %s, found %s", what,
		 fe_tok_describe(cur(p), buf, sizeof buf));
}

static bool expect(parser *p, fe_tok_kind k, const char *what)
{
	if (accept(p, k))
		return true;
	error_expected(p, what);
	return false;
}

static void *node(parser *p, size_t size)
{
	void *n = ir_arena_alloc(p->arena, size);
	if (!n)
		p->is_oom = true;
	return n;
}

static fe_expr *new_expr(parser *p, fe_expr_kind kind, ir_loc loc)
{
	fe_expr *e = node(p, sizeof *e);
	if (e) {
		e->kind = kind;
		e->loc = loc;
		e->depth = 1;
	}
	return e;
}

/* True for the binary operators that fe_eval walks in a loop along a
 * left-leaning chain (all but "and" and "or", which short-circuit). */
static bool is_chain_op(const fe_expr *e)
{
	return e && e->kind == FE_E_BINARY && e->bin.op != FE_T_AND &&
	       e->bin.op != FE_T_OR;
}

static void deepen(fe_expr *e, const fe_expr *operand)
{
	if (operand && operand->depth + 1 > e->depth)
		e->depth = operand->depth + 1;
}

/* Sets e->depth from its operands' (see fe_expr.depth) and reports an
 * expression deeper than FE_MAX_EXPR_DEPTH, which the walks after the
 * parser could not take without overflowing the stack; NULL then. */
static fe_expr *finish(parser *p, fe_expr *e)
{
	if (!e)
		return NULL;
	switch (e->kind) {
	case FE_E_NUM:
	case FE_E_STR:
	case FE_E_NAME:
	case FE_E_BOOL:
		break;
	case FE_E_LIST:
		for (uint32_t i = 0; i < e->list.n; i++)
			deepen(e, e->list.items[i]);
		break;
	case FE_E_CALL:
		deepen(e, e->call.callee);
		for (uint32_t i = 0; i < e->call.n_args; i++)
			deepen(e, e->call.args[i].value);
		break;
	case FE_E_INDEX:
		deepen(e, e->index.base);
		for (uint32_t i = 0; i < e->index.n; i++)
			deepen(e, e->index.items[i]);
		break;
	case FE_E_SLICE:
		deepen(e, e->slice.lo);
		deepen(e, e->slice.hi);
		break;
	case FE_E_BINARY:
		if (is_chain_op(e) && is_chain_op(e->bin.lhs))
			e->depth = e->bin.lhs->depth;
		else
			deepen(e, e->bin.lhs);
		deepen(e, e->bin.rhs);
		break;
	case FE_E_NEG:
	case FE_E_NOT:
	case FE_E_TRANSPOSE:
		deepen(e, e->operand);
		break;
	}
	if (e->depth <= FE_MAX_EXPR_DEPTH)
		return e;
	if (!p->is_panic)
		ir_error(p->ctx, e->loc,
			 "expression nested too deeply (more "
			 "than %d levels)",
			 FE_MAX_EXPR_DEPTH);
	p->is_panic = true;
	return NULL;
}

/* Skips the rest of a broken line and, if an indented block follows, the
 * whole block; ends the statement's error state. */
static void sync_line(parser *p)
{
	while (!at(p, FE_T_EOF) && !at(p, FE_T_NEWLINE)) {
		if (at(p, FE_T_DEDENT) || at(p, FE_T_INDENT))
			break;
		advance(p);
	}
	accept(p, FE_T_NEWLINE);
	if (at(p, FE_T_INDENT)) {
		int depth = 0;
		do {
			if (at(p, FE_T_INDENT))
				depth++;
			else if (at(p, FE_T_DEDENT))
				depth--;
			advance(p);
		} while (depth > 0 && !at(p, FE_T_EOF));
	}
	p->is_panic = false;
}

/* ---- expressions ------------------------------------------------------------- */

static fe_expr *parse_expr(parser *p);
static fe_expr *parse_unary(parser *p);

static bool enter(parser *p)
{
	if (++p->nesting <= MAX_NESTING)
		return true;
	if (!p->is_panic)
		ir_error(p->ctx, cur(p)->loc, "expression nested too deeply");
	p->is_panic = true;
	return false;
}

static fe_expr *binary(parser *p, const fe_token *op, fe_expr *lhs, fe_expr *rhs)
{
	if (!lhs || !rhs)
		return NULL;
	fe_expr *e = new_expr(p, FE_E_BINARY, op->loc);
	if (e) {
		e->bin.op = op->kind;
		e->bin.lhs = lhs;
		e->bin.rhs = rhs;
	}
	return finish(p, e);
}

// args = arg { "," arg } [ "," ]        arg = [ IDENT "=" ] expr
static bool parse_args(parser *p, fe_tok_kind close, fe_arg **args, uint32_t *n)
{
	vec v = {.elem = sizeof(fe_arg)};
	while (!at(p, close)) {
		fe_arg a = {0};
		if (at(p, FE_T_IDENT) && at_next(p, FE_T_ASSIGN)) {
			a.name = cur(p)->text;
			a.name_loc = cur(p)->loc;
			p->pos += 2;
		}
		a.value = parse_expr(p);
		if (!a.value || !vec_push(p, &v, &a)) {
			ir_free(p->ctx, v.data);
			return false;
		}
		if (!accept(p, FE_T_COMMA))
			break;
	}
	*args = vec_finish(p, &v, n);
	return expect(p, close,
		      close == FE_T_RPAREN ? "',' or ')'" : "',' or ']'");
}

// index = expr | [ expr ] ":" [ expr ]
static fe_expr *parse_index_item(parser *p)
{
	fe_expr *lo = NULL;
	ir_loc loc = cur(p)->loc;
	if (!at(p, FE_T_COLON)) {
		lo = parse_expr(p);
		if (!lo || !at(p, FE_T_COLON))
			return lo;
	}
	advance(p);
	fe_expr *e = new_expr(p, FE_E_SLICE, loc);
	if (!e)
		return NULL;
	e->slice.lo = lo;
	if (!at(p, FE_T_COMMA) && !at(p, FE_T_RBRACK)) {
		e->slice.hi = parse_expr(p);
		if (!e->slice.hi)
			return NULL;
	}
	return finish(p, e);
}

// exprs = expr { "," expr } [ "," ]   up to `close`, which is consumed
static bool parse_exprs(parser *p, fe_tok_kind close, bool is_index,
			fe_expr ***items, uint32_t *n)
{
	vec v = {.elem = sizeof(fe_expr *)};
	while (!at(p, close)) {
		fe_expr *e = is_index ? parse_index_item(p) : parse_expr(p);
		if (!e || !vec_push(p, &v, &e)) {
			ir_free(p->ctx, v.data);
			return false;
		}
		if (!accept(p, FE_T_COMMA))
			break;
	}
	*items = vec_finish(p, &v, n);
	return expect(p, close,
		      close == FE_T_RPAREN ? "',' or ')'" : "',' or ']'");
}

static fe_expr *parse_number(parser *p)
{
	const fe_token *t = advance(p);
	fe_expr *e = new_expr(p, FE_E_NUM, t->loc);
	if (e) {
		e->num.is_int = t->kind == FE_T_INT;
		e->num.i = t->ival;
		e->num.r = t->kind == FE_T_INT ? (double)t->ival : t->rval;
	}
	return e;
}

// primary = NUMBER | STRING | IDENT | "true" | "false" | "(" expr ")"
//         | "[" [ expr { "," expr } ] "]" | "repeat" (before "(")
static fe_expr *parse_primary(parser *p)
{
	const fe_token *t = cur(p);
	fe_expr *e;
	switch (t->kind) {
	case FE_T_INT:
	case FE_T_REAL:
		return parse_number(p);
	case FE_T_REPEAT: /* the function repeat(x, reps), not the loop */
		if (!at_next(p, FE_T_LPAREN))
			break;
		/* fall through */
	case FE_T_STRING:
	case FE_T_IDENT:
		advance(p);
		e = new_expr(p, t->kind == FE_T_STRING ? FE_E_STR : FE_E_NAME,
			     t->loc);
		if (e)
			e->str = t->text;
		return e;
	case FE_T_TRUE:
	case FE_T_FALSE:
		advance(p);
		e = new_expr(p, FE_E_BOOL, t->loc);
		if (e)
			e->boolean = t->kind == FE_T_TRUE;
		return e;
	case FE_T_LPAREN:
		advance(p);
		e = parse_expr(p);
		return e && expect(p, FE_T_RPAREN, "')'") ? e : NULL;
	case FE_T_LBRACK:
		advance(p);
		e = new_expr(p, FE_E_LIST, t->loc);
		if (!e || !parse_exprs(p, FE_T_RBRACK, false, &e->list.items,
				       &e->list.n))
			return NULL;
		return finish(p, e);
	default:
		break;
	}
	error_expected(p, "an expression");
	return NULL;
}

static fe_expr *parse_call(parser *p, fe_expr *callee)
{
	fe_expr *e = new_expr(p, FE_E_CALL, callee->loc);
	if (!e)
		return NULL;
	e->call.callee = callee;
	advance(p);
	if (!parse_args(p, FE_T_RPAREN, &e->call.args, &e->call.n_args))
		return NULL;
	return finish(p, e);
}

// postfix = primary { "(" [ args ] ")" | "[" index { "," index } "]" | ".T" }
static fe_expr *parse_postfix(parser *p)
{
	fe_expr *e = parse_primary(p);
	while (e) {
		const fe_token *t = cur(p);
		if (t->kind == FE_T_LPAREN) {
			e = parse_call(p, e);
		} else if (t->kind == FE_T_LBRACK) {
			advance(p);
			fe_expr *ix = new_expr(p, FE_E_INDEX, t->loc);
			if (!ix)
				return NULL;
			ix->index.base = e;
			if (at(p, FE_T_RBRACK)) {
				error_expected(p, "an index");
				return NULL;
			}
			if (!parse_exprs(p, FE_T_RBRACK, true, &ix->index.items,
					 &ix->index.n))
				return NULL;
			e = finish(p, ix);
		} else if (t->kind == FE_T_DOT) {
			advance(p);
			if (!at(p, FE_T_IDENT) ||
			    strcmp(cur(p)->text, "T") != 0) {
				error_expected(p, "'T' after '.'");
				return NULL;
			}
			advance(p);
			fe_expr *tr = new_expr(p, FE_E_TRANSPOSE, t->loc);
			if (!tr)
				return NULL;
			tr->operand = e;
			e = finish(p, tr);
		} else {
			break;
		}
	}
	return e;
}

// power = postfix [ "**" unary ]
static fe_expr *parse_power(parser *p)
{
	fe_expr *e = parse_postfix(p);
	if (!e || !at(p, FE_T_POW))
		return e;
	const fe_token *op = advance(p);
	return binary(p, op, e, parse_unary(p));
}

/* A prefix operator: OP self | next, for "-" and "not". The nesting
 * guard bounds the recursion of a long run of operators. */
static fe_expr *parse_prefix(parser *p, fe_tok_kind op_kind, fe_expr_kind kind,
			     fe_expr *(*self)(parser *),
			     fe_expr *(*next)(parser *))
{
	fe_expr *e = NULL;
	if (!enter(p))
		goto out;
	if (at(p, op_kind)) {
		const fe_token *op = advance(p);
		fe_expr *x = self(p);
		e = x ? new_expr(p, kind, op->loc) : NULL;
		if (e)
			e->operand = x;
		e = finish(p, e);
	} else {
		e = next(p);
	}
out:
	p->nesting--;
	return e;
}

// unary = "-" unary | power
static fe_expr *parse_unary(parser *p)
{
	return parse_prefix(p, FE_T_MINUS, FE_E_NEG, parse_unary, parse_power);
}

// term = unary { ( "*" | "/" | "@" | "%" ) unary }
static fe_expr *parse_term(parser *p)
{
	fe_expr *e = parse_unary(p);
	while (e && (at(p, FE_T_STAR) || at(p, FE_T_SLASH) || at(p, FE_T_AT) ||
		     at(p, FE_T_PERCENT))) {
		const fe_token *op = advance(p);
		e = binary(p, op, e, parse_unary(p));
	}
	return e;
}

// sum = term { ( "+" | "-" ) term }
static fe_expr *parse_sum(parser *p)
{
	fe_expr *e = parse_term(p);
	while (e && (at(p, FE_T_PLUS) || at(p, FE_T_MINUS))) {
		const fe_token *op = advance(p);
		e = binary(p, op, e, parse_term(p));
	}
	return e;
}

// cmp = sum [ ( "<" | "<=" | ">" | ">=" | "==" | "!=" ) sum ]
static fe_expr *parse_cmp(parser *p)
{
	fe_expr *e = parse_sum(p);
	fe_tok_kind k = cur(p)->kind;
	if (e && (k == FE_T_LT || k == FE_T_LE || k == FE_T_GT ||
		  k == FE_T_GE || k == FE_T_EQ || k == FE_T_NE)) {
		const fe_token *op = advance(p);
		e = binary(p, op, e, parse_sum(p));
	}
	return e;
}

// not = "not" not | cmp
static fe_expr *parse_not(parser *p)
{
	return parse_prefix(p, FE_T_NOT, FE_E_NOT, parse_not, parse_cmp);
}

// and = not { "and" not }
static fe_expr *parse_and(parser *p)
{
	fe_expr *e = parse_not(p);
	while (e && at(p, FE_T_AND)) {
		const fe_token *op = advance(p);
		e = binary(p, op, e, parse_not(p));
	}
	return e;
}

// expr = or        or = and { "or" and }
static fe_expr *parse_expr(parser *p)
{
	fe_expr *e = NULL;
	if (!enter(p))
		goto out;
	e = parse_and(p);
	while (e && at(p, FE_T_OR)) {
		const fe_token *op = advance(p);
		e = binary(p, op, e, parse_and(p));
	}
out:
	p->nesting--;
	return e;
}

/* ---- statements ---------------------------------------------------------------- */

static bool parse_block(parser *p, fe_block *b);

static bool expect_eol(parser *p)
{
	return expect(p, FE_T_NEWLINE, "end of line");
}

static bool parse_ident(parser *p, fe_ident *id, const char *what)
{
	if (!at(p, FE_T_IDENT)) {
		error_expected(p, what);
		return false;
	}
	id->name = cur(p)->text;
	id->loc = cur(p)->loc;
	advance(p);
	return true;
}

// names = IDENT { "," IDENT }
static bool parse_names(parser *p, fe_ident **names, uint32_t *n)
{
	vec v = {.elem = sizeof(fe_ident)};
	do {
		fe_ident id;
		if (!parse_ident(p, &id, "a name") || !vec_push(p, &v, &id)) {
			ir_free(p->ctx, v.data);
			return false;
		}
	} while (accept(p, FE_T_COMMA));
	*names = vec_finish(p, &v, n);
	return true;
}

static fe_stmt *new_stmt(parser *p, fe_stmt_kind kind, ir_loc loc)
{
	fe_stmt *s = node(p, sizeof *s);
	if (s) {
		s->kind = kind;
		s->loc = loc;
	}
	return s;
}

// stmt = "param" IDENT { "," IDENT } ":" "[" exprs "]" [ "=" expr ] NL
static fe_stmt *parse_param(parser *p, fe_stmt *s)
{
	advance(p);
	if (!parse_names(p, &s->names, &s->n_names) ||
	    !expect(p, FE_T_COLON, "':' and a shape") ||
	    !expect(p, FE_T_LBRACK, "'[' starting the shape") ||
	    !parse_exprs(p, FE_T_RBRACK, false, &s->exprs, &s->n_exprs))
		return NULL;
	if (accept(p, FE_T_ASSIGN) && !(s->value = parse_expr(p)))
		return NULL;
	return expect_eol(p) ? s : NULL;
}

// stmt = "return" expr { "," expr } NL
static fe_stmt *parse_return(parser *p, fe_stmt *s)
{
	vec v = {.elem = sizeof(fe_expr *)};
	advance(p);
	do {
		fe_expr *e = parse_expr(p);
		if (!e || !vec_push(p, &v, &e)) {
			ir_free(p->ctx, v.data);
			return NULL;
		}
	} while (accept(p, FE_T_COMMA));
	s->exprs = vec_finish(p, &v, &s->n_exprs);
	return expect_eol(p) ? s : NULL;
}

// stmt = "repeat" expr [ "as" IDENT ] NL block
static fe_stmt *parse_repeat(parser *p, fe_stmt *s)
{
	advance(p);
	if (!(s->value = parse_expr(p)))
		return NULL;
	if (accept(p, FE_T_AS)) {
		s->names = node(p, sizeof *s->names);
		if (!s->names || !parse_ident(p, s->names, "a name after 'as'"))
			return NULL;
		s->n_names = 1;
	}
	return parse_block(p, &s->body) ? s : NULL;
}

// stmt = "for" IDENT "in" expr ".." expr NL block
static fe_stmt *parse_for(parser *p, fe_stmt *s)
{
	advance(p);
	s->names = node(p, sizeof *s->names);
	if (!s->names || !parse_ident(p, s->names, "a loop variable"))
		return NULL;
	s->n_names = 1;
	if (!expect(p, FE_T_IN, "'in'") || !(s->value = parse_expr(p)) ||
	    !expect(p, FE_T_DOTDOT, "'..'") || !(s->value2 = parse_expr(p)))
		return NULL;
	return parse_block(p, &s->body) ? s : NULL;
}

static fe_stmt *parse_stmt(parser *p);

// stmt = "if" expr NL block [ "else" ( NL block | ifstmt ) ]
static fe_stmt *parse_if(parser *p, fe_stmt *s)
{
	advance(p);
	if (!(s->value = parse_expr(p)) || !parse_block(p, &s->body))
		return NULL;
	if (!accept(p, FE_T_ELSE))
		return s;
	if (at(p, FE_T_IF)) {
		fe_stmt *inner = parse_stmt(p);
		s->orelse.stmts = node(p, sizeof *s->orelse.stmts);
		if (!inner || !s->orelse.stmts)
			return NULL;
		s->orelse.stmts[0] = inner;
		s->orelse.n = 1;
		return s;
	}
	return parse_block(p, &s->orelse) ? s : NULL;
}

/* True if the tokens ahead read `IDENT { "," IDENT } "="`. */
static bool at_assignment(const parser *p)
{
	uint32_t i = p->pos;
	while (i + 1 < p->n && p->toks[i].kind == FE_T_IDENT) {
		if (p->toks[i + 1].kind == FE_T_ASSIGN)
			return true;
		if (p->toks[i + 1].kind != FE_T_COMMA)
			return false;
		i += 2;
	}
	return false;
}

// stmt = IDENT { "," IDENT } "=" expr NL | expr NL
static fe_stmt *parse_simple(parser *p, fe_stmt *s)
{
	if (at_assignment(p)) {
		s->kind = FE_S_ASSIGN;
		if (!parse_names(p, &s->names, &s->n_names))
			return NULL;
		advance(p); /* = */
	}
	if (!(s->value = parse_expr(p)))
		return NULL;
	return expect_eol(p) ? s : NULL;
}

// stmt = param | assign | return | repeat | for | if | expr NL
static fe_stmt *parse_stmt(parser *p)
{
	fe_stmt *s = new_stmt(p, FE_S_EXPR, cur(p)->loc);
	if (!s)
		return NULL;
	switch (cur(p)->kind) {
	case FE_T_PARAM:
		s->kind = FE_S_PARAM;
		return parse_param(p, s);
	case FE_T_RETURN:
		s->kind = FE_S_RETURN;
		return parse_return(p, s);
	case FE_T_REPEAT:
		s->kind = FE_S_REPEAT;
		return parse_repeat(p, s);
	case FE_T_FOR:
		s->kind = FE_S_FOR;
		return parse_for(p, s);
	case FE_T_IF:
		s->kind = FE_S_IF;
		return parse_if(p, s);
	default:
		return parse_simple(p, s);
	}
}

// block = NL INDENT stmt { stmt } DEDENT
static bool parse_block(parser *p, fe_block *b)
{
	if (!expect_eol(p))
		return false;
	if (!at(p, FE_T_INDENT)) {
		error_expected(p, "an indented block");
		return false;
	}
	advance(p);
	vec v = {.elem = sizeof(fe_stmt *)};
	while (!at(p, FE_T_DEDENT) && !at(p, FE_T_EOF) && !p->is_oom) {
		if (accept(p, FE_T_NEWLINE))
			continue;
		fe_stmt *s = parse_stmt(p);
		if (s)
			vec_push(p, &v, &s);
		else
			sync_line(p);
	}
	accept(p, FE_T_DEDENT);
	b->stmts = vec_finish(p, &v, &b->n);
	return true;
}

/* ---- declarations -------------------------------------------------------------- */

// tensortype = DTYPE "[" [ expr { "," expr } ] "]"      DTYPE = f32 | i32
static bool parse_tensortype(parser *p, fe_def_param *dp)
{
	dp->type_loc = cur(p)->loc;
	if (!at(p, FE_T_IDENT) || (strcmp(cur(p)->text, "f32") != 0 &&
				   strcmp(cur(p)->text, "i32") != 0)) {
		error_expected(p, "a tensor type (f32[...] or i32[...])");
		return false;
	}
	dp->dtype = strcmp(cur(p)->text, "f32") == 0 ? IR_F32 : IR_I32;
	dp->has_type = true;
	advance(p);
	return expect(p, FE_T_LBRACK, "'[' after the dtype") &&
	       parse_exprs(p, FE_T_RBRACK, false, &dp->dims, &dp->n_dims);
}

// params = param { "," param } [ "," ]
// param = IDENT [ ":" tensortype ] [ "=" expr ]
static bool parse_params(parser *p, fe_def *d)
{
	vec v = {.elem = sizeof(fe_def_param)};
	while (!at(p, FE_T_RPAREN)) {
		fe_def_param dp = {0};
		bool ok = parse_ident(p, &dp.id, "a parameter name") &&
			  (!accept(p, FE_T_COLON) || parse_tensortype(p, &dp)) &&
			  (!accept(p, FE_T_ASSIGN) ||
			   (dp.deflt = parse_expr(p)));
		if (!ok || !vec_push(p, &v, &dp)) {
			ir_free(p->ctx, v.data);
			return false;
		}
		if (!accept(p, FE_T_COMMA))
			break;
	}
	d->params = vec_finish(p, &v, &d->n_params);
	return expect(p, FE_T_RPAREN, "',' or ')'");
}

/* Call-site numbering: counts, then numbers, the calls of each name in
 * the text of one def, in order of evaluation (statements in order, the
 * arguments of a call before the call). */
typedef struct site_count {
	const char *name;
	uint32_t n, next;
} site_count;

typedef struct site_walk {
	parser *p;
	vec counts; /* site_count */
	bool is_numbering;
} site_walk;

static site_count *site_find(site_walk *w, const char *name)
{
	site_count *c = w->counts.data;
	for (uint32_t i = 0; i < w->counts.n; i++)
		if (strcmp(c[i].name, name) == 0)
			return &c[i];
	site_count nc = {name, 0, 0};
	if (!vec_push(w->p, &w->counts, &nc))
		return NULL;
	return (site_count *)w->counts.data + w->counts.n - 1;
}

static void sites_expr(site_walk *w, fe_expr *e);

static void sites_exprs(site_walk *w, fe_expr **es, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		sites_expr(w, es[i]);
}

static void sites_call(site_walk *w, fe_expr *e)
{
	/* Arguments first: sites are numbered in evaluation order, so in
	 * linear(relu(linear(x, F)), D) the layer applied first is linear_0. */
	for (uint32_t i = 0; i < e->call.n_args; i++)
		sites_expr(w, e->call.args[i].value);
	if (e->call.callee->kind != FE_E_NAME) {
		sites_expr(w, e->call.callee);
		return;
	}
	site_count *c = site_find(w, e->call.callee->str);
	if (c && w->is_numbering) {
		e->call.site = c->next++;
		e->call.n_sites = c->n;
	} else if (c) {
		c->n++;
	}
}

/* A left-leaning chain in a loop, as fe_eval walks it: its deepest
 * left operand first, then the right operands from the bottom up. */
static void sites_binary(site_walk *w, fe_expr *e)
{
	if (!is_chain_op(e)) {
		sites_expr(w, e->bin.lhs);
		sites_expr(w, e->bin.rhs);
		return;
	}
	vec spine = {.elem = sizeof(fe_expr *)};
	for (fe_expr *b = e; is_chain_op(b); b = b->bin.lhs)
		if (!vec_push(w->p, &spine, &b))
			break;
	fe_expr **nodes = spine.data;
	if (spine.n == 0)
		return;
	sites_expr(w, nodes[spine.n - 1]->bin.lhs);
	for (uint32_t i = spine.n; i-- > 0;)
		sites_expr(w, nodes[i]->bin.rhs);
	ir_free(w->p->ctx, spine.data);
}

static void sites_expr(site_walk *w, fe_expr *e)
{
	if (!e)
		return;
	switch (e->kind) {
	case FE_E_NUM:
	case FE_E_STR:
	case FE_E_NAME:
	case FE_E_BOOL:
		return;
	case FE_E_LIST:
		sites_exprs(w, e->list.items, e->list.n);
		return;
	case FE_E_CALL:
		sites_call(w, e);
		return;
	case FE_E_INDEX:
		sites_expr(w, e->index.base);
		sites_exprs(w, e->index.items, e->index.n);
		return;
	case FE_E_SLICE:
		sites_expr(w, e->slice.lo);
		sites_expr(w, e->slice.hi);
		return;
	case FE_E_BINARY:
		sites_binary(w, e);
		return;
	case FE_E_NEG:
	case FE_E_NOT:
	case FE_E_TRANSPOSE:
		sites_expr(w, e->operand);
		return;
	}
}

static void sites_block(site_walk *w, const fe_block *b)
{
	for (uint32_t i = 0; i < b->n; i++) {
		fe_stmt *s = b->stmts[i];
		sites_exprs(w, s->exprs, s->n_exprs);
		sites_expr(w, s->value);
		sites_expr(w, s->value2);
		sites_block(w, &s->body);
		sites_block(w, &s->orelse);
	}
}

static void number_call_sites(parser *p, fe_def *d)
{
	site_walk w = {p, {.elem = sizeof(site_count)}, false};
	for (int pass = 0; pass < 2; pass++) {
		w.is_numbering = pass == 1;
		sites_expr(&w, d->body_expr);
		sites_block(&w, &d->body);
	}
	ir_free(p->ctx, w.counts.data);
}

// def = [ "export" ] "def" IDENT "(" [ params ] ")" ( NL block | "=" expr NL )
static fe_decl *parse_def(parser *p, fe_decl *decl)
{
	fe_def *d = node(p, sizeof *d);
	if (!d)
		return NULL;
	decl->kind = FE_D_DEF;
	decl->def = d;
	d->is_prelude = p->is_prelude;
	d->is_export = accept(p, FE_T_EXPORT);
	if (!expect(p, FE_T_DEF, "'def'") ||
	    !parse_ident(p, &d->id, "the name of the definition") ||
	    !expect(p, FE_T_LPAREN, "'('") || !parse_params(p, d))
		return NULL;
	if (accept(p, FE_T_ASSIGN)) {
		if (!(d->body_expr = parse_expr(p)) || !expect_eol(p))
			return NULL;
	} else if (!parse_block(p, &d->body)) {
		return NULL;
	}
	number_call_sites(p, d);
	return decl;
}

// dimdecl   = "dim" IDENT [ "=" expr ] { "," IDENT [ "=" expr ] } NL
// constdecl = "const" IDENT "=" expr { "," IDENT "=" expr } NL
static fe_decl *parse_bindings(parser *p, fe_decl *decl, bool is_const)
{
	vec names = {.elem = sizeof(fe_ident)};
	vec values = {.elem = sizeof(fe_expr *)};
	bool ok = true;
	decl->kind = is_const ? FE_D_CONST : FE_D_DIM;
	advance(p);
	do {
		fe_ident id;
		fe_expr *value = NULL;
		ok = parse_ident(p, &id,
				 is_const ? "a constant name" : "a dim name");
		if (ok && (is_const ? expect(p, FE_T_ASSIGN, "'='")
				    : accept(p, FE_T_ASSIGN)))
			ok = (value = parse_expr(p)) != NULL;
		ok = ok && !p->is_panic && vec_push(p, &names, &id) &&
		     vec_push(p, &values, &value);
	} while (ok && accept(p, FE_T_COMMA));
	decl->names = vec_finish(p, &names, &decl->n);
	decl->values = vec_finish(p, &values, &decl->n);
	return ok && expect_eol(p) ? decl : NULL;
}

// example = "example" IDENT "(" [ args ] ")" NL
static fe_decl *parse_example(parser *p, fe_decl *decl)
{
	decl->kind = FE_D_EXAMPLE;
	advance(p);
	decl->names = node(p, sizeof *decl->names);
	decl->n = 1;
	if (!decl->names ||
	    !parse_ident(p, decl->names, "the name of an exported function") ||
	    !expect(p, FE_T_LPAREN, "'('") ||
	    !parse_args(p, FE_T_RPAREN, &decl->args, &decl->n_args))
		return NULL;
	return expect_eol(p) ? decl : NULL;
}

// setting = IDENT "=" expr { "," IDENT "=" expr } NL
static bool parse_setting_line(parser *p, vec *names, vec *values)
{
	do {
		fe_ident id;
		fe_expr *value;
		if (!parse_ident(p, &id, "a setting name") ||
		    !expect(p, FE_T_ASSIGN, "'='") || !(value = parse_expr(p)) ||
		    !vec_push(p, names, &id) || !vec_push(p, values, &value))
			return false;
	} while (accept(p, FE_T_COMMA));
	return expect_eol(p);
}

// train = "train" NL INDENT { setting } DEDENT
static fe_decl *parse_train(parser *p, fe_decl *decl)
{
	vec names = {.elem = sizeof(fe_ident)};
	vec values = {.elem = sizeof(fe_expr *)};
	decl->kind = FE_D_TRAIN;
	advance(p);
	if (!expect_eol(p) || !expect(p, FE_T_INDENT, "an indented block"))
		return NULL;
	while (!at(p, FE_T_DEDENT) && !at(p, FE_T_EOF) && !p->is_oom) {
		if (accept(p, FE_T_NEWLINE))
			continue;
		if (!parse_setting_line(p, &names, &values))
			sync_line(p);
	}
	accept(p, FE_T_DEDENT);
	decl->names = vec_finish(p, &names, &decl->n);
	decl->values = vec_finish(p, &values, &decl->n);
	return decl;
}

// toplevel = dimdecl | constdecl | def | example | train
static fe_decl *parse_toplevel(parser *p)
{
	fe_decl *decl = node(p, sizeof *decl);
	if (!decl)
		return NULL;
	decl->loc = cur(p)->loc;
	switch (cur(p)->kind) {
	case FE_T_DIM:
		return parse_bindings(p, decl, false);
	case FE_T_CONST:
		return parse_bindings(p, decl, true);
	case FE_T_DEF:
	case FE_T_EXPORT:
		return parse_def(p, decl);
	case FE_T_EXAMPLE:
		return parse_example(p, decl);
	case FE_T_TRAIN:
		return parse_train(p, decl);
	default:
		error_expected(p, "a declaration (dim, const, def, export def, "
				  "example or train)");
		return NULL;
	}
}

// file = "model" IDENT NL { toplevel }
static void parse_header(parser *p, fe_file *f)
{
	if (p->is_prelude)
		return;
	if (!at(p, FE_T_MODEL)) {
		error_expected(p, "'model NAME' at the start of the file");
		p->is_panic = false;
		return;
	}
	advance(p);
	if (!parse_ident(p, &f->model, "the model's name") || !expect_eol(p))
		sync_line(p);
}

fe_file *fe_parse(ir_ctx *ctx, const fe_tokens *toks, ir_arena *arena,
		  bool is_prelude)
{
	parser p = {.ctx = ctx,
		    .arena = arena,
		    .toks = toks->toks,
		    .n = toks->n,
		    .is_prelude = is_prelude};
	fe_file *f = node(&p, sizeof *f);
	if (!f)
		return NULL;
	vec decls = {.elem = sizeof(fe_decl *)};
	parse_header(&p, f);
	while (!at(&p, FE_T_EOF) && !p.is_oom) {
		if (accept(&p, FE_T_NEWLINE) || accept(&p, FE_T_DEDENT))
			continue;
		fe_decl *d = parse_toplevel(&p);
		if (d)
			vec_push(&p, &decls, &d);
		else
			sync_line(&p);
	}
	f->decls = vec_finish(&p, &decls, &f->n_decls);
	return p.is_oom ? NULL : f;
}
