/*
 * cg_lower_entry.c - the entry point of each exported function: the
 * kernels of its computing nodes built (or shared) in program order, its
 * memory plan, and the LLVM function that loads the caller's pointers,
 * calls each kernel over its whole range (through GOMP_parallel when it
 * has a parallel body and the run asks for more than one thread; or all
 * of them side by side under a static schedule, cg_lower_sched.c),
 * returns the first kernel's error code, and copies the outputs that
 * their kernels did not write in place.
 *
 * Where a node's data is at run time: an input's in the caller's
 * inputs array, a parameter's in the params block at its offset, a
 * constant's in a private global made on first use, every other
 * buffer's in the scratch slab at the plan's offset (cg_lower_plan.c),
 * or, for a buffer the plan gives an output (func_plan.direct), in the
 * caller's outputs array; a view adds its byte offset to its root's
 * pointer.
 */
#include "cg_attn.h"
#include "cg_entry.h"
#include "passes.h"
#include "rowbound.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

static attnrt_dtype abi_dtype(ir_dtype t)
{
	return t == IR_I32 ? ATTNRT_I32 : ATTNRT_F32;
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
	size_t bytes = (size_t)cg_lower_bytes(e->L, &c->type);
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
	else if (e->plan.direct[r] != UINT32_MAX)
		p = e->outputs[e->plan.direct[r]];
	else
		p = byte_gep(&e->f, e->scratch, e->offset[r]);
	return e->plan.view[i] ? byte_gep(&e->f, p, e->plan.view[i]) : p;
}

LLVMValueRef cg_entry_node_status(cg_fn *f, LLVMValueRef st, ir_id id)
{
	return LLVMBuildOr(f->b, st, cg_i32(f, (int32_t)(id << 8)), "");
}

/* Returns node id's kernel's status from the entry point, naming the
 * node, if it is not 0. */
static void check_status(entry_gen *e, LLVMValueRef st, ir_id id)
{
	cg_fn *f = &e->f;
	LLVMValueRef bad = LLVMBuildICmp(f->b, LLVMIntNE, st, cg_i32(f, 0), "");
	LLVMBasicBlockRef fail = cg_block(f, "failed"), ok = cg_block(f, "next");
	LLVMBuildCondBr(f->b, bad, fail, ok);
	LLVMPositionBuilderAtEnd(f->b, fail);
	LLVMBuildRet(f->b, cg_entry_node_status(f, st, id));
	LLVMPositionBuilderAtEnd(f->b, ok);
}

/* i32 K.launch(ptr run, ptr out, ptr in...): kernel K over its whole
 * range, through GOMP_parallel when the run asks for more than one
 * thread (a region of one thread costs a team's set-up, an allocation
 * when nested as in a shard of a training step, for nothing), else
 * called here; returns its status. One per parallel kernel, shared by
 * its in-order calls: written out at each call, the team's captures
 * made the in-order paths of a 12-layer GPT's entry points 40% of their
 * instructions, which the whole-module passes and part 0's machine code
 * then went through one by one. optnone as the entry points, so it
 * compiles with them (part 0); the passes that specialize K to its call
 * sites see through it (its arguments are K's). */
