/*
 * test_sampler.c
 *		Tests of the sampler: parameter checks, RNG, greedy choice, each filter
 *		on hand-computed cases, the full chain and the repetition penalty.
 */
#include "sampler.h"
#include "test.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Parameters for stochastic sampling at temperature t with filters off. */
static LlmSamplerParams
params_temp(float t, uint64_t seed)
{
	LlmSamplerParams p;

	llm_sampler_params_default(&p);
	p.temperature = t;
	p.seed = seed;
	return p;
}

/* Whether id is among the n ids of set. */
static bool
id_in(int32_t id, const int32_t *set, int n)
{
	int			i;

	for (i = 0; i < n; i++)
		if (set[i] == id)
			return true;
	return false;
}

/* qsort comparator of the reference order: higher logit, then lower id. */
static int
ref_compare(const void *pa, const void *pb)
{
	const LlmCandidate *a = pa;
	const LlmCandidate *b = pb;

	if (a->logit != b->logit)
		return a->logit > b->logit ? -1 : 1;
	return a->id < b->id ? -1 : (a->id > b->id);
}

/* A small deterministic generator for test data (independent of the RNG under test). */
static uint32_t
test_rand(uint32_t *state)
{
	*state = *state * 1664525u + 1013904223u;
	return *state >> 8;
}

/* Check a bad parameter set is refused with a message naming the parameter. */
static void
check_bad_param(const LlmSamplerParams *p, const char *name, const char *what)
{
	LlmError	err;
	LlmStatus	st;
	LlmSampler	s;

	llm_error_clear(&err);
	st = llm_sampler_params_check(p, &err);
	TEST_CHECK(st == LLM_ERR_INVALID, "%s: status %d", what, (int) st);
	TEST_CHECK(err.status == LLM_ERR_INVALID, "%s: err.status %d", what, (int) err.status);
	TEST_CHECK(strstr(err.msg, name) != NULL, "%s: message \"%s\" lacks \"%s\"",
			   what, err.msg, name);

	llm_error_clear(&err);
	st = llm_sampler_init(&s, p, 10, &err);
	TEST_CHECK(st == LLM_ERR_INVALID, "%s: init status %d", what, (int) st);
	TEST_CHECK(s.buf == NULL, "%s: init left a buffer", what);
	llm_sampler_free(&s);
}

/* Defaults and the range check of every parameter. */
static void
test_params(void)
{
	LlmSamplerParams d;
	LlmSamplerParams p;
	LlmError	err;

	llm_sampler_params_default(&d);
	TEST_CHECK(d.temperature == 0.0f, "default temperature %g", (double) d.temperature);
	TEST_CHECK(d.top_k == 0, "default top_k %d", d.top_k);
	TEST_CHECK(d.top_p == 1.0f, "default top_p %g", (double) d.top_p);
	TEST_CHECK(d.min_p == 0.0f, "default min_p %g", (double) d.min_p);
	TEST_CHECK(d.repeat_penalty == 1.0f, "default repeat_penalty %g", (double) d.repeat_penalty);
	TEST_CHECK(d.repeat_last_n == 64, "default repeat_last_n %d", d.repeat_last_n);
	TEST_CHECK(d.seed == 0, "default seed");
	TEST_CHECK(llm_sampler_params_check(&d, NULL) == LLM_OK, "defaults accepted");

	/* edges that are allowed */
	p = d;
	p.temperature = 2.0f;
	p.top_k = 1000000;
	p.top_p = 1e-6f;
	p.min_p = 1.0f;
	p.repeat_penalty = 1e-3f;
	p.repeat_last_n = 0;
	TEST_CHECK(llm_sampler_params_check(&p, NULL) == LLM_OK, "edge values accepted");

	p = d;
	p.temperature = -0.5f;
	check_bad_param(&p, "temperature", "temperature -0.5");
	p.temperature = NAN;
	check_bad_param(&p, "temperature", "temperature nan");
	p.temperature = INFINITY;
	check_bad_param(&p, "temperature", "temperature inf");

	p = d;
	p.top_k = -1;
	check_bad_param(&p, "top_k", "top_k -1");

	p = d;
	p.top_p = 0.0f;
	check_bad_param(&p, "top_p", "top_p 0");
	p.top_p = -0.1f;
	check_bad_param(&p, "top_p", "top_p -0.1");
	p.top_p = NAN;
	check_bad_param(&p, "top_p", "top_p nan");
	p.top_p = 1.5f;
	check_bad_param(&p, "top_p", "top_p 1.5");
	llm_sampler_params_check(&p, &err);
	TEST_CHECK(strcmp(err.msg, "top_p must be in (0, 1], got 1.5") == 0,
			   "top_p message \"%s\"", err.msg);

	p = d;
	p.min_p = -0.01f;
	check_bad_param(&p, "min_p", "min_p -0.01");
	p.min_p = 1.01f;
	check_bad_param(&p, "min_p", "min_p 1.01");
	p.min_p = NAN;
	check_bad_param(&p, "min_p", "min_p nan");

	p = d;
	p.repeat_penalty = 0.0f;
	check_bad_param(&p, "repeat_penalty", "repeat_penalty 0");
	p.repeat_penalty = -1.0f;
	check_bad_param(&p, "repeat_penalty", "repeat_penalty -1");
	p.repeat_penalty = NAN;
	check_bad_param(&p, "repeat_penalty", "repeat_penalty nan");
	p.repeat_penalty = INFINITY;
	check_bad_param(&p, "repeat_penalty", "repeat_penalty inf");

	p = d;
	p.repeat_last_n = -1;
	check_bad_param(&p, "repeat_last_n", "repeat_last_n -1");

	TEST_CHECK(llm_sampler_params_check(NULL, &err) == LLM_ERR_INVALID, "NULL params");
}

