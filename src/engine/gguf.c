/*
 * gguf.c
 *		Bounds-checked reader for GGUF v2/v3 files (see gguf.h).
 *
 * A GGUF file is a header (magic "GGUF", uint32 version, uint64 tensor
 * count, uint64 metadata count), the metadata as key/value pairs, the tensor
 * infos (name, dimensions, type, offset), then, at the next multiple of
 * general.alignment, the tensor data.  Every integer is little-endian.
 *
 * The parser reads header, metadata and tensor table once, up front, through
 * a cursor that checks every read against the bytes left.  Every count is
 * checked against what the remaining bytes could possibly hold (each key or
 * tensor info, each array element has a known minimum encoded size) before
 * anything is allocated for it, so a hostile file cannot make us allocate
 * more than a small multiple of its own size.  After the metadata, the keys
 * are sorted (duplicates become neighbours; lookups become binary searches);
 * after the tensor infos, the tensors are sorted by name (duplicates) and by
 * offset (overlaps).
 *
 * Strings and numeric arrays are not copied: they point into the mapping.
 * The mapping is private and read-only; if another process truncates the file
 * while it is mapped, touching the lost pages raises SIGBUS, which no reader
 * of a mapped file can prevent (model files are not rewritten in place).
 */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_MAX_NAME 1024		/* bytes in a key or a tensor name */
#define GGUF_MAX_DEPTH 8		/* arrays nested inside arrays */
#define GGUF_MAX_COUNT ((uint64_t) 1 << 24) /* keys, tensors */
#define GGUF_MIN_KV_BYTES 14	/* key length 8 + key 1 + type 4 + value 1 */
#define GGUF_MIN_TENSOR_BYTES 33	/* name length 8 + name 1 + n_dims 4 + dim 8 +
									 * type 4 + offset 8 */
#define GGUF_NO_ELEM UINT64_MAX /* "not an array element" */
#define GGUF_WHERE_LEN (GGUF_MAX_NAME + 32)

/* An opened file: the public struct first, then what only we need. */
typedef struct GgufFile
{
	LlmGguf		pub;			/* must be first: callers hold &pub */
	char	   *source;			/* the path, or "<memory>" */
	void	   *mapping;		/* mmap'd region, or NULL */
	size_t		mapping_len;
	LlmGgufKv **kv_by_key;		/* (n_kv) sorted by key */
	LlmGgufTensor **tensor_by_name; /* (n_tensors) sorted by name */
} GgufFile;

/* A read cursor over the image. */
typedef struct GgufParser
{
	const uint8_t *buf;
	uint64_t	size;
	uint64_t	pos;
	const char *source;
	LlmError   *err;
} GgufParser;

static const uint8_t gguf_empty[1];

/* Little-endian uint16 at p. */
static inline uint16_t
gguf_le16(const uint8_t *p)
{
	return (uint16_t) (p[0] | (p[1] << 8));
}

/* Little-endian uint32 at p. */
static inline uint32_t
gguf_le32(const uint8_t *p)
{
	return (uint32_t) p[0] | ((uint32_t) p[1] << 8) |
		((uint32_t) p[2] << 16) | ((uint32_t) p[3] << 24);
}

/* Little-endian uint64 at p. */
static inline uint64_t
gguf_le64(const uint8_t *p)
{
	return (uint64_t) gguf_le32(p) | ((uint64_t) gguf_le32(p + 4) << 32);
}

/* The float whose bits are the little-endian uint32 at p. */
static inline float
gguf_lef32(const uint8_t *p)
{
	uint32_t	bits = gguf_le32(p);
	float		f;

	memcpy(&f, &bits, sizeof(f));
	return f;
}

/* The double whose bits are the little-endian uint64 at p. */
static inline double
gguf_lef64(const uint8_t *p)
{
	uint64_t	bits = gguf_le64(p);
	double		d;

	memcpy(&d, &bits, sizeof(d));
	return d;
}

/* Bytes of one element of a fixed-size metadata type, 0 for string/array/invalid. */
size_t
llm_gguf_type_size(LlmGgufType t)
{
	switch (t)
	{
		case LLM_GGUF_UINT8:
		case LLM_GGUF_INT8:
		case LLM_GGUF_BOOL:
			return 1;
		case LLM_GGUF_UINT16:
		case LLM_GGUF_INT16:
			return 2;
		case LLM_GGUF_UINT32:
		case LLM_GGUF_INT32:
		case LLM_GGUF_FLOAT32:
			return 4;
		case LLM_GGUF_UINT64:
		case LLM_GGUF_INT64:
		case LLM_GGUF_FLOAT64:
			return 8;
		default:
			return 0;
	}
}

/* The name of a metadata value type, e.g. "uint32". */
const char *
llm_gguf_type_name(LlmGgufType t)
{
	switch (t)
	{
		case LLM_GGUF_UINT8:
			return "uint8";
		case LLM_GGUF_INT8:
			return "int8";
		case LLM_GGUF_UINT16:
			return "uint16";
		case LLM_GGUF_INT16:
			return "int16";
		case LLM_GGUF_UINT32:
			return "uint32";
		case LLM_GGUF_INT32:
			return "int32";
		case LLM_GGUF_FLOAT32:
			return "float32";
		case LLM_GGUF_BOOL:
			return "bool";
		case LLM_GGUF_STRING:
			return "string";
		case LLM_GGUF_ARRAY:
			return "array";
		case LLM_GGUF_UINT64:
			return "uint64";
		case LLM_GGUF_INT64:
			return "int64";
		case LLM_GGUF_FLOAT64:
			return "float64";
		case LLM_GGUF_TYPE_COUNT:
			break;
	}
	return "unknown";
}

/* Record a format (or unsupported) error about the file being parsed. */
static LlmStatus
gguf_fail(const GgufParser *p, LlmStatus status, const char *fmt,...)
__attribute__((format(printf, 3, 4)));

