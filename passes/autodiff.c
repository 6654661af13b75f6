/*
 * autodiff.c - reverse-mode automatic differentiation as a graph
 * transformation (pass_autodiff).
 *
 * For a loss function `loss` the pass adds a function `loss_grad` with the
 * same inputs that returns the loss and the gradient of the loss with
 * respect to every parameter of the module. Its graph is the forward
 * graph, copied node for node, followed by the backward nodes: starting
 * from d loss / d loss = 1, the nodes are visited from the loss back to
 * the first, and each node's gradient, complete by then because all its
 * users come after it, goes through its op's rule (grad_rules.c) into its
 * operands. Only nodes that depend on a parameter get gradients; fan-in
 * is summed. The result is ordinary IR: the pipeline optimizes it, the
 * printer shows it, the interpreter and the LLVM backend run it.
 */
#include "passes.h"

#include "autodiff.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

/* needs[i]: node i is f32, differentiable, and a parameter reaches it. */
static void mark_needs(const ir_func *f, bool *needs)
{
	const ir_graph *g = &f->g;
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		const ir_node *n = &g->nodes[i];
		unsigned flags = ir_op_table[n->op].flags;
		needs[i] = false;
		if (n->type.dtype != IR_F32 || (flags & IR_OPF_NODIFF))
			continue;
		if (n->op == IR_OP_PARAM) {
			needs[i] = true;
			continue;
		}
		const ir_id *args = ir_node_args(g, n);
		for (uint32_t a = 0; a < n->n_args && !needs[i]; a++)
			needs[i] = needs[args[a]];
	}
}

/* Into *stop, a node of an op without a gradient (sort) whose f32 result
 * the loss depends on, through f32 nodes, and that a parameter reaches,
 * or IR_NONE: the gradient would stop there, and the parameter's
 * gradient through it would silently be 0. needs[] as mark_needs leaves
 * it. False when out of memory. */
static bool gradient_stop(pass_ad *ad, ir_id loss, ir_id *stop)
{
	const ir_graph *g = &ad->f->g;
	ir_id *via = ir_alloc(ad->m->ctx, (loss + 1) * sizeof *via);
	if (!via)
		return false;
	for (ir_id i = 0; i <= loss; i++) {
		const ir_node *n = &g->nodes[i];
		const ir_id *args = ir_node_args(g, n);
		bool is_nodiff = ir_op_table[n->op].flags & IR_OPF_NODIFF;
		via[i] = IR_NONE;
		if (n->type.dtype != IR_F32)
			continue;
		for (uint32_t a = 0; a < n->n_args && via[i] == IR_NONE; a++) {
			if (is_nodiff && ad->needs[args[a]])
				via[i] = i;
			else if (!is_nodiff)
				via[i] = via[args[a]];
		}
	}
	*stop = via[loss];
	ir_free(ad->m->ctx, via);
	return true;
}

bool pass_ad_wants(const pass_ad *ad, ir_id x)
{
	return x < ad->n_fwd && ad->needs[x];
}

void pass_ad_accum(pass_ad *ad, ir_id x, ir_id g)
{
	if (!pass_ad_wants(ad, x))
		return;
	if (g == IR_NONE) {
		ad->is_failed = true;
		return;
	}
	if (ad->is_failed)
		return;
	assert(ir_type_eq(&ad->f->g.nodes[x].type, &ad->f->g.nodes[g].type));
	ad->adj[x] = ad->adj[x] == IR_NONE
			     ? g
			     : pass_ad_op2(ad, IR_OP_ADD, ad->adj[x], g, NULL);
}

#define NO_PIECE UINT32_MAX

void pass_ad_accum_piece(pass_ad *ad, ir_id x, ir_id g, int axis, int64_t start)
{
	if (!pass_ad_wants(ad, x))
		return;
	if (g == IR_NONE || ad->is_failed ||
	    !ir_grow(ad->m->ctx, (void **)&ad->pieces, &ad->pieces_cap,
		     ad->n_pieces + 1, sizeof *ad->pieces)) {
		ad->is_failed = true;
		return;
	}
	ad->pieces[ad->n_pieces] = (pass_ad_piece){g, axis, start,
						   ad->first_piece[x]};
	ad->first_piece[x] = ad->n_pieces++;
}

static bool piece_before(const pass_ad_piece *a, const pass_ad_piece *b)
{
	return a->axis != b->axis ? a->axis < b->axis : a->start < b->start;
}

