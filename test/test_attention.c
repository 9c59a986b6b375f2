/*
 * test_attention.c
 *		The fused paged attention (scalar reference and every SIMD level the
 *		processor has) against a plain two-pass softmax in double precision,
 *		on random keys and values scattered over a shuffled block table:
 *		head widths with and without SIMD tails, grouped-query heads,
 *		sliding windows, soft-capping, f32 and f16 caches.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/attention.h"
#include "cpu/cpu_features.h"
#include "test.h"

/* A uniform float in [-1, 1). */
static float
frand(uint64_t *x)
{
	*x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
	return (float) ((*x >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

/* The stored value at p as a double. */
static double
stored(const void *p, int i, LlmKvType type)
{
	return type == LLM_KV_F32 ? ((const float *) p)[i] : llm_fp16_to_fp32(((const uint16_t *) p)[i]);
}

/* Run one configuration through every kernel set and compare with the double reference. */
static void
check_case(LlmBackend *be, int hd, int n_heads, int n_kv_heads, int n_pos, int window, float softcap,
		   LlmKvType type, uint64_t seed)
{
	const LlmAttnKernels *sets[] = {&llm_attn_kernels_ref, &llm_attn_kernels_avx2, &llm_attn_kernels_avx512};
	LlmCpuIsa	isas[] = {LLM_CPU_ISA_SCALAR, LLM_CPU_ISA_AVX2, LLM_CPU_ISA_AVX512};
	int			bs = 8;
	int			kv_dim = n_kv_heads * hd;
	int			n_blocks = (n_pos + bs - 1) / bs + 3;
	int			n_q = 3;		/* query tokens: the last three positions */
	LlmKvCache	kv;
	LlmKvSeq	seq = {0};
	LlmError	err;
	float	   *q = malloc((size_t) n_q * n_heads * hd * sizeof(float));
	float	   *out = malloc((size_t) n_q * n_heads * hd * sizeof(float));
	double	   *ref = malloc((size_t) n_q * n_heads * hd * sizeof(double));
	double	   *s = malloc((size_t) n_pos * sizeof(double));
	int32_t		pos[3];
	LlmKvSeq   *seqs[3] = {&seq, &seq, &seq};
	float		row[4096];
	LlmAttnArgs a;

	TEST_CHECK(llm_kv_init(&kv, 1, kv_dim, bs, n_blocks, type, false, &err) == LLM_OK, "kv: %s", err.msg);
	/* take blocks in a scrambled order: the table is not contiguous */
	llm_kv_seq_reserve(&kv, &seq, 3 * bs, &err);
	{
		LlmKvSeq	spare = {0};

		llm_kv_seq_reserve(&kv, &spare, 2 * bs, &err);
		llm_kv_seq_reserve(&kv, &seq, n_pos, &err);
		llm_kv_seq_release(&kv, &spare);
		llm_kv_seq_free(&spare);
	}
	for (int p = 0; p < n_pos; p++)
	{
		void	   *kp = llm_kv_k_at(&kv, &seq, 0, p);
		void	   *vp = llm_kv_v_at(&kv, &seq, 0, p);

		for (int which = 0; which < 2; which++)
		{
			for (int d = 0; d < kv_dim; d++)
				row[d] = frand(&seed) * 2.0f;
			if (type == LLM_KV_F32)
				memcpy(which ? vp : kp, row, (size_t) kv_dim * sizeof(float));
			else
				for (int d = 0; d < kv_dim; d++)
					((uint16_t *) (which ? vp : kp))[d] = llm_fp32_to_fp16(row[d]);
		}
	}
	for (int i = 0; i < n_q * n_heads * hd; i++)
		q[i] = frand(&seed);
	for (int i = 0; i < n_q; i++)
		pos[i] = n_pos - n_q + i;

	/* reference: two passes, double precision */
	for (int i = 0; i < n_q; i++)
		for (int h = 0; h < n_heads; h++)
		{
			int			kvh = h / (n_heads / n_kv_heads);
			int			lo = window > 0 && pos[i] - window + 1 > 0 ? pos[i] - window + 1 : 0;
			double		max = -INFINITY,
						sum = 0.0;
			double	   *o = ref + ((size_t) i * n_heads + h) * hd;

			for (int p = lo; p <= pos[i]; p++)
			{
				const uint8_t *kp = llm_kv_k_at(&kv, &seq, 0, p);
				double		dot = 0.0;

				for (int d = 0; d < hd; d++)
					dot += (double) q[((size_t) i * n_heads + h) * hd + d] * stored(kp + (size_t) kvh * hd * kv.elem_size, d, type);
				dot /= sqrt((double) hd);
				if (softcap > 0.0f)
					dot = softcap * tanh(dot / softcap);
				s[p] = dot;
				max = dot > max ? dot : max;
			}
			memset(o, 0, (size_t) hd * sizeof(double));
			for (int p = lo; p <= pos[i]; p++)
			{
				const uint8_t *vp = llm_kv_v_at(&kv, &seq, 0, p);
				double		w = exp(s[p] - max);

				sum += w;
				for (int d = 0; d < hd; d++)
					o[d] += w * stored(vp + (size_t) kvh * hd * kv.elem_size, d, type);
			}
			for (int d = 0; d < hd; d++)
				o[d] /= sum;
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

		if (sets[k]->name == NULL || !llm_cpu_isa_supported(isas[k]))
			continue;
		for (int i = 0; i < n_q * n_heads * hd; i++)
			out[i] = NAN;		/* poison: every output must be written */
		llm_cpu_attention(be, &kv, 0, &a, sets[k]);
		for (int i = 0; i < n_q * n_heads * hd; i++)
		{
			double		e = fabs((double) out[i] - ref[i]);

			if (!(e <= max_err))
				max_err = isnan(e) ? INFINITY : e;
		}
		/* outputs are convex combinations of values in [-2, 2]: an absolute bound */
		TEST_CHECK(max_err < 2e-5, "%s: hd %d, heads %d/%d, %d positions, window %d, softcap %g, %s: max error %g",
				   sets[k]->name, hd, n_heads, n_kv_heads, n_pos, window, softcap,
				   type == LLM_KV_F32 ? "f32" : "f16", max_err);
	}
	llm_kv_seq_release(&kv, &seq);
	llm_kv_seq_free(&seq);
	llm_kv_free(&kv);
	free(q);
	free(out);
	free(ref);
	free(s);
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
		for (int type = 0; type < 2; type++)
		{
			check_case(be, hds[h], 4, 4, 37, 0, 0.0f, type, seed++);
			check_case(be, hds[h], 8, 2, 100, 0, 0.0f, type, seed++);
			check_case(be, hds[h], 4, 1, 70, 16, 0.0f, type, seed++);
			check_case(be, hds[h], 2, 1, 5, 0, 30.0f, type, seed++);
		}
	llm_backend_free(be);
	return test_summary("attention");
}
