/*
 * test_frontend.c - the .g front end: the lexer's tokens and block
 * structure, the parser's precedence and error recovery, the elaborator's
 * graphs, parameter names, constants and examples, every kind of error
 * with its location, and random input that must never crash.
 */
#include "frontend.h"
#include "syntax.h"
#include "testutil.h"

#include <check.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- fixtures --------------------------------------------------------------- */

/* A compile of one source with its diagnostics captured. */
typedef struct fx {
	ir_ctx ctx;
	char *diag;
	size_t diag_len;
	uint32_t file;
	ir_module *m;
} fx;

static void fx_init(fx *x, const char *src, size_t len)
{
	ir_ctx_init(&x->ctx);
	x->diag = NULL;
	x->diag_len = 0;
	x->ctx.diag_out = open_memstream(&x->diag, &x->diag_len);
	x->ctx.max_errors = 0;
	x->file = ir_ctx_add_source(&x->ctx, "t.g", src, len);
	x->m = NULL;
}

static void fx_compile(fx *x, const char *src)
{
	fx_init(x, src, strlen(src));
	x->m = fe_compile(&x->ctx, x->file);
	fflush(x->ctx.diag_out);
}

static void fx_fini(fx *x)
{
	ir_module_destroy(x->m);
	fclose(x->ctx.diag_out);
	free(x->diag);
	ir_ctx_fini(&x->ctx);
}

/* Compiles a source that must succeed and verify. */
static void fx_ok(fx *x, const char *src)
{
	fx_compile(x, src);
	ck_assert_msg(x->m != NULL, "compile failed:\n%s", x->diag);
	ck_assert_int_eq(x->ctx.n_errors, 0);
	ck_assert(ir_module_verify(x->m));
}

/* Compiles a source that must fail with a diagnostic containing want. */
static void fx_fails_with(fx *x, const char *src, const char *want)
{
	fx_compile(x, src);
	ck_assert_msg(x->m == NULL, "compile should fail: %s", want);
	ck_assert_msg(strstr(x->diag, want) != NULL, "want \"%s\" in:\n%s",
		      want, x->diag);
}

static int count_ops(const ir_func *f, ir_op op)
{
	int n = 0;
	for (uint32_t i = 0; i < f->g.n_nodes; i++)
		n += f->g.nodes[i].op == op;
	return n;
}

static const ir_node *first_op(const ir_func *f, ir_op op)
{
	for (uint32_t i = 0; i < f->g.n_nodes; i++)
		if (f->g.nodes[i].op == op)
			return &f->g.nodes[i];
	ck_abort_msg("no %s node", ir_op_table[op].name);
	return NULL;
}

static const ir_node *output_node(const ir_func *f, uint32_t i)
{
	return &f->g.nodes[f->outputs[i]];
}

static float const_f32(const ir_module *m, const ir_node *n, int64_t i)
{
	ck_assert_int_eq(n->op, IR_OP_CONST);
	return ((const float *)m->consts[n->attr.const_index].data)[i];
}

/* Lexes src into toks (arena a); returns the number of errors. */
static int lex(ir_ctx *ctx, ir_arena *a, const char *src, fe_tokens *toks)
{
	uint32_t f = ir_ctx_add_source(ctx, "t.g", src, strlen(src));
	int before = ctx->n_errors;
	ck_assert(fe_lex(ctx, f, a, toks));
	return ctx->n_errors - before;
}

static void assert_kinds(const fe_tokens *t, const fe_tok_kind *want, uint32_t n)
{
	ck_assert_uint_eq(t->n, n);
	for (uint32_t i = 0; i < n; i++)
		ck_assert_msg(t->toks[i].kind == want[i],
			      "token %u: kind %d, want %d", i, t->toks[i].kind,
			      want[i]);
}

static char *repeated(const char *head, const char *unit, size_t n,
		      const char *tail);

/* ---- lexer ---------------------------------------------------------------------- */

START_TEST(test_lex_brackets_a_block_with_indent_and_dedent)
{
	ir_ctx ctx;
	ir_arena a;
	fe_tokens t;
	ir_ctx_init(&ctx);
	ir_arena_init(&a, &ctx);
	ck_assert_int_eq(lex(&ctx, &a, "def f(x)\n  return x\ny\n", &t), 0);
	fe_tok_kind want[] = {FE_T_DEF,     FE_T_IDENT,  FE_T_LPAREN,
			      FE_T_IDENT,   FE_T_RPAREN, FE_T_NEWLINE,
			      FE_T_INDENT,  FE_T_RETURN, FE_T_IDENT,
			      FE_T_NEWLINE, FE_T_DEDENT, FE_T_IDENT,
			      FE_T_NEWLINE, FE_T_EOF};
	assert_kinds(&t, want, sizeof want / sizeof *want);
	fe_tokens_fini(&ctx, &t);
	ir_arena_fini(&a);
	ir_ctx_fini(&ctx);
}
END_TEST

START_TEST(test_lex_closes_every_open_block_at_end_of_file)
{
	ir_ctx ctx;
	ir_arena a;
	fe_tokens t;
	ir_ctx_init(&ctx);
	ir_arena_init(&a, &ctx);
	ck_assert_int_eq(lex(&ctx, &a, "a\n  b\n    c", &t), 0);
	fe_tok_kind want[] = {FE_T_IDENT,  FE_T_NEWLINE, FE_T_INDENT,
			      FE_T_IDENT,  FE_T_NEWLINE, FE_T_INDENT,
			      FE_T_IDENT,  FE_T_NEWLINE, FE_T_DEDENT,
			      FE_T_DEDENT, FE_T_EOF};
	assert_kinds(&t, want, sizeof want / sizeof *want);
	fe_tokens_fini(&ctx, &t);
	ir_arena_fini(&a);
	ir_ctx_fini(&ctx);
}
END_TEST

START_TEST(test_lex_ignores_line_breaks_inside_brackets_and_blank_lines)
{
	ir_ctx ctx;
	ir_arena a;
	fe_tokens t;
	ir_ctx_init(&ctx);
	ir_arena_init(&a, &ctx);
	ck_assert_int_eq(lex(&ctx, &a,
			     "f(a,\n      b)  # note\n\n   # only\nc\n", &t),
			 0);
	fe_tok_kind want[] = {FE_T_IDENT,   FE_T_LPAREN, FE_T_IDENT,
			      FE_T_COMMA,   FE_T_IDENT,  FE_T_RPAREN,
			      FE_T_NEWLINE, FE_T_IDENT,  FE_T_NEWLINE,
			      FE_T_EOF};
	assert_kinds(&t, want, sizeof want / sizeof *want);
	fe_tokens_fini(&ctx, &t);
	ir_arena_fini(&a);
	ir_ctx_fini(&ctx);
}
END_TEST

START_TEST(test_lex_tells_integers_from_reals_and_ranges)
{
	ir_ctx ctx;
	ir_arena a;
	fe_tokens t;
	ir_ctx_init(&ctx);
	ir_arena_init(&a, &ctx);
	ck_assert_int_eq(lex(&ctx, &a, "12 0.5 1e-5 .5 0..3 2E3\n", &t), 0);
	fe_tok_kind want[] = {FE_T_INT,     FE_T_REAL,   FE_T_REAL, FE_T_REAL,
			      FE_T_INT,     FE_T_DOTDOT, FE_T_INT,  FE_T_REAL,
			      FE_T_NEWLINE, FE_T_EOF};
	assert_kinds(&t, want, sizeof want / sizeof *want);
	ck_assert_int_eq(t.toks[0].ival, 12);
	ck_assert_double_eq(t.toks[1].rval, 0.5);
	ck_assert_double_eq(t.toks[2].rval, 1e-5);
	ck_assert_double_eq(t.toks[3].rval, 0.5);
	ck_assert_int_eq(t.toks[6].ival, 3);
	ck_assert_double_eq(t.toks[7].rval, 2000);
	fe_tokens_fini(&ctx, &t);
	ir_arena_fini(&a);
	ir_ctx_fini(&ctx);
}
END_TEST

