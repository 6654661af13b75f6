/*
 * rt_alloc.c - every allocation of libattnrt goes through one hook (the
 * caller's attnrt_allocator, or the C library's), so tests can make any
 * allocation fail; the 64-byte aligned blocks that hold parameters and
 * scratch memory; and the error-message helper of the library.
 */
#define _DEFAULT_SOURCE /* madvise's MADV_HUGEPAGE */
#include "rt_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void *libc_realloc(void *ptr, size_t size)
{
	if (size == 0) {
		free(ptr);
		return NULL;
	}
	return realloc(ptr, size);
}

void *rt_mem_realloc(const attnrt_allocator *al, void *ptr, size_t size)
{
	if (al && al->fn)
		return al->fn(al->ud, ptr, size);
	return libc_realloc(ptr, size);
}

bool rt_mem_grow(const attnrt_allocator *al, void **arr, size_t *cap,
		 size_t need, size_t elem_size)
{
	if (need <= *cap)
		return true;
	size_t new_cap = *cap ? *cap : 16;
	while (new_cap < need) {
		if (new_cap > SIZE_MAX / 2)
			return false;
		new_cap *= 2;
	}
	size_t bytes;
	if (__builtin_mul_overflow(new_cap, elem_size, &bytes))
		return false;
	void *p = rt_mem_realloc(al, *arr, bytes);
	if (!p)
		return false;
	*arr = p;
	*cap = new_cap;
	return true;
}

/* Blocks of at least this many bytes from the C library ask for
 * transparent huge pages: the scratch and the parameters of a model
 * of any size, not the small blocks. */
#define HUGE_BLOCK_MIN ((size_t)4 << 20)

/* Asks the kernel to back the whole pages of [p, p + size) with huge
 * pages (2 MiB on x86-64) where it can: where transparent huge pages
 * are on only for the regions that ask ("madvise", Debian's default),
 * a block is otherwise in 4 KiB pages. The sgemm reads its operands'
 * rows a page apart or more (a row of 1,024 floats is a page): each
 * row of a block it packs or prefetches was a TLB miss and a page
 * walk, which stalled the loop nest's prefetch of the next A block
 * (docs/benchmarks.md). A hint: where the kernel refuses, or has no
 * such pages, nothing changes but the speed. */
static void ask_huge_pages(char *p, size_t size)
{
#ifdef MADV_HUGEPAGE
	long page = sysconf(_SC_PAGESIZE);
	if (page <= 0)
		return;
	uintptr_t mask = (uintptr_t)page - 1;
	uintptr_t lo = ((uintptr_t)p + mask) & ~mask;
	uintptr_t hi = ((uintptr_t)p + size) & ~mask;
	if (hi > lo)
		(void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
	(void)p;
	(void)size;
#endif
}

/* The block is over-allocated by ATTNRT_ALIGN plus a pointer; the pointer
 * the hook gave is kept just below the aligned address. */
void *attnrt_alloc(const attnrt_allocator *al, size_t size)
{
	size_t extra = ATTNRT_ALIGN + sizeof(void *);
	if (size > SIZE_MAX - extra)
		return NULL;
	char *raw = rt_mem_realloc(al, NULL, size + extra);
	if (!raw)
		return NULL;
	if (!(al && al->fn) && size >= HUGE_BLOCK_MIN)
		ask_huge_pages(raw, size + extra);
	uintptr_t at = ((uintptr_t)raw + sizeof(void *) + ATTNRT_ALIGN - 1) &
		       ~(uintptr_t)(ATTNRT_ALIGN - 1);
	char *block = raw + (at - (uintptr_t)raw);
	memcpy(block - sizeof(void *), &raw, sizeof raw);
	memset(block, 0, size);
	return block;
}

void attnrt_free(const attnrt_allocator *al, void *block)
{
	if (!block)
		return;
	void *raw;
	memcpy(&raw, (char *)block - sizeof raw, sizeof raw);
	rt_mem_realloc(al, raw, 0);
}

int rt_fail(char *err, size_t err_size, int code, const char *fmt, ...)
{
	if (err && err_size) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, err_size, fmt, ap);
		va_end(ap);
	}
	return code;
}

int rt_fail_errno(char *err, size_t err_size, int errnum, const char *fmt, ...)
{
	if (!err || !err_size)
		return ATTNRT_ERR_IO;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, err_size, fmt, ap);
	va_end(ap);
	size_t n = strlen(err);
	if (n + 2 < err_size) {
		memcpy(err + n, ": ", 3);
		if (strerror_r(errnum, err + n + 2, err_size - n - 2) != 0)
			snprintf(err + n + 2, err_size - n - 2, "error %d",
				 errnum);
	}
	return ATTNRT_ERR_IO;
}

const char *attnrt_strerror(int code)
{
	switch (code & 0xff) {
	case ATTNRT_OK:
		return "ok";
	case ATTNRT_ERR_INDEX:
		return "index out of range";
	case ATTNRT_ERR_NOMEM:
		return "out of memory";
	case ATTNRT_ERR_IO:
		return "input/output error";
	case ATTNRT_ERR_FORMAT:
		return "malformed or truncated file";
	case ATTNRT_ERR_MISMATCH:
		return "checkpoint does not fit the model";
	case ATTNRT_ERR_ARG:
		return "invalid argument";
	case ATTNRT_ERR_OVERLAP:
		return "an output overlaps an input, params or another output";
	}
	return "unknown error";
}
