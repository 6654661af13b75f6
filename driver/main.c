/*
 * main.c - the attnc command line: read a model (.g source or printed .ir),
 * add the gradient function when training, run the pass pipeline, and do
 * what the flags ask: dump the IR, print statistics, run the default
 * entry point under the reference interpreter or the JIT, train, check
 * gradients, draw pictures, or write code ahead of time.
 *
 * The flow is one flat function, top to bottom: options, front end,
 * autodiff, pipeline, actions. Every user error goes through the
 * diagnostics of ir_ctx and ends in exit status 1.
 */
#include "driver.h"
#include "frontend.h"
#include "ir.h"
#include "passes.h"
#include "plot.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char usage[] =
	"usage: attnc MODEL.g|MODEL.ir [options]\n"
	"\n"
	"Parses, checks and optimizes MODEL and says so in one line; options:\n"
	"\n"
	"Seeing inside:\n"
	"  --dump-ir            print the optimized IR\n"
	"  --dump-ir=parse      print the IR right after parsing\n"
	"  --dump-ir=PASS       print the IR after pass PASS\n"
	"  --dump-ir=all        print the IR after parsing and every pass\n"
	"  --disable-pass=NAME  do not run pass NAME (repeatable)\n"
	"  --no-fuse            turn off every fusion pass\n"
	"  --explain-fusion     say, for every softmax, whether it fuses into\n"
	"                       fused_attention and, if not, what blocks it\n"
	"  --list-passes        print the passes in pipeline order\n"
	"  --stats              print statistics of the optimized graph as JSON\n"
	"                       (with --jit, of the compilation too; with\n"
	"                       --train, of the training program, first)\n"
	"  --verify-each        run the IR verifier after every pass\n"
	"  --profile            with --jit, --train or --generate: time every\n"
	"                       kernel call; print the time by entry point, op\n"
	"                       kind and .g line to stderr (and to --metrics)\n"
	"\n"
	"Running (the default entry point: the first exported function with an\n"
	"example, on its example inputs):\n"
	"  --interp             with the reference interpreter\n"
	"  --jit                as native code, compiled through LLVM\n"
	"  --entry NAME         run function NAME instead\n"
	"  --f64                interpret in float64\n"
	"  --seed N             seed of the initializers and of dropout (0)\n"
	"  --threads N          threads of parallel loops (OMP_NUM_THREADS) and of\n"
	"                       the kernels' static schedule; with --train, at\n"
	"                       most N, as timing finds fastest\n"
	"  --inputs FILE        run on the tensors of a safetensors file, named\n"
	"                       as the entry's inputs, instead of its example\n"
	"  --outputs FILE       write the outputs, named, as a safetensors file\n"
	"  --load FILE          --jit: read the parameters from a safetensors file\n"
	"  --save FILE          --jit: write the parameters after the run\n"
	"\n"
	"";
/* The rest of --help (one string would pass the 4095 bytes C11 allows). */
static const char usage_more[] =
	"Training (as the model's train block says; docs/training.md):\n"
	"  --train              train as native code (implies --jit), then save,\n"
	"                       report and draw as asked\n"
	"  --epochs N           train N epochs instead of the file's number\n"
	"  --lr X               learning rate X instead of the file's\n"
	"  --batch N            batch size (the value of the dimension B)\n"
	"  --shards N           split each batch into N shards of rows, each\n"
	"                       run on a thread of its own, their gradients\n"
	"                       added (instead of the file's `shards`, or 1)\n"
	"  --data FILE          the file of the train block's data source:\n"
	"                       tensors(...), text(...) or nmt(...)\n"
	"  --valid-data FILE    tensors(...): the validation set's file\n"
	"  --save-every N       write --save FILE every N epochs too\n"
	"  --resume FILE        continue the training run saved in FILE\n"
	"  --metrics FILE       write one JSON line per epoch (and per\n"
	"                       translation) to FILE\n"
	"  --gradcheck          check the compiled gradient against float64\n"
	"                       autodiff and finite differences; status 1 if\n"
	"                       it is off\n"
	"\n"
	"Translation (seq2seq models; docs/translation.md):\n"
	"  --data FILE          train on the English<TAB>French pairs of FILE\n"
	"                       instead of the built-in corpus\n"
	"  --examples N         use the pairs of the first N + 1 lines (0: all)\n"
	"  --translate TEXT     translate TEXT after --train or --load, with\n"
	"                       BLEU against the data's reference (repeatable)\n"
	"\n"
	"Generation (text models, data = text(...); docs/datasets.md):\n"
	"  --generate TEXT      after --train or --load: continue TEXT with\n"
	"                       the model's decode_step, sampling\n"
	"  --max-tokens N       characters to generate (200)\n"
	"  --temperature X      divide the logits by X (1; 0: the most likely)\n"
	"  --top-k K            sample from the K most likely only (all)\n"
	"\n"
	"Pictures (SVG, or PNG when FILE ends in .png; with --interp, --jit,\n"
	"--train, or --load and --translate):\n"
	"  --plot FILE.svg      the loss per epoch (of --train, or the one the\n"
	"                       --load checkpoint records); for regression\n"
	"                       models the prediction against the truth and\n"
	"                       the data\n"
	"  --heatmap FILE.svg   the entry's output `weights` as a heatmap; for\n"
	"                       seq2seq models the attention of the last\n"
	"                       translation\n"
	"  --heatmap-output NAME  draw the entry's output NAME (2-D or 3-D)\n"
	"                       instead of `weights`\n"
	"\n"
	"Ahead of time:\n"
	"  -c [-o NAME.o]       write an object file and its header NAME.h (with a\n"
	"                       train block, also the gradient function)\n"
	"  --prefix P           name the symbols P_* (default: NAME of -o)\n"
	"  --load FILE          -c: take the dims the weights fix from FILE\n"
	"  --emit=KIND [-o F]   write ir (attnc IR), llvm, asm or obj to F\n"
	"                       (-: standard output, the default but for\n"
	"                       obj, which goes to NAME.o)\n"
	"  --mcpu CPU           generate code for CPU (x86-64-v3, znver4,\n"
	"                       ...; native: the host, the default) with -c,\n"
	"                       --emit, --jit or --train\n"
	"  --target TRIPLE      -c or --emit code for another machine\n"
	"                       (x86_64-linux-gnu, aarch64-linux-gnu, ...)\n"
	"  --no-cache           compile again rather than reading compiled code\n"
	"                       from $XDG_CACHE_HOME/attnc (or ATTNC_NO_CACHE=1)\n"
	"  --batch N            the value of the dimension B\n"
	"  --sym NAME=N         the value of dimension NAME (repeatable)\n"
	"\n"
	"  --help, --version\n"
	"\n"
	"A value may follow its option as the next argument or after '='\n"
	"(--threads 2, --threads=2); --dump-ir takes one only after '='.\n"
	"Limits: --threads at most 256, --epochs at most 1000000.\n";