START_TEST(test_lex_reads_operators_keywords_and_string_escapes)
{
	ir_ctx ctx;
	ir_arena a;
	fe_tokens t;
	ir_ctx_init(&ctx);
	ir_arena_init(&a, &ctx);
	ck_assert_int_eq(lex(&ctx, &a,
			     "x.T ** <= != == not repeat \"a\\\"b\\n\"\n", &t),
			 0);
	fe_tok_kind want[] = {FE_T_IDENT,  FE_T_DOT,    FE_T_IDENT,   FE_T_POW,
			      FE_T_LE,     FE_T_NE,     FE_T_EQ,      FE_T_NOT,
			      FE_T_REPEAT, FE_T_STRING, FE_T_NEWLINE, FE_T_EOF};
	assert_kinds(&t, want, sizeof want / sizeof *want);
	ck_assert_str_eq(t.toks[9].text, "a\"b\n");
	fe_tokens_fini(&ctx, &t);
	ir_arena_fini(&a);
	ir_ctx_fini(&ctx);
}
END_TEST

START_TEST(test_lex_gives_each_token_its_line_and_column)
{
	ir_ctx ctx;
	ir_arena a;
	fe_tokens t;
	ir_ctx_init(&ctx);
	ir_arena_init(&a, &ctx);
	lex(&ctx, &a, "model m\n\ndef f(x)\n    return x @ x\n", &t);
	/* return: line 4, col 5; @: line 4, col 14 */
	ck_assert_int_eq(t.toks[9].kind, FE_T_INDENT);
	ck_assert_int_eq(t.toks[10].kind, FE_T_RETURN);
	ck_assert_uint_eq(t.toks[10].loc.line, 4);
	ck_assert_uint_eq(t.toks[10].loc.col, 5);
	ck_assert_int_eq(t.toks[12].kind, FE_T_AT);
	ck_assert_uint_eq(t.toks[12].loc.line, 4);
	ck_assert_uint_eq(t.toks[12].loc.col, 14);
	ck_assert_uint_eq(t.toks[12].loc.file, 1);
	fe_tokens_fini(&ctx, &t);
	ir_arena_fini(&a);
	ir_ctx_fini(&ctx);
}
END_TEST

START_TEST(test_lex_reports_invalid_characters_and_goes_on)
{
	fx x;
	fx_compile(&x, "model m\nconst A = 1 $ 2\nconst B = ` 3\n");
	ck_assert_ptr_null(x.m);
	ck_assert_ptr_nonnull(
		strstr(x.diag, "t.g:2:13: error: invalid character '$'"));
	ck_assert_ptr_nonnull(
		strstr(x.diag, "t.g:3:11: error: invalid character '`'"));
	fx_fini(&x);
}
END_TEST

/* An allocation hook that adds up every byte asked for: an upper bound
 * of the peak, independent of the C library. */
static void *counting_alloc(void *ud, void *ptr, size_t size)
{
	if (size == 0) {
		free(ptr);
		return NULL;
	}
	*(size_t *)ud += size;
	return realloc(ptr, size);
}

START_TEST(test_lex_memory_is_linear_in_the_number_of_strings)
{
	enum { N = 30000 };
	size_t asked = 0;
	char *src = repeated("model m\nconst s = \"a\\\"b\" ", "\"\" ", N, "\n");
	ir_ctx ctx;
	ir_arena a;
	fe_tokens toks;
	ir_ctx_init(&ctx);
	ctx.alloc = counting_alloc;
	ctx.alloc_ud = &asked;
	ir_arena_init(&a, &ctx);
	ck_assert_int_eq(lex(&ctx, &a, src, &toks), 0);
	ck_assert_uint_eq(toks.n, 3 + 4 + N + 2);
	ck_assert_str_eq(toks.toks[6].text, "a\"b");
	ck_assert_str_eq(toks.toks[7].text, "");
	/* About 100 bytes per string here; reserving the rest of the file
	 * for each one asked for 1.8 GB. */
	ck_assert_msg(asked < 8u * N * 100, "asked for %zu bytes", asked);
	fe_tokens_fini(&ctx, &toks);
	ir_arena_fini(&a);
	ir_ctx_fini(&ctx);
	free(src);
}
END_TEST

START_TEST(test_lex_reports_an_unterminated_string_at_its_start)
{
	fx x;
	fx_fails_with(&x, "model m\ntrain\n  data = \"fra.txt\n",
		      "t.g:3:10: error: unterminated string");
	fx_fini(&x);
}
END_TEST

START_TEST(test_lex_reports_a_dedent_to_a_level_never_opened)
{
	fx x;
	fx_fails_with(&x, "model m\ndef f(x)\n    y = x\n  return y\n",
		      "t.g:4:3: error: unindent does not match any outer "
		      "indentation level");
	fx_fini(&x);
}
END_TEST

START_TEST(test_lex_reports_tabs_mixed_with_spaces)
{
	fx x;
	fx_fails_with(&x, "model m\ndef f(x)\n    y = x\ndef g(x)\n\treturn x\n",
		      "t.g:5:1: error: indentation mixes tabs and spaces");
	fx_fini(&x);
}
END_TEST

/* ---- parser ---------------------------------------------------------------------- */

/* Parses src; returns the value of its first declaration's first value. */
static fe_expr *parse_const(ir_ctx *ctx, ir_arena *a, const char *src)
{
	fe_tokens t;
	lex(ctx, a, src, &t);
	fe_file *f = fe_parse(ctx, &t, a, false);
	fe_tokens_fini(ctx, &t);
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_ge(f->n_decls, 1);
	return f->decls[0]->values[0];
}

START_TEST(test_parse_gives_multiplication_precedence_over_addition)
{
	ir_ctx ctx;
	ir_arena a;
	ir_ctx_init(&ctx);
	ir_arena_init(&a, &ctx);
	fe_expr *e = parse_const(&ctx, &a, "model m\nconst X = 1 + 2 * 3 - 4\n");
	/* (1 + (2 * 3)) - 4 */
	ck_assert_int_eq(e->kind, FE_E_BINARY);
	ck_assert_int_eq(e->bin.op, FE_T_MINUS);
	ck_assert_int_eq(e->bin.lhs->bin.op, FE_T_PLUS);
	ck_assert_int_eq(e->bin.lhs->bin.rhs->bin.op, FE_T_STAR);
	ck_assert_int_eq(e->bin.rhs->num.i, 4);
	ck_assert_int_eq(ctx.n_errors, 0);
	ir_arena_fini(&a);
	ir_ctx_fini(&ctx);
}
END_TEST

START_TEST(test_parse_binds_power_tighter_than_minus_and_matmul_like_times)
{
	ir_ctx ctx;
	ir_arena a;
	ir_ctx_init(&ctx);
	ir_arena_init(&a, &ctx);
	fe_expr *e = parse_const(&ctx, &a, "model m\nconst X = -2 ** 2\n");
	ck_assert_int_eq(e->kind, FE_E_NEG);
	ck_assert_int_eq(e->operand->bin.op, FE_T_POW);
	e = parse_const(&ctx, &a,
			"model m\nconst X = a @ b.T * c < d and not e\n");
	/* ((a @ b.T) * c < d) and (not e) */
	ck_assert_int_eq(e->bin.op, FE_T_AND);
	ck_assert_int_eq(e->bin.rhs->kind, FE_E_NOT);
	ck_assert_int_eq(e->bin.lhs->bin.op, FE_T_LT);
	ck_assert_int_eq(e->bin.lhs->bin.lhs->bin.op, FE_T_STAR);
	ck_assert_int_eq(e->bin.lhs->bin.lhs->bin.lhs->bin.op, FE_T_AT);
	ck_assert_int_eq(e->bin.lhs->bin.lhs->bin.lhs->bin.rhs->kind,
			 FE_E_TRANSPOSE);
	ir_arena_fini(&a);
	ir_ctx_fini(&ctx);
}
END_TEST

START_TEST(test_parse_numbers_the_call_sites_of_each_name)
{
	ir_ctx ctx;
	ir_arena a;
	fe_tokens t;
	ir_ctx_init(&ctx);
	ir_arena_init(&a, &ctx);
	lex(&ctx, &a, "model m\ndef f(x) = g(h(g(x)))\n", &t);
	fe_file *f = fe_parse(&ctx, &t, &a, false);
	fe_expr *outer = f->decls[0]->def->body_expr;
	fe_expr *mid = outer->call.args[0].value;
	fe_expr *inner = mid->call.args[0].value;
	/* Evaluation order: the inner g runs first. */
	ck_assert_uint_eq(inner->call.site, 0);
	ck_assert_uint_eq(outer->call.site, 1);
	ck_assert_uint_eq(outer->call.n_sites, 2);
	ck_assert_uint_eq(mid->call.n_sites, 1);
	fe_tokens_fini(&ctx, &t);
	ir_arena_fini(&a);
	ir_ctx_fini(&ctx);
}
END_TEST

