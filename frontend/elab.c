/*
 * elab.c - elaboration of a whole file: declarations, exported functions,
 * statements, inlined def calls, parameters and the train block.
 *
 * The prelude's defs and then the file's defs are entered in the file
 * scope first, so that order of definition does not matter; `dim` and
 * `const` declarations are evaluated in order; then each exported function
 * is built, then the examples and the train block are read.
 *
 * Parameter names follow the call path, like PyTorch state_dict keys: a
 * call pushes the callee's name (`name_k` when the caller's text calls
 * that def from several places), each `repeat` iteration pushes its index,
 * and `param W` inside appends `W`. A parameter met again under the same
 * name is the same parameter, which is how `for` loops and several
 * exported functions share weights.
 */
#include "elab.h"

#include <stdio.h>
#include <string.h>

/* ---- scopes ------------------------------------------------------------------ */

static bool scope_set(fe_elab *e, fe_scope *s, const char *name, fe_value v,
		      ir_loc loc)
{
	int32_t i = ir_names_get(&s->index, name);
	if (i >= 0) {
		s->b[i].v = v;
		return true;
	}
	if (!ir_grow(e->ctx, (void **)&s->b, &s->cap, s->n + 1, sizeof *s->b) ||
	    !ir_names_put(e->ctx, &s->index, name, s->n))
		return false;
	s->b[s->n++] = (fe_binding){name, v, loc, false};
	return true;
}

static const fe_binding *scope_get(const fe_scope *s, const char *name)
{
	int32_t i = ir_names_get(&s->index, name);
	return i >= 0 ? &s->b[i] : NULL;
}

static void scope_fini(fe_elab *e, fe_scope *s)
{
	ir_free(e->ctx, s->b);
	ir_names_fini(e->ctx, &s->index);
	memset(s, 0, sizeof *s);
}

static bool is_reserved_name(const char *name)
{
	return strcmp(name, "f32") == 0 || strcmp(name, "i32") == 0 ||
	       strcmp(name, "None") == 0 || fe_builtin_find(name) != NULL;
}

/* Enters a name in the file scope; reports a redefinition. */
static void global_add(fe_elab *e, const char *name, fe_value v, ir_loc loc,
		       bool is_prelude)
{
	const fe_binding *old = scope_get(&e->globals, name);
	if (old && old->is_prelude) {
		ir_error(e->ctx, loc, "'%s' is already defined in the prelude",
			 name);
		ir_note(e->ctx, old->loc, "the prelude's '%s' is here", name);
		return;
	}
	if (old) {
		ir_error(e->ctx, loc, "duplicate definition of '%s'", name);
		ir_note(e->ctx, old->loc, "'%s' is first defined here", name);
		return;
	}
	if (is_reserved_name(name)) {
		ir_error(e->ctx, loc,
			 "'%s' is a built-in name and cannot be "
			 "redefined",
			 name);
		return;
	}
	if (scope_set(e, &e->globals, name, v, loc))
		e->globals.b[e->globals.n - 1].is_prelude = is_prelude;
}

/* ---- parameter path ------------------------------------------------------------ */

/* Appends ".seg" (or "seg" at the root); returns the length to restore. */
static uint32_t path_push(fe_elab *e, const char *seg)
{
	uint32_t old = e->path_len, n = (uint32_t)strlen(seg);
	if (!ir_grow(e->ctx, (void **)&e->path, &e->path_cap,
		     e->path_len + n + 2, 1))
		return old;
	if (e->path_len)
		e->path[e->path_len++] = '.';
	memcpy(e->path + e->path_len, seg, n + 1);
	e->path_len += n;
	return old;
}

static void path_pop(fe_elab *e, uint32_t len)
{
	e->path_len = len;
	if (e->path)
		e->path[len] = '\0';
}

/* ---- arguments -------------------------------------------------------------------- */

static void arity_error(fe_elab *e, const char *callee, ir_loc loc,
			uint32_t n_params, uint32_t n_required, uint32_t got)
{
	if (n_required == n_params)
		ir_error(e->ctx, loc, "'%s' takes %u argument%s, got %u",
			 callee, n_params, n_params == 1 ? "" : "s", got);
	else
		ir_error(e->ctx, loc, "'%s' takes %u to %u arguments, got %u",
			 callee, n_required, n_params, got);
}

/* Binds one keyword argument; false after reporting. */
static bool bind_keyword(fe_elab *e, const char *callee,
			 const char *const *params, uint32_t n_params,
			 const fe_raw_arg *r, fe_args *out)
{
	for (uint32_t j = 0; j < n_params; j++) {
		if (strcmp(params[j], r->name) != 0)
			continue;
		if (out->locs[j].file) {
			ir_error(e->ctx, r->name_loc,
				 "argument '%s' of '%s' is given "
				 "twice",
				 r->name, callee);
			return false;
		}
		out->v[j] = r->v;
		out->locs[j] = r->loc;
		out->is_t[j] = r->is_t;
		return true;
	}
	ir_error(e->ctx, r->name_loc, "'%s' has no argument named '%s'", callee,
		 r->name);
	return false;
}

