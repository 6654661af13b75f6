/*
 * cg_units.c - how cg_module_jit compiles a module in units, each into
 * an object of its own that the object cache keeps under a key of its
 * own IR (docs/codegen.md, "The object cache"): a program that shares
 * kernels with one compiled before (another layer count, an edited
 * entry point) compiles only the units whose IR is new.
 *
 * The units are cg_split's (cg_split_units): unit 0 the optnone
 * functions and the globals, every other unit a kernel with the
 * functions only it calls, or a helper that many kernels share. Each
 * kernel unit is made a module of its own (the module cloned, cut in
 * halves, and so on down, rather than cloned once a unit), then given
 * names that do not depend on the program it came from: its functions
 * are first named by their place in it (__u.N) and its private globals
 * likewise (__p.N), and the bitcode of that module, the stems of the
 * functions' names (the name without the node number, "loss.k.matmul"),
 * the target and the pipeline give the unit's key; each function is
 * then named STEM.KEY, in the unit's module and in the program's, so
 * that the callers in other units (compiled later, or loaded from the
 * cache) name it so. Units are keyed callees first, so a kernel's key
 * covers the names of the shared helpers it calls. A unit's object is
 * thus a function of its key: any program whose unit has that key can
 * link it.
 *
 * Units the cache lacks are compiled from their bitcode on two threads,
 * each with its own LLVMContext and TargetMachine: a second thread takes
 * each as soon as it is keyed and not found, while this one cuts and
 * keys the others; then this one compiles unit 0 (the program's own:
 * its entry points change with every program) from the module itself,
 * at CodeGen level None, and both take what is left, heaviest first.
 */
#include "cg_internal.h"

#include <llvm-c/BitReader.h>
#include <llvm-c/BitWriter.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One unit: where its IR is, what it is called, what became of it. */
typedef struct unit_job {
	uint32_t unit;
	LLVMMemoryBufferRef bc; /* the unit's module, canonical names */
	char **names;           /* (n_names) each definition's name, or NULL */
	uint32_t n_names;
	unsigned char key[CG_CACHE_KEY_BYTES];
	uint64_t weight;
	bool is_hit;
	char *obj; /* malloc'd, len bytes */
	size_t len;
	double opt_ms;
	char err[256];
} unit_job;

typedef struct units_run {
	LLVMModuleRef mod; /* the program's module (becomes unit 0) */
	const cg_units_env *env;
	cg_units u;
	LLVMValueRef *leaf_fns; /* scratch (n_fns) */
	LLVMModuleRef *leaf;    /* (n_units) each kernel unit's module */
	char **final_name;      /* (n_fns) a renamed function's name */
	unit_job *jobs;         /* (n_units) */
	/* The kernel units to compile, as they are keyed and not found; the
	 * rest heaviest first once all are keyed (is_closed). Under lock. */
	unit_job **queue;
	uint32_t n_queue, next; /* queued; taken */
	bool is_closed;
	pthread_mutex_t lock;
	pthread_cond_t more;
	unsigned char (*keys)[CG_CACHE_KEY_BYTES]; /* (n_units) taken */
	uint32_t n_keys;
	bool *is_fixed;    /* (n_units) in a cycle of calls: keeps its names */
	cg_fn_key *sorted; /* (n_fns) by pointer, to find a function's index */
	uint32_t *perm;    /* (n_units - 1) the kernel units, heaviest first */
	uint32_t *place;   /* (n_units) a kernel unit's place in perm */
} units_run;

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* The functions of mod in order (as many as the program has: no copy
 * deletes a function before it is a leaf). */
static void list_fns(LLVMModuleRef mod, LLVMValueRef *fns, uint32_t n)
{
	uint32_t i = 0;
	for (LLVMValueRef f = LLVMGetFirstFunction(mod); f && i < n;
	     f = LLVMGetNextFunction(f))
		fns[i++] = f;
}

/* Strips from mod (a copy of the program) the bodies of the functions
 * of every unit but those at places [lo, hi) of r->perm (unit 0's
 * too). */
static void keep_range(units_run *r, LLVMModuleRef mod, uint32_t lo, uint32_t hi)
{
	list_fns(mod, r->leaf_fns, r->u.n_fns);
	for (uint32_t i = 0; i < r->u.n_fns; i++) {
		int32_t k = r->u.unit[i];
		if (k < 0 || LLVMIsDeclaration(r->leaf_fns[i]))
			continue;
		uint32_t at = k ? r->place[k] : UINT32_MAX;
		if (at < lo || at >= hi)
			cg_split_strip_body(r->leaf_fns[i]);
	}
}

