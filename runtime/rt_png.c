/*
 * rt_png.c - the pictures of rt_plot.c as PNG: the SVG document it wrote,
 * drawn into an RGB canvas and written as a PNG file.
 *
 * rt_plot.c lays a picture out once, as SVG; this file reads back the
 * small part of SVG that rt_plot.c writes (rect, line, path of M and L,
 * circle, text, a vertical linearGradient, a rectangular clipPath on a
 * group, fill-opacity) and draws it: rectangles by pixel centres, lines
 * and polylines as a pen of the stroke's width stepped along them (dash
 * patterns kept), discs, and text in the built-in 5x7 font of rt_font.h
 * (twice as large from font-size 13; rotated by -90 degrees for a
 * vertical axis label; letters with accents drawn without them). There
 * is no anti-aliasing. Anything else in the document is an error: the
 * reader is for rt_plot.c's output, not for SVG at large.
 *
 * The PNG is 8-bit RGB, each row filtered with "none", compressed as one
 * deflate block of the fixed Huffman code whose matches repeat the pixel
 * to the left or the row above (a figure is mostly flat areas): 12 KB
 * for a 640x420 loss curve, 85 KB for the Transformer's 24 heatmaps.
 */
#include "rt_internal.h"
#include "rt_font.h"
#include "rt_plot.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIDE 16384 /* pixels of a side */
#define MAX_STOPS 16
#define MAX_DASHES 8

typedef struct rgb {
	unsigned char c[3];
} rgb;

/* A paint: a colour, or the document's gradient (fill="url(#...)"). */
typedef struct paint {
	bool is_none, is_gradient;
	rgb colour;
} paint;

typedef struct canvas {
	int w, h;
	unsigned char *px; /* w * h * 3 */
	bool is_clipped;
	double clip[4]; /* x0, y0, x1, y1 */
	/* the gradient: stops along (gx1, gy1) -> (gx2, gy2) of a box */
	int n_stops;
	double stop_at[MAX_STOPS];
	rgb stop[MAX_STOPS];
	double g[4];
} canvas;

/* ---- drawing ------------------------------------------------------------------------------ */

static void blend(canvas *cv, int x, int y, rgb c, double alpha)
{
	if (x < 0 || y < 0 || x >= cv->w || y >= cv->h)
		return;
	if (cv->is_clipped && (x + 0.5 < cv->clip[0] || x + 0.5 > cv->clip[2] ||
			       y + 0.5 < cv->clip[1] || y + 0.5 > cv->clip[3]))
		return;
	unsigned char *p = cv->px + ((size_t)y * (size_t)cv->w + (size_t)x) * 3;
	for (int i = 0; i < 3; i++)
		p[i] = (unsigned char)lround(p[i] * (1 - alpha) + c.c[i] * alpha);
}

/* The gradient's colour at t in [0, 1], between its stops. */
static rgb gradient_at(const canvas *cv, double t)
{
	if (cv->n_stops == 0)
		return (rgb){{0, 0, 0}};
	if (t <= cv->stop_at[0])
		return cv->stop[0];
	for (int i = 1; i < cv->n_stops; i++)
		if (t <= cv->stop_at[i]) {
			double span = cv->stop_at[i] - cv->stop_at[i - 1];
			double u = span > 0 ? (t - cv->stop_at[i - 1]) / span : 1;
			rgb c;
			for (int k = 0; k < 3; k++)
				c.c[k] = (unsigned char)lround(cv->stop[i - 1].c[k] * (1 - u) +
							       cv->stop[i].c[k] * u);
			return c;
		}
	return cv->stop[cv->n_stops - 1];
}

