/*
 * driver.h - what the files of the attnc command line share: the parsed
 * options and the actions (run under the interpreter or the JIT, train,
 * check gradients, draw pictures, write code ahead of time).
 */
#ifndef ATTNC_DRIVER_H
#define ATTNC_DRIVER_H

#include "attnrt.h"
#include "cg_program.h"
#include "interp.h"
#include "ir.h"
#include "passes.h"
#include "rt_nmt.h"
#include "rt_text.h"

#include <stdio.h>

#define DRV_MAX_LIST 64
#define DRV_MAX_THREADS 256        /* --threads */
#define DRV_MAX_EPOCHS 1000000     /* --epochs and the train block's epochs */
#define DRV_MAX_GENERATE 1000000   /* --max-tokens */
#define DRV_MAX_GRAD_OUTPUTS 65536 /* the loss and a gradient per parameter */
#define DRV_MAX_SHARDS 64

typedef struct drv_sym_value {
	const char *opt; /* the option that gave it: "--sym" or "--batch" */
	const char *name;
	int64_t value;
} drv_sym_value;

typedef struct drv_options {
	const char *model;
	const char *dump; /* NULL, "" (optimized), "parse", "all" or a pass */
	const char *disabled[DRV_MAX_LIST];
	uint32_t n_disabled;
	drv_sym_value syms[DRV_MAX_LIST]; /* --sym NAME=N, --batch N */
	uint32_t n_syms;
	bool no_fuse, stats, verify_each;
	bool explain_fusion; /* say which softmaxes fuse, and why not */
	bool interp, jit, f64;
	bool profile;       /* --profile: time every kernel call */
	bool compile_only;  /* -c: object file and header */
	const char *emit;   /* --emit=ir|llvm|asm|obj */
	const char *output; /* -o */
	const char *prefix; /* --prefix: of the symbols -c writes */
	const char *mcpu;   /* --mcpu: the CPU of the code; NULL = host */
	const char *target; /* --target: its triple; NULL = host */
	bool no_cache;      /* --no-cache */
	/* The object cache's directory (drv_cache_resolve); "" = none. */
	char cache_dir[1024];
	const char *entry;
	const char *save, *load; /* checkpoints */
	const char *resume;      /* --resume FILE: continue its training run */
	int64_t save_every;      /* --save-every N: --save every N epochs */
	bool is_seed_set;        /* --seed was given */
	int n_ranks, rank;       /* MPI ranks (dist.c); 1 and 0 without */
	/* Buffers the size of the parameters that a run holds besides them
	 * (training: the gradient and the optimizer's state), for the check
	 * that the program fits in memory before it is compiled. */
	uint32_t param_copies;
	uint64_t seed;
	int threads;                /* 0 = OpenMP default */
	int64_t shards;             /* --shards; 0 = the train block's */
	bool train;                 /* --train (implies --jit) */
	bool gradcheck;             /* --gradcheck (implies --jit) */
	int64_t epochs;             /* --epochs; 0 = the train block's */
	double lr;                  /* --lr; 0 = the train block's */
	const char *metrics;        /* --metrics FILE: JSON lines per epoch */
	const char *plot, *heatmap; /* --plot FILE.svg, --heatmap FILE.svg */
	const char *heatmap_output; /* --heatmap-output NAME (`weights`) */
	const char *data; /* --data FILE: the train block's data source's file */
	const char *valid_data; /* --valid-data FILE: the validation set */
	const char *inputs, *outputs; /* --inputs / --outputs FILE.safetensors */
	const char *generate;         /* --generate PROMPT */
	int64_t max_tokens;           /* --max-tokens N (200) */
	double temperature;           /* --temperature X (1; 0 greedy) */
	int64_t top_k;                /* --top-k K (0: every token) */
	int64_t examples; /* --examples N; 0: the train block's, -1: all */
	const char *translate[DRV_MAX_LIST]; /* --translate SENTENCE */
	uint32_t n_translate;
} drv_options;

/* Whether environment variable name is set to anything but "" or "0":
 * the switches ATTNC_NO_CACHE, ATTNC_NO_TUNER, ATTNC_PERF_JIT. */
bool drv_env_is_on(const char *name);

/* The name of loc's source file, or "?" when it has none (the --profile
 * and ATTNC_MEMORY tables' "file:line" labels). */
const char *drv_loc_file(const ir_ctx *ctx, ir_loc loc);

/* Sets o->cache_dir: $XDG_CACHE_HOME/attnc, else $HOME/.cache/attnc
 * (absolute paths only), or "" with --no-cache or ATTNC_NO_CACHE set to
 * anything but "" or "0" (docs/codegen.md, "The object cache"). */
void drv_cache_resolve(drv_options *o);

/* Runs the entry point on its example inputs under the reference
 * interpreter and prints its outputs. */
bool drv_run_interp(ir_ctx *ctx, const ir_module *m, const drv_options *o);

/* Compiles the module to native code, runs the entry point on its example
 * inputs and prints its outputs; with --stats prints the statistics of
 * the graph and of the compilation. */
bool drv_run_jit(ir_ctx *ctx, const ir_module *m, const drv_options *o);

/* -c and --emit: writes the module ahead of time. */
bool drv_emit(ir_ctx *ctx, const ir_module *m, const drv_options *o);

/* The entry point the options name, or the module's default; reports and
 * returns NULL if there is none or it has no example to run on. */
const ir_func *drv_entry(ir_ctx *ctx, const ir_module *m, const drv_options *o,
			 bool needs_example);

