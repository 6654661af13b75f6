/*
 * cg_lower.c - the program: binds the symbols, lays out the parameter
 * block, plans each function's scratch slab, generates one kernel per
 * computing node and the entry point that calls them in order, then
 * compiles everything as one cg_module (cg_program.h).
 *
 * Elementwise fusion (pass_fuse_ew_plan, cg_fuse.c): a node the plan
 * fuses into its consumer gets no kernel and no buffer; the consumer's
 * kernel computes it where it reads it, from the buffers it reads, which
 * therefore stay alive until that kernel runs.
 *
 * Memory: each computing node writes its own dense buffer in the scratch
 * slab, placed by pass_memplan_blocks (greedy first fit over lifetimes);
 * a reshape owns nothing and reads its operand's buffer, which stays
 * alive until the reshape's last reader. Inputs come from the caller,
 * parameters from the params block, constants from private globals.
 * A kernel whose outer loop has enough work runs through libgomp's
 * GOMP_parallel, split statically into equal ranges of that loop.
 */
#include "cg_entry.h"
#include "cg_gemm.h"
#include "cg_lower.h"
#include "passes.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct cg_entry {
	const ir_func *fn;
	char symbol[256];
	size_t scratch_bytes;
	uint32_t n_calls;       /* kernel calls of one call */
	cg_program_sched sched; /* its static schedule, if it has one */
	attnrt_tensor_info *inputs, *outputs;
	attnrt_entry_fn entry;
	cg_profile_site *sites; /* when profiled: n_sites, site 0 the entry */
	uint32_t n_sites;
	uint64_t *counters; /* after the JIT: 2 per site (calls, cycles) */
} cg_entry;

struct cg_program {
	ir_ctx *ctx;
	const ir_module *m;
	int64_t *syms;
	cg_module *cm;
	attnrt_param_info *params; /* m->n_params */
	size_t params_bytes;
	cg_entry *entries;
	uint32_t n_entries;
	uint32_t n_kernels, n_parallel;
	uint32_t n_fused; /* fused nodes over all entries */
	int64_t grain;
	bool is_serial, no_fuse, is_profiled;
	char clock_name[300];    /* when profiled: the cycle counter's reader */
	uint64_t (*clock)(void); /* it, after the JIT */
	uint32_t sched_threads;  /* > 1: entry points get a static schedule */
	double build_ms;
	LLVMValueRef *consts;       /* m->n_consts globals, made on first use */
	struct built_kernel *built; /* every kernel made, for sharing */
	uint32_t n_built, built_cap;
};

/* A kernel made for node id of graph g with its trees; a node of the
 * same op, attributes, concrete operand and result types and trees
 * reuses it. */
typedef struct built_kernel {
	const ir_graph *g;
	ir_id id;
	cg_trees *tr;
	kernel_ref ref;
	/* Whether other nodes may call it: not when it can fail, since its
	 * error code names its own node. */
	bool is_shared;
} built_kernel;

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* ---- shapes ---------------------------------------------------------------- */

int cg_lower_dims(const cg_lower *L, const ir_type *t, int64_t *dims)
{
	for (int i = 0; i < t->rank; i++) {
		ir_dim d = t->dims[i];
		dims[i] = ir_dim_is_static(d) ? d.coef : d.coef * L->syms[d.sym];
	}
	return t->rank;
}

bool cg_lower_same_type(const cg_lower *L, const ir_type *a, const ir_type *b)
{
	int64_t da[IR_MAX_RANK], db[IR_MAX_RANK];
	if (a->dtype != b->dtype || a->rank != b->rank)
		return false;
	cg_lower_dims(L, a, da);
	cg_lower_dims(L, b, db);
	return memcmp(da, db, (size_t)a->rank * sizeof da[0]) == 0;
}

int64_t cg_lower_numel(const cg_lower *L, const ir_type *t)
{
	int64_t dims[IR_MAX_RANK], n = 1;
	int r = cg_lower_dims(L, t, dims);
	for (int i = 0; i < r; i++)
		n *= dims[i];
	return n;
}

void cg_lower_strides(const int64_t *dims, int rank, int64_t *strides)
{
	int64_t s = 1;
	for (int i = rank - 1; i >= 0; i--) {
		strides[i] = s;
		s *= dims[i];
	}
}

const ir_type *cg_kernel_arg_type(const cg_kernel *k, uint32_t i)
{
	return &k->g->nodes[ir_arg(k->g, k->id, i)].type;
}

static uint64_t type_bytes(const cg_lower *L, const ir_type *t)
{
	return (uint64_t)cg_lower_numel(L, t) * ir_dtype_size(t->dtype);
}

static uint64_t round_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

/* ---- symbols, parameters, tensor tables ----------------------------------- */

static bool bind_syms(cg_program *p, const int64_t *sym_values)
{
	const ir_module *m = p->m;
	p->syms = ir_alloc(p->ctx, (m->n_syms + 1) * sizeof *p->syms);
	if (!p->syms)
		return false;
	bool ok = true;
	for (uint32_t i = 0; i < m->n_syms; i++)
		p->syms[i] = sym_values && sym_values[i] > 0
				     ? sym_values[i]
				     : m->syms[i].fallback;
	ir_module_derive_syms(m, p->syms); /* B*T from B and T */
	for (uint32_t i = 0; i < m->n_syms; i++) {
		int64_t v = p->syms[i];
		if (v <= 0) {
			ir_error(p->ctx, m->syms[i].loc,
				 "codegen: symbol '%s' has no value (give one, "
				 "or a fallback with `dim %s = N`)",
				 m->syms[i].name, m->syms[i].name);
			ok = false;
		}
	}
	return ok && ir_module_check_limits(p->ctx, m, p->syms);
}

static attnrt_dtype abi_dtype(ir_dtype t)
{
	return t == IR_I32 ? ATTNRT_I32 : ATTNRT_F32;
}

static attnrt_init abi_init(ir_init_kind k)
{
	switch (k) {
	case IR_INIT_ZEROS:
		return ATTNRT_INIT_ZEROS;
	case IR_INIT_ONES:
		return ATTNRT_INIT_ONES;
	case IR_INIT_NORMAL:
		return ATTNRT_INIT_NORMAL;
	case IR_INIT_UNIFORM:
		return ATTNRT_INIT_UNIFORM;
	case IR_INIT_XAVIER_UNIFORM:
		return ATTNRT_INIT_XAVIER_UNIFORM;
	}
	return ATTNRT_INIT_ZEROS;
}

static bool layout_params(cg_program *p, const cg_lower *L)
{
	const ir_module *m = p->m;
	p->params = ir_alloc(p->ctx, (m->n_params + 1) * sizeof *p->params);
	if (!p->params)
		return false;
	size_t at = 0;
	for (uint32_t i = 0; i < m->n_params; i++) {
		const ir_param *pa = &m->params[i];
		attnrt_param_info *pi = &p->params[i];
		pi->name = pa->name;
		pi->offset = at;
		pi->rank = cg_lower_dims(L, &pa->type, pi->dims);
		pi->init = abi_init(pa->init);
		pi->a = pa->a;
		pi->b = pa->b;
		/* The frontend and the IR reader bound each tensor; this also
		 * bounds the sum, which must never wrap to a small size. */
		int64_t n = cg_lower_numel(L, &pa->type);
		if (n < 0 || n > IR_MAX_NUMEL ||
		    __builtin_add_overflow(at, type_bytes(L, &pa->type), &at) ||
		    at > ((size_t)1 << 62)) {
			ir_error(p->ctx, pa->loc,
				 "parameter @%s is too large, or "
				 "the parameters together are",
				 pa->name);
			return false;
		}
		at = round_up(at, ATTNRT_ALIGN);
	}
	p->params_bytes = at;
	return true;
}

