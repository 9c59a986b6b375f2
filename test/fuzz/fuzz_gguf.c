/*
 * fuzz_gguf.c
 *		libFuzzer target: arbitrary bytes as a GGUF image.
 *
 * The bytes go to llm_gguf_open_memory(), which runs the parser that
 * llm_gguf_open() runs on a mapped file (header, metadata, tensor infos,
 * alignment, data offsets).  It must return a status and a message, never
 * crash.  A file that opens is then used the way the loaders use one:
 * every value is read through the typed getters and the array accessors,
 * every key and tensor is looked up by name, and the first and last byte of
 * every tensor's data is read; libFuzzer hands us a buffer of exactly size
 * bytes, so AddressSanitizer reports any pointer past the image.
 */
#include "fuzz.h"
#include "gguf.h"

/* Read every element of v (nested arrays included) into a checksum. */
static uint64_t
touch_value(const LlmGgufValue *v, int depth)
{
	uint64_t	sum = 0;

	FUZZ_CHECK(depth <= 8, "arrays nested %d deep", depth);
	switch (v->type)
	{
		case LLM_GGUF_STRING:
			for (uint64_t i = 0; i < v->str.len; i++)
				sum += (uint8_t) v->str.ptr[i];
			break;
		case LLM_GGUF_ARRAY:
			if (v->arr_type == LLM_GGUF_STRING || v->arr_type == LLM_GGUF_ARRAY)
			{
				FUZZ_CHECK(v->arr_len == 0 || v->arr_items != NULL, "array of %llu items without items",
						   (unsigned long long) v->arr_len);
				for (uint64_t i = 0; i < v->arr_len; i++)
				{
					FUZZ_CHECK(v->arr_items[i].type == v->arr_type, "item %llu has type %d, the array %d",
							   (unsigned long long) i, (int) v->arr_items[i].type, (int) v->arr_type);
					sum += touch_value(&v->arr_items[i], depth + 1);
				}
			}
			else
			{
				for (uint64_t i = 0; i < v->arr_len; i++)
				{
					double		d = llm_gguf_arr_float(v, i);

					sum += (uint64_t) llm_gguf_arr_int(v, i) + (d == d);
				}
				/* past the end: 0, never a read */
				FUZZ_CHECK(llm_gguf_arr_int(v, v->arr_len) == 0 && llm_gguf_arr_float(v, v->arr_len) == 0.0,
						   "an element past the end of an array of %llu", (unsigned long long) v->arr_len);
			}
			break;
		default:
			FUZZ_CHECK(v->type < LLM_GGUF_TYPE_COUNT, "value type %d", (int) v->type);
			sum += v->num.u;
			break;
	}
	return sum;
}

/* Read key kv through every typed getter, as the model and tokenizer loaders may. */
static uint64_t
touch_getters(const LlmGguf *g, const LlmGgufKv *kv)
{
	LlmError	err;
	uint32_t	u32;
	int64_t		i64;
	float		f32;
	bool		b;
	char	   *s = NULL;
	const LlmGgufValue *arr;
	uint64_t	sum = 0;

	FUZZ_CHECK(llm_gguf_get(g, kv->key) == &kv->value, "key \"%s\" is not found by name", kv->key);
	if (llm_gguf_get_u32(g, kv->key, &u32, &err) == LLM_OK)
		sum += u32;
	if (llm_gguf_get_i64(g, kv->key, &i64, &err) == LLM_OK)
		sum += (uint64_t) i64;
	if (llm_gguf_get_f32(g, kv->key, &f32, &err) == LLM_OK)
		sum += (uint64_t) (f32 == f32);
	if (llm_gguf_get_bool(g, kv->key, &b, &err) == LLM_OK)
		sum += b;
	if (llm_gguf_get_str(g, kv->key, &s, &err) == LLM_OK)
	{
		FUZZ_CHECK(kv->value.type == LLM_GGUF_STRING && strlen(s) <= kv->value.str.len,
				   "string getter on key \"%s\"", kv->key);
		free(s);
	}
	if (kv->value.type == LLM_GGUF_ARRAY)
	{
		FUZZ_CHECK(llm_gguf_get_arr(g, kv->key, kv->value.arr_type, &arr, &err) == LLM_OK &&
				   arr == &kv->value, "array getter on key \"%s\": %s", kv->key, err.msg);
		sum += arr->arr_len;
	}
	else
		FUZZ_CHECK(llm_gguf_get_arr(g, kv->key, LLM_GGUF_UINT8, &arr, &err) == LLM_ERR_FORMAT,
				   "array getter on the scalar key \"%s\"", kv->key);
	return sum;
}

/* Check tensor t of g against the image (data within it, aligned, as large as its shape says). */
static uint64_t
touch_tensor(const LlmGguf *g, const LlmGgufTensor *t)
{
	const uint8_t *data = t->data;
	const uint8_t *end = g->map + g->file_size;
	uint64_t	sum = 0;

	FUZZ_CHECK(llm_gguf_tensor(g, t->name) == t, "tensor \"%s\" is not found by name", t->name);
	FUZZ_CHECK(t->n_dims >= 1 && t->n_dims <= LLM_GGUF_MAX_DIMS, "tensor \"%s\" has %d dims", t->name, t->n_dims);
	for (int d = 0; d < LLM_GGUF_MAX_DIMS; d++)
		FUZZ_CHECK(t->ne[d] >= 1 && (d < t->n_dims || t->ne[d] == 1), "tensor \"%s\" ne[%d] = %lld", t->name, d,
				   (long long) t->ne[d]);
	FUZZ_CHECK(t->offset % g->alignment == 0, "tensor \"%s\" offset %llu, alignment %llu", t->name,
			   (unsigned long long) t->offset, (unsigned long long) g->alignment);
	FUZZ_CHECK(data >= g->map + g->data_offset && t->size <= (uint64_t) (end - data),
			   "tensor \"%s\" (offset %llu, %llu bytes) is outside the image of %llu bytes", t->name,
			   (unsigned long long) t->offset, (unsigned long long) t->size, (unsigned long long) g->file_size);
	if (t->size > 0)
		sum += data[0] + data[t->size - 1];
	return sum;
}

/* One input: open it from memory; when it opens, use all of it. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	LlmGguf    *g = NULL;
	LlmError	err;
	LlmStatus	st;
	volatile uint64_t sum = 0;

	llm_error_clear(&err);
	st = llm_gguf_open_memory(data, size, &g, &err);
	if (st != LLM_OK)
	{
		FUZZ_CHECK(g == NULL && err.status == st && err.msg[0] != '\0' && memchr(err.msg, '\0', sizeof(err.msg)),
				   "a failed open (%s) leaves no file and a message", llm_status_name(st));
		return 0;
	}
	FUZZ_CHECK(g != NULL && g->map == data && g->file_size == size, "the opened file is the image");
	FUZZ_CHECK(g->alignment > 0 && g->data_offset <= g->file_size, "alignment %llu, data offset %llu",
			   (unsigned long long) g->alignment, (unsigned long long) g->data_offset);
	for (uint64_t i = 0; i < g->n_kv; i++)
		sum += touch_value(&g->kv[i].value, 0) + touch_getters(g, &g->kv[i]);
	for (uint64_t i = 0; i < g->n_tensors; i++)
		sum += touch_tensor(g, &g->tensors[i]);
	FUZZ_CHECK(llm_gguf_get(g, "") == NULL && llm_gguf_tensor(g, "") == NULL, "the empty name is found");
	llm_gguf_close(g);
	(void) sum;
	return 0;
}
