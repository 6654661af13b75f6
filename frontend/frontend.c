/*
 * frontend.c - fe_compile: the prelude and the user's file, lexed, parsed
 * and elaborated into one IR module.
 *
 * The prelude (frontend/prelude.g, compiled in as text by CMake) is
 * registered as a source named "prelude.g" so that diagnostics inside it
 * print its lines. Syntax errors stop the compile before elaboration, as
 * a broken tree would only give confusing follow-up errors.
 */
#include "frontend.h"

#include "elab.h"
#include "fe_prelude.h"

#include <string.h>

/* The source index of the prelude, registering it on first use. */
static uint32_t prelude_source(ir_ctx *ctx)
{
	const char *text = (const char *)fe_prelude_text;
	size_t len = sizeof fe_prelude_text - 1;
	for (uint32_t i = 1; i < ctx->n_files; i++)
		if (strcmp(ctx->files[i].name, "prelude.g") == 0 &&
		    ctx->files[i].len == len &&
		    memcmp(ctx->files[i].text, text, len) == 0)
			return i;
	return ir_ctx_add_source(ctx, "prelude.g", text, len);
}

/* Lexes and parses one source; NULL on OOM. */
static fe_file *parse_source(ir_ctx *ctx, uint32_t file, ir_arena *arena,
			     bool is_prelude)
{
	fe_tokens toks;
	fe_file *f = NULL;
	if (fe_lex(ctx, file, arena, &toks))
		f = fe_parse(ctx, &toks, arena, is_prelude);
	fe_tokens_fini(ctx, &toks);
	return f;
}

ir_module *fe_compile(ir_ctx *ctx, uint32_t source_file)
{
	int errors = ctx->n_errors;
	ir_arena arena;
	ir_module *m = NULL;
	if (source_file == 0 || source_file >= ctx->n_files) {
		ir_error(ctx, (ir_loc){0}, "no source file to compile");
		return NULL;
	}
	uint32_t prelude = prelude_source(ctx);
	if (!prelude) {
		ir_error(ctx, (ir_loc){0}, "out of memory");
		return NULL;
	}
	ir_arena_init(&arena, ctx);
	fe_file *pf = parse_source(ctx, prelude, &arena, true);
	fe_file *uf = parse_source(ctx, source_file, &arena, false);
	if ((!pf || !uf) && ctx->n_errors == errors)
		ir_error(ctx, (ir_loc){0}, "out of memory");
	if (pf && uf && ctx->n_errors == errors)
		m = fe_elaborate(ctx, &arena, pf, uf);
	ir_arena_fini(&arena);
	return m;
}
