/*
 * gguf.h
 *		Bounds-checked reader (and a small writer) for GGUF v2/v3 files.
 *
 * The reader maps the file read-only and parses header, metadata and tensor
 * table up front, checking every count, length, offset, dimension and type
 * against the bytes left in the file and against sane limits.  Strings and
 * numeric arrays point into the mapping (not NUL-terminated, possibly
 * unaligned: read numeric array elements with the accessors below).  A
 * malformed file yields LLM_ERR_FORMAT and a message naming the bad field.
 */
#ifndef LLM_GGUF_H
#define LLM_GGUF_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "status.h"
#include "quant.h"

#define LLM_GGUF_MAGIC 0x46554747u	/* "GGUF" little-endian */
#define LLM_GGUF_DEFAULT_ALIGNMENT 32
#define LLM_GGUF_MAX_DIMS 4

/* Metadata value types, numbered as in the GGUF specification. */
typedef enum LlmGgufType
{
	LLM_GGUF_UINT8 = 0,
	LLM_GGUF_INT8 = 1,
	LLM_GGUF_UINT16 = 2,
	LLM_GGUF_INT16 = 3,
	LLM_GGUF_UINT32 = 4,
	LLM_GGUF_INT32 = 5,
	LLM_GGUF_FLOAT32 = 6,
	LLM_GGUF_BOOL = 7,
	LLM_GGUF_STRING = 8,
	LLM_GGUF_ARRAY = 9,
	LLM_GGUF_UINT64 = 10,
	LLM_GGUF_INT64 = 11,
	LLM_GGUF_FLOAT64 = 12,
	LLM_GGUF_TYPE_COUNT
} LlmGgufType;

/* A string inside the mapped file: not NUL-terminated. */
typedef struct LlmGgufStr
{
	const char *ptr;
	uint64_t	len;
} LlmGgufStr;

/* One metadata value; arrays may nest. */
typedef struct LlmGgufValue
{
	LlmGgufType type;
	union
	{
		uint64_t	u;			/* UINT8..UINT64, BOOL (0/1) */
		int64_t		i;			/* INT8..INT64 */
		double		f;			/* FLOAT32, FLOAT64 */
	}			num;
	LlmGgufStr	str;			/* STRING */
	/* ARRAY: */
	LlmGgufType arr_type;		/* element type */
	uint64_t	arr_len;		/* number of elements */
	const uint8_t *arr_data;	/* numeric elements, raw little-endian, in the map */
	struct LlmGgufValue *arr_items; /* STRING and ARRAY elements, parsed (arr_len) */
} LlmGgufValue;

typedef struct LlmGgufKv
{
	char	   *key;			/* NUL-terminated copy */
	LlmGgufValue value;
} LlmGgufKv;

typedef struct LlmGgufTensor
{
	char	   *name;			/* NUL-terminated copy */
	int			n_dims;
	int64_t		ne[LLM_GGUF_MAX_DIMS];	/* ne[0] is the contiguous (row) dim; unused dims are 1 */
	LlmType		type;
	uint64_t	offset;			/* relative to the data section */
	uint64_t	size;			/* bytes */
	const void *data;			/* into the map */
} LlmGgufTensor;

typedef struct LlmGguf
{
	uint32_t	version;
	uint64_t	n_kv;
	LlmGgufKv  *kv;				/* (n_kv) */
	uint64_t	n_tensors;
	LlmGgufTensor *tensors;		/* (n_tensors) */
	uint64_t	alignment;
	uint64_t	data_offset;	/* file offset of the data section */
	const uint8_t *map;			/* whole file, read-only */
	uint64_t	file_size;
} LlmGguf;

/* Open and fully validate a GGUF file; *out is set only on success. */
LlmStatus	llm_gguf_open(const char *path, LlmGguf **out, LlmError *err);

/* Parse and validate a GGUF image already in memory (not copied; must outlive the result). */
LlmStatus	llm_gguf_open_memory(const void *buf, uint64_t size, LlmGguf **out, LlmError *err);

/* Unmap and free everything; NULL is allowed. */
void		llm_gguf_close(LlmGguf *g);

