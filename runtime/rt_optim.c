/*
 * rt_optim.c - the optimizers that training steps with (SGD and Adam, as
 * PyTorch defines them) and d2l's global-norm gradient clipping, over the
 * flat params block and a gradient block laid out the same way.
 *
 * The runtime owns the optimizer's state: Adam's first and second moments
 * live in two blocks shaped like the params block (llm.c keeps its m and v
 * the same way), so a step is one pass over each parameter's elements.
 * Every element is updated in double and rounded to float once, so the
 * result is the exact formula up to that rounding, whatever the order.
 */
#include "rt_internal.h"

#include <math.h>
#include <string.h>

struct attnrt_optim {
	const attnrt_allocator *al;
	attnrt_allocator al_copy; /* al points here when the caller gave one */
	attnrt_optim_config cfg;
	const attnrt_param_info *table;
	size_t n_params;
	uint64_t t;   /* steps taken */
	float *m, *v; /* Adam's moments, blocks shaped like params; else NULL */
};

attnrt_optim_config attnrt_optim_defaults(attnrt_optim_kind kind, double lr)
{
	return (attnrt_optim_config){.kind = kind,
				     .lr = lr,
				     .beta1 = 0.9,
				     .beta2 = 0.999,
				     .eps = 1e-8};
}

static int check_config(const attnrt_optim_config *cfg, char *err,
			size_t err_size)
{
	if (cfg->kind != ATTNRT_OPTIM_SGD && cfg->kind != ATTNRT_OPTIM_ADAM)
		return rt_fail(err, err_size, ATTNRT_ERR_ARG,
			       "unknown optimizer kind %d", (int)cfg->kind);
	if (!isfinite(cfg->lr) || cfg->lr < 0)
		return rt_fail(err, err_size, ATTNRT_ERR_ARG,
			       "learning rate %g is not a finite number >= 0",
			       cfg->lr);
	if (cfg->kind == ATTNRT_OPTIM_SGD)
		return ATTNRT_OK;
	if (!(cfg->beta1 >= 0 && cfg->beta1 < 1) ||
	    !(cfg->beta2 >= 0 && cfg->beta2 < 1))
		return rt_fail(err, err_size, ATTNRT_ERR_ARG,
			       "Adam's betas (%g, %g) must lie in [0, 1)",
			       cfg->beta1, cfg->beta2);
	if (!isfinite(cfg->eps) || cfg->eps < 0)
		return rt_fail(err, err_size, ATTNRT_ERR_ARG,
			       "Adam's eps %g is not a finite number >= 0",
			       cfg->eps);
	return ATTNRT_OK;
}

int attnrt_optim_create(const attnrt_allocator *al,
			const attnrt_optim_config *cfg,
			const attnrt_param_info *table, size_t n_params,
			attnrt_optim **out, char *err, size_t err_size)
{
	*out = NULL;
	int rc = check_config(cfg, err, err_size);
	if (rc == ATTNRT_OK)
		rc = rt_params_check(table, n_params, err, err_size);
	if (rc != ATTNRT_OK)
		return rc;
	attnrt_optim *o = rt_mem_alloc(al, sizeof *o);
	if (!o)
		return rt_fail(err, err_size, ATTNRT_ERR_NOMEM, "out of memory");
	memset(o, 0, sizeof *o);
	if (al) {
		o->al_copy = *al;
		o->al = &o->al_copy;
	}
	o->cfg = *cfg;
	o->table = table;
	o->n_params = n_params;
	if (cfg->kind == ATTNRT_OPTIM_ADAM) {
		size_t size = attnrt_params_size(table, n_params);
		o->m = attnrt_alloc(o->al, size);
		o->v = attnrt_alloc(o->al, size);
		if (!o->m || !o->v) {
			attnrt_optim_destroy(o);
			return rt_fail(err, err_size, ATTNRT_ERR_NOMEM,
				       "out of memory");
		}
	}
	*out = o;
	return ATTNRT_OK;
}

void attnrt_optim_destroy(attnrt_optim *opt)
{
	if (!opt)
		return;
	attnrt_free(opt->al, opt->m);
	attnrt_free(opt->al, opt->v);
	attnrt_allocator al = opt->al_copy;
	rt_mem_free(opt->al ? &al : NULL, opt);
}

/* The elements of parameter i in a block (params, grads or state). */
static float *elems(const attnrt_param_info *p, const void *block)
{
	return (float *)((char *)(uintptr_t)block + p->offset);
}

/* Part `part` of n_parts of the parameters' elements, counted in table
 * order, for one parameter that has some: its first (off) and how many
 * (n). The parts are equal but for one element, the first ones larger:
 * every function that works in parts cuts them here, so that a thread
 * reads back only what its own parts wrote. */
typedef struct span {
	const attnrt_param_info *p;
	int64_t off, n;
} span;

typedef void span_fn(const span *s, void *cx);