static bool parse_u64(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (!*s || *end || errno || *s == '-' || *s == '+' || *s == ' ')
		return false;
	*out = v;
	return true;
}

/* A positive count up to max; a larger one is told the limit. */
static bool parse_count_max(ir_ctx *ctx, const char *opt, const char *s,
			    int64_t max, int64_t *out)
{
	uint64_t v;
	bool is_digits = *s && s[strspn(s, "0123456789")] == '\0';
	if (!parse_u64(s, &v) || v == 0 || v > (uint64_t)max) {
		if (is_digits && s[strspn(s, "0")] != '\0')
			ir_error(ctx, (ir_loc){0},
				 "%s: %s is more than the %lld allowed", opt, s,
				 (long long)max);
		else
			ir_error(ctx, (ir_loc){0},
				 "%s: '%s' is not a positive integer", opt, s);
		return false;
	}
	*out = (int64_t)v;
	return true;
}

/* A positive count below 2^31 (threads, batch, dimension values). */
static bool parse_count(ir_ctx *ctx, const char *opt, const char *s,
			int64_t *out)
{
	return parse_count_max(ctx, opt, s, INT32_MAX, out);
}

static bool check_pass_name(ir_ctx *ctx, const char *opt, const char *name)
{
	ir_suggest sg;
	if (pass_find(name))
		return true;
	ir_suggest_init(&sg, name);
	for (uint32_t p = 0; p < pass_count; p++)
		ir_suggest_offer(&sg, pass_table[p].name);
	if (sg.best)
		ir_error(ctx, (ir_loc){0},
			 "%s: unknown pass '%s'; did you mean "
			 "'%s'?",
			 opt, name, sg.best);
	else
		ir_error(ctx, (ir_loc){0},
			 "%s: unknown pass '%s' (see "
			 "--list-passes)",
			 opt, name);
	return false;
}

static bool add_sym(ir_ctx *ctx, drv_options *o, const char *opt,
		    const char *name, const char *value)
{
	int64_t v;
	if (!parse_count(ctx, opt, value, &v))
		return false;
	if (o->n_syms == DRV_MAX_LIST) {
		ir_error(ctx, (ir_loc){0}, "too many %s", opt);
		return false;
	}
	o->syms[o->n_syms++] = (drv_sym_value){opt, name, v};
	return true;
}

/* --sym NAME=N */
static bool parse_sym(ir_ctx *ctx, drv_options *o, char *arg)
{
	char *eq = strchr(arg, '=');
	if (!eq || eq == arg) {
		ir_error(ctx, (ir_loc){0}, "--sym: expected NAME=N, got '%s'",
			 arg);
		return false;
	}
	*eq = '\0';
	return add_sym(ctx, o, "--sym", arg, eq + 1);
}

/* A positive, finite real number (--lr). */
static bool parse_positive(ir_ctx *ctx, const char *opt, const char *s,
			   double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (!*s || *end || errno || !isfinite(v) || !(v > 0)) {
		ir_error(ctx, (ir_loc){0}, "%s: '%s' is not a positive number",
			 opt, s);
		return false;
	}
	*out = v;
	return true;
}

/* --examples N: a count, or 0 for every line. */
static bool opt_examples(ir_ctx *ctx, drv_options *o, const char *opt, char *v)
{
	uint64_t n;
	if (!parse_u64(v, &n) || n > INT32_MAX) {
		ir_error(ctx, (ir_loc){0}, "%s: '%s' is not an integer >= 0",
			 opt, v);
		return false;
	}
	o->examples = n ? (int64_t)n : -1;
	return true;
}

