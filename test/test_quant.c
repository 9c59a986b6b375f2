/*
 * test_quant.c
 *		Tests of the scalar reference kernels for weight types (quant.h).
 *
 * 1. Golden vectors: every block type decodes shared/golden/quant/TYPE.blocks
 *    to TYPE.f32 bit for bit.
 * 2. Hand-built Q4_K, Q6_K, Q8_0 and Q4_0 blocks decode to values worked out
 *    by hand in the comments.
 * 3. fp16 and bf16 conversions: exhaustive round trips, rounding to nearest
 *    even at halfway cases, overflow, subnormals.
 * 4. Dot products of random rows against a float64 oracle that decodes each
 *    value independently, by index (ref_value), within a normalised error.
 * 5. Quantizers: error bounds, zero blocks, and the exact bytes ggml's
 *    algorithm gives for hand-chosen blocks.
 * 6. SPARSE24: its GGUF id, the pruning (two largest of each four, a 2:4
 *    row's own pattern kept, Q8_0's integers and scales kept), and the
 *    decoding of a mask with too many bits.
 *
 * Run from the repository root (the golden files are found through
 * test_shared_dir()).
 */
#include "quant.h"
#include "quant_blocks.h"
#include "test.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every supported type, for the loops below. */
static const LlmType all_types[] = {
	LLM_TYPE_F32, LLM_TYPE_F16, LLM_TYPE_BF16,
	LLM_TYPE_Q4_0, LLM_TYPE_Q4_1, LLM_TYPE_Q5_0, LLM_TYPE_Q5_1, LLM_TYPE_Q8_0,
	LLM_TYPE_Q2_K, LLM_TYPE_Q3_K, LLM_TYPE_Q4_K, LLM_TYPE_Q5_K, LLM_TYPE_Q6_K,
};
#define N_TYPES ((int) (sizeof(all_types) / sizeof(all_types[0])))

/* The block types that have golden vectors. */
static const LlmType golden_types[] = {
	LLM_TYPE_Q8_0, LLM_TYPE_Q4_0, LLM_TYPE_Q4_1, LLM_TYPE_Q5_0, LLM_TYPE_Q5_1,
	LLM_TYPE_Q2_K, LLM_TYPE_Q3_K, LLM_TYPE_Q4_K, LLM_TYPE_Q5_K, LLM_TYPE_Q6_K,
};
#define N_GOLDEN ((int) (sizeof(golden_types) / sizeof(golden_types[0])))

/* Read a whole file into a malloc'd buffer; NULL when it cannot be read. */
static uint8_t *
read_file(const char *path, size_t *len)
{
	FILE	   *f = fopen(path, "rb");
	uint8_t    *buf;
	long		size;

	if (f == NULL)
		return NULL;
	if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
	{
		fclose(f);
		return NULL;
	}
	buf = malloc(size > 0 ? (size_t) size : 1);
	if (buf != NULL && fread(buf, 1, (size_t) size, f) != (size_t) size)
	{
		free(buf);
		buf = NULL;
	}
	fclose(f);
	*len = (size_t) size;
	return buf;
}

