/*
 * rt_plot.c - SVG pictures written by hand (rt_plot.h): line plots like
 * d2l's Animator and plot(), heatmaps like its show_heatmaps.
 *
 * Both share one frame: a rectangle on the page that maps data
 * coordinates to pixels (y up). Everything is written straight to the
 * FILE; the only state is on the stack. Text is escaped for XML, numbers
 * are printed with one decimal of a pixel, and every element that a test
 * may count carries a class: "series" (a line), "point" (a marker),
 * "cell" (a heatmap element), "title", "xlabel", "ylabel", "legend".
 */
#include "rt_plot.h"

#include "rt_internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FONT "DejaVu Sans, Helvetica, Arial, sans-serif"

/* d2l's format cycle: '-', 'm--', then matplotlib's colours. */
static const char *const colours[] = {"#1f77b4", "#bf00bf", "#ff7f0e",
				      "#008000", "#d62728", "#9467bd",
				      "#8c564b", "#17becf"};
static const char *const dashes[] = {"", "6,4", "8,3,2,3", "2,3"};
#define N_COLOURS (sizeof colours / sizeof *colours)
#define N_DASHES (sizeof dashes / sizeof *dashes)

/* matplotlib's 'Reds' (ColorBrewer, nine classes). */
static const unsigned char reds[9][3] = {
	{0xff, 0xf5, 0xf0}, {0xfe, 0xe0, 0xd2}, {0xfc, 0xbb, 0xa1},
	{0xfc, 0x92, 0x72}, {0xfb, 0x6a, 0x4a}, {0xef, 0x3b, 0x2c},
	{0xcb, 0x18, 0x1d}, {0xa5, 0x0f, 0x15}, {0x67, 0x00, 0x0d},
};

/* A rectangle of the page (px, py: top left) showing data [x0, x1] by
 * [y0, y1]. */
typedef struct frame {
	double px, py, pw, ph;
	double x0, x1, y0, y1;
} frame;

static double fx(const frame *f, double x)
{
	return f->px + (x - f->x0) / (f->x1 - f->x0) * f->pw;
}

static double fy(const frame *f, double y)
{
	return f->py + f->ph - (y - f->y0) / (f->y1 - f->y0) * f->ph;
}

/* ---- small pieces ------------------------------------------------------------ */

void rt_plot_reds(double t, unsigned char rgb[3])
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
		rgb[c] = (unsigned char)lround(reds[i][c] +
					       (reds[i + 1][c] - reds[i][c]) * frac);
}

static double nice_step(double range, int target)
{
	double raw = range / (target > 0 ? target : 1);
	double mag = pow(10, floor(log10(raw)));
	double f = raw / mag;
	double nice = f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10;
	return nice * mag;
}

size_t rt_plot_ticks(double lo, double hi, int target, double *ticks,
		     size_t max)
{
	if (!(hi > lo) || !isfinite(lo) || !isfinite(hi))
		return 0;
	double step = nice_step(hi - lo, target);
	double first = ceil(lo / step - 1e-9);
	size_t n = 0;
	for (double k = first; n < max && k * step <= hi + step * 1e-9; k++) {
		double v = k * step;
		ticks[n++] = fabs(v) < step * 1e-9 ? 0 : v;
	}
	return n;
}

/* Decimals that show every tick of spacing step exactly. */
static int tick_decimals(const double *ticks, size_t n)
{
	double step = n > 1 ? ticks[1] - ticks[0] : 1;
	int d = 0;
	while (d < 8 && fabs(step * pow(10, d) - round(step * pow(10, d))) >
				1e-6 * step * pow(10, d))
		d++;
	return d;
}

static void put_escaped(FILE *out, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&': fputs("&amp;", out); break;
		case '<': fputs("&lt;", out); break;
		case '>': fputs("&gt;", out); break;
		case '"': fputs("&quot;", out); break;
		default: fputc(*s, out);
		}
	}
}

/* <text class=cls ...>s</text>, rotated by -90 degrees when is_vertical. */
static void put_text(FILE *out, const char *cls, double x, double y,
		     const char *anchor, int size, bool is_vertical,
		     const char *s)
{
	fprintf(out, "<text class=\"%s\" x=\"%.1f\" y=\"%.1f\" "
		     "text-anchor=\"%s\" font-size=\"%d\"", cls, x, y, anchor, size);
	if (is_vertical)
		fprintf(out, " transform=\"rotate(-90 %.1f %.1f)\"", x, y);
	fputc('>', out);
	put_escaped(out, s);
	fputs("</text>\n", out);
}

