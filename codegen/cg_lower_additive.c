/*
 * cg_lower_additive.c - the fused_additive_attention kernel, and the
 * pieces it shares with its gradient (cg_lower_additive.h).
 *
 * The kernel's outer loop runs over the N x Q query rows, split over
 * threads like any kernel. For a row it keeps the running maximum m and
 * sum l of the exponentials and an accumulator of dv floats (an online
 * softmax), and walks the keys in blocks of CG_ADDATTN_BLOCK: per key the
 * score sum_h wv[h] tanh(qp[h] + kp[k, h]) a vector of h at a time, into
 * the block's buffer; then per block the new maximum, l and the
 * accumulator rescaled by exp(m_old - m_new), and per key exp(s - m_new)
 * added to l and, unless dropout drops it, times the key's value row to
 * the accumulator. Keys at or past the row's valid length are visited
 * only when their fill could still matter (cg_lower_additive.h): a row of valid
 * length 0 then averages all the values, as the -1e6 fill makes the
 * unfused graph do. At the end the row is divided by l (and scaled by
 * 1 / (1 - p) under dropout). A NaN or +inf score makes the row NaN, as
 * in the interpreter (cg_addattn_exp).
 */
#include "cg_lower_additive.h"

#include "cg_gemm.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- shape and body ---------------------------------------------------------- */

static int64_t round_up(int64_t x, int64_t m)
{
	return (x + m - 1) / m * m;
}

void cg_addattn_shape(cg_addattn *a, const cg_kernel *k, bool is_grad)
{
	const ir_node *n = k->node;
	int64_t qd[IR_MAX_RANK], kd[IR_MAX_RANK], vd[IR_MAX_RANK];
	memset(a, 0, sizeof *a);
	cg_lower_dims(k->L, cg_kernel_arg_type(k, 0), qd);
	cg_lower_dims(k->L, cg_kernel_arg_type(k, 1), kd);
	cg_lower_dims(k->L, cg_kernel_arg_type(k, 3), vd);
	a->N = qd[0];
	a->Q = qd[1];
	a->H = qd[2];
	a->K = kd[1];
	a->dv = vd[2];
	a->vw = k->L->vw;
	a->hpad = round_up(a->H > 0 ? a->H : 1, a->vw);
	a->dpad = round_up(a->dv > 0 ? a->dv : 1, a->vw);
	a->scale = (float)n->attr.attention.scale;
	a->fill = (float)n->attr.attention.fill;
	a->has_valid = n->n_args == (is_grad ? 6u : 5u);
	if (a->has_valid)
		cg_attn_valid_strides(k, cg_kernel_arg_type(k, 4), &a->valid_sn,
				      &a->valid_sq);
	double p = n->attr.attention.p;
	a->has_dropout = p > 0;
	/* As cg_lower_dropout: the DROPOUT op's draw and scale. */
	a->threshold = (int64_t)ceil(p * 16777216.0);
	a->keep_scale = (float)(1.0 / (double)(float)(1.0 - p));
	ir_id valid[2];
	a->base.n_live = cg_attn_row_skip_valid(k->L, k->g, k->id, valid);
	if (a->base.n_live < 0)
		a->base.n_live = 0;
	const pass_rowlive_expr *x = a->base.n_live
					     ? cg_attn_row_step(k->L, k->g,
								k->id)
					     : NULL;
	a->is_step = x != NULL;
}

/* An array of n elements of t on the stack, 64-byte aligned, allocated
 * in the entry block. */
static LLVMValueRef buffer(cg_addattn *a, LLVMTypeRef t, int64_t n)
{
	return cg_entry_alloca(a->f, LLVMArrayType2(t, (uint64_t)n), 64);
}

