/*
 * fuse_heads.c - the "fuse_heads" pass: the head split and merge of
 * multi-head attention become index arithmetic in the fused kernels
 * instead of copies.
 *
 * After fuse_attention, a multi-head attention reads its queries, keys
 * and values through head splits (a reshape, a permute that copies, a
 * reshape) of (B, T, h*w) tensors and its result is merged back by the
 * mirror image; a fused_attention_grad of heads = 1 reads the output's
 * gradient through a split too, and its three parts go through merges.
 * When every one of those matches (fuse_attention.h, pass_heads_match),
 * the fused node is rebuilt with attr heads = h reading the unsplit
 * tensors, and each reshape that read a merge reads the new node (or
 * the new part, reshaped to (B, T, h*w)) directly; the splits and merges
 * are then unused and the compaction drops them. An attention where
 * only some of it matches keeps its h = 1 form: the kernels give the
 * same numbers either way (docs/ops.md), only the copies differ.
 *
 * In training this pass runs before autodiff, whose rule gives the
 * gradient of a heads = h node the same heads; a fused_attention_grad
 * reaches it with heads = 1 only when the forward node kept them (its
 * result is also an output of the loss, say). Its parts are matched in
 * the form the rule writes them (a slice, a reshape to the part's type,
 * then the merge's own reshape), which simplify, when it runs, has
 * joined into one reshape before this pass: then the gradient keeps
 * its split heads, as the forward did in the loss.
 *
 * Like fuse_attention, the graph is rebuilt in one forward sweep
 * (pass_graph_builder), each node copied or replaced by its role.
 */
#include "passes.h"

#include "fuse_attention.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- uses ------------------------------------------------------------------- */

static uint32_t n_uses(const pass_graph_uses *u, ir_id id)
{
	return u->start[id + 1] - u->start[id];
}

static ir_id use_at(const pass_graph_uses *u, ir_id id, uint32_t k)
{
	return u->list[u->start[id] + k];
}

static const ir_node *node(const ir_func *f, ir_id id)
{
	return &f->g.nodes[id];
}

