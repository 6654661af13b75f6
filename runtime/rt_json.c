/*
 * rt_json.c - a strict JSON reader (RFC 8259) for safetensors headers.
 *
 * The input comes from a file that may be truncated or corrupt, so the
 * reader trusts nothing: every byte is checked against the grammar,
 * strings must be valid UTF-8 (no overlong forms, no surrogates, nothing
 * above U+10FFFF) with paired \u surrogate escapes, nesting is bounded so
 * the recursion cannot overflow the stack, and all memory comes from the
 * caller's hook. The result is a small tree of nodes linked by index.
 *
 *   value  = ws ( object | array | string | number | "true" | "false"
 *                | "null" ) ws
 *   object = "{" [ string ":" value { "," string ":" value } ] "}"
 *   array  = "[" [ value { "," value } ] "]"
 *   number = [ "-" ] ( "0" | [1-9][0-9]* ) [ "." [0-9]+ ]
 *            [ ( "e" | "E" ) [ "+" | "-" ] [0-9]+ ]
 */
#include "rt_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct json_parser {
	rt_json_doc *doc;
	const unsigned char *s;
	size_t len, pos;
	int depth;
	int code; /* ATTNRT_OK until the first failure */
	char *err;
	size_t err_size;
} json_parser;

/* Records a syntax error (the first one wins). */
static void json_verror(json_parser *p, const char *fmt, va_list ap)
{
	if (p->code != ATTNRT_OK)
		return;
	p->code = ATTNRT_ERR_FORMAT;
	if (p->err && p->err_size)
		vsnprintf(p->err, p->err_size, fmt, ap);
}

/* As json_verror; returns RT_JSON_NONE for functions that make nodes. */
__attribute__((format(printf, 2, 3))) static uint32_t json_fail(json_parser *p,
								const char *fmt,
								...)
{
	va_list ap;
	va_start(ap, fmt);
	json_verror(p, fmt, ap);
	va_end(ap);
	return RT_JSON_NONE;
}

/* As json_verror; returns false for functions that answer yes or no. */
__attribute__((format(printf, 2, 3))) static bool json_error(json_parser *p,
							     const char *fmt,
							     ...)
{
	va_list ap;
	va_start(ap, fmt);
	json_verror(p, fmt, ap);
	va_end(ap);
	return false;
}

static uint32_t json_nomem(json_parser *p)
{
	if (p->code == ATTNRT_OK)
		p->code = rt_fail(p->err, p->err_size, ATTNRT_ERR_NOMEM,
				  "out of memory reading the JSON header");
	return RT_JSON_NONE;
}

/* What the byte at the cursor is, for messages. */
static const char *json_here(const json_parser *p, char *buf, size_t size)
{
	if (p->pos >= p->len)
		return "the end of the header";
	unsigned c = p->s[p->pos];
	if (c >= 0x20 && c < 0x7f)
		snprintf(buf, size, "'%c'", (char)c);
	else
		snprintf(buf, size, "byte 0x%02x", c);
	return buf;
}

static uint32_t json_unexpected(json_parser *p, const char *wanted)
{
	char buf[16];
	return json_fail(p, "JSON: expected %s at header byte %zu, found %s",
			 wanted, p->pos, json_here(p, buf, sizeof buf));
}

static void json_skip_ws(json_parser *p)
{
	while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' ||
				   p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
		p->pos++;
}

static uint32_t json_new_node(json_parser *p, rt_json_kind kind)
{
	rt_json_doc *d = p->doc;
	if (d->n_nodes >= RT_JSON_NONE - 1 ||
	    !rt_mem_grow(d->al, (void **)&d->nodes, &d->nodes_cap,
			 d->n_nodes + 1, sizeof *d->nodes))
		return json_nomem(p);
	rt_json_node *n = &d->nodes[d->n_nodes];
	memset(n, 0, sizeof *n);
	n->kind = kind;
	n->first = n->next = RT_JSON_NONE;
	return (uint32_t)d->n_nodes++;
}