static void put_header(FILE *out, double w, double h)
{
	fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		     "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
		     "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"%s\">\n"
		     "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
		w, h, w, h, FONT);
}

/* Finishes the document; ATTNRT_ERR_IO if any write failed. */
static int put_footer(FILE *out, char *err, size_t err_size)
{
	fputs("</svg>\n", out);
	if (fflush(out) != 0 || ferror(out))
		return rt_fail(err, err_size, ATTNRT_ERR_IO,
			       "writing the picture failed");
	return ATTNRT_OK;
}

static void put_labels(FILE *out, const char *title, const char *xlabel,
		       const char *ylabel, const frame *f, double page_w,
		       double xlabel_y)
{
	if (title)
		put_text(out, "title", page_w / 2, 26, "middle", 15, false, title);
	if (xlabel)
		put_text(out, "xlabel", f->px + f->pw / 2, xlabel_y, "middle", 13,
			 false, xlabel);
	if (ylabel)
		put_text(out, "ylabel", 18, f->py + f->ph / 2, "middle", 13, true,
			 ylabel);
}

/* ---- line plots ------------------------------------------------------------------ */

#define LINES_W 640.0
#define LINES_H 420.0

/* The range of the finite coordinates of every series along x (or y). */
static void data_range(const rt_plot_lines *p, bool is_y, double *lo,
		       double *hi)
{
	*lo = INFINITY;
	*hi = -INFINITY;
	for (size_t s = 0; s < p->n_series; s++) {
		const rt_plot_series *r = &p->series[s];
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
static void axis_range(const rt_plot_lines *p, const double *lim, bool is_y,
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

static void put_axis_ticks(FILE *out, const frame *f, bool is_y)
{
	double ticks[32];
	size_t n = is_y ? rt_plot_ticks(f->y0, f->y1, 5, ticks, 32)
			: rt_plot_ticks(f->x0, f->x1, 6, ticks, 32);
	int dec = tick_decimals(ticks, n);
	for (size_t i = 0; i < n; i++) {
		char label[48];
		snprintf(label, sizeof label, "%.*f", dec, ticks[i]);
		if (is_y) {
			double y = fy(f, ticks[i]);
			fprintf(out, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" "
				     "x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e6e6e6\"/>\n"
				     "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
				     "y2=\"%.1f\" stroke=\"#333\"/>\n",
				f->px, y, f->px + f->pw, y, f->px - 5, y, f->px, y);
			put_text(out, "tick", f->px - 8, y + 4, "end", 11, false, label);
		} else {
			double x = fx(f, ticks[i]), yb = f->py + f->ph;
			fprintf(out, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" "
				     "x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e6e6e6\"/>\n"
				     "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
				     "y2=\"%.1f\" stroke=\"#333\"/>\n",
				x, f->py, x, yb, x, yb, x, yb + 5);
			put_text(out, "tick", x, yb + 18, "middle", 11, false, label);
		}
	}
}

static void put_line_series(FILE *out, const frame *f,
			    const rt_plot_series *r, size_t idx)
{
	fputs("<path class=\"series\" d=\"", out);
	bool is_pen_down = false;
	for (size_t i = 0; i < r->n; i++) {
		if (!isfinite(r->x[i]) || !isfinite(r->y[i])) {
			is_pen_down = false;
			continue;
		}
		fprintf(out, "%s%.1f %.1f ", is_pen_down ? "L" : "M", fx(f, r->x[i]),
			fy(f, r->y[i]));
		is_pen_down = true;
	}
	fprintf(out, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\"",
		colours[idx % N_COLOURS]);
	if (*dashes[idx % N_DASHES])
		fprintf(out, " stroke-dasharray=\"%s\"", dashes[idx % N_DASHES]);
	fputs("/>\n", out);
}

static void put_marker(FILE *out, double x, double y, size_t idx)
{
	const char *c = colours[idx % N_COLOURS];
	fprintf(out, "<circle class=\"point\" cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" "
		     "fill=\"%s\" fill-opacity=\"0.5\" stroke=\"%s\"/>\n",
		x, y, c, c);
}

static void put_series(FILE *out, const frame *f, const rt_plot_series *r,
		       size_t idx)
{
	if (r->style == RT_PLOT_LINE) {
		put_line_series(out, f, r, idx);
		return;
	}
	for (size_t i = 0; i < r->n; i++)
		if (isfinite(r->x[i]) && isfinite(r->y[i]))
			put_marker(out, fx(f, r->x[i]), fy(f, r->y[i]), idx);
}

/* The legend in the top right corner of the frame: a sample of each
 * labelled series and its label. */
static void put_legend(FILE *out, const frame *f, const rt_plot_lines *p)
{
	size_t n = 0, width = 0;
	for (size_t s = 0; s < p->n_series; s++) {
		if (!p->series[s].label)
			continue;
		n++;
		size_t len = strlen(p->series[s].label);
		width = len > width ? len : width;
	}
	if (!n)
		return;
	double w = 44 + 7.0 * (double)width, h = 10 + 18.0 * (double)n;
	double x = f->px + f->pw - w - 8, y = f->py + 8;
	fprintf(out, "<g class=\"legend\">\n<rect x=\"%.1f\" y=\"%.1f\" "
		     "width=\"%.1f\" height=\"%.1f\" fill=\"white\" "
		     "fill-opacity=\"0.85\" stroke=\"#ccc\"/>\n", x, y, w, h);
	double ly = y + 14;
	for (size_t s = 0; s < p->n_series; s++) {
		const rt_plot_series *r = &p->series[s];
		if (!r->label)
			continue;
		if (r->style == RT_PLOT_POINTS) {
			const char *c = colours[s % N_COLOURS];
			fprintf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" "
				     "fill=\"%s\" fill-opacity=\"0.5\" stroke=\"%s\"/>\n",
				x + 20, ly - 4, c, c);
		} else {
			fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
				     "y2=\"%.1f\" stroke=\"%s\" stroke-width=\"1.8\" "
				     "stroke-dasharray=\"%s\"/>\n",
				x + 8, ly - 4, x + 32, ly - 4, colours[s % N_COLOURS],
				*dashes[s % N_DASHES] ? dashes[s % N_DASHES] : "none");
		}
		put_text(out, "legend-label", x + 38, ly, "start", 12, false,
			 r->label);
		ly += 18;
	}
	fputs("</g>\n", out);
}

static int check_lines(const rt_plot_lines *p, char *err, size_t err_size)
{
	if (!p->n_series || !p->series)
		return rt_fail(err, err_size, ATTNRT_ERR_ARG, "nothing to plot");
	for (size_t s = 0; s < p->n_series; s++)
		if (p->series[s].n && (!p->series[s].x || !p->series[s].y))
			return rt_fail(err, err_size, ATTNRT_ERR_ARG,
				       "series %zu has no data", s);
	const double *lims[2] = {p->xlim, p->ylim};
	for (int a = 0; a < 2; a++) {
		const double *l = lims[a];
		bool is_given = l[0] != 0 || l[1] != 0;
		if (is_given && !(isfinite(l[0]) && isfinite(l[1]) && l[1] > l[0]))
			return rt_fail(err, err_size, ATTNRT_ERR_ARG,
				       "the %c range [%g, %g] is empty",
				       a ? 'y' : 'x', l[0], l[1]);
	}
	return ATTNRT_OK;
}

int rt_plot_lines_svg(FILE *out, const rt_plot_lines *p, char *err,
		      size_t err_size)
{
	int rc = check_lines(p, err, err_size);
	if (rc != ATTNRT_OK)
		return rc;
	frame f = {72, p->title ? 44 : 20, LINES_W - 72 - 24, 0, 0, 0, 0, 0};
	f.ph = LINES_H - f.py - 58;
	axis_range(p, p->xlim, false, &f.x0, &f.x1);
	axis_range(p, p->ylim, true, &f.y0, &f.y1);
	put_header(out, LINES_W, LINES_H);
	fprintf(out, "<defs><clipPath id=\"frame\"><rect x=\"%.1f\" y=\"%.1f\" "
		     "width=\"%.1f\" height=\"%.1f\"/></clipPath></defs>\n",
		f.px, f.py, f.pw, f.ph);
	put_axis_ticks(out, &f, false);
	put_axis_ticks(out, &f, true);
	fputs("<g clip-path=\"url(#frame)\">\n", out);
	for (size_t s = 0; s < p->n_series; s++)
		put_series(out, &f, &p->series[s], s);
	fputs("</g>\n", out);
	fprintf(out, "<rect class=\"frame\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
		     "height=\"%.1f\" fill=\"none\" stroke=\"#333\"/>\n",
		f.px, f.py, f.pw, f.ph);
	put_legend(out, &f, p);
	put_labels(out, p->title, p->xlabel, p->ylabel, &f, LINES_W,
		   f.py + f.ph + 44);
	return put_footer(out, err, err_size);
}

/* ---- heatmaps ------------------------------------------------------------------------ */

#define HEAT_MAX_SIDE 480
#define HEAT_MIN_BAR 160.0

/* The smallest and largest finite value; 0 and 1 if there is none, and a
 * range of 1 around a constant matrix. */
static void value_range(const rt_plot_heatmap *h, double *lo, double *hi)
{
	*lo = INFINITY;
	*hi = -INFINITY;
	for (size_t i = 0; i < h->rows * h->cols; i++) {
		double v = h->values[i];
		if (!isfinite(v))
			continue;
		*lo = v < *lo ? v : *lo;
		*hi = v > *hi ? v : *hi;
	}
	if (*lo > *hi) {
		*lo = 0;
		*hi = 1;
	} else if (*lo == *hi) {
		*lo -= 0.5;
		*hi += 0.5;
	}
}

static void put_cells(FILE *out, const rt_plot_heatmap *h, const frame *f,
		      double cell, double lo, double hi)
{
	fputs("<g shape-rendering=\"crispEdges\">\n", out);
	for (size_t r = 0; r < h->rows; r++) {
		for (size_t c = 0; c < h->cols; c++) {
			double v = h->values[r * h->cols + c];
			unsigned char rgb[3];
			rt_plot_reds(isfinite(v) ? (v - lo) / (hi - lo) : NAN, rgb);
			fprintf(out, "<rect class=\"cell\" x=\"%.1f\" y=\"%.1f\" "
				     "width=\"%.1f\" height=\"%.1f\" "
				     "fill=\"#%02x%02x%02x\"><title>%zu, %zu: %.4g"
				     "</title></rect>\n",
				f->px + (double)c * cell, f->py + (double)r * cell, cell,
				cell, rgb[0], rgb[1], rgb[2], r, c, v);
		}
	}
	fputs("</g>\n", out);
}

/* Ticks at round indices below (columns) or left of (rows) the cells. */
static void put_index_ticks(FILE *out, const frame *f, double cell, size_t n,
			    bool is_rows)
{
	size_t step = (size_t)nice_step((double)n, 6);
	step = step ? step : 1;
	for (size_t i = 0; i < n; i += step) {
		char label[32];
		snprintf(label, sizeof label, "%zu", i);
		double at = (double)i * cell + cell / 2;
		if (is_rows) {
			double y = f->py + at;
			fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
				     "y2=\"%.1f\" stroke=\"#333\"/>\n",
				f->px - 5, y, f->px, y);
			put_text(out, "tick", f->px - 8, y + 4, "end", 11, false, label);
		} else {
			double x = f->px + at, yb = f->py + f->ph;
			fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
				     "y2=\"%.1f\" stroke=\"#333\"/>\n",
				x, yb, x, yb + 5);
			put_text(out, "tick", x, yb + 18, "middle", 11, false, label);
		}
	}
}

