/*
 * rt_npz.c - NumPy's .npz (np.savez: a zip of NAME.npy members, each the
 * tensor NAME) and the reader of data files that takes any of three
 * formats by their first bytes: safetensors, .npy (rt_npy.c) or .npz.
 *
 * The zip is untrusted and read from its central directory, each step
 * checked before the next trusts it: the end record found in the last
 * 64 KiB + 22 bytes, one disk only, no zip64 sizes or offsets, the
 * directory inside the file and before the end record, every entry
 * whole inside it, each local header and its data before the directory,
 * no encryption, the CRC-32 of the data, and the data an .npy. Members
 * are stored (method 0); np.savez_compressed's deflated members (method
 * 8) are refused with a message that says to use np.savez. The tensors
 * point into the file's bytes; nothing is allocated beyond the file and
 * a table of its members (bounded by the directory's size).
 */
#include "rt_internal.h"

#include <stdio.h>
#include <string.h>

#define NPZ_EOCD 0x06054b50u
#define NPZ_CDIR 0x02014b50u
#define NPZ_LOCAL 0x04034b50u
#define NPZ_CDIR_SIZE 46u
#define NPZ_FULL32 0xffffffffu

static uint32_t le16(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static uint32_t le32(const unsigned char *p)
{
	return le16(p) | le16(p + 2) << 16;
}

/* The CRC-32 of zip (polynomial 0xEDB88320), by a table made per call. */
static uint32_t crc32_of(const unsigned char *p, size_t n)
{
	uint32_t table[256], c = NPZ_FULL32;
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t v = i;
		for (int k = 0; k < 8; k++)
			v = v & 1 ? 0xedb88320u ^ (v >> 1) : v >> 1;
		table[i] = v;
	}
	for (size_t i = 0; i < n; i++)
		c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
	return c ^ NPZ_FULL32;
}

typedef struct npz_reader {
	const unsigned char *p;
	size_t len;
	size_t cd, cd_end; /* the central directory */
	uint32_t n;        /* its entries */
	char *err;
	size_t err_size;
} npz_reader;

static int zip_fail(npz_reader *z, const char *what)
{
	return rt_fail(z->err, z->err_size, ATTNRT_ERR_FORMAT, ".npz: %s", what);
}

/* The end of central directory record, and what it says. */
static int read_end(npz_reader *z)
{
	size_t at = z->len < 22 ? 0 : z->len - 22 + 1, stop;
	stop = z->len > 22 + 65535 ? z->len - 22 - 65535 : 0;
	while (at-- > stop)
		if (le32(z->p + at) == NPZ_EOCD &&
		    le16(z->p + at + 20) == z->len - at - 22)
			break;
	if (z->len < 22 || at + 1 == stop || le32(z->p + at) != NPZ_EOCD)
		return zip_fail(z, "no end of central directory record (not a "
				   "zip, or truncated)");
	const unsigned char *e = z->p + at;
	if (le16(e + 4) || le16(e + 6) || le16(e + 8) != le16(e + 10))
		return zip_fail(z, "a zip spanning several disks");
	uint32_t size = le32(e + 12), off = le32(e + 16);
	if (le16(e + 10) == 0xffff || size == NPZ_FULL32 || off == NPZ_FULL32)
		return zip_fail(z, "a zip64 archive (over 4 GiB or 65535 "
				   "members): attnc reads plain zips");
	if ((uint64_t)off + size > at)
		return zip_fail(z, "the central directory runs past its end "
				   "record");
	z->cd = off;
	z->cd_end = (size_t)off + size;
	z->n = le16(e + 10);
	if ((uint64_t)z->n * NPZ_CDIR_SIZE > size)
		return zip_fail(z, "the central directory is too short for its "
				   "entries");
	return ATTNRT_OK;
}

/* What is wrong with the directory entry c of a member named name
 * (nlen bytes), or NULL. */