static LlmStatus
gguf_fail(const GgufParser *p, LlmStatus status, const char *fmt,...)
{
	char		detail[LLM_ERROR_MSG_LEN];
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	return llm_error_set(p->err, status, "%s GGUF file \"%s\": %s",
						 status == LLM_ERR_UNSUPPORTED ? "unsupported" : "invalid",
						 p->source, detail);
}

/* Record that the file ended while reading the field described by fmt. */
static LlmStatus
gguf_eof(const GgufParser *p, const char *fmt,...)
__attribute__((format(printf, 2, 3)));

static LlmStatus
gguf_eof(const GgufParser *p, const char *fmt,...)
{
	char		what[LLM_ERROR_MSG_LEN];
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return gguf_fail(p, LLM_ERR_FORMAT,
					 "unexpected end of file reading %s at offset %llu (the file is %llu bytes)",
					 what, (unsigned long long) p->pos, (unsigned long long) p->size);
}

/* Record an allocation failure. */
static LlmStatus
gguf_nomem(const GgufParser *p)
{
	return llm_error_set(p->err, LLM_ERR_NOMEM,
						 "out of memory reading GGUF file \"%s\"", p->source);
}

/* Take n bytes at the cursor (*ptr), or false when fewer are left. */
static inline bool
gguf_take(GgufParser *p, uint64_t n, const uint8_t **ptr)
{
	if (n > p->size - p->pos)
		return false;
	*ptr = p->buf + p->pos;
	p->pos += n;
	return true;
}

/* Bytes left after the cursor. */
static inline uint64_t
gguf_left(const GgufParser *p)
{
	return p->size - p->pos;
}

/* " (array element N)" for an array element, "" otherwise, into buf. */
static const char *
gguf_elem(char *buf, size_t len, uint64_t elem)
{
	if (elem == GGUF_NO_ELEM)
		return "";
	snprintf(buf, len, " (array element %llu)", (unsigned long long) elem);
	return buf;
}

/*
 * Read the name of key or tensor number index ("what" says which) into a new
 * NUL-terminated string: nonempty, at most GGUF_MAX_NAME bytes, no NUL byte.
 */
static LlmStatus
gguf_read_name(GgufParser *p, const char *what, uint64_t index, char **out)
{
	const uint8_t *ptr;
	uint64_t	len;
	char	   *name;

	if (!gguf_take(p, 8, &ptr))
		return gguf_eof(p, "the name length of %s %llu", what, (unsigned long long) index);
	len = gguf_le64(ptr);
	if (len == 0)
		return gguf_fail(p, LLM_ERR_FORMAT, "%s %llu has an empty name",
						 what, (unsigned long long) index);
	if (len > GGUF_MAX_NAME)
		return gguf_fail(p, LLM_ERR_FORMAT,
						 "the name of %s %llu is %llu bytes long (the limit is %d)",
						 what, (unsigned long long) index, (unsigned long long) len,
						 GGUF_MAX_NAME);
	if (!gguf_take(p, len, &ptr))
		return gguf_eof(p, "the name of %s %llu (%llu bytes)", what,
						(unsigned long long) index, (unsigned long long) len);
	if (memchr(ptr, '\0', len) != NULL)
		return gguf_fail(p, LLM_ERR_FORMAT, "the name of %s %llu contains a NUL byte",
						 what, (unsigned long long) index);
	name = malloc(len + 1);
	if (name == NULL)
		return gguf_nomem(p);
	memcpy(name, ptr, len);
	name[len] = '\0';
	*out = name;
	return LLM_OK;
}

/* Free what a parsed value owns (nested item arrays); the value itself is not freed. */
static void
gguf_free_value(LlmGgufValue *v)
{
	if (v->type != LLM_GGUF_ARRAY || v->arr_items == NULL)
		return;
	if (v->arr_type == LLM_GGUF_ARRAY)
	{
		for (uint64_t j = 0; j < v->arr_len; j++)
			gguf_free_value(&v->arr_items[j]);
	}
	free(v->arr_items);
	v->arr_items = NULL;
}

/*
 * Parse one value of the given (valid) type at the cursor into v.  where
 * names the key ("key \"x\""), elem the index in the innermost array (or
 * GGUF_NO_ELEM); depth counts enclosing arrays.
 */