/* Tensor infos of n nodes of f (its inputs or outputs). */
static attnrt_tensor_info *tensor_table(cg_program *p, const cg_lower *L,
					const ir_func *f, const ir_id *ids,
					const char **names, uint32_t n)
{
	attnrt_tensor_info *t = ir_alloc(p->ctx, (n + 1) * sizeof *t);
	for (uint32_t i = 0; t && i < n; i++) {
		const ir_type *ty = &f->g.nodes[ids[i]].type;
		t[i].name = names && names[i] ? names[i] : "";
		t[i].dtype = abi_dtype(ty->dtype);
		t[i].rank = cg_lower_dims(L, ty, t[i].dims);
	}
	return t;
}

/* ---- memory planning -------------------------------------------------------- */

/* A function's plan: into[i] the consumer node i is fused into,
 * PASS_FUSE_EW_EVERY or IR_NONE (pass_fuse_ew_plan); root[i] is the node
 * whose buffer holds node i's data (a leaf, itself, or what a view reads)
 * and view[i] the byte where node i starts in it; offset[i] the root's
 * place in the slab for computing roots that are not fused. */

static bool is_leaf(ir_op op)
{
	return (ir_op_table[op].flags & IR_OPF_LEAF) != 0;
}

/* Whether slice i, a kernel of its own, is a run of consecutive elements
 * of a buffer its operand has (one not computed inside its readers'
 * kernels): step 1, in range, and every axis before the sliced one of
 * extent 1. Such a slice reads the operand's buffer from byte *at on,
 * with no kernel and no copy (the gradients of fused ops are sliced so
 * out of one packed result). */
static bool slice_is_view(const cg_lower *L, const ir_graph *g,
			  const ir_id *into, ir_id i, uint64_t *at)
{
	const ir_node *n = &g->nodes[i];
	if (n->op != IR_OP_SLICE || into[i] != IR_NONE)
		return false;
	ir_id x = ir_arg(g, i, 0);
	if (into[x] != IR_NONE || n->attr.slice.step != 1)
		return false;
	int64_t d[IR_MAX_RANK];
	int r = cg_lower_dims(L, &g->nodes[x].type, d);
	int ax = n->attr.slice.axis;
	if (n->attr.slice.end > d[ax])
		return false;
	for (int a = 0; a < ax; a++)
		if (d[a] != 1)
			return false;
	int64_t inner = 1;
	for (int a = ax + 1; a < r; a++)
		inner *= d[a];
	*at = (uint64_t)(n->attr.slice.start * inner) *
	      ir_dtype_size(n->type.dtype);
	return true;
}

static void find_roots(const cg_lower *L, const ir_graph *g, const ir_id *into,
		       ir_id *root, uint64_t *view)
{
	for (ir_id i = 0; i < g->n_nodes; i++) {
		uint64_t at = 0;
		if (g->nodes[i].op == IR_OP_RESHAPE ||
		    slice_is_view(L, g, into, i, &at)) {
			ir_id x = ir_arg(g, i, 0);
			root[i] = root[x];
			view[i] = view[x] + at;
		} else {
			root[i] = i;
			view[i] = 0;
		}
	}
}

/* at[i]: the last step whose kernel computes node i (itself, or the
 * kernels of the readers it is fused into). */
static void find_steps(const ir_graph *g, const ir_id *into, uint32_t *at)
{
	for (ir_id i = 0; i < g->n_nodes; i++)
		at[i] = into[i] == IR_NONE ? i : 0;
	for (ir_id c = g->n_nodes; c-- > 0;)
		for (uint32_t a = 0; a < g->nodes[c].n_args; a++) {
			ir_id x = ir_arg(g, c, a);
			if (pass_fuse_ew_is_in(into, x, c) && at[c] > at[x])
				at[x] = at[c];
		}
}

/* last[r]: the last step that reads root r's buffer; a fused node reads
 * its operands when the kernels computing it run. at is scratch. */
static void find_last_use(const ir_func *f, const ir_id *into,
			  const ir_id *root, uint32_t *at, uint32_t *last)
{
	const ir_graph *g = &f->g;
	find_steps(g, into, at);
	for (ir_id i = 0; i < g->n_nodes; i++)
		last[i] = i;
	for (ir_id i = 0; i < g->n_nodes; i++)
		for (uint32_t a = 0; a < g->nodes[i].n_args; a++) {
			ir_id r = root[ir_arg(g, i, a)];
			if (at[i] > last[r])
				last[r] = at[i];
		}
	for (uint32_t o = 0; o < f->n_outputs; o++)
		last[root[f->outputs[o]]] = g->n_nodes;
}

/* The fusion plan of f, with the matmuls computed in their adds'
 * kernels (cg_lower_epilogue_plan), or none (every into[i] IR_NONE). */
static bool plan_fusion(const cg_lower *L, const ir_func *f, bool no_fuse,
			ir_id *into)
{
	if (!no_fuse)
		return pass_fuse_ew_plan(L->m, f, into) &&
		       cg_lower_epilogue_plan(L, f, into);
	for (ir_id i = 0; i < f->g.n_nodes; i++)
		into[i] = IR_NONE;
	return true;
}

static bool plan_func(const cg_lower *L, const ir_func *f, bool no_fuse,
		      func_plan *pl)
{
	const ir_graph *g = &f->g;
	uint32_t n = g->n_nodes;
	pl->into = ir_alloc(L->ctx, (n + 1) * sizeof *pl->into);
	pl->root = ir_alloc(L->ctx, (n + 1) * sizeof *pl->root);
	pl->view = ir_alloc(L->ctx, (n + 1) * sizeof *pl->view);
	pl->offset = ir_alloc(L->ctx, (n + 1) * sizeof *pl->offset);
	uint32_t *last = ir_alloc(L->ctx, (n + 1) * sizeof *last);
	uint32_t *at = ir_alloc(L->ctx, (n + 1) * sizeof *at);
	pass_mem_block *blocks = ir_alloc(L->ctx, (n + 1) * sizeof *blocks);
	ir_id *map = ir_alloc(L->ctx, (n + 1) * sizeof *map);
	bool ok = pl->into && pl->root && pl->view && pl->offset && last &&
		  at && blocks && map && plan_fusion(L, f, no_fuse, pl->into);
	if (ok) {
		find_roots(L, g, pl->into, pl->root, pl->view);
		find_last_use(f, pl->into, pl->root, at, last);
		uint32_t nb = 0;
		for (ir_id i = 0; i < n; i++) {
			if (pl->root[i] != i || is_leaf(g->nodes[i].op) ||
			    pl->into[i] != IR_NONE)
				continue;
			blocks[nb] = (pass_mem_block){
				type_bytes(L, &g->nodes[i].type), i, last[i], 0};
			map[nb++] = i;
		}
		pl->total = pass_memplan_blocks(L->ctx, blocks, nb,
						ATTNRT_ALIGN, &ok);
		for (uint32_t b = 0; ok && b < nb; b++)
			pl->offset[map[b]] = blocks[b].offset;
	}
	ir_free(L->ctx, last);
	ir_free(L->ctx, at);
	ir_free(L->ctx, blocks);
	ir_free(L->ctx, map);
	return ok;
}