static LLVMValueRef launch_fn(entry_gen *e, const kernel_ref *k, uint32_t n_in)
{
	char name[300];
	snprintf(name, sizeof name, "%s.launch",
		 LLVMGetValueName2(k->fn, &(size_t){0}));
	LLVMValueRef fn = LLVMGetNamedFunction(e->L->mod, name);
	if (fn)
		return fn;
	LLVMContextRef c = LLVMGetModuleContext(e->L->mod);
	LLVMTypeRef ps[2 + CG_KERNEL_MAX_IN + 2];
	for (uint32_t i = 0; i < 2 + n_in; i++)
		ps[i] = LLVMPointerTypeInContext(c, 0);
	cg_fn f;
	cg_fn_begin(&f, e->L->mod, name,
		    LLVMFunctionType(LLVMInt32TypeInContext(c), ps, 2 + n_in, 0),
		    true);
	cg_fn_attr(&f, "noinline");
	cg_fn_attr(&f, "optnone");
	unsigned noalias = LLVMGetEnumAttributeKindForName("noalias", 7);
	LLVMValueRef args[2 + CG_KERNEL_MAX_IN + 2];
	for (uint32_t i = 0; i < 2 + n_in; i++) {
		/* it only passes them on: K's own say what it may assume */
		LLVMRemoveEnumAttributeAtIndex(f.fn, i + 1, noalias);
		args[i] = LLVMGetParam(f.fn, i);
	}
	LLVMValueRef nt = cg_run_field(&f, args[0], cg_t_i32(&f),
				       offsetof(attnrt_run, n_threads));
	LLVMBasicBlockRef team = cg_block(&f, "team"),
			  direct = cg_block(&f, "direct");
	LLVMBuildCondBr(f.b,
			LLVMBuildICmp(f.b, LLVMIntEQ, nt, cg_i32(&f, 1), ""),
			direct, team);
	LLVMPositionBuilderAtEnd(f.b, direct);
	args[2 + n_in] = cg_i64(&f, 0);
	args[3 + n_in] = cg_i64(&f, k->extent);
	LLVMBuildRet(f.b, cg_call(&f, k->fn, args, 4 + n_in));
	LLVMPositionBuilderAtEnd(f.b, team);
	LLVMTypeRef st = cg_kernel_captures_type(c, n_in);
	LLVMValueRef cap = LLVMBuildAlloca(f.b, st, "cap");
	for (uint32_t i = 0; i < 2 + n_in; i++)
		LLVMBuildStore(f.b, args[i],
			       LLVMBuildStructGEP2(f.b, st, cap, i, ""));
	LLVMBuildStore(f.b, cg_i64(&f, k->extent),
		       LLVMBuildStructGEP2(f.b, st, cap, 2 + n_in, ""));
	LLVMValueRef status_at = LLVMBuildStructGEP2(f.b, st, cap, 3 + n_in, "");
	LLVMBuildStore(f.b, cg_i32(&f, 0), status_at);
	LLVMValueRef neg = LLVMBuildICmp(f.b, LLVMIntSLT, nt, cg_i32(&f, 0), "");
	nt = LLVMBuildSelect(f.b, neg, cg_i32(&f, 0), nt, "");
	cg_gomp_parallel(&f, k->par, cap, nt);
	LLVMBuildRet(f.b, LLVMBuildLoad2(f.b, cg_t_i32(&f), status_at, ""));
	cg_fn_end(&f);
	return f.fn;
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
	if (c->streams)
		args[na++] = c->streams;
	return na;
}

/* Calls node id's kernel over its whole range: a parallel kernel
 * through its launcher (launch_fn), any other directly. */
static void call_kernel(entry_gen *e, ir_id id, const node_call *c)
{
	cg_fn *f = &e->f;
	const kernel_ref *k = &c->ref;
	LLVMValueRef args[2 + CG_KERNEL_MAX_IN + 2];
	uint32_t na = cg_entry_kernel_args(e, id, c, args);
	LLVMValueRef t0 = cg_profile_start(e);
	LLVMValueRef st;
	if (k->par) {
		st = cg_call(f, launch_fn(e, k, na - 2), args, na);
	} else {
		args[na++] = cg_i64(f, 0);
		args[na++] = cg_i64(f, k->extent);
		st = cg_call(f, k->fn, args, na);
	}
	check_status(e, st, id);
	cg_profile_add(e, e->prof_site ? e->prof_site[id] : 0, t0, true);
}

/* Copies each output that its kernel did not write in place (a leaf, a
 * view, one sharing its buffer with an earlier output). */
void cg_entry_copy_outputs(entry_gen *e)
{
	cg_fn *f = &e->f;
	for (uint32_t o = 0; o < e->fn->n_outputs; o++) {
		ir_id id = e->fn->outputs[o];
		if (e->plan.direct[e->plan.root[id]] == o)
			continue;
		uint64_t bytes = cg_lower_bytes(e->L, &e->fn->g.nodes[id].type);
		LLVMBuildMemCpy(f->b, e->outputs[o], 4, cg_entry_node_ptr(e, id),
				4, cg_i64(f, (int64_t)bytes));
	}
}