static LlmStatus
gguf_parse_value(GgufParser *p, LlmGgufType type, LlmGgufValue *v, int depth,
				 const char *where, uint64_t elem)
{
	const uint8_t *ptr;
	char		eb[48];
	uint64_t	esize;
	uint64_t	len;
	uint32_t	arr_type;
	LlmStatus	st;

	memset(v, 0, sizeof(*v));
	v->type = type;
	switch (type)
	{
		case LLM_GGUF_UINT8:
		case LLM_GGUF_INT8:
		case LLM_GGUF_UINT16:
		case LLM_GGUF_INT16:
		case LLM_GGUF_UINT32:
		case LLM_GGUF_INT32:
		case LLM_GGUF_FLOAT32:
		case LLM_GGUF_BOOL:
		case LLM_GGUF_UINT64:
		case LLM_GGUF_INT64:
		case LLM_GGUF_FLOAT64:
			if (!gguf_take(p, llm_gguf_type_size(type), &ptr))
				return gguf_eof(p, "the %s value of %s%s", llm_gguf_type_name(type),
								where, gguf_elem(eb, sizeof(eb), elem));
			switch (type)
			{
				case LLM_GGUF_UINT8:
					v->num.u = ptr[0];
					break;
				case LLM_GGUF_INT8:
					v->num.i = (int8_t) ptr[0];
					break;
				case LLM_GGUF_UINT16:
					v->num.u = gguf_le16(ptr);
					break;
				case LLM_GGUF_INT16:
					v->num.i = (int16_t) gguf_le16(ptr);
					break;
				case LLM_GGUF_UINT32:
					v->num.u = gguf_le32(ptr);
					break;
				case LLM_GGUF_INT32:
					v->num.i = (int32_t) gguf_le32(ptr);
					break;
				case LLM_GGUF_FLOAT32:
					v->num.f = gguf_lef32(ptr);
					break;
				case LLM_GGUF_BOOL:
					if (ptr[0] > 1)
						return gguf_fail(p, LLM_ERR_FORMAT,
										 "%s%s has boolean value %u (expected 0 or 1)",
										 where, gguf_elem(eb, sizeof(eb), elem), ptr[0]);
					v->num.u = ptr[0];
					break;
				case LLM_GGUF_UINT64:
					v->num.u = gguf_le64(ptr);
					break;
				case LLM_GGUF_INT64:
					v->num.i = (int64_t) gguf_le64(ptr);
					break;
				default:
					v->num.f = gguf_lef64(ptr);
					break;
			}
			return LLM_OK;

		case LLM_GGUF_STRING:
			if (!gguf_take(p, 8, &ptr))
				return gguf_eof(p, "the string length of %s%s",
								where, gguf_elem(eb, sizeof(eb), elem));
			len = gguf_le64(ptr);
			if (len > gguf_left(p))
				return gguf_fail(p, LLM_ERR_FORMAT,
								 "the string value of %s%s is %llu bytes long, more than the %llu bytes left in the file",
								 where, gguf_elem(eb, sizeof(eb), elem),
								 (unsigned long long) len, (unsigned long long) gguf_left(p));
			gguf_take(p, len, &ptr);
			v->str.ptr = (const char *) ptr;
			v->str.len = len;
			return LLM_OK;

		case LLM_GGUF_ARRAY:
			if (depth >= GGUF_MAX_DEPTH)
				return gguf_fail(p, LLM_ERR_FORMAT,
								 "%s has arrays nested more than %d deep",
								 where, GGUF_MAX_DEPTH);
			if (!gguf_take(p, 4, &ptr))
				return gguf_eof(p, "the array element type of %s%s",
								where, gguf_elem(eb, sizeof(eb), elem));
			arr_type = gguf_le32(ptr);
			if (arr_type >= LLM_GGUF_TYPE_COUNT)
				return gguf_fail(p, LLM_ERR_FORMAT,
								 "%s%s is an array of invalid element type %u",
								 where, gguf_elem(eb, sizeof(eb), elem), arr_type);
			if (!gguf_take(p, 8, &ptr))
				return gguf_eof(p, "the array length of %s%s",
								where, gguf_elem(eb, sizeof(eb), elem));
			len = gguf_le64(ptr);
			esize = llm_gguf_type_size((LlmGgufType) arr_type);
			if (esize == 0)		/* string: length 8; array: type 4 + length 8 */
				esize = arr_type == LLM_GGUF_STRING ? 8 : 12;
			if (len > gguf_left(p) / esize)
				return gguf_fail(p, LLM_ERR_FORMAT,
								 "%s%s is an array of %llu %s elements, more than the %llu bytes left in the file can hold",
								 where, gguf_elem(eb, sizeof(eb), elem),
								 (unsigned long long) len,
								 llm_gguf_type_name((LlmGgufType) arr_type),
								 (unsigned long long) gguf_left(p));
			v->arr_type = (LlmGgufType) arr_type;
			v->arr_len = len;
			if (arr_type != LLM_GGUF_STRING && arr_type != LLM_GGUF_ARRAY)
			{
				gguf_take(p, len * esize, &ptr);
				v->arr_data = ptr;
				if (arr_type == LLM_GGUF_BOOL)
				{
					for (uint64_t j = 0; j < len; j++)
						if (ptr[j] > 1)
							return gguf_fail(p, LLM_ERR_FORMAT,
											 "%s (array element %llu) has boolean value %u (expected 0 or 1)",
											 where, (unsigned long long) j, ptr[j]);
				}
				return LLM_OK;
			}
			if (len == 0)
				return LLM_OK;
			v->arr_items = calloc(len, sizeof(LlmGgufValue));
			if (v->arr_items == NULL)
				return gguf_nomem(p);
			for (uint64_t j = 0; j < len; j++)
			{
				st = gguf_parse_value(p, (LlmGgufType) arr_type, &v->arr_items[j],
									  depth + 1, where, j);
				if (st != LLM_OK)
					return st;
			}
			return LLM_OK;

		case LLM_GGUF_TYPE_COUNT:
			break;
	}
	return gguf_fail(p, LLM_ERR_FORMAT, "%s has invalid value type %d", where, (int) type);
}

/* qsort order of key pointers by key. */
static int
gguf_cmp_kv(const void *a, const void *b)
{
	const LlmGgufKv *x = *(const LlmGgufKv *const *) a;
	const LlmGgufKv *y = *(const LlmGgufKv *const *) b;

	return strcmp(x->key, y->key);
}

/* qsort order of tensor pointers by name. */
static int
gguf_cmp_tensor_name(const void *a, const void *b)
{
	const LlmGgufTensor *x = *(const LlmGgufTensor *const *) a;
	const LlmGgufTensor *y = *(const LlmGgufTensor *const *) b;

	return strcmp(x->name, y->name);
}