static void plan_fini(ir_ctx *ctx, func_plan *pl)
{
	ir_free(ctx, pl->into);
	ir_free(ctx, pl->root);
	ir_free(ctx, pl->view);
	ir_free(ctx, pl->offset);
}

/* ---- kernels -------------------------------------------------------------------- */

LLVMTypeRef cg_lower_elem_type(cg_fn *f, ir_dtype t)
{
	return t == IR_I32 ? cg_t_i32(f) : cg_t_f32(f);
}

LLVMValueRef cg_lower_load(cg_fn *f, ir_dtype t, LLVMValueRef p,
			   LLVMValueRef off)
{
	LLVMTypeRef ty = cg_lower_elem_type(f, t);
	LLVMValueRef at = LLVMBuildInBoundsGEP2(f->b, ty, p, &off, 1, "");
	LLVMValueRef v = LLVMBuildLoad2(f->b, ty, at, "");
	LLVMSetAlignment(v, 4);
	return v;
}

void cg_lower_store(cg_fn *f, ir_dtype t, LLVMValueRef v, LLVMValueRef p,
		    LLVMValueRef off)
{
	LLVMTypeRef ty = cg_lower_elem_type(f, t);
	LLVMValueRef at = LLVMBuildInBoundsGEP2(f->b, ty, p, &off, 1, "");
	LLVMSetAlignment(LLVMBuildStore(f->b, v, at), 4);
}

LLVMValueRef cg_lower_fcall(cg_fn *f, const char *name, LLVMValueRef a,
			    LLVMValueRef b)
{
	LLVMTypeRef t = cg_t_f32(f);
	LLVMValueRef args[2] = {a, b};
	return cg_intrinsic(f, name, &t, 1, args, b ? 2 : 1);
}

void cg_kernel_fail_if(cg_kernel *k, LLVMValueRef cond, int code)
{
	cg_fn *f = &k->f;
	if (!k->err) {
		LLVMBasicBlockRef here = LLVMGetInsertBlock(f->b);
		k->err = cg_block(f, "fail");
		LLVMPositionBuilderAtEnd(f->b, k->err);
		LLVMBuildRet(f->b, cg_i32(f, code | (int32_t)(k->id << 8)));
		LLVMPositionBuilderAtEnd(f->b, here);
	}
	LLVMBasicBlockRef ok = cg_block(f, "ok");
	LLVMBuildCondBr(f->b, cond, k->err, ok);
	LLVMPositionBuilderAtEnd(f->b, ok);
}

LLVMValueRef cg_kernel_outline_begin(const cg_kernel *k, const char *name,
				     cg_kernel *kb)
{
	LLVMContextRef c = LLVMGetModuleContext(k->L->mod);
	LLVMTypeRef ptr = LLVMPointerTypeInContext(c, 0);
	LLVMTypeRef i64 = LLVMInt64TypeInContext(c);
	LLVMTypeRef ps[2 + CG_KERNEL_MAX_IN + 3];
	uint32_t np = 0;
	for (uint32_t i = 0; i < 2 + k->n_in; i++)
		ps[np++] = ptr;
	ps[np++] = i64;
	ps[np++] = i64;
	ps[np++] = i64;
	*kb = *k;
	cg_fn_begin(&kb->f, k->L->mod, name,
		    LLVMFunctionType(LLVMVoidTypeInContext(c), ps, np, 0), true);
	cg_fn_attr(&kb->f, "noinline");
	kb->run = LLVMGetParam(kb->f.fn, 0);
	kb->out = LLVMGetParam(kb->f.fn, 1);
	for (uint32_t i = 0; i < k->n_in; i++) {
		cg_fn_param_readonly(&kb->f, 2 + i);
		kb->in[i] = LLVMGetParam(kb->f.fn, 2 + i);
	}
	kb->lo = LLVMGetParam(kb->f.fn, 2 + k->n_in);
	kb->hi = LLVMGetParam(kb->f.fn, 3 + k->n_in);
	kb->err = NULL;
	return LLVMGetParam(kb->f.fn, 4 + k->n_in);
}

LLVMValueRef cg_kernel_outline_end(cg_kernel *kb)
{
	LLVMBuildRetVoid(kb->f.b);
	cg_fn_end(&kb->f);
	return kb->f.fn;
}

void cg_kernel_outline_call(cg_kernel *k, LLVMValueRef body, LLVMValueRef key)
{
	LLVMValueRef args[2 + CG_KERNEL_MAX_IN + 3];
	uint32_t na = 0;
	args[na++] = k->run;
	args[na++] = k->out;
	for (uint32_t i = 0; i < k->n_in; i++)
		args[na++] = k->in[i];
	args[na++] = k->lo;
	args[na++] = k->hi;
	args[na++] = key;
	cg_call(&k->f, body, args, na);
}

LLVMValueRef cg_run_field(cg_fn *f, LLVMValueRef run, LLVMTypeRef t,
			  size_t offset)
{
	LLVMValueRef off = cg_i64(f, (int64_t)offset);
	LLVMValueRef at = LLVMBuildInBoundsGEP2(f->b,
						LLVMInt8TypeInContext(f->ctx),
						run, &off, 1, "");
	return LLVMBuildLoad2(f->b, t, at, "");
}

LLVMValueRef cg_kernel_run_field(cg_kernel *k, LLVMTypeRef t, size_t offset)
{
	return cg_run_field(&k->f, k->run, t, offset);
}

LLVMValueRef cg_kernel_is_training(cg_kernel *k)
{
	cg_fn *f = &k->f;
	LLVMValueRef tr = cg_kernel_run_field(k, cg_t_i32(f),
					      offsetof(attnrt_run, is_training));
	return LLVMBuildICmp(f->b, LLVMIntNE, tr, cg_i32(f, 0), "");
}

static bool has_f64(const ir_graph *g, ir_id id)
{
	const ir_node *n = &g->nodes[id];
	if (n->type.dtype == IR_F64)
		return true;
	for (uint32_t a = 0; a < n->n_args; a++)
		if (g->nodes[ir_arg(g, id, a)].type.dtype == IR_F64)
			return true;
	return false;
}

/* Whether computing node id can be compiled once the symbols are bound:
 * no f64 tensor in or out (constants may be f64), a slice's range within
 * its axis. Checked for every computing node, fused into a reader's
 * kernel or not, since a fused node has no kernel of its own. */
static bool node_compiles(const cg_lower *L, const ir_graph *g, ir_id id)
{
	const ir_node *n = &g->nodes[id];
	if (has_f64(g, id)) {
		ir_error(L->ctx, n->loc,
			 "codegen: %s: f64 tensors cannot "
			 "be compiled (only f32 and i32)",
			 ir_op_table[n->op].name);
		return false;
	}
	return n->op != IR_OP_SLICE || cg_lower_slice_fits(L, g, id);
}

