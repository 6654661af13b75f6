/*
 * attnrt.h - the ABI between code that attnc generates and the programs
 * (and the attnc driver) that call it. Small and stable: plain C types,
 * no compiler headers.
 *
 * A compiled model is a set of entry points (one per exported function of
 * the .g file), all sharing one block of parameters. Every shape is fixed
 * when the model is compiled (symbols such as the batch size B are bound
 * then; a smaller batch is run by padding it, see docs/codegen.md). The
 * caller owns all memory, as in Glow's bundles:
 *
 *   params   one block for every parameter of the model, laid out as the
 *            generated header's table says (attnrt_param_info), 64-byte
 *            aligned, each parameter at a 64-byte aligned offset;
 *   scratch  per entry point, the activations and temporaries it needs
 *            (size in the header), 64-byte aligned; its contents are
 *            garbage between calls;
 *   inputs   one pointer per argument of the exported function, row-major
 *            f32 or i32 of the shapes in the header;
 *   outputs  one pointer per returned value, written by the call (as
 *            the values are computed: not overlapping each other, an
 *            input or params, which the call checks; unspecified after
 *            a failing call);
 *   run      seed, step, training mode and thread count of the call.
 *
 * An entry point returns 0, or ATTNRT_ERR_INDEX | (node << 8) naming the
 * op that failed (an index out of range in an embedding or a loss), or
 * ATTNRT_ERR_OVERLAP | (o << 8) when output o overlaps an input, params
 * or another output (checked before anything is computed).
 */
#ifndef ATTNRT_H
#define ATTNRT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ATTNRT_ABI_VERSION 1
#define ATTNRT_ALIGN 64

enum {
	ATTNRT_OK = 0,
	ATTNRT_ERR_INDEX = 1, /* an id or label outside its range */
	/* An entry point's output o (rc >> 8) shares memory with an input,
	 * params or another output; the call computed nothing. */
	ATTNRT_ERR_OVERLAP = 7,
	/* Errors of the library functions below (never of an entry point). */
	ATTNRT_ERR_NOMEM = 2,    /* the allocation hook returned NULL */
	ATTNRT_ERR_IO = 3,       /* a file could not be read or written */
	ATTNRT_ERR_FORMAT = 4,   /* a file (checkpoint, corpus) is malformed */
	ATTNRT_ERR_MISMATCH = 5, /* a checkpoint does not fit the model */
	ATTNRT_ERR_ARG = 6,      /* the caller passed an invalid table */
};

/* How one call runs. Dropout is active only when is_training; its random
 * numbers are a function of (seed, step, op, element) only (the same
 * convention as the reference interpreter, docs/ops.md), so results do
 * not depend on n_threads. */
typedef struct attnrt_run {
	uint64_t seed;
	uint64_t step;
	int32_t is_training;
	int32_t n_threads; /* threads of parallel loops; 0 = OpenMP default */
} attnrt_run;

/* Every generated entry point has this type. */
typedef int (*attnrt_entry_fn)(const attnrt_run *run, void *params,
			       void *scratch, const void *const *inputs,
			       void *const *outputs);

typedef enum attnrt_dtype { ATTNRT_F32 = 0, ATTNRT_I32 = 1 } attnrt_dtype;

/* A parameter's place in the params block, and how it is initialized. */
typedef enum attnrt_init {
	ATTNRT_INIT_ZEROS,
	ATTNRT_INIT_ONES,
	ATTNRT_INIT_NORMAL,         /* a = mean, b = std */
	ATTNRT_INIT_UNIFORM,        /* a = low, b = high */
	ATTNRT_INIT_XAVIER_UNIFORM, /* a = gain */
} attnrt_init;

typedef struct attnrt_param_info {
	const char *name; /* dotted path: encoder.0.attention.W_q */
	size_t offset;    /* bytes from the start of the params block */
	int rank;
	int64_t dims[6];
	attnrt_init init;
	double a, b;
} attnrt_param_info;

/* Describes one argument or result of an entry point. */
typedef struct attnrt_tensor_info {
	const char *name;
	attnrt_dtype dtype;
	int rank;
	int64_t dims[6];
} attnrt_tensor_info;

/* ---- the library: libattnrt (-lattnrt) -------------------------------- */

/* The allocation hook every function of libattnrt allocates through, with
 * realloc semantics: ptr NULL allocates, size 0 frees (and returns NULL),
 * else resizes. A NULL attnrt_allocator pointer means the C library's
 * realloc and free. Tests pass one that fails on purpose. */