/* init and free: bad sizes, zeroed structs, double free. */
static void
test_init_free(void)
{
	LlmSampler	s;
	LlmError	err;
	float		logit = 1.0f;

	memset(&s, 0, sizeof(s));
	llm_sampler_free(&s);
	llm_sampler_free(NULL);
	TEST_CHECK(llm_sampler_sample(&s, &logit, NULL, 0) == -1, "zeroed sampler gives -1");

	TEST_CHECK(llm_sampler_init(&s, NULL, 0, &err) == LLM_ERR_INVALID, "n_vocab 0");
	TEST_CHECK(strstr(err.msg, "vocabulary") != NULL, "n_vocab message \"%s\"", err.msg);
	TEST_CHECK(llm_sampler_init(&s, NULL, -5, &err) == LLM_ERR_INVALID, "n_vocab -5");
	TEST_CHECK(llm_sampler_init(NULL, NULL, 5, &err) == LLM_ERR_INVALID, "NULL sampler");

	TEST_CHECK(llm_sampler_init(&s, NULL, 5, &err) == LLM_OK, "init with defaults: %s", err.msg);
	TEST_CHECK(s.buf != NULL && s.n_vocab == 5, "init filled the sampler");
	TEST_CHECK(s.params.temperature == 0.0f && s.params.repeat_last_n == 64, "NULL params are defaults");
	llm_sampler_free(&s);
	TEST_CHECK(s.buf == NULL && s.n_vocab == 0, "free zeroes");
	llm_sampler_free(&s);
}

/* The RNG against reference outputs, its range, and reseeding. */
static void
test_rng(void)
{
	LlmRng		r;
	LlmRng		r2;
	double		sum = 0.0;
	bool		in_range = true;
	int			i;

	/* reference values from an independent implementation */
	llm_rng_seed(&r, 0);
	TEST_CHECK(llm_rng_next(&r) == UINT64_C(0x99ec5f36cb75f2b4), "seed 0 first");
	TEST_CHECK(llm_rng_next(&r) == UINT64_C(0xbf6e1f784956452a), "seed 0 second");
	TEST_CHECK(llm_rng_next(&r) == UINT64_C(0x1a5f849d4933e6e0), "seed 0 third");
	llm_rng_seed(&r, 42);
	TEST_CHECK(llm_rng_next(&r) == UINT64_C(0x15780b2e0c2ec716), "seed 42 first");

	llm_rng_seed(&r, 7);
	llm_rng_seed(&r2, 7);
	for (i = 0; i < 100000; i++)
	{
		double		u = llm_rng_uniform(&r);

		if (!(u >= 0.0 && u < 1.0))
			in_range = false;
		sum += u;
	}
	TEST_CHECK(in_range, "uniform in [0, 1)");
	TEST_CHECK(fabs(sum / 100000 - 0.5) < 0.005, "uniform mean %g", sum / 100000);
	llm_rng_seed(&r, 7);
	llm_rng_seed(&r2, 7);
	TEST_CHECK(llm_rng_uniform(&r) == (double) (llm_rng_next(&r2) >> 11) * 0x1.0p-53,
			   "uniform is (next >> 11) * 2^-53");
}

/* Greedy sampling of logits (copied, since the penalty may change them). */
static int32_t
greedy(const float *logits, int n)
{
	LlmSampler	s;
	float	   *copy = malloc(sizeof(float) * (size_t) n);
	int32_t		id;

	memcpy(copy, logits, sizeof(float) * (size_t) n);
	if (llm_sampler_init(&s, NULL, n, NULL) != LLM_OK)
	{
		free(copy);
		return -2;
	}
	id = llm_sampler_sample(&s, copy, NULL, 0);
	llm_sampler_free(&s);
	free(copy);
	return id;
}