bool fe_bind_args(fe_elab *e, const char *callee, ir_loc loc,
		  const char *const *params, uint32_t n_params,
		  uint32_t n_required, const fe_raw_arg *raw, uint32_t n_raw,
		  fe_args *out)
{
	uint32_t n_pos = 0;
	bool ok = true;
	for (uint32_t i = 0; i < n_params; i++) {
		out->v[i] = fe_none();
		out->locs[i] = (ir_loc){0};
		out->is_t[i] = false;
	}
	for (uint32_t i = 0; i < n_raw && ok; i++) {
		if (raw[i].name) {
			ok = bind_keyword(e, callee, params, n_params, &raw[i],
					  out);
			continue;
		}
		if (i > n_pos) {
			ir_error(e->ctx, raw[i].loc,
				 "a positional argument cannot "
				 "follow a named one");
			return false;
		}
		if (n_pos == n_params) {
			arity_error(e, callee, loc, n_params, n_required, n_raw);
			return false;
		}
		out->v[n_pos] = raw[i].v;
		out->locs[n_pos] = raw[i].loc;
		out->is_t[n_pos++] = raw[i].is_t;
	}
	for (uint32_t i = 0; i < n_required && ok; i++)
		if (!out->locs[i].file) {
			arity_error(e, callee, loc, n_params, n_required, n_raw);
			ok = false;
		}
	for (uint32_t i = 0; i < n_params; i++)
		if (!out->locs[i].file)
			out->locs[i] = loc;
	return ok;
}

/* ---- def calls ---------------------------------------------------------------------- */

static void exec_block(fe_elab *e, const fe_block *b);

/* Reports a recursive call or a too deep one; true if the call may go. */
static bool check_call_depth(fe_elab *e, const fe_def *d, ir_loc loc)
{
	char chain[512];
	size_t used = 0;
	for (uint32_t i = 0; i < e->depth; i++) {
		if (e->calls[i] != d)
			continue;
		ir_error(e->ctx, loc, "recursive call of '%s'", d->id.name);
		for (uint32_t j = i; j < e->depth && used < sizeof chain; j++)
			used += (size_t)snprintf(chain + used,
						 sizeof chain - used, "%s -> ",
						 e->calls[j]->id.name);
		if (used < sizeof chain)
			snprintf(chain + used, sizeof chain - used, "%s",
				 d->id.name);
		ir_note(e->ctx, d->id.loc, "call chain: %s", chain);
		return false;
	}
	if (e->depth == FE_MAX_CALL_DEPTH) {
		ir_error(e->ctx, loc, "calls nested too deeply (more than %d)",
			 FE_MAX_CALL_DEPTH);
		e->is_stopped = true;
		return false;
	}
	return true;
}

/* Checks a tensor argument against a declared type of a non-exported
 * def. */
static bool check_typed_arg(fe_elab *e, const fe_def *d, const fe_def_param *p,
			    fe_value v, ir_loc loc)
{
	char want[128], got[128];
	ir_id x = fe_to_tensor(e, v, loc);
	if (x == IR_NONE)
		return false;
	ir_type t = {.dtype = p->dtype, .rank = (uint8_t)p->n_dims};
	for (uint32_t i = 0; i < p->n_dims && i < IR_MAX_RANK; i++)
		if (!fe_to_dim(e, fe_eval(e, p->dims[i]), p->dims[i]->loc,
			       false, &t.dims[i]))
			return false;
	const ir_type *have = fe_type_of(e, x);
	if (p->n_dims <= IR_MAX_RANK && ir_type_eq(have, &t))
		return true;
	ir_type_format(e->m, &t, want, sizeof want);
	ir_type_format(e->m, have, got, sizeof got);
	ir_error(e->ctx, loc, "argument '%s' of '%s' is %s[%s], expected %s[%s]",
		 p->id.name, d->id.name, ir_dtype_name(have->dtype), got,
		 ir_dtype_name(t.dtype), want);
	return false;
}

/* Binds a def's arguments into frame fr: given ones, then defaults
 * (evaluated in the file scope). */
static bool bind_def_args(fe_elab *e, const fe_def *d, ir_loc loc,
			  const fe_raw_arg *raw, uint32_t n_raw, fe_frame *fr)
{
	uint32_t n = d->n_params, n_required = 0;
	const char **names = ir_alloc(e->ctx, (n + 1) * sizeof *names);
	fe_args a = {d->id.name,
		     loc,
		     ir_alloc(e->ctx, (n + 1) * sizeof(fe_value)),
		     ir_alloc(e->ctx, (n + 1) * sizeof(ir_loc)),
		     ir_alloc(e->ctx, n + 1),
		     n};
	bool ok = names && a.v && a.locs && a.is_t;
	for (uint32_t i = 0; ok && i < n; i++) {
		names[i] = d->params[i].id.name;
		n_required += d->params[i].deflt == NULL;
	}
	ok = ok && fe_bind_args(e, d->id.name, loc, names, n, n_required, raw,
				n_raw, &a);
	for (uint32_t i = 0; ok && i < n; i++) {
		const fe_def_param *p = &d->params[i];
		if (a.v[i].kind == FE_V_NONE && p->deflt) {
			fe_frame *saved = e->frame;
			e->frame = NULL;
			a.v[i] = fe_eval(e, p->deflt);
			e->frame = saved;
		}
		ok = a.v[i].kind != FE_V_ERR &&
		     (!p->has_type ||
		      check_typed_arg(e, d, p, a.v[i], a.locs[i])) &&
		     scope_set(e, &fr->scope, p->id.name, a.v[i], p->id.loc);
	}
	ir_free(e->ctx, names);
	ir_free(e->ctx, a.v);
	ir_free(e->ctx, a.locs);
	ir_free(e->ctx, a.is_t);
	return ok;
}

