/*
 * frontend.h - the .g language: lexer, parser and elaborator.
 *
 * fe_compile parses a registered source file and elaborates it into an IR
 * module: definitions are inlined at each call, loops unrolled, parameters
 * created per use site, compile-time numbers evaluated, shapes checked by
 * the op shape rules as nodes are built. docs/language.md is the manual.
 */
#ifndef ATTNC_FRONTEND_H
#define ATTNC_FRONTEND_H

#include "ir.h"

/* Returns the module, or NULL after reporting every error found. */
ir_module *fe_compile(ir_ctx *ctx, uint32_t source_file);

#endif
