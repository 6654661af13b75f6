/*
 * cg_cache.c - the persistent cache of compiled objects (docs/codegen.md,
 * "The object cache"): one file per module, named by a 128-bit hash of
 * the module's unoptimized bitcode and of everything else that decides
 * its machine code (LLVM's version, the target triple, CPU and
 * features, how the JIT compiles it), holding the PIC objects that
 * optimizing and compiling that module gave (one per part or unit of
 * it); and one file per unit of a module (cg_units.c), named by the
 * hash of the unit's own IR, holding its object.
 *
 * A file is a header (magic, key, payload length, 128-bit hash of the
 * payload) and the payload: the objects of the module's parts
 * (cg_objects_pack), which the JIT links together, or a unit's object.
 * A reader trusts nothing it did not check: a file whose magic, key,
 * length or hash is wrong is a miss, so the module (or unit) is
 * compiled again and the file replaced. Writers write a temporary file
 * in the same directory and rename it over the name, so a reader sees
 * a whole file or none; two processes storing one key store the same
 * bytes. Failing to store is no error: the cache only saves time.
 */
#include "cg_internal.h"

#include <llvm-c/BitWriter.h>
#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "ATTNCOB1"
#define HEADER_BYTES (8 + CG_CACHE_KEY_BYTES + 8 + CG_CACHE_KEY_BYTES)
/* Larger files are not objects this cache wrote. */
#define MAX_OBJECT_BYTES ((uint64_t)1 << 30)

typedef struct hasher {
	uint64_t a, b; /* FNV-1a 64, and a multiply-xorshift lane */
} hasher;

static hasher hash_begin(void)
{
	return (hasher){0xcbf29ce484222325ull, 0x243f6a8885a308d3ull};
}

static void hash_bytes(hasher *h, const void *data, size_t n)
{
	const unsigned char *p = data;
	uint64_t a = h->a, b = h->b;
	for (size_t i = 0; i < n; i++) {
		a = (a ^ p[i]) * 0x100000001b3ull;
		b = (b + p[i] + 1) * 0x9e3779b97f4a7c15ull;
		b ^= b >> 29;
	}
	h->a = a;
	h->b = b;
}

/* Hashes a string with its terminating NUL, so fields cannot run into
 * one another. */
static void hash_str(hasher *h, const char *s)
{
	hash_bytes(h, s ? s : "", strlen(s ? s : "") + 1);
}

static void hash_end(const hasher *h, unsigned char out[CG_CACHE_KEY_BYTES])
{
	for (int i = 0; i < 8; i++) {
		out[i] = (unsigned char)(h->a >> (8 * i));
		out[8 + i] = (unsigned char)(h->b >> (8 * i));
	}
}

void cg_cache_key(LLVMMemoryBufferRef bc, LLVMTargetMachineRef tm,
		  const char *pipeline, unsigned char key[CG_CACHE_KEY_BYTES])
{
	hasher h = hash_begin();
	unsigned major, minor, patch;
	LLVMGetVersion(&major, &minor, &patch);
	char version[64];
	snprintf(version, sizeof version, "attnc-cache-2 llvm %u.%u.%u", major,
		 minor, patch);
	hash_str(&h, version);
	char *s[3] = {LLVMGetTargetMachineTriple(tm),
		      LLVMGetTargetMachineCPU(tm),
		      LLVMGetTargetMachineFeatureString(tm)};
	for (int i = 0; i < 3; i++) {
		hash_str(&h, s[i]);
		LLVMDisposeMessage(s[i]);
	}
	hash_str(&h, pipeline);
	hash_bytes(&h, LLVMGetBufferStart(bc), LLVMGetBufferSize(bc));
	hash_end(&h, key);
}

/* dir/<32 hex digits>.o (a program) or .part.o (a unit) into path. */
static bool entry_path(const char *dir, const unsigned char *key, bool is_part,
		       char *path, size_t size)
{
	char hex[2 * CG_CACHE_KEY_BYTES + 1];
	for (int i = 0; i < CG_CACHE_KEY_BYTES; i++)
		snprintf(hex + 2 * i, 3, "%02x", key[i]);
	int n = snprintf(path, size, "%s/%s%s", dir, hex,
			 is_part ? ".part.o" : ".o");
	return n > 0 && (size_t)n < size;
}

static void put_u64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static void hash_object(const char *data, size_t len,
			unsigned char out[CG_CACHE_KEY_BYTES])
{
	hasher h = hash_begin();
	hash_bytes(&h, data, len);
	hash_end(&h, out);
}

/* Reads the whole regular file at path (at most max bytes); NULL if it
 * is missing, unreadable or larger. */
static unsigned char *read_file(const char *path, size_t max, size_t *len)
{
	FILE *fp = fopen(path, "rb");
	if (!fp)
		return NULL;
	struct stat st;
	unsigned char *buf = NULL;
	if (fstat(fileno(fp), &st) == 0 && S_ISREG(st.st_mode) &&
	    (uint64_t)st.st_size <= max) {
		size_t n = (size_t)st.st_size;
		buf = malloc(n + 1);
		if (buf && fread(buf, 1, n, fp) != n) {
			free(buf);
			buf = NULL;
		}
		*len = n;
	}
	fclose(fp);
	return buf;
}

