/*
 * interp.c - the interpreter's driver: binding symbols from the inputs'
 * shapes, initializing parameters, the dispatch from each op to its
 * kernel, the leaves (inputs, parameters, constants), and the run of a
 * whole function in node order.
 *
 * A node's value is allocated here with the node's dtype (f32 becoming
 * f64 in float64 mode) and its dims made concrete from the symbol values;
 * the kernel fills it and checks that its operands fit.
 */
#include "interp_impl.h"

#include "rt_rng.h"

#include <string.h>

/* The dtype a value of type dtype has in this run. */
static ir_dtype run_dtype(const interp_opts *opts, ir_dtype dtype)
{
	return dtype == IR_F32 && opts->is_f64 ? IR_F64 : dtype;
}

/* Makes t's dims concrete: coef * sym_values[sym]. An unbound symbol (or
 * sym_values NULL for a symbolic dim) is an error reported at loc. */
static bool resolve_dims(ir_ctx *ctx, const ir_module *m, const ir_type *t,
			 const int64_t *sym_values, ir_loc loc,
			 const char *what, int64_t *dims)
{
	if (t->rank > IR_MAX_RANK) {
		ir_error(ctx, loc, "%s: rank %u exceeds %d", what, t->rank,
			 IR_MAX_RANK);
		return false;
	}
	for (int i = 0; i < t->rank; i++) {
		ir_dim d = t->dims[i];
		if (ir_dim_is_static(d)) {
			dims[i] = d.coef;
			continue;
		}
		int64_t v = sym_values && (uint32_t)d.sym < m->n_syms
				    ? sym_values[d.sym]
				    : 0;
		const char *name = (uint32_t)d.sym < m->n_syms
					   ? m->syms[d.sym].name
					   : "?";
		if (v <= 0) {
			ir_error(ctx, loc,
				 "%s: the size %s is unknown: no input "
				 "binds it and it has no default",
				 what, name);
			return false;
		}
		if (__builtin_mul_overflow(d.coef, v, &dims[i])) {
			ir_error(ctx, loc, "%s: size %lld*%s overflows", what,
				 (long long)d.coef, name);
			return false;
		}
	}
	return true;
}

/* ---- binding symbols ------------------------------------------------------ */

/* Binds the symbols in one input's type from its actual dims; a derived
 * symbol (B*T) is only checked, and only once is_derived says the values
 * of derived symbols are known. */
static bool bind_input(ir_ctx *ctx, const ir_module *m, const ir_node *n,
		       const char *name, const interp_tensor *x,
		       int64_t *sym_values, bool is_derived)
{
	const ir_type *t = &n->type;
	char want[160], got[160];
	ir_type_format(m, t, want, sizeof want);
	interp_dims_format(x->dims, x->rank, got, sizeof got);
	if (x->rank != t->rank) {
		ir_error(ctx, n->loc, "input '%s' has shape %s; expected [%s]",
			 name, got, want);
		return false;
	}
	for (int i = 0; i < t->rank; i++) {
		ir_dim d = t->dims[i];
		int64_t v = x->dims[i];
		if (ir_dim_is_static(d) ? v != d.coef
					: v <= 0 || v % d.coef != 0) {
			ir_error(ctx, n->loc,
				 "input '%s' has shape %s; expected "
				 "[%s] (dimension %d%s)",
				 name, got, want, i,
				 !ir_dim_is_static(d) && v <= 0
					 ? ": a dim's value is at least 1"
					 : "");
			return false;
		}
		if (ir_dim_is_static(d) ||
		    (m->syms[d.sym].n_factors > 0) != is_derived)
			continue;
		int64_t *s = &sym_values[d.sym];
		if (*s && *s != v / d.coef) {
			ir_error(ctx, n->loc,
				 "input '%s' has shape %s, which "
				 "makes %s = %lld; %s %lld",
				 name, got, m->syms[d.sym].name,
				 (long long)(v / d.coef),
				 is_derived ? "its factors make it"
					    : "an earlier input made it",
				 (long long)*s);
			return false;
		}
		*s = v / d.coef;
	}
	return true;
}