uint32_t fe_call_at(fe_elab *e)
{
	/* Only calls that build nodes are entered: a loop of millions of
	 * calls that build none costs nothing. */
	uint32_t i = e->depth;
	while (i > 0 && !e->call_at[i - 1])
		i--;
	for (; i < e->depth; i++) {
		ir_loc call = e->call_locs[i];
		call.at = i ? e->call_at[i - 1] : 0;
		e->call_at[i] = ir_ctx_add_call(e->ctx, call,
						e->calls[i]->id.name,
						e->calls[i]->is_prelude);
		if (!e->call_at[i])
			return 0; /* out of memory: no call named */
	}
	return e->depth ? e->call_at[e->depth - 1] : 0;
}

/* Runs the body of a def (or an exported function) in frame fr. */
static void run_body(fe_elab *e, const fe_def *d, fe_frame *fr, ir_loc loc)
{
	fe_frame *saved = e->frame;
	e->frame = fr;
	e->calls[e->depth] = d;
	e->call_at[e->depth] = 0;
	e->call_locs[e->depth++] = loc;
	if (d->body_expr) {
		fr->ret = fe_eval(e, d->body_expr);
		fr->has_returned = true;
	} else {
		exec_block(e, &d->body);
	}
	e->depth--;
	e->frame = saved;
}

/* The path segment of a call: the callee's name, or name_k when the
 * caller calls it from several places. */
static uint32_t push_call_segment(fe_elab *e, const fe_def *d,
				  const fe_expr *call)
{
	char seg[256];
	if (call->call.n_sites > 1)
		snprintf(seg, sizeof seg, "%s_%u", d->id.name, call->call.site);
	else
		snprintf(seg, sizeof seg, "%s", d->id.name);
	return path_push(e, seg);
}

fe_value fe_call_def(fe_elab *e, const fe_def *d, const fe_expr *call,
		     const fe_raw_arg *raw, uint32_t n_raw, bool want_value)
{
	fe_frame fr = {.def = d};
	fe_value result = fe_err();
	ir_loc loc = call->loc;
	bool from_user = e->depth == 0 || !e->calls[e->depth - 1]->is_prelude;
	if (!check_call_depth(e, d, loc))
		return fe_err();
	if (bind_def_args(e, d, loc, raw, n_raw, &fr)) {
		/* A call of an exported function uses the parameters it has as
		 * an entry point, named from the root, as a PyTorch loss calls
		 * the model's forward: `logits(x)` in `loss` trains the weights
		 * the entry `logits` runs with. */
		char *outer = NULL;
		uint32_t saved_path = e->path_len;
		if (d->is_export && e->path_len) {
			outer = ir_alloc(e->ctx, e->path_len + 1);
			if (!outer) {
				ir_error(e->ctx, loc, "out of memory");
				scope_fini(e, &fr.scope);
				return fe_err();
			}
			memcpy(outer, e->path, e->path_len + 1);
			path_pop(e, 0);
		} else if (!d->is_export) {
			saved_path = push_call_segment(e, d, call);
		}
		/* An error inside the prelude is reported at the user's call,
		 * and a note shows the prelude's line (ir_verror). */
		ir_loc saved_call = e->ctx->user_call;
		const char *saved_callee = e->ctx->user_callee;
		if (d->is_prelude && from_user) {
			e->ctx->user_call = loc;
			e->ctx->user_callee = d->id.name;
		} else if (!d->is_prelude) {
			e->ctx->user_callee = NULL;
		}
		run_body(e, d, &fr, loc);
		e->ctx->user_call = saved_call;
		e->ctx->user_callee = saved_callee;
		if (outer) {
			memcpy(e->path, outer, saved_path + 1);
			ir_free(e->ctx, outer);
		}
		path_pop(e, saved_path);
		result = fr.has_returned ? fr.ret
					 : (fe_value){.kind = FE_V_VOID};
		/* A body that stopped (a limit, out of memory) said why;
		 * its missing return is no second error. */
		if (!fr.has_returned && want_value) {
			if (!e->is_stopped)
				ir_error(e->ctx, loc,
					 "'%s' does not return a value",
					 d->id.name);
			result = fe_err();
		}
		if (result.kind == FE_V_VOID)
			result.def = d;
	}
	scope_fini(e, &fr.scope);
	return result;
}

/* ---- parameters ------------------------------------------------------------------------ */

typedef struct param_init {
	ir_init_kind kind;
	double a, b;
} param_init;