static bool opt_translate(ir_ctx *ctx, drv_options *o, const char *opt, char *v)
{
	if (o->n_translate == DRV_MAX_LIST) {
		ir_error(ctx, (ir_loc){0}, "too many %s (at most %d)", opt,
			 DRV_MAX_LIST);
		return false;
	}
	o->translate[o->n_translate++] = v;
	return true;
}

static bool opt_sym(ir_ctx *ctx, drv_options *o, const char *opt, char *v)
{
	(void)opt;
	return parse_sym(ctx, o, v);
}

static bool opt_batch(ir_ctx *ctx, drv_options *o, const char *opt, char *v)
{
	return add_sym(ctx, o, opt, "B", v);
}

static bool opt_threads(ir_ctx *ctx, drv_options *o, const char *opt, char *v)
{
	int64_t n;
	if (!parse_count_max(ctx, opt, v, DRV_MAX_THREADS, &n))
		return false;
	o->threads = (int)n;
	return true;
}

static bool opt_epochs(ir_ctx *ctx, drv_options *o, const char *opt, char *v)
{
	return parse_count_max(ctx, opt, v, DRV_MAX_EPOCHS, &o->epochs);
}

static bool opt_shards(ir_ctx *ctx, drv_options *o, const char *opt, char *v)
{
	return parse_count(ctx, opt, v, &o->shards);
}

static bool opt_lr(ir_ctx *ctx, drv_options *o, const char *opt, char *v)
{
	return parse_positive(ctx, opt, v, &o->lr);
}

static bool opt_seed(ir_ctx *ctx, drv_options *o, const char *opt, char *v)
{
	o->is_seed_set = true;
	if (parse_u64(v, &o->seed))
		return true;
	ir_error(ctx, (ir_loc){0}, "%s: '%s' is not a non-negative integer",
		 opt, v);
	return false;
}

/* --mcpu NAME: an x86-64 CPU that LLVM 19 knows, or native. */
static bool opt_mcpu(ir_ctx *ctx, drv_options *o, const char *opt, char *v)
{
	char err[256];
	if (!cg_cpu_check(v, err, sizeof err)) {
		ir_error(ctx, (ir_loc){0}, "%s: %s", opt, err);
		return false;
	}
	o->mcpu = v;
	return true;
}

/* --target TRIPLE: a 64-bit little-endian Linux target of this LLVM. */
static bool opt_target(ir_ctx *ctx, drv_options *o, const char *opt, char *v)
{
	char err[512];
	if (!cg_target_check(v, err, sizeof err)) {
		ir_error(ctx, (ir_loc){0}, "%s: %s", opt, err);
		return false;
	}
	o->target = v;
	return true;
}

static bool opt_save_every(ir_ctx *ctx, drv_options *o, const char *opt, char *v)
{
	return parse_count_max(ctx, opt, v, DRV_MAX_EPOCHS, &o->save_every);
}

static bool opt_max_tokens(ir_ctx *ctx, drv_options *o, const char *opt, char *v)
{
	return parse_count_max(ctx, opt, v, DRV_MAX_GENERATE, &o->max_tokens);
}

static bool opt_top_k(ir_ctx *ctx, drv_options *o, const char *opt, char *v)
{
	return parse_count(ctx, opt, v, &o->top_k);
}

/* --temperature X: a finite number >= 0 (0: the most likely token). */
static bool opt_temperature(ir_ctx *ctx, drv_options *o, const char *opt,
			    char *v)
{
	char *end;
	errno = 0;
	double t = strtod(v, &end);
	if (!*v || *end || errno || !isfinite(t) || t < 0) {
		ir_error(ctx, (ir_loc){0}, "%s: '%s' is not a number >= 0", opt,
			 v);
		return false;
	}
	o->temperature = t;
	return true;
}

static bool opt_dump_ir(ir_ctx *ctx, drv_options *o, const char *opt, char *v)
{
	if (!v) {
		o->dump = "";
		return true;
	}
	if (strcmp(v, "parse") && strcmp(v, "all") &&
	    !check_pass_name(ctx, opt, v))
		return false;
	o->dump = v;
	return true;
}

static bool opt_disable_pass(ir_ctx *ctx, drv_options *o, const char *opt,
			     char *v)
{
	if (!check_pass_name(ctx, opt, v))
		return false;
	if (o->n_disabled == DRV_MAX_LIST) {
		ir_error(ctx, (ir_loc){0}, "too many %s", opt);
		return false;
	}
	o->disabled[o->n_disabled++] = v;
	return true;
}

/* ---- the option table --------------------------------------------------------- */

typedef enum opt_kind {
	OPT_FLAG,     /* no value: sets the bool at `field` */
	OPT_FILE,     /* a value kept as is in the const char * at `field` */
	OPT_VALUE,    /* a value that `fn` checks and stores */
	OPT_OPTIONAL, /* `fn` gets a value only from --opt=value, else NULL */
} opt_kind;

typedef bool opt_fn(ir_ctx *ctx, drv_options *o, const char *opt, char *v);

