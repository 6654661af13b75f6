/*
 * test_runtime_npy.c - NumPy's .npy and .npz as data files
 * (rt_npy.c, rt_npz.c): every dtype and header version written byte by
 * byte here, zips assembled here with a CRC-32 of this file's own
 * (checked against the standard check value), every way a file can be
 * wrong and the message each gives, attnrt_tensors_read telling the
 * formats by their first bytes, and every truncation and byte flip of
 * an .npz an error, never a crash (under ASan in Debug builds).
 */
#include "attnrt.h"
#include "testutil.h"

#include <check.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct buf {
	unsigned char b[4096];
	size_t n;
} buf;

static void put(buf *o, const void *p, size_t n)
{
	ck_assert_uint_le(o->n + n, sizeof o->b);
	if (n) /* p may be NULL then */
		memcpy(o->b + o->n, p, n);
	o->n += n;
}

static void put16(buf *o, uint32_t v)
{
	unsigned char b[2] = {v & 0xff, v >> 8 & 0xff};
	put(o, b, 2);
}

static void put32(buf *o, uint32_t v)
{
	put16(o, v & 0xffff);
	put16(o, v >> 16);
}

/* An .npy of version major.0: the dict text, padded with spaces and a
 * newline to a multiple of 64 as numpy does, then n data bytes. */
static void npy(buf *o, int major, const char *dict, const void *data, size_t n)
{
	size_t pre = major == 1 ? 10 : 12, hl = strlen(dict) + 1;
	hl += (64 - (pre + hl) % 64) % 64;
	o->n = 0;
	put(o, "\x93NUMPY", 6);
	unsigned char v[2] = {(unsigned char)major, 0};
	put(o, v, 2);
	if (major == 1)
		put16(o, (uint32_t)hl);
	else
		put32(o, (uint32_t)hl);
	put(o, dict, strlen(dict));
	for (size_t i = strlen(dict); i + 1 < hl; i++)
		put(o, " ", 1);
	put(o, "\n", 1);
	put(o, data, n);
}

/* Bit by bit, unlike the reader's table. */
static uint32_t crc32_bits(const unsigned char *p, size_t n)
{
	uint32_t c = 0xffffffffu;
	for (size_t i = 0; i < n; i++)
		for (int k = 0; k < 8; k++) {
			uint32_t bit = (c ^ (uint32_t)(p[i] >> k)) & 1;
			c = (c >> 1) ^ (bit ? 0xedb88320u : 0);
		}
	return ~c;
}

typedef struct member {
	const char *name;
	const buf *data;
	uint32_t method, flags;
} member;

/* A zip of the members as Python's zipfile stores them. */
static void zip(buf *o, const member *m, int n)
{
	uint32_t off[8];
	o->n = 0;
	for (int i = 0; i < n; i++) {
		off[i] = (uint32_t)o->n;
		put32(o, 0x04034b50u);
		put16(o, 20);
		put16(o, m[i].flags);
		put16(o, m[i].method);
		put32(o, 0);
		put32(o, crc32_bits(m[i].data->b, m[i].data->n));
		put32(o, (uint32_t)m[i].data->n);
		put32(o, (uint32_t)m[i].data->n);
		put16(o, (uint32_t)strlen(m[i].name));
		put16(o, 0);
		put(o, m[i].name, strlen(m[i].name));
		put(o, m[i].data->b, m[i].data->n);
	}
	uint32_t cd = (uint32_t)o->n;
	for (int i = 0; i < n; i++) {
		put32(o, 0x02014b50u);
		put16(o, 20);
		put16(o, 20);
		put16(o, m[i].flags);
		put16(o, m[i].method);
		put32(o, 0);
		put32(o, crc32_bits(m[i].data->b, m[i].data->n));
		put32(o, (uint32_t)m[i].data->n);
		put32(o, (uint32_t)m[i].data->n);
		put16(o, (uint32_t)strlen(m[i].name));
		for (int k = 0; k < 4; k++)
			put16(o, 0);
		put32(o, 0);
		put32(o, off[i]);
		put(o, m[i].name, strlen(m[i].name));
	}
	uint32_t cd_size = (uint32_t)o->n - cd;
	put32(o, 0x06054b50u);
	put32(o, 0);
	put16(o, (uint32_t)n);
	put16(o, (uint32_t)n);
	put32(o, cd_size);
	put32(o, cd);
	put16(o, 0);
}