/* Greedy: argmax, lowest id on ties, NaN never chosen. */
static void
test_greedy(void)
{
	float		a[] = {1.0f, 5.0f, 3.0f, 5.0f, -2.0f};
	float		b[] = {NAN, 2.0f, 2.0f, NAN};
	float		c[] = {1.0f, NAN, 3.0f, NAN};
	float		d[] = {NAN, NAN, NAN};
	float		e[] = {-INFINITY, NAN, -INFINITY};
	float		f[] = {-1e30f, NAN, -INFINITY};
	float		g[] = {0.0f, INFINITY, 1.0f, INFINITY};
	float		h[] = {-3.0f, -1.0f, -2.0f};

	TEST_CHECK(greedy(a, 5) == 1, "argmax with tie: %d", greedy(a, 5));
	TEST_CHECK(greedy(b, 4) == 1, "NaN first: %d", greedy(b, 4));
	TEST_CHECK(greedy(c, 4) == 2, "NaN between: %d", greedy(c, 4));
	TEST_CHECK(greedy(d, 3) == 0, "all NaN gives 0: %d", greedy(d, 3));
	TEST_CHECK(greedy(e, 3) == 0, "all -inf/NaN gives 0: %d", greedy(e, 3));
	TEST_CHECK(greedy(f, 3) == 0, "finite beats -inf and NaN: %d", greedy(f, 3));
	TEST_CHECK(greedy(g, 4) == 1, "+inf: %d", greedy(g, 4));
	TEST_CHECK(greedy(h, 3) == 1, "all negative: %d", greedy(h, 3));

	/*
	 * Against the plain scan (NaN as -infinity, first of the highest) on
	 * random rows of 1 to 70 logits drawn from few values, so ties, -0 and
	 * +0, infinities and NaN fall in every lane and tail.
	 */
	{
		const float vals[] = {0.0f, -0.0f, 1.0f, -1.0f, 2.0f, INFINITY, -INFINITY, NAN};
		float		row[70];
		int			bad = 0;

		for (int trial = 0; trial < 4000; trial++)
		{
			int			n = 1 + (int) (test_rng_next() % 70);
			int			want = 0;
			float		best;

			for (int i = 0; i < n; i++)
				row[i] = trial % 7 == 0 ? vals[6 + test_rng_next() % 2]	/* only -infinity and NaN */
					: vals[test_rng_next() % (trial % 2 ? 8 : 4 + trial % 5)];
			best = isnan(row[0]) ? -INFINITY : row[0];
			for (int i = 1; i < n; i++)
				if ((isnan(row[i]) ? -INFINITY : row[i]) > best)
				{
					best = row[i];
					want = i;
				}
			bad += greedy(row, n) != want;
		}
		TEST_CHECK(bad == 0, "greedy agrees with the plain scan on random rows: %d of 4000 differ", bad);
	}
}

/* Same seed, same draws; different seed, different draws. */
static void
test_seed(void)
{
	enum
	{
		N = 50, DRAWS = 1000
	};
	LlmSampler	s1;
	LlmSampler	s2;
	LlmSampler	s3;
	LlmSamplerParams p = params_temp(1.0f, 1234);
	float		logits[N];
	int			same12 = 0;
	int			same13 = 0;
	int			i;

	for (i = 0; i < N; i++)
		logits[i] = (float) ((i * 7) % 11) * 0.1f;
	llm_sampler_init(&s1, &p, N, NULL);
	llm_sampler_init(&s2, &p, N, NULL);
	p.seed = 1235;
	llm_sampler_init(&s3, &p, N, NULL);
	for (i = 0; i < DRAWS; i++)
	{
		int32_t		t1 = llm_sampler_sample(&s1, logits, NULL, 0);
		int32_t		t2 = llm_sampler_sample(&s2, logits, NULL, 0);
		int32_t		t3 = llm_sampler_sample(&s3, logits, NULL, 0);

		same12 += t1 == t2;
		same13 += t1 == t3;
	}
	TEST_CHECK(same12 == DRAWS, "same seed: %d of %d equal", same12, DRAWS);
	TEST_CHECK(same13 < DRAWS / 4, "different seed: %d of %d equal", same13, DRAWS);
	llm_sampler_free(&s1);
	llm_sampler_free(&s2);
	llm_sampler_free(&s3);
}

/* Empirical frequencies of the draws match softmax(logits / t). */
static void
check_frequencies(float t, const char *what)
{
	enum
	{
		N = 5, DRAWS = 200000
	};
	const float logits[N] = {0.0f, 1.0f, 2.0f, -1.0f, 0.5f};
	LlmSamplerParams p = params_temp(t, 99);
	LlmSampler	s;
	float		work[N];
	double		expect[N];
	double		sum = 0.0;
	int			count[N] = {0};
	int			i;

	for (i = 0; i < N; i++)
	{
		expect[i] = exp(logits[i] / t);
		sum += expect[i];
	}
	llm_sampler_init(&s, &p, N, NULL);
	for (i = 0; i < DRAWS; i++)
	{
		int32_t		id;

		memcpy(work, logits, sizeof(work));
		id = llm_sampler_sample(&s, work, NULL, 0);
		if (id >= 0 && id < N)
			count[id]++;
	}
	for (i = 0; i < N; i++)
	{
		double		f = (double) count[i] / DRAWS;

		TEST_CHECK(fabs(f - expect[i] / sum) < 0.01,
				   "%s: token %d frequency %.4f, softmax %.4f", what, i, f, expect[i] / sum);
	}
	llm_sampler_free(&s);
}

/* Frequencies at temperatures 1 and 2; a small temperature is greedy. */
static void
test_temperature(void)
{
	const float logits[] = {1.0f, 1.5f, 1.4f, -2.0f, 1.49f};
	LlmSamplerParams p = params_temp(1e-3f, 5);
	LlmSampler	s;
	float		work[5];
	int			argmax = 0;
	int			i;

	check_frequencies(1.0f, "temperature 1");
	check_frequencies(2.0f, "temperature 2");

	llm_sampler_init(&s, &p, 5, NULL);
	for (i = 0; i < 1000; i++)
	{
		memcpy(work, logits, sizeof(work));
		argmax += llm_sampler_sample(&s, work, NULL, 0) == 1;
	}
	TEST_CHECK(argmax == 1000, "temperature 1e-3: argmax %d of 1000", argmax);
	llm_sampler_free(&s);

	/* a tiny temperature must not overflow into NaN or pick the wrong token */
	p.temperature = 1e-30f;
	llm_sampler_init(&s, &p, 5, NULL);
	memcpy(work, logits, sizeof(work));
	TEST_CHECK(llm_sampler_sample(&s, work, NULL, 0) == 1, "temperature 1e-30");
	llm_sampler_free(&s);
}

