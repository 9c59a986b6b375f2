/*
 * test_attention.c
 *		The fused paged attention (scalar reference and every SIMD level the
 *		processor has) against a plain two-pass softmax in double precision,
 *		on random keys and values scattered over a shuffled block table:
 *		head widths with and without SIMD tails, grouped-query heads,
 *		sliding windows, soft-capping, f32, f16 and int8 caches; H2O score
 *		accumulation (and that it never changes the output: with scores the
 *		heads run one at a time, without them a KV head's query heads run
 *		together, so this also checks that the grouped kernels give each
 *		head its own bits); caches after an eviction, whose slots hold
 *		shuffled positions.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/attention.h"
#include "cpu/cpu_features.h"
#include "cpu/backend_cpu.h"
#include "cpu/matmul.h"
#include "test.h"

/* A uniform float in [-1, 1). */
static float
frand(uint64_t *x)
{
	*x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
	return (float) ((*x >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

/* The value d of KV head h stored in slot of seq (keys or values), as a double (INT8 scaled). */
static double
stored(const LlmKvCache *kv, const LlmKvSeq *seq, int slot, bool value, int h, int d)
{
	const uint8_t *p = value ? llm_kv_v_at(kv, seq, 0, slot) : llm_kv_k_at(kv, seq, 0, slot);
	double		x = llm_kv_value(p + (size_t) h * kv->head_dim * kv->elem_size, d, kv->type);

	if (kv->type == LLM_KV_I8)
		x *= value ? llm_kv_v_scale_at(kv, seq, 0, slot)[h] : llm_kv_k_scale_at(kv, seq, 0, slot)[h];
	return x;
}

static const char *const type_names[] = {"f32", "f16", "int8"};

/* Positions per KV block in check_case's caches (a tile is at most one block). */
static int block_size = 8;

/*
 * Run one configuration through every kernel set and compare with the
 * double reference.  With scores, the sequence keeps H2O scores: outputs
 * must be bit-identical to a run without, and the scores equal the summed
 * reference probabilities.  With evicted, the sequence has dropped
 * positions: each KV head's slots hold a different shuffled subset of the
 * earlier positions (slot_pos), so sliding windows mask by position.
 */
static void
check_case(LlmBackend *be, int hd, int n_heads, int n_kv_heads, int n_pos, int window, float softcap,
		   LlmKvType type, bool scores, bool evicted, uint64_t seed)
{
	const LlmAttnKernels *sets[] = {&llm_attn_kernels_ref, &llm_attn_kernels_avx2, &llm_attn_kernels_avx512};
	LlmCpuIsa	isas[] = {LLM_CPU_ISA_SCALAR, LLM_CPU_ISA_AVX2, LLM_CPU_ISA_AVX512};
	int			bs = block_size;
	int			kv_dim = n_kv_heads * hd;
	int			n_q = 3;		/* query tokens: the last three slots */
	int			n_slots = evicted ? n_pos * 2 / 3 : n_pos;	/* evicted: a third of the positions dropped */
	int			n_evicted = n_pos - n_slots;
	LlmKvParams kp = {
		.n_layers = 1,.n_kv_heads = n_kv_heads,.head_dim = hd,.block_size = bs,
		.n_blocks = (n_pos + bs - 1) / bs + 3,.type = type,.slot_info = scores || evicted,.scores = scores,
	};
	LlmKvCache	kv;
	LlmKvSeq	seq = {0};
	LlmError	err;
	size_t		n_out = (size_t) n_q * n_heads * hd;
	float	   *q = malloc(n_out * sizeof(float));
	float	   *out = malloc(n_out * sizeof(float));
	float	   *plain = malloc(n_out * sizeof(float));
	double	   *ref = malloc(n_out * sizeof(double));
	double	   *s = malloc((size_t) n_pos * sizeof(double));
	double	   *ref_score = calloc((size_t) n_pos * n_kv_heads, sizeof(double));
	int32_t		pos[3];
	LlmKvSeq   *seqs[3] = {&seq, &seq, &seq};
	float		krow[4096];
	float		vrow[4096];
	LlmAttnArgs a;

	TEST_CHECK(llm_kv_init(&kv, &kp, &err) == LLM_OK, "kv: %s", err.msg);
	/* take blocks in a scrambled order: the table is not contiguous */
	llm_kv_seq_reserve(&kv, &seq, 3 * bs, &err);
	{
		LlmKvSeq	spare = {0};

		llm_kv_seq_reserve(&kv, &spare, 2 * bs, &err);
		llm_kv_seq_reserve(&kv, &seq, n_slots, &err);
		llm_kv_seq_release(&kv, &spare);
		llm_kv_seq_free(&spare);
	}
	/* random keys and values in every slot, stored through the kv_store op */
	for (int j = 0; j < n_slots; j++)
	{
		int32_t		p = j + n_evicted;
		LlmKvSeq   *one = &seq;

		for (int d = 0; d < kv_dim; d++)
		{
			krow[d] = frand(&seed) * 2.0f;
			vrow[d] = frand(&seed) * 2.0f;
		}
		seq.n_evicted = n_evicted;
		llm_cpu_kv_store(be, &kv, 0, &one, &p, krow, vrow, 1);
	}
	if (evicted)
	{
		/* each head keeps its own subset of positions 0 .. first query - 1, shuffled */
		for (int h = 0; h < n_kv_heads; h++)
		{
			int			n_old = n_slots - n_q;
			int32_t		perm[n_pos];

			for (int p = 0; p < n_pos - n_q; p++)
				perm[p] = p;
			for (int p = n_pos - n_q - 1; p > 0; p--)
			{
				int			r = (int) ((frand(&seed) + 1.0f) * 0.5f * (p + 1)) % (p + 1);
				int32_t		t = perm[p];

				perm[p] = perm[r];
				perm[r] = t;
			}
			for (int j = 0; j < n_old; j++)
				seq.slot_pos[llm_kv_info_index(&kv, j, 0, h)] = perm[j];
		}
	}
	for (size_t i = 0; i < n_out; i++)
		q[i] = frand(&seed);
	for (int i = 0; i < n_q; i++)
		pos[i] = n_pos - n_q + i;

	/* reference: two passes over the visible slots, double precision */
	for (int i = 0; i < n_q; i++)
		for (int h = 0; h < n_heads; h++)
		{
			int			kvh = h / (n_heads / n_kv_heads);
			int			hi = pos[i] - n_evicted;
			int			win_lo = window > 0 ? pos[i] - window + 1 : 0;
			double		max = -INFINITY,
						sum = 0.0;
			double	   *o = ref + ((size_t) i * n_heads + h) * hd;

			for (int j = 0; j <= hi; j++)
			{
				int			p = kp.slot_info ? seq.slot_pos[llm_kv_info_index(&kv, j, 0, kvh)] : j;
				double		dot = 0.0;

				s[j] = -INFINITY;
				if (p < win_lo)
					continue;
				for (int d = 0; d < hd; d++)
					dot += (double) q[((size_t) i * n_heads + h) * hd + d] * stored(&kv, &seq, j, false, kvh, d);
				dot /= sqrt((double) hd);
				if (softcap > 0.0f)
					dot = softcap * tanh(dot / softcap);
				s[j] = dot;
				max = dot > max ? dot : max;
			}
			memset(o, 0, (size_t) hd * sizeof(double));
			for (int j = 0; j <= hi; j++)
			{
				double		w = exp(s[j] - max);

				sum += w;
				for (int d = 0; d < hd; d++)
					o[d] += w * stored(&kv, &seq, j, true, kvh, d);
			}
			for (int d = 0; d < hd; d++)
				o[d] /= sum;
			for (int j = 0; j <= hi; j++)
				ref_score[(size_t) j * n_kv_heads + kvh] += exp(s[j] - max) / sum;
		}

	a.n = n_q;
	a.q = q;
	a.out = out;
	a.seq = seqs;
	a.pos = pos;
	a.n_heads = n_heads;
	a.n_kv_heads = n_kv_heads;
	a.head_dim = hd;
	a.scale = 1.0f / sqrtf((float) hd);
	a.softcap = softcap;
	a.window = window;
	for (int k = 0; k < 3; k++)
	{
		double		max_err = 0.0;
		double		score_err = 0.0;
		float	   *saved_score = seq.score;

		if (sets[k]->name == NULL || !llm_cpu_isa_supported(isas[k]))
			continue;
		if (scores)
		{
			/* the same kernels without scores, for the bit-identity check */
			seq.score = NULL;
			a.out = plain;
			llm_cpu_attention(be, &kv, 0, &a, sets[k]);
			seq.score = saved_score;
			a.out = out;
			for (int j = 0; j < n_slots; j++)
				for (int h = 0; h < n_kv_heads; h++)
					seq.score[llm_kv_info_index(&kv, j, 0, h)] = 0.0f;
		}
		for (size_t i = 0; i < n_out; i++)
			out[i] = NAN;		/* poison: every output must be written */
		llm_cpu_attention(be, &kv, 0, &a, sets[k]);
		for (size_t i = 0; i < n_out; i++)
		{
			double		e = fabs((double) out[i] - ref[i]);

			if (!(e <= max_err))
				max_err = isnan(e) ? INFINITY : e;
		}
		/* outputs are convex combinations of values in [-2, 2]: an absolute bound */
		TEST_CHECK(max_err < 2e-5, "%s: hd %d, heads %d/%d, %d positions, window %d, softcap %g, %s%s%s: max error %g",
				   sets[k]->name, hd, n_heads, n_kv_heads, n_pos, window, softcap, type_names[type],
				   scores ? ", scores" : "", evicted ? ", evicted" : "", max_err);
		if (sets[k]->tile != NULL && !scores)
		{
			/* the fused tile against the same level's separate steps: the same bits */
			LlmAttnKernels steps = *sets[k];

			steps.tile = NULL;
			a.out = plain;
			llm_cpu_attention(be, &kv, 0, &a, &steps);
			a.out = out;
			TEST_CHECK(memcmp(out, plain, n_out * sizeof(float)) == 0,
					   "%s: the fused tile differs from the steps (hd %d, heads %d/%d, window %d, softcap %g, %s%s)",
					   sets[k]->name, hd, n_heads, n_kv_heads, window, softcap, type_names[type],
					   evicted ? ", evicted" : "");
		}
		if (!scores)
			continue;
		TEST_CHECK(memcmp(out, plain, n_out * sizeof(float)) == 0,
				   "%s: keeping H2O scores changed the attention output (hd %d)", sets[k]->name, hd);
		for (int j = 0; j < n_slots; j++)
			for (int h = 0; h < n_kv_heads; h++)
			{
				double		e = fabs(seq.score[llm_kv_info_index(&kv, j, 0, h)] - ref_score[(size_t) j * n_kv_heads + h]);

				if (!(e <= score_err))
					score_err = isnan(e) ? INFINITY : e;
			}
		/* each score sums at most n_q * group probabilities */
		TEST_CHECK(score_err < 1e-5, "%s: H2O scores off by %g (hd %d, heads %d/%d, window %d%s)",
				   sets[k]->name, score_err, hd, n_heads, n_kv_heads, window, evicted ? ", evicted" : "");
	}
	llm_kv_seq_release(&kv, &seq);
	llm_kv_seq_free(&seq);
	llm_kv_free(&kv);
	free(q);
	free(out);
	free(plain);
	free(ref);
	free(s);
	free(ref_score);
}

/*
 * Every level's kv_store into an f16 cache against llm_fp32_to_fp16, bit
 * for bit: zeros, the largest half and the first value rounding to
 * infinity, infinities, NaNs with payloads, halfway cases, subnormals,
 * and random values over the whole exponent range; 67 values a head (an
 * F16C tail of 3).
 */
static void
check_f16_store(LlmBackend *be)
{
	enum
	{
		HD = 67
	};
	static const uint32_t special[] = {
		0x00000000, 0x80000000, 0x477fe000, 0x477ff000, 0x477fefff, 0x7f800000, 0xff800000, 0x7fc00000,
		0xffc00001, 0x7f800001, 0x3f801000, 0x3f803000, 0x33800000, 0x33000000, 0x33000001, 0x387fc000,
		0x38800000, 0xb87fe000, 0x3f800000, 0x00000001,
	};
	LlmKvParams kp = {.n_layers = 1,.n_kv_heads = 1,.head_dim = HD,.block_size = 4,.n_blocks = 2,.type = LLM_KV_F16};
	uint64_t	seed = 99;

	for (int isa = 0; isa < LLM_CPU_ISA_COUNT; isa++)
	{
		const LlmBackendOps *ops = llm_cpu_ops_for_isa((LlmCpuIsa) isa);
		LlmKvCache	kv;
		LlmKvSeq	seq = {0};
		LlmKvSeq   *one = &seq;
		LlmError	err;
		int			bad = 0;

		if (ops == NULL)
			continue;
		TEST_CHECK(llm_kv_init(&kv, &kp, &err) == LLM_OK, "kv: %s", err.msg);
		llm_kv_seq_reserve(&kv, &seq, 4, &err);
		for (int32_t p = 0; p < 4; p++)
		{
			float		k[HD];
			float		v[HD];
			const uint16_t *kh;
			const uint16_t *vh;

			for (int d = 0; d < HD; d++)
			{
				uint32_t	bits;

				seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
				bits = p == 0 && d < (int) (sizeof(special) / sizeof(special[0])) ? special[d] : (uint32_t) seed;
				memcpy(&k[d], &bits, sizeof(float));
				v[d] = frand(&seed) * (float) (1 << (d % 20)) / 65536.0f;
			}
			ops->kv_store(be, &kv, 0, &one, &p, k, v, 1);
			kh = llm_kv_k_at(&kv, &seq, 0, p);
			vh = llm_kv_v_at(&kv, &seq, 0, p);
			for (int d = 0; d < HD; d++)
				bad += kh[d] != llm_fp32_to_fp16(k[d]) || vh[d] != llm_fp32_to_fp16(v[d]);
		}
		TEST_CHECK(bad == 0, "%s: %d f16 values stored with other bits than llm_fp32_to_fp16's", ops->name, bad);
		llm_kv_seq_release(&kv, &seq);
		llm_kv_seq_free(&seq);
		llm_kv_free(&kv);
	}
}

int
main(void)
{
	LlmBackend *be;
	LlmError	err;
	int			hds[] = {8, 16, 40, 64, 80, 128, 256};
	uint64_t	seed = 7;

	if (llm_backend_cpu_new(2, &be, &err) != LLM_OK)
	{
		fprintf(stderr, "backend: %s\n", err.msg);
		return 1;
	}
	for (size_t h = 0; h < sizeof(hds) / sizeof(hds[0]); h++)
		for (int type = 0; type < 3; type++)
		{
			check_case(be, hds[h], 4, 4, 37, 0, 0.0f, type, false, false, seed++);
			check_case(be, hds[h], 8, 2, 100, 0, 0.0f, type, false, false, seed++);
			check_case(be, hds[h], 4, 1, 70, 16, 0.0f, type, false, false, seed++);
			check_case(be, hds[h], 2, 1, 5, 0, 30.0f, type, false, false, seed++);
			/* H2O scores, and a cache after eviction (slots no longer in position order) */
			check_case(be, hds[h], 8, 2, 100, 0, 0.0f, type, true, false, seed++);
			check_case(be, hds[h], 4, 1, 70, 16, 0.0f, type, true, false, seed++);
			check_case(be, hds[h], 8, 2, 90, 0, 0.0f, type, true, true, seed++);
			check_case(be, hds[h], 4, 2, 90, 20, 0.0f, type, true, true, seed++);
			check_case(be, hds[h], 4, 2, 60, 12, 50.0f, type, false, true, seed++);
			/* groups of 3 and of 6 query heads (taken 4 + 2): with scores one head at a time, the same bits */
			check_case(be, hds[h], 6, 2, 90, 0, 0.0f, type, true, false, seed++);
			check_case(be, hds[h], 12, 2, 50, 16, 0.0f, type, true, false, seed++);
		}
	/* tiles of up to 64 slots (several 16-slot chunks and their tails) */
	for (size_t h = 0; h < sizeof(hds) / sizeof(hds[0]); h++)
		for (int type = 0; type < 3; type++)
			for (block_size = 24; block_size <= 64; block_size += 40)
			{
				check_case(be, hds[h], 4, 4, 150, 0, 0.0f, type, false, false, seed++);
				check_case(be, hds[h], 8, 2, 130, 40, 0.0f, type, false, false, seed++);
				check_case(be, hds[h], 4, 2, 140, 50, 30.0f, type, false, true, seed++);
				check_case(be, hds[h], 6, 2, 100, 0, 0.0f, type, true, false, seed++);
			}
	check_f16_store(be);
	llm_backend_free(be);
	return test_summary("attention");
}
