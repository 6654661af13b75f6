/*
 * syntax.h - the frontend's tokens and syntax tree, shared by the lexer
 * (lex.c), the parser (parse.c) and the elaborator (elab*.c).
 *
 * The lexer turns one registered source file into an array of tokens with
 * Python-like NEWLINE, INDENT and DEDENT tokens; the parser builds a tree
 * of expressions, statements and declarations in an arena. The tree is
 * immutable once built: the elaborator walks it as many times as calls
 * and loops require.
 */
#ifndef ATTNC_FE_SYNTAX_H
#define ATTNC_FE_SYNTAX_H

#include "ir.h"

/* The deepest expression the parser accepts (see fe_expr.depth); the
 * elaborator has the same bound on its recursion. */
#define FE_MAX_EXPR_DEPTH 1000

/* ---- tokens --------------------------------------------------------------- */

typedef enum fe_tok_kind {
	FE_T_EOF,
	FE_T_NEWLINE,
	FE_T_INDENT,
	FE_T_DEDENT,
	FE_T_IDENT,
	FE_T_INT,
	FE_T_REAL,
	FE_T_STRING,
	FE_T_ERROR, /* an invalid character, already reported */
	/* keywords, in the order of fe_keywords (lex.c) */
	FE_T_MODEL,
	FE_T_DIM,
	FE_T_CONST,
	FE_T_DEF,
	FE_T_EXPORT,
	FE_T_RETURN,
	FE_T_PARAM,
	FE_T_REPEAT,
	FE_T_FOR,
	FE_T_IN,
	FE_T_AS,
	FE_T_IF,
	FE_T_ELSE,
	FE_T_TRAIN,
	FE_T_EXAMPLE,
	FE_T_AND,
	FE_T_OR,
	FE_T_NOT,
	FE_T_TRUE,
	FE_T_FALSE,
	/* punctuation */
	FE_T_LPAREN,
	FE_T_RPAREN,
	FE_T_LBRACK,
	FE_T_RBRACK,
	FE_T_COMMA,
	FE_T_COLON,
	FE_T_ASSIGN, /* = */
	FE_T_PLUS,
	FE_T_MINUS,
	FE_T_STAR,
	FE_T_SLASH,
	FE_T_AT,
	FE_T_PERCENT,
	FE_T_POW, /* ** */
	FE_T_LT,
	FE_T_LE,
	FE_T_GT,
	FE_T_GE,
	FE_T_EQ, /* == */
	FE_T_NE,
	FE_T_DOT,
	FE_T_DOTDOT,
} fe_tok_kind;

typedef struct fe_token {
	fe_tok_kind kind;
	ir_loc loc;
	const char *text; /* IDENT: the name; STRING: decoded; else the spelling */
	int64_t ival;     /* INT */
	double rval;      /* REAL (and INT, converted) */
} fe_token;

typedef struct fe_tokens {
	fe_token *toks;
	uint32_t n, cap;
} fe_tokens;

/* Tokenizes source file `file` of ctx into *out. Strings and names are
 * allocated in arena. Reports lexical errors (invalid characters, bad
 * indentation, unterminated strings) through ir_error and keeps going;
 * the token array always ends with FE_T_EOF. Returns false on OOM. The
 * token array is allocated through the ctx hook: free with
 * fe_tokens_fini. */
bool fe_lex(ir_ctx *ctx, uint32_t file, ir_arena *arena, fe_tokens *out);
void fe_tokens_fini(ir_ctx *ctx, fe_tokens *t);
/* A short description of a token for "expected X, found Y" messages. */
const char *fe_tok_describe(const fe_token *t, char *buf, size_t size);

/* ---- expressions --------------------------------------------------------- */

typedef enum fe_expr_kind {
	FE_E_NUM,
	FE_E_STR,
	FE_E_NAME,
	FE_E_BOOL,
	FE_E_LIST,
	FE_E_CALL,
	FE_E_INDEX,
	FE_E_SLICE,     /* only as an item of FE_E_INDEX: lo:hi */
	FE_E_TRANSPOSE, /* x.T */
	FE_E_BINARY,    /* arithmetic, comparison, and, or */
	FE_E_NEG,
	FE_E_NOT,
} fe_expr_kind;

typedef struct fe_expr fe_expr;

