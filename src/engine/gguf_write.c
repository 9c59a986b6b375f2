/*
 * gguf_write.c
 *		A small GGUF v3 writer (see gguf.h).
 *
 * Each metadata value is serialized (type and payload, little-endian) as
 * soon as it is set, into a byte buffer owned by the writer, so that any
 * value, nested arrays included, is copied once and saving is a plain
 * sequence of writes.  Setting a key again replaces its bytes in place (the
 * key keeps its first position).  Tensors are copied too.  A bad argument or
 * an allocation failure is recorded (the first one wins) and reported by
 * llm_gguf_writer_save, so callers can chain setters without checking each.
 *
 * The file is: header, metadata, tensor infos, zero padding to the
 * alignment, then each tensor's data followed by zero padding to the
 * alignment.  The alignment is 32 unless the caller set general.alignment.
 */
#include "gguf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define GGUF_W_MAX_NAME 1024	/* the reader's limit on key and tensor names */
#define GGUF_W_MAX_DEPTH 8		/* the reader's limit on nested arrays */

/* A growing byte buffer; failed is set once an allocation fails. */
typedef struct GgufBuf
{
	uint8_t    *data;
	size_t		len;
	size_t		cap;
	bool		failed;
} GgufBuf;

/* One key and its serialized value (type + payload). */
typedef struct GgufWriterKv
{
	char	   *key;
	GgufBuf		value;
} GgufWriterKv;

/* One tensor to write, with its own copy of the data. */
typedef struct GgufWriterTensor
{
	char	   *name;
	LlmType		type;
	int			n_dims;
	int64_t		ne[LLM_GGUF_MAX_DIMS];
	uint64_t	size;			/* bytes */
	uint64_t	offset;			/* in the data section, set by save */
	void	   *data;
} GgufWriterTensor;

struct LlmGgufWriter
{
	GgufWriterKv *kv;			/* (n_kv) in order of first setting */
	size_t		n_kv;
	size_t		cap_kv;
	GgufWriterTensor *tensors;	/* (n_tensors) in order of adding */
	size_t		n_tensors;
	size_t		cap_tensors;
	uint64_t	alignment;		/* general.alignment, or 32 */
	LlmError	error;			/* the first recorded failure */
};

/* The output file and its position; failed after the first write error. */
typedef struct GgufOut
{
	FILE	   *fp;
	uint64_t	pos;
	bool		failed;
	int			saved_errno;
} GgufOut;

/* Record the first failure of the writer (later ones are dropped). */
static void
gguf_w_error(LlmGgufWriter *w, LlmStatus status, const char *fmt,...)
__attribute__((format(printf, 3, 4)));

static void
gguf_w_error(LlmGgufWriter *w, LlmStatus status, const char *fmt,...)
{
	va_list		ap;

	if (w->error.status != LLM_OK)
		return;
	w->error.status = status;
	va_start(ap, fmt);
	vsnprintf(w->error.msg, sizeof(w->error.msg), fmt, ap);
	va_end(ap);
}

/* Make room for n more bytes in b. */
static bool
gguf_buf_reserve(GgufBuf *b, size_t n)
{
	size_t		cap;
	uint8_t    *data;

	if (b->failed)
		return false;
	if (n <= b->cap - b->len)
		return true;
	if (n > SIZE_MAX / 2 - b->len)
	{
		b->failed = true;
		return false;
	}
	cap = b->cap > 0 ? b->cap : 64;
	while (cap - b->len < n)
		cap *= 2;
	data = realloc(b->data, cap);
	if (data == NULL)
	{
		b->failed = true;
		return false;
	}
	b->data = data;
	b->cap = cap;
	return true;
}