/* The generator of the node's op; leaves and reshapes have none. */
static bool lower_op(cg_kernel *k)
{
	if (cg_lower_is_epilogue_kernel(k))
		return cg_lower_matmul(k); /* a matmul with its bias add */
	switch (k->node->op) {
	case IR_OP_INPUT:
	case IR_OP_PARAM:
	case IR_OP_CONST:
	case IR_OP_RESHAPE:
		return true; /* no kernel: the entry point passes pointers */
	case IR_OP_ARANGE:
		return cg_lower_arange(k);
#include "ops_ew.def"
	case IR_OP_CAST:
	case IR_OP_SELECT:
		return cg_lower_elementwise(k);
	case IR_OP_MATMUL:
		return cg_lower_matmul(k);
	case IR_OP_SUM:
	case IR_OP_MEAN:
	case IR_OP_MAX:
		return cg_lower_reduce(k);
	case IR_OP_ARGMAX:
		return cg_lower_argmax(k);
	case IR_OP_SOFTMAX:
	case IR_OP_LOG_SOFTMAX:
	case IR_OP_MASKED_SOFTMAX:
		return cg_lower_softmax(k);
	case IR_OP_LAYER_NORM:
		return cg_lower_layer_norm(k);
	case IR_OP_DROPOUT:
		return cg_lower_dropout(k);
	case IR_OP_EMBEDDING:
		return cg_lower_embedding(k);
	case IR_OP_ONE_HOT:
		return cg_lower_one_hot(k);
	case IR_OP_EMBEDDING_GRAD:
		return cg_lower_embedding_grad(k);
	case IR_OP_BROADCAST:
		return cg_lower_broadcast(k);
	case IR_OP_PERMUTE:
		return cg_lower_permute(k);
	case IR_OP_SLICE:
		return cg_lower_slice(k);
	case IR_OP_CONCAT:
		return cg_lower_concat(k);
	case IR_OP_REPEAT:
		return cg_lower_repeat(k);
	case IR_OP_REPEAT_INTERLEAVE:
		return cg_lower_repeat_interleave(k);
	case IR_OP_SORT:
		return cg_lower_sort(k);
	case IR_OP_MSE_LOSS:
		return cg_lower_mse_loss(k);
	case IR_OP_CROSS_ENTROPY:
		return cg_lower_cross_entropy(k);
	case IR_OP_CROSS_ENTROPY_GRAD:
		return cg_lower_cross_entropy_grad(k);
	case IR_OP_CROSS_ENTROPY_WITH_GRAD:
		return cg_lower_cross_entropy_with_grad(k);
	case IR_OP_FUSED_ATTENTION:
		return cg_lower_fused_attention(k);
	case IR_OP_FUSED_ATTENTION_GRAD:
		return cg_lower_fused_attention_grad(k);
	case IR_OP_FUSED_ADDITIVE_ATTENTION:
		return cg_lower_fused_additive_attention(k);
	case IR_OP_FUSED_ADDITIVE_ATTENTION_GRAD:
		return cg_lower_fused_additive_attention_grad(k);
	case IR_OP_COUNT:
		break;
	}
	ir_error(k->L->ctx, k->node->loc, "codegen: unknown op %d",
		 (int)k->node->op);
	return false;
}

/* Type of every kernel: i32 (ptr run, ptr out, ptr in..., i64 lo, i64 hi). */
static LLVMTypeRef kernel_type(LLVMContextRef c, uint32_t n_in)
{
	LLVMTypeRef ps[2 + CG_KERNEL_MAX_IN + 2];
	LLVMTypeRef ptr = LLVMPointerTypeInContext(c, 0);
	uint32_t n = 0;
	ps[n++] = ptr;
	ps[n++] = ptr;
	for (uint32_t i = 0; i < n_in; i++)
		ps[n++] = ptr;
	ps[n++] = LLVMInt64TypeInContext(c);
	ps[n++] = LLVMInt64TypeInContext(c);
	return LLVMFunctionType(LLVMInt32TypeInContext(c), ps, n, 0);
}

/* Starts node id's kernel, whose trees are tr. */
static bool kernel_begin(cg_lower *L, const ir_func *fn, ir_id id,
			 const cg_trees *tr, cg_kernel *k)
{
	const ir_node *node = &fn->g.nodes[id];
	memset(k, 0, sizeof *k);
	k->L = L;
	k->g = &fn->g;
	k->id = id;
	k->node = node;
	k->tr = *tr;
	k->n_in = tr->n_par;
	char name[160];
	snprintf(name, sizeof name, "%s.k%u.%s", fn->name, id,
		 ir_op_table[node->op].name);
	LLVMContextRef c = LLVMGetModuleContext(L->mod);
	cg_fn_begin(&k->f, L->mod, name, kernel_type(c, k->n_in), true);
	/* Inlined, hundreds of kernels would make one huge entry function
	 * that the optimizer takes seconds over. */
	cg_fn_attr(&k->f, "noinline");
	cg_fn_param_readonly(&k->f, 0);
	k->run = LLVMGetParam(k->f.fn, 0);
	k->out = LLVMGetParam(k->f.fn, 1);
	for (uint32_t i = 0; i < k->n_in; i++) {
		cg_fn_param_readonly(&k->f, 2 + i);
		k->in[i] = LLVMGetParam(k->f.fn, 2 + i);
	}
	k->lo = LLVMGetParam(k->f.fn, 2 + k->n_in);
	k->hi = LLVMGetParam(k->f.fn, 3 + k->n_in);
	k->extent = 1;
	cg_kernel_trees_begin(k);
	return true;
}

/* The GOMP_parallel body of kernel kfn: void (ptr captures), where the
 * captures are { ptr run, out, in...; i64 extent; i32 status }. */
static LLVMTypeRef captures_type(LLVMContextRef c, uint32_t n_in)
{
	LLVMTypeRef fs[2 + CG_KERNEL_MAX_IN + 2];
	LLVMTypeRef ptr = LLVMPointerTypeInContext(c, 0);
	uint32_t n = 0;
	for (uint32_t i = 0; i < 2 + n_in; i++)
		fs[n++] = ptr;
	fs[n++] = LLVMInt64TypeInContext(c);
	fs[n++] = LLVMInt32TypeInContext(c);
	return LLVMStructTypeInContext(c, fs, n, 0);
}