/* The pixels whose centres lie in [x, x + w) x [y, y + h). */
static void fill_rect(canvas *cv, double x, double y, double w, double h,
		      paint p, double alpha)
{
	int x0 = (int)lround(x), x1 = (int)lround(x + w);
	int y0 = (int)lround(y), y1 = (int)lround(y + h);
	for (int j = y0; j < y1; j++)
		for (int i = x0; i < x1; i++) {
			rgb c = p.colour;
			if (p.is_gradient) {
				double u = w > 0 ? (i + 0.5 - x) / w : 0;
				double v = h > 0 ? (j + 0.5 - y) / h : 0;
				double dx = cv->g[2] - cv->g[0], dy = cv->g[3] - cv->g[1];
				double d2 = dx * dx + dy * dy;
				double t = d2 > 0 ? ((u - cv->g[0]) * dx + (v - cv->g[1]) * dy) / d2
						  : 0;
				c = gradient_at(cv, t);
			}
			blend(cv, i, j, c, alpha);
		}
}

/* A pen of width w (at least a pixel) stepped along (x0, y0) -> (x1, y1);
 * *walked carries the distance along a polyline for its dash pattern
 * (n_dash lengths, on and off in turn; none: solid). */
static void stroke_line(canvas *cv, double x0, double y0, double x1, double y1,
			double w, rgb c, const double *dash, int n_dash,
			double *walked)
{
	double len = hypot(x1 - x0, y1 - y0), period = 0;
	for (int i = 0; i < n_dash; i++)
		period += dash[i];
	int pen = w < 1.5 ? 1 : (int)lround(w);
	int steps = (int)ceil(len * 2) + 1;
	for (int s = 0; s <= steps; s++) {
		double t = steps ? (double)s / steps : 0;
		double at = *walked + t * len;
		if (period > 0) {
			double m = fmod(at, period);
			int k = 0;
			while (k < n_dash - 1 && m >= dash[k]) {
				m -= dash[k];
				k++;
			}
			if (k % 2 == 1)
				continue; /* a gap */
		}
		double x = x0 + t * (x1 - x0), y = y0 + t * (y1 - y0);
		int px = (int)floor(x - (pen - 1) / 2.0), py = (int)floor(y - (pen - 1) / 2.0);
		for (int j = 0; j < pen; j++)
			for (int i = 0; i < pen; i++) {
				int qx = px + i, qy = py + j;
				/* each pixel once per step: a blend twice over darkens */
				blend(cv, qx, qy, c, 1);
			}
	}
	*walked += len;
}

static void stroke_rect(canvas *cv, double x, double y, double w, double h, rgb c)
{
	int x0 = (int)lround(x), x1 = (int)lround(x + w) - 1;
	int y0 = (int)lround(y), y1 = (int)lround(y + h) - 1;
	for (int i = x0; i <= x1; i++) {
		blend(cv, i, y0, c, 1);
		blend(cv, i, y1, c, 1);
	}
	for (int j = y0 + 1; j < y1; j++) {
		blend(cv, x0, j, c, 1);
		blend(cv, x1, j, c, 1);
	}
}

static void disc(canvas *cv, double cx, double cy, double r, paint fill,
		 double alpha, paint stroke)
{
	for (int j = (int)floor(cy - r - 1); j <= (int)ceil(cy + r + 1); j++)
		for (int i = (int)floor(cx - r - 1); i <= (int)ceil(cx + r + 1); i++) {
			double d = hypot(i + 0.5 - cx, j + 0.5 - cy);
			if (!stroke.is_none && fabs(d - r) <= 0.6)
				blend(cv, i, j, stroke.colour, 1);
			else if (!fill.is_none && d < r)
				blend(cv, i, j, fill.colour, alpha);
		}
}

/* ---- text ---------------------------------------------------------------------------------- */

/* The ASCII letter drawn for a code point of Latin-1 and a few others:
 * the letter without its accent; '?' where there is none. */