/* Fill cand with ids 0..n-1 and the given logits, unsorted. */
static void
fill_cand(LlmCandidates *c, LlmCandidate *buf, const float *logits, int n)
{
	int			i;

	for (i = 0; i < n; i++)
	{
		buf[i].id = i;
		buf[i].logit = logits[i];
		buf[i].p = 0.0f;
	}
	c->data = buf;
	c->n = n;
	c->sorted = false;
}

/* Whether the list's ids are exactly ids, in that order. */
static bool
ids_are(const LlmCandidates *c, const int32_t *ids, int n)
{
	int			i;

	if (c->n != n)
		return false;
	for (i = 0; i < n; i++)
		if (c->data[i].id != ids[i])
			return false;
	return true;
}

/* top_k keeps exactly the k highest, ties by lower id, sorted. */
static void
test_top_k(void)
{
	const float logits[] = {1.0f, 3.0f, 3.0f, 2.0f, 3.0f, 0.0f, NAN};
	const int32_t k2[] = {1, 2};
	const int32_t k3[] = {1, 2, 4};
	const int32_t k4[] = {1, 2, 4, 3};
	const int32_t k6[] = {1, 2, 4, 3, 0, 5};
	LlmCandidate buf[7];
	LlmCandidates c;
	uint32_t	seed = 1;
	int			trial;

	fill_cand(&c, buf, logits, 7);
	llm_cand_top_k(&c, 2);
	TEST_CHECK(ids_are(&c, k2, 2) && c.sorted, "top_k 2");
	fill_cand(&c, buf, logits, 7);
	llm_cand_top_k(&c, 3);
	TEST_CHECK(ids_are(&c, k3, 3) && c.sorted, "top_k 3");
	fill_cand(&c, buf, logits, 7);
	llm_cand_top_k(&c, 4);
	TEST_CHECK(ids_are(&c, k4, 4), "top_k 4");
	fill_cand(&c, buf, logits, 7);
	llm_cand_top_k(&c, 6);
	TEST_CHECK(ids_are(&c, k6, 6), "top_k 6 drops only the NaN");
	fill_cand(&c, buf, logits, 7);
	llm_cand_top_k(&c, 0);
	TEST_CHECK(c.n == 7 && !c.sorted && c.data[0].id == 0, "top_k 0 is off");
	llm_cand_top_k(&c, 7);
	TEST_CHECK(c.n == 7 && !c.sorted, "top_k n is off");
	llm_cand_top_k(&c, 100);
	TEST_CHECK(c.n == 7, "top_k > n is off");

	/* already sorted: a truncation */
	llm_cand_softmax(&c);
	llm_cand_top_k(&c, 3);
	TEST_CHECK(ids_are(&c, k3, 3), "top_k 3 of a sorted list");

	/* random lists with many ties against a full sort */
	for (trial = 0; trial < 40; trial++)
	{
		int			n = 1 + (int) (test_rand(&seed) % 3000);
		int			k = 1 + (int) (test_rand(&seed) % (uint32_t) n);
		LlmCandidate *a = malloc(sizeof(LlmCandidate) * (size_t) n);
		LlmCandidate *ref = malloc(sizeof(LlmCandidate) * (size_t) n);
		bool		ok;
		int			i;

		for (i = 0; i < n; i++)
		{
			a[i].id = i;
			a[i].logit = (float) (test_rand(&seed) % 50) * 0.25f;
			a[i].p = 0.0f;
		}
		memcpy(ref, a, sizeof(LlmCandidate) * (size_t) n);
		qsort(ref, (size_t) n, sizeof(LlmCandidate), ref_compare);
		c.data = a;
		c.n = n;
		c.sorted = false;
		llm_cand_top_k(&c, k);
		ok = c.n == (k < n ? k : n);
		for (i = 0; ok && i < c.n; i++)
			ok = c.data[i].id == ref[i].id && c.data[i].logit == ref[i].logit;
		TEST_CHECK(ok, "random top_k %d of %d", k, n);
		free(a);
		free(ref);
	}
}

/* softmax sorts and fills normalised probabilities. */
static void
test_softmax(void)
{
	const float logits[] = {0.0f, 2.0f, 1.0f, NAN, -INFINITY};
	LlmCandidate buf[5];
	LlmCandidates c;
	double		z = 1.0 + exp(2.0) + exp(1.0);
	double		sum = 0.0;
	int			i;

	fill_cand(&c, buf, logits, 5);
	llm_cand_softmax(&c);
	TEST_CHECK(c.sorted && c.n == 5, "softmax sorts");
	TEST_CHECK(c.data[0].id == 1 && c.data[1].id == 2 && c.data[2].id == 0,
			   "softmax order %d %d %d", c.data[0].id, c.data[1].id, c.data[2].id);
	TEST_CHECK(fabs(c.data[0].p - exp(2.0) / z) < 1e-6, "p[0] %g", (double) c.data[0].p);
	TEST_CHECK(fabs(c.data[1].p - exp(1.0) / z) < 1e-6, "p[1] %g", (double) c.data[1].p);
	TEST_CHECK(fabs(c.data[2].p - 1.0 / z) < 1e-6, "p[2] %g", (double) c.data[2].p);
	TEST_CHECK(c.data[3].p == 0.0f && c.data[4].p == 0.0f, "NaN and -inf get 0");
	for (i = 0; i < 5; i++)
		sum += c.data[i].p;
	TEST_CHECK(fabs(sum - 1.0) < 1e-6, "sum %g", sum);

	/* large logits do not overflow */
	buf[0].logit = 1000.0f;
	buf[1].logit = 999.0f;
	c.n = 2;
	c.sorted = false;
	llm_cand_softmax(&c);
	TEST_CHECK(fabs(c.data[0].p - 1.0 / (1.0 + exp(-1.0))) < 1e-6, "large logits %g",
			   (double) c.data[0].p);
}