/* The body's operands, buffers and dropout state. */
static void body_begin(cg_addattn *a, cg_kernel *kb, bool is_grad,
		       LLVMValueRef key)
{
	cg_fn *f = &kb->f;
	LLVMTypeRef ft = cg_t_f32(f);
	a->k = kb;
	a->f = f;
	a->base.f = f;
	a->base.vw = a->vw;
	a->qp = kb->in[0];
	a->kp = kb->in[1];
	a->wv = kb->in[2];
	a->v = kb->in[3];
	a->valid = a->has_valid ? kb->in[4] : NULL;
	a->g = is_grad ? kb->in[a->has_valid ? 5 : 4] : NULL;
	if (a->has_dropout) {
		a->drop_on = cg_kernel_is_training(kb);
		a->drop_key = key;
	}
	a->sb = buffer(a, ft, CG_ADDATTN_BLOCK);
	a->db = buffer(a, ft, CG_ADDATTN_BLOCK);
	a->acc = buffer(a, ft, a->dpad);
	a->tb = buffer(a, ft, a->hpad);
	a->dq = buffer(a, ft, a->hpad);
	a->fcache = a->scache = NULL;
	if (is_grad && a->K > 0 && a->K <= CG_ADDATTN_BLOCK) {
		a->fcache = buffer(a, ft, a->K * a->hpad);
		a->scache = buffer(a, ft, a->K);
	}
	a->m = cg_attn_var(&a->base, ft, cg_f32(f, 0));
	a->l = cg_attn_var(&a->base, ft, cg_f32(f, 0));
	a->x = cg_attn_var(&a->base, ft, cg_f32(f, 0));
	if (a->base.n_live > 0) {
		/* the kernel's last operands (cg_attn_row_skip_valid) */
		uint32_t nl = (uint32_t)a->base.n_live;
		a->base.live_v = kb->in[kb->n_in - nl];
		a->base.live_w = nl > 1 ? kb->in[kb->n_in - 1] : NULL;
		a->base.rs_on = LLVMBuildICmp(f->b, LLVMIntNE,
					      LLVMBuildLoad2(f->b, cg_t_i32(f),
							     kb->L->row_skip, ""),
					      cg_i32(f, 0), "");
		a->step = a->is_step ? cg_kernel_row_step(kb) : NULL;
	}
}

/* The shared function (cg_kernel_outline_begin's signature). */
static LLVMValueRef make_body(const cg_kernel *k, const cg_addattn *shape,
			      const char *name, cg_addattn_gen gen)
{
	cg_kernel kb;
	LLVMValueRef key = cg_kernel_outline_begin(k, name, &kb);
	cg_addattn a = *shape;
	body_begin(&a, &kb, k->node->op == IR_OP_FUSED_ADDITIVE_ATTENTION_GRAD,
		   key);
	gen(&a);
	return cg_kernel_outline_end(&kb);
}

void cg_addattn_call_body(cg_kernel *k, const cg_addattn *shape,
			  const char *kind, cg_addattn_gen gen)
{
	const cg_addattn *a = shape;
	char name[320];
	snprintf(name, sizeof name,
		 "additive.%s.%u.%lld.%lld.%lld.%lld.%lld.%d.%lld.%lld.%a.%a.%a."
		 "live%d.%d",
		 kind, a->vw, (long long)a->N, (long long)a->Q, (long long)a->K,
		 (long long)a->H, (long long)a->dv, a->has_valid,
		 (long long)a->valid_sn, (long long)a->valid_sq,
		 (double)a->scale, (double)a->fill, k->node->attr.attention.p,
		 a->base.n_live, a->is_step);
	LLVMValueRef body = LLVMGetNamedFunction(k->L->mod, name);
	if (!body)
		body = make_body(k, shape, name, gen);
	cg_kernel_outline_call(
		k, body,
		a->has_dropout
			? cg_lower_dropout_key(k, k->node->attr.attention.stream)
			: cg_i64(&k->f, 0));
}

/* ---- vectors ---------------------------------------------------------------------- */

