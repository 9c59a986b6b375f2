/*
 * engine.h
 *		Public interface of the inference engine: load a model, then serve
 *		many sequences at once through add / step / poll / release / cancel.
 *
 * This is the engine's boundary: the PostgreSQL side includes no other
 * engine header, and this one includes only status.h and types.h, so the
 * model and the engine are opaque handles there (llm-cli and the tests
 * also use internal headers).  The engine is single-threaded from the
 * caller's point of view (its compute threads are internal and never call
 * back); one LlmEngine is used by one thread.
 *
 * A sequence's life: llm_engine_add() queues it; each llm_engine_step() runs
 * one batched forward pass over the next tokens of every running sequence
 * and chunks of waiting prompts, samples, and finishes sequences that hit
 * EOS, a stop string or max_tokens; llm_engine_poll() hands out finished
 * sequences one at a time; llm_engine_release() forgets one.  KV memory is
 * given back the moment a sequence finishes or is cancelled.
 */
#ifndef LLM_ENGINE_H
#define LLM_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"
#include "types.h"

/* Opaque handles: a loaded model (LlmModel, types.h), an engine serving one. */
typedef struct LlmEngine LlmEngine;
typedef struct LlmTokenizer LlmTokenizer;	/* tokenizer.h */

/* Load a GGUF model (weights stay mapped, in their stored types). */
LlmStatus	llm_model_load(const char *path, LlmModel **out, LlmError *err);

/*
 * Load a GGUF model and quantize its F32/F16/BF16 weight matrices with the
 * engine's own scheme (INT8 per output channel, INT4 per group), in memory.
 */
LlmStatus	llm_model_load_quantized(const char *path, LlmQuantScheme scheme, LlmModel **out, LlmError *err);
void		llm_model_free(LlmModel *m);
const LlmModelInfo *llm_model_info(const LlmModel *m);
const LlmTokenizer *llm_model_tokenizer(const LlmModel *m);

/* How llm_model_load_with() loads a model. */
typedef struct LlmModelLoadOptions
{
	LlmQuantScheme quantize;	/* quantize float weights with this scheme; NONE keeps the stored types */
	const char *calib_text;		/* (calib_len) AWQ calibration text, or NULL for plain quantization */
	size_t		calib_len;
	int			n_threads;		/* threads for the AWQ calibration (>= 1) */
} LlmModelLoadOptions;

/* Load option defaults: stored types, no calibration text, 1 thread. */
void		llm_model_load_options_default(LlmModelLoadOptions *o);

/*
 * Load a GGUF model as o says: quantized with o->quantize as by
 * llm_model_load_quantized(), with AWQ scales (awq.h) when calibration
 * text is given (then o->quantize must not be NONE).
 */
LlmStatus	llm_model_load_with(const char *path, const LlmModelLoadOptions *o, LlmModel **out,
								LlmError *err);

/*
 * Tokenize a continuation to score after a prompt (LlmRequest.forced): no
 * BOS, control tokens stay text.  *ids is a new malloc'd array of *n_ids
 * tokens.
 */
LlmStatus	llm_continuation_tokenize(const LlmModel *m, const char *text, size_t len, int32_t **ids, int *n_ids,
									  LlmError *err);

/* Whether model m has a chat template (tokenizer.chat_template); rendering it may still fail. */
bool		llm_model_has_chat_template(const LlmModel *m);

/*
 * Tokenize a request for generation.  With chat, the system prompt (system,
 * system_len; NULL for none) and the prompt as one system and one user turn
 * and the opening of the model's turn, as the model's chat template renders
 * them (llm_chat_tokenize_messages).  Without chat, BOS as the vocabulary
 * wants it and the plain prompt; a system prompt is then LLM_ERR_INVALID.
 * Control tokens in the prompt and the system prompt stay text.  *ids is a
 * new malloc'd array of *n_ids tokens.
 */
LlmStatus	llm_chat_tokenize(const LlmModel *m, const char *system, size_t system_len,
							  const char *prompt, size_t len, bool chat,
							  int32_t **ids, int *n_ids, LlmError *err);

/* A conversation to render with the model's chat template. */
typedef struct LlmChatRequest
{
	const char *messages;		/* (messages_len) JSON array of {"role": ..., "content": ...} */
	size_t		messages_len;
	const char *tools;			/* (tools_len) JSON array given to the template as tools, or NULL */
	size_t		tools_len;
	bool		add_generation_prompt;	/* open the assistant's turn after the messages */
	int			enable_thinking;	/* -1: not given (the template's default); 0 or 1 */
} LlmChatRequest;

