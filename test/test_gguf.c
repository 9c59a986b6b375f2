/*
 * test_gguf.c
 *		Tests of the GGUF reader and writer (src/engine/gguf.c, gguf_write.c).
 *
 * 1. A file with every metadata type, nested and string arrays and tensors of
 *    types F32, F16, Q8_0 and Q4_0 is written, read back and checked value by
 *    value and byte by byte; copying it through llm_gguf_writer_set_value
 *    gives the identical file.
 * 2. The real files in ../shared (stories260K, the GPT-2 vocabulary) open.
 * 3. Malformed images, built here from a valid hand-made one, one defect
 *    each, fail with the right status and a message naming the field;
 *    truncations at every byte fail cleanly; a seeded fuzz loop of random
 *    byte changes and truncations never crashes (run under ASan/valgrind).
 *
 * Run from the repository root (the shared files are found at ../shared).
 */
#include "gguf.h"
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmp_dir[256];

/* A path inside the test's temporary directory (a static buffer per slot). */
static const char *
tmp_path(const char *name)
{
	static char paths[8][512];
	static int	next;
	char	   *p = paths[next++ % 8];

	snprintf(p, 512, "%s/%s", tmp_dir, name);
	return p;
}

/* The whole content of a file (malloc'd), or NULL. */
static uint8_t *
read_file(const char *path, size_t *size)
{
	FILE	   *fp = fopen(path, "rb");
	uint8_t    *buf;
	long		n;

	if (fp == NULL)
		return NULL;
	fseek(fp, 0, SEEK_END);
	n = ftell(fp);
	fseek(fp, 0, SEEK_SET);
	buf = malloc(n > 0 ? (size_t) n : 1);
	if (buf != NULL && fread(buf, 1, (size_t) n, fp) != (size_t) n)
	{
		free(buf);
		buf = NULL;
	}
	fclose(fp);
	*size = (size_t) n;
	return buf;
}

/* Write size bytes of buf to path; true on success. */
static bool
write_file(const char *path, const void *buf, size_t size)
{
	FILE	   *fp = fopen(path, "wb");
	bool		ok;

	if (fp == NULL)
		return false;
	ok = fwrite(buf, 1, size, fp) == size;
	return fclose(fp) == 0 && ok;
}

/* Open a copy of the first len bytes of buf in an exactly sized allocation (so ASan sees overreads). */
static LlmStatus
open_copy(const uint8_t *buf, size_t len, LlmError *err)
{
	uint8_t    *copy = malloc(len > 0 ? len : 1);
	LlmGguf    *g = NULL;
	LlmStatus	st;

	memcpy(copy, buf, len);
	llm_error_clear(err);
	st = llm_gguf_open_memory(copy, len, &g, err);
	if (st == LLM_OK)
		llm_gguf_close(g);
	else if (g != NULL)
		st = LLM_ERR_BACKEND;	/* *out must be untouched on failure */
	free(copy);
	return st;
}

/* Whether a GGUF string equals the C string s. */
static bool
str_eq(LlmGgufStr s, const char *c)
{
	return s.len == strlen(c) && (s.len == 0 || memcmp(s.ptr, c, s.len) == 0);
}

/* ---- 1. write, read back, copy ---- */

/* Deterministic bytes for tensor data. */
static void
fill_bytes(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t) (i * 131 + seed * 17 + (i >> 3));
}

static float t_f32[8 * 3];
static uint16_t t_f16[16 * 2];
static uint8_t t_q8[2 * 2 * 34];
static uint8_t t_q4[2 * 2 * 18];
static float t_vec[5];
static float t_4d[2 * 3 * 2 * 2];

/* Add the tensors of the full test file to w. */
static void
add_test_tensors(LlmGgufWriter *w)
{
	const int64_t ne_f32[2] = {8, 3};
	const int64_t ne_f16[2] = {16, 2};
	const int64_t ne_q8[2] = {64, 2};
	const int64_t ne_q4[3] = {32, 2, 2};
	const int64_t ne_vec[1] = {5};
	const int64_t ne_4d[4] = {2, 3, 2, 2};

	for (int i = 0; i < 24; i++)
		t_f32[i] = (float) i * 0.5f - 3.0f;
	for (int i = 0; i < 32; i++)
		t_f16[i] = llm_fp32_to_fp16((float) i / 8.0f - 1.0f);
	fill_bytes(t_q8, sizeof(t_q8), 1);
	fill_bytes(t_q4, sizeof(t_q4), 2);
	for (int i = 0; i < 5; i++)
		t_vec[i] = (float) (i + 1);
	for (int i = 0; i < 24; i++)
		t_4d[i] = (float) -i;
	llm_gguf_writer_add_tensor(w, "t.f32", LLM_TYPE_F32, 2, ne_f32, t_f32);
	llm_gguf_writer_add_tensor(w, "t.f16", LLM_TYPE_F16, 2, ne_f16, t_f16);
	llm_gguf_writer_add_tensor(w, "t.q8_0", LLM_TYPE_Q8_0, 2, ne_q8, t_q8);
	llm_gguf_writer_add_tensor(w, "t.vec", LLM_TYPE_F32, 1, ne_vec, t_vec);
	llm_gguf_writer_add_tensor(w, "t.q4_0", LLM_TYPE_Q4_0, 3, ne_q4, t_q4);
	llm_gguf_writer_add_tensor(w, "t.4d", LLM_TYPE_F32, 4, ne_4d, t_4d);
}