LLVMValueRef cg_addattn_vload(cg_addattn *a, LLVMValueRef p, unsigned lanes)
{
	return cg_vload_part(a->f, a->vw, p, lanes);
}

void cg_addattn_vstore(cg_addattn *a, LLVMValueRef v, LLVMValueRef p,
		       unsigned lanes)
{
	cg_vstore_part(a->f, v, p, lanes);
}

void cg_addattn_vec_loop(cg_addattn *a, int64_t width, cg_addattn_vec_fn body,
			 void *ud)
{
	cg_fn *f = a->f;
	int64_t whole = width / a->vw * a->vw;
	if (whole > 0) {
		cg_loop l;
		LLVMValueRef h = cg_loop_begin(f, &l, cg_i64(f, 0),
					       cg_i64(f, whole), a->vw);
		body(a, h, a->vw, ud);
		cg_loop_end(f, &l);
	}
	if (width > whole)
		body(a, cg_i64(f, whole), (unsigned)(width - whole), ud);
}

typedef struct axpy_cx {
	LLVMValueRef dst, src, s;
	bool is_acc;
} axpy_cx;

static void axpy_vec(cg_addattn *a, LLVMValueRef h, unsigned lanes, void *ud)
{
	const axpy_cx *c = ud;
	cg_fn *f = a->f;
	LLVMTypeRef vt = cg_t_vec(f, a->vw);
	LLVMValueRef d = cg_at(f, c->dst, h);
	LLVMValueRef x = cg_addattn_vload(a, cg_at(f, c->src, h), lanes);
	LLVMValueRef r = LLVMBuildFMul(f->b, x, cg_splat(f, a->vw, c->s), "");
	if (c->is_acc) {
		LLVMValueRef args[3] = {x, cg_splat(f, a->vw, c->s),
					cg_addattn_vload(a, d, lanes)};
		r = cg_intrinsic(f, "llvm.fma", &vt, 1, args, 3);
	}
	cg_addattn_vstore(a, r, d, lanes);
}

void cg_addattn_axpy(cg_addattn *a, LLVMValueRef dst, LLVMValueRef src,
		     int64_t width, LLVMValueRef s, bool is_acc)
{
	axpy_cx c = {dst, src, s, is_acc};
	cg_addattn_vec_loop(a, width, axpy_vec, &c);
}

static void zero_vec(cg_addattn *a, LLVMValueRef h, unsigned lanes, void *ud)
{
	LLVMValueRef dst = ud;
	cg_addattn_vstore(a, LLVMConstNull(cg_t_vec(a->f, a->vw)),
			  cg_at(a->f, dst, h), lanes);
}

void cg_addattn_zero(cg_addattn *a, LLVMValueRef dst, int64_t width)
{
	cg_addattn_vec_loop(a, width, zero_vec, dst);
}

typedef struct dot_cx {
	LLVMValueRef x, y, acc;
} dot_cx;

static void dot_vec(cg_addattn *a, LLVMValueRef h, unsigned lanes, void *ud)
{
	const dot_cx *c = ud;
	cg_fn *f = a->f;
	LLVMTypeRef vt = cg_t_vec(f, a->vw);
	LLVMValueRef args[3] = {cg_addattn_vload(a, cg_at(f, c->x, h), lanes),
				cg_addattn_vload(a, cg_at(f, c->y, h), lanes),
				cg_attn_get(&a->base, vt, c->acc)};
	cg_attn_set(&a->base, c->acc,
		    cg_intrinsic(f, "llvm.fma", &vt, 1, args, 3));
}

LLVMValueRef cg_addattn_dot(cg_addattn *a, LLVMValueRef x, LLVMValueRef y,
			    int64_t width)
{
	LLVMTypeRef vt = cg_t_vec(a->f, a->vw);
	dot_cx c = {x, y, cg_attn_var(&a->base, vt, LLVMConstNull(vt))};
	cg_addattn_vec_loop(a, width, dot_vec, &c);
	return cg_attn_hsum(&a->base, cg_attn_get(&a->base, vt, c.acc));
}

