/*
 * rt_ckpt_shape.c - the shapes of a safetensors file's tensors, from its
 * header alone (rt_ckpt.h): the 8-byte little-endian length, then that
 * many bytes of JSON, an object whose members other than __metadata__
 * are {"dtype", "shape", "data_offsets"}. The data are never read, so a
 * checkpoint of any size costs one small read.
 */
#include "rt_ckpt.h"
#include "rt_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CKPT_MAX_HEADER 100000000u /* as the safetensors package */

/* Reads the JSON header of the file at path into doc. */
static int read_header(const attnrt_allocator *al, const char *path,
		       rt_json_doc *doc, char *err, size_t err_size)
{
	/* As rt_read_file: a regular file only, opened without blocking
	 * (a FIFO no program writes to would block open() forever). */
	struct stat st;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return rt_fail_errno(err, err_size, errno, "%s", path);
	if (fstat(fd, &st) != 0) {
		int e = errno;
		close(fd);
		return rt_fail_errno(err, err_size, e, "%s", path);
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return rt_fail(err, err_size, ATTNRT_ERR_IO, "%s: not a file",
			       path);
	}
	FILE *f = fdopen(fd, "rb");
	if (!f) {
		int e = errno;
		close(fd);
		return rt_fail_errno(err, err_size, e, "%s", path);
	}
	unsigned char len8[8];
	uint64_t n = 0;
	char *text = NULL;
	int code = ATTNRT_OK;
	if (fread(len8, 1, 8, f) != 8)
		code = rt_fail(err, err_size, ATTNRT_ERR_FORMAT,
			       "%s: too short "
			       "for a safetensors header",
			       path);
	for (int i = 7; code == ATTNRT_OK && i >= 0; i--)
		n = n << 8 | len8[i];
	if (code == ATTNRT_OK && n > CKPT_MAX_HEADER)
		code = rt_fail(err, err_size, ATTNRT_ERR_FORMAT,
			       "%s: header "
			       "length %llu is beyond what safetensors allows",
			       path, (unsigned long long)n);
	if (code == ATTNRT_OK && !(text = rt_mem_alloc(al, (size_t)n)))
		code = rt_fail(err, err_size, ATTNRT_ERR_NOMEM, "out of memory");
	if (code == ATTNRT_OK && fread(text, 1, (size_t)n, f) != n)
		code = rt_fail(err, err_size, ATTNRT_ERR_FORMAT,
			       "%s: the header "
			       "runs past the end of the file",
			       path);
	fclose(f);
	if (code == ATTNRT_OK)
		code = rt_json_parse(doc, al, text, (size_t)n, err, err_size);
	if (code == ATTNRT_OK && doc->nodes[0].kind != RT_JSON_OBJECT)
		code = rt_fail(err, err_size, ATTNRT_ERR_FORMAT,
			       "%s: the header "
			       "is not a JSON object",
			       path);
	rt_mem_free(al, text);
	return code;
}

/* The member of object o named key, or NULL. */
static const rt_json_node *member(const rt_json_doc *d, const rt_json_node *o,
				  const char *key)
{
	size_t n = strlen(key);
	for (uint32_t c = o->first; c != RT_JSON_NONE; c = d->nodes[c].next)
		if (d->nodes[c].key_len == n &&
		    memcmp(rt_json_key(d, &d->nodes[c]), key, n) == 0)
			return &d->nodes[c];
	return NULL;
}

/* The shape of tensor t into rank and dims (rank -1 if not one). */
static int read_shape(const rt_json_doc *d, const rt_json_node *t,
		      const char *name, int *rank, int64_t *dims, char *err,
		      size_t err_size)
{
	const rt_json_node *s = t->kind == RT_JSON_OBJECT ? member(d, t, "shape")
							  : NULL;
	if (!s || s->kind != RT_JSON_ARRAY)
		return rt_fail(err, err_size, ATTNRT_ERR_FORMAT,
			       "%s: no shape "
			       "list",
			       name);
	*rank = s->n_children <= 6 ? (int)s->n_children : -1;
	int k = 0;
	for (uint32_t c = s->first; c != RT_JSON_NONE && *rank >= 0;
	     c = d->nodes[c].next) {
		uint64_t v;
		if (!rt_json_get_u64(d, &d->nodes[c], &v) || v > INT64_MAX)
			return rt_fail(err, err_size, ATTNRT_ERR_FORMAT,
				       "%s: the "
				       "shape holds something other than sizes",
				       name);
		dims[k++] = (int64_t)v;
	}
	return ATTNRT_OK;
}

int rt_ckpt_shapes(const attnrt_allocator *al, const char *path,
		   const char *const *names, size_t n, int *ranks,
		   int64_t (*dims)[6], char *err, size_t err_size)
{
	rt_json_doc doc;
	memset(&doc, 0, sizeof doc);
	int code = read_header(al, path, &doc, err, err_size);
	for (size_t i = 0; i < n && code == ATTNRT_OK; i++) {
		const rt_json_node *t = member(&doc, &doc.nodes[0], names[i]);
		ranks[i] = -1;
		if (t && strcmp(names[i], "__metadata__") != 0)
			code = read_shape(&doc, t, names[i], &ranks[i], dims[i],
					  err, err_size);
	}
	rt_json_fini(&doc);
	return code;
}
