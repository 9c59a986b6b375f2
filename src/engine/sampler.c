/*
 * sampler.c
 *		Choosing the next token from logits (see sampler.h).
 *
 * The chain follows llama.cpp's default order: repetition penalty, then
 * either greedy argmax (temperature 0) or temperature, top-k, softmax, top-p,
 * min-p and a draw from what is left.
 *
 * A vocabulary can have 262144 tokens (Gemma 3), so the chain avoids sorting
 * it all for every token:
 *
 * - top-k selects the k best candidates with a bounded heap kept in the front
 *   of the array (O(n log k)) and sorts only those;
 * - softmax does not need an order: it finds the maximum by a scan;
 * - top-p, given an unsorted list, does not sort it: a quickselect steered
 *   by probability mass finds the cut in expected O(n), flat distribution
 *   or peaked, and leaves the kept candidates unsorted;
 * - min-p and the draw are linear scans in whatever order the list has.
 *
 * Order between candidates is a total one: higher logit first, lower id on
 * equal logits, NaN counted as -infinity.  So every result is deterministic
 * and does not depend on the sorting algorithm.
 *
 * Degenerate logits: a NaN logit is never chosen.  When every logit is NaN or
 * -infinity, the sampler returns token 0 (the lowest id among equals, as the
 * greedy rule says).  When some logits are +infinity, the draw is uniform
 * among those.
 *
 * The random numbers come from xoshiro256** (Blackman and Vigna, "Scrambled
 * linear pseudorandom number generators", 2021), seeded by splitmix64.
 */
#include "sampler.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/exp_sum.h"

/* Below this many candidates, top-p's selection sorts instead of partitioning. */
#define TOP_P_SMALL 32

/* Defaults: greedy, filters off, seed 0. */
void
llm_sampler_params_default(LlmSamplerParams *p)
{
	if (p == NULL)
		return;
	memset(p, 0, sizeof(*p));
	p->temperature = 0.0f;
	p->top_k = 0;
	p->top_p = 1.0f;
	p->min_p = 0.0f;
	p->repeat_penalty = 1.0f;
	p->repeat_last_n = 64;
	p->seed = 0;
}

/* Check parameter ranges; LLM_ERR_INVALID with a message naming the parameter. */
LlmStatus
llm_sampler_params_check(const LlmSamplerParams *p, LlmError *err)
{
	if (p == NULL)
		return llm_error_set(err, LLM_ERR_INVALID, "sampler parameters are missing");

	/* written so that NaN fails every test */
	if (!(isfinite(p->temperature) && p->temperature >= 0.0f))
		return llm_error_set(err, LLM_ERR_INVALID,
							 "temperature must be finite and >= 0, got %g",
							 (double) p->temperature);
	if (p->top_k < 0)
		return llm_error_set(err, LLM_ERR_INVALID,
							 "top_k must be >= 0, got %d", p->top_k);
	if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
		return llm_error_set(err, LLM_ERR_INVALID,
							 "top_p must be in (0, 1], got %g", (double) p->top_p);
	if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
		return llm_error_set(err, LLM_ERR_INVALID,
							 "min_p must be in [0, 1], got %g", (double) p->min_p);
	if (!(isfinite(p->repeat_penalty) && p->repeat_penalty > 0.0f))
		return llm_error_set(err, LLM_ERR_INVALID,
							 "repeat_penalty must be finite and > 0, got %g",
							 (double) p->repeat_penalty);
	if (p->repeat_last_n < 0)
		return llm_error_set(err, LLM_ERR_INVALID,
							 "repeat_last_n must be >= 0, got %d", p->repeat_last_n);
	return LLM_OK;
}

/* A logit as a sort key: NaN counts as -infinity. */
static inline float
logit_key(float x)
{
	return isnan(x) ? -INFINITY : x;
}

/*
 * The highest logit_key in logits, in 8 independent lanes (no chain of
 * compares through the vocabulary; x > m ? x : m is maxps's own rule, so
 * NaN is passed over and the compiler vectorizes it).
 */