/* Binds every symbol of m into values (m->n_syms): --sym/--batch first,
 * then the example inputs of f (if f), then the train block's batch for B,
 * then the symbols' fallbacks; with is_batch_first (training) the train
 * block's batch binds B before the example does. With is_strict, an
 * unbound symbol is an error; otherwise it is bound to 1. Derived
 * symbols (B*T) get their factors' product; then the module's limits are
 * checked (a break is reported at its .g line and gives false). */
bool drv_bind_syms(ir_ctx *ctx, const ir_module *m, const ir_func *f,
		   const drv_options *o, bool is_strict, bool is_batch_first,
		   int64_t *values);

/* Makes each --sym (and --batch) value of o its symbol's fallback in m,
 * so that the interpreter, which binds what the inputs leave unbound
 * from the fallbacks, takes it too; false after reporting a name the
 * model lacks or a product. */
bool drv_syms_as_fallbacks(ir_ctx *ctx, ir_module *m, const drv_options *o);

/* Whether the values the inputs bound (values; from names them, as
 * "the --inputs") are those --sym and --batch gave; else reports the
 * first that differs. */
bool drv_syms_agree(ir_ctx *ctx, const ir_module *m, const drv_options *o,
		    const char *from, const int64_t *values);

/* The example inputs of f (which has one) as tensors borrowing the
 * constants' data; in has f->n_inputs entries. */
void drv_example_inputs(const ir_module *m, const ir_func *f, interp_tensor *in);

/* Prints each output as "name: " and the tensor. */
void drv_print_outputs(const ir_func *f, const interp_tensor *outs);
/* The name of input or result i (names: f->input_names or output_names,
 * either may be NULL, as may each entry, in IR text without names):
 * the name, or prefix and i ("out1") written to buf. */
/* Binds dimension name to value in o (over a value it had), as opt says
 * ("data", "--shards", ...); false after reporting a full list. */
bool drv_options_bind(ir_ctx *ctx, drv_options *o, const char *opt,
		      const char *name, int64_t value);

const char *drv_io_name(const char *const *names, uint32_t i,
			const char *prefix, char *buf, size_t size);

/* ---- native code (run.c) ----------------------------------------------------- */

/* The lowering options the command line asks for: elementwise fusion
 * unless --no-fuse or --disable-pass=fuse_elementwise. */
cg_program_options drv_program_options(const drv_options *o);

/* A module compiled by the JIT, with its params block. */
typedef struct drv_jit {
	cg_program *p;
	void *params; /* the params block (cg_program_params gives the table) */
	int64_t *syms;     /* the symbols' values it was compiled for */
	const char *vocab; /* a text's characters, saved with --save, or NULL */
	/* --profile: the program's cycle counter and the monotonic clock
	 * (seconds) read together once it was compiled, for the counter's
	 * rate (profile.c). */
	uint64_t prof_cycles;
	double prof_seconds;
} drv_jit;

/* ---- --profile (profile.c) ---- */

/* Time the driver spent around a profiled program's entry points (the
 * batches' filling, the optimizer's update), shown beside them. */
typedef struct drv_profile_host {
	const char *name;
	uint64_t calls;
	double seconds;
} drv_profile_host;

/* Reads p's cycle counter and the monotonic clock (drv_now_seconds) at
 * the same moment, retrying a reading the scheduler split in two: a
 * rate from two such readings is exact however busy the machine is. */
void drv_profile_clock_read(const cg_program *p, uint64_t *cycles,
			    double *seconds);

/* Prints the profile of j's program (compiled with --profile) to stderr:
 * its entry points and the host's rows, then its kernels' time by op
 * kind and by .g source line, with calls, share, GFLOP/s and GB/s; and,
 * when metrics is not NULL, the same as one JSON line {"profile": what,
 * ...} there (docs/cli.md). what names the program ("training"). Returns
 * false after reporting when it cannot write metrics. */
bool drv_profile_report(ir_ctx *ctx, const drv_jit *j, const char *what,
			const drv_profile_host *host, uint32_t n_host,
			FILE *metrics);

/* ---- ATTNC_MEMORY=1 (memory.c) ---- */

/* Prints, for each entry point of p, its scratch slab, the bytes live at
 * its peak, and those buffers summed by .g source line and op, largest
 * first (docs/cli.md). Returns false after reporting when memory ran
 * out. */
bool drv_scratch_report(ir_ctx *ctx, const cg_program *p, FILE *out);

/* Binds the symbols (from the example of f, if f is not NULL and has
 * one; the train block's batch first when is_training), compiles every
 * exported function, and fills the params block from --load or by
 * --seed. Returns false after reporting; drv_jit_close frees j either
 * way. */
bool drv_jit_open(ir_ctx *ctx, const ir_module *m, const drv_options *o,
		  const ir_func *f, bool is_training, drv_jit *j);
/* drv_jit_open compiling only the exported functions named in only
 * (n_only of them); the params block is the whole module's still. */
bool drv_jit_open_only(ir_ctx *ctx, const ir_module *m, const drv_options *o,
		       const ir_func *f, bool is_training,
		       const char *const *only, uint32_t n_only, drv_jit *j);
/* drv_jit_open_only for a program that runs trained weights (decoding,
 * generation): with trained, its params block is copied from trained's
 * (the same layout, checked) instead of --load's or the seed's. */
bool drv_jit_open_trained(ir_ctx *ctx, const ir_module *m, const drv_options *o,
			  const char *const *only, uint32_t n_only,
			  const drv_jit *trained, drv_jit *j);