static char err[512];

/* Parses o, expecting a format error whose message holds what. */
static void expect_error(const buf *o, const char *what)
{
	attnrt_st_file *f = (attnrt_st_file *)1;
	err[0] = 0;
	ck_assert_int_eq(attnrt_np_parse(NULL, o->b, o->n, &f, err, sizeof err),
			 ATTNRT_ERR_FORMAT);
	ck_assert_ptr_null(f);
	ck_assert_msg(strstr(err, what), "'%s' not in '%s'", what, err);
}

static attnrt_st_file *parse_ok(const buf *o)
{
	attnrt_st_file *f;
	ck_assert_msg(attnrt_np_parse(NULL, o->b, o->n, &f, err, sizeof err) ==
			      ATTNRT_OK,
		      "%s", err);
	return f;
}

START_TEST(test_crc32_is_the_standard_one)
{
	ck_assert_uint_eq(crc32_bits((const unsigned char *)"123456789", 9),
			  0xcbf43926u);
}
END_TEST

/* Each dtype in each version: one tensor named "", its dims and bytes. */
START_TEST(test_every_dtype_and_version_reads_its_values)
{
	static const struct {
		const char *descr, *dtype;
		unsigned size;
	} types[] = {
		{"<f4", "F32", 4}, {"<f8", "F64", 8},  {"<i4", "I32", 4},
		{"<i8", "I64", 8}, {"<i2", "I16", 2},  {"|i1", "I8", 1},
		{"|u1", "U8", 1},  {"|b1", "BOOL", 1},
	};
	unsigned char data[48];
	for (size_t i = 0; i < sizeof data; i++)
		data[i] = (unsigned char)(i * 7 + 1);
	for (int major = 1; major <= 3; major++)
		for (size_t k = 0; k < sizeof types / sizeof *types; k++) {
			char dict[128];
			buf o;
			snprintf(dict, sizeof dict,
				 "{'descr': '%s', 'fortran_order'"
				 ": False, 'shape': (2, 3), }",
				 types[k].descr);
			npy(&o, major, dict, data, 6 * types[k].size);
			attnrt_st_file *f = parse_ok(&o);
			ck_assert_uint_eq(attnrt_st_count(f), 1);
			const attnrt_st_tensor *t = attnrt_st_at(f, 0);
			ck_assert_str_eq(t->name, "");
			ck_assert_str_eq(t->dtype, types[k].dtype);
			ck_assert_int_eq(t->rank, 2);
			ck_assert_int_eq(t->dims[0], 2);
			ck_assert_int_eq(t->dims[1], 3);
			ck_assert_uint_eq(t->bytes, 6 * types[k].size);
			ck_assert_int_eq(memcmp(t->data, data, t->bytes), 0);
			attnrt_st_free(f);
		}
}
END_TEST

START_TEST(test_header_forms_numpy_writes_are_read)
{
	float v = 1.5f;
	buf o;
	npy(&o, 1,
	    "{\"shape\": (), \"descr\": \"<f4\", \"fortran_order\": False}", &v,
	    4);
	attnrt_st_file *f = parse_ok(&o);
	ck_assert_int_eq(attnrt_st_at(f, 0)->rank, 0);
	attnrt_st_free(f);
	npy(&o, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1L,)}",
	    &v, 4);
	f = parse_ok(&o);
	ck_assert_int_eq(attnrt_st_at(f, 0)->dims[0], 1);
	attnrt_st_free(f);
	npy(&o, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 5), }",
	    NULL, 0);
	f = parse_ok(&o);
	ck_assert_int_eq(attnrt_st_at(f, 0)->dims[1], 5);
	attnrt_st_free(f);
}
END_TEST

