/*
 * cg_lower_profile.c - the instrumentation of a profiled program
 * (cg_program_options.is_profiled, --profile): each entry point reads the
 * CPU's cycle counter (llvm.readcyclecounter: rdtsc on x86-64, a constant
 * rate on CPUs since 2008) before and after each kernel call, and adds
 * the call and the difference to its site's counters, an i64 pair in the
 * module's global `SYMBOL.profile`. The adds are atomic because the
 * training driver runs one entry point in several threads at once (its
 * shards), and a static schedule runs pieces of one kernel on several.
 *
 * The sites' work per call (FLOPs of matmuls and attention, bytes of the
 * rest) comes from the concrete shapes here, so the report needs no IR.
 * Nothing of this is emitted for a program that is not profiled: its
 * code, and every program's results, stay the same.
 */
#include "cg_entry.h"
#include "passes.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static double numel(const cg_lower *L, ir_id id, const ir_graph *g)
{
	return (double)cg_lower_numel(L, &g->nodes[id].type);
}

/* Dimension d counted from the end (1 = the last) of node id's type. */
static double dim_from_end(const cg_lower *L, const ir_graph *g, ir_id id, int d)
{
	int64_t dims[IR_MAX_RANK];
	int r = cg_lower_dims(L, &g->nodes[id].type, dims);
	return r >= d ? (double)dims[r - d] : 1.0;
}

/* The valid lengths of attention node id along its queries when they
 * are known from the graph alone: the valid operand a 1-D arange
 * (start + q * step, i32) along the queries, reshaped and broadcast
 * only along the other axes (a causal mask: valid length q + 1 for
 * query q). Returns the arange node, or IR_NONE (no valid lengths, one
 * a batch element, or computed at run time). */
static ir_id valid_arange(const cg_lower *L, const ir_graph *g, ir_id id,
			  double nq)
{
	const ir_node *n = &g->nodes[id];
	bool is_grad = n->op == IR_OP_FUSED_ATTENTION_GRAD;
	if (n->n_args != (is_grad ? 5u : 4u))
		return IR_NONE;
	ir_id x = ir_arg(g, id, 3);
	if (g->nodes[x].type.rank != 2 || dim_from_end(L, g, x, 1) != nq)
		return IR_NONE;
	while (g->nodes[x].op == IR_OP_RESHAPE ||
	       g->nodes[x].op == IR_OP_BROADCAST) {
		ir_id a = ir_arg(g, x, 0);
		/* the queries stay the last axis, and a reshape adds or
		 * removes only axes of 1 */
		if (dim_from_end(L, g, a, 1) != nq ||
		    (g->nodes[x].op == IR_OP_RESHAPE && numel(L, a, g) != nq))
			return IR_NONE;
		x = a;
	}
	return g->nodes[x].op == IR_OP_ARANGE && numel(L, x, g) == nq ? x
								      : IR_NONE;
}

/* The (query, key) pairs of one attention whose weights the result
 * needs: the nq x nk square, or, where valid lengths known from the
 * graph hide keys (valid_arange, a causal mask), the keys below each
 * query's length: nq (nq + 1) / 2 for a causal square. A query of length
 * 0 or less counts every key (its weights are all equal, and every
 * value counts). */
static double attention_pairs(const cg_lower *L, const ir_graph *g, ir_id id,
			      double nq, double nk)
{
	ir_id r = valid_arange(L, g, id, nq);
	if (r == IR_NONE)
		return nq * nk;
	double start = g->nodes[r].attr.arange.start;
	double step = g->nodes[r].attr.arange.step, pairs = 0;
	for (double q = 0; q < nq; q++) {
		double len = trunc(start + q * step); /* as an i32 arange */
		pairs += len <= 0 ? nk : (len < nk ? len : nk);
	}
	return pairs;
}

/* FLOPs of one attention call: two products of an (N, Q, K) score
 * matrix, with the queries' width (or the additive score's features)
 * and the values' width, over the pairs the result needs
 * (attention_pairs: the triangle of a causal mask); its gradient counts
 * the four products of the backward pass, twice the forward's. */
static double attention_flops(const cg_lower *L, const ir_graph *g, ir_id id,
			      bool is_additive)
{
	ir_id q = ir_arg(g, id, 0), k = ir_arg(g, id, 1);
	ir_id v = ir_arg(g, id, is_additive ? 3 : 2);
	double nq = dim_from_end(L, g, q, 2), d = dim_from_end(L, g, q, 1);
	double nk = dim_from_end(L, g, k, 2), dv = dim_from_end(L, g, v, 1);
	double n = numel(L, q, g) / (nq * d);
	double pairs = is_additive ? nq * nk : attention_pairs(L, g, id, nq, nk);
	return 2.0 * n * pairs * (d + dv);
}

