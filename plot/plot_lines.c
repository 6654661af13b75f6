/*
 * plot_lines.c - line plots (plot.h) like d2l's Animator and plot(): a
 * frame with grid lines and round ticks, each series as a line or as
 * markers clipped to the frame, a legend in the top right corner, the
 * title above and the axis labels beside.
 */
#include "plot_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define LINES_W 640.0
#define LINES_H 420.0

/* The range of the finite coordinates of every series along x (or y). */
static void data_range(const plot_lines *p, bool is_y, double *lo, double *hi)
{
	*lo = INFINITY;
	*hi = -INFINITY;
	for (size_t s = 0; s < p->n_series; s++) {
		const plot_series *r = &p->series[s];
		for (size_t i = 0; i < r->n; i++) {
			double v = is_y ? r->y[i] : r->x[i];
			if (!isfinite(r->x[i]) || !isfinite(r->y[i]))
				continue;
			*lo = v < *lo ? v : *lo;
			*hi = v > *hi ? v : *hi;
		}
	}
}

/* The axis range: lim if given, else the data's plus 5% margins. */
static void axis_range(const plot_lines *p, const double *lim, bool is_y,
		       double *lo, double *hi)
{
	if (lim[0] != 0 || lim[1] != 0) {
		*lo = lim[0];
		*hi = lim[1];
		return;
	}
	data_range(p, is_y, lo, hi);
	if (*lo > *hi) {
		*lo = 0;
		*hi = 1;
	} else if (*lo == *hi) {
		double d = fabs(*lo) > 0 ? fabs(*lo) * 0.5 : 0.5;
		*lo -= d;
		*hi += d;
	} else {
		double m = (*hi - *lo) * 0.05;
		*lo -= m;
		*hi += m;
	}
}

static void segment(cairo_t *cr, double x0, double y0, double x1, double y1,
		    unsigned rgb)
{
	plot_set_rgb(cr, rgb);
	cairo_move_to(cr, x0, y0);
	cairo_line_to(cr, x1, y1);
	cairo_stroke(cr);
}

static void axis_ticks(cairo_t *cr, const plot_frame *f, bool is_y)
{
	double ticks[32];
	size_t n = is_y ? plot_ticks(f->y0, f->y1, 5, ticks, 32)
			: plot_ticks(f->x0, f->x1, 6, ticks, 32);
	int dec = plot_tick_decimals(ticks, n);
	cairo_set_line_width(cr, 1);
	for (size_t i = 0; i < n; i++) {
		char label[48];
		snprintf(label, sizeof label, "%.*f", dec, ticks[i]);
		if (is_y) {
			double y = plot_fy(f, ticks[i]);
			segment(cr, f->px, y, f->px + f->pw, y, 0xe6e6e6);
			segment(cr, f->px - 5, y, f->px, y, 0x333333);
			plot_text(cr, f->px - 8, y + 4, PLOT_END, 11, false,
				  label);
		} else {
			double x = plot_fx(f, ticks[i]), yb = f->py + f->ph;
			segment(cr, x, f->py, x, yb, 0xe6e6e6);
			segment(cr, x, yb, x, yb + 5, 0x333333);
			plot_text(cr, x, yb + 18, PLOT_MIDDLE, 11, false, label);
		}
	}
}

static void marker(cairo_t *cr, double x, double y, size_t idx)
{
	cairo_new_sub_path(cr);
	cairo_arc(cr, x, y, 3.5, 0, 6.283185307179586);
	plot_set_series_colour(cr, idx, 0.5);
	cairo_fill_preserve(cr);
	plot_set_series_colour(cr, idx, 1);
	cairo_set_line_width(cr, 1);
	cairo_stroke(cr);
}

static void series(cairo_t *cr, const plot_frame *f, const plot_series *r,
		   size_t idx)
{
	if (r->style == PLOT_POINTS) {
		for (size_t i = 0; i < r->n; i++)
			if (isfinite(r->x[i]) && isfinite(r->y[i]))
				marker(cr, plot_fx(f, r->x[i]),
				       plot_fy(f, r->y[i]), idx);
		return;
	}
	bool is_pen_down = false;
	for (size_t i = 0; i < r->n; i++) {
		if (!isfinite(r->x[i]) || !isfinite(r->y[i])) {
			is_pen_down = false;
			continue;
		}
		double x = plot_fx(f, r->x[i]), y = plot_fy(f, r->y[i]);
		if (is_pen_down)
			cairo_line_to(cr, x, y);
		else
			cairo_move_to(cr, x, y);
		is_pen_down = true;
	}
	plot_set_series_colour(cr, idx, 1);
	plot_set_series_dash(cr, idx);
	cairo_set_line_width(cr, 1.8);
	cairo_stroke(cr);
	plot_set_series_dash(cr, 0);
}

