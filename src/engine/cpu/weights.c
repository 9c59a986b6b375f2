/*
 * weights.c
 *		The CPU backend's copies of the model's matrices in the layouts its
 *		kernels read (see backend_cpu.h): made once by the prepare op of a
 *		SIMD level, found again by the host address of the model's rows.
 *
 * A copy is made where the level's kernels (LlmMatmulKernels) read another
 * form of the same numbers faster:
 *   - Q5_0 where the level has no Q5_0 kernel but a Q8_0 one: rewritten
 *     exactly as Q8_0 (llm_repack_q8_0);
 *   - Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and SPARSE24 (2:4 rows) where the level
 *     has the grouped type's kernel: rewritten in groups (quant_groups.c),
 *     after the Q8_0 rewrite when there was one.
 * Either way the products are the same bits.  The model's own rows are not
 * read again by the matmul, so where they are pages of the file they are
 * given back to the kernel (llm_gguf_release); a lookup of the embedding's
 * rows (get_rows) faults in only the rows it reads.
 *
 * The copies are read-only once made: compute threads only look them up.
 * A prepare replaces every copy, since a freed model's addresses come back
 * in the next model loaded.
 */
#include "cpu/backend_cpu.h"
#include "cpu/matmul.h"
#include "gguf.h"
#include "quant.h"

#include <stdlib.h>
#include <string.h>

/* Whether every row of w, a SPARSE24 matrix, can be grouped (llm_s24_groupable). */
static bool
s24_groupable(const LlmWeight *w)
{
	for (int64_t r = 0; r < w->rows; r++)
		if (!llm_s24_groupable(w->data + (size_t) r * w->row_bytes, w->cols))
			return false;
	return true;
}

/* The type w is served in on kernels kern: its Q8_0 rewrite, then its grouped type, where they apply. */
static LlmType
served_type(const LlmMatmulKernels *kern, const LlmWeight *w)
{
	LlmType		t = w->type;
	LlmType		g;

	if (llm_type_repacks_to_q8_0(t) && kern->gemm[t] == NULL && kern->gemm[LLM_TYPE_Q8_0] != NULL)
		t = LLM_TYPE_Q8_0;
	g = llm_type_grouped(t);
	if (g != LLM_TYPE_COUNT && kern->gemm[g] != NULL && w->cols % LLM_QK == 0 &&
		llm_group_blocks(w->cols / LLM_QK) > 0 && (t != LLM_TYPE_SPARSE24 || (w->data != NULL && s24_groupable(w))))
		t = g;
	return t;
}

/* Rewrite row (n values of w's type) as type into out. */
static void
rewrite_row(const LlmWeight *w, LlmType type, const uint8_t *row, uint8_t *out, uint8_t *tmp)
{
	LlmType		base = llm_type_base(type);

	if (base == w->type)
	{
		llm_group_row(base, row, out, w->cols);
		return;
	}
	/* Q5_0 as Q8_0, then grouped when type is */
	llm_repack_q8_0(w->type, row, base == type ? out : tmp, w->cols);
	if (base != type)
		llm_group_row(base, tmp, out, w->cols);
}

/* Order of copies by key. */
static int
copy_cmp(const void *a, const void *b)
{
	const uintptr_t ka = (uintptr_t) ((const CpuWeightCopy *) a)->key;
	const uintptr_t kb = (uintptr_t) ((const CpuWeightCopy *) b)->key;

	return ka < kb ? -1 : ka > kb;
}