static bool json_put(json_parser *p, const void *bytes, size_t n)
{
	rt_json_doc *d = p->doc;
	if (d->n_text + n >= UINT32_MAX ||
	    !rt_mem_grow(d->al, (void **)&d->text, &d->text_cap, d->n_text + n,
			 1)) {
		json_nomem(p);
		return false;
	}
	memcpy(d->text + d->n_text, bytes, n);
	d->n_text += n;
	return true;
}

/* Appends code point c as UTF-8. */
static bool json_put_utf8(json_parser *p, uint32_t c)
{
	unsigned char b[4];
	size_t n;
	if (c < 0x80) {
		b[0] = (unsigned char)c;
		n = 1;
	} else if (c < 0x800) {
		b[0] = (unsigned char)(0xc0 | c >> 6);
		b[1] = (unsigned char)(0x80 | (c & 0x3f));
		n = 2;
	} else if (c < 0x10000) {
		b[0] = (unsigned char)(0xe0 | c >> 12);
		b[1] = (unsigned char)(0x80 | (c >> 6 & 0x3f));
		b[2] = (unsigned char)(0x80 | (c & 0x3f));
		n = 3;
	} else {
		b[0] = (unsigned char)(0xf0 | c >> 18);
		b[1] = (unsigned char)(0x80 | (c >> 12 & 0x3f));
		b[2] = (unsigned char)(0x80 | (c >> 6 & 0x3f));
		b[3] = (unsigned char)(0x80 | (c & 0x3f));
		n = 4;
	}
	return json_put(p, b, n);
}

/* Length of the valid UTF-8 sequence at s[0..avail), or 0 if invalid
 * (RFC 3629: shortest form, no surrogates, at most U+10FFFF). */
