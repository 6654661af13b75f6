/*
 * test_plot.c - the pictures of plot.h, drawn with cairo: every SVG is
 * well formed (checked by a tiny XML reader below: one root, nested
 * tags, quoted attributes, known entities) and has its size, its text (a
 * glyph drawn for every character of every label, none missing from the
 * font) and its colours; every PNG has the signature and the size in its
 * IHDR, and is read back with cairo to check pixels: the colour of a
 * heatmap's largest and smallest cells, a series' colour on its line,
 * ink where the title is. Bad input or an unwritable path is reported,
 * not drawn; a grid of heatmaps shares one colour scale over its panels.
 */
#include "plot.h"
#include "testutil.h"

#include <cairo.h>
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- a tiny XML well-formedness check ------------------------------------------ */

/* Skips an entity at *p ("&amp;" ...); false if it is not a known one. */
static bool skip_entity(const char **p)
{
	static const char *const names[] = {"&amp;", "&lt;", "&gt;", "&quot;",
					    "&apos;"};
	for (size_t i = 0; i < 5; i++) {
		size_t n = strlen(names[i]);
		if (strncmp(*p, names[i], n) == 0) {
			*p += n;
			return true;
		}
	}
	return false;
}

static bool is_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '_' || c == ':';
}

/* Reads the attributes after a tag's name up to ">" or "/>". */
static bool read_attrs(const char **pp, bool *is_empty)
{
	const char *p = *pp;
	for (;;) {
		while (*p == ' ' || *p == '\n')
			p++;
		if (p[0] == '/' && p[1] == '>') {
			*is_empty = true;
			*pp = p + 2;
			return true;
		}
		if (*p == '>') {
			*is_empty = false;
			*pp = p + 1;
			return true;
		}
		if (!is_name_char(*p))
			return false;
		while (is_name_char(*p))
			p++;
		if (p[0] != '=' || p[1] != '"')
			return false;
		for (p += 2; *p != '"'; p++)
			if (!*p || *p == '<' ||
			    (*p == '&' && !skip_entity(&p)) || *p == '"')
				break;
		if (*p != '"')
			return false;
		p++;
	}
}

/* True if doc is one well-formed XML element after an optional prolog. */
static bool xml_is_well_formed(const char *doc)
{
	const char *stack[64], *p = doc;
	size_t lens[64], depth = 0;
	int n_roots = 0;
	if (strncmp(p, "<?xml", 5) == 0) {
		p = strstr(p, "?>");
		if (!p)
			return false;
		p += 2;
	}
	while (*p) {
		if (*p == '&' && !skip_entity(&p))
			return false;
		if (*p != '<') {
			if (depth == 0 && *p != '\n' && *p != ' ')
				return false; /* text outside the root */
			if (*p != '&')
				p++;
			continue;
		}
		bool is_close = p[1] == '/';
		const char *name = p + 1 + is_close;
		size_t len = 0;
		while (is_name_char(name[len]))
			len++;
		if (!len)
			return false;
		p = name + len;
		if (is_close) {
			if (*p != '>' || depth == 0 || lens[depth - 1] != len ||
			    strncmp(stack[depth - 1], name, len) != 0)
				return false;
			depth--;
			p++;
			continue;
		}
		bool is_empty;
		if (!read_attrs(&p, &is_empty))
			return false;
		if (depth == 0)
			n_roots++;
		if (!is_empty) {
			if (depth == 64)
				return false;
			stack[depth] = name;
			lens[depth++] = len;
		}
	}
	return depth == 0 && n_roots == 1;
}

static int count(const char *doc, const char *what)
{
	int n = 0;
	for (const char *p = strstr(doc, what); p; p = strstr(p + 1, what))
		n++;
	return n;
}

