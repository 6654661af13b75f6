/*
 * rt_plot.h - the pictures of training and attention, as SVG written by
 * hand: a line plot (several series, lines or markers, labelled axes with
 * ticks, a legend, a title), like d2l's Animator and plot(), and a heatmap
 * of a matrix coloured by matplotlib's 'Reds' with a colour scale, or a
 * grid of them, like d2l's show_heatmaps.
 *
 * Part of libattnrt's sources but not of the generated code's ABI
 * (attnrt.h): the attnc driver draws with it. Plain C; SVG is written
 * without allocating, and a PNG (rt_png.c) is that SVG drawn into a
 * canvas the size of the picture.
 */
#ifndef ATTNC_RT_PLOT_H
#define ATTNC_RT_PLOT_H

#include <stddef.h>
#include <stdio.h>

typedef enum rt_plot_style {
	RT_PLOT_LINE,   /* a line through the points */
	RT_PLOT_POINTS, /* a marker at each point (a scatter) */
} rt_plot_style;

/* One series. Points with a non-finite coordinate are skipped (a line
 * breaks there). Series i gets colour and dash pattern i of d2l's cycle:
 * solid blue, dashed magenta, then orange, green, red, ... */
typedef struct rt_plot_series {
	const char *label;   /* legend text; NULL leaves it out of the legend */
	const double *x, *y; /* n points */
	size_t n;
	rt_plot_style style;
} rt_plot_series;

typedef struct rt_plot_lines {
	const char *title, *xlabel, *ylabel; /* NULL: none */
	const rt_plot_series *series;
	size_t n_series;
	/* Axis ranges; {0, 0} takes the range of the data plus 5% each side.
	 * Points outside a given range are clipped away. */
	double xlim[2], ylim[2];
} rt_plot_lines;

typedef struct rt_plot_heatmap {
	const char *title, *xlabel, *ylabel; /* NULL: none */
	const float *values; /* (rows, cols), row-major; row 0 at the top */
	size_t rows, cols;
} rt_plot_heatmap;

/* Panels of heatmaps in rows and columns with one colour scale, as d2l's
 * show_heatmaps draws several matrices (a row per layer, a column per
 * head). Every panel keeps its own size and title; its cells are square,
 * the matrix fitted in a 160-pixel box. */
typedef struct rt_plot_grid {
	const char *title;           /* of the whole picture; NULL: none */
	const char *xlabel, *ylabel; /* under each panel; beside the first
				      * column; NULL: none */
	const rt_plot_heatmap *panels; /* n_rows * n_cols, row-major; their
					* xlabel and ylabel are not used; one
					* with no values is left blank */
	const char *const *row_titles; /* n_rows headings (entries may be
					* NULL), or NULL */
	size_t n_rows, n_cols;
} rt_plot_grid;

#define RT_PLOT_MAX_CELLS 1000000

/* Writes the line plot as an SVG document to out. Returns ATTNRT_OK,
 * ATTNRT_ERR_ARG (no series, a series with n > 0 and no data, a given
 * range that is empty or not finite) or ATTNRT_ERR_IO (a write failed),
 * with a message in err (err_size bytes; err may be NULL). */
int rt_plot_lines_svg(FILE *out, const rt_plot_lines *p, char *err,
		      size_t err_size);

/* Writes the heatmap as an SVG document to out: one <rect class="cell">
 * per element (hovering shows its row, column and value), the colour
 * scale from the smallest to the largest finite value (NaN cells grey).
 * Returns as rt_plot_lines_svg; ATTNRT_ERR_ARG for no values, no rows or
 * columns, or more than RT_PLOT_MAX_CELLS cells. */
int rt_plot_heatmap_svg(FILE *out, const rt_plot_heatmap *h, char *err,
			size_t err_size);

/* Writes the grid as an SVG document to out: each panel as a heatmap
 * (class "panel-title" for its title, "cell" for each element), each row
 * heading as "row-title", one colour scale from the smallest to the
 * largest finite value of all panels. Returns as rt_plot_heatmap_svg;
 * ATTNRT_ERR_ARG for no rows or columns, no panel with values, a panel
 * that rt_plot_heatmap_svg would refuse, or more than RT_PLOT_MAX_CELLS
 * cells in all. */
int rt_plot_grid_svg(FILE *out, const rt_plot_grid *g, char *err,
		     size_t err_size);

/* The format a file name asks for: by its ending, in any case. */
typedef enum rt_plot_format {
	RT_PLOT_OTHER, /* neither */
	RT_PLOT_SVG,   /* .svg */
	RT_PLOT_PNG,   /* .png */
} rt_plot_format;

rt_plot_format rt_plot_format_of(const char *path);

/* As the three above, into the file at path (created or truncated): a
 * PNG image when path ends in .png (rt_plot_svg_to_png), SVG otherwise.
 * A failure to open, write or close it is ATTNRT_ERR_IO naming path. */
int rt_plot_lines_save(const char *path, const rt_plot_lines *p, char *err,
		       size_t err_size);
int rt_plot_heatmap_save(const char *path, const rt_plot_heatmap *h,
			 char *err, size_t err_size);
int rt_plot_grid_save(const char *path, const rt_plot_grid *g, char *err,
		      size_t err_size);

/* The SVG that rt_plot wrote (svg, len bytes) drawn as a PNG image into
 * out (rt_png.c: 8-bit RGB, deflate's fixed code, text in a built-in
 * 5x7 font). Returns ATTNRT_OK, ATTNRT_ERR_ARG for a document
 * it cannot draw, ATTNRT_ERR_NOMEM or ATTNRT_ERR_IO, with a message in
 * err. The *_save functions above write PNG this way when path ends in
 * .png (in any case), and SVG otherwise. */
int rt_plot_svg_to_png(const char *svg, size_t len, FILE *out, char *err,
		       size_t err_size);

/* The 'Reds' colour map at t in [0, 1] (clamped; NaN gives grey) as
 * 8-bit RGB: ColorBrewer's nine stops from #fff5f0 to #67000d, linearly
 * interpolated as matplotlib does. */
void rt_plot_reds(double t, unsigned char rgb[3]);

/* Round tick values for the range [lo, hi]: multiples of 1, 2, 2.5 or 5
 * times a power of ten, about target of them, at most max written to
 * ticks. Returns how many. */
size_t rt_plot_ticks(double lo, double hi, int target, double *ticks,
		     size_t max);

#endif
