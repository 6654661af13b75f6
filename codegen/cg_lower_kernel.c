/*
 * cg_lower_kernel.c - the kernel framework: how the kernel of one
 * computing node is opened (its LLVM function and parameters), the
 * helpers every op's generator uses (concrete shapes, loads and stores,
 * error exits, outlined bodies, the run's fields), the dispatch to the
 * op's generator, the GOMP_parallel body that splits a kernel's outer
 * loop statically into equal ranges over a team, and the sharing of one
 * kernel between nodes that compile to the same code.
 *
 * A kernel (cg_lower.h) is i32 k(ptr run, ptr out, ptr in..., i64 lo,
 * i64 hi). Elementwise fusion (pass_fuse_ew_plan, cg_fuse.c): a node the
 * plan fuses into its consumer gets no kernel; the consumer's kernel
 * computes it where it reads it, from the buffers it reads, which are
 * its kernel's extra pointer parameters. A kernel whose outer loop has
 * enough work (cg_program_options.grain) also gets a parallel body.
 */
#include "cg_lower.h"
#include "cg_attn.h"
#include "cg_entry.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* A kernel made for node id of graph g with its trees; a node of the
 * same op, attributes, concrete operand and result types and trees
 * reuses it. */
typedef struct built_kernel {
	const ir_graph *g;
	ir_id id;
	cg_trees *tr;
	kernel_ref ref;
	/* Whether other nodes may call it: not when a dropout stream is a
	 * constant of its code. (A failing kernel returns a code that names
	 * no node; its caller adds its own, cg_lower_entry.c.) */
	bool is_shared;
	/* The valid lengths it reads last (cg_lower_row_skip_rows; -1:
	 * none): kernels share code only with the same count, which says
	 * what they mean (t < v[b], or keys(v over t < w)), and the same
	 * is_step (a recurrence's step k < v[b], k in the call's table). */
	int n_valid;
	bool is_step;
} built_kernel;

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

uint64_t cg_lower_bytes(const cg_lower *L, const ir_type *t)
{
	return (uint64_t)cg_lower_numel(L, t) * ir_dtype_size(t->dtype);
}

/* ---- kernels ------------------------------------------------------------- */

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

/* The kernel's block that returns its error code (made on first use). */
static LLVMBasicBlockRef fail_block(cg_kernel *k, int code)
{
	cg_fn *f = &k->f;
	if (!k->err) {
		LLVMBasicBlockRef here = LLVMGetInsertBlock(f->b);
		k->err = cg_block(f, "fail");
		LLVMPositionBuilderAtEnd(f->b, k->err);
		LLVMBuildRet(f->b, cg_i32(f, code));
		LLVMPositionBuilderAtEnd(f->b, here);
	}
	return k->err;
}

void cg_kernel_fail_if(cg_kernel *k, LLVMValueRef cond, int code)
{
	cg_fn *f = &k->f;
	LLVMBasicBlockRef err = fail_block(k, code);
	LLVMBasicBlockRef ok = cg_block(f, "ok");
	LLVMBuildCondBr(f->b, cond, err, ok);
	LLVMPositionBuilderAtEnd(f->b, ok);
}

void cg_kernel_fail_index_if(cg_kernel *k, LLVMValueRef index,
			     LLVMValueRef bound)
{
	cg_fn *f = &k->f;
	LLVMBasicBlockRef bad = cg_block(f, "bad_index");
	LLVMBasicBlockRef ok = cg_block(f, "ok");
	LLVMBuildCondBr(f->b, LLVMBuildICmp(f->b, LLVMIntUGE, index, bound, ""),
			bad, ok);
	LLVMPositionBuilderAtEnd(f->b, bad);
	LLVMValueRef g = k->L->index_error;
	LLVMValueRef at[2] = {cg_i64(f, 0), cg_i64(f, 0)};
	for (int i = 0; i < 2; i++) { /* threads may race: either is true */
		at[1] = cg_i64(f, i);
		LLVMValueRef p = LLVMBuildInBoundsGEP2(f->b,
						       LLVMGlobalGetValueType(g),
						       g, at, 2, "");
		LLVMValueRef st = LLVMBuildStore(f->b, i ? bound : index, p);
		LLVMSetOrdering(st, LLVMAtomicOrderingMonotonic);
		LLVMSetAlignment(st, 8);
	}
	LLVMBuildBr(f->b, fail_block(k, ATTNRT_ERR_INDEX));
	LLVMPositionBuilderAtEnd(f->b, ok);
}

