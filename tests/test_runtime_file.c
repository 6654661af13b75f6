/*
 * test_runtime_file.c - rt_out (runtime/rt_file.c), the writer every
 * file attnc writes for the user goes through: the new bytes replace
 * the target whole or not at all; a link's target is what is replaced;
 * a device or FIFO is written in place, never replaced by a file.
 */
#define _GNU_SOURCE /* O_CLOEXEC */
#include "rt_file.h"
#include "testutil.h"

#include "attnrt.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64], path[128];

static void setup(void)
{
	strcpy(dir, "/tmp/attnc_file_XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/f.txt", dir);
}

static void teardown(void)
{
	DIR *d = opendir(dir);
	char p[sizeof dir + 256 + 1];
	for (struct dirent *e; d && (e = readdir(d));)
		if (e->d_name[0] != '.' || strncmp(e->d_name, ".tmp", 4) == 0) {
			snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
			unlink(p);
		}
	if (d)
		closedir(d);
	rmdir(dir);
}

static void put(const char *p, const char *text)
{
	FILE *f = fopen(p, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
}

/* The file's text (at most 255 bytes) in a static buffer. */
static const char *text_of(const char *p)
{
	static char buf[256];
	FILE *f = fopen(p, "r");
	ck_assert_ptr_nonnull(f);
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = 0;
	fclose(f);
	return buf;
}

static int count_files(void)
{
	DIR *d = opendir(dir);
	int n = 0;
	for (struct dirent *e; d && (e = readdir(d));)
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	closedir(d);
	return n;
}

static int write_text(const char *p, const char *text, char *err,
		      size_t err_size)
{
	rt_out o;
	int code = rt_out_open(&o, p, err, err_size);
	if (code != ATTNRT_OK)
		return code;
	rt_out_write(&o, text, strlen(text));
	return rt_out_commit(&o, p, err, err_size);
}

START_TEST(test_a_write_replaces_the_file_and_keeps_its_mode)
{
	put(path, "old contents, longer than the new");
	ck_assert_int_eq(chmod(path, 0600), 0);
	ck_assert_int_eq(write_text(path, "new", NULL, 0), ATTNRT_OK);
	ck_assert_str_eq(text_of(path), "new");
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0600);
	ck_assert_int_eq(count_files(), 1);
}
END_TEST

START_TEST(test_a_new_file_gets_the_mode_of_the_umask)
{
	mode_t saved = umask(027);
	int code = write_text(path, "x", NULL, 0);
	umask(saved);
	ck_assert_int_eq(code, ATTNRT_OK);
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0640);
}
END_TEST

/* Limits the size of files this process writes to bytes (write(2)
 * then fails with EFBIG, as on a full disk; SIGXFSZ ignored); returns
 * the limit to restore. */
static struct rlimit limit_file_size(rlim_t bytes)
{
	struct rlimit saved, lim;
	getrlimit(RLIMIT_FSIZE, &saved);
	lim = saved;
	lim.rlim_cur = bytes;
	signal(SIGXFSZ, SIG_IGN);
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
	return saved;
}

START_TEST(test_a_write_failing_half_way_keeps_the_old_file)
{
	/* The temporary file stops after 100 bytes. */
	put(path, "old");
	char big[1000], err[256], want[256];
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = 0;
	struct rlimit saved = limit_file_size(100);
	int code = write_text(path, big, err, sizeof err);
	setrlimit(RLIMIT_FSIZE, &saved);
	ck_assert_int_eq(code, ATTNRT_ERR_IO);
	snprintf(want, sizeof want, "%s: cannot write: File too large", path);
	ck_assert_str_eq(err, want);
	ck_assert_str_eq(text_of(path), "old");
	ck_assert_int_eq(count_files(), 1);
}
END_TEST

START_TEST(test_a_failing_stream_is_reported_at_commit)
{
	put(path, "old");
	struct rlimit saved = limit_file_size(100);
	rt_out o;
	char err[256];
	ck_assert_int_eq(rt_out_open(&o, path, err, sizeof err), ATTNRT_OK);
	FILE *f = rt_out_stream(&o);
	ck_assert_ptr_nonnull(f);
	for (int i = 0; i < 100; i++)
		fprintf(f, "line %d of the new file\n", i);
	int code = rt_out_commit(&o, path, err, sizeof err);
	setrlimit(RLIMIT_FSIZE, &saved);
	ck_assert_int_eq(code, ATTNRT_ERR_IO);
	ck_assert_int_eq(o.errnum, EFBIG);
	ck_assert_str_eq(text_of(path), "old");
	ck_assert_int_eq(count_files(), 1);
}
END_TEST