/*
 * Render conversation req with model m's chat template (a Jinja2 program,
 * run by the engine's interpreter, jinja.h) and tokenize it: the template's
 * own text with control tokens recognised, the text that came from the
 * messages and tools never.  Roles are system, user, assistant and tool.
 * LLM_ERR_UNSUPPORTED, naming the model, when it has no template or the
 * template uses what the interpreter does not implement; LLM_ERR_INVALID for
 * messages that are not such an array, or when the template raises (its
 * message given).  *ids is a new malloc'd array of *n_ids tokens.
 */
LlmStatus	llm_chat_tokenize_messages(const LlmModel *m, const LlmChatRequest *req,
									   int32_t **ids, int *n_ids, LlmError *err);

/* How a decoding sequence drafts tokens to verify in one pass (speculative decoding, draft.h). */
typedef enum LlmSpeculative
{
	LLM_SPEC_OFF = 0,
	LLM_SPEC_NGRAM,				/* prompt lookup: what followed the same tokens earlier in the sequence */
	LLM_SPEC_DRAFT				/* a small model of the same vocabulary (config.draft_model), greedily */
} LlmSpeculative;

typedef struct LlmEngineConfig
{
	int			n_threads;		/* compute threads (>= 1) */
	int			n_ctx;			/* per-sequence context limit; 0 = the model's */
	int			max_batch_tokens;	/* tokens per step (>= 1) */
	int			max_seqs;		/* sequences running at once */
	int			kv_block_size;	/* tokens per KV block */
	size_t		kv_cache_bytes; /* size of the KV pool; 0 = enough for max_seqs full contexts */
	LlmKvType	kv_type;
	bool		prefix_cache;	/* reuse cached KV blocks of shared prompt prefixes (off when evicting) */
	int			kv_budget;		/* keys kept per sequence, layer and KV head; 0 = no eviction */
	int			kv_sink_tokens; /* first positions never evicted (not for LLM_EVICT_WINDOW) */
	LlmEvictPolicy evict_policy;
	LlmDevice	device;
	int			device_index;	/* CUDA: which GPU (0: the first) */
	const char *cuda_module;	/* path of the CUDA backend module (llm_cuda.so); NULL: CPU only */
	int			step_time_ms;	/* size prompt chunks so a step takes about this long (pace.h); 0: off */
	bool		deterministic;	/* GPU: batch-invariant kernels, slower (the CPU always is; backend.h) */
	bool		gpu_fusion;		/* CUDA: fused ops, fewer launches (LlmBackendOptions.fuse) */
	bool		gpu_pdl;		/* CUDA: programmatic dependent launch on sm_90+ (LlmBackendOptions.pdl) */
	bool		kv_prefault;	/* host KV pool: touch every page when the engine starts (as a
								 * long-running server's pool is after first use), so no step
								 * pays the first writes' page faults */
	/*
	 * Speculative decoding: decoding sequences feed drafted tokens beside
	 * their last one and keep those the sampler picks, so the output is
	 * the same bits as without.  Only in steps with no prompt to compute,
	 * and only drafts worth their compute by the cost model of
	 * spec_gate.h, whose knee is spec_knee_tokens (0: the device's
	 * default); off under a KV budget (eviction).
	 */
	LlmSpeculative speculative;
	const LlmModel *draft_model;	/* LLM_SPEC_DRAFT: the draft model (the caller keeps it loaded) */
	int			spec_max_draft; /* drafted tokens per sequence and step, at most (1 to LLM_SPEC_MAX_DRAFT) */
	int			spec_step_drafts;	/* drafted tokens per step, at most (their logits rows) */
	double		spec_knee_tokens;	/* tokens a step feeds where compute costs what reading the weights does; 0: the device's */
} LlmEngineConfig;

#define LLM_SPEC_MAX_DRAFT 16

/*
 * Defaults: 1 thread, model context, 512 batch tokens, 16 sequences, blocks
 * of 16, f16 KV, prefix cache on, no eviction (H2O with 4 sinks when a
 * budget is set), device auto, steps paced to 100 ms, GPU fusion and
 * programmatic dependent launch on, KV pages touched on first use.
 */
void		llm_engine_config_default(LlmEngineConfig *c);