/* Binds (or, with is_derived, checks) every input's symbols. */
static bool bind_inputs(ir_ctx *ctx, const ir_module *m, const ir_func *f,
			const interp_tensor *inputs, int64_t *sym_values,
			bool is_derived)
{
	bool ok = true;
	for (uint32_t i = 0; i < f->n_inputs; i++) {
		char num[24];
		snprintf(num, sizeof num, "#%u", i);
		const char *name = f->input_names && f->input_names[i]
					   ? f->input_names[i]
					   : num;
		if (f->inputs[i] >= f->g.n_nodes) {
			if (!is_derived)
				ir_error(ctx, f->loc,
					 "input '%s' names no node", name);
			ok = false;
			continue;
		}
		ok &= bind_input(ctx, m, &f->g.nodes[f->inputs[i]], name,
				 &inputs[i], sym_values, is_derived);
	}
	return ok;
}

bool interp_bind_syms(ir_ctx *ctx, const ir_module *m, const ir_func *f,
		      const interp_tensor *inputs, int64_t *sym_values)
{
	for (uint32_t s = 0; s < m->n_syms; s++)
		sym_values[s] = 0;
	if (!bind_inputs(ctx, m, f, inputs, sym_values, false))
		return false;
	for (uint32_t s = 0; s < m->n_syms; s++)
		if (!sym_values[s])
			sym_values[s] = m->syms[s].fallback;
	ir_module_derive_syms(m, sym_values);
	return bind_inputs(ctx, m, f, inputs, sym_values, true) &&
	       ir_module_check_limits(ctx, m, sym_values);
}

/* ---- parameter initialization ----------------------------------------------- */

/* Xavier-uniform bound gain * sqrt(6 / (fan_in + fan_out)); attnc stores
 * Linear weights [in, out], so fan_in is dims[rank-2] and fan_out
 * dims[rank-1], each times the product of the leading dims; a vector uses
 * its length for both. */
static double xavier_bound(int rank, const int64_t *dims, double gain)
{
	double fan_in = 1, fan_out = 1;
	if (rank == 1) {
		fan_in = fan_out = (double)dims[0];
	} else if (rank >= 2) {
		double receptive = (double)interp_dims_prod(dims, 0, rank - 2);
		fan_in = (double)dims[rank - 2] * receptive;
		fan_out = (double)dims[rank - 1] * receptive;
	}
	return gain * sqrt(6.0 / (fan_in + fan_out));
}

/* Element i of parameter p: random numbers from (seed, stream p, i). */
static double init_value(const ir_param *pr, uint64_t seed, uint64_t p,
			 uint64_t i, double bound)
{
	switch (pr->init) {
	case IR_INIT_ZEROS:
		return 0;
	case IR_INIT_ONES:
		return 1;
	case IR_INIT_NORMAL:
		return pr->a + pr->b * rt_rng_normal(seed, p, i);
	case IR_INIT_UNIFORM:
		return pr->a + (pr->b - pr->a) * rt_rng_uniform(seed, p, i);
	case IR_INIT_XAVIER_UNIFORM:
		return -bound + 2 * bound * rt_rng_uniform(seed, p, i);
	}
	return 0;
}

