/*
 * pipeline.c - the optimization pipeline: one flat table of passes, run
 * top to bottom.
 *
 * Each pass can be switched off by name (--disable-pass=NAME), fusion
 * passes all at once (--no-fuse), and the module can be printed after any
 * of them (--dump-ir=NAME, or "all"). The verifier runs between passes
 * when asked and always once at the end, so no broken graph leaves here.
 */
#include "passes.h"

#include <string.h>

/* The pipeline, in order. Folding first turns constant subexpressions
 * into constants that simplify's identities can see; simplify then removes
 * layout changes and unit arithmetic; CSE merges what is left identical;
 * attention fusion then sees each chain in one canonical form (transposes
 * as matmul flags, one node per value), and fuse_heads the splits and
 * merges around the fused nodes, and fuse_loss a loss's cross_entropy
 * with its gradient's, fuse_gelu GELU's backward with its forward's
 * result; factor then turns the gradients' sums of
 * products with a shared operand into one product each; DCE sweeps up
 * whatever no output needs; remat, last, copies the cheap activations a
 * gradient's far readers read, planned as the elementwise fusion will
 * compute them. The passes marked is_forward also run on
 * the forward functions before autodiff (pass_pipeline_forward), so that
 * a gradient function is derived from fused attention, whose gradient
 * rules make the fused backward nodes. */
const pass_info pass_table[] = {
	{"infer", "re-derive every node's type and report any that differ",
	 pass_infer, false, true},
	{"fold", "evaluate nodes whose operands are all constants", pass_fold,
	 false, true},
	{"simplify",
	 "algebraic identities: unit arithmetic, nested views, "
	 "transposes into matmul flags",
	 pass_simplify, false, true},
	{"cse", "merge identical nodes and identical constants", pass_cse,
	 false, true},
	{"fuse_attention",
	 "one fused_attention per matmul-softmax-matmul "
	 "chain",
	 pass_fuse_attention, true, true},
	{"fuse_heads",
	 "head split and merge around fused attention read in "
	 "place by the kernels (attr heads)",
	 pass_fuse_heads, true, true},
	{"fuse_loss",
	 "cross_entropy and cross_entropy_grad of the same "
	 "logits and labels into one cross_entropy_with_grad",
	 pass_fuse_loss, true, false},
	{"fuse_gelu",
	 "GELU's backward takes 1 + erf from its forward's result, "
	 "not from a second erf",
	 pass_fuse_gelu, true, false},
	{"factor",
	 "sums of matmuls that share an operand (and flags) into "
	 "one matmul of a sum",
	 pass_factor, false, false},
	{"dce", "drop nodes no output needs", pass_dce, false, false},
	{"remat",
	 "elementwise results read again long after they are made "
	 "recomputed before that read, not kept",
	 pass_remat, false, false},
	/* At lowering: the plan (fuse_ew.c) tells codegen which nodes to
	 * compute inside their consumer's kernel; the IR stays as it is. */
	{"fuse_elementwise",
	 "at lowering: elementwise chains, dropouts and "
	 "permutes computed inside their consumer's kernel",
	 NULL, true, false},
};
const uint32_t pass_count = sizeof pass_table / sizeof pass_table[0];

const pass_info *pass_find(const char *name)
{
	for (uint32_t i = 0; i < pass_count; i++)
		if (strcmp(pass_table[i].name, name) == 0)
			return &pass_table[i];
	return NULL;
}

static bool is_disabled(const pass_info *p, const pass_options *opts)
{
	if (p->is_fusion && opts->no_fuse)
		return true;
	for (uint32_t i = 0; i < opts->n_disabled; i++)
		if (strcmp(opts->disabled[i], p->name) == 0)
			return true;
	return false;
}

bool pass_is_enabled(const pass_options *opts, const char *name)
{
	const pass_info *p = pass_find(name);
	return p && !is_disabled(p, opts);
}

static void dump_after(const ir_module *m, const pass_info *p,
		       const pass_options *opts)
{
	if (!opts->dump ||
	    (strcmp(opts->dump, p->name) != 0 && strcmp(opts->dump, "all") != 0))
		return;
	FILE *out = opts->dump_out ? opts->dump_out : stdout;
	fprintf(out, "# ---- after %s ----\n", p->name);
	ir_module_print(m, out);
}

bool pass_pipeline_forward(ir_module *m, const pass_options *opts)
{
	for (uint32_t i = 0; i < pass_count; i++) {
		const pass_info *p = &pass_table[i];
		if (!p->is_forward || is_disabled(p, opts))
			continue;
		if (p->run && !p->run(m))
			return false;
		if (opts->verify_each && !ir_module_verify(m)) {
			ir_error(m->ctx, (ir_loc){0},
				 "the IR is malformed after "
				 "pass '%s' (before autodiff)",
				 p->name);
			return false;
		}
	}
	return ir_module_verify(m);
}

bool pass_pipeline_run(ir_module *m, const pass_options *opts)
{
	for (uint32_t i = 0; i < pass_count; i++) {
		const pass_info *p = &pass_table[i];
		if (is_disabled(p, opts))
			continue;
		if (p->run && !p->run(m))
			return false;
		dump_after(m, p, opts);
		if (opts->verify_each && !ir_module_verify(m)) {
			ir_error(m->ctx, (ir_loc){0},
				 "the IR is malformed after pass '%s'", p->name);
			return false;
		}
	}
	return ir_module_verify(m);
}
