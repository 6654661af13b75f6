/*
 * rt_bleu.c - d2l's bleu(pred_seq, label_seq, k) (rt_nmt.h), without
 * allocating.
 *
 * d2l counts the label's n-grams in a dict and walks the prediction's
 * n-grams in order, matching one while the label still has a copy left.
 * The i-th prediction n-gram g therefore matches exactly when g occurs
 * fewer times among the prediction's n-grams before i than in the label,
 * which is what is computed here by scanning, no dict needed. Since the
 * tokens are split on single spaces, ' '.join(tokens[i:i + n]) is the
 * bytes of the string from the start of token i to the end of token
 * i + n - 1, so n-grams are compared as substrings.
 */
#include "rt_nmt.h"

#include <math.h>
#include <string.h>

/* A string split on single spaces. */
typedef struct bleu_seq {
	const char *s;
	size_t len, n_tokens;
} bleu_seq;

static bleu_seq seq_of(const char *s)
{
	bleu_seq q = {s, strlen(s), 1};
	for (size_t i = 0; i < q.len; i++)
		q.n_tokens += s[i] == ' ';
	return q;
}

/* The start of the token after the one starting at byte at (len + 1
 * after the last token). */
static size_t token_next(const bleu_seq *q, size_t at)
{
	const char *space = memchr(q->s + at, ' ', q->len - at);
	return space ? (size_t)(space - q->s) + 1 : q->len + 1;
}

/* The end (exclusive) of the n tokens starting at byte at; there must be
 * n tokens from there. */
static size_t gram_end(const bleu_seq *q, size_t at, int n)
{
	for (int i = 0; i < n; i++)
		at = token_next(q, at);
	return at - 1;
}

/* How many of q's first `starts` n-grams are the glen bytes at g. */
static size_t gram_count(const bleu_seq *q, size_t starts, const char *g,
			 size_t glen, int n)
{
	size_t count = 0, at = 0;
	for (size_t i = 0; i < starts; i++) {
		size_t end = gram_end(q, at, n);
		count += end - at == glen &&
			 (glen == 0 || !memcmp(q->s + at, g, glen));
		at = token_next(q, at);
	}
	return count;
}

/* d2l's num_matches for n-grams: the clipped count. */
static size_t gram_matches(const bleu_seq *pred, const bleu_seq *label, int n)
{
	size_t n_pred = pred->n_tokens - (size_t)n + 1, matches = 0, at = 0;
	size_t n_label = label->n_tokens >= (size_t)n
				 ? label->n_tokens - (size_t)n + 1
				 : 0;
	for (size_t i = 0; i < n_pred; i++) {
		const char *g = pred->s + at;
		size_t glen = gram_end(pred, at, n) - at;
		matches += gram_count(pred, i, g, glen, n) <
			   gram_count(label, n_label, g, glen, n);
		at = token_next(pred, at);
	}
	return matches;
}

double rt_bleu(const char *pred, const char *label, int k)
{
	bleu_seq p = seq_of(pred), l = seq_of(label);
	double ratio = (double)l.n_tokens / (double)p.n_tokens;
	double score = exp(fmin(0.0, 1.0 - ratio));
	for (int n = 1; n <= k; n++) {
		if (p.n_tokens < (size_t)n) /* Python: ZeroDivisionError */
			return 0.0;
		double n_grams = (double)(p.n_tokens - (size_t)n + 1);
		score *= pow((double)gram_matches(&p, &l, n) / n_grams,
			     pow(0.5, n));
	}
	return score;
}