/* Evaluates the numeric arguments of an initializer call. */
static bool init_args(fe_elab *e, const fe_expr *x, const char *name,
		      const char *const *params, uint32_t n_params, double *out,
		      ir_loc *locs)
{
	fe_raw_arg raw[4];
	fe_value v[2];
	bool is_t[2];
	fe_args a = {name, x->loc, v, locs, is_t, n_params};
	uint32_t n = x->kind == FE_E_CALL ? x->call.n_args : 0;
	if (n > 4) {
		ir_error(e->ctx, x->loc,
			 "'%s' takes at most %u arguments, got %u", name,
			 n_params, n);
		return false;
	}
	for (uint32_t i = 0; i < n; i++) {
		raw[i].name = x->call.args[i].name;
		raw[i].name_loc = x->call.args[i].name_loc;
		raw[i].loc = x->call.args[i].value->loc;
		raw[i].is_t = false;
		raw[i].v = fe_eval(e, x->call.args[i].value);
	}
	if (!fe_bind_args(e, name, x->loc, params, n_params, 0, raw, n, &a))
		return false;
	for (uint32_t i = 0; i < n_params; i++)
		if (v[i].kind != FE_V_NONE &&
		    !fe_to_number(e, v[i], locs[i], &out[i]))
			return false;
	return true;
}

/* The initializers a param statement may name, with their arguments
 * and defaults. */
typedef struct init_spec {
	const char *name;
	ir_init_kind kind;
	uint32_t n_params;
	const char *params[2];
	double deflt[2];
} init_spec;

static const init_spec init_specs[] = {
	{"zeros", IR_INIT_ZEROS, 0, {NULL, NULL}, {0, 0}},
	{"ones", IR_INIT_ONES, 0, {NULL, NULL}, {0, 0}},
	{"normal", IR_INIT_NORMAL, 2, {"mean", "std"}, {0, 1}},
	{"uniform", IR_INIT_UNIFORM, 2, {"low", "high"}, {0, 1}},
	{"xavier_uniform", IR_INIT_XAVIER_UNIFORM, 1, {"gain", NULL}, {1, 0}},
};

/* Checks an initializer's arguments (written at locs[0..1], the call
 * at loc) against f32's range and the parameter's rank. */
static bool check_init(fe_elab *e, const init_spec *sp, const param_init *pi,
		       int rank, ir_loc loc, const ir_loc *locs)
{
	double v[2] = {pi->a, pi->b};
	uint32_t i = 1;
	switch (ir_init_args_check(pi->kind, pi->a, pi->b)) {
	case IR_INIT_A_NOT_F32:
		i = 0;
		/* fall through */
	case IR_INIT_B_NOT_F32:
		ir_error(e->ctx, locs[i],
			 "%s: %s = %g is beyond the range of f32", sp->name,
			 sp->params[i], v[i]);
		return false;
	case IR_INIT_STD_NEGATIVE:
		ir_error(e->ctx, locs[1], "normal: std must be >= 0, got %g",
			 pi->b);
		return false;
	case IR_INIT_LOW_ABOVE_HIGH:
		ir_error(e->ctx, loc, "uniform: low %g is above high %g", pi->a,
			 pi->b);
		return false;
	case IR_INIT_WIDTH_NOT_F32:
		ir_error(e->ctx, loc,
			 "uniform: high - low = %g is beyond the range of f32",
			 pi->b - pi->a);
		return false;
	case IR_INIT_GAIN_NEGATIVE:
		ir_error(e->ctx, locs[0],
			 "xavier_uniform: gain must be >= 0, got %g (PyTorch "
			 "refuses the empty range it gives)",
			 pi->a);
		return false;
	case IR_INIT_ARGS_OK:
		break;
	}
	if (pi->kind == IR_INIT_XAVIER_UNIFORM && rank < 2) {
		ir_error(e->ctx, loc,
			 "xavier_uniform needs a parameter of rank "
			 ">= 2, this one has rank %d",
			 rank);
		return false;
	}
	return true;
}

/* Reads `= init` of a param statement (x may be NULL). */
static bool read_init(fe_elab *e, const fe_expr *x, int rank, param_init *pi)
{
	const fe_expr *callee = x && x->kind == FE_E_CALL ? x->call.callee : x;
	if (!x) {
		*pi = rank >= 2 ? (param_init){IR_INIT_XAVIER_UNIFORM, 1, 0}
				: (param_init){IR_INIT_ZEROS, 0, 0};
		return true;
	}
	if (callee->kind != FE_E_NAME) {
		ir_error(e->ctx, x->loc,
			 "a parameter initializer must be zeros, "
			 "ones, normal(mean, std), uniform(low, "
			 "high) or xavier_uniform");
		return false;
	}
	for (size_t i = 0; i < sizeof init_specs / sizeof *init_specs; i++) {
		const init_spec *sp = &init_specs[i];
		double args[2] = {sp->deflt[0], sp->deflt[1]};
		ir_loc locs[2];
		if (strcmp(sp->name, callee->str) != 0)
			continue;
		if (!init_args(e, x, sp->name, sp->params, sp->n_params, args,
			       locs))
			return false;
		*pi = (param_init){sp->kind, args[0], args[1]};
		if (sp->kind == IR_INIT_ZEROS || sp->kind == IR_INIT_ONES)
			pi->a = pi->b = 0;
		return check_init(e, sp, pi, rank, x->loc, locs);
	}
	ir_error(e->ctx, callee->loc,
		 "unknown initializer '%s' (expected zeros, "
		 "ones, normal, uniform or xavier_uniform)",
		 callee->str);
	return false;
}

