/*
 * example.c - `example NAME(args)`: example inputs of an exported
 * function, made into module constants.
 *
 * The arguments are elaborated like any expression, into a scratch
 * function that is thrown away; its nodes are then evaluated here in C.
 * Only what example inputs need is allowed (the ops ops.def flags
 * IR_OPF_EXAMPLE): constants (constructors, list literals), layout
 * (reshape, broadcast, permute, repeat, slice, concat), casts and
 * elementwise arithmetic, which is the interpreter's (ir/ir_scalar.h). The results are checked against the
 * function's declared input types, binding its dims.
 */
#include "elab.h"
#include "ir_scalar.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* A constant tensor being computed: static type, elements as doubles. */
typedef struct cval {
	ir_type t;
	double *d;
} cval;

static int64_t numel(const ir_type *t)
{
	return ir_type_numel_static(t);
}

/* Row-major coordinates of element i of t. */
static void unravel(const ir_type *t, int64_t i, int64_t *coord)
{
	for (int k = t->rank; k-- > 0;) {
		int64_t n = t->dims[k].coef;
		coord[k] = n ? i % n : 0;
		i = n ? i / n : 0;
	}
}

/* Element index in t of output coordinates (rank out_rank), with
 * broadcasting (t right-aligned, size-1 axes repeated). */
static int64_t ravel_bcast(const ir_type *t, const int64_t *coord, int out_rank)
{
	int64_t idx = 0;
	for (int k = 0; k < t->rank; k++) {
		int64_t n = t->dims[k].coef;
		int64_t c = coord[k + out_rank - t->rank];
		idx = idx * n + (n == 1 ? 0 : c);
	}
	return idx;
}

static int64_t ravel(const ir_type *t, const int64_t *coord)
{
	return ravel_bcast(t, coord, t->rank);
}

/* Where element oc of a layout op's result is read from its operand j:
 * sets *j and ic (is_example_op has admitted the op). */
static void layout_source(const ir_node *n, const cval *const *in,
			  const int64_t *oc, int64_t *ic, uint32_t *j)
{
	const ir_type *t = &n->type;
	*j = 0;
	memcpy(ic, oc, IR_MAX_RANK * sizeof *ic);
	if (n->op == IR_OP_PERMUTE) {
		for (int k = 0; k < t->rank; k++)
			ic[n->attr.permute.perm[k]] = oc[k];
	} else if (n->op == IR_OP_REPEAT) {
		for (int k = 0; k < t->rank; k++)
			ic[k] = oc[k] % in[0]->t.dims[k].coef;
	} else if (n->op == IR_OP_SLICE) {
		int ax = n->attr.slice.axis;
		ic[ax] = n->attr.slice.start + oc[ax] * n->attr.slice.step;
	} else if (n->op == IR_OP_CONCAT) {
		int ax = n->attr.axis;
		while (ic[ax] >= in[*j]->t.dims[ax].coef) {
			ic[ax] -= in[*j]->t.dims[ax].coef;
			(*j)++;
		}
	}
}

static bool is_layout(ir_op op)
{
	return op == IR_OP_PERMUTE || op == IR_OP_REPEAT || op == IR_OP_SLICE ||
	       op == IR_OP_CONCAT;
}

/* n's op on one element, a (and b for a binary op), by its scalar
 * function (ir/ir_scalar.h) as the interpreter computes it: integers
 * exactly and wrapped to int32, floats in double. False on an integer
 * division by zero. */
static bool arith(const ir_node *n, ir_dtype in, double a, double b, double *r)
{
	const ir_op_info *info = &ir_op_table[n->op];
	int64_t v = 0;
	if (info->family == IR_FAM_CAST) {
		*r = n->type.dtype == IR_I32 ? ir_scalar_f2i(a) : a;
		return true;
	}
	if (info->family == IR_FAM_UNARY) {
		if (in != IR_I32) {
			*r = ir_scalar_unary(n->op, a);
			return true;
		}
		v = ir_scalar_unary_int(n->op, (int64_t)a);
	} else if (in != IR_I32) {
		*r = ir_scalar_binary(n->op, a, b);
		return true;
	} else if (ir_scalar_binary_int(n->op, (int64_t)a, (int64_t)b, &v) !=
		   IR_SCALAR_OK) {
		return false;
	}
	*r = (int32_t)(uint32_t)(uint64_t)v;
	return true;
}

