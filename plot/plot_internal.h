/*
 * plot_internal.h - what the plot library's files share: a frame that
 * maps data to page coordinates, text set with an anchor, the colour
 * cycle, tick labels, and the page that becomes an SVG or PNG file.
 */
#ifndef ATTNC_PLOT_INTERNAL_H
#define ATTNC_PLOT_INTERNAL_H

#include "plot.h"

#include <cairo.h>

/* A rectangle of the page (px, py: top left) showing data [x0, x1] by
 * [y0, y1]. */
typedef struct plot_frame {
	double px, py, pw, ph;
	double x0, x1, y0, y1;
} plot_frame;

double plot_fx(const plot_frame *f, double x);
double plot_fy(const plot_frame *f, double y);

/* How text sits on its point: its start, middle or end at x. */
typedef enum plot_anchor {
	PLOT_START,
	PLOT_MIDDLE,
	PLOT_END,
} plot_anchor;

/* Sets s in the sans-serif face at size pixels, its baseline at y,
 * anchored at x; rotated by -90 degrees (reading upwards) when
 * is_vertical. */
void plot_text(cairo_t *cr, double x, double y, plot_anchor anchor, double size,
	       bool is_vertical, const char *s);

/* The width of s at size pixels. */
double plot_text_width(cairo_t *cr, double size, const char *s);

/* Series idx's colour of d2l's cycle, as the source of cr. */
void plot_set_series_colour(cairo_t *cr, size_t idx, double alpha);

/* Series idx's dash pattern (none for a solid line). */
void plot_set_series_dash(cairo_t *cr, size_t idx);

void plot_set_rgb(cairo_t *cr, unsigned rgb);

/* A tick step near range / target: 1, 2, 2.5 or 5 times a power of ten. */
double plot_nice_step(double range, int target);

/* Decimals that show every tick of n exactly. */
int plot_tick_decimals(const double *ticks, size_t n);

/* The colour scale: a vertical Reds gradient in bar over [y0, y1] with
 * ticks on its right. */
void plot_colour_bar(cairo_t *cr, const plot_frame *bar);

/* False with the message in err (always returns false). */
bool plot_fail(char *err, size_t err_size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

typedef void plot_draw_fn(cairo_t *cr, const void *what);

/* Draws a w x h pixel page (white) with draw(cr, what) into path: PNG
 * when path ends in .png, SVG otherwise. False with a message naming
 * path when it cannot be written or cairo fails. */
bool plot_page_save(const char *path, double w, double h, plot_draw_fn *draw,
		    const void *what, char *err, size_t err_size);

#endif
