/*
 * plot_heatmap.c - heatmaps (plot.h) like d2l's show_heatmaps: a grid of
 * panels, each a matrix of square cells coloured by 'Reds' with index
 * ticks and its title above, a heading per row, one colour scale for all
 * on the right. A single heatmap is a grid of one panel with larger
 * cells. Cells are filled without antialiasing, so a PNG's pixel inside
 * a cell has exactly that cell's colour.
 */
#include "plot_internal.h"

#include <math.h>
#include <stdio.h>

#define GRID_BOX 160.0 /* the side of the square a panel fits in */
#define GRID_MAX_CELL 28.0
#define ONE_BOX 480.0 /* the same for a single heatmap */
#define ONE_MAX_CELL 40.0
#define GRID_GAP 56.0 /* between columns: the next panel's ticks */
#define GRID_LEFT 72.0

/* A grid and the sizes it is drawn at. */
typedef struct layout {
	const plot_grid *g;
	double box, max_cell;
	double lo, hi;        /* the colour scale's range */
	double width, height; /* of the page */
	plot_frame bar;
} layout;

/* The smallest and largest finite value of h, widening *lo and *hi. */
static void value_range(const plot_heatmap *h, double *lo, double *hi)
{
	for (size_t i = 0; i < h->rows * h->cols; i++) {
		double v = h->values[i];
		if (!isfinite(v))
			continue;
		*lo = v < *lo ? v : *lo;
		*hi = v > *hi ? v : *hi;
	}
}

/* The range of the finite values of every panel; 0 and 1 if there is
 * none, and a range of 1 around a constant. */
static void grid_range(const plot_grid *g, double *lo, double *hi)
{
	*lo = INFINITY;
	*hi = -INFINITY;
	for (size_t p = 0; p < g->n_rows * g->n_cols; p++)
		if (g->panels[p].values)
			value_range(&g->panels[p], lo, hi);
	if (*lo > *hi) {
		*lo = 0;
		*hi = 1;
	} else if (*lo == *hi) {
		*lo -= 0.5;
		*hi += 0.5;
	}
}

static bool has_row_titles(const plot_grid *g)
{
	for (size_t r = 0; g->row_titles && r < g->n_rows; r++)
		if (g->row_titles[r])
			return true;
	return false;
}

/* A panel's cell side: the matrix fitted in the box, square cells. */
static double panel_cell(const layout *l, const plot_heatmap *h)
{
	size_t side = h->rows > h->cols ? h->rows : h->cols;
	double cell = l->box / (double)side;
	return cell > l->max_cell ? l->max_cell : cell;
}

/* The largest width (is_width) or height of the panels of column or row
 * i. */
static double extent(const layout *l, size_t i, bool is_width)
{
	const plot_grid *g = l->g;
	double most = 0;
	size_t n = is_width ? g->n_rows : g->n_cols;
	for (size_t k = 0; k < n; k++) {
		const plot_heatmap *h = &g->panels[is_width ? k * g->n_cols + i
							    : i * g->n_cols + k];
		double e = h->values ? panel_cell(l, h) *
					       (double)(is_width ? h->cols
								 : h->rows)
				     : 0;
		most = e > most ? e : most;
	}
	return most;
}

static double row_height(const layout *l, size_t r)
{
	return (has_row_titles(l->g) ? 22 : 0) + 20 + extent(l, r, false) +
	       (l->g->xlabel ? 50 : 30);
}

static void cells(cairo_t *cr, const layout *l, const plot_heatmap *h,
		  const plot_frame *f, double cell)
{
	cairo_save(cr);
	cairo_set_antialias(cr, CAIRO_ANTIALIAS_NONE);
	for (size_t r = 0; r < h->rows; r++) {
		for (size_t c = 0; c < h->cols; c++) {
			double v = h->values[r * h->cols + c];
			unsigned char rgb[3];
			plot_reds(isfinite(v) ? (v - l->lo) / (l->hi - l->lo)
					      : NAN,
				  rgb);
			cairo_set_source_rgb(cr, rgb[0] / 255.0, rgb[1] / 255.0,
					     rgb[2] / 255.0);
			cairo_rectangle(cr, f->px + (double)c * cell,
					f->py + (double)r * cell, cell, cell);
			cairo_fill(cr);
		}
	}
	cairo_restore(cr);
}

/* Ticks at round indices below (columns) or left of (rows) the cells. */
static void index_ticks(cairo_t *cr, const plot_frame *f, double cell, size_t n,
			bool is_rows)
{
	size_t step = (size_t)plot_nice_step((double)n, 6);
	step = step ? step : 1;
	cairo_set_line_width(cr, 1);
	for (size_t i = 0; i < n; i += step) {
		char label[32];
		snprintf(label, sizeof label, "%zu", i);
		double at = (double)i * cell + cell / 2;
		double x = is_rows ? f->px : f->px + at;
		double y = is_rows ? f->py + at : f->py + f->ph;
		plot_set_rgb(cr, 0x333333);
		cairo_move_to(cr, x, y);
		cairo_line_to(cr, is_rows ? x - 5 : x, is_rows ? y : y + 5);
		cairo_stroke(cr);
		if (is_rows)
			plot_text(cr, x - 8, y + 4, PLOT_END, 11, false, label);
		else
			plot_text(cr, x, y + 18, PLOT_MIDDLE, 11, false, label);
	}
}