/* Makes r->leaf[k] for each unit k at places [lo, hi) of r->perm from
 * mod, which holds those units' bodies. Cloning costs as much as the
 * module is large, so the units are cut in two halves of about the
 * same weight (the heaviest first: r->perm), each half cut again: a
 * unit's body is cloned about log2(total / its weight) times. */
static bool make_leaves(units_run *r, LLVMModuleRef mod, uint32_t lo,
			uint32_t hi)
{
	if (hi - lo == 1) {
		r->leaf[r->perm[lo]] = mod;
		return true;
	}
	uint64_t total = 0, half = 0;
	for (uint32_t i = lo; i < hi; i++)
		total += r->u.weight[r->perm[i]];
	uint32_t mid = lo + 1;
	for (half = r->u.weight[r->perm[lo]];
	     mid + 1 < hi && 2 * (half + r->u.weight[r->perm[mid]]) <= total;
	     mid++)
		half += r->u.weight[r->perm[mid]];
	LLVMModuleRef other = LLVMCloneModule(mod);
	if (!other) {
		LLVMDisposeModule(mod);
		return false;
	}
	keep_range(r, mod, lo, mid);
	keep_range(r, other, mid, hi);
	bool ok = make_leaves(r, mod, lo, mid);
	return make_leaves(r, other, mid, hi) && ok;
}

static bool is_local(LLVMValueRef g)
{
	LLVMLinkage l = LLVMGetLinkage(g);
	return l == LLVMPrivateLinkage || l == LLVMInternalLinkage;
}

/* Deletes the declarations and local constants nothing uses. */
static void drop_unused(LLVMModuleRef mod)
{
	LLVMValueRef next;
	for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = next) {
		next = LLVMGetNextFunction(f);
		if (LLVMIsDeclaration(f) && !LLVMGetFirstUse(f))
			LLVMDeleteFunction(f);
	}
	for (LLVMValueRef g = LLVMGetFirstGlobal(mod); g; g = next) {
		next = LLVMGetNextGlobal(g);
		if (!LLVMGetFirstUse(g) &&
		    (LLVMIsDeclaration(g) ||
		     (LLVMIsGlobalConstant(g) && is_local(g))))
			LLVMDeleteGlobal(g);
	}
}

/* The stem of a function's name: the name without the node number that
 * ties it to its program ("loss.k12.matmul" -> "loss.k.matmul",
 * "sgemm.3.par" -> "sgemm.par"). */
static void name_stem(const char *name, char *out, size_t size)
{
	size_t n = 0;
	const char *p = name;
	if (strncmp(p, "sgemm.", 6) == 0 && p[6] >= '0' && p[6] <= '9') {
		p += 6;
		while (*p >= '0' && *p <= '9')
			p++;
		n = (size_t)snprintf(out, size, "sgemm");
	}
	for (; *p && n + 1 < size; p++) {
		out[n++] = *p;
		if (p[0] == '.' && p[1] == 'k' && p[2] >= '0' && p[2] <= '9') {
			out[n++] = 'k';
			p += 2;
			while (p[1] >= '0' && p[1] <= '9')
				p++;
		}
		if (n + 1 >= size)
			break;
	}
	out[n < size ? n : size - 1] = '\0';
}

static const char *value_name(LLVMValueRef v)
{
	size_t len;
	return LLVMGetValueName2(v, &len);
}

/* Appends s and a newline to the growing string *buf (*len, *cap). */
static bool append(char **buf, size_t *len, size_t *cap, const char *s)
{
	size_t n = strlen(s) + 1;
	if (*len + n + 1 > *cap) {
		size_t cap2 = 2 * (*cap + n) + 64;
		char *b = realloc(*buf, cap2);
		if (!b)
			return false;
		*buf = b;
		*cap = cap2;
	}
	memcpy(*buf + *len, s, n - 1);
	(*buf)[*len + n - 1] = '\n';
	*len += n;
	(*buf)[*len] = '\0';
	return true;
}

static bool key_taken(const units_run *r, const unsigned char *key)
{
	for (uint32_t i = 0; i < r->n_keys; i++)
		if (memcmp(r->keys[i], key, CG_CACHE_KEY_BYTES) == 0)
			return true;
	return false;
}