typedef void *(*attnrt_alloc_fn)(void *ud, void *ptr, size_t size);
typedef struct attnrt_allocator {
	attnrt_alloc_fn fn;
	void *ud;
} attnrt_allocator;

/* Allocates size bytes, zeroed, ATTNRT_ALIGN-aligned (for the params and
 * scratch blocks) through al (NULL: the C library). Returns NULL when the
 * hook fails or size is absurd. Free with attnrt_free and the same al. */
void *attnrt_alloc(const attnrt_allocator *al, size_t size);
/* Frees a block of attnrt_alloc; NULL is a no-op. */
void attnrt_free(const attnrt_allocator *al, void *block);

/* Bytes of the params block the table describes: the end of its last
 * parameter (f32, row-major at its offset), rounded up to ATTNRT_ALIGN.
 * The generated header's NAME_PARAMS_SIZE is this value. */
size_t attnrt_params_size(const attnrt_param_info *table, size_t n_params);

/* Fills every parameter of the table in the params block by its
 * initializer, from (seed, index of the parameter in the table): the same
 * numbers as the reference interpreter's interp_params_init for the same
 * seed, bit for bit (docs/runtime.md gives the formulas). Returns
 * ATTNRT_OK, or ATTNRT_ERR_ARG (params untouched) if an entry is invalid
 * (no name, rank outside 0..6, a negative dim, an offset that is not a
 * multiple of 4, an unknown initializer). */
int attnrt_params_init(const attnrt_param_info *table, size_t n_params,
		       void *params, uint64_t seed);

/* One string entry of a checkpoint's "__metadata__". */
typedef struct attnrt_meta {
	const char *key;
	const char *value;
} attnrt_meta;

/* Writes the params block as a safetensors file at path: one F32 tensor
 * per table entry, named by it, in table order, with meta (n_meta pairs,
 * may be 0) as "__metadata__". The write is atomic: the data goes to a
 * temporary file in path's directory, is fsync'ed and renamed over path,
 * so a failure at any point leaves an existing file at path as it was.
 * Returns ATTNRT_OK, or an ATTNRT_ERR_* code with a message in err (at
 * most err_size bytes, NUL-terminated; err may be NULL). Never prints. */
int attnrt_checkpoint_save(const attnrt_allocator *al, const char *path,
			   const attnrt_param_info *table, size_t n_params,
			   const void *params, const attnrt_meta *meta,
			   size_t n_meta, char *err, size_t err_size);

/* Tensors whose names begin so are not parameters but the state of a
 * training run (attnc --train --save: "optim:m:NAME", Adam's moments), which
 * no parameter's name can be: loading skips them. */
#define ATTNRT_STATE_PREFIX "optim:"

/* Reads a safetensors file written by attnrt_checkpoint_save, by PyTorch's
 * safetensors package or by any other writer, into the params block: the
 * file must hold exactly the table's parameters (and, skipped, any
 * tensors named ATTNRT_STATE_PREFIX...), each F32 with the table's
 * shape. Everything is checked before a byte of params changes
 * (params is untouched on failure): the file's size, the header length,
 * the header's JSON, every tensor's dtype, shape and data_offsets (in
 * range, not overlapping, covering the data exactly), names unknown to
 * the model or missing from the file, a value that is NaN or infinite
 * (a trained parameter never is: the file is corrupt). A failure returns
 * ATTNRT_ERR_IO,
 * _FORMAT, _MISMATCH or _NOMEM with a message in err that names the
 * tensor and what differs, e.g.
 *   encoder.0.attention.W_q: shape [32, 16] in file, model wants [32, 32]
 */
int attnrt_checkpoint_load(const attnrt_allocator *al, const char *path,
			   const attnrt_param_info *table, size_t n_params,
			   void *params, char *err, size_t err_size);

typedef struct attnrt_st_file attnrt_st_file; /* below */

/* As attnrt_checkpoint_load, from a file already read (attnrt_st_read):
 * the tensors whose names begin with skip (may be NULL) are not the
 * model's and are left alone (a training run's optimizer state,
 * "optim:..."), every other one must be a parameter of the table. */
int attnrt_checkpoint_take(const attnrt_allocator *al, const attnrt_st_file *f,
			   const char *skip, const attnrt_param_info *table,
			   size_t n_params, void *params, char *err,
			   size_t err_size);

/* As attnrt_checkpoint_load, from the len bytes of a file at data. */
int attnrt_checkpoint_parse(const attnrt_allocator *al, const void *data,
			    size_t len, const attnrt_param_info *table,
			    size_t n_params, void *params, char *err,
			    size_t err_size);