/* Calls fn on every span of the part (none when part >= n_parts). */
static void each_span(const attnrt_param_info *table, size_t n_params,
		      size_t part, size_t n_parts, span_fn *fn, void *cx)
{
	int64_t total = 0, base = 0;
	for (size_t i = 0; i < n_params; i++)
		total += rt_param_numel(&table[i]);
	if (n_parts == 0 || part >= n_parts)
		return;
	int64_t np = (int64_t)n_parts, pt = (int64_t)part, r = total % np;
	int64_t lo = total / np * pt + (pt < r ? pt : r);
	int64_t hi = lo + total / np + (pt < r ? 1 : 0);
	for (size_t i = 0; i < n_params && base < hi; i++) {
		int64_t n = rt_param_numel(&table[i]);
		int64_t a = lo > base ? lo - base : 0;
		int64_t b = hi < base + n ? hi - base : n;
		if (a < b) {
			span s = {&table[i], a, b - a};
			fn(&s, cx);
		}
		base += n;
	}
}

/* The squares of x[0..n) in double added to 8 partial sums (which the
 * compiler keeps in vector registers): element k to part[k % 8], those
 * past the last whole 8 to part[0]. */
static inline void add_square_parts(const float *restrict x, int64_t n,
				    double part[8])
{
	int64_t k = 0;
	for (; k + 8 <= n; k += 8)
		for (int j = 0; j < 8; j++)
			part[j] += (double)x[k + j] * x[k + j];
	for (; k < n; k++)
		part[0] += (double)x[k] * x[k];
}

/* The 8 partial sums added in order. */
static double parts_sum(const double part[8])
{
	double sum = 0;
	for (int j = 0; j < 8; j++)
		sum += part[j];
	return sum;
}

/* The sum of squares of g[0..n) in double, over 8 partial sums. */
static double sum_squares(const float *g, int64_t n)
{
	double part[8] = {0};
	add_square_parts(g, n, part);
	return parts_sum(part);
}

/* What one update reads: the blocks and Adam's constants (below), and
 * the sum of squares of the parameters it wrote so far. */
typedef struct update_cx {
	const attnrt_optim *o;
	void *params;
	const void *grads;
	float scale;
	float c[8];
	double squares;
} update_cx;

static void sgd_span(const span *s, void *cx)
{
	update_cx *u = cx;
	float lr = (float)u->o->cfg.lr, scale = u->scale;
	float *restrict p = elems(s->p, u->params) + s->off;
	const float *restrict g = elems(s->p, u->grads) + s->off;
	for (int64_t k = 0; k < s->n; k++)
		p[k] -= lr * (g[k] * scale);
	u->squares += sum_squares(p, s->n);
}

/* One parameter's Adam update, and the sum of squares of the new values
 * in double, the bits sum_squares (above) gives on the updated elements:
 * blocks of ADAM_BLOCK elements updated, then their squares added to the
 * same 8 partial sums, while the block is in L1. The update is a plain
 * float loop the compiler vectorizes, sqrt and division included, given
 * -fno-math-errno (CMakeLists.txt sets it for this file: without it every
 * sqrtf may set errno, and GCC 12 kept the loop scalar, 3.1% of
 * Bahdanau's training time); updating and squaring an element in one
 * loop vectorized worse (3 times the instructions). GCC also compiles an
 * AVX2 clone, chosen at load time on a CPU that has it. Vector sqrt and
 * division round as the scalar ones do and ISO C mode contracts nothing
 * into FMAs, so every clone gives the same bits
 * (tests/test_runtime_optim.c checks). */
#define ADAM_BLOCK 512
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
static double
adam_update(float *restrict p, float *restrict m, float *restrict v,
	    const float *restrict g, int64_t n, const float c[8])
{
	float b1 = c[0], b2 = c[1], step = c[2], bc2 = c[3], eps = c[4],
	      scale = c[5], one_b1 = c[6], one_b2 = c[7];
	double part[8] = {0};
	for (int64_t k0 = 0; k0 < n; k0 += ADAM_BLOCK) {
		int64_t k1 = n - k0 < ADAM_BLOCK ? n : k0 + ADAM_BLOCK;
		for (int64_t k = k0; k < k1; k++) {
			float gk = g[k] * scale;
			float mk = b1 * m[k] + one_b1 * gk;
			float vk = b2 * v[k] + one_b2 * gk * gk;
			m[k] = mk;
			v[k] = vk;
			p[k] -= step * mk / (sqrtf(vk) / bc2 + eps);
		}
		/* ADAM_BLOCK is a multiple of 8: only the last block has
		 * elements past a whole 8, as in sum_squares */
		add_square_parts(p + k0, k1 - k0, part);
	}
	return parts_sum(part);
}

static void adam_span(const span *s, void *cx)
{
	update_cx *u = cx;
	const attnrt_optim *o = u->o;
	u->squares += adam_update(elems(s->p, u->params) + s->off,
				  elems(s->p, o->m) + s->off,
				  elems(s->p, o->v) + s->off,
				  elems(s->p, u->grads) + s->off, s->n, u->c);
}

void attnrt_optim_begin_step(attnrt_optim *opt)
{
	opt->t++;
}