static void load_pointers(cg_fn *f, LLVMValueRef array, uint32_t n,
			  LLVMValueRef *out)
{
	for (uint32_t i = 0; i < n; i++) {
		LLVMValueRef at = LLVMBuildInBoundsGEP2(f->b, cg_t_ptr(f), array,
							&(LLVMValueRef){
								cg_i64(f, i)},
							1, "");
		out[i] = LLVMBuildLoad2(f->b, cg_t_ptr(f), at, "");
	}
}

void cg_entry_load_outputs(entry_gen *e, LLVMValueRef outputs)
{
	load_pointers(&e->f, outputs, e->fn->n_outputs, e->outputs);
}

void cg_entry_load_inputs(entry_gen *e, LLVMValueRef inputs)
{
	load_pointers(&e->f, inputs, e->fn->n_inputs, e->inputs);
}

/* Range i of the tables at (pointers) and bytes: its first byte and
 * one past its last as i64, and whether it is not empty. */
static void range_at(cg_fn *f, LLVMValueRef at, LLVMValueRef bytes,
		     LLVMValueRef i, LLVMValueRef *lo, LLVMValueRef *hi,
		     LLVMValueRef *live)
{
	LLVMTypeRef ptr = cg_t_ptr(f), i64 = cg_t_i64(f);
	LLVMValueRef p = LLVMBuildLoad2(f->b, ptr,
					LLVMBuildInBoundsGEP2(f->b, ptr, at, &i,
							      1, ""),
					"");
	LLVMValueRef sz = LLVMBuildLoad2(f->b, i64,
					 LLVMBuildInBoundsGEP2(f->b, i64, bytes,
							       &i, 1, ""),
					 "");
	*lo = LLVMBuildPtrToInt(f->b, p, i64, "");
	*hi = LLVMBuildAdd(f->b, *lo, sz, "");
	*live = LLVMBuildICmp(f->b, LLVMIntNE, sz, cg_i64(f, 0), "");
}

static LLVMValueRef ult(cg_fn *f, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildICmp(f->b, LLVMIntULT, a, b, "");
}

/* The module's function that tells whether the caller's buffers of an
 * entry point's call keep apart: i32 (ptr at, ptr bytes, i64 n_out, i64 n)
 * over n ranges [at[i], at[i] + bytes[i]), the first n_out the outputs;
 * returns ATTNRT_ERR_OVERLAP | (o << 8) for the first output o that
 * shares a byte with any later range (empty ranges share none), else 0.
 * Inputs and params may overlap one another: the call only reads them.
 * The common case costs a pass over the ranges: the outputs in address
 * order, each starting at or after the previous one's end, and none
 * meeting the span from the lowest input (or params) to the highest;
 * only otherwise are pairs compared one by one, to name the output. */