/* Element i of node n's result into *r, from its operands' values; false
 * after reporting an integer division by zero. */
static bool element(fe_elab *e, const ir_node *n, const cval *const *in,
		    int64_t i, double *r)
{
	int64_t oc[IR_MAX_RANK], ic[IR_MAX_RANK];
	uint32_t j;
	const ir_type *t = &n->type;
	unravel(t, i, oc);
	if (n->op == IR_OP_RESHAPE) {
		*r = in[0]->d[i];
		return true;
	}
	if (is_layout(n->op)) {
		layout_source(n, in, oc, ic, &j);
		*r = in[j]->d[ravel(&in[j]->t, ic)];
		return true;
	}
	double a = in[0]->d[ravel_bcast(&in[0]->t, oc, t->rank)];
	if (n->op == IR_OP_BROADCAST) {
		*r = a;
		return true;
	}
	double b = n->n_args > 1 ? in[1]->d[ravel_bcast(&in[1]->t, oc, t->rank)]
				 : 0;
	if (arith(n, in[0]->t.dtype, a, b, r))
		return true;
	ir_error(e->ctx, n->loc, "an example input divides an integer by zero");
	return false;
}

/* Whether examples may use op, which only this file evaluates: constants,
 * layout, casts and the elementwise arithmetic ops.def flags so. */
static bool is_example_op(ir_op op)
{
	return (unsigned)op < IR_OP_COUNT &&
	       (ir_op_table[op].flags & IR_OPF_EXAMPLE);
}

/* Computes node id of g into vals[id]. */
static bool eval_node(fe_elab *e, const ir_graph *g, ir_id id, cval *vals)
{
	const ir_node *n = &g->nodes[id];
	const cval *in[16];
	int64_t count = numel(&n->type);
	if (!is_example_op(n->op) || n->n_args > 16 || count < 0) {
		ir_error(e->ctx, n->loc,
			 "an example input must be computed at "
			 "compile time: '%s' is not allowed here",
			 ir_op_table[n->op].name);
		return false;
	}
	cval *out = &vals[id];
	out->t = n->type;
	out->d = ir_alloc(e->ctx, (size_t)(count ? count : 1) * sizeof(double));
	if (!out->d)
		return false;
	if (n->op == IR_OP_CONST) {
		const ir_const *c = &e->m->consts[n->attr.const_index];
		for (int64_t i = 0; i < count; i++)
			out->d[i] = c->type.dtype == IR_I32
					    ? ((int32_t *)c->data)[i]
				    : c->type.dtype == IR_F32
					    ? ((float *)c->data)[i]
					    : ((double *)c->data)[i];
		return true;
	}
	for (uint32_t j = 0; j < n->n_args; j++)
		in[j] = &vals[ir_arg(g, id, j)];
	for (int64_t i = 0; i < count; i++) {
		double v;
		if (!element(e, n, in, i, &v))
			return false;
		out->d[i] = n->type.dtype == IR_F32 ? (double)(float)v : v;
	}
	return true;
}

/* Checks an example's type against the function's input i, binding the
 * input's symbols in sym_vals. */
