/*
 * emit.c - ahead-of-time output: `-c -o NAME.o` writes a relocatable
 * object and the C header NAME.h that describes it (entry points, shapes,
 * the params block and the scratch each entry needs); `--emit=KIND -o
 * FILE` writes one form (attnc IR, LLVM IR, assembly or object).
 */
#include "driver.h"

#include "cg_header.h"
#include "cg_program.h"

#include <stdlib.h>
#include <string.h>

#define MAX_ENTRIES 64

/* NAME.o -> NAME.h; anything else gets ".h" appended. */
static char *header_path(ir_ctx *ctx, const char *obj)
{
	size_t n = strlen(obj);
	char *h = ir_alloc(ctx, n + 3);
	if (!h)
		return NULL;
	memcpy(h, obj, n);
	if (n > 2 && strcmp(obj + n - 2, ".o") == 0)
		h[n - 1] = 'h';
	else
		memcpy(h + n, ".h", 3);
	return h;
}

static bool write_header(ir_ctx *ctx, cg_program *p, const ir_module *m,
			 const drv_options *o, const char *obj)
{
	cg_header_entry entries[MAX_ENTRIES];
	uint32_t n = cg_program_n_entries(p);
	if (n > MAX_ENTRIES)
		return ir_error(ctx, (ir_loc){0}, "too many entry points"), false;
	for (uint32_t i = 0; i < n; i++) {
		const char *name = cg_program_entry_name(p, i);
		cg_header_entry *e = &entries[i];
		e->name = name;
		e->symbol = cg_program_symbol(p, name);
		e->scratch_size = cg_program_scratch_bytes(p, name);
		e->inputs = cg_program_inputs(p, name, &e->n_inputs);
		e->outputs = cg_program_outputs(p, name, &e->n_outputs);
	}
	cg_header_desc d = {
		.prefix = m->name,
		.source = o->model,
		.object = obj,
		.version = ATTNC_VERSION,
		.params_size = cg_program_params_bytes(p),
		.entries = entries,
		.n_entries = n,
	};
	d.params = cg_program_params(p, &d.n_params);
	char *path = header_path(ctx, obj);
	if (!path)
		return false;
	FILE *f = fopen(path, "w");
	char err[256] = "";
	bool ok = f && cg_header_write(f, &d, err, sizeof err);
	if (f && fclose(f) != 0)
		ok = false;
	if (!ok)
		ir_error(ctx, (ir_loc){0}, "cannot write '%s'%s%s", path,
			 *err ? ": " : "", err);
	ir_free(ctx, path);
	return ok;
}

static bool emit_kind(ir_ctx *ctx, const char *s, cg_emit_kind *kind)
{
	if (strcmp(s, "llvm") == 0)
		*kind = CG_EMIT_LLVM;
	else if (strcmp(s, "asm") == 0)
		*kind = CG_EMIT_ASM;
	else if (strcmp(s, "obj") == 0)
		*kind = CG_EMIT_OBJ;
	else
		return ir_error(ctx, (ir_loc){0},
				"--emit: unknown kind '%s' (ir, llvm, asm or obj)", s),
		       false;
	return true;
}

/* --emit=ir: the optimized attnc IR as text. */
static bool emit_ir(ir_ctx *ctx, const ir_module *m, const char *path)
{
	FILE *f = path && strcmp(path, "-") ? fopen(path, "w") : stdout;
	if (!f)
		return ir_error(ctx, (ir_loc){0}, "cannot write '%s'", path), false;
	ir_module_print(m, f);
	if (f != stdout && fclose(f) != 0)
		return ir_error(ctx, (ir_loc){0}, "cannot write '%s'", path), false;
	return true;
}

/* Text kinds without -o go to standard output. */
static bool emit_stdout(cg_program *p, cg_emit_kind kind)
{
	char *data;
	size_t len;
	if (!cg_program_emit_buffer(p, kind, &data, &len))
		return false;
	fwrite(data, 1, len, stdout);
	free(data);
	return true;
}

bool drv_emit(ir_ctx *ctx, const ir_module *m, const drv_options *o)
{
	if (o->emit && strcmp(o->emit, "ir") == 0)
		return emit_ir(ctx, m, o->output);
	cg_emit_kind kind = CG_EMIT_OBJ;
	if (o->emit && !emit_kind(ctx, o->emit, &kind))
		return false;
	const char *out = o->output;
	char *default_out = NULL;
	if (!out && (o->compile_only || kind == CG_EMIT_OBJ)) {
		size_t n = strlen(m->name);
		default_out = ir_alloc(ctx, n + 3);
		if (!default_out)
			return false;
		memcpy(default_out, m->name, n);
		memcpy(default_out + n, ".o", 3);
		out = default_out;
	}
	int64_t *syms = ir_alloc(ctx, (m->n_syms + 1) * sizeof *syms);
	cg_program *p = NULL;
	bool ok = false;
	if (!syms || !drv_bind_syms(ctx, m, ir_module_default_func(m), o, true, false,
				   syms))
		goto done;
	cg_program_options po = drv_program_options(o);
	p = cg_program_create(ctx, m, syms, &po);
	if (!p || !(out ? cg_program_emit(p, kind, out) : emit_stdout(p, kind)))
		goto done;
	ok = !o->compile_only || write_header(ctx, p, m, o, out);
done:
	cg_program_destroy(p);
	ir_free(ctx, syms);
	ir_free(ctx, default_out);
	return ok;
}