static LLVMValueRef overlap_fn(LLVMModuleRef mod)
{
	static const char name[] = "attnc.outputs_overlap";
	LLVMValueRef fn = LLVMGetNamedFunction(mod, name);
	if (fn)
		return fn;
	LLVMContextRef c = LLVMGetModuleContext(mod);
	LLVMTypeRef ptr = LLVMPointerTypeInContext(c, 0);
	LLVMTypeRef i64 = LLVMInt64TypeInContext(c),
		    i1 = LLVMInt1TypeInContext(c);
	LLVMTypeRef ps[4] = {ptr, ptr, i64, i64};
	cg_fn f;
	cg_fn_begin(&f, mod, name,
		    LLVMFunctionType(LLVMInt32TypeInContext(c), ps, 4, 0), true);
	cg_fn_param_readonly(&f, 0);
	cg_fn_param_readonly(&f, 1);
	LLVMValueRef at = LLVMGetParam(f.fn, 0), bytes = LLVMGetParam(f.fn, 1);
	LLVMValueRef n_out = LLVMGetParam(f.fn, 2), n = LLVMGetParam(f.fn, 3);
	LLVMValueRef lo[2], hi[2], live[2];
	cg_loop l0, l1;
	/* The span of the inputs and params. */
	LLVMValueRef span_lo = cg_var(&f, i64, cg_i64(&f, -1));
	LLVMValueRef span_hi = cg_var(&f, i64, cg_i64(&f, 0));
	LLVMValueRef j = cg_loop_begin(&f, &l0, n_out, n, 1);
	range_at(&f, at, bytes, j, &lo[0], &hi[0], &live[0]);
	LLVMValueRef sl = LLVMBuildLoad2(f.b, i64, span_lo, "");
	LLVMValueRef sh = LLVMBuildLoad2(f.b, i64, span_hi, "");
	LLVMValueRef m = LLVMBuildSelect(f.b, ult(&f, lo[0], sl), lo[0], sl, "");
	LLVMBuildStore(f.b, LLVMBuildSelect(f.b, live[0], m, sl, ""), span_lo);
	m = LLVMBuildSelect(f.b, ult(&f, sh, hi[0]), hi[0], sh, "");
	LLVMBuildStore(f.b, LLVMBuildSelect(f.b, live[0], m, sh, ""), span_hi);
	cg_loop_end(&f, &l0);
	/* The outputs in order and apart from that span? */
	sl = LLVMBuildLoad2(f.b, i64, span_lo, "");
	sh = LLVMBuildLoad2(f.b, i64, span_hi, "");
	LLVMValueRef prev = cg_var(&f, i64, cg_i64(&f, 0));
	LLVMValueRef fast = cg_var(&f, i1, LLVMConstInt(i1, 1, 0));
	LLVMValueRef o = cg_loop_begin(&f, &l0, cg_i64(&f, 0), n_out, 1);
	range_at(&f, at, bytes, o, &lo[0], &hi[0], &live[0]);
	LLVMValueRef pe = LLVMBuildLoad2(f.b, i64, prev, "");
	LLVMValueRef bad = LLVMBuildOr(f.b, ult(&f, lo[0], pe),
				       LLVMBuildAnd(f.b, ult(&f, lo[0], sh),
						    ult(&f, sl, hi[0]), ""),
				       "");
	bad = LLVMBuildAnd(f.b, live[0], bad, "");
	LLVMBuildStore(f.b,
		       LLVMBuildAnd(f.b, LLVMBuildLoad2(f.b, i1, fast, ""),
				    LLVMBuildNot(f.b, bad, ""), ""),
		       fast);
	LLVMBuildStore(f.b, LLVMBuildSelect(f.b, live[0], hi[0], pe, ""), prev);
	cg_loop_end(&f, &l0);
	LLVMBasicBlockRef done = cg_block(&f, "apart"),
			  slow = cg_block(&f, "pairs");
	LLVMBuildCondBr(f.b, LLVMBuildLoad2(f.b, i1, fast, ""), done, slow);
	LLVMPositionBuilderAtEnd(f.b, done);
	LLVMBuildRet(f.b, cg_i32(&f, 0));
	/* Every output against every later range. */
	LLVMPositionBuilderAtEnd(f.b, slow);
	LLVMValueRef idx[2];
	idx[0] = cg_loop_begin(&f, &l0, cg_i64(&f, 0), n_out, 1);
	idx[1] = cg_loop_begin(&f, &l1, cg_addi(&f, idx[0], 1), n, 1);
	for (int k = 0; k < 2; k++)
		range_at(&f, at, bytes, idx[k], &lo[k], &hi[k], &live[k]);
	LLVMValueRef hit = LLVMBuildAnd(f.b, ult(&f, lo[0], hi[1]),
					ult(&f, lo[1], hi[0]), "");
	hit = LLVMBuildAnd(f.b, hit, LLVMBuildAnd(f.b, live[0], live[1], ""),
			   "");
	LLVMBasicBlockRef found = cg_block(&f, "overlap");
	LLVMBasicBlockRef next = cg_block(&f, "next");
	LLVMBuildCondBr(f.b, hit, found, next);
	LLVMPositionBuilderAtEnd(f.b, found);
	LLVMValueRef oi = LLVMBuildTrunc(f.b, idx[0], cg_t_i32(&f), "");
	LLVMBuildRet(f.b,
		     LLVMBuildOr(f.b, LLVMBuildShl(f.b, oi, cg_i32(&f, 8), ""),
				 cg_i32(&f, ATTNRT_ERR_OVERLAP), ""));
	LLVMPositionBuilderAtEnd(f.b, next);
	cg_loop_end(&f, &l1);
	cg_loop_end(&f, &l0);
	LLVMBuildRet(f.b, cg_i32(&f, 0));
	fn = f.fn;
	cg_fn_end(&f);
	return fn;
}