/* The PARAM node of parameter idx in the current function. */
static fe_value param_node(fe_elab *e, uint32_t idx, ir_loc loc)
{
	if (!ir_grow(e->ctx, (void **)&e->param_nodes, &e->param_nodes_cap,
		     idx + 1, sizeof *e->param_nodes))
		return fe_err();
	if (e->param_nodes[idx])
		return fe_tensor(e->param_nodes[idx] - 1);
	ir_attr a = {.param_index = idx};
	ir_type t = e->m->params[idx].type;
	fe_value v = fe_build(e, IR_OP_PARAM, NULL, 0, &a, &t, loc);
	if (v.kind == FE_V_TENSOR)
		e->param_nodes[idx] = v.tensor + 1;
	return v;
}

/* Finds or creates the parameter `<path>.name` of type t. */
static fe_value use_param(fe_elab *e, const char *name, const ir_type *t,
			  const param_init *pi, ir_loc loc)
{
	char want[128], have[128];
	uint32_t saved = path_push(e, name);
	const char *full = e->path ? e->path : name;
	int32_t idx = ir_module_find_param(e->m, full);
	if (idx >= 0 && !ir_type_eq(&e->m->params[idx].type, t)) {
		ir_type_format(e->m, t, want, sizeof want);
		ir_type_format(e->m, &e->m->params[idx].type, have, sizeof have);
		ir_error(e->ctx, loc,
			 "parameter '%s' has shape [%s] here but [%s] "
			 "where it was first created",
			 full, want, have);
		ir_loc first = e->m->params[idx].loc;
		if (first.file != loc.file || first.line != loc.line ||
		    first.col != loc.col)
			ir_note(e->ctx, e->m->params[idx].loc,
				"'%s' is first created here", full);
		path_pop(e, saved);
		return fe_err();
	}
	if (idx < 0) {
		/* The call it is created in, as a node's (ir_loc_user then
		 * finds the model's line of a prelude function's parameter). */
		loc.at = fe_call_at(e);
		idx = ir_module_add_param(e->m, full, t, pi->kind, pi->a, pi->b,
					  loc);
	}
	path_pop(e, saved);
	if (idx < 0) {
		ir_error(e->ctx, loc, "out of memory");
		return fe_err();
	}
	return param_node(e, (uint32_t)idx, loc);
}

// stmt = "param" IDENT { "," IDENT } ":" "[" exprs "]" [ "=" expr ] NL
static void exec_param(fe_elab *e, const fe_stmt *s)
{
	ir_type t = {.dtype = IR_F32, .rank = (uint8_t)s->n_exprs};
	param_init pi;
	bool ok = e->f != NULL;
	if (!ok)
		ir_error(e->ctx, s->loc,
			 "parameters can only be created inside a "
			 "function");
	if (ok && s->n_exprs > IR_MAX_RANK) {
		ir_error(e->ctx, s->loc, "a parameter has at most %d dims",
			 IR_MAX_RANK);
		ok = false;
	}
	for (uint32_t i = 0; ok && i < s->n_exprs; i++)
		ok = fe_to_dim(e, fe_eval(e, s->exprs[i]), s->exprs[i]->loc,
			       false, &t.dims[i]);
	ok = ok && fe_check_size(e, &t, s->loc) &&
	     read_init(e, s->value, t.rank, &pi);
	for (uint32_t i = 0; i < s->n_names; i++) {
		fe_value v = ok ? use_param(e, s->names[i].name, &t, &pi,
					    s->names[i].loc)
				: fe_err();
		scope_set(e, &e->frame->scope, s->names[i].name, v,
			  s->names[i].loc);
	}
}

/* ---- statements ---------------------------------------------------------------------------- */

static void assign(fe_elab *e, const fe_stmt *s, fe_value v)
{
	fe_scope *sc = &e->frame->scope;
	if (s->n_names == 1) {
		scope_set(e, sc, s->names[0].name, v, s->names[0].loc);
		return;
	}
	bool ok = v.kind == FE_V_LIST && v.list.n == s->n_names;
	if (!ok && v.kind == FE_V_LIST)
		ir_error(e->ctx, s->loc, "cannot unpack %u values into %u names",
			 v.list.n, s->n_names);
	else if (!ok)
		fe_expected(e, s->loc, "a list of values to unpack", v);
	for (uint32_t i = 0; i < s->n_names; i++)
		scope_set(e, sc, s->names[i].name,
			  ok ? v.list.items[i] : fe_err(), s->names[i].loc);
}

static void exec_return(fe_elab *e, const fe_stmt *s)
{
	fe_frame *fr = e->frame;
	fe_value v = {.kind = FE_V_LIST};
	if (s->n_exprs == 1) {
		v = fe_eval(e, s->exprs[0]);
	} else {
		v.list.n = s->n_exprs;
		v.list.items = fe_scratch_alloc(e, s->n_exprs * sizeof(fe_value),
						s->loc);
		for (uint32_t i = 0; v.list.items && i < s->n_exprs; i++)
			v.list.items[i] = fe_eval(e, s->exprs[i]);
		if (!v.list.items)
			v = fe_err();
	}
	fr->ret = v;
	fr->ret_stmt = s;
	fr->has_returned = true;
}