START_TEST(test_parse_recovers_at_the_next_line_and_reports_every_error)
{
	fx x;
	fx_compile(&x, "model m\n"
		       "const A = (1 +\n"
		       "def f(x)\n"
		       "  y = x +\n"
		       "  z = ]\n"
		       "  return y\n"
		       "const B = 2 3\n");
	ck_assert_ptr_null(x.m);
	ck_assert_int_eq(x.ctx.n_errors, 4);
	ck_assert_ptr_nonnull(strstr(x.diag,
				     "t.g:2:15: error: expected an expression, "
				     "found end of line"));
	ck_assert_ptr_nonnull(strstr(x.diag,
				     "t.g:4:10: error: expected an expression, "
				     "found end of line"));
	ck_assert_ptr_nonnull(strstr(x.diag,
				     "t.g:5:7: error: expected an expression, "
				     "found ']'"));
	ck_assert_ptr_nonnull(strstr(x.diag,
				     "t.g:7:13: error: expected end of line, "
				     "found '3'"));
	fx_fini(&x);
}
END_TEST

START_TEST(test_parse_requires_the_model_line)
{
	fx x;
	fx_fails_with(&x, "def f(x) = x\n",
		      "t.g:1:1: error: expected 'model NAME' at the start of the "
		      "file, found 'def'");
	fx_fini(&x);
}
END_TEST

/* ---- elaboration ---------------------------------------------------------------------- */

START_TEST(test_export_gets_typed_inputs_named_outputs_and_symbols)
{
	fx x;
	fx_ok(&x, "model demo\ndim B, V = 7\nconst D = 4\n"
		  "export def f(a: f32[B, D], ids: i32[2 * B])\n"
		  "  y = a * 2\n"
		  "  return y, a + 1\n");
	ck_assert_str_eq(x.m->name, "demo");
	ck_assert_uint_eq(x.m->n_syms, 2);
	ck_assert_int_eq(x.m->syms[1].fallback, 7);
	ir_func *f = ir_module_find_func(x.m, "f");
	ck_assert(f->is_export);
	ck_assert_uint_eq(f->n_inputs, 2);
	ck_assert_str_eq(f->input_names[1], "ids");
	const ir_type *t = &f->g.nodes[f->inputs[1]].type;
	ck_assert_int_eq(t->dtype, IR_I32);
	ck_assert_int_eq(t->dims[0].coef, 2);
	ck_assert_int_eq(t->dims[0].sym, 0);
	ck_assert_uint_eq(f->g.nodes[f->inputs[1]].attr.input_index, 1);
	ck_assert_uint_eq(f->n_outputs, 2);
	ck_assert_str_eq(f->output_names[0], "y");
	ck_assert_str_eq(f->output_names[1], "out1");
	ck_assert_int_eq(output_node(f, 1)->op, IR_OP_ADD);
	fx_fini(&x);
}
END_TEST

static const char *param_name(const fx *x, uint32_t i)
{
	ck_assert_uint_lt(i, x->m->n_params);
	return x->m->params[i].name;
}

START_TEST(test_two_call_sites_of_a_layer_get_two_parameters)
{
	fx x;
	fx_ok(&x, "model m\n"
		  "def dense(x, n)\n"
		  "  param W : [size(x, -1), n]\n"
		  "  return x @ W\n"
		  "def mlp(x) = dense(relu(dense(x, 8)), 2)\n"
		  "export def f(x: f32[3, 4]) = mlp(x)\n");
	ck_assert_uint_eq(x.m->n_params, 2);
	/* Sites are numbered in evaluation order: the inner call first. */
	ck_assert_str_eq(param_name(&x, 0), "mlp.dense_0.W");
	ck_assert_str_eq(param_name(&x, 1), "mlp.dense_1.W");
	ck_assert_int_eq(x.m->params[0].type.dims[1].coef, 8);
	ck_assert_int_eq(x.m->params[1].type.dims[0].coef, 8);
	ck_assert_int_eq(x.m->params[0].init, IR_INIT_XAVIER_UNIFORM);
	fx_fini(&x);
}
END_TEST

START_TEST(test_repeat_gives_each_iteration_an_index_segment)
{
	fx x;
	fx_ok(&x, "model m\n"
		  "def block(x)\n"
		  "  param b : [4] = ones\n"
		  "  return x + b\n"
		  "export def f(x: f32[4])\n"
		  "  repeat 2 as i\n"
		  "    x = block(x) * i\n"
		  "  return x\n");
	ck_assert_uint_eq(x.m->n_params, 2);
	ck_assert_str_eq(param_name(&x, 0), "0.block.b");
	ck_assert_str_eq(param_name(&x, 1), "1.block.b");
	ck_assert_int_eq(x.m->params[1].init, IR_INIT_ONES);
	fx_fini(&x);
}
END_TEST

START_TEST(test_a_for_loop_shares_the_parameters_of_its_call_site)
{
	fx x;
	fx_ok(&x, "model m\n"
		  "def cell(x, h)\n"
		  "  param W : [4, 4]\n"
		  "  return tanh(x + h @ W)\n"
		  "export def f(xs: f32[5, 4])\n"
		  "  h = zeros([1, 4])\n"
		  "  for t in 0..5\n"
		  "    h = cell(xs[t], h)\n"
		  "  return h\n");
	ck_assert_uint_eq(x.m->n_params, 1);
	ck_assert_str_eq(param_name(&x, 0), "cell.W");
	ir_func *f = ir_module_find_func(x.m, "f");
	ck_assert_int_eq(count_ops(f, IR_OP_PARAM), 1);
	ck_assert_int_eq(count_ops(f, IR_OP_TANH), 5);
	ck_assert_int_eq(count_ops(f, IR_OP_SLICE), 5);
	fx_fini(&x);
}
END_TEST

START_TEST(test_exported_functions_share_parameters_by_name)
{
	fx x;
	fx_ok(&x, "model m\n"
		  "def enc(x) = linear(x, 3)\n"
		  "export def a(x: f32[2, 4]) = enc(x)\n"
		  "export def b(x: f32[2, 4]) = relu(enc(x))\n");
	ck_assert_uint_eq(x.m->n_params, 2);
	ck_assert_str_eq(param_name(&x, 0), "enc.linear.W");
	ck_assert_str_eq(param_name(&x, 1), "enc.linear.b");
	ck_assert_int_eq(count_ops(ir_module_find_func(x.m, "b"), IR_OP_PARAM),
			 2);
	fx_fini(&x);
}
END_TEST

START_TEST(test_number_arithmetic_is_folded_at_compile_time)
{
	fx x;
	fx_ok(&x, "model m\nconst D = 32, H = 4\n"
		  "export def f(x: f32[3])\n"
		  "  return x / sqrt(D / H) + (2 ** 3 - 7 % 3)\n");
	ir_func *f = ir_module_find_func(x.m, "f");
	ck_assert_uint_eq(f->g.n_nodes, 5);
	const ir_node *div = first_op(f, IR_OP_DIV);
	const ir_node *c = &f->g.nodes[ir_arg(&f->g, (ir_id)(div - f->g.nodes), 1)];
	ck_assert_float_eq_tol(const_f32(x.m, c, 0), sqrtf(8), 1e-6);
	const ir_node *add = first_op(f, IR_OP_ADD);
	c = &f->g.nodes[ir_arg(&f->g, (ir_id)(add - f->g.nodes), 1)];
	ck_assert_float_eq(const_f32(x.m, c, 0), 7);
	fx_fini(&x);
}
END_TEST

/* The constant operand 1 of output i of f. */
static const ir_node *output_const(const ir_func *f, uint32_t i)
{
	return &f->g.nodes[ir_arg(&f->g, f->outputs[i], 1)];
}

/* Calls on numbers use the op's scalar function (ir/ir_scalar.h), as the
 * interpreter does: a cast out of the int32 range gives INT32_MIN (it
 * was undefined), integers stay integers through abs, relu, maximum. */