static const uint8_t u8_data[] = {0, 1, 127, 128, 255};
static const uint8_t bool_data[] = {1, 0, 1};
static const uint8_t i16_data[] = {0x00, 0x80, 0xff, 0x7f, 0xfe, 0xff};	/* -32768, 32767, -2 */
static const uint8_t u64_data[] = {1, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
static const uint8_t f64_data[] = {0, 0, 0, 0, 0, 0, 0xf8, 0x3f};	/* 1.5 */
static const uint8_t i32_12[] = {1, 0, 0, 0, 2, 0, 0, 0};
static const uint8_t i32_3[] = {3, 0, 0, 0};

/* A numeric array value over raw little-endian bytes. */
static LlmGgufValue
num_array(LlmGgufType t, const uint8_t *data, uint64_t n)
{
	LlmGgufValue v;

	memset(&v, 0, sizeof(v));
	v.type = LLM_GGUF_ARRAY;
	v.arr_type = t;
	v.arr_len = n;
	v.arr_data = data;
	return v;
}

/* A scalar value. */
static LlmGgufValue
scalar(LlmGgufType t, uint64_t u, int64_t i, double f)
{
	LlmGgufValue v;

	memset(&v, 0, sizeof(v));
	v.type = t;
	if (t == LLM_GGUF_FLOAT32 || t == LLM_GGUF_FLOAT64)
		v.num.f = f;
	else if (t == LLM_GGUF_INT8 || t == LLM_GGUF_INT16 || t == LLM_GGUF_INT32 || t == LLM_GGUF_INT64)
		v.num.i = i;
	else
		v.num.u = u;
	return v;
}

/* A string value. */
static LlmGgufValue
str_value(const char *s)
{
	LlmGgufValue v;

	memset(&v, 0, sizeof(v));
	v.type = LLM_GGUF_STRING;
	v.str.ptr = s;
	v.str.len = strlen(s);
	return v;
}

/* Fill w with every kind of metadata value. */
static void
set_test_metadata(LlmGgufWriter *w)
{
	static const char *const strs[] = {"a", "", "h\xc3\xa9llo", "<s>"};
	static const float f32s[] = {1.5f, -2.0f, 1e-3f};
	static const int32_t i32s[] = {-1, 0, 2147483647, -2147483647 - 1};
	LlmGgufValue v;
	LlmGgufValue inner[3];
	LlmGgufValue inner_s[2];
	LlmGgufValue s_xy[2];
	LlmGgufValue s_z[1];
	LlmGgufValue deep[2];
	LlmGgufValue deep_mid[1];

	llm_gguf_writer_set_str(w, "general.architecture", "llama");
	llm_gguf_writer_set_u32(w, "t.u32", 0xDEADBEEFu);
	llm_gguf_writer_set_i32(w, "t.i32", -123456);
	llm_gguf_writer_set_f32(w, "t.f32", 3.25f);
	llm_gguf_writer_set_bool(w, "t.bool_t", true);
	llm_gguf_writer_set_bool(w, "t.bool_f", false);
	llm_gguf_writer_set_str(w, "t.str", "hello, world");
	llm_gguf_writer_set_str(w, "t.empty", "");
	v = scalar(LLM_GGUF_UINT8, 200, 0, 0);
	llm_gguf_writer_set_value(w, "t.u8", &v);
	v = scalar(LLM_GGUF_INT8, 0, -100, 0);
	llm_gguf_writer_set_value(w, "t.i8", &v);
	v = scalar(LLM_GGUF_UINT16, 60000, 0, 0);
	llm_gguf_writer_set_value(w, "t.u16", &v);
	v = scalar(LLM_GGUF_INT16, 0, -30000, 0);
	llm_gguf_writer_set_value(w, "t.i16", &v);
	v = scalar(LLM_GGUF_UINT64, UINT64_MAX, 0, 0);
	llm_gguf_writer_set_value(w, "t.u64", &v);
	v = scalar(LLM_GGUF_INT64, 0, INT64_MIN, 0);
	llm_gguf_writer_set_value(w, "t.i64", &v);
	v = scalar(LLM_GGUF_FLOAT64, 0, 0, 1e300);
	llm_gguf_writer_set_value(w, "t.f64_big", &v);
	v = scalar(LLM_GGUF_FLOAT64, 0, 0, 0.5);
	llm_gguf_writer_set_value(w, "t.f64", &v);
	v = scalar(LLM_GGUF_UINT32, 10000, 0, 0);
	llm_gguf_writer_set_value(w, "t.u32_small", &v);
	llm_gguf_writer_set_arr_str(w, "t.strs", strs, 4);
	llm_gguf_writer_set_arr_f32(w, "t.f32s", f32s, 3);
	llm_gguf_writer_set_arr_i32(w, "t.i32s", i32s, 4);
	llm_gguf_writer_set_arr_i32(w, "t.i32s_empty", NULL, 0);
	llm_gguf_writer_set_arr_str(w, "t.strs_empty", NULL, 0);
	v = num_array(LLM_GGUF_UINT8, u8_data, 5);
	llm_gguf_writer_set_value(w, "t.u8s", &v);
	v = num_array(LLM_GGUF_BOOL, bool_data, 3);
	llm_gguf_writer_set_value(w, "t.bools", &v);
	v = num_array(LLM_GGUF_INT16, i16_data, 3);
	llm_gguf_writer_set_value(w, "t.i16s", &v);
	v = num_array(LLM_GGUF_UINT64, u64_data, 2);
	llm_gguf_writer_set_value(w, "t.u64s", &v);
	v = num_array(LLM_GGUF_FLOAT64, f64_data, 1);
	llm_gguf_writer_set_value(w, "t.f64s", &v);

	/* [[1, 2], [3], []] as int32 */
	inner[0] = num_array(LLM_GGUF_INT32, i32_12, 2);
	inner[1] = num_array(LLM_GGUF_INT32, i32_3, 1);
	inner[2] = num_array(LLM_GGUF_INT32, NULL, 0);
	memset(&v, 0, sizeof(v));
	v.type = LLM_GGUF_ARRAY;
	v.arr_type = LLM_GGUF_ARRAY;
	v.arr_len = 3;
	v.arr_items = inner;
	llm_gguf_writer_set_value(w, "t.nested", &v);

	/* [["x", "y"], ["z"]] */
	s_xy[0] = str_value("x");
	s_xy[1] = str_value("y");
	s_z[0] = str_value("z");
	memset(inner_s, 0, sizeof(inner_s));
	inner_s[0].type = inner_s[1].type = LLM_GGUF_ARRAY;
	inner_s[0].arr_type = inner_s[1].arr_type = LLM_GGUF_STRING;
	inner_s[0].arr_len = 2;
	inner_s[0].arr_items = s_xy;
	inner_s[1].arr_len = 1;
	inner_s[1].arr_items = s_z;
	memset(&v, 0, sizeof(v));
	v.type = LLM_GGUF_ARRAY;
	v.arr_type = LLM_GGUF_ARRAY;
	v.arr_len = 2;
	v.arr_items = inner_s;
	llm_gguf_writer_set_value(w, "t.nested_strs", &v);

	/* [[[1, 2], [3]]]: three levels */
	deep[0] = inner[0];
	deep[1] = inner[1];
	memset(deep_mid, 0, sizeof(deep_mid));
	deep_mid[0].type = LLM_GGUF_ARRAY;
	deep_mid[0].arr_type = LLM_GGUF_ARRAY;
	deep_mid[0].arr_len = 2;
	deep_mid[0].arr_items = deep;
	memset(&v, 0, sizeof(v));
	v.type = LLM_GGUF_ARRAY;
	v.arr_type = LLM_GGUF_ARRAY;
	v.arr_len = 1;
	v.arr_items = deep_mid;
	llm_gguf_writer_set_value(w, "t.deep", &v);

	/* replaced: the string wins, one key */
	llm_gguf_writer_set_u32(w, "t.replace", 1);
	llm_gguf_writer_set_str(w, "t.replace", "two");
}

#define N_TEST_KEYS 31

/* Check every value and tensor of the full test file. */
static void
check_test_file(const LlmGguf *g)
{
	const LlmGgufValue *v;
	const LlmGgufTensor *t;
	LlmError	err;
	uint32_t	u32;
	int64_t		i64;
	float		f32;
	bool		b;
	char	   *s;

	TEST_CHECK(g->version == 3, "version %u", g->version);
	TEST_CHECK(g->n_kv == N_TEST_KEYS, "n_kv %llu", (unsigned long long) g->n_kv);
	TEST_CHECK(g->n_tensors == 6, "n_tensors %llu", (unsigned long long) g->n_tensors);
	TEST_CHECK(g->alignment == 32, "alignment %llu", (unsigned long long) g->alignment);
	TEST_CHECK(g->data_offset % 32 == 0, "data_offset %llu", (unsigned long long) g->data_offset);
	TEST_CHECK(llm_gguf_get(g, "general.alignment") == NULL, "general.alignment written though not set");
	TEST_CHECK(strcmp(g->kv[0].key, "general.architecture") == 0, "first key %s", g->kv[0].key);

	v = llm_gguf_get(g, "general.architecture");
	TEST_CHECK(v != NULL && v->type == LLM_GGUF_STRING && str_eq(v->str, "llama"), "architecture");
	v = llm_gguf_get(g, "t.u32");
	TEST_CHECK(v != NULL && v->type == LLM_GGUF_UINT32 && v->num.u == 0xDEADBEEFu, "t.u32");
	v = llm_gguf_get(g, "t.i32");
	TEST_CHECK(v != NULL && v->type == LLM_GGUF_INT32 && v->num.i == -123456, "t.i32");
	v = llm_gguf_get(g, "t.f32");
	TEST_CHECK(v != NULL && v->type == LLM_GGUF_FLOAT32 && v->num.f == 3.25, "t.f32");
	v = llm_gguf_get(g, "t.bool_t");
	TEST_CHECK(v != NULL && v->type == LLM_GGUF_BOOL && v->num.u == 1, "t.bool_t");
	v = llm_gguf_get(g, "t.bool_f");
	TEST_CHECK(v != NULL && v->type == LLM_GGUF_BOOL && v->num.u == 0, "t.bool_f");
	v = llm_gguf_get(g, "t.str");
	TEST_CHECK(v != NULL && v->type == LLM_GGUF_STRING && str_eq(v->str, "hello, world"), "t.str");
	v = llm_gguf_get(g, "t.empty");
	TEST_CHECK(v != NULL && v->type == LLM_GGUF_STRING && v->str.len == 0, "t.empty");
	v = llm_gguf_get(g, "t.u8");
	TEST_CHECK(v != NULL && v->type == LLM_GGUF_UINT8 && v->num.u == 200, "t.u8");
	v = llm_gguf_get(g, "t.i8");
	TEST_CHECK(v != NULL && v->type == LLM_GGUF_INT8 && v->num.i == -100, "t.i8");
	v = llm_gguf_get(g, "t.u16");
	TEST_CHECK(v != NULL && v->type == LLM_GGUF_UINT16 && v->num.u == 60000, "t.u16");
	v = llm_gguf_get(g, "t.i16");
	TEST_CHECK(v != NULL && v->type == LLM_GGUF_INT16 && v->num.i == -30000, "t.i16");
	v = llm_gguf_get(g, "t.u64");
	TEST_CHECK(v != NULL && v->type == LLM_GGUF_UINT64 && v->num.u == UINT64_MAX, "t.u64");
	v = llm_gguf_get(g, "t.i64");
	TEST_CHECK(v != NULL && v->type == LLM_GGUF_INT64 && v->num.i == INT64_MIN, "t.i64");
	v = llm_gguf_get(g, "t.f64_big");
	TEST_CHECK(v != NULL && v->type == LLM_GGUF_FLOAT64 && v->num.f == 1e300, "t.f64_big");
	v = llm_gguf_get(g, "t.replace");
	TEST_CHECK(v != NULL && v->type == LLM_GGUF_STRING && str_eq(v->str, "two"), "t.replace");

	/* string array */
	v = llm_gguf_get(g, "t.strs");
	TEST_CHECK(v != NULL && v->type == LLM_GGUF_ARRAY && v->arr_type == LLM_GGUF_STRING &&
			   v->arr_len == 4 && v->arr_items != NULL, "t.strs");
	if (v != NULL && v->arr_items != NULL && v->arr_len == 4)
	{
		TEST_CHECK(str_eq(v->arr_items[0].str, "a") && v->arr_items[0].type == LLM_GGUF_STRING, "strs[0]");
		TEST_CHECK(v->arr_items[1].str.len == 0, "strs[1]");
		TEST_CHECK(str_eq(v->arr_items[2].str, "h\xc3\xa9llo"), "strs[2]");
		TEST_CHECK(str_eq(v->arr_items[3].str, "<s>"), "strs[3]");
	}
	v = llm_gguf_get(g, "t.strs_empty");
	TEST_CHECK(v != NULL && v->arr_type == LLM_GGUF_STRING && v->arr_len == 0, "t.strs_empty");
	v = llm_gguf_get(g, "t.i32s_empty");
	TEST_CHECK(v != NULL && v->arr_type == LLM_GGUF_INT32 && v->arr_len == 0 &&
			   llm_gguf_arr_int(v, 0) == 0, "t.i32s_empty");

	/* numeric arrays through the accessors */
	v = llm_gguf_get(g, "t.f32s");
	TEST_CHECK(v != NULL && v->arr_type == LLM_GGUF_FLOAT32 && v->arr_len == 3 &&
			   llm_gguf_arr_float(v, 0) == 1.5 && llm_gguf_arr_float(v, 1) == -2.0 &&
			   llm_gguf_arr_float(v, 2) == (double) 1e-3f && llm_gguf_arr_int(v, 0) == 1 &&
			   llm_gguf_arr_float(v, 3) == 0.0, "t.f32s");
	v = llm_gguf_get(g, "t.i32s");
	TEST_CHECK(v != NULL && v->arr_type == LLM_GGUF_INT32 && v->arr_len == 4 &&
			   llm_gguf_arr_int(v, 0) == -1 && llm_gguf_arr_int(v, 1) == 0 &&
			   llm_gguf_arr_int(v, 2) == 2147483647 && llm_gguf_arr_int(v, 3) == -2147483648LL &&
			   llm_gguf_arr_float(v, 0) == -1.0 && llm_gguf_arr_int(v, 4) == 0, "t.i32s");
	v = llm_gguf_get(g, "t.u8s");
	TEST_CHECK(v != NULL && v->arr_type == LLM_GGUF_UINT8 && v->arr_len == 5 &&
			   llm_gguf_arr_int(v, 3) == 128 && llm_gguf_arr_int(v, 4) == 255, "t.u8s");
	v = llm_gguf_get(g, "t.bools");
	TEST_CHECK(v != NULL && v->arr_type == LLM_GGUF_BOOL && v->arr_len == 3 &&
			   llm_gguf_arr_int(v, 0) == 1 && llm_gguf_arr_int(v, 1) == 0, "t.bools");
	v = llm_gguf_get(g, "t.i16s");
	TEST_CHECK(v != NULL && v->arr_type == LLM_GGUF_INT16 && v->arr_len == 3 &&
			   llm_gguf_arr_int(v, 0) == -32768 && llm_gguf_arr_int(v, 1) == 32767 &&
			   llm_gguf_arr_int(v, 2) == -2, "t.i16s");
	v = llm_gguf_get(g, "t.u64s");
	TEST_CHECK(v != NULL && v->arr_type == LLM_GGUF_UINT64 && v->arr_len == 2 &&
			   llm_gguf_arr_int(v, 0) == 1 && llm_gguf_arr_int(v, 1) == INT64_MAX &&
			   llm_gguf_arr_float(v, 1) == 18446744073709551615.0, "t.u64s");
	v = llm_gguf_get(g, "t.f64s");
	TEST_CHECK(v != NULL && v->arr_type == LLM_GGUF_FLOAT64 && llm_gguf_arr_float(v, 0) == 1.5,
			   "t.f64s");

	/* nested arrays */
	v = llm_gguf_get(g, "t.nested");
	TEST_CHECK(v != NULL && v->arr_type == LLM_GGUF_ARRAY && v->arr_len == 3 && v->arr_items != NULL,
			   "t.nested");
	if (v != NULL && v->arr_items != NULL && v->arr_len == 3)
	{
		const LlmGgufValue *a = v->arr_items;

		TEST_CHECK(a[0].type == LLM_GGUF_ARRAY && a[0].arr_type == LLM_GGUF_INT32 && a[0].arr_len == 2 &&
				   llm_gguf_arr_int(&a[0], 0) == 1 && llm_gguf_arr_int(&a[0], 1) == 2, "nested[0]");
		TEST_CHECK(a[1].arr_len == 1 && llm_gguf_arr_int(&a[1], 0) == 3, "nested[1]");
		TEST_CHECK(a[2].type == LLM_GGUF_ARRAY && a[2].arr_len == 0, "nested[2]");
	}
	v = llm_gguf_get(g, "t.nested_strs");
	TEST_CHECK(v != NULL && v->arr_len == 2 && v->arr_items != NULL &&
			   v->arr_items[0].arr_type == LLM_GGUF_STRING && v->arr_items[0].arr_len == 2 &&
			   str_eq(v->arr_items[0].arr_items[0].str, "x") &&
			   str_eq(v->arr_items[0].arr_items[1].str, "y") &&
			   v->arr_items[1].arr_len == 1 && str_eq(v->arr_items[1].arr_items[0].str, "z"),
			   "t.nested_strs");
	v = llm_gguf_get(g, "t.deep");
	TEST_CHECK(v != NULL && v->arr_len == 1 && v->arr_items != NULL &&
			   v->arr_items[0].arr_len == 2 && v->arr_items[0].arr_items != NULL &&
			   llm_gguf_arr_int(&v->arr_items[0].arr_items[1], 0) == 3, "t.deep");

	/* typed getters */
	TEST_CHECK(llm_gguf_get_u32(g, "t.u32", &u32, &err) == LLM_OK && u32 == 0xDEADBEEFu, "get_u32");
	TEST_CHECK(llm_gguf_get_u32(g, "t.u8", &u32, &err) == LLM_OK && u32 == 200, "get_u32 u8");
	TEST_CHECK(llm_gguf_get_u32(g, "t.i8", &u32, &err) == LLM_ERR_FORMAT &&
			   strstr(err.msg, "\"t.i8\"") != NULL, "get_u32 negative: %s", err.msg);
	TEST_CHECK(llm_gguf_get_u32(g, "t.u64", &u32, &err) == LLM_ERR_FORMAT, "get_u32 u64 max");
	TEST_CHECK(llm_gguf_get_u32(g, "t.str", &u32, &err) == LLM_ERR_FORMAT &&
			   strstr(err.msg, "\"t.str\"") && strstr(err.msg, "string"), "get_u32 str: %s", err.msg);
	TEST_CHECK(llm_gguf_get_u32(g, "t.bool_t", &u32, &err) == LLM_ERR_FORMAT, "get_u32 bool");
	TEST_CHECK(llm_gguf_get_u32(g, "t.f32", &u32, &err) == LLM_ERR_FORMAT, "get_u32 float");
	TEST_CHECK(llm_gguf_get_u32(g, "no.such.key", &u32, &err) == LLM_ERR_NOT_FOUND &&
			   strstr(err.msg, "no.such.key") != NULL, "get_u32 missing");
	TEST_CHECK(llm_gguf_get_i64(g, "t.i64", &i64, &err) == LLM_OK && i64 == INT64_MIN, "get_i64");
	TEST_CHECK(llm_gguf_get_i64(g, "t.u32", &i64, &err) == LLM_OK && i64 == 0xDEADBEEFLL, "get_i64 u32");
	TEST_CHECK(llm_gguf_get_i64(g, "t.i16", &i64, &err) == LLM_OK && i64 == -30000, "get_i64 i16");
	TEST_CHECK(llm_gguf_get_i64(g, "t.u64", &i64, &err) == LLM_ERR_FORMAT &&
			   strstr(err.msg, "\"t.u64\"") != NULL, "get_i64 u64 max");
	TEST_CHECK(llm_gguf_get_f32(g, "t.f32", &f32, &err) == LLM_OK && f32 == 3.25f, "get_f32");
	TEST_CHECK(llm_gguf_get_f32(g, "t.f64", &f32, &err) == LLM_OK && f32 == 0.5f, "get_f32 f64");
	TEST_CHECK(llm_gguf_get_f32(g, "t.u32_small", &f32, &err) == LLM_OK && f32 == 10000.0f,
			   "get_f32 small integer");
	TEST_CHECK(llm_gguf_get_f32(g, "t.f64_big", &f32, &err) == LLM_ERR_FORMAT &&
			   strstr(err.msg, "\"t.f64_big\"") != NULL, "get_f32 out of range");
	TEST_CHECK(llm_gguf_get_f32(g, "t.u32", &f32, &err) == LLM_ERR_FORMAT, "get_f32 big integer");
	TEST_CHECK(llm_gguf_get_f32(g, "t.str", &f32, &err) == LLM_ERR_FORMAT, "get_f32 str");
	TEST_CHECK(llm_gguf_get_bool(g, "t.bool_t", &b, &err) == LLM_OK && b, "get_bool true");
	TEST_CHECK(llm_gguf_get_bool(g, "t.bool_f", &b, &err) == LLM_OK && !b, "get_bool false");
	TEST_CHECK(llm_gguf_get_bool(g, "t.u8", &b, &err) == LLM_ERR_FORMAT &&
			   strstr(err.msg, "\"t.u8\"") != NULL, "get_bool u8");
	s = NULL;
	TEST_CHECK(llm_gguf_get_str(g, "t.str", &s, &err) == LLM_OK && s != NULL &&
			   strcmp(s, "hello, world") == 0, "get_str");
	free(s);
	s = NULL;
	TEST_CHECK(llm_gguf_get_str(g, "t.empty", &s, &err) == LLM_OK && s != NULL && s[0] == '\0',
			   "get_str empty");
	free(s);
	TEST_CHECK(llm_gguf_get_str(g, "t.u32", &s, &err) == LLM_ERR_FORMAT, "get_str u32");
	TEST_CHECK(llm_gguf_get_str(g, "missing", &s, &err) == LLM_ERR_NOT_FOUND, "get_str missing");
	v = NULL;
	TEST_CHECK(llm_gguf_get_arr(g, "t.strs", LLM_GGUF_STRING, &v, &err) == LLM_OK && v != NULL &&
			   v->arr_len == 4, "get_arr");
	TEST_CHECK(llm_gguf_get_arr(g, "t.strs", LLM_GGUF_INT32, &v, &err) == LLM_ERR_FORMAT &&
			   strstr(err.msg, "\"t.strs\"") != NULL && strstr(err.msg, "int32") != NULL,
			   "get_arr wrong element type: %s", err.msg);
	TEST_CHECK(llm_gguf_get_arr(g, "t.u32", LLM_GGUF_INT32, &v, &err) == LLM_ERR_FORMAT,
			   "get_arr of a scalar");
	TEST_CHECK(llm_gguf_get_arr(g, "nope", LLM_GGUF_INT32, &v, &err) == LLM_ERR_NOT_FOUND,
			   "get_arr missing");
	TEST_CHECK(llm_gguf_arr_int(NULL, 0) == 0 && llm_gguf_arr_float(llm_gguf_get(g, "t.u32"), 0) == 0.0,
			   "accessors on non-arrays");
	TEST_CHECK(llm_gguf_get(g, "nope") == NULL && llm_gguf_get(g, "") == NULL, "get missing");

	/* tensors */
	{
		static const struct
		{
			const char *name;
			LlmType		type;
			int			n_dims;
			int64_t		ne[4];
			const void *data;
			uint64_t	size;
		}			want[] = {
			{"t.f32", LLM_TYPE_F32, 2, {8, 3, 1, 1}, t_f32, sizeof(t_f32)},
			{"t.f16", LLM_TYPE_F16, 2, {16, 2, 1, 1}, t_f16, sizeof(t_f16)},
			{"t.q8_0", LLM_TYPE_Q8_0, 2, {64, 2, 1, 1}, t_q8, sizeof(t_q8)},
			{"t.vec", LLM_TYPE_F32, 1, {5, 1, 1, 1}, t_vec, sizeof(t_vec)},
			{"t.q4_0", LLM_TYPE_Q4_0, 3, {32, 2, 2, 1}, t_q4, sizeof(t_q4)},
			{"t.4d", LLM_TYPE_F32, 4, {2, 3, 2, 2}, t_4d, sizeof(t_4d)},
		};

		for (int i = 0; i < 6; i++)
		{
			t = llm_gguf_tensor(g, want[i].name);
			TEST_CHECK(t != NULL && t == &g->tensors[i], "tensor %s", want[i].name);
			if (t == NULL)
				continue;
			TEST_CHECK(strcmp(t->name, want[i].name) == 0 && t->type == want[i].type &&
					   t->n_dims == want[i].n_dims && t->ne[0] == want[i].ne[0] &&
					   t->ne[1] == want[i].ne[1] && t->ne[2] == want[i].ne[2] &&
					   t->ne[3] == want[i].ne[3], "tensor %s shape", want[i].name);
			TEST_CHECK(t->size == want[i].size &&
					   t->size == llm_type_row_size(t->type, t->ne[0]) * (uint64_t) (t->ne[1] * t->ne[2] * t->ne[3]),
					   "tensor %s size %llu", want[i].name, (unsigned long long) t->size);
			TEST_CHECK(t->offset % 32 == 0 &&
					   (const uint8_t *) t->data == g->map + g->data_offset + t->offset &&
					   ((const uint8_t *) t->data - g->map) % 32 == 0, "tensor %s offset", want[i].name);
			TEST_CHECK(memcmp(t->data, want[i].data, (size_t) want[i].size) == 0,
					   "tensor %s data", want[i].name);
		}
		TEST_CHECK(llm_gguf_tensor(g, "t.nope") == NULL && llm_gguf_tensor(g, "") == NULL,
				   "missing tensor");
	}
}

/* Write the full test file to path; true on success. */
static bool
write_test_file(const char *path)
{
	LlmGgufWriter *w = llm_gguf_writer_new();
	LlmError	err;
	LlmStatus	st;

	set_test_metadata(w);
	add_test_tensors(w);
	st = llm_gguf_writer_save(w, path, &err);
	TEST_CHECK(st == LLM_OK, "save: %s", err.msg);
	llm_gguf_writer_free(w);
	return st == LLM_OK;
}

/* Test 1: write, read back (mapped and from memory), copy through set_value. */
static void
test_write_read(void)
{
	const char *path = tmp_path("full.gguf");
	const char *copy_path = tmp_path("copy.gguf");
	LlmGguf    *g = NULL;
	LlmGguf    *gm = NULL;
	LlmError	err;
	uint8_t    *img;
	uint8_t    *img2;
	size_t		size;
	size_t		size2;

	if (!write_test_file(path))
		return;
	TEST_CHECK(llm_gguf_open(path, &g, &err) == LLM_OK, "open: %s", err.msg);
	if (g == NULL)
		return;
	check_test_file(g);

	img = read_file(path, &size);
	TEST_CHECK(img != NULL && size == g->file_size, "file size");
	TEST_CHECK(size % 32 == 0, "the file ends padded to the alignment (%zu)", size);
	TEST_CHECK(llm_gguf_open_memory(img, size, &gm, &err) == LLM_OK, "open_memory: %s", err.msg);
	if (gm != NULL)
	{
		check_test_file(gm);
		llm_gguf_close(gm);
	}

	/* copy every value and tensor: the bytes must be identical */
	{
		LlmGgufWriter *w = llm_gguf_writer_new();

		for (uint64_t i = 0; i < g->n_kv; i++)
			llm_gguf_writer_set_value(w, g->kv[i].key, &g->kv[i].value);
		for (uint64_t i = 0; i < g->n_tensors; i++)
		{
			const LlmGgufTensor *t = &g->tensors[i];

			llm_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data);
		}
		TEST_CHECK(llm_gguf_writer_save(w, copy_path, &err) == LLM_OK, "save copy: %s", err.msg);
		llm_gguf_writer_free(w);
		img2 = read_file(copy_path, &size2);
		TEST_CHECK(img2 != NULL && size2 == size && memcmp(img, img2, size) == 0,
				   "copy through set_value is byte-identical (%zu vs %zu bytes)", size2, size);
		free(img2);
	}
	llm_gguf_close(g);
	free(img);
	unlink(copy_path);
}

