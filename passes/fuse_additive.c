/*
 * fuse_additive.c - additive (Bahdanau) attention fusion, run by the
 * fuse_attention pass after dot-product fusion: every additive attention
 * the matcher (fuse_additive_match.c) finds becomes one
 * fused_additive_attention node, and in a gradient function its backward
 * nodes parts of one fused_additive_attention_grad node.
 *
 * The final matmul of an attention is replaced by
 * fused_additive_attention(qp, kp, wv, v[, valid]) {scale = 1, fill, p,
 * stream}, located at the softmax; qp, kp are the add's operands reshaped
 * back to (N, Q, H) and (N, K, H) (the projections themselves when the
 * add reads them through a reshape), wv the (H, 1) vector reshaped to
 * (H). In a gradient function each replaced backward node (the sums or
 * reshapes of dA that are the projections' gradients, the matmul that is
 * wv's, the matmul that is V's) becomes a slice of the packed result,
 * reshaped to its type; wv's slice holds one row per batch, summed. The
 * features, scores, weights and their gradients are then unused, and the
 * compaction drops them.
 *
 * New nodes must come before their users, so the graph is rebuilt in one
 * forward sweep that copies each node or, at a replaced one, emits its
 * replacement (as fuse_attention.c does).
 */
#include "passes.h"

#include "fuse_additive.h"

#include <string.h>

/* What the rebuild does at a node. */
typedef enum fa_role { ROLE_KEEP, ROLE_OUT, ROLE_PART } fa_role;

typedef struct fa_act {
	fa_role role;
	uint32_t match;
	fa_part part;
} fa_act;

/* The operands of one match in the new graph. */
typedef struct fa_args {
	ir_id ids[6];
	uint32_t n;   /* 0 until emitted */
	ir_id packed; /* its fused_additive_attention_grad, or IR_NONE */
	ir_id rows;   /* that seen as [C, S] rows, or IR_NONE */
} fa_args;

typedef struct fa_rebuild {
	ir_module *m;
	ir_func *f;
	ir_graph g;        /* the new graph */
	ir_id *map;        /* old node -> new node */
	const fa_match *mt;
	fa_args *args;     /* per match */
	bool is_failed;
} fa_rebuild;

/* Appends a node to the new graph and infers its type (t: the target of
 * a reshape). */
static ir_id emit(fa_rebuild *r, ir_op op, const ir_id *args, uint32_t n,
		  const ir_attr *attr, const ir_type *t, ir_loc loc)
{
	ir_type none = {0};
	ir_id id = r->is_failed ? IR_NONE
				: ir_graph_append(r->m->ctx, &r->g, op, args, n, attr,
						  t ? t : &none, loc);
	if (id == IR_NONE || !ir_infer_type(r->m->ctx, r->m, &r->g, &r->g.nodes[id])) {
		r->is_failed = true;
		return IR_NONE;
	}
	return id;
}

static ir_id emit_reshape(fa_rebuild *r, ir_id x, const ir_type *t, ir_loc loc)
{
	return emit(r, IR_OP_RESHAPE, &x, 1, NULL, t, loc);
}

/* The 4-d operand x of the add seen as rank 3 without its size-1 axis
 * `drop`, reading through a reshape when x is one. */
static ir_id projection(fa_rebuild *r, ir_id x, int drop, ir_loc loc)
{
	const ir_graph *og = &r->f->g;
	ir_type t = og->nodes[x].type;
	for (int i = drop; i < 3; i++)
		t.dims[i] = t.dims[i + 1];
	t.rank = 3;
	if (og->nodes[x].op == IR_OP_RESHAPE)
		x = ir_arg(og, x, 0);
	if (ir_type_eq(&og->nodes[x].type, &t))
		return r->map[x];
	return emit_reshape(r, r->map[x], &t, loc);
}

static ir_attr fused_attr(const fa_rebuild *r, const fa_match *mt)
{
	const ir_node *sm = &r->f->g.nodes[mt->sm];
	ir_attr a;
	memset(&a, 0, sizeof a);
	a.attention.scale = 1;
	a.attention.heads = 1;
	a.attention.fill = sm->op == IR_OP_MASKED_SOFTMAX ? sm->attr.fill : 0;
	if (mt->drop != IR_NONE) {
		const ir_node *d = &r->f->g.nodes[mt->drop];
		a.attention.p = d->attr.dropout.p;
		a.attention.stream = d->attr.dropout.stream;
	}
	return a;
}