START_TEST(test_calls_on_numbers_fold_as_the_interpreter_computes)
{
	fx x;
	fx_ok(&x, "model m\n"
		  "const BIG = cast(1e300, i32), A = abs(-5), M = maximum(2, 7)\n"
		  "export def f(x: i32[3], y: f32[3])\n"
		  "  return x + BIG, x + A, x + M, x + relu(-3), "
		  "y + cast(-2.7, i32), y + erf(0.5), y + gelu(1.0), "
		  "y + gelu(1.0, approximate = \"tanh\")\n");
	ir_func *f = ir_module_find_func(x.m, "f");
	static const int32_t ints[4] = {INT32_MIN, 5, 7, 0};
	for (uint32_t i = 0; i < 4; i++) {
		const ir_node *c = output_const(f, i);
		ck_assert_int_eq(c->type.dtype, IR_I32);
		ck_assert_int_eq(((const int32_t *)x.m
					  ->consts[c->attr.const_index]
					  .data)[0],
				 ints[i]);
	}
	ck_assert_float_eq(const_f32(x.m, output_const(f, 4), 0), -2);
	/* erf(0.5); 0.5 (1 + erf(1/sqrt 2)) and the tanh form, by mpmath. */
	ck_assert_float_eq_tol(const_f32(x.m, output_const(f, 5), 0),
			       0.520499877813047, 1e-7);
	ck_assert_float_eq_tol(const_f32(x.m, output_const(f, 6), 0),
			       0.841344746068543, 1e-7);
	ck_assert_float_eq_tol(const_f32(x.m, output_const(f, 7), 0),
			       0.841191990608277, 1e-7);
	fx_fini(&x);
}
END_TEST

START_TEST(test_gelu_is_built_from_erf_or_tanh)
{
	fx x;
	fx_ok(&x, "model m\n"
		  "export def f(x: f32[3])\n"
		  "  return gelu(x), gelu(x, approximate = \"none\"), "
		  "gelu(x, approximate = \"tanh\")\n");
	ir_func *f = ir_module_find_func(x.m, "f");
	ck_assert_int_eq(count_ops(f, IR_OP_ERF), 2);
	ck_assert_int_eq(count_ops(f, IR_OP_TANH), 1);
	ck_assert_int_eq(output_node(f, 0)->op, IR_OP_MUL);
	fx_fini(&x);
}
END_TEST

START_TEST(test_gelu_rejects_an_unknown_approximation)
{
	fx x;
	fx_fails_with(&x,
		      "model m\n"
		      "export def f(x: f32[3])\n"
		      "  return gelu(x, approximate = \"fast\")\n",
		      "t.g:3:32: error: gelu: approximate is \"fast\"; expected "
		      "\"none\" or \"tanh\"");
	fx_fini(&x);
}
END_TEST

START_TEST(test_a_transposed_matmul_operand_becomes_a_flag)
{
	fx x;
	fx_ok(&x, "model m\n"
		  "export def f(a: f32[2, 3, 4], b: f32[2, 5, 4])\n"
		  "  return a @ b.T, matmul(b.T, b), a.T\n");
	ir_func *f = ir_module_find_func(x.m, "f");
	const ir_node *m0 = output_node(f, 0), *m1 = output_node(f, 1);
	ck_assert_int_eq(m0->op, IR_OP_MATMUL);
	ck_assert(!m0->attr.matmul.ta && m0->attr.matmul.tb);
	ck_assert(m1->attr.matmul.ta && !m1->attr.matmul.tb);
	ck_assert_int_eq(m1->type.dims[1].coef, 4);
	const ir_node *p = output_node(f, 2);
	ck_assert_int_eq(p->op, IR_OP_PERMUTE);
	ck_assert_int_eq(p->attr.permute.perm[0], 0);
	ck_assert_int_eq(p->attr.permute.perm[1], 2);
	ck_assert_int_eq(p->attr.permute.perm[2], 1);
	ck_assert_int_eq(count_ops(f, IR_OP_PERMUTE), 1);
	fx_fini(&x);
}
END_TEST

START_TEST(test_indexing_slices_and_drops_integer_indexed_axes)
{
	fx x;
	fx_ok(&x, "model m\n"
		  "export def f(x: f32[4, 6, 2])\n"
		  "  return x[-1, 1:3], x[:, :, 0]\n");
	ir_func *f = ir_module_find_func(x.m, "f");
	const ir_node *r = output_node(f, 0);
	ck_assert_int_eq(r->op, IR_OP_RESHAPE);
	ck_assert_uint_eq(r->type.rank, 2);
	ck_assert_int_eq(r->type.dims[0].coef, 2);
	ck_assert_int_eq(r->type.dims[1].coef, 2);
	const ir_node *s = first_op(f, IR_OP_SLICE);
	ck_assert_int_eq(s->attr.slice.axis, 0);
	ck_assert_int_eq(s->attr.slice.start, 3);
	ck_assert_int_eq(s->attr.slice.end, 4);
	ck_assert_int_eq(s[1].attr.slice.axis, 1);
	ck_assert_int_eq(s[1].attr.slice.start, 1);
	ck_assert_int_eq(s[1].attr.slice.end, 3);
	const ir_node *r2 = output_node(f, 1);
	ck_assert_uint_eq(r2->type.rank, 2);
	ck_assert_int_eq(r2->type.dims[1].coef, 6);
	ck_assert_int_eq(count_ops(f, IR_OP_SLICE), 3);
	fx_fini(&x);
}
END_TEST

START_TEST(test_layout_sugar_lowers_to_primitives)
{
	fx x;
	fx_ok(&x,
	      "model m\ndim B\n"
	      "export def f(x: f32[B, 6], v: i32[B])\n"
	      "  a = sum(x, axis = [0, -1], keepdim = true)\n"
	      "  b = reshape(x, [-1, 2, 3])\n"
	      "  c = repeat(v, [2, 3])\n"
	      "  d = stack([x, x], 1)\n"
	      "  e = transpose(unsqueeze(x, 0), 0, 2)\n"
	      "  return a, b, c, d, e, cast(v, f32), where(unsqueeze(v, -1) > 2, x, 0.5)\n");
	ir_func *f = ir_module_find_func(x.m, "f");
	const ir_node *a = output_node(f, 0);
	ck_assert_int_eq(a->op, IR_OP_SUM);
	ck_assert_uint_eq(a->attr.reduce.axes, 3);
	ck_assert(a->attr.reduce.keepdim);
	const ir_node *b = output_node(f, 1);
	ck_assert_int_eq(b->type.dims[0].coef, 1);
	ck_assert_int_eq(b->type.dims[0].sym, 0);
	const ir_node *c = output_node(f, 2);
	ck_assert_int_eq(c->op, IR_OP_REPEAT);
	ck_assert_uint_eq(c->type.rank, 2);
	ck_assert_int_eq(c->type.dims[0].coef, 2);
	ck_assert_int_eq(c->type.dims[1].coef, 3);
	const ir_node *d = output_node(f, 3);
	ck_assert_int_eq(d->op, IR_OP_CONCAT);
	ck_assert_int_eq(d->attr.axis, 1);
	ck_assert_int_eq(d->type.dims[1].coef, 2);
	const ir_node *e = output_node(f, 4);
	ck_assert_int_eq(e->op, IR_OP_PERMUTE);
	ck_assert_int_eq(e->type.dims[0].coef, 6);
	ck_assert_int_eq(output_node(f, 5)->op, IR_OP_CAST);
	ck_assert_int_eq(output_node(f, 5)->type.dtype, IR_F32);
	ck_assert_int_eq(output_node(f, 6)->op, IR_OP_SELECT);
	fx_fini(&x);
}
END_TEST

START_TEST(test_ops_carry_their_attributes)
{
	fx x;
	fx_ok(&x,
	      "model m\n"
	      "export def f(x: f32[2, 3, 4], v: i32[2])\n"
	      "  a = dropout(x, 0.25)\n"
	      "  b = dropout(a, 0.5)\n"
	      "  c = masked_softmax(b, v)\n"
	      "  g = ones([4])\n"
	      "  return layer_norm(c, g, g * 0, eps = 0.001), repeat_interleave(v, 3)\n");
	ir_func *f = ir_module_find_func(x.m, "f");
	const ir_node *d = first_op(f, IR_OP_DROPOUT);
	ck_assert_double_eq(d->attr.dropout.p, 0.25);
	ck_assert_uint_eq(d->attr.dropout.stream, 0);
	ck_assert_uint_eq(d[1].attr.dropout.stream, 1);
	ck_assert_uint_eq(x.m->n_dropout_streams, 2);
	ck_assert_double_eq(first_op(f, IR_OP_MASKED_SOFTMAX)->attr.fill, -1e6);
	ck_assert_double_eq(output_node(f, 0)->attr.eps, 0.001);
	const ir_node *ri = output_node(f, 1);
	ck_assert_int_eq(ri->attr.interleave.n, 3);
	ck_assert_int_eq(ri->type.dims[0].coef, 6);
	fx_fini(&x);
}
END_TEST