/* The colour scale: a vertical gradient over [lo, hi] with ticks. */
static void put_colour_bar(FILE *out, const frame *bar)
{
	fputs("<defs><linearGradient id=\"reds\" x1=\"0\" y1=\"1\" x2=\"0\" "
	      "y2=\"0\">\n", out);
	for (int i = 0; i < 9; i++)
		fprintf(out, "<stop offset=\"%.3f\" stop-color=\"#%02x%02x%02x\"/>\n",
			i / 8.0, reds[i][0], reds[i][1], reds[i][2]);
	fputs("</linearGradient></defs>\n", out);
	fprintf(out, "<rect class=\"colour-bar\" x=\"%.1f\" y=\"%.1f\" "
		     "width=\"%.1f\" height=\"%.1f\" fill=\"url(#reds)\" "
		     "stroke=\"#333\"/>\n",
		bar->px, bar->py, bar->pw, bar->ph);
	double ticks[32];
	size_t n = rt_plot_ticks(bar->y0, bar->y1, 5, ticks, 32);
	int dec = tick_decimals(ticks, n);
	for (size_t i = 0; i < n; i++) {
		char label[48];
		double y = fy(bar, ticks[i]), x = bar->px + bar->pw;
		snprintf(label, sizeof label, "%.*f", dec, ticks[i]);
		fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
			     "stroke=\"#333\"/>\n", x, y, x + 4, y);
		put_text(out, "tick", x + 7, y + 4, "start", 11, false, label);
	}
}