/* A sorted list with the given probabilities (logits descending to match). */
static void
fill_p(LlmCandidates *c, LlmCandidate *buf, const float *p, int n)
{
	int			i;

	for (i = 0; i < n; i++)
	{
		buf[i].id = 10 + i;
		buf[i].logit = (float) (n - i);
		buf[i].p = p[i];
	}
	c->data = buf;
	c->n = n;
	c->sorted = true;
}

/* top_p keeps the minimal prefix with mass >= top_p. */
static void
test_top_p(void)
{
	const float p5[] = {0.5f, 0.25f, 0.125f, 0.0625f, 0.0625f};
	const float pz[] = {0.5f, 0.5f, 0.0f, 0.0f};
	LlmCandidate buf[5];
	LlmCandidates c;
	uint32_t	seed = 3;
	int			trial;

	fill_p(&c, buf, p5, 5);
	llm_cand_top_p(&c, 0.75f);
	TEST_CHECK(c.n == 2, "top_p 0.75 at the exact boundary: %d", c.n);
	fill_p(&c, buf, p5, 5);
	llm_cand_top_p(&c, 0.7f);
	TEST_CHECK(c.n == 2, "top_p 0.7: %d", c.n);
	fill_p(&c, buf, p5, 5);
	llm_cand_top_p(&c, 0.76f);
	TEST_CHECK(c.n == 3, "top_p 0.76: %d", c.n);
	fill_p(&c, buf, p5, 5);
	llm_cand_top_p(&c, 0.875f);
	TEST_CHECK(c.n == 3, "top_p 0.875 exact: %d", c.n);
	fill_p(&c, buf, p5, 5);
	llm_cand_top_p(&c, 0.9375f);
	TEST_CHECK(c.n == 4, "top_p 0.9375 exact: %d", c.n);
	fill_p(&c, buf, p5, 5);
	llm_cand_top_p(&c, 0.95f);
	TEST_CHECK(c.n == 5, "top_p 0.95: %d", c.n);
	fill_p(&c, buf, p5, 5);
	llm_cand_top_p(&c, 0.5f);
	TEST_CHECK(c.n == 1, "top_p 0.5 exact: %d", c.n);
	fill_p(&c, buf, p5, 5);
	llm_cand_top_p(&c, 0.1f);
	TEST_CHECK(c.n == 1 && c.data[0].id == 10, "top_p 0.1 keeps one: %d", c.n);
	fill_p(&c, buf, p5, 5);
	llm_cand_top_p(&c, 1.0f);
	TEST_CHECK(c.n == 5, "top_p 1 keeps all: %d", c.n);

	fill_p(&c, buf, pz, 4);
	llm_cand_top_p(&c, 1.0f);
	TEST_CHECK(c.n == 4, "top_p 1 keeps every nonzero p: %d", c.n);
	fill_p(&c, buf, pz, 4);
	llm_cand_top_p(&c, 0.999f);
	TEST_CHECK(c.n == 2, "top_p 0.999 drops the zeros: %d", c.n);

	/*
	 * Unsorted, large enough to be partitioned: p 1/2, 1/4, 1/8, 1/16 and
	 * 32 ties of 1/512, shuffled; exact boundaries as above.
	 */
	{
		LlmCandidate big[36];
		const int32_t two[] = {0, 1};
		int			cut;

		for (cut = 0; cut < 5; cut++)
		{
			const float want_p[] = {0.75f, 0.9375f, 0.9375f + 1.0f / 512, 0.8f, 0.0f};
			const int	want_n[] = {2, 4, 5, 3, 1};
			int			i;

			for (i = 0; i < 36; i++)
			{
				int			id = (i * 7) % 36;	/* a fixed shuffle */

				big[i].id = id;
				big[i].logit = id < 4 ? (float) (40 - id) : 0.0f;
				big[i].p = id < 4 ? ldexpf(1.0f, -1 - id) : 1.0f / 512;
			}
			c.data = big;
			c.n = 36;
			c.sorted = false;
			llm_cand_top_p(&c, want_p[cut]);
			qsort(c.data, (size_t) c.n, sizeof(LlmCandidate), ref_compare);
			TEST_CHECK(c.n == want_n[cut], "unsorted top_p %g: kept %d, want %d",
					   (double) want_p[cut], c.n, want_n[cut]);
			if (cut == 0)
				TEST_CHECK(ids_are(&c, two, 2), "unsorted top_p 0.75 keeps ids 0, 1");
			if (cut == 2)
				TEST_CHECK(c.n == 5 && c.data[4].id == 4,
						   "the tie at the cut goes to the lowest id");
		}
	}

	/*
	 * 1024 shuffled candidates of p 1/1024 each: every top_p k/1024 keeps
	 * exactly the k best, so partitions that land on the cut are exercised.
	 */
	{
		LlmCandidate *eq = malloc(sizeof(LlmCandidate) * 1024);
		int			bad = 0;
		int			k;

		for (k = 1; k < 1024; k++)
		{
			bool		ok;
			int			i;

			for (i = 0; i < 1024; i++)
			{
				int			id = (i * 389 + k) % 1024;	/* 389 is odd: a permutation */

				eq[i].id = id;
				eq[i].logit = (float) -id;
				eq[i].p = 1.0f / 1024;
			}
			c.data = eq;
			c.n = 1024;
			c.sorted = false;
			llm_cand_top_p(&c, (float) k / 1024);
			ok = c.n == k;
			for (i = 0; ok && i < c.n; i++)
				ok = c.data[i].id < k;
			bad += !ok;
		}
		TEST_CHECK(bad == 0, "exact top_p k/1024: %d of 1023 wrong", bad);
		free(eq);
	}

	/* unsorted input: the partition agrees with a full sort */
	for (trial = 0; trial < 60; trial++)
	{
		int			n = 1 + (int) (test_rand(&seed) % 20000);
		float		scale = (float) (trial % 6) * 2.0f;
		float		top_p = (float) (1 + test_rand(&seed) % 999) / 1000.0f;
		LlmCandidate *a = malloc(sizeof(LlmCandidate) * (size_t) n);
		LlmCandidate *ref = malloc(sizeof(LlmCandidate) * (size_t) n);
		LlmCandidates r;
		float		max = -INFINITY;
		double		sum = 0.0;
		bool		ok;
		int			i;

		for (i = 0; i < n; i++)
		{
			a[i].id = i;
			a[i].logit = scale * (float) (test_rand(&seed) % 1000) / 100.0f;
			if (a[i].logit > max)
				max = a[i].logit;
		}
		for (i = 0; i < n; i++)
			sum += expf(a[i].logit - max);
		for (i = 0; i < n; i++)
			a[i].p = (float) (expf(a[i].logit - max) / sum);
		memcpy(ref, a, sizeof(LlmCandidate) * (size_t) n);
		qsort(ref, (size_t) n, sizeof(LlmCandidate), ref_compare);

		c.data = a;
		c.n = n;
		c.sorted = false;
		llm_cand_top_p(&c, top_p);
		r.data = ref;
		r.n = n;
		r.sorted = true;
		llm_cand_top_p(&r, top_p);
		ok = !c.sorted && c.n == r.n;
		qsort(c.data, (size_t) c.n, sizeof(LlmCandidate), ref_compare);
		for (i = 0; ok && i < c.n; i++)
			ok = c.data[i].id == ref[i].id;
		TEST_CHECK(ok, "unsorted top_p %g of %d (scale %g): kept %d, sorted kept %d",
				   (double) top_p, n, (double) scale, c.n, r.n);
		free(a);
		free(ref);
	}
}

