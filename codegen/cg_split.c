/*
 * cg_split.c - how cg_module_jit splits one module into parts that
 * compile at the same time, each in an LLVMContext of its own, into
 * objects linked into one JITDylib (docs/codegen.md, "Compile time").
 *
 * The module is split after the passes that need the whole module
 * (MergeFunctions, interprocedural constant propagation, dead argument
 * elimination, attribute inference: cg_module.c), each part then
 * optimized on its own; or, when it is optimized already, split as it
 * is. Part 0 holds the functions marked optnone
 * (entry points and the schedule's thread functions: long lists of
 * calls that the optimizer skips), compiled at CodeGen level None, so
 * the fast register allocator serves them. Parts 1 and 2 hold
 * everything else (the kernels and their helpers), at level
 * Aggressive: the functions that call or name one another are kept
 * together (connected components of the reference graph, where a
 * helper that many kernels share, CG_ATTR_SHARED, joins none of its
 * callers and is a component of its own), and the components are
 * dealt, largest first, to the part with less work so far, where part 1
 * also carries part 0's work (one thread compiles parts 0 and 1, another
 * part 2). Work is counted in instructions and basic blocks (a loop
 * costs the optimizer more than straight-line code), an optnone
 * instruction as a fortieth of another: machine code at level None
 * costs about that.
 *
 * The plan is a function of the module alone (its functions in order,
 * their instructions and references), so every copy of the module (the
 * original, a clone, one read back from bitcode) computes the same plan
 * and keeps its own part of it. A function named from another part is
 * made external and hidden in every copy, so the parts link to each
 * other; constant private globals stay private and are copied into each
 * part that uses them; any other global is defined in part 0 only.
 *
 * With the object cache the JIT compiles units instead (cg_units.c):
 * part 0 as unit 0, and each component of the kernel side as a unit of
 * its own rather than dealt to parts 1 and 2 (cg_split_units).
 */
#include "cg_internal.h"

#include <stdlib.h>
#include <string.h>

/* How much cheaper an optnone instruction compiles (level None, no
 * optimizer) than one of a kernel (default<O3>, then level
 * Aggressive), roughly, with instructions counted before O3, as the
 * JIT splits (measured on the 12-layer GPT training program: about
 * 1/41). A module split after O3 has more kernel instructions, so its
 * part 1 gets somewhat more than its share. */
#define OPTNONE_DISCOUNT 40
/* What a basic block of a kernel-side function costs beyond its
 * instructions, in instructions, as the parts are dealt. A kernel's
 * loops cost O3 and machine code more than straight-line code does: on
 * the 12-layer GPT's training program, each kernel unit compiled on
 * its own, a least-squares fit of thread CPU ms gave 0.076 an
 * instruction and 0.33 a block (the sgemm loop nests about 150 us an
 * instruction, the micro-kernels 30-55), and instructions alone left
 * part 2 about 0.2 CPU s heavier than parts 1 and 0 together, with
 * 4 a block 0.02-0.03 s lighter (docs/benchmarks.md, "Compile time"). */
#define BLOCK_WORK 4

typedef struct split_plan {
	uint32_t n;        /* functions of the module, in order */
	LLVMValueRef *fns; /* (n) */
	cg_fn_key *sorted; /* (n) by pointer, to find a function's index */
	uint32_t *parent;  /* (n) union-find over the kernel side */
	uint64_t *weight;  /* (n) work (count_work), then a component's sum */
	int *part;         /* (n) 0, 1, 2; -1 for a declaration */
	bool *is_cross;    /* (n) named from another part, or from a constant */
	uint32_t n_defs[CG_SPLIT_PARTS];
} split_plan;

static bool is_optnone(LLVMValueRef f)
{
	unsigned k = LLVMGetEnumAttributeKindForName("optnone", 7);
	return LLVMGetEnumAttributeAtIndex(f, LLVMAttributeFunctionIndex, k) !=
	       NULL;
}

static uint64_t count_insts(LLVMValueRef f)
{
	uint64_t n = 0;
	for (LLVMBasicBlockRef b = LLVMGetFirstBasicBlock(f); b;
	     b = LLVMGetNextBasicBlock(b))
		for (LLVMValueRef i = LLVMGetFirstInstruction(b); i;
		     i = LLVMGetNextInstruction(i))
			n++;
	return n;
}

/* A kernel-side function's work as the parts are dealt: its
 * instructions and BLOCK_WORK a block. */
static uint64_t count_work(LLVMValueRef f)
{
	uint64_t n = count_insts(f);
	for (LLVMBasicBlockRef b = LLVMGetFirstBasicBlock(f); b;
	     b = LLVMGetNextBasicBlock(b))
		n += BLOCK_WORK;
	return n;
}