LLVMValueRef cg_kernel_outline_begin(const cg_kernel *k, const char *name,
				     cg_kernel *kb)
{
	LLVMContextRef c = LLVMGetModuleContext(k->L->mod);
	LLVMTypeRef ptr = LLVMPointerTypeInContext(c, 0);
	LLVMTypeRef i64 = LLVMInt64TypeInContext(c);
	LLVMTypeRef ps[2 + CG_KERNEL_MAX_IN + 4];
	uint32_t np = 0;
	for (uint32_t i = 0; i < 2 + k->n_in; i++)
		ps[np++] = ptr;
	for (int i = 0; i < 4; i++)
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
	kb->step_arg = LLVMGetParam(kb->f.fn, 5 + k->n_in);
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
	LLVMValueRef args[2 + CG_KERNEL_MAX_IN + 4];
	uint32_t na = 0;
	args[na++] = k->run;
	args[na++] = k->out;
	for (uint32_t i = 0; i < k->n_in; i++)
		args[na++] = k->in[i];
	args[na++] = k->lo;
	args[na++] = k->hi;
	args[na++] = key;
	args[na++] = k->row_step >= 0 ? cg_kernel_row_step(k) : cg_i64(&k->f, 0);
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
bool cg_lower_node_compiles(const cg_lower *L, const ir_graph *g, ir_id id)
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
	if (cg_lower_is_lng_kernel(k))
		return cg_lower_layer_norm_grad(k); /* plus a residual */
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
		/* A result of no elements (sum(x, axis = 0) of x [2, 0]) has
		 * nothing to write: cg_lower_reduce's first loop, which sets
		 * every result element to 0 or -inf, wrote one past its 0
		 * bytes, into the buffer the slab placed there. */
		if (cg_lower_numel(k->L, &k->node->type) == 0)
			return true;
		return cg_lower_reduce(k);
	case IR_OP_ARGMAX:
	case IR_OP_ARGMIN:
		return cg_lower_argmax(k);
	case IR_OP_SOFTMAX:
	case IR_OP_LOG_SOFTMAX:
	case IR_OP_MASKED_SOFTMAX:
		return cg_lower_softmax(k);
	case IR_OP_LAYER_NORM:
		return cg_lower_layer_norm(k);
	case IR_OP_LAYER_NORM_GRAD:
		return cg_lower_layer_norm_grad(k);
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
	case IR_OP_SORT_GRAD:
		return cg_lower_sort_grad(k);
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
			 const cg_trees *tr, int64_t row_step, cg_kernel *k)
{
	const ir_node *node = &fn->g.nodes[id];
	memset(k, 0, sizeof *k);
	k->L = L;
	k->g = &fn->g;
	k->id = id;
	k->node = node;
	k->tr = *tr;
	k->n_in = tr->n_par;
	k->n_streams = cg_kernel_stream_ids(&fn->g, id, tr, k->stream_ids);
	k->row_step = row_step;
	uint32_t n_table = k->n_streams + (row_step >= 0);
	uint32_t n_ptr = k->n_in;
	if (n_table && cg_kernel_stream_room(tr, n_table))
		n_ptr++;
	char name[160];
	snprintf(name, sizeof name, "%s.k%u.%s", fn->name, id,
		 ir_op_table[node->op].name);
	LLVMContextRef c = LLVMGetModuleContext(L->mod);
	cg_fn_begin(&k->f, L->mod, name, kernel_type(c, n_ptr), true);
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
	if (n_ptr > k->n_in) {
		cg_fn_param_readonly(&k->f, 2 + k->n_in);
		k->streams = LLVMGetParam(k->f.fn, 2 + k->n_in);
	}
	k->lo = LLVMGetParam(k->f.fn, 2 + n_ptr);
	k->hi = LLVMGetParam(k->f.fn, 3 + n_ptr);
	k->extent = 1;
	cg_kernel_trees_begin(k);
	return true;
}

/* The GOMP_parallel body of kernel kfn: void (ptr captures), where the
 * captures are { ptr run, out, in...; i64 extent; i32 status }. */
LLVMTypeRef cg_kernel_captures_type(LLVMContextRef c, uint32_t n_in)
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
	LLVMTypeRef st = cg_kernel_captures_type(c, n_in);
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
 * same op, attributes but for dropout streams (an argument) and concrete
 * types. */