void drv_jit_close(ir_ctx *ctx, drv_jit *j);
/* Seconds of the monotonic clock, for throughputs and timings. */
double drv_now_seconds(void);
/* The process's peak resident memory so far, in MiB (getrusage). */
double drv_peak_rss_mib(void);
/* Prints --stats of the module with the compilation's numbers (compile
 * time, kernels) as one JSON line on stdout. */
void drv_print_jit_stats(const ir_module *m, cg_program *p);

/* --save: writes j's params as a safetensors checkpoint. */
bool drv_jit_save(ir_ctx *ctx, const ir_module *m, const drv_options *o,
		  const drv_jit *j);

/* Reports an entry point's error code rc at the op of f that raised it;
 * for an index out of range, the index and the range when p (the
 * program that ran, may be NULL) has them (cg_program_index_error). */
void drv_report_run_error(ir_ctx *ctx, const cg_program *p, const ir_func *f,
			  int rc);

/* ---- running any exported function (exec.c) ---------------------------------- */

/* How reports and pictures run the model's functions: under the
 * interpreter with params (m->n_params tensors), or as native code (jit
 * not NULL) with its params block. */
typedef struct drv_exec {
	ir_ctx *ctx;
	const ir_module *m;
	const drv_options *o;
	const interp_tensor *params; /* the interpreter's */
	const drv_jit *jit;          /* or the JIT's */
} drv_exec;

/* Writes dims as "[2, 1, 10]" into buf. */
void drv_dims_format(const int64_t *dims, int rank, char *buf, size_t size);

/* Runs f on inputs (f->n_inputs tensors of f32 or i32; under the JIT
 * their dims must be those it was compiled for) in evaluation mode and
 * fills outs (f->n_outputs, owned by the caller afterwards: free each with
 * interp_tensor_fini). Returns false after reporting. */
bool drv_exec_call(const drv_exec *e, const ir_func *f,
		   const interp_tensor *inputs, interp_tensor *outs);

/* ---- pictures and reports (plot.c) ------------------------------------------------ */

/* Whether m is one of the regression models (it exports `truth` and
 * `data`, and its default entry takes one input with an example). */
bool drv_is_regression(const ir_module *m);

/* The mean squared error, over the default entry's example inputs, of
 * its first output against `truth`: the test MSE against the noise-free
 * curve. Returns false after reporting. */
bool drv_regression_mse(const drv_exec *e, double *mse);

/* Whether the pictures asked for can be drawn, before anything runs:
 * --plot needs a regression model, training or a checkpoint's losses
 * (--load), --heatmap an entry with a 2-D or 3-D output `weights` (or
 * --heatmap-output's), or for a seq2seq model a translation (training,
 * or --translate). Reports and returns false if not. */
bool drv_pictures_check(ir_ctx *ctx, const ir_module *m, const drv_options *o,
			bool is_training);

/* --plot and --heatmap. --plot draws the regression figure (truth,
 * prediction, training points) for regression models, else the loss per
 * epoch (losses[0 .. n_epochs), NULL when there was no training: then
 * it is an error). --heatmap draws the default entry's output `weights`
 * (or --heatmap-output's) on its example: a matrix, or a 3-D stack of
 * them (B, Q, K) as one (B, K) matrix when Q is 1, as the book draws the
 * weights of every query of a batch, else as B panels; except for a
 * seq2seq model, whose heatmap drv_translate draws. Says what it wrote
 * on stdout; returns false after reporting. */
bool drv_pictures(const drv_exec *e, const double *losses, uint32_t n_epochs);

/* --plot without training: the loss per epoch that the --load
 * checkpoint records (drv_state_losses), drawn into o->plot. False after
 * reporting. */
bool drv_plot_loaded(ir_ctx *ctx, const ir_module *m, const drv_options *o);

/* ---- training (train_config.c, train.c, gradcheck.c) ---------------------------- */

/* How a loss adds over the rows of its batch (train_config.c reads it
 * off the entry's result). */
typedef enum drv_loss_kind {
	DRV_LOSS_OTHER, /* neither: rows cannot be split off exactly */
	DRV_LOSS_MEAN,  /* a mean over every axis, or mse_loss */
	DRV_LOSS_SUM,   /* a sum over every axis */
} drv_loss_kind;

/* The train block, read and checked, with the command line's overrides. */
typedef struct drv_train_config {
	const char *entry; /* the loss function: `entry`, or "loss" */
	attnrt_optim_config optim;
	int64_t epochs;
	double clip;            /* the global norm to clip to; 0 = none */
	int64_t batch;          /* --batch, else the block's; 0 = none */
	int64_t shards;         /* the batch's shards: --shards, `shards` */
	const ir_setting *data; /* the `data` setting, or NULL */
	/* What the shards' summed losses and gradients are scaled by for
	 * samples (tensors, text): 1 / shards when the loss is a mean over
	 * its rows, 1 when a sum (train_config.c finds which). */
	double shard_scale;
	drv_loss_kind loss_kind; /* of the entry */
	int n_ranks, rank;       /* MPI: shards are cut among the ranks */
	bool is_full;            /* every setting training needs is there */
} drv_train_config;

/* Reads and checks the train block (for --gradcheck only the entry and
 * data are needed, a missing train block means entry `loss`, and a loss
 * that takes inputs without data is checked on its example; for -c only
 * the entry), then
 * runs the forward passes (pass_pipeline_forward with po: the attentions
 * fuse) and adds the gradient function <entry>_grad by pass_autodiff,
 * unless the module already has it (printed IR of a training run) or
 * --explain-fusion asks about the functions fusion sees (the forward
 * ones). Runs before the pass pipeline, so that the passes optimize the
 * gradient and --dump-ir shows it. Returns false after reporting each
 * problem at its setting. */