static bool check_arg(fe_elab *e, const ir_func *f, uint32_t i,
		      const ir_type *have, int64_t *sym_vals, ir_loc loc)
{
	char hs[128], ws[128], why[96] = "";
	if (f->inputs[i] == IR_NONE)
		return false;
	const ir_type *want = &f->g.nodes[f->inputs[i]].type;
	bool ok = have->dtype == want->dtype && have->rank == want->rank;
	for (int k = 0; ok && k < want->rank; k++) {
		ir_dim w = want->dims[k];
		int64_t h = have->dims[k].coef;
		if (ir_dim_is_static(w)) {
			ok = h == w.coef;
			continue;
		}
		int64_t bound = sym_vals[w.sym];
		ok = h % w.coef == 0 && h > 0 && (!bound || bound == h / w.coef);
		if (ok)
			sym_vals[w.sym] = h / w.coef;
		else if (h <= 0)
			snprintf(why, sizeof why,
				 " (a dim's value is at least 1: %s would be "
				 "%lld)",
				 e->m->syms[w.sym].name,
				 (long long)(h / w.coef));
		else if (bound)
			snprintf(why, sizeof why,
				 " (%s is %lld from an earlier "
				 "argument)",
				 e->m->syms[w.sym].name, (long long)bound);
	}
	if (ok)
		return true;
	ir_type_format(e->m, have, hs, sizeof hs);
	ir_type_format(e->m, want, ws, sizeof ws);
	ir_error(e->ctx, loc,
		 "example argument '%s' of '%s' is %s[%s], "
		 "expected %s[%s]%s",
		 f->input_names[i], f->name, ir_dtype_name(have->dtype), hs,
		 ir_dtype_name(want->dtype), ws, why);
	return false;
}

/* Stores the value of scratch node id as a module constant. */
static int32_t store(fe_elab *e, const cval *v)
{
	int64_t n = numel(&v->t);
	void *data = ir_alloc(e->ctx, (size_t)(n ? n : 1) * 4);
	if (!data)
		return -1;
	for (int64_t i = 0; i < n; i++) {
		if (v->t.dtype == IR_I32)
			((int32_t *)data)[i] = ir_scalar_f2i(v->d[i]);
		else
			((float *)data)[i] = (float)v->d[i];
	}
	int32_t idx = ir_module_add_const(e->m, &v->t, data);
	ir_free(e->ctx, data);
	return idx;
}

/* The exported function an example names, or NULL after reporting. */
static const fe_def *example_target(fe_elab *e, const fe_decl *d, ir_func **f)
{
	const fe_ident *id = &d->names[0];
	fe_value v = fe_lookup(e, id->name, id->loc);
	*f = ir_module_find_func(e->m, id->name);
	if (v.kind == FE_V_ERR)
		return NULL;
	if (v.kind != FE_V_DEF || !v.def->is_export || !*f) {
		ir_error(e->ctx, id->loc,
			 "example: '%s' is not an exported "
			 "function",
			 id->name);
		return NULL;
	}
	if ((*f)->example) {
		ir_error(e->ctx, id->loc, "'%s' already has an example",
			 id->name);
		return NULL;
	}
	return v.def;
}

/* Argument i of f as a tensor: a number is a rank-0 tensor of the
 * input's dtype, or f32 where it is no i32 (a real number for an i32
 * input, which check_arg then reports as a wrong dtype). */
static ir_id arg_tensor(fe_elab *e, const ir_func *f, uint32_t i, fe_value v,
			ir_loc loc)
{
	if (v.kind != FE_V_NUM)
		return fe_to_tensor(e, v, loc);
	bool is_i32 = f->inputs[i] != IR_NONE &&
		      f->g.nodes[f->inputs[i]].type.dtype == IR_I32 &&
		      v.num.r == floor(v.num.r) && v.num.r >= INT32_MIN &&
		      v.num.r <= INT32_MAX;
	fe_value t = fe_scalar(e, is_i32 ? IR_I32 : IR_F32, v, loc);
	return t.kind == FE_V_TENSOR ? t.tensor : IR_NONE;
}

/* Elaborates the arguments into the scratch function; ids[i] gets the
 * node of argument i. */