START_TEST(test_bad_npy_headers_say_what_is_wrong)
{
	static const struct {
		const char *dict, *what;
	} cases[] = {
		{"{'descr': '>f4', 'fortran_order': False, 'shape': (2,)}",
		 "dtype '>f4' is not one attnc reads"},
		{"{'descr': '<c8', 'fortran_order': False, 'shape': (2,)}",
		 "dtype '<c8'"},
		{"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}",
		 "structured arrays"},
		{"{'descr': '<f4', 'fortran_order': True, 'shape': (2,)}",
		 "fortran_order is True"},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1)}",
		 "non-negative integers"},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (2,"
		 " 99999999999999999999)}",
		 "non-negative integers"},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,"
		 "1,1,1)}",
		 "more than 8 dims"},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': [2]}",
		 "shape is not a tuple"},
		{"{'descr': '<f4', 'fortran_order': False}", "no shape"},
		{"{'descr': '<f4', 'descr': '<f4'}", "a key appears twice"},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}",
		 "a key other than"},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x",
		 "text after the dict"},
		{"('descr', '<f4')", "not a dict"},
		{"{'descr': '<f4", "descr is not a dtype string"},
	};
	float data[2] = {0};
	buf o;
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		npy(&o, 1, cases[i].dict, data, sizeof data);
		expect_error(&o, cases[i].what);
	}
}
END_TEST

START_TEST(test_npy_lengths_are_checked_against_the_file)
{
	float data[3] = {0};
	const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}";
	buf o;
	npy(&o, 1, dict, data, 8);
	expect_error(&o,
		     "truncated: 8 bytes of data, its dtype and shape need 12");
	npy(&o, 1, dict, data, sizeof data);
	put(&o, "x", 1);
	expect_error(&o, "bytes after the array");
	npy(&o, 1,
	    "{'descr': '<f8', 'fortran_order': False, 'shape': "
	    "(4611686018427387904, 4)}",
	    data, 0);
	expect_error(&o, "more bytes than can be counted");
	npy(&o, 2, dict, data, sizeof data);
	o.b[11] = 0x7f; /* a header of 2 GiB in a file of 76 bytes */
	expect_error(&o, "runs past the end of the file");
	npy(&o, 1, dict, data, sizeof data);
	o.n = 9;
	expect_error(&o, "too short");
	npy(&o, 1, dict, data, sizeof data);
	o.b[6] = 4;
	expect_error(&o, "version 4.0");
}
END_TEST

/* An .npz of x (f32 [2, 2]) and y (i64 [2]) into o. */
static void two_members(buf *o, buf *x, buf *y, uint32_t method)
{
	float xv[4] = {1, -2, 3.5f, 4};
	int64_t yv[2] = {7, -9};
	npy(x, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }",
	    xv, sizeof xv);
	npy(y, 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }",
	    yv, sizeof yv);
	member m[] = {{"y.npy", y, 0, 0}, {"x.npy", x, method, 0}};
	zip(o, m, 2);
}

START_TEST(test_npz_members_are_the_named_tensors)
{
	buf o, x, y;
	two_members(&o, &x, &y, 0);
	attnrt_st_file *f = parse_ok(&o);
	ck_assert_uint_eq(attnrt_st_count(f), 2);
	ck_assert_str_eq(attnrt_st_at(f, 0)->name, "x"); /* sorted by name */
	const attnrt_st_tensor *t = attnrt_st_find(f, "x");
	float xv[4];
	memcpy(xv, t->data, sizeof xv);
	ck_assert_str_eq(t->dtype, "F32");
	ck_assert(xv[2] == 3.5f);
	t = attnrt_st_find(f, "y");
	int64_t yv;
	memcpy(&yv, (const char *)t->data + 8, 8);
	ck_assert_str_eq(t->dtype, "I64");
	ck_assert_int_eq(yv, -9);
	ck_assert_ptr_null(attnrt_st_find(f, "x.npy"));
	attnrt_st_free(f);
	zip(&o, NULL, 0); /* np.savez() of nothing */
	f = parse_ok(&o);
	ck_assert_uint_eq(attnrt_st_count(f), 0);
	attnrt_st_free(f);
}
END_TEST