/* min_p keeps exactly p >= min_p * max p, in the list's order. */
static void
test_min_p(void)
{
	const float p[] = {0.1f, 0.4f, 0.2f, 0.1999f, 0.1001f, 0.0f};
	const int32_t half[] = {1, 2};
	const int32_t quarter[] = {0, 1, 2, 3, 4};
	const int32_t one[] = {1};
	LlmCandidate buf[6];
	LlmCandidates c;
	int			i;

	for (i = 0; i < 6; i++)
	{
		buf[i].id = i;
		buf[i].logit = 0.0f;
		buf[i].p = p[i];
	}
	c.data = buf;
	c.n = 6;
	c.sorted = false;
	llm_cand_min_p(&c, 0.5f);
	TEST_CHECK(ids_are(&c, half, 2), "min_p 0.5 keeps 0.4 and 0.2 (boundary): n %d", c.n);

	for (i = 0; i < 6; i++)
		buf[i] = (LlmCandidate) {i, 0.0f, p[i]};
	c.n = 6;
	llm_cand_min_p(&c, 0.25f);
	TEST_CHECK(ids_are(&c, quarter, 5), "min_p 0.25 keeps p >= 0.1 (boundary): n %d", c.n);

	for (i = 0; i < 6; i++)
		buf[i] = (LlmCandidate) {i, 0.0f, p[i]};
	c.n = 6;
	llm_cand_min_p(&c, 1.0f);
	TEST_CHECK(ids_are(&c, one, 1), "min_p 1 keeps the maximum: n %d", c.n);

	for (i = 0; i < 6; i++)
		buf[i] = (LlmCandidate) {i, 0.0f, p[i]};
	c.n = 6;
	llm_cand_min_p(&c, 0.0f);
	TEST_CHECK(c.n == 6, "min_p 0 is off: n %d", c.n);
	llm_cand_min_p(&c, 1e-9f);
	TEST_CHECK(c.n == 5, "min_p tiny drops only the zero: n %d", c.n);
}