/* ---- rows, scores, dropout ---------------------------------------------------------- */

LLVMValueRef cg_addattn_live(cg_addattn *a, LLVMValueRef n)
{
	cg_fn *f = a->f;
	cg_attn *b = &a->base;
	if (b->n_live <= 0)
		return cg_i64(f, a->Q);
	LLVMValueRef len;
	if (a->is_step) { /* as pass_rowlive_eval's STEP */
		len = LLVMBuildSelect(f->b,
				      cg_lower_step_live(f, b->live_v, n,
							 a->step),
				      cg_i64(f, a->Q), cg_i64(f, 0), "");
	} else {
		len = cg_lower_row_len(f, b->live_v, b->live_w, n, a->Q);
	}
	return LLVMBuildSelect(f->b, b->rs_on, len, cg_i64(f, a->Q), "");
}

LLVMValueRef cg_addattn_row_valid(cg_addattn *a, LLVMValueRef n,
				  LLVMValueRef row)
{
	cg_fn *f = a->f;
	if (!a->has_valid)
		return cg_i64(f, a->K);
	LLVMValueRef q = LLVMBuildURem(f->b, row,
				       cg_i64(f, a->Q > 0 ? a->Q : 1), "");
	LLVMValueRef at = cg_add(f, cg_muli(f, n, a->valid_sn),
				 cg_muli(f, q, a->valid_sq));
	LLVMValueRef vl = LLVMBuildSExt(f->b,
					cg_lower_load(f, IR_I32, a->valid, at),
					cg_t_i64(f), "");
	LLVMValueRef lo = LLVMBuildICmp(f->b, LLVMIntSLT, vl, cg_i64(f, 0), "");
	vl = LLVMBuildSelect(f->b, lo, cg_i64(f, 0), vl, "");
	return cg_attn_min(&a->base, vl, a->K);
}

typedef struct score_cx {
	LLVMValueRef q, k; /* the row of qp and of kp */
	LLVMValueRef acc;  /* a vector variable */
	bool is_store_t;
} score_cx;

static void score_vec(cg_addattn *a, LLVMValueRef h, unsigned lanes, void *ud)
{
	const score_cx *c = ud;
	cg_fn *f = a->f;
	LLVMTypeRef vt = cg_t_vec(f, a->vw);
	LLVMValueRef x = LLVMBuildFAdd(f->b,
				       cg_addattn_vload(a, cg_at(f, c->q, h),
							lanes),
				       cg_addattn_vload(a, cg_at(f, c->k, h),
							lanes),
				       "");
	LLVMValueRef t = cg_lower_tanh(f, x);
	if (c->is_store_t)
		cg_vstore(f, t, cg_at(f, a->tb, h), 4);
	LLVMValueRef args[3] = {t,
				cg_addattn_vload(a, cg_at(f, a->wv, h), lanes),
				cg_attn_get(&a->base, vt, c->acc)};
	cg_attn_set(&a->base, c->acc,
		    cg_intrinsic(f, "llvm.fma", &vt, 1, args, 3));
}

LLVMValueRef cg_addattn_score(cg_addattn *a, LLVMValueRef n, LLVMValueRef row,
			      LLVMValueRef j, bool is_store_t)
{
	cg_fn *f = a->f;
	LLVMTypeRef vt = cg_t_vec(f, a->vw);
	LLVMValueRef key = cg_add(f, cg_muli(f, n, a->K), j);
	score_cx c = {cg_at(f, a->qp, cg_muli(f, row, a->H)),
		      cg_at(f, a->kp, cg_muli(f, key, a->H)),
		      cg_attn_var(&a->base, vt, LLVMConstNull(vt)), is_store_t};
	cg_addattn_vec_loop(a, a->H, score_vec, &c);
	LLVMValueRef s = cg_attn_hsum(&a->base,
				      cg_attn_get(&a->base, vt, c.acc));
	return LLVMBuildFMul(f->b, s, cg_f32(f, a->scale), "");
}