LlmStatus	llm_engine_new(LlmModel *m, const LlmEngineConfig *c, LlmEngine **out, LlmError *err);
void		llm_engine_free(LlmEngine *e);
/* The engine's per-sequence context limit (tokens of prompt + generation). */
int			llm_engine_n_ctx(const LlmEngine *e);

/* What the engine computes on: "cpu (avx512)", "cuda: NVIDIA H100 80GB HBM3", ... */
const char *llm_engine_device(const LlmEngine *e);

/* With device auto on the CPU: why not a GPU (no module, no driver, no device); else "". */
const char *llm_engine_device_note(const LlmEngine *e);

/*
 * Whether a prompt of n_prompt tokens fits the context with room for one
 * new token (none needed when max_tokens is 0): llm_engine_add() fails with
 * LLM_ERR_LIMIT otherwise.  Callers may check first, for their own message.
 */
bool		llm_engine_prompt_fits(const LlmEngine *e, int n_prompt, int max_tokens);

/* What constrains a request's output (LlmRequest.grammar). */
typedef enum LlmGrammarKind
{
	LLM_GRAMMAR_NONE = 0,
	LLM_GRAMMAR_JSON_SCHEMA,	/* JSON valid for a JSON Schema (json_schema.h has what is supported) */
	LLM_GRAMMAR_CHOICES			/* exactly one of a list of strings */
} LlmGrammarKind;

/*
 * Check a JSON Schema as llm_engine_add() compiles it, without a model:
 * LLM_ERR_INVALID or LLM_ERR_UNSUPPORTED with a message naming the keyword
 * and its place (a JSON pointer such as #/properties/name); LLM_ERR_LIMIT
 * when it is too big, or when its grammar cannot even start (a value that
 * may begin in more ways than the recognizer follows at once).
 */
LlmStatus	llm_json_schema_check(const char *schema, size_t len, LlmError *err);

/*
 * Check choices (len bytes, each NUL-terminated) as llm_engine_add()
 * compiles them, without a model: LLM_ERR_INVALID for an empty list or an
 * empty choice, LLM_ERR_LIMIT when the grammar would be too big.
 */
LlmStatus	llm_choices_check(const char *text, size_t len, LlmError *err);

typedef struct LlmRequest
{
	const int32_t *prompt;		/* (n_prompt) token ids, BOS included if wanted; copied by add */
	int			n_prompt;
	int			max_tokens;		/* new tokens at most (>= 0) */
	float		temperature;	/* 0 = greedy */
	int			top_k;
	float		top_p;
	float		min_p;
	float		repeat_penalty;
	uint64_t	seed;
	const char *const *stop;	/* (n_stop) stop strings, copied by add */
	int			n_stop;
	bool		ignore_eos;		/* keep going past EOS (benchmarks) */
	uint64_t	cache_partition;	/* prefix cache: cached blocks are shared only within a partition (0: by all) */
	uint32_t	share_group;	/* fair shares (share.h): the prompt budget and the KV pool go by group */
	uint64_t	draft_group;	/* speculative decoding: prompt lookup also searches the requests of this
								 * group (one statement's), since a table's rows share phrasing; 0: none */
	float		share_weight;	/* the group's weight (<= 0: 1) */
	bool		logprobs;		/* record each generated token's log-probability (LlmResult.logprobs) */
	/*
	 * (n_forced) tokens to take as the generation instead of sampling, for
	 * scoring a continuation: then max_tokens must equal n_forced, EOS and
	 * stop strings do not end it, and logprobs are recorded; fed in one
	 * pass after the prompt, not a step a token; copied by add
	 */
	const int32_t *forced;
	int			n_forced;

	/*
	 * Constrained decoding: every sampled token keeps the output a prefix
	 * of a sentence of the grammar (other tokens are masked out first), and
	 * the sequence stops when the output is whole and nothing may follow,
	 * or at EOS once it is whole.  grammar_text (grammar_len bytes, copied
	 * by add) is the JSON Schema's text, or the choices back to back, each
	 * NUL-terminated.  When max_tokens or the context ends the output before
	 * it is whole, the sequence fails (LLM_FINISH_ERROR, LLM_ERR_LIMIT), so
	 * a constrained result always parses.  Not with forced tokens or stop
	 * strings.  The engine compiles each distinct grammar once and keeps
	 * the token masks of the states it has seen.
	 */
	LlmGrammarKind grammar;
	const char *grammar_text;
	size_t		grammar_len;
} LlmRequest;