static int ascii_for(uint32_t cp)
{
	static const char latin1[] = /* U+00C0 .. U+00FF */
		"AAAAAAACEEEEIIIIDNOOOOOxOUUUUYTs"
		"aaaaaaaceeeeiiiidnooooo/ouuuuyty";
	if (cp >= 32 && cp <= 126)
		return (int)cp;
	if (cp >= 0xc0 && cp <= 0xff)
		return latin1[cp - 0xc0];
	if (cp == 0x2018 || cp == 0x2019)
		return '\'';
	if (cp == 0x201c || cp == 0x201d || cp == 0xab || cp == 0xbb)
		return '"';
	if (cp == 0x2013 || cp == 0x2014 || cp == 0x2212)
		return '-';
	if (cp == 0xa0 || cp == 0x202f)
		return ' ';
	return '?';
}

/* The next code point of UTF-8 text s (advancing it); bad bytes read as
 * U+FFFD one at a time. */
static uint32_t next_cp(const char **s)
{
	const unsigned char *p = (const unsigned char *)*s;
	uint32_t c = p[0];
	int n = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2
			      : (c & 0xf8) == 0xf0 ? 3 : -1;
	if (n < 0) {
		*s += 1;
		return 0xfffd;
	}
	c = n == 0 ? c : c & (0x3f >> n);
	for (int i = 1; i <= n; i++) {
		if ((p[i] & 0xc0) != 0x80) {
			*s += 1;
			return 0xfffd;
		}
		c = c << 6 | (p[i] & 0x3f);
	}
	*s += n + 1;
	return c;
}

/* Text s with its baseline's anchor point at (x, y): anchor 's'tart,
 * 'm'iddle or 'e'nd; rotated -90 degrees about (x, y) when is_vertical. */
static void draw_text(canvas *cv, double x, double y, char anchor, double size,
		      bool is_vertical, const char *s, rgb c)
{
	size_t n = 0;
	for (const char *p = s; *p; n++)
		next_cp(&p);
	/* twice as large from 13 pixels, unless it then leaves the canvas */
	int scale = size >= 13 ? 2 : 1;
	double width, left;
	for (;; scale = 1) {
		width = n ? (double)n * (RT_FONT_W + 1) * scale - scale : 0;
		left = anchor == 'm' ? -width / 2 : anchor == 'e' ? -width : 0;
		/* the span it covers along its direction, and the canvas's */
		double lo = is_vertical ? y - left - width : x + left;
		double hi = lo + width, side = is_vertical ? cv->h : cv->w;
		if (scale == 1 || (lo >= 0 && hi <= side))
			break;
	}
	double top = -RT_FONT_H * scale;
	size_t k = 0;
	for (const char *p = s; *p; k++) {
		int ch = ascii_for(next_cp(&p));
		const unsigned char *glyph = rt_font[ch - RT_FONT_FIRST];
		for (int row = 0; row < RT_FONT_H; row++)
			for (int col = 0; col < RT_FONT_W; col++) {
				if (!(glyph[row] >> (RT_FONT_W - 1 - col) & 1))
					continue;
				for (int j = 0; j < scale; j++)
					for (int i = 0; i < scale; i++) {
					/* the pixel's offset from the anchor, unrotated */
					double u = left + (double)k * (RT_FONT_W + 1) * scale +
						   col * scale + i;
					double v = top + row * scale + j;
					double px = is_vertical ? x + v : x + u;
					double py = is_vertical ? y - u - 1 : y + v;
					blend(cv, (int)floor(px), (int)floor(py), c, 1);
				}
			}
	}
}

/* ---- reading the document ------------------------------------------------------------------ */

typedef struct reader {
	const char *p, *end;
	char *err;
	size_t err_size;
} reader;

/* The value of attribute name in the tag [tag, tag_end), copied into
 * buf (cap bytes); NULL when it has none. */