START_TEST(test_a_stream_writes_the_file)
{
	rt_out o;
	ck_assert_int_eq(rt_out_open(&o, path, NULL, 0), ATTNRT_OK);
	FILE *f = rt_out_stream(&o);
	ck_assert_ptr_nonnull(f);
	fprintf(f, "%s %d", "seven", 7);
	ck_assert_int_eq(rt_out_commit(&o, path, NULL, 0), ATTNRT_OK);
	ck_assert_str_eq(text_of(path), "seven 7");
}
END_TEST

START_TEST(test_an_aborted_write_leaves_the_file_as_it_was)
{
	put(path, "old");
	rt_out o;
	ck_assert_int_eq(rt_out_open(&o, path, NULL, 0), ATTNRT_OK);
	rt_out_write(&o, "new", 3);
	fputs("more", rt_out_stream(&o));
	rt_out_abort(&o);
	ck_assert_str_eq(text_of(path), "old");
	ck_assert_int_eq(count_files(), 1);
}
END_TEST

START_TEST(test_a_link_is_followed_and_stays_a_link)
{
	char link[160];
	snprintf(link, sizeof link, "%s/link", dir);
	put(path, "old");
	ck_assert_int_eq(symlink("f.txt", link), 0);
	ck_assert_int_eq(write_text(link, "new", NULL, 0), ATTNRT_OK);
	struct stat st;
	ck_assert_int_eq(lstat(link, &st), 0);
	ck_assert(S_ISLNK(st.st_mode));
	ck_assert_str_eq(text_of(path), "new");
	ck_assert_int_eq(count_files(), 2);
}
END_TEST

START_TEST(test_a_fifo_is_written_in_place)
{
	/* Renaming over a FIFO (or /dev/null, as root) would put a file in
	 * its place: the bytes go into it instead. */
	char fifo[160];
	snprintf(fifo, sizeof fifo, "%s/fifo", dir);
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	int rd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	ck_assert_int_ge(rd, 0);
	ck_assert_int_eq(write_text(fifo, "through", NULL, 0), ATTNRT_OK);
	char buf[16] = {0};
	ck_assert_int_eq(read(rd, buf, sizeof buf - 1), 7);
	ck_assert_str_eq(buf, "through");
	close(rd);
	struct stat st;
	ck_assert_int_eq(lstat(fifo, &st), 0);
	ck_assert(S_ISFIFO(st.st_mode));
	ck_assert_int_eq(count_files(), 1);
}
END_TEST

START_TEST(test_a_missing_folder_says_so)
{
	char bad[160], err[256], want[256];
	snprintf(bad, sizeof bad, "%s/nowhere/x", dir);
	rt_out o;
	ck_assert_int_eq(rt_out_open(&o, bad, err, sizeof err), ATTNRT_ERR_IO);
	ck_assert_int_eq(o.errnum, ENOENT);
	snprintf(want, sizeof want,
		 "%s: cannot create a temporary file: No such file or "
		 "directory",
		 bad);
	ck_assert_str_eq(err, want);
}
END_TEST

START_TEST(test_a_write_removes_what_a_killed_write_left)
{
	char stale[160], other[160];
	snprintf(stale, sizeof stale, "%s.tmp-abc123", path);
	snprintf(other, sizeof other, "%s/g.txt.tmp-abc123", dir);
	put(stale, "half");
	put(other, "another file's");
	ck_assert_int_eq(write_text(path, "new", NULL, 0), ATTNRT_OK);
	ck_assert_int_eq(access(stale, F_OK), -1);
	ck_assert_int_eq(access(other, F_OK), 0);
	ck_assert_int_eq(count_files(), 2);
}
END_TEST

static Suite *file_suite(void)
{
	Suite *s = suite_create("runtime_file");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_a_write_replaces_the_file_and_keeps_its_mode);
	tcase_add_test(tc, test_a_new_file_gets_the_mode_of_the_umask);
	tcase_add_test(tc, test_a_write_failing_half_way_keeps_the_old_file);
	tcase_add_test(tc, test_a_failing_stream_is_reported_at_commit);
	tcase_add_test(tc, test_a_stream_writes_the_file);
	tcase_add_test(tc, test_an_aborted_write_leaves_the_file_as_it_was);
	tcase_add_test(tc, test_a_link_is_followed_and_stays_a_link);
	tcase_add_test(tc, test_a_fifo_is_written_in_place);
	tcase_add_test(tc, test_a_missing_folder_says_so);
	tcase_add_test(tc, test_a_write_removes_what_a_killed_write_left);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(file_suite());
}