START_TEST(test_the_xml_check_rejects_broken_documents)
{
	ck_assert(xml_is_well_formed("<a x=\"1\"><b/>t &amp; u</a>\n"));
	ck_assert(!xml_is_well_formed("<a><b></a></b>"));
	ck_assert(!xml_is_well_formed("<a x=1></a>"));
	ck_assert(!xml_is_well_formed("<a>x & y</a>"));
	ck_assert(!xml_is_well_formed("<a></a><b></b>"));
	ck_assert(!xml_is_well_formed("<a>"));
}
END_TEST

/* ---- files ---------------------------------------------------------------------- */

/* A fresh temporary path ending in ext (".svg" or ".png"). */
static void temp_path(char *path, size_t size, const char *ext)
{
	char tmpl[] = "/tmp/attnc_plot_XXXXXX";
	int fd = mkstemp(tmpl);
	ck_assert_int_ge(fd, 0);
	close(fd);
	remove(tmpl);
	snprintf(path, size, "%s%s", tmpl, ext);
}

/* The whole file, malloc'd and NUL-terminated. */
static char *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	rewind(f);
	char *buf = malloc((size_t)n + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	if (len)
		*len = (size_t)n;
	return buf;
}

/* The characters of the strings in texts, spaces included: cairo's SVG
 * draws each one as a <use> of a glyph. */
static int n_chars(const char *const *texts, size_t n)
{
	int total = 0;
	for (size_t i = 0; i < n; i++)
		total += (int)strlen(texts[i]);
	return total;
}

/* The SVG at path: well formed, w x h pixels, one glyph per character of
 * texts and none the font lacks (glyph 0 of a subset is .notdef).
 * Returns the document (the caller frees). */
static char *check_svg(const char *path, int w, int h, const char *const *texts,
		       size_t n_texts)
{
	char *doc = read_all(path, NULL), size[64];
	ck_assert(xml_is_well_formed(doc));
	snprintf(size, sizeof size, "width=\"%dpx\" height=\"%dpx\"", w, h);
	ck_assert_ptr_nonnull(strstr(doc, size));
	ck_assert_int_eq(count(doc, "<use xlink:href=\"#glyph"),
			 n_chars(texts, n_texts));
	for (int f = 0; f < 8; f++) {
		char notdef[48];
		snprintf(notdef, sizeof notdef, "href=\"#glyph%d-0\"", f);
		ck_assert_int_eq(count(doc, notdef), 0);
	}
	return doc;
}

static uint32_t be32(const unsigned char *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 |
	       (uint32_t)b[2] << 8 | b[3];
}

/* The PNG at path: the signature, an IHDR first with w x h, read back by
 * cairo (the caller destroys it). */
static cairo_surface_t *check_png(const char *path, int w, int h)
{
	static const unsigned char sig[8] = {0x89, 'P',  'N',  'G',
					     '\r', '\n', 0x1a, '\n'};
	size_t len;
	unsigned char *b = (unsigned char *)read_all(path, &len);
	ck_assert_uint_ge(len, 33);
	ck_assert(memcmp(b, sig, 8) == 0);
	ck_assert(memcmp(b + 12, "IHDR", 4) == 0);
	ck_assert_uint_eq(be32(b + 16), (uint32_t)w);
	ck_assert_uint_eq(be32(b + 20), (uint32_t)h);
	free(b);
	cairo_surface_t *s = cairo_image_surface_create_from_png(path);
	ck_assert_int_eq(cairo_surface_status(s), CAIRO_STATUS_SUCCESS);
	ck_assert_int_eq(cairo_image_surface_get_width(s), w);
	return s;
}

/* The pixel at (x, y) as 0xRRGGBB. */
static unsigned pixel(cairo_surface_t *s, int x, int y)
{
	cairo_surface_flush(s);
	const unsigned char *d = cairo_image_surface_get_data(s);
	int stride = cairo_image_surface_get_stride(s);
	uint32_t v;
	memcpy(&v, d + (size_t)y * (size_t)stride + (size_t)x * 4, 4);
	return v & 0xffffff;
}