static int cmp_key(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)((const cg_fn_key *)a)->fn,
		  y = (uintptr_t)((const cg_fn_key *)b)->fn;
	return x < y ? -1 : x > y;
}

void cg_fn_keys_sort(cg_fn_key *keys, const LLVMValueRef *fns, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		keys[i] = (cg_fn_key){fns[i], i};
	qsort(keys, n, sizeof *keys, cmp_key);
}

int64_t cg_fn_key_find(const cg_fn_key *keys, uint32_t n, LLVMValueRef f)
{
	cg_fn_key k = {f, 0};
	const cg_fn_key *hit = bsearch(&k, keys, n, sizeof k, cmp_key);
	return hit ? (int64_t)hit->index : -1;
}

/* The index of function f in the plan, or -1 if it is not one. */
static int64_t index_of(const split_plan *s, LLVMValueRef f)
{
	return cg_fn_key_find(s->sorted, s->n, f);
}

static uint32_t find(uint32_t *parent, uint32_t i)
{
	while (parent[i] != i) {
		parent[i] = parent[parent[i]];
		i = parent[i];
	}
	return i;
}

static void plan_free(split_plan *s)
{
	free(s->fns);
	free(s->sorted);
	free(s->parent);
	free(s->weight);
	free(s->part);
	free(s->is_cross);
}

static bool plan_alloc(split_plan *s, LLVMModuleRef mod)
{
	memset(s, 0, sizeof *s);
	for (LLVMValueRef f = LLVMGetFirstFunction(mod); f;
	     f = LLVMGetNextFunction(f))
		s->n++;
	size_t n = s->n + 1;
	s->fns = calloc(n, sizeof *s->fns);
	s->sorted = calloc(n, sizeof *s->sorted);
	s->parent = calloc(n, sizeof *s->parent);
	s->weight = calloc(n, sizeof *s->weight);
	s->part = calloc(n, sizeof *s->part);
	s->is_cross = calloc(n, sizeof *s->is_cross);
	if (!s->fns || !s->sorted || !s->parent || !s->weight || !s->part ||
	    !s->is_cross) {
		plan_free(s);
		return false;
	}
	uint32_t i = 0;
	for (LLVMValueRef f = LLVMGetFirstFunction(mod); f;
	     f = LLVMGetNextFunction(f), i++) {
		s->fns[i] = f;
		s->parent[i] = i;
	}
	cg_fn_keys_sort(s->sorted, s->fns, s->n);
	return true;
}

static bool is_shared(LLVMValueRef f)
{
	return LLVMGetStringAttributeAtIndex(f, LLVMAttributeFunctionIndex,
					     CG_ATTR_SHARED,
					     sizeof CG_ATTR_SHARED - 1) != NULL;
}

/* The function an instruction-user of a value is in, or NULL when the
 * user is not an instruction (a constant expression, an initializer). */
static LLVMValueRef user_fn(LLVMUseRef u)
{
	LLVMValueRef user = LLVMGetUser(u);
	if (!LLVMIsAInstruction(user))
		return NULL;
	return LLVMGetBasicBlockParent(LLVMGetInstructionParent(user));
}

/* Joins every kernel-side function with the kernel-side functions that
 * name it, but for a shared helper (CG_ATTR_SHARED), which stays a
 * component of its own; a function named by something else than an
 * instruction is marked to be reachable from every part. */
static void join_components(split_plan *s)
{
	for (uint32_t g = 0; g < s->n; g++) {
		if (s->part[g] != 1)
			continue;
		bool joins = !is_shared(s->fns[g]);
		for (LLVMUseRef u = LLVMGetFirstUse(s->fns[g]); u;
		     u = LLVMGetNextUse(u)) {
			LLVMValueRef f = user_fn(u);
			int64_t fi = f ? index_of(s, f) : -1;
			if (fi < 0)
				s->is_cross[g] = true;
			else if (joins && s->part[fi] == 1)
				s->parent[find(s->parent, (uint32_t)fi)] =
					find(s->parent, g);
		}
	}
}

/* Deals the components, largest first (the earlier on a tie), to the
 * kernel part with less work so far, part 1 starting with part 0's. */