START_TEST(test_lists_of_numbers_become_constants_of_their_dtype)
{
	fx x;
	fx_ok(&x,
	      "model m\n"
	      "export def f(x: f32[2, 2])\n"
	      "  return x + [[1, 2], [3, 4.5]], masked_softmax(reshape(x, [1, 2, 2]), [2])\n");
	ir_func *f = ir_module_find_func(x.m, "f");
	const ir_node *add = output_node(f, 0);
	const ir_node *c = &f->g.nodes[ir_arg(&f->g, f->outputs[0], 1)];
	ck_assert_int_eq(add->op, IR_OP_ADD);
	ck_assert_int_eq(c->type.dtype, IR_F32);
	ck_assert_float_eq(const_f32(x.m, c, 3), 4.5f);
	const ir_node *ms = output_node(f, 1);
	const ir_node *v = &f->g.nodes[ir_arg(&f->g, f->outputs[1], 1)];
	ck_assert_int_eq(ms->op, IR_OP_MASKED_SOFTMAX);
	ck_assert_int_eq(v->type.dtype, IR_I32);
	fx_fini(&x);
}
END_TEST

START_TEST(test_constructors_make_constants_and_random_ones_are_reproducible)
{
	const char *src = "model m\n"
			  "export def f()\n"
			  "  return arange(2, 8, 2), full([2], 1.5), normal([3]), "
			  "normal([3]), uniform([3], -1, 1, seed = 9)\n";
	fx x, y;
	fx_ok(&x, src);
	fx_ok(&y, src);
	ir_func *f = ir_module_find_func(x.m, "f");
	const ir_node *ar = output_node(f, 0);
	ck_assert_int_eq(ar->type.dtype, IR_I32);
	const int32_t *ad = x.m->consts[ar->attr.const_index].data;
	ck_assert_int_eq(ad[0], 2);
	ck_assert_int_eq(ad[2], 6);
	ck_assert_float_eq(const_f32(x.m, output_node(f, 1), 1), 1.5f);
	const ir_node *n0 = output_node(f, 2), *n1 = output_node(f, 3);
	ck_assert_float_ne(const_f32(x.m, n0, 0), const_f32(x.m, n1, 0));
	ir_func *g = ir_module_find_func(y.m, "f");
	for (int i = 0; i < 3; i++) {
		ck_assert_float_eq(const_f32(x.m, n1, i),
				   const_f32(y.m, output_node(g, 3), i));
		float u = const_f32(x.m, output_node(f, 4), i);
		ck_assert(u >= -1 && u < 1);
	}
	fx_fini(&x);
	fx_fini(&y);
}
END_TEST

START_TEST(test_example_arguments_become_checked_constants)
{
	fx x;
	fx_ok(&x,
	      "model m\ndim B, K\n"
	      "export def f(k: f32[B, K, 4], v: i32[B])\n"
	      "  return masked_softmax(k, v)\n"
	      "example f(repeat(reshape(arange(8.0), [1, 2, 4]), [3, 1, 1]) * 2 - 1, "
	      "[2, 6, 1])\n");
	ir_func *f = ir_module_find_func(x.m, "f");
	ck_assert_ptr_nonnull(f->example);
	const ir_const *k = &x.m->consts[f->example[0]];
	ck_assert_uint_eq(k->type.rank, 3);
	ck_assert_int_eq(k->type.dims[0].coef, 3);
	const float *kd = k->data;
	ck_assert_float_eq(kd[0], -1);
	ck_assert_float_eq(kd[5], 9);
	ck_assert_float_eq(kd[8 + 7], 13);
	const ir_const *v = &x.m->consts[f->example[1]];
	ck_assert_int_eq(v->type.dtype, IR_I32);
	ck_assert_int_eq(((const int32_t *)v->data)[1], 6);
	/* Only the two example constants remain: the scratch ones are gone. */
	ck_assert_uint_eq(x.m->n_consts, 2);
	fx_fini(&x);
}
END_TEST

START_TEST(test_example_shape_mismatch_is_reported_at_the_argument)
{
	fx x;
	fx_fails_with(&x,
		      "model m\ndim B\n"
		      "export def f(a: f32[B, 2], b: f32[B])\n"
		      "  return a\n"
		      "example f(ones([3, 2]), ones([4]))\n",
		      "t.g:5:25: error: example argument 'b' of 'f' is f32[4], "
		      "expected f32[B]");
	fx_fini(&x);
}
END_TEST

/* An example's arithmetic is the interpreter's: a float out of the int32
 * range casts to INT32_MIN (it was undefined), -2.5 truncates to -2. */
START_TEST(test_example_casts_floats_to_int_as_the_interpreter)
{
	fx x;
	fx_ok(&x, "model m\n"
		  "export def f(a: i32[3])\n"
		  "  return a\n"
		  "example f(cast([1e10, -2.5, 7.0] * ones([3]), i32))\n");
	ir_func *f = ir_module_find_func(x.m, "f");
	ck_assert_ptr_nonnull(f->example);
	const int32_t *v = x.m->consts[f->example[0]].data;
	ck_assert_int_eq(v[0], INT32_MIN);
	ck_assert_int_eq(v[1], -2);
	ck_assert_int_eq(v[2], 7);
	fx_fini(&x);
}
END_TEST

START_TEST(test_example_rejects_ops_it_cannot_evaluate)
{
	fx x;
	fx_fails_with(&x,
		      "model m\n"
		      "export def f(a: f32[2])\n"
		      "  return a\n"
		      "example f(exp(ones([2])))\n",
		      "t.g:4:11: error: an example input must be computed at "
		      "compile time: 'exp' is not allowed here");
	fx_fini(&x);
}
END_TEST

START_TEST(test_train_block_becomes_settings)
{
	fx x;
	fx_ok(&x, "model m\nconst T = 10\n"
		  "export def loss(x: f32[2]) = sum(x)\n"
		  "train\n"
		  "  entry = loss\n"
		  "  data = nmt(examples = 600, steps = T), batch = 64\n"
		  "  optimizer = adam(lr = 0.005)\n"
		  "  path = \"fra.txt\"\n");
	ck_assert_uint_eq(x.m->n_train, 5);
	const ir_setting *s = ir_module_find_setting(x.m, "entry");
	ck_assert_int_eq(s->value.kind, IR_VAL_STR);
	ck_assert_str_eq(s->value.str, "loss");
	s = ir_module_find_setting(x.m, "data");
	ck_assert_int_eq(s->value.kind, IR_VAL_CALL);
	ck_assert_str_eq(s->value.str, "nmt");
	ck_assert_uint_eq(s->value.n_args, 2);
	ck_assert_str_eq(s->value.args[1].key, "steps");
	ck_assert_double_eq(s->value.args[1].value.num, 10);
	ck_assert_double_eq(ir_module_find_setting(x.m, "batch")->value.num, 64);
	ck_assert_str_eq(ir_module_find_setting(x.m, "path")->value.str,
			 "fra.txt");
	fx_fini(&x);
}
END_TEST

START_TEST(test_if_else_and_early_return_choose_at_compile_time)
{
	fx x;
	fx_ok(&x,
	      "model m\n"
	      "def pick(x, k)\n"
	      "  if k == 0\n"
	      "    return exp(x)\n"
	      "  else if k == 1 and not false\n"
	      "    return tanh(x)\n"
	      "  else\n"
	      "    y = x\n"
	      "  return relu(y)\n"
	      "export def f(x: f32[2, 3])\n"
	      "  return pick(x, 0), pick(x, 1), pick(x, 2), linear(x, 4, bias = false)\n");
	ir_func *f = ir_module_find_func(x.m, "f");
	ck_assert_int_eq(output_node(f, 0)->op, IR_OP_EXP);
	ck_assert_int_eq(output_node(f, 1)->op, IR_OP_TANH);
	ck_assert_int_eq(output_node(f, 2)->op, IR_OP_RELU);
	ck_assert_int_eq(output_node(f, 3)->op, IR_OP_MATMUL);
	ck_assert_uint_eq(x.m->n_params, 1);
	ck_assert_str_eq(param_name(&x, 0), "linear.W");
	fx_fini(&x);
}
END_TEST