static LLVMValueRef make_par(cg_lower *L, LLVMValueRef kfn, uint32_t n_in)
{
	cg_fn f;
	LLVMContextRef c = LLVMGetModuleContext(L->mod);
	LLVMTypeRef ptr = LLVMPointerTypeInContext(c, 0);
	LLVMTypeRef ft = LLVMFunctionType(LLVMVoidTypeInContext(c), &ptr, 1, 0);
	char name[200];
	snprintf(name, sizeof name, "%s.par",
		 LLVMGetValueName2(kfn, &(size_t){0}));
	cg_fn_begin(&f, L->mod, name, ft, true);
	LLVMTypeRef st = captures_type(c, n_in);
	LLVMValueRef cap = LLVMGetParam(f.fn, 0), args[2 + CG_KERNEL_MAX_IN + 2];
	for (uint32_t i = 0; i < 2 + n_in + 1; i++) {
		LLVMValueRef at = LLVMBuildStructGEP2(f.b, st, cap, i, "");
		args[i] = LLVMBuildLoad2(f.b, LLVMStructGetTypeAtIndex(st, i),
					 at, "");
	}
	LLVMValueRef n = args[2 + n_in];
	LLVMValueRef tid = LLVMBuildSExt(f.b,
					 cg_omp_i32(&f, "omp_get_thread_num"),
					 cg_t_i64(&f), "");
	LLVMValueRef nth = LLVMBuildSExt(f.b,
					 cg_omp_i32(&f, "omp_get_num_threads"),
					 cg_t_i64(&f), "");
	args[2 + n_in] = cg_muldiv(&f, n, tid, nth);
	args[3 + n_in] = cg_muldiv(&f, n, cg_addi(&f, tid, 1), nth);
	LLVMValueRef status = cg_call(&f, kfn, args, 4 + n_in);
	LLVMValueRef bad = LLVMBuildICmp(f.b, LLVMIntNE, status, cg_i32(&f, 0),
					 "");
	LLVMBasicBlockRef join = cg_if_begin(&f, bad);
	LLVMValueRef at = LLVMBuildStructGEP2(f.b, st, cap, 3 + n_in, "");
	cg_atomic_store(&f, status, at, LLVMAtomicOrderingMonotonic);
	cg_if_end(&f, join);
	LLVMBuildRetVoid(f.b);
	cg_fn_end(&f);
	return f.fn;
}

/* True if node ia of ga and node ib of gb compile to the same kernel:
 * same op, attributes and concrete types. */
static bool same_kernel(const cg_lower *L, const ir_graph *ga, ir_id ia,
			const ir_graph *gb, ir_id ib)
{
	const ir_node *a = &ga->nodes[ia], *b = &gb->nodes[ib];
	if (a->op != b->op || a->n_args != b->n_args ||
	    memcmp(&a->attr, &b->attr, sizeof a->attr) != 0 ||
	    !cg_lower_same_type(L, &a->type, &b->type))
		return false;
	for (uint32_t i = 0; i < a->n_args; i++)
		if (!cg_lower_same_type(L, &ga->nodes[ir_arg(ga, ia, i)].type,
					&gb->nodes[ir_arg(gb, ib, i)].type))
			return false;
	return true;
}

static const kernel_ref *find_built(const cg_program *p, const cg_lower *L,
				    const ir_graph *g, ir_id id,
				    const cg_trees *tr)
{
	for (uint32_t i = 0; i < p->n_built; i++) {
		const built_kernel *b = &p->built[i];
		if (b->is_shared && same_kernel(L, b->g, b->id, g, id) &&
		    cg_trees_eq(L, b->g, b->tr, g, tr))
			return &b->ref;
	}
	return NULL;
}

static bool remember_built(cg_program *p, const ir_graph *g, ir_id id,
			   const cg_trees *tr, const kernel_ref *ref,
			   bool is_shared)
{
	cg_trees *copy = ir_alloc(p->ctx, sizeof *copy);
	if (!copy || !ir_grow(p->ctx, (void **)&p->built, &p->built_cap,
			      p->n_built + 1, sizeof *p->built)) {
		ir_free(p->ctx, copy);
		return false;
	}
	*copy = *tr;
	p->built[p->n_built++] = (built_kernel){g, id, copy, *ref, is_shared};
	return true;
}

/* The leaves of node id's fused trees, in parameter order. */
static void extra_params(const ir_graph *g, ir_id id, const cg_trees *tr,
			 node_call *c)
{
	uint32_t n_args = g->nodes[id].n_args;
	c->n_extra = tr->n_par - n_args;
	for (uint32_t i = 0; i < tr->n_nodes; i++)
		if (tr->n[i].is_leaf && tr->n[i].param >= n_args)
			c->extra[tr->n[i].param - n_args] = tr->n[i].id;
}

/* Generates node id's kernel with trees tr and remembers it. */
static bool build_new(cg_program *p, cg_lower *L, const ir_func *fn, ir_id id,
		      const cg_trees *tr, kernel_ref *ref)
{
	cg_kernel *k = ir_alloc(p->ctx, sizeof *k);
	if (!k || !kernel_begin(L, fn, id, tr, k)) {
		ir_free(p->ctx, k);
		return false;
	}
	bool ok = lower_op(k);
	bool can_fail = k->err != NULL;
	if (ok)
		LLVMBuildRet(k->f.b, cg_i32(&k->f, 0));
	cg_fn_end(&k->f);
	if (ok) {
		ref->fn = k->f.fn;
		ref->extent = k->extent;
		ref->cost = cg_sched_kernel_cost(&fn->g, id, tr, k->work);
		ref->par = NULL;
		p->n_kernels++;
		if (!p->is_serial && k->extent >= 2 && k->work >= p->grain) {
			ref->par = make_par(L, k->f.fn, k->n_in);
			p->n_parallel++;
		}
	}
	ir_free(p->ctx, k);
	return ok && remember_built(p, &fn->g, id, tr, ref, !can_fail);
}

static bool build_kernel(cg_program *p, cg_lower *L, const ir_func *fn,
			 const ir_id *into, ir_id id, node_call *c)
{
	kernel_ref *ref = &c->ref;
	cg_trees *tr = ir_alloc(p->ctx, sizeof *tr);
	if (!tr || !cg_trees_build(L, &fn->g, id, into, tr)) {
		ir_free(p->ctx, tr);
		return false;
	}
	extra_params(&fn->g, id, tr, c);
	const kernel_ref *old = find_built(p, L, &fn->g, id, tr);
	if (old) {
		*ref = *old;
		ir_free(p->ctx, tr);
		return true;
	}
	bool ok = build_new(p, L, fn, id, tr, ref);
	ir_free(p->ctx, tr);
	return ok;
}

/* ---- the entry point ---------------------------------------------------------- */

static LLVMValueRef byte_gep(cg_fn *f, LLVMValueRef p, uint64_t off)
{
	LLVMValueRef o = cg_i64(f, (int64_t)off);
	return LLVMBuildInBoundsGEP2(f->b, LLVMInt8TypeInContext(f->ctx), p, &o,
				     1, "");
}

static LLVMValueRef const_global(entry_gen *e, uint32_t ci)
{
	cg_program *p = e->p;
	if (p->consts[ci])
		return p->consts[ci];
	const ir_const *c = &p->m->consts[ci];
	size_t bytes = (size_t)type_bytes(e->L, &c->type);
	LLVMValueRef init = LLVMConstStringInContext2(e->f.ctx,
						      c->data ? c->data : "",
						      c->data ? bytes : 0, 1);
	char name[32];
	snprintf(name, sizeof name, "const.%u", ci);
	LLVMValueRef g = LLVMAddGlobal(e->f.mod, LLVMTypeOf(init), name);
	LLVMSetInitializer(g, init);
	LLVMSetGlobalConstant(g, 1);
	LLVMSetLinkage(g, LLVMPrivateLinkage);
	LLVMSetUnnamedAddress(g, LLVMGlobalUnnamedAddr);
	LLVMSetAlignment(g, ATTNRT_ALIGN);
	p->consts[ci] = g;
	return g;
}