/* ---- safetensors files of any tensors (rt_st_read.c, rt_st_write.c) ----
 *
 * The container of checkpoints, and of the data a program trains on or
 * runs with (docs/data.md): named tensors of any safetensors dtype ("F32",
 * "I32", "I64", "F64", "BOOL", ...), each its little-endian bytes, plus
 * string metadata. Reading checks everything a checkpoint load checks of
 * the container (its size, the header's JSON, every entry's dtype, shape
 * and offsets, the offsets tiling the data, each name once) and keeps
 * the tensors sorted by name. */

#define ATTNRT_ST_MAX_RANK 8
#define ATTNRT_ST_MAX_HEADER 100000000u /* as the safetensors package */

typedef struct attnrt_st_tensor {
	const char *name;
	const char *dtype; /* the safetensors name: "F32", "I64", ... */
	int rank;
	int64_t dims[ATTNRT_ST_MAX_RANK];
	const void *data; /* bytes long, little-endian, not aligned */
	size_t bytes;
} attnrt_st_tensor;

typedef struct attnrt_st_file attnrt_st_file;

/* Parses a safetensors file held in data (len bytes, borrowed: it must
 * outlive *out). Returns ATTNRT_OK and *out (free with attnrt_st_free),
 * or ATTNRT_ERR_FORMAT / _NOMEM with a message in err and *out NULL. */
int attnrt_st_parse(const attnrt_allocator *al, const void *data, size_t len,
		    attnrt_st_file **out, char *err, size_t err_size);
/* Reads the regular file at path (at most max_bytes long, else
 * ATTNRT_ERR_FORMAT) and parses it; *out owns the bytes. Messages start
 * with path. */
int attnrt_st_read(const attnrt_allocator *al, const char *path,
		   uint64_t max_bytes, attnrt_st_file **out, char *err,
		   size_t err_size);
/* As attnrt_st_parse, for NumPy's formats: an .npy (one array; a file
 * of one tensor named "") or an .npz of stored NAME.npy members (np.savez;
 * the tensors NAME). The .npy dtypes <f4 <f8 <i4 <i8 <i2 |i1 |u1 |b1 are
 * F32 F64 I32 I64 I16 I8 U8 BOOL; Fortran order, deflated members
 * (np.savez_compressed), zip64, encrypted or multi-disk zips and a CRC-32
 * mismatch are ATTNRT_ERR_FORMAT. No metadata. */
int attnrt_np_parse(const attnrt_allocator *al, const void *data, size_t len,
		    attnrt_st_file **out, char *err, size_t err_size);
/* As attnrt_st_read, for a file in any of the three formats, chosen by its
 * first bytes: .npy magic, a zip's "PK", else safetensors. */
int attnrt_tensors_read(const attnrt_allocator *al, const char *path,
			uint64_t max_bytes, attnrt_st_file **out, char *err,
			size_t err_size);
/* The tensors, sorted by name (byte order): i < attnrt_st_count. */
size_t attnrt_st_count(const attnrt_st_file *f);
const attnrt_st_tensor *attnrt_st_at(const attnrt_st_file *f, size_t i);
/* The tensor named name, or NULL. */
const attnrt_st_tensor *attnrt_st_find(const attnrt_st_file *f,
				       const char *name);
/* The metadata value of key, or NULL. */
const char *attnrt_st_meta(const attnrt_st_file *f, const char *key);
/* NULL is a no-op. */
void attnrt_st_free(attnrt_st_file *f);

/* Writes n tensors (in that order; names unique UTF-8, not
 * "__metadata__"; dtype a known name whose element size times the dims'
 * product is bytes) and meta (n_meta pairs, may be 0) as a safetensors
 * file at path, atomically as attnrt_checkpoint_save does. Returns
 * ATTNRT_OK or an ATTNRT_ERR_* code with a message in err. */
int attnrt_st_write(const attnrt_allocator *al, const char *path,
		    const attnrt_st_tensor *tensors, size_t n,
		    const attnrt_meta *meta, size_t n_meta, char *err,
		    size_t err_size);