/* Writer: alignment set by the caller, no tensors, and errors reported at save. */
static void
test_writer_misc(void)
{
	const char *path = tmp_path("misc.gguf");
	const int64_t ne16[2] = {16, 1};
	const int64_t ne32[1] = {32};
	const int64_t ne3[1] = {3};
	uint8_t		data[64] = {0};
	LlmGgufWriter *w;
	LlmGguf    *g = NULL;
	LlmError	err;
	LlmGgufValue v;

	/* general.alignment 64 */
	w = llm_gguf_writer_new();
	llm_gguf_writer_set_u32(w, "general.alignment", 64);
	llm_gguf_writer_add_tensor(w, "x", LLM_TYPE_F32, 1, ne3, data);
	llm_gguf_writer_add_tensor(w, "y", LLM_TYPE_F32, 1, ne3, data);
	TEST_CHECK(llm_gguf_writer_save(w, path, &err) == LLM_OK, "save aligned 64: %s", err.msg);
	llm_gguf_writer_free(w);
	TEST_CHECK(llm_gguf_open(path, &g, &err) == LLM_OK, "open aligned 64: %s", err.msg);
	if (g != NULL)
	{
		TEST_CHECK(g->alignment == 64 && g->data_offset % 64 == 0 && g->n_tensors == 2 &&
				   g->tensors[1].offset == 64, "alignment 64 honoured");
		llm_gguf_close(g);
		g = NULL;
	}

	/* metadata only: no padding, still readable */
	w = llm_gguf_writer_new();
	llm_gguf_writer_set_str(w, "general.architecture", "gpt2");
	TEST_CHECK(llm_gguf_writer_save(w, path, &err) == LLM_OK, "save metadata only: %s", err.msg);
	llm_gguf_writer_free(w);
	TEST_CHECK(llm_gguf_open(path, &g, &err) == LLM_OK && g->n_tensors == 0 && g->n_kv == 1,
			   "open metadata only: %s", err.msg);
	llm_gguf_close(g);
	g = NULL;

	/* errors recorded by setters, reported by save, no file written */
	unlink(path);
	w = llm_gguf_writer_new();
	llm_gguf_writer_add_tensor(w, "q", LLM_TYPE_Q8_0, 2, ne16, data);
	TEST_CHECK(llm_gguf_writer_save(w, path, &err) == LLM_ERR_INVALID &&
			   strstr(err.msg, "\"q\"") != NULL && strstr(err.msg, "block") != NULL,
			   "bad block size reported: %s", err.msg);
	TEST_CHECK(access(path, F_OK) != 0, "no file after a failed save");
	llm_gguf_writer_free(w);

	w = llm_gguf_writer_new();
	llm_gguf_writer_add_tensor(w, "q", LLM_TYPE_Q8_0, 1, ne32, data);
	llm_gguf_writer_add_tensor(w, "q", LLM_TYPE_Q8_0, 1, ne32, data);
	TEST_CHECK(llm_gguf_writer_save(w, path, &err) == LLM_ERR_INVALID &&
			   strstr(err.msg, "duplicate tensor name \"q\"") != NULL, "duplicate tensor: %s", err.msg);
	llm_gguf_writer_free(w);

	w = llm_gguf_writer_new();
	llm_gguf_writer_add_tensor(w, "u", (LlmType) 99, 1, ne32, data);
	TEST_CHECK(llm_gguf_writer_save(w, path, &err) == LLM_ERR_INVALID &&
			   strstr(err.msg, "\"u\"") != NULL, "unknown type: %s", err.msg);
	llm_gguf_writer_free(w);

	w = llm_gguf_writer_new();
	memset(&v, 0, sizeof(v));
	v.type = (LlmGgufType) 13;
	llm_gguf_writer_set_value(w, "bad.type", &v);
	TEST_CHECK(llm_gguf_writer_save(w, path, &err) == LLM_ERR_INVALID &&
			   strstr(err.msg, "\"bad.type\"") != NULL, "bad value type: %s", err.msg);
	llm_gguf_writer_free(w);

	w = llm_gguf_writer_new();
	llm_gguf_writer_set_u32(w, "", 1);
	TEST_CHECK(llm_gguf_writer_save(w, path, &err) == LLM_ERR_INVALID &&
			   strstr(err.msg, "empty") != NULL, "empty key: %s", err.msg);
	llm_gguf_writer_free(w);

	w = llm_gguf_writer_new();
	llm_gguf_writer_set_u32(w, "general.alignment", 3);
	TEST_CHECK(llm_gguf_writer_save(w, path, &err) == LLM_ERR_INVALID &&
			   strstr(err.msg, "general.alignment") != NULL, "bad alignment: %s", err.msg);
	llm_gguf_writer_free(w);

	w = llm_gguf_writer_new();
	TEST_CHECK(llm_gguf_writer_save(w, tmp_path("no/such/dir/x.gguf"), &err) == LLM_ERR_IO &&
			   strstr(err.msg, "no/such/dir") != NULL, "save to a bad path: %s", err.msg);
	llm_gguf_writer_free(w);
	llm_gguf_writer_free(NULL);
	unlink(path);
}

