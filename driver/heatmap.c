/*
 * heatmap.c - the book's attention figures of a translation (--heatmap
 * with a seq2seq model): for the last sentence translated, a row of
 * heads per figure and layer, as d2l's show_heatmaps draws them in 10.4
 * and 10.7: the encoder's self-attention (queries and keys the source
 * positions), the decoder's self-attention (the decoded steps), and the
 * encoder-decoder attention (decoded steps over the source), with key
 * positions across and query positions down, one colour scale, in one
 * SVG or PNG file (plot.h).
 */
#include "driver.h"

#include "plot.h"

#include <string.h>

/* A grid's panels and row headings, through ctx. */
typedef struct grid_parts {
	plot_heatmap *panels;
	char **row_titles;
	char *panel_titles; /* n_cols of 32 bytes */
	size_t n_rows, n_cols;
} grid_parts;

static void parts_fini(ir_ctx *ctx, grid_parts *g)
{
	for (size_t r = 0; g->row_titles && r < g->n_rows; r++)
		ir_free(ctx, g->row_titles[r]);
	ir_free(ctx, g->row_titles);
	ir_free(ctx, g->panels);
	ir_free(ctx, g->panel_titles);
}

static bool parts_alloc(ir_ctx *ctx, const drv_attention *a, grid_parts *g)
{
	memset(g, 0, sizeof *g);
	for (uint32_t i = 0; i < a->n_figs; i++) {
		g->n_rows += (size_t)a->figs[i].layers;
		if ((size_t)a->figs[i].heads > g->n_cols)
			g->n_cols = (size_t)a->figs[i].heads;
	}
	g->panels = ir_alloc(ctx,
			     (g->n_rows * g->n_cols + 1) * sizeof *g->panels);
	g->row_titles = ir_alloc(ctx, (g->n_rows + 1) * sizeof *g->row_titles);
	g->panel_titles = ir_alloc(ctx, g->n_cols * 32 + 1);
	for (size_t r = 0; g->row_titles && r < g->n_rows; r++)
		if (!(g->row_titles[r] = ir_alloc(ctx, 96)))
			return false;
	return g->panels && g->row_titles && g->panel_titles;
}

/* The panels of figure f from row r on: a row per layer, a panel per
 * head. */
static size_t fill_rows(grid_parts *g, const struct drv_attention_fig *f,
			size_t r)
{
	size_t matrix = (size_t)f->queries * (size_t)f->keys;
	for (int l = 0; l < f->layers; l++, r++) {
		if (f->layers > 1)
			snprintf(g->row_titles[r], 96, "%s, layer %d", f->name,
				 l + 1);
		else
			snprintf(g->row_titles[r], 96, "%s", f->name);
		for (int h = 0; h < f->heads; h++) {
			plot_heatmap *p = &g->panels[r * g->n_cols + (size_t)h];
			p->title = f->heads > 1
					   ? g->panel_titles + 32 * (size_t)h
					   : NULL;
			p->values = f->w +
				    ((size_t)l * (size_t)f->heads + (size_t)h) *
					    matrix;
			p->rows = (size_t)f->queries;
			p->cols = (size_t)f->keys;
		}
	}
	return r;
}

static void print_written(const drv_attention *a, const char *path)
{
	printf("wrote %s: the attention of \"%s\" =>", path, a->src);
	for (uint32_t i = 0; i < a->n_figs; i++) {
		const struct drv_attention_fig *f = &a->figs[i];
		printf("%s %s (%d layer%s x %d head%s, %d x %d)", i ? "," : "",
		       f->name, f->layers, f->layers == 1 ? "" : "s", f->heads,
		       f->heads == 1 ? "" : "s", f->queries, f->keys);
	}
	putchar('\n');
}

bool drv_attention_draw(ir_ctx *ctx, const ir_module *m, const drv_attention *a,
			const char *path)
{
	grid_parts g;
	char title[512], err[512] = "out of memory";
	bool ok = false;
	if (parts_alloc(ctx, a, &g)) {
		for (size_t h = 0; h < g.n_cols; h++)
			snprintf(g.panel_titles + 32 * h, 32, "Head %zu", h + 1);
		for (uint32_t i = 0, r = 0; i < a->n_figs; i++)
			r = (uint32_t)fill_rows(&g, &a->figs[i], r);
		snprintf(title, sizeof title, "%s: \"%s\" => \"%s\"", m->name,
			 a->src, a->pred);
		plot_grid grid = {title,
				  "Key positions",
				  "Query positions",
				  g.panels,
				  (const char *const *)g.row_titles,
				  g.n_rows,
				  g.n_cols};
		ok = plot_grid_save(path, &grid, err, sizeof err);
	}
	parts_fini(ctx, &g);
	if (!ok) {
		ir_error(ctx, (ir_loc){0}, "--heatmap: %s", err);
		return false;
	}
	print_written(a, path);
	return true;
}

void drv_attention_fini(ir_ctx *ctx, drv_attention *a)
{
	for (uint32_t i = 0; i < a->n_figs; i++)
		ir_free(ctx, a->figs[i].w);
	memset(a, 0, sizeof *a);
}