/* Returns ATTNRT_ERR_OVERLAP | (o << 8) from the entry point when the
 * caller's output o shares a byte with an input, params or another
 * output: the kernels write outputs as they go (later ones read them
 * there) and only read inputs and params, so such a call would return
 * wrong values or change the parameters without a word. */
static void check_outputs_apart(entry_gen *e, LLVMValueRef overlap)
{
	cg_fn *f = &e->f;
	const ir_func *fn = e->fn;
	uint32_t n = fn->n_outputs + fn->n_inputs + 1;
	LLVMTypeRef ptr = cg_t_ptr(f), i64 = cg_t_i64(f);
	LLVMValueRef *sizes = ir_alloc(e->p->ctx, n * sizeof *sizes);
	if (!sizes)
		return;
	LLVMValueRef at = cg_entry_alloca(f, LLVMArrayType2(ptr, n), 8);
	for (uint32_t i = 0; i < n; i++) {
		LLVMValueRef p;
		uint64_t bytes;
		if (i < fn->n_outputs) {
			p = e->outputs[i];
			bytes = cg_lower_bytes(e->L,
					       &fn->g.nodes[fn->outputs[i]].type);
		} else if (i < n - 1) {
			p = e->inputs[i - fn->n_outputs];
			bytes = cg_lower_bytes(
				e->L,
				&fn->g.nodes[fn->inputs[i - fn->n_outputs]].type);
		} else {
			p = e->params;
			bytes = e->p->params_bytes;
		}
		sizes[i] = cg_const_int(i64, bytes);
		LLVMValueRef k = cg_i64(f, i);
		LLVMBuildStore(f->b, p,
			       LLVMBuildInBoundsGEP2(f->b, ptr, at, &k, 1, ""));
	}
	LLVMValueRef init = LLVMConstArray2(i64, sizes, n);
	ir_free(e->p->ctx, sizes);
	LLVMValueRef g = LLVMAddGlobal(f->mod, LLVMTypeOf(init), "out_bytes");
	LLVMSetInitializer(g, init);
	LLVMSetGlobalConstant(g, 1);
	LLVMSetLinkage(g, LLVMPrivateLinkage);
	LLVMSetUnnamedAddress(g, LLVMGlobalUnnamedAddr);
	LLVMValueRef args[4] = {at, g, cg_i64(f, fn->n_outputs), cg_i64(f, n)};
	LLVMValueRef st = cg_call(f, overlap, args, 4);
	LLVMValueRef bad = LLVMBuildICmp(f->b, LLVMIntNE, st, cg_i32(f, 0), "");
	LLVMBasicBlockRef fail = cg_block(f, "overlap"),
			  ok = cg_block(f, "apart");
	LLVMBuildCondBr(f->b, bad, fail, ok);
	LLVMPositionBuilderAtEnd(f->b, fail);
	LLVMBuildRet(f->b, st);
	LLVMPositionBuilderAtEnd(f->b, ok);
}

static void build_entry(entry_gen *e, const cg_entry *ce, const node_call *ks,
			const sched_plan *sp)
{
	cg_fn *f = &e->f;
	LLVMContextRef c = LLVMGetModuleContext(e->L->mod);
	LLVMTypeRef ptr = LLVMPointerTypeInContext(c, 0);
	LLVMTypeRef ps[5] = {ptr, ptr, ptr, ptr, ptr};
	LLVMTypeRef ft = LLVMFunctionType(LLVMInt32TypeInContext(c), ps, 5, 0);
	LLVMValueRef overlap = e->fn->n_outputs ? overlap_fn(e->L->mod) : NULL;
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
	cg_entry_load_outputs(e, LLVMGetParam(f->fn, 4));
	if (overlap)
		check_outputs_apart(e, overlap);
	e->prof_t0 = cg_profile_start(e);
	if (sp->usable) {
		LLVMBasicBlockRef in_order = cg_block(f, "in_order");
		cg_sched_emit(e, ks, sp, LLVMGetParam(f->fn, 4), in_order);
		LLVMPositionBuilderAtEnd(f->b, in_order);
	}
	for (ir_id i = 0; i < e->fn->g.n_nodes; i++)
		if (ks[i].ref.fn)
			call_kernel(e, i, &ks[i]);
	cg_entry_copy_outputs(e);
	cg_profile_add(e, 0, e->prof_t0, true);
	LLVMBuildRet(f->b, cg_i32(f, 0));
	cg_fn_end(f);
}