bool drv_train_prepare(ir_ctx *ctx, ir_module *m, const drv_options *o,
		       const pass_options *po, drv_train_config *tc);

/* The name of the gradient function of tc ("<entry>_grad") in buf. */
const char *drv_grad_name(const drv_train_config *tc, char *buf, size_t size);

/* The most inputs an entry point may take where the driver feeds it
 * batch by batch or reads it back: the loss of --train and --gradcheck,
 * its data sources, decode_step of --generate (inputs and outputs), the
 * entries of --plot and --heatmap. (--jit and --interp take any number.)
 * drv_check_inputs reports a model past it. */
#define DRV_MAX_INPUTS 64
/* Reports (at f's line, for what) an entry of more than DRV_MAX_INPUTS
 * inputs or outputs; n_outputs counts only where outputs are kept. */
bool drv_check_inputs(ir_ctx *ctx, const ir_func *f, const char *what,
		      bool count_outputs);

/* One batch of the training data, as a source fills it. */
typedef struct drv_batch {
	const void *inputs[DRV_MAX_INPUTS]; /* the loss entry's inputs, in order */
	double n_items;                     /* samples (or tokens) it holds */
	double loss_divisor; /* the epoch loss is sum(loss) / sum(this) */
	/* Sharded batches: inputs hold n_shards shards of the entry's
	 * rows, shard s of input i at inputs[i] + s * shard_bytes[i]; the
	 * shards from n_live on are padding only (0: all are live). */
	uint32_t n_live;
	size_t shard_bytes[DRV_MAX_INPUTS];
} drv_batch;

/* Where batches come from: the interface a data pipeline implements
 * (today: a loss that takes no inputs, its data constants in the graph). */
typedef struct drv_batch_source {
	const char *unit;   /* "samples" or "tokens" */
	uint64_t n_batches; /* per epoch */
	void *state;
	/* Fills batch i (< n_batches) of epoch e (from 0); the pointers stay
	 * valid until the next call. False after reporting. */
	bool (*fill)(void *state, uint64_t epoch, uint64_t i, drv_batch *b);
	void (*fini)(void *state);
} drv_batch_source;

/* Whether the driver can feed the loss entry of tc: reports a `data`
 * setting it has no source for (or bad arguments of nmt(...)), at its
 * line, or an entry that takes inputs with no `data` to feed them. */
bool drv_batch_source_check(ir_ctx *ctx, const ir_module *m,
			    const drv_train_config *tc);

/* ---- samples: data = tensors(...) and text(...) (samples.c) ------------------- */

#define DRV_MAX_FIELDS DRV_MAX_INPUTS

typedef struct drv_grad drv_grad;

/* One input of the loss entry over every sample. */
typedef struct drv_field {
	char *name;                /* the input it feeds */
	ir_dtype dtype;            /* IR_F32 or IR_I32 */
	int rank;                  /* of one sample */
	int64_t dims[IR_MAX_RANK]; /* of one sample */
	size_t row_bytes;          /* one sample's bytes */
	char *data;                /* (n, dims...) */
} drv_field;

typedef struct drv_samples {
	drv_field fields[DRV_MAX_FIELDS];
	uint32_t n_fields;
	size_t n;                /* samples */
	double items_per_sample; /* what throughput counts: 1, or T tokens */
} drv_samples;

/* A file a `.g` file names (path), relative to the model file's folder
 * unless absolute: buf (size bytes) or path itself. */
const char *drv_model_path(const char *model, const char *path, char *buf,
			   size_t size);

/* "f32", "i32". */
const char *drv_dtype_name(ir_dtype t);

/* A table of n samples with n_fields fields, each to be allocated by
 * drv_samples_alloc_field; NULL when out of memory. */
drv_samples *drv_samples_create(uint32_t n_fields, size_t n);
/* Field i: its name (copied), dtype and a sample's shape, with room for
 * every sample (uninitialized); false when out of memory or too big. */
bool drv_samples_alloc_field(drv_samples *s, uint32_t i, const char *name,
			     ir_dtype dtype, int rank, const int64_t *dims);
void drv_samples_destroy(drv_samples *s);
/* Moves the last n_tail samples of s into a new table (the validation
 * set); NULL when out of memory. */
drv_samples *drv_samples_split(drv_samples *s, size_t n_tail);
/* The order of the samples in epoch e: a permutation of 0..n drawn from
 * (seed, epoch). */
void drv_samples_shuffle(size_t n, uint64_t seed, uint64_t epoch, size_t *order);

/* Checks s against the inputs of tc's loss entry, each fed by the field
 * of its name: its dtype, its rank and a sample's shape; binds into o
 * the dims a sample fixes and the batch axis (the first input's axis 0)
 * to the batch's rows (a shard's, with shards); the training set
 * (!is_valid) must hold a batch. Reports at the `data` setting's line. */
bool drv_samples_bind(ir_ctx *ctx, const ir_module *m,
		      const drv_train_config *tc, const drv_samples *s,
		      bool is_valid, drv_options *o);

/* The batch source over s for g: batches of g's shards, in an order
 * drawn from (seed, epoch), the last one filled up with the first
 * samples of the epoch's order. s must outlive the source. */
bool drv_samples_source_open(ir_ctx *ctx, const drv_samples *s, uint64_t seed,
			     const drv_grad *g, drv_batch_source *src);

/* The loss of the compiled entry (evaluation mode) over every sample
 * of s, on the scale of a training batch's loss: full batches of its
 * compiled rows, then for a loss that is a mean or a sum each sample
 * left over in a batch of its own copies (exact: the batch's value is
 * that sample's); for another loss the last batch filled up with the
 * first samples, weighted by its share of new rows. False after
 * reporting. The entry runs on n_threads threads (attnrt_run's: 0 for
 * OpenMP's default). */