/* qp, kp, wv, v[, valid] of match mi in the new graph, emitted once. */
static fa_args *operands(fa_rebuild *r, uint32_t mi)
{
	const fa_match *mt = &r->mt[mi];
	fa_args *a = &r->args[mi];
	if (a->n > 0)
		return a;
	ir_loc loc = r->f->g.nodes[mt->sm].loc;
	ir_type wt = r->f->g.nodes[mt->wv].type;
	wt.rank = 1;
	a->ids[a->n++] = projection(r, mt->qs, 2, loc);
	a->ids[a->n++] = projection(r, mt->ks, 1, loc);
	a->ids[a->n++] = emit_reshape(r, r->map[mt->wv], &wt, loc);
	a->ids[a->n++] = r->map[mt->v];
	if (mt->valid != IR_NONE)
		a->ids[a->n++] = r->map[mt->valid];
	return a;
}

static ir_id emit_fused(fa_rebuild *r, uint32_t mi)
{
	const fa_match *mt = &r->mt[mi];
	fa_args *a = operands(r, mi);
	ir_attr at = fused_attr(r, mt);
	return emit(r, IR_OP_FUSED_ADDITIVE_ATTENTION, a->ids, a->n, &at, NULL,
		    r->f->g.nodes[mt->sm].loc);
}

/* The packed gradient of match mi, seen as [C, S] rows when its length
 * is C times a symbol S; emitted once. */
static ir_id packed(fa_rebuild *r, uint32_t mi, ir_loc loc)
{
	const fa_match *mt = &r->mt[mi];
	fa_args *a = operands(r, mi);
	if (a->packed == IR_NONE) {
		ir_id args[6];
		memcpy(args, a->ids, a->n * sizeof *args);
		args[a->n] = r->map[mt->g];
		ir_attr at = fused_attr(r, mt);
		a->packed = emit(r, IR_OP_FUSED_ADDITIVE_ATTENTION_GRAD, args, a->n + 1,
				 &at, NULL, r->f->g.nodes[mt->sm].loc);
		if (r->is_failed)
			return IR_NONE;
		ir_dim total = r->g.nodes[a->packed].type.dims[0];
		a->rows = a->packed;
		if (!ir_dim_is_static(total)) {
			ir_type rows = {.dtype = IR_F32, .rank = 2,
					.dims = {ir_dim_static(total.coef),
						 {1, total.sym}}};
			a->rows = emit_reshape(r, a->packed, &rows, loc);
		}
	}
	return a->rows;
}

/* The part `which` of match mi's packed gradient that replaces old node
 * x, reshaped to x's type; wv's per-batch rows summed first. */
static ir_id emit_part(fa_rebuild *r, uint32_t mi, fa_part which, ir_id x)
{
	const ir_graph *og = &r->f->g;
	ir_loc loc = og->nodes[x].loc;
	fa_args *a = operands(r, mi);
	const ir_type *ts[4];
	ir_type wn = r->g.nodes[a->ids[0]].type;
	wn.rank = 2;
	wn.dims[1] = wn.dims[2]; /* (N, H) */
	for (int i = 0; i < 4; i++)
		ts[i] = i == 2 ? &wn : &r->g.nodes[a->ids[i]].type;
	ir_id pk = packed(r, mi, loc);
	if (r->is_failed)
		return IR_NONE;
	int64_t off = 0;
	ir_dim part;
	for (int i = 0; i < (int)which; i++) {
		ir_type_numel_dim(r->m, ts[i], &part);
		off += part.coef;
	}
	ir_type_numel_dim(r->m, ts[which], &part);
	ir_attr sl;
	memset(&sl, 0, sizeof sl);
	sl.slice.start = off;
	sl.slice.end = off + part.coef;
	sl.slice.step = 1;
	ir_id s = emit(r, IR_OP_SLICE, &pk, 1, &sl, NULL, loc);
	if (which == FA_DW) {
		ir_attr sum = {.reduce = {1u, false}};
		s = emit(r, IR_OP_SUM, (ir_id[]){emit_reshape(r, s, &wn, loc)}, 1,
			 &sum, NULL, loc);
	}
	return emit_reshape(r, s, &og->nodes[x].type, loc);
}

static ir_id copy_node(fa_rebuild *r, ir_id x)
{
	const ir_node *n = &r->f->g.nodes[x];
	ir_id args[64], *big = NULL, *a = args;
	if (n->n_args > 64) {
		big = ir_alloc(r->m->ctx, n->n_args * sizeof *big);
		if (!big) {
			r->is_failed = true;
			return IR_NONE;
		}
		a = big;
	}
	for (uint32_t i = 0; i < n->n_args; i++)
		a[i] = r->map[ir_arg(&r->f->g, x, i)];
	ir_id id = r->is_failed ? IR_NONE
				: ir_graph_append(r->m->ctx, &r->g, n->op, a, n->n_args,
						  &n->attr, &n->type, n->loc);
	ir_free(r->m->ctx, big);
	if (id == IR_NONE)
		r->is_failed = true;
	return id;
}