/* ---- translation vocabularies (rt_vocab.c) --------------------------------
 *
 * What a program needs to translate with a model trained on `data =
 * nmt(...)` (docs/runtime.md): the source and target vocabularies, which
 * attnc's --save puts into the checkpoint's metadata, the book's
 * preprocessing of a sentence into the encoder's ids, and the decoder's
 * ids back into text. A vocabulary is d2l's Vocab: ids 0-3 are the
 * reserved tokens below, then the corpus's tokens seen at least twice.
 * In the metadata it is one string, its tokens in id order joined by
 * single spaces ("<unk> <pad> <bos> <eos> . i ..."; no token holds a
 * space, tab or line end; "" is a token where the corpus has a double
 * space, so the string then has two spaces in a row). */

#define ATTNRT_VOCAB_UNK 0
#define ATTNRT_VOCAB_PAD 1
#define ATTNRT_VOCAB_BOS 2
#define ATTNRT_VOCAB_EOS 3
/* The metadata keys of a checkpoint's source and target vocabularies. */
#define ATTNRT_META_SRC_VOCAB "src_vocab"
#define ATTNRT_META_TGT_VOCAB "tgt_vocab"

typedef struct attnrt_vocab attnrt_vocab;

/* The vocabulary whose tokens, in id order, are the words of s joined by
 * single spaces (as attnrt_vocab_string gives it). s must be UTF-8
 * without tabs or line ends, start with <unk> <pad> <bos> <eos>, and
 * hold each token once; else ATTNRT_ERR_FORMAT with a message naming
 * what is wrong and where. Allocates through al (NULL: the C library),
 * which must outlive the vocabulary. Returns ATTNRT_OK and *out (free
 * with attnrt_vocab_free), or an error with *out NULL. */
int attnrt_vocab_parse(const attnrt_allocator *al, const char *s,
		       attnrt_vocab **out, char *err, size_t err_size);
/* attnrt_vocab_parse of the metadata value of key (ATTNRT_META_SRC_VOCAB
 * or ATTNRT_META_TGT_VOCAB) of a file already read (attnrt_st_read): a
 * file without it is ATTNRT_ERR_FORMAT ("src_vocab: not in the
 * metadata"). Messages start with key. */
int attnrt_vocab_take(const attnrt_allocator *al, const attnrt_st_file *f,
		      const char *key, attnrt_vocab **out, char *err,
		      size_t err_size);
/* attnrt_vocab_take from the checkpoint at path (read whole, then
 * freed; ATTNRT_ERR_IO if it cannot be read). Messages start with path.
 * A program that also loads the weights reads the file once with
 * attnrt_st_read and calls attnrt_checkpoint_take and attnrt_vocab_take
 * on it. */
int attnrt_vocab_load(const attnrt_allocator *al, const char *path,
		      const char *key, attnrt_vocab **out, char *err,
		      size_t err_size);
/* NULL is a no-op. */
void attnrt_vocab_free(attnrt_vocab *v);

/* The number of tokens (the model's V_src or V_tgt). */
int32_t attnrt_vocab_size(const attnrt_vocab *v);
/* The token of id (NUL-terminated, owned by v), or NULL when id is out
 * of range. */
const char *attnrt_vocab_token(const attnrt_vocab *v, int32_t id);
/* The id of the len bytes at token, or ATTNRT_VOCAB_UNK when it is not
 * in the vocabulary. */
int32_t attnrt_vocab_lookup(const attnrt_vocab *v, const char *token,
			    size_t len);
/* The tokens in id order joined by single spaces (owned by v): what
 * attnrt_vocab_parse reads. */
const char *attnrt_vocab_string(const attnrt_vocab *v);

/* The encoder's input for a raw sentence, as d2l's predict_seq2seq makes
 * it: preprocessed (U+202F and U+00A0 become spaces, lowercase, a space
 * before , . ! ? that follow a character other than a space), split on
 * single spaces, each token's id (<unk> if unknown), then <eos>,
 * truncated or padded with <pad> to steps (the model's T). Writes steps
 * ids to ids and the number that are not <pad> to *valid (the
 * encoder's src_valid); *n_unknown (may be NULL) gets the number of
 * tokens that became <unk>. Returns ATTNRT_OK, ATTNRT_ERR_ARG (steps <
 * 1, or a sentence that is not UTF-8; ids untouched) or
 * ATTNRT_ERR_NOMEM, with a message in err. */
int attnrt_vocab_encode(const attnrt_vocab *v, const char *sentence,
			int32_t steps, int32_t *ids, int32_t *valid,
			size_t *n_unknown, char *err, size_t err_size);
/* The text of n ids (the decoder's argmaxes): their tokens up to the
 * first <eos> (excluded) joined by single spaces, as d2l's
 * ' '.join(tgt_vocab.to_tokens(output_seq)); an id out of range reads as
 * <unk>. Writes at most cap bytes to out (NUL-terminated when cap > 0)
 * and returns the full length, as snprintf. Allocates nothing. */