bool drv_samples_eval(ir_ctx *ctx, const ir_module *m, const drv_jit *j,
		      const char *entry, drv_loss_kind kind,
		      const drv_samples *s, int32_t n_threads, double *loss);

/* ---- data = tensors(...) (data_tensors.c) ---------------------------------- */

/* Whether a `data` setting is tensors(...) (or a bare `tensors`). */
bool drv_tensors_is_source(const ir_setting *data);
/* Checks its arguments: file = "PATH", valid = F in [0, 1). */
bool drv_tensors_check(ir_ctx *ctx, const ir_setting *data);
/* Reads the samples of the loss entry's inputs from the file (--data, or
 * the setting's file, relative to the model's folder) into *train, and a
 * validation set into *valid (--valid-data FILE, or the setting's valid
 * share of the samples, the last ones; else NULL); prints what it read.
 * False after reporting. */
bool drv_tensors_load(ir_ctx *ctx, const ir_module *m,
		      const drv_train_config *tc, const drv_options *o,
		      drv_samples **train, drv_samples **valid);

/* Whether file was an .npy: one tensor, unnamed (attnrt_np_parse). */
bool drv_st_is_npy(const attnrt_st_file *file);
/* An .npy at path given (as what: "--inputs", "data") to f, which takes
 * one input: true; more inputs: reports that they go by name in an .npz.
 * True for any other file. */
bool drv_npy_fits(ir_ctx *ctx, const char *what, const char *path,
		  const attnrt_st_file *file, const ir_func *f);
/* The tensor of file for the input name: by name, or an .npy's one array
 * (copied into *one, named name). NULL when there is none. */
const attnrt_st_tensor *drv_st_input(const attnrt_st_file *file,
				     const char *name, attnrt_st_tensor *one);

/* Converts every element of t into out (its numel 4-byte elements of
 * want: f32 from F32 or F64, i32 from I32, I64, I16, I8, U8 or BOOL);
 * reports a dtype that does not convert or an I64 outside i32, naming
 * path and the tensor. */
bool drv_st_convert(ir_ctx *ctx, const char *path, const attnrt_st_tensor *t,
		    ir_dtype want, void *out);

/* ---- --inputs and --outputs (io_files.c) ------------------------------------- */

/* Reads f's inputs from the safetensors file at path, by name (one
 * missing, one the entry does not take, a dtype that does not convert
 * or a rank not the input's is an error naming it) into in
 * (f->n_inputs, freed by the caller with interp_tensor_fini). */
bool drv_inputs_read(ir_ctx *ctx, const ir_func *f, const char *path,
		     interp_tensor *in);
/* Copies o into *out with the dims the inputs in fix bound as --sym
 * values (so that the JIT compiles for them); false after reporting a
 * shape that does not fit f. */
bool drv_inputs_bind(ir_ctx *ctx, const ir_module *m, const ir_func *f,
		     const interp_tensor *in, const drv_options *o,
		     drv_options *out);
/* Writes f's outputs outs as a safetensors file at path (atomically),
 * each under its name (F32, F64 or I32); says what it wrote. */
bool drv_outputs_write(ir_ctx *ctx, const ir_module *m, const ir_func *f,
		       const interp_tensor *outs, const char *path);

/* What a training run (or --gradcheck) reads before it compiles. */
typedef struct drv_data {
	rt_nmt_data *nmt;           /* the pairs of data = nmt(...), or NULL */
	drv_samples *train, *valid; /* tensors(...) or text(...), or NULL */
	rt_text_vocab *vocab;       /* text(...)'s characters, or NULL */
	drv_options o; /* the run's options, the data's dims bound */
} drv_data;

/* ---- data = text(...) (data_text.c) ------------------------------------------- */

/* Whether a `data` setting is text(...). */
bool drv_text_is_source(const ir_setting *data);
/* Checks its arguments: steps = T (required), file = "PATH", valid = F
 * in [0, 1), stride = S. */
bool drv_text_check(ir_ctx *ctx, const ir_setting *data);
/* Reads the text (--data, the setting's file relative to the model's
 * folder, else the built-in one), builds its vocabulary into d->vocab,
 * cuts its windows into d->train and d->valid, binds V in d->o to the
 * vocabulary's size and prints what it read. False after reporting. */
bool drv_text_load(ir_ctx *ctx, const ir_module *m, const drv_options *o,
		   const ir_setting *data, drv_data *d);

/* Loads the data tc names (for nmt(...): prints what was read, binds
 * V_src and V_tgt in data->o); false after reporting. drv_data_close
 * frees it either way. */
bool drv_data_open(ir_ctx *ctx, const ir_module *m, const drv_options *o,
		   const drv_train_config *tc, drv_data *data);
void drv_data_close(drv_data *data);

/* The dims the data binds (the vocabularies' V_src and V_tgt) become
 * m's fallbacks, so that the reference interpreter, which binds the
 * rest from its inputs, runs m at the data's sizes (--gradcheck, and
 * the re-run of a step whose loss is not finite). */
void drv_data_bind_fallbacks(ir_module *m, const drv_data *data);

/* One shard's memory: its gradient block (the params block's layout),
 * which its outputs "grad.<param>" are written into directly, its
 * scratch and its loss. */
typedef struct drv_shard {
	void *grads, *scratch;
	float *loss;    /* the loss output */
	void **outputs; /* the function's outputs: loss, then gradients */
} drv_shard;

