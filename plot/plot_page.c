/*
 * plot_page.c - the pieces every picture shares (plot_internal.h): the
 * page, drawn once through cairo onto an SVG surface or an image surface
 * written as PNG, text in the sans-serif face, the colour cycle, ticks
 * and the colour scale.
 *
 * The file is opened here, not by cairo, so a failure names the path
 * and errno's reason; cairo writes through a callback into it, and the
 * file is written whole or not at all (rt_out, runtime/rt_file.c).
 */
#include "plot_internal.h"
#include "rt_file.h"

#include "attnrt.h"

#include <cairo-svg.h>
#include <fontconfig/fontconfig.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* d2l's format cycle: '-', 'm--', then matplotlib's colours. */
static const unsigned colours[] = {0x1f77b4, 0xbf00bf, 0xff7f0e, 0x008000,
				   0xd62728, 0x9467bd, 0x8c564b, 0x17becf};
#define N_COLOURS (sizeof colours / sizeof *colours)

/* matplotlib's 'Reds' (ColorBrewer, nine classes). */
static const unsigned char reds[9][3] = {
	{0xff, 0xf5, 0xf0}, {0xfe, 0xe0, 0xd2}, {0xfc, 0xbb, 0xa1},
	{0xfc, 0x92, 0x72}, {0xfb, 0x6a, 0x4a}, {0xef, 0x3b, 0x2c},
	{0xcb, 0x18, 0x1d}, {0xa5, 0x0f, 0x15}, {0x67, 0x00, 0x0d},
};

double plot_fx(const plot_frame *f, double x)
{
	return f->px + (x - f->x0) / (f->x1 - f->x0) * f->pw;
}

double plot_fy(const plot_frame *f, double y)
{
	return f->py + f->ph - (y - f->y0) / (f->y1 - f->y0) * f->ph;
}

bool plot_fail(char *err, size_t err_size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (err && err_size)
		vsnprintf(err, err_size, fmt, ap);
	va_end(ap);
	return false;
}

void plot_set_rgb(cairo_t *cr, unsigned rgb)
{
	cairo_set_source_rgb(cr, (rgb >> 16 & 0xff) / 255.0,
			     (rgb >> 8 & 0xff) / 255.0, (rgb & 0xff) / 255.0);
}

void plot_set_series_colour(cairo_t *cr, size_t idx, double alpha)
{
	unsigned c = colours[idx % N_COLOURS];
	cairo_set_source_rgba(cr, (c >> 16 & 0xff) / 255.0,
			      (c >> 8 & 0xff) / 255.0, (c & 0xff) / 255.0,
			      alpha);
}

void plot_set_series_dash(cairo_t *cr, size_t idx)
{
	static const double dashed[] = {6, 4}, dash_dot[] = {8, 3, 2, 3},
			    dotted[] = {2, 3};
	switch (idx % 4) {
	case 0:
		cairo_set_dash(cr, NULL, 0, 0);
		break;
	case 1:
		cairo_set_dash(cr, dashed, 2, 0);
		break;
	case 2:
		cairo_set_dash(cr, dash_dot, 4, 0);
		break;
	case 3:
		cairo_set_dash(cr, dotted, 2, 0);
		break;
	}
}

static void set_font(cairo_t *cr, double size)
{
	cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL,
			       CAIRO_FONT_WEIGHT_NORMAL);
	cairo_set_font_size(cr, size);
}

double plot_text_width(cairo_t *cr, double size, const char *s)
{
	cairo_text_extents_t e;
	set_font(cr, size);
	cairo_text_extents(cr, s, &e);
	return e.x_advance;
}

void plot_text(cairo_t *cr, double x, double y, plot_anchor anchor, double size,
	       bool is_vertical, const char *s)
{
	double w = plot_text_width(cr, size, s);
	double shift = anchor == PLOT_START    ? 0
		       : anchor == PLOT_MIDDLE ? w / 2
					       : w;
	cairo_save(cr);
	cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
	cairo_translate(cr, x, y);
	if (is_vertical)
		cairo_rotate(cr, -1.5707963267948966); /* -pi/2 */
	cairo_move_to(cr, -shift, 0);
	cairo_show_text(cr, s);
	cairo_restore(cr);
}

void plot_reds(double t, unsigned char rgb[3])
{
	if (isnan(t)) {
		rgb[0] = rgb[1] = rgb[2] = 0xbf;
		return;
	}
	t = t < 0 ? 0 : t > 1 ? 1 : t;
	double s = t * 8;
	int i = s >= 8 ? 7 : (int)s;
	double frac = s - i;
	for (int c = 0; c < 3; c++)
		rgb[c] = (unsigned char)lround(
			reds[i][c] + (reds[i + 1][c] - reds[i][c]) * frac);
}

double plot_nice_step(double range, int target)
{
	double raw = range / (target > 0 ? target : 1);
	double mag = pow(10, floor(log10(raw)));
	double f = raw / mag;
	double nice = f <= 1     ? 1
		      : f <= 2   ? 2
		      : f <= 2.5 ? 2.5
		      : f <= 5   ? 5
				 : 10;
	return nice * mag;
}

size_t plot_ticks(double lo, double hi, int target, double *ticks, size_t max)
{
	if (!(hi > lo) || !isfinite(lo) || !isfinite(hi))
		return 0;
	double step = plot_nice_step(hi - lo, target);
	double first = ceil(lo / step - 1e-9);
	size_t n = 0;
	for (double k = first; n < max && k * step <= hi + step * 1e-9; k++) {
		double v = k * step;
		ticks[n++] = fabs(v) < step * 1e-9 ? 0 : v;
	}
	return n;
}