/* Gives leaf k's own functions and private globals the names of their
 * place (__u.N, __p.N) and the other units' functions their final
 * names; *what gets what else its key covers: the pipeline and each own
 * function's stem (or fixed name, for one that was external before). */
static bool canonicalize(units_run *r, uint32_t k, LLVMModuleRef mod,
			 char **what)
{
	size_t len = 0, cap = 0;
	*what = NULL;
	bool ok = append(what, &len, &cap, r->env->pipeline);
	char name[64], stem[512];
	uint32_t j = 0;
	list_fns(mod, r->leaf_fns, r->u.n_fns);
	for (uint32_t i = 0; ok && i < r->u.n_fns; i++) {
		LLVMValueRef f = r->leaf_fns[i];
		if (r->u.unit[i] != (int32_t)k) {
			const char *fin = r->final_name[i];
			if (fin && LLVMGetFirstUse(f))
				LLVMSetValueName2(f, fin, strlen(fin));
			continue;
		}
		if (!r->u.was_local[i] || r->is_fixed[k]) {
			snprintf(stem, sizeof stem, "=%s", value_name(f));
		} else {
			name_stem(value_name(f), stem, sizeof stem);
			snprintf(name, sizeof name, "__u.%u", j);
			LLVMSetValueName2(f, name, strlen(name));
		}
		j++;
		ok = append(what, &len, &cap, stem);
	}
	drop_unused(mod);
	j = 0;
	for (LLVMValueRef g = LLVMGetFirstGlobal(mod); g;
	     g = LLVMGetNextGlobal(g)) {
		if (!is_local(g))
			continue;
		snprintf(name, sizeof name, "__p.%u", j++);
		LLVMSetValueName2(g, name, strlen(name));
	}
	LLVMSetSourceFileName(mod, "", 0);
	LLVMSetModuleIdentifier(mod, "", 0);
	return ok;
}

/* The final names of unit k's own functions: STEM.KEY.N (N the
 * function's place in the unit), set in the program's module and kept
 * for the unit's module. */
static bool name_unit(units_run *r, uint32_t k, unit_job *job)
{
	char hex[2 * 8 + 1], stem[512], name[600];
	for (int i = 0; i < 8; i++)
		snprintf(hex + 2 * i, 3, "%02x", job->key[i]);
	job->names = calloc(r->u.n_fns + 1, sizeof *job->names);
	if (!job->names)
		return false;
	uint32_t j = 0;
	for (uint32_t i = 0; i < r->u.n_fns; i++) {
		if (r->u.unit[i] != (int32_t)k)
			continue;
		LLVMValueRef f = r->u.fns[i];
		if (!r->u.was_local[i] || r->is_fixed[k]) {
			job->names[j++] = NULL;
			continue;
		}
		name_stem(value_name(f), stem, sizeof stem);
		snprintf(name, sizeof name, "%s.%s.%u", stem, hex, j);
		job->names[j] = strdup(name);
		r->final_name[i] = strdup(name);
		if (!job->names[j++] || !r->final_name[i])
			return false;
		LLVMSetValueName2(f, name, strlen(name));
	}
	job->n_names = j;
	return true;
}

/* Makes unit k's key, its final names and the bitcode to compile it
 * from; its leaf module is gone afterwards. */
static bool key_unit(units_run *r, uint32_t k)
{
	unit_job *job = &r->jobs[k];
	LLVMModuleRef mod = r->leaf[k];
	r->leaf[k] = NULL;
	char *what = NULL;
	bool ok = canonicalize(r, k, mod, &what);
	job->bc = ok ? LLVMWriteBitcodeToMemoryBuffer(mod) : NULL;
	LLVMDisposeModule(mod);
	ok = ok && job->bc;
	for (uint32_t dup = 0; ok; dup++) {
		char tag[96];
		snprintf(tag, sizeof tag,
			 "kernel unit, level Aggressive, "
			 "names STEM.KEY.N, copy %u",
			 dup);
		size_t n = strlen(what);
		char *w = malloc(n + sizeof tag + 1);
		if (!w) {
			ok = false;
			break;
		}
		snprintf(w, n + sizeof tag + 1, "%s%s", what, tag);
		cg_cache_key(job->bc, r->env->key_tm, w, job->key);
		free(w);
		if (!key_taken(r, job->key))
			break;
	}
	free(what);
	if (!ok)
		return false;
	memcpy(r->keys[r->n_keys++], job->key, CG_CACHE_KEY_BYTES);
	return name_unit(r, k, job);
}