/* The pieces of x's gradient, sorted by axis and start, into order[]. */
static uint32_t sorted_pieces(const pass_ad *ad, ir_id x, uint32_t *order)
{
	uint32_t n = 0;
	for (uint32_t k = ad->first_piece[x]; k != NO_PIECE;
	     k = ad->pieces[k].next) {
		uint32_t j = n++;
		for (; j > 0 &&
		       piece_before(&ad->pieces[k], &ad->pieces[order[j - 1]]);
		     j--)
			order[j] = order[j - 1];
		order[j] = k;
	}
	return n;
}

/* Zeros of x's type with `len` along axis, appended to parts if len > 0. */
static void add_gap(pass_ad *ad, ir_id x, int axis, int64_t len, ir_id *parts,
		    uint32_t *n)
{
	if (len <= 0)
		return;
	ir_type t = pass_ad_type(ad, x);
	t.dims[axis] = ir_dim_static(len);
	parts[(*n)++] = pass_ad_zeros(ad, &t);
}

/* One concatenation of the not yet used pieces (order[0 .. n)) that
 * follow each other without overlap along the first one's axis, zeros in
 * the gaps; marks them used and adds it to x's gradient. */
static void assemble_run(pass_ad *ad, ir_id x, const uint32_t *order,
			 uint32_t n, bool *used, ir_id *parts)
{
	int axis = -1;
	int64_t end = 0;
	uint32_t n_parts = 0;
	for (uint32_t i = 0; i < n; i++) {
		const pass_ad_piece *p = &ad->pieces[order[i]];
		if (used[i] ||
		    (axis >= 0 && (p->axis != axis || p->start < end)))
			continue;
		axis = p->axis;
		add_gap(ad, x, axis, p->start - end, parts, &n_parts);
		parts[n_parts++] = p->g;
		end = p->start + pass_ad_type(ad, p->g).dims[axis].coef;
		used[i] = true;
	}
	add_gap(ad, x, axis, pass_ad_type(ad, x).dims[axis].coef - end, parts,
		&n_parts);
	pass_ad_accum(ad, x, pass_ad_concat(ad, parts, n_parts, axis));
}

/* Adds the pieces of x's gradient into adj[x]: each run of pieces that do
 * not overlap becomes one concatenation with zeros in the gaps. */
static void assemble_pieces(pass_ad *ad, ir_id x)
{
	uint32_t n = 0;
	for (uint32_t k = ad->first_piece[x]; k != NO_PIECE;
	     k = ad->pieces[k].next)
		n++;
	if (n == 0)
		return;
	uint32_t *order = ir_alloc(ad->m->ctx, n * sizeof *order);
	bool *used = ir_alloc(ad->m->ctx, n * sizeof *used);
	ir_id *parts = ir_alloc(ad->m->ctx, (2 * n + 1) * sizeof *parts);
	if (order && used && parts) {
		sorted_pieces(ad, x, order);
		for (uint32_t left = n; left > 0 && !ad->is_failed;) {
			assemble_run(ad, x, order, n, used, parts);
			left = 0;
			for (uint32_t i = 0; i < n; i++)
				left += !used[i];
		}
	} else {
		ad->is_failed = true;
	}
	ir_free(ad->m->ctx, order);
	ir_free(ad->m->ctx, used);
	ir_free(ad->m->ctx, parts);
}

/* "<prefix><name>" in the module's arena, or NULL. */
static char *concat_name(ir_module *m, const char *prefix, const char *name)
{
	size_t n = strlen(prefix) + strlen(name) + 1;
	char *s = ir_arena_alloc(&m->arena, n);
	if (s)
		snprintf(s, n, "%s%s", prefix, name);
	return s;
}

/* Copies src's arguments and graph into the new function f. */
static bool copy_forward(ir_module *m, const ir_func *src, ir_func *f)
{
	ir_ctx *ctx = m->ctx;
	const ir_graph *g = &src->g;
	uint32_t n_in = src->n_inputs;
	if (!ir_grow(ctx, (void **)&f->g.nodes, &f->g.nodes_cap, g->n_nodes,
		     sizeof *g->nodes) ||
	    !ir_grow(ctx, (void **)&f->g.args, &f->g.args_cap, g->n_args,
		     sizeof *g->args))
		return false;
	memcpy(f->g.nodes, g->nodes, g->n_nodes * sizeof *g->nodes);
	memcpy(f->g.args, g->args, g->n_args * sizeof *g->args);
	f->g.n_nodes = g->n_nodes;
	f->g.n_args = g->n_args;
	f->is_export = true;
	f->n_inputs = n_in;
	f->inputs = ir_arena_alloc(&m->arena, (n_in + 1) * sizeof *f->inputs);
	f->input_names = ir_arena_alloc(&m->arena,
					(n_in + 1) * sizeof *f->input_names);
	if (!f->inputs || !f->input_names)
		return false;
	for (uint32_t i = 0; i < n_in; i++) {
		f->inputs[i] = src->inputs[i];
		f->input_names[i] = src->input_names ? src->input_names[i]
						     : NULL;
	}
	if (src->example) {
		f->example = ir_arena_alloc(&m->arena,
					    (n_in + 1) * sizeof *f->example);
		if (!f->example)
			return false;
		for (uint32_t i = 0; i < n_in; i++)
			f->example[i] = src->example[i];
	}
	return true;
}