/* Append n bytes to b. */
static void
gguf_buf_put(GgufBuf *b, const void *p, size_t n)
{
	if (n == 0 || !gguf_buf_reserve(b, n))
		return;
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

/* Append v as n little-endian bytes (n <= 8) to b. */
static void
gguf_buf_put_le(GgufBuf *b, uint64_t v, int n)
{
	uint8_t		bytes[8];

	for (int i = 0; i < n; i++)
		bytes[i] = (uint8_t) (v >> (8 * i));
	gguf_buf_put(b, bytes, (size_t) n);
}

/* Bits of a float. */
static uint32_t
gguf_f32_bits(float f)
{
	uint32_t	u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

/* Bits of a double. */
static uint64_t
gguf_f64_bits(double d)
{
	uint64_t	u;

	memcpy(&u, &d, sizeof(u));
	return u;
}

/*
 * Append the payload of v (of type type, without the type tag) to b; returns
 * false with a message in why when v is malformed.
 */
static bool
gguf_w_payload(GgufBuf *b, LlmGgufType type, const LlmGgufValue *v, int depth,
			   char *why, size_t why_len)
{
	size_t		esize;

	switch (type)
	{
		case LLM_GGUF_UINT8:
		case LLM_GGUF_UINT16:
		case LLM_GGUF_UINT32:
		case LLM_GGUF_UINT64:
			gguf_buf_put_le(b, v->num.u, (int) llm_gguf_type_size(type));
			return true;
		case LLM_GGUF_INT8:
		case LLM_GGUF_INT16:
		case LLM_GGUF_INT32:
		case LLM_GGUF_INT64:
			gguf_buf_put_le(b, (uint64_t) v->num.i, (int) llm_gguf_type_size(type));
			return true;
		case LLM_GGUF_BOOL:
			if (v->num.u > 1)
			{
				snprintf(why, why_len, "a bool value is %llu (expected 0 or 1)",
						 (unsigned long long) v->num.u);
				return false;
			}
			gguf_buf_put_le(b, v->num.u, 1);
			return true;
		case LLM_GGUF_FLOAT32:
			gguf_buf_put_le(b, gguf_f32_bits((float) v->num.f), 4);
			return true;
		case LLM_GGUF_FLOAT64:
			gguf_buf_put_le(b, gguf_f64_bits(v->num.f), 8);
			return true;
		case LLM_GGUF_STRING:
			if (v->str.ptr == NULL && v->str.len > 0)
			{
				snprintf(why, why_len, "a string value has no bytes");
				return false;
			}
			if (v->str.len > SIZE_MAX / 2)
			{
				snprintf(why, why_len, "a string value is too long");
				return false;
			}
			gguf_buf_put_le(b, v->str.len, 8);
			gguf_buf_put(b, v->str.ptr, (size_t) v->str.len);
			return true;
		case LLM_GGUF_ARRAY:
			if (depth >= GGUF_W_MAX_DEPTH)
			{
				snprintf(why, why_len, "arrays are nested more than %d deep", GGUF_W_MAX_DEPTH);
				return false;
			}
			if ((unsigned) v->arr_type >= LLM_GGUF_TYPE_COUNT)
			{
				snprintf(why, why_len, "an array has invalid element type %d", (int) v->arr_type);
				return false;
			}
			gguf_buf_put_le(b, (uint64_t) v->arr_type, 4);
			gguf_buf_put_le(b, v->arr_len, 8);
			esize = llm_gguf_type_size(v->arr_type);
			if (esize > 0)
			{
				if (v->arr_len > SIZE_MAX / 2 / esize || (v->arr_data == NULL && v->arr_len > 0))
				{
					snprintf(why, why_len, "an array of %llu %s elements has no data or is too long",
							 (unsigned long long) v->arr_len, llm_gguf_type_name(v->arr_type));
					return false;
				}
				if (v->arr_type == LLM_GGUF_BOOL)
				{
					for (uint64_t j = 0; j < v->arr_len; j++)
						if (v->arr_data[j] > 1)
						{
							snprintf(why, why_len, "element %llu of a bool array is %u (expected 0 or 1)",
									 (unsigned long long) j, v->arr_data[j]);
							return false;
						}
				}
				gguf_buf_put(b, v->arr_data, (size_t) v->arr_len * esize);
				return true;
			}
			if (v->arr_items == NULL && v->arr_len > 0)
			{
				snprintf(why, why_len, "an array of %llu %s elements has no items",
						 (unsigned long long) v->arr_len, llm_gguf_type_name(v->arr_type));
				return false;
			}
			for (uint64_t j = 0; j < v->arr_len; j++)
			{
				if (v->arr_items[j].type != v->arr_type)
				{
					snprintf(why, why_len, "element %llu of an array of %s has type %s",
							 (unsigned long long) j, llm_gguf_type_name(v->arr_type),
							 llm_gguf_type_name(v->arr_items[j].type));
					return false;
				}
				if (!gguf_w_payload(b, v->arr_type, &v->arr_items[j], depth + 1, why, why_len))
					return false;
			}
			return true;
		case LLM_GGUF_TYPE_COUNT:
			break;
	}
	snprintf(why, why_len, "invalid value type %d", (int) type);
	return false;
}

/* Check a key or tensor name; records an error and returns false when bad. */
static bool
gguf_w_check_name(LlmGgufWriter *w, const char *what, const char *name)
{
	size_t		len;

	if (name == NULL || name[0] == '\0')
	{
		gguf_w_error(w, LLM_ERR_INVALID, "a %s has an empty name", what);
		return false;
	}
	len = strlen(name);
	if (len > GGUF_W_MAX_NAME)
	{
		gguf_w_error(w, LLM_ERR_INVALID, "the name of %s \"%.64s...\" is %zu bytes long (the limit is %d)",
					 what, name, len, GGUF_W_MAX_NAME);
		return false;
	}
	return true;
}

/* Store the serialized value b (taken over) under key, replacing an earlier one. */
static void
gguf_w_put_kv(LlmGgufWriter *w, const char *key, GgufBuf *b)
{
	GgufWriterKv *kv = NULL;

	if (b->failed)
	{
		gguf_w_error(w, LLM_ERR_NOMEM, "out of memory storing key \"%s\"", key);
		free(b->data);
		return;
	}
	for (size_t i = 0; i < w->n_kv; i++)
		if (strcmp(w->kv[i].key, key) == 0)
		{
			kv = &w->kv[i];
			break;
		}
	if (kv != NULL)
	{
		free(kv->value.data);
		kv->value = *b;
		return;
	}
	if (w->n_kv == w->cap_kv)
	{
		size_t		cap = w->cap_kv > 0 ? w->cap_kv * 2 : 16;
		GgufWriterKv *p = realloc(w->kv, cap * sizeof(GgufWriterKv));

		if (p == NULL)
		{
			gguf_w_error(w, LLM_ERR_NOMEM, "out of memory storing key \"%s\"", key);
			free(b->data);
			return;
		}
		w->kv = p;
		w->cap_kv = cap;
	}
	kv = &w->kv[w->n_kv];
	kv->key = strdup(key);
	if (kv->key == NULL)
	{
		gguf_w_error(w, LLM_ERR_NOMEM, "out of memory storing key \"%s\"", key);
		free(b->data);
		return;
	}
	kv->value = *b;
	w->n_kv++;
}

/* A new empty writer; NULL when out of memory. */
LlmGgufWriter *
llm_gguf_writer_new(void)
{
	LlmGgufWriter *w = calloc(1, sizeof(LlmGgufWriter));

	if (w == NULL)
		return NULL;
	w->alignment = LLM_GGUF_DEFAULT_ALIGNMENT;
	llm_error_clear(&w->error);
	return w;
}

/* Free the writer and its copies; NULL is allowed. */
void
llm_gguf_writer_free(LlmGgufWriter *w)
{
	if (w == NULL)
		return;
	for (size_t i = 0; i < w->n_kv; i++)
	{
		free(w->kv[i].key);
		free(w->kv[i].value.data);
	}
	free(w->kv);
	for (size_t i = 0; i < w->n_tensors; i++)
	{
		free(w->tensors[i].name);
		free(w->tensors[i].data);
	}
	free(w->tensors);
	free(w);
}

/* Copy another file's metadata value verbatim (any type, nested arrays included). */
void
llm_gguf_writer_set_value(LlmGgufWriter *w, const char *key, const LlmGgufValue *v)
{
	GgufBuf		b = {0};
	char		why[256];

	if (w == NULL || !gguf_w_check_name(w, "key", key))
		return;
	if (v == NULL || (unsigned) v->type >= LLM_GGUF_TYPE_COUNT)
	{
		gguf_w_error(w, LLM_ERR_INVALID, "key \"%s\" has %s", key,
					 v == NULL ? "no value" : "an invalid value type");
		return;
	}
	if (strcmp(key, "general.alignment") == 0)
	{
		if (v->type != LLM_GGUF_UINT32 || v->num.u == 0 || v->num.u > UINT32_MAX ||
			(v->num.u & (v->num.u - 1)) != 0)
		{
			gguf_w_error(w, LLM_ERR_INVALID,
						 "key \"general.alignment\" must be a uint32 nonzero power of two");
			return;
		}
		w->alignment = v->num.u;
	}
	gguf_buf_put_le(&b, (uint64_t) v->type, 4);
	if (!gguf_w_payload(&b, v->type, v, 0, why, sizeof(why)))
	{
		gguf_w_error(w, LLM_ERR_INVALID, "key \"%s\": %s", key, why);
		free(b.data);
		return;
	}
	gguf_w_put_kv(w, key, &b);
}

/* Set key to a uint32. */
void
llm_gguf_writer_set_u32(LlmGgufWriter *w, const char *key, uint32_t v)
{
	LlmGgufValue val;

	memset(&val, 0, sizeof(val));
	val.type = LLM_GGUF_UINT32;
	val.num.u = v;
	llm_gguf_writer_set_value(w, key, &val);
}

/* Set key to an int32. */
void
llm_gguf_writer_set_i32(LlmGgufWriter *w, const char *key, int32_t v)
{
	LlmGgufValue val;

	memset(&val, 0, sizeof(val));
	val.type = LLM_GGUF_INT32;
	val.num.i = v;
	llm_gguf_writer_set_value(w, key, &val);
}

/* Set key to a float32. */
void
llm_gguf_writer_set_f32(LlmGgufWriter *w, const char *key, float v)
{
	LlmGgufValue val;

	memset(&val, 0, sizeof(val));
	val.type = LLM_GGUF_FLOAT32;
	val.num.f = v;
	llm_gguf_writer_set_value(w, key, &val);
}

/* Set key to a bool. */
void
llm_gguf_writer_set_bool(LlmGgufWriter *w, const char *key, bool v)
{
	LlmGgufValue val;

	memset(&val, 0, sizeof(val));
	val.type = LLM_GGUF_BOOL;
	val.num.u = v ? 1 : 0;
	llm_gguf_writer_set_value(w, key, &val);
}

/* Set key to a copy of the NUL-terminated string v. */
void
llm_gguf_writer_set_str(LlmGgufWriter *w, const char *key, const char *v)
{
	LlmGgufValue val;

	if (w == NULL)
		return;
	if (v == NULL)
	{
		gguf_w_error(w, LLM_ERR_INVALID, "key \"%s\" has a NULL string value",
					 key != NULL ? key : "(null)");
		return;
	}
	memset(&val, 0, sizeof(val));
	val.type = LLM_GGUF_STRING;
	val.str.ptr = v;
	val.str.len = strlen(v);
	llm_gguf_writer_set_value(w, key, &val);
}

/* Set key to an array of n copied NUL-terminated strings. */
void
llm_gguf_writer_set_arr_str(LlmGgufWriter *w, const char *key, const char *const *v, uint64_t n)
{
	GgufBuf		b = {0};

	if (w == NULL || !gguf_w_check_name(w, "key", key))
		return;
	if (v == NULL && n > 0)
	{
		gguf_w_error(w, LLM_ERR_INVALID, "key \"%s\" has a NULL string array", key);
		return;
	}
	gguf_buf_put_le(&b, LLM_GGUF_ARRAY, 4);
	gguf_buf_put_le(&b, LLM_GGUF_STRING, 4);
	gguf_buf_put_le(&b, n, 8);
	for (uint64_t i = 0; i < n; i++)
	{
		size_t		len;

		if (v[i] == NULL)
		{
			gguf_w_error(w, LLM_ERR_INVALID, "element %llu of key \"%s\" is a NULL string",
						 (unsigned long long) i, key);
			free(b.data);
			return;
		}
		len = strlen(v[i]);
		gguf_buf_put_le(&b, len, 8);
		gguf_buf_put(&b, v[i], len);
	}
	gguf_w_put_kv(w, key, &b);
}

/* Set key to an array of n float32 values. */
void
llm_gguf_writer_set_arr_f32(LlmGgufWriter *w, const char *key, const float *v, uint64_t n)
{
	GgufBuf		b = {0};

	if (w == NULL || !gguf_w_check_name(w, "key", key))
		return;
	if (v == NULL && n > 0)
	{
		gguf_w_error(w, LLM_ERR_INVALID, "key \"%s\" has a NULL float array", key);
		return;
	}
	if (n > SIZE_MAX / 8)
	{
		gguf_w_error(w, LLM_ERR_NOMEM, "key \"%s\" has an array that is too long", key);
		return;
	}
	gguf_buf_put_le(&b, LLM_GGUF_ARRAY, 4);
	gguf_buf_put_le(&b, LLM_GGUF_FLOAT32, 4);
	gguf_buf_put_le(&b, n, 8);
	if (gguf_buf_reserve(&b, (size_t) n * 4))
		for (uint64_t i = 0; i < n; i++)
			gguf_buf_put_le(&b, gguf_f32_bits(v[i]), 4);
	gguf_w_put_kv(w, key, &b);
}

/* Set key to an array of n int32 values. */
void
llm_gguf_writer_set_arr_i32(LlmGgufWriter *w, const char *key, const int32_t *v, uint64_t n)
{
	GgufBuf		b = {0};

	if (w == NULL || !gguf_w_check_name(w, "key", key))
		return;
	if (v == NULL && n > 0)
	{
		gguf_w_error(w, LLM_ERR_INVALID, "key \"%s\" has a NULL int32 array", key);
		return;
	}
	if (n > SIZE_MAX / 8)
	{
		gguf_w_error(w, LLM_ERR_NOMEM, "key \"%s\" has an array that is too long", key);
		return;
	}
	gguf_buf_put_le(&b, LLM_GGUF_ARRAY, 4);
	gguf_buf_put_le(&b, LLM_GGUF_INT32, 4);
	gguf_buf_put_le(&b, n, 8);
	if (gguf_buf_reserve(&b, (size_t) n * 4))
		for (uint64_t i = 0; i < n; i++)
			gguf_buf_put_le(&b, (uint32_t) v[i], 4);
	gguf_w_put_kv(w, key, &b);
}

/* Add a tensor; data (llm_type_row_size(type, ne[0]) * rows bytes) is copied. */
void
llm_gguf_writer_add_tensor(LlmGgufWriter *w, const char *name, LlmType type,
						   int n_dims, const int64_t *ne, const void *data)
{
	const LlmTypeTraits *traits;
	GgufWriterTensor *t;
	uint64_t	count = 1;
	uint64_t	row_bytes;
	uint64_t	size;

	if (w == NULL || !gguf_w_check_name(w, "tensor", name))
		return;
	if (n_dims < 1 || n_dims > LLM_GGUF_MAX_DIMS || ne == NULL)
	{
		gguf_w_error(w, LLM_ERR_INVALID, "tensor \"%s\" has %d dimensions (expected 1 to %d)",
					 name, n_dims, LLM_GGUF_MAX_DIMS);
		return;
	}
	traits = llm_type_is_file_type((int) type) ? llm_type_traits((int) type) : NULL;
	if (traits == NULL)
	{
		gguf_w_error(w, LLM_ERR_INVALID, "tensor \"%s\" has unknown type %d", name, (int) type);
		return;
	}
	for (int d = 0; d < n_dims; d++)
	{
		if (ne[d] < 1 || count > (uint64_t) INT64_MAX / (uint64_t) ne[d])
		{
			gguf_w_error(w, LLM_ERR_INVALID, "tensor \"%s\" has invalid dimension ne[%d] = %lld",
						 name, d, (long long) ne[d]);
			return;
		}
		count *= (uint64_t) ne[d];
	}
	if (ne[0] % traits->block_size != 0)
	{
		gguf_w_error(w, LLM_ERR_INVALID,
					 "tensor \"%s\" has ne[0] = %lld, not a multiple of the %s block size %d",
					 name, (long long) ne[0], traits->name, traits->block_size);
		return;
	}
	row_bytes = (uint64_t) ne[0] / (uint64_t) traits->block_size * (uint64_t) traits->type_size;
	if (row_bytes > SIZE_MAX / (count / (uint64_t) ne[0]))
	{
		gguf_w_error(w, LLM_ERR_NOMEM, "tensor \"%s\" is too large", name);
		return;
	}
	size = row_bytes * (count / (uint64_t) ne[0]);
	if (data == NULL)
	{
		gguf_w_error(w, LLM_ERR_INVALID, "tensor \"%s\" has no data", name);
		return;
	}
	for (size_t i = 0; i < w->n_tensors; i++)
		if (strcmp(w->tensors[i].name, name) == 0)
		{
			gguf_w_error(w, LLM_ERR_INVALID, "duplicate tensor name \"%s\"", name);
			return;
		}
	if (w->n_tensors == w->cap_tensors)
	{
		size_t		cap = w->cap_tensors > 0 ? w->cap_tensors * 2 : 16;
		GgufWriterTensor *p = realloc(w->tensors, cap * sizeof(GgufWriterTensor));

		if (p == NULL)
		{
			gguf_w_error(w, LLM_ERR_NOMEM, "out of memory adding tensor \"%s\"", name);
			return;
		}
		w->tensors = p;
		w->cap_tensors = cap;
	}
	t = &w->tensors[w->n_tensors];
	memset(t, 0, sizeof(*t));
	t->name = strdup(name);
	t->data = malloc((size_t) size);
	if (t->name == NULL || t->data == NULL)
	{
		free(t->name);
		free(t->data);
		gguf_w_error(w, LLM_ERR_NOMEM, "out of memory adding tensor \"%s\" (%llu bytes)",
					 name, (unsigned long long) size);
		return;
	}
	memcpy(t->data, data, (size_t) size);
	t->type = type;
	t->n_dims = n_dims;
	for (int d = 0; d < LLM_GGUF_MAX_DIMS; d++)
		t->ne[d] = d < n_dims ? ne[d] : 1;
	t->size = size;
	w->n_tensors++;
}

/* Write n bytes to the output. */
static void
gguf_out(GgufOut *o, const void *p, size_t n)
{
	if (o->failed || n == 0)
		return;
	if (fwrite(p, 1, n, o->fp) != n)
	{
		o->failed = true;
		o->saved_errno = errno != 0 ? errno : EIO;
		return;
	}
	o->pos += n;
}

/* Write v as n little-endian bytes. */
static void
gguf_out_le(GgufOut *o, uint64_t v, int n)
{
	uint8_t		bytes[8];

	for (int i = 0; i < n; i++)
		bytes[i] = (uint8_t) (v >> (8 * i));
	gguf_out(o, bytes, (size_t) n);
}

/* Write zeros up to the next multiple of alignment. */
static void
gguf_out_pad(GgufOut *o, uint64_t alignment)
{
	static const uint8_t zeros[256];
	uint64_t	pad = (alignment - o->pos % alignment) % alignment;

	while (pad > 0 && !o->failed)
	{
		size_t		n = pad < sizeof(zeros) ? (size_t) pad : sizeof(zeros);

		gguf_out(o, zeros, n);
		pad -= n;
	}
}

/* Write the file; reports allocation failures collected by earlier calls. */
LlmStatus
llm_gguf_writer_save(LlmGgufWriter *w, const char *path, LlmError *err)
{
	GgufOut		o = {0};
	uint64_t	offset = 0;
	int			close_rc;

	if (w == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM,
							 "could not write GGUF file \"%s\": the writer could not be allocated",
							 path != NULL ? path : "(null)");
	if (path == NULL)
		return llm_error_set(err, LLM_ERR_INVALID, "llm_gguf_writer_save: path must not be NULL");
	if (w->error.status != LLM_OK)
		return llm_error_set(err, w->error.status, "could not write GGUF file \"%s\": %s",
							 path, w->error.msg);

	o.fp = fopen(path, "wb");
	if (o.fp == NULL)
		return llm_error_set(err, LLM_ERR_IO, "could not create GGUF file \"%s\": %s",
							 path, strerror(errno));

	/* header */
	gguf_out_le(&o, LLM_GGUF_MAGIC, 4);
	gguf_out_le(&o, 3, 4);
	gguf_out_le(&o, w->n_tensors, 8);
	gguf_out_le(&o, w->n_kv, 8);

	/* metadata */
	for (size_t i = 0; i < w->n_kv; i++)
	{
		size_t		len = strlen(w->kv[i].key);

		gguf_out_le(&o, len, 8);
		gguf_out(&o, w->kv[i].key, len);
		gguf_out(&o, w->kv[i].value.data, w->kv[i].value.len);
	}

	/* tensor infos, data offsets aligned */
	for (size_t i = 0; i < w->n_tensors; i++)
	{
		GgufWriterTensor *t = &w->tensors[i];
		size_t		len = strlen(t->name);

		t->offset = offset;
		offset += (t->size + w->alignment - 1) / w->alignment * w->alignment;
		gguf_out_le(&o, len, 8);
		gguf_out(&o, t->name, len);
		gguf_out_le(&o, (uint64_t) t->n_dims, 4);
		for (int d = 0; d < t->n_dims; d++)
			gguf_out_le(&o, (uint64_t) t->ne[d], 8);
		gguf_out_le(&o, llm_type_file_id(t->type), 4);
		gguf_out_le(&o, t->offset, 8);
	}

	/* tensor data, each padded to the alignment */
	if (w->n_tensors > 0)
		gguf_out_pad(&o, w->alignment);
	for (size_t i = 0; i < w->n_tensors; i++)
	{
		gguf_out(&o, w->tensors[i].data, (size_t) w->tensors[i].size);
		gguf_out_pad(&o, w->alignment);
	}

	if (!o.failed && fflush(o.fp) != 0)
	{
		o.failed = true;
		o.saved_errno = errno;
	}
	close_rc = fclose(o.fp);
	if (!o.failed && close_rc != 0)
	{
		o.failed = true;
		o.saved_errno = errno;
	}
	if (o.failed)
	{
		remove(path);
		return llm_error_set(err, LLM_ERR_IO, "could not write GGUF file \"%s\": %s",
							 path, strerror(o.saved_errno));
	}
	return LLM_OK;
}