/* The unit of the function f, or -1 for one not defined here. */
static int32_t unit_of(const units_run *r, LLVMValueRef f)
{
	int64_t i = cg_fn_key_find(r->sorted, r->u.n_fns, f);
	return i < 0 ? -1 : r->u.unit[i];
}

/* Marks edge[u * n + v] where a function of kernel unit v names one of
 * kernel unit u, counting each edge into indeg[v] once. */
static void find_edges(units_run *r, bool *edge, uint32_t *indeg)
{
	uint32_t n = r->u.n_units;
	for (uint32_t g = 0; g < r->u.n_fns; g++) {
		int32_t ug = r->u.unit[g];
		if (ug < 1)
			continue;
		for (LLVMUseRef use = LLVMGetFirstUse(r->u.fns[g]); use;
		     use = LLVMGetNextUse(use)) {
			LLVMValueRef user = LLVMGetUser(use);
			if (!LLVMIsAInstruction(user))
				continue;
			int32_t uf = unit_of(r, LLVMGetBasicBlockParent(
							LLVMGetInstructionParent(
								user)));
			if (uf < 1 || uf == ug)
				continue;
			size_t e = (size_t)ug * n + (size_t)uf;
			indeg[uf] += !edge[e];
			edge[e] = true;
		}
	}
}

/* The order to key the kernel units in: a unit after those it calls
 * (Kahn's algorithm over the cross-unit references); the units left
 * (in a cycle, or calling one) come last, in number order, and keep the
 * names they have (is_fixed). */
static bool key_order(units_run *r, uint32_t *order)
{
	uint32_t n = r->u.n_units;
	bool *edge = calloc((size_t)n * n + 1, sizeof *edge);
	uint32_t *indeg = calloc(n + 1, sizeof *indeg);
	bool *done = calloc(n + 1, sizeof *done);
	bool ok = edge && indeg && done;
	if (ok)
		find_edges(r, edge, indeg);
	uint32_t m = 0;
	for (bool progress = ok; progress;) {
		progress = false;
		for (uint32_t k = 1; k < n; k++) {
			if (done[k] || indeg[k])
				continue;
			done[k] = progress = true;
			order[m++] = k;
			for (uint32_t v = 1; v < n; v++)
				indeg[v] -= edge[(size_t)k * n + v];
		}
	}
	for (uint32_t k = 1; ok && k < n; k++)
		if (!done[k]) {
			r->is_fixed[k] = true;
			order[m++] = k;
		}
	free(edge);
	free(indeg);
	free(done);
	return ok;
}

/* Reads unit job's module into ctx, gives its functions their final
 * names, optimizes it and makes its object with tm. */
static void compile_unit(unit_job *job, LLVMContextRef ctx,
			 LLVMTargetMachineRef tm, const char *pipeline)
{
	LLVMModuleRef mod;
	if (LLVMParseBitcodeInContext2(ctx, job->bc, &mod)) {
		snprintf(job->err, sizeof job->err,
			 "cannot read a unit's bitcode back");
		return;
	}
	uint32_t j = 0;
	for (LLVMValueRef f = LLVMGetFirstFunction(mod); f;
	     f = LLVMGetNextFunction(f)) {
		if (LLVMIsDeclaration(f))
			continue;
		if (j < job->n_names && job->names[j])
			LLVMSetValueName2(f, job->names[j],
					  strlen(job->names[j]));
		j++;
	}
	double t0 = now_ms();
	LLVMErrorRef e = cg_run_passes(mod, pipeline, tm);
	job->opt_ms = now_ms() - t0;
	if (e) {
		char *msg = LLVMGetErrorMessage(e);
		snprintf(job->err, sizeof job->err, "optimization failed: %s",
			 msg);
		LLVMDisposeErrorMessage(msg);
	} else {
		job->obj = cg_emit_object(tm, mod, &job->len, job->err,
					  sizeof job->err);
	}
	LLVMDisposeModule(mod);
}

typedef struct worker {
	units_run *r;
	LLVMTargetMachineRef tm;
	double opt_ms;
} worker;

/* Queues unit job to be compiled. */
static void push_job(units_run *r, unit_job *job)
{
	pthread_mutex_lock(&r->lock);
	r->queue[r->n_queue++] = job;
	pthread_cond_signal(&r->more);
	pthread_mutex_unlock(&r->lock);
}

/* The next queued unit, waiting for one while the queue is open; NULL
 * once it is closed and empty. */