/* Request defaults: greedy, 128 tokens, filters off. */
void		llm_request_default(LlmRequest *r);

typedef enum LlmFinishReason
{
	LLM_FINISH_NONE = 0,		/* still running */
	LLM_FINISH_STOP,			/* EOS or a stop string */
	LLM_FINISH_LENGTH,			/* max_tokens or the context limit */
	LLM_FINISH_CANCELLED,
	LLM_FINISH_ERROR
} LlmFinishReason;

/* "stop", "length", "cancelled", "error". */
const char *llm_finish_reason_name(LlmFinishReason r);

/*
 * Queue a sequence; *id identifies it until released.  LLM_ERR_LIMIT when
 * the prompt alone does not fit the context, LLM_ERR_INVALID for bad
 * parameters (message names the parameter).
 */
LlmStatus	llm_engine_add(LlmEngine *e, const LlmRequest *r, int64_t *id, LlmError *err);

/* Run one step; a no-op when nothing is queued or running. */
LlmStatus	llm_engine_step(LlmEngine *e, LlmError *err);

/* Whether any sequence is queued or running. */
bool		llm_engine_busy(const LlmEngine *e);

/* A finished sequence.  text and tokens stay valid until it is released. */
typedef struct LlmResult
{
	int64_t		id;
	LlmFinishReason reason;
	int			n_prompt;
	int			n_cached;		/* of the prompt's tokens, taken from the prefix cache */
	int			n_drafted;		/* speculative decoding: tokens drafted for it, and of those accepted */
	int			n_draft_accepted;
	int			n_generated;
	const int32_t *tokens;		/* (n_generated) */
	const char *text;			/* generated text, cut before a stop string; NUL-terminated */
	size_t		text_len;
	const char *error;			/* message when reason is LLM_FINISH_ERROR */
	LlmStatus	status;			/* why, when reason is LLM_FINISH_ERROR; else LLM_OK */
	/*
	 * (n_generated) with LlmRequest.logprobs, else NULL: the natural log of
	 * each token's probability under the logits the sampler saw (after the
	 * repetition penalty, before temperature and filters)
	 */
	const float *logprobs;
} LlmResult;

/* Take the next finished (not yet polled) sequence; false when none. */
bool		llm_engine_poll(LlmEngine *e, LlmResult *out);

/* Cancel a queued or running sequence (it finishes as CANCELLED); unknown ids are ignored. */
void		llm_engine_cancel(LlmEngine *e, int64_t id);

/* Forget a sequence, finished or not (an unfinished one is cancelled first). */
void		llm_engine_release(LlmEngine *e, int64_t id);

/* Tokens sequence id has generated so far, finished or not (0 for an unknown id). */
int			llm_engine_generated(const LlmEngine *e, int64_t id);

/* Counters for llm_stats. */
typedef struct LlmEngineStats
{
	int			n_waiting;
	int			n_running;
	int64_t		tokens_prefilled;
	int64_t		tokens_generated;
	int64_t		steps;
	int			kv_blocks_used;	/* held by sequences */
	int64_t		kv_tokens;		/* positions stored, summed over running sequences */
	int64_t		kv_capacity;	/* positions their blocks could hold (utilization = tokens / capacity) */
	int			kv_blocks_cached;	/* unused but holding a cached prefix */
	int			kv_blocks_total;
	int64_t		preemptions;
	int64_t		prefix_hit_tokens;	/* prompt tokens not computed thanks to the prefix cache */
	int64_t		evicted_keys;	/* (position, layer, KV head) keys dropped by eviction */
	int64_t		draft_tokens;	/* speculative decoding: tokens drafted and verified */
	int64_t		draft_accepted; /* of those, the ones the sampler picked (steps saved) */
	int64_t		draft_rounds;	/* sequence steps that verified drafts (accepted / rounds: mean accepted length) */
} LlmEngineStats;

void		llm_engine_stats(const LlmEngine *e, LlmEngineStats *out);

