/*
 * verify.c - the IR verifier (ir_module_verify).
 *
 * Checks every invariant the rest of the compiler relies on: nodes in
 * topological (SSA) order, operand counts and attributes as the op table
 * says, each stored type equal to what the op's shape rule gives, function
 * inputs and outputs in range and consistent with the INPUT nodes, module
 * tables (symbols, parameters, constants) well formed. It runs between
 * passes in debug builds and always before code generation, so it reports
 * every violation it finds, each prefixed "verifier:", rather than stopping
 * at the first.
 */
#include "ir.h"
#include "ir_internal.h"

#include <stdarg.h>
#include <string.h>

typedef struct verifier {
	const ir_module *m;
	ir_ctx *ctx;
	bool is_ok;
} verifier;

static void vfail(verifier *v, ir_loc loc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void vfail(verifier *v, ir_loc loc, const char *fmt, ...)
{
	char msg[640];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	ir_error(v->ctx, loc, "verifier: %s", msg);
	v->is_ok = false;
}

/* "f32[B, 10]" for a type already known to be valid. */
static void type_text(const ir_module *m, const ir_type *t, char *buf,
		      size_t size)
{
	char dims[200];
	ir_type_format(m, t, dims, sizeof dims);
	snprintf(buf, size, "%s[%s]", ir_dtype_name(t->dtype), dims);
}

static bool name_ok(const char *s)
{
	return s && s[0];
}

/* ---- module tables -------------------------------------------------------- */

/* A derived symbol: 2..IR_SYM_MAX_FACTORS base symbols declared before
 * it, sorted, with no fallback. */
static void verify_factors(verifier *v, uint32_t i)
{
	const ir_sym *s = &v->m->syms[i];
	if (!s->n_factors)
		return;
	bool ok = s->n_factors >= 2 && s->n_factors <= IR_SYM_MAX_FACTORS &&
		  !s->fallback;
	for (uint32_t k = 0; ok && k < s->n_factors; k++) {
		int32_t f = s->factors[k];
		ok = f >= 0 && (uint32_t)f < i && !v->m->syms[f].n_factors &&
		     (k == 0 || s->factors[k - 1] <= f);
	}
	if (!ok)
		vfail(v, s->loc,
		      "symbol %s is not a product of 2 to %d sorted "
		      "base symbols declared before it",
		      s->name, IR_SYM_MAX_FACTORS);
}

static void verify_syms(verifier *v)
{
	const ir_module *m = v->m;
	for (uint32_t i = 0; i < m->n_syms; i++) {
		const ir_sym *s = &m->syms[i];
		if (!name_ok(s->name)) {
			vfail(v, s->loc, "symbol %u has no name", i);
			continue;
		}
		if (s->fallback < 0)
			vfail(v, s->loc,
			      "symbol %s has a negative fallback %lld", s->name,
			      (long long)s->fallback);
		for (uint32_t j = 0; j < i; j++)
			if (name_ok(m->syms[j].name) &&
			    strcmp(m->syms[j].name, s->name) == 0)
				vfail(v, s->loc, "symbol %s is declared twice",
				      s->name);
		verify_factors(v, i);
	}
	for (uint32_t i = 0; i < m->n_limits; i++) {
		const ir_limit *l = &m->limits[i];
		if (ir_dim_is_static(l->size) || l->size.coef < 1 ||
		    (uint32_t)l->size.sym >= m->n_syms || l->max < 0)
			vfail(v, l->loc,
			      "limit %u is not a run-time size and a "
			      "maximum >= 0",
			      i);
	}
}

/* Duplicates are found with an index of its own, not the module's, which
 * is what is being checked; O(n) with 10^5 parameters. */
static void verify_params(verifier *v)
{
	const ir_module *m = v->m;
	ir_names seen = {0};
	for (uint32_t i = 0; i < m->n_params; i++) {
		const ir_param *p = &m->params[i];
		if (!name_ok(p->name)) {
			vfail(v, p->loc, "parameter %u has no name", i);
			continue;
		}
		if (ir_names_get(&seen, p->name) >= 0)
			vfail(v, p->loc, "parameter @%s is declared twice",
			      p->name);
		else if (!ir_names_put(m->ctx, &seen, p->name, i))
			vfail(v, p->loc, "out of memory");
		if (!ir_type_is_valid(m, &p->type) || p->type.dtype != IR_F32)
			vfail(v, p->loc,
			      "parameter @%s has a malformed type "
			      "(parameters are f32)",
			      p->name);
		if ((unsigned)p->init > IR_INIT_XAVIER_UNIFORM)
			vfail(v, p->loc,
			      "parameter @%s has unknown initializer %d",
			      p->name, (int)p->init);
		/* the front end's checks, for IR read from text */
		else if (ir_init_args_check(p->init, p->a, p->b) !=
			 IR_INIT_ARGS_OK)
			vfail(v, p->loc,
			      "parameter @%s: initializer arguments %g, %g "
			      "out of range",
			      p->name, p->a, p->b);
	}
	ir_names_fini(m->ctx, &seen);
}

static void verify_consts(verifier *v)
{
	const ir_module *m = v->m;
	for (uint32_t i = 0; i < m->n_consts; i++) {
		const ir_type *t = &m->consts[i].type;
		bool ok = ir_type_is_valid(m, t);
		for (int k = 0; ok && k < t->rank; k++)
			ok = ir_dim_is_static(t->dims[k]);
		if (!ok)
			vfail(v, (ir_loc){0},
			      "constant @c%u has a malformed or "
			      "symbolic type",
			      i);
		else if (!m->consts[i].data)
			vfail(v, (ir_loc){0}, "constant @c%u has no data", i);
	}
}

/* ---- graphs ------------------------------------------------------------------- */

/* Operands in range and defined before node i; false if any is not (the
 * shape rule cannot be run then). */
static bool verify_operands(verifier *v, const ir_func *f, ir_id i)
{
	const ir_graph *g = &f->g;
	const ir_node *n = &g->nodes[i];
	if ((uint64_t)n->first_arg + n->n_args > g->n_args) {
		vfail(v, n->loc,
		      "@%s %%%u: operand list [%u, +%u) out of range "
		      "(%u operands in the graph)",
		      f->name, i, n->first_arg, n->n_args, g->n_args);
		return false;
	}
	int want = ir_op_table[n->op].n_in;
	if (want >= 0 ? n->n_args != (uint32_t)want : n->n_args == 0) {
		vfail(v, n->loc, "@%s %%%u (%s): expects %s%d operand%s, got %u",
		      f->name, i, ir_op_table[n->op].name,
		      want < 0 ? "at least " : "", want < 0 ? 1 : want,
		      want == 1 || want < 0 ? "" : "s", n->n_args);
		return false;
	}
	bool ok = true;
	for (uint32_t k = 0; k < n->n_args; k++) {
		ir_id a = ir_arg(g, i, k);
		if (a >= i) {
			vfail(v, n->loc,
			      "@%s %%%u (%s): operand %u is %%%u, not "
			      "defined before it",
			      f->name, i, ir_op_table[n->op].name, k, a);
			ok = false;
		}
	}
	return ok;
}

static void verify_leaf(verifier *v, const ir_func *f, ir_id i)
{
	const ir_node *n = &f->g.nodes[i];
	uint32_t k = n->attr.input_index;
	if (n->op == IR_OP_INPUT && (k >= f->n_inputs || f->inputs[k] != i))
		vfail(v, n->loc,
		      "@%s %%%u: input index %u does not match the "
		      "function's inputs (%u)",
		      f->name, i, k, f->n_inputs);
	/* A dropout names its stream at any p; attention only with p > 0. */
	ir_attr a = n->attr;
	double p;
	const uint32_t *s = ir_attr_stream(ir_op_table[n->op].attr, &a, &p);
	if (s && (n->op == IR_OP_DROPOUT || p > 0) &&
	    *s >= v->m->n_dropout_streams)
		vfail(v, n->loc,
		      "@%s %%%u: dropout stream %u out of range (%u "
		      "streams)",
		      f->name, i, *s, v->m->n_dropout_streams);
}

/* The stored type equals what the shape rule computes on a copy. */
static void verify_type(verifier *v, const ir_func *f, ir_id i)
{
	const ir_node *n = &f->g.nodes[i];
	char msg[512], a[256], b[256];
	if (!ir_type_is_valid(v->m, &n->type)) {
		vfail(v, n->loc, "@%s %%%u (%s): malformed type (rank %u)",
		      f->name, i, ir_op_table[n->op].name, n->type.rank);
		return;
	}
	ir_node copy = *n;
	if (!ir_infer_type_msg(v->m, &f->g, &copy, msg, sizeof msg)) {
		vfail(v, n->loc, "@%s %%%u: %s", f->name, i, msg);
		return;
	}
	if (!ir_type_eq(&copy.type, &n->type)) {
		type_text(v->m, &n->type, a, sizeof a);
		type_text(v->m, &copy.type, b, sizeof b);
		vfail(v, n->loc,
		      "@%s %%%u (%s): stored type %s but the shape "
		      "rule gives %s",
		      f->name, i, ir_op_table[n->op].name, a, b);
	}
}

static void verify_graph(verifier *v, const ir_func *f)
{
	const ir_graph *g = &f->g;
	for (ir_id i = 0; i < g->n_nodes; i++) {
		const ir_node *n = &g->nodes[i];
		if ((unsigned)n->op >= IR_OP_COUNT) {
			vfail(v, n->loc, "@%s %%%u: unknown op %d", f->name, i,
			      (int)n->op);
			continue;
		}
		verify_leaf(v, f, i);
		if (verify_operands(v, f, i))
			verify_type(v, f, i);
	}
}

/* ---- functions --------------------------------------------------------------------- */

static void verify_inputs(verifier *v, const ir_func *f)
{
	for (uint32_t k = 0; k < f->n_inputs; k++) {
		ir_id id = f->inputs[k];
		if (id >= f->g.n_nodes || f->g.nodes[id].op != IR_OP_INPUT ||
		    f->g.nodes[id].attr.input_index != k)
			vfail(v, f->loc,
			      "@%s: input %u is %%%u, not an input "
			      "node with index %u",
			      f->name, k, id, k);
	}
}

static void verify_example(verifier *v, const ir_func *f)
{
	if (!f->example)
		return;
	for (uint32_t k = 0; k < f->n_inputs; k++) {
		uint32_t c = f->example[k];
		ir_id id = f->inputs[k];
		if (c >= v->m->n_consts) {
			vfail(v, f->loc,
			      "@%s: example %u names constant @c%u, out "
			      "of range",
			      f->name, k, c);
			continue;
		}
		if (id >= f->g.n_nodes)
			continue;
		const ir_type *ct = &v->m->consts[c].type,
			      *it = &f->g.nodes[id].type;
		if (ct->dtype != it->dtype || ct->rank != it->rank)
			vfail(v, f->loc,
			      "@%s: example %u (@c%u) does not have "
			      "the dtype and rank of input %u",
			      f->name, k, c, k);
	}
}

static void verify_func(verifier *v, const ir_func *f, uint32_t index)
{
	if (!name_ok(f->name)) {
		vfail(v, f->loc, "function %u has no name", index);
		return;
	}
	for (uint32_t j = 0; j < index; j++)
		if (name_ok(v->m->funcs[j]->name) &&
		    strcmp(v->m->funcs[j]->name, f->name) == 0)
			vfail(v, f->loc, "function @%s is defined twice",
			      f->name);
	verify_inputs(v, f);
	verify_example(v, f);
	for (uint32_t k = 0; k < f->n_outputs; k++)
		if (f->outputs[k] >= f->g.n_nodes)
			vfail(v, f->loc,
			      "@%s: output %u is %%%u, out of range "
			      "(%u nodes)",
			      f->name, k, f->outputs[k], f->g.n_nodes);
	verify_graph(v, f);
}

bool ir_module_verify(const ir_module *m)
{
	verifier v = {m, m->ctx, true};
	verify_syms(&v);
	verify_params(&v);
	verify_consts(&v);
	for (uint32_t i = 0; i < m->n_funcs; i++)
		verify_func(&v, m->funcs[i], i);
	return v.is_ok;
}