/* An if chain, not a switch: all but these few ops count no FLOPs. */
static double node_flops(const cg_lower *L, const ir_graph *g, ir_id id)
{
	const ir_node *n = &g->nodes[id];
	if (n->op == IR_OP_MATMUL) {
		ir_id a = ir_arg(g, id, 0);
		double k = dim_from_end(L, g, a, n->attr.matmul.ta ? 2 : 1);
		return 2.0 * numel(L, id, g) * k;
	}
	bool is_additive = n->op == IR_OP_FUSED_ADDITIVE_ATTENTION ||
			   n->op == IR_OP_FUSED_ADDITIVE_ATTENTION_GRAD;
	bool is_grad = n->op == IR_OP_FUSED_ATTENTION_GRAD ||
		       n->op == IR_OP_FUSED_ADDITIVE_ATTENTION_GRAD;
	if (!is_additive && !is_grad && n->op != IR_OP_FUSED_ATTENTION)
		return 0.0;
	return (is_grad ? 2.0 : 1.0) * attention_flops(L, g, id, is_additive);
}

/* Whether x is among the first n of xs. */
static bool seen(const ir_id *xs, uint32_t n, ir_id x)
{
	for (uint32_t i = 0; i < n; i++)
		if (xs[i] == x)
			return true;
	return false;
}

/* Bytes a call reads and writes: its result and each buffer it reads
 * (the operands it does not compute and its fused trees' leaves), once
 * however many times the trees read it. */
static double node_bytes(const entry_gen *e, ir_id id, const node_call *c)
{
	const ir_graph *g = &e->fn->g;
	ir_id read[2 * CG_KERNEL_MAX_IN];
	uint32_t n = 0;
	for (uint32_t a = 0; a < g->nodes[id].n_args; a++) {
		ir_id x = ir_arg(g, id, a);
		if (!pass_fuse_ew_is_in(e->plan.into, x, id) &&
		    !seen(read, n, x) && n < 2 * CG_KERNEL_MAX_IN)
			read[n++] = x;
	}
	for (uint32_t i = 0; i < c->n_extra; i++)
		if (!seen(read, n, c->extra[i]) && n < 2 * CG_KERNEL_MAX_IN)
			read[n++] = c->extra[i];
	double b = numel(e->L, id, g);
	for (uint32_t i = 0; i < n; i++)
		b += numel(e->L, read[i], g);
	return 4.0 * b; /* every dtype of the backend is 4 bytes */
}

/* The nodes computed inside node id's kernel: its fused trees, found
 * from id down (operands come before their readers), each operand the
 * plan computes inside its reader (pass_fuse_ew_is_in: fused into it or
 * into every reader). in is scratch of a flag per node. */
static uint32_t fused_into(const entry_gen *e, ir_id id, bool *in)
{
	const ir_graph *g = &e->fn->g;
	uint32_t n = 0;
	memset(in, 0, (id + 1) * sizeof *in);
	in[id] = true;
	for (ir_id u = id + 1; u-- > 0;) {
		if (!in[u])
			continue;
		for (uint32_t a = 0; a < g->nodes[u].n_args; a++) {
			ir_id x = ir_arg(g, u, a);
			if (x < u && !in[x] &&
			    pass_fuse_ew_is_in(e->plan.into, x, u)) {
				in[x] = true;
				n++;
			}
		}
	}
	return n;
}

/* backward[i]: whether node i of fn is read by its "grad.<param>"
 * outputs only (cg_profile_site.is_backward); all false when fn has no
 * such output. Operands have smaller ids than their uses. */
static void mark_backward(const ir_func *fn, bool *backward)
{
	const ir_graph *g = &fn->g;
	bool has_grad = false;
	for (ir_id i = 0; i < g->n_nodes; i++)
		backward[i] = false;
	for (uint32_t o = 0; o < fn->n_outputs; o++) {
		bool is_grad = fn->output_names &&
			       strncmp(fn->output_names[o], "grad.", 5) == 0;
		has_grad |= is_grad;
		/* backward[] holds "the loss reads it" until the end */
		if (!is_grad)
			backward[fn->outputs[o]] = true;
	}
	for (ir_id i = g->n_nodes; i-- > 0;) {
		if (!backward[i])
			continue;
		const ir_id *a = ir_node_args(g, &g->nodes[i]);
		for (uint32_t k = 0; k < g->nodes[i].n_args; k++)
			backward[a[k]] = true;
	}
	for (ir_id i = 0; i < g->n_nodes; i++)
		backward[i] = has_grad && !backward[i];
}