/* ---- 2. the real files ---- */

/* Test 2: stories260K and the GPT-2 vocabulary. */
static void
test_real_files(void)
{
	char		path[512];
	LlmGguf    *g = NULL;
	LlmError	err;
	const LlmGgufValue *v;
	const LlmGgufTensor *t;
	uint32_t	u32 = 0;
	float		eps = 0;
	uint64_t	total = 0;

	snprintf(path, sizeof(path), "%s/models/stories260K.gguf", test_shared_dir());
	TEST_CHECK(llm_gguf_open(path, &g, &err) == LLM_OK, "open %s: %s", path, err.msg);
	if (g != NULL)
	{
		TEST_CHECK(g->n_tensors == 48, "stories260K tensors %llu", (unsigned long long) g->n_tensors);
		TEST_CHECK(g->n_kv == 19, "stories260K keys %llu", (unsigned long long) g->n_kv);
		TEST_CHECK(llm_gguf_get_u32(g, "llama.embedding_length", &u32, &err) == LLM_OK && u32 == 64,
				   "embedding_length %u", u32);
		TEST_CHECK(llm_gguf_get_u32(g, "llama.block_count", &u32, &err) == LLM_OK && u32 == 5,
				   "block_count");
		TEST_CHECK(llm_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &eps, &err) == LLM_OK &&
				   fabsf(eps - 1e-5f) < 1e-9f, "rms epsilon");
		t = llm_gguf_tensor(g, "token_embd.weight");
		TEST_CHECK(t != NULL && t->type == LLM_TYPE_F32 && t->n_dims == 2 && t->ne[0] == 64 &&
				   t->ne[1] == 512 && t->size == 64 * 512 * 4 && t->offset == 0,
				   "token_embd.weight");
		TEST_CHECK(llm_gguf_tensor(g, "blk.4.ffn_norm.weight") != NULL, "blk.4.ffn_norm.weight");
		TEST_CHECK(llm_gguf_get_arr(g, "tokenizer.ggml.tokens", LLM_GGUF_STRING, &v, &err) == LLM_OK &&
				   v->arr_len == 512 && str_eq(v->arr_items[1].str, "<s>") &&
				   str_eq(v->arr_items[0].str, "<unk>"), "tokens");
		TEST_CHECK(llm_gguf_get_arr(g, "tokenizer.ggml.scores", LLM_GGUF_FLOAT32, &v, &err) == LLM_OK &&
				   v->arr_len == 512, "scores");
		TEST_CHECK(llm_gguf_get_arr(g, "tokenizer.ggml.token_type", LLM_GGUF_INT32, &v, &err) == LLM_OK &&
				   v->arr_len == 512 && llm_gguf_arr_int(v, 0) == 2 && llm_gguf_arr_int(v, 1) == 3,
				   "token_type");
		for (uint64_t i = 0; i < g->n_tensors; i++)
			total += g->tensors[i].size;
		TEST_CHECK(g->data_offset + total == g->file_size, "tensor data fills the file");
		llm_gguf_close(g);
		g = NULL;
	}

	snprintf(path, sizeof(path), "%s/vocab/ggml-vocab-gpt-2.gguf", test_shared_dir());
	TEST_CHECK(llm_gguf_open(path, &g, &err) == LLM_OK, "open %s: %s", path, err.msg);
	if (g != NULL)
	{
		TEST_CHECK(g->n_tensors == 0, "gpt-2 vocab has no tensors");
		TEST_CHECK(llm_gguf_get_arr(g, "tokenizer.ggml.tokens", LLM_GGUF_STRING, &v, &err) == LLM_OK &&
				   v->arr_len == 50257 && str_eq(v->arr_items[0].str, "!"), "gpt-2 tokens");
		TEST_CHECK(llm_gguf_get_arr(g, "tokenizer.ggml.merges", LLM_GGUF_STRING, &v, &err) == LLM_OK &&
				   v->arr_len == 50000 && str_eq(v->arr_items[0].str, "\xc4\xa0 t"), "gpt-2 merges");
		TEST_CHECK(llm_gguf_get_u32(g, "tokenizer.ggml.bos_token_id", &u32, &err) == LLM_OK &&
				   u32 == 50256, "gpt-2 bos");
		llm_gguf_close(g);
	}
}