static bool deal_components(split_plan *s, uint64_t entry_work)
{
	uint32_t *roots = calloc(s->n + 1, sizeof *roots), n_roots = 0;
	if (!roots)
		return false;
	for (uint32_t i = 0; i < s->n; i++)
		if (s->part[i] == 1 && find(s->parent, i) != i)
			s->weight[find(s->parent, i)] += s->weight[i];
	for (uint32_t i = 0; i < s->n; i++)
		if (s->part[i] == 1 && s->parent[i] == i)
			roots[n_roots++] = i;
	/* Insertion sort: stable, and there are a few hundred. */
	for (uint32_t i = 1; i < n_roots; i++)
		for (uint32_t j = i;
		     j > 0 && s->weight[roots[j]] > s->weight[roots[j - 1]];
		     j--) {
			uint32_t t = roots[j];
			roots[j] = roots[j - 1];
			roots[j - 1] = t;
		}
	uint64_t load[3] = {0, entry_work, 0};
	for (uint32_t r = 0; r < n_roots; r++) {
		int to = load[2] < load[1] ? 2 : 1;
		load[to] += s->weight[roots[r]];
		s->weight[roots[r]] = (uint64_t)to; /* the root's part now */
	}
	for (uint32_t i = 0; i < s->n; i++)
		if (s->part[i] == 1)
			s->part[i] = (int)s->weight[find(s->parent, i)];
	free(roots);
	return true;
}

/* Marks the functions named by a function of another part. */
static void mark_cross(split_plan *s)
{
	for (uint32_t g = 0; g < s->n; g++) {
		if (s->part[g] < 0)
			continue;
		for (LLVMUseRef u = LLVMGetFirstUse(s->fns[g]); u;
		     u = LLVMGetNextUse(u)) {
			LLVMValueRef f = user_fn(u);
			int64_t fi = f ? index_of(s, f) : -1;
			if (fi < 0 || s->part[fi] != s->part[g])
				s->is_cross[g] = true;
		}
	}
}

/* Whether every global value that other parts must name has a name. */
static bool nameable(const split_plan *s, LLVMModuleRef mod)
{
	size_t len;
	if (LLVMGetFirstGlobalAlias(mod) || LLVMGetFirstGlobalIFunc(mod))
		return false; /* never made here; not split, to be safe */
	for (uint32_t i = 0; i < s->n; i++)
		if (s->part[i] >= 0 && s->is_cross[i] &&
		    (LLVMGetValueName2(s->fns[i], &len), len == 0))
			return false;
	for (LLVMValueRef g = LLVMGetFirstGlobal(mod); g;
	     g = LLVMGetNextGlobal(g))
		if (!LLVMIsDeclaration(g) && !LLVMIsGlobalConstant(g) &&
		    (LLVMGetValueName2(g, &len), len == 0))
			return false;
	return true;
}

static bool plan_make(split_plan *s, LLVMModuleRef mod)
{
	if (!plan_alloc(s, mod))
		return false;
	uint64_t entry_work = 0;
	for (uint32_t i = 0; i < s->n; i++) {
		LLVMValueRef f = s->fns[i];
		s->part[i] = LLVMIsDeclaration(f) ? -1 : is_optnone(f) ? 0 : 1;
		if (s->part[i] < 0)
			continue;
		s->weight[i] = s->part[i] == 0 ? count_insts(f) : count_work(f);
		if (s->part[i] == 0)
			entry_work += s->weight[i] / OPTNONE_DISCOUNT;
	}
	join_components(s);
	if (!deal_components(s, entry_work)) {
		plan_free(s);
		return false;
	}
	mark_cross(s);
	if (!nameable(s, mod)) {
		plan_free(s);
		return false;
	}
	for (uint32_t i = 0; i < s->n; i++)
		if (s->part[i] >= 0)
			s->n_defs[s->part[i]]++;
	return true;
}

bool cg_split_count(LLVMModuleRef mod, uint32_t n_defs[CG_SPLIT_PARTS])
{
	split_plan s;
	if (!plan_make(&s, mod))
		return false;
	memcpy(n_defs, s.n_defs, sizeof s.n_defs);
	plan_free(&s);
	return true;
}

/* Turns the definition f into a declaration: first every value its
 * instructions make is replaced by poison (no instruction uses another
 * then), then the terminators go (no branch names a block), then the
 * blocks with what is left in them. */
void cg_split_strip_body(LLVMValueRef f)
{
	for (LLVMBasicBlockRef b = LLVMGetFirstBasicBlock(f); b;
	     b = LLVMGetNextBasicBlock(b))
		for (LLVMValueRef i = LLVMGetFirstInstruction(b); i;
		     i = LLVMGetNextInstruction(i))
			if (LLVMGetFirstUse(i))
				LLVMReplaceAllUsesWith(i,
						       LLVMGetPoison(
							       LLVMTypeOf(i)));
	for (LLVMBasicBlockRef b = LLVMGetFirstBasicBlock(f); b;
	     b = LLVMGetNextBasicBlock(b))
		LLVMInstructionEraseFromParent(LLVMGetBasicBlockTerminator(b));
	LLVMBasicBlockRef b;
	while ((b = LLVMGetFirstBasicBlock(f)))
		LLVMDeleteBasicBlock(b);
	LLVMSetLinkage(f, LLVMExternalLinkage);
}

static bool is_local(LLVMValueRef g)
{
	LLVMLinkage l = LLVMGetLinkage(g);
	return l == LLVMInternalLinkage || l == LLVMPrivateLinkage;
}