size_t attnrt_vocab_decode(const attnrt_vocab *v, const int32_t *ids, size_t n,
			   char *out, size_t cap);

/* The name of an ATTNRT_* code ("ok", "out of memory", ...). */
const char *attnrt_strerror(int code);

/* ---- training: optimizers and gradient clipping (rt_optim.c) ------------
 *
 * A gradient block has the layout of the params block (same table, same
 * offsets): the gradient of parameter i lives at table[i].offset. The
 * optimizer keeps its state (Adam's moments m and v) in blocks of the
 * same layout, allocated when it is created. Only the elements of the
 * table's parameters are read or written, never the padding between. */

typedef enum attnrt_optim_kind {
	ATTNRT_OPTIM_SGD = 0,  /* p -= lr * g */
	ATTNRT_OPTIM_ADAM = 1, /* PyTorch's Adam, with bias correction */
} attnrt_optim_kind;

typedef struct attnrt_optim_config {
	attnrt_optim_kind kind;
	double lr;                /* learning rate, finite and >= 0 */
	double beta1, beta2, eps; /* Adam only; betas in [0, 1), eps >= 0 */
} attnrt_optim_config;

typedef struct attnrt_optim attnrt_optim;

/* The configuration PyTorch gives kind with learning rate lr: Adam's
 * betas (0.9, 0.999) and eps 1e-8. */
attnrt_optim_config attnrt_optim_defaults(attnrt_optim_kind kind, double lr);

/* Creates an optimizer for the parameters of table (n_params entries,
 * borrowed: it must outlive the optimizer) as cfg says, with its state
 * zeroed (step count 0), allocated through al (NULL: the C library).
 * Returns ATTNRT_OK and *out, or ATTNRT_ERR_ARG (an invalid table or
 * setting, named in err) or ATTNRT_ERR_NOMEM with *out NULL. */
int attnrt_optim_create(const attnrt_allocator *al,
			const attnrt_optim_config *cfg,
			const attnrt_param_info *table, size_t n_params,
			attnrt_optim **out, char *err, size_t err_size);

/* Frees the optimizer and its state; NULL is a no-op. */
void attnrt_optim_destroy(attnrt_optim *opt);

/* One step: updates every parameter in params from grads (a gradient
 * block, only read) and advances the step count. SGD: p -= lr * g. Adam
 * at step t (from 1), as torch.optim.Adam:
 *   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
 *   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
 * in float32 like PyTorch's (the step size and the bias correction are
 * computed in double, then rounded). */
void attnrt_optim_step(attnrt_optim *opt, void *params, const void *grads);

/* attnrt_optim_step with every gradient multiplied by grad_scale first,
 * inside the same pass: clipping by a global norm (grad_scale = theta /
 * norm) without writing the gradient block again. */
void attnrt_optim_step_scaled(attnrt_optim *opt, void *params,
			      const void *grads, double grad_scale);

/* attnrt_optim_step_scaled in parts that threads may run at once:
 * attnrt_optim_begin_step advances the step count, then each
 * attnrt_optim_update_part updates part `part` of n_parts: the
 * parameters' elements, in table order, cut into n_parts ranges of equal
 * size (but for rounding). Once every part of a step has run, params
 * holds the bits attnrt_optim_step_scaled gives (the update is
 * elementwise). Parts read only opt, so they may run concurrently. */
void attnrt_optim_begin_step(attnrt_optim *opt);
void attnrt_optim_update_part(const attnrt_optim *opt, void *params,
			      const void *grads, double grad_scale, size_t part,
			      size_t n_parts);

/* attnrt_optim_update_part that also returns the sum of squares of the
 * parameters its part wrote, in double: the value, to the bit, of
 * attnrt_grad_sum_part(table, n_params, params, NULL, 0, part, n_parts)
 * after the update, but in the update's pass (NaN or infinite when the
 * step made an element so). */
double attnrt_optim_update_part_sq(const attnrt_optim *opt, void *params,
				   const void *grads, double grad_scale,
				   size_t part, size_t n_parts);

/* Steps taken so far. */
uint64_t attnrt_optim_steps(const attnrt_optim *opt);

/* What saving and resuming a training run needs: the step count, and
 * Adam's moment blocks (which 0: m, 1: v; laid out as the params block;
 * NULL for SGD, or for another which), which a caller may read and
 * overwrite between steps. */
