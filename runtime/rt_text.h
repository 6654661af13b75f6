/*
 * rt_text.h - the characters of a text as token ids, for character-level
 * language models (`data = text(...)`, --generate): a vocabulary of the
 * distinct Unicode code points of a UTF-8 text, sorted, the id of a
 * character its place in that order; encoding and decoding with it; the
 * vocabulary as one UTF-8 string (its characters in id order), which a
 * checkpoint's metadata keeps so that a saved model can be used without
 * its text; and the built-in text (data/text-default.txt).
 *
 * Part of libattnrt's sources, not of the generated code's ABI; every
 * allocation goes through the caller's attnrt_allocator, errors are codes
 * with a message in the caller's buffer, nothing is printed.
 */
#ifndef ATTNC_RT_TEXT_H
#define ATTNC_RT_TEXT_H

#include "attnrt.h"

#include <stddef.h>
#include <stdint.h>

typedef struct rt_text_vocab rt_text_vocab;

/* The vocabulary of the len bytes of text (UTF-8; an invalid sequence is
 * ATTNRT_ERR_FORMAT naming its line and column; an empty text too).
 * Free with rt_text_vocab_free. */
int rt_text_vocab_build(const attnrt_allocator *al, const char *text, size_t len,
			rt_text_vocab **out, char *err, size_t err_size);
/* The vocabulary whose characters, in id order, are the UTF-8 string s
 * (as rt_text_vocab_string gives it): sorted, each once, else
 * ATTNRT_ERR_FORMAT. */
int rt_text_vocab_parse(const attnrt_allocator *al, const char *s,
			rt_text_vocab **out, char *err, size_t err_size);
void rt_text_vocab_free(rt_text_vocab *v);

/* Its size, and its characters in id order as a NUL-terminated UTF-8
 * string (owned by v; a NUL character is not allowed in texts). */
int32_t rt_text_vocab_size(const rt_text_vocab *v);
const char *rt_text_vocab_string(const rt_text_vocab *v);

/* The ids of the characters of text[0..len) into ids (room for len);
 * *n gets their count. A character outside the vocabulary or invalid
 * UTF-8 is ATTNRT_ERR_FORMAT naming it and its place. */
int rt_text_encode(const rt_text_vocab *v, const char *text, size_t len,
		   int32_t *ids, size_t *n, char *err, size_t err_size);
/* Appends the UTF-8 of character id to out (4 bytes of room at most);
 * returns the bytes written, 0 for an id outside the vocabulary. */
size_t rt_text_decode(const rt_text_vocab *v, int32_t id, char *out);

/* The built-in text (data/text-default.txt, compiled in). */
const char *rt_text_default(size_t *len);

#endif