static const char *attr(const char *tag, const char *tag_end, const char *name,
			char *buf, size_t cap)
{
	size_t n = strlen(name);
	for (const char *p = tag; p + n + 2 < tag_end; p++) {
		if (p[-1] != ' ' && p[-1] != '\n')
			continue;
		if (strncmp(p, name, n) != 0 || p[n] != '=' || p[n + 1] != '"')
			continue;
		const char *v = p + n + 2, *e = v;
		while (e < tag_end && *e != '"')
			e++;
		size_t len = (size_t)(e - v) < cap - 1 ? (size_t)(e - v) : cap - 1;
		memcpy(buf, v, len);
		buf[len] = '\0';
		return buf;
	}
	return NULL;
}

static double num_attr(const char *tag, const char *end, const char *name,
		       double dflt)
{
	char buf[64];
	return attr(tag, end, name, buf, sizeof buf) ? strtod(buf, NULL) : dflt;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
		 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : 0;
}

/* A paint attribute: #rrggbb, #rgb, a few names, none, url(#...). */
static paint paint_of(const char *v)
{
	paint p = {0};
	size_t n = v ? strlen(v) : 0;
	if (!v || strcmp(v, "none") == 0) {
		p.is_none = true;
	} else if (strncmp(v, "url(", 4) == 0) {
		p.is_gradient = true;
	} else if (v[0] == '#' && n == 7) {
		for (int i = 0; i < 3; i++)
			p.colour.c[i] = (unsigned char)(hexval(v[1 + 2 * i]) * 16 +
							hexval(v[2 + 2 * i]));
	} else if (v[0] == '#' && n == 4) {
		for (int i = 0; i < 3; i++)
			p.colour.c[i] = (unsigned char)(hexval(v[1 + i]) * 17);
	} else if (strcmp(v, "white") == 0) {
		p.colour = (rgb){{255, 255, 255}};
	} else if (strcmp(v, "grey") == 0 || strcmp(v, "gray") == 0) {
		p.colour = (rgb){{128, 128, 128}};
	} /* else black */
	return p;
}