/* Pixels of the rectangle darker than mid-grey: ink. */
static int n_dark(cairo_surface_t *s, int x0, int y0, int x1, int y1)
{
	int n = 0;
	for (int y = y0; y < y1; y++)
		for (int x = x0; x < x1; x++) {
			unsigned p = pixel(s, x, y);
			n += ((p >> 16 & 0xff) + (p >> 8 & 0xff) + (p & 0xff)) <
			     384;
		}
	return n;
}

/* ---- the pieces ------------------------------------------------------------------ */

START_TEST(test_reds_runs_from_near_white_to_dark_red)
{
	unsigned char c[3];
	plot_reds(0, c);
	ck_assert(c[0] == 0xff && c[1] == 0xf5 && c[2] == 0xf0);
	plot_reds(1, c);
	ck_assert(c[0] == 0x67 && c[1] == 0x00 && c[2] == 0x0d);
	plot_reds(0.5, c); /* the fifth of nine stops */
	ck_assert(c[0] == 0xfb && c[1] == 0x6a && c[2] == 0x4a);
	plot_reds(1.0 / 16, c); /* halfway between the first two stops */
	ck_assert(c[0] == 0xff && c[1] == 0xeb && c[2] == 0xe1);
	plot_reds(-3, c);
	ck_assert(c[0] == 0xff && c[1] == 0xf5);
	plot_reds(7, c);
	ck_assert(c[0] == 0x67);
	plot_reds(NAN, c);
	ck_assert(c[0] == 0xbf && c[1] == 0xbf && c[2] == 0xbf);
}
END_TEST

START_TEST(test_ticks_are_round_numbers_inside_the_range)
{
	double t[32];
	ck_assert_uint_eq(plot_ticks(0, 5, 6, t, 32), 6);
	for (int i = 0; i < 6; i++)
		ck_assert_double_eq(t[i], i);
	/* range 1.3 / 5 = 0.26 -> step 0.5 */
	ck_assert_uint_eq(plot_ticks(-0.23, 1.07, 5, t, 32), 3);
	ck_assert_double_eq(t[0], 0);
	ck_assert(!signbit(t[0]));
	ck_assert_double_eq(t[2], 1.0);
	/* 12.5 / 5 = 2.5 */
	ck_assert_uint_eq(plot_ticks(-12.5, 0, 5, t, 32), 6);
	ck_assert_double_eq(t[0], -12.5);
	ck_assert_double_eq(t[1], -10);
	ck_assert_uint_eq(plot_ticks(0, 5, 6, t, 2), 2);
	ck_assert_uint_eq(plot_ticks(1, 1, 5, t, 32), 0);
	ck_assert_uint_eq(plot_ticks(0, INFINITY, 5, t, 32), 0);
}
END_TEST

START_TEST(test_the_file_name_chooses_the_format)
{
	ck_assert_int_eq(plot_format_of("a.svg"), PLOT_SVG);
	ck_assert_int_eq(plot_format_of("dir/A.SVG"), PLOT_SVG);
	ck_assert_int_eq(plot_format_of("a.png"), PLOT_PNG);
	ck_assert_int_eq(plot_format_of("a.Png"), PLOT_PNG);
	ck_assert_int_eq(plot_format_of("a.jpg"), PLOT_OTHER);
	ck_assert_int_eq(plot_format_of(".svg"), PLOT_OTHER);
	ck_assert_int_eq(plot_format_of("svg"), PLOT_OTHER);
}
END_TEST

/* ---- line plots ------------------------------------------------------------------ */

/* x and y from 0 to 10: with 5% margins the x ticks are 0, 2, ..., 10
 * (step 2 for 11 / 6) and the y ticks 0.0, 2.5, ..., 10.0 (step 2.5). */
static const double line_x[3] = {0, 5, 10}, line_y[3] = {0, 5, 10};
static const char *const line_texts[] = {"training loss",
					 "epoch",
					 "loss",
					 "Truth",
					 "0",
					 "2",
					 "4",
					 "6",
					 "8",
					 "10",
					 "0.0",
					 "2.5",
					 "5.0",
					 "7.5",
					 "10.0"};