typedef struct opt_def {
	const char *name;
	opt_kind kind;
	size_t field; /* OPT_FLAG, OPT_FILE: offsetof in drv_options */
	opt_fn *fn;   /* OPT_VALUE, OPT_OPTIONAL */
} opt_def;

#define FLAG(name, field)                                          \
	{                                                          \
		name, OPT_FLAG, offsetof(drv_options, field), NULL \
	}
#define FILE_OPT(name, field)                                      \
	{                                                          \
		name, OPT_FILE, offsetof(drv_options, field), NULL \
	}
#define VALUE(name, fn)                \
	{                              \
		name, OPT_VALUE, 0, fn \
	}

/* Every option but --help, --version and --list-passes: one line each.
 * A value may follow as the next argument or after '=' (--threads 2,
 * --threads=2), except for OPT_OPTIONAL (--dump-ir, --dump-ir=PASS). */
static const opt_def opt_table[] = {
	FLAG("--no-fuse", no_fuse),
	FLAG("--explain-fusion", explain_fusion),
	FLAG("--stats", stats),
	FLAG("--no-cache", no_cache),
	FLAG("--verify-each", verify_each),
	FLAG("--interp", interp),
	FLAG("--jit", jit),
	FLAG("--profile", profile),
	FLAG("--f64", f64),
	FLAG("--train", train),
	FLAG("--gradcheck", gradcheck),
	FLAG("-c", compile_only),
	FILE_OPT("-o", output),
	FILE_OPT("--load", load),
	FILE_OPT("--save", save),
	FILE_OPT("--entry", entry),
	FILE_OPT("--metrics", metrics),
	FILE_OPT("--plot", plot),
	FILE_OPT("--heatmap", heatmap),
	FILE_OPT("--heatmap-output", heatmap_output),
	FILE_OPT("--data", data),
	FILE_OPT("--emit", emit),
	FILE_OPT("--valid-data", valid_data),
	FILE_OPT("--inputs", inputs),
	FILE_OPT("--outputs", outputs),
	FILE_OPT("--generate", generate),
	FILE_OPT("--resume", resume),
	FILE_OPT("--prefix", prefix),
	VALUE("--save-every", opt_save_every),
	VALUE("--max-tokens", opt_max_tokens),
	VALUE("--top-k", opt_top_k),
	VALUE("--temperature", opt_temperature),
	VALUE("--examples", opt_examples),
	VALUE("--translate", opt_translate),
	VALUE("--epochs", opt_epochs),
	VALUE("--lr", opt_lr),
	VALUE("--sym", opt_sym),
	VALUE("--batch", opt_batch),
	VALUE("--shards", opt_shards),
	VALUE("--threads", opt_threads),
	VALUE("--seed", opt_seed),
	VALUE("--mcpu", opt_mcpu),
	VALUE("--target", opt_target),
	VALUE("--disable-pass", opt_disable_pass),
	{"--dump-ir", OPT_OPTIONAL, 0, opt_dump_ir},
};

static const char *const info_names[] = {"--help", "-h", "--version",
					 "--list-passes"};

static const opt_def *find_option(const char *name, size_t len)
{
	for (size_t i = 0; i < sizeof opt_table / sizeof *opt_table; i++)
		if (strlen(opt_table[i].name) == len &&
		    strncmp(opt_table[i].name, name, len) == 0)
			return &opt_table[i];
	return NULL;
}

static void unknown_option(ir_ctx *ctx, const char *a, size_t len)
{
	char name[64];
	ir_suggest sg;
	snprintf(name, sizeof name, "%.*s", (int)(len < 63 ? len : 63), a);
	ir_suggest_init(&sg, name);
	for (size_t i = 0; i < sizeof opt_table / sizeof *opt_table; i++)
		ir_suggest_offer(&sg, opt_table[i].name);
	for (size_t i = 0; i < sizeof info_names / sizeof *info_names; i++)
		ir_suggest_offer(&sg, info_names[i]);
	if (sg.best)
		ir_error(ctx, (ir_loc){0},
			 "unknown option '%s'; did you mean "
			 "'%s'?",
			 name, sg.best);
	else
		ir_error(ctx, (ir_loc){0}, "unknown option '%s' (see --help)",
			 name);
}

/* Applies option d to o with value v (NULL if none was given). */
static bool apply_option(ir_ctx *ctx, drv_options *o, const opt_def *d, char *v)
{
	switch (d->kind) {
	case OPT_FLAG:
		if (v) {
			ir_error(ctx, (ir_loc){0}, "%s takes no value", d->name);
			return false;
		}
		*(bool *)((char *)o + d->field) = true;
		return true;
	case OPT_FILE:
		*(const char **)((char *)o + d->field) = v;
		return true;
	case OPT_VALUE:
	case OPT_OPTIONAL:
		return d->fn(ctx, o, d->name, v);
	}
	return false;
}

/* Takes the option at argv[*i] (and its value, moving *i past it). */
static bool take_option(ir_ctx *ctx, drv_options *o, int argc, char **argv,
			int *i)
{
	char *a = argv[*i], *eq = strchr(a, '=');
	size_t len = eq ? (size_t)(eq - a) : strlen(a);
	const opt_def *d = find_option(a, len);
	if (!d) {
		unknown_option(ctx, a, len);
		return false;
	}
	char *v = eq ? eq + 1 : NULL;
	if (!v && (d->kind == OPT_FILE || d->kind == OPT_VALUE)) {
		if (*i + 1 == argc) {
			ir_error(ctx, (ir_loc){0}, "%s needs a value", d->name);
			return false;
		}
		v = argv[++*i];
	}
	return apply_option(ctx, o, d, v);
}

