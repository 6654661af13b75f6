/*
 * test_runtime_plot.c - the SVG pictures of rt_plot.h: every document is
 * well formed (checked by a tiny XML reader below: one root, nested
 * tags, quoted attributes, known entities), holds the expected number of
 * lines, markers and cells with the right colours, escapes its text, and
 * bad input or an unwritable path is reported, not drawn; a grid of
 * heatmaps shares one colour scale over its panels.
 */
#include "attnrt.h"
#include "rt_plot.h"
#include "testutil.h"

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
			if (!*p || *p == '<' || (*p == '&' && !skip_entity(&p)) ||
			    *p == '"')
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

/* ---- drawing into memory ------------------------------------------------------------ */

typedef struct membuf {
	char *data;
	size_t len;
	FILE *f;
} membuf;

static FILE *mem_open(membuf *m)
{
	m->data = NULL;
	m->len = 0;
	m->f = open_memstream(&m->data, &m->len);
	ck_assert_ptr_nonnull(m->f);
	return m->f;
}

/* Closes the stream; the caller frees m->data. */
static char *mem_close(membuf *m)
{
	fclose(m->f);
	return m->data;
}

START_TEST(test_reds_runs_from_near_white_to_dark_red)
{
	unsigned char c[3];
	rt_plot_reds(0, c);
	ck_assert(c[0] == 0xff && c[1] == 0xf5 && c[2] == 0xf0);
	rt_plot_reds(1, c);
	ck_assert(c[0] == 0x67 && c[1] == 0x00 && c[2] == 0x0d);
	rt_plot_reds(0.5, c); /* the fifth of nine stops */
	ck_assert(c[0] == 0xfb && c[1] == 0x6a && c[2] == 0x4a);
	rt_plot_reds(1.0 / 16, c); /* halfway between the first two stops */
	ck_assert(c[0] == 0xff && c[1] == 0xeb && c[2] == 0xe1);
	rt_plot_reds(-3, c);
	ck_assert(c[0] == 0xff && c[1] == 0xf5);
	rt_plot_reds(7, c);
	ck_assert(c[0] == 0x67);
	rt_plot_reds(NAN, c);
	ck_assert(c[0] == 0xbf && c[1] == 0xbf && c[2] == 0xbf);
}
END_TEST

START_TEST(test_ticks_are_round_numbers_inside_the_range)
{
	double t[32];
	ck_assert_uint_eq(rt_plot_ticks(0, 5, 6, t, 32), 6);
	for (int i = 0; i < 6; i++)
		ck_assert_double_eq(t[i], i);
	/* range 1.3 / 5 = 0.26 -> step 0.5 */
	ck_assert_uint_eq(rt_plot_ticks(-0.23, 1.07, 5, t, 32), 3);
	ck_assert_double_eq(t[0], 0);
	ck_assert(!signbit(t[0]));
	ck_assert_double_eq(t[2], 1.0);
	/* 12.5 / 5 = 2.5 */
	ck_assert_uint_eq(rt_plot_ticks(-12.5, 0, 5, t, 32), 6);
	ck_assert_double_eq(t[0], -12.5);
	ck_assert_double_eq(t[1], -10);
	ck_assert_uint_eq(rt_plot_ticks(0, 5, 6, t, 2), 2);
	ck_assert_uint_eq(rt_plot_ticks(1, 1, 5, t, 32), 0);
	ck_assert_uint_eq(rt_plot_ticks(0, INFINITY, 5, t, 32), 0);
}
END_TEST