START_TEST(test_prelude_gru_cell_follows_pytorch_shapes_and_inits)
{
	fx x;
	fx_ok(&x, "model m\n"
		  "export def f(xs: f32[3, 2, 5], h: f32[2, 4])\n"
		  "  return gru(xs, h, 4)\n");
	ck_assert_uint_eq(x.m->n_params, 4);
	ck_assert_str_eq(param_name(&x, 0), "gru.gru_cell.W_x");
	ck_assert_int_eq(x.m->params[0].type.dims[0].coef, 5);
	ck_assert_int_eq(x.m->params[0].type.dims[1].coef, 12);
	ck_assert_str_eq(param_name(&x, 2), "gru.gru_cell.b_x");
	ck_assert_int_eq(x.m->params[2].init, IR_INIT_UNIFORM);
	ck_assert_double_eq_tol(x.m->params[2].a, -0.5, 1e-12);
	ck_assert_double_eq_tol(x.m->params[3].b, 0.5, 1e-12);
	ir_func *f = ir_module_find_func(x.m, "f");
	ck_assert_uint_eq(f->n_outputs, 2);
	ck_assert_int_eq(output_node(f, 0)->type.dims[0].coef, 3);
	ck_assert_int_eq(output_node(f, 1)->type.dims[1].coef, 4);
	ck_assert_int_eq(count_ops(f, IR_OP_SIGMOID), 6);
	fx_fini(&x);
}
END_TEST

START_TEST(test_prelude_splits_and_merges_heads_as_layout)
{
	fx x;
	fx_ok(&x,
	      "model m\ndim B, S\n"
	      "export def f(x: f32[B, S, 8])\n"
	      "  return split_heads(x, 2), merge_heads(split_heads(x, 2), 2)\n");
	ir_func *f = ir_module_find_func(x.m, "f");
	const ir_type *t = &output_node(f, 0)->type;
	ck_assert_int_eq(t->dims[0].coef, 2);
	ck_assert_int_eq(t->dims[0].sym, 0);
	ck_assert_int_eq(t->dims[2].coef, 4);
	ck_assert(ir_type_eq(&output_node(f, 1)->type,
			     &f->g.nodes[f->inputs[0]].type));
	fx_fini(&x);
}
END_TEST

/* ---- errors ----------------------------------------------------------------------------- */

START_TEST(test_unknown_names_are_reported_where_used)
{
	fx x;
	fx_fails_with(&x, "model m\nexport def f(x: f32[2])\n  return x + foo\n",
		      "t.g:3:14: error: unknown name 'foo'");
	ck_assert_int_eq(x.ctx.n_errors, 1);
	fx_fini(&x);
}
END_TEST

START_TEST(test_wrong_argument_counts_and_keywords_are_reported)
{
	fx x;
	fx_fails_with(&x,
		      "model m\n"
		      "def attention(q, k, v) = q\n"
		      "export def f(x: f32[2])\n"
		      "  a = attention(x, x)\n"
		      "  b = linear(x, 2, bais = false)\n"
		      "  return sum(x, axes = 0)\n",
		      "t.g:4:7: error: 'attention' takes 3 arguments, got 2");
	ck_assert_ptr_nonnull(strstr(x.diag, "t.g:5:20: error: 'linear' has no "
					     "argument named 'bais'"));
	ck_assert_ptr_nonnull(strstr(x.diag, "t.g:6:17: error: 'sum' has no "
					     "argument named 'axes'"));
	fx_fini(&x);
}
END_TEST

START_TEST(test_duplicate_definitions_point_at_the_first)
{
	fx x;
	fx_fails_with(&x,
		      "model m\ndef f(x) = x\nconst f = 2\ndef norm(x) = x\n",
		      "t.g:3:7: error: duplicate definition of 'f'");
	ck_assert_ptr_nonnull(strstr(x.diag, "t.g:2:5: note: 'f' is first defined "
					     "here"));
	ck_assert_ptr_nonnull(strstr(x.diag, "t.g:4:5: error: 'norm' is already "
					     "defined in the prelude"));
	fx_fini(&x);
}
END_TEST

START_TEST(test_recursion_is_reported_with_the_call_chain)
{
	fx x;
	fx_fails_with(&x,
		      "model m\n"
		      "def f(x) = g(x)\n"
		      "def g(x) = f(x)\n"
		      "export def h(x: f32[2]) = f(x)\n",
		      "t.g:3:12: error: recursive call of 'f'");
	ck_assert_ptr_nonnull(strstr(x.diag, "call chain: f -> g -> f"));
	fx_fini(&x);
}
END_TEST

START_TEST(test_numbers_and_tensors_are_not_confused)
{
	fx x;
	fx_fails_with(&x,
		      "model m\n"
		      "export def f(x: f32[2])\n"
		      "  a = softmax(3)\n"
		      "  b = reshape(x, [2, x])\n"
		      "  return linear\n",
		      "t.g:3:15: error: expected a tensor, got a number");
	ck_assert_ptr_nonnull(strstr(x.diag,
				     "t.g:4:18: error: expected a dimension "
				     "(an integer or a dim), got a tensor"));
	ck_assert_ptr_nonnull(strstr(x.diag,
				     "t.g:5:10: error: expected a tensor, got "
				     "the function 'linear'"));
	fx_fini(&x);
}
END_TEST

START_TEST(test_shape_errors_come_from_the_op_rules_at_the_operator)
{
	fx x;
	fx_fails_with(&x,
		      "model m\n"
		      "export def f(a: f32[2, 3], b: f32[4, 5], c: i32[2, 3])\n"
		      "  return a @ b, a + b\n",
		      "t.g:3:12: error: matmul: inner dimensions differ");
	ck_assert_ptr_nonnull(strstr(x.diag,
				     "t.g:3:19: error: add: cannot broadcast "
				     "[2, 3] with [4, 5]"));
	ck_assert_int_eq(x.ctx.n_errors, 2);
	fx_fini(&x);
}
END_TEST

START_TEST(test_index_and_integer_errors_are_reported)
{
	fx x;
	fx_fails_with(&x,
		      "model m\n"
		      "export def f(x: f32[3, 4])\n"
		      "  a = x[3]\n"
		      "  b = reshape(x, [2.5, 4])\n"
		      "  c = [1, 2][5]\n"
		      "  return x\n",
		      "t.g:3:9: error: index 3 out of range for axis 0 of [3, 4]");
	ck_assert_ptr_nonnull(strstr(x.diag,
				     "t.g:4:18: error: expected an integer "
				     "dimension, got 2.5"));
	ck_assert_ptr_nonnull(strstr(x.diag,
				     "t.g:5:14: error: index 5 out of range "
				     "for a list of length 2"));
	fx_fini(&x);
}
END_TEST

START_TEST(test_using_the_value_of_a_def_without_return_is_an_error)
{
	fx x;
	fx_fails_with(&x,
		      "model m\n"
		      "def nothing(x)\n"
		      "  y = x\n"
		      "export def f(x: f32[2])\n"
		      "  nothing(x)\n"
		      "  return nothing(x)\n",
		      "t.g:6:10: error: 'nothing' does not return a value");
	ck_assert_int_eq(x.ctx.n_errors, 1);
	fx_fini(&x);
}
END_TEST

START_TEST(test_a_parameter_reused_with_another_shape_is_an_error)
{
	fx x;
	fx_fails_with(&x,
		      "model m\n"
		      "def cell(x)\n"
		      "  param W : [size(x, -1), 2]\n"
		      "  return x @ W\n"
		      "export def f(x: f32[1, 3])\n"
		      "  for t in 0..2\n"
		      "    x = cell(x)\n"
		      "  return x\n",
		      "t.g:3:9: error: parameter 'cell.W' has shape [2, 2] here but "
		      "[3, 2] where it was first created");
	fx_fini(&x);
}
END_TEST

START_TEST(test_bad_parameter_initializers_are_reported)
{
	fx x;
	fx_fails_with(
		&x,
		"model m\n"
		"def g(x)\n"
		"  param a : [2] = xavier_uniform\n"
		"  param b : [2] = gaussian\n"
		"  param c : [2] = uniform(1, 0)\n"
		"  return x\n"
		"export def f(x: f32[2]) = g(x)\n",
		"t.g:3:19: error: xavier_uniform needs a parameter of rank >= 2");
	ck_assert_ptr_nonnull(strstr(x.diag,
				     "t.g:4:19: error: unknown initializer "
				     "'gaussian'"));
	ck_assert_ptr_nonnull(strstr(x.diag,
				     "t.g:5:19: error: uniform: low 1 is above "
				     "high 0"));
	fx_fini(&x);
}
END_TEST

START_TEST(test_errors_inside_the_prelude_are_reported_at_the_users_call)
{
	fx x;
	fx_fails_with(&x,
		      "model m\n"
		      "export def f(x: f32[2, 3])\n"
		      "  return norm(x, eps = -1)\n",
		      "t.g:3:10: error: layer_norm: eps must be >= 0");
	ck_assert_ptr_eq(strstr(x.diag, "t.g:3:10: error:"), x.diag);
	ck_assert_ptr_nonnull(strstr(x.diag,
				     "prelude.g:23:37: note: here, in 'norm' "
				     "(defined in the prelude)"));
	fx_fini(&x);
}
END_TEST