/* ---- 3. malformed images ---- */

/* A growing byte image. */
typedef struct Img
{
	uint8_t    *d;
	size_t		len;
	size_t		cap;
} Img;

/* Append n bytes. */
static void
img_put(Img *m, const void *p, size_t n)
{
	if (m->len + n > m->cap)
	{
		m->cap = (m->len + n) * 2 + 64;
		m->d = realloc(m->d, m->cap);
	}
	memcpy(m->d + m->len, p, n);
	m->len += n;
}

/* Append a little-endian integer of n bytes. */
static void
img_le(Img *m, uint64_t v, int n)
{
	uint8_t		b[8];

	for (int i = 0; i < n; i++)
		b[i] = (uint8_t) (v >> (8 * i));
	img_put(m, b, (size_t) n);
}

/* Append a GGUF string. */
static void
img_str(Img *m, const char *s)
{
	img_le(m, strlen(s), 8);
	img_put(m, s, strlen(s));
}

/* One defect each; M_NONE is the valid image. */
typedef enum Mut
{
	M_NONE,
	M_MAGIC, M_VERSION0, M_VERSION1, M_VERSION4, M_VERSION_BE,
	M_NKV_HUGE, M_NKV_40, M_NKV_1000, M_NT_HUGE, M_NT_40, M_NT_1000,
	M_KEYLEN_HUGE, M_KEY_LONG, M_EMPTY_KEY, M_KEY_NUL, M_DUP_KEY, M_BAD_TYPE,
	M_STRLEN_HUGE, M_STRLEN_40, M_BOOL2,
	M_ARRLEN_HUGE, M_ARRLEN_40, M_ARR_BAD_ELEM, M_DEEP, M_INNER_LEN_HUGE,
	M_STRS_LEN_HUGE, M_STRS_ELEM_LEN, M_BOOLARR2,
	M_ALIGN0, M_ALIGN3, M_ALIGN_TYPE,
	M_NDIMS0, M_NDIMS5, M_DIM0, M_DIM_OVF, M_DIM_NEG, M_SIZE_OVF,
	M_TYPE99, M_BLOCK, M_MISALIGN, M_OVERLAP, M_PAST_END, M_OFFSET_HUGE,
	M_DUP_TENSOR, M_EMPTY_TENSOR_NAME, M_TENSOR_NAME_LONG,
	M_COUNT
} Mut;

/* Append one tensor info. */
static void
img_tensor(Img *m, const char *name, int n_dims, const uint64_t *ne, uint32_t type, uint64_t offset)
{
	img_str(m, name);
	img_le(m, (uint64_t) n_dims, 4);
	for (int d = 0; d < n_dims; d++)
		img_le(m, ne[d], 8);
	img_le(m, type, 4);
	img_le(m, offset, 8);
}

/*
 * The hand-made image with defect mut: 8 keys; tensors "a" (F32 8x2, offset
 * 0, 64 bytes), "b" (Q8_0 32x1, offset 64, 34 bytes), "c" (F16 4x1x1x2,
 * offset 128, 16 bytes); the file ends with the last tensor's data.
 */
