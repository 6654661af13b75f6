/*
 * rt_npy.c - one NumPy .npy array (numpy.lib.format, versions 1.0, 2.0
 * and 3.0) as an attnrt_st_tensor: the data files and --inputs of
 * attnc may be NumPy's as well as safetensors (rt_npz.c opens them).
 *
 * The bytes are untrusted. The header is the text of a Python dict,
 * {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }, read
 * by a small scanner that takes exactly those three keys, once each:
 * descr one of the little-endian dtypes safetensors names too (<f4 F32,
 * <f8 F64, <i4 I32, <i8 I64, <i2 I16, |i1 I8, |u1 U8, |b1 BOOL),
 * fortran_order False, shape a tuple of at most ATTNRT_ST_MAX_RANK
 * non-negative integers. The header's length is checked against the
 * bytes before it is read, and the data after it must be exactly the
 * shape's bytes, so nothing is allocated and nothing read past the end.
 */
#include "rt_internal.h"

#include <stdio.h>
#include <string.h>

static const struct {
	const char *descr, *dtype;
} np_dtypes[] = {
	{"<f4", "F32"}, {"<f8", "F64"}, {"<i4", "I32"}, {"<i8", "I64"},
	{"<i2", "I16"}, {"|i1", "I8"},  {"|u1", "U8"},  {"|b1", "BOOL"},
};

/* The header text h[at..n) being scanned. */
typedef struct np_scan {
	const char *h;
	size_t at, n;
	char *err;
	size_t err_size;
} np_scan;

static int bad(np_scan *s, const char *what)
{
	return rt_fail(s->err, s->err_size, ATTNRT_ERR_FORMAT,
		       ".npy header: %s "
		       "(at byte %zu of %zu)",
		       what, s->at, s->n);
}

static void skip_space(np_scan *s)
{
	while (s->at < s->n && (s->h[s->at] == ' ' || s->h[s->at] == '\n' ||
				s->h[s->at] == '\t'))
		s->at++;
}

/* Takes c after spaces. */
static bool take(np_scan *s, char c)
{
	skip_space(s);
	if (s->at < s->n && s->h[s->at] == c) {
		s->at++;
		return true;
	}
	return false;
}

/* A quoted string ('...' or "...", no escapes) into [*str, *len). */
static bool take_string(np_scan *s, const char **str, size_t *len)
{
	skip_space(s);
	if (s->at >= s->n || (s->h[s->at] != '\'' && s->h[s->at] != '"'))
		return false;
	char q = s->h[s->at++];
	size_t start = s->at;
	while (s->at < s->n && s->h[s->at] != q && s->h[s->at] != '\\')
		s->at++;
	if (s->at >= s->n || s->h[s->at] != q)
		return false;
	*str = s->h + start;
	*len = s->at++ - start;
	return true;
}

static bool take_word(np_scan *s, const char *w)
{
	size_t n = strlen(w);
	skip_space(s);
	if (s->n - s->at < n || memcmp(s->h + s->at, w, n) != 0)
		return false;
	s->at += n;
	return true;
}

static int read_descr(np_scan *s, attnrt_st_tensor *t)
{
	const char *d;
	size_t n;
	if (!take_string(s, &d, &n))
		return bad(s, "descr is not a dtype string (structured arrays "
			      "are not read)");
	for (size_t i = 0; i < sizeof np_dtypes / sizeof *np_dtypes; i++)
		if (n == 3 && memcmp(d, np_dtypes[i].descr, 3) == 0) {
			t->dtype = np_dtypes[i].dtype;
			return ATTNRT_OK;
		}
	return rt_fail(s->err, s->err_size, ATTNRT_ERR_FORMAT,
		       ".npy header: "
		       "dtype '%.*s' is not one attnc reads (<f4 <f8 <i4 <i8 <i2 "
		       "|i1 |u1 |b1, little-endian)",
		       (int)(n < 16 ? n : 16), d);
}

/* One dimension: digits (and Python 2's L) of a value up to INT64_MAX. */
static bool take_dim(np_scan *s, int64_t *d)
{
	skip_space(s);
	size_t start = s->at;
	uint64_t v = 0;
	while (s->at < s->n && s->h[s->at] >= '0' && s->h[s->at] <= '9') {
		if (v > (uint64_t)INT64_MAX / 10)
			return false;
		v = v * 10 + (unsigned)(s->h[s->at++] - '0');
	}
	if (s->at == start || v > (uint64_t)INT64_MAX)
		return false;
	if (s->at < s->n && s->h[s->at] == 'L')
		s->at++;
	*d = (int64_t)v;
	return true;
}

static int read_shape(np_scan *s, attnrt_st_tensor *t)
{
	if (!take(s, '('))
		return bad(s, "shape is not a tuple");
	t->rank = 0;
	while (!take(s, ')')) {
		if (t->rank == ATTNRT_ST_MAX_RANK)
			return bad(s, "shape has more than 8 dims");
		if (!take_dim(s, &t->dims[t->rank]))
			return bad(s, "shape holds something other than "
				      "non-negative integers");
		t->rank++;
		if (!take(s, ',') && !take(s, ')'))
			return bad(s, "shape is not a tuple of integers");
		else if (s->h[s->at - 1] == ')')
			break;
	}
	return ATTNRT_OK;
}