/* Text content up to "</", entities decoded, into buf. */
static void text_content(const char *p, const char *end, char *buf, size_t cap)
{
	static const struct {
		const char *name;
		char c;
	} ents[] = {{"&quot;", '"'}, {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'},
		    {"&apos;", '\''}};
	size_t n = 0;
	while (p < end && *p != '<' && n + 1 < cap) {
		bool done = false;
		for (size_t e = 0; !done && *p == '&' && e < sizeof ents / sizeof *ents; e++)
			if (strncmp(p, ents[e].name, strlen(ents[e].name)) == 0) {
				buf[n++] = ents[e].c;
				p += strlen(ents[e].name);
				done = true;
			}
		if (!done)
			buf[n++] = *p++;
	}
	buf[n] = '\0';
}

/* A stroke-dasharray ("6,4") into dash, *n lengths (none: solid). */
static void dashes_of(const char *v, double *dash, int *n)
{
	*n = 0;
	for (char *p = (char *)(uintptr_t)v; v && *p && *n < MAX_DASHES;) {
		char *e;
		double d = strtod(p, &e);
		if (e == p)
			break;
		dash[(*n)++] = d;
		p = *e == ',' ? e + 1 : e;
	}
}

static void draw_path(canvas *cv, const char *d, double w, rgb c,
		      const double *dash, int n_dash)
{
	double x = 0, y = 0, walked = 0;
	bool has_pen = false;
	char *p = (char *)(uintptr_t)d;
	while (*p) {
		while (*p == ' ')
			p++;
		char op = *p;
		if (op != 'M' && op != 'L')
			break;
		p++;
		char *e;
		double nx = strtod(p, &e);
		double ny = strtod(e, &p);
		if (op == 'L' && has_pen)
			stroke_line(cv, x, y, nx, ny, w, c, dash, n_dash, &walked);
		x = nx;
		y = ny;
		has_pen = true;
	}
}

/* Draws the element whose tag is [tag, end): name is its element name. */
static void draw_element(canvas *cv, const char *name, const char *tag,
			 const char *end, const char *after, const char *doc_end,
			 bool in_defs, bool in_clip)
{
	char buf[256], sbuf[64];
	if (strcmp(name, "rect") == 0) {
		char wb[32], hb[32];
		const char *ws = attr(tag, end, "width", wb, sizeof wb);
		const char *hs = attr(tag, end, "height", hb, sizeof hb);
		double x = num_attr(tag, end, "x", 0), y = num_attr(tag, end, "y", 0);
		double w = ws && strchr(ws, '%') ? cv->w : ws ? strtod(ws, NULL) : 0;
		double h = hs && strchr(hs, '%') ? cv->h : hs ? strtod(hs, NULL) : 0;
		if (in_clip) {
			double box[4] = {x, y, x + w, y + h};
			memcpy(cv->clip, box, sizeof box);
			return;
		}
		if (in_defs)
			return;
		const char *fv = attr(tag, end, "fill", buf, sizeof buf);
		paint fill = fv ? paint_of(fv) : (paint){0}; /* SVG's default: black */
		paint stroke = paint_of(attr(tag, end, "stroke", sbuf, sizeof sbuf));
		if (!fill.is_none)
			fill_rect(cv, x, y, w, h, fill, num_attr(tag, end, "fill-opacity", 1));
		if (!stroke.is_none)
			stroke_rect(cv, x, y, w, h, stroke.colour);
	} else if (strcmp(name, "line") == 0) {
		double dash[MAX_DASHES], walked = 0;
		int n_dash;
		dashes_of(attr(tag, end, "stroke-dasharray", buf, sizeof buf), dash, &n_dash);
		paint stroke = paint_of(attr(tag, end, "stroke", sbuf, sizeof sbuf));
		if (!stroke.is_none)
			stroke_line(cv, num_attr(tag, end, "x1", 0), num_attr(tag, end, "y1", 0),
				    num_attr(tag, end, "x2", 0), num_attr(tag, end, "y2", 0),
				    num_attr(tag, end, "stroke-width", 1), stroke.colour,
				    dash, n_dash, &walked);
	} else if (strcmp(name, "path") == 0) {
		size_t cap = (size_t)(end - tag) + 1;
		char *d = malloc(cap);
		double dash[MAX_DASHES];
		int n_dash;
		dashes_of(attr(tag, end, "stroke-dasharray", buf, sizeof buf), dash, &n_dash);
		paint stroke = paint_of(attr(tag, end, "stroke", sbuf, sizeof sbuf));
		if (d && attr(tag, end, "d", d, cap) && !stroke.is_none)
			draw_path(cv, d, num_attr(tag, end, "stroke-width", 1),
				  stroke.colour, dash, n_dash);
		free(d);
	} else if (strcmp(name, "circle") == 0) {
		paint fill = paint_of(attr(tag, end, "fill", buf, sizeof buf));
		paint stroke = paint_of(attr(tag, end, "stroke", sbuf, sizeof sbuf));
		disc(cv, num_attr(tag, end, "cx", 0), num_attr(tag, end, "cy", 0),
		     num_attr(tag, end, "r", 0), fill,
		     num_attr(tag, end, "fill-opacity", 1), stroke);
	} else if (strcmp(name, "text") == 0) {
		char s[1024], anchor[16] = "start", tr[64];
		attr(tag, end, "text-anchor", anchor, sizeof anchor);
		text_content(after, doc_end, s, sizeof s);
		paint fill = paint_of(attr(tag, end, "fill", buf, sizeof buf));
		draw_text(cv, num_attr(tag, end, "x", 0), num_attr(tag, end, "y", 0),
			  anchor[0], num_attr(tag, end, "font-size", 12),
			  attr(tag, end, "transform", tr, sizeof tr) != NULL, s,
			  fill.colour);
	} else if (strcmp(name, "linearGradient") == 0) {
		double g[4] = {num_attr(tag, end, "x1", 0), num_attr(tag, end, "y1", 0),
			       num_attr(tag, end, "x2", 1), num_attr(tag, end, "y2", 0)};
		memcpy(cv->g, g, sizeof g);
		cv->n_stops = 0;
	} else if (strcmp(name, "stop") == 0 && cv->n_stops < MAX_STOPS) {
		cv->stop_at[cv->n_stops] = num_attr(tag, end, "offset", 0);
		cv->stop[cv->n_stops++] =
			paint_of(attr(tag, end, "stop-color", buf, sizeof buf)).colour;
	}
}

/* The first s in [p, end), or end. */
static const char *find(const char *p, const char *end, const char *s)
{
	size_t n = strlen(s);
	for (; p + n <= end; p++)
		if (memcmp(p, s, n) == 0)
			return p;
	return end;
}

/* Draws the document into cv (allocated here from the <svg> size). */
static int draw_document(canvas *cv, const char *doc, size_t len, char *err,
			 size_t err_size)
{
	const char *p = doc, *end = doc + len;
	bool in_defs = false, in_clip = false;
	int clip_depth = -1, depth = 0;
	while ((p = memchr(p, '<', (size_t)(end - p))) != NULL) {
		const char *tag = p + 1, *close = memchr(tag, '>', (size_t)(end - tag));
		if (!close)
			return rt_fail(err, err_size, ATTNRT_ERR_ARG,
				       "PNG: the SVG ends inside a tag");
		p = close + 1;
		if (*tag == '?' || *tag == '!')
			continue;
		bool is_end = *tag == '/', is_empty = close[-1] == '/';
		char name[32];
		size_t n = 0;
		for (const char *q = tag + is_end; q < close && n + 1 < sizeof name &&
		     *q != ' ' && *q != '/' && *q != '\n'; q++)
			name[n++] = *q;
		name[n] = '\0';
		if (is_end) {
			depth--;
			if (strcmp(name, "defs") == 0)
				in_defs = false;
			else if (strcmp(name, "clipPath") == 0)
				in_clip = false;
			else if (strcmp(name, "g") == 0 && depth == clip_depth) {
				cv->is_clipped = false;
				clip_depth = -1;
			}
			continue;
		}
		if (strcmp(name, "svg") == 0) {
			cv->w = (int)num_attr(tag, close, "width", 0);
			cv->h = (int)num_attr(tag, close, "height", 0);
			if (cv->w < 1 || cv->h < 1 || cv->w > MAX_SIDE || cv->h > MAX_SIDE)
				return rt_fail(err, err_size, ATTNRT_ERR_ARG,
					       "PNG: a picture of %d x %d pixels",
					       cv->w, cv->h);
			cv->px = malloc((size_t)cv->w * (size_t)cv->h * 3);
			if (!cv->px)
				return rt_fail(err, err_size, ATTNRT_ERR_NOMEM,
					       "PNG: out of memory");
			memset(cv->px, 255, (size_t)cv->w * (size_t)cv->h * 3);
		} else if (!cv->px) {
			return rt_fail(err, err_size, ATTNRT_ERR_ARG,
				       "PNG: <%s> before <svg>", name);
		} else if (strcmp(name, "defs") == 0) {
			in_defs = true;
		} else if (strcmp(name, "clipPath") == 0) {
			in_clip = true;
		} else if (strcmp(name, "g") == 0) {
			char cb[64];
			if (attr(tag, close, "clip-path", cb, sizeof cb)) {
				cv->is_clipped = true;
				clip_depth = depth;
			}
		} else if (strcmp(name, "title") == 0) {
			p = find(p, end, "</title>"); /* a cell's tooltip: not drawn */
		} else {
			draw_element(cv, name, tag, close, p, end, in_defs, in_clip);
		}
		if (!is_empty)
			depth++;
	}
	if (!cv->px)
		return rt_fail(err, err_size, ATTNRT_ERR_ARG, "PNG: no <svg> element");
	return ATTNRT_OK;
}

/* ---- PNG ------------------------------------------------------------------------------------ */

static uint32_t crc_table[256];

static void crc_init(void)
{
	for (uint32_t n = 0; n < 256; n++) {
		uint32_t c = n;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
		crc_table[n] = c;
	}
}

static uint32_t crc_update(uint32_t crc, const unsigned char *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		crc = crc_table[(crc ^ b[i]) & 0xff] ^ (crc >> 8);
	return crc;
}

static void put32(unsigned char *b, uint32_t v)
{
	b[0] = (unsigned char)(v >> 24);
	b[1] = (unsigned char)(v >> 16);
	b[2] = (unsigned char)(v >> 8);
	b[3] = (unsigned char)v;
}

/* One chunk: length, type, data, CRC of type and data. */
static void put_chunk(FILE *out, const char *type, const unsigned char *data,
		      size_t n)
{
	unsigned char b[4];
	put32(b, (uint32_t)n);
	fwrite(b, 1, 4, out);
	fwrite(type, 1, 4, out);
	if (n)
		fwrite(data, 1, n, out);
	uint32_t crc = crc_update(0xffffffffu, (const unsigned char *)type, 4);
	put32(b, crc_update(crc, data, n) ^ 0xffffffffu);
	fwrite(b, 1, 4, out);
}

/* The image data: each row a filter byte (0, none) and its pixels. */
static unsigned char *raw_rows(const canvas *cv, size_t *size)
{
	size_t row = (size_t)cv->w * 3 + 1;
	unsigned char *raw = malloc(row * (size_t)cv->h);
	for (size_t r = 0; raw && r < (size_t)cv->h; r++) {
		raw[r * row] = 0;
		memcpy(raw + r * row + 1, cv->px + r * (row - 1), row - 1);
	}
	*size = row * (size_t)cv->h;
	return raw;
}

/* Deflate's bits, least significant first. */
typedef struct bits {
	unsigned char *p;
	uint32_t acc;
	int n;
} bits;

static void put_bits(bits *b, uint32_t v, int n)
{
	b->acc |= v << b->n;
	b->n += n;
	while (b->n >= 8) {
		*b->p++ = (unsigned char)b->acc;
		b->acc >>= 8;
		b->n -= 8;
	}
}

/* A Huffman code of n bits, which deflate writes most significant first. */
static void put_code(bits *b, uint32_t code, int n)
{
	uint32_t r = 0;
	for (int i = 0; i < n; i++)
		r |= (code >> i & 1) << (n - 1 - i);
	put_bits(b, r, n);
}

/* Symbol v of the fixed literal/length code. */
static void put_litlen(bits *b, int v)
{
	if (v < 144)
		put_code(b, 0x30 + (uint32_t)v, 8);
	else if (v < 256)
		put_code(b, 0x190 + (uint32_t)(v - 144), 9);
	else if (v < 280)
		put_code(b, (uint32_t)(v - 256), 7);
	else
		put_code(b, 0xc0 + (uint32_t)(v - 280), 8);
}

/* The code of a length (3..258) or a distance (1..32768): the largest
 * base not above it, and its extra bits. */
static int code_of(const int *base, int n, int v)
{
	int c = n - 1;
	while (base[c] > v)
		c--;
	return c;
}

static const int len_base[29] = {3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19,
				 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115,
				 131, 163, 195, 227, 258};
static const int len_extra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
				  2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
static const int dist_base[30] = {1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65,
				  97, 129, 193, 257, 385, 513, 769, 1025, 1537,
				  2049, 3073, 4097, 6145, 8193, 12289, 16385,
				  24577};

static void put_match(bits *b, int len, int dist)
{
	int lc = code_of(len_base, 29, len), dc = code_of(dist_base, 30, dist);
	put_litlen(b, 257 + lc);
	put_bits(b, (uint32_t)(len - len_base[lc]), len_extra[lc]);
	put_code(b, (uint32_t)dc, 5);
	put_bits(b, (uint32_t)(dist - dist_base[dc]), dc < 4 ? 0 : dc / 2 - 1);
}

/* How many bytes from at repeat those dist before it (at most 258). */
static int match_len(const unsigned char *raw, size_t n, size_t at, size_t dist)
{
	if (dist == 0 || dist > at || dist > 32768)
		return 0;
	int len = 0;
	while (len < 258 && at + (size_t)len < n &&
	       raw[at + (size_t)len] == raw[at + (size_t)len - dist])
		len++;
	return len;
}

/* The image data as a zlib stream: one deflate block of the fixed
 * Huffman code, whose matches repeat the pixel to the left (3 bytes
 * back) or the row above (a row back) — a picture's flat areas. */
static unsigned char *zlib_deflate(const canvas *cv, size_t *size)
{
	size_t n, row = (size_t)cv->w * 3 + 1;
	unsigned char *raw = raw_rows(cv, &n);
	/* at most 9 bits a byte, and the header, the end and Adler-32 */
	unsigned char *z = raw ? malloc(n + n / 8 + 64) : NULL;
	if (!z) {
		free(raw);
		return NULL;
	}
	z[0] = 0x78; /* deflate, 32K window */
	z[1] = 0x01; /* no preset dictionary; (0x78 << 8 | 0x01) % 31 == 0 */
	bits b = {z + 2, 0, 0};
	put_bits(&b, 1, 1); /* the final block */
	put_bits(&b, 1, 2); /* of the fixed code */
	for (size_t i = 0; i < n;) {
		int left = match_len(raw, n, i, 3), up = match_len(raw, n, i, row);
		int len = left >= up ? left : up;
		if (len >= 3) {
			put_match(&b, len, left >= up ? 3 : (int)row);
			i += (size_t)len;
		} else {
			put_litlen(&b, raw[i++]);
		}
	}
	put_litlen(&b, 256); /* end of block */
	put_bits(&b, 0, 7);  /* to a whole byte */
	uint32_t a = 1, c = 0; /* Adler-32 of the data */
	for (size_t i = 0; i < n; i++) {
		a = (a + raw[i]) % 65521;
		c = (c + a) % 65521;
	}
	put32(b.p, c << 16 | a);
	*size = (size_t)(b.p + 4 - z);
	free(raw);
	return z;
}

static int write_png(FILE *out, const canvas *cv, char *err, size_t err_size)
{
	static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
	unsigned char ihdr[13];
	put32(ihdr, (uint32_t)cv->w);
	put32(ihdr + 4, (uint32_t)cv->h);
	ihdr[8] = 8;  /* bits per sample */
	ihdr[9] = 2;  /* RGB */
	ihdr[10] = 0; /* deflate */
	ihdr[11] = 0; /* adaptive filtering (each row says its filter) */
	ihdr[12] = 0; /* not interlaced */
	size_t n;
	unsigned char *z = zlib_deflate(cv, &n);
	if (!z)
		return rt_fail(err, err_size, ATTNRT_ERR_NOMEM, "PNG: out of memory");
	crc_init();
	fwrite(sig, 1, sizeof sig, out);
	put_chunk(out, "IHDR", ihdr, sizeof ihdr);
	put_chunk(out, "IDAT", z, n);
	put_chunk(out, "IEND", NULL, 0);
	free(z);
	if (fflush(out) != 0 || ferror(out))
		return rt_fail(err, err_size, ATTNRT_ERR_IO, "writing the picture failed");
	return ATTNRT_OK;
}

int rt_plot_svg_to_png(const char *svg, size_t len, FILE *out, char *err,
		       size_t err_size)
{
	canvas cv = {0};
	int rc = draw_document(&cv, svg, len, err, err_size);
	if (rc == ATTNRT_OK)
		rc = write_png(out, &cv, err, err_size);
	free(cv.px);
	return rc;
}