cg_cache_result cg_cache_load(const char *dir,
			      const unsigned char key[CG_CACHE_KEY_BYTES],
			      bool is_part, char **data, size_t *len)
{
	char path[4096];
	if (!entry_path(dir, key, is_part, path, sizeof path))
		return CG_CACHE_MISS;
	if (access(path, F_OK) != 0)
		return CG_CACHE_MISS;
	size_t n = 0;
	unsigned char *buf = read_file(path, HEADER_BYTES + MAX_OBJECT_BYTES,
				       &n);
	if (!buf)
		return CG_CACHE_CORRUPT;
	unsigned char sum[CG_CACHE_KEY_BYTES];
	const unsigned char *k = buf + 8, *l = k + CG_CACHE_KEY_BYTES;
	const unsigned char *s = l + 8, *obj = s + CG_CACHE_KEY_BYTES;
	bool ok = n >= HEADER_BYTES && memcmp(buf, MAGIC, 8) == 0 &&
		  memcmp(k, key, CG_CACHE_KEY_BYTES) == 0 &&
		  get_u64(l) == n - HEADER_BYTES;
	if (ok) {
		hash_object((const char *)obj, n - HEADER_BYTES, sum);
		ok = memcmp(sum, s, CG_CACHE_KEY_BYTES) == 0;
	}
	if (!ok) {
		free(buf);
		return CG_CACHE_CORRUPT;
	}
	*len = n - HEADER_BYTES;
	memmove(buf, obj, *len);
	*data = (char *)buf;
	return CG_CACHE_HIT;
}

/* mkdir -p of dir (mode 0700: the objects are code this user runs). */
static bool make_dirs(const char *dir)
{
	char p[4096];
	int n = snprintf(p, sizeof p, "%s", dir);
	if (n <= 0 || (size_t)n >= sizeof p)
		return false;
	for (char *c = p + 1; *c; c++) {
		if (*c != '/')
			continue;
		*c = '\0';
		if (mkdir(p, 0700) != 0 && errno != EEXIST)
			return false;
		*c = '/';
	}
	return mkdir(p, 0700) == 0 || errno == EEXIST;
}

static bool write_all(int fd, const void *data, size_t n)
{
	const char *p = data;
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

bool cg_cache_store(const char *dir, const unsigned char key[CG_CACHE_KEY_BYTES],
		    bool is_part, const char *data, size_t len)
{
	char path[4096], tmp[4096 + 16];
	if (!entry_path(dir, key, is_part, path, sizeof path) || !make_dirs(dir))
		return false;
	snprintf(tmp, sizeof tmp, "%s/.tmp.XXXXXX", dir);
	int fd = mkstemp(tmp);
	if (fd < 0)
		return false;
	unsigned char head[HEADER_BYTES];
	memcpy(head, MAGIC, 8);
	memcpy(head + 8, key, CG_CACHE_KEY_BYTES);
	put_u64(head + 8 + CG_CACHE_KEY_BYTES, (uint64_t)len);
	hash_object(data, len, head + 16 + CG_CACHE_KEY_BYTES);
	bool ok = write_all(fd, head, sizeof head) && write_all(fd, data, len);
	ok = close(fd) == 0 && ok;
	ok = ok && rename(tmp, path) == 0;
	if (!ok)
		unlink(tmp);
	return ok;
}

/* The payload: the number of objects n, n lengths (each 8 bytes, little
 * endian), then the objects one after the other. */
char *cg_objects_pack(const cg_objects *o, size_t *len)
{
	size_t n = 8 + 8 * (size_t)o->n;
	for (uint32_t i = 0; i < o->n; i++)
		n += o->len[i];
	char *out = malloc(n);
	if (!out)
		return NULL;
	put_u64((unsigned char *)out, o->n);
	size_t at = 8 + 8 * (size_t)o->n;
	for (uint32_t i = 0; i < o->n; i++) {
		put_u64((unsigned char *)out + 8 + 8 * i, o->len[i]);
		memcpy(out + at, o->data[i], o->len[i]);
		at += o->len[i];
	}
	*len = n;
	return out;
}

static bool objects_reserve(cg_objects *o, uint64_t n)
{
	if (n <= o->cap)
		return true;
	uint64_t cap = o->cap ? 2 * (uint64_t)o->cap : 8;
	cap = cap < n ? n : cap;
	char **data = realloc(o->data, cap * sizeof *data);
	if (data)
		o->data = data;
	size_t *len = realloc(o->len, cap * sizeof *len);
	if (len)
		o->len = len;
	if (!data || !len)
		return false;
	o->cap = (uint32_t)cap;
	return true;
}

bool cg_objects_add(cg_objects *o, char *data, size_t len)
{
	if (!objects_reserve(o, (uint64_t)o->n + 1)) {
		free(data);
		return false;
	}
	o->data[o->n] = data;
	o->len[o->n++] = len;
	return true;
}

void cg_objects_free(cg_objects *o)
{
	for (uint32_t i = 0; !o->block && i < o->n; i++)
		free(o->data[i]);
	free(o->block);
	free(o->data);
	free(o->len);
	memset(o, 0, sizeof *o);
}

bool cg_objects_unpack(char *data, size_t len, cg_objects *o)
{
	const unsigned char *p = (const unsigned char *)data;
	if (len < 8 || o->n)
		return false;
	uint64_t n = get_u64(p);
	if (n < 1 || n > (len - 8) / 8 || !objects_reserve(o, n))
		return false;
	uint64_t at = 8 + 8 * n;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t l = get_u64(p + 8 + 8 * i);
		if (l > len - at)
			return false;
		o->data[i] = data + at;
		o->len[i] = (size_t)l;
		at += l;
	}
	if (at != len)
		return false;
	o->n = (uint32_t)n;
	o->block = data;
	return true;
}