static float
logits_max(const float *logits, int n)
{
	float		lane[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
	float		top = -INFINITY;
	int			i = 0;

	for (; i + 8 <= n; i += 8)
		for (int j = 0; j < 8; j++)
			lane[j] = logits[i + j] > lane[j] ? logits[i + j] : lane[j];
	for (; i < n; i++)
		lane[0] = logits[i] > lane[0] ? logits[i] : lane[0];
	for (int j = 0; j < 8; j++)
		top = lane[j] > top ? lane[j] : top;
	return top;
}

/*
 * The id of the highest logit_key in logits (n >= 1), the lowest on ties:
 * the maximum, then its first place, where a NaN counts as -infinity when
 * that is the maximum.
 */
static int32_t
logits_argmax(const float *logits, int n)
{
	float		top = logits_max(logits, n);
	int			i;

	/* its first place: 8 at a time to the first group that holds it, then within that group */
	for (i = 0; i + 8 <= n; i += 8)
	{
		int			hit = 0;

		for (int j = 0; j < 8; j++)
			hit |= (logits[i + j] == top) | (top == -INFINITY && logits[i + j] != logits[i + j]);
		if (hit)
			break;
	}
	for (; i < n; i++)
		if (logits[i] == top || (top == -INFINITY && isnan(logits[i])))
			return i;
	return 0;
}

/* Whether a comes before b: higher logit, then lower id. */
static inline bool
cand_before(const LlmCandidate *a, const LlmCandidate *b)
{
	float		ka = logit_key(a->logit);
	float		kb = logit_key(b->logit);

	return ka > kb || (ka == kb && a->id < b->id);
}

/* qsort comparator for the order of cand_before. */
static int
cand_compare(const void *pa, const void *pb)
{
	const LlmCandidate *a = pa;
	const LlmCandidate *b = pb;

	if (cand_before(a, b))
		return -1;
	if (cand_before(b, a))
		return 1;
	return 0;
}

/* Swap two candidates. */
static inline void
cand_swap(LlmCandidate *a, LlmCandidate *b)
{
	LlmCandidate t = *a;

	*a = *b;
	*b = t;
}

/*
 * Restore the heap below position i of h (n entries).  The heap keeps its
 * worst candidate (the last in cand_before order) at the root.
 */
static void
heap_sift_down(LlmCandidate *h, int n, int i)
{
	for (;;)
	{
		int			l = 2 * i + 1;
		int			r = l + 1;
		int			w = i;

		if (l < n && cand_before(&h[w], &h[l]))
			w = l;
		if (r < n && cand_before(&h[w], &h[r]))
			w = r;
		if (w == i)
			return;
		cand_swap(&h[i], &h[w]);
		i = w;
	}
}

/*
 * Move the best k of a (n entries, 0 < k < n) to a[0..k), sorted; the rest
 * stay in a[k..n) in some order.  O(n log k).
 */
static void
cand_select_sorted(LlmCandidate *a, int n, int k)
{
	int			i;

	for (i = k / 2 - 1; i >= 0; i--)
		heap_sift_down(a, k, i);
	for (i = k; i < n; i++)
	{
		if (cand_before(&a[i], &a[0]))
		{
			cand_swap(&a[i], &a[0]);
			heap_sift_down(a, k, 0);
		}
	}
	/* heap sort: the worst goes to the end, leaving the best first */
	for (i = k - 1; i > 0; i--)
	{
		cand_swap(&a[0], &a[i]);
		heap_sift_down(a, i, 0);
	}
}

/* Fill p by softmax over the logits, in the list's present order. */
static void
cand_softmax_fill(LlmCandidates *c)
{
	float		max = -INFINITY;
	double		sum = 0.0;
	float		inv;
	int			i;

	if (c->n <= 0)
		return;
	if (c->sorted)
		max = logit_key(c->data[0].logit);
	else
		for (i = 0; i < c->n; i++)
			if (logit_key(c->data[i].logit) > max)
				max = logit_key(c->data[i].logit);

	for (i = 0; i < c->n; i++)
	{
		float		l = c->data[i].logit;
		float		e;

		/*
		 * Equal to the maximum gives 1 even when the maximum is infinite
		 * (avoiding inf - inf); NaN gives 0.
		 */
		if (isnan(l))
			e = 0.0f;
		else if (l == max)
			e = 1.0f;
		else
			e = expf(l - max);
		c->data[i].p = e;
		sum += e;
	}
	if (!(sum > 0.0))
		return;					/* every logit NaN: all p stay 0 */
	inv = (float) (1.0 / sum);
	for (i = 0; i < c->n; i++)
		c->data[i].p *= inv;
}

/* Sort by descending logit (if not sorted) and fill p by softmax. */
void
llm_cand_softmax(LlmCandidates *c)
{
	if (c == NULL || c->n <= 0)
		return;
	if (!c->sorted)
	{
		qsort(c->data, (size_t) c->n, sizeof(LlmCandidate), cand_compare);
		c->sorted = true;
	}
	cand_softmax_fill(c);
}

/*
 * Keep the k highest logits (ties by lower id), sorted; k <= 0 or k >= n
 * leaves the list as it is.
 */
void
llm_cand_top_k(LlmCandidates *c, int k)
{
	if (c == NULL || k <= 0 || k >= c->n)
		return;
	if (!c->sorted)
	{
		cand_select_sorted(c->data, c->n, k);
		c->sorted = true;
	}
	c->n = k;
}

/* Move the median of a[i], a[j], a[k] (in cand_before order) to a[k]. */
static void
median3_to(LlmCandidate *a, int i, int j, int k)
{
	if (cand_before(&a[j], &a[i]))
		cand_swap(&a[i], &a[j]);
	/*
	 * Now a[i] comes before a[j].  The median is a[j] if a[k] comes after
	 * it, a[i] if a[k] comes before that, a[k] otherwise.
	 */
	if (cand_before(&a[j], &a[k]))
		cand_swap(&a[j], &a[k]);
	else if (cand_before(&a[k], &a[i]))
		cand_swap(&a[i], &a[k]);
}

/*
 * Partition a (n entries, p filled, total mass >= need > 0 in exact
 * arithmetic) so that a[0..r) are the r best and r is the fewest whose mass
 * reaches need; returns r (n if rounding leaves the sum of all short).
 *
 * This is quickselect (Hoare, 1961) steered by mass instead of by rank:
 * after each partition around a pivot, the mass of the better side says on
 * which side the cut lies.  Expected O(n); a depth limit falls back to
 * sorting the remaining range, so the worst case is O(n log n).
 */
static int
cand_select_mass(LlmCandidate *a, int n, double need)
{
	double		cum = 0.0;
	int			lo = 0;			/* a[0..lo) is kept */
	int			hi = n;			/* a[hi..n) is dropped */
	int			depth = 8;
	int			i;
	int			j;

	for (i = n; i > 1; i >>= 1)
		depth += 2;

	while (hi - lo > TOP_P_SMALL && depth-- > 0)
	{
		double		m = 0.0;
		LlmCandidate *pivot = &a[hi - 1];

		median3_to(a, lo, lo + (hi - lo) / 2, hi - 1);
		i = lo;
		for (j = lo; j < hi - 1; j++)
		{
			if (cand_before(&a[j], pivot))
			{
				m += a[j].p;
				cand_swap(&a[i], &a[j]);
				i++;
			}
		}
		cand_swap(&a[i], &a[hi - 1]);

		/* a[lo..i) before the pivot, now at a[i], and a[i + 1..hi) after it */
		if (m >= need)
			hi = i;
		else if (m + a[i].p >= need)
			return i + 1;
		else
		{
			need -= m + a[i].p;
			lo = i + 1;
		}
	}

	qsort(a + lo, (size_t) (hi - lo), sizeof(LlmCandidate), cand_compare);
	for (i = lo; i < hi; i++)
	{
		cum += a[i].p;
		if (cum >= need)
			return i + 1;
	}
	return hi;
}

/*
 * Keep the smallest prefix, in sorted order, whose p add up to at least p
 * (at least one candidate); p >= 1 (or NaN) leaves the list as it is.  Reads
 * p, so it comes after softmax.  A sorted list is cut after a scan; an
 * unsorted one is partitioned (see cand_select_mass) and stays unsorted: it
 * keeps the same candidates, in some order.
 */
void
llm_cand_top_p(LlmCandidates *c, float p)
{
	double		cum = 0.0;
	int			i;

	if (c == NULL || c->n <= 0 || !(p < 1.0f))
		return;

	if (!c->sorted)
	{
		if (p > 0.0f)
			c->n = cand_select_mass(c->data, c->n, (double) p);
		else
		{
			/* nothing to reach: keep the best one */
			llm_cand_top_k(c, 1);
		}
		return;
	}

	for (i = 0; i < c->n; i++)
	{
		cum += c->data[i].p;
		if (cum >= (double) p)
		{
			c->n = i + 1;
			return;
		}
	}
	/* the sum of all fell short of p by rounding: keep everything */
}

/*
 * Keep the candidates whose p is at least min_p times the largest p (at
 * least one); min_p <= 0 leaves the list as it is.  Reads p, so it comes
 * after softmax; keeps the order of the list.
 */
void
llm_cand_min_p(LlmCandidates *c, float min_p)
{
	float		pmax = 0.0f;
	float		threshold;
	int			imax = 0;
	int			n = 0;
	int			i;

	if (c == NULL || c->n <= 0 || !(min_p > 0.0f))
		return;

	for (i = 0; i < c->n; i++)
	{
		if (c->data[i].p > pmax)
		{
			pmax = c->data[i].p;
			imax = i;
		}
	}
	threshold = min_p * pmax;
	for (i = 0; i < c->n; i++)
		if (c->data[i].p >= threshold)
			c->data[n++] = c->data[i];
	if (n == 0)
	{
		/* only for min_p > 1, which the parameter check refuses */
		c->data[0] = c->data[imax];
		n = 1;
	}
	c->n = n;
}

/* Draw one candidate in proportion to p (renormalised over the list). */
static int32_t
cand_draw(const LlmCandidates *c, LlmRng *rng)
{
	double		total = 0.0;
	double		target;
	double		cum = 0.0;
	int			last = -1;
	int			i;

	for (i = 0; i < c->n; i++)
	{
		total += c->data[i].p;
		if (c->data[i].p > 0.0f)
			last = i;
	}
	if (last < 0)
		return c->data[0].id;

	target = llm_rng_uniform(rng) * total;
	for (i = 0; i < c->n; i++)
	{
		cum += c->data[i].p;
		if (cum > target)
			return c->data[i].id;
	}
	/* rounding left target at or past the end: the last nonzero candidate */
	return c->data[last].id;
}

/* One step of splitmix64 (Steele, Lea and Flood, 2014). */
static uint64_t
splitmix64_next(uint64_t *x)
{
	uint64_t	z;

	*x += UINT64_C(0x9e3779b97f4a7c15);
	z = *x;
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* Seed the generator from one 64-bit number by splitmix64. */
void
llm_rng_seed(LlmRng *r, uint64_t seed)
{
	uint64_t	x = seed;
	int			i;

	/* splitmix64 is a bijection, so the four words are never all zero */
	for (i = 0; i < 4; i++)
		r->s[i] = splitmix64_next(&x);
}

/* Rotate left by k bits (0 < k < 64). */
static inline uint64_t
rotl64(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

/* The next 64 random bits (xoshiro256**). */
uint64_t
llm_rng_next(LlmRng *r)
{
	uint64_t	result = rotl64(r->s[1] * 5, 7) * 9;
	uint64_t	t = r->s[1] << 17;

	r->s[2] ^= r->s[0];
	r->s[3] ^= r->s[1];
	r->s[1] ^= r->s[2];
	r->s[0] ^= r->s[3];
	r->s[2] ^= t;
	r->s[3] = rotl64(r->s[3], 45);
	return result;
}

/* A uniform double in [0, 1) from the top 53 bits. */
double
llm_rng_uniform(LlmRng *r)
{
	return (double) (llm_rng_next(r) >> 11) * 0x1.0p-53;
}

/* Prepare a sampler for a vocabulary of n_vocab tokens; NULL p means defaults. */
LlmStatus
llm_sampler_init(LlmSampler *s, const LlmSamplerParams *p, int n_vocab, LlmError *err)
{
	LlmSamplerParams params;
	LlmStatus	st;

	if (s == NULL)
		return llm_error_set(err, LLM_ERR_INVALID, "sampler is missing");
	memset(s, 0, sizeof(*s));
	if (p == NULL)
		llm_sampler_params_default(&params);
	else
		params = *p;
	st = llm_sampler_params_check(&params, err);
	if (st != LLM_OK)
		return st;
	if (n_vocab <= 0)
		return llm_error_set(err, LLM_ERR_INVALID,
							 "vocabulary size must be positive, got %d", n_vocab);
	if ((size_t) n_vocab > SIZE_MAX / sizeof(LlmCandidate))
		return llm_error_set(err, LLM_ERR_NOMEM,
							 "sampler buffer for %d tokens is too large", n_vocab);

	s->buf = malloc((size_t) n_vocab * sizeof(LlmCandidate));
	if (s->buf == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM,
							 "could not allocate sampler buffer for %d tokens", n_vocab);
	s->params = params;
	s->n_vocab = n_vocab;
	llm_rng_seed(&s->rng, params.seed);
	return LLM_OK;
}

/* Free the sampler's buffer and zero it; safe on a zeroed sampler. */
void
llm_sampler_free(LlmSampler *s)
{
	if (s == NULL)
		return;
	free(s->buf);
	memset(s, 0, sizeof(*s));
}

/*
 * Apply the repetition penalty to the logits of the distinct tokens among
 * the last last_n of history (ids outside the vocabulary are ignored).  The
 * sampler's buffer marks the tokens already penalised.
 */
static void
apply_repeat_penalty(LlmSampler *s, float *logits, const int32_t *history,
					 int n_history, int last_n, float penalty)
{
	int			start;
	int			i;

	if (history == NULL || n_history <= 0 || last_n <= 0 || penalty == 1.0f)
		return;
	start = n_history > last_n ? n_history - last_n : 0;

	for (i = start; i < n_history; i++)
		if (history[i] >= 0 && history[i] < s->n_vocab)
			s->buf[history[i]].id = -1;
	for (i = start; i < n_history; i++)
	{
		int32_t		t = history[i];

		if (t < 0 || t >= s->n_vocab || s->buf[t].id == t)
			continue;
		s->buf[t].id = t;
		if (logits[t] > 0.0f)
			logits[t] /= penalty;
		else
			logits[t] *= penalty;
	}
}

/*
 * Choose the next token from logits (n_vocab, modified in place by the
 * penalty), given the sequence's tokens so far.  Returns -1 only when the
 * sampler is not initialised or logits is NULL.
 */
int32_t
llm_sampler_sample(LlmSampler *s, float *logits, const int32_t *history, int n_history)
{
	const LlmSamplerParams *p;
	LlmCandidates c;
	float		max;
	float		temp;
	int32_t		best = 0;
	int			n;
	int			i;

	if (s == NULL || s->buf == NULL || s->n_vocab <= 0 || logits == NULL)
		return -1;
	p = &s->params;
	n = s->n_vocab;

	apply_repeat_penalty(s, logits, history, n_history, p->repeat_last_n,
						 p->repeat_penalty);

	/* argmax, lowest id on ties, NaN as -infinity */
	best = logits_argmax(logits, n);
	max = logit_key(logits[best]);
	/* greedy; also when nothing is finite or above -infinity (then 0) */
	if (!(p->temperature > 0.0f) || max == -INFINITY)
		return best;

	/*
	 * Temperature.  Logits are shifted by the maximum before the division,
	 * which leaves softmax unchanged but keeps a small temperature from
	 * overflowing: the best become 0 and the rest at most 0.
	 */
	temp = p->temperature;
	for (i = 0; i < n; i++)
	{
		float		l = logit_key(logits[i]);

		s->buf[i].id = i;
		s->buf[i].logit = l == max ? 0.0f : (l - max) / temp;
		s->buf[i].p = 0.0f;
	}
	c.data = s->buf;
	c.n = n;
	c.sorted = false;

	llm_cand_top_k(&c, p->top_k);
	cand_softmax_fill(&c);
	llm_cand_top_p(&c, p->top_p);
	llm_cand_min_p(&c, p->min_p);
	return cand_draw(&c, &s->rng);
}

/* log softmax(logits)[t], the sum of exps by the SIMD level's function (see sampler.h). */
float
llm_logprob(const float *logits, int n_vocab, int32_t t)
{
	float		max;

	if (t < 0 || t >= n_vocab)
		return NAN;
	max = logits_max(logits, n_vocab);
	if (max == -INFINITY)
		return NAN;
	return (float) ((double) logit_key(logits[t]) - max - log(llm_exp_sum_kernel() (logits, n_vocab, max)));
}
