/*
 * test_runtime_ckpt.c - safetensors checkpoints: the exact bytes the
 * writer makes (checked against the byte vectors of the safetensors
 * package's own tests), round trips, every way a file can be wrong and
 * the message each gives, fuzzing the reader with truncations and byte
 * flips (under ASan in Debug builds), and the atomicity of writing: a
 * write that fails for lack of memory or of disk leaves the old file.
 */
#include "attnrt.h"
#include "rt_ckpt.h"
#include "testutil.h"

#include <check.h>
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];
static char path[128];

static void setup(void)
{
	strcpy(dir, "/tmp/attnrt-test-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/model.safetensors", dir);
}

/* Removes every file of dir, then dir. */
static void teardown(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char file[512];
	while (d && (e = readdir(d))) {
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(file, sizeof file, "%s/%s", dir, e->d_name);
			unlink(file);
		}
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

static int count_files(void)
{
	DIR *d = opendir(dir);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

/* The whole file at p, malloc'd; *len its size. */
static unsigned char *slurp(const char *p, size_t *len)
{
	FILE *f = fopen(p, "rb");
	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	*len = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	unsigned char *data = malloc(*len ? *len : 1);
	ck_assert_uint_eq(fread(data, 1, *len, f), *len);
	fclose(f);
	return data;
}

/* A small model: two matrices, a vector and a scalar. */
static const attnrt_param_info model[] = {
	{"encoder.W", 0, 2, {3, 4}, ATTNRT_INIT_XAVIER_UNIFORM, 1, 0},
	{"encoder.b", 64, 1, {4}, ATTNRT_INIT_ZEROS, 0, 0},
	{"decoder.W", 128, 2, {4, 2}, ATTNRT_INIT_NORMAL, 0, 1},
	{"scale", 192, 0, {0}, ATTNRT_INIT_ONES, 0, 0},
};
enum { N_MODEL = 4, MODEL_BYTES = 256 };

static float *model_params(uint64_t seed)
{
	float *p = attnrt_alloc(NULL, MODEL_BYTES);
	ck_assert_int_eq(attnrt_params_init(model, N_MODEL, p, seed), ATTNRT_OK);
	return p;
}

/* The bytes of the model's checkpoint with the parameters of seed (and
 * meta), saved at path. */
static unsigned char *saved_model(uint64_t seed, const attnrt_meta *meta,
				  size_t n_meta, size_t *len)
{
	float *p = model_params(seed);
	ck_assert_int_eq(attnrt_checkpoint_save(NULL, path, model, N_MODEL, p,
						meta, n_meta, NULL, 0),
			 ATTNRT_OK);
	attnrt_free(NULL, p);
	return slurp(path, len);
}

/* ---- what the writer makes ---------------------------------------------------- */

START_TEST(test_writer_matches_the_safetensors_reference_bytes)
{
	/* safetensors' test_serialization: "attn.0" F32 [1, 2, 3] = 0..5. */
	static const unsigned char want[] =
		{64,  0,   0,   0,  0,   0,  0,   0,   123, 34,  97,  116,
		 116, 110, 46,  48, 34,  58, 123, 34,  100, 116, 121, 112,
		 101, 34,  58,  34, 70,  51, 50,  34,  44,  34,  115, 104,
		 97,  112, 101, 34, 58,  91, 49,  44,  50,  44,  51,  93,
		 44,  34,  100, 97, 116, 97, 95,  111, 102, 102, 115, 101,
		 116, 115, 34,  58, 91,  48, 44,  50,  52,  93,  125, 125,
		 0,   0,   0,   0,  0,   0,  128, 63,  0,   0,   0,   64,
		 0,   0,   64,  64, 0,   0,  128, 64,  0,   0,   160, 64};
	attnrt_param_info t = {"attn.0",          0, 3, {1, 2, 3},
			       ATTNRT_INIT_ZEROS, 0, 0};
	float data[16] = {0, 1, 2, 3, 4, 5};
	char err[256];
	ck_assert_int_eq(attnrt_checkpoint_save(NULL, path, &t, 1, data, NULL,
						0, err, sizeof err),
			 ATTNRT_OK);
	size_t len;
	unsigned char *got = slurp(path, &len);
	ck_assert_uint_eq(len, sizeof want);
	ck_assert_mem_eq(got, want, sizeof want);
	free(got);
}
END_TEST

START_TEST(test_writer_pads_the_header_with_spaces_and_writes_metadata_first)
{
	/* safetensors' test_empty with {"framework": "pt"}. */
	static const unsigned char want[] = {40,  0,   0,   0,   0,   0,   0,
					     0,   123, 34,  95,  95,  109, 101,
					     116, 97,  100, 97,  116, 97,  95,
					     95,  34,  58,  123, 34,  102, 114,
					     97,  109, 101, 119, 111, 114, 107,
					     34,  58,  34,  112, 116, 34,  125,
					     125, 32,  32,  32,  32,  32};
	attnrt_meta meta = {"framework", "pt"};
	ck_assert_int_eq(attnrt_checkpoint_save(NULL, path, NULL, 0, NULL,
						&meta, 1, NULL, 0),
			 ATTNRT_OK);
	size_t len;
	unsigned char *got = slurp(path, &len);
	ck_assert_uint_eq(len, sizeof want);
	ck_assert_mem_eq(got, want, sizeof want);
	free(got);
	ck_assert_int_eq(attnrt_checkpoint_load(NULL, path, NULL, 0, NULL, NULL,
						0),
			 ATTNRT_OK);
}
END_TEST

START_TEST(test_writer_escapes_names_and_metadata_as_json)
{
	attnrt_param_info t = {"a\"b\\c\n\x01",   0, 1, {1},
			       ATTNRT_INIT_ZEROS, 0, 0};
	attnrt_meta meta = {"k\t", "caf\xc3\xa9"};
	float v[1] = {2};
	ck_assert_int_eq(attnrt_checkpoint_save(NULL, path, &t, 1, v, &meta, 1,
						NULL, 0),
			 ATTNRT_OK);
	size_t len;
	unsigned char *got = slurp(path, &len);
	const char *want = "{\"__metadata__\":{\"k\\t\":\"caf\xc3\xa9\"},"
			   "\"a\\\"b\\\\c\\n\\u0001\":{\"dtype\":\"F32\","
			   "\"shape\":[1],\"data_offsets\":[0,4]}}";
	ck_assert_uint_eq(got[0], (strlen(want) + 7) / 8 * 8);
	ck_assert_mem_eq(got + 8, want, strlen(want));
	free(got);
	float back[1] = {0};
	ck_assert_int_eq(attnrt_checkpoint_load(NULL, path, &t, 1, back, NULL, 0),
			 ATTNRT_OK);
	ck_assert_float_eq(back[0], 2);
}
END_TEST

START_TEST(test_round_trip_gives_the_same_values_and_the_same_bytes)
{
	float *p = model_params(42), *q = attnrt_alloc(NULL, MODEL_BYTES);
	attnrt_meta meta[] = {{"format", "pt"}, {"producer", "attnc"}};
	char err[256] = "";
	char path2[160];
	snprintf(path2, sizeof path2, "%s/again.safetensors", dir);
	ck_assert_int_eq(attnrt_checkpoint_save(NULL, path, model, N_MODEL, p,
						meta, 2, err, sizeof err),
			 ATTNRT_OK);
	ck_assert_int_eq(attnrt_checkpoint_load(NULL, path, model, N_MODEL, q,
						err, sizeof err),
			 ATTNRT_OK);
	ck_assert_str_eq(err, "");
	for (int k = 0; k < N_MODEL; k++)
		ck_assert_mem_eq((char *)q + model[k].offset,
				 (char *)p + model[k].offset,
				 k == 0   ? 48
				 : k == 1 ? 16
				 : k == 2 ? 32
					  : 4);
	ck_assert_int_eq(attnrt_checkpoint_save(NULL, path2, model, N_MODEL, q,
						meta, 2, err, sizeof err),
			 ATTNRT_OK);
	size_t n1, n2;
	unsigned char *a = slurp(path, &n1), *b = slurp(path2, &n2);
	ck_assert_uint_eq(n1, n2);
	ck_assert_mem_eq(a, b, n1);
	/* 8 + header (a multiple of 8) + 100 bytes of packed data */
	ck_assert_uint_eq((n1 - 100) % 8, 0);
	free(a);
	free(b);
	attnrt_free(NULL, p);
	attnrt_free(NULL, q);
}
END_TEST

START_TEST(test_reader_takes_tensors_in_any_order_with_padding)
{
	/* Another writer: names sorted the other way, offsets reversed,
	 * whitespace and \u escapes in the JSON. */
	attnrt_param_info t[] = {
		{"a", 0, 1, {2}, ATTNRT_INIT_ZEROS, 0, 0},
		{"b", 64, 0, {0}, ATTNRT_INIT_ZEROS, 0, 0},
	};
	const char *json = "{ \"\\u0062\" : {\"shape\": [], \"dtype\": \"F32\", "
			   "\"data_offsets\": [0, 4]},\n \"a\": {\"dtype\":"
			   "\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}  ";
	size_t hn = strlen(json);
	unsigned char file[256] = {(unsigned char)hn};
	memcpy(file + 8, json, hn);
	float vals[3] = {9, 1, 2};
	memcpy(file + 8 + hn, vals, 12);
	float p[32] = {0};
	char err[256];
	ck_assert_int_eq(attnrt_checkpoint_parse(NULL, file, 8 + hn + 12, t, 2,
						 p, err, sizeof err),
			 ATTNRT_OK);
	ck_assert_float_eq(p[0], 1);
	ck_assert_float_eq(p[1], 2);
	ck_assert_float_eq(p[16], 9);
}
END_TEST

/* ---- every fault and its message ------------------------------------------------ */

/* A file: 8-byte length of json (or length if not -1), json, data_len
 * zero bytes. Parsed against table; returns the code, message in err. */
static int parse_made(const char *json, long long length, size_t data_len,
		      const attnrt_param_info *table, size_t n, char *err,
		      size_t err_size)
{
	size_t hn = strlen(json), len = 8 + hn + data_len;
	unsigned char *file = calloc(len, 1);
	uint64_t v = length < 0 ? hn : (uint64_t)length;
	for (int i = 0; i < 8; i++)
		file[i] = (unsigned char)(v >> (8 * i));
	memcpy(file + 8, json, hn);
	float *params = attnrt_alloc(NULL, 4096);
	for (int i = 0; i < 1024; i++)
		params[i] = 0.5f;
	err[0] = 0;
	int code = attnrt_checkpoint_parse(NULL, file, len, table, n, params,
					   err, err_size);
	if (code != ATTNRT_OK)
		for (int i = 0; i < 1024; i++)
			ck_assert_float_eq(params[i], 0.5f); /* untouched */
	attnrt_free(NULL, params);
	free(file);
	return code;
}

static const attnrt_param_info one_w[] = {
	{"w", 0, 1, {2}, ATTNRT_INIT_ZEROS, 0, 0},
};

#define W_ENTRY "\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"

/* Expects json (with data_len bytes of data) to fail with code and exactly
 * the message msg against one_w. */
static void expect_fault(const char *json, size_t data_len, int code,
			 const char *msg)
{
	char err[512];
	ck_assert_int_eq(parse_made(json, -1, data_len, one_w, 1, err,
				    sizeof err),
			 code);
	ck_assert_str_eq(err, msg);
}

START_TEST(test_a_file_too_short_for_a_header_is_an_error)
{
	char err[256];
	unsigned char five[5] = {0};
	ck_assert_int_eq(attnrt_checkpoint_parse(NULL, five, 5, one_w, 1,
						 (float[2]){0}, err, sizeof err),
			 ATTNRT_ERR_FORMAT);
	ck_assert_str_eq(err, "file of 5 bytes is too short for a safetensors "
			      "header (8 bytes of length, then JSON)");
}
END_TEST

START_TEST(test_a_header_length_beyond_the_file_or_the_limit_is_an_error)
{
	char err[256];
	ck_assert_int_eq(parse_made("{}", 1000, 4, one_w, 1, err, sizeof err),
			 ATTNRT_ERR_FORMAT);
	ck_assert_str_eq(err, "header length 1000 runs past the end of the file "
			      "(6 bytes after the length)");
	ck_assert_int_eq(parse_made("{}", 1LL << 40, 0, one_w, 1, err,
				    sizeof err),
			 ATTNRT_ERR_FORMAT);
	ck_assert_str_eq(err, "header length 1099511627776 is beyond the "
			      "100000000 bytes safetensors allows");
}
END_TEST

START_TEST(test_json_syntax_errors_give_the_byte_they_are_at)
{
	expect_fault("{\"w\":}", 0, ATTNRT_ERR_FORMAT,
		     "JSON: expected a value at header byte 5, found '}'");
	expect_fault("{\"w\":1,}", 0, ATTNRT_ERR_FORMAT,
		     "JSON: expected a string at header byte 7, found '}'");
	expect_fault("{\"w\" 1}", 0, ATTNRT_ERR_FORMAT,
		     "JSON: expected ':' after an object key at header byte 5, "
		     "found '1'");
	expect_fault("{\"w\":[1 2]}", 0, ATTNRT_ERR_FORMAT,
		     "JSON: expected ',' or ']' at header byte 8, found '2'");
	expect_fault("{\"w\":01}", 0, ATTNRT_ERR_FORMAT,
		     "JSON: expected ',' or '}' at header byte 6, found '1'");
	expect_fault("{\"w\":1.}", 0, ATTNRT_ERR_FORMAT,
		     "JSON: expected a digit after '.' at header byte 7, found '}'");
	expect_fault("{\"w\":tru}", 0, ATTNRT_ERR_FORMAT,
		     "JSON: expected a value at header byte 5, found 't'");
	expect_fault("{} x", 0, ATTNRT_ERR_FORMAT,
		     "JSON: expected the end of the header at header byte 3, "
		     "found 'x'");
	expect_fault("{\"w", 0, ATTNRT_ERR_FORMAT,
		     "JSON: unterminated string starting at header byte 1");
	expect_fault("{\"\x01\":1}", 0, ATTNRT_ERR_FORMAT,
		     "JSON: control byte 0x01 in a string at header byte 2");
	expect_fault("{\"\\x\":1}", 0, ATTNRT_ERR_FORMAT,
		     "JSON: bad escape '\\x' at header byte 2");
	expect_fault("{\"\\ud800\":1}", 0, ATTNRT_ERR_FORMAT,
		     "JSON: high surrogate \\ud800 without its pair at header "
		     "byte 2");
	expect_fault("{\"\\udc00\":1}", 0, ATTNRT_ERR_FORMAT,
		     "JSON: lone low surrogate \\udc00 at header byte 2");
	expect_fault("{\"\\u12g4\":1}", 0, ATTNRT_ERR_FORMAT,
		     "JSON: bad \\u escape at header byte 2");
	expect_fault("{\"\xc0\xaf\":1}", 0, ATTNRT_ERR_FORMAT,
		     "JSON: invalid UTF-8 at header byte 2");
	expect_fault("{\"\xed\xa0\x80\":1}", 0, ATTNRT_ERR_FORMAT,
		     "JSON: invalid UTF-8 at header byte 2");
	expect_fault("", 0, ATTNRT_ERR_FORMAT,
		     "JSON: expected a value at header byte 0, found the end of "
		     "the header");
	expect_fault("[1]", 0, ATTNRT_ERR_FORMAT, "header is not a JSON object");
}
END_TEST

START_TEST(test_json_nesting_is_bounded)
{
	char deep[300];
	memset(deep, '[', 200);
	strcpy(deep + 200, "");
	char json[320];
	snprintf(json, sizeof json, "{\"w\":%s", deep);
	expect_fault(json, 0, ATTNRT_ERR_FORMAT,
		     "JSON: nested deeper than 64 at header byte 68");
}
END_TEST

START_TEST(test_malformed_entries_name_the_tensor)
{
	expect_fault("{\"w\":1}", 8, ATTNRT_ERR_FORMAT,
		     "w: entry is not an object");
	expect_fault("{\"w\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
		     ATTNRT_ERR_FORMAT, "w: no dtype");
	expect_fault("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8,
		     ATTNRT_ERR_FORMAT, "w: no shape");
	expect_fault("{\"w\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8,
		     ATTNRT_ERR_FORMAT, "w: no data_offsets");
	expect_fault("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":"
		     "[0,8],\"extra\":1}}",
		     8, ATTNRT_ERR_FORMAT, "w: unknown field \"extra\"");
	expect_fault("{\"w\":{\"dtype\":\"F32\",\"dtype\":\"F32\"}}", 8,
		     ATTNRT_ERR_FORMAT, "w: repeated field \"dtype\"");
	expect_fault("{\"w\":{\"dtype\":32,\"shape\":[2],\"data_offsets\":[0,8]}}",
		     8, ATTNRT_ERR_FORMAT, "w: dtype is not a string");
	expect_fault("{\"w\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}}",
		     8, ATTNRT_ERR_FORMAT, "w: shape is not a list");
	expect_fault("{\"w\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":"
		     "[0,8]}}",
		     8, ATTNRT_ERR_FORMAT,
		     "w: shape holds something other than non-negative "
		     "integers");
	expect_fault("{\"w\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":"
		     "[0,8]}}",
		     8, ATTNRT_ERR_FORMAT,
		     "w: shape holds something other than non-negative "
		     "integers");
	expect_fault("{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,"
		     "4294967296],\"data_offsets\":[0,8]}}",
		     8, ATTNRT_ERR_FORMAT,
		     "w: shape has more elements than can be counted");
	expect_fault("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":"
		     "[0,8,9]}}",
		     8, ATTNRT_ERR_FORMAT,
		     "w: data_offsets is not a list of two non-negative "
		     "integers");
	expect_fault("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":"
		     "[0,18446744073709551616]}}",
		     8, ATTNRT_ERR_FORMAT,
		     "w: data_offsets is not a list of two non-negative "
		     "integers");
	expect_fault("{\"w\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":"
		     "[0,8]}}",
		     8, ATTNRT_ERR_FORMAT, "w: unknown dtype \"F33\"");
	expect_fault("{\"__metadata__\":{\"a\":1}," W_ENTRY "}", 8,
		     ATTNRT_ERR_FORMAT,
		     "__metadata__ is not an object of "
		     "strings");
	expect_fault("{\"__metadata__\":{},\"__metadata__\":{}," W_ENTRY "}", 8,
		     ATTNRT_ERR_FORMAT, "__metadata__ appears twice");
}
END_TEST

START_TEST(test_offsets_must_fit_the_shape_and_tile_the_data)
{
	expect_fault("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":"
		     "[0,4]}}",
		     4, ATTNRT_ERR_FORMAT,
		     "w: data_offsets [0, 4] hold 4 bytes, its dtype and shape "
		     "need 8");
	expect_fault("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":"
		     "[8,0]}}",
		     8, ATTNRT_ERR_FORMAT,
		     "w: data_offsets [8, 0] end before they begin");
	expect_fault("{" W_ENTRY "}", 4, ATTNRT_ERR_FORMAT,
		     "w: data_offsets [0, 8] run past the end of the data (4 "
		     "bytes)");
	expect_fault("{" W_ENTRY ",\"v\":{\"dtype\":\"F32\",\"shape\":[2],"
		     "\"data_offsets\":[4,12]}}",
		     12, ATTNRT_ERR_FORMAT, "w and v: data_offsets overlap");
	expect_fault("{" W_ENTRY ",\"v\":{\"dtype\":\"I32\",\"shape\":[2],"
		     "\"data_offsets\":[12,20]}}",
		     20, ATTNRT_ERR_FORMAT,
		     "bytes 8 to 12 of the data belong to no tensor");
	expect_fault("{" W_ENTRY "}", 24, ATTNRT_ERR_FORMAT,
		     "bytes 8 to 24 of the data belong to no tensor");
	expect_fault("{}", 3, ATTNRT_ERR_FORMAT,
		     "bytes 0 to 3 of the data belong to no tensor");
}
END_TEST

START_TEST(test_names_must_be_the_models_exactly)
{
	expect_fault("{}", 0, ATTNRT_ERR_MISMATCH,
		     "w: the model's parameter is missing from the checkpoint "
		     "(0 tensors in the file, 1 parameters in the model)");
	expect_fault("{" W_ENTRY ",\"v\":{\"dtype\":\"F32\",\"shape\":[2],"
		     "\"data_offsets\":[8,16]}}",
		     16, ATTNRT_ERR_MISMATCH,
		     "v: the checkpoint has a tensor the model does not");
	expect_fault("{" W_ENTRY ",\"w\":{\"dtype\":\"F32\",\"shape\":[2],"
		     "\"data_offsets\":[8,16]}}",
		     16, ATTNRT_ERR_FORMAT,
		     "w: the name appears twice in the header");
	expect_fault("{\"W\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":"
		     "[0,8]}}",
		     8, ATTNRT_ERR_MISMATCH,
		     "W: the checkpoint has a tensor the model does not");
	/* a name sorting after the model's: the model's is the one missing */
	expect_fault("{\"z\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":"
		     "[0,8]}}",
		     8, ATTNRT_ERR_MISMATCH,
		     "w: the model's parameter is missing from the checkpoint "
		     "(1 tensors in the file, 1 parameters in the model)");
	/* names differing far apart in byte order */
	static const attnrt_param_info ab[] = {
		{"a", 0, 1, {2}, ATTNRT_INIT_ZEROS, 0, 0},
		{"z", 64, 1, {2}, ATTNRT_INIT_ZEROS, 0, 0},
	};
	char err[256];
	ck_assert_int_eq(parse_made("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
				    "\"data_offsets\":[0,8]},\"m\":{\"dtype\":"
				    "\"F32\",\"shape\":[2],\"data_offsets\":"
				    "[8,16]}}",
				    -1, 16, ab, 2, err, sizeof err),
			 ATTNRT_ERR_MISMATCH);
	ck_assert_str_eq(err,
			 "m: the checkpoint has a tensor the model does not");
	ck_assert_int_eq(parse_made("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
				    "\"data_offsets\":[0,8]},\"zz\":{\"dtype\":"
				    "\"F32\",\"shape\":[2],\"data_offsets\":"
				    "[8,16]}}",
				    -1, 16, ab, 2, err, sizeof err),
			 ATTNRT_ERR_MISMATCH);
	ck_assert_str_eq(err, "z: the model's parameter is missing from the "
			      "checkpoint (2 tensors in the file, 2 parameters "
			      "in the model)");
}
END_TEST

START_TEST(test_dtype_and_shape_must_be_the_models)
{
	expect_fault("{\"w\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":"
		     "[0,16]}}",
		     16, ATTNRT_ERR_MISMATCH,
		     "w: dtype F64 in file, model wants F32");
	expect_fault("{\"w\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":"
		     "[0,8]}}",
		     8, ATTNRT_ERR_MISMATCH,
		     "w: shape [1, 2] in file, model wants [2]");
	expect_fault("{\"w\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":"
		     "[0,4]}}",
		     4, ATTNRT_ERR_MISMATCH,
		     "w: shape [] in file, model wants [2]");
	attnrt_param_info wq = {"encoder.0.attention.W_q",  0, 2, {32, 32},
				ATTNRT_INIT_XAVIER_UNIFORM, 1, 0};
	char err[256];
	ck_assert_int_eq(parse_made("{\"encoder.0.attention.W_q\":{\"dtype\":"
				    "\"F32\",\"shape\":[32,16],\"data_offsets\":"
				    "[0,2048]}}",
				    -1, 2048, &wq, 1, err, sizeof err),
			 ATTNRT_ERR_MISMATCH);
	ck_assert_str_eq(err, "encoder.0.attention.W_q: shape [32, 16] in file, "
			      "model wants [32, 32]");
}
END_TEST

/* A NaN or an infinity is no trained parameter's value: the file is
 * corrupt (a flipped bit), and loading it would make every result NaN. */
START_TEST(test_a_value_that_is_not_finite_is_an_error)
{
	size_t len;
	unsigned char *file = saved_model(5, NULL, 0, &len);
	const float bad[] = {NAN, -INFINITY};
	const char *want[] = {"scale: element 0 is nan; a trained parameter is "
			      "finite, so the file is corrupt",
			      "scale: element 0 is -inf; a trained parameter is "
			      "finite, so the file is corrupt"};
	for (int k = 0; k < 2; k++) {
		memcpy(file + len - 4, &bad[k], 4); /* "scale", the last */
		float *q = attnrt_alloc(NULL, MODEL_BYTES);
		for (int i = 0; i < MODEL_BYTES / 4; i++)
			q[i] = -1;
		char err[256];
		ck_assert_int_eq(attnrt_checkpoint_parse(NULL, file, len, model,
							 N_MODEL, q, err,
							 sizeof err),
				 ATTNRT_ERR_FORMAT);
		ck_assert_str_eq(err, want[k]);
		for (int i = 0; i < MODEL_BYTES / 4; i++)
			ck_assert_float_eq(q[i], -1); /* untouched */
		attnrt_free(NULL, q);
	}
	free(file);
}
END_TEST

START_TEST(test_load_says_which_file_and_why_it_cannot_be_read)
{
	char err[512], want[512];
	float p[64];
	ck_assert_int_eq(attnrt_checkpoint_load(NULL, path, model, N_MODEL, p,
						err, sizeof err),
			 ATTNRT_ERR_IO);
	snprintf(want, sizeof want, "%s: No such file or directory", path);
	ck_assert_str_eq(err, want);
	ck_assert_int_eq(attnrt_checkpoint_load(NULL, dir, model, N_MODEL, p,
						err, sizeof err),
			 ATTNRT_ERR_IO);
	snprintf(want, sizeof want, "%s: not a file", dir);
	ck_assert_str_eq(err, want);
	FILE *f = fopen(path, "wb");
	fputs("{}", f);
	fclose(f);
	ck_assert_int_eq(attnrt_checkpoint_load(NULL, path, model, N_MODEL, p,
						err, sizeof err),
			 ATTNRT_ERR_FORMAT);
	snprintf(want, sizeof want,
		 "%s: file of 2 bytes is too short for a "
		 "safetensors header (8 bytes of length, then JSON)",
		 path);
	ck_assert_str_eq(err, want);
	/* A tiny buffer still gets a terminated prefix of the message. */
	char small[8];
	attnrt_checkpoint_load(NULL, path, model, N_MODEL, p, small,
			       sizeof small);
	ck_assert_uint_eq(strlen(small), 7);
}
END_TEST

/* ---- fuzzing ------------------------------------------------------------------- */

/* Parses data[0..len) from an exact-size heap copy (so ASan sees any
 * read past the end); on failure the params must be untouched. */
static int parse_exact(const unsigned char *data, size_t len)
{
	unsigned char *copy = malloc(len ? len : 1);
	memcpy(copy, data, len);
	float *p = attnrt_alloc(NULL, MODEL_BYTES);
	for (int i = 0; i < MODEL_BYTES / 4; i++)
		p[i] = -1;
	char err[256];
	int code = attnrt_checkpoint_parse(NULL, copy, len, model, N_MODEL, p,
					   err, sizeof err);
	if (code != ATTNRT_OK) {
		for (int i = 0; i < MODEL_BYTES / 4; i++)
			ck_assert_float_eq(p[i], -1);
		ck_assert_uint_gt(strlen(err), 0);
	}
	attnrt_free(NULL, p);
	free(copy);
	return code;
}

START_TEST(test_every_truncation_is_an_error_not_a_crash)
{
	size_t len;
	unsigned char *file = saved_model(3, NULL, 0, &len);
	ck_assert_int_eq(parse_exact(file, len), ATTNRT_OK);
	for (size_t n = 0; n < len; n++)
		ck_assert_int_ne(parse_exact(file, n), ATTNRT_OK);
	free(file);
}
END_TEST

START_TEST(test_random_byte_flips_never_crash_the_reader)
{
	attnrt_meta meta = {"format", "pt"};
	size_t len;
	unsigned char *file = saved_model(4, &meta, 1, &len), *bad = malloc(len);
	uint64_t x = 88172645463325252ull; /* xorshift64 */
	int n_ok = 0;
	for (int round = 0; round < 3000; round++) {
		memcpy(bad, file, len);
		int flips = 1 + round % 3;
		for (int k = 0; k < flips; k++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			/* mostly the header, where the structure is */
			size_t at = (x >> 8) % (round % 4 ? len - 100 : len);
			bad[at] = (unsigned char)x;
		}
		n_ok += parse_exact(bad, len) == ATTNRT_OK;
	}
	/* flips in the data (or to equal bytes) still load */
	ck_assert_int_gt(n_ok, 0);
	ck_assert_int_lt(n_ok, 3000);
	free(bad);
	free(file);
}
END_TEST

/* ---- failing allocations and atomic writes ------------------------------------- */

START_TEST(test_every_failed_allocation_in_load_is_reported_without_leaks)
{
	float *p = model_params(5), *q = attnrt_alloc(NULL, MODEL_BYTES);
	ck_assert_int_eq(attnrt_checkpoint_save(NULL, path, model, N_MODEL, p,
						NULL, 0, NULL, 0),
			 ATTNRT_OK);
	int fail_at = 0, code;
	do {
		tu_alloc_hook h = {0, fail_at++, 0};
		attnrt_allocator al = {tu_failing_alloc, &h};
		char err[256];
		memset(q, 0, MODEL_BYTES);
		code = attnrt_checkpoint_load(&al, path, model, N_MODEL, q, err,
					      sizeof err);
		ck_assert_int_eq(h.live, 0);
		if (code != ATTNRT_OK) {
			ck_assert_int_eq(code, ATTNRT_ERR_NOMEM);
			ck_assert_ptr_nonnull(strstr(err, "out of memory"));
			for (int i = 0; i < MODEL_BYTES / 4; i++)
				ck_assert_float_eq(q[i], 0);
		}
	} while (code != ATTNRT_OK);
	ck_assert_int_gt(fail_at, 3);
	attnrt_free(NULL, p);
	attnrt_free(NULL, q);
}
END_TEST

START_TEST(test_a_save_failing_for_memory_keeps_the_old_file)
{
	float *old = model_params(6), *p = model_params(7);
	ck_assert_int_eq(attnrt_checkpoint_save(NULL, path, model, N_MODEL, old,
						NULL, 0, NULL, 0),
			 ATTNRT_OK);
	size_t n_before;
	unsigned char *before = slurp(path, &n_before);
	int fail_at = 0, code;
	do {
		tu_alloc_hook h = {0, fail_at++, 0};
		attnrt_allocator al = {tu_failing_alloc, &h};
		code = attnrt_checkpoint_save(&al, path, model, N_MODEL, p,
					      NULL, 0, NULL, 0);
		ck_assert_int_eq(h.live, 0);
		ck_assert_int_eq(count_files(), 1);
		if (code != ATTNRT_OK) {
			ck_assert_int_eq(code, ATTNRT_ERR_NOMEM);
			size_t n;
			unsigned char *now = slurp(path, &n);
			ck_assert_uint_eq(n, n_before);
			ck_assert_mem_eq(now, before, n);
			free(now);
		}
	} while (code != ATTNRT_OK);
	ck_assert_int_gt(fail_at, 1);
	float *q = attnrt_alloc(NULL, MODEL_BYTES);
	ck_assert_int_eq(attnrt_checkpoint_load(NULL, path, model, N_MODEL, q,
						NULL, 0),
			 ATTNRT_OK);
	ck_assert_mem_eq(q, p, 48);
	free(before);
	attnrt_free(NULL, q);
	attnrt_free(NULL, old);
	attnrt_free(NULL, p);
}
END_TEST

START_TEST(test_a_save_failing_mid_write_keeps_the_old_file)
{
	/* The file size limit stops the temporary file after 200 bytes:
	 * write(2) fails with EFBIG half-way through the data. */
	enum { BIG = 64 * 100 };
	attnrt_param_info big = {"w", 0, 1, {BIG}, ATTNRT_INIT_ONES, 0, 0};
	float *old = model_params(8), *p = attnrt_alloc(NULL, BIG * 4);
	ck_assert_int_eq(attnrt_checkpoint_save(NULL, path, model, N_MODEL, old,
						NULL, 0, NULL, 0),
			 ATTNRT_OK);
	size_t n_before;
	unsigned char *before = slurp(path, &n_before);
	struct rlimit saved, lim;
	getrlimit(RLIMIT_FSIZE, &saved);
	lim = saved;
	lim.rlim_cur = 200;
	signal(SIGXFSZ, SIG_IGN);
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
	char err[512];
	int code = attnrt_checkpoint_save(NULL, path, &big, 1, p, NULL, 0, err,
					  sizeof err);
	setrlimit(RLIMIT_FSIZE, &saved);
	ck_assert_int_eq(code, ATTNRT_ERR_IO);
	char want[512];
	snprintf(want, sizeof want, "%s: cannot write: File too large", path);
	ck_assert_str_eq(err, want);
	ck_assert_int_eq(count_files(), 1);
	size_t n;
	unsigned char *now = slurp(path, &n);
	ck_assert_uint_eq(n, n_before);
	ck_assert_mem_eq(now, before, n);
	free(now);
	free(before);
	attnrt_free(NULL, old);
	attnrt_free(NULL, p);
}
END_TEST

START_TEST(test_a_save_into_a_missing_directory_says_so)
{
	char bad[256], err[512], want[512];
	snprintf(bad, sizeof bad, "%s/nowhere/x.safetensors", dir);
	ck_assert_int_eq(attnrt_checkpoint_save(NULL, bad, model, N_MODEL,
						(float[64]){0}, NULL, 0, err,
						sizeof err),
			 ATTNRT_ERR_IO);
	snprintf(want, sizeof want,
		 "%s: cannot create a temporary file: No such "
		 "file or directory",
		 bad);
	ck_assert_str_eq(err, want);
}
END_TEST

START_TEST(test_save_rejects_tables_a_reader_could_not_take_back)
{
	attnrt_param_info twice[] = {
		{"w", 0, 1, {1}, ATTNRT_INIT_ZEROS, 0, 0},
		{"w", 64, 1, {1}, ATTNRT_INIT_ZEROS, 0, 0},
	};
	attnrt_param_info meta_name = {"__metadata__",    0, 0, {0},
				       ATTNRT_INIT_ZEROS, 0, 0};
	attnrt_param_info not_utf8 = {"\xff", 0, 0, {0}, ATTNRT_INIT_ZEROS,
				      0,      0};
	char err[256];
	float p[32] = {0};
	ck_assert_int_eq(attnrt_checkpoint_save(NULL, path, twice, 2, p, NULL,
						0, err, sizeof err),
			 ATTNRT_ERR_ARG);
	ck_assert_str_eq(err, "two parameters are named 'w'");
	ck_assert_int_eq(attnrt_checkpoint_save(NULL, path, &meta_name, 1, p,
						NULL, 0, err, sizeof err),
			 ATTNRT_ERR_ARG);
	ck_assert_int_eq(attnrt_checkpoint_save(NULL, path, &not_utf8, 1, p,
						NULL, 0, err, sizeof err),
			 ATTNRT_ERR_ARG);
	ck_assert_int_eq(count_files(), 0);
	ck_assert_int_eq(attnrt_checkpoint_load(NULL, path, twice, 2, p, err,
						sizeof err),
			 ATTNRT_ERR_ARG);
}
END_TEST

/* ---- any tensors: attnrt_st_write and attnrt_st_read ---------------------- */

START_TEST(test_any_tensors_round_trip_sorted_by_name_with_their_dtypes)
{
	int32_t ids[6] = {1, -2, 3, 4, 5, 2147483647};
	int64_t big[2] = {-5, 1LL << 40};
	double d[1] = {0.1};
	attnrt_st_tensor in[3] = {
		{"tokens", "I32", 2, {2, 3}, ids, sizeof ids},
		{"lengths", "I64", 1, {2}, big, sizeof big},
		{"scale", "F64", 0, {0}, d, sizeof d},
	};
	attnrt_meta meta[1] = {{"vocab", "abc"}};
	char err[256];
	ck_assert_int_eq(attnrt_st_write(NULL, path, in, 3, meta, 1, err,
					 sizeof err),
			 ATTNRT_OK);
	attnrt_st_file *f;
	ck_assert_int_eq(attnrt_st_read(NULL, path, 1 << 20, &f, err, sizeof err),
			 ATTNRT_OK);
	ck_assert_uint_eq(attnrt_st_count(f), 3);
	ck_assert_str_eq(attnrt_st_at(f, 0)->name, "lengths");
	ck_assert_str_eq(attnrt_st_at(f, 1)->name, "scale");
	ck_assert_str_eq(attnrt_st_at(f, 2)->name, "tokens");
	const attnrt_st_tensor *t = attnrt_st_find(f, "tokens");
	ck_assert_str_eq(t->dtype, "I32");
	ck_assert_int_eq(t->rank, 2);
	ck_assert_int_eq(t->dims[0], 2);
	ck_assert_int_eq(t->dims[1], 3);
	ck_assert_uint_eq(t->bytes, sizeof ids);
	ck_assert_int_eq(memcmp(t->data, ids, sizeof ids), 0);
	t = attnrt_st_find(f, "lengths");
	ck_assert_int_eq(memcmp(t->data, big, sizeof big), 0);
	ck_assert_int_eq(attnrt_st_find(f, "scale")->rank, 0);
	ck_assert_ptr_null(attnrt_st_find(f, "token"));
	ck_assert_str_eq(attnrt_st_meta(f, "vocab"), "abc");
	ck_assert_ptr_null(attnrt_st_meta(f, "other"));
	attnrt_st_free(f);
}
END_TEST

START_TEST(test_any_tensors_writer_refuses_what_does_not_agree)
{
	int32_t v[4] = {0};
	char err[256];
	attnrt_st_tensor bad_size = {"x", "I32", 1, {3}, v, sizeof v};
	ck_assert_int_eq(attnrt_st_write(NULL, path, &bad_size, 1, NULL, 0, err,
					 sizeof err),
			 ATTNRT_ERR_ARG);
	ck_assert_str_eq(err, "x: dtype, shape and bytes do not agree");
	attnrt_st_tensor bad_dtype = {"x", "Q8", 1, {4}, v, sizeof v};
	ck_assert_int_eq(attnrt_st_write(NULL, path, &bad_dtype, 1, NULL, 0,
					 err, sizeof err),
			 ATTNRT_ERR_ARG);
	attnrt_st_tensor twice[2] = {{"x", "I32", 1, {2}, v, 8},
				     {"x", "I32", 1, {2}, v, 8}};
	ck_assert_int_eq(attnrt_st_write(NULL, path, twice, 2, NULL, 0, err,
					 sizeof err),
			 ATTNRT_ERR_ARG);
	ck_assert_str_eq(err, "x: the name is used twice");
	ck_assert_int_eq(access(path, F_OK), -1); /* nothing was written */
}
END_TEST

START_TEST(test_any_tensors_reader_refuses_ranks_past_eight_and_big_files)
{
	static const char json[] = "{\"w\":{\"dtype\":\"F32\",\"shape\":"
				   "[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}";
	char file[sizeof json + 12], err[256];
	uint64_t n = sizeof json - 1;
	for (int i = 0; i < 8; i++)
		file[i] = (char)(n >> (8 * i));
	memcpy(file + 8, json, n);
	memset(file + 8 + n, 0, 4);
	attnrt_st_file *f;
	ck_assert_int_eq(attnrt_st_parse(NULL, file, 8 + n + 4, &f, err,
					 sizeof err),
			 ATTNRT_ERR_FORMAT);
	ck_assert_ptr_null(f);
	ck_assert_str_eq(err, "w: shape has rank 9, more than 8");
	FILE *out = fopen(path, "wb");
	fwrite(file, 1, 8 + n + 4, out);
	fclose(out);
	ck_assert_int_eq(attnrt_st_read(NULL, path, 16, &f, err, sizeof err),
			 ATTNRT_ERR_FORMAT);
	ck_assert_ptr_nonnull(strstr(err, "more than the 16 this reader takes"));
	ck_assert_int_eq(attnrt_st_read(NULL, "/dev/zero", 16, &f, err,
					sizeof err),
			 ATTNRT_ERR_IO);
	ck_assert_str_eq(err, "/dev/zero: not a file");
}
END_TEST

START_TEST(test_a_save_removes_what_a_killed_save_left)
{
	char stale[192], other[192], err[256];
	snprintf(stale, sizeof stale, "%s.tmp-Ab12Cd", path);
	snprintf(other, sizeof other, "%s.tmp-short", path);
	fclose(fopen(stale, "w"));
	fclose(fopen(other, "w"));
	int32_t v[2] = {1, 2};
	attnrt_st_tensor t = {"x", "I32", 1, {2}, v, sizeof v};
	ck_assert_int_eq(attnrt_st_write(NULL, path, &t, 1, NULL, 0, err,
					 sizeof err),
			 ATTNRT_OK);
	ck_assert_int_eq(access(stale, F_OK), -1);
	ck_assert_int_eq(access(other, F_OK), 0); /* not a name a save makes */
	ck_assert_int_eq(count_files(), 2);
}
END_TEST

START_TEST(test_load_skips_a_training_runs_optimizer_state)
{
	float w[2] = {1.5f, -2}, m[2] = {9, 9}, out[16] = {0};
	attnrt_st_tensor ts[2] = {{"w", "F32", 1, {2}, w, sizeof w},
				  {"optim:m:w", "F32", 1, {2}, m, sizeof m}};
	char err[256];
	ck_assert_int_eq(attnrt_st_write(NULL, path, ts, 2, NULL, 0, err,
					 sizeof err),
			 ATTNRT_OK);
	attnrt_param_info table[1] = {
		{.name = "w", .offset = 0, .rank = 1, .dims = {2}}};
	ck_assert_int_eq(attnrt_checkpoint_load(NULL, path, table, 1, out, err,
						sizeof err),
			 ATTNRT_OK);
	ck_assert(out[0] == 1.5f && out[1] == -2);
	/* a missing parameter: the state's tensors are counted apart */
	attnrt_param_info two[2] =
		{{.name = "v", .offset = 0, .rank = 1, .dims = {2}},
		 {.name = "w", .offset = 8, .rank = 1, .dims = {2}}};
	ck_assert_int_eq(attnrt_checkpoint_load(NULL, path, two, 2, out, err,
						sizeof err),
			 ATTNRT_ERR_MISMATCH);
	char want[512];
	snprintf(want, sizeof want,
		 "%s: v: the model's parameter is missing from the checkpoint "
		 "(1 tensors in the file besides 1 of a training run's state, "
		 "2 parameters in the model)",
		 path);
	ck_assert_str_eq(err, want);
	/* another unknown tensor is still an error */
	ts[1].name = "other";
	ck_assert_int_eq(attnrt_st_write(NULL, path, ts, 2, NULL, 0, err,
					 sizeof err),
			 ATTNRT_OK);
	ck_assert_int_eq(attnrt_checkpoint_load(NULL, path, table, 1, out, err,
						sizeof err),
			 ATTNRT_ERR_MISMATCH);
}
END_TEST

/* rt_ckpt_shapes reads the shapes from the header alone: the table's,
 * -1 for a name the file lacks (and for __metadata__), and an error for
 * a file that is no checkpoint or no file. */
START_TEST(test_shapes_come_from_the_header_alone)
{
	static const attnrt_param_info table[] = {
		{"embed.table", 0, 2, {12, 8}, ATTNRT_INIT_ONES, 0, 0},
		{"bias", 384, 1, {3}, ATTNRT_INIT_ZEROS, 0, 0},
		{"scalar", 448, 0, {0}, ATTNRT_INIT_ONES, 0, 0},
	};
	attnrt_meta meta = {"model", "toy"};
	void *params = attnrt_alloc(NULL, attnrt_params_size(table, 3));
	ck_assert_int_eq(attnrt_params_init(table, 3, params, 0), ATTNRT_OK);
	ck_assert_int_eq(attnrt_checkpoint_save(NULL, path, table, 3, params,
						&meta, 1, NULL, 0),
			 ATTNRT_OK);
	attnrt_free(NULL, params);
	const char *names[] = {"bias", "embed.table", "scalar", "missing",
			       "__metadata__"};
	int ranks[5];
	int64_t dims[5][6];
	char err[256] = "";
	ck_assert_int_eq(rt_ckpt_shapes(NULL, path, names, 5, ranks, dims, err,
					sizeof err),
			 ATTNRT_OK);
	ck_assert_int_eq(ranks[0], 1);
	ck_assert_int_eq(dims[0][0], 3);
	ck_assert_int_eq(ranks[1], 2);
	ck_assert_int_eq(dims[1][0], 12);
	ck_assert_int_eq(dims[1][1], 8);
	ck_assert_int_eq(ranks[2], 0);
	ck_assert_int_eq(ranks[3], -1);
	ck_assert_int_eq(ranks[4], -1);
	FILE *f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite("\x05\0\0\0\0\0\0\0[1,2]", 1, 13, f), 13);
	fclose(f);
	ck_assert_int_eq(rt_ckpt_shapes(NULL, path, names, 1, ranks, dims, err,
					sizeof err),
			 ATTNRT_ERR_FORMAT);
	ck_assert_ptr_nonnull(strstr(err, "the header is not a JSON object"));
	/* a folder (and a FIFO, tests/fifo_inputs.sh) is no file */
	ck_assert_int_eq(rt_ckpt_shapes(NULL, dir, names, 1, ranks, dims, err,
					sizeof err),
			 ATTNRT_ERR_IO);
	ck_assert_ptr_nonnull(strstr(err, "not a file"));
}
END_TEST

static Suite *ckpt_suite(void)
{
	Suite *s = suite_create("runtime_ckpt");
	TCase *tc = tcase_create("write");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_writer_matches_the_safetensors_reference_bytes);
	tcase_add_test(
		tc,
		test_writer_pads_the_header_with_spaces_and_writes_metadata_first);
	tcase_add_test(tc, test_writer_escapes_names_and_metadata_as_json);
	tcase_add_test(tc,
		       test_round_trip_gives_the_same_values_and_the_same_bytes);
	tcase_add_test(tc, test_reader_takes_tensors_in_any_order_with_padding);
	tcase_add_test(tc,
		       test_any_tensors_round_trip_sorted_by_name_with_their_dtypes);
	tcase_add_test(tc, test_any_tensors_writer_refuses_what_does_not_agree);
	tcase_add_test(
		tc,
		test_any_tensors_reader_refuses_ranks_past_eight_and_big_files);
	suite_add_tcase(s, tc);
	tc = tcase_create("faults");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_a_file_too_short_for_a_header_is_an_error);
	tcase_add_test(
		tc,
		test_a_header_length_beyond_the_file_or_the_limit_is_an_error);
	tcase_add_test(tc, test_json_syntax_errors_give_the_byte_they_are_at);
	tcase_add_test(tc, test_json_nesting_is_bounded);
	tcase_add_test(tc, test_malformed_entries_name_the_tensor);
	tcase_add_test(tc, test_offsets_must_fit_the_shape_and_tile_the_data);
	tcase_add_test(tc, test_names_must_be_the_models_exactly);
	tcase_add_test(tc, test_dtype_and_shape_must_be_the_models);
	tcase_add_test(tc, test_a_value_that_is_not_finite_is_an_error);
	tcase_add_test(tc, test_load_skips_a_training_runs_optimizer_state);
	tcase_add_test(tc, test_load_says_which_file_and_why_it_cannot_be_read);
	tcase_add_test(tc, test_shapes_come_from_the_header_alone);
	suite_add_tcase(s, tc);
	tc = tcase_create("fuzz");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_every_truncation_is_an_error_not_a_crash);
	tcase_add_test(tc, test_random_byte_flips_never_crash_the_reader);
	suite_add_tcase(s, tc);
	tc = tcase_create("atomic");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(
		tc,
		test_every_failed_allocation_in_load_is_reported_without_leaks);
	tcase_add_test(tc, test_a_save_failing_for_memory_keeps_the_old_file);
	tcase_add_test(tc, test_a_save_failing_mid_write_keeps_the_old_file);
	tcase_add_test(tc, test_a_save_into_a_missing_directory_says_so);
	tcase_add_test(tc,
		       test_save_rejects_tables_a_reader_could_not_take_back);
	tcase_add_test(tc, test_a_save_removes_what_a_killed_save_left);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(ckpt_suite());
}