void attnrt_optim_set_steps(attnrt_optim *opt, uint64_t t);
void *attnrt_optim_moments(attnrt_optim *opt, int which);

/* Changes the learning rate of the following steps (lr finite, >= 0). */
void attnrt_optim_set_lr(attnrt_optim *opt, double lr);

/* The global norm of a gradient block: the square root of the sum of
 * squares of every element of every parameter, summed in double. It is
 * NaN or infinite when some element is, so one call both measures the
 * gradient and checks that it is finite. */
double attnrt_grad_norm(const attnrt_param_info *table, size_t n_params,
			const void *grads);

/* Part `part` of n_parts of a block laid out by table (gradients or
 * parameters), cut as attnrt_optim_update_part cuts its parts: adds the
 * blocks more[0 .. n_more) into block there, in that order, and returns
 * the sum of squares of block's part in double, as attnrt_grad_norm adds
 * a parameter's (NaN or infinite when an element is). The parts of one
 * block may run on different threads at once; adding their sums in part
 * order gives a norm that does not depend on the threads. */
double attnrt_grad_sum_part(const attnrt_param_info *table, size_t n_params,
			    void *block, const void *const *more, size_t n_more,
			    size_t part, size_t n_parts);

/* d2l's grad_clipping: if the global norm exceeds theta (> 0), scales
 * every gradient by theta / norm. Returns the norm before clipping (NaN
 * or infinite gradients are left as they are). */
double attnrt_grad_clip(const attnrt_param_info *table, size_t n_params,
			void *grads, double theta);

/* ---- choosing the thread count by timing ------------------------------------ */

/* A parallel region waits at its end for every thread of the team; when
 * another process holds one of the cores, the descheduled thread makes
 * every region wait for a scheduler tick, and a training step of a few
 * hundred small regions goes 10-100x slower than on one thread. The
 * tuner picks, for a function called over and over (a training step),
 * the thread count that is fastest now: it times calls at 1 and at
 * max_threads (three each, alternating, 1 first; the median decides, and a count
 * whose first call is 4x slower than the other's best is dropped at
 * once), runs the winner, and probes again after `interval` calls, and at
 * once when the winner is a team and two calls in a row stall (take 4x
 * its median, or 1.25x the median of one thread's calls). When the
 * probe keeps the same winner the interval doubles (up to 64x), so a
 * quiet or a busy machine pays the probing cost rarely. A team call the
 * caller skipped (a busy core, below) ends the probe at 1 thread without
 * counting as a loss, and a team that won the probe before loses this
 * one: then the next probe comes after interval / 16 calls, doubling
 * with each such probe in a row up to the interval, so the team is back
 * soon after the load that beat it passes. Results do not
 * depend on n_threads (attnrt_run), so switching is invisible but for
 * speed. The fields are private; the struct is public so it can live on
 * the stack. */
typedef struct attnrt_tuner {
	int32_t max_threads; /* the other candidate besides 1 */
	int32_t current;     /* the count attnrt_tuner_next returns */
	int32_t phase;       /* 0 probing, 1 settled */
	int32_t n_samples[2];
	double samples[2][3]; /* probe times of max_threads and of 1 */
	double median;        /* the winner's median probe time */
	double one_median;    /* 1 thread's median probe time, 0 none */
	uint64_t calls;       /* since the last probe */
	uint64_t interval, base_interval;
	uint64_t retry;    /* calls to the next probe while retrying the team
			 * (else interval), 0 none */
	int32_t n_slow;    /* consecutive stalled calls */
	int32_t winner;    /* the last probe's (index 0 or 1), -1 none */
	uint64_t n_probes; /* probes finished, for reports */
} attnrt_tuner;

/* Starts a tuner choosing between max_threads (< 2: the tuner always
 * says max(max_threads, 1) and never probes) and 1, probing again every
 * interval calls (0: 200). */
void attnrt_tuner_init(attnrt_tuner *t, int32_t max_threads, uint64_t interval);
/* The thread count for the next call (attnrt_run.n_threads). */
int32_t attnrt_tuner_next(const attnrt_tuner *t);
/* Records how long the call run with attnrt_tuner_next's count took. A
 * caller that judges a team call too slow to try without running it
 * (say, an empty parallel region took milliseconds) records INFINITY for
 * it, and the next count is 1. */
void attnrt_tuner_record(attnrt_tuner *t, double seconds);
/* Whether the next call is a probe (the caller may test the team first). */
int attnrt_tuner_is_probing(const attnrt_tuner *t);

#ifdef __cplusplus
}
#endif

#endif