/* The compiled gradient function of a training run and its memory. A
 * batch of n_shards shards (the entry's B rows each) runs as n_shards
 * calls, on threads of their own where the run has them; their losses
 * and (train.c) gradients are added in shard order, so the result does
 * not depend on the threads. grads and loss are shard 0's; the
 * gradients of the batch end up in grads. */
typedef struct drv_grad {
	const ir_func *f; /* <entry>_grad, after the passes */
	attnrt_entry_fn fn;
	const attnrt_tensor_info *inputs;
	uint32_t n_inputs, n_outputs;
	void *grads;   /* the gradient block */
	float *loss;   /* the loss output */
	size_t n_loss; /* its elements (1 for a scalar loss) */
	const attnrt_param_info *table;
	uint32_t n_params;
	uint32_t n_shards;    /* of a batch, over every rank */
	uint32_t first_shard; /* this rank's: first_shard .. + n_local */
	uint32_t n_local;
	drv_shard shards[DRV_MAX_SHARDS]; /* this rank's, from first_shard */
	/* Under MPI: every shard's gradient block and loss, in shard order,
	 * this rank's written by its shards and the others' gathered. */
	char *all_grads;
	float *all_losses;
	size_t grad_bytes;
	int n_ranks;
	/* Runs of shards side by side on a team (calls), and the seconds
	 * the team's threads spent idle in them, summed over the threads:
	 * waiting at the end for the slowest shard, and the region's start
	 * and end (--profile's "(shards' wait)"). */
	uint64_t team_calls;
	double team_wait_seconds;
	/* The forward's padding rows (cg_program_set_row_skip): bounds of
	 * the forward's values (NULL: the program has no switch), checked
	 * before each step (grad_fn.c). */
	struct pass_rowbound *rb;
	ir_ctx *rb_ctx; /* rb's */
} drv_grad;

/* The gradient block and the loss output of shard s (of the batch's,
 * over every rank: after drv_grad_run every rank sees every shard's). */
void *drv_grad_block(const drv_grad *g, uint32_t s);
float *drv_grad_loss(const drv_grad *g, uint32_t s);

/* Finds the gradient function of tc in j and allocates the memory of
 * n_shards shards (under MPI this rank's, tc->rank of tc->n_ranks: its
 * n_shards / n_ranks, and room for every shard's gradients); false after
 * reporting. drv_grad_close frees g either way. */
bool drv_grad_open(ir_ctx *ctx, const ir_module *m, const drv_train_config *tc,
		   const drv_jit *j, uint32_t n_shards, drv_grad *g);

void drv_grad_close(drv_grad *g);

/* Opens the source the train block's `data` names (read into data) for
 * the compiled gradient function g of j; false after reporting.
 * src->fini (if set) closes it. */
bool drv_batch_source_open(ir_ctx *ctx, const ir_module *m,
			   const drv_train_config *tc, const drv_data *data,
			   const drv_jit *j, const drv_grad *g,
			   drv_batch_source *src);

/* Runs the gradient function on batch b with run: each live shard's
 * gradient block gets its shard's gradients (with one shard, g->grads
 * is the batch's gradient; with more the caller adds them, as train.c
 * does on the step's threads) and *loss the sum of the shards' loss
 * outputs, in shard order. Shard s runs with step run->step * n_shards
 * + s (its own dropout masks), on a thread of its own when
 * run->n_threads allows, else with the run's threads. */
bool drv_grad_run(ir_ctx *ctx, const drv_jit *j, drv_grad *g,
		  const drv_batch *b, const attnrt_run *run, double *loss);

/* The shards of b that hold rows of data (the others are skipped). */
uint32_t drv_grad_live(const drv_grad *g, const drv_batch *b);

/* Shard s of batch b as a batch of its own (the entry's B rows), with
 * the run it had in drv_grad_run. */
void drv_grad_shard(const drv_grad *g, const drv_batch *b, const attnrt_run *run,
		    uint32_t s, drv_batch *out, attnrt_run *run_out);

/* Copies of j's parameters as interpreter tensors (float32, or float64
 * with is_f64): m->n_params of them, each freed by the caller with
 * interp_tensor_fini (all left empty on failure). */
bool drv_params_tensors(ir_ctx *ctx, const ir_module *m, const drv_jit *j,
			bool is_f64, interp_tensor *params);

/* The inputs of batch b as tensors borrowing its data (g->n_inputs). */
void drv_batch_tensors(const drv_grad *g, const drv_batch *b, interp_tensor *in);

/* --train: loads the data, compiles the module, trains it as tc says
 * (printing a line per epoch, writing --metrics), then saves (--save),
 * reports the test MSE of regression models, draws the pictures asked
 * for, and translates with a seq2seq model (drv_translate). */
bool drv_train(ir_ctx *ctx, ir_module *m, const drv_options *o,
	       const drv_train_config *tc);

/* --gradcheck: compares the compiled gradient (float32) on the first
 * batch (or the loss's example) with the same gradient function under
 * the interpreter in float64, and that with float64 central differences
 * of the loss at points away from kinks, along a random direction and at
 * a few coordinates of every parameter; prints a line per parameter and
 * the verdict. False (exit status 1) if either error reaches its
 * threshold (docs/training.md). The symbols the JIT bound become m's
 * fallbacks, for the interpreter. */
bool drv_gradcheck(ir_ctx *ctx, ir_module *m, const drv_options *o,
		   const drv_train_config *tc);

/* ---- translation data (nmt.c) ------------------------------------------------------------ */

/* Whether a `data` setting names the translation pairs: nmt(...). */
bool drv_nmt_is_source(const ir_setting *data);