typedef struct fe_arg {
	const char *name; /* keyword, or NULL for a positional argument */
	ir_loc name_loc;
	fe_expr *value;
} fe_arg;

struct fe_expr {
	fe_expr_kind kind;
	ir_loc loc; /* the operator token, the call's name, the literal */
	/* How deep evaluating this expression recurses: 1 for a leaf, one
	 * more than the deepest operand, but a left-leaning chain of
	 * arithmetic (a + b - c * d ...) counts as one level, as it is
	 * walked in a loop. The parser keeps it under FE_MAX_EXPR_DEPTH. */
	uint32_t depth;
	union {
		struct {
			bool is_int;
			int64_t i;
			double r;
		} num;
		const char *str; /* STR (decoded), NAME */
		bool boolean;    /* BOOL */
		struct {
			fe_expr **items;
			uint32_t n;
		} list; /* LIST, and INDEX items (with base) */
		struct {
			fe_expr *callee;
			fe_arg *args;
			uint32_t n_args;
			/* Call sites of the same name in the enclosing def's
			 * text: this is site `site` of `n_sites`. */
			uint32_t site, n_sites;
		} call;
		struct {
			fe_expr *base;
			fe_expr **items;
			uint32_t n;
		} index;
		struct {
			fe_expr *lo, *hi; /* NULL when omitted */
		} slice;
		struct {
			fe_tok_kind op;
			fe_expr *lhs, *rhs;
		} bin;
		fe_expr *operand; /* NEG, NOT, TRANSPOSE */
	};
};

/* ---- statements ------------------------------------------------------------ */

typedef struct fe_ident {
	const char *name;
	ir_loc loc;
} fe_ident;

typedef enum fe_stmt_kind {
	FE_S_PARAM,  /* param names : [exprs] = value */
	FE_S_ASSIGN, /* names = value */
	FE_S_RETURN, /* return exprs */
	FE_S_REPEAT, /* repeat value [as names[0]] body */
	FE_S_FOR,    /* for names[0] in value..value2 body */
	FE_S_IF,     /* if value body [else orelse] */
	FE_S_EXPR,   /* value */
} fe_stmt_kind;

typedef struct fe_stmt fe_stmt;

typedef struct fe_block {
	fe_stmt **stmts;
	uint32_t n;
} fe_block;

struct fe_stmt {
	fe_stmt_kind kind;
	ir_loc loc; /* the statement's first token */
	fe_ident *names;
	uint32_t n_names;
	fe_expr **exprs;
	uint32_t n_exprs;
	fe_expr *value, *value2;
	fe_block body, orelse;
};

/* ---- declarations ------------------------------------------------------------ */

typedef struct fe_def_param {
	fe_ident id;
	bool has_type;
	ir_dtype dtype;
	ir_loc type_loc;
	fe_expr **dims;
	uint32_t n_dims;
	fe_expr *deflt; /* NULL if required */
} fe_def_param;

typedef struct fe_def {
	fe_ident id;
	bool is_export;
	bool is_prelude;
	fe_def_param *params;
	uint32_t n_params;
	fe_block body;
	fe_expr *body_expr; /* one-line form `def f(x) = expr`, else NULL */
} fe_def;

typedef enum fe_decl_kind {
	FE_D_DIM,     /* names, values (entries NULL where no fallback) */
	FE_D_CONST,   /* names, values */
	FE_D_DEF,     /* def */
	FE_D_EXAMPLE, /* names[0] the function, args */
	FE_D_TRAIN,   /* names = values */
} fe_decl_kind;

typedef struct fe_decl {
	fe_decl_kind kind;
	ir_loc loc;
	fe_ident *names;
	fe_expr **values;
	uint32_t n;
	fe_def *def;
	fe_arg *args;
	uint32_t n_args;
} fe_decl;

typedef struct fe_file {
	fe_ident model; /* name NULL when the file has no `model` line */
	fe_decl **decls;
	uint32_t n_decls;
} fe_file;

/* Parses the tokens of one file into a tree allocated in arena. With
 * is_prelude the file has no `model` line and its defs are marked as the
 * prelude's. Reports syntax errors and recovers at the next line, so one
 * run reports several; returns NULL on OOM only (check ctx->n_errors). */
fe_file *fe_parse(ir_ctx *ctx, const fe_tokens *toks, ir_arena *arena,
		  bool is_prelude);

#endif