/* The whole chain: draws come only from the tokens that survive. */
static void
test_chain(void)
{
	/*
	 * Sorted: 2 (3.0), 8 (2.9), 4 (2.5), 0 (2.0), 6 (1.5), 1 (1.0), ...
	 * top_k 5 keeps {2, 8, 4, 0, 6}; softmax over them gives about .322,
	 * .292, .196, .119, .072; top_p 0.9 keeps {2, 8, 4, 0} (mass .929);
	 * min_p 0.4 (threshold .129) keeps {2, 8, 4}.
	 */
	const float logits[] = {2.0f, 1.0f, 3.0f, 0.5f, 2.5f, -1.0f, 1.5f, 0.0f, 2.9f, -3.0f};
	const int32_t allowed[] = {2, 8, 4};
	LlmSamplerParams p = params_temp(1.0f, 77);
	LlmSampler	s;
	float		work[10];
	int			count[10] = {0};
	int			bad = 0;
	double		z = 1.0 + exp(-0.1) + exp(-0.5);
	int			i;

	p.top_k = 5;
	p.top_p = 0.9f;
	p.min_p = 0.4f;
	llm_sampler_init(&s, &p, 10, NULL);
	for (i = 0; i < 100000; i++)
	{
		int32_t		id;

		memcpy(work, logits, sizeof(work));
		id = llm_sampler_sample(&s, work, NULL, 0);
		if (id < 0 || id >= 10 || !id_in(id, allowed, 3))
			bad++;
		else
			count[id]++;
	}
	TEST_CHECK(bad == 0, "chain returned %d filtered-out tokens", bad);
	TEST_CHECK(fabs(count[2] / 1e5 - 1.0 / z) < 0.01, "chain token 2: %g", count[2] / 1e5);
	TEST_CHECK(fabs(count[8] / 1e5 - exp(-0.1) / z) < 0.01, "chain token 8: %g", count[8] / 1e5);
	TEST_CHECK(fabs(count[4] / 1e5 - exp(-0.5) / z) < 0.01, "chain token 4: %g", count[4] / 1e5);
	llm_sampler_free(&s);

	/*
	 * Without top_k, softmax over all ten gives about .295, .267, .179,
	 * .108, .066, ...: top_p 0.9 keeps {2, 8, 4, 0, 6} (mass .915) and min_p
	 * 0.4 (threshold .118) keeps {2, 8, 4}.
	 */
	p.top_k = 0;
	llm_sampler_init(&s, &p, 10, NULL);
	bad = 0;
	for (i = 0; i < 20000; i++)
	{
		int32_t		id;

		memcpy(work, logits, sizeof(work));
		id = llm_sampler_sample(&s, work, NULL, 0);
		bad += !id_in(id, allowed, 3);
	}
	TEST_CHECK(bad == 0, "chain without top_k: %d outside", bad);
	llm_sampler_free(&s);

	/* each filter alone in the chain */
	p.top_p = 1.0f;
	p.min_p = 0.0f;
	p.top_k = 2;
	llm_sampler_init(&s, &p, 10, NULL);
	bad = 0;
	for (i = 0; i < 20000; i++)
	{
		int32_t		id;

		memcpy(work, logits, sizeof(work));
		id = llm_sampler_sample(&s, work, NULL, 0);
		bad += id != 2 && id != 8;
	}
	TEST_CHECK(bad == 0, "chain top_k 2: %d outside", bad);
	llm_sampler_free(&s);

	p.top_k = 0;
	p.min_p = 0.5f;
	llm_sampler_init(&s, &p, 10, NULL);
	bad = 0;
	for (i = 0; i < 20000; i++)
	{
		int32_t		id;

		/* threshold at half the maximum: e^-0.693 keeps 2, 8, 4 */
		memcpy(work, logits, sizeof(work));
		id = llm_sampler_sample(&s, work, NULL, 0);
		bad += !id_in(id, allowed, 3);
	}
	TEST_CHECK(bad == 0, "chain min_p 0.5: %d outside", bad);
	llm_sampler_free(&s);
}

/* A Gemma-sized vocabulary: draws fall within the reference sets. */
static void
test_large_vocab(void)
{
	enum
	{
		N = 262144
	};
	float	   *logits = malloc(sizeof(float) * N);
	float	   *work = malloc(sizeof(float) * N);
	LlmCandidate *ref = malloc(sizeof(LlmCandidate) * N);
	LlmSamplerParams p = params_temp(0.8f, 11);
	LlmSampler	s;
	uint32_t	seed = 17;
	double		sum = 0.0;
	double		cum = 0.0;
	int			n_top_p = 0;
	int			bad_k = 0;
	int			bad_p = 0;
	int			i;

	/* a peaked distribution: a few large logits over a noisy floor */
	for (i = 0; i < N; i++)
		logits[i] = (float) (test_rand(&seed) % 10000) / 1000.0f;
	for (i = 0; i < 50; i++)
		logits[test_rand(&seed) % N] += 8.0f;

	for (i = 0; i < N; i++)
	{
		ref[i].id = i;
		ref[i].logit = logits[i];
	}
	qsort(ref, N, sizeof(LlmCandidate), ref_compare);
	for (i = 0; i < N; i++)
		sum += exp((ref[i].logit - ref[0].logit) / 0.8);
	/* the top_p 0.9 prefix, with slack for rounding at the cut */
	while (n_top_p < N && cum < 0.9 + 1e-4)
		cum += exp((ref[n_top_p++].logit - ref[0].logit) / 0.8) / sum;

	p.top_k = 40;
	llm_sampler_init(&s, &p, N, NULL);
	for (i = 0; i < 100; i++)
	{
		int32_t		id;
		int			j;
		bool		found = false;

		memcpy(work, logits, sizeof(float) * N);
		id = llm_sampler_sample(&s, work, NULL, 0);
		for (j = 0; j < 40 && !found; j++)
			found = ref[j].id == id;
		bad_k += !found;
	}
	llm_sampler_free(&s);
	TEST_CHECK(bad_k == 0, "large vocab top_k 40: %d outside", bad_k);

	p.top_k = 0;
	p.top_p = 0.9f;
	llm_sampler_init(&s, &p, N, NULL);
	for (i = 0; i < 100; i++)
	{
		int32_t		id;
		int			j;
		bool		found = false;

		memcpy(work, logits, sizeof(float) * N);
		id = llm_sampler_sample(&s, work, NULL, 0);
		for (j = 0; j < n_top_p && !found; j++)
			found = ref[j].id == id;
		bad_p += !found;
	}
	llm_sampler_free(&s);
	TEST_CHECK(bad_p == 0, "large vocab top_p 0.9 (prefix %d): %d outside", n_top_p, bad_p);

	free(logits);
	free(work);
	free(ref);
}