static int check_heatmap(const rt_plot_heatmap *h, char *err, size_t err_size)
{
	if (!h->values || !h->rows || !h->cols)
		return rt_fail(err, err_size, ATTNRT_ERR_ARG,
			       "no values to draw");
	if (h->rows > RT_PLOT_MAX_CELLS || h->cols > RT_PLOT_MAX_CELLS ||
	    h->rows * h->cols > RT_PLOT_MAX_CELLS)
		return rt_fail(err, err_size, ATTNRT_ERR_ARG,
			       "%zu x %zu cells are too many to draw (at most %d)",
			       h->rows, h->cols, RT_PLOT_MAX_CELLS);
	return ATTNRT_OK;
}

int rt_plot_heatmap_svg(FILE *out, const rt_plot_heatmap *h, char *err,
			size_t err_size)
{
	int rc = check_heatmap(h, err, err_size);
	if (rc != ATTNRT_OK)
		return rc;
	size_t side = h->rows > h->cols ? h->rows : h->cols;
	double cell = side >= HEAT_MAX_SIDE ? 1 : (double)(HEAT_MAX_SIDE / side);
	cell = cell > 40 ? 40 : cell;
	frame f = {72, h->title ? 44 : 20, cell * (double)h->cols,
		   cell * (double)h->rows, 0, 0, 0, 0};
	double lo, hi, body = f.ph > HEAT_MIN_BAR ? f.ph : HEAT_MIN_BAR;
	value_range(h, &lo, &hi);
	frame bar = {f.px + f.pw + 24, f.py, 16, body, 0, 1, lo, hi};
	double page_w = bar.px + bar.pw + 70, page_h = f.py + body + 58;
	put_header(out, page_w, page_h);
	put_cells(out, h, &f, cell, lo, hi);
	fprintf(out, "<rect class=\"frame\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
		     "height=\"%.1f\" fill=\"none\" stroke=\"#333\"/>\n",
		f.px, f.py, f.pw, f.ph);
	put_index_ticks(out, &f, cell, h->cols, false);
	put_index_ticks(out, &f, cell, h->rows, true);
	put_colour_bar(out, &bar);
	put_labels(out, h->title, h->xlabel, h->ylabel, &f, page_w,
		   f.py + f.ph + 44);
	return put_footer(out, err, err_size);
}

