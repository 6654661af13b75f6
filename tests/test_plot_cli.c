/*
 * test_plot_cli.c - the heatmaps attnc draws of the book's models, read
 * back as PNG with cairo: the additive and the dot-product attention of
 * d2l 11.3 show the weights of both queries of the batch (one 2 x 10
 * matrix, the book's reshape), each cell coloured as its known weight
 * says; the positional encoding (--heatmap-output P) has P[0, 1] = cos 0
 * = 1, the largest value, darkest, and P[0, 0] = sin 0 = 0 halfway.
 */
#include "plot.h"
#include "testutil.h"

#include <cairo.h>
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs attnc with args (NULL-terminated) in the source directory,
 * its output thrown away; its exit status. */
static int run_attnc(const char *const *args)
{
	const char *argv[16] = {ATTNC_BINARY_DIR "/attnc"};
	int n = 1;
	for (; args[n - 1] && n < 15; n++)
		argv[n] = args[n - 1];
	argv[n] = NULL;
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (!freopen("/dev/null", "w", stdout) ||
		    !freopen("/dev/null", "w", stderr) ||
		    chdir(ATTNC_SOURCE_DIR))
			_exit(127);
		/* execv takes char *const[] but writes no string. */
		char *cargv[sizeof argv / sizeof argv[0]];
		memcpy(cargv, argv, sizeof cargv);
		execv(cargv[0], cargv);
		_exit(127);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void temp_png(char *path, size_t size)
{
	char tmpl[] = "/tmp/attnc_plot_cli_XXXXXX";
	int fd = mkstemp(tmpl);
	ck_assert_int_ge(fd, 0);
	close(fd);
	remove(tmpl);
	snprintf(path, size, "%s.png", tmpl);
}

static unsigned pixel(cairo_surface_t *s, int x, int y)
{
	cairo_surface_flush(s);
	const unsigned char *d = cairo_image_surface_get_data(s);
	uint32_t v;
	memcpy(&v,
	       d + (size_t)y * (size_t)cairo_image_surface_get_stride(s) +
		       (size_t)x * 4,
	       4);
	return v & 0xffffff;
}

static unsigned reds(double t)
{
	unsigned char c[3];
	plot_reds(t, c);
	return (unsigned)c[0] << 16 | (unsigned)c[1] << 8 | c[2];
}

/* The centre of cell (r, c) of a single heatmap with a title whose cells
 * are s pixels: the first at (72, 64). */
static unsigned cell(cairo_surface_t *im, double s, int r, int c)
{
	return pixel(im, (int)(72 + s * c + s / 2), (int)(64 + s * r + s / 2));
}

/* The book's example: valid lengths 2 and 6 over 10 keys, so the weights
 * are 1/2 on keys 0-1 of row 0 and 1/6 on keys 0-5 of row 1; the scale
 * runs from 0 to 0.5, the cells are 40 pixels (the most). */
static void check_book_weights(const char *model)
{
	char path[64];
	temp_png(path, sizeof path);
	const char *args[] = {model, "--interp", "--heatmap", path, NULL};
	ck_assert_int_eq(run_attnc(args), 0);
	cairo_surface_t *im = cairo_image_surface_create_from_png(path);
	ck_assert_int_eq(cairo_surface_status(im), CAIRO_STATUS_SUCCESS);
	/* two rows of 40 from y 64, ten columns of 40 from x 72 */
	ck_assert_int_eq(cairo_image_surface_get_height(im), 214);
	for (int c = 0; c < 10; c++) {
		ck_assert_uint_eq(cell(im, 40, 0, c),
				  c < 2 ? 0x67000d : 0xfff5f0);
		ck_assert_uint_eq(cell(im, 40, 1, c),
				  c < 6 ? reds(1.0 / 3) : 0xfff5f0);
	}
	cairo_surface_destroy(im);
	remove(path);
}

START_TEST(test_the_additive_heatmap_shows_both_queries_of_the_batch)
{
	check_book_weights("models/additive_attention.g");
}
END_TEST

START_TEST(test_the_dot_product_heatmap_shows_both_queries_of_the_batch)
{
	check_book_weights("models/dot_product_attention.g");
}
END_TEST

START_TEST(test_the_positional_encoding_is_drawn_by_its_output_name)
{
	char path[64];
	temp_png(path, sizeof path);
	const char *args[] = {"models/self_attention.g",
			      "--interp",
			      "--entry",
			      "encoding",
			      "--heatmap",
			      path,
			      "--heatmap-output",
			      "P",
			      NULL};
	ck_assert_int_eq(run_attnc(args), 0);
	cairo_surface_t *im = cairo_image_surface_create_from_png(path);
	ck_assert_int_eq(cairo_surface_status(im), CAIRO_STATUS_SUCCESS);
	/* 60 x 32 fitted in 480: cells of 8; values from -1 to 1 */
	ck_assert_uint_eq(cell(im, 8, 0, 1), 0x67000d);  /* cos 0 = 1 */
	ck_assert_uint_eq(cell(im, 8, 0, 0), reds(0.5)); /* sin 0 = 0 */
	/* cos(59 / 10000^(30/32)) = 0.99994: as dark */
	ck_assert_uint_eq(cell(im, 8, 59, 31), 0x67000d);
	cairo_surface_destroy(im);
	remove(path);
}
END_TEST

static Suite *plot_cli_suite(void)
{
	Suite *s = suite_create("plot_cli");
	TCase *tc = tcase_create("heatmaps");
	tcase_add_test(tc,
		       test_the_additive_heatmap_shows_both_queries_of_the_batch);
	tcase_add_test(tc,
		       test_the_dot_product_heatmap_shows_both_queries_of_the_batch);
	tcase_add_test(tc,
		       test_the_positional_encoding_is_drawn_by_its_output_name);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(plot_cli_suite());
}
