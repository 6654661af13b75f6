/*
 * rt_file.c - writing a file whole or not at all: every file attnc
 * writes for the user (checkpoints, --outputs, -c's object and header,
 * --emit, pictures) goes through it.
 *
 * The bytes go to a temporary file beside the target (TARGET.tmp-XXXXXX),
 * which is fsync'ed and renamed over the target, then the directory is
 * fsync'ed; any failure removes the temporary file and leaves the target
 * as it was. A write killed before its rename leaves its temporary file:
 * the next write of the same target removes every such file first.
 *
 * The target is the file path names: a symbolic link is followed (the
 * file it points to is replaced, the link stays). A path naming
 * something that is not a regular file (/dev/null, a FIFO, a terminal)
 * is written in place: renaming over it would replace a device node
 * with a file.
 */
#define _GNU_SOURCE /* fopencookie: rt_out_stream */
#include "rt_file.h"
#include "rt_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Removes what a write killed half-way left beside target: files named
 * as its temporary files are (TARGET.tmp- and 6 characters). Best
 * effort. */
static void remove_stale(const char *target)
{
	const char *slash = strrchr(target, '/');
	const char *base = slash ? slash + 1 : target;
	size_t n_dir = slash ? (size_t)(slash - target) + 1 : 0,
	       n_base = strlen(base);
	char dir[PATH_MAX], file[PATH_MAX];
	if (n_dir + n_base + sizeof ".tmp-XXXXXX" > sizeof file)
		return;
	memcpy(dir, slash ? target : ".", slash ? n_dir : 1);
	dir[slash ? n_dir : 1] = 0;
	DIR *d = opendir(dir);
	for (struct dirent *e; d && (e = readdir(d));) {
		const char *name = e->d_name;
		if (strlen(name) != n_base + 11 ||
		    strncmp(name, base, n_base) != 0 ||
		    strncmp(name + n_base, ".tmp-", 5) != 0)
			continue;
		memcpy(file, target, n_dir);
		memcpy(file + n_dir, name, n_base + 12);
		unlink(file);
	}
	if (d)
		closedir(d);
}

/* fsync the directory holding path, so the rename survives a crash;
 * best effort (the new file is in place already). */
static void sync_dir(const char *path)
{
	const char *slash = strrchr(path, '/');
	size_t n = !slash ? 1 : slash == path ? 1 : (size_t)(slash - path);
	char dir[PATH_MAX];
	memcpy(dir, slash ? path : ".", n);
	dir[n] = 0;
	int fd = open(dir, O_RDONLY);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

/* The mode a new file gets from open(..., 0666): the umask applied. */
static mode_t new_file_mode(void)
{
	mode_t mask = umask(022);
	umask(mask);
	return 0666 & ~mask;
}

int rt_out_open(rt_out *o, const char *path, char *err, size_t err_size)
{
	memset(o, 0, sizeof *o);
	o->fd = -1;
	if (strlen(path) >= sizeof o->target)
		return o->errnum = ENAMETOOLONG,
		       rt_fail(err, err_size, ATTNRT_ERR_IO,
			       "%s: path too long", path);
	strcpy(o->target, path);
	struct stat st;
	bool exists = stat(path, &st) == 0;
	if (exists && !S_ISREG(st.st_mode)) {
		o->is_in_place = true;
		o->fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
		if (o->fd < 0)
			return o->errnum = errno,
			       rt_fail_errno(err, err_size, o->errnum,
					     "%s: cannot write", path);
		return ATTNRT_OK;
	}
	/* A link to a file: the file is what gets replaced. */
	char real[PATH_MAX];
	if (exists && realpath(path, real) && strlen(real) < sizeof o->target)
		strcpy(o->target, real);
	snprintf(o->tmp, sizeof o->tmp, "%s.tmp-XXXXXX", o->target);
	remove_stale(o->target);
	o->fd = mkstemp(o->tmp);
	if (o->fd < 0)
		return o->errnum = errno,
		       rt_fail_errno(err, err_size, o->errnum,
				     "%s: cannot create a temporary file", path);
	/* A replaced file keeps its permissions; a new one gets fopen's. */
	mode_t mode = exists ? st.st_mode & 07777 : new_file_mode();
	if (fchmod(o->fd, mode) != 0)
		o->errnum = errno;
	return ATTNRT_OK;
}

void rt_out_write(rt_out *o, const void *data, size_t n)
{
	const char *p = data;
	while (n && !o->errnum) {
		ssize_t k = write(o->fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			o->errnum = k == 0 ? EIO : errno;
			return;
		}
		p += k;
		n -= (size_t)k;
	}
}

/* fopencookie's write: into the rt_out, a short count on failure. */
static ssize_t stream_write(void *cookie, const char *buf, size_t size)
{
	rt_out *o = cookie;
	rt_out_write(o, buf, size);
	if (o->errnum) {
		errno = o->errnum;
		return 0;
	}
	return (ssize_t)size;
}

FILE *rt_out_stream(rt_out *o)
{
	if (!o->stream) {
		cookie_io_functions_t io = {.write = stream_write};
		o->stream = fopencookie(o, "w", io);
		if (!o->stream && !o->errnum)
			o->errnum = errno ? errno : ENOMEM;
	}
	return o->stream;
}

int rt_out_commit(rt_out *o, const char *path, char *err, size_t err_size)
{
	if (o->stream) {
		if (fclose(o->stream) != 0 && !o->errnum)
			o->errnum = errno ? errno : EIO;
		o->stream = NULL;
	}
	/* fsync: the data is on disk before the rename makes it the file
	 * (a device or FIFO has nothing to sync). */
	if (!o->errnum && !o->is_in_place && fsync(o->fd) != 0)
		o->errnum = errno;
	if (close(o->fd) != 0 && !o->errnum && errno != EINTR)
		o->errnum = errno;
	o->fd = -1;
	if (!o->errnum && !o->is_in_place && rename(o->tmp, o->target) != 0)
		o->errnum = errno;
	if (o->errnum) {
		if (!o->is_in_place)
			unlink(o->tmp);
		return rt_fail_errno(err, err_size, o->errnum,
				     "%s: cannot write", path);
	}
	if (!o->is_in_place)
		sync_dir(o->target);
	return ATTNRT_OK;
}

void rt_out_abort(rt_out *o)
{
	if (o->stream)
		fclose(o->stream);
	o->stream = NULL;
	if (o->fd >= 0)
		close(o->fd);
	o->fd = -1;
	if (!o->is_in_place && o->tmp[0])
		unlink(o->tmp);
}