static unit_job *take_job(units_run *r)
{
	pthread_mutex_lock(&r->lock);
	while (r->next == r->n_queue && !r->is_closed)
		pthread_cond_wait(&r->more, &r->lock);
	unit_job *job = r->next < r->n_queue ? r->queue[r->next++] : NULL;
	pthread_mutex_unlock(&r->lock);
	return job;
}

static int cmp_weight(const void *a, const void *b)
{
	const unit_job *x = *(unit_job *const *)a, *y = *(unit_job *const *)b;
	if (x->weight != y->weight)
		return x->weight < y->weight ? 1 : -1;
	return x->unit < y->unit ? -1 : x->unit > y->unit;
}

/* Closes the queue: what no thread has taken yet goes heaviest first
 * (or nothing, if is_failed), so that the last units to finish are
 * small ones. */
static void close_queue(units_run *r, bool is_failed)
{
	pthread_mutex_lock(&r->lock);
	if (is_failed)
		r->next = r->n_queue;
	qsort(r->queue + r->next, r->n_queue - r->next, sizeof *r->queue,
	      cmp_weight);
	r->is_closed = true;
	pthread_cond_broadcast(&r->more);
	pthread_mutex_unlock(&r->lock);
}

/* Compiles queued units until the queue is closed and empty, in a
 * context of its own. */
static void *work(void *arg)
{
	worker *w = arg;
	LLVMContextRef ctx = LLVMContextCreate();
	unit_job *job;
	while ((job = take_job(w->r))) {
		compile_unit(job, ctx, w->tm, w->r->env->pipeline);
		w->opt_ms += job->opt_ms;
	}
	LLVMContextDispose(ctx);
	return NULL;
}

/* Unit 0: the program's module without the kernels' bodies. */
static void keep_unit0(units_run *r)
{
	for (uint32_t i = 0; i < r->u.n_fns; i++)
		if (r->u.unit[i] > 0)
			cg_split_strip_body(r->u.fns[i]);
	drop_unused(r->mod);
	cg_split_keep_globals(r->mod, 0);
}

/* Looks kernel unit k up in the cache; queues it if it is not there. */
static void look_up(units_run *r, uint32_t k, cg_units_stats *st)
{
	unit_job *job = &r->jobs[k];
	cg_cache_result c = cg_cache_load(r->env->cache_dir, job->key, true,
					  &job->obj, &job->len);
	job->is_hit = c == CG_CACHE_HIT;
	st->n_hit += job->is_hit;
	st->n_corrupt += c == CG_CACHE_CORRUPT;
	if (!job->is_hit)
		push_job(r, job);
}

static void run_free(units_run *r)
{
	for (uint32_t k = 0; r->jobs && k < r->u.n_units; k++) {
		unit_job *job = &r->jobs[k];
		if (job->bc)
			LLVMDisposeMemoryBuffer(job->bc);
		for (uint32_t j = 0; job->names && j < job->n_names; j++)
			free(job->names[j]);
		free(job->names);
		free(job->obj);
	}
	for (uint32_t k = 0; r->leaf && k < r->u.n_units; k++)
		if (r->leaf[k])
			LLVMDisposeModule(r->leaf[k]);
	for (uint32_t i = 0; r->final_name && i < r->u.n_fns; i++)
		free(r->final_name[i]);
	free(r->final_name);
	free(r->leaf);
	free(r->leaf_fns);
	free(r->jobs);
	free(r->queue);
	free(r->keys);
	free(r->is_fixed);
	free(r->sorted);
	free(r->perm);
	free(r->place);
	cg_units_free(&r->u);
}

static bool run_alloc(units_run *r)
{
	uint32_t n = r->u.n_units, nf = r->u.n_fns;
	r->leaf_fns = calloc(nf + 1, sizeof *r->leaf_fns);
	r->leaf = calloc(n, sizeof *r->leaf);
	r->final_name = calloc(nf + 1, sizeof *r->final_name);
	r->jobs = calloc(n, sizeof *r->jobs);
	r->queue = calloc(n, sizeof *r->queue);
	r->keys = calloc(n, sizeof *r->keys);
	r->is_fixed = calloc(n, sizeof *r->is_fixed);
	r->sorted = calloc(nf + 1, sizeof *r->sorted);
	r->perm = calloc(n, sizeof *r->perm);
	r->place = calloc(n, sizeof *r->place);
	if (!r->leaf_fns || !r->leaf || !r->final_name || !r->jobs || !r->queue ||
	    !r->keys || !r->is_fixed || !r->sorted || !r->perm || !r->place)
		return false;
	for (uint32_t k = 0; k < n; k++) {
		r->jobs[k].unit = k;
		r->jobs[k].weight = r->u.weight[k];
	}
	/* The queue is empty yet: it sorts the units for perm. */
	for (uint32_t k = 1; k < n; k++)
		r->queue[k - 1] = &r->jobs[k];
	qsort(r->queue, n - 1, sizeof *r->queue, cmp_weight);
	for (uint32_t k = 0; k + 1 < n; k++) {
		r->perm[k] = r->queue[k]->unit;
		r->place[r->perm[k]] = k;
	}
	cg_fn_keys_sort(r->sorted, r->u.fns, nf);
	return true;
}