LLVMValueRef cg_addattn_keep(cg_addattn *a, LLVMValueRef row, LLVMValueRef j)
{
	cg_fn *f = a->f;
	LLVMValueRef at = cg_add(f, cg_muli(f, row, a->K), j);
	LLVMValueRef bits = cg_lower_mix64(f, LLVMBuildAdd(f->b, a->drop_key,
							   at, ""));
	LLVMValueRef top = LLVMBuildLShr(f->b, bits, cg_i64(f, 40), "");
	LLVMValueRef keep = LLVMBuildICmp(f->b, LLVMIntUGE, top,
					  cg_i64(f, a->threshold), "");
	return LLVMBuildOr(f->b, keep, LLVMBuildNot(f->b, a->drop_on, ""), "");
}

/* ---- key blocks -------------------------------------------------------------------------- */

void cg_addattn_blocks(cg_addattn *a, LLVMValueRef lo, LLVMValueRef hi,
		       cg_addattn_block_fn body, void *ud)
{
	cg_fn *f = a->f;
	cg_loop l;
	LLVMValueRef j0 = cg_loop_begin(f, &l, lo, hi, CG_ADDATTN_BLOCK);
	LLVMValueRef jn = cg_attn_min(&a->base, LLVMBuildSub(f->b, hi, j0, ""),
				      CG_ADDATTN_BLOCK);
	body(a, j0, jn, ud);
	cg_loop_end(f, &l);
}

LLVMValueRef cg_addattn_block_sum(cg_addattn *a, LLVMValueRef buf)
{
	cg_fn *f = a->f;
	LLVMValueRef acc = NULL;
	for (int64_t j = 0; j < CG_ADDATTN_BLOCK; j += a->vw) {
		LLVMValueRef x = cg_vload(f, a->vw, cg_ati(f, buf, j), 4);
		acc = acc ? LLVMBuildFAdd(f->b, acc, x, "") : x;
	}
	return cg_attn_hsum(&a->base, acc);
}

LLVMValueRef cg_addattn_needs_masked(cg_addattn *a)
{
	cg_fn *f = a->f;
	LLVMTypeRef ft = cg_t_f32(f);
	LLVMValueRef m = cg_attn_get(&a->base, ft, a->m);
	LLVMValueRef l = cg_attn_get(&a->base, ft, a->l);
	LLVMValueRef gap = LLVMBuildFSub(f->b, m, cg_f32(f, a->fill), "");
	LLVMValueRef near = LLVMBuildFCmp(f->b, LLVMRealULT, gap,
					  cg_f32(f, CG_ATTN_FILL_MARGIN), "");
	return LLVMBuildOr(f->b, near,
			   LLVMBuildFCmp(f->b, LLVMRealUNO, l, l, ""), "");
}

LLVMValueRef cg_addattn_shift(cg_addattn *a, LLVMValueRef m)
{
	return cg_attn_shift(&a->base, m);
}

LLVMValueRef cg_addattn_exp(cg_addattn *a, LLVMValueRef s, LLVMValueRef shift)
{
	return cg_attn_exp(&a->base, s, shift);
}

typedef struct scan_cx {
	LLVMValueRef x;   /* the floats scanned */
	LLVMValueRef acc; /* a vector variable: the sum */
	bool is_abs;      /* sum |x|, else x * 0 */
} scan_cx;

