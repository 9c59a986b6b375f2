/*
 * cli_quantize.c
 *		llm-cli quantize IN OUT TYPE: rewrite a GGUF file with its weight
 *		matrices in another type (F32, F16, BF16, Q8_0, Q4_0) or one of the
 *		engine's own schemes (INT8 per output channel, INT4 per group of 32 or
 *		128 inputs; stored as Q8_0 / Q4_0 blocks, so any GGUF reader can load
 *		the result).  Metadata is copied verbatim; one-dimensional tensors
 *		(norms) and matrices whose rows do not divide into groups keep their
 *		type.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gguf.h"
#include "quant.h"

/* The type called name, or -1. */
static int
type_by_name(const char *name)
{
	for (int t = 0; t < LLM_TYPE_COUNT; t++)
	{
		const LlmTypeTraits *tr = llm_type_traits(t);

		if (tr != NULL && strcasecmp(tr->name, name) == 0)
			return t;
	}
	return -1;
}

/* Convert one tensor to type (or, with a scheme, to the scheme's type) into a new buffer (*out); false when out of memory. */
static bool
convert_tensor(const LlmGgufTensor *t, LlmType type, LlmQuantScheme scheme, void **out)
{
	int64_t		rows = t->ne[1] * t->ne[2] * t->ne[3];
	void	   *dst = malloc(llm_type_row_size(type, t->ne[0]) * (size_t) rows);

	if (dst == NULL || !llm_convert_rows(t->type, t->data, rows, t->ne[0], type, scheme, dst))
	{
		free(dst);
		return false;
	}
	*out = dst;
	return true;
}

/* llm-cli quantize IN OUT TYPE. */
int
cli_quantize(int argc, char **argv)
{
	LlmGguf    *g = NULL;
	LlmGgufWriter *w = NULL;
	LlmError	err;
	int			type;
	LlmQuantScheme scheme = LLM_QUANT_NONE;
	int			n_converted = 0;
	int			rc = 1;

	if (argc != 4)
	{
		fprintf(stderr, "usage: llm-cli quantize IN.gguf OUT.gguf TYPE\n");
		return 2;
	}
	type = type_by_name(argv[3]);
	if (llm_quant_scheme_parse(argv[3], &scheme) && scheme != LLM_QUANT_NONE)
		type = llm_quant_scheme_type(scheme);
	else if (type < 0 || !llm_type_can_quantize(type))
	{
		fprintf(stderr, "llm-cli quantize: unsupported target type \"%s\" (supported: F32, F16, BF16, Q8_0, Q4_0, INT8, INT4_G32, INT4_G128)\n", argv[3]);
		return 2;
	}
	if (llm_gguf_open(argv[1], &g, &err) != LLM_OK)
	{
		fprintf(stderr, "llm-cli quantize: %s\n", err.msg);
		return 1;
	}
	if ((w = llm_gguf_writer_new()) == NULL)
		goto oom;
	for (uint64_t i = 0; i < g->n_kv; i++)
		llm_gguf_writer_set_value(w, g->kv[i].key, &g->kv[i].value);
	for (uint64_t i = 0; i < g->n_tensors; i++)
	{
		const LlmGgufTensor *t = &g->tensors[i];
		bool		convert = t->n_dims >= 2 &&
			(scheme != LLM_QUANT_NONE ? llm_quant_scheme_fits(scheme, t->ne[0]) :
			 (int) t->type != type && t->ne[0] % llm_type_traits(type)->block_size == 0);

		if (convert)
		{
			void	   *data;

			if (!convert_tensor(t, type, scheme, &data))
				goto oom;
			llm_gguf_writer_add_tensor(w, t->name, type, t->n_dims, t->ne, data);
			free(data);
			n_converted++;
		}
		else
			llm_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data);
	}
	if (llm_gguf_writer_save(w, argv[2], &err) != LLM_OK)
	{
		fprintf(stderr, "llm-cli quantize: %s\n", err.msg);
		goto done;
	}
	fprintf(stderr, "llm-cli quantize: %d of %llu tensors converted to %s\n", n_converted,
			(unsigned long long) g->n_tensors,
			scheme != LLM_QUANT_NONE ? llm_quant_scheme_name(scheme) : llm_type_traits(type)->name);
	rc = 0;
	goto done;

oom:
	fprintf(stderr, "llm-cli quantize: out of memory\n");
done:
	llm_gguf_writer_free(w);
	llm_gguf_close(g);
	return rc;
}