static void exec_repeat(fe_elab *e, const fe_stmt *s)
{
	int64_t n;
	char seg[32];
	if (!fe_to_int(e, fe_eval(e, s->value), s->value->loc, &n))
		return;
	if (n < 0) {
		ir_error(e->ctx, s->value->loc,
			 "repeat count must be >= 0, got %lld", (long long)n);
		return;
	}
	for (int64_t i = 0; i < n && !e->frame->has_returned && !fe_stopped(e);
	     i++) {
		snprintf(seg, sizeof seg, "%lld", (long long)i);
		uint32_t saved = path_push(e, seg);
		if (s->n_names)
			scope_set(e, &e->frame->scope, s->names[0].name,
				  fe_int(i), s->names[0].loc);
		exec_block(e, &s->body);
		path_pop(e, saved);
	}
}

static void exec_for(fe_elab *e, const fe_stmt *s)
{
	int64_t lo, hi;
	if (!fe_to_int(e, fe_eval(e, s->value), s->value->loc, &lo) ||
	    !fe_to_int(e, fe_eval(e, s->value2), s->value2->loc, &hi))
		return;
	for (int64_t t = lo;
	     t < hi && !e->frame->has_returned && !fe_stopped(e); t++) {
		scope_set(e, &e->frame->scope, s->names[0].name, fe_int(t),
			  s->names[0].loc);
		exec_block(e, &s->body);
	}
}

static void exec_stmt(fe_elab *e, const fe_stmt *s)
{
	bool cond;
	if (++e->steps > FE_MAX_STEPS) {
		ir_error(e->ctx, s->loc,
			 "elaboration takes more than %u steps (is "
			 "a loop too long?)",
			 FE_MAX_STEPS);
		e->is_stopped = true;
		return;
	}
	switch (s->kind) {
	case FE_S_PARAM:
		exec_param(e, s);
		return;
	case FE_S_ASSIGN:
		assign(e, s, fe_eval(e, s->value));
		return;
	case FE_S_RETURN:
		exec_return(e, s);
		return;
	case FE_S_REPEAT:
		exec_repeat(e, s);
		return;
	case FE_S_FOR:
		exec_for(e, s);
		return;
	case FE_S_IF:
		if (fe_to_bool(e, fe_eval(e, s->value), s->value->loc, &cond))
			exec_block(e, cond ? &s->body : &s->orelse);
		return;
	case FE_S_EXPR:
		if (s->value->kind == FE_E_CALL)
			fe_eval_call(e, s->value, false);
		else
			fe_eval(e, s->value);
		return;
	}
}

static void exec_block(fe_elab *e, const fe_block *b)
{
	for (uint32_t i = 0; i < b->n; i++) {
		if (e->frame->has_returned || fe_stopped(e))
			return;
		exec_stmt(e, b->stmts[i]);
	}
}

/* ---- exported functions ------------------------------------------------------------------------ */

/* The INPUT node of argument i of an exported function. */
static fe_value build_input(fe_elab *e, const fe_def *d, uint32_t i)
{
	const fe_def_param *p = &d->params[i];
	ir_type t = {.dtype = p->dtype, .rank = (uint8_t)p->n_dims};
	if (!p->has_type) {
		ir_error(e->ctx, p->id.loc,
			 "argument '%s' of exported function "
			 "'%s' needs a type, like %s: f32[B, 10]",
			 p->id.name, d->id.name, p->id.name);
		return fe_err();
	}
	if (p->deflt) {
		ir_error(e->ctx, p->deflt->loc,
			 "an argument of an exported "
			 "function cannot have a default");
		return fe_err();
	}
	if (p->n_dims > IR_MAX_RANK) {
		ir_error(e->ctx, p->type_loc, "a tensor has at most %d dims",
			 IR_MAX_RANK);
		return fe_err();
	}
	for (uint32_t k = 0; k < p->n_dims; k++)
		if (!fe_to_dim(e, fe_eval(e, p->dims[k]), p->dims[k]->loc,
			       false, &t.dims[k]))
			return fe_err();
	ir_attr a = {.input_index = i};
	return fe_build(e, IR_OP_INPUT, NULL, 0, &a, &t, p->id.loc);
}

/* Whether one of names[0..n) is name. */
static bool name_taken(const char *const *names, uint32_t n, const char *name)
{
	for (uint32_t j = 0; j < n; j++)
		if (strcmp(names[j], name) == 0)
			return true;
	return false;
}

/* The values an exported function returns and their names. */
static uint32_t collect_outputs(fe_elab *e, const fe_frame *fr, fe_value **vals,
				const char ***names)
{
	const fe_stmt *s = fr->ret_stmt;
	fe_value v = fr->ret;
	bool is_tuple = v.kind == FE_V_LIST && (s && s->n_exprs > 1);
	for (uint32_t i = 0; !is_tuple && v.kind == FE_V_LIST && i < v.list.n;
	     i++)
		is_tuple = v.list.items[i].kind != FE_V_NUM &&
			   v.list.items[i].kind != FE_V_LIST;
	uint32_t n = is_tuple ? v.list.n : 1;
	*vals = fe_scratch_alloc(e, n * sizeof **vals, fr->def->id.loc);
	*names = ir_arena_alloc(&e->m->arena, n * sizeof **names);
	if (!*vals || !*names)
		return 0;
	for (uint32_t i = 0; i < n; i++) {
		char buf[48];
		const fe_expr *x = s && s->n_exprs == n ? s->exprs[i] : NULL;
		(*vals)[i] = is_tuple ? v.list.items[i] : v;
		snprintf(buf, sizeof buf, "out%u", i);
		const char *name = x && x->kind == FE_E_NAME ? x->str : buf;
		/* An output's name is its variable's, or outI; a name an
		 * earlier output has (return y, y) gives way to outI, then
		 * outI_K, so that every output can be written out by name. */
		for (uint32_t k = 0; name_taken(*names, i, name); k++) {
			snprintf(buf, sizeof buf, k ? "out%u_%u" : "out%u", i,
				 k);
			name = buf;
		}
		(*names)[i] = ir_arena_strdup(&e->m->arena, name);
	}
	return n;
}