/* One key: value pair; *seen marks the keys read. */
static int read_pair(np_scan *s, attnrt_st_tensor *t, unsigned *seen)
{
	const char *k;
	size_t n;
	if (!take_string(s, &k, &n) || !take(s, ':'))
		return bad(s, "not a dict of 'key': value");
	unsigned bit = n == 5 && !memcmp(k, "descr", 5)             ? 1u
		       : n == 13 && !memcmp(k, "fortran_order", 13) ? 2u
		       : n == 5 && !memcmp(k, "shape", 5)           ? 4u
								    : 0u;
	if (!bit || (*seen & bit))
		return bad(s,
			   bit ? "a key appears twice"
			       : "a key other than descr, fortran_order, shape");
	*seen |= bit;
	if (bit == 1)
		return read_descr(s, t);
	if (bit == 4)
		return read_shape(s, t);
	if (take_word(s, "False"))
		return ATTNRT_OK;
	return bad(s, take_word(s, "True")
			      ? "fortran_order is True; save a C-ordered array "
				"(np.ascontiguousarray)"
			      : "fortran_order is not False");
}

static int read_dict(np_scan *s, attnrt_st_tensor *t)
{
	unsigned seen = 0;
	if (!take(s, '{'))
		return bad(s, "not a dict");
	while (!take(s, '}')) {
		int code = read_pair(s, t, &seen);
		if (code != ATTNRT_OK)
			return code;
		if (!take(s, ',') && !take(s, '}'))
			return bad(s, "expected , or } after a value");
		else if (s->h[s->at - 1] == '}')
			break;
	}
	skip_space(s);
	if (s->at != s->n)
		return bad(s, "text after the dict");
	return seen == 7 ? ATTNRT_OK
			 : bad(s, !(seen & 1)   ? "no descr"
				  : !(seen & 2) ? "no fortran_order"
						: "no shape");
}

/* The data after the header: exactly the shape's bytes. */
static int check_data(const attnrt_st_tensor *t, size_t have, char *err,
		      size_t err_size)
{
	uint64_t bytes = rt_st_dtype_size(t->dtype, strlen(t->dtype));
	for (int d = 0; d < t->rank; d++)
		if (__builtin_mul_overflow(bytes, (uint64_t)t->dims[d], &bytes))
			return rt_fail(err, err_size, ATTNRT_ERR_FORMAT,
				       ".npy: "
				       "shape has more bytes than can be counted");
	if (bytes != have)
		return rt_fail(err, err_size, ATTNRT_ERR_FORMAT,
			       ".npy: %s: %zu "
			       "bytes of data, its dtype and shape need %llu",
			       bytes > have ? "truncated"
					    : "bytes after the array",
			       have, (unsigned long long)bytes);
	return ATTNRT_OK;
}

bool rt_npy_is(const void *data, size_t len)
{
	return len >= 6 && memcmp(data, "\x93NUMPY", 6) == 0;
}

/* The magic, version and header of an .npy of file_len bytes whose first
 * have bytes (at least 12, or all of the file) are at p: into *t (its
 * data unset) and *start, the data's offset; or, when have is short of
 * the header, only *need, the bytes to see. */
static int npy_header(const unsigned char *p, size_t have, uint64_t file_len,
		      attnrt_st_tensor *t, size_t *start, size_t *need,
		      char *err, size_t err_size)
{
	memset(t, 0, sizeof *t);
	*need = 0;
	if (file_len < 10 || !rt_npy_is(p, have))
		return rt_fail(err, err_size, ATTNRT_ERR_FORMAT,
			       ".npy: %llu bytes "
			       "are too short for the magic and header length",
			       (unsigned long long)file_len);
	if (p[6] < 1 || p[6] > 3 || p[7] != 0)
		return rt_fail(err, err_size, ATTNRT_ERR_FORMAT,
			       ".npy: version "
			       "%u.%u (attnc reads 1.0, 2.0 and 3.0)",
			       p[6], p[7]);
	size_t at = p[6] == 1 ? 10 : 12;
	if (file_len < at)
		return rt_fail(err, err_size, ATTNRT_ERR_FORMAT,
			       ".npy: %llu bytes "
			       "are too short for the header length",
			       (unsigned long long)file_len);
	uint64_t hl = p[8] | (uint64_t)p[9] << 8;
	if (at == 12)
		hl |= (uint64_t)p[10] << 16 | (uint64_t)p[11] << 24;
	if (hl > file_len - at)
		return rt_fail(err, err_size, ATTNRT_ERR_FORMAT,
			       ".npy: header "
			       "length %llu runs past the end of the file (%llu "
			       "bytes after it)",
			       (unsigned long long)hl,
			       (unsigned long long)(file_len - at));
	if (have < at + hl) {
		*need = at + (size_t)hl;
		return ATTNRT_OK;
	}
	np_scan s = {(const char *)p + at, 0, (size_t)hl, err, err_size};
	*start = at + (size_t)hl;
	return read_dict(&s, t);
}

int rt_npy_parse(const void *data, size_t len, attnrt_st_tensor *t, char *err,
		 size_t err_size)
{
	const unsigned char *p = data;
	size_t start = 0, need;
	int code = npy_header(p, len, len, t, &start, &need, err, err_size);
	if (code != ATTNRT_OK)
		return code;
	t->data = p + start;
	t->bytes = len - start;
	return check_data(t, t->bytes, err, err_size);
}

int rt_npy_head(const char *head, size_t have, uint64_t file_len, size_t *need,
		char *err, size_t err_size)
{
	attnrt_st_tensor t;
	size_t start = 0;
	int code = npy_header((const unsigned char *)head, have, file_len, &t,
			      &start, need, err, err_size);
	if (code != ATTNRT_OK || *need)
		return code;
	return check_data(&t, file_len - start, err, err_size);
}
