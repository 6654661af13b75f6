/*
 * plot.h - the pictures of training and attention, drawn with cairo into
 * an SVG document or a PNG image (the file name's ending chooses): a line
 * plot (several series, lines or markers, labelled axes with ticks, a
 * legend, a title), like d2l's Animator and plot(), and heatmaps of
 * matrices coloured by matplotlib's 'Reds' with one colour scale, alone
 * or as a grid of panels, like d2l's show_heatmaps.
 *
 * A library of its own (attnc_plot), linked by the attnc driver only:
 * libattnrt, which compiled programs link, knows nothing of cairo. Text
 * is set in the system's sans-serif face (fontconfig's choice: DejaVu
 * Sans on Debian) through cairo's text API, in SVG as glyph outlines, so
 * the pictures look the same everywhere.
 */
#ifndef ATTNC_PLOT_H
#define ATTNC_PLOT_H

#include <stdbool.h>
#include <stddef.h>

typedef enum plot_style {
	PLOT_LINE,   /* a line through the points */
	PLOT_POINTS, /* a marker at each point (a scatter) */
} plot_style;

/* One series. Points with a non-finite coordinate are skipped (a line
 * breaks there). Series i gets colour and dash pattern i of d2l's cycle:
 * solid blue, dashed magenta, then orange, green, red, ... */
typedef struct plot_series {
	const char *label;   /* legend text; NULL leaves it out of the legend */
	const double *x, *y; /* n points */
	size_t n;
	plot_style style;
} plot_series;

typedef struct plot_lines {
	const char *title, *xlabel, *ylabel; /* NULL: none */
	const plot_series *series;
	size_t n_series;
	/* Axis ranges; {0, 0} takes the range of the data plus 5% each side.
	 * Points outside a given range are clipped away. */
	double xlim[2], ylim[2];
} plot_lines;

typedef struct plot_heatmap {
	const char *title, *xlabel, *ylabel; /* NULL: none */
	const float *values; /* (rows, cols), row-major; row 0 at the top */
	size_t rows, cols;
} plot_heatmap;

/* Panels of heatmaps in rows and columns with one colour scale, as d2l's
 * show_heatmaps draws several matrices (a row per layer, a column per
 * head). Every panel keeps its own size and title; its cells are square,
 * the matrix fitted in a 160-pixel box. */
typedef struct plot_grid {
	const char *title;             /* of the whole picture; NULL: none */
	const char *xlabel, *ylabel;   /* under each panel; beside the first
				      * column; NULL: none */
	const plot_heatmap *panels;    /* n_rows * n_cols, row-major; their
				     * xlabel and ylabel are not used; one
				     * with no values is left blank */
	const char *const *row_titles; /* n_rows headings (entries may be
					* NULL), or NULL */
	size_t n_rows, n_cols;
} plot_grid;

#define PLOT_MAX_CELLS 1000000

/* The format a file name asks for: by its ending, in any case. */
typedef enum plot_format {
	PLOT_OTHER, /* neither */
	PLOT_SVG,   /* .svg */
	PLOT_PNG,   /* .png */
} plot_format;

plot_format plot_format_of(const char *path);

/* Draws the line plot into the file at path (created or truncated): a PNG
 * image when path ends in .png, SVG otherwise; 640 x 420 pixels. Returns
 * false with a message in err (err_size bytes) for nothing to draw (no
 * series, a series with n > 0 and no data), a given range that is empty
 * or not finite, or a file that cannot be written (naming path). */
bool plot_lines_save(const char *path, const plot_lines *p, char *err,
		     size_t err_size);

/* Draws the heatmap into the file at path, as plot_lines_save: the cells
 * (at most 40 pixels, the matrix fitted in 480), index ticks, the colour
 * scale from the smallest to the largest finite value (NaN cells grey),
 * the title above and the labels beside. False, with a message, for no
 * values, no rows or columns, more than PLOT_MAX_CELLS cells, or a file
 * that cannot be written. */
bool plot_heatmap_save(const char *path, const plot_heatmap *h, char *err,
		       size_t err_size);

/* Draws the grid into the file at path, as plot_heatmap_save: each panel
 * with its title above, each row heading, one colour scale from the
 * smallest to the largest finite value of all panels. False, with a
 * message, for no rows or columns, no panel with values, a panel that
 * plot_heatmap_save would refuse, more than PLOT_MAX_CELLS cells in all,
 * or a file that cannot be written. */
bool plot_grid_save(const char *path, const plot_grid *g, char *err,
		    size_t err_size);

/* Releases what cairo and fontconfig keep between pictures (the font
 * faces, fontconfig's configuration), so that a leak checker finds
 * nothing left at exit. Call it once at the end of a program that drew,
 * when no cairo object is alive and no other thread uses cairo or
 * fontconfig; drawing after it starts afresh. */
void plot_fini(void);

/* The 'Reds' colour map at t in [0, 1] (clamped; NaN gives grey) as
 * 8-bit RGB: ColorBrewer's nine stops from #fff5f0 to #67000d, linearly
 * interpolated as matplotlib does. */
void plot_reds(double t, unsigned char rgb[3]);

/* Round tick values for the range [lo, hi]: multiples of 1, 2, 2.5 or 5
 * times a power of ten, about target of them, at most max written to
 * ticks. Returns how many. */
size_t plot_ticks(double lo, double hi, int target, double *ticks, size_t max);

#endif