/* ---- grids of heatmaps ------------------------------------------------------------------ */

#define GRID_BOX 160.0  /* the side of the square a panel fits in */
#define GRID_MAX_CELL 28.0
#define GRID_GAP 56.0    /* between columns: the next panel's ticks */
#define GRID_LEFT 72.0

/* The range of the finite values of every panel, as value_range does. */
static void grid_range(const rt_plot_grid *g, double *lo, double *hi)
{
	*lo = INFINITY;
	*hi = -INFINITY;
	for (size_t p = 0; p < g->n_rows * g->n_cols; p++) {
		const rt_plot_heatmap *h = &g->panels[p];
		if (!h->values)
			continue;
		double a, b;
		value_range(h, &a, &b);
		*lo = a < *lo ? a : *lo;
		*hi = b > *hi ? b : *hi;
	}
}

static bool grid_has_row_titles(const rt_plot_grid *g)
{
	for (size_t r = 0; g->row_titles && r < g->n_rows; r++)
		if (g->row_titles[r])
			return true;
	return false;
}

/* A panel's cell side: the matrix fitted in the box, square cells. */
static double panel_cell(const rt_plot_heatmap *h)
{
	size_t side = h->rows > h->cols ? h->rows : h->cols;
	double cell = GRID_BOX / (double)side;
	return cell > GRID_MAX_CELL ? GRID_MAX_CELL : cell;
}

/* The largest width (is_width) or height of the panels of column or row
 * i. */