/* Prints --help, --version or --list-passes; false if a is none of them. */
static bool print_info(const char *a)
{
	if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
		fputs(usage, stdout);
		fputs(usage_more, stdout);
	} else if (strcmp(a, "--version") == 0) {
		printf("attnc %s\n", ATTNC_VERSION);
	} else if (strcmp(a, "--list-passes") == 0) {
		for (uint32_t p = 0; p < pass_count; p++)
			printf("%-10s %s\n", pass_table[p].name,
			       pass_table[p].summary);
	} else {
		return false;
	}
	return true;
}

/* Options of translation that must go together. */
static const char *check_translation(const drv_options *o)
{
	if ((o->data || o->examples) && !o->train && !o->gradcheck &&
	    !o->n_translate)
		return "--data and --examples need --train, --gradcheck or "
		       "--translate";
	if (o->n_translate &&
	    (o->interp || o->compile_only || o->emit || o->gradcheck))
		return "--translate runs native code after --train or --load, "
		       "not with --interp, -c, --emit or --gradcheck";
	if (o->n_translate && !o->train && !o->load)
		return "--translate needs weights to translate with: --train or "
		       "--load FILE";
	if (o->resume && o->load)
		return "--resume reads its run's parameters: not with --load";
	if (o->save_every && !o->save)
		return "--save-every N writes the --save FILE every N epochs: it "
		       "needs --save";
	if (o->generate && (o->interp || o->compile_only || o->emit ||
			    o->gradcheck || o->n_translate))
		return "--generate runs native code after --train or --load, not "
		       "with --interp, -c, --emit, --gradcheck or --translate";
	if (o->generate && !o->train && !o->load)
		return "--generate needs weights to generate with: --train or "
		       "--load FILE";
	if ((o->max_tokens || o->top_k || o->temperature != 1.0) && !o->generate)
		return "--max-tokens, --temperature and --top-k need --generate";
	if (o->n_translate && !o->train && o->save)
		return "--save with --translate writes trained weights: it needs "
		       "--train";
	return NULL;
}

/* Options of training that must go together. */
static const char *check_training(const drv_options *o)
{
	bool is_training = o->train || o->gradcheck;
	if (o->train && o->gradcheck)
		return "--train and --gradcheck: choose one";
	if (is_training && o->interp)
		return "--train and --gradcheck run native code, not --interp";
	if (is_training && (o->compile_only || o->emit))
		return "-c and --emit write code; they do not train";
	if (o->gradcheck && o->stats)
		return "--stats does not go with --gradcheck";
	if ((o->epochs || o->lr > 0 || o->shards ||
	     (o->metrics && !o->n_translate && !o->generate && !o->profile)) &&
	    !o->train)
		return "--epochs, --lr, --shards and --metrics need --train";
	if (o->gradcheck && (o->plot || o->heatmap || o->save))
		return "--gradcheck checks; it does not draw or save";
	if ((o->plot || o->heatmap) && !o->interp && !o->jit && !o->train &&
	    !o->n_translate)
		return "--plot and --heatmap need a run: --interp, --jit, --train, "
		       "or --load and --translate";
	if (o->heatmap_output && !o->heatmap)
		return "--heatmap-output names what --heatmap draws: it needs "
		       "--heatmap FILE";
	return NULL;
}

/* --profile times native code as it runs. */
static const char *check_profile(const drv_options *o)
{
	if (!o->profile)
		return NULL;
	if (o->compile_only || o->emit)
		return "--profile times code as it runs: not with -c or --emit "
		       "(use --jit, --train or --generate)";
	if (o->interp)
		return "--profile times native code: with --jit, --train or "
		       "--generate, not --interp";
	if (o->gradcheck)
		return "--profile does not go with --gradcheck";
	if (!o->jit && !o->train && !o->generate)
		return "--profile needs a run: --jit, --train or --generate";
	return NULL;
}

/* Options of one run of an entry (--interp or --jit, the entry's
 * example or --inputs): elsewhere nothing reads them, and a run that
 * went on without them would not be the one asked for. */
static const char *check_run(const drv_options *o)
{
	bool runs_entry = (o->interp || o->jit) && !o->train && !o->gradcheck &&
			  !o->n_translate && !o->generate && !o->compile_only &&
			  !o->emit;
	if (o->f64 && !o->interp)
		return "--f64 interprets in float64: it needs --interp (native "
		       "code computes in float32)";
	if ((o->inputs || o->outputs) && !runs_entry)
		return "--inputs and --outputs are the tensors of one run of an "
		       "entry: they need --interp or --jit, not --train, "
		       "--gradcheck, --translate, --generate, -c or --emit";
	return NULL;
}

/* --target with what runs here, and --mcpu with a target of another
 * arch than x86-64. */