START_TEST(test_line_plot_has_each_series_marker_label_and_legend_entry)
{
	double x[7] = {0, 1, 2, 3, 4, 5, 6}, y1[7] = {1, 4, 9, 16, 25, 36, 49},
	       y2[7] = {2, 3, 4, 5, 6, 7, 8}, y3[7] = {1, NAN, 3, 2, 5, 1, 0};
	rt_plot_series s[3] = {
		{"Truth", x, y1, 7, RT_PLOT_LINE},
		{"Pred", x, y2, 7, RT_PLOT_LINE},
		{"Training points", x, y3, 7, RT_PLOT_POINTS},
	};
	rt_plot_lines p = {"Kernel regression", "x", "y", s, 3, {0, 0}, {0, 0}};
	membuf m;
	ck_assert_int_eq(rt_plot_lines_svg(mem_open(&m), &p, NULL, 0), ATTNRT_OK);
	char *doc = mem_close(&m);
	ck_assert(xml_is_well_formed(doc));
	ck_assert_int_eq(count(doc, "class=\"series\""), 2);
	ck_assert_int_eq(count(doc, "class=\"point\""), 6); /* NaN skipped */
	ck_assert_int_eq(count(doc, "class=\"legend-label\""), 3);
	ck_assert_ptr_nonnull(strstr(doc, ">Kernel regression</text>"));
	ck_assert_ptr_nonnull(strstr(doc, "class=\"xlabel\""));
	ck_assert_ptr_nonnull(strstr(doc, "class=\"ylabel\""));
	ck_assert_ptr_nonnull(strstr(doc, ">Training points</text>"));
	ck_assert_ptr_nonnull(strstr(doc, "stroke-dasharray=\"6,4\""));
	ck_assert_int_gt(count(doc, "class=\"tick\""), 6);
	free(doc);
}
END_TEST

START_TEST(test_line_breaks_at_a_missing_point_and_text_is_escaped)
{
	double x[4] = {0, 1, 2, 3}, y[4] = {1, 2, INFINITY, 4};
	rt_plot_series s = {"a<b & \"c\"", x, y, 4, RT_PLOT_LINE};
	rt_plot_lines p = {"loss <train>", NULL, NULL, &s, 1, {0, 3}, {0, 5}};
	membuf m;
	ck_assert_int_eq(rt_plot_lines_svg(mem_open(&m), &p, NULL, 0), ATTNRT_OK);
	char *doc = mem_close(&m);
	ck_assert(xml_is_well_formed(doc));
	ck_assert_ptr_nonnull(strstr(doc, "loss &lt;train&gt;"));
	ck_assert_ptr_nonnull(strstr(doc, "a&lt;b &amp; &quot;c&quot;"));
	char *d = strstr(doc, "class=\"series\" d=\"");
	ck_assert_ptr_nonnull(d);
	/* the frame, x 72..616 and y 44..362 (below the title), shows
	 * [0, 3] x [0, 5]: (0, 1) (1, 2), a break, (3, 4) */
	ck_assert_ptr_nonnull(strstr(d, "d=\"M72.0 298.4 L253.3 234.8 M616.0 107.6 \""));
	ck_assert_ptr_null(strstr(doc, "class=\"xlabel\""));
	free(doc);
}
END_TEST

START_TEST(test_line_plot_rejects_nothing_to_draw_and_empty_ranges)
{
	char err[128];
	rt_plot_lines p = {"t", NULL, NULL, NULL, 0, {0, 0}, {0, 0}};
	membuf m;
	ck_assert_int_eq(rt_plot_lines_svg(mem_open(&m), &p, err, sizeof err),
			 ATTNRT_ERR_ARG);
	ck_assert_str_eq(err, "nothing to plot");
	double x[1] = {1};
	rt_plot_series s = {NULL, x, NULL, 1, RT_PLOT_LINE};
	p.series = &s;
	p.n_series = 1;
	ck_assert_int_eq(rt_plot_lines_svg(m.f, &p, err, sizeof err),
			 ATTNRT_ERR_ARG);
	ck_assert_str_eq(err, "series 0 has no data");
	s.y = x;
	p.ylim[0] = p.ylim[1] = 2;
	p.ylim[0] = 3;
	ck_assert_int_eq(rt_plot_lines_svg(m.f, &p, err, sizeof err),
			 ATTNRT_ERR_ARG);
	ck_assert_str_eq(err, "the y range [3, 2] is empty");
	char *doc = mem_close(&m);
	ck_assert_uint_eq(strlen(doc ? doc : ""), 0); /* nothing written */
	free(doc);
}
END_TEST

