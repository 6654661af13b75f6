/*
 * rt_file.h - writing a file whole or not at all (rt_file.c): what every
 * file attnc writes for the user goes through (checkpoints, --outputs,
 * -c's object and header, --emit, pictures).
 */
#ifndef ATTNC_RT_FILE_H
#define ATTNC_RT_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* A file being written: to a temporary file beside the target, renamed
 * over it by rt_out_commit (in place when the target exists and is not
 * a regular file: /dev/null, a FIFO). Write failures are kept in errnum
 * and reported by rt_out_commit. */
typedef struct rt_out {
	int fd;
	int errnum; /* the first write's failure, 0 if none */
	bool is_in_place;
	FILE *stream;      /* rt_out_stream's, or NULL */
	char target[4096]; /* the file replaced: path, symlinks followed */
	char tmp[4096 + 16];
} rt_out;

/* Starts writing path; ATTNRT_ERR_IO naming path (errno's reason in
 * errnum too) when the file cannot be made. Then rt_out_commit, or
 * rt_out_abort (needed only after success). */
int rt_out_open(rt_out *o, const char *path, char *err, size_t err_size);
/* Appends n bytes (after a failure, nothing). */
void rt_out_write(rt_out *o, const void *data, size_t n);
/* A stdio stream writing into o (NULL on failure, kept in errnum);
 * rt_out_commit closes it. */
FILE *rt_out_stream(rt_out *o);
/* Makes what was written the file (fsync, rename, fsync of the folder)
 * or, after any failure, removes it and fails with ATTNRT_ERR_IO:
 * "path: cannot write: <reason>" (the reason's errno in errnum). */
int rt_out_commit(rt_out *o, const char *path, char *err, size_t err_size);
/* Gives up: the target stays as it was. */
void rt_out_abort(rt_out *o);

#endif