START_TEST(test_runaway_elaboration_is_stopped_with_a_message)
{
	fx x;
	fx_fails_with(&x,
		      "model m\n"
		      "export def f(x: f32[2])\n"
		      "  for t in 0..100000000\n"
		      "    y = t\n"
		      "  return x\n",
		      "elaboration takes more than");
	fx_fini(&x);
	fx_fails_with(&x,
		      "model m\n"
		      "export def f(x: f32[2])\n"
		      "  repeat 2000000\n"
		      "    x = x + 1\n"
		      "  return x\n",
		      "is too large: more than 1000000 nodes");
	fx_fini(&x);
	/* A new parameter per iteration: stopped by the node limit, at half
	 * a million parameters, not after 10^9 iterations. */
	fx_fails_with(&x,
		      "model m\n"
		      "def g(x)\n"
		      "  param w : [2] = zeros\n"
		      "  return x * w\n"
		      "export def f(x: f32[2])\n"
		      "  repeat 1000000000\n"
		      "    x = g(x)\n"
		      "  return x\n",
		      "is too large: more than 1000000 nodes");
	fx_fini(&x);
}
END_TEST

START_TEST(test_an_export_needs_typed_arguments_and_a_return)
{
	fx x;
	fx_fails_with(&x, "model m\nexport def f(x)\n  y = 1\n",
		      "t.g:2:14: error: argument 'x' of exported function 'f' "
		      "needs a type");
	ck_assert_ptr_nonnull(strstr(x.diag,
				     "t.g:2:12: error: exported function 'f' "
				     "does not return anything"));
	fx_fini(&x);
}
END_TEST

/* head, then unit n times, then tail: a malloc'd string. */
static char *repeated(const char *head, const char *unit, size_t n,
		      const char *tail)
{
	size_t h = strlen(head), u = strlen(unit), t = strlen(tail);
	char *s = malloc(h + u * n + t + 1);
	ck_assert_ptr_nonnull(s);
	memcpy(s, head, h);
	for (size_t i = 0; i < n; i++)
		memcpy(s + h + i * u, unit, u);
	memcpy(s + h + u * n, tail, t + 1);
	return s;
}

START_TEST(test_a_long_flat_chain_of_operators_compiles)
{
	fx x;
	char *src = repeated("model m\nexport def f(x: f32[2]) = x", " + x",
			     100000, "\n");
	fx_ok(&x, src);
	const ir_func *f = ir_module_find_func(x.m, "f");
	ck_assert_int_eq(count_ops(f, IR_OP_ADD), 100000);
	fx_fini(&x);
	free(src);
	/* Call sites along a chain are numbered in evaluation order. */
	fx_ok(&x, "model m\nexport def f(x: f32[2, 4]) = "
		  "linear(x, 4) - linear(x, 4) * 2 + linear(x, 4)\n");
	ck_assert_str_eq(x.m->params[0].name, "linear_0.W");
	ck_assert_int_eq(x.m->n_params, 6);
	fx_fini(&x);
}
END_TEST

START_TEST(test_deep_nesting_is_reported_not_a_crash)
{
	static const char *const units[] = {"[0]", ".T", " and x", " or x"};
	for (size_t i = 0; i < sizeof units / sizeof *units; i++) {
		fx x;
		char *src = repeated("model m\nexport def f(x: f32[2, 2]) = x",
				     units[i], 100000, "\n");
		fx_fails_with(&x, src, "t.g:2:");
		ck_assert_msg(strstr(x.diag, "error: expression nested too deeply "
					     "(more than 1000 levels)"),
			      "%s", x.diag);
		ck_assert_int_eq(x.ctx.n_errors, 1);
		fx_fini(&x);
		free(src);
	}
}
END_TEST

START_TEST(test_max_errors_limits_the_reports)
{
	fx x;
	const char *src = "model m\nconst a = b\nconst c = d\nconst e = f\n";
	fx_init(&x, src, strlen(src));
	x.ctx.max_errors = 2;
	x.m = fe_compile(&x.ctx, x.file);
	fflush(x.ctx.diag_out);
	ck_assert_ptr_null(x.m);
	ck_assert_ptr_nonnull(strstr(x.diag, "too many errors"));
	ck_assert_ptr_null(strstr(x.diag, "'f'"));
	fx_fini(&x);
}
END_TEST

/* ---- robustness ------------------------------------------------------------------------- */

static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Compiles len bytes; must return a module or NULL, and no module after
 * an error. */
static void compile_bytes(const char *buf, size_t len)
{
	fx x;
	fx_init(&x, buf, len);
	x.ctx.max_errors = 20;
	x.m = fe_compile(&x.ctx, x.file);
	ck_assert(x.m == NULL || x.ctx.n_errors == 0);
	fx_fini(&x);
}

START_TEST(test_random_bytes_never_crash_or_hang)
{
	uint64_t s = 0x9e3779b97f4a7c15ull;
	char buf[512];
	static const char alphabet[] = "model def export return ()[]:,=+-*/@.T\n  "
				       "\t#\"x1 0.5 repeat for in if else param";
	for (int iter = 0; iter < 3000; iter++) {
		size_t len = next_rand(&s) % sizeof buf;
		bool ascii = iter % 2;
		for (size_t i = 0; i < len; i++) {
			uint64_t r = next_rand(&s);
			buf[i] = ascii ? alphabet[r % (sizeof alphabet - 1)]
				       : (char)r;
		}
		compile_bytes(buf, len);
	}
}
END_TEST

START_TEST(test_mutated_models_never_crash_or_hang)
{
	static const char base[] =
		"model m\ndim B\nconst D = 4, H = 2\n"
		"def att(q, k, valid)\n"
		"  param W : [D, D] = xavier_uniform\n"
		"  s = split_heads(q @ W, H) @ split_heads(k, H).T / sqrt(D / H)\n"
		"  return merge_heads(masked_softmax(s, repeat_interleave(valid, H)) @ "
		"split_heads(k, H), H)\n"
		"export def f(q: f32[B, 3, D], k: f32[B, 5, D], v: i32[B])\n"
		"  x = q\n"
		"  repeat 2\n"
		"    x = norm(x + att(x, k, v))\n"
		"  for t in 0..2\n"
		"    x = x + x[:, t:t+1]\n"
		"  return linear(x, 3), sum(x, axis = [0, 1])\n"
		"example f(normal([2, 3, 4]), ones([2, 5, 4]), [2, 5])\n"
		"train\n  epochs = 2\n  optimizer = adam(lr = 0.1)\n";
	uint64_t s = 12345;
	char buf[sizeof base + 64];
	for (int iter = 0; iter < 1500; iter++) {
		size_t len = sizeof base - 1;
		memcpy(buf, base, len);
		int edits = 1 + (int)(next_rand(&s) % 4);
		for (int k = 0; k < edits; k++) {
			size_t at = next_rand(&s) % len;
			char c = "()[]:,=.-+\n x0#\"T\t"[next_rand(&s) % 18];
			switch (next_rand(&s) % 3) {
			case 0: /* replace */
				buf[at] = c;
				break;
			case 1: /* delete */
				memmove(buf + at, buf + at + 1, len - at - 1);
				len--;
				break;
			default: /* insert */
				if (len + 1 < sizeof buf) {
					memmove(buf + at + 1, buf + at,
						len - at);
					buf[at] = c;
					len++;
				}
			}
		}
		compile_bytes(buf, len);
	}
}
END_TEST

START_TEST(test_deep_nesting_is_an_error_not_a_stack_overflow)
{
	size_t n = 100000;
	char *src = malloc(n * 2 + 64);
	size_t len = (size_t)sprintf(src, "model m\nconst a = ");
	for (size_t i = 0; i < n; i++)
		src[len++] = i % 2 ? '(' : '-';
	src[len++] = '\n';
	fx x;
	fx_init(&x, src, len);
	x.m = fe_compile(&x.ctx, x.file);
	fflush(x.ctx.diag_out);
	ck_assert_ptr_null(x.m);
	ck_assert_ptr_nonnull(strstr(x.diag, "expression nested too deeply"));
	fx_fini(&x);
	free(src);
}
END_TEST

/* An allocator that fails from the n-th allocation on. */
typedef struct failing {
	long n, count;
} failing;