/* The legend in the top right corner of the frame: a sample of each
 * labelled series and its label. */
static void legend(cairo_t *cr, const plot_frame *f, const plot_lines *p)
{
	size_t n = 0;
	double width = 0;
	for (size_t s = 0; s < p->n_series; s++) {
		if (!p->series[s].label)
			continue;
		n++;
		double w = plot_text_width(cr, 12, p->series[s].label);
		width = w > width ? w : width;
	}
	if (!n)
		return;
	double w = 48 + width, h = 10 + 18.0 * (double)n;
	double x = f->px + f->pw - w - 8, y = f->py + 8, ly = y + 18;
	cairo_rectangle(cr, x, y, w, h);
	cairo_set_source_rgba(cr, 1, 1, 1, 0.85);
	cairo_fill_preserve(cr);
	plot_set_rgb(cr, 0xcccccc);
	cairo_set_line_width(cr, 1);
	cairo_stroke(cr);
	for (size_t s = 0; s < p->n_series; s++) {
		const plot_series *r = &p->series[s];
		if (!r->label)
			continue;
		if (r->style == PLOT_POINTS) {
			marker(cr, x + 20, ly - 4, s);
		} else {
			cairo_move_to(cr, x + 8, ly - 4);
			cairo_line_to(cr, x + 32, ly - 4);
			plot_set_series_colour(cr, s, 1);
			plot_set_series_dash(cr, s);
			cairo_set_line_width(cr, 1.8);
			cairo_stroke(cr);
			plot_set_series_dash(cr, 0);
		}
		plot_text(cr, x + 38, ly, PLOT_START, 12, false, r->label);
		ly += 18;
	}
}

static bool check_lines(const plot_lines *p, char *err, size_t err_size)
{
	if (!p->n_series || !p->series)
		return plot_fail(err, err_size, "nothing to plot");
	for (size_t s = 0; s < p->n_series; s++)
		if (p->series[s].n && (!p->series[s].x || !p->series[s].y))
			return plot_fail(err, err_size,
					 "series %zu has no data", s);
	const double *lims[2] = {p->xlim, p->ylim};
	for (int a = 0; a < 2; a++) {
		const double *l = lims[a];
		bool is_given = l[0] != 0 || l[1] != 0;
		if (is_given &&
		    !(isfinite(l[0]) && isfinite(l[1]) && l[1] > l[0]))
			return plot_fail(err, err_size,
					 "the %c range [%g, %g] is empty",
					 a ? 'y' : 'x', l[0], l[1]);
	}
	return true;
}

static void draw_lines(cairo_t *cr, const void *what)
{
	const plot_lines *p = what;
	plot_frame f = {72, p->title ? 44 : 20, LINES_W - 72 - 24, 0, 0, 0, 0,
			0};
	f.ph = LINES_H - f.py - 58;
	axis_range(p, p->xlim, false, &f.x0, &f.x1);
	axis_range(p, p->ylim, true, &f.y0, &f.y1);
	axis_ticks(cr, &f, false);
	axis_ticks(cr, &f, true);
	cairo_save(cr);
	cairo_rectangle(cr, f.px, f.py, f.pw, f.ph);
	cairo_clip(cr);
	for (size_t s = 0; s < p->n_series; s++)
		series(cr, &f, &p->series[s], s);
	cairo_restore(cr);
	cairo_rectangle(cr, f.px, f.py, f.pw, f.ph);
	plot_set_rgb(cr, 0x333333);
	cairo_set_line_width(cr, 1);
	cairo_stroke(cr);
	legend(cr, &f, p);
	if (p->title)
		plot_text(cr, LINES_W / 2, 26, PLOT_MIDDLE, 15, false, p->title);
	if (p->xlabel)
		plot_text(cr, f.px + f.pw / 2, f.py + f.ph + 44, PLOT_MIDDLE,
			  13, false, p->xlabel);
	if (p->ylabel)
		plot_text(cr, 22, f.py + f.ph / 2, PLOT_MIDDLE, 13, true,
			  p->ylabel);
}

bool plot_lines_save(const char *path, const plot_lines *p, char *err,
		     size_t err_size)
{
	return check_lines(p, err, err_size) &&
	       plot_page_save(path, LINES_W, LINES_H, draw_lines, p, err,
			      err_size);
}