/* Visits the forward nodes from the loss back, applying each rule. */
static void backward(pass_ad *ad, ir_id loss)
{
	ad->loc = ad->f->g.nodes[loss].loc;
	if (ad->needs[loss])
		ad->adj[loss] = pass_ad_scalar(ad, 1);
	for (ir_id i = loss + 1; i-- > 0 && !ad->is_failed;) {
		ir_node n = ad->f->g.nodes[i];
		ad->loc = n.loc;
		assemble_pieces(ad, i);
		if (ad->adj[i] != IR_NONE && !ad->is_failed)
			pass_ad_rules[n.op](ad, i, ad->adj[i]);
	}
}

/* The gradient of parameter p: its PARAM nodes' gradients (uses[0..n),
 * in graph order) summed, or zeros of its type if the loss does not
 * depend on it. */
static ir_id param_grad(pass_ad *ad, uint32_t p, const ir_id *uses, uint32_t n)
{
	ir_id sum = IR_NONE;
	for (uint32_t u = 0; u < n; u++) {
		ir_id i = uses[u];
		ad->loc = ad->f->g.nodes[i].loc;
		sum = sum == IR_NONE ? ad->adj[i]
				     : pass_ad_op2(ad, IR_OP_ADD, sum,
						   ad->adj[i], NULL);
	}
	if (sum != IR_NONE)
		return sum;
	ad->loc = ad->m->params[p].loc;
	return pass_ad_zeros(ad, &ad->m->params[p].type);
}

/* Each parameter's PARAM nodes with a gradient, in graph order:
 * uses[first[p] .. first[p + 1]), found in one pass over the forward
 * nodes rather than one per parameter. */
static bool param_uses(pass_ad *ad, uint32_t *first, ir_id *uses)
{
	const ir_graph *g = &ad->f->g;
	uint32_t n_params = ad->m->n_params;
	for (ir_id i = 0; i < ad->n_fwd; i++)
		if (g->nodes[i].op == IR_OP_PARAM && ad->adj[i] != IR_NONE)
			first[g->nodes[i].attr.param_index + 1]++;
	for (uint32_t p = 0; p < n_params; p++)
		first[p + 1] += first[p];
	uint32_t *fill = ir_alloc(ad->m->ctx, (n_params + 1) * sizeof *fill);
	if (!fill)
		return false;
	memcpy(fill, first, n_params * sizeof *fill);
	for (ir_id i = 0; i < ad->n_fwd; i++)
		if (g->nodes[i].op == IR_OP_PARAM && ad->adj[i] != IR_NONE)
			uses[fill[g->nodes[i].attr.param_index]++] = i;
	ir_free(ad->m->ctx, fill);
	return true;
}

/* Outputs: the loss, then grad.<name> of every parameter in order. */
static bool set_outputs(pass_ad *ad, ir_id loss)
{
	ir_module *m = ad->m;
	ir_func *f = ad->f;
	uint32_t n = 1 + m->n_params;
	f->outputs = ir_arena_alloc(&m->arena, n * sizeof *f->outputs);
	f->output_names = ir_arena_alloc(&m->arena, n * sizeof *f->output_names);
	uint32_t *first = ir_alloc(m->ctx, (n + 1) * sizeof *first);
	ir_id *uses = ir_alloc(m->ctx, (ad->n_fwd + 1) * sizeof *uses);
	bool ok = f->outputs && f->output_names && first && uses &&
		  param_uses(ad, first, uses);
	if (ok) {
		f->outputs[0] = loss;
		f->output_names[0] = "loss";
	}
	for (uint32_t p = 0; ok && p < m->n_params; p++) {
		f->outputs[1 + p] = param_grad(ad, p, uses + first[p],
					       first[p + 1] - first[p]);
		f->output_names[1 + p] = concat_name(m, "grad.",
						     m->params[p].name);
		ok = !ad->is_failed && f->output_names[1 + p];
	}
	ir_free(m->ctx, first);
	ir_free(m->ctx, uses);
	if (ok)
		f->n_outputs = n;
	return ok;
}