static bool init_param(ir_ctx *ctx, const ir_module *m, uint32_t p,
		       const int64_t *sym_values, uint64_t seed, bool is_f64,
		       interp_tensor *t)
{
	const ir_param *pr = &m->params[p];
	interp_opts opts = {.is_f64 = is_f64};
	int64_t dims[IR_MAX_RANK];
	char what[256];
	snprintf(what, sizeof what, "parameter '%s'", pr->name);
	if (!resolve_dims(ctx, m, &pr->type, sym_values, pr->loc, what, dims))
		return false;
	if (!interp_tensor_alloc(ctx, t, run_dtype(&opts, pr->type.dtype),
				 pr->type.rank, dims)) {
		ir_error(ctx, pr->loc, "%s: out of memory", what);
		return false;
	}
	int64_t n = interp_tensor_numel(t);
	double bound = n ? xavier_bound(t->rank, dims, pr->a) : 0;
	for (int64_t i = 0; i < n; i++)
		interp_st(t, i, init_value(pr, seed, p, (uint64_t)i, bound));
	return true;
}

bool interp_params_init(ir_ctx *ctx, const ir_module *m,
			const int64_t *sym_values, uint64_t seed, bool is_f64,
			interp_tensor *params)
{
	for (uint32_t p = 0; p < m->n_params; p++)
		memset(&params[p], 0, sizeof params[p]);
	for (uint32_t p = 0; p < m->n_params; p++) {
		if (init_param(ctx, m, p, sym_values, seed, is_f64, &params[p]))
			continue;
		for (uint32_t q = 0; q < p; q++)
			interp_tensor_fini(ctx, &params[q]);
		return false;
	}
	return true;
}

/* ---- leaves -------------------------------------------------------------------- */

/* Copies a leaf's value src into the output, which has the node's
 * concrete type; the dims must agree and the dtypes be both integer or
 * both float (f32 and f64 convert into the run's precision). */
static bool leaf_copy(const interp_kernel *k, const interp_tensor *src,
		      const char *kind, const char *name)
{
	interp_tensor *out = k->out;
	bool is_same = src->rank == out->rank &&
		       (src->dtype == IR_I32) == (out->dtype == IR_I32);
	for (int i = 0; is_same && i < out->rank; i++)
		is_same = src->dims[i] == out->dims[i];
	if (!is_same) {
		char sg[160], sw[160];
		interp_dims_format(src->dims, src->rank, sg, sizeof sg);
		interp_dims_format(out->dims, out->rank, sw, sizeof sw);
		return interp_fail(k, "%s '%s' is %s%s, expected %s%s", kind,
				   name, ir_dtype_name(src->dtype), sg,
				   ir_dtype_name(k->node->type.dtype), sw);
	}
	int64_t n = interp_tensor_numel(out);
	for (int64_t i = 0; i < n; i++)
		interp_copy_elem(out, i, src, i);
	return true;
}

static bool leaf_input(const interp_kernel *k)
{
	const interp_sources *s = k->src;
	uint32_t i = k->node->attr.input_index;
	if (!s->f || !s->inputs)
		return interp_fail(k, "no inputs outside a run");
	if (i >= s->f->n_inputs)
		return interp_fail(k, "index %u out of range (%u inputs)", i,
				   s->f->n_inputs);
	const char *name = s->f->input_names && s->f->input_names[i]
				   ? s->f->input_names[i]
				   : "?";
	return leaf_copy(k, &s->inputs[i], "argument", name);
}

static bool leaf_param(const interp_kernel *k)
{
	const interp_sources *s = k->src;
	uint32_t i = k->node->attr.param_index;
	if (!s->params)
		return interp_fail(k, "no parameters outside a run");
	if (i >= s->m->n_params)
		return interp_fail(k, "index %u out of range (%u parameters)",
				   i, s->m->n_params);
	return leaf_copy(k, &s->params[i], "parameter", s->m->params[i].name);
}

static bool leaf_const(const interp_kernel *k)
{
	const ir_module *m = k->src->m;
	uint32_t i = k->node->attr.const_index;
	if (i >= m->n_consts)
		return interp_fail(k, "index %u out of range (%u constants)", i,
				   m->n_consts);
	const ir_const *c = &m->consts[i];
	interp_tensor v = {.dtype = c->type.dtype,
			   .rank = c->type.rank,
			   .data = c->data};
	if (ir_type_numel_static(&c->type) < 0 || c->type.rank > IR_MAX_RANK)
		return interp_fail(k, "constant %u has a symbolic shape", i);
	for (int d = 0; d < v.rank; d++)
		v.dims[d] = c->type.dims[d].coef;
	char name[24];
	snprintf(name, sizeof name, "c%u", i);
	return leaf_copy(k, &v, "constant", name);
}