static void scan_vec(cg_addattn *a, LLVMValueRef h, unsigned lanes, void *ud)
{
	const scan_cx *c = ud;
	cg_fn *f = a->f;
	LLVMTypeRef vt = cg_t_vec(f, a->vw);
	LLVMValueRef x = cg_addattn_vload(a, cg_at(f, c->x, h), lanes);
	x = c->is_abs ? cg_intrinsic(f, "llvm.fabs", &vt, 1, &x, 1)
		      : LLVMBuildFMul(f->b, x, LLVMConstNull(vt), "");
	cg_attn_set(&a->base, c->acc,
		    LLVMBuildFAdd(f->b, cg_attn_get(&a->base, vt, c->acc), x,
				  ""));
}

void cg_addattn_scan_into(cg_addattn *a, LLVMValueRef acc, LLVMValueRef x,
			  int64_t width, bool is_abs)
{
	scan_cx c = {x, acc, is_abs};
	cg_addattn_vec_loop(a, width, scan_vec, &c);
}

LLVMValueRef cg_addattn_tail_sum(cg_addattn *a, LLVMValueRef n, LLVMValueRef kv,
				 bool is_abs)
{
	cg_fn *f = a->f;
	LLVMTypeRef vt = cg_t_vec(f, a->vw);
	LLVMValueRef acc = cg_attn_var(&a->base, vt, LLVMConstNull(vt));
	cg_loop l;
	LLVMValueRef j = cg_loop_begin(f, &l, kv, cg_i64(f, a->K), 1);
	cg_addattn_scan_into(a, acc,
			     cg_at(f, a->v,
				   cg_muli(f, cg_add(f, cg_muli(f, n, a->K), j),
					   a->dv)),
			     a->dv, is_abs);
	cg_loop_end(f, &l);
	return cg_attn_hsum(&a->base, cg_attn_get(&a->base, vt, acc));
}

/* ---- the forward kernel ---------------------------------------------------------------- */

/* The row being computed. */
typedef struct fwd_row {
	LLVMValueRef n, row;
	bool is_masked; /* the keys of this range are past the valid length */
} fwd_row;

/* One block of keys: scores into sb, the online softmax, P V. */
static void fwd_block(cg_addattn *a, LLVMValueRef j0, LLVMValueRef jn, void *ud)
{
	const fwd_row *r = ud;
	cg_fn *f = a->f;
	LLVMTypeRef ft = cg_t_f32(f);
	LLVMValueRef bm = cg_attn_var(&a->base, ft, cg_f32(f, -INFINITY));
	cg_loop l;
	LLVMValueRef t = cg_loop_begin(f, &l, cg_i64(f, 0), jn, 1);
	LLVMValueRef s = r->is_masked
				 ? cg_f32(f, a->fill)
				 : cg_addattn_score(a, r->n, r->row,
						    cg_add(f, j0, t), false);
	cg_store(f, s, cg_at(f, a->sb, t));
	cg_attn_set(&a->base, bm,
		    cg_lower_fcall(f, "llvm.maxnum",
				   cg_attn_get(&a->base, ft, bm), s));
	cg_loop_end(f, &l);
	LLVMValueRef m_old = cg_attn_get(&a->base, ft, a->m);
	LLVMValueRef m_new = cg_lower_fcall(f, "llvm.maxnum", m_old,
					    cg_attn_get(&a->base, ft, bm));
	LLVMValueRef shift = cg_addattn_shift(a, m_new);
	LLVMValueRef alpha = cg_addattn_exp(a, m_old, shift);
	cg_attn_set(&a->base, a->l,
		    LLVMBuildFMul(f->b, cg_attn_get(&a->base, ft, a->l), alpha,
				  ""));
	cg_addattn_axpy(a, a->acc, a->acc, a->dv, alpha, false);
	cg_attn_set(&a->base, a->m, m_new);
	cg_attn_fill(&a->base, a->db, cg_i64(f, CG_ADDATTN_BLOCK), 0);
	t = cg_loop_begin(f, &l, cg_i64(f, 0), jn, 1);
	LLVMValueRef j = cg_add(f, j0, t);
	LLVMValueRef p = cg_addattn_exp(a, cg_load(f, cg_at(f, a->sb, t)),
					shift);
	cg_store(f, p, cg_at(f, a->db, t));
	if (a->has_dropout)
		p = LLVMBuildSelect(f->b, cg_addattn_keep(a, r->row, j), p,
				    cg_f32(f, 0), "");
	LLVMValueRef vrow = cg_at(f, a->v,
				  cg_muli(f, cg_add(f, cg_muli(f, r->n, a->K), j),
					  a->dv));
	cg_addattn_axpy(a, a->acc, vrow, a->dv, p, true);
	cg_loop_end(f, &l);
	cg_attn_set(&a->base, a->l,
		    LLVMBuildFAdd(f->b, cg_attn_get(&a->base, ft, a->l),
				  cg_addattn_block_sum(a, a->db), ""));
}