bool cg_profile_entry_make(entry_gen *e, const node_call *ks,
			   const char *symbol, cg_profile_site **sites,
			   uint32_t *n_sites, uint32_t **site_of)
{
	const ir_graph *g = &e->fn->g;
	uint32_t n = 1;
	for (ir_id i = 0; i < g->n_nodes; i++)
		n += ks[i].ref.fn != NULL;
	*sites = ir_alloc(e->L->ctx, n * sizeof **sites);
	*site_of = ir_alloc(e->L->ctx, (g->n_nodes + 1) * sizeof **site_of);
	bool *in = ir_alloc(e->L->ctx, (g->n_nodes + 1) * sizeof *in);
	bool *backward = ir_alloc(e->L->ctx,
				  (g->n_nodes + 1) * sizeof *backward);
	if (!*sites || !*site_of || !in || !backward) {
		ir_free(e->L->ctx, in);
		ir_free(e->L->ctx, backward);
		return false;
	}
	mark_backward(e->fn, backward);
	(*sites)[0] = (cg_profile_site){.node = IR_NONE,
					.kind = e->fn->name,
					.loc = e->fn->loc};
	uint32_t s = 1;
	for (ir_id i = 0; i < g->n_nodes; i++) {
		(*site_of)[i] = 0;
		if (!ks[i].ref.fn)
			continue;
		/* An add computing its matmul's product shows as the matmul. */
		ir_id shown = cg_lower_epilogue_matmul(g, e->plan.into, i);
		if (shown == IR_NONE)
			shown = cg_lower_epilogue_lng(g, e->plan.into, i);
		shown = shown == IR_NONE ? i : shown;
		const ir_node *nd = &g->nodes[shown];
		(*sites)[s] = (cg_profile_site){.node = i,
						.kind = ir_op_table[nd->op].name,
						.n_fused = fused_into(e, i, in),
						.loc = nd->loc,
						.flops = node_flops(e->L, g,
								    shown),
						.bytes = node_bytes(e, i, &ks[i]),
						.is_backward = backward[i]};
		(*site_of)[i] = s++;
	}
	ir_free(e->L->ctx, in);
	ir_free(e->L->ctx, backward);
	*n_sites = n;
	char name[300];
	snprintf(name, sizeof name, "%s.profile", symbol);
	LLVMContextRef c = LLVMGetModuleContext(e->L->mod);
	LLVMTypeRef t = LLVMArrayType2(LLVMInt64TypeInContext(c),
				       2 * (uint64_t)n);
	e->prof = LLVMAddGlobal(e->L->mod, t, name);
	LLVMSetInitializer(e->prof, LLVMConstNull(t));
	LLVMSetAlignment(e->prof, 64);
	e->prof_site = *site_of;
	return true;
}

LLVMValueRef cg_profile_start(entry_gen *e)
{
	if (!e->prof)
		return NULL;
	return cg_intrinsic(&e->f, "llvm.readcyclecounter", NULL, 0, NULL, 0);
}

static void add_at(cg_fn *f, LLVMValueRef counters, uint64_t i, LLVMValueRef v)
{
	LLVMValueRef at = LLVMBuildInBoundsGEP2(f->b, cg_t_i64(f), counters,
						&(LLVMValueRef){
							cg_i64(f, (int64_t)i)},
						1, "");
	LLVMBuildAtomicRMW(f->b, LLVMAtomicRMWBinOpAdd, at, v,
			   LLVMAtomicOrderingMonotonic, 0);
}

void cg_profile_add(entry_gen *e, uint32_t site, LLVMValueRef t0, bool is_call)
{
	if (!t0)
		return;
	cg_fn *f = &e->f;
	LLVMValueRef t1 = cg_intrinsic(f, "llvm.readcyclecounter", NULL, 0,
				       NULL, 0);
	if (is_call)
		add_at(f, e->prof, 2 * (uint64_t)site, cg_i64(f, 1));
	add_at(f, e->prof, 2 * (uint64_t)site + 1,
	       LLVMBuildSub(f->b, t1, t0, ""));
}

void cg_profile_clock_fn(cg_lower *L, const char *name)
{
	cg_fn f;
	LLVMContextRef c = LLVMGetModuleContext(L->mod);
	cg_fn_begin(&f, L->mod, name,
		    LLVMFunctionType(LLVMInt64TypeInContext(c), NULL, 0, 0),
		    false);
	LLVMBuildRet(f.b, cg_intrinsic(&f, "llvm.readcyclecounter", NULL, 0,
				       NULL, 0));
	cg_fn_end(&f);
}