/* ---- dispatch ---------------------------------------------------------------------- */

/* The ops of the elementwise families, by family; each op's arithmetic
 * is its scalar function (ir/ir_scalar.h). */
static bool eval_elementwise(const interp_kernel *k)
{
	ir_op op = k->node->op;
	switch (ir_op_table[op].family) {
	case IR_FAM_UNARY:
		return interp_k_unary(k, op);
	case IR_FAM_BINARY:
		return interp_k_binary(k, op);
	case IR_FAM_COMPARE:
		return interp_k_compare(k, op);
	case IR_FAM_LEAF:
	case IR_FAM_CAST:
	case IR_FAM_SELECT:
	case IR_FAM_MATMUL:
	case IR_FAM_REDUCE:
	case IR_FAM_NORM:
	case IR_FAM_INDEX:
	case IR_FAM_LAYOUT:
	case IR_FAM_LOSS:
	case IR_FAM_FUSED:
		break;
	}
	return interp_fail(k, "not an elementwise op");
}

static bool eval_op(const interp_kernel *k)
{
	switch (k->node->op) {
	case IR_OP_INPUT:
		return leaf_input(k);
	case IR_OP_PARAM:
		return leaf_param(k);
	case IR_OP_CONST:
		return leaf_const(k);
	case IR_OP_ARANGE:
		return interp_k_arange(k);
#include "ops_ew.def"
		return eval_elementwise(k);
	case IR_OP_CAST:
		return interp_k_cast(k);
	case IR_OP_SELECT:
		return interp_k_select(k);
	case IR_OP_MATMUL:
		return interp_k_matmul(k);
	case IR_OP_SUM:
		return interp_k_sum(k, false);
	case IR_OP_MEAN:
		return interp_k_sum(k, true);
	case IR_OP_MAX:
		return interp_k_max(k);
	case IR_OP_ARGMAX:
	case IR_OP_ARGMIN:
		return interp_k_argmax(k);
	case IR_OP_SOFTMAX:
		return interp_k_softmax(k, false);
	case IR_OP_LOG_SOFTMAX:
		return interp_k_softmax(k, true);
	case IR_OP_MASKED_SOFTMAX:
		return interp_k_masked_softmax(k);
	case IR_OP_LAYER_NORM:
		return interp_k_layer_norm(k);
	case IR_OP_LAYER_NORM_GRAD:
		return interp_k_layer_norm_grad(k);
	case IR_OP_DROPOUT:
		return interp_k_dropout(k);
	case IR_OP_EMBEDDING:
		return interp_k_embedding(k);
	case IR_OP_ONE_HOT:
		return interp_k_one_hot(k);
	case IR_OP_EMBEDDING_GRAD:
		return interp_k_embedding_grad(k);
	case IR_OP_RESHAPE:
		return interp_k_reshape(k);
	case IR_OP_BROADCAST:
		return interp_k_broadcast(k);
	case IR_OP_PERMUTE:
		return interp_k_permute(k);
	case IR_OP_SLICE:
		return interp_k_slice(k);
	case IR_OP_CONCAT:
		return interp_k_concat(k);
	case IR_OP_REPEAT:
		return interp_k_repeat(k);
	case IR_OP_REPEAT_INTERLEAVE:
		return interp_k_repeat_interleave(k);
	case IR_OP_SORT:
		return interp_k_sort(k);
	case IR_OP_SORT_GRAD:
		return interp_k_sort_grad(k);
	case IR_OP_MSE_LOSS:
		return interp_k_mse_loss(k);
	case IR_OP_CROSS_ENTROPY:
		return interp_k_cross_entropy(k);
	case IR_OP_CROSS_ENTROPY_GRAD:
		return interp_k_cross_entropy_grad(k);
	case IR_OP_CROSS_ENTROPY_WITH_GRAD:
		return interp_k_cross_entropy_with_grad(k);
	case IR_OP_FUSED_ATTENTION:
		return interp_k_fused_attention(k);
	case IR_OP_FUSED_ATTENTION_GRAD:
		return interp_k_fused_attention_grad(k);
	case IR_OP_FUSED_ADDITIVE_ATTENTION:
		return interp_k_fused_additive_attention(k);
	case IR_OP_FUSED_ADDITIVE_ATTENTION_GRAD:
		return interp_k_fused_additive_attention_grad(k);
	case IR_OP_COUNT:
		break;
	}
	return interp_fail(k, "not an op");
}