/* The factor of a row's accumulator under dropout: inv, or 0 when the
 * row's weights are all NaN (l NaN, or 0: its maximum stayed -inf) and
 * dropout drops every one of its K keys, when the interpreter's output
 * row is sum_k 0 v_k, which the accumulator holds (it then met every
 * key: cg_addattn_needs_masked), and not NaN. */
static LLVMValueRef dropped_row_factor(cg_addattn *a, const fwd_row *r,
				       LLVMValueRef inv, LLVMValueRef sum)
{
	cg_fn *f = a->f;
	cg_attn *b = &a->base;
	LLVMTypeRef ft = cg_t_f32(f), bt = LLVMInt1TypeInContext(f->ctx);
	LLVMValueRef x = cg_attn_var(b, ft, inv);
	LLVMValueRef is_nan = LLVMBuildFCmp(f->b, LLVMRealULE, sum,
					    cg_f32(f, 0), "");
	LLVMBasicBlockRef join = cg_if_begin(f, is_nan);
	LLVMValueRef kept = cg_attn_var(b, bt, LLVMConstInt(bt, 0, 0));
	cg_loop l;
	LLVMValueRef j = cg_loop_begin(f, &l, cg_i64(f, 0), cg_i64(f, a->K), 1);
	cg_attn_set(b, kept,
		    LLVMBuildOr(f->b, cg_attn_get(b, bt, kept),
				cg_addattn_keep(a, r->row, j), ""));
	cg_loop_end(f, &l);
	cg_attn_set(b, x,
		    LLVMBuildSelect(f->b, cg_attn_get(b, bt, kept), inv,
				    cg_f32(f, 0), ""));
	cg_if_end(f, join);
	return cg_attn_get(b, ft, x);
}

/* out row = accumulator / l, times 1 / (1 - p) when dropout is on; 0
 * with no keys at all (K = 0), as the unfused product. A row whose
 * weights are NaN (l NaN, or 0 when no score rose above -inf, giving
 * 0 / 0) is NaN. */
static void fwd_store(cg_addattn *a, const fwd_row *r)
{
	cg_fn *f = a->f;
	LLVMValueRef one = cg_f32(f, 1);
	if (a->has_dropout)
		one = LLVMBuildSelect(f->b, a->drop_on,
				      cg_f32(f, a->keep_scale), one, "");
	LLVMValueRef sum = cg_attn_get(&a->base, cg_t_f32(f), a->l);
	LLVMValueRef inv = a->K > 0 ? LLVMBuildFDiv(f->b, one, sum, "")
				    : cg_f32(f, 0);
	if (a->K > 0 && a->has_dropout)
		inv = dropped_row_factor(a, r, inv, sum);
	cg_addattn_axpy(a, cg_at(f, a->k->out, cg_muli(f, r->row, a->dv)),
			a->acc, a->dv, inv, false);
}

/* The keys [kv, K) of a row that skips them, their weights taken as 0
 * (exp(fill - m) is below e^-40, and 0 from fill - m < -87.34, as with
 * the -1e6 fill): 0 v added to the accumulator, +-0 that leaves its
 * bits, or NaN where v is not finite, as in the interpreter's product
 * of the weights and all K values. */