/* The float bits of f, for bit-exact comparisons and messages. */
static uint32_t
float_bits(float f)
{
	uint32_t	u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

/* The float with bits u. */
static float
bits_float(uint32_t u)
{
	float		f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/* An fp16 field of a block, as a double. */
static double
half_at(const uint8_t *p)
{
	return llm_fp16_to_fp32((uint16_t) (p[0] | (p[1] << 8)));
}

/* Store the fp16 of v in a block field. */
static void
put_half(uint8_t *p, float v)
{
	uint16_t	h = llm_fp32_to_fp16(v);

	p[0] = (uint8_t) (h & 0xff);
	p[1] = (uint8_t) (h >> 8);
}

/*
 * Value i of a row of type, in double: an oracle independent of quant_ref.c's
 * loops, computing each value's position from its index as ggml-common.h
 * describes the layouts (byte offsets spelled out, not taken from structs).
 */
static double
ref_value(LlmType type, const uint8_t *row, int64_t i)
{
	const LlmTypeTraits *t = llm_type_traits(type);
	const uint8_t *b = row + (i / t->block_size) * t->type_size;
	int			k = (int) (i % t->block_size);

	switch (type)
	{
		case LLM_TYPE_F32:
			{
				float		f;

				memcpy(&f, b, sizeof(f));
				return f;
			}
		case LLM_TYPE_F16:
			return half_at(b);
		case LLM_TYPE_BF16:
			return llm_bf16_to_fp32((uint16_t) (b[0] | (b[1] << 8)));
		case LLM_TYPE_Q4_0:
			{
				int			byte = b[2 + k % 16];
				int			q = k < 16 ? (byte & 15) : (byte >> 4);

				return half_at(b) * (q - 8);
			}
		case LLM_TYPE_Q4_1:
			{
				int			byte = b[4 + k % 16];
				int			q = k < 16 ? (byte & 15) : (byte >> 4);

				return half_at(b) * q + half_at(b + 2);
			}
		case LLM_TYPE_Q5_0:
		case LLM_TYPE_Q5_1:
			{
				int			has_min = type == LLM_TYPE_Q5_1;
				const uint8_t *qh = b + (has_min ? 4 : 2);
				int			byte = qh[4 + k % 16];
				int			q = k < 16 ? (byte & 15) : (byte >> 4);

				q |= ((qh[k / 8] >> (k % 8)) & 1) << 4;
				if (has_min)
					return half_at(b) * q + half_at(b + 2);
				return half_at(b) * (q - 16);
			}
		case LLM_TYPE_Q8_0:
			return half_at(b) * (int8_t) b[2 + k];
		case LLM_TYPE_Q2_K:
			{
				/* scales[16] at 0, qs[64] at 16, d at 80, dmin at 82 */
				int			h = k / 128,
							j = (k % 128) / 32,
							s = (k % 32) / 16,
							l = k % 16;
				int			sc = b[8 * h + 2 * j + s];
				int			q = (b[16 + 32 * h + 16 * s + l] >> (2 * j)) & 3;

				return half_at(b + 80) * (sc & 15) * q - half_at(b + 82) * (sc >> 4);
			}
		case LLM_TYPE_Q3_K:
			{
				/* hmask[32] at 0, qs[64] at 32, scales[12] at 96, d at 108 */
				int			h = k / 128,
							j = (k % 128) / 32,
							s = (k % 32) / 16,
							l = k % 16;
				int			sub = 8 * h + 2 * j + s;
				const uint8_t *sb = b + 96;
				int			lo4 = sub < 8 ? (sb[sub] & 15) : (sb[sub - 8] >> 4);
				int			hi2 = (sb[8 + sub % 4] >> (2 * (sub / 4))) & 3;
				int			q = (b[32 + 32 * h + 16 * s + l] >> (2 * j)) & 3;
				int			hbit = (b[16 * s + l] >> (4 * h + j)) & 1;

				return half_at(b + 108) * ((lo4 | (hi2 << 4)) - 32) * (q - (hbit ? 0 : 4));
			}
		case LLM_TYPE_Q4_K:
		case LLM_TYPE_Q5_K:
			{
				/* d at 0, dmin at 2, scales[12] at 4, (Q5_K: qh[32] at 16,) qs[128] after */
				int			five = type == LLM_TYPE_Q5_K;
				const uint8_t *sb = b + 4;
				const uint8_t *qs = b + (five ? 48 : 16);
				int			c = k / 64,
							r = k % 64,
							l = k % 32;
				int			sub = 2 * c + r / 32;
				int			sc,
							m,
							q;

				if (sub < 4)
				{
					sc = sb[sub] & 63;
					m = sb[sub + 4] & 63;
				}
				else
				{
					sc = (sb[sub + 4] & 15) | ((sb[sub - 4] >> 6) << 4);
					m = (sb[sub + 4] >> 4) | ((sb[sub] >> 6) << 4);
				}
				q = r < 32 ? (qs[32 * c + l] & 15) : (qs[32 * c + l] >> 4);
				if (five)
					q += ((b[16 + l] >> sub) & 1) * 16;
				return half_at(b) * sc * q - half_at(b + 2) * m;
			}
		case LLM_TYPE_Q6_K:
			{
				/* ql[128] at 0, qh[64] at 128, scales[16] at 192, d at 208 */
				int			h = k / 128,
							g = (k % 128) / 32,
							l = k % 32;
				int			lb = b[64 * h + l + 32 * (g & 1)];
				int			q = g < 2 ? (lb & 15) : (lb >> 4);

				q |= ((b[128 + 32 * h + l] >> (2 * g)) & 3) << 4;
				return half_at(b + 208) * (int8_t) b[192 + 8 * h + 2 * g + l / 16] * (q - 32);
			}
		default:
			return 0.0;
	}
}

/* Struct sizes agree with the traits; unsupported types are refused. */
static void
test_traits(void)
{
	static const struct
	{
		LlmType		type;
		size_t		size;
	}			sizes[] = {
		{LLM_TYPE_Q4_0, sizeof(LlmBlockQ4_0)}, {LLM_TYPE_Q4_1, sizeof(LlmBlockQ4_1)},
		{LLM_TYPE_Q5_0, sizeof(LlmBlockQ5_0)}, {LLM_TYPE_Q5_1, sizeof(LlmBlockQ5_1)},
		{LLM_TYPE_Q8_0, sizeof(LlmBlockQ8_0)}, {LLM_TYPE_Q2_K, sizeof(LlmBlockQ2_K)},
		{LLM_TYPE_Q3_K, sizeof(LlmBlockQ3_K)}, {LLM_TYPE_Q4_K, sizeof(LlmBlockQ4_K)},
		{LLM_TYPE_Q5_K, sizeof(LlmBlockQ5_K)}, {LLM_TYPE_Q6_K, sizeof(LlmBlockQ6_K)},
	};
	float		out[LLM_QK];
	uint8_t		junk[64] = {0};

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
	{
		const LlmTypeTraits *t = llm_type_traits(sizes[i].type);

		TEST_CHECK(t != NULL && (size_t) t->type_size == sizes[i].size,
				   "type %d: struct is %zu bytes", (int) sizes[i].type, sizes[i].size);
	}
	for (int i = 0; i < N_TYPES; i++)
	{
		LlmType		ty = all_types[i];
		bool		want = ty == LLM_TYPE_F32 || ty == LLM_TYPE_F16 || ty == LLM_TYPE_BF16 ||
			ty == LLM_TYPE_Q8_0 || ty == LLM_TYPE_Q4_0;

		TEST_CHECK(llm_type_can_quantize(ty) == want, "can_quantize(%s)", llm_type_traits(ty)->name);
	}
	TEST_CHECK(!llm_type_can_quantize((LlmType) 4), "can_quantize(4)");

	/* type 4 (ggml's retired Q4_2) is unknown: zeros and a zero dot, no crash */
	for (int i = 0; i < LLM_QK; i++)
		out[i] = 1.0f;
	llm_dequant_row((LlmType) 4, junk, out, LLM_QK);
	TEST_CHECK(out[0] == 0.0f && out[LLM_QK - 1] == 0.0f, "unknown type decodes as zeros");
	TEST_CHECK(llm_dot_row_ref((LlmType) 4, junk, out, LLM_QK) == 0.0f, "unknown type dots to zero");
}

/* Test 1: every golden TYPE.blocks decodes to TYPE.f32 bit for bit. */
static void
test_golden(void)
{
	for (int g = 0; g < N_GOLDEN; g++)
	{
		LlmType		type = golden_types[g];
		const LlmTypeTraits *t = llm_type_traits(type);
		char		path[1024];
		uint8_t    *blocks;
		uint8_t    *want;
		size_t		nblocks_bytes = 0;
		size_t		nwant_bytes = 0;
		int64_t		n;
		float	   *got;

		snprintf(path, sizeof(path), "%s/golden/quant/%s.blocks", test_shared_dir(), t->name);
		blocks = read_file(path, &nblocks_bytes);
		snprintf(path, sizeof(path), "%s/golden/quant/%s.f32", test_shared_dir(), t->name);
		want = read_file(path, &nwant_bytes);
		TEST_CHECK(blocks != NULL && want != NULL, "%s: golden files readable", t->name);
		if (blocks == NULL || want == NULL)
		{
			free(blocks);
			free(want);
			continue;
		}
		n = (int64_t) (nblocks_bytes / t->type_size) * t->block_size;
		TEST_CHECK(nblocks_bytes == 64 * (size_t) t->type_size && nwant_bytes == (size_t) n * 4,
				   "%s: golden sizes %zu, %zu", t->name, nblocks_bytes, nwant_bytes);
		got = malloc((size_t) n * sizeof(float));
		llm_dequant_row(type, blocks, got, n);
		if ((size_t) n * 4 == nwant_bytes)
		{
			int64_t		bad = -1;

			for (int64_t i = 0; i < n && bad < 0; i++)
				if (memcmp(&got[i], want + 4 * i, 4) != 0)
					bad = i;
			if (bad >= 0)
			{
				float		w;

				memcpy(&w, want + 4 * bad, 4);
				TEST_CHECK(bad < 0, "%s: value %lld is %.9g (0x%08x), golden %.9g (0x%08x)",
						   t->name, (long long) bad, got[bad], float_bits(got[bad]), w, float_bits(w));
			}
			else
				TEST_CHECK(memcmp(got, want, nwant_bytes) == 0, "%s: bit-exact", t->name);
		}
		/* the index-based oracle agrees with the golden values too */
		{
			double		worst = 0.0;

			for (int64_t i = 0; i < n; i++)
			{
				float		w;
				double		e;

				memcpy(&w, want + 4 * i, 4);
				e = fabs(ref_value(type, blocks, i) - w) / (fabs(w) + 1e-30);
				if (e > worst && fabs(w) > 1e-3)
					worst = e;
			}
			TEST_CHECK(worst < 1e-5, "%s: oracle vs golden relative error %g", t->name, worst);
		}
		free(got);
		free(blocks);
		free(want);
	}
}

/* Test 2a: a Q4_K block built byte by byte. */
static void
test_hand_q4_k(void)
{
	LlmBlockQ4_K b;
	float		y[LLM_QK_K];

	/*
	 * d = 1.0 (fp16 0x3c00), dmin = 0.5 (0x3800).  Sub-block scales and mins:
	 *   sc = {1, 2, 3, 63, 17, 40, 5, 33},  m = {0, 1, 2, 3, 20, 63, 7, 48}.
	 * Packing (get_scale_min_k4 inverted): bytes 0..3 hold sc0..3 in their
	 * low six bits and the top two bits of sc4..7 in bits 6..7; bytes 4..7
	 * the same for m; bytes 8..11 hold sc4..7 low nibble | m4..7 low nibble << 4.
	 *   sc4 = 17 = 01 0001, sc5 = 40 = 10 1000, sc6 = 5 = 00 0101, sc7 = 33 = 10 0001
	 *   m4 = 20 = 01 0100,  m5 = 63 = 11 1111,  m6 = 7 = 00 0111,  m7 = 48 = 11 0000
	 *   [0] = 1 | 1<<6 = 0x41   [1] = 2 | 2<<6 = 0x82   [2] = 3 = 0x03      [3] = 63 | 2<<6 = 0xbf
	 *   [4] = 0 | 1<<6 = 0x40   [5] = 1 | 3<<6 = 0xc1   [6] = 2 = 0x02      [7] = 3 | 3<<6 = 0xc3
	 *   [8] = 1 | 4<<4 = 0x41   [9] = 8 | 15<<4 = 0xf8  [10] = 5 | 7<<4 = 0x75  [11] = 1 | 0<<4 = 0x01
	 */
	static const uint8_t scales[12] = {
		0x41, 0x82, 0x03, 0xbf, 0x40, 0xc1, 0x02, 0xc3, 0x41, 0xf8, 0x75, 0x01
	};

	memset(&b, 0, sizeof(b));
	b.d = 0x3c00;
	b.dmin = 0x3800;
	memcpy(b.scales, scales, sizeof(scales));
	b.qs[0] = 0xf5;				/* chunk 0, l = 0: values 0 (nibble 5) and 32 (15) */
	b.qs[33] = 0x9c;			/* chunk 1, l = 1: values 65 (12) and 97 (9) */
	b.qs[95] = 0x7e;			/* chunk 2, l = 31: values 159 (14) and 191 (7) */
	b.qs[98] = 0x1f;			/* chunk 3, l = 2: values 194 (15) and 226 (1) */
	llm_dequant_row(LLM_TYPE_Q4_K, &b, y, LLM_QK_K);

	TEST_CHECK(y[0] == 5.0f, "Q4_K y[0] = 1*5 - 0.5*0 = 5, got %g", y[0]);
	TEST_CHECK(y[1] == 0.0f, "Q4_K y[1] = 1*0 - 0 = 0, got %g", y[1]);
	TEST_CHECK(y[32] == 29.5f, "Q4_K y[32] = 2*15 - 0.5*1 = 29.5, got %g", y[32]);
	TEST_CHECK(y[65] == 35.0f, "Q4_K y[65] = 3*12 - 0.5*2 = 35, got %g", y[65]);
	TEST_CHECK(y[97] == 565.5f, "Q4_K y[97] = 63*9 - 0.5*3 = 565.5, got %g", y[97]);
	TEST_CHECK(y[100] == -1.5f, "Q4_K y[100] = 63*0 - 0.5*3 = -1.5, got %g", y[100]);
	TEST_CHECK(y[159] == 228.0f, "Q4_K y[159] = 17*14 - 0.5*20 = 228, got %g", y[159]);
	TEST_CHECK(y[191] == 248.5f, "Q4_K y[191] = 40*7 - 0.5*63 = 248.5, got %g", y[191]);
	TEST_CHECK(y[194] == 71.5f, "Q4_K y[194] = 5*15 - 0.5*7 = 71.5, got %g", y[194]);
	TEST_CHECK(y[226] == 9.0f, "Q4_K y[226] = 33*1 - 0.5*48 = 9, got %g", y[226]);
	TEST_CHECK(y[255] == -24.0f, "Q4_K y[255] = 33*0 - 0.5*48 = -24, got %g", y[255]);

	/* the same scales in a Q5_K block, with fifth bits: value 97 is sub-block 3 */
	{
		LlmBlockQ5_K b5;

		memset(&b5, 0, sizeof(b5));
		b5.d = 0x3c00;
		b5.dmin = 0x3800;
		memcpy(b5.scales, scales, sizeof(scales));
		b5.qs[33] = 0x9c;
		b5.qh[1] = 1 << 3;		/* sub-block 3, l = 1: value 97 gets +16 */
		b5.qh[2] = 1 << 2;		/* sub-block 2, l = 2: value 66 gets +16 */
		llm_dequant_row(LLM_TYPE_Q5_K, &b5, y, LLM_QK_K);
		TEST_CHECK(y[97] == 1573.5f, "Q5_K y[97] = 63*(9+16) - 1.5 = 1573.5, got %g", y[97]);
		TEST_CHECK(y[65] == 35.0f, "Q5_K y[65] = 3*12 - 1 = 35, got %g", y[65]);
		TEST_CHECK(y[66] == 47.0f, "Q5_K y[66] = 3*16 - 1 = 47, got %g", y[66]);
	}
}

/* Test 2b: a Q6_K block built byte by byte. */
static void
test_hand_q6_k(void)
{
	static const int8_t scales[16] = {1, -2, 3, 4, 5, 6, 7, 8, -128, 127, 10, 11, 12, 13, 14, 15};
	LlmBlockQ6_K b;
	float		y[LLM_QK_K];

	/*
	 * d = 0.5 (fp16 0x3800).  Value 128h + 32g + l has low bits from
	 * ql[64h + l + 32(g & 1)] (low nibble for g < 2, else high), high bits
	 * (qh[32h + l] >> 2g) & 3, scale scales[8h + l/16 + 2g]; x = d*sc*(q - 32).
	 * All other bytes are zero, so q = 0 there and x = d*sc*(-32).
	 */
	memset(&b, 0, sizeof(b));
	b.d = 0x3800;
	memcpy(b.scales, scales, sizeof(scales));
	b.ql[0] = 0x5a;				/* values 0 (low 10) and 64 (low 5) */
	b.ql[32] = 0xf3;			/* values 32 (low 3) and 96 (low 15) */
	b.qh[0] = 0xe4;				/* 11 10 01 00: high bits 0, 1, 2, 3 for g = 0..3 */
	b.ql[81] = 0x0c;			/* h = 1, l = 17: values 145 (12) and 209 (0) */
	b.ql[113] = 0x80;			/* values 177 (0) and 241 (8) */
	b.qh[49] = 0x1b;			/* 00 01 10 11: high bits 3, 2, 1, 0 */
	llm_dequant_row(LLM_TYPE_Q6_K, &b, y, LLM_QK_K);

	TEST_CHECK(y[0] == -11.0f, "Q6_K y[0]: q = 10 -> -22, 0.5*1*-22 = -11, got %g", y[0]);
	TEST_CHECK(y[32] == -19.5f, "Q6_K y[32]: q = 3|1<<4 = 19 -> -13, 0.5*3*-13 = -19.5, got %g", y[32]);
	TEST_CHECK(y[64] == 12.5f, "Q6_K y[64]: q = 5|2<<4 = 37 -> 5, 0.5*5*5 = 12.5, got %g", y[64]);
	TEST_CHECK(y[96] == 108.5f, "Q6_K y[96]: q = 15|3<<4 = 63 -> 31, 0.5*7*31 = 108.5, got %g", y[96]);
	TEST_CHECK(y[16] == 32.0f, "Q6_K y[16]: q = 0 -> -32, 0.5*-2*-32 = 32, got %g", y[16]);
	TEST_CHECK(y[128] == 2048.0f, "Q6_K y[128]: 0.5*-128*-32 = 2048, got %g", y[128]);
	TEST_CHECK(y[145] == 1778.0f, "Q6_K y[145]: q = 12|3<<4 = 60 -> 28, 0.5*127*28 = 1778, got %g", y[145]);
	TEST_CHECK(y[177] == 0.0f, "Q6_K y[177]: q = 0|2<<4 = 32 -> 0, got %g", y[177]);
	TEST_CHECK(y[209] == -104.0f, "Q6_K y[209]: q = 0|1<<4 = 16 -> -16, 0.5*13*-16 = -104, got %g", y[209]);
	TEST_CHECK(y[241] == -180.0f, "Q6_K y[241]: q = 8 -> -24, 0.5*15*-24 = -180, got %g", y[241]);
	TEST_CHECK(y[255] == -240.0f, "Q6_K y[255]: q = 0 -> -32, 0.5*15*-32 = -240, got %g", y[255]);
}

/* Test 2c: Q8_0 and Q4_0 blocks built byte by byte. */
static void
test_hand_q8_0_q4_0(void)
{
	LlmBlockQ8_0 b8;
	LlmBlockQ4_0 b4;
	float		y[LLM_QK];

	/* Q8_0, d = 0.5: x = 0.5 * q */
	memset(&b8, 0, sizeof(b8));
	b8.d = 0x3800;
	b8.qs[0] = -128;
	b8.qs[1] = 127;
	b8.qs[31] = -1;
	llm_dequant_row(LLM_TYPE_Q8_0, &b8, y, LLM_QK);
	TEST_CHECK(y[0] == -64.0f, "Q8_0 y[0] = 0.5*-128 = -64, got %g", y[0]);
	TEST_CHECK(y[1] == 63.5f, "Q8_0 y[1] = 0.5*127 = 63.5, got %g", y[1]);
	TEST_CHECK(y[2] == 0.0f, "Q8_0 y[2] = 0, got %g", y[2]);
	TEST_CHECK(y[31] == -0.5f, "Q8_0 y[31] = 0.5*-1 = -0.5, got %g", y[31]);

	/* Q4_0, d = 2.0 (0x4000): x = 2 * (nibble - 8); qs[j] holds values j (low) and j + 16 (high) */
	memset(&b4, 0x88, sizeof(b4));	/* every nibble 8: value 0 */
	b4.d = 0x4000;
	b4.qs[0] = 0xf0;			/* value 0: nibble 0 -> -16; value 16: 15 -> 14 */
	b4.qs[15] = 0x98;			/* value 15: nibble 8 -> 0; value 31: 9 -> 2 */
	b4.qs[3] = 0x1c;			/* value 3: nibble 12 -> 8; value 19: 1 -> -14 */
	llm_dequant_row(LLM_TYPE_Q4_0, &b4, y, LLM_QK);
	TEST_CHECK(y[0] == -16.0f, "Q4_0 y[0] = 2*(0-8) = -16, got %g", y[0]);
	TEST_CHECK(y[16] == 14.0f, "Q4_0 y[16] = 2*(15-8) = 14, got %g", y[16]);
	TEST_CHECK(y[15] == 0.0f, "Q4_0 y[15] = 2*(8-8) = 0, got %g", y[15]);
	TEST_CHECK(y[31] == 2.0f, "Q4_0 y[31] = 2*(9-8) = 2, got %g", y[31]);
	TEST_CHECK(y[3] == 8.0f, "Q4_0 y[3] = 2*(12-8) = 8, got %g", y[3]);
	TEST_CHECK(y[19] == -14.0f, "Q4_0 y[19] = 2*(1-8) = -14, got %g", y[19]);
	TEST_CHECK(y[7] == 0.0f, "Q4_0 y[7] = 0, got %g", y[7]);
}

/* Test 3: fp16 and bf16 conversions. */
static void
test_half(void)
{
	int			bad16 = -1;
	int			badbf = -1;

	/* every fp16 and bf16 value survives a trip through float; NaN stays NaN */
	for (int h = 0; h < 65536; h++)
	{
		float		f = llm_fp16_to_fp32((uint16_t) h);
		uint16_t	back = llm_fp32_to_fp16(f);
		bool		nan = (h & 0x7fff) > 0x7c00;

		if (nan ? !(isnan(f) && (back & 0x7fff) > 0x7c00) : back != h)
		{
			if (bad16 < 0)
				bad16 = h;
		}
		f = llm_bf16_to_fp32((uint16_t) h);
		back = llm_fp32_to_bf16(f);
		nan = (h & 0x7fff) > 0x7f80;
		if (nan ? !(isnan(f) && (back & 0x7fff) > 0x7f80) : back != h)
		{
			if (badbf < 0)
				badbf = h;
		}
	}
	TEST_CHECK(bad16 < 0, "fp16 0x%04x does not round-trip", bad16);
	TEST_CHECK(badbf < 0, "bf16 0x%04x does not round-trip", badbf);

	/* fp16 decoding of landmarks */
	TEST_CHECK(llm_fp16_to_fp32(0x3c00) == 1.0f, "fp16 1");
	TEST_CHECK(llm_fp16_to_fp32(0xc000) == -2.0f, "fp16 -2");
	TEST_CHECK(llm_fp16_to_fp32(0x7bff) == 65504.0f, "fp16 max");
	TEST_CHECK(llm_fp16_to_fp32(0x0400) == ldexpf(1.0f, -14), "fp16 smallest normal");
	TEST_CHECK(llm_fp16_to_fp32(0x03ff) == ldexpf(1023.0f, -24), "fp16 largest subnormal");
	TEST_CHECK(llm_fp16_to_fp32(0x0001) == ldexpf(1.0f, -24), "fp16 smallest subnormal");
	TEST_CHECK(llm_fp16_to_fp32(0x8001) == -ldexpf(1.0f, -24), "fp16 negative subnormal");
	TEST_CHECK(isinf(llm_fp16_to_fp32(0x7c00)) && llm_fp16_to_fp32(0x7c00) > 0, "fp16 +inf");
	TEST_CHECK(isinf(llm_fp16_to_fp32(0xfc00)) && llm_fp16_to_fp32(0xfc00) < 0, "fp16 -inf");
	TEST_CHECK(llm_fp16_to_fp32(0x8000) == 0.0f && signbit(llm_fp16_to_fp32(0x8000)), "fp16 -0");

	/* float to fp16: ties go to the even neighbour (spacing near 1 is 2^-10) */
	TEST_CHECK(llm_fp32_to_fp16(1.0f + ldexpf(1.0f, -11)) == 0x3c00, "1 + 2^-11 ties to 1");
	TEST_CHECK(llm_fp32_to_fp16(1.0f + 3 * ldexpf(1.0f, -11)) == 0x3c02, "1 + 3*2^-11 ties to 1 + 2^-9");
	TEST_CHECK(llm_fp32_to_fp16(1.0f + ldexpf(1.0f, -11) + ldexpf(1.0f, -20)) == 0x3c01,
			   "just above a tie rounds up");
	TEST_CHECK(llm_fp32_to_fp16(1.0f + ldexpf(1.0f, -11) - ldexpf(1.0f, -22)) == 0x3c00,
			   "just below a tie rounds down");
	TEST_CHECK(llm_fp32_to_fp16(-1.0f - 3 * ldexpf(1.0f, -11)) == 0xbc02, "negative tie");
	TEST_CHECK(llm_fp32_to_fp16(2047.0f + 0.5f) == 0x6800, "2047.5 ties to 2048 (exponent carry)");
	/* overflow: 65504 is the largest, 65520 is the tie with 65536 and goes to infinity */
	TEST_CHECK(llm_fp32_to_fp16(65504.0f) == 0x7bff, "65504");
	TEST_CHECK(llm_fp32_to_fp16(65519.99f) == 0x7bff, "65519.99 rounds to 65504");
	TEST_CHECK(llm_fp32_to_fp16(65520.0f) == 0x7c00, "65520 ties to infinity");
	TEST_CHECK(llm_fp32_to_fp16(1e6f) == 0x7c00, "1e6 overflows");
	TEST_CHECK(llm_fp32_to_fp16(-1e30f) == 0xfc00, "-1e30 overflows");
	TEST_CHECK(llm_fp32_to_fp16(INFINITY) == 0x7c00 && llm_fp32_to_fp16(-INFINITY) == 0xfc00, "inf");
	TEST_CHECK((llm_fp32_to_fp16(NAN) & 0x7fff) > 0x7c00, "NaN");
	/* subnormals: spacing 2^-24 */
	TEST_CHECK(llm_fp32_to_fp16(ldexpf(1.0f, -24)) == 0x0001, "2^-24");
	TEST_CHECK(llm_fp32_to_fp16(ldexpf(1.0f, -25)) == 0x0000, "2^-25 ties to 0");
	TEST_CHECK(llm_fp32_to_fp16(ldexpf(1.0f, -25) * 1.0001f) == 0x0001, "above 2^-25 rounds up");
	TEST_CHECK(llm_fp32_to_fp16(ldexpf(3.0f, -25)) == 0x0002, "3*2^-25 ties to 2*2^-24");
	TEST_CHECK(llm_fp32_to_fp16(ldexpf(5.0f, -25)) == 0x0002, "5*2^-25 ties to 2*2^-24");
	TEST_CHECK(llm_fp32_to_fp16(ldexpf(2047.0f, -25)) == 0x0400, "largest subnormal tie rounds up to normal");
	TEST_CHECK(llm_fp32_to_fp16(ldexpf(2045.0f, -25)) == 0x03fe, "1022.5*2^-24 ties to 1022");
	TEST_CHECK(llm_fp32_to_fp16(-ldexpf(1.0f, -24)) == 0x8001, "-2^-24");
	TEST_CHECK(llm_fp32_to_fp16(1e-10f) == 0x0000, "1e-10 underflows");
	TEST_CHECK(llm_fp32_to_fp16(-1e-10f) == 0x8000, "-1e-10 underflows to -0");
	TEST_CHECK(llm_fp32_to_fp16(bits_float(0x00000001)) == 0x0000, "float subnormal to 0");

	/* bf16: the high half of a float, rounded to nearest even */
	TEST_CHECK(llm_bf16_to_fp32(0x3f80) == 1.0f && llm_bf16_to_fp32(0xc040) == -3.0f, "bf16 decode");
	TEST_CHECK(llm_fp32_to_bf16(bits_float(0x3f808000)) == 0x3f80, "bf16 tie to even (down)");
	TEST_CHECK(llm_fp32_to_bf16(bits_float(0x3f818000)) == 0x3f82, "bf16 tie to even (up)");
	TEST_CHECK(llm_fp32_to_bf16(bits_float(0x3f808001)) == 0x3f81, "bf16 above tie");
	TEST_CHECK(llm_fp32_to_bf16(bits_float(0x3f807fff)) == 0x3f80, "bf16 below tie");
	TEST_CHECK(llm_fp32_to_bf16(bits_float(0xbf818000)) == 0xbf82, "bf16 negative tie");
	TEST_CHECK(llm_fp32_to_bf16(bits_float(0x3fff8000)) == 0x4000, "bf16 carry into exponent");
	TEST_CHECK(llm_fp32_to_bf16(bits_float(0x7f7fffff)) == 0x7f80, "bf16 FLT_MAX rounds to inf");
	TEST_CHECK(llm_fp32_to_bf16(bits_float(0x7f7f7fff)) == 0x7f7f, "bf16 largest finite");
	TEST_CHECK(llm_fp32_to_bf16(INFINITY) == 0x7f80 && llm_fp32_to_bf16(-INFINITY) == 0xff80, "bf16 inf");
	TEST_CHECK((llm_fp32_to_bf16(bits_float(0x7f800001)) & 0x7fff) > 0x7f80, "bf16 signalling NaN stays NaN");
	TEST_CHECK((llm_fp32_to_bf16(bits_float(0xffc00000)) & 0x7fff) > 0x7f80, "bf16 quiet NaN");
	TEST_CHECK(llm_fp32_to_bf16(bits_float(0x00008000)) == 0x0000, "bf16 subnormal tie to 0");
	TEST_CHECK(llm_fp32_to_bf16(bits_float(0x00018000)) == 0x0002, "bf16 subnormal tie to even");
	TEST_CHECK(llm_bf16_to_fp32(0x0001) == bits_float(0x00010000), "bf16 subnormal decode");
}

/*
 * Fill row with nb random blocks of type: quantized from random floats where
 * llm_quantize_row can, else random bytes with sane fp16 scales put back.
 */
static void
random_row(LlmType type, uint8_t *row, int64_t n)
{
	const LlmTypeTraits *t = llm_type_traits(type);
	int64_t		nb = n / t->block_size;
	size_t		bytes = llm_type_row_size(type, n);

	if (llm_type_can_quantize(type))
	{
		float	   *x = malloc((size_t) n * sizeof(float));

		for (int64_t i = 0; i < n; i++)
			x[i] = test_rng_uniform(-1.0f, 1.0f) * (i % 64 < 32 ? 1.0f : 10.0f);
		llm_quantize_row(type, x, row, n);
		free(x);
		return;
	}
	for (size_t i = 0; i < bytes; i++)
		row[i] = (uint8_t) (test_rng_next() >> 56);
	for (int64_t i = 0; i < nb; i++)
	{
		uint8_t    *b = row + i * t->type_size;

		switch (type)
		{
			case LLM_TYPE_Q4_1:
				put_half(b + offsetof(LlmBlockQ4_1, d), test_rng_uniform(-0.1f, 0.1f));
				put_half(b + offsetof(LlmBlockQ4_1, m), test_rng_uniform(-1.0f, 1.0f));
				break;
			case LLM_TYPE_Q5_0:
				put_half(b + offsetof(LlmBlockQ5_0, d), test_rng_uniform(-0.1f, 0.1f));
				break;
			case LLM_TYPE_Q5_1:
				put_half(b + offsetof(LlmBlockQ5_1, d), test_rng_uniform(-0.1f, 0.1f));
				put_half(b + offsetof(LlmBlockQ5_1, m), test_rng_uniform(-1.0f, 1.0f));
				break;
			case LLM_TYPE_Q2_K:
				put_half(b + offsetof(LlmBlockQ2_K, d), test_rng_uniform(0.0f, 0.1f));
				put_half(b + offsetof(LlmBlockQ2_K, dmin), test_rng_uniform(0.0f, 0.1f));
				break;
			case LLM_TYPE_Q3_K:
				put_half(b + offsetof(LlmBlockQ3_K, d), test_rng_uniform(-0.1f, 0.1f));
				break;
			case LLM_TYPE_Q4_K:
				put_half(b + offsetof(LlmBlockQ4_K, d), test_rng_uniform(0.0f, 0.1f));
				put_half(b + offsetof(LlmBlockQ4_K, dmin), test_rng_uniform(0.0f, 0.1f));
				break;
			case LLM_TYPE_Q5_K:
				put_half(b + offsetof(LlmBlockQ5_K, d), test_rng_uniform(0.0f, 0.1f));
				put_half(b + offsetof(LlmBlockQ5_K, dmin), test_rng_uniform(0.0f, 0.1f));
				break;
			case LLM_TYPE_Q6_K:
				put_half(b + offsetof(LlmBlockQ6_K, d), test_rng_uniform(-0.1f, 0.1f));
				break;
			default:
				break;
		}
	}
}

/*
 * Check llm_dequant_row and llm_dot_row_ref on one row of n values against
 * ref_value: decoded values within 1e-6 of the row's largest, and the dot
 * within a normalised error |got - ref| / sum |a_i * x_i| < 1e-5.
 */
static void
check_row(LlmType type, const uint8_t *row, int64_t n, const char *what)
{
	const char *name = llm_type_traits(type)->name;
	float	   *x = malloc((size_t) n * sizeof(float));
	float	   *y = malloc((size_t) n * sizeof(float));
	double		ref = 0.0;
	double		mag = 0.0;
	double		vmax = 0.0;
	double		verr = 0.0;
	float		got;
	double		err;

	for (int64_t i = 0; i < n; i++)
		x[i] = test_rng_uniform(-1.0f, 1.0f);
	llm_dequant_row(type, row, y, n);
	for (int64_t i = 0; i < n; i++)
	{
		double		a = ref_value(type, row, i);

		ref += a * x[i];
		mag += fabs(a * x[i]);
		if (fabs(a) > vmax)
			vmax = fabs(a);
		if (fabs(y[i] - a) > verr || isnan(y[i]))
			verr = isnan(y[i]) ? INFINITY : fabs(y[i] - a);
	}
	TEST_CHECK(verr <= 1e-6 * vmax, "%s %s n=%lld: dequant differs from oracle by %g (max %g)",
			   name, what, (long long) n, verr, vmax);
	got = llm_dot_row_ref(type, row, x, n);
	err = fabs(got - ref) / (mag > 0.0 ? mag : 1.0);
	TEST_CHECK(err < 1e-5, "%s %s n=%lld: dot %.9g, reference %.9g, normalised error %g",
			   name, what, (long long) n, got, ref, err);
	free(x);
	free(y);
}

/* Test 4: dot products of random rows, and of the golden blocks, against the oracle. */
static void
test_dot(void)
{
	static const int nblocks[] = {1, 2, 7};

	for (int ti = 0; ti < N_TYPES; ti++)
	{
		LlmType		type = all_types[ti];
		const LlmTypeTraits *t = llm_type_traits(type);
		int64_t		lens[5];
		int			nlens = 0;

		for (int k = 0; k < 3; k++)
			lens[nlens++] = (int64_t) nblocks[k] * t->block_size;
		if (t->block_size == 1)
		{
			/* also rows longer than the dot's 256-value chunk, with a partial last chunk */
			lens[nlens++] = 300;
			lens[nlens++] = 7 * LLM_QK_K;
		}
		for (int k = 0; k < nlens; k++)
		{
			uint8_t    *row = malloc(llm_type_row_size(type, lens[k]));

			random_row(type, row, lens[k]);
			check_row(type, row, lens[k], "random");
			free(row);
		}
	}
	for (int g = 0; g < N_GOLDEN; g++)
	{
		const LlmTypeTraits *t = llm_type_traits(golden_types[g]);
		char		path[1024];
		size_t		len = 0;
		uint8_t    *blocks;

		snprintf(path, sizeof(path), "%s/golden/quant/%s.blocks", test_shared_dir(), t->name);
		blocks = read_file(path, &len);
		if (blocks == NULL)
			continue;			/* reported by test_golden */
		check_row(golden_types[g], blocks, (int64_t) (len / t->type_size) * t->block_size, "golden");
		free(blocks);
	}
}

/* Test 5a: quantize random blocks and check the error of the round trip. */
static void
test_quantize_error(void)
{
	enum
	{
		NB = 64,
		N = NB * LLM_QK
	};
	float	   *x = malloc(N * sizeof(float));
	float	   *y = malloc(N * sizeof(float));
	uint8_t    *q = malloc(N * sizeof(float));
	double		worst;

	/* blocks of very different magnitudes, 1e-4 .. 1e3 */
	for (int i = 0; i < NB; i++)
	{
		float		scale = powf(10.0f, test_rng_uniform(-4.0f, 3.0f));

		for (int j = 0; j < LLM_QK; j++)
			x[i * LLM_QK + j] = test_rng_uniform(-1.0f, 1.0f) * scale;
	}

	/*
	 * Q8_0: |x - d16*q| <= |x - d*q| + |d - d16|*|q| <= d/2 + 127*|d - d16|,
	 * d = amax/127 and d16 its fp16 (relative error <= 2^-11).
	 */
	llm_quantize_row(LLM_TYPE_Q8_0, x, q, N);
	llm_dequant_row(LLM_TYPE_Q8_0, q, y, N);
	worst = 0.0;
	for (int i = 0; i < NB; i++)
	{
		const LlmBlockQ8_0 *b = (const LlmBlockQ8_0 *) q + i;
		double		amax = 0.0;
		double		d;
		double		bound;

		for (int j = 0; j < LLM_QK; j++)
			amax = fmax(amax, fabs(x[i * LLM_QK + j]));
		d = amax / 127.0;
		bound = d / 2 + 127.0 * fabs(d - llm_fp16_to_fp32(b->d)) + 1e-6 * amax;
		for (int j = 0; j < LLM_QK; j++)
			worst = fmax(worst, fabs(x[i * LLM_QK + j] - y[i * LLM_QK + j]) / bound);
	}
	TEST_CHECK(worst <= 1.0, "Q8_0 round-trip error is %g of its bound", worst);

	/*
	 * Q4_0: d = max/-8 and x/d lies in [-8, 8]; a value is rounded to the
	 * nearest of d*(-8 .. 7) (error <= |d|/2) unless x/d > 7.5, where it is
	 * clamped to 7 (error <= |d|).  Storing d as fp16 adds 8*|d - d16|.
	 */
	llm_quantize_row(LLM_TYPE_Q4_0, x, q, N);
	llm_dequant_row(LLM_TYPE_Q4_0, q, y, N);
	worst = 0.0;
	for (int i = 0; i < NB; i++)
	{
		const LlmBlockQ4_0 *b = (const LlmBlockQ4_0 *) q + i;
		double		amax = 0.0;
		double		max = 0.0;
		double		d;

		for (int j = 0; j < LLM_QK; j++)
		{
			if (fabs(x[i * LLM_QK + j]) > amax)
			{
				amax = fabs(x[i * LLM_QK + j]);
				max = x[i * LLM_QK + j];
			}
		}
		d = max / -8.0;
		for (int j = 0; j < LLM_QK; j++)
		{
			double		xv = x[i * LLM_QK + j];
			double		r = fabs(d) * (xv / d > 7.5 ? 1.0 : 0.5);
			double		bound = r + 8.0 * fabs(d - llm_fp16_to_fp32(b->d)) + 1e-6 * amax;

			worst = fmax(worst, fabs(xv - y[i * LLM_QK + j]) / bound);
		}
	}
	TEST_CHECK(worst <= 1.0, "Q4_0 round-trip error is %g of its bound", worst);

	/*
	 * F16 (within fp16 range) and BF16 keep 11 and 8 significant bits, F16
	 * subnormals an absolute 2^-25; F32 is exact
	 */
	for (int i = 0; i < N; i++)
		x[i] = test_rng_uniform(-1.0f, 1.0f) * powf(2.0f, test_rng_uniform(-13.0f, 15.0f));
	llm_quantize_row(LLM_TYPE_F16, x, q, N);
	llm_dequant_row(LLM_TYPE_F16, q, y, N);
	worst = 0.0;
	for (int i = 0; i < N; i++)
		worst = fmax(worst, fabs(x[i] - y[i]) / fmax(fabs(x[i]) * ldexp(1.0, -11), ldexp(1.0, -25)));
	TEST_CHECK(worst <= 1.0, "F16 round-trip error is %g of half an ulp", worst);
	llm_quantize_row(LLM_TYPE_BF16, x, q, N);
	llm_dequant_row(LLM_TYPE_BF16, q, y, N);
	worst = 0.0;
	for (int i = 0; i < N; i++)
		worst = fmax(worst, fabs(x[i] - y[i]) / (fabs(x[i]) * ldexp(1.0, -8)));
	TEST_CHECK(worst <= 1.0, "BF16 round-trip error is %g of half an ulp", worst);
	llm_quantize_row(LLM_TYPE_F32, x, q, N);
	llm_dequant_row(LLM_TYPE_F32, q, y, N);
	TEST_CHECK(memcmp(x, y, N * sizeof(float)) == 0, "F32 round trip is exact");

	free(x);
	free(y);
	free(q);
}

/* Test 5b: a block of zeros quantizes to zeros (no NaN from 0/0), for every quantizable type. */
static void
test_quantize_zeros(void)
{
	float		x[LLM_QK] = {0};
	float		y[LLM_QK];
	uint8_t		q[LLM_QK * sizeof(float)];

	for (int ti = 0; ti < N_TYPES; ti++)
	{
		LlmType		type = all_types[ti];
		bool		ok = true;

		if (!llm_type_can_quantize(type))
			continue;
		for (int j = 0; j < LLM_QK; j++)
			y[j] = NAN;
		llm_quantize_row(type, x, q, LLM_QK);
		llm_dequant_row(type, q, y, LLM_QK);
		for (int j = 0; j < LLM_QK; j++)
			ok = ok && y[j] == 0.0f;
		TEST_CHECK(ok, "%s: zeros quantize to zeros", llm_type_traits(type)->name);
	}
}

/* Test 5c: hand-chosen blocks quantize to exactly the bytes of ggml's algorithm. */
static void
test_quantize_bytes(void)
{
	float		x[LLM_QK] = {0};
	uint8_t		got[sizeof(LlmBlockQ8_0)];

	/*
	 * Q8_0: amax = 127, so d = 1 (fp16 0x3c00, stored 00 3c) and q = roundf(x),
	 * halves away from zero: 0.5 -> 1, -0.5 -> -1, 1.5 -> 2, 2.49 -> 2,
	 * -2.5 -> -3, 3.7 -> 4; -127 is 0x81, -1 0xff, -3 0xfd.
	 */
	{
		static const uint8_t want[34] = {
			0x00, 0x3c, 0x7f, 0x81, 0x01, 0xff, 0x02, 0x02, 0xfd, 0x04,
		};
		static const float in[8] = {127.0f, -127.0f, 0.5f, -0.5f, 1.5f, 2.49f, -2.5f, 3.7f};

		memcpy(x, in, sizeof(in));
		llm_quantize_row(LLM_TYPE_Q8_0, x, got, LLM_QK);
		TEST_CHECK(memcmp(got, want, sizeof(want)) == 0,
				   "Q8_0 bytes: got %02x %02x | %02x %02x %02x %02x %02x %02x %02x %02x",
				   got[0], got[1], got[2], got[3], got[4], got[5], got[6], got[7], got[8], got[9]);
	}

	/*
	 * Q4_0, largest magnitude negative: max = -8, d = -8/-8 = 1 (00 3c),
	 * q = min(15, trunc(x + 8.5)):
	 *   x[0] = -8 -> 0     x[1] = 7 -> 15    x[2] = 7.9 -> 16 -> 15   x[3] = 0.5 -> 9
	 *   x[4] = -0.5 -> 8   x[5] = 1.49 -> 9  x[6] = -3.2 -> 5         zeros -> 8
	 *   x[16] = 3 -> 11    x[17] = -7.6 -> 0
	 * qs[j] = q[j] | q[j + 16] << 4.
	 */
	memset(x, 0, sizeof(x));
	{
		static const uint8_t want[18] = {
			0x00, 0x3c, 0xb0, 0x0f, 0x8f, 0x89, 0x88, 0x89, 0x85, 0x88,
			0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88,
		};

		x[0] = -8.0f;
		x[1] = 7.0f;
		x[2] = 7.9f;
		x[3] = 0.5f;
		x[4] = -0.5f;
		x[5] = 1.49f;
		x[6] = -3.2f;
		x[16] = 3.0f;
		x[17] = -7.6f;
		llm_quantize_row(LLM_TYPE_Q4_0, x, got, LLM_QK);
		TEST_CHECK(memcmp(got, want, sizeof(want)) == 0,
				   "Q4_0 bytes (negative max): got %02x %02x | %02x %02x %02x %02x %02x %02x %02x",
				   got[0], got[1], got[2], got[3], got[4], got[5], got[6], got[7], got[8]);
	}

	/*
	 * Q4_0, largest magnitude positive: max = 8, d = -1 (fp16 0xbc00, 00 bc),
	 * so x/d = -x: x[0] = 8 -> trunc(0.5) = 0; x[1] = -8 is a tie in
	 * magnitude that comes later, so max stays 8, and -8 -> 16.5 -> 15;
	 * x[2] = 1 -> 7.5 -> 7; x[16] = -2 -> 10.5 -> 10; zeros -> 8.
	 */
	memset(x, 0, sizeof(x));
	{
		static const uint8_t want[18] = {
			0x00, 0xbc, 0xa0, 0x8f, 0x87, 0x88, 0x88, 0x88, 0x88, 0x88,
			0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88,
		};

		x[0] = 8.0f;
		x[1] = -8.0f;
		x[2] = 1.0f;
		x[16] = -2.0f;
		llm_quantize_row(LLM_TYPE_Q4_0, x, got, LLM_QK);
		TEST_CHECK(memcmp(got, want, sizeof(want)) == 0,
				   "Q4_0 bytes (positive max): got %02x %02x | %02x %02x %02x %02x",
				   got[0], got[1], got[2], got[3], got[4], got[5]);
	}

	/* F16 and BF16 store each value's conversion little-endian */
	{
		static const float in[2] = {1.0f, -2.0f};

		llm_quantize_row(LLM_TYPE_F16, in, got, 2);
		TEST_CHECK(got[0] == 0x00 && got[1] == 0x3c && got[2] == 0x00 && got[3] == 0xc0, "F16 bytes");
		llm_quantize_row(LLM_TYPE_BF16, in, got, 2);
		TEST_CHECK(got[0] == 0x80 && got[1] == 0x3f && got[2] == 0x00 && got[3] == 0xc0, "BF16 bytes");
	}
}

/* Run every test; prints "quant: N passed, N failed". */
/* Q5_0 repacked as Q8_0 decodes to exactly the Q5_0 golden values. */
static void
test_repack_q5_0(void)
{
	char		path[1024];
	size_t		nb = 0,
				nw = 0;
	uint8_t    *blocks,
			   *want;
	uint8_t    *q8;
	float	   *got;
	int64_t		n;

	TEST_CHECK(llm_type_repacks_to_q8_0(LLM_TYPE_Q5_0) && !llm_type_repacks_to_q8_0(LLM_TYPE_Q4_K),
			   "only Q5_0 repacks to Q8_0");
	snprintf(path, sizeof(path), "%s/golden/quant/Q5_0.blocks", test_shared_dir());
	blocks = read_file(path, &nb);
	snprintf(path, sizeof(path), "%s/golden/quant/Q5_0.f32", test_shared_dir());
	want = read_file(path, &nw);
	TEST_CHECK(blocks != NULL && want != NULL, "Q5_0 golden files readable");
	if (blocks == NULL || want == NULL)
	{
		free(blocks);
		free(want);
		return;
	}
	n = (int64_t) (nb / llm_type_traits(LLM_TYPE_Q5_0)->type_size) * LLM_QK;
	q8 = malloc(llm_type_row_size(LLM_TYPE_Q8_0, n));
	got = malloc((size_t) n * sizeof(float));
	llm_repack_q8_0(LLM_TYPE_Q5_0, blocks, q8, n);
	llm_dequant_row(LLM_TYPE_Q8_0, q8, got, n);
	TEST_CHECK((size_t) n * 4 == nw && memcmp(got, want, nw) == 0, "Q5_0 repacked as Q8_0 differs from the golden values");
	free(q8);
	free(got);
	free(blocks);
	free(want);
}

/*
 * The grouped types (quant_groups.c) over the golden blocks of Q8_0, Q4_0
 * and Q4_1, cut into rows with full groups, a group of 8 and tails: the
 * rows come back byte for byte, decode to the golden values, and give the
 * base type's reference dot products bit for bit; one byte of each layout
 * where quant_groups.c's header puts it.
 */
static void
test_grouped(void)
{
	static const LlmType bases[] = {LLM_TYPE_Q8_0, LLM_TYPE_Q4_0, LLM_TYPE_Q4_1, LLM_TYPE_Q5_0, LLM_TYPE_Q5_1};
	static const int64_t ks[] = {256, 512, 800, 1312, 2048};

	TEST_CHECK(!llm_type_is_file_type(LLM_TYPE_Q8_0_G) && llm_type_is_file_type(LLM_TYPE_Q8_0) &&
			   !llm_type_is_file_type(LLM_TYPE_COUNT), "grouped types are not file types");
	TEST_CHECK(llm_type_grouped(LLM_TYPE_Q4_K) == LLM_TYPE_COUNT && llm_type_base(LLM_TYPE_Q4_K) == LLM_TYPE_Q4_K,
			   "Q4_K has no grouped type");
	TEST_CHECK(llm_group_blocks(7) == 0 && llm_group_blocks(8) == 8 && llm_group_blocks(25) == 24 &&
			   llm_group_blocks(41) == 40 && llm_group_blocks(39) == 32, "grouped blocks of a row");
	for (int bi = 0; bi < 5; bi++)
	{
		LlmType		base = bases[bi];
		LlmType		g = llm_type_grouped(base);
		char		path[1024];
		size_t		nb = 0,
					nw = 0;
		uint8_t    *blocks;
		float	   *want;

		TEST_CHECK(g != LLM_TYPE_COUNT && llm_type_base(g) == base &&
				   llm_type_row_size(g, 2048) == llm_type_row_size(base, 2048), "%s: a grouped type of its size",
				   llm_type_traits(base)->name);
		snprintf(path, sizeof(path), "%s/golden/quant/%s.blocks", test_shared_dir(), llm_type_traits(base)->name);
		blocks = read_file(path, &nb);
		snprintf(path, sizeof(path), "%s/golden/quant/%s.f32", test_shared_dir(), llm_type_traits(base)->name);
		want = (float *) read_file(path, &nw);
		TEST_CHECK(blocks != NULL && want != NULL && nw == 2048 * sizeof(float), "%s golden files readable",
				   llm_type_traits(base)->name);
		for (int ki = 0; blocks != NULL && want != NULL && ki < 5; ki++)
		{
			const int64_t k = ks[ki];
			const size_t rb = llm_type_row_size(base, k);
			uint8_t    *gr = malloc(rb);
			uint8_t    *back = malloc(rb);
			float	   *got = malloc((size_t) k * sizeof(float));
			float	   *x = malloc((size_t) k * sizeof(float));

			for (int64_t r = 0; gr != NULL && back != NULL && got != NULL && x != NULL && r < 2048 / k; r++)
			{
				const uint8_t *row = blocks + (size_t) r * rb;
				float		d1,
							d2;

				for (int64_t j = 0; j < k; j++)
					x[j] = test_rng_uniform(-1.0f, 1.0f);
				llm_group_row(base, row, gr, k);
				llm_ungroup_row(g, gr, back, k);
				TEST_CHECK(memcmp(back, row, rb) == 0, "%s k %lld row %lld: grouped and back differs",
						   llm_type_traits(base)->name, (long long) k, (long long) r);
				llm_dequant_row(g, gr, got, k);
				TEST_CHECK(memcmp(got, want + r * k, (size_t) k * sizeof(float)) == 0,
						   "%s k %lld row %lld: grouped decodes to the golden values", llm_type_traits(base)->name,
						   (long long) k, (long long) r);
				d1 = llm_dot_row_ref(base, row, x, k);
				d2 = llm_dot_row_ref(g, gr, x, k);
				TEST_CHECK(memcmp(&d1, &d2, sizeof(float)) == 0, "%s k %lld: grouped reference dot %.9g, base %.9g",
						   llm_type_traits(base)->name, (long long) k, (double) d2, (double) d1);
				if (k == 512 && r == 0)
				{
					/* vector 1, lane 1 (block 2), byte 2: value 6 of block 2, after the scales and fifth bits */
					const bool	min = base == LLM_TYPE_Q4_1 || base == LLM_TYPE_Q5_1;
					const bool	fifth = base == LLM_TYPE_Q5_0 || base == LLM_TYPE_Q5_1;
					const uint8_t *b2 = row + 2 * llm_type_traits(base)->type_size;
					uint8_t		at = gr[(min ? 64 : 32) + (fifth ? 64 : 0) + 64 + 4 + 2];

					if (base == LLM_TYPE_Q8_0)
						TEST_CHECK(at == (uint8_t) (b2[2 + 6] ^ 0x80), "Q8_0 grouped byte");
					else		/* vector 1 low (value 6), vector 5 high (value 22): block 2's byte qs[6] */
						TEST_CHECK(at == b2[(min ? 4 : 2) + (fifth ? 4 : 0) + 6], "%s grouped byte",
								   llm_type_traits(base)->name);
				}
			}
			free(gr);
			free(back);
			free(got);
			free(x);
		}
		free(blocks);
		free(want);
	}
}

/* Own INT8 per channel and INT4 per group: shared scales, errors within half a step (a step when clamped). */
static void
test_own_quantizers(void)
{
	enum
	{
		N = 512
	};
	float		x[N],
				y[N];
	LlmBlockQ8_0 q8[N / LLM_QK];
	LlmBlockQ4_0 q4[N / LLM_QK];

	for (int i = 0; i < N; i++)
		x[i] = test_rng_uniform(-1.0f, 1.0f) * (i % 97 == 0 ? 8.0f : 1.0f);

	llm_quantize_row_int8_channel(x, q8, N);
	llm_dequant_row(LLM_TYPE_Q8_0, q8, y, N);
	{
		float		d = llm_fp16_to_fp32(q8[0].d);
		float		worst = 0.0f;
		bool		shared = true;

		for (int b = 1; b < N / LLM_QK; b++)
			shared &= q8[b].d == q8[0].d;
		for (int i = 0; i < N; i++)
			worst = fmaxf(worst, fabsf(x[i] - y[i]));
		TEST_CHECK(shared, "int8 per channel: blocks carry different scales");
		TEST_CHECK(worst <= d * 0.5001f, "int8 per channel: error %g > half step %g", worst, d / 2);
	}
	for (int g = 32; g <= 128; g *= 4)
	{
		llm_quantize_row_int4_group(x, q4, N, g);
		llm_dequant_row(LLM_TYPE_Q4_0, q4, y, N);
		for (int b = 0; b < N / LLM_QK; b++)
		{
			float		d = fabsf(llm_fp16_to_fp32(q4[b].d));
			float		worst = 0.0f;

			TEST_CHECK(q4[b].d == q4[b / (g / LLM_QK) * (g / LLM_QK)].d, "int4 g%d: block %d has its own scale", g, b);
			for (int j = 0; j < LLM_QK; j++)
				worst = fmaxf(worst, fabsf(x[b * LLM_QK + j] - y[b * LLM_QK + j]));
			TEST_CHECK(worst <= d * 1.001f, "int4 g%d: block %d error %g > step %g", g, b, worst, d);
		}
	}
}

/*
 * The SIMD kernels' whole-block scale unpacking, on random bytes:
 * llm_k4_scales_mins gives llm_k4_scale_min's scales and mins (Q4_K, Q5_K),
 * llm_q3k_scales6 gives llm_q3k_scale's scales plus 32 (Q3_K).
 */
static void
test_k_scale_unpacking(void)
{
	int			bad_k4 = 0;
	int			bad_q3 = 0;

	for (int trial = 0; trial < 4096; trial++)
	{
		uint8_t		q[12];
		uint8_t		all[16];

		for (int i = 0; i < 12; i++)
			q[i] = (uint8_t) (test_rng_next() >> 56);
		llm_k4_scales_mins(q, all);
		for (int j = 0; j < 8; j++)
		{
			uint8_t		sc,
						m;

			llm_k4_scale_min(j, q, &sc, &m);
			bad_k4 += all[j] != sc || all[8 + j] != m;
		}
		llm_q3k_scales6(q, all);
		for (int k = 0; k < 16; k++)
			bad_q3 += all[k] - 32 != llm_q3k_scale(k, q);
	}
	TEST_CHECK(bad_k4 == 0, "llm_k4_scales_mins differs from llm_k4_scale_min %d times", bad_k4);
	TEST_CHECK(bad_q3 == 0, "llm_q3k_scales6 differs from llm_q3k_scale %d times", bad_q3);
}

/* SPARSE24's GGUF id, pruning and decoding (6 in the header). */
static void
test_sparse24(void)
{
	float		x[LLM_QK_S24],
				y[LLM_QK_S24],
				q8f[LLM_QK_S24];
	LlmBlockS24 b;
	LlmBlockQ8_0 q8[2];
	uint64_t	m;

	TEST_CHECK(llm_type_file_id(LLM_TYPE_SPARSE24) == LLM_FILE_TYPE_SPARSE24 &&
			   llm_type_from_file_id(LLM_FILE_TYPE_SPARSE24) == LLM_TYPE_SPARSE24 &&
			   llm_type_from_file_id(LLM_TYPE_SPARSE24) == -1 && llm_type_from_file_id(LLM_TYPE_Q8_0_G) == -1 &&
			   llm_type_from_file_id(LLM_TYPE_Q4_K) == LLM_TYPE_Q4_K && llm_type_file_id(LLM_TYPE_Q4_K) == LLM_TYPE_Q4_K,
			   "SPARSE24 is stored under its own id, and only there");
	TEST_CHECK(llm_type_row_size(LLM_TYPE_SPARSE24, 2048) == 32 * 44, "SPARSE24 rows: 44 bytes per 64 values");

	/* dense input: the two largest magnitudes of each four kept, in order, the rest zero */
	for (int j = 0; j < LLM_QK_S24; j++)
		x[j] = (float) ((j * 37) % 11 - 5) * 0.01f * (j % 3 == 0 ? -1.0f : 1.0f);
	llm_quantize_row(LLM_TYPE_SPARSE24, x, &b, LLM_QK_S24);
	llm_dequant_row(LLM_TYPE_SPARSE24, &b, y, LLM_QK_S24);
	memcpy(&m, b.mask, sizeof(m));
	for (int g = 0; g < LLM_QK_S24 / 4; g++)
	{
		int			kept = 0;

		for (int j = 4 * g; j < 4 * g + 4; j++)
		{
			int			bigger = 0;

			for (int i = 4 * g; i < 4 * g + 4; i++)
				bigger += fabsf(x[i]) > fabsf(x[j]) || (fabsf(x[i]) == fabsf(x[j]) && i < j);
			kept += (int) ((m >> j) & 1);
			TEST_CHECK(((m >> j) & 1) == (bigger < 2), "value %d kept exactly when among its four's two largest", j);
			if (!((m >> j) & 1))
				TEST_CHECK(y[j] == 0.0f, "pruned value %d decodes as zero", j);
		}
		TEST_CHECK(kept == 2, "two of four %d kept", g);
	}

	/* a 2:4 row quantized as Q8_0 and back: pruned, it keeps that pattern and Q8_0's values exactly */
	for (int j = 0; j < LLM_QK_S24; j++)
		x[j] = (j % 4 == 1 || j % 4 == ((j / 4) % 2 ? 3 : 0)) ? test_rng_uniform(-1.0f, 1.0f) : 0.0f;
	llm_quantize_row(LLM_TYPE_Q8_0, x, q8, LLM_QK_S24);
	llm_dequant_row(LLM_TYPE_Q8_0, q8, q8f, LLM_QK_S24);
	llm_quantize_row(LLM_TYPE_SPARSE24, q8f, &b, LLM_QK_S24);
	llm_dequant_row(LLM_TYPE_SPARSE24, &b, y, LLM_QK_S24);
	memcpy(&m, b.mask, sizeof(m));
	for (int j = 0; j < LLM_QK_S24; j++)
	{
		TEST_CHECK(q8f[j] == 0.0f || ((m >> j) & 1), "the 2:4 row's nonzero %d kept", j);
		TEST_CHECK(y[j] == q8f[j], "value %d: %g, Q8_0 gave %g", j, y[j], q8f[j]);
	}

	/* a mask of more than 32 bits: the values past the 32nd kept decode as zeros */
	memset(b.mask, 0xff, sizeof(b.mask));
	b.d[0] = b.d[1] = llm_fp32_to_fp16(1.0f);
	for (int r = 0; r < LLM_QK_S24 / 2; r++)
		b.qs[r] = (int8_t) (r + 1);
	llm_dequant_row(LLM_TYPE_SPARSE24, &b, y, LLM_QK_S24);
	for (int j = 0; j < LLM_QK_S24; j++)
		TEST_CHECK(y[j] == (j < 32 ? (float) (j + 1) : 0.0f), "an over-full mask decodes value %d as %g", j, y[j]);
}

/*
 * SPARSE24's grouped rows (quant_groups.c): the same values as the blocks,
 * and back; the bytes where the layout puts them; rows with three kept in
 * some four refused.
 */
static void
test_sparse24_grouped(void)
{
	enum
	{
		K = 1344				/* 21 blocks: pieces of 8, 8, 4 and one block left */
	};
	float		x[K],
				y[K],
				yg[K];
	LlmBlockS24 row[K / LLM_QK_S24],
				grp[K / LLM_QK_S24],
				back[K / LLM_QK_S24];
	uint64_t	m0,
				gm0;
	uint16_t	d;

	TEST_CHECK(llm_type_grouped(LLM_TYPE_SPARSE24) == LLM_TYPE_SPARSE24_G &&
			   llm_type_base(LLM_TYPE_SPARSE24_G) == LLM_TYPE_SPARSE24 && !llm_type_is_file_type(LLM_TYPE_SPARSE24_G) &&
			   llm_type_row_size(LLM_TYPE_SPARSE24_G, K) == llm_type_row_size(LLM_TYPE_SPARSE24, K),
			   "SPARSE24_G: SPARSE24's grouped type, of its size, never in a file");
	for (int j = 0; j < K; j++)
		x[j] = test_rng_uniform(-1.0f, 1.0f);
	llm_quantize_row(LLM_TYPE_SPARSE24, x, row, K);
	TEST_CHECK(llm_s24_groupable(row, K), "a quantized 2:4 row can be grouped");
	llm_group_row(LLM_TYPE_SPARSE24, row, grp, K);
	llm_dequant_row(LLM_TYPE_SPARSE24, row, y, K);
	llm_dequant_row(LLM_TYPE_SPARSE24_G, grp, yg, K);
	TEST_CHECK(memcmp(y, yg, sizeof(y)) == 0, "the grouped row decodes to the blocks' values");
	llm_ungroup_row(LLM_TYPE_SPARSE24_G, grp, back, K);
	llm_dequant_row(LLM_TYPE_SPARSE24, back, yg, K);
	TEST_CHECK(memcmp(y, yg, sizeof(y)) == 0, "and back to blocks with the same values");
	TEST_CHECK(memcmp(&grp[20], &row[20], sizeof(row[20])) == 0, "the last block, after the pieces, is left as it is");
	TEST_CHECK(llm_dot_row_ref(LLM_TYPE_SPARSE24_G, grp, x, K) == llm_dot_row_ref(LLM_TYPE_SPARSE24, row, x, K),
			   "the reference dot product of the grouped row is the blocks'");

	/* the first group: lane 1's scale is half 2's (block 1, d[0]); vector 0's first lane is half 0's values 0-3 */
	memcpy(&d, (const uint8_t *) grp + 2, sizeof(d));
	TEST_CHECK(d == row[1].d[0], "lane 1 of the first group's scales is half 2's");
	memcpy(&m0, row[0].mask, sizeof(m0));
	memcpy(&gm0, (const uint8_t *) grp + 32, sizeof(gm0));
	for (int j = 0; j < 4; j++)
		TEST_CHECK(((gm0 >> j) & 1) == (((m0 >> j) & 1) && y[j] != 0.0f), "vector 0's bit %d is half 0's value %d", j, j);

	/* three kept of one four: not groupable */
	memcpy(&m0, row[3].mask, sizeof(m0));
	m0 |= 0x7ull << 8;
	memcpy(row[3].mask, &m0, sizeof(m0));
	TEST_CHECK(!llm_s24_groupable(row, K), "a row with three kept in some four is not grouped");
}

int
main(void)
{
	test_rng_state = 0x9e3779b97f4a7c15ull;
	test_traits();
	test_repack_q5_0();
	test_grouped();
	test_own_quantizers();
	test_golden();
	test_hand_q4_k();
	test_k_scale_unpacking();
	test_hand_q6_k();
	test_hand_q8_0_q4_0();
	test_half();
	test_dot();
	test_quantize_error();
	test_quantize_zeros();
	test_quantize_bytes();
	test_sparse24();
	test_sparse24_grouped();
	return test_summary("quant");
}