static plot_lines line_plot(plot_series *s)
{
	*s = (plot_series){"Truth", line_x, line_y, 3, PLOT_LINE};
	return (plot_lines){"training loss", "epoch", "loss", s, 1,
			    {0, 0},          {0, 0}};
}

START_TEST(test_an_svg_line_plot_has_its_text_and_its_series_colour)
{
	char path[64];
	temp_path(path, sizeof path, ".svg");
	plot_series s;
	plot_lines p = line_plot(&s);
	char err[256];
	ck_assert(plot_lines_save(path, &p, err, sizeof err));
	char *doc = check_svg(path, 640, 420, line_texts,
			      sizeof line_texts / sizeof *line_texts);
	/* #1f77b4, d2l's first colour: the series and its legend sample */
	ck_assert_int_eq(count(doc,
			       "stroke:rgb(12.156863%,46.666667%,70.588235%)"),
			 2);
	free(doc);
	remove(path);
}
END_TEST

START_TEST(test_a_png_line_plot_draws_its_line_and_its_title)
{
	char path[64];
	temp_path(path, sizeof path, ".png");
	plot_series s;
	plot_lines p = line_plot(&s);
	char err[256];
	ck_assert(plot_lines_save(path, &p, err, sizeof err));
	cairo_surface_t *im = check_png(path, 640, 420);
	/* the frame: x from 72 over 544 pixels, y from 44 over 318; the data
	 * (5, 5) is the frame's centre, on the line, in #1f77b4 */
	unsigned c = pixel(im, 72 + 272, 44 + 159);
	ck_assert_uint_lt(c >> 16 & 0xff, 0x60);
	ck_assert_uint_gt(c & 0xff, 0x90);
	ck_assert_uint_eq(pixel(im, 2, 2), 0xffffff);
	ck_assert_int_gt(n_dark(im, 250, 10, 390, 32), 100); /* the title */
	ck_assert_int_eq(n_dark(im, 250, 34, 390, 42), 0);
	cairo_surface_destroy(im);
	remove(path);
}
END_TEST

START_TEST(test_a_line_breaks_at_a_missing_point)
{
	char path[64];
	temp_path(path, sizeof path, ".png");
	double x[4] = {0, 1, 2, 3}, y[4] = {0, 1, NAN, 3};
	plot_series s = {NULL, x, y, 4, PLOT_LINE};
	plot_lines p = {NULL, NULL, NULL, &s, 1, {0, 3}, {0, 3}};
	char err[256];
	ck_assert(plot_lines_save(path, &p, err, sizeof err));
	cairo_surface_t *im = check_png(path, 640, 420);
	/* no title: the frame starts at y 20, 342 high; (0.5, 0.5) is drawn,
	 * (2.5, 2.5) is not: the line stops at 1 and starts again at 3 */
	int fx1 = 72 + (int)(544 * 0.5 / 3),
	    fy1 = 20 + 342 - (int)(342 * 0.5 / 3);
	int fx2 = 72 + (int)(544 * 2.5 / 3),
	    fy2 = 20 + 342 - (int)(342 * 2.5 / 3);
	ck_assert_int_gt(n_dark(im, fx1 - 2, fy1 - 2, fx1 + 3, fy1 + 3), 0);
	ck_assert_int_eq(n_dark(im, fx2 - 2, fy2 - 2, fx2 + 3, fy2 + 3), 0);
	cairo_surface_destroy(im);
	remove(path);
}
END_TEST