static bool same_kernel(const cg_lower *L, const ir_graph *ga, ir_id ia,
			const ir_graph *gb, ir_id ib)
{
	const ir_node *a = &ga->nodes[ia], *b = &gb->nodes[ib];
	if (a->op != b->op || a->n_args != b->n_args ||
	    !cg_lower_same_attr(a, b) ||
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
				    const cg_trees *tr, int n_valid,
				    bool is_step)
{
	for (uint32_t i = 0; i < p->n_built; i++) {
		const built_kernel *b = &p->built[i];
		if (b->is_shared && b->n_valid == n_valid &&
		    b->is_step == is_step && same_kernel(L, b->g, b->id, g, id) &&
		    cg_trees_eq(L, b->g, b->tr, g, tr))
			return &b->ref;
	}
	return NULL;
}

static bool remember_built(cg_program *p, const ir_graph *g, ir_id id,
			   const cg_trees *tr, const kernel_ref *ref,
			   bool is_shared, int n_valid, bool is_step)
{
	cg_trees *copy = ir_alloc(p->ctx, sizeof *copy);
	if (!copy || !ir_grow(p->ctx, (void **)&p->built, &p->built_cap,
			      p->n_built + 1, sizeof *p->built)) {
		ir_free(p->ctx, copy);
		return false;
	}
	*copy = *tr;
	p->built[p->n_built++] = (built_kernel){g,      id,        copy,
						*ref,   is_shared, n_valid,
						is_step};
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

/* Generates node id's kernel with trees tr and remembers it (for other
 * nodes to share unless is_own). */
static bool build_new(cg_program *p, cg_lower *L, const ir_func *fn, ir_id id,
		      const cg_trees *tr, kernel_ref *ref, bool is_own,
		      int n_valid, int64_t row_step)
{
	cg_kernel *k = ir_alloc(p->ctx, sizeof *k);
	if (!k || !kernel_begin(L, fn, id, tr, row_step, k)) {
		ir_free(p->ctx, k);
		return false;
	}
	bool ok = lower_op(k);
	bool has_own_stream = k->has_own_stream;
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
			ref->par = make_par(L, k->f.fn,
					    k->n_in + (k->streams != NULL));
			p->n_parallel++;
		}
	}
	ir_free(p->ctx, k);
	return ok && remember_built(p, &fn->g, id, tr, ref,
				    !has_own_stream && !is_own, n_valid,
				    row_step >= 0);
}

bool cg_kernel_build(cg_program *p, cg_lower *L, const ir_func *fn,
		     const ir_id *into, ir_id id, node_call *c)
{
	kernel_ref *ref = &c->ref;
	cg_trees *tr = ir_alloc(p->ctx, sizeof *tr);
	if (!tr || !cg_trees_build(L, &fn->g, id, into, tr)) {
		ir_free(p->ctx, tr);
		return false;
	}
	/* a side buffer (cg_node_side): the reader takes the writer's
	 * buffer, and the writer its own, so that its kernel is not one
	 * that writes none (cg_trees_eq counts the operands) */
	ir_id side = cg_node_side(L, &fn->g, id);
	if (side != IR_NONE)
		tr->n_par++;
	extra_params(&fn->g, id, tr, c);
	if (side != IR_NONE)
		c->extra[c->n_extra - 1] = side;
	/* A kernel leaving out dead rows reads the valid lengths last
	 * (cg_lower_row_skip_rows). A product's or an attention's code is
	 * its own (the lengths' meaning is not in the trees); a row-wise
	 * kernel's is shared with the same trees reading as many lengths
	 * (its code depends on nothing else of them); an add computing a
	 * product in its epilogue is a product. A kernel of a
	 * recurrence's step (cg_lower_row_step), product or row-wise,
	 * reads its step from its call's table and is shared with the
	 * other steps' (is_step in the key). */
	ir_id valid[2];
	int n_valid = cg_lower_row_skip_rows(L, &fn->g, id, tr, valid);
	for (int i = 0; i < n_valid; i++) {
		tr->n_par++;
		c->extra[c->n_extra++] = valid[i];
	}
	int64_t step = n_valid >= 0 ? cg_lower_row_step(L, &fn->g, id) : -1;
	ir_op op = fn->g.nodes[id].op;
	/* the product: the node's, or that of the add computing it */
	ir_id mm = op == IR_OP_MATMUL
			   ? id
			   : cg_lower_epilogue_matmul(&fn->g, into, id);
	bool is_additive = cg_attn_is_additive(op);
	if (n_valid >= 0 && (mm != IR_NONE || is_additive)) {
		L->n_row_skip++; /* the switch's share */
		L->row_skip_macs += is_additive ? cg_attn_macs(L, &fn->g, id)
						: cg_lower_matmul_macs(L, &fn->g,
								       mm);
	}
	/* the call's table: its streams, then its rows' step */
	uint32_t ids[CG_TREE_MAX + 2];
	uint32_t n_ids = cg_kernel_stream_ids(&fn->g, id, tr, ids);
	if (step >= 0)
		ids[n_ids++] = (uint32_t)step;
	bool has_room = cg_kernel_stream_room(tr, n_ids);
	c->streams = n_ids && has_room ? cg_lower_stream_table(L, ids, n_ids)
				       : NULL;
	bool is_own = n_valid >= 0 && step < 0 &&
		      (mm != IR_NONE || cg_attn_is_fused(op));
	const kernel_ref *old = has_room && !is_own
					? find_built(p, L, &fn->g, id, tr,
						     n_valid, step >= 0)
					: NULL;
	if (old) {
		*ref = *old;
		ir_free(p->ctx, tr);
		return true;
	}
	bool ok = build_new(p, L, fn, id, tr, ref, is_own, n_valid, step);
	ir_free(p->ctx, tr);
	return ok;
}

void cg_kernel_built_fini(cg_program *p)
{
	for (uint32_t i = 0; p->built && i < p->n_built; i++)
		ir_free(p->ctx, p->built[i].tr);
	ir_free(p->ctx, p->built);
}