int plot_tick_decimals(const double *ticks, size_t n)
{
	double step = n > 1 ? ticks[1] - ticks[0] : 1;
	int d = 0;
	while (d < 8 && fabs(step * pow(10, d) - round(step * pow(10, d))) >
				1e-6 * step * pow(10, d))
		d++;
	return d;
}

void plot_colour_bar(cairo_t *cr, const plot_frame *bar)
{
	cairo_pattern_t *g = cairo_pattern_create_linear(0, bar->py + bar->ph,
							 0, bar->py);
	for (int i = 0; i < 9; i++)
		cairo_pattern_add_color_stop_rgb(g, i / 8.0, reds[i][0] / 255.0,
						 reds[i][1] / 255.0,
						 reds[i][2] / 255.0);
	cairo_rectangle(cr, bar->px, bar->py, bar->pw, bar->ph);
	cairo_set_source(cr, g);
	cairo_fill_preserve(cr);
	cairo_pattern_destroy(g);
	plot_set_rgb(cr, 0x333333);
	cairo_set_line_width(cr, 1);
	cairo_stroke(cr);
	double ticks[32];
	size_t n = plot_ticks(bar->y0, bar->y1, 5, ticks, 32);
	int dec = plot_tick_decimals(ticks, n);
	for (size_t i = 0; i < n; i++) {
		char label[48];
		double y = plot_fy(bar, ticks[i]), x = bar->px + bar->pw;
		snprintf(label, sizeof label, "%.*f", dec, ticks[i]);
		plot_set_rgb(cr, 0x333333);
		cairo_move_to(cr, x, y);
		cairo_line_to(cr, x + 4, y);
		cairo_stroke(cr);
		plot_text(cr, x + 7, y + 4, PLOT_START, 11, false, label);
	}
}

static bool has_ext(const char *path, const char *ext)
{
	size_t n = strlen(path), e = strlen(ext);
	if (n <= e)
		return false;
	for (size_t i = 0; i < e; i++)
		if (tolower((unsigned char)path[n - e + i]) != ext[i])
			return false;
	return true;
}

plot_format plot_format_of(const char *path)
{
	return has_ext(path, ".svg")   ? PLOT_SVG
	       : has_ext(path, ".png") ? PLOT_PNG
				       : PLOT_OTHER;
}

/* cairo's writer: buffered into the file being written (rt_out keeps
 * the first errno). */
typedef rt_out sink;

static cairo_status_t sink_write(void *closure, const unsigned char *data,
				 unsigned int length)
{
	sink *s = closure;
	if (s->stream && fwrite(data, 1, length, s->stream) == length)
		return CAIRO_STATUS_SUCCESS;
	if (!s->errnum)
		s->errnum = EIO;
	return CAIRO_STATUS_WRITE_ERROR;
}

/* The surface for the page: SVG in pixels written to s, or an RGB image. */
static cairo_surface_t *page_surface(bool is_png, double w, double h, sink *s)
{
	if (is_png)
		return cairo_image_surface_create(CAIRO_FORMAT_RGB24,
						  (int)ceil(w), (int)ceil(h));
	cairo_surface_t *svg = cairo_svg_surface_create_for_stream(sink_write,
								   s, w, h);
	cairo_svg_surface_set_document_unit(svg, CAIRO_SVG_UNIT_PX);
	return svg;
}

/* Draws the page on surface sf and finishes it (an SVG is written then,
 * a PNG after); cairo's status. */
static cairo_status_t page_draw(cairo_surface_t *sf, bool is_png, sink *s,
				plot_draw_fn *draw, const void *what)
{
	cairo_t *cr = cairo_create(sf);
	cairo_set_source_rgb(cr, 1, 1, 1);
	cairo_paint(cr);
	draw(cr, what);
	cairo_status_t st = cairo_status(cr);
	cairo_destroy(cr);
	if (st == CAIRO_STATUS_SUCCESS && is_png)
		st = cairo_surface_write_to_png_stream(sf, sink_write, s);
	cairo_surface_finish(sf);
	if (st == CAIRO_STATUS_SUCCESS)
		st = cairo_surface_status(sf);
	return st;
}

bool plot_page_save(const char *path, double w, double h, plot_draw_fn *draw,
		    const void *what, char *err, size_t err_size)
{
	bool is_png = plot_format_of(path) == PLOT_PNG;
	sink s;
	if (rt_out_open(&s, path, NULL, 0) != ATTNRT_OK)
		return plot_fail(err, err_size, "cannot write '%s': %s", path,
				 strerror(s.errnum));
	rt_out_stream(&s);
	cairo_surface_t *sf = page_surface(is_png, w, h, &s);
	cairo_status_t st = page_draw(sf, is_png, &s, draw, what);
	cairo_surface_destroy(sf);
	if (st != CAIRO_STATUS_SUCCESS && !s.errnum) {
		rt_out_abort(&s);
		return plot_fail(err, err_size, "drawing '%s' failed: %s", path,
				 cairo_status_to_string(st));
	}
	if (rt_out_commit(&s, path, NULL, 0) != ATTNRT_OK)
		return plot_fail(err, err_size, "cannot write '%s': %s", path,
				 strerror(s.errnum));
	return true;
}

void plot_fini(void)
{
	cairo_debug_reset_static_data();
	FcFini();
}