/* Where node i's data is at run time. */
LLVMValueRef cg_entry_node_ptr(entry_gen *e, ir_id i)
{
	ir_id r = e->plan.root[i];
	const ir_node *n = &e->fn->g.nodes[r];
	LLVMValueRef p;
	if (n->op == IR_OP_INPUT)
		p = e->inputs[n->attr.input_index];
	else if (n->op == IR_OP_PARAM)
		p = byte_gep(&e->f, e->params,
			     e->p->params[n->attr.param_index].offset);
	else if (n->op == IR_OP_CONST)
		p = const_global(e, n->attr.const_index);
	else
		p = byte_gep(&e->f, e->scratch, e->offset[r]);
	return e->plan.view[i] ? byte_gep(&e->f, p, e->plan.view[i]) : p;
}

/* Returns the kernel's status from the entry point if it is not 0. */
static void check_status(entry_gen *e, LLVMValueRef st)
{
	cg_fn *f = &e->f;
	LLVMValueRef bad = LLVMBuildICmp(f->b, LLVMIntNE, st, cg_i32(f, 0), "");
	LLVMBasicBlockRef fail = cg_block(f, "failed"), ok = cg_block(f, "next");
	LLVMBuildCondBr(f->b, bad, fail, ok);
	LLVMPositionBuilderAtEnd(f->b, fail);
	LLVMBuildRet(f->b, st);
	LLVMPositionBuilderAtEnd(f->b, ok);
}

static void call_parallel(entry_gen *e, const kernel_ref *k, LLVMValueRef *args,
			  uint32_t n_in)
{
	cg_fn *f = &e->f;
	LLVMTypeRef st = captures_type(f->ctx, n_in);
	LLVMValueRef cap = LLVMBuildAlloca(f->b, st, "cap");
	for (uint32_t i = 0; i < 2 + n_in; i++)
		LLVMBuildStore(f->b, args[i],
			       LLVMBuildStructGEP2(f->b, st, cap, i, ""));
	LLVMBuildStore(f->b, cg_i64(f, k->extent),
		       LLVMBuildStructGEP2(f->b, st, cap, 2 + n_in, ""));
	LLVMValueRef status_at = LLVMBuildStructGEP2(f->b, st, cap, 3 + n_in,
						     "");
	LLVMBuildStore(f->b, cg_i32(f, 0), status_at);
	LLVMValueRef nt = cg_run_field(f, e->run, cg_t_i32(f),
				       offsetof(attnrt_run, n_threads));
	LLVMValueRef neg = LLVMBuildICmp(f->b, LLVMIntSLT, nt, cg_i32(f, 0), "");
	nt = LLVMBuildSelect(f->b, neg, cg_i32(f, 0), nt, "");
	cg_gomp_parallel(f, k->par, cap, nt);
	check_status(e, LLVMBuildLoad2(f->b, cg_t_i32(f), status_at, ""));
}

uint32_t cg_entry_kernel_args(entry_gen *e, ir_id id, const node_call *c,
			      LLVMValueRef *args)
{
	const ir_node *n = &e->fn->g.nodes[id];
	uint32_t na = 0;
	args[na++] = e->run;
	args[na++] = cg_entry_node_ptr(e, id);
	for (uint32_t a = 0; a < n->n_args; a++) {
		ir_id x = ir_arg(&e->fn->g, id, a);
		args[na++] = pass_fuse_ew_is_in(e->plan.into, x, id)
				     ? LLVMConstPointerNull(cg_t_ptr(&e->f))
				     : cg_entry_node_ptr(e, x);
	}
	for (uint32_t i = 0; i < c->n_extra; i++)
		args[na++] = cg_entry_node_ptr(e, c->extra[i]);
	return na;
}

/* Calls node id's kernel over its whole range, through GOMP_parallel if
 * it has a parallel body and the run asks for more than one thread: a
 * region of one thread costs a team's set-up (an allocation when nested,
 * as in a shard of a training step) for nothing. */
static void call_kernel(entry_gen *e, ir_id id, const node_call *c)
{
	cg_fn *f = &e->f;
	const kernel_ref *k = &c->ref;
	LLVMValueRef args[2 + CG_KERNEL_MAX_IN + 2];
	uint32_t na = cg_entry_kernel_args(e, id, c, args);
	LLVMValueRef t0 = cg_profile_start(e);
	LLVMBasicBlockRef direct = NULL, done = NULL;
	if (k->par) {
		LLVMValueRef nt = cg_run_field(f, e->run, cg_t_i32(f),
					       offsetof(attnrt_run, n_threads));
		LLVMValueRef is_one = LLVMBuildICmp(f->b, LLVMIntEQ, nt,
						    cg_i32(f, 1), "");
		LLVMBasicBlockRef team = cg_block(f, "team");
		direct = cg_block(f, "direct");
		done = cg_block(f, "called");
		LLVMBuildCondBr(f->b, is_one, direct, team);
		LLVMPositionBuilderAtEnd(f->b, team);
		call_parallel(e, k, args, na - 2);
		LLVMBuildBr(f->b, done);
		LLVMPositionBuilderAtEnd(f->b, direct);
	}
	args[na++] = cg_i64(f, 0);
	args[na++] = cg_i64(f, k->extent);
	check_status(e, cg_call(f, k->fn, args, na));
	if (done) {
		LLVMBuildBr(f->b, done);
		LLVMPositionBuilderAtEnd(f->b, done);
	}
	cg_profile_add(e, e->prof_site ? e->prof_site[id] : 0, t0, true);
}

void cg_entry_copy_outputs(entry_gen *e, LLVMValueRef outputs)
{
	cg_fn *f = &e->f;
	for (uint32_t o = 0; o < e->fn->n_outputs; o++) {
		ir_id id = e->fn->outputs[o];
		LLVMValueRef at = LLVMBuildInBoundsGEP2(f->b, cg_t_ptr(f),
							outputs,
							&(LLVMValueRef){
								cg_i64(f, o)},
							1, "");
		LLVMValueRef dst = LLVMBuildLoad2(f->b, cg_t_ptr(f), at, "");
		uint64_t bytes = type_bytes(e->L, &e->fn->g.nodes[id].type);
		LLVMBuildMemCpy(f->b, dst, 4, cg_entry_node_ptr(e, id), 4,
				cg_i64(f, (int64_t)bytes));
	}
}

void cg_entry_load_inputs(entry_gen *e, LLVMValueRef inputs)
{
	cg_fn *f = &e->f;
	for (uint32_t i = 0; i < e->fn->n_inputs; i++) {
		LLVMValueRef at = LLVMBuildInBoundsGEP2(f->b, cg_t_ptr(f),
							inputs,
							&(LLVMValueRef){
								cg_i64(f, i)},
							1, "");
		e->inputs[i] = LLVMBuildLoad2(f->b, cg_t_ptr(f), at, "");
	}
}