static double grid_extent(const rt_plot_grid *g, size_t i, bool is_width)
{
	double most = 0;
	size_t n = is_width ? g->n_rows : g->n_cols;
	for (size_t k = 0; k < n; k++) {
		const rt_plot_heatmap *h =
			&g->panels[is_width ? k * g->n_cols + i : i * g->n_cols + k];
		double e = h->values ? panel_cell(h) *
					       (double)(is_width ? h->cols : h->rows)
				     : 0;
		most = e > most ? e : most;
	}
	return most;
}

/* Panel p with its frame at (x, y + 20): its title above. */
static void put_panel(FILE *out, const rt_plot_grid *g, size_t p, double x,
		      double y, double lo, double hi)
{
	const rt_plot_heatmap *h = &g->panels[p];
	double cell = panel_cell(h);
	frame f = {x, y + 20, cell * (double)h->cols, cell * (double)h->rows,
		   0, 0, 0, 0};
	if (h->title)
		put_text(out, "panel-title", f.px + f.pw / 2, y + 14, "middle", 12,
			 false, h->title);
	put_cells(out, h, &f, cell, lo, hi);
	fprintf(out, "<rect class=\"frame\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
		     "height=\"%.1f\" fill=\"none\" stroke=\"#333\"/>\n",
		f.px, f.py, f.pw, f.ph);
	put_index_ticks(out, &f, cell, h->cols, false);
	put_index_ticks(out, &f, cell, h->rows, true);
	if (g->xlabel)
		put_text(out, "xlabel", f.px + f.pw / 2, f.py + f.ph + 36, "middle",
			 12, false, g->xlabel);
	if (g->ylabel && p % g->n_cols == 0)
		put_text(out, "ylabel", f.px - 40, f.py + f.ph / 2, "middle", 12,
			 true, g->ylabel);
}

/* Draws row r of the grid from y down; returns the row's height. */
static double put_grid_row(FILE *out, const rt_plot_grid *g, size_t r,
			   double y, double lo, double hi)
{
	double head = grid_has_row_titles(g) ? 22 : 0, x = GRID_LEFT;
	if (g->row_titles && g->row_titles[r])
		put_text(out, "row-title", GRID_LEFT - 40, y + 16, "start", 13,
			 false, g->row_titles[r]);
	for (size_t c = 0; c < g->n_cols; c++) {
		if (g->panels[r * g->n_cols + c].values)
			put_panel(out, g, r * g->n_cols + c, x, y + head, lo, hi);
		x += grid_extent(g, c, true) + GRID_GAP;
	}
	return head + 20 + grid_extent(g, r, false) + (g->xlabel ? 50 : 30);
}

static int check_grid(const rt_plot_grid *g, char *err, size_t err_size)
{
	size_t cells = 0, n = g->n_rows * g->n_cols;
	if (!g->panels || !g->n_rows || !g->n_cols)
		return rt_fail(err, err_size, ATTNRT_ERR_ARG, "no panels to draw");
	for (size_t p = 0; p < n; p++) {
		if (!g->panels[p].values)
			continue;
		int rc = check_heatmap(&g->panels[p], err, err_size);
		if (rc != ATTNRT_OK)
			return rc;
		cells += g->panels[p].rows * g->panels[p].cols;
	}
	if (cells == 0)
		return rt_fail(err, err_size, ATTNRT_ERR_ARG, "no values to draw");
	if (cells > RT_PLOT_MAX_CELLS)
		return rt_fail(err, err_size, ATTNRT_ERR_ARG,
			       "%zu cells are too many to draw (at most %d)", cells,
			       RT_PLOT_MAX_CELLS);
	return ATTNRT_OK;
}

int rt_plot_grid_svg(FILE *out, const rt_plot_grid *g, char *err,
		     size_t err_size)
{
	int rc = check_grid(g, err, err_size);
	if (rc != ATTNRT_OK)
		return rc;
	double lo, hi, top = g->title ? 44 : 16, width = GRID_LEFT, height = top;
	double head = grid_has_row_titles(g) ? 22 : 0;
	grid_range(g, &lo, &hi);
	for (size_t c = 0; c < g->n_cols; c++)
		width += grid_extent(g, c, true) + GRID_GAP;
	for (size_t r = 0; r < g->n_rows; r++)
		height += head + 20 + grid_extent(g, r, false) +
			  (g->xlabel ? 50 : 30);
	double bar_h = grid_extent(g, 0, false);
	bar_h = bar_h > 320 ? 320 : bar_h < 120 ? 120 : bar_h;
	frame bar = {width - GRID_GAP + 24, top + head + 20, 16, bar_h, 0, 1, lo,
		     hi};
	double page_w = bar.px + bar.pw + 70;
	double title_w = g->title ? 8.5 * (double)strlen(g->title) + 40 : 0;
	page_w = page_w < title_w ? title_w : page_w;
	double page_h = height > bar.py + bar_h + 30 ? height + 10
						      : bar.py + bar_h + 30;
	put_header(out, page_w, page_h);
	if (g->title)
		put_text(out, "title", page_w / 2, 26, "middle", 15, false, g->title);
	double y = top;
	for (size_t r = 0; r < g->n_rows; r++)
		y += put_grid_row(out, g, r, y, lo, hi);
	put_colour_bar(out, &bar);
	return put_footer(out, err, err_size);
}