START_TEST(test_a_line_plot_refuses_nothing_to_draw_and_empty_ranges)
{
	char err[256];
	plot_lines none = {NULL, NULL, NULL, NULL, 0, {0, 0}, {0, 0}};
	ck_assert(!plot_lines_save("/tmp/attnc_never.svg", &none, err,
				   sizeof err));
	ck_assert_str_eq(err, "nothing to plot");
	plot_series s = {"a", NULL, NULL, 3, PLOT_LINE};
	plot_lines p = {NULL, NULL, NULL, &s, 1, {0, 0}, {0, 0}};
	ck_assert(!plot_lines_save("/tmp/attnc_never.svg", &p, err, sizeof err));
	ck_assert_str_eq(err, "series 0 has no data");
	s = (plot_series){"a", line_x, line_y, 3, PLOT_LINE};
	p.ylim[0] = 2;
	p.ylim[1] = 1;
	ck_assert(!plot_lines_save("/tmp/attnc_never.svg", &p, err, sizeof err));
	ck_assert_str_eq(err, "the y range [2, 1] is empty");
	ck_assert_int_ne(access("/tmp/attnc_never.svg", F_OK), 0);
}
END_TEST

START_TEST(test_save_names_the_path_it_cannot_write)
{
	plot_series s;
	plot_lines p = line_plot(&s);
	char err[256];
	ck_assert(!plot_lines_save("/nonexistent/dir/x.svg", &p, err,
				   sizeof err));
	ck_assert_str_eq(err, "cannot write '/nonexistent/dir/x.svg': No such "
			      "file or directory");
	ck_assert(!plot_lines_save("/nonexistent/dir/x.png", &p, err,
				   sizeof err));
	ck_assert_str_eq(err, "cannot write '/nonexistent/dir/x.png': No such "
			      "file or directory");
	if (access("/dev/full", W_OK) == 0) {
		float v[1] = {1};
		plot_heatmap h = {NULL, NULL, NULL, v, 1, 1};
		ck_assert(!plot_heatmap_save("/dev/full", &h, err, sizeof err));
		ck_assert_str_eq(err,
				 "cannot write '/dev/full': No space left on "
				 "device");
	}
}
END_TEST

/* ---- heatmaps --------------------------------------------------------------------- */

/* A single heatmap of 2 x 3 with a title: cells of 40 pixels (the most),
 * the first at (72, 64). The centre of cell (r, c). */
static unsigned cell_pixel(cairo_surface_t *im, int r, int c)
{
	return pixel(im, 72 + 40 * c + 20, 64 + 40 * r + 20);
}

START_TEST(test_a_png_heatmap_colours_the_largest_cell_darkest_and_nan_grey)
{
	char path[64];
	temp_path(path, sizeof path, ".png");
	float v[6] = {0.25f, -1, 3, NAN, 1, 0.25f};
	plot_heatmap h = {"w", "Keys", "Queries", v, 2, 3};
	char err[256];
	ck_assert(plot_heatmap_save(path, &h, err, sizeof err));
	/* the bar at 72 + 3 * 40 + 24 = 216, + 16 + 70: 302 wide; the bar of
	 * 120 from y 64, + 30: 214 high */
	cairo_surface_t *im = check_png(path, 302, 214);
	ck_assert_uint_eq(cell_pixel(im, 0, 2), 0x67000d); /* 3: the largest */
	ck_assert_uint_eq(cell_pixel(im, 0, 1), 0xfff5f0); /* -1: the smallest */
	ck_assert_uint_eq(cell_pixel(im, 1, 0), 0xbfbfbf); /* NaN */
	unsigned char q[3];
	plot_reds(0.5, q); /* 1 is halfway from -1 to 3 */
	ck_assert_uint_eq(cell_pixel(im, 1, 1),
			  (unsigned)q[0] << 16 | (unsigned)q[1] << 8 | q[2]);
	ck_assert_uint_eq(cell_pixel(im, 0, 0), cell_pixel(im, 1, 2));
	cairo_surface_destroy(im);
	remove(path);
}
END_TEST