/* The repetition penalty changes exactly the intended logits. */
static void
test_repeat_penalty(void)
{
	const float orig[] = {2.0f, -2.0f, 0.0f, 3.0f, -1.0f, 4.0f, 1.0f, 5.0f};
	const int32_t history[] = {7, 0, 5, 1, 3, 3, 1, 2, 99, -4};
	float		expect[8];
	float		logits[8];
	LlmSamplerParams p;
	LlmSampler	s;
	int32_t		id;
	bool		ok = true;
	int			i;

	llm_sampler_params_default(&p);
	p.repeat_penalty = 2.0f;
	p.repeat_last_n = 7;
	llm_sampler_init(&s, &p, 8, NULL);

	/* the last 7: {1, 3, 3, 1, 2, 99, -4}; 99 and -4 are not tokens */
	memcpy(logits, orig, sizeof(logits));
	memcpy(expect, orig, sizeof(expect));
	expect[1] = -4.0f;			/* negative: multiplied, once */
	expect[3] = 1.5f;			/* positive: divided, once */
	expect[2] = 0.0f;			/* zero stays zero */
	id = llm_sampler_sample(&s, logits, history, 10);
	for (i = 0; i < 8; i++)
		ok = ok && logits[i] == expect[i];
	TEST_CHECK(ok, "penalty changed the wrong logits");
	TEST_CHECK(id == 7, "greedy after penalty: %d", id);

	/* the window covers everything when history is shorter */
	s.params.repeat_last_n = 64;
	memcpy(logits, orig, sizeof(logits));
	id = llm_sampler_sample(&s, logits, history, 10);
	TEST_CHECK(logits[7] == 2.5f && logits[0] == 1.0f && logits[5] == 2.0f &&
			   logits[1] == -4.0f && logits[3] == 1.5f && logits[4] == -1.0f &&
			   logits[6] == 1.0f, "whole-history penalty");
	TEST_CHECK(id == 7, "greedy after whole penalty: %d", id);

	/* off: last_n 0, penalty 1, no history */
	s.params.repeat_last_n = 0;
	memcpy(logits, orig, sizeof(logits));
	llm_sampler_sample(&s, logits, history, 10);
	TEST_CHECK(memcmp(logits, orig, sizeof(logits)) == 0, "last_n 0 is off");
	s.params.repeat_last_n = 64;
	s.params.repeat_penalty = 1.0f;
	memcpy(logits, orig, sizeof(logits));
	llm_sampler_sample(&s, logits, history, 10);
	TEST_CHECK(memcmp(logits, orig, sizeof(logits)) == 0, "penalty 1 is off");
	s.params.repeat_penalty = 2.0f;
	memcpy(logits, orig, sizeof(logits));
	llm_sampler_sample(&s, logits, NULL, 0);
	TEST_CHECK(memcmp(logits, orig, sizeof(logits)) == 0, "no history");

	/* the penalty decides a greedy choice */
	s.params.repeat_penalty = 1.5f;
	s.params.repeat_last_n = 1;
	memcpy(logits, orig, sizeof(logits));
	logits[5] = 4.9f;
	TEST_CHECK(llm_sampler_sample(&s, logits, history, 1) == 5, "penalised argmax moves");

	/* a penalty below 1 rewards instead */
	s.params.repeat_penalty = 0.5f;
	s.params.repeat_last_n = 2;
	memcpy(logits, orig, sizeof(logits));
	TEST_CHECK(llm_sampler_sample(&s, logits, history, 2) == 7 &&
			   logits[0] == 4.0f && logits[7] == 10.0f, "penalty 0.5 rewards");
	llm_sampler_free(&s);
}

/* Run every sampler test. */
int
main(void)
{
	test_params();
	test_init_free();
	test_rng();
	test_greedy();
	test_seed();
	test_temperature();
	test_top_k();
	test_softmax();
	test_top_p();
	test_min_p();
	test_chain();
	test_large_vocab();
	test_repeat_penalty();
	return test_summary("sampler");
}