START_TEST(test_heatmap_has_a_cell_per_value_coloured_by_reds_and_a_scale)
{
	float v[12] = {0, 0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f, 0.9f,
		       1.0f, 0.5f};
	rt_plot_heatmap h = {"Attention weights", "Keys", "Queries", v, 3, 4};
	membuf m;
	ck_assert_int_eq(rt_plot_heatmap_svg(mem_open(&m), &h, NULL, 0),
			 ATTNRT_OK);
	char *doc = mem_close(&m);
	ck_assert(xml_is_well_formed(doc));
	ck_assert_int_eq(count(doc, "class=\"cell\""), 12);
	ck_assert_int_eq(count(doc, "fill=\"#fff5f0\"><title>0, 0: 0</title>"), 1);
	ck_assert_int_eq(count(doc, "fill=\"#67000d\"><title>2, 2: 1</title>"), 1);
	ck_assert_int_eq(count(doc, "fill=\"#fb6a4a\""), 2); /* the two 0.5 */
	ck_assert_ptr_nonnull(strstr(doc, ">Attention weights</text>"));
	ck_assert_ptr_nonnull(strstr(doc, "class=\"xlabel\" x=\"152.0\""));
	ck_assert_ptr_nonnull(strstr(doc, ">Keys</text>"));
	ck_assert_ptr_nonnull(strstr(doc, ">Queries</text>"));
	ck_assert_int_eq(count(doc, "class=\"colour-bar\""), 1);
	ck_assert_int_eq(count(doc, "<stop "), 9);
	/* the scale's ticks: 0, 0.2, ..., 1 */
	ck_assert_ptr_nonnull(strstr(doc, ">0.2</text>"));
	ck_assert_ptr_nonnull(strstr(doc, ">1.0</text>"));
	free(doc);
}
END_TEST

START_TEST(test_heatmap_draws_nan_grey_and_a_constant_matrix)
{
	float v[2] = {NAN, 0.25f};
	rt_plot_heatmap h = {NULL, NULL, NULL, v, 1, 2};
	membuf m;
	ck_assert_int_eq(rt_plot_heatmap_svg(mem_open(&m), &h, NULL, 0),
			 ATTNRT_OK);
	char *doc = mem_close(&m);
	ck_assert(xml_is_well_formed(doc));
	ck_assert_int_eq(count(doc, "class=\"cell\""), 2);
	ck_assert_int_eq(count(doc, "fill=\"#bfbfbf\""), 1);
	/* a constant is the middle of a range of 1 around it */
	ck_assert_int_eq(count(doc, "fill=\"#fb6a4a\""), 1);
	ck_assert_ptr_null(strstr(doc, "class=\"title\""));
	free(doc);
}
END_TEST

START_TEST(test_heatmap_rejects_empty_or_huge_matrices)
{
	char err[128];
	float v[1] = {1};
	rt_plot_heatmap h = {NULL, NULL, NULL, v, 0, 3};
	ck_assert_int_eq(rt_plot_heatmap_svg(stdout, &h, err, sizeof err),
			 ATTNRT_ERR_ARG);
	ck_assert_str_eq(err, "no values to draw");
	h.rows = 2000;
	h.cols = 1000;
	ck_assert_int_eq(rt_plot_heatmap_svg(stdout, &h, err, sizeof err),
			 ATTNRT_ERR_ARG);
	ck_assert_str_eq(err, "2000 x 1000 cells are too many to draw "
			      "(at most 1000000)");
	h.rows = (size_t)1 << 40;
	h.cols = (size_t)1 << 40;
	ck_assert_int_eq(rt_plot_heatmap_svg(stdout, &h, err, sizeof err),
			 ATTNRT_ERR_ARG);
}
END_TEST