START_TEST(test_an_svg_heatmap_has_its_labels_ticks_and_cell_colours)
{
	char path[64];
	temp_path(path, sizeof path, ".svg");
	float v[6] = {0, 0.5f, 1, 1, 0.5f, 0};
	plot_heatmap h = {"w", "Keys", "Queries", v, 2, 3};
	char err[256];
	ck_assert(plot_heatmap_save(path, &h, err, sizeof err));
	/* index ticks 0 1 2 across, 0 1 down; the scale 0.0 0.2 ... 1.0 */
	static const char *const texts[] = {"w",   "Keys", "Queries", "0",
					    "1",   "2",    "0",       "1",
					    "0.0", "0.2",  "0.4",     "0.6",
					    "0.8", "1.0"};
	char *doc = check_svg(path, 302, 214, texts,
			      sizeof texts / sizeof *texts);
	ck_assert_int_eq(count(doc, "fill:rgb(40.392157%,0%,5.098039%)"), 2);
	ck_assert_int_eq(count(doc, "fill:rgb(100%,96.078431%,94.117647%)"), 2);
	free(doc);
	remove(path);
}
END_TEST

START_TEST(test_a_heatmap_refuses_empty_or_huge_matrices)
{
	char err[256];
	float v[1] = {1};
	plot_heatmap h = {NULL, NULL, NULL, NULL, 1, 1};
	ck_assert(!plot_heatmap_save("/tmp/attnc_never.svg", &h, err,
				     sizeof err));
	ck_assert_str_eq(err, "no values to draw");
	h = (plot_heatmap){NULL, NULL, NULL, v, 0, 1};
	ck_assert(!plot_heatmap_save("/tmp/attnc_never.svg", &h, err,
				     sizeof err));
	h = (plot_heatmap){NULL, NULL, NULL, v, 1001, 1000};
	ck_assert(!plot_heatmap_save("/tmp/attnc_never.svg", &h, err,
				     sizeof err));
	ck_assert_str_eq(err, "1001 x 1000 cells are too many to draw (at most "
			      "1000000)");
	ck_assert_int_ne(access("/tmp/attnc_never.svg", F_OK), 0);
}
END_TEST

/* ---- grids ------------------------------------------------------------------------ */

START_TEST(test_a_grid_shares_one_colour_scale_over_its_panels)
{
	char path[64];
	temp_path(path, sizeof path, ".png");
	float a[4] = {0, 0.5f, 0.5f, 0}, b[4] = {0, 1, 1, 0};
	plot_heatmap panels[2] = {{"Head 1", NULL, NULL, a, 2, 2},
				  {"Head 2", NULL, NULL, b, 2, 2}};
	const char *const heads[1] = {"Layer 1"};
	plot_grid g = {"attention", "Keys", "Queries", panels, heads, 1, 2};
	char err[256];
	ck_assert(plot_grid_save(path, &g, err, sizeof err));
	/* cells of 28; panels' frames at y 44 + 22 + 20 = 86, x 72 and
	 * 72 + 56 + 56 = 184; the bar at 184 + 56 + 24 = 264, 350 wide */
	/* height: 44 + 22 + 20 + 56 + 50 = 192, the bar's end 86 + 120 + 30 */
	cairo_surface_t *im = check_png(path, 350, 236);
	ck_assert_uint_eq(pixel(im, 184 + 28 + 14, 86 + 14), 0x67000d);
	ck_assert_uint_eq(pixel(im, 184 + 14, 86 + 14), 0xfff5f0);
	unsigned char q[3];
	plot_reds(0.5, q); /* a's 0.5 is halfway on b's scale */
	ck_assert_uint_eq(pixel(im, 72 + 28 + 14, 86 + 14),
			  (unsigned)q[0] << 16 | (unsigned)q[1] << 8 | q[2]);
	cairo_surface_destroy(im);
	remove(path);
}
END_TEST