/* Checks that entry exists, returns a scalar f32 first, and that its
 * gradient function's name is free; reports what is wrong. */
static ir_func *check_entry(ir_module *m, const char *entry,
			    const char *grad_name)
{
	ir_func *src = ir_module_find_func(m, entry);
	if (!src) {
		ir_error(m->ctx, (ir_loc){0},
			 "autodiff: no function '%s' to "
			 "differentiate",
			 entry);
		return NULL;
	}
	if (src->n_outputs == 0) {
		ir_error(m->ctx, src->loc,
			 "autodiff: '%s' returns nothing; "
			 "a loss must be a scalar f32",
			 entry);
		return NULL;
	}
	const ir_type *t = &src->g.nodes[src->outputs[0]].type;
	if (t->dtype != IR_F32 || t->rank != 0) {
		char dims[160];
		ir_type_format(m, t, dims, sizeof dims);
		ir_error(m->ctx, src->loc,
			 "autodiff: the loss '%s' returns "
			 "%s[%s]; a loss must be a scalar f32 (sum or mean it)",
			 entry, ir_dtype_name(t->dtype), dims);
		return NULL;
	}
	if (ir_module_find_func(m, grad_name)) {
		ir_error(m->ctx, src->loc,
			 "autodiff: the module already has a "
			 "function '%s'",
			 grad_name);
		return NULL;
	}
	return src;
}

/* Builds the gradient function f of src; false after reporting. */
static bool build_grad(ir_module *m, const ir_func *src, ir_func *f)
{
	ir_id loss = src->outputs[0];
	int n_errors = m->ctx->n_errors;
	pass_ad ad = {.m = m, .f = f, .n_fwd = src->g.n_nodes};
	for (int i = 0; i < 4; i++)
		ad.scalars[i] = IR_NONE;
	ad.needs = ir_alloc(m->ctx, (ad.n_fwd + 1) * sizeof *ad.needs);
	ad.adj = ir_alloc(m->ctx, (ad.n_fwd + 1) * sizeof *ad.adj);
	ad.first_piece = ir_alloc(m->ctx,
				  (ad.n_fwd + 1) * sizeof *ad.first_piece);
	bool ok = ad.needs && ad.adj && ad.first_piece &&
		  copy_forward(m, src, f);
	if (ok) {
		for (ir_id i = 0; i < ad.n_fwd; i++) {
			ad.adj[i] = IR_NONE;
			ad.first_piece[i] = NO_PIECE;
		}
		mark_needs(f, ad.needs);
		ir_id stop = IR_NONE;
		ok = gradient_stop(&ad, loss, &stop);
		if (ok && stop != IR_NONE) {
			ir_error(m->ctx, f->g.nodes[stop].loc,
				 "autodiff: %s has no gradient, yet the loss "
				 "depends on a parameter through it: its "
				 "gradient would silently be 0 there",
				 ir_op_table[f->g.nodes[stop].op].name);
			ok = false;
		}
	}
	if (ok) {
		backward(&ad, loss);
		ok = !ad.is_failed && set_outputs(&ad, loss);
	}
	if (!ok && m->ctx->n_errors == n_errors)
		ir_error(m->ctx, src->loc, "out of memory");
	ir_free(m->ctx, ad.needs);
	ir_free(m->ctx, ad.adj);
	ir_free(m->ctx, ad.first_piece);
	ir_free(m->ctx, ad.pieces);
	return ok;
}

bool pass_autodiff(ir_module *m, const char *entry)
{
	char *grad_name = concat_name(m, entry, "_grad");
	if (!grad_name) {
		ir_error(m->ctx, (ir_loc){0}, "out of memory");
		return false;
	}
	ir_func *src = check_entry(m, entry, grad_name);
	if (!src)
		return false;
	uint32_t n_consts = m->n_consts;
	ir_func *f = ir_module_add_func(m, grad_name, src->loc);
	if (!f) {
		ir_error(m->ctx, src->loc, "out of memory");
		return false;
	}
	if (build_grad(m, src, f))
		return true;
	/* Leave the module as it was: the new function is the last one, the
	 * new constants (their data stays in the arena) the last ones. */
	ir_graph_fini(m->ctx, &f->g);
	m->n_funcs--;
	m->n_consts = n_consts;
	return false;
}