/* Panel p with its frame at (x, y + 20): its title above. */
static void panel(cairo_t *cr, const layout *l, size_t p, double x, double y)
{
	const plot_grid *g = l->g;
	const plot_heatmap *h = &g->panels[p];
	double cell = panel_cell(l, h);
	plot_frame f = {x,
			y + 20,
			cell * (double)h->cols,
			cell * (double)h->rows,
			0,
			0,
			0,
			0};
	if (h->title)
		plot_text(cr, f.px + f.pw / 2, y + 14, PLOT_MIDDLE, 12, false,
			  h->title);
	cells(cr, l, h, &f, cell);
	cairo_rectangle(cr, f.px, f.py, f.pw, f.ph);
	plot_set_rgb(cr, 0x333333);
	cairo_set_line_width(cr, 1);
	cairo_stroke(cr);
	index_ticks(cr, &f, cell, h->cols, false);
	index_ticks(cr, &f, cell, h->rows, true);
	if (g->xlabel)
		plot_text(cr, f.px + f.pw / 2, f.py + f.ph + 36, PLOT_MIDDLE,
			  12, false, g->xlabel);
	if (g->ylabel && p % g->n_cols == 0)
		plot_text(cr, f.px - 36, f.py + f.ph / 2, PLOT_MIDDLE, 12, true,
			  g->ylabel);
}

static void draw_grid(cairo_t *cr, const void *what)
{
	const layout *l = what;
	const plot_grid *g = l->g;
	double y = g->title ? 44 : 16, head = has_row_titles(g) ? 22 : 0;
	if (g->title)
		plot_text(cr, l->width / 2, 26, PLOT_MIDDLE, 15, false,
			  g->title);
	for (size_t r = 0; r < g->n_rows; r++) {
		if (g->row_titles && g->row_titles[r])
			plot_text(cr, GRID_LEFT - 40, y + 16, PLOT_START, 13,
				  false, g->row_titles[r]);
		double x = GRID_LEFT;
		for (size_t c = 0; c < g->n_cols; c++) {
			if (g->panels[r * g->n_cols + c].values)
				panel(cr, l, r * g->n_cols + c, x, y + head);
			x += extent(l, c, true) + GRID_GAP;
		}
		y += row_height(l, r);
	}
	plot_colour_bar(cr, &l->bar);
}

/* The page's size and the colour bar's place; the title's width is
 * measured on a scratch surface. */
static void lay_out(layout *l)
{
	const plot_grid *g = l->g;
	double top = g->title ? 44 : 16, head = has_row_titles(g) ? 22 : 0;
	double width = GRID_LEFT, height = top;
	grid_range(g, &l->lo, &l->hi);
	for (size_t c = 0; c < g->n_cols; c++)
		width += extent(l, c, true) + GRID_GAP;
	for (size_t r = 0; r < g->n_rows; r++)
		height += row_height(l, r);
	double bar_h = extent(l, 0, false);
	bar_h = bar_h > 320 ? 320 : bar_h < 120 ? 120 : bar_h;
	l->bar = (plot_frame){width - GRID_GAP + 24,
			      top + head + 20,
			      16,
			      bar_h,
			      0,
			      1,
			      l->lo,
			      l->hi};
	l->width = l->bar.px + l->bar.pw + 70;
	if (g->title) {
		cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_RGB24,
								1, 1);
		cairo_t *cr = cairo_create(s);
		double title_w = plot_text_width(cr, 15, g->title) + 40;
		cairo_destroy(cr);
		cairo_surface_destroy(s);
		l->width = l->width < title_w ? title_w : l->width;
	}
	l->height = height > l->bar.py + bar_h + 30 ? height + 10
						    : l->bar.py + bar_h + 30;
}

static bool check_heatmap(const plot_heatmap *h, char *err, size_t err_size)
{
	if (!h->values || !h->rows || !h->cols)
		return plot_fail(err, err_size, "no values to draw");
	if (h->rows > PLOT_MAX_CELLS || h->cols > PLOT_MAX_CELLS ||
	    h->rows * h->cols > PLOT_MAX_CELLS)
		return plot_fail(err, err_size,
				 "%zu x %zu cells are too many to draw (at most %d)",
				 h->rows, h->cols, PLOT_MAX_CELLS);
	return true;
}

static bool check_grid(const plot_grid *g, char *err, size_t err_size)
{
	size_t n_cells = 0;
	if (!g->panels || !g->n_rows || !g->n_cols)
		return plot_fail(err, err_size, "no panels to draw");
	for (size_t p = 0; p < g->n_rows * g->n_cols; p++) {
		if (!g->panels[p].values)
			continue;
		if (!check_heatmap(&g->panels[p], err, err_size))
			return false;
		n_cells += g->panels[p].rows * g->panels[p].cols;
	}
	if (n_cells == 0)
		return plot_fail(err, err_size, "no values to draw");
	if (n_cells > PLOT_MAX_CELLS)
		return plot_fail(err, err_size,
				 "%zu cells are too many to draw (at most %d)",
				 n_cells, PLOT_MAX_CELLS);
	return true;
}

static bool save_layout(const char *path, layout *l, char *err, size_t err_size)
{
	if (!check_grid(l->g, err, err_size))
		return false;
	lay_out(l);
	return plot_page_save(path, l->width, l->height, draw_grid, l, err,
			      err_size);
}

bool plot_grid_save(const char *path, const plot_grid *g, char *err,
		    size_t err_size)
{
	layout l = {.g = g, .box = GRID_BOX, .max_cell = GRID_MAX_CELL};
	return save_layout(path, &l, err, err_size);
}

bool plot_heatmap_save(const char *path, const plot_heatmap *h, char *err,
		       size_t err_size)
{
	plot_heatmap one = {NULL, NULL, NULL, h->values, h->rows, h->cols};
	plot_grid g = {h->title, h->xlabel, h->ylabel, &one, NULL, 1, 1};
	layout l = {.g = &g, .box = ONE_BOX, .max_cell = ONE_MAX_CELL};
	if (!check_heatmap(h, err, err_size))
		return false;
	return save_layout(path, &l, err, err_size);
}