static void *failing_alloc(void *ud, void *ptr, size_t size)
{
	failing *fa = ud;
	if (size == 0) {
		free(ptr);
		return NULL;
	}
	if (fa->count++ >= fa->n)
		return NULL;
	return realloc(ptr, size);
}

START_TEST(test_failing_allocations_give_null_without_leaks)
{
	static const char src[] =
		"model m\ndim B\n"
		"def block(x) = norm(x + linear(relu(linear(x, 8)), 4))\n"
		"export def f(x: f32[B, 3, 4], v: i32[B])\n"
		"  repeat 2\n"
		"    x = block(x)\n"
		"  return masked_softmax(x @ x.T, v), x[:, 0]\n"
		"example f(normal([2, 3, 4]), [1, 2])\n"
		"train\n  optimizer = adam(lr = 0.1)\n";
	failing fa = {LONG_MAX, 0};
	fx x;
	fx_init(&x, src, strlen(src));
	x.ctx.alloc = failing_alloc;
	x.ctx.alloc_ud = &fa;
	ir_module_destroy(fe_compile(&x.ctx, x.file));
	fa.count = 0;
	x.m = fe_compile(&x.ctx, x.file);
	ck_assert_ptr_nonnull(x.m);
	long total = fa.count;
	fx_fini(&x);
	for (long n = 0; n < total; n++) {
		/* The prelude is registered first: ir_ctx_add_source is
		 * not under test here. */
		fx_init(&x, src, strlen(src));
		ir_module_destroy(fe_compile(&x.ctx, x.file));
		fa = (failing){n, 0};
		x.ctx.alloc = failing_alloc;
		x.ctx.alloc_ud = &fa;
		x.m = fe_compile(&x.ctx, x.file);
		ck_assert_msg(x.m == NULL,
			      "allocation %ld failed, yet a module", n);
		ck_assert_msg(x.ctx.n_errors > 0,
			      "allocation %ld failed silently", n);
		fx_fini(&x);
	}
}
END_TEST

/* ---- suite ------------------------------------------------------------------------------ */

static Suite *frontend_suite(void)
{
	Suite *s = suite_create("frontend");
	TCase *lex_tc = tcase_create("lexer");
	tcase_add_test(lex_tc, test_lex_brackets_a_block_with_indent_and_dedent);
	tcase_add_test(lex_tc, test_lex_closes_every_open_block_at_end_of_file);
	tcase_add_test(lex_tc,
		       test_lex_ignores_line_breaks_inside_brackets_and_blank_lines);
	tcase_add_test(lex_tc, test_lex_tells_integers_from_reals_and_ranges);
	tcase_add_test(lex_tc,
		       test_lex_reads_operators_keywords_and_string_escapes);
	tcase_add_test(lex_tc, test_lex_gives_each_token_its_line_and_column);
	tcase_add_test(lex_tc, test_lex_reports_invalid_characters_and_goes_on);
	tcase_add_test(lex_tc,
		       test_lex_reports_an_unterminated_string_at_its_start);
	tcase_add_test(lex_tc,
		       test_lex_memory_is_linear_in_the_number_of_strings);
	tcase_add_test(lex_tc,
		       test_lex_reports_a_dedent_to_a_level_never_opened);
	tcase_add_test(lex_tc, test_lex_reports_tabs_mixed_with_spaces);
	suite_add_tcase(s, lex_tc);

	TCase *parse_tc = tcase_create("parser");
	tcase_add_test(parse_tc,
		       test_parse_gives_multiplication_precedence_over_addition);
	tcase_add_test(
		parse_tc,
		test_parse_binds_power_tighter_than_minus_and_matmul_like_times);
	tcase_add_test(parse_tc, test_parse_numbers_the_call_sites_of_each_name);
	tcase_add_test(parse_tc,
		       test_parse_recovers_at_the_next_line_and_reports_every_error);
	tcase_add_test(parse_tc, test_parse_requires_the_model_line);
	suite_add_tcase(s, parse_tc);

	TCase *elab_tc = tcase_create("elaboration");
	tcase_add_test(elab_tc,
		       test_export_gets_typed_inputs_named_outputs_and_symbols);
	tcase_add_test(elab_tc,
		       test_two_call_sites_of_a_layer_get_two_parameters);
	tcase_add_test(elab_tc,
		       test_repeat_gives_each_iteration_an_index_segment);
	tcase_add_test(elab_tc,
		       test_a_for_loop_shares_the_parameters_of_its_call_site);
	tcase_add_test(elab_tc,
		       test_exported_functions_share_parameters_by_name);
	tcase_add_test(elab_tc,
		       test_number_arithmetic_is_folded_at_compile_time);
	tcase_add_test(elab_tc,
		       test_calls_on_numbers_fold_as_the_interpreter_computes);
	tcase_add_test(elab_tc, test_gelu_is_built_from_erf_or_tanh);
	tcase_add_test(elab_tc, test_gelu_rejects_an_unknown_approximation);
	tcase_add_test(elab_tc,
		       test_example_casts_floats_to_int_as_the_interpreter);
	tcase_add_test(elab_tc, test_a_transposed_matmul_operand_becomes_a_flag);
	tcase_add_test(elab_tc,
		       test_indexing_slices_and_drops_integer_indexed_axes);
	tcase_add_test(elab_tc, test_layout_sugar_lowers_to_primitives);
	tcase_add_test(elab_tc, test_ops_carry_their_attributes);
	tcase_add_test(elab_tc,
		       test_lists_of_numbers_become_constants_of_their_dtype);
	tcase_add_test(
		elab_tc,
		test_constructors_make_constants_and_random_ones_are_reproducible);
	tcase_add_test(elab_tc, test_example_arguments_become_checked_constants);
	tcase_add_test(elab_tc,
		       test_example_shape_mismatch_is_reported_at_the_argument);
	tcase_add_test(elab_tc, test_example_rejects_ops_it_cannot_evaluate);
	tcase_add_test(elab_tc, test_train_block_becomes_settings);
	tcase_add_test(elab_tc,
		       test_if_else_and_early_return_choose_at_compile_time);
	tcase_add_test(elab_tc,
		       test_prelude_gru_cell_follows_pytorch_shapes_and_inits);
	tcase_add_test(elab_tc, test_prelude_splits_and_merges_heads_as_layout);
	suite_add_tcase(s, elab_tc);

	TCase *err_tc = tcase_create("errors");
	tcase_set_timeout(err_tc, 60);
	tcase_add_test(err_tc, test_unknown_names_are_reported_where_used);
	tcase_add_test(err_tc,
		       test_wrong_argument_counts_and_keywords_are_reported);
	tcase_add_test(err_tc, test_duplicate_definitions_point_at_the_first);
	tcase_add_test(err_tc, test_recursion_is_reported_with_the_call_chain);
	tcase_add_test(err_tc, test_numbers_and_tensors_are_not_confused);
	tcase_add_test(err_tc,
		       test_shape_errors_come_from_the_op_rules_at_the_operator);
	tcase_add_test(err_tc, test_index_and_integer_errors_are_reported);
	tcase_add_test(err_tc,
		       test_using_the_value_of_a_def_without_return_is_an_error);
	tcase_add_test(err_tc,
		       test_a_parameter_reused_with_another_shape_is_an_error);
	tcase_add_test(err_tc, test_bad_parameter_initializers_are_reported);
	tcase_add_test(
		err_tc,
		test_errors_inside_the_prelude_are_reported_at_the_users_call);
	tcase_add_test(err_tc,
		       test_runaway_elaboration_is_stopped_with_a_message);
	tcase_add_test(err_tc,
		       test_an_export_needs_typed_arguments_and_a_return);
	tcase_add_test(err_tc, test_max_errors_limits_the_reports);
	tcase_add_test(err_tc, test_a_long_flat_chain_of_operators_compiles);
	tcase_add_test(err_tc, test_deep_nesting_is_reported_not_a_crash);
	suite_add_tcase(s, err_tc);

	TCase *fuzz_tc = tcase_create("robustness");
	tcase_set_timeout(fuzz_tc, 300);
	tcase_add_test(fuzz_tc, test_random_bytes_never_crash_or_hang);
	tcase_add_test(fuzz_tc, test_mutated_models_never_crash_or_hang);
	tcase_add_test(fuzz_tc,
		       test_deep_nesting_is_an_error_not_a_stack_overflow);
	tcase_add_test(fuzz_tc,
		       test_failing_allocations_give_null_without_leaks);
	suite_add_tcase(s, fuzz_tc);
	return s;
}

int main(void)
{
	return tu_run_suite(frontend_suite());
}
