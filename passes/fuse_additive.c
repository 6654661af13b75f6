/*
 * fuse_additive.c - additive (Bahdanau) attention fusion, run by the
 * fuse_attention pass after dot-product fusion: every additive attention
 * the matcher (fuse_additive_match.c) finds becomes one
 * fused_additive_attention node. It runs on the forward functions before
 * autodiff (pass_pipeline_forward), whose rule for the fused node makes
 * the fused_additive_attention_grad of a gradient function.
 *
 * The final matmul of an attention is replaced by
 * fused_additive_attention(qp, kp, wv, v[, valid]) {scale = 1, fill, p,
 * stream}, located at the softmax; qp, kp are the add's operands reshaped
 * back to (N, Q, H) and (N, K, H) (the projections themselves when the
 * add reads them through a reshape), wv the (H, 1) vector reshaped to
 * (H). The features, scores and weights are then unused, and the
 * compaction drops them.
 *
 * New nodes must come before their users, so the graph is rebuilt in one
 * forward sweep (pass_graph_builder, graph.h) that copies each node or,
 * at a replaced one, emits its replacement (as fuse_attention.c does).
 */
#include "passes.h"

#include "fuse_additive.h"

#include <string.h>

/* What the rebuild does at a node. */
typedef enum additive_role { ROLE_KEEP, ROLE_OUT } additive_role;

typedef struct additive_act {
	additive_role role;
	uint32_t match;
} additive_act;

typedef struct additive_rebuild {
	pass_graph_builder b;          /* the new graph */
	const pass_additive_match *mt; /* the matches */
} additive_rebuild;

static ir_id emit_reshape(additive_rebuild *r, ir_id x, const ir_type *t,
			  ir_loc loc)
{
	return pass_graph_emit(&r->b, IR_OP_RESHAPE, &x, 1, NULL, t, loc);
}

/* The 4-d operand x of the add seen as rank 3 without its size-1 axis
 * `drop`, reading through a reshape when x is one. */
static ir_id projection(additive_rebuild *r, ir_id x, int drop, ir_loc loc)
{
	const ir_graph *og = &r->b.f->g;
	ir_type t = og->nodes[x].type;
	for (int i = drop; i < 3; i++)
		t.dims[i] = t.dims[i + 1];
	t.rank = 3;
	if (og->nodes[x].op == IR_OP_RESHAPE)
		x = ir_arg(og, x, 0);
	if (ir_type_eq(&og->nodes[x].type, &t))
		return r->b.map[x];
	return emit_reshape(r, r->b.map[x], &t, loc);
}

static ir_attr fused_attr(const additive_rebuild *r,
			  const pass_additive_match *mt)
{
	const ir_node *sm = &r->b.f->g.nodes[mt->sm];
	ir_attr a;
	memset(&a, 0, sizeof a);
	a.attention.scale = 1;
	a.attention.heads = 1;
	a.attention.fill = sm->op == IR_OP_MASKED_SOFTMAX ? sm->attr.fill : 0;
	if (mt->drop != IR_NONE) {
		const ir_node *d = &r->b.f->g.nodes[mt->drop];
		a.attention.p = d->attr.dropout.p;
		a.attention.stream = d->attr.dropout.stream;
	}
	return a;
}

/* The fused node of match mi: fused_additive_attention(qp, kp, wv, v
 * [, valid]) in the new graph. */
static ir_id emit_fused(additive_rebuild *r, uint32_t mi)
{
	const pass_additive_match *mt = &r->mt[mi];
	ir_loc loc = r->b.f->g.nodes[mt->sm].loc;
	ir_type wt = r->b.f->g.nodes[mt->wv].type;
	wt.rank = 1;
	ir_id ids[5];
	uint32_t n = 0;
	ids[n++] = projection(r, mt->qs, 2, loc);
	ids[n++] = projection(r, mt->ks, 1, loc);
	ids[n++] = emit_reshape(r, r->b.map[mt->wv], &wt, loc);
	ids[n++] = r->b.map[mt->v];
	if (mt->valid != IR_NONE)
		ids[n++] = r->b.map[mt->valid];
	ir_attr at = fused_attr(r, mt);
	return pass_graph_emit(&r->b, IR_OP_FUSED_ADDITIVE_ATTENTION, ids, n,
			       &at, NULL, loc);
}

/* The new graph, node by node; then it replaces the old one. */
static bool rebuild(additive_rebuild *r, const additive_act *act)
{
	ir_func *f = r->b.f;
	for (ir_id x = 0; x < f->g.n_nodes && !r->b.is_failed; x++) {
		switch (act[x].role) {
		case ROLE_KEEP:
			r->b.map[x] = pass_graph_copy(&r->b, x);
			break;
		case ROLE_OUT:
			r->b.map[x] = emit_fused(r, act[x].match);
			break;
		}
	}
	return pass_graph_finish(&r->b, "fuse_attention: cannot rewrite the "
					"additive attentions of");
}

static bool is_softmax(ir_op op)
{
	return op == IR_OP_SOFTMAX || op == IR_OP_MASKED_SOFTMAX;
}

/* The matches of f into mt, their roles into act; the count. Two
 * matches never share their final matmul (each owns its softmax's
 * chain), but one claimed twice would be a matcher bug: the second match
 * is then dropped. */
static uint32_t find_matches(const ir_module *m, const ir_func *f,
			     const pass_graph_uses *u, pass_additive_match *mt,
			     additive_act *act)
{
	uint32_t n = 0;
	for (ir_id i = 0; i < f->g.n_nodes; i++) {
		if (!is_softmax(f->g.nodes[i].op) ||
		    !pass_additive_match_at(m, f, u, i, &mt[n]))
			continue;
		if (act[mt[n].out].role != ROLE_KEEP)
			continue;
		act[mt[n].out] = (additive_act){ROLE_OUT, n};
		n++;
	}
	return n;
}

bool pass_fuse_additive_func(ir_module *m, ir_func *f)
{
	uint32_t nn = f->g.n_nodes;
	pass_graph_uses u = {0};
	pass_additive_match *mt = ir_alloc(m->ctx, (nn + 1) * sizeof *mt);
	additive_act *act = ir_alloc(m->ctx, (nn + 1) * sizeof *act);
	additive_rebuild r = {.b = {.m = m, .f = f}, .mt = mt};
	r.b.map = ir_alloc(m->ctx, (nn + 1) * sizeof *r.b.map);
	bool ok = mt && act && r.b.map && pass_graph_uses_build(m->ctx, f, &u);
	uint32_t n = ok ? find_matches(m, f, &u, mt, act) : 0;
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

void pass_fuse_additive_print(const ir_func *f, const pass_additive_match *mt,
			      FILE *out)
{
	fprintf(out, "fuses: add %%%u, tanh %%%u, matmul %%%u, %s", mt->a,
		mt->t, mt->proj, ir_op_table[f->g.nodes[mt->sm].op].name);
	if (mt->drop != IR_NONE)
		fprintf(out, ", dropout %%%u", mt->drop);
	fprintf(out, ", matmul %%%u into fused_additive_attention", mt->out);
}