static bool check_target(ir_ctx *ctx, const drv_options *o)
{
	if (!o->target)
		return true;
	bool runs = o->jit || o->train || o->gradcheck || o->generate ||
		    o->n_translate;
	if (runs && !cg_target_is_host(o->target)) {
		ir_error(ctx, (ir_loc){0},
			 "--target %s: code for another machine cannot run here; "
			 "write it with -c or --emit",
			 o->target);
		return false;
	}
	if (o->mcpu && !cg_target_is_x86_64(o->target) &&
	    strcmp(o->mcpu, "generic") != 0) {
		ir_error(ctx, (ir_loc){0},
			 "--mcpu %s: the CPUs --mcpu knows are x86-64 ones; for "
			 "--target %s the CPU is 'generic'",
			 o->mcpu, o->target);
		return false;
	}
	return true;
}

/* Options that must go together. */
static bool check_combination(ir_ctx *ctx, const drv_options *o)
{
	if (!check_target(ctx, o))
		return false;
	const char *bad = NULL;
	if (!o->model)
		bad = "no model file given (see --help)";
	else if ((bad = check_training(o)) != NULL)
		;
	else if ((bad = check_translation(o)) != NULL)
		;
	else if ((bad = check_profile(o)) != NULL)
		;
	else if ((bad = check_run(o)) != NULL)
		;
	else if (o->interp && o->jit)
		bad = "--interp and --jit: choose one";
	else if ((o->compile_only || o->emit) && (o->interp || o->jit))
		bad = "-c and --emit write code; they do not run it with --interp or --jit";
	else if (o->output && !o->compile_only && !o->emit)
		bad = "-o needs -c or --emit";
	else if (o->output && o->compile_only && strcmp(o->output, "-") == 0)
		bad = "-c writes an object file and its header: -o names the "
		      "object file ('-', standard output, is for --emit)";
	else if (o->prefix && !o->compile_only)
		bad = "--prefix needs -c";
	else if (o->save && o->compile_only)
		bad = "--save needs --jit or --train";
	else if ((o->load || o->save) && !o->jit && !o->train && !o->gradcheck &&
		 !o->n_translate && !o->generate && !o->compile_only)
		bad = "--load and --save need --jit or --train";
	if (bad)
		ir_error(ctx, (ir_loc){0}, "%s", bad);
	return bad == NULL;
}

/* A file the run writes (--save, --metrics, --plot, ...) must be
 * writable before anything is compiled or trained, not found unwritable
 * after an hour of training: its folder must exist and take new files
 * (saves go to a temporary file beside the target, renamed over it),
 * and the path must not name a folder. */
static bool check_writable(ir_ctx *ctx, const char *opt, const char *path)
{
	if (!path)
		return true;
	if (!*path) {
		ir_error(ctx, (ir_loc){0}, "%s: the file name is empty", opt);
		return false;
	}
	struct stat st;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		ir_error(ctx, (ir_loc){0}, "%s: '%s' is a folder, not a file",
			 opt, path);
		return false;
	}
	const char *slash = strrchr(path, '/');
	char dir[4096];
	if (!slash)
		snprintf(dir, sizeof dir, ".");
	else if ((size_t)(slash - path) >= sizeof dir) {
		ir_error(ctx, (ir_loc){0}, "%s: the path is too long", opt);
		return false;
	} else
		snprintf(dir, sizeof dir, "%.*s",
			 slash == path ? 1 : (int)(slash - path), path);
	const char *why = NULL;
	if (stat(dir, &st) != 0)
		why = strerror(errno);
	else if (!S_ISDIR(st.st_mode))
		why = "not a folder";
	else if (access(dir, W_OK | X_OK) != 0)
		why = strerror(errno);
	if (why)
		ir_error(ctx, (ir_loc){0}, "%s: cannot write '%s': %s: %s", opt,
			 path, dir, why);
	return why == NULL;
}

/* Whether paths a and b name one regular file, or one path that does
 * not exist yet (a device such as /dev/null may take several outputs). */
static bool same_file(const char *a, const char *b)
{
	struct stat sa, sb;
	if (!a || !b)
		return false;
	bool has_a = stat(a, &sa) == 0, has_b = stat(b, &sb) == 0;
	if (has_a && has_b)
		return S_ISREG(sa.st_mode) && sa.st_dev == sb.st_dev &&
		       sa.st_ino == sb.st_ino;
	return !has_a && !has_b && strcmp(a, b) == 0;
}

/* The files a run writes (NULL where an option is not given). */
typedef struct out_path {
	const char *opt, *path;
} out_path;
enum { N_OUT_PATHS = 6 };

/* Whether -o is `-`: --emit's text goes to standard output. */
static bool output_is_stdout(const drv_options *o)
{
	return o->output && strcmp(o->output, "-") == 0;
}

static void out_paths(const drv_options *o, out_path out[N_OUT_PATHS])
{
	out[0] = (out_path){"-o", output_is_stdout(o) ? NULL : o->output};
	out[1] = (out_path){"--save", o->save};
	out[2] = (out_path){"--metrics", o->metrics};
	out[3] = (out_path){"--plot", o->plot};
	out[4] = (out_path){"--heatmap", o->heatmap};
	out[5] = (out_path){"--outputs", o->outputs};
}