static const char *entry_fault(const unsigned char *c, const char *name,
			       uint32_t nlen)
{
	uint32_t method = le16(c + 10);
	if (le16(c + 8) & 0x41)
		return "is encrypted";
	if (le32(c + 20) == NPZ_FULL32 || le32(c + 24) == NPZ_FULL32 ||
	    le32(c + 42) == NPZ_FULL32)
		return "has zip64 sizes (over 4 GiB)";
	if (le16(c + 34))
		return "starts on another disk";
	if (method == 8)
		return "is deflated (np.savez_compressed); attnc reads stored "
		       "members: save with np.savez";
	if (method)
		return "is compressed (not by np.savez); attnc reads stored "
		       "members";
	if (le32(c + 20) != le32(c + 24))
		return "is stored with two different sizes";
	if (nlen < 5 || memcmp(name + nlen - 4, ".npy", 4) != 0)
		return "is not NAME.npy";
	return NULL;
}

/* What is wrong with the local header and data of the member of entry
 * c, or NULL with *data where its bytes start. */
static const char *local_fault(const npz_reader *z, const unsigned char *c,
			       size_t *data)
{
	uint32_t lho = le32(c + 42), size = le32(c + 20);
	if ((uint64_t)lho + 30 > z->cd || le32(z->p + lho) != NPZ_LOCAL)
		return "has no local header where the directory says";
	*data = (size_t)lho + 30 + le16(z->p + lho + 26) + le16(z->p + lho + 28);
	if (*data > z->cd || z->cd - *data < size)
		return "runs past the start of the central directory "
		       "(truncated)";
	if (crc32_of(z->p + *data, size) != le32(c + 16))
		return "fails its CRC-32 check (damaged)";
	return NULL;
}

/* The member whose directory entry is at *at: its name into the pool at
 * *pool_at, its tensor into t; *at moves to the next entry. */
static int read_member(npz_reader *z, size_t *at, char *pool, size_t *pool_at,
		       attnrt_st_tensor *t)
{
	const unsigned char *c = z->p + *at;
	if (z->cd_end - *at < NPZ_CDIR_SIZE || le32(c) != NPZ_CDIR)
		return zip_fail(z, "a damaged central directory entry");
	uint32_t nlen = le16(c + 28), skip = nlen + le16(c + 30) + le16(c + 32);
	if (z->cd_end - *at - NPZ_CDIR_SIZE < skip)
		return zip_fail(z, "a central directory entry runs past the "
				   "directory");
	const char *name = (const char *)c + NPZ_CDIR_SIZE;
	*at += NPZ_CDIR_SIZE + skip;
	char what[160];
	size_t data = 0;
	const char *fault = entry_fault(c, name, nlen);
	if (!fault)
		fault = local_fault(z, c, &data);
	if (!fault && rt_npy_parse(z->p + data, le32(c + 20), t, what,
				   sizeof what) != ATTNRT_OK)
		fault = what;
	if (fault)
		return rt_fail(z->err, z->err_size, ATTNRT_ERR_FORMAT,
			       ".npz: "
			       "member '%.*s' %s",
			       (int)(nlen < 64 ? nlen : 64), name, fault);
	memcpy(pool + *pool_at, name, nlen - 4);
	pool[*pool_at + nlen - 4] = 0;
	t->name = pool + *pool_at;
	*pool_at += nlen - 3;
	return ATTNRT_OK;
}