static void build_entry(entry_gen *e, const cg_entry *ce, const node_call *ks,
			const sched_plan *sp)
{
	cg_fn *f = &e->f;
	LLVMContextRef c = LLVMGetModuleContext(e->L->mod);
	LLVMTypeRef ptr = LLVMPointerTypeInContext(c, 0);
	LLVMTypeRef ps[5] = {ptr, ptr, ptr, ptr, ptr};
	LLVMTypeRef ft = LLVMFunctionType(LLVMInt32TypeInContext(c), ps, 5, 0);
	cg_fn_begin(f, e->L->mod, ce->symbol, ft, false);
	cg_fn_attr(f, "noinline");
	cg_fn_attr(f, "optnone");
	for (unsigned i = 0; i < 5; i++)
		if (i != 2)
			cg_fn_param_readonly(f, i);
	e->run = LLVMGetParam(f->fn, 0);
	e->params = LLVMGetParam(f->fn, 1);
	e->scratch = LLVMGetParam(f->fn, 2);
	cg_entry_load_inputs(e, LLVMGetParam(f->fn, 3));
	e->prof_t0 = cg_profile_start(e);
	if (sp->usable) {
		LLVMBasicBlockRef in_order = cg_block(f, "in_order");
		cg_sched_emit(e, ks, sp, LLVMGetParam(f->fn, 4), in_order);
		LLVMPositionBuilderAtEnd(f->b, in_order);
	}
	for (ir_id i = 0; i < e->fn->g.n_nodes; i++)
		if (ks[i].ref.fn)
			call_kernel(e, i, &ks[i]);
	cg_entry_copy_outputs(e, LLVMGetParam(f->fn, 4));
	cg_profile_add(e, 0, e->prof_t0, true);
	LLVMBuildRet(f->b, cg_i32(f, 0));
	cg_fn_end(f);
}

static bool lower_func(cg_program *p, cg_lower *L, cg_entry *ce,
		       const char *prefix)
{
	const ir_func *fn = ce->fn;
	entry_gen e = {.p = p, .L = L, .fn = fn};
	uint32_t n = fn->g.n_nodes;
	node_call *ks = ir_alloc(p->ctx, (n + 1) * sizeof *ks);
	e.inputs = ir_alloc(p->ctx, (fn->n_inputs + 1) * sizeof *e.inputs);
	sched_plan sp = {0};
	bool ok = ks && e.inputs && plan_func(L, fn, p->no_fuse, &e.plan);
	e.offset = e.plan.offset;
	snprintf(ce->symbol, sizeof ce->symbol, "%s_%s", prefix, fn->name);
	for (ir_id i = 0; ok && i < n; i++) {
		ir_op op = fn->g.nodes[i].op;
		if (is_leaf(op) || op == IR_OP_RESHAPE)
			continue;
		if (!node_compiles(L, &fn->g, i)) {
			ok = false;
		} else if (e.plan.root[i] != i) {
			continue; /* a view: its readers take its root's pointer */
		} else if (e.plan.into[i] != IR_NONE) {
			p->n_fused++;
		} else {
			ok = build_kernel(p, L, fn, e.plan.into, i, &ks[i]);
			ce->n_calls++;
		}
	}
	if (ok && p->sched_threads > 1)
		ok = cg_sched_plan_make(&e, ks, p->sched_threads, &sp);
	if (ok) {
		ce->scratch_bytes = e.plan.total;
		if (sp.usable) {
			ce->sched = (cg_program_sched){sp.s.n_threads,
						       sp.s.n_tasks,
						       sp.s.n_waits,
						       sp.s.total,
						       sp.s.makespan,
						       sp.total};
			if (sp.total > ce->scratch_bytes)
				ce->scratch_bytes = sp.total;
		}
		ce->inputs = tensor_table(p, L, fn, fn->inputs, fn->input_names,
					  fn->n_inputs);
		ce->outputs = tensor_table(p, L, fn, fn->outputs,
					   fn->output_names, fn->n_outputs);
		ok = ce->inputs && ce->outputs;
	}
	uint32_t *site_of = NULL;
	if (ok && p->is_profiled)
		ok = cg_profile_entry_make(&e, ks, ce->symbol, &ce->sites,
					   &ce->n_sites, &site_of);
	if (ok)
		build_entry(&e, ce, ks, &sp);
	ir_free(p->ctx, site_of);
	cg_sched_plan_fini(p->ctx, &sp);
	plan_fini(p->ctx, &e.plan);
	ir_free(p->ctx, ks);
	ir_free(p->ctx, e.inputs);
	return ok;
}

/* ---- the program ------------------------------------------------------------------ */

static bool module_failed(cg_program *p)
{
	const char *msg = p->cm ? cg_module_error(p->cm) : "out of memory";
	if (!msg)
		return false;
	ir_error(p->ctx, (ir_loc){0}, "codegen: %s", msg);
	return true;
}

/* Whether opts asks for function f. */
static bool wanted(const cg_program_options *opts, const ir_func *f)
{
	if (!f->is_export)
		return false;
	if (!opts || !opts->only)
		return true;
	for (uint32_t i = 0; i < opts->n_only; i++)
		if (strcmp(opts->only[i], f->name) == 0)
			return true;
	return false;
}

static bool lower_all(cg_program *p, const cg_program_options *opts)
{
	const ir_module *m = p->m;
	const char *prefix = opts && opts->prefix ? opts->prefix : m->name;
	cg_lower L = {p->ctx, m, p->syms, p->cm, cg_module_llvm(p->cm),
		      0,      0, 0};
	L.vw = opts && (opts->vector_width == 8 || opts->vector_width == 16)
		       ? (unsigned)opts->vector_width
		       : (unsigned)cg_cpu_vector_width(
				 opts && opts->triple && !opts->cpu
					 ? cg_target_default_cpu(opts->triple)
				 : opts ? opts->cpu
					: NULL);
	L.gemm_min = !opts || opts->gemm_min == 0 ? CG_PROGRAM_GEMM_MIN_DEFAULT
		     : opts->gemm_min < 0         ? INT64_MAX
						  : opts->gemm_min;
	if (!L.mod)
		return false;
	if (!layout_params(p, &L))
		return false;
	if (p->is_profiled) {
		snprintf(p->clock_name, sizeof p->clock_name,
			 "%s.profile_clock", prefix);
		cg_profile_clock_fn(&L, p->clock_name);
	}
	for (uint32_t i = 0; i < m->n_funcs; i++)
		p->n_entries += wanted(opts, m->funcs[i]);
	p->entries = ir_alloc(p->ctx, (p->n_entries + 1) * sizeof *p->entries);
	p->consts = ir_alloc(p->ctx, (m->n_consts + 1) * sizeof *p->consts);
	if (!p->entries || !p->consts)
		return false;
	uint32_t k = 0;
	bool ok = true;
	for (uint32_t i = 0; i < m->n_funcs; i++)
		if (wanted(opts, m->funcs[i])) {
			p->entries[k].fn = m->funcs[i];
			ok = lower_func(p, &L, &p->entries[k++], prefix) && ok;
		}
	return ok;
}