/* Checks the arguments of data = nmt(examples = N, steps = T): examples
 * an integer >= 0 (0: every line), steps a positive integer (d2l's 600
 * and 10 when left out); reports a bad or unknown one at its line. */
bool drv_nmt_check(ir_ctx *ctx, const ir_setting *data);

/* Loads the pairs the setting says with rt_nmt (--data FILE, else the
 * built-in corpus; --examples N over the setting's examples) and prints
 * what was read: pairs and lines, skipped and handled lines by kind, the
 * vocabularies. *out is the caller's to free with rt_nmt_free. False
 * after reporting (a missing or empty file, no usable pair). */
bool drv_nmt_load(ir_ctx *ctx, const ir_setting *data, const drv_options *o,
		  rt_nmt_data **out);

/* Copies o into *out with the model's V_src and V_tgt bound to the sizes
 * of d's vocabularies (over any --sym) and, if batch > 0, B to batch.
 * Reports a model without V_src or V_tgt. */
bool drv_nmt_bind(ir_ctx *ctx, const ir_module *m, const drv_options *o,
		  const rt_nmt_data *d, int64_t batch, drv_options *out);
/* drv_nmt_bind with the sizes of the vocabularies vocab (source,
 * target), d's or a checkpoint's. */
bool drv_nmt_bind_vocabs(ir_ctx *ctx, const ir_module *m, const drv_options *o,
			 const attnrt_vocab *const vocab[2], int64_t batch,
			 drv_options *out);

/* The batch source over d for the compiled gradient function g: each
 * epoch the rows in an order drawn from (seed, epoch), batches of
 * `batch` rows (0: g's B), the last one filled up with rows of valid
 * length 0, as are the rows past `batch` of g's shards (g->n_shards of
 * B rows); a batch counts its valid target tokens (n_items and
 * loss_divisor). g's inputs are found by name (src, src_valid, tgt_in,
 * tgt, tgt_valid) and must be i32 (B, T), or (B) for the valid lengths,
 * with T the data's steps; anything else is reported at data's line. */
bool drv_nmt_source_open(ir_ctx *ctx, const ir_setting *data,
			 const rt_nmt_data *d, uint64_t seed, size_t batch,
			 const drv_grad *g, drv_batch_source *src);

/* ---- data parallelism over MPI (dist.c) ------------------------------------------ */

typedef struct drv_dist {
	bool is_mpi; /* MPI started: a launcher made this a rank */
	int rank, n_ranks;
	FILE *diag; /* stderr prefixed "rank R: ", or NULL */
} drv_dist;

/* Starts MPI when a launcher (mpirun, srun) started this process, else
 * leaves d as one rank of one. Rank 0 keeps stdout; the others' goes to
 * /dev/null. False (after saying why) if MPI would not start. */
bool drv_dist_init(drv_dist *d, int *argc, char ***argv);
/* Ends MPI: with status != 0 the whole job (MPI_Abort), so that no rank
 * waits for this one, unless every rank knows it fails. */
void drv_dist_fini(drv_dist *d, int status);
/* Every rank has learnt in one collective that the job fails, and each
 * has said its error: drv_dist_fini ends MPI normally on every rank. */
void drv_dist_fail_together(void);
/* Puts the rank into o; on ranks past 0 drops the outputs rank 0 alone
 * writes (--metrics, --save, --plot, --heatmap, --outputs). */
void drv_dist_rank_options(const drv_dist *d, drv_options *o);
/* buf holds o->n_ranks slices of bytes_per_rank, each rank's own filled:
 * gathers every slice to every rank (in place). */
bool drv_dist_allgather(int n_ranks, void *buf, size_t bytes_per_rank);

/* ---- a training run's state: --save, --save-every, --resume (resume.c) ------ */

/* What a run's next steps depend on, beside its options and data. */
typedef struct drv_train_state {
	uint64_t epoch;       /* epochs done */
	uint64_t step;        /* steps done (dropout's counter) */
	uint64_t optim_steps; /* the optimizer's step count */
	uint64_t seed;
	uint64_t n_batches; /* an epoch's, which a resumed run must have */
	/* The batch's rows and shards, which a resumed run must have too
	 * (they decide the batches' samples and the dropout masks); 0 where
	 * a checkpoint written before they were recorded has none. */
	int64_t batch, shards;
	/* The optimizer's settings and the clip: a resumed run may change
	 * them (a lower learning rate, say), with a warning; has_settings
	 * is false where an older checkpoint records none. */
	attnrt_optim_config optim;
	double clip;
	bool has_settings;
	/* A hash of the training data's samples (or pairs), which a resumed
	 * run must have too; 0 where a checkpoint has none. */
	uint64_t data_hash;
	const double *losses, *valid; /* per epoch done; valid may be NULL */
	const attnrt_param_info *table;
	size_t n_params;
	const char *params, *m, *v;        /* blocks; m and v NULL for SGD */
	const char *vocab;                 /* a text's characters, or NULL */
	const char *src_vocab, *tgt_vocab; /* nmt(...)'s tokens, or NULL */
} drv_train_state;

/* Writes st as a checkpoint at path (atomically): the parameters under
 * their names (loadable as any checkpoint), Adam's moments as
 * "optim:m:NAME" and "optim:v:NAME", the rest as metadata (the
 * vocabularies under "vocab", or ATTNRT_META_SRC_VOCAB and
 * ATTNRT_META_TGT_VOCAB). */
bool drv_state_save(ir_ctx *ctx, const ir_module *m, const char *path,
		    const drv_train_state *st);