static Img
build_image(Mut mut)
{
	Img			m = {0};
	char		longname[2001];

	memset(longname, 'k', 2000);
	longname[2000] = '\0';

	/* header */
	img_le(&m, mut == M_MAGIC ? 0x46554746u : LLM_GGUF_MAGIC, 4);
	img_le(&m, mut == M_VERSION0 ? 0 : mut == M_VERSION1 ? 1 : mut == M_VERSION4 ? 4 :
		   mut == M_VERSION_BE ? 0x03000000u : 3, 4);
	img_le(&m, mut == M_NT_HUGE ? (uint64_t) 1 << 63 : mut == M_NT_40 ? (uint64_t) 1 << 40 :
		   mut == M_NT_1000 ? 1000 : 3, 8);
	img_le(&m, mut == M_NKV_HUGE ? (uint64_t) 1 << 63 : mut == M_NKV_40 ? (uint64_t) 1 << 40 :
		   mut == M_NKV_1000 ? 1000 : 8, 8);

	/* 0: general.architecture = "llama" */
	img_str(&m, "general.architecture");
	img_le(&m, LLM_GGUF_STRING, 4);
	if (mut == M_STRLEN_HUGE || mut == M_STRLEN_40)
	{
		img_le(&m, mut == M_STRLEN_HUGE ? (uint64_t) 1 << 63 : (uint64_t) 1 << 40, 8);
		img_put(&m, "llama", 5);
	}
	else
		img_str(&m, "llama");

	/* 1: t.u32 = 7 */
	if (mut == M_KEYLEN_HUGE)
	{
		img_le(&m, (uint64_t) 1 << 40, 8);
		img_put(&m, "t.u32", 5);
	}
	else if (mut == M_EMPTY_KEY)
		img_str(&m, "");
	else if (mut == M_KEY_NUL)
	{
		img_le(&m, 5, 8);
		img_put(&m, "t.u\0002", 5);
	}
	else
		img_str(&m, mut == M_KEY_LONG ? longname : mut == M_DUP_KEY ? "general.architecture" : "t.u32");
	img_le(&m, mut == M_BAD_TYPE ? 13 : LLM_GGUF_UINT32, 4);
	img_le(&m, 7, 4);

	/* 2: t.bool = true */
	img_str(&m, "t.bool");
	img_le(&m, LLM_GGUF_BOOL, 4);
	img_le(&m, mut == M_BOOL2 ? 2 : 1, 1);

	/* 3: t.arr = int32 [1, 2, 3] */
	img_str(&m, "t.arr");
	img_le(&m, LLM_GGUF_ARRAY, 4);
	img_le(&m, mut == M_ARR_BAD_ELEM ? 13 : LLM_GGUF_INT32, 4);
	img_le(&m, mut == M_ARRLEN_HUGE ? (uint64_t) 1 << 63 : mut == M_ARRLEN_40 ? (uint64_t) 1 << 40 : 3, 8);
	for (int i = 1; i <= 3; i++)
		img_le(&m, (uint64_t) i, 4);

	/* 4: t.nested = [uint8 [1, 2], string ["x"]], or 9 levels deep */
	img_str(&m, "t.nested");
	img_le(&m, LLM_GGUF_ARRAY, 4);
	if (mut == M_DEEP)
	{
		for (int i = 0; i < 9; i++)
		{
			img_le(&m, LLM_GGUF_ARRAY, 4);
			img_le(&m, 1, 8);
		}
		img_le(&m, LLM_GGUF_UINT8, 4);
		img_le(&m, 1, 8);
		img_le(&m, 5, 1);
	}
	else
	{
		img_le(&m, LLM_GGUF_ARRAY, 4);
		img_le(&m, 2, 8);
		img_le(&m, LLM_GGUF_UINT8, 4);
		img_le(&m, mut == M_INNER_LEN_HUGE ? (uint64_t) 1 << 40 : 2, 8);
		img_le(&m, 1, 1);
		img_le(&m, 2, 1);
		img_le(&m, LLM_GGUF_STRING, 4);
		img_le(&m, 1, 8);
		img_str(&m, "x");
	}

	/* 5: t.strs = ["ab", "c"] */
	img_str(&m, "t.strs");
	img_le(&m, LLM_GGUF_ARRAY, 4);
	img_le(&m, LLM_GGUF_STRING, 4);
	img_le(&m, mut == M_STRS_LEN_HUGE ? (uint64_t) 1 << 62 : 2, 8);
	img_str(&m, "ab");
	if (mut == M_STRS_ELEM_LEN)
	{
		img_le(&m, (uint64_t) 1 << 40, 8);
		img_put(&m, "c", 1);
	}
	else
		img_str(&m, "c");

	/* 6: t.bools = [false, true, true] */
	img_str(&m, "t.bools");
	img_le(&m, LLM_GGUF_ARRAY, 4);
	img_le(&m, LLM_GGUF_BOOL, 4);
	img_le(&m, 3, 8);
	img_le(&m, 0, 1);
	img_le(&m, 1, 1);
	img_le(&m, mut == M_BOOLARR2 ? 2 : 1, 1);

	/* 7: general.alignment = 32 */
	img_str(&m, "general.alignment");
	if (mut == M_ALIGN_TYPE)
	{
		img_le(&m, LLM_GGUF_UINT64, 4);
		img_le(&m, 32, 8);
	}
	else
	{
		img_le(&m, LLM_GGUF_UINT32, 4);
		img_le(&m, mut == M_ALIGN0 ? 0 : mut == M_ALIGN3 ? 3 : 32, 4);
	}

	/* tensor "a": F32 8x2 at 0 */
	{
		uint64_t	ne[5] = {8, 2, 1, 1, 1};

		if (mut == M_DIM0)
			ne[1] = 0;
		if (mut == M_DIM_OVF)
			ne[0] = ne[1] = (uint64_t) 1 << 32;
		if (mut == M_DIM_NEG)
			ne[1] = (uint64_t) 1 << 63;
		if (mut == M_SIZE_OVF)
		{
			ne[0] = (uint64_t) 1 << 61;
			ne[1] = 2;
		}
		img_tensor(&m, mut == M_EMPTY_TENSOR_NAME ? "" : "a",
				   mut == M_NDIMS0 ? 0 : mut == M_NDIMS5 ? 5 : 2, ne, LLM_TYPE_F32, 0);
	}
	/* tensor "b": Q8_0 32x1 at 64 */
	{
		uint64_t	ne[2] = {mut == M_BLOCK ? 16 : 32, mut == M_BLOCK ? 2 : 1};

		img_tensor(&m, mut == M_TENSOR_NAME_LONG ? longname : "b", 2, ne,
				   mut == M_TYPE99 ? 99 : LLM_TYPE_Q8_0,
				   mut == M_MISALIGN ? 65 : mut == M_OVERLAP ? 32 : 64);
	}
	/* tensor "c": F16 4x1x1x2 at 128 */
	{
		uint64_t	ne[4] = {4, 1, 1, 2};

		img_tensor(&m, mut == M_DUP_TENSOR ? "a" : "c", 4, ne, LLM_TYPE_F16,
				   mut == M_PAST_END ? 160 : mut == M_OFFSET_HUGE ? (uint64_t) 1 << 63 : 128);
	}

	/* padding, then 144 bytes of data */
	while (m.len % 32 != 0)
		img_le(&m, 0, 1);
	for (int i = 0; i < 144; i++)
		img_le(&m, (uint64_t) (i * 7 + 1), 1);
	return m;
}