static char *read_all(const char *path)
{
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	static char buf[1 << 16];
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

START_TEST(test_save_writes_the_file_or_names_the_path_it_cannot_write)
{
	char path[] = "/tmp/attnc_plot_XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	close(fd);
	float v[4] = {1, 2, 3, 4};
	rt_plot_heatmap h = {"w", "Keys", "Queries", v, 2, 2};
	char err[256];
	ck_assert_int_eq(rt_plot_heatmap_save(path, &h, err, sizeof err),
			 ATTNRT_OK);
	const char *doc = read_all(path);
	ck_assert(xml_is_well_formed(doc));
	ck_assert_int_eq(count(doc, "class=\"cell\""), 4);
	double x[2] = {1, 2};
	rt_plot_series s = {"loss", x, x, 2, RT_PLOT_LINE};
	rt_plot_lines p = {"loss", "epoch", "loss", &s, 1, {0, 0}, {0, 0}};
	ck_assert_int_eq(rt_plot_lines_save(path, &p, err, sizeof err), ATTNRT_OK);
	doc = read_all(path);
	ck_assert(xml_is_well_formed(doc));
	ck_assert_int_eq(count(doc, "class=\"series\""), 1);
	remove(path);
	ck_assert_int_eq(rt_plot_lines_save("/nonexistent/dir/x.svg", &p, err,
					    sizeof err),
			 ATTNRT_ERR_IO);
	ck_assert_str_eq(err, "cannot write '/nonexistent/dir/x.svg': No such "
			      "file or directory");
}
END_TEST

START_TEST(test_grid_draws_each_panel_and_heading_with_one_colour_scale)
{
	float a[4] = {0, 0.5f, 1, 0.25f}, b[6] = {0.1f, 0.2f, 0.3f, 0.4f, 0.6f,
						 0.7f};
	float c[2] = {0.5f, 0.5f};
	rt_plot_heatmap panels[4] = {
		{"Head 1", NULL, NULL, a, 2, 2},
		{"Head 2", NULL, NULL, b, 2, 3},
		{"Head 1", NULL, NULL, c, 1, 2},
		{NULL, NULL, NULL, NULL, 0, 0}, /* blank */
	};
	const char *rows[2] = {"Encoder <self>", NULL};
	rt_plot_grid g = {"go . => va !", "Key positions", "Query positions",
			  panels, rows, 2, 2};
	membuf m;
	ck_assert_int_eq(rt_plot_grid_svg(mem_open(&m), &g, NULL, 0), ATTNRT_OK);
	char *doc = mem_close(&m);
	ck_assert(xml_is_well_formed(doc));
	ck_assert_int_eq(count(doc, "class=\"cell\""), 4 + 6 + 2);
	ck_assert_int_eq(count(doc, "class=\"panel-title\""), 3);
	ck_assert_int_eq(count(doc, "class=\"row-title\""), 1);
	ck_assert_ptr_nonnull(strstr(doc, ">Encoder &lt;self&gt;</text>"));
	ck_assert_int_eq(count(doc, "class=\"title\""), 1);
	ck_assert_int_eq(count(doc, ">Key positions</text>"), 3);
	/* beside the first column only: one per row */
	ck_assert_int_eq(count(doc, ">Query positions</text>"), 2);
	ck_assert_int_eq(count(doc, "class=\"colour-bar\""), 1);
	/* one scale over all panels: 0 and 1 of the first are its ends, and
	 * the 0.5 of the third panel is the middle of it */
	ck_assert_int_eq(count(doc, "fill=\"#fff5f0\"><title>0, 0: 0</title>"), 1);
	ck_assert_int_eq(count(doc, "fill=\"#67000d\"><title>1, 0: 1</title>"), 1);
	ck_assert_int_eq(count(doc, "fill=\"#fb6a4a\""), 3);
	free(doc);
}
END_TEST

START_TEST(test_grid_rejects_no_panels_no_values_and_too_many_cells)
{
	char err[128];
	float v[1] = {1};
	rt_plot_heatmap panels[2] = {{NULL, NULL, NULL, NULL, 0, 0},
				     {NULL, NULL, NULL, NULL, 0, 0}};
	rt_plot_grid g = {NULL, NULL, NULL, panels, NULL, 0, 2};
	ck_assert_int_eq(rt_plot_grid_svg(stdout, &g, err, sizeof err),
			 ATTNRT_ERR_ARG);
	ck_assert_str_eq(err, "no panels to draw");
	g.n_rows = 1;
	ck_assert_int_eq(rt_plot_grid_svg(stdout, &g, err, sizeof err),
			 ATTNRT_ERR_ARG);
	ck_assert_str_eq(err, "no values to draw");
	panels[0] = (rt_plot_heatmap){NULL, NULL, NULL, v, 1000, 600};
	panels[1] = panels[0];
	ck_assert_int_eq(rt_plot_grid_svg(stdout, &g, err, sizeof err),
			 ATTNRT_ERR_ARG);
	ck_assert_str_eq(err, "1200000 cells are too many to draw (at most "
			      "1000000)");
	panels[1].rows = 0; /* has values, but no rows: refused as a heatmap */
	ck_assert_int_eq(rt_plot_grid_svg(stdout, &g, err, sizeof err),
			 ATTNRT_ERR_ARG);
	ck_assert_str_eq(err, "no values to draw");
}
END_TEST

START_TEST(test_grid_save_writes_the_file_or_names_the_path)
{
	char path[] = "/tmp/attnc_grid_XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	close(fd);
	float v[4] = {1, 2, 3, 4};
	rt_plot_heatmap p = {NULL, NULL, NULL, v, 2, 2};
	rt_plot_grid g = {"w", "Keys", "Queries", &p, NULL, 1, 1};
	char err[256];
	ck_assert_int_eq(rt_plot_grid_save(path, &g, err, sizeof err), ATTNRT_OK);
	const char *doc = read_all(path);
	ck_assert(xml_is_well_formed(doc));
	ck_assert_int_eq(count(doc, "class=\"cell\""), 4);
	ck_assert_ptr_null(strstr(doc, "row-title"));
	remove(path);
	ck_assert_int_eq(rt_plot_grid_save("/nonexistent/dir/g.svg", &g, err,
					   sizeof err),
			 ATTNRT_ERR_IO);
	ck_assert_str_eq(err, "cannot write '/nonexistent/dir/g.svg': No such "
			      "file or directory");
}
END_TEST

/* ---- PNG ---- */

/* A PNG as this test reads it back, independently of rt_png.c: the
 * chunks' CRCs checked, IHDR's size, one IDAT of zlib data in deflate's
 * stored or fixed-Huffman blocks (what the writer may use; inflated
 * here), filter 0 on every row, and the Adler-32 of the data. */
typedef struct png_image {
	uint32_t w, h;
	unsigned char *rgb; /* w * h * 3 */
} png_image;

static uint32_t be32(const unsigned char *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

static uint32_t crc32_of(const unsigned char *b, size_t n)
{
	uint32_t c = 0xffffffffu;
	for (size_t i = 0; i < n; i++) {
		c ^= b[i];
		for (int k = 0; k < 8; k++)
			c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
	}
	return c ^ 0xffffffffu;
}

/* Deflate's bit reader (least significant bit first). */
typedef struct in_bits {
	const unsigned char *p, *end;
	uint32_t acc;
	int n;
} in_bits;

static uint32_t get_bits(in_bits *b, int n)
{
	while (b->n < n) {
		ck_assert(b->p < b->end);
		b->acc |= (uint32_t)*b->p++ << b->n;
		b->n += 8;
	}
	uint32_t v = b->acc & ((1u << n) - 1);
	b->acc >>= n;
	b->n -= n;
	return v;
}

/* n more bits of a Huffman code, most significant first, onto code. */
static uint32_t get_code(in_bits *b, uint32_t code, int n)
{
	for (int i = 0; i < n; i++)
		code = code << 1 | get_bits(b, 1);
	return code;
}

/* A symbol of the fixed literal/length code (RFC 1951, 3.2.6). */
static int get_litlen(in_bits *b)
{
	uint32_t c = get_code(b, 0, 7);
	if (c <= 0x17)
		return 256 + (int)c;
	c = get_code(b, c, 1);
	if (c >= 0x30 && c <= 0xbf)
		return (int)c - 0x30;
	if (c >= 0xc0 && c <= 0xc7)
		return 280 + (int)c - 0xc0;
	c = get_code(b, c, 1);
	ck_assert(c >= 0x190 && c <= 0x1ff);
	return 144 + (int)c - 0x190;
}

/* Inflates the zlib stream z (n bytes) into out (cap bytes); returns the
 * bytes written, with the stream's Adler-32 checked. */
static size_t inflate_fixed(const unsigned char *z, size_t n, unsigned char *out,
			    size_t cap)
{
	static const int lbase[29] = {3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23,
				      27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131,
				      163, 195, 227, 258};
	static const int dbase[30] = {1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97,
				      129, 193, 257, 385, 513, 769, 1025, 1537, 2049,
				      3073, 4097, 6145, 8193, 12289, 16385, 24577};
	ck_assert_uint_ge(n, 6);
	ck_assert_int_eq((z[0] << 8 | z[1]) % 31, 0);
	ck_assert_int_eq(z[0] & 0x0f, 8); /* deflate */
	in_bits b = {z + 2, z + n - 4, 0, 0};
	size_t got = 0;
	for (bool is_final = false; !is_final;) {
		is_final = get_bits(&b, 1);
		uint32_t type = get_bits(&b, 2);
		ck_assert_uint_le(type, 1); /* stored or fixed */
		if (type == 0) {
			b.acc = 0;
			b.n = 0; /* to the byte */
			size_t len = get_bits(&b, 16), nlen = get_bits(&b, 16);
			ck_assert_uint_eq(len ^ 0xffff, nlen);
			ck_assert_uint_le(got + len, cap);
			for (size_t i = 0; i < len; i++)
				out[got++] = (unsigned char)get_bits(&b, 8);
			continue;
		}
		for (int v; (v = get_litlen(&b)) != 256;) {
			if (v < 256) {
				ck_assert_uint_lt(got, cap);
				out[got++] = (unsigned char)v;
				continue;
			}
			int lc = v - 257, le = lc < 8 || lc == 28 ? 0 : lc / 4 - 1;
			ck_assert_int_lt(lc, 29);
			size_t len = (size_t)lbase[lc] + get_bits(&b, le);
			int dc = (int)get_code(&b, 0, 5);
			ck_assert_int_lt(dc, 30);
			size_t dist = (size_t)dbase[dc] + get_bits(&b, dc < 4 ? 0 : dc / 2 - 1);
			ck_assert_uint_le(dist, got);
			ck_assert_uint_le(got + len, cap);
			for (size_t i = 0; i < len; i++, got++)
				out[got] = out[got - dist];
		}
	}
	uint32_t a = 1, c = 0;
	for (size_t i = 0; i < got; i++) {
		a = (a + out[i]) % 65521;
		c = (c + a) % 65521;
	}
	ck_assert_uint_eq(be32(z + n - 4), c << 16 | a);
	return got;
}

static void png_read(const char *path, png_image *im)
{
	FILE *f = fopen(path, "rb");
	ck_assert_ptr_nonnull(f);
	static unsigned char d[1 << 22];
	size_t n = fread(d, 1, sizeof d, f);
	fclose(f);
	ck_assert_uint_lt(n, sizeof d);
	ck_assert(memcmp(d, "\x89PNG\r\n\x1a\n", 8) == 0);
	size_t at = 8;
	const unsigned char *z = NULL;
	size_t zn = 0;
	bool has_end = false;
	while (at + 12 <= n && !has_end) {
		uint32_t len = be32(d + at);
		ck_assert_uint_le(at + 12 + len, n);
		ck_assert_uint_eq(crc32_of(d + at + 4, len + 4), be32(d + at + 8 + len));
		const unsigned char *c = d + at + 8;
		if (memcmp(d + at + 4, "IHDR", 4) == 0) {
			im->w = be32(c);
			im->h = be32(c + 4);
			ck_assert_int_eq(c[8], 8); /* bits */
			ck_assert_int_eq(c[9], 2); /* RGB */
		} else if (memcmp(d + at + 4, "IDAT", 4) == 0) {
			z = c;
			zn = len;
		}
		has_end = memcmp(d + at + 4, "IEND", 4) == 0;
		at += 12 + len;
	}
	ck_assert(has_end && z && im->w > 0 && im->h > 0);
	size_t row = im->w * 3 + 1, raw = row * im->h;
	unsigned char *data = malloc(raw);
	ck_assert_ptr_nonnull(data);
	ck_assert_uint_eq(inflate_fixed(z, zn, data, raw), raw);
	im->rgb = malloc(im->w * im->h * 3);
	ck_assert_ptr_nonnull(im->rgb);
	for (uint32_t y = 0; y < im->h; y++) {
		ck_assert_int_eq(data[y * row], 0); /* filter: none */
		memcpy(im->rgb + y * im->w * 3, data + y * row + 1, im->w * 3);
	}
	free(data);
}

static unsigned long pixel(const png_image *im, double x, double y)
{
	const unsigned char *p = im->rgb + ((size_t)y * im->w + (size_t)x) * 3;
	return (unsigned long)p[0] << 16 | (unsigned long)p[1] << 8 | p[2];
}

/* A heatmap saved as .png is its SVG drawn: the same size, each cell's
 * centre in the colour its <rect> says, white around, text drawn dark
 * in the title's row; saved as .PNG the same. */
START_TEST(test_a_png_heatmap_draws_what_its_svg_says)
{
	static const float v[6] = {0, 0.2f, 0.4f, 0.6f, 0.8f, 1};
	rt_plot_heatmap h = {"attention", "keys", "queries", v, 2, 3};
	char path[] = "/tmp/attnc_png_XXXXXX", png[64], err[256];
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(rt_plot_heatmap_save(path, &h, err, sizeof err), ATTNRT_OK);
	char *svg = read_all(path);
	snprintf(png, sizeof png, "%s.PNG", path);
	ck_assert_int_eq(rt_plot_heatmap_save(png, &h, err, sizeof err), ATTNRT_OK);
	png_image im = {0};
	png_read(png, &im);
	double w = 0, hh = 0;
	ck_assert_int_eq(sscanf(strstr(svg, "<svg "), "<svg xmlns=\"http://www.w3.org/2000/svg\" "
				"width=\"%lf\" height=\"%lf\"", &w, &hh), 2);
	ck_assert_uint_eq(im.w, (uint32_t)w);
	ck_assert_uint_eq(im.h, (uint32_t)hh);
	int cells = 0;
	for (const char *c = strstr(svg, "class=\"cell\""); c;
	     c = strstr(c + 1, "class=\"cell\"")) {
		double x, y, cw, ch;
		unsigned long fill;
		ck_assert_int_eq(sscanf(c, "class=\"cell\" x=\"%lf\" y=\"%lf\" width=\"%lf\" "
					"height=\"%lf\" fill=\"#%lx\"", &x, &y, &cw, &ch, &fill), 5);
		ck_assert_uint_eq(pixel(&im, x + cw / 2, y + ch / 2), fill);
		cells++;
	}
	ck_assert_int_eq(cells, 6);
	ck_assert_uint_eq(pixel(&im, 1, 1), 0xffffff);
	int dark = 0;
	for (uint32_t x = 0; x < im.w; x++)
		for (uint32_t y = 8; y < 30; y++)
			dark += pixel(&im, x, y) == 0;
	ck_assert_int_gt(dark, 20); /* the title's letters */
	free(im.rgb);
	remove(path);
	remove(png);
}
END_TEST

/* A line plot as PNG: its series' blue is drawn, and the part of the
 * picture outside the frame stays white but for text and ticks. */
START_TEST(test_a_png_line_plot_draws_its_series)
{
	double x[3] = {0, 1, 2}, y[3] = {1, 3, 2};
	rt_plot_series s = {"loss", x, y, 3, RT_PLOT_LINE};
	rt_plot_lines p = {"loss", "epoch", "loss", &s, 1, {0, 0}, {0, 0}};
	char path[64], err[256];
	snprintf(path, sizeof path, "/tmp/attnc_png_lines_%d.png", (int)getpid());
	ck_assert_int_eq(rt_plot_lines_save(path, &p, err, sizeof err), ATTNRT_OK);
	png_image im = {0};
	png_read(path, &im);
	int blue = 0;
	for (uint32_t i = 0; i < im.w * im.h; i++)
		blue += pixel(&im, i % im.w, i / im.w) == 0x1f77b4;
	ck_assert_int_gt(blue, 200);
	free(im.rgb);
	remove(path);
}
END_TEST

/* The document is len bytes, not a C string: nothing past it is read
 * (ASan builds check), even in an unclosed tooltip or text. */
START_TEST(test_png_reads_no_further_than_the_length)
{
	static const char doc[] = "<svg width=\"4\" height=\"3\"><rect width=\"100%\" "
				  "height=\"100%\" fill=\"#123456\"/><title>x</titl";
	char err[256];
	size_t n = strlen(doc);
	char *exact = malloc(n);
	ck_assert_ptr_nonnull(exact);
	memcpy(exact, doc, n); /* no terminating NUL */
	char path[64];
	snprintf(path, sizeof path, "/tmp/attnc_png_exact_%d.png", (int)getpid());
	FILE *out = fopen(path, "wb");
	ck_assert_ptr_nonnull(out);
	ck_assert_int_eq(rt_plot_svg_to_png(exact, n, out, err, sizeof err), ATTNRT_OK);
	fclose(out);
	free(exact);
	png_image im = {0};
	png_read(path, &im);
	ck_assert_uint_eq(im.w, 4);
	ck_assert_uint_eq(im.h, 3);
	ck_assert_uint_eq(pixel(&im, 3, 2), 0x123456);
	free(im.rgb);
	remove(path);
}
END_TEST

START_TEST(test_the_file_name_chooses_the_format)
{
	ck_assert_int_eq(rt_plot_format_of("a.svg"), RT_PLOT_SVG);
	ck_assert_int_eq(rt_plot_format_of("dir.png/A.SVG"), RT_PLOT_SVG);
	ck_assert_int_eq(rt_plot_format_of("loss.png"), RT_PLOT_PNG);
	ck_assert_int_eq(rt_plot_format_of("/tmp/x.Png"), RT_PLOT_PNG);
	ck_assert_int_eq(rt_plot_format_of(".png"), RT_PLOT_OTHER);
	ck_assert_int_eq(rt_plot_format_of("png"), RT_PLOT_OTHER);
	ck_assert_int_eq(rt_plot_format_of("a.jpg"), RT_PLOT_OTHER);
	ck_assert_int_eq(rt_plot_format_of("a.svg.txt"), RT_PLOT_OTHER);
}
END_TEST

START_TEST(test_png_refuses_what_is_not_rt_plots_svg)
{
	char err[256];
	FILE *out = tmpfile();
	ck_assert_ptr_nonnull(out);
	const char *bad[] = {"<rect x=\"1\"/>", "no svg at all", "<svg width=\"0\" height=\"5\">",
			     "<svg width=\"10\" height=\"10\"><rect x=\"1\""};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		err[0] = '\0';
		ck_assert_int_eq(rt_plot_svg_to_png(bad[i], strlen(bad[i]), out, err,
						    sizeof err),
				 ATTNRT_ERR_ARG);
		ck_assert_ptr_nonnull(strstr(err, "PNG: "));
	}
	fclose(out);
}
END_TEST

static Suite *plot_suite(void)
{
	Suite *s = suite_create("runtime_plot");
	TCase *tc = tcase_create("plot");
	tcase_add_test(tc, test_the_xml_check_rejects_broken_documents);
	tcase_add_test(tc, test_reds_runs_from_near_white_to_dark_red);
	tcase_add_test(tc, test_ticks_are_round_numbers_inside_the_range);
	tcase_add_test(tc, test_line_plot_has_each_series_marker_label_and_legend_entry);
	tcase_add_test(tc, test_line_breaks_at_a_missing_point_and_text_is_escaped);
	tcase_add_test(tc, test_line_plot_rejects_nothing_to_draw_and_empty_ranges);
	tcase_add_test(tc, test_heatmap_has_a_cell_per_value_coloured_by_reds_and_a_scale);
	tcase_add_test(tc, test_heatmap_draws_nan_grey_and_a_constant_matrix);
	tcase_add_test(tc, test_heatmap_rejects_empty_or_huge_matrices);
	tcase_add_test(tc, test_save_writes_the_file_or_names_the_path_it_cannot_write);
	tcase_add_test(tc, test_grid_draws_each_panel_and_heading_with_one_colour_scale);
	tcase_add_test(tc, test_grid_rejects_no_panels_no_values_and_too_many_cells);
	tcase_add_test(tc, test_grid_save_writes_the_file_or_names_the_path);
	tcase_add_test(tc, test_a_png_heatmap_draws_what_its_svg_says);
	tcase_add_test(tc, test_a_png_line_plot_draws_its_series);
	tcase_add_test(tc, test_png_refuses_what_is_not_rt_plots_svg);
	tcase_add_test(tc, test_the_file_name_chooses_the_format);
	tcase_add_test(tc, test_png_reads_no_further_than_the_length);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(plot_suite());
}