static void set_outputs(fe_elab *e, ir_func *f, const fe_def *d,
			const fe_frame *fr)
{
	fe_value *vals;
	const char **names;
	if (!fr->has_returned) {
		if (!fe_stopped(e))
			ir_error(e->ctx, d->id.loc,
				 "exported function '%s' does "
				 "not return anything",
				 d->id.name);
		return;
	}
	uint32_t n = collect_outputs(e, fr, &vals, &names);
	f->outputs = ir_arena_alloc(&e->m->arena, (n ? n : 1) * sizeof(ir_id));
	if (!f->outputs)
		return;
	ir_loc loc = fr->ret_stmt ? fr->ret_stmt->loc : d->body_expr->loc;
	for (uint32_t i = 0; i < n; i++) {
		const fe_stmt *s = fr->ret_stmt;
		ir_loc at = s && s->n_exprs == n ? s->exprs[i]->loc : loc;
		f->outputs[i] = fe_to_tensor(e, vals[i], at);
	}
	f->output_names = names;
	f->n_outputs = n;
}

static void reset_function_caches(fe_elab *e)
{
	if (e->param_nodes)
		memset(e->param_nodes, 0,
		       e->param_nodes_cap * sizeof *e->param_nodes);
	if (e->const_nodes)
		memset(e->const_nodes, 0,
		       e->const_nodes_cap * sizeof *e->const_nodes);
}

static void elab_export(fe_elab *e, const fe_def *d)
{
	ir_func *f = ir_module_add_func(e->m, d->id.name, d->id.loc);
	fe_frame fr = {.def = d};
	uint32_t n = d->n_params;
	if (!f)
		return;
	f->is_export = true;
	f->inputs = ir_arena_alloc(&e->m->arena, (n ? n : 1) * sizeof(ir_id));
	f->input_names = ir_arena_alloc(&e->m->arena,
					(n ? n : 1) * sizeof(char *));
	if (!f->inputs || !f->input_names)
		return;
	f->n_inputs = n;
	e->f = f;
	reset_function_caches(e);
	e->frame = &fr;
	for (uint32_t i = 0; i < n; i++) {
		fe_value v = build_input(e, d, i);
		f->inputs[i] = v.kind == FE_V_TENSOR ? v.tensor : IR_NONE;
		f->input_names[i] = ir_arena_strdup(&e->m->arena,
						    d->params[i].id.name);
		scope_set(e, &fr.scope, d->params[i].id.name, v,
			  d->params[i].id.loc);
	}
	e->frame = NULL;
	run_body(e, d, &fr, d->id.loc);
	set_outputs(e, f, d, &fr);
	scope_fini(e, &fr.scope);
	e->f = NULL;
}

/* ---- dims, consts, train ---------------------------------------------------------------------------- */

static void elab_dims(fe_elab *e, const fe_decl *decl)
{
	for (uint32_t i = 0; i < decl->n; i++) {
		const fe_ident *id = &decl->names[i];
		int32_t sym = ir_module_add_sym(e->m, id->name, id->loc);
		int64_t fallback;
		if (sym < 0)
			return;
		if (decl->values[i] &&
		    fe_to_int(e, fe_eval(e, decl->values[i]),
			      decl->values[i]->loc, &fallback)) {
			if (fallback > 0)
				e->m->syms[sym].fallback = fallback;
			else
				ir_error(e->ctx, decl->values[i]->loc,
					 "a dim's value "
					 "must be > 0, got %lld",
					 (long long)fallback);
		}
		global_add(e, id->name, fe_dim((ir_dim){1, sym}), id->loc,
			   false);
	}
}

static void elab_consts(fe_elab *e, const fe_decl *decl)
{
	for (uint32_t i = 0; i < decl->n; i++)
		global_add(e, decl->names[i].name, fe_eval(e, decl->values[i]),
			   decl->names[i].loc, false);
}

static bool train_value(fe_elab *e, const fe_expr *x, ir_value *out);

/* `name(k = v, ...)` naming something the compiler does not define: a
 * call the training driver interprets. */
static bool train_call(fe_elab *e, const fe_expr *x, ir_value *out)
{
	const char *name = x->call.callee->str;
	out->kind = IR_VAL_CALL;
	out->str = ir_arena_strdup(&e->m->arena, name);
	out->n_args = x->call.n_args;
	out->args = ir_arena_alloc(&e->m->arena,
				   (x->call.n_args + 1) * sizeof *out->args);
	if (!out->str || !out->args)
		return false;
	for (uint32_t i = 0; i < x->call.n_args; i++) {
		const fe_arg *a = &x->call.args[i];
		if (!a->name) {
			ir_error(e->ctx, a->value->loc,
				 "arguments of '%s' in the "
				 "train block must be named, like lr = 0.1",
				 name);
			return false;
		}
		out->args[i].key = ir_arena_strdup(&e->m->arena, a->name);
		out->args[i].loc = a->name_loc;
		if (!train_value(e, a->value, &out->args[i].value))
			return false;
	}
	return true;
}