/* No file written may be one the run reads, or one another output
 * writes: `--emit=llvm -o m.g` replaced the model's source, `--save D`
 * the --data D. A run continued into its own checkpoint (--load or
 * --resume F with --save F) and --outputs over its --inputs read the
 * file before they write it, and stay allowed. */
static bool check_clobber(ir_ctx *ctx, const drv_options *o)
{
	out_path out[N_OUT_PATHS];
	out_paths(o, out);
	const struct {
		const char *what, *path, *may;
	} in[] = {{"the model", o->model, NULL},
		  {"--data", o->data, NULL},
		  {"--valid-data", o->valid_data, NULL},
		  {"--inputs", o->inputs, "--outputs"},
		  {"--load", o->load, "--save"},
		  {"--resume", o->resume, "--save"}};
	size_t n_in = sizeof in / sizeof *in;
	for (size_t i = 0; i < N_OUT_PATHS; i++) {
		for (size_t j = i + 1; j < N_OUT_PATHS; j++)
			if (same_file(out[i].path, out[j].path)) {
				ir_error(ctx, (ir_loc){0},
					 "%s and %s name the same file '%s'",
					 out[i].opt, out[j].opt, out[i].path);
				return false;
			}
		for (size_t j = 0; j < n_in; j++)
			if (same_file(out[i].path, in[j].path) &&
			    !(in[j].may && strcmp(in[j].may, out[i].opt) == 0)) {
				ir_error(ctx, (ir_loc){0},
					 "%s would write over %s '%s'",
					 out[i].opt, in[j].what, in[j].path);
				return false;
			}
	}
	return true;
}

/* Nor may it be the file the train block's data reads (`data =
 * tensors(file = "D")`, text(file = ...)) when no --data replaces it:
 * `--save D` replaced the training data with a checkpoint. Said at the
 * data setting. */
static bool check_clobber_data(ir_ctx *ctx, const drv_options *o,
			       const drv_train_config *tc)
{
	const ir_value *file = tc->data && !o->data
				       ? ir_setting_arg(tc->data, "file")
				       : NULL;
	if (!file || file->kind != IR_VAL_STR)
		return true;
	char buf[4096];
	const char *path = drv_model_path(o->model, file->str, buf, sizeof buf);
	out_path out[N_OUT_PATHS];
	out_paths(o, out);
	for (size_t i = 0; i < N_OUT_PATHS; i++)
		if (same_file(out[i].path, path)) {
			ir_error(ctx, tc->data->loc,
				 "%s would write over the training data '%s'",
				 out[i].opt, path);
			return false;
		}
	return true;
}

static bool check_output_paths(ir_ctx *ctx, const drv_options *o)
{
	return (output_is_stdout(o) || check_writable(ctx, "-o", o->output)) &&
	       check_writable(ctx, "--save", o->save) &&
	       check_writable(ctx, "--metrics", o->metrics) &&
	       check_writable(ctx, "--plot", o->plot) &&
	       check_writable(ctx, "--heatmap", o->heatmap) &&
	       check_writable(ctx, "--outputs", o->outputs) &&
	       check_clobber(ctx, o);
}

/* Fills o from argv; returns 0 to go on, 1 on a usage error (reported),
 * 2 when the option was fully handled (--help, --version, --list-passes). */
static int parse_options(ir_ctx *ctx, int argc, char **argv, drv_options *o)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (print_info(a))
			return 2;
		if (a[0] == '-' && a[1]) {
			if (!take_option(ctx, o, argc, argv, &i))
				return 1;
		} else if (o->model) {
			ir_error(ctx, (ir_loc){0},
				 "more than one model given: '%s' and '%s'",
				 o->model, a);
			return 1;
		} else {
			o->model = a;
		}
	}
	o->train |= o->resume != NULL;
	if (!check_combination(ctx, o))
		return 1;
	o->jit |= o->train || o->gradcheck || o->n_translate || o->generate;
	if (!o->max_tokens)
		o->max_tokens = 200;
	return 0;
}

/* A file whose first word, after blank lines and comments (`#` or `//`),
 * is `module` is printed IR; anything else is .g. */
static bool is_ir_text(const ir_source *s)
{
	const char *p = s->text;
	for (;;) {
		while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
			p++;
		if (*p != '#' && !(p[0] == '/' && p[1] == '/'))
			break;
		while (*p && *p != '\n')
			p++;
	}
	return strncmp(p, "module", 6) == 0 &&
	       (p[6] == ' ' || p[6] == '\t' || p[6] == '\n');
}

static ir_module *load_model(ir_ctx *ctx, const char *path)
{
	uint32_t file = ir_ctx_load_source(ctx, path);
	if (!file)
		return NULL;
	if (is_ir_text(&ctx->files[file]))
		return ir_module_read(ctx, file);
	return fe_compile(ctx, file);
}

static void print_summary(const char *path, const ir_module *m)
{
	uint32_t n_nodes = 0;
	int64_t n_weights = 0;
	for (uint32_t i = 0; i < m->n_funcs; i++)
		n_nodes += m->funcs[i]->g.n_nodes;
	for (uint32_t i = 0; i < m->n_params; i++) {
		int64_t n = ir_type_numel_static(&m->params[i].type);
		n_weights += n > 0 ? n : 0;
	}
	printf("%s: ok: model %s, %u functions, %u nodes, %u parameters "
	       "(%lld static weights)\n",
	       path, m->name, m->n_funcs, n_nodes, m->n_params,
	       (long long)n_weights);
}