START_TEST(test_npz_damage_says_what_is_wrong)
{
	buf o, x, y;
	two_members(&o, &x, &y, 8);
	expect_error(&o, "member 'x.npy' is deflated (np.savez_compressed)");
	member m[] = {{"x.npy", &x, 0, 1}};
	zip(&o, m, 1);
	expect_error(&o, "member 'x.npy' is encrypted");
	member bad_name[] = {{"x.txt", &x, 0, 0}, {"x.npy", &x, 0, 0}};
	zip(&o, bad_name, 2);
	expect_error(&o, "member 'x.txt' is not NAME.npy");
	zip(&o, bad_name + 1, 1);
	o.b[60] ^= 1; /* a byte of the member's data */
	expect_error(&o, "fails its CRC-32 check");
	two_members(&o, &x, &y, 0);
	o.b[o.n - 22 + 4] = 1; /* the end record's disk number */
	expect_error(&o, "spanning several disks");
	two_members(&o, &x, &y, 0);
	memset(o.b + o.n - 22 + 16, 0xff, 4); /* the directory's offset */
	expect_error(&o, "zip64");
	two_members(&o, &x, &y, 0);
	o.b[o.n - 22 + 12] += 40; /* the directory's size */
	expect_error(&o, "central directory runs past its end record");
	two_members(&o, &x, &y, 0);
	o.n -= 5;
	expect_error(&o, "no end of central directory record");
	two_members(&o, &x, &y, 0);
	o.b[0] = 'Q'; /* the first local header's signature */
	expect_error(&o, "member 'y.npy' has no local header");
	member dup[] = {{"x.npy", &x, 0, 0}, {"x.npy", &x, 0, 0}};
	zip(&o, dup, 2);
	expect_error(&o, "x: the name appears twice");
	npy(&x, 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (1,)}",
	    "abcd", 4);
	member plain[] = {{"x.npy", &x, 0, 0}};
	zip(&o, plain, 1);
	expect_error(&o, "member 'x.npy' .npy header: fortran_order is True");
}
END_TEST

START_TEST(test_every_truncation_and_flip_of_an_npz_is_an_error_or_a_file)
{
	buf o, x, y, cut;
	two_members(&o, &x, &y, 0);
	for (size_t n = 0; n < o.n; n++) {
		cut = o;
		cut.n = n;
		attnrt_st_file *f;
		ck_assert_int_eq(attnrt_np_parse(NULL, cut.b, cut.n, &f, err,
						 sizeof err),
				 ATTNRT_ERR_FORMAT);
	}
	srand(7);
	for (int k = 0; k < 4000; k++) {
		cut = o;
		cut.b[(size_t)rand() % cut.n] ^= (unsigned char)(1 +
								 rand() % 255);
		attnrt_st_file *f;
		int code = attnrt_np_parse(NULL, cut.b, cut.n, &f, err,
					   sizeof err);
		ck_assert(code == ATTNRT_OK || code == ATTNRT_ERR_FORMAT);
		attnrt_st_free(f);
	}
}
END_TEST

/* The format comes from the first bytes, not the name. */
START_TEST(test_tensors_read_tells_the_formats_by_their_bytes)
{
	char path[] = "/tmp/attnrt-npy-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	buf o, x, y;
	two_members(&o, &x, &y, 0);
	ck_assert_int_eq(write(fd, o.b, o.n), (ssize_t)o.n);
	close(fd);
	attnrt_st_file *f;
	ck_assert_int_eq(attnrt_tensors_read(NULL, path, 1 << 20, &f, err,
					     sizeof err),
			 ATTNRT_OK);
	ck_assert_ptr_nonnull(attnrt_st_find(f, "y"));
	attnrt_st_free(f);
	attnrt_st_tensor t = {"w", "F32", 1, {2}, "abcdefgh", 8};
	ck_assert_int_eq(attnrt_st_write(NULL, path, &t, 1, NULL, 0, err,
					 sizeof err),
			 ATTNRT_OK);
	ck_assert_int_eq(attnrt_tensors_read(NULL, path, 1 << 20, &f, err,
					     sizeof err),
			 ATTNRT_OK);
	ck_assert_ptr_nonnull(attnrt_st_find(f, "w"));
	attnrt_st_free(f);
	fd = open(path, O_WRONLY | O_TRUNC);
	ck_assert_int_eq(write(fd, x.b, x.n - 1), (ssize_t)x.n - 1);
	close(fd);
	ck_assert_int_eq(attnrt_tensors_read(NULL, path, 1 << 20, &f, err,
					     sizeof err),
			 ATTNRT_ERR_FORMAT);
	ck_assert_int_eq(strncmp(err, path, strlen(path)), 0);
	ck_assert_ptr_nonnull(strstr(err, ".npy: truncated"));
	unlink(path);
}
END_TEST