/* qsort order of tensor pointers by data offset. */
static int
gguf_cmp_tensor_offset(const void *a, const void *b)
{
	const LlmGgufTensor *x = *(const LlmGgufTensor *const *) a;
	const LlmGgufTensor *y = *(const LlmGgufTensor *const *) b;

	if (x->offset != y->offset)
		return x->offset < y->offset ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Binary search of the sorted key index; NULL when absent. */
static const LlmGgufKv *
gguf_find_kv(const GgufFile *f, const char *key)
{
	uint64_t	lo = 0;
	uint64_t	hi = f->pub.n_kv;

	if (f->kv_by_key == NULL)
		return NULL;
	while (lo < hi)
	{
		uint64_t	mid = lo + (hi - lo) / 2;
		int			c = strcmp(f->kv_by_key[mid]->key, key);

		if (c == 0)
			return f->kv_by_key[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* Parse the header and the metadata into f. */
static LlmStatus
gguf_parse_metadata(GgufParser *p, GgufFile *f)
{
	LlmGguf    *g = &f->pub;
	const uint8_t *ptr;
	uint32_t	magic;
	uint64_t	n_kv;
	uint64_t	n_tensors;
	char		where[GGUF_WHERE_LEN];
	LlmStatus	st;

	if (!gguf_take(p, 4, &ptr))
		return gguf_eof(p, "the magic number");
	magic = gguf_le32(ptr);
	if (magic != LLM_GGUF_MAGIC)
		return gguf_fail(p, LLM_ERR_FORMAT,
						 "bad magic number 0x%08x (a GGUF file starts with \"GGUF\")", magic);
	if (!gguf_take(p, 4, &ptr))
		return gguf_eof(p, "the version");
	g->version = gguf_le32(ptr);
	if (g->version == 0x02000000u || g->version == 0x03000000u)
		return gguf_fail(p, LLM_ERR_UNSUPPORTED,
						 "big-endian GGUF files are not supported (version field 0x%08x)",
						 g->version);
	if (g->version == 1 || g->version > 3)
		return gguf_fail(p, LLM_ERR_UNSUPPORTED,
						 "GGUF version %u is not supported (only versions 2 and 3 are)",
						 g->version);
	if (g->version != 2 && g->version != 3)
		return gguf_fail(p, LLM_ERR_FORMAT, "invalid GGUF version %u", g->version);
	if (!gguf_take(p, 8, &ptr))
		return gguf_eof(p, "the tensor count (n_tensors)");
	n_tensors = gguf_le64(ptr);
	if (!gguf_take(p, 8, &ptr))
		return gguf_eof(p, "the metadata count (n_kv)");
	n_kv = gguf_le64(ptr);
	if (n_kv > GGUF_MAX_COUNT)
		return gguf_fail(p, LLM_ERR_FORMAT, "the metadata count n_kv = %llu exceeds the limit of %llu",
						 (unsigned long long) n_kv, (unsigned long long) GGUF_MAX_COUNT);
	if (n_tensors > GGUF_MAX_COUNT)
		return gguf_fail(p, LLM_ERR_FORMAT, "the tensor count n_tensors = %llu exceeds the limit of %llu",
						 (unsigned long long) n_tensors, (unsigned long long) GGUF_MAX_COUNT);
	if (n_kv > gguf_left(p) / GGUF_MIN_KV_BYTES)
		return gguf_fail(p, LLM_ERR_FORMAT,
						 "the metadata count n_kv = %llu is more than the %llu bytes left in the file can hold",
						 (unsigned long long) n_kv, (unsigned long long) gguf_left(p));
	g->n_tensors = n_tensors;	/* checked and allocated after the metadata */

	if (n_kv > 0)
	{
		g->kv = calloc(n_kv, sizeof(LlmGgufKv));
		if (g->kv == NULL)
			return gguf_nomem(p);
		g->n_kv = n_kv;
	}
	for (uint64_t i = 0; i < n_kv; i++)
	{
		LlmGgufKv  *kv = &g->kv[i];
		uint32_t	type;

		st = gguf_read_name(p, "key", i, &kv->key);
		if (st != LLM_OK)
			return st;
		snprintf(where, sizeof(where), "key \"%s\"", kv->key);
		if (!gguf_take(p, 4, &ptr))
			return gguf_eof(p, "the value type of %s", where);
		type = gguf_le32(ptr);
		if (type >= LLM_GGUF_TYPE_COUNT)
			return gguf_fail(p, LLM_ERR_FORMAT, "%s has invalid value type %u", where, type);
		st = gguf_parse_value(p, (LlmGgufType) type, &kv->value, 0, where, GGUF_NO_ELEM);
		if (st != LLM_OK)
			return st;
	}

	/* Sort the keys: duplicates become neighbours, lookups binary searches. */
	if (n_kv > 0)
	{
		f->kv_by_key = malloc(n_kv * sizeof(LlmGgufKv *));
		if (f->kv_by_key == NULL)
			return gguf_nomem(p);
		for (uint64_t i = 0; i < n_kv; i++)
			f->kv_by_key[i] = &g->kv[i];
		qsort(f->kv_by_key, n_kv, sizeof(LlmGgufKv *), gguf_cmp_kv);
		for (uint64_t i = 1; i < n_kv; i++)
			if (strcmp(f->kv_by_key[i - 1]->key, f->kv_by_key[i]->key) == 0)
				return gguf_fail(p, LLM_ERR_FORMAT, "duplicate key \"%s\"",
								 f->kv_by_key[i]->key);
	}

	g->alignment = LLM_GGUF_DEFAULT_ALIGNMENT;
	{
		const LlmGgufKv *a = gguf_find_kv(f, "general.alignment");

		if (a != NULL)
		{
			if (a->value.type != LLM_GGUF_UINT32)
				return gguf_fail(p, LLM_ERR_FORMAT,
								 "key \"general.alignment\" has type %s (expected uint32)",
								 llm_gguf_type_name(a->value.type));
			if (a->value.num.u == 0 || (a->value.num.u & (a->value.num.u - 1)) != 0)
				return gguf_fail(p, LLM_ERR_FORMAT,
								 "key \"general.alignment\" is %llu (it must be a nonzero power of two)",
								 (unsigned long long) a->value.num.u);
			g->alignment = a->value.num.u;
		}
	}
	return LLM_OK;
}

/* Parse the tensor infos after the metadata and place the data section. */
static LlmStatus
gguf_parse_tensors(GgufParser *p, GgufFile *f)
{
	LlmGguf    *g = &f->pub;
	uint64_t	n = g->n_tensors;
	const uint8_t *ptr;
	char		where[GGUF_WHERE_LEN];
	uint64_t	avail;
	LlmGgufTensor **by_offset;
	LlmStatus	st;

	if (n == 0)
	{
		/* Vocabulary-only files may end right after the metadata, unpadded. */
		g->data_offset = (p->pos + g->alignment - 1) / g->alignment * g->alignment;
		if (g->data_offset > p->size)
			g->data_offset = p->size;
		return LLM_OK;
	}
	if (n > gguf_left(p) / GGUF_MIN_TENSOR_BYTES)
		return gguf_fail(p, LLM_ERR_FORMAT,
						 "the tensor count n_tensors = %llu is more than the %llu bytes left after the metadata can hold",
						 (unsigned long long) n, (unsigned long long) gguf_left(p));
	g->n_tensors = 0;
	g->tensors = calloc(n, sizeof(LlmGgufTensor));
	if (g->tensors == NULL)
		return gguf_nomem(p);
	g->n_tensors = n;

	for (uint64_t i = 0; i < n; i++)
	{
		LlmGgufTensor *t = &g->tensors[i];
		const LlmTypeTraits *traits;
		uint32_t	n_dims;
		uint32_t	type;
		uint64_t	count = 1;
		uint64_t	rows;
		uint64_t	row_bytes;

		st = gguf_read_name(p, "tensor", i, &t->name);
		if (st != LLM_OK)
			return st;
		snprintf(where, sizeof(where), "tensor \"%s\"", t->name);

		if (!gguf_take(p, 4, &ptr))
			return gguf_eof(p, "the dimension count of %s", where);
		n_dims = gguf_le32(ptr);
		if (n_dims < 1 || n_dims > LLM_GGUF_MAX_DIMS)
			return gguf_fail(p, LLM_ERR_FORMAT, "%s has %u dimensions (expected 1 to %d)",
							 where, n_dims, LLM_GGUF_MAX_DIMS);
		t->n_dims = (int) n_dims;
		for (int d = 0; d < LLM_GGUF_MAX_DIMS; d++)
			t->ne[d] = 1;
		for (uint32_t d = 0; d < n_dims; d++)
		{
			uint64_t	ne;

			if (!gguf_take(p, 8, &ptr))
				return gguf_eof(p, "dimension %u of %s", d, where);
			ne = gguf_le64(ptr);
			if (ne == 0)
				return gguf_fail(p, LLM_ERR_FORMAT, "%s has dimension ne[%u] = 0", where, d);
			if (ne > (uint64_t) INT64_MAX || count > (uint64_t) INT64_MAX / ne)
				return gguf_fail(p, LLM_ERR_FORMAT,
								 "%s has dimension ne[%u] = %llu: its element count overflows",
								 where, d, (unsigned long long) ne);
			count *= ne;
			t->ne[d] = (int64_t) ne;
		}

		if (!gguf_take(p, 4, &ptr))
			return gguf_eof(p, "the type of %s", where);
		type = gguf_le32(ptr);
		traits = llm_type_from_file_id(type) >= 0 ? llm_type_traits(llm_type_from_file_id(type)) : NULL;
		if (traits == NULL)
			return gguf_fail(p, LLM_ERR_UNSUPPORTED, "%s has type %u, which is not supported",
							 where, type);
		t->type = (LlmType) llm_type_from_file_id(type);
		if (t->ne[0] % traits->block_size != 0)
			return gguf_fail(p, LLM_ERR_FORMAT,
							 "%s has ne[0] = %lld, not a multiple of the %s block size %d",
							 where, (long long) t->ne[0], traits->name, traits->block_size);

		if (!gguf_take(p, 8, &ptr))
			return gguf_eof(p, "the data offset of %s", where);
		t->offset = gguf_le64(ptr);
		if (t->offset % g->alignment != 0)
			return gguf_fail(p, LLM_ERR_FORMAT,
							 "%s data offset %llu is not a multiple of the alignment %llu",
							 where, (unsigned long long) t->offset,
							 (unsigned long long) g->alignment);

		/* size = llm_type_row_size(type, ne[0]) * rows, without overflow */
		rows = count / (uint64_t) t->ne[0];
		row_bytes = (uint64_t) t->ne[0] / (uint64_t) traits->block_size;
		if (row_bytes > UINT64_MAX / (uint64_t) traits->type_size ||
			row_bytes * (uint64_t) traits->type_size > UINT64_MAX / rows)
			return gguf_fail(p, LLM_ERR_FORMAT, "%s is too large (its size in bytes overflows)",
							 where);
		row_bytes *= (uint64_t) traits->type_size;
		t->size = row_bytes * rows;
	}

	/* Names: sorted for lookups, duplicates rejected. */
	f->tensor_by_name = malloc(n * sizeof(LlmGgufTensor *));
	if (f->tensor_by_name == NULL)
		return gguf_nomem(p);
	for (uint64_t i = 0; i < n; i++)
		f->tensor_by_name[i] = &g->tensors[i];
	qsort(f->tensor_by_name, n, sizeof(LlmGgufTensor *), gguf_cmp_tensor_name);
	for (uint64_t i = 1; i < n; i++)
		if (strcmp(f->tensor_by_name[i - 1]->name, f->tensor_by_name[i]->name) == 0)
			return gguf_fail(p, LLM_ERR_FORMAT, "duplicate tensor name \"%s\"",
							 f->tensor_by_name[i]->name);

	/* The data section starts at the aligned end of the tensor infos. */
	g->data_offset = (p->pos + g->alignment - 1) / g->alignment * g->alignment;
	avail = g->data_offset < p->size ? p->size - g->data_offset : 0;
	if (g->data_offset > p->size)
		g->data_offset = p->size;
	for (uint64_t i = 0; i < n; i++)
	{
		LlmGgufTensor *t = &g->tensors[i];

		if (t->offset > avail || t->size > avail - t->offset)
			return gguf_fail(p, LLM_ERR_FORMAT,
							 "tensor \"%s\" data (offset %llu, %llu bytes) extends past the end of the file (%llu bytes)",
							 t->name, (unsigned long long) t->offset,
							 (unsigned long long) t->size, (unsigned long long) p->size);
		t->data = p->buf + g->data_offset + t->offset;
	}

	/* Offsets: sorted, each tensor must end before the next begins. */
	by_offset = malloc(n * sizeof(LlmGgufTensor *));
	if (by_offset == NULL)
		return gguf_nomem(p);
	memcpy(by_offset, f->tensor_by_name, n * sizeof(LlmGgufTensor *));
	qsort(by_offset, n, sizeof(LlmGgufTensor *), gguf_cmp_tensor_offset);
	st = LLM_OK;
	for (uint64_t i = 1; i < n && st == LLM_OK; i++)
	{
		const LlmGgufTensor *a = by_offset[i - 1];
		const LlmGgufTensor *b = by_offset[i];

		if (a->offset + a->size > b->offset)
			st = gguf_fail(p, LLM_ERR_FORMAT,
						   "tensor \"%s\" data (offset %llu, %llu bytes) overlaps tensor \"%s\" data (offset %llu, %llu bytes)",
						   b->name, (unsigned long long) b->offset, (unsigned long long) b->size,
						   a->name, (unsigned long long) a->offset, (unsigned long long) a->size);
	}
	free(by_offset);
	return st;
}

/* Free a file and everything it owns (partially parsed ones included). */
static void
gguf_file_free(GgufFile *f)
{
	LlmGguf    *g;

	if (f == NULL)
		return;
	g = &f->pub;
	if (g->kv != NULL)
	{
		for (uint64_t i = 0; i < g->n_kv; i++)
		{
			free(g->kv[i].key);
			gguf_free_value(&g->kv[i].value);
		}
		free(g->kv);
	}
	if (g->tensors != NULL)
	{
		for (uint64_t i = 0; i < g->n_tensors; i++)
			free(g->tensors[i].name);
		free(g->tensors);
	}
	free(f->kv_by_key);
	free(f->tensor_by_name);
	if (f->mapping != NULL)
		munmap(f->mapping, f->mapping_len);
	free(f->source);
	free(f);
}

/* Allocate an empty file record for source; NULL when out of memory. */
static GgufFile *
gguf_file_new(const char *source)
{
	GgufFile   *f = calloc(1, sizeof(GgufFile));

	if (f == NULL)
		return NULL;
	f->source = strdup(source);
	if (f->source == NULL)
	{
		free(f);
		return NULL;
	}
	return f;
}

/* Parse the image buf (size bytes) into f. */
static LlmStatus
gguf_parse(GgufFile *f, const uint8_t *buf, uint64_t size, LlmError *err)
{
	GgufParser	p;
	LlmStatus	st;

	p.buf = buf;
	p.size = size;
	p.pos = 0;
	p.source = f->source;
	p.err = err;
	f->pub.map = buf;
	f->pub.file_size = size;
	st = gguf_parse_metadata(&p, f);
	if (st == LLM_OK)
		st = gguf_parse_tensors(&p, f);
	return st;
}

/* Open and fully validate a GGUF file; *out is set only on success. */
LlmStatus
llm_gguf_open(const char *path, LlmGguf **out, LlmError *err)
{
	struct stat st;
	GgufFile   *f;
	void	   *map = NULL;
	uint64_t	size;
	int			fd;
	LlmStatus	status;

	if (path == NULL || out == NULL)
		return llm_error_set(err, LLM_ERR_INVALID, "llm_gguf_open: path and out must not be NULL");
	/* O_NONBLOCK: a FIFO or device must not block the open; only regular files pass below */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return llm_error_set(err, LLM_ERR_IO, "could not open GGUF file \"%s\": %s",
							 path, strerror(errno));
	if (fstat(fd, &st) != 0)
	{
		int			e = errno;

		close(fd);
		return llm_error_set(err, LLM_ERR_IO, "could not stat GGUF file \"%s\": %s",
							 path, strerror(e));
	}
	if (!S_ISREG(st.st_mode))
	{
		close(fd);
		return llm_error_set(err, LLM_ERR_IO, "could not open GGUF file \"%s\": %s", path,
							 S_ISDIR(st.st_mode) ? "it is a directory" : "it is not a regular file");
	}
	size = (uint64_t) st.st_size;
	if (size > (uint64_t) SIZE_MAX)
	{
		close(fd);
		return llm_error_set(err, LLM_ERR_IO, "could not map GGUF file \"%s\": it is too large",
							 path);
	}
	if (size > 0)
	{
		map = mmap(NULL, (size_t) size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (map == MAP_FAILED)
		{
			int			e = errno;

			close(fd);
			return llm_error_set(err, LLM_ERR_IO, "could not map GGUF file \"%s\": %s",
								 path, strerror(e));
		}
	}
	close(fd);

	f = gguf_file_new(path);
	if (f == NULL)
	{
		if (map != NULL)
			munmap(map, (size_t) size);
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory reading GGUF file \"%s\"", path);
	}
	f->mapping = map;
	f->mapping_len = (size_t) size;
	status = gguf_parse(f, map != NULL ? (const uint8_t *) map : gguf_empty, size, err);
	if (status != LLM_OK)
	{
		gguf_file_free(f);
		return status;
	}
	*out = &f->pub;
	return LLM_OK;
}

/* Drop the whole pages of the mapped bytes [p, p + n) from this process (see gguf.h). */
void
llm_gguf_release(const LlmGguf *g, const void *p, size_t n)
{
	const GgufFile *f = (const GgufFile *) g;
	const uintptr_t page = (uintptr_t) sysconf(_SC_PAGESIZE);
	uintptr_t	lo = ((uintptr_t) p + page - 1) / page * page;
	uintptr_t	hi = ((uintptr_t) p + n) / page * page;
	uintptr_t	map_lo = (uintptr_t) f->mapping;

	if (f->mapping == NULL || (uintptr_t) p < map_lo || (uintptr_t) p + n > map_lo + f->mapping_len || hi <= lo)
		return;
	(void) madvise((void *) lo, hi - lo, MADV_DONTNEED);	/* advice: a failure costs only memory */
}

/* Parse and validate a GGUF image already in memory (not copied; must outlive the result). */
LlmStatus
llm_gguf_open_memory(const void *buf, uint64_t size, LlmGguf **out, LlmError *err)
{
	GgufFile   *f;
	LlmStatus	status;

	if ((buf == NULL && size > 0) || out == NULL)
		return llm_error_set(err, LLM_ERR_INVALID,
							 "llm_gguf_open_memory: buf and out must not be NULL");
	f = gguf_file_new("<memory>");
	if (f == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory reading GGUF file \"<memory>\"");
	status = gguf_parse(f, buf != NULL ? (const uint8_t *) buf : gguf_empty, size, err);
	if (status != LLM_OK)
	{
		gguf_file_free(f);
		return status;
	}
	*out = &f->pub;
	return LLM_OK;
}

/* Unmap and free everything; NULL is allowed. */
void
llm_gguf_close(LlmGguf *g)
{
	gguf_file_free((GgufFile *) g);
}

/* The metadata value of key, or NULL when absent. */
const LlmGgufValue *
llm_gguf_get(const LlmGguf *g, const char *key)
{
	const LlmGgufKv *kv;

	if (g == NULL || key == NULL)
		return NULL;
	kv = gguf_find_kv((const GgufFile *) g, key);
	return kv != NULL ? &kv->value : NULL;
}

/* The tensor called name, or NULL when absent. */
const LlmGgufTensor *
llm_gguf_tensor(const LlmGguf *g, const char *name)
{
	const GgufFile *f = (const GgufFile *) g;
	uint64_t	lo = 0;
	uint64_t	hi;

	if (g == NULL || name == NULL || f->tensor_by_name == NULL)
		return NULL;
	hi = g->n_tensors;
	while (lo < hi)
	{
		uint64_t	mid = lo + (hi - lo) / 2;
		int			c = strcmp(f->tensor_by_name[mid]->name, name);

		if (c == 0)
			return f->tensor_by_name[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* Look key up for a typed getter: the value, or NULL with NOT_FOUND recorded. */
static const LlmGgufValue *
gguf_getter_find(const LlmGguf *g, const char *key, LlmStatus *st, LlmError *err)
{
	const LlmGgufValue *v = llm_gguf_get(g, key);

	if (v == NULL)
		*st = llm_error_set(err, LLM_ERR_NOT_FOUND, "GGUF file \"%s\" has no key \"%s\"",
							g != NULL ? ((const GgufFile *) g)->source : "(null)",
							key != NULL ? key : "(null)");
	return v;
}

/* Whether t is an integer type (bool excluded). */
static bool
gguf_is_int(LlmGgufType t)
{
	return t == LLM_GGUF_UINT8 || t == LLM_GGUF_INT8 || t == LLM_GGUF_UINT16 ||
		t == LLM_GGUF_INT16 || t == LLM_GGUF_UINT32 || t == LLM_GGUF_INT32 ||
		t == LLM_GGUF_UINT64 || t == LLM_GGUF_INT64;
}

/* Whether t is a signed integer type. */
static bool
gguf_is_signed(LlmGgufType t)
{
	return t == LLM_GGUF_INT8 || t == LLM_GGUF_INT16 || t == LLM_GGUF_INT32 ||
		t == LLM_GGUF_INT64;
}

/* Record a type mismatch for a typed getter. */
static LlmStatus
gguf_bad_type(const LlmGguf *g, const char *key, const LlmGgufValue *v,
			  const char *wanted, LlmError *err)
{
	char		val[64] = "";

	if (gguf_is_signed(v->type))
		snprintf(val, sizeof(val), " and value %lld", (long long) v->num.i);
	else if (gguf_is_int(v->type))
		snprintf(val, sizeof(val), " and value %llu", (unsigned long long) v->num.u);
	else if (v->type == LLM_GGUF_FLOAT32 || v->type == LLM_GGUF_FLOAT64)
		snprintf(val, sizeof(val), " and value %g", v->num.f);
	return llm_error_set(err, LLM_ERR_FORMAT,
						 "invalid GGUF file \"%s\": key \"%s\" has type %s%s (expected %s)",
						 ((const GgufFile *) g)->source, key,
						 llm_gguf_type_name(v->type), val, wanted);
}

/* A uint32 value (any integer type in range). */
LlmStatus
llm_gguf_get_u32(const LlmGguf *g, const char *key, uint32_t *out, LlmError *err)
{
	LlmStatus	st = LLM_OK;
	const LlmGgufValue *v = gguf_getter_find(g, key, &st, err);

	if (v == NULL)
		return st;
	if (gguf_is_signed(v->type) && v->num.i >= 0 && v->num.i <= (int64_t) UINT32_MAX)
		*out = (uint32_t) v->num.i;
	else if (gguf_is_int(v->type) && !gguf_is_signed(v->type) && v->num.u <= UINT32_MAX)
		*out = (uint32_t) v->num.u;
	else
		return gguf_bad_type(g, key, v, "an integer that fits in uint32", err);
	return LLM_OK;
}

/* An int64 value (any integer type in range). */
LlmStatus
llm_gguf_get_i64(const LlmGguf *g, const char *key, int64_t *out, LlmError *err)
{
	LlmStatus	st = LLM_OK;
	const LlmGgufValue *v = gguf_getter_find(g, key, &st, err);

	if (v == NULL)
		return st;
	if (gguf_is_signed(v->type))
		*out = v->num.i;
	else if (gguf_is_int(v->type) && v->num.u <= (uint64_t) INT64_MAX)
		*out = (int64_t) v->num.u;
	else
		return gguf_bad_type(g, key, v, "an integer that fits in int64", err);
	return LLM_OK;
}

/*
 * A float value: FLOAT32, FLOAT64 within float's range, or an integer of
 * magnitude at most 2^24 (which float holds exactly).
 */
LlmStatus
llm_gguf_get_f32(const LlmGguf *g, const char *key, float *out, LlmError *err)
{
	LlmStatus	st = LLM_OK;
	const LlmGgufValue *v = gguf_getter_find(g, key, &st, err);
	const int64_t exact = (int64_t) 1 << 24;

	if (v == NULL)
		return st;
	if (v->type == LLM_GGUF_FLOAT32 ||
		(v->type == LLM_GGUF_FLOAT64 && !(isfinite(v->num.f) && fabs(v->num.f) > FLT_MAX)))
		*out = (float) v->num.f;
	else if (gguf_is_signed(v->type) && v->num.i >= -exact && v->num.i <= exact)
		*out = (float) v->num.i;
	else if (gguf_is_int(v->type) && !gguf_is_signed(v->type) && v->num.u <= (uint64_t) exact)
		*out = (float) v->num.u;
	else
		return gguf_bad_type(g, key, v, "a float", err);
	return LLM_OK;
}

/* A bool value (BOOL only). */
LlmStatus
llm_gguf_get_bool(const LlmGguf *g, const char *key, bool *out, LlmError *err)
{
	LlmStatus	st = LLM_OK;
	const LlmGgufValue *v = gguf_getter_find(g, key, &st, err);

	if (v == NULL)
		return st;
	if (v->type != LLM_GGUF_BOOL)
		return gguf_bad_type(g, key, v, "bool", err);
	*out = v->num.u != 0;
	return LLM_OK;
}

/* A string value copied into a new malloc'd NUL-terminated buffer (*out). */
LlmStatus
llm_gguf_get_str(const LlmGguf *g, const char *key, char **out, LlmError *err)
{
	LlmStatus	st = LLM_OK;
	const LlmGgufValue *v = gguf_getter_find(g, key, &st, err);
	char	   *s;

	if (v == NULL)
		return st;
	if (v->type != LLM_GGUF_STRING)
		return gguf_bad_type(g, key, v, "string", err);
	if (v->str.len >= (uint64_t) SIZE_MAX || (s = malloc((size_t) v->str.len + 1)) == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory copying GGUF key \"%s\"", key);
	if (v->str.len > 0)
		memcpy(s, v->str.ptr, (size_t) v->str.len);
	s[v->str.len] = '\0';
	*out = s;
	return LLM_OK;
}

/* An array value of the given element type (LLM_ERR_FORMAT when it is something else). */
LlmStatus
llm_gguf_get_arr(const LlmGguf *g, const char *key, LlmGgufType elem_type,
				 const LlmGgufValue **out, LlmError *err)
{
	LlmStatus	st = LLM_OK;
	const LlmGgufValue *v = gguf_getter_find(g, key, &st, err);

	if (v == NULL)
		return st;
	if (v->type != LLM_GGUF_ARRAY)
	{
		char		wanted[48];

		snprintf(wanted, sizeof(wanted), "an array of %s", llm_gguf_type_name(elem_type));
		return gguf_bad_type(g, key, v, wanted, err);
	}
	if (v->arr_type != elem_type)
		return llm_error_set(err, LLM_ERR_FORMAT,
							 "invalid GGUF file \"%s\": key \"%s\" is an array of %s (expected an array of %s)",
							 ((const GgufFile *) g)->source, key,
							 llm_gguf_type_name(v->arr_type), llm_gguf_type_name(elem_type));
	*out = v;
	return LLM_OK;
}

/*
 * Element i of a numeric array as int64 (floats truncated toward zero, 0 when
 * out of range or NaN; uint64 above INT64_MAX saturates); 0 for a bad index
 * or a non-numeric array.
 */
int64_t
llm_gguf_arr_int(const LlmGgufValue *arr, uint64_t i)
{
	const uint8_t *p;
	uint64_t	esize;
	double		d;

	if (arr == NULL || arr->type != LLM_GGUF_ARRAY || arr->arr_data == NULL ||
		i >= arr->arr_len)
		return 0;
	esize = llm_gguf_type_size(arr->arr_type);
	if (esize == 0)
		return 0;
	p = arr->arr_data + i * esize;
	switch (arr->arr_type)
	{
		case LLM_GGUF_UINT8:
		case LLM_GGUF_BOOL:
			return p[0];
		case LLM_GGUF_INT8:
			return (int8_t) p[0];
		case LLM_GGUF_UINT16:
			return gguf_le16(p);
		case LLM_GGUF_INT16:
			return (int16_t) gguf_le16(p);
		case LLM_GGUF_UINT32:
			return gguf_le32(p);
		case LLM_GGUF_INT32:
			return (int32_t) gguf_le32(p);
		case LLM_GGUF_UINT64:
			{
				uint64_t	u = gguf_le64(p);

				return u > (uint64_t) INT64_MAX ? INT64_MAX : (int64_t) u;
			}
		case LLM_GGUF_INT64:
			return (int64_t) gguf_le64(p);
		case LLM_GGUF_FLOAT32:
		case LLM_GGUF_FLOAT64:
			d = arr->arr_type == LLM_GGUF_FLOAT32 ? (double) gguf_lef32(p) : gguf_lef64(p);
			if (!(d > -9223372036854775808.0 && d < 9223372036854775808.0))
				return 0;
			return (int64_t) d;
		default:
			return 0;
	}
}

/* Element i of a numeric array as double; 0 for a bad index or a non-numeric array. */
double
llm_gguf_arr_float(const LlmGgufValue *arr, uint64_t i)
{
	const uint8_t *p;

	if (arr == NULL || arr->type != LLM_GGUF_ARRAY || arr->arr_data == NULL ||
		i >= arr->arr_len || llm_gguf_type_size(arr->arr_type) == 0)
		return 0.0;
	p = arr->arr_data + i * llm_gguf_type_size(arr->arr_type);
	switch (arr->arr_type)
	{
		case LLM_GGUF_FLOAT32:
			return gguf_lef32(p);
		case LLM_GGUF_FLOAT64:
			return gguf_lef64(p);
		case LLM_GGUF_UINT64:
			return (double) gguf_le64(p);
		default:
			return (double) llm_gguf_arr_int(arr, i);
	}
}
