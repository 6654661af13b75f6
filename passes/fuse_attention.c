/*
 * fuse_attention.c - the "fuse_attention" pass: every attention the
 * matcher (fuse_match.c) finds becomes one fused_attention node; and
 * pass_explain_fusion, which reports the matcher's verdict on every
 * softmax. The pass runs on the forward functions before autodiff
 * (pass_pipeline_forward), whose rule for fused_attention then makes the
 * fused_attention_grad of the gradient function.
 *
 * The final matmul of an attention is replaced by
 * fused_attention(q, k, v[, valid]) {scale, fill, p, stream}, located at
 * the softmax (a user reading the fused IR finds the line of the
 * weights). Operands stored transposed get a permute first. The
 * weights and scores are then unused, and the compaction drops them.
 *
 * New nodes must come before their users, so the graph is rebuilt in one
 * forward sweep (pass_graph_builder, graph.h) that copies each node or,
 * at a replaced one, emits its replacement.
 */
#include "passes.h"

#include "fuse_additive.h"
#include "fuse_attention.h"

#include <string.h>

/* What the rebuild does at a node. */
typedef enum attn_role { ROLE_KEEP, ROLE_OUT } attn_role;

typedef struct attn_act {
	attn_role role;
	uint32_t match;
} attn_act;

typedef struct attn_rebuild {
	pass_graph_builder b;      /* the new graph */
	const pass_attn_match *mt; /* the matches */
} attn_rebuild;

/* Operand x of a match in the new graph, transposed if stored so. */
static ir_id operand(attn_rebuild *r, ir_id x, bool is_t, ir_loc loc)
{
	ir_id id = r->b.map[x];
	if (!is_t)
		return id;
	ir_attr p = {.permute = {.perm = {0, 2, 1}}};
	return pass_graph_emit(&r->b, IR_OP_PERMUTE, &id, 1, &p, NULL, loc);
}

static ir_attr fused_attr(const attn_rebuild *r, const pass_attn_match *mt)
{
	const ir_node *sm = &r->b.f->g.nodes[mt->sm];
	ir_attr a;
	memset(&a, 0, sizeof a);
	a.attention.scale = mt->scale;
	a.attention.heads = 1;
	a.attention.fill = sm->op == IR_OP_MASKED_SOFTMAX ? sm->attr.fill : 0;
	if (mt->drop != IR_NONE) {
		const ir_node *d = &r->b.f->g.nodes[mt->drop];
		a.attention.p = d->attr.dropout.p;
		a.attention.stream = d->attr.dropout.stream;
	}
	return a;
}

/* q, k, v[, valid] of a match in the new graph into args; the count. */
static uint32_t fused_args(attn_rebuild *r, const pass_attn_match *mt,
			   ir_id *args)
{
	ir_loc loc = r->b.f->g.nodes[mt->sm].loc;
	uint32_t n = 0;
	args[n++] = operand(r, mt->q, mt->q_t, loc);
	args[n++] = operand(r, mt->k, mt->k_t, loc);
	args[n++] = operand(r, mt->v, mt->v_t, loc);
	if (mt->valid != IR_NONE)
		args[n++] = r->b.map[mt->valid];
	return n;
}

static ir_id emit_fused(attn_rebuild *r, const pass_attn_match *mt)
{
	ir_id args[4];
	uint32_t n = fused_args(r, mt, args);
	ir_attr a = fused_attr(r, mt);
	return pass_graph_emit(&r->b, IR_OP_FUSED_ATTENTION, args, n, &a, NULL,
			       r->b.f->g.nodes[mt->sm].loc);
}

/* The new graph, node by node; then it replaces the old one. */
static bool rebuild(attn_rebuild *r, const attn_act *act)
{
	ir_func *f = r->b.f;
	for (ir_id x = 0; x < f->g.n_nodes && !r->b.is_failed; x++) {
		switch (act[x].role) {
		case ROLE_KEEP:
			r->b.map[x] = pass_graph_copy(&r->b, x);
			break;
		case ROLE_OUT:
			r->b.map[x] = emit_fused(r, &r->mt[act[x].match]);
			break;
		}
	}
	return pass_graph_finish(&r->b, "fuse_attention: cannot rewrite");
}

/* The roles of a match's nodes. */
static void mark(attn_act *act, const pass_attn_match *mt, uint32_t mi)
{
	act[mt->out] = (attn_act){ROLE_OUT, mi};
}

static bool is_softmax(ir_op op)
{
	return op == IR_OP_SOFTMAX || op == IR_OP_MASKED_SOFTMAX;
}

/* Finds the matches of f into mt (room for every node); the count. */
static uint32_t find_matches(const ir_module *m, const ir_func *f,
			     const pass_graph_uses *u, pass_attn_match *mt)
{
	uint32_t n = 0;
	for (ir_id i = 0; i < f->g.n_nodes; i++)
		if (is_softmax(f->g.nodes[i].op) &&
		    pass_attn_match_at(m, f, u, i, &mt[n]))
			n++;
	return n;
}