static bool is_known_name(fe_elab *e, const char *name)
{
	return scope_get(&e->globals, name) || is_reserved_name(name);
}

static bool train_value(fe_elab *e, const fe_expr *x, ir_value *out)
{
	memset(out, 0, sizeof *out);
	if (x->kind == FE_E_NAME && !is_known_name(e, x->str)) {
		out->kind = IR_VAL_STR;
		out->str = ir_arena_strdup(&e->m->arena, x->str);
		return out->str != NULL;
	}
	if (x->kind == FE_E_CALL && x->call.callee->kind == FE_E_NAME &&
	    !is_known_name(e, x->call.callee->str))
		return train_call(e, x, out);
	fe_value v = fe_eval(e, x);
	switch (v.kind) {
	case FE_V_NUM:
	case FE_V_BOOL:
		out->kind = IR_VAL_NUM;
		out->num = v.kind == FE_V_NUM ? v.num.r : v.b;
		return true;
	case FE_V_STR:
	case FE_V_DEF:
	case FE_V_DTYPE:
		out->kind = IR_VAL_STR;
		out->str = ir_arena_strdup(&e->m->arena,
					   v.kind == FE_V_STR ? v.str
					   : v.kind == FE_V_DEF
						   ? v.def->id.name
						   : ir_dtype_name(v.dtype));
		return out->str != NULL;
	default:
		fe_expected(e, x->loc, "a number, a string, a name or a call",
			    v);
		return false;
	}
}

static void elab_train(fe_elab *e, const fe_decl *decl)
{
	ir_module *m = e->m;
	for (uint32_t i = 0; i < decl->n; i++) {
		const fe_ident *key = &decl->names[i];
		const ir_setting *old = ir_module_find_setting(m, key->name);
		ir_value v;
		if (old) {
			ir_error(e->ctx, key->loc,
				 "setting '%s' is given twice", key->name);
			ir_note(e->ctx, old->loc, "first given here");
			continue;
		}
		if (!train_value(e, decl->values[i], &v) ||
		    !ir_grow(e->ctx, (void **)&m->train, &m->train_cap,
			     m->n_train + 1, sizeof *m->train))
			continue;
		m->train[m->n_train++] = (ir_setting){ir_arena_strdup(&m->arena,
								      key->name),
						      v, key->loc};
	}
}

/* ---- the whole file ------------------------------------------------------------------------------------ */

static void register_def(fe_elab *e, const fe_def *d)
{
	fe_value v = {.kind = FE_V_DEF};
	v.def = d;
	for (uint32_t i = 1; i < d->n_params; i++)
		if (d->params[i - 1].deflt && !d->params[i].deflt)
			ir_error(e->ctx, d->params[i].id.loc,
				 "parameter '%s' needs "
				 "a default value, as it follows one that has one",
				 d->params[i].id.name);
	global_add(e, d->id.name, v, d->id.loc, d->is_prelude);
}

/* Runs pass `pass` of elaboration over one file's declarations:
 * 0 defs, 1 dims and consts, 2 exports, 3 examples, 4 train. */
static void elab_pass(fe_elab *e, const fe_file *file, int pass)
{
	for (uint32_t i = 0; i < file->n_decls && !fe_stopped(e); i++) {
		const fe_decl *d = file->decls[i];
		if (pass == 0 && d->kind == FE_D_DEF)
			register_def(e, d->def);
		else if (pass == 1 && d->kind == FE_D_DIM)
			elab_dims(e, d);
		else if (pass == 1 && d->kind == FE_D_CONST)
			elab_consts(e, d);
		else if (pass == 2 && d->kind == FE_D_DEF && d->def->is_export)
			elab_export(e, d->def);
		else if (pass == 3 && d->kind == FE_D_EXAMPLE)
			fe_example(e, d);
		else if (pass == 4 && d->kind == FE_D_TRAIN)
			elab_train(e, d);
	}
}

ir_module *fe_elaborate(ir_ctx *ctx, ir_arena *scratch, const fe_file *prelude,
			const fe_file *file)
{
	int errors = ctx->n_errors;
	fe_elab e = {.ctx = ctx, .scratch = scratch};
	e.m = ir_module_create(ctx,
			       file->model.name ? file->model.name : "model");
	if (!e.m) {
		ir_error(ctx, (ir_loc){0}, "out of memory");
		return NULL;
	}
	for (int pass = 0; pass < 5; pass++) {
		elab_pass(&e, prelude, pass);
		elab_pass(&e, file, pass);
	}
	if (ctx->is_oom && ctx->n_errors == errors)
		ir_error(ctx, (ir_loc){0}, "out of memory");
	scope_fini(&e, &e.globals);
	ir_free(ctx, e.path);
	ir_free(ctx, e.param_nodes);
	ir_free(ctx, e.const_nodes);
	if (ctx->n_errors > errors) {
		ir_module_destroy(e.m);
		return NULL;
	}
	return e.m;
}