/* Evaluates node n on operand values args into *out (allocated here;
 * left empty on failure). */
static bool eval(ir_ctx *ctx, const ir_node *n, const interp_opts *opts,
		 const int64_t *sym_values, const interp_sources *src,
		 const interp_tensor *args, interp_tensor *out)
{
	memset(out, 0, sizeof *out);
	if ((unsigned)n->op >= IR_OP_COUNT) {
		ir_error(ctx, n->loc, "unknown op %d", (int)n->op);
		return false;
	}
	const char *name = ir_op_table[n->op].name;
	int n_in = ir_op_table[n->op].n_in;
	if (n_in >= 0 ? n->n_args != (uint32_t)n_in : n->n_args == 0) {
		ir_error(ctx, n->loc, "%s: wrong number of operands (%u)", name,
			 n->n_args);
		return false;
	}
	int64_t dims[IR_MAX_RANK];
	if (!resolve_dims(ctx, src->m, &n->type, sym_values, n->loc, name, dims))
		return false;
	if (!interp_tensor_alloc(ctx, out, run_dtype(opts, n->type.dtype),
				 n->type.rank, dims)) {
		ir_error(ctx, n->loc, "%s: out of memory", name);
		return false;
	}
	interp_kernel k = {ctx, n, opts, src, args, n->n_args, out};
	if (eval_op(&k))
		return true;
	interp_tensor_fini(ctx, out);
	return false;
}

bool interp_eval_node(ir_ctx *ctx, const ir_module *m, const ir_graph *g,
		      ir_id node, const interp_opts *opts,
		      const int64_t *sym_values, const interp_tensor *args,
		      interp_tensor *out)
{
	interp_opts none = {0};
	interp_sources src = {m, NULL, NULL, NULL};
	if (node >= g->n_nodes) {
		memset(out, 0, sizeof *out);
		ir_error(ctx, (ir_loc){0}, "node %%%u out of range", node);
		return false;
	}
	return eval(ctx, &g->nodes[node], opts ? opts : &none, sym_values, &src,
		    args, out);
}

/* ---- running a function ---------------------------------------------------------------- */

/* The scratch state of one run: symbol values, the value of every node
 * (kept to the end) and a buffer gathering one node's operands. */
typedef struct run_state {
	int64_t *syms;
	interp_tensor *vals;
	interp_tensor *argbuf;
} run_state;

static bool run_alloc(ir_ctx *ctx, const ir_module *m, const ir_func *f,
		      run_state *st)
{
	uint32_t max_args = 1;
	for (uint32_t i = 0; i < f->g.n_nodes; i++)
		if (f->g.nodes[i].n_args > max_args)
			max_args = f->g.nodes[i].n_args;
	st->syms = ir_alloc(ctx, (m->n_syms + 1) * sizeof *st->syms);
	st->vals = ir_alloc(ctx, (f->g.n_nodes + 1) * sizeof *st->vals);
	st->argbuf = ir_alloc(ctx, max_args * sizeof *st->argbuf);
	if (st->syms && st->vals && st->argbuf)
		return true;
	ir_error(ctx, f->loc, "out of memory");
	return false;
}