static size_t utf8_seq_len(const unsigned char *s, size_t avail)
{
	unsigned c = s[0];
	size_t n;
	uint32_t cp, min;
	if (c < 0x80)
		return 1;
	if ((c & 0xe0) == 0xc0) {
		n = 2, cp = c & 0x1f, min = 0x80;
	} else if ((c & 0xf0) == 0xe0) {
		n = 3, cp = c & 0x0f, min = 0x800;
	} else if ((c & 0xf8) == 0xf0) {
		n = 4, cp = c & 0x07, min = 0x10000;
	} else {
		return 0;
	}
	if (avail < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

/* Reads 4 hex digits after "\u"; false if they are not there. */
static bool json_hex4(json_parser *p, uint32_t *value)
{
	if (p->len - p->pos < 4)
		return false;
	uint32_t v = 0;
	for (int i = 0; i < 4; i++) {
		unsigned c = p->s[p->pos + (size_t)i];
		unsigned d;
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			return false;
		v = v << 4 | d;
	}
	p->pos += 4;
	*value = v;
	return true;
}

/* After "\u": one code point, two escapes for a surrogate pair. */
static bool json_unicode_escape(json_parser *p)
{
	size_t at = p->pos - 2;
	uint32_t c, lo;
	if (!json_hex4(p, &c))
		return json_error(p, "JSON: bad \\u escape at header byte %zu",
				  at);
	if (c >= 0xdc00 && c <= 0xdfff)
		return json_error(p,
				  "JSON: lone low surrogate \\u%04x at header "
				  "byte %zu",
				  c, at);
	if (c >= 0xd800 && c <= 0xdbff) {
		bool is_paired = p->len - p->pos >= 2 && p->s[p->pos] == '\\' &&
				 p->s[p->pos + 1] == 'u';
		if (is_paired) {
			p->pos += 2;
			is_paired = json_hex4(p, &lo) && lo >= 0xdc00 &&
				    lo <= 0xdfff;
		}
		if (!is_paired)
			return json_error(p,
					  "JSON: high surrogate \\u%04x without "
					  "its pair at header byte %zu",
					  c, at);
		c = 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
	}
	return json_put_utf8(p, c);
}

/* One escape after the backslash. */
static bool json_escape(json_parser *p)
{
	static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
	if (p->pos >= p->len)
		return json_error(p, "JSON: unterminated string at the end of "
				     "the header");
	unsigned char c = p->s[p->pos++];
	if (c == 'u')
		return json_unicode_escape(p);
	const char *at = c ? strchr(from, c) : NULL;
	if (!at)
		return json_error(p,
				  "JSON: bad escape '\\%c' at header byte %zu",
				  c >= 0x20 && c < 0x7f ? (char)c : '?',
				  p->pos - 2);
	return json_put(p, &to[at - from], 1);
}

/* string = '"' { char | escape } '"'; decodes into the text pool and
 * stores where it went in *off, *n. */
static bool json_string(json_parser *p, uint32_t *off, uint32_t *n)
{
	size_t start = p->pos;
	if (p->pos >= p->len || p->s[p->pos] != '"') {
		json_unexpected(p, "a string");
		return false;
	}
	p->pos++;
	*off = (uint32_t)p->doc->n_text;
	for (;;) {
		if (p->pos >= p->len)
			return json_error(p,
					  "JSON: unterminated string starting "
					  "at header byte %zu",
					  start);
		unsigned char c = p->s[p->pos];
		if (c == '"')
			break;
		if (c < 0x20)
			return json_error(p,
					  "JSON: control byte 0x%02x in a "
					  "string at header byte %zu",
					  c, p->pos);
		if (c == '\\') {
			p->pos++;
			if (!json_escape(p))
				return false;
			continue;
		}
		size_t k = utf8_seq_len(p->s + p->pos, p->len - p->pos);
		if (!k)
			return json_error(p,
					  "JSON: invalid UTF-8 at header byte "
					  "%zu",
					  p->pos);
		if (!json_put(p, p->s + p->pos, k))
			return false;
		p->pos += k;
	}
	p->pos++;
	*n = (uint32_t)(p->doc->n_text - *off);
	return true;
}

static size_t json_digits(json_parser *p)
{
	size_t n = 0;
	while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
		p->pos++, n++;
	return n;
}

static uint32_t json_number(json_parser *p)
{
	size_t start = p->pos;
	if (p->pos < p->len && p->s[p->pos] == '-')
		p->pos++;
	if (p->pos < p->len && p->s[p->pos] == '0')
		p->pos++;
	else if (!json_digits(p))
		return json_unexpected(p, "a digit");
	if (p->pos < p->len && p->s[p->pos] == '.') {
		p->pos++;
		if (!json_digits(p))
			return json_unexpected(p, "a digit after '.'");
	}
	if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
		p->pos++;
		if (p->pos < p->len &&
		    (p->s[p->pos] == '+' || p->s[p->pos] == '-'))
			p->pos++;
		if (!json_digits(p))
			return json_unexpected(p, "a digit in the exponent");
	}
	uint32_t id = json_new_node(p, RT_JSON_NUMBER);
	if (id == RT_JSON_NONE)
		return id;
	uint32_t off = (uint32_t)p->doc->n_text;
	if (!json_put(p, p->s + start, p->pos - start))
		return RT_JSON_NONE;
	p->doc->nodes[id].str = off;
	p->doc->nodes[id].str_len = (uint32_t)(p->pos - start);
	return id;
}

static uint32_t json_word(json_parser *p, const char *word, rt_json_kind kind)
{
	size_t n = strlen(word);
	if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0)
		return json_unexpected(p, "a value");
	p->pos += n;
	return json_new_node(p, kind);
}

static uint32_t json_value(json_parser *p);

/* Links child after *last under parent. */
static void json_link(json_parser *p, uint32_t parent, uint32_t *last,
		      uint32_t child)
{
	rt_json_node *nodes = p->doc->nodes;
	if (*last == RT_JSON_NONE)
		nodes[parent].first = child;
	else
		nodes[*last].next = child;
	nodes[parent].n_children++;
	*last = child;
}

/* The list after "[" or "{" up to its closing byte; members of objects
 * are string ":" value. */