/*
 * The answer cache (answer_cache.c): a bounded store of finished answers,
 * keyed by everything they depend on, and its file format.
 *
 * An answer depends only on the model (and the engine settings that change
 * its numbers), the prompt's tokens, the generation parameters and, when
 * sampling, the seed.  The model's part is a 64-bit identity the caller
 * computes once (llm_file_hash() of the model file, mixed with those
 * settings); llm_answer_key() turns an LlmRequest and a partition (a role,
 * or 0 for all) into the rest of the key.  The cache keeps entries until
 * their bytes pass a limit, then drops the least recently used.
 *
 * The file (llm_answer_cache_serialize / llm_answer_cache_load) is a header
 * (magic, version, byte order, identity, count, payload length, the
 * payload's hash and the header's own hash) and the entries from least to
 * most recently used, each with its own hash.  Loading checks all of it
 * before taking any entry: a file that is cut, altered or of another model
 * or version is refused whole, never served in part.  Not thread-safe: one
 * thread owns a cache.
 */
typedef struct LlmAnswerCache LlmAnswerCache;

/* A finished answer: what a hit must give back exactly as the miss did. */
typedef struct LlmAnswer
{
	LlmFinishReason reason;		/* LLM_FINISH_STOP or LLM_FINISH_LENGTH */
	int			n_prompt;
	int			n_generated;
	const char *text;			/* (text_len) the completion, cut before a stop string */
	size_t		text_len;
	const float *logprobs;		/* (n_generated) with LlmRequest.logprobs, else NULL */
} LlmAnswer;

/* 64-bit hash of n bytes (not cryptographic: identities, buckets and checksums). */
uint64_t	llm_hash64(const void *p, size_t n, uint64_t seed);

/* Hash of a file's whole content and size, read in chunks (*out); LLM_ERR_IO when unreadable. */
LlmStatus	llm_file_hash(const char *path, uint64_t *out, LlmError *err);

/*
 * The key of request r in partition (0: shared by all): its prompt tokens,
 * forced tokens, every sampling parameter, the stop strings, the grammar,
 * and the seed when temperature > 0 (greedy decoding never reads it).  The
 * fields that only place or pace the work (cache_partition, share_group,
 * share_weight, draft_group) are left out: answers are the same bits
 * without them.  *key is a new malloc'd buffer of *len bytes.
 */
LlmStatus	llm_answer_key(const LlmRequest *r, uint64_t partition, uint8_t **key, size_t *len,
						   LlmError *err);

/* A new, empty cache holding at most max_bytes (entries and their bookkeeping); NULL when out of memory. */
LlmAnswerCache *llm_answer_cache_new(size_t max_bytes);
void		llm_answer_cache_free(LlmAnswerCache *c);

/* Change the limit, dropping least recently used entries to fit. */
void		llm_answer_cache_set_limit(LlmAnswerCache *c, size_t max_bytes);

/* Drop every entry. */
void		llm_answer_cache_clear(LlmAnswerCache *c);

/*
 * Look key up; on a hit fill *out (pointing into the entry, valid until the
 * cache next changes), make it the most recently used and return true.
 */
bool		llm_answer_cache_get(LlmAnswerCache *c, const uint8_t *key, size_t key_len, LlmAnswer *out);

/*
 * Keep answer a under key (copied), replacing an entry of the same key and
 * dropping least recently used ones to fit.  False when it cannot be kept:
 * larger than the whole limit, or out of memory.
 */
bool		llm_answer_cache_put(LlmAnswerCache *c, const uint8_t *key, size_t key_len, const LlmAnswer *a);

size_t		llm_answer_cache_count(const LlmAnswerCache *c);
size_t		llm_answer_cache_bytes(const LlmAnswerCache *c);

/* Whether entries were added or dropped since the last serialize or load. */
bool		llm_answer_cache_dirty(const LlmAnswerCache *c);

/*
 * The whole cache as a file's bytes for a model of this identity: *buf is a
 * new malloc'd buffer of *len bytes.  Clears the dirty flag.
 */
LlmStatus	llm_answer_cache_serialize(LlmAnswerCache *c, uint64_t identity, uint8_t **buf, size_t *len,
									   LlmError *err);

/*
 * Take the entries of a file's bytes (made by llm_answer_cache_serialize)
 * into c, which should be empty, as far as its limit allows (the most
 * recently used kept).  LLM_ERR_NOT_FOUND when the file is of another model
 * (identity), LLM_ERR_UNSUPPORTED for another version or byte order,
 * LLM_ERR_FORMAT when any check fails: then nothing is taken.
 */
LlmStatus	llm_answer_cache_load(LlmAnswerCache *c, uint64_t identity, const uint8_t *buf, size_t len,
								  LlmError *err);

#endif							/* LLM_ENGINE_H */