static bool fuse_func(ir_module *m, ir_func *f)
{
	uint32_t nn = f->g.n_nodes;
	pass_graph_uses u = {0};
	pass_attn_match *mt = ir_alloc(m->ctx, (nn + 1) * sizeof *mt);
	attn_act *act = ir_alloc(m->ctx, (nn + 1) * sizeof *act);
	attn_rebuild r = {.b = {.m = m, .f = f}, .mt = mt};
	r.b.map = ir_alloc(m->ctx, (nn + 1) * sizeof *r.b.map);
	bool ok = mt && act && r.b.map && pass_graph_uses_build(m->ctx, f, &u);
	uint32_t n = ok ? find_matches(m, f, &u, mt) : 0;
	for (uint32_t i = 0; i < n; i++)
		mark(act, &mt[i], i);
	if (!ok)
		ir_error(m->ctx, f->loc, "fuse_attention: out of memory");
	else if (n > 0)
		ok = rebuild(&r, act);
	pass_graph_uses_fini(m->ctx, &u);
	ir_free(m->ctx, mt);
	ir_free(m->ctx, act);
	ir_free(m->ctx, r.b.map);
	return ok;
}

bool pass_fuse_attention(ir_module *m)
{
	for (uint32_t fi = 0; fi < m->n_funcs; fi++)
		if (!fuse_func(m, m->funcs[fi]) ||
		    !pass_fuse_additive_func(m, m->funcs[fi]))
			return false;
	return pass_module_drop_unused_consts(m);
}

/* ---- explaining ------------------------------------------------------------------- */

static void print_loc(const ir_module *m, ir_loc loc, FILE *out)
{
	const ir_ctx *ctx = m->ctx;
	if (loc.file > 0 && loc.file < ctx->n_files)
		fprintf(out, "%s:%u:%u", ctx->files[loc.file].name, loc.line,
			loc.col);
	else
		fputs("no location", out);
}

/* What fuse_heads will make of a fused match whose queries are a head
 * split. */
static void print_heads(const ir_func *f, const pass_graph_uses *u,
			const pass_attn_match *mt, FILE *out)
{
	ir_id src;
	uint32_t h = pass_heads_split(f, mt->q, &src);
	if (h == 0)
		return;
	pass_heads_match hd;
	bool is_plain = !mt->q_t && !mt->k_t && !mt->v_t;
	if (!is_plain)
		snprintf(hd.why, sizeof hd.why, "an operand is read transposed");
	const char *s = h == 1 ? "" : "s", *are = h == 1 ? "is" : "are";
	if (is_plain &&
	    pass_heads_operands(f, mt->q, mt->k, mt->v, mt->valid, IR_NONE, &hd) &&
	    pass_heads_merged_only(f, u, mt->out, &hd, "result"))
		fprintf(out, "; its %u head%s %s read in place", h, s, are);
	else
		fprintf(out, "; its %u head%s stay%s split: %s", h, s,
			h == 1 ? "s" : "", hd.why);
}

static void print_fused(const ir_func *f, const pass_graph_uses *u,
			const pass_attn_match *mt, FILE *out)
{
	const ir_graph *g = &f->g;
	fprintf(out, "fuses: matmul %%%u", mt->scores);
	if (mt->scaled != IR_NONE)
		fprintf(out, ", %s by %g",
			ir_op_table[g->nodes[mt->scaled].op].name, mt->scale_c);
	fprintf(out, ", %s", ir_op_table[g->nodes[mt->sm].op].name);
	if (mt->drop != IR_NONE)
		fprintf(out, ", dropout %%%u", mt->drop);
	fprintf(out, ", matmul %%%u into fused_attention", mt->out);
	print_heads(f, u, mt, out);
}

static void explain_func(const ir_module *m, const ir_func *f, FILE *out,
			 uint32_t *n_sm, uint32_t *n_fused)
{
	pass_graph_uses u = {0};
	if (!pass_graph_uses_build(m->ctx, f, &u)) {
		fprintf(out, "@%s: out of memory\n", f->name);
		pass_graph_uses_fini(m->ctx, &u);
		return;
	}
	for (ir_id i = 0; i < f->g.n_nodes; i++) {
		const ir_node *n = &f->g.nodes[i];
		if (!is_softmax(n->op))
			continue;
		pass_attn_match mt;
		pass_additive_match am;
		bool ok = pass_attn_match_at(m, f, &u, i, &mt);
		bool is_add = !ok && pass_additive_match_at(m, f, &u, i, &am);
		fprintf(out, "@%s %%%u %s at ", f->name, i,
			ir_op_table[n->op].name);
		print_loc(m, n->loc, out);
		fputs(": ", out);
		if (ok)
			print_fused(f, &u, &mt, out);
		else if (is_add)
			pass_fuse_additive_print(f, &am, out);
		else
			fprintf(out, "not fused: %s",
				am.is_additive ? am.why : mt.why);
		fputc('\n', out);
		(*n_sm)++;
		*n_fused += ok || is_add;
	}
	pass_graph_uses_fini(m->ctx, &u);
}

void pass_explain_fusion(const ir_module *m, FILE *out)
{
	uint32_t n_sm = 0, n_fused = 0;
	for (uint32_t fi = 0; fi < m->n_funcs; fi++)
		explain_func(m, m->funcs[fi], out, &n_sm, &n_fused);
	fprintf(out, "%u of %u softmax%s fuse%s\n", n_fused, n_sm,
		n_sm == 1 ? "" : "es", n_fused == 1 ? "s" : "");
}