static void run_free(ir_ctx *ctx, const ir_func *f, run_state *st)
{
	for (uint32_t i = 0; st->vals && i < f->g.n_nodes; i++)
		interp_tensor_fini(ctx, &st->vals[i]);
	ir_free(ctx, st->syms);
	ir_free(ctx, st->vals);
	ir_free(ctx, st->argbuf);
}

/* With stop_at_nonfinite: fails at the first element of a float result
 * that is NaN or infinite, reporting it at the node. */
static bool check_finite(ir_ctx *ctx, const ir_node *n, const interp_tensor *t)
{
	if (t->dtype == IR_I32)
		return true;
	int64_t count = interp_tensor_numel(t);
	for (int64_t i = 0; i < count; i++) {
		double v = interp_tensor_get(t, i);
		if (isfinite(v))
			continue;
		ir_error(ctx, n->loc,
			 "%s gives %s (element %lld), the run's first "
			 "value that is not finite",
			 ir_op_table[n->op].name,
			 isnan(v) ? "nan"
			 : v > 0  ? "inf"
				  : "-inf",
			 (long long)i);
		return false;
	}
	return true;
}

/* Evaluates node i from the values before it. */
static bool run_node(ir_ctx *ctx, const ir_func *f, const interp_opts *opts,
		     const interp_sources *src, run_state *st, ir_id i)
{
	const ir_node *n = &f->g.nodes[i];
	if ((uint64_t)n->first_arg + n->n_args > f->g.n_args) {
		ir_error(ctx, n->loc, "operand list out of range");
		return false;
	}
	for (uint32_t a = 0; a < n->n_args; a++) {
		ir_id id = ir_arg(&f->g, i, a);
		if (id >= i) {
			ir_error(ctx, n->loc,
				 "operand %%%u of %%%u is not "
				 "computed before it",
				 id, i);
			return false;
		}
		st->argbuf[a] = st->vals[id]; /* borrowed view */
	}
	return eval(ctx, n, opts, st->syms, src, st->argbuf, &st->vals[i]) &&
	       (!opts->stop_at_nonfinite || check_finite(ctx, n, &st->vals[i]));
}

static bool copy_outputs(ir_ctx *ctx, const ir_func *f, const run_state *st,
			 interp_tensor *outputs)
{
	for (uint32_t o = 0; o < f->n_outputs; o++) {
		ir_id id = f->outputs[o];
		if (id >= f->g.n_nodes) {
			ir_error(ctx, f->loc, "output %u names no node", o);
		} else if (interp_tensor_copy(ctx, &outputs[o], &st->vals[id])) {
			continue;
		} else {
			ir_error(ctx, f->loc, "out of memory");
		}
		for (uint32_t p = 0; p < o; p++)
			interp_tensor_fini(ctx, &outputs[p]);
		return false;
	}
	return true;
}

bool interp_run(ir_ctx *ctx, const ir_module *m, const ir_func *f,
		const interp_opts *opts, const interp_tensor *params,
		const interp_tensor *inputs, interp_tensor *outputs)
{
	interp_opts none = {0};
	interp_sources src = {m, f, params, inputs};
	run_state st = {0};
	bool ok = false;
	for (uint32_t o = 0; o < f->n_outputs; o++)
		memset(&outputs[o], 0, sizeof outputs[o]);
	if (!run_alloc(ctx, m, f, &st) ||
	    !interp_bind_syms(ctx, m, f, inputs, st.syms))
		goto out;
	for (ir_id i = 0; i < f->g.n_nodes; i++)
		if (!run_node(ctx, f, opts ? opts : &none, &src, &st, i))
			goto out;
	ok = copy_outputs(ctx, f, &st, outputs);
out:
	run_free(ctx, f, &st);
	return ok;
}