/* Makes the local global value g visible to the other parts' objects
 * (but to nothing outside the JITDylib). */
static void promote(LLVMValueRef g)
{
	if (!is_local(g))
		return;
	LLVMSetLinkage(g, LLVMExternalLinkage);
	LLVMSetVisibility(g, LLVMHiddenVisibility);
}

/* Globals: a constant private one stays in each part that uses it (and
 * leaves the others); any other is defined in part 0 only. */
void cg_split_keep_globals(LLVMModuleRef mod, int part)
{
	LLVMValueRef next;
	for (LLVMValueRef g = LLVMGetFirstGlobal(mod); g; g = next) {
		next = LLVMGetNextGlobal(g);
		if (LLVMIsDeclaration(g))
			continue;
		if (LLVMIsGlobalConstant(g) && is_local(g)) {
			if (!LLVMGetFirstUse(g))
				LLVMDeleteGlobal(g);
			continue;
		}
		promote(g);
		if (part != 0) {
			LLVMSetInitializer(g, NULL);
			LLVMSetLinkage(g, LLVMExternalLinkage);
		}
	}
}

bool cg_split_keep(LLVMModuleRef mod, int part)
{
	split_plan s;
	if (!plan_make(&s, mod))
		return false;
	for (uint32_t i = 0; i < s.n; i++)
		if (s.part[i] >= 0 && s.is_cross[i])
			promote(s.fns[i]);
	for (uint32_t i = 0; i < s.n; i++)
		if (s.part[i] >= 0 && s.part[i] != part)
			cg_split_strip_body(s.fns[i]);
	for (uint32_t i = 0; i < s.n; i++)
		if (LLVMIsDeclaration(s.fns[i]) && !LLVMGetFirstUse(s.fns[i]))
			LLVMDeleteFunction(s.fns[i]);
	plan_free(&s);
	cg_split_keep_globals(mod, part);
	return true;
}

void cg_units_free(cg_units *u)
{
	free(u->fns);
	free(u->unit);
	free(u->is_cross);
	free(u->was_local);
	free(u->weight);
	memset(u, 0, sizeof *u);
}

/* Numbers the kernel-side components 1, 2, ... in the order of their
 * first function, and puts each function's unit into s->part. */
static uint32_t number_units(split_plan *s)
{
	uint32_t *id = calloc(s->n + 1, sizeof *id), n_units = 1;
	if (!id)
		return 0;
	for (uint32_t i = 0; i < s->n; i++) {
		if (s->part[i] != 1)
			continue;
		uint32_t r = find(s->parent, i);
		if (!id[r])
			id[r] = n_units++;
	}
	for (uint32_t i = 0; i < s->n; i++)
		if (s->part[i] == 1)
			s->part[i] = (int)id[find(s->parent, i)];
	free(id);
	return n_units;
}

static bool units_fill(cg_units *u, split_plan *s, uint32_t n_units)
{
	memset(u, 0, sizeof *u);
	u->n_fns = s->n;
	u->n_units = n_units;
	u->fns = s->fns;
	s->fns = NULL;
	u->unit = calloc(s->n + 1, sizeof *u->unit);
	u->is_cross = s->is_cross;
	s->is_cross = NULL;
	u->was_local = calloc(s->n + 1, sizeof *u->was_local);
	u->weight = calloc(n_units, sizeof *u->weight);
	if (!u->unit || !u->was_local || !u->weight)
		return false;
	for (uint32_t i = 0; i < s->n; i++) {
		u->unit[i] = s->part[i];
		u->was_local[i] = is_local(u->fns[i]);
		if (s->part[i] >= 0)
			u->weight[s->part[i]] += s->weight[i];
	}
	return true;
}

bool cg_split_units(LLVMModuleRef mod, cg_units *u)
{
	split_plan s;
	memset(u, 0, sizeof *u);
	if (!plan_alloc(&s, mod))
		return false;
	for (uint32_t i = 0; i < s.n; i++) {
		LLVMValueRef f = s.fns[i];
		s.part[i] = LLVMIsDeclaration(f) ? -1 : is_optnone(f) ? 0 : 1;
		if (s.part[i] >= 0)
			s.weight[i] = count_insts(f);
	}
	join_components(&s);
	uint32_t n_units = number_units(&s);
	bool ok = n_units > 0;
	if (ok) {
		mark_cross(&s);
		ok = nameable(&s, mod) && units_fill(u, &s, n_units);
	}
	plan_free(&s);
	if (!ok) {
		cg_units_free(u);
		return false;
	}
	for (uint32_t i = 0; i < u->n_fns; i++)
		if (u->unit[i] >= 0 && u->is_cross[i])
			promote(u->fns[i]);
	return true;
}