/*
 * Say that the mapped file bytes [p, p + n) will not be read again (a
 * tensor the loader has copied): their whole pages leave this process's
 * memory, and a later read maps them back.  Nothing for an in-memory image.
 */
void		llm_gguf_release(const LlmGguf *g, const void *p, size_t n);

/* The metadata value of key, or NULL when absent. */
const LlmGgufValue *llm_gguf_get(const LlmGguf *g, const char *key);

/* The tensor called name, or NULL when absent. */
const LlmGgufTensor *llm_gguf_tensor(const LlmGguf *g, const char *name);

/*
 * Typed getters.  Each returns LLM_ERR_NOT_FOUND when the key is absent,
 * LLM_ERR_FORMAT (message names the key) when the stored type does not
 * convert without loss (any integer type to an integer in range; FLOAT32 or
 * FLOAT64 to float/double), else LLM_OK.
 */
LlmStatus	llm_gguf_get_u32(const LlmGguf *g, const char *key, uint32_t *out, LlmError *err);
LlmStatus	llm_gguf_get_i64(const LlmGguf *g, const char *key, int64_t *out, LlmError *err);
LlmStatus	llm_gguf_get_f32(const LlmGguf *g, const char *key, float *out, LlmError *err);
LlmStatus	llm_gguf_get_bool(const LlmGguf *g, const char *key, bool *out, LlmError *err);
/* A string value copied into a new malloc'd NUL-terminated buffer (*out). */
LlmStatus	llm_gguf_get_str(const LlmGguf *g, const char *key, char **out, LlmError *err);
/* An array value of the given element type (LLM_ERR_FORMAT when it is something else). */
LlmStatus	llm_gguf_get_arr(const LlmGguf *g, const char *key, LlmGgufType elem_type,
							 const LlmGgufValue **out, LlmError *err);

/* Element i of a numeric array as the given C type (converting integer/float widths). */
int64_t		llm_gguf_arr_int(const LlmGgufValue *arr, uint64_t i);
double		llm_gguf_arr_float(const LlmGgufValue *arr, uint64_t i);

/* Bytes of one element of a fixed-size metadata type, 0 for string/array/invalid. */
size_t		llm_gguf_type_size(LlmGgufType t);

/* The name of a metadata value type, e.g. "uint32". */
const char *llm_gguf_type_name(LlmGgufType t);

/*
 * Writer: builds a GGUF v3 file in order: metadata, then tensor infos, then
 * tensor data (aligned).  Used by the random-model tool and `llm-cli quantize`.
 */
typedef struct LlmGgufWriter LlmGgufWriter;

LlmGgufWriter *llm_gguf_writer_new(void);
void		llm_gguf_writer_free(LlmGgufWriter *w);
void		llm_gguf_writer_set_u32(LlmGgufWriter *w, const char *key, uint32_t v);
void		llm_gguf_writer_set_i32(LlmGgufWriter *w, const char *key, int32_t v);
void		llm_gguf_writer_set_f32(LlmGgufWriter *w, const char *key, float v);
void		llm_gguf_writer_set_bool(LlmGgufWriter *w, const char *key, bool v);
void		llm_gguf_writer_set_str(LlmGgufWriter *w, const char *key, const char *v);
void		llm_gguf_writer_set_arr_str(LlmGgufWriter *w, const char *key, const char *const *v, uint64_t n);
void		llm_gguf_writer_set_arr_f32(LlmGgufWriter *w, const char *key, const float *v, uint64_t n);
void		llm_gguf_writer_set_arr_i32(LlmGgufWriter *w, const char *key, const int32_t *v, uint64_t n);
/* Copy another file's metadata value verbatim (any type, nested arrays included). */
void		llm_gguf_writer_set_value(LlmGgufWriter *w, const char *key, const LlmGgufValue *v);
/* Add a tensor; data (llm_type_row_size(type, ne[0]) * rows bytes) is copied. */
void		llm_gguf_writer_add_tensor(LlmGgufWriter *w, const char *name, LlmType type,
									   int n_dims, const int64_t *ne, const void *data);
/* Write the file; reports allocation failures collected by earlier calls. */
LlmStatus	llm_gguf_writer_save(LlmGgufWriter *w, const char *path, LlmError *err);

#endif							/* LLM_GGUF_H */