/* Makes every kernel unit's module, key and final names (looking each
 * up in the cache as soon as it has its key, and queuing it for the
 * other thread if it is not there), then unit 0. */
static bool prepare(units_run *r, cg_units_stats *st)
{
	uint32_t n = r->u.n_units;
	uint32_t *order = calloc(n + 1, sizeof *order);
	bool ok = order && key_order(r, order);
	if (ok && n > 1) {
		LLVMModuleRef kernels = LLVMCloneModule(r->mod);
		ok = kernels != NULL;
		if (ok) {
			keep_range(r, kernels, 0, n - 1);
			cg_split_keep_globals(kernels, 1);
			ok = make_leaves(r, kernels, 0, n - 1);
		}
	}
	for (uint32_t i = 0; ok && i + 1 < n; i++) {
		ok = key_unit(r, order[i]);
		if (ok)
			look_up(r, order[i], st);
	}
	free(order);
	if (ok)
		keep_unit0(r);
	return ok;
}

/* Cuts, keys and looks up the units while a second thread compiles
 * the missing ones as they come, then makes unit 0's machine code and
 * helps with what is left. */
static bool compile_all(units_run *r, cg_units_stats *st)
{
	const cg_units_env *env = r->env;
	worker w[2] = {{r, env->tm_kernel[0], 0}, {r, env->tm_kernel[1], 0}};
	pthread_t th;
	bool is_threaded = env->is_threaded &&
			   pthread_create(&th, NULL, work, &w[1]) == 0;
	bool ok = prepare(r, st);
	close_queue(r, !ok);
	if (ok) {
		unit_job *j0 = &r->jobs[0];
		j0->obj = cg_emit_object(env->tm_none, r->mod, &j0->len,
					 j0->err, sizeof j0->err);
		work(&w[0]);
	}
	if (is_threaded)
		pthread_join(th, NULL);
	st->opt_ms = !is_threaded                ? w[0].opt_ms + w[1].opt_ms
		     : w[1].opt_ms > w[0].opt_ms ? w[1].opt_ms
						 : w[0].opt_ms;
	return ok;
}

int cg_units_compile(LLVMModuleRef mod, const cg_units_env *env, cg_objects *out,
		     cg_units_stats *st, char *err, size_t err_size)
{
	units_run r = {0};
	memset(st, 0, sizeof *st);
	r.mod = mod;
	r.env = env;
	if (!cg_split_units(mod, &r.u))
		return -1;
	double t0 = now_ms();
	st->n_units = r.u.n_units - 1; /* unit 0 is never cached */
	pthread_mutex_init(&r.lock, NULL);
	pthread_cond_init(&r.more, NULL);
	bool ok = run_alloc(&r) && compile_all(&r, st);
	if (!ok)
		snprintf(err, err_size, "cannot split the module into units");
	for (uint32_t k = 0; ok && k < r.u.n_units; k++) {
		unit_job *job = &r.jobs[k];
		if (!job->obj) {
			snprintf(err, err_size, "%s", job->err);
			ok = false;
			break;
		}
		if (k && !job->is_hit)
			cg_cache_store(env->cache_dir, job->key, true, job->obj,
				       job->len);
		ok = cg_objects_add(out, job->obj, job->len);
		job->obj = NULL;
		if (!ok)
			snprintf(err, err_size, "out of memory");
	}
	double wall = now_ms() - t0;
	st->codegen_ms = wall > st->opt_ms ? wall - st->opt_ms : 0;
	run_free(&r);
	pthread_cond_destroy(&r.more);
	pthread_mutex_destroy(&r.lock);
	return ok ? 1 : 0;
}