cg_program *cg_program_create(ir_ctx *ctx, const ir_module *m,
			      const int64_t *sym_values,
			      const cg_program_options *opts)
{
	double t0 = now_ms();
	cg_program *p = ir_alloc(ctx, sizeof *p);
	if (!p) {
		ir_error(ctx, (ir_loc){0}, "out of memory");
		return NULL;
	}
	p->ctx = ctx;
	p->m = m;
	p->grain = opts && opts->grain > 0 ? opts->grain
					   : CG_PROGRAM_GRAIN_DEFAULT;
	p->is_serial = opts && opts->is_serial;
	p->no_fuse = opts && opts->no_fuse;
	p->is_profiled = opts && opts->is_profiled;
	int st = opts ? opts->sched_threads : 0;
	if (st == 0)
		st = cg_threads_get();
	p->sched_threads = p->is_serial || st < 2
				   ? 1
				   : (uint32_t)(st < CG_PROGRAM_SCHED_MAX
							? st
							: CG_PROGRAM_SCHED_MAX);
	int before = ctx->n_errors;
	bool ok = bind_syms(p, sym_values);
	if (ok) {
		p->cm = cg_module_create_target(m->name,
						opts ? opts->triple : NULL,
						opts ? opts->cpu : NULL);
		if (p->cm && opts)
			cg_module_set_cache(p->cm, opts->cache_dir);
		ok = p->cm && !module_failed(p) && lower_all(p, opts) &&
		     !module_failed(p);
	}
	if (!ok) {
		if (ctx->n_errors == before)
			ir_error(ctx, (ir_loc){0}, "codegen: out of memory");
		cg_program_destroy(p);
		return NULL;
	}
	p->build_ms = now_ms() - t0;
	return p;
}

void cg_program_destroy(cg_program *p)
{
	if (!p)
		return;
	for (uint32_t i = 0; p->entries && i < p->n_entries; i++) {
		ir_free(p->ctx, p->entries[i].inputs);
		ir_free(p->ctx, p->entries[i].outputs);
		ir_free(p->ctx, p->entries[i].sites);
	}
	cg_module_destroy(p->cm);
	ir_free(p->ctx, p->entries);
	ir_free(p->ctx, p->consts);
	for (uint32_t i = 0; p->built && i < p->n_built; i++)
		ir_free(p->ctx, p->built[i].tr);
	ir_free(p->ctx, p->built);
	ir_free(p->ctx, p->params);
	ir_free(p->ctx, p->syms);
	ir_free(p->ctx, p);
}

/* The profiled program's counters and clock, after the JIT. */
static bool profile_lookup(cg_program *p)
{
	char name[300];
	for (uint32_t i = 0; i < p->n_entries; i++) {
		snprintf(name, sizeof name, "%s.profile", p->entries[i].symbol);
		p->entries[i].counters = cg_module_lookup(p->cm, name);
		if (!p->entries[i].counters)
			return !module_failed(p);
	}
	void *fp = cg_module_lookup(p->cm, p->clock_name);
	if (!fp)
		return !module_failed(p);
	memcpy(&p->clock, &fp, sizeof fp);
	return true;
}

bool cg_program_jit(cg_program *p)
{
	if (!cg_module_jit(p->cm)) {
		module_failed(p);
		return false;
	}
	for (uint32_t i = 0; i < p->n_entries; i++) {
		void *fp = cg_module_lookup(p->cm, p->entries[i].symbol);
		if (!fp) {
			module_failed(p);
			return false;
		}
		/* An object pointer to a function pointer: POSIX guarantees
		 * the round trip (as for dlsym). */
		memcpy(&p->entries[i].entry, &fp, sizeof fp);
	}
	return !p->is_profiled || profile_lookup(p);
}

bool cg_program_emit(cg_program *p, cg_emit_kind kind, const char *path)
{
	if (cg_module_emit(p->cm, kind, path))
		return true;
	module_failed(p);
	return false;
}

bool cg_program_emit_buffer(cg_program *p, cg_emit_kind kind, char **data,
			    size_t *len)
{
	if (cg_module_emit_buffer(p->cm, kind, data, len))
		return true;
	module_failed(p);
	return false;
}

/* ---- queries ------------------------------------------------------------------------ */

static const cg_entry *find_entry(const cg_program *p, const char *func)
{
	for (uint32_t i = 0; i < p->n_entries; i++)
		if (strcmp(p->entries[i].fn->name, func) == 0)
			return &p->entries[i];
	return NULL;
}

uint32_t cg_program_n_entries(const cg_program *p)
{
	return p->n_entries;
}

const char *cg_program_entry_name(const cg_program *p, uint32_t i)
{
	return i < p->n_entries ? p->entries[i].fn->name : NULL;
}

const char *cg_program_symbol(const cg_program *p, const char *func)
{
	const cg_entry *e = find_entry(p, func);
	return e ? e->symbol : NULL;
}

attnrt_entry_fn cg_program_entry(const cg_program *p, const char *func)
{
	const cg_entry *e = find_entry(p, func);
	return e ? e->entry : NULL;
}

size_t cg_program_scratch_bytes(const cg_program *p, const char *func)
{
	const cg_entry *e = find_entry(p, func);
	return e ? e->scratch_bytes : 0;
}

size_t cg_program_params_bytes(const cg_program *p)
{
	return p->params_bytes;
}

const attnrt_param_info *cg_program_params(const cg_program *p, uint32_t *n)
{
	*n = p->m->n_params;
	return p->params;
}

const attnrt_tensor_info *cg_program_inputs(const cg_program *p,
					    const char *func, uint32_t *n)
{
	const cg_entry *e = find_entry(p, func);
	*n = e ? e->fn->n_inputs : 0;
	return e ? e->inputs : NULL;
}

const attnrt_tensor_info *cg_program_outputs(const cg_program *p,
					     const char *func, uint32_t *n)
{
	const cg_entry *e = find_entry(p, func);
	*n = e ? e->fn->n_outputs : 0;
	return e ? e->outputs : NULL;
}

uint32_t cg_program_n_kernels(const cg_program *p)
{
	return p->n_kernels;
}

uint32_t cg_program_n_parallel(const cg_program *p)
{
	return p->n_parallel;
}

uint32_t cg_program_n_fused(const cg_program *p)
{
	return p->n_fused;
}

uint32_t cg_program_n_calls(const cg_program *p, const char *func)
{
	const cg_entry *e = find_entry(p, func);
	return e ? e->n_calls : 0;
}

cg_program_sched cg_program_sched_of(const cg_program *p, const char *func)
{
	const cg_entry *e = find_entry(p, func);
	return e ? e->sched : (cg_program_sched){0};
}

cg_module_stats cg_program_stats(const cg_program *p)
{
	return cg_module_stats_get(p->cm);
}

double cg_program_build_ms(const cg_program *p)
{
	return p->build_ms;
}

const cg_profile_site *cg_program_profile_sites(const cg_program *p,
						const char *func, uint32_t *n)
{
	const cg_entry *e = find_entry(p, func);
	*n = e && e->sites ? e->n_sites : 0;
	return e ? e->sites : NULL;
}

uint64_t *cg_program_profile_counters(const cg_program *p, const char *func)
{
	const cg_entry *e = find_entry(p, func);
	return e ? e->counters : NULL;
}

uint64_t cg_program_profile_clock(const cg_program *p)
{
	return p->clock ? p->clock() : 0;
}