/* OpenMP's thread count, the default of --threads, kept to the limit of
 * --threads: OMP_NUM_THREADS=100000 made libgomp crash creating the
 * threads of the first parallel region. A count set there is refused as
 * --threads is; a machine's own count above the limit is lowered to it. */
static bool check_default_threads(ir_ctx *ctx, const drv_options *o)
{
	if (o->threads || cg_threads_get() <= DRV_MAX_THREADS)
		return true;
	const char *env = getenv("OMP_NUM_THREADS");
	if (env && *env) {
		ir_error(ctx, (ir_loc){0},
			 "OMP_NUM_THREADS=%s: %d threads is more than the %d "
			 "allowed (as for --threads)",
			 env, cg_threads_get(), DRV_MAX_THREADS);
		return false;
	}
	cg_threads_set(DRV_MAX_THREADS);
	return true;
}

int main(int argc, char **argv)
{
	ir_ctx ctx;
	ir_ctx_init(&ctx);
	drv_options o = {.temperature = 1.0};
	drv_train_config tc;
	/* errors (stderr) and results (stdout) interleave in order */
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* A write past the file-size limit (ulimit -f) fails with EFBIG,
	 * which the writers report ("File too large") after removing their
	 * temporary file, instead of killing attnc with SIGXFSZ. */
	signal(SIGXFSZ, SIG_IGN);
	int status = 1;
	ir_module *m = NULL;
	drv_dist dist;
	if (!drv_dist_init(&dist, &argc, &argv)) {
		ir_ctx_fini(&ctx);
		return 1;
	}
	if (dist.diag)
		ctx.diag_out = dist.diag;

	int r = parse_options(&ctx, argc, argv, &o);
	if (r) {
		status = r == 2 ? 0 : 1;
		goto out;
	}
	drv_dist_rank_options(&dist, &o);
	if (!check_default_threads(&ctx, &o))
		goto out;
	if (!check_output_paths(&ctx, &o)) /* rank 0 alone writes them */
		goto out;
	drv_cache_resolve(&o);
	m = load_model(&ctx, o.model);
	if (!m || ctx.n_errors)
		goto out;
	if (o.dump && strcmp(o.dump, "all") == 0)
		printf("# ---- after parse ----\n");
	if (o.dump &&
	    (strcmp(o.dump, "parse") == 0 || strcmp(o.dump, "all") == 0))
		ir_module_print(m, stdout);
	pass_options po = {
		.disabled = o.disabled,
		.n_disabled = o.n_disabled,
		/* --explain-fusion reports on the graph the fusion pass sees */
		.no_fuse = o.no_fuse || o.explain_fusion,
		.dump = o.dump && *o.dump ? o.dump : NULL,
		.dump_out = stdout,
		.verify_each = o.verify_each,
	};
	if ((o.train || o.gradcheck || (o.compile_only && m->n_train)) &&
	    (!drv_train_prepare(&ctx, m, &o, &po, &tc) ||
	     !check_clobber_data(&ctx, &o, &tc)))
		goto out;

	if (!pass_pipeline_run(m, &po) || ctx.n_errors)
		goto out;

	if (o.dump && !*o.dump)
		ir_module_print(m, stdout);
	if (o.explain_fusion) {
		pass_explain_fusion(m, stdout);
		status = 0;
		goto out;
	}
	if ((o.plot || o.heatmap) && !drv_pictures_check(&ctx, m, &o, o.train))
		goto out;
	if (o.n_translate && !drv_translate_check(&ctx, m, &o))
		goto out;
	if (o.generate && !drv_generate_check(&ctx, m, &o))
		goto out;
	if (o.compile_only || o.emit) {
		if (!drv_emit(&ctx, m, &o))
			goto out;
	} else if (o.train) {
		if (!drv_train(&ctx, m, &o, &tc))
			goto out;
	} else if (o.gradcheck) {
		if (!drv_gradcheck(&ctx, m, &o, &tc))
			goto out;
	} else if (o.n_translate) {
		if (!drv_translate_loaded(&ctx, m, &o) ||
		    (o.plot && !drv_plot_loaded(&ctx, m, &o)))
			goto out;
	} else if (o.generate) {
		if (!drv_generate_loaded(&ctx, m, &o))
			goto out;
	} else if (o.jit) {
		if (!drv_syms_as_fallbacks(&ctx, m, &o) ||
		    !drv_run_jit(&ctx, m, &o))
			goto out;
	} else {
		if (o.stats)
			pass_stats_print(m, NULL, stdout);
		if (o.interp && (!drv_syms_as_fallbacks(&ctx, m, &o) ||
				 !drv_run_interp(&ctx, m, &o)))
			goto out;
		if (!o.dump && !o.stats && !o.interp)
			print_summary(o.model, m);
	}
	status = 0;
out:
	if (o.plot || o.heatmap)
		plot_fini(); /* cairo's and fontconfig's caches */
	ir_module_destroy(m);
	ir_ctx_fini(&ctx);
	drv_dist_fini(&dist, status);
	return status;
}