bool cg_entry_lower(cg_program *p, cg_lower *L, cg_entry *ce, const char *prefix)
{
	const ir_func *fn = ce->fn;
	entry_gen e = {.p = p, .L = L, .fn = fn};
	uint32_t n = fn->g.n_nodes;
	node_call *ks = ir_alloc(p->ctx, (n + 1) * sizeof *ks);
	e.inputs = ir_alloc(p->ctx, (fn->n_inputs + 1) * sizeof *e.inputs);
	e.outputs = ir_alloc(p->ctx, (fn->n_outputs + 1) * sizeof *e.outputs);
	sched_plan sp = {0};
	bool ok = ks && e.inputs && e.outputs &&
		  cg_func_plan_make(L, fn, p->no_fuse, &e.plan);
	e.offset = e.plan.offset;
	snprintf(ce->symbol, sizeof ce->symbol, "%s_%s", prefix, fn->name);
	/* Which rows the forward's products may leave out (row_skip). */
	pass_rowlive rl;
	bool has_rl = ok && L->row_skip &&
		      pass_rowlive_analyze(p->ctx, p->m, fn, &rl);
	if (ok && L->row_skip && !has_rl) {
		pass_rowlive_fini(p->ctx, &rl);
		ok = false;
	}
	L->rl = has_rl ? &rl : NULL;
	bool *fwd = has_rl ? ir_alloc(p->ctx, (n + 1) * sizeof *fwd) : NULL;
	ok = ok && (!has_rl || fwd);
	if (fwd) /* whose row-wise kernels leave out dead rows (a
		  * gradient's kernels its zero rows) */
		pass_rowbound_forward(&fn->g, fwd);
	L->rl_fwd = fwd;
	for (ir_id i = 0; ok && i < n; i++) {
		ir_op op = fn->g.nodes[i].op;
		if ((ir_op_table[op].flags & IR_OPF_LEAF) || op == IR_OP_RESHAPE)
			continue;
		if (!cg_lower_node_compiles(L, &fn->g, i)) {
			ok = false;
		} else if (e.plan.root[i] != i) {
			continue; /* a view: its readers take its root's pointer */
		} else if (e.plan.into[i] != IR_NONE) {
			p->n_fused++;
		} else {
			ok = cg_kernel_build(p, L, fn, e.plan.into, i, &ks[i]);
			ce->n_calls++;
		}
		if (op == IR_OP_MATMUL) /* its kernel may be another's */
			L->macs += cg_lower_matmul_macs(L, &fn->g, i);
		if (op == IR_OP_FUSED_ATTENTION ||
		    op == IR_OP_FUSED_ATTENTION_GRAD ||
		    op == IR_OP_FUSED_ADDITIVE_ATTENTION ||
		    op == IR_OP_FUSED_ADDITIVE_ATTENTION_GRAD)
			L->macs += cg_attn_macs(L, &fn->g, i);
	}
	L->rl = NULL;
	L->rl_fwd = NULL;
	ir_free(p->ctx, fwd);
	if (has_rl)
		pass_rowlive_fini(p->ctx, &rl);
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
		/* The peak of the layout that sets the slab's size. */
		cg_scratch_peak *pk = sp.usable && sp.total > e.plan.total
					      ? &sp.peak
					      : &e.plan.peak;
		ce->peak = *pk;
		*pk = (cg_scratch_peak){0};
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
	cg_func_plan_fini(p->ctx, &e.plan);
	ir_free(p->ctx, ks);
	ir_free(p->ctx, e.inputs);
	ir_free(p->ctx, e.outputs);
	return ok;
}