/* An allocator that remembers the largest block asked of it. */
static void *largest_alloc(void *ud, void *ptr, size_t size)
{
	size_t *largest = ud;
	if (size > *largest)
		*largest = size;
	if (size == 0) {
		free(ptr);
		return NULL;
	}
	return realloc(ptr, size);
}

/* The small file o at path, grown to 1 GiB (sparse: no disk is used) and
 * read as tensors: refused with what, from its head, with no block of
 * more than 64 KiB allocated (a reader of the whole file asks for 1 GiB). */
static void expect_refused_from_head(const char *path, const buf *o,
				     bool st_only, const char *what)
{
	int fd = open(path, O_WRONLY | O_TRUNC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, o->b, o->n), (ssize_t)o->n);
	ck_assert_int_eq(ftruncate(fd, 1 << 30), 0);
	close(fd);
	size_t largest = 0;
	attnrt_allocator al = {largest_alloc, &largest};
	attnrt_st_file *f;
	err[0] = 0;
	int code = st_only ? attnrt_st_read(&al, path, UINT64_MAX, &f, err,
					    sizeof err)
			   : attnrt_tensors_read(&al, path, UINT64_MAX, &f, err,
						 sizeof err);
	ck_assert_int_eq(code, ATTNRT_ERR_FORMAT);
	ck_assert_ptr_null(f);
	ck_assert_int_eq(strncmp(err, path, strlen(path)), 0);
	ck_assert_msg(strstr(err, what), "'%s' not in '%s'", what, err);
	ck_assert_uint_le(largest, 64 << 10);
}

START_TEST(test_a_big_file_is_refused_from_its_head_before_it_is_read)
{
	char path[] = "/tmp/attnrt-npy-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	close(fd);
	float data[3] = {0};
	buf o;
	npy(&o, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}",
	    data, sizeof data);
	expect_refused_from_head(path, &o, false,
				 ".npy: bytes after the array: 1073741696 "
				 "bytes of data, its dtype and shape need 12");
	/* safetensors: a whole header whose tensor ends at byte 8 of the
	 * data, then zeros to 1 GiB */
	const char *json = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],"
			   "\"data_offsets\":[0,8]}}";
	o.n = 0;
	put32(&o, (uint32_t)strlen(json));
	put32(&o, 0);
	put(&o, json, strlen(json));
	put(&o, data, 8);
	expect_refused_from_head(path, &o, false, "belong to no tensor");
	expect_refused_from_head(path, &o, true, "belong to no tensor");
	/* a header that is not JSON */
	o.b[8] = '[';
	expect_refused_from_head(path, &o, true, "header");
	/* random bytes: a header length beyond safetensors' limit */
	o.n = 0;
	put(&o, "\xde\xad\xbe\xef\x01\x02\x03\x04", 8);
	expect_refused_from_head(path, &o, false, "is beyond the");
	unlink(path);
}
END_TEST

static Suite *npy_suite(void)
{
	Suite *s = suite_create("runtime_npy");
	TCase *tc = tcase_create("npy");
	tcase_add_test(tc, test_crc32_is_the_standard_one);
	tcase_add_test(tc, test_every_dtype_and_version_reads_its_values);
	tcase_add_test(tc, test_header_forms_numpy_writes_are_read);
	tcase_add_test(tc, test_bad_npy_headers_say_what_is_wrong);
	tcase_add_test(tc, test_npy_lengths_are_checked_against_the_file);
	suite_add_tcase(s, tc);
	tc = tcase_create("npz");
	tcase_add_test(tc, test_npz_members_are_the_named_tensors);
	tcase_add_test(tc, test_npz_damage_says_what_is_wrong);
	tcase_add_test(
		tc,
		test_every_truncation_and_flip_of_an_npz_is_an_error_or_a_file);
	tcase_add_test(tc, test_tensors_read_tells_the_formats_by_their_bytes);
	tcase_add_test(tc,
		       test_a_big_file_is_refused_from_its_head_before_it_is_read);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(npy_suite());
}