static int npz_parse(const attnrt_allocator *al, const void *data, size_t len,
		     attnrt_st_file **out, char *err, size_t err_size)
{
	npz_reader z = {data, len, 0, 0, 0, err, err_size};
	int code = read_end(&z);
	if (code != ATTNRT_OK)
		return code;
	attnrt_st_tensor *ts = rt_mem_alloc(al, (z.n + 1) * sizeof *ts);
	char *pool = rt_mem_alloc(al, z.cd_end - z.cd + 1);
	if (!ts || !pool) {
		rt_mem_free(al, ts);
		rt_mem_free(al, pool);
		return rt_fail(err, err_size, ATTNRT_ERR_NOMEM, "out of memory");
	}
	size_t at = z.cd, pool_at = 0;
	for (uint32_t i = 0; code == ATTNRT_OK && i < z.n; i++)
		code = read_member(&z, &at, pool, &pool_at, &ts[i]);
	if (code != ATTNRT_OK) {
		rt_mem_free(al, ts);
		rt_mem_free(al, pool);
		return code;
	}
	return rt_st_adopt(al, ts, z.n, pool, out, err, err_size);
}

/* An .npy's one array: a file of one tensor named "". */
static int npy_file(const attnrt_allocator *al, const void *data, size_t len,
		    attnrt_st_file **out, char *err, size_t err_size)
{
	attnrt_st_tensor *t = rt_mem_alloc(al, sizeof *t);
	char *pool = rt_mem_alloc(al, 1);
	int code = t && pool ? rt_npy_parse(data, len, t, err, err_size)
			     : rt_fail(err, err_size, ATTNRT_ERR_NOMEM,
				       "out of memory");
	if (code != ATTNRT_OK) {
		rt_mem_free(al, t);
		rt_mem_free(al, pool);
		return code;
	}
	pool[0] = 0;
	t->name = pool;
	return rt_st_adopt(al, t, 1, pool, out, err, err_size);
}

int attnrt_np_parse(const attnrt_allocator *al, const void *data, size_t len,
		    attnrt_st_file **out, char *err, size_t err_size)
{
	*out = NULL;
	if (len && !data)
		return rt_fail(err, err_size, ATTNRT_ERR_ARG, "no data");
	if (rt_npy_is(data, len))
		return npy_file(al, data, len, out, err, err_size);
	return npz_parse(al, data, len, out, err, err_size);
}

/* Zip's first bytes: a local header, or the end record of an empty zip. */
static bool is_zip(const char *p, size_t len)
{
	return len >= 4 &&
	       (memcmp(p, "PK\3\4", 4) == 0 || memcmp(p, "PK\5\6", 4) == 0);
}

int rt_tensors_head(const attnrt_allocator *al, const char *head, size_t have,
		    uint64_t file_len, size_t *need, char *err, size_t err_size)
{
	*need = 0;
	if (file_len == 0 || is_zip(head, have))
		return ATTNRT_OK; /* a zip's directory is at its end */
	if (rt_npy_is(head, have))
		return rt_npy_head(head, have, file_len, need, err, err_size);
	return rt_st_head(al, head, have, file_len, need, err, err_size);
}

int attnrt_tensors_read(const attnrt_allocator *al, const char *path,
			uint64_t max_bytes, attnrt_st_file **out, char *err,
			size_t err_size)
{
	*out = NULL;
	if (!path)
		return rt_fail(err, err_size, ATTNRT_ERR_ARG, "no path");
	char *data;
	size_t len;
	int code = rt_read_file(al, path, max_bytes, rt_tensors_head, &data,
				&len, err, err_size);
	if (code == ATTNRT_OK && len == 0)
		code = rt_fail(err, err_size, ATTNRT_ERR_FORMAT,
			       "%s: an empty "
			       "file (not safetensors, .npy or .npz)",
			       path);
	else if (code == ATTNRT_OK) {
		code = rt_npy_is(data, len) || is_zip(data, len)
			       ? attnrt_np_parse(al, data, len, out, err,
						 err_size)
			       : attnrt_st_parse(al, data, len, out, err,
						 err_size);
		if (code != ATTNRT_OK && code != ATTNRT_ERR_NOMEM)
			rt_prefix_path(path, err, err_size);
	}
	if (code != ATTNRT_OK) {
		rt_mem_free(al, data);
		return code;
	}
	rt_st_own(*out, data);
	return ATTNRT_OK;
}