/* ---- files ----------------------------------------------------------------------------- */

typedef int (*draw_fn)(FILE *out, const void *what, char *err, size_t n);

static int draw_lines(FILE *out, const void *what, char *err, size_t n)
{
	return rt_plot_lines_svg(out, what, err, n);
}

static int draw_heatmap(FILE *out, const void *what, char *err, size_t n)
{
	return rt_plot_heatmap_svg(out, what, err, n);
}

static int draw_grid(FILE *out, const void *what, char *err, size_t n)
{
	return rt_plot_grid_svg(out, what, err, n);
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

rt_plot_format rt_plot_format_of(const char *path)
{
	return has_ext(path, ".svg")   ? RT_PLOT_SVG
	       : has_ext(path, ".png") ? RT_PLOT_PNG
				       : RT_PLOT_OTHER;
}

/* The picture drawn as SVG into a temporary file, read back, drawn as a
 * PNG into out. */
static int draw_png(FILE *out, draw_fn draw, const void *what, char *err,
		    size_t err_size)
{
	FILE *svg = tmpfile();
	if (!svg)
		return rt_fail_errno(err, err_size, errno,
				     "PNG: cannot make a temporary file");
	char *doc = NULL;
	int rc = draw(svg, what, err, err_size);
	long len = rc == ATTNRT_OK ? ftell(svg) : -1;
	if (rc == ATTNRT_OK && len < 0)
		rc = rt_fail_errno(err, err_size, errno, "PNG: temporary file");
	if (rc == ATTNRT_OK) {
		doc = malloc((size_t)len + 1);
		rewind(svg);
		if (!doc)
			rc = rt_fail(err, err_size, ATTNRT_ERR_NOMEM,
				     "PNG: out of memory");
		else if (fread(doc, 1, (size_t)len, svg) != (size_t)len)
			rc = rt_fail(err, err_size, ATTNRT_ERR_IO,
				     "PNG: reading the temporary file failed");
		else
			doc[len] = '\0';
	}
	if (rc == ATTNRT_OK)
		rc = rt_plot_svg_to_png(doc, (size_t)len, out, err, err_size);
	free(doc);
	fclose(svg);
	return rc;
}

static int save(const char *path, draw_fn draw, const void *what, char *err,
		size_t err_size)
{
	bool is_png = rt_plot_format_of(path) == RT_PLOT_PNG;
	FILE *out = fopen(path, is_png ? "wb" : "w");
	if (!out)
		return rt_fail_errno(err, err_size, errno, "cannot write '%s'",
				     path);
	int rc = is_png ? draw_png(out, draw, what, err, err_size)
			: draw(out, what, err, err_size);
	int errnum = errno;
	if (fclose(out) != 0 && rc == ATTNRT_OK)
		return rt_fail_errno(err, err_size, errno, "cannot write '%s'",
				     path);
	if (rc == ATTNRT_ERR_IO)
		return rt_fail_errno(err, err_size, errnum, "cannot write '%s'",
				     path);
	return rc;
}

int rt_plot_lines_save(const char *path, const rt_plot_lines *p, char *err,
		       size_t err_size)
{
	return save(path, draw_lines, p, err, err_size);
}

int rt_plot_heatmap_save(const char *path, const rt_plot_heatmap *h,
			 char *err, size_t err_size)
{
	return save(path, draw_heatmap, h, err, err_size);
}

int rt_plot_grid_save(const char *path, const rt_plot_grid *g, char *err,
		      size_t err_size)
{
	return save(path, draw_grid, g, err, err_size);
}