static bool example_args(fe_elab *e, const fe_decl *d, const fe_def *def,
			 const ir_func *f, ir_id *ids, ir_loc *locs)
{
	uint32_t n = def->n_params;
	fe_raw_arg *raw = ir_alloc(e->ctx, (d->n_args + 1) * sizeof *raw);
	const char **names = ir_alloc(e->ctx, (n + 1) * sizeof *names);
	fe_args a = {def->id.name,
		     d->loc,
		     ir_alloc(e->ctx, (n + 1) * sizeof(fe_value)),
		     locs,
		     ir_alloc(e->ctx, n + 1),
		     n};
	bool ok = raw && names && a.v && a.is_t;
	for (uint32_t i = 0; ok && i < n; i++)
		names[i] = def->params[i].id.name;
	for (uint32_t i = 0; ok && i < d->n_args; i++)
		raw[i] = (fe_raw_arg){d->args[i].name, d->args[i].name_loc,
				      d->args[i].value->loc,
				      fe_eval(e, d->args[i].value), false};
	ok = ok && fe_bind_args(e, def->id.name, d->names[0].loc, names, n, n,
				raw, d->n_args, &a);
	for (uint32_t i = 0; ok && i < n; i++)
		ok = (ids[i] = arg_tensor(e, f, i, a.v[i], locs[i])) != IR_NONE;
	ir_free(e->ctx, raw);
	ir_free(e->ctx, names);
	ir_free(e->ctx, a.v);
	ir_free(e->ctx, a.is_t);
	return ok;
}

/* Evaluates the scratch graph, stores the arguments' values as constants
 * and checks them against f's inputs. */
static void finish_example(fe_elab *e, ir_func *f, const ir_graph *g,
			   const ir_id *ids, const ir_loc *locs,
			   uint32_t n_consts_before)
{
	ir_module *m = e->m;
	cval *vals = ir_alloc(e->ctx, (g->n_nodes + 1) * sizeof *vals);
	int64_t *sym_vals = ir_alloc(e->ctx, (m->n_syms + 1) * sizeof *sym_vals);
	uint32_t *example = ir_arena_alloc(&m->arena, (f->n_inputs + 1) * 4);
	bool ok = vals && sym_vals && example;
	for (ir_id i = 0; ok && i < g->n_nodes; i++)
		ok = eval_node(e, g, i, vals);
	m->n_consts = n_consts_before; /* drop the scratch constants */
	for (uint32_t i = 0; ok && i < f->n_inputs; i++) {
		int32_t idx = store(e, &vals[ids[i]]);
		ok = idx >= 0 &&
		     check_arg(e, f, i, &vals[ids[i]].t, sym_vals, locs[i]);
		example[i] = (uint32_t)idx;
	}
	if (ok)
		f->example = example;
	for (ir_id i = 0; vals && i < g->n_nodes; i++)
		ir_free(e->ctx, vals[i].d);
	ir_free(e->ctx, vals);
	ir_free(e->ctx, sym_vals);
}

void fe_example(fe_elab *e, const fe_decl *d)
{
	ir_func *f, scratch = {.name = "example"};
	const fe_def *def = example_target(e, d, &f);
	if (!def)
		return;
	uint32_t n = def->n_params, n_consts = e->m->n_consts;
	ir_id *ids = ir_alloc(e->ctx, (n + 1) * sizeof *ids);
	ir_loc *locs = ir_alloc(e->ctx, (n + 1) * sizeof *locs);
	if (ids && locs) {
		e->f = &scratch;
		if (e->const_nodes)
			memset(e->const_nodes, 0,
			       e->const_nodes_cap * sizeof *e->const_nodes);
		bool ok = example_args(e, d, def, f, ids, locs);
		e->f = NULL;
		if (e->const_nodes)
			memset(e->const_nodes, 0,
			       e->const_nodes_cap * sizeof *e->const_nodes);
		if (ok)
			finish_example(e, f, &scratch.g, ids, locs, n_consts);
		else
			e->m->n_consts = n_consts;
	}
	ir_graph_fini(e->ctx, &scratch.g);
	ir_free(e->ctx, ids);
	ir_free(e->ctx, locs);
}