/* A checkpoint read for --resume, its state's numbers in state. */
typedef struct drv_resume {
	attnrt_st_file *file;
	drv_train_state state;
	bool is_adam;
} drv_resume;

/* Reads the checkpoint at path and its state's numbers; false after
 * reporting a file that holds no state. drv_resume_close frees r. */
bool drv_state_read(ir_ctx *ctx, const char *path, drv_resume *r);
/* Warns, naming each, of the optimizer settings and clip of now that are
 * not those the run in r (read from path) was trained with: the epochs
 * after are then not the uninterrupted run's. */
void drv_state_warn_settings(ir_ctx *ctx, const drv_resume *r, const char *path,
			     const drv_train_state *now);

/* The losses per epoch of the run that wrote the checkpoint at path
 * (--train --save), malloc'd into *losses (the caller frees), their
 * number in *n_epochs. False, reporting as --plot, for a file that
 * cannot be read or records no run. */
bool drv_state_losses(ir_ctx *ctx, const char *path, double **losses,
		      uint32_t *n_epochs);
/* Puts r's parameters into j's params block, its moments and step count
 * into opt, its losses per epoch done into losses (and valid, if not
 * NULL); checks that opt is of the saved kind. */
bool drv_state_restore(ir_ctx *ctx, const drv_resume *r, const char *path,
		       const drv_jit *j, attnrt_optim *opt, double *losses,
		       double *valid);

/* Whether this run's data (now's n_batches and vocabularies) is the data
 * the checkpoint's run was trained on: the same batches an epoch and the
 * same vocabularies, so that ids name the same characters or tokens; false
 * after reporting. */
bool drv_state_same_data(ir_ctx *ctx, const drv_resume *r, const char *path,
			 const drv_train_state *now);
void drv_resume_close(drv_resume *r);

/* Opens --metrics for appending after a resume from epochs_done: the
 * file keeps its lines of epochs 1..epochs_done only (rewritten through
 * a temporary file), so that it reads as the uninterrupted run's. */
FILE *drv_metrics_resume(ir_ctx *ctx, const char *path, uint64_t epochs_done);

/* ---- generating text (generate.c) ------------------------------------------------ */

/* Before anything runs: --generate needs a model exporting decode_step,
 * trained on data = text(...), and --train or --load. */
bool drv_generate_check(ir_ctx *ctx, const ir_module *m, const drv_options *o);

/* --generate: continues the prompt with decode_step compiled at B = 1,
 * sampling as --temperature and --top-k say from --seed, printing the
 * text as it comes. The weights are trained's (or --load's when NULL),
 * the vocabulary vocab (or the --load checkpoint's metadata when NULL).
 * Writes a JSON line of its speed to metrics (may be NULL). False after
 * reporting. */
bool drv_generate(ir_ctx *ctx, const ir_module *m, const drv_options *o,
		  const rt_text_vocab *vocab, const drv_jit *trained,
		  FILE *metrics);

/* --generate with --load and no --train: opens --metrics, then
 * drv_generate with the checkpoint's weights and vocabulary. */
bool drv_generate_loaded(ir_ctx *ctx, const ir_module *m, const drv_options *o);

/* ---- translation (translate.c, heatmap.c) ------------------------------------------------ */

/* Whether m is a seq2seq model: it exports `encode` and `decode_step`. */
bool drv_is_seq2seq(const ir_module *m);

/* Before anything runs: --translate needs a seq2seq model whose train
 * block says data = nmt(...) (for the vocabularies), and the weights of
 * --train or --load. Reports and returns false if not. */
bool drv_translate_check(ir_ctx *ctx, const ir_module *m, const drv_options *o);

/* Translates the sentences of --translate (with trained and none given:
 * the book's four test sentences) by greedy decoding, d2l's
 * predict_seq2seq: `encode` and `decode_step` compiled again with B the
 * number of sentences, every sentence encoded once, then one
 * decode_step a token from <bos>, with the carried state, up to T steps
 * or <eos>. The weights are trained's params block, or (trained NULL)
 * --load's. Prints "SENTENCE => TRANSLATION, bleu 1.000" a line (BLEU
 * with k = 2 against the reference the data has for the sentence, if
 * any), writes {"src", "pred", "ref", "bleu"} lines to metrics (may be
 * NULL), and with --heatmap draws the attention of the last sentence.
 * False after reporting. */
bool drv_translate(ir_ctx *ctx, const ir_module *m, const drv_options *o,
		   const rt_nmt_data *d, const drv_jit *trained, FILE *metrics);

/* --translate with --load and no --train: loads the data of the train
 * block, opens --metrics, then drv_translate. */
bool drv_translate_loaded(ir_ctx *ctx, const ir_module *m, const drv_options *o);

/* The attention weights of one translated sentence, as the book draws
 * them: up to 4 figures (the encoder's self-attention, then the per-step
 * ones of decode_step), each (layers, heads, queries, keys). */
#define DRV_MAX_FIGS 4
typedef struct drv_attention {
	uint32_t n_figs;
	struct drv_attention_fig {
		const char *name; /* "Encoder self-attention", ... */
		int layers, heads, queries, keys;
		float *w; /* (layers, heads, queries, keys), through ctx */
	} figs[DRV_MAX_FIGS];
	const char *src, *pred; /* the sentence and its translation */
} drv_attention;

/* Draws every figure of a as one SVG at path: a row of heads per figure
 * and layer. Says what it wrote on stdout; false after reporting. */
bool drv_attention_draw(ir_ctx *ctx, const ir_module *m, const drv_attention *a,
			const char *path);
void drv_attention_fini(ir_ctx *ctx, drv_attention *a);

#endif