static bool why(pass_heads_match *hd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static bool why(pass_heads_match *hd, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(hd->why, sizeof hd->why, fmt, ap);
	va_end(ap);
	return false;
}

/* ---- the checks ------------------------------------------------------------------ */

static bool is_swap_12(const ir_node *n)
{
	const uint8_t *p = n->attr.permute.perm;
	return n->op == IR_OP_PERMUTE && n->type.rank == 4 && p[0] == 0 &&
	       p[1] == 2 && p[2] == 1 && p[3] == 3;
}

uint32_t pass_heads_split(const ir_func *f, ir_id x, ir_id *src)
{
	const ir_node *r2 = node(f, x);
	if (r2->op != IR_OP_RESHAPE)
		return 0;
	ir_id p = ir_arg(&f->g, x, 0);
	if (!is_swap_12(node(f, p)))
		return 0;
	ir_id r1 = ir_arg(&f->g, p, 0);
	const ir_type *t1 = &node(f, r1)->type;
	if (node(f, r1)->op != IR_OP_RESHAPE || t1->rank != 4 ||
	    !ir_dim_is_static(t1->dims[2]) || !ir_dim_is_static(t1->dims[3]))
		return 0;
	ir_id xs = ir_arg(&f->g, r1, 0);
	const ir_type *tx = &node(f, xs)->type;
	ir_dim b = t1->dims[0], t = t1->dims[1];
	int64_t h = t1->dims[2].coef, w = t1->dims[3].coef;
	ir_dim want_x[3] = {b, t, ir_dim_static(h * w)};
	ir_dim want_2[3] = {{b.coef * h, b.sym}, t, ir_dim_static(w)};
	if (h < 1 || h > UINT32_MAX || tx->dtype != IR_F32 ||
	    !ir_shape_is(tx, 3, want_x) || !ir_shape_is(&r2->type, 3, want_2))
		return 0;
	*src = xs;
	return (uint32_t)h;
}

/* valid, the h = 1 node's lengths (N) or (N, Q): the per-batch lengths
 * repeated for each head, or none; into hd->valid. */
static bool heads_valid(const ir_func *f, ir_id valid, pass_heads_match *hd)
{
	hd->valid = IR_NONE;
	if (valid == IR_NONE)
		return true;
	const ir_node *n = node(f, valid);
	if (n->op != IR_OP_REPEAT_INTERLEAVE || n->attr.interleave.axis != 0 ||
	    n->attr.interleave.n != hd->h)
		return why(hd,
			   "its valid lengths %%%u (%s) are not one per batch "
			   "element repeated for each of the %u heads",
			   valid, ir_op_table[n->op].name, hd->h);
	hd->valid = ir_arg(&f->g, valid, 0);
	return true;
}

bool pass_heads_operands(const ir_func *f, ir_id q, ir_id k, ir_id v,
			 ir_id valid, ir_id g, pass_heads_match *hd)
{
	static const char *const names[4] = {"queries", "keys", "values",
					     "output's gradient"};
	const ir_id ops[4] = {q, k, v, g};
	ir_id *src[4] = {&hd->q, &hd->k, &hd->v, &hd->g};
	memset(hd, 0, sizeof *hd);
	hd->g = IR_NONE;
	for (int i = 0; i < 4; i++) {
		if (ops[i] == IR_NONE)
			continue;
		uint32_t h = pass_heads_split(f, ops[i], src[i]);
		if (h == 0)
			return why(hd, "its %s %%%u (%s) are not a head split",
				   names[i], ops[i],
				   ir_op_table[node(f, ops[i])->op].name);
		ir_dim b = node(f, *src[i])->type.dims[0];
		if (i > 0 && (h != hd->h || !ir_dim_eq(b, hd->b)))
			return why(hd,
				   "its %s %%%u split off another number of "
				   "heads or batch than its queries",
				   names[i], ops[i]);
		hd->h = h;
		hd->b = b;
	}
	return heads_valid(f, valid, hd);
}

/* Node x is no output of f. */
static bool not_output(const ir_func *f, const pass_graph_uses *u, ir_id x,
		       pass_heads_match *hd)
{
	if (u->output[x] < 0)
		return true;
	return why(hd, "%%%u (%s) is output %d of @%s", x,
		   ir_op_table[node(f, x)->op].name, u->output[x], f->name);
}

/* p, the permute of a merge: read by reshapes alone. */
static bool merge_ends(const ir_func *f, const pass_graph_uses *u, ir_id p,
		       pass_heads_match *hd)
{
	if (!not_output(f, u, p, hd))
		return false;
	for (uint32_t k = 0; k < n_uses(u, p); k++) {
		ir_id e = use_at(u, p, k);
		if (node(f, e)->op != IR_OP_RESHAPE)
			return why(hd,
				   "its merged heads %%%u are also read by "
				   "%%%u (%s)",
				   p, e, ir_op_table[node(f, e)->op].name);
	}
	return true;
}

bool pass_heads_merged_only(const ir_func *f, const pass_graph_uses *u, ir_id x,
			    pass_heads_match *hd, const char *what)
{
	const ir_type *t = &node(f, x)->type;
	ir_dim want[4] = {hd->b, ir_dim_static(hd->h), t->dims[1], t->dims[2]};
	if (!not_output(f, u, x, hd))
		return false;
	for (uint32_t k = 0; k < n_uses(u, x); k++) {
		ir_id r = use_at(u, x, k);
		const ir_node *rn = node(f, r);
		if (rn->op != IR_OP_RESHAPE || !ir_shape_is(&rn->type, 4, want))
			return why(hd,
				   "its %s %%%u is read by %%%u (%s), not by "
				   "a merge of its heads",
				   what, x, r, ir_op_table[rn->op].name);
		if (!not_output(f, u, r, hd))
			return false;
		for (uint32_t j = 0; j < n_uses(u, r); j++) {
			ir_id p = use_at(u, r, j);
			if (!is_swap_12(node(f, p)))
				return why(hd,
					   "its %s %%%u is read by %%%u (%s), "
					   "not by a merge of its heads",
					   what, x, p,
					   ir_op_table[node(f, p)->op].name);
			if (!merge_ends(f, u, p, hd))
				return false;
		}
	}
	return true;
}

/* ---- the pass --------------------------------------------------------------------- */

/* What the rebuild does at a node. */
typedef enum fh_role {
	FH_KEEP,
	FH_FWD,  /* a fused_attention that takes its heads */
	FH_GRAD, /* a fused_attention_grad that takes its heads */
	FH_PART, /* the reshape of one part of such a gradient */
	FH_SKIP, /* the first reshape or the permute of a merge: gone */
	FH_END,  /* a reshape that read a merge: reads the new node */
} fh_role;

typedef struct fh_act {
	fh_role role;
	uint32_t rec;  /* FH_FWD, FH_GRAD, FH_PART: its record */
	uint32_t part; /* FH_PART: 0 dq, 1 dk, 2 dv */
} fh_act;

typedef struct fh_pass {
	const ir_module *m;
	const ir_func *f;
	pass_graph_uses u;
	fh_act *act;
	pass_heads_match *recs; /* per absorbed node */
	uint32_t n_recs;
} fh_pass;

/* The merges that read x: their reshapes and permutes go, their last
 * reshapes read what replaces x. */
static void mark_merges(fh_pass *p, ir_id x)
{
	const pass_graph_uses *u = &p->u;
	for (uint32_t k = 0; k < n_uses(u, x); k++) {
		ir_id r = use_at(u, x, k);
		p->act[r].role = FH_SKIP;
		for (uint32_t j = 0; j < n_uses(u, r); j++) {
			ir_id pm = use_at(u, r, j);
			p->act[pm].role = FH_SKIP;
			for (uint32_t i = 0; i < n_uses(u, pm); i++)
				p->act[use_at(u, pm, i)].role = FH_END;
		}
	}
}

/* The operands of fused node x, valid and g IR_NONE where absent, into
 * hd; the checks of pass_heads_operands. */
static bool operands_of(const ir_func *f, ir_id x, pass_heads_match *hd)
{
	const ir_node *n = node(f, x);
	bool is_grad = n->op == IR_OP_FUSED_ATTENTION_GRAD;
	uint32_t n_fixed = is_grad ? 4 : 3;
	ir_id a[5];
	for (uint32_t i = 0; i < n->n_args; i++)
		a[i] = ir_arg(&f->g, x, i);
	ir_id valid = n->n_args > n_fixed ? a[3] : IR_NONE;
	ir_id g = is_grad ? a[n->n_args - 1] : IR_NONE;
	return pass_heads_operands(f, a[0], a[1], a[2], valid, g, hd);
}

/* Slice s of packed gradient x: exactly one of its three parts, read by
 * reshapes to the part's type that are merged; marks them if `mark`. */
static bool part_slice(fh_pass *p, ir_id x, ir_id s, pass_heads_match *hd,
		       uint32_t rec, bool mark)
{
	const ir_func *f = p->f;
	const ir_node *sn = node(f, s);
	int64_t off = 0;
	int part = -1;
	for (int i = 0; i < 3 && part < 0 && sn->op == IR_OP_SLICE; i++) {
		ir_dim len;
		ir_type_numel_dim(p->m,
				  &node(f, ir_arg(&f->g, x, (uint32_t)i))->type,
				  &len);
		if (sn->attr.slice.axis == 0 && sn->attr.slice.step == 1 &&
		    sn->attr.slice.start == off &&
		    sn->attr.slice.end == off + len.coef)
			part = i;
		off += len.coef;
	}
	if (part < 0)
		return why(hd,
			   "its packed gradient is read by %%%u (%s), not by "
			   "a slice of one part",
			   s, ir_op_table[sn->op].name);
	if (!not_output(f, &p->u, s, hd))
		return false;
	const ir_type *pt = &node(f, ir_arg(&f->g, x, (uint32_t)part))->type;
	for (uint32_t k = 0; k < n_uses(&p->u, s); k++) {
		ir_id r = use_at(&p->u, s, k);
		if (node(f, r)->op != IR_OP_RESHAPE ||
		    !ir_type_eq(&node(f, r)->type, pt))
			return why(hd,
				   "a part of its packed gradient is read by "
				   "%%%u (%s)",
				   r, ir_op_table[node(f, r)->op].name);
		if (!pass_heads_merged_only(f, &p->u, r, hd, "gradient part"))
			return false;
		if (mark) {
			p->act[r] = (fh_act){FH_PART, rec, (uint32_t)part};
			mark_merges(p, r);
		}
	}
	return true;
}

/* The readers of packed gradient x: slices, or one reshape to [C, S]
 * rows read by slices; each checked (and marked) by part_slice. */
static bool grad_parts(fh_pass *p, ir_id x, pass_heads_match *hd, uint32_t rec,
		       bool mark)
{
	const pass_graph_uses *u = &p->u;
	if (!not_output(p->f, u, x, hd))
		return false;
	for (uint32_t k = 0; k < n_uses(u, x); k++) {
		ir_id y = use_at(u, x, k);
		const ir_node *yn = node(p->f, y);
		if (yn->op != IR_OP_RESHAPE || yn->type.rank != 2) {
			if (!part_slice(p, x, y, hd, rec, mark))
				return false;
			continue;
		}
		if (!not_output(p->f, u, y, hd))
			return false;
		for (uint32_t j = 0; j < n_uses(u, y); j++)
			if (!part_slice(p, x, use_at(u, y, j), hd, rec, mark))
				return false;
	}
	return true;
}

/* Decides for fused node x, one head per attention so far, and marks
 * the nodes of an absorption. */
static void consider(fh_pass *p, ir_id x)
{
	const ir_node *n = node(p->f, x);
	bool is_grad = n->op == IR_OP_FUSED_ATTENTION_GRAD;
	pass_heads_match *hd = &p->recs[p->n_recs];
	if ((n->op != IR_OP_FUSED_ATTENTION && !is_grad) ||
	    n->attr.attention.heads != 1 || !operands_of(p->f, x, hd))
		return;
	if (is_grad ? !grad_parts(p, x, hd, p->n_recs, false)
		    : !pass_heads_merged_only(p->f, &p->u, x, hd, "result"))
		return;
	p->act[x] = (fh_act){is_grad ? FH_GRAD : FH_FWD, p->n_recs, 0};
	if (is_grad)
		grad_parts(p, x, hd, p->n_recs, true);
	else
		mark_merges(p, x);
	p->n_recs++;
}

/* The node at old node x with its heads: operands the unsplit tensors. */
static ir_id emit_heads(pass_graph_builder *b, ir_id x,
			const pass_heads_match *hd)
{
	const ir_node *n = &b->f->g.nodes[x];
	ir_id args[5];
	uint32_t na = 0;
	args[na++] = b->map[hd->q];
	args[na++] = b->map[hd->k];
	args[na++] = b->map[hd->v];
	if (hd->valid != IR_NONE)
		args[na++] = b->map[hd->valid];
	if (hd->g != IR_NONE)
		args[na++] = b->map[hd->g];
	ir_attr a = n->attr;
	a.attention.heads = hd->h;
	return pass_graph_emit(b, n->op, args, na, &a, NULL, n->loc);
}

/* A part of a gradient with its heads: the slice as (B, T, h*w), the
 * layout of the operand it is the gradient of. */
static ir_id emit_part(pass_graph_builder *b, ir_id x, const fh_act *a,
		       const pass_heads_match *hd)
{
	const ir_id srcs[3] = {hd->q, hd->k, hd->v};
	ir_id s = b->map[ir_arg(&b->f->g, x, 0)];
	return pass_graph_emit(b, IR_OP_RESHAPE, &s, 1, NULL,
			       &b->f->g.nodes[srcs[a->part]].type,
			       b->f->g.nodes[x].loc);
}

/* Reshape x that read a merge: now reads what replaced the merged node,
 * itself when it has x's type. */
static ir_id emit_end(pass_graph_builder *b, ir_id x)
{
	const ir_graph *og = &b->f->g;
	ir_id merged = ir_arg(og, ir_arg(og, ir_arg(og, x, 0), 0), 0);
	ir_id y = b->map[merged];
	if (!b->is_failed && ir_type_eq(&b->g.nodes[y].type, &og->nodes[x].type))
		return y;
	return pass_graph_emit(b, IR_OP_RESHAPE, &y, 1, NULL,
			       &og->nodes[x].type, og->nodes[x].loc);
}

static bool rebuild(ir_module *m, ir_func *f, const fh_pass *p, ir_id *map)
{
	pass_graph_builder b = {.m = m, .f = f, .map = map};
	for (ir_id x = 0; x < f->g.n_nodes && !b.is_failed; x++) {
		const fh_act *a = &p->act[x];
		switch (a->role) {
		case FH_KEEP:
			map[x] = pass_graph_copy(&b, x);
			break;
		case FH_FWD:
		case FH_GRAD:
			map[x] = emit_heads(&b, x, &p->recs[a->rec]);
			break;
		case FH_PART:
			map[x] = emit_part(&b, x, a, &p->recs[a->rec]);
			break;
		case FH_SKIP:
			map[x] = IR_NONE;
			break;
		case FH_END:
			map[x] = emit_end(&b, x);
			break;
		}
	}
	return pass_graph_finish(&b, "fuse_heads: cannot rewrite");
}

static bool heads_func(ir_module *m, ir_func *f)
{
	uint32_t nn = f->g.n_nodes;
	fh_pass p = {.m = m, .f = f};
	p.act = ir_alloc(m->ctx, (nn + 1) * sizeof *p.act);
	p.recs = ir_alloc(m->ctx, (nn + 1) * sizeof *p.recs);
	ir_id *map = ir_alloc(m->ctx, (nn + 1) * sizeof *map);
	bool ok = p.act && p.recs && map &&
		  pass_graph_uses_build(m->ctx, f, &p.u);
	for (ir_id x = 0; ok && x < nn; x++)
		consider(&p, x);
	if (!ok)
		ir_error(m->ctx, f->loc, "fuse_heads: out of memory");
	else if (p.n_recs > 0)
		ok = rebuild(m, f, &p, map);
	pass_graph_uses_fini(m->ctx, &p.u);
	ir_free(m->ctx, p.act);
	ir_free(m->ctx, p.recs);
	ir_free(m->ctx, map);
	return ok;
}

bool pass_fuse_heads(ir_module *m)
{
	for (uint32_t fi = 0; fi < m->n_funcs; fi++)
		if (!heads_func(m, m->funcs[fi]))
			return false;
	return true;
}