/* Append the copy of w served as type to cb's copies (room reserved); false when out of memory. */
static bool
add_copy(CpuBackend *cb, const LlmGguf *file, const LlmWeight *w, LlmType type)
{
	size_t		row_bytes = llm_type_row_size(type, w->cols);
	uint8_t    *data = malloc(row_bytes * (size_t) w->rows);
	uint8_t    *tmp = malloc(llm_type_row_size(LLM_TYPE_Q8_0, w->cols));
	CpuWeightCopy *c = &cb->copies[cb->n_copies];

	if (data == NULL || tmp == NULL)
	{
		free(data);
		free(tmp);
		return false;
	}
	for (int64_t r = 0; r < w->rows; r++)
		rewrite_row(w, type, w->data + (size_t) r * w->row_bytes, data + (size_t) r * row_bytes, tmp);
	free(tmp);
	c->key = w->data;
	c->w = *w;
	c->w.type = type;
	c->w.data = data;
	c->w.row_bytes = row_bytes;
	c->w.owned = data;
	cb->n_copies++;
	cb->copy_bytes += row_bytes * (size_t) w->rows;
	/* the file's copy is not read by the matmul again: its pages need not stay in this process */
	llm_gguf_release(file, w->data, w->row_bytes * (size_t) w->rows);
	return true;
}

/* Copy w when kern serves it in another type and no copy of its rows exists yet. */
static LlmStatus
prepare_one(CpuBackend *cb, const LlmModel *m, const LlmMatmulKernels *kern, const LlmWeight *w, LlmError *err)
{
	LlmType		type = served_type(kern, w);

	if (type == w->type || w->data == NULL)
		return LLM_OK;
	for (int i = 0; i < cb->n_copies; i++)
		if (cb->copies[i].key == w->data)
			return LLM_OK;		/* a tied output is the embedding's rows */
	if (!add_copy(cb, m->gguf, w, type))
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory copying tensor \"%s\" for the CPU's kernels",
							 w->name != NULL ? w->name : "(unnamed)");
	return LLM_OK;
}

/*
 * Replace be's copies with those m's matrices need on kern: every layer
 * matrix and the output (the embedding is only looked up by row, unless it
 * is the output too).
 */
LlmStatus
llm_cpu_weights_prepare(LlmBackend *be, const LlmModel *m, const LlmMatmulKernels *kern, LlmError *err)
{
	CpuBackend *cb = (CpuBackend *) be;
	const LlmWeights *w = &m->weights;
	int			cap = 1 + m->config.n_layers * LLM_LAYER_MATRICES;
	LlmStatus	st = LLM_OK;

	llm_cpu_weights_free(be);
	if (kern == NULL)
		return LLM_OK;
	cb->copies = calloc((size_t) cap, sizeof(CpuWeightCopy));
	if (cb->copies == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for the CPU's weight copies");
	st = prepare_one(cb, m, kern, &w->output, err);
	for (int l = 0; l < m->config.n_layers && st == LLM_OK; l++)
		for (int i = 0; i < LLM_LAYER_MATRICES && st == LLM_OK; i++)
			st = prepare_one(cb, m, kern, llm_layer_matrix_const(&w->layers[l], i), err);
	if (st != LLM_OK)
	{
		llm_cpu_weights_free(be);
		return st;
	}
	qsort(cb->copies, (size_t) cb->n_copies, sizeof(CpuWeightCopy), copy_cmp);
	return LLM_OK;
}

/* The weight be's kernels read for w: its copy (found by w's rows, of w's shape), else w itself. */
const LlmWeight *
llm_cpu_weight(const LlmBackend *be, const LlmWeight *w)
{
	const CpuBackend *cb = (const CpuBackend *) be;
	int			lo = 0;
	int			hi = cb->n_copies;

	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;
		const CpuWeightCopy *c = &cb->copies[mid];

		if (c->key == w->data)
			return c->w.rows == w->rows && c->w.cols == w->cols ? &c->w : w;
		if ((uintptr_t) c->key < (uintptr_t) w->data)
			lo = mid + 1;
		else
			hi = mid;
	}
	return w;
}

/* Free every copy. */
void
llm_cpu_weights_free(LlmBackend *be)
{
	CpuBackend *cb = (CpuBackend *) be;

	for (int i = 0; i < cb->n_copies; i++)
		free(cb->copies[i].w.owned);
	free(cb->copies);
	cb->copies = NULL;
	cb->n_copies = 0;
	cb->copy_bytes = 0;
}

/* Bytes of the backend's weight copies. */
size_t
llm_cpu_weight_bytes(const LlmBackend *be)
{
	return ((const CpuBackend *) be)->copy_bytes;
}