static uint32_t json_container(json_parser *p, rt_json_kind kind, char close)
{
	uint32_t id = json_new_node(p, kind), last = RT_JSON_NONE;
	if (id == RT_JSON_NONE)
		return id;
	p->pos++;
	json_skip_ws(p);
	if (p->pos < p->len && p->s[p->pos] == close) {
		p->pos++;
		return id;
	}
	for (;;) {
		uint32_t key = 0, key_len = 0;
		json_skip_ws(p);
		if (kind == RT_JSON_OBJECT) {
			if (!json_string(p, &key, &key_len))
				return RT_JSON_NONE;
			json_skip_ws(p);
			if (p->pos >= p->len || p->s[p->pos] != ':')
				return json_unexpected(p,
						       "':' after an object key");
			p->pos++;
		}
		uint32_t child = json_value(p);
		if (child == RT_JSON_NONE)
			return child;
		p->doc->nodes[child].key = key;
		p->doc->nodes[child].key_len = key_len;
		json_link(p, id, &last, child);
		if (p->pos < p->len && p->s[p->pos] == ',') {
			p->pos++;
			continue;
		}
		if (p->pos < p->len && p->s[p->pos] == close) {
			p->pos++;
			return id;
		}
		return json_unexpected(p, close == '}' ? "',' or '}'"
						       : "',' or ']'");
	}
}

/* value, with the whitespace around it. */
static uint32_t json_value(json_parser *p)
{
	uint32_t id;
	json_skip_ws(p);
	if (p->pos >= p->len)
		return json_unexpected(p, "a value");
	if (++p->depth > RT_JSON_MAX_DEPTH)
		return json_fail(p,
				 "JSON: nested deeper than %d at header byte "
				 "%zu",
				 RT_JSON_MAX_DEPTH, p->pos);
	switch (p->s[p->pos]) {
	case '{':
		id = json_container(p, RT_JSON_OBJECT, '}');
		break;
	case '[':
		id = json_container(p, RT_JSON_ARRAY, ']');
		break;
	case 't':
		id = json_word(p, "true", RT_JSON_TRUE);
		break;
	case 'f':
		id = json_word(p, "false", RT_JSON_FALSE);
		break;
	case 'n':
		id = json_word(p, "null", RT_JSON_NULL);
		break;
	case '"':
		id = json_new_node(p, RT_JSON_STRING);
		if (id != RT_JSON_NONE) {
			uint32_t off, n;
			if (!json_string(p, &off, &n))
				return RT_JSON_NONE;
			p->doc->nodes[id].str = off;
			p->doc->nodes[id].str_len = n;
		}
		break;
	case '-':
	case '0':
	case '1':
	case '2':
	case '3':
	case '4':
	case '5':
	case '6':
	case '7':
	case '8':
	case '9':
		id = json_number(p);
		break;
	default:
		return json_unexpected(p, "a value");
	}
	p->depth--;
	json_skip_ws(p);
	return id;
}

int rt_json_parse(rt_json_doc *doc, const attnrt_allocator *al, const char *src,
		  size_t len, char *err, size_t err_size)
{
	memset(doc, 0, sizeof *doc);
	doc->al = al;
	if (len >= UINT32_MAX / 2)
		return rt_fail(err, err_size, ATTNRT_ERR_FORMAT,
			       "JSON: header of %zu bytes is too large", len);
	json_parser p = {doc, (const unsigned char *)src,
			 len, 0,
			 0,   ATTNRT_OK,
			 err, err_size};
	if (json_value(&p) != RT_JSON_NONE && p.pos != len)
		json_unexpected(&p, "the end of the header");
	return p.code;
}

void rt_json_fini(rt_json_doc *doc)
{
	rt_mem_free(doc->al, doc->nodes);
	rt_mem_free(doc->al, doc->text);
	memset(doc, 0, sizeof *doc);
}

bool rt_utf8_is_valid(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	for (size_t i = 0, k; i < n; i += k)
		if (!(k = utf8_seq_len(u + i, n - i)))
			return false;
	return true;
}

bool rt_json_get_u64(const rt_json_doc *d, const rt_json_node *n,
		     uint64_t *value)
{
	if (n->kind != RT_JSON_NUMBER || n->str_len == 0)
		return false;
	const char *s = rt_json_str(d, n);
	uint64_t v = 0;
	for (uint32_t i = 0; i < n->str_len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		if (__builtin_mul_overflow(v, 10u, &v) ||
		    __builtin_add_overflow(v, (uint64_t)(s[i] - '0'), &v))
			return false;
	}
	*value = v;
	return true;
}