/* The new graph, node by node; then it replaces the old one. */
static bool rebuild(fa_rebuild *r, const fa_act *act)
{
	ir_func *f = r->f;
	for (ir_id x = 0; x < f->g.n_nodes && !r->is_failed; x++) {
		switch (act[x].role) {
		case ROLE_KEEP:
			r->map[x] = copy_node(r, x);
			break;
		case ROLE_OUT:
			r->map[x] = emit_fused(r, act[x].match);
			break;
		case ROLE_PART:
			r->map[x] = emit_part(r, act[x].match, act[x].part, x);
			break;
		}
	}
	if (r->is_failed) {
		ir_graph_fini(r->m->ctx, &r->g);
		ir_error(r->m->ctx, f->loc, "fuse_attention: cannot rewrite the "
			 "additive attentions of @%s", f->name);
		return false;
	}
	for (uint32_t i = 0; i < f->n_inputs; i++)
		f->inputs[i] = r->map[f->inputs[i]];
	for (uint32_t o = 0; o < f->n_outputs; o++)
		f->outputs[o] = r->map[f->outputs[o]];
	ir_graph_fini(r->m->ctx, &f->g);
	f->g = r->g;
	return pass_graph_compact(r->m, f, NULL);
}

static bool is_softmax(ir_op op)
{
	return op == IR_OP_SOFTMAX || op == IR_OP_MASKED_SOFTMAX;
}

/* The matches of f into mt, their roles into act; the count. Two
 * matches never share a node (each owns its softmax's chain), but a
 * node claimed twice would be a matcher bug: the second match is then
 * dropped. */
static uint32_t find_matches(const ir_module *m, const ir_func *f,
			     const fz_uses *u, fa_match *mt, fa_act *act)
{
	uint32_t n = 0;
	for (ir_id i = 0; i < f->g.n_nodes; i++) {
		if (!is_softmax(f->g.nodes[i].op) || !fa_match_at(m, f, u, i, &mt[n]))
			continue;
		bool is_free = act[mt[n].out].role == ROLE_KEEP;
		for (uint32_t k = 0; k < mt[n].n_parts; k++)
			is_free = is_free && act[mt[n].parts[k]].role == ROLE_KEEP;
		if (!is_free)
			continue;
		act[mt[n].out] = (fa_act){ROLE_OUT, n, FA_DQ};
		for (uint32_t k = 0; k < mt[n].n_parts; k++)
			act[mt[n].parts[k]] = (fa_act){ROLE_PART, n, mt[n].roles[k]};
		n++;
	}
	return n;
}

bool pass_fuse_additive_func(ir_module *m, ir_func *f)
{
	uint32_t nn = f->g.n_nodes;
	fz_uses u = {0};
	fa_match *mt = ir_alloc(m->ctx, (nn + 1) * sizeof *mt);
	fa_act *act = ir_alloc(m->ctx, (nn + 1) * sizeof *act);
	fa_rebuild r = {.m = m, .f = f, .mt = mt};
	r.map = ir_alloc(m->ctx, (nn + 1) * sizeof *r.map);
	r.args = ir_alloc(m->ctx, (nn + 1) * sizeof *r.args);
	bool ok = mt && act && r.map && r.args && fz_uses_build(m->ctx, f, &u);
	uint32_t n = ok ? find_matches(m, f, &u, mt, act) : 0;
	for (uint32_t i = 0; i < n; i++)
		r.args[i].packed = r.args[i].rows = IR_NONE;
	if (!ok)
		ir_error(m->ctx, f->loc, "fuse_attention: out of memory");
	else if (n > 0)
		ok = rebuild(&r, act);
	fz_uses_fini(m->ctx, &u);
	ir_free(m->ctx, mt);
	ir_free(m->ctx, act);
	ir_free(m->ctx, r.map);
	ir_free(m->ctx, r.args);
	return ok;
}

void pass_fuse_additive_print(const ir_func *f, const fa_match *mt, FILE *out)
{
	fprintf(out, "fuses: add %%%u, tanh %%%u, matmul %%%u, %s", mt->a, mt->t,
		mt->proj, ir_op_table[f->g.nodes[mt->sm].op].name);
	if (mt->drop != IR_NONE)
		fprintf(out, ", dropout %%%u", mt->drop);
	fprintf(out, ", matmul %%%u into fused_additive_attention", mt->out);
	if (mt->has_grad)
		fputs(", and its gradient into fused_additive_attention_grad", out);
}