double attnrt_optim_update_part_sq(const attnrt_optim *opt, void *params,
				   const void *grads, double grad_scale,
				   size_t part, size_t n_parts)
{
	const attnrt_optim *o = opt;
	update_cx u = {o, params, grads, (float)grad_scale, {0}, 0};
	if (o->cfg.kind == ATTNRT_OPTIM_ADAM) {
		double b1 = o->cfg.beta1, b2 = o->cfg.beta2;
		/* 1 - beta in double: in float, 1 - 0.999f loses 4 digits */
		float c[8] = {(float)b1,
			      (float)b2,
			      (float)(o->cfg.lr / (1 - pow(b1, (double)o->t))),
			      (float)sqrt(1 - pow(b2, (double)o->t)),
			      (float)o->cfg.eps,
			      u.scale,
			      (float)(1 - b1),
			      (float)(1 - b2)};
		memcpy(u.c, c, sizeof c);
	}
	each_span(o->table, o->n_params, part, n_parts,
		  o->cfg.kind == ATTNRT_OPTIM_ADAM ? adam_span : sgd_span, &u);
	return u.squares;
}

void attnrt_optim_update_part(const attnrt_optim *opt, void *params,
			      const void *grads, double grad_scale, size_t part,
			      size_t n_parts)
{
	attnrt_optim_update_part_sq(opt, params, grads, grad_scale, part,
				    n_parts);
}

void attnrt_optim_step_scaled(attnrt_optim *opt, void *params,
			      const void *grads, double grad_scale)
{
	attnrt_optim_begin_step(opt);
	attnrt_optim_update_part(opt, params, grads, grad_scale, 0, 1);
}

void attnrt_optim_step(attnrt_optim *opt, void *params, const void *grads)
{
	attnrt_optim_step_scaled(opt, params, grads, 1.0);
}

uint64_t attnrt_optim_steps(const attnrt_optim *opt)
{
	return opt->t;
}

void attnrt_optim_set_steps(attnrt_optim *opt, uint64_t t)
{
	opt->t = t;
}

void *attnrt_optim_moments(attnrt_optim *opt, int which)
{
	return which == 0 ? (void *)opt->m : which == 1 ? (void *)opt->v : NULL;
}

void attnrt_optim_set_lr(attnrt_optim *opt, double lr)
{
	opt->cfg.lr = lr;
}

double attnrt_grad_norm(const attnrt_param_info *table, size_t n_params,
			const void *grads)
{
	double sum = 0;
	for (size_t i = 0; i < n_params; i++)
		sum += sum_squares(elems(&table[i], grads),
				   rt_param_numel(&table[i]));
	return sqrt(sum);
}

double attnrt_grad_clip(const attnrt_param_info *table, size_t n_params,
			void *grads, double theta)
{
	double norm = attnrt_grad_norm(table, n_params, grads);
	if (!isfinite(norm) || !(norm > theta))
		return norm;
	double scale = theta / norm;
	for (size_t i = 0; i < n_params; i++) {
		float *g = elems(&table[i], grads);
		int64_t n = rt_param_numel(&table[i]);
		for (int64_t k = 0; k < n; k++)
			g[k] = (float)(g[k] * scale);
	}
	return norm;
}

/* What one part of attnrt_grad_sum_part reads and adds up. */
typedef struct sum_cx {
	void *block;
	const void *const *more;
	size_t n_more;
	double squares;
} sum_cx;

/* to[k] += from[k] for k in [0, n), and the sum of squares of the new
 * to in double, in one pass, over the 8 partial sums of sum_squares:
 * the bits of the adds followed by sum_squares(to, n). An AVX2 clone as
 * adam_update has (the same bits). */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
static double
add_squares(float *restrict to, const float *restrict from, int64_t n)
{
	double part[8] = {0};
	int64_t k = 0;
	for (; k + 8 <= n; k += 8)
		for (int j = 0; j < 8; j++) {
			float t = to[k + j] + from[k + j];
			to[k + j] = t;
			part[j] += (double)t * t;
		}
	for (; k < n; k++) {
		float t = to[k] + from[k];
		to[k] = t;
		part[0] += (double)t * t;
	}
	return parts_sum(part);
}

/* Adds the other blocks into the span of c->block, in block order, and
 * its sum of squares into c->squares; with one other block, in one pass
 * (add_squares). */
static void sum_span(const span *s, void *cx)
{
	sum_cx *c = cx;
	float *to = elems(s->p, c->block) + s->off;
	if (c->n_more == 1) {
		c->squares += add_squares(to, elems(s->p, c->more[0]) + s->off,
					  s->n);
		return;
	}
	for (size_t b = 0; b < c->n_more; b++) {
		const float *from = elems(s->p, c->more[b]) + s->off;
		for (int64_t k = 0; k < s->n; k++)
			to[k] += from[k];
	}
	c->squares += sum_squares(to, s->n);
}

double attnrt_grad_sum_part(const attnrt_param_info *table, size_t n_params,
			    void *block, const void *const *more, size_t n_more,
			    size_t part, size_t n_parts)
{
	sum_cx c = {block, more, n_more, 0};
	each_span(table, n_params, part, n_parts, sum_span, &c);
	return c.squares;
}