static void fwd_skipped(cg_addattn *a, const fwd_row *r, LLVMValueRef kv)
{
	cg_fn *f = a->f;
	cg_loop l;
	LLVMValueRef j = cg_loop_begin(f, &l, kv, cg_i64(f, a->K), 1);
	LLVMValueRef vrow = cg_at(f, a->v,
				  cg_muli(f, cg_add(f, cg_muli(f, r->n, a->K), j),
					  a->dv));
	cg_addattn_axpy(a, a->acc, vrow, a->dv, cg_f32(f, 0), true);
	cg_loop_end(f, &l);
}

/* Row r's output. */
static void fwd_row_out(cg_addattn *a, fwd_row r)
{
	cg_fn *f = a->f;
	LLVMValueRef row = r.row;
	LLVMValueRef kv = cg_addattn_row_valid(a, r.n, row);
	cg_attn_set(&a->base, a->m, cg_f32(f, -INFINITY));
	cg_attn_set(&a->base, a->l, cg_f32(f, 0));
	cg_attn_fill(&a->base, a->acc, cg_i64(f, a->dpad), 0);
	cg_addattn_blocks(a, cg_i64(f, 0), kv, fwd_block, &r);
	if (a->has_valid) {
		LLVMValueRef more = cg_addattn_needs_masked(a);
		LLVMBasicBlockRef join = cg_if_begin(f, more);
		r.is_masked = true;
		cg_addattn_blocks(a, kv, cg_i64(f, a->K), fwd_block, &r);
		cg_if_end(f, join);
		/* only values that are not finite change the accumulator */
		join = cg_if_begin(f, LLVMBuildNot(f->b, more, ""));
		LLVMValueRef tail = cg_addattn_tail_sum(a, r.n, kv, false);
		LLVMBasicBlockRef join2 =
			cg_if_begin(f, LLVMBuildFCmp(f->b, LLVMRealUNE, tail,
						     cg_f32(f, 0), ""));
		fwd_skipped(a, &r, kv);
		cg_if_end(f, join2);
		cg_if_end(f, join);
	}
	fwd_store(a, &r);
}

/* The loop over the rows (n, q) in [lo, hi): a dead row (cg_addattn_live)
 * gets +0, the others their output. */
static void fwd_body(cg_addattn *a)
{
	cg_fn *f = a->f;
	cg_loop l;
	LLVMValueRef row = cg_loop_begin(f, &l, a->k->lo, a->k->hi, 1);
	fwd_row r = {LLVMBuildUDiv(f->b, row, cg_i64(f, a->Q), ""), row, false};
	if (!a->base.n_live) {
		fwd_row_out(a, r);
		cg_loop_end(f, &l);
		return;
	}
	LLVMValueRef q = LLVMBuildSub(f->b, row, cg_muli(f, r.n, a->Q), "");
	LLVMValueRef is_live = LLVMBuildICmp(f->b, LLVMIntSLT, q,
					     cg_addattn_live(a, r.n), "");
	LLVMBasicBlockRef join = cg_if_begin(f, is_live);
	fwd_row_out(a, r);
	cg_if_end(f, join);
	join = cg_if_begin(f, LLVMBuildNot(f->b, is_live, ""));
	cg_addattn_zero(a, cg_at(f, a->k->out, cg_muli(f, row, a->dv)), a->dv);
	cg_if_end(f, join);
	cg_loop_end(f, &l);
}

bool cg_lower_fused_additive_attention(cg_kernel *k)
{
	cg_addattn a;
	cg_addattn_shape(&a, k, false);
	k->extent = a.N * a.Q;
	k->work = a.N * a.Q * a.K * (4 * a.H + a.dv);
	cg_addattn_call_body(k, &a, "fwd", fwd_body);
	return true;
}