/* Expected outcome of each defect: status and up to two message fragments. */
static const struct
{
	Mut			mut;
	LlmStatus	status;
	const char *frag1;
	const char *frag2;
}			expect[] = {
	{M_MAGIC, LLM_ERR_FORMAT, "magic", NULL},
	{M_VERSION0, LLM_ERR_FORMAT, "version 0", NULL},
	{M_VERSION1, LLM_ERR_UNSUPPORTED, "version 1", NULL},
	{M_VERSION4, LLM_ERR_UNSUPPORTED, "version 4", NULL},
	{M_VERSION_BE, LLM_ERR_UNSUPPORTED, "big-endian", NULL},
	{M_NKV_HUGE, LLM_ERR_FORMAT, "n_kv", "9223372036854775808"},
	{M_NKV_40, LLM_ERR_FORMAT, "n_kv", "1099511627776"},
	{M_NKV_1000, LLM_ERR_FORMAT, "n_kv = 1000", "bytes left"},
	{M_NT_HUGE, LLM_ERR_FORMAT, "n_tensors", NULL},
	{M_NT_40, LLM_ERR_FORMAT, "n_tensors", NULL},
	{M_NT_1000, LLM_ERR_FORMAT, "n_tensors = 1000", "bytes left"},
	{M_KEYLEN_HUGE, LLM_ERR_FORMAT, "key 1", "1099511627776 bytes"},
	{M_KEY_LONG, LLM_ERR_FORMAT, "key 1", "limit"},
	{M_EMPTY_KEY, LLM_ERR_FORMAT, "key 1", "empty"},
	{M_KEY_NUL, LLM_ERR_FORMAT, "key 1", "NUL"},
	{M_DUP_KEY, LLM_ERR_FORMAT, "duplicate key \"general.architecture\"", NULL},
	{M_BAD_TYPE, LLM_ERR_FORMAT, "key \"t.u32\"", "type 13"},
	{M_STRLEN_HUGE, LLM_ERR_FORMAT, "key \"general.architecture\"", "9223372036854775808 bytes"},
	{M_STRLEN_40, LLM_ERR_FORMAT, "key \"general.architecture\"", "bytes left"},
	{M_BOOL2, LLM_ERR_FORMAT, "key \"t.bool\"", "boolean value 2"},
	{M_ARRLEN_HUGE, LLM_ERR_FORMAT, "key \"t.arr\"", "9223372036854775808 int32"},
	{M_ARRLEN_40, LLM_ERR_FORMAT, "key \"t.arr\"", "can hold"},
	{M_ARR_BAD_ELEM, LLM_ERR_FORMAT, "key \"t.arr\"", "element type 13"},
	{M_DEEP, LLM_ERR_FORMAT, "key \"t.nested\"", "nested more than 8"},
	{M_INNER_LEN_HUGE, LLM_ERR_FORMAT, "key \"t.nested\" (array element 0)", "can hold"},
	{M_STRS_LEN_HUGE, LLM_ERR_FORMAT, "key \"t.strs\"", "string elements"},
	{M_STRS_ELEM_LEN, LLM_ERR_FORMAT, "key \"t.strs\" (array element 1)", "bytes long"},
	{M_BOOLARR2, LLM_ERR_FORMAT, "key \"t.bools\" (array element 2)", "boolean value 2"},
	{M_ALIGN0, LLM_ERR_FORMAT, "general.alignment", "is 0"},
	{M_ALIGN3, LLM_ERR_FORMAT, "general.alignment", "is 3"},
	{M_ALIGN_TYPE, LLM_ERR_FORMAT, "general.alignment", "uint64"},
	{M_NDIMS0, LLM_ERR_FORMAT, "tensor \"a\"", "0 dimensions"},
	{M_NDIMS5, LLM_ERR_FORMAT, "tensor \"a\"", "5 dimensions"},
	{M_DIM0, LLM_ERR_FORMAT, "tensor \"a\"", "ne[1] = 0"},
	{M_DIM_OVF, LLM_ERR_FORMAT, "tensor \"a\"", "overflows"},
	{M_DIM_NEG, LLM_ERR_FORMAT, "tensor \"a\"", "ne[1] = 9223372036854775808"},
	{M_SIZE_OVF, LLM_ERR_FORMAT, "tensor \"a\"", "too large"},
	{M_TYPE99, LLM_ERR_UNSUPPORTED, "tensor \"b\"", "type 99"},
	{M_BLOCK, LLM_ERR_FORMAT, "tensor \"b\"", "Q8_0 block size 32"},
	{M_MISALIGN, LLM_ERR_FORMAT, "tensor \"b\" data offset 65", "alignment 32"},
	{M_OVERLAP, LLM_ERR_FORMAT, "tensor \"b\" data (offset 32, 34 bytes) overlaps tensor \"a\"", NULL},
	{M_PAST_END, LLM_ERR_FORMAT, "tensor \"c\" data (offset 160, 16 bytes) extends past the end of the file", NULL},
	{M_OFFSET_HUGE, LLM_ERR_FORMAT, "tensor \"c\"", "past the end"},
	{M_DUP_TENSOR, LLM_ERR_FORMAT, "duplicate tensor name \"a\"", NULL},
	{M_EMPTY_TENSOR_NAME, LLM_ERR_FORMAT, "tensor 0", "empty"},
	{M_TENSOR_NAME_LONG, LLM_ERR_FORMAT, "tensor 1", "limit"},
};

/* Test 3a: the valid hand-made image, then each defect alone. */
static void
test_defects(void)
{
	Img			m = build_image(M_NONE);
	LlmGguf    *g = NULL;
	LlmError	err;
	LlmStatus	st;

	TEST_CHECK(llm_gguf_open_memory(m.d, m.len, &g, &err) == LLM_OK, "hand-made image: %s", err.msg);
	if (g != NULL)
	{
		const LlmGgufValue *v = llm_gguf_get(g, "t.nested");

		TEST_CHECK(g->n_kv == 8 && g->n_tensors == 3 && g->data_offset + 144 == m.len &&
				   g->file_size == m.len, "hand-made layout");
		TEST_CHECK(v != NULL && v->arr_len == 2 && v->arr_items[0].arr_type == LLM_GGUF_UINT8 &&
				   llm_gguf_arr_int(&v->arr_items[0], 1) == 2 &&
				   v->arr_items[1].arr_type == LLM_GGUF_STRING &&
				   str_eq(v->arr_items[1].arr_items[0].str, "x"), "hand-made t.nested");
		TEST_CHECK(llm_gguf_tensor(g, "c") != NULL && llm_gguf_tensor(g, "c")->size == 16 &&
				   ((const uint8_t *) llm_gguf_tensor(g, "c")->data)[0] == (uint8_t) (128 * 7 + 1),
				   "hand-made tensor c");
		llm_gguf_close(g);
	}
	free(m.d);

	TEST_CHECK(sizeof(expect) / sizeof(expect[0]) == M_COUNT - 1, "every defect has an expectation");
	for (size_t i = 0; i < sizeof(expect) / sizeof(expect[0]); i++)
	{
		m = build_image(expect[i].mut);
		st = open_copy(m.d, m.len, &err);
		TEST_CHECK(st == expect[i].status, "defect %d: status %s, expected %s (%s)",
				   (int) expect[i].mut, llm_status_name(st), llm_status_name(expect[i].status), err.msg);
		TEST_CHECK(strstr(err.msg, "\"<memory>\"") != NULL &&
				   strstr(err.msg, expect[i].frag1) != NULL &&
				   (expect[i].frag2 == NULL || strstr(err.msg, expect[i].frag2) != NULL),
				   "defect %d: message \"%s\" lacks \"%s\" / \"%s\"", (int) expect[i].mut, err.msg,
				   expect[i].frag1, expect[i].frag2 ? expect[i].frag2 : "");
		TEST_CHECK(err.status == st, "defect %d: err.status", (int) expect[i].mut);

		/* a few through a file, to see the path in the message */
		if (i % 8 == 0)
		{
			const char *path = tmp_path("defect.gguf");

			g = NULL;
			write_file(path, m.d, m.len);
			st = llm_gguf_open(path, &g, &err);
			TEST_CHECK(st == expect[i].status && g == NULL && strstr(err.msg, path) != NULL &&
					   strstr(err.msg, expect[i].frag1) != NULL,
					   "defect %d from a file: %s", (int) expect[i].mut, err.msg);
			unlink(path);
		}
		free(m.d);
	}
}

/* Test 3b: truncations at every byte, files that are not files. */
static void
test_truncation(void)
{
	Img			m = build_image(M_NONE);
	LlmGguf    *g = NULL;
	LlmError	err;
	LlmStatus	st;
	int			bad = 0;
	const char *path = tmp_path("trunc.gguf");
	uint8_t    *full;
	size_t		full_size;
	uint64_t	data_end = 0;

	/* every length of the hand-made image short of the whole */
	for (size_t len = 0; len < m.len; len++)
	{
		st = open_copy(m.d, len, &err);
		if (st != LLM_ERR_FORMAT || err.msg[0] == '\0')
		{
			if (bad++ < 5)
				TEST_CHECK(false, "truncated at %zu: %s (%s)", len, llm_status_name(st), err.msg);
		}
	}
	TEST_CHECK(bad == 0, "%d truncations of the hand-made image did not fail cleanly", bad);
	{
		const uint8_t *k = memmem(m.d, m.len, "t.strs", 6);
		const uint8_t *ab = memmem(m.d, m.len, "ab", 2);

		TEST_CHECK(k != NULL && ab != NULL, "hand-made image has t.strs");
		if (k != NULL && ab != NULL)
		{
			st = open_copy(m.d, (size_t) (k - m.d) + 3, &err);
			TEST_CHECK(strstr(err.msg, "end of file reading the name of key 5") != NULL,
					   "truncated inside a key name: %s", err.msg);
			st = open_copy(m.d, (size_t) (k - m.d) + 6 + 4 + 4 + 2, &err);
			TEST_CHECK(strstr(err.msg, "end of file reading the array length of key \"t.strs\"") != NULL,
					   "truncated inside an array length: %s", err.msg);
			st = open_copy(m.d, (size_t) (ab - m.d) + 2 + 8, &err);
			TEST_CHECK(strstr(err.msg, "string value of key \"t.strs\" (array element 1)") != NULL,
					   "truncated inside a string element: %s", err.msg);
		}
	}
	st = open_copy(m.d, m.len - 1, &err);
	TEST_CHECK(strstr(err.msg, "tensor \"c\"") != NULL && strstr(err.msg, "past the end"),
			   "truncated in the data: %s", err.msg);

	/* a few through files */
	{
		const size_t lens[] = {0, 3, 10, 100, m.len - 144, m.len - 1};

		for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		{
			g = NULL;
			write_file(path, m.d, lens[i]);
			st = llm_gguf_open(path, &g, &err);
			TEST_CHECK(st == LLM_ERR_FORMAT && g == NULL && strstr(err.msg, path) != NULL,
					   "file truncated at %zu: %s", lens[i], err.msg);
		}
		unlink(path);
	}
	free(m.d);

	/* every length of the full written file up to the end of its last tensor */
	if (!write_test_file(path))
		return;
	full = read_file(path, &full_size);
	unlink(path);
	if (full == NULL || llm_gguf_open_memory(full, full_size, &g, &err) != LLM_OK)
	{
		TEST_CHECK(false, "reopen the full file");
		free(full);
		return;
	}
	for (uint64_t i = 0; i < g->n_tensors; i++)
		if (g->data_offset + g->tensors[i].offset + g->tensors[i].size > data_end)
			data_end = g->data_offset + g->tensors[i].offset + g->tensors[i].size;
	llm_gguf_close(g);
	bad = 0;
	for (size_t len = 0; len < full_size; len++)
	{
		st = open_copy(full, len, &err);
		if ((len < data_end && st != LLM_ERR_FORMAT) || (len >= data_end && st != LLM_OK))
		{
			if (bad++ < 5)
				TEST_CHECK(false, "full file truncated at %zu (data ends at %llu): %s (%s)",
						   len, (unsigned long long) data_end, llm_status_name(st), err.msg);
		}
	}
	TEST_CHECK(bad == 0, "%d truncations of the full file went wrong", bad);
	free(full);

	/* nonexistent path, empty file, directory */
	g = NULL;
	TEST_CHECK(llm_gguf_open(tmp_path("does-not-exist.gguf"), &g, &err) == LLM_ERR_IO && g == NULL &&
			   strstr(err.msg, "does-not-exist.gguf") != NULL, "nonexistent: %s", err.msg);
	write_file(path, "", 0);
	TEST_CHECK(llm_gguf_open(path, &g, &err) == LLM_ERR_FORMAT && g == NULL &&
			   strstr(err.msg, path) != NULL && strstr(err.msg, "magic") != NULL, "empty file: %s", err.msg);
	unlink(path);
	TEST_CHECK(llm_gguf_open(tmp_dir, &g, &err) == LLM_ERR_IO && g == NULL &&
			   strstr(err.msg, "directory") != NULL, "directory: %s", err.msg);
	TEST_CHECK(llm_gguf_open_memory(NULL, 5, &g, &err) == LLM_ERR_INVALID, "NULL buffer");
	TEST_CHECK(llm_gguf_open_memory(NULL, 0, &g, &err) == LLM_ERR_FORMAT && g == NULL, "empty buffer");
	llm_gguf_close(NULL);
}