START_TEST(test_an_svg_grid_has_every_title_heading_and_tick)
{
	char path[64];
	temp_path(path, sizeof path, ".svg");
	float a[4] = {0, 0.5f, 0.5f, 0}, b[4] = {0, 1, 1, 0};
	plot_heatmap panels[2] = {{"Head 1", NULL, NULL, a, 2, 2},
				  {"Head 2", NULL, NULL, b, 2, 2}};
	const char *const heads[1] = {"Layer 1"};
	plot_grid g = {"attention", "Keys", "Queries", panels, heads, 1, 2};
	char err[256];
	ck_assert(plot_grid_save(path, &g, err, sizeof err));
	char *doc = read_all(path, NULL);
	ck_assert(xml_is_well_formed(doc));
	/* titles, heading, the labels of both panels (Queries once), 0 1
	 * across and down per panel, the scale 0.0 0.2 ... 1.0 */
	static const char *const texts[] = {"attention", "Layer 1",
					    "Head 1",    "Head 2",
					    "Keys",      "Keys",
					    "Queries",   "0101",
					    "0101",      "0.00.20.40.60.81.0"};
	ck_assert_int_eq(count(doc, "<use xlink:href=\"#glyph"),
			 n_chars(texts, sizeof texts / sizeof *texts));
	free(doc);
	remove(path);
}
END_TEST

START_TEST(test_a_grid_refuses_no_panels_no_values_and_too_many_cells)
{
	char err[256];
	plot_grid g = {NULL, NULL, NULL, NULL, NULL, 1, 1};
	ck_assert(!plot_grid_save("/tmp/attnc_never.svg", &g, err, sizeof err));
	ck_assert_str_eq(err, "no panels to draw");
	plot_heatmap empty[2] = {{0}, {0}};
	g = (plot_grid){NULL, NULL, NULL, empty, NULL, 1, 2};
	ck_assert(!plot_grid_save("/tmp/attnc_never.svg", &g, err, sizeof err));
	ck_assert_str_eq(err, "no values to draw");
	float v[1] = {0};
	plot_heatmap big[2] = {{NULL, NULL, NULL, v, 1000, 600},
			       {NULL, NULL, NULL, v, 1000, 600}};
	g = (plot_grid){NULL, NULL, NULL, big, NULL, 2, 1};
	ck_assert(!plot_grid_save("/tmp/attnc_never.svg", &g, err, sizeof err));
	ck_assert_str_eq(err, "1200000 cells are too many to draw (at most "
			      "1000000)");
	ck_assert_int_ne(access("/tmp/attnc_never.svg", F_OK), 0);
}
END_TEST

static Suite *plot_suite(void)
{
	Suite *s = suite_create("plot");
	TCase *tc = tcase_create("plot");
	/* nothing of cairo's or fontconfig's left for LeakSanitizer */
	tcase_add_checked_fixture(tc, NULL, plot_fini);
	tcase_add_test(tc, test_the_xml_check_rejects_broken_documents);
	tcase_add_test(tc, test_reds_runs_from_near_white_to_dark_red);
	tcase_add_test(tc, test_ticks_are_round_numbers_inside_the_range);
	tcase_add_test(tc, test_the_file_name_chooses_the_format);
	tcase_add_test(tc,
		       test_an_svg_line_plot_has_its_text_and_its_series_colour);
	tcase_add_test(tc, test_a_png_line_plot_draws_its_line_and_its_title);
	tcase_add_test(tc, test_a_line_breaks_at_a_missing_point);
	tcase_add_test(tc,
		       test_a_line_plot_refuses_nothing_to_draw_and_empty_ranges);
	tcase_add_test(tc, test_save_names_the_path_it_cannot_write);
	tcase_add_test(
		tc,
		test_a_png_heatmap_colours_the_largest_cell_darkest_and_nan_grey);
	tcase_add_test(tc,
		       test_an_svg_heatmap_has_its_labels_ticks_and_cell_colours);
	tcase_add_test(tc, test_a_heatmap_refuses_empty_or_huge_matrices);
	tcase_add_test(tc, test_a_grid_shares_one_colour_scale_over_its_panels);
	tcase_add_test(tc, test_an_svg_grid_has_every_title_heading_and_tick);
	tcase_add_test(tc,
		       test_a_grid_refuses_no_panels_no_values_and_too_many_cells);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(plot_suite());
}