/* ---- fuzz ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

/* xorshift64*: the test's deterministic random numbers. */
static uint64_t
rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ull;
}

/* Read everything a value exposes, recursively; returns a checksum. */
static uint64_t
touch_value(const LlmGgufValue *v)
{
	uint64_t	sum = 0;

	if (v->type == LLM_GGUF_STRING)
	{
		for (uint64_t i = 0; i < v->str.len; i++)
			sum += (uint8_t) v->str.ptr[i];
	}
	else if (v->type == LLM_GGUF_ARRAY)
	{
		for (uint64_t i = 0; i < v->arr_len && i < 4096; i++)
		{
			if (v->arr_type == LLM_GGUF_STRING || v->arr_type == LLM_GGUF_ARRAY)
				sum += touch_value(&v->arr_items[i]);
			else
				sum += (uint64_t) llm_gguf_arr_int(v, i) + (uint64_t) llm_gguf_arr_float(v, i);
		}
		if (v->arr_len > 0 && v->arr_data != NULL)
			sum += (uint64_t) llm_gguf_arr_int(v, v->arr_len - 1);
	}
	else
		sum += v->num.u;
	return sum;
}

/* Use every part of an opened file, as a loader would. */
static uint64_t
touch_file(const LlmGguf *g)
{
	uint64_t	sum = 0;
	LlmError	err;

	for (uint64_t i = 0; i < g->n_kv; i++)
	{
		const char *key = g->kv[i].key;
		uint32_t	u32;
		int64_t		i64;
		float		f32;
		bool		b;
		char	   *s = NULL;
		const LlmGgufValue *arr;

		if (llm_gguf_get(g, key) != &g->kv[i].value)
			TEST_CHECK(false, "lookup of key %s", key);
		sum += touch_value(&g->kv[i].value);
		llm_gguf_get_u32(g, key, &u32, &err);
		llm_gguf_get_i64(g, key, &i64, &err);
		llm_gguf_get_f32(g, key, &f32, &err);
		llm_gguf_get_bool(g, key, &b, &err);
		if (llm_gguf_get_str(g, key, &s, &err) == LLM_OK)
		{
			sum += strlen(s);
			free(s);
		}
		llm_gguf_get_arr(g, key, LLM_GGUF_STRING, &arr, &err);
	}
	for (uint64_t i = 0; i < g->n_tensors; i++)
	{
		const LlmGgufTensor *t = &g->tensors[i];
		const uint8_t *d = t->data;

		if (llm_gguf_tensor(g, t->name) != t)
			TEST_CHECK(false, "lookup of tensor %s", t->name);
		if (d < g->map || d + t->size > g->map + g->file_size || t->size == 0)
			TEST_CHECK(false, "tensor %s data outside the file", t->name);
		else
			sum += d[0] + d[t->size - 1];
	}
	return sum;
}

/* Apply one random change to the image (in place) or shorten it. */
static void
mutate(uint8_t *d, size_t *len)
{
	static const uint64_t specials[] = {
		0, 1, 2, 3, 4, 5, 31, 32, 33, 255, 0xffffffffull, (uint64_t) 1 << 31,
		(uint64_t) 1 << 32, (uint64_t) 1 << 40, (uint64_t) 1 << 62, (uint64_t) 1 << 63,
		UINT64_MAX, UINT64_MAX - 1
	};
	size_t		n = *len;
	size_t		pos;

	if (n == 0)
		return;
	pos = (size_t) (rng() % n);
	switch (rng() % 6)
	{
		case 0:
		case 1:
			d[pos] = (uint8_t) rng();
			break;
		case 2:
			d[pos] ^= (uint8_t) (1u << (rng() % 8));
			break;
		case 3:
			{
				uint64_t	v = specials[rng() % (sizeof(specials) / sizeof(specials[0]))];
				int			w = (rng() % 2) ? 8 : 4;

				for (int i = 0; i < w && pos + (size_t) i < n; i++)
					d[pos + (size_t) i] = (uint8_t) (v >> (8 * i));
			}
			break;
		case 4:
			d[pos] = (uint8_t) (rng() % 14);
			break;
		default:
			if (rng() % 4 == 0)
				*len = pos;
			else
				d[pos] = 0;
			break;
	}
}

/* Fuzz images derived from base: each must open or fail, never crash. */
static void
fuzz(const uint8_t *base, size_t base_len, size_t region, int iterations, const char *what)
{
	uint8_t    *work = malloc(base_len);
	int			n_ok = 0;
	int			n_bad_status = 0;

	for (int it = 0; it < iterations; it++)
	{
		size_t		len = base_len;
		int			n_mut = 1 + (int) (rng() % 4);
		uint8_t    *copy;
		LlmGguf    *g = NULL;
		LlmError	err;
		LlmStatus	st;

		memcpy(work, base, base_len);
		for (int k = 0; k < n_mut; k++)
		{
			size_t		l = len < region ? len : region;

			mutate(work, &l);
			if (l < len && l < region)
				len = l;
		}
		copy = malloc(len > 0 ? len : 1);
		memcpy(copy, work, len);
		st = llm_gguf_open_memory(copy, len, &g, &err);
		if (st == LLM_OK)
		{
			n_ok++;
			(void) touch_file(g);
			llm_gguf_close(g);
		}
		else if ((st != LLM_ERR_FORMAT && st != LLM_ERR_UNSUPPORTED) || g != NULL ||
				 strstr(err.msg, "GGUF file") == NULL)
		{
			if (n_bad_status++ < 5)
				TEST_CHECK(false, "%s fuzz %d: %s (%s)", what, it, llm_status_name(st), err.msg);
		}
		free(copy);
	}
	TEST_CHECK(n_bad_status == 0, "%s fuzz: %d bad outcomes", what, n_bad_status);
	TEST_CHECK(n_ok > 0 && n_ok < iterations, "%s fuzz: %d of %d opened", what, n_ok, iterations);
	printf("  fuzz %s: %d iterations, %d opened\n", what, iterations, n_ok);
	free(work);
}

/* Test 3c: seeded fuzzing of the written file, the hand-made one and stories260K's metadata. */
static void
test_fuzz(void)
{
	const char *path = tmp_path("fuzz.gguf");
	uint8_t    *full;
	size_t		size;
	Img			m = build_image(M_NONE);
	char		model[512];

	if (write_test_file(path))
	{
		full = read_file(path, &size);
		unlink(path);
		if (full != NULL)
			fuzz(full, size, size, 3000, "written file");
		free(full);
	}
	fuzz(m.d, m.len, m.len, 2000, "hand-made image");
	free(m.d);

	snprintf(model, sizeof(model), "%s/models/stories260K.gguf", test_shared_dir());
	full = read_file(model, &size);
	TEST_CHECK(full != NULL, "read %s", model);
	if (full != NULL)
		fuzz(full, size, 14200, 150, "stories260K metadata");
	free(full);
}

/* Run every test in a private temporary directory. */
int
main(void)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(tmp_dir, sizeof(tmp_dir), "%s/test_gguf.XXXXXX", tmp != NULL && tmp[0] ? tmp : "/tmp");
	if (mkdtemp(tmp_dir) == NULL)
	{
		perror("mkdtemp");
		return 1;
	}
	test_write_read();
	test_writer_misc();
	test_real_files();
	test_defects();
	test_truncation();
	test_fuzz();
	unlink(tmp_path("full.gguf"));
	rmdir(tmp_dir);
	return test_summary("gguf");
}
