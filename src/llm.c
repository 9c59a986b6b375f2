/*
 * llm.c
 *		Entry point of the llm extension: settings, shared memory hooks and
 *		the registration of the background worker.
 *
 * The library must be in shared_preload_libraries: the request queue lives
 * in shared memory sized at start-up, and the worker that serves it is
 * registered by the postmaster.  Nothing here touches the model; the
 * worker loads it (CUDA, when there is CUDA, must be initialised in the
 * process that uses it, never before the postmaster forks).
 */
#include "postgres.h"

#include "access/xact.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "tcop/utility.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "llm.h"
#include "job.h"

/* 18 shows the module's name and version in pg_get_loaded_modules() */
#ifdef PG_MODULE_MAGIC_EXT
PG_MODULE_MAGIC_EXT(.name = "llm",.version = LLM_VERSION);
#else
PG_MODULE_MAGIC;
#endif

char	   *llm_model = NULL;
char	   *llm_model_dir = NULL;
int			llm_device = LLM_DEVICE_AUTO;
bool		llm_deterministic = false;
bool		llm_prefix_cache_shared = false;
int			llm_cache_mb = 64;
bool		llm_cache_shared = false;
bool		llm_gpu_fusion = true;
bool		llm_gpu_pdl = true;
int			llm_threads = 0;
int			llm_max_batch_tokens = 512;
int			llm_step_time_ms = 100;
int			llm_max_sequences = 64;
int			llm_kv_cache_mb = 0;
int			llm_kv_block_size = 16;
double		llm_kv_budget = 0.0;
int			llm_kv_sink_tokens = 4;
int			llm_kv_evict = LLM_EVICT_H2O;
int			llm_max_queued_requests = 1024;
int			llm_debug_step_delay = 0;
int			llm_batch_rows = -1;
char	   *llm_remote_servers = NULL;
bool		llm_local_inference = true;
int			llm_remote_timeout = 300000;
int			llm_max_tokens = 4096;
int			llm_max_prompt_bytes = 1048576;
int			llm_max_requests_per_role = -1;
int			llm_role_weight = 1;
int			llm_chat_setting = LLM_CHAT_AUTO;
char	   *llm_system_prompt = NULL;
int			llm_kv_type = LLM_KV_F16;
int			llm_speculative = LLM_SPEC_NGRAM;
int			llm_speculative_max_draft = 8;
char	   *llm_draft_model = NULL;
int			llm_quantize = LLM_QUANT_NONE;
char	   *llm_quantize_calib = NULL;

static const struct config_enum_entry llm_quantize_options[] = {
	{"none", LLM_QUANT_NONE, false},
	{"int8", LLM_QUANT_INT8, false},
	{"int4", LLM_QUANT_INT4_G128, false},
	{"int4_g32", LLM_QUANT_INT4_G32, false},
	{"int4_g128", LLM_QUANT_INT4_G128, true},
	{NULL, 0, false}
};

static const struct config_enum_entry llm_kv_type_options[] = {
	{"f32", LLM_KV_F32, false},
	{"f16", LLM_KV_F16, false},
	{"int8", LLM_KV_I8, false},
	{NULL, 0, false}
};

static const struct config_enum_entry llm_speculative_options[] = {
	{"off", LLM_SPEC_OFF, false},
	{"ngram", LLM_SPEC_NGRAM, false},
	{"draft", LLM_SPEC_DRAFT, false},
	{NULL, 0, false}
};

static const struct config_enum_entry llm_kv_evict_options[] = {
	{"h2o", LLM_EVICT_H2O, false},
	{"h2o_mean", LLM_EVICT_H2O_MEAN, false},
	{"streaming", LLM_EVICT_STREAMING, false},
	{"window", LLM_EVICT_WINDOW, false},
	{NULL, 0, false}
};

/* llm.chat: auto, and on and off under every name a boolean setting takes */
static const struct config_enum_entry llm_chat_options[] = {
	{"auto", LLM_CHAT_AUTO, false},
	{"on", LLM_CHAT_ON, false},
	{"off", LLM_CHAT_OFF, false},
	{"true", LLM_CHAT_ON, true},
	{"false", LLM_CHAT_OFF, true},
	{"yes", LLM_CHAT_ON, true},
	{"no", LLM_CHAT_OFF, true},
	{"1", LLM_CHAT_ON, true},
	{"0", LLM_CHAT_OFF, true},
	{NULL, 0, false}
};

static const struct config_enum_entry llm_device_options[] = {
	{"auto", LLM_DEVICE_AUTO, false},
	{"cpu", LLM_DEVICE_CPU, false},
	{"cuda", LLM_DEVICE_CUDA, false},
	{NULL, 0, false}
};

static ProcessUtility_hook_type prev_process_utility_hook = NULL;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

void		_PG_init(void);

/*
 * Check hook of llm.batch_rows: a session's SET above the default (twice
 * llm.max_sequences) needs a superuser, since a large window lets one
 * idle cursor hold many request slots.  A superuser's ALTER ROLE ... SET
 * applies at the role's login (source PGC_S_USER) and passes.
 */
static bool
llm_batch_rows_check(int *newval, void **extra, GucSource source)
{
	if (source != PGC_S_SESSION || *newval <= 2 * llm_max_sequences || !IsTransactionState() || superuser())
		return true;
	GUC_check_errcode(ERRCODE_INSUFFICIENT_PRIVILEGE);
	GUC_check_errmsg("permission denied to set llm.batch_rows above %d", 2 * llm_max_sequences);
	GUC_check_errdetail("Above the default, twice llm.max_sequences, only a superuser may set it.");
	GUC_check_errhint("A superuser may set it per role: ALTER ROLE ... SET llm.batch_rows.");
	return false;
}

/* Reserve our shared memory and LWLock. */
static void
llm_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	LlmShmemRequest();
}

/* Set up our shared memory. */
static void
llm_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LlmShmemStartup();
}

/*
 * SET or RESET of an llm.* setting: when PostgreSQL refuses it as one that
 * only the configuration sets (llm.model, llm.device ...), its error gets a
 * hint saying how to change it.
 */
static void
llm_process_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
					ProcessUtilityContext context, ParamListInfo params,
					QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *stmt = pstmt->utilityStmt;
	bool		sets_llm = IsA(stmt, VariableSetStmt) && ((VariableSetStmt *) stmt)->name != NULL &&
		strncmp(((VariableSetStmt *) stmt)->name, "llm.", 4) == 0;
	MemoryContext cxt = CurrentMemoryContext;

	PG_TRY();
	{
		if (prev_process_utility_hook)
			prev_process_utility_hook(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
		else
			standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		if (!sets_llm)
			PG_RE_THROW();
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		if (edata->sqlerrcode != ERRCODE_CANT_CHANGE_RUNTIME_PARAM || edata->hint != NULL)
		{
			FreeErrorData(edata);
			PG_RE_THROW();
		}
		FlushErrorState();
		/* message_id: the message untranslated */
		if (edata->message_id != NULL && strstr(edata->message_id, "restarting") != NULL)
			edata->hint = psprintf("Set %s with ALTER SYSTEM (or in postgresql.conf) and restart the server.",
								   ((VariableSetStmt *) stmt)->name);
		else
			edata->hint = psprintf("Set %s with ALTER SYSTEM (or in postgresql.conf), then SELECT pg_reload_conf().",
								   ((VariableSetStmt *) stmt)->name);
		ReThrowError(edata);
	}
	PG_END_TRY();
}

/* At transaction end no work of this backend is in the worker any more: clear its progress. */
static void
llm_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT)
		LlmProgressReset();
}

/* Define the llm.* settings. */
static void
LlmDefineSettings(void)
{
	DefineCustomStringVariable("llm.model",
							   "GGUF model file served by the llm worker.",
							   "A file name inside llm.model_dir (or an absolute path that lies inside it). "
							   "The worker loads it at start and again when the setting changes.",
							   &llm_model,
							   "",
							   PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);

	DefineCustomEnumVariable("llm.chat",
							 "Whether llm_generate wraps prompts in the model's chat format by default.",
							 "With chat, an instruction gets an answer rather than a continuation. "
							 "auto: when the model has a chat template (an instruct model). "
							 "The chat argument of llm_generate overrides it.",
							 &llm_chat_setting,
							 LLM_CHAT_AUTO,
							 llm_chat_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomStringVariable("llm.system_prompt",
							   "System prompt of chat requests that give none.",
							   "Used when llm_generate runs with chat and its system argument is NULL; "
							   "empty: no system prompt (the template's own default, if it has one).",
							   &llm_system_prompt,
							   "",
							   PGC_USERSET,
							   0,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("llm.model_dir",
							   "Directory that model files must be in.",
							   "Model files outside it are refused.",
							   &llm_model_dir,
							   "",
							   PGC_SIGHUP,
							   GUC_SUPERUSER_ONLY,
							   NULL, NULL, NULL);

	DefineCustomEnumVariable("llm.device",
							 "Device the llm worker computes on.",
							 "auto uses CUDA when llm was built with it and a GPU is visible, else the CPU; "
							 "cuda fails to start the engine where that is not so.",
							 &llm_device,
							 LLM_DEVICE_AUTO,
							 llm_device_options,
							 PGC_POSTMASTER,
							 0,
							 NULL, NULL, NULL);

	DefineCustomStringVariable("llm.devices",
							   "Devices that each run a model worker, for example \"cuda:0,cuda:1\" or \"cpu,cpu\".",
							   "Empty runs one worker on llm.device. The CPU workers split llm.threads between them.",
							   &llm_devices,
							   "",
							   PGC_POSTMASTER,
							   0,
							   llm_devices_check, llm_devices_assign, NULL);

	DefineCustomBoolVariable("llm.deterministic",
							 "Makes every answer on the GPU independent of the batch it ran in.",
							 "On the CPU answers never depend on what else runs; on CUDA this routes every matmul "
							 "through the GEMV kernels, 8 tokens at a time, and every token's attention through "
							 "the decode kernel, at a cost in prefill and large-batch speed.  Takes effect when "
							 "the worker next loads a model.",
							 &llm_deterministic,
							 false,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("llm.prefix_cache_shared",
							 "Lets every role's requests reuse the prompt prefixes that other roles' requests left "
							 "in the KV cache.",
							 "Off, each role has its own prefix cache: a prompt is never computed faster, nor "
							 "counted as cached, because another role sent the same text, so no role can tell what "
							 "another asked.  On, roles that send the same instruction share its computation, and "
							 "each can learn by timing or by EXPLAIN ANALYZE whether any role sent a prompt.  "
							 "Answers are the same either way.",
							 &llm_prefix_cache_shared,
							 false,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("llm.cache_mb",
							"Size of the answer cache: finished answers the worker gives again, without computing, "
							"for the same model, prompt, parameters and seed.",
							"0 turns it off and deletes its file.  The cache is kept in the worker's memory and, "
							"across restarts, in the file llm_answer_cache of the data directory.",
							&llm_cache_mb,
							64, 0, INT_MAX / 2,
							PGC_SIGHUP,
							GUC_UNIT_MB,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("llm.cache_shared",
							 "Lets every role's requests take the answers that other roles' requests left in the "
							 "answer cache.",
							 "Off, each role has its own answers: an answer never comes back faster because another "
							 "role asked the same, so no role can tell by timing what another asked.  On, a role "
							 "that asks what any role asked before gets the answer at once, and can learn by "
							 "timing, llm_stats or EXPLAIN ANALYZE that someone asked it.  Answers are the same "
							 "either way.",
							 &llm_cache_shared,
							 false,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("llm.gpu_fusion",
							 "Runs some steps of the forward pass as one GPU kernel each.",
							 "On CUDA the Q, K and V projections share one matmul launch, the gate and up "
							 "projections one with the activation, each residual add one with the norm after it, "
							 "and RoPE of queries and keys one; answers are the same bits either way.  Off only "
							 "to compare or to localise a fault.  Takes effect when the worker next loads a model.",
							 &llm_gpu_fusion,
							 true,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("llm.gpu_pdl",
							 "Lets each GPU kernel start while the one before it finishes.",
							 "Programmatic dependent launch, on CUDA devices of compute capability 9.0 and newer "
							 "that take it (others ignore the setting); it hides most of the gap between kernels "
							 "in decoding.  Off only to compare or to localise a fault.  Takes effect when the "
							 "worker next loads a model.",
							 &llm_gpu_pdl,
							 true,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("llm.threads",
							"Number of compute threads of the llm worker.",
							"0 uses one thread per online CPU. Takes effect when the worker next loads a model.",
							&llm_threads,
							0, 0, 1024,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("llm.max_batch_tokens",
							"Maximum number of tokens in one engine step.",
							"Takes effect when the worker next loads a model.",
							&llm_max_batch_tokens,
							512, 1, 65536,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("llm.step_time_ms",
							"Target compute time of one engine step, in milliseconds.",
							"Prompt chunks are sized so that a step takes about this long on top of the decoding "
							"sequences' tokens, which bounds how long a long prompt can delay the others and a cancel; "
							"0 leaves only llm.max_batch_tokens.  Takes effect when the worker next loads a model.",
							&llm_step_time_ms,
							100, 0, 60000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("llm.max_sequences",
							"Maximum number of requests the engine generates for at once.",
							"Requests beyond it wait in the queue, from which the worker takes them by weighted fair "
							"queueing over roles; an eighth more (at least one) are kept for roles with none "
							"running.  Takes effect when the worker next loads a model.",
							&llm_max_sequences,
							64, 1, 4096,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("llm.kv_cache_mb",
							"Size of the KV cache pool.",
							"0 sizes it for 16 sequences of full context. Takes effect when the worker next loads a model.",
							&llm_kv_cache_mb,
							0, 0, INT_MAX / 2,
							PGC_SIGHUP,
							GUC_UNIT_MB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("llm.kv_block_size",
							"Number of tokens in one KV cache block.",
							"Takes effect when the worker next loads a model.",
							&llm_kv_block_size,
							16, 1, 1024,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomEnumVariable("llm.kv_type",
							 "Type of the keys and values in the KV cache.",
							 "f16 (the default, as llama.cpp's) halves f32's memory and the bandwidth attention "
							 "needs, int8 (a scale per position and head) quarters it; greedy text can differ "
							 "slightly between them.  Takes effect when the worker next loads a model.",
							 &llm_kv_type,
							 LLM_KV_F16,
							 llm_kv_type_options,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomEnumVariable("llm.speculative",
							 "How decoding requests draft tokens to verify in one step (speculative decoding).",
							 "ngram: prompt lookup, the tokens that followed the request's last few tokens earlier in "
							 "its prompt or output; summaries and extractions copy their input.  draft: the greedy "
							 "guesses of llm.draft_model, a smaller model of the same vocabulary.  Every answer is the "
							 "same as with off: a drafted token is kept only where the sampler picks it.  Drafts are "
							 "fed only where their chance of acceptance pays for their compute (few requests "
							 "decoding, no prompt to compute), and not under llm.kv_budget.  Takes effect when the "
							 "worker next loads a model.",
							 &llm_speculative,
							 LLM_SPEC_NGRAM,
							 llm_speculative_options,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomStringVariable("llm.draft_model",
							   "The draft model of llm.speculative = draft: a GGUF file in llm.model_dir.",
							   "A smaller model (or a more quantized copy) with the same vocabulary as llm.model; it "
							   "runs beside it in the worker, over KV of its own.  Takes effect when the worker next "
							   "loads a model.",
							   &llm_draft_model,
							   "",
							   PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);

	DefineCustomIntVariable("llm.speculative_max_draft",
							"Most tokens a request drafts in one step under llm.speculative.",
							"The length adapts to how many of a request's drafts were accepted, up to this.  Takes "
							"effect when the worker next loads a model.",
							&llm_speculative_max_draft,
							8, 1, LLM_SPEC_MAX_DRAFT,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomEnumVariable("llm.quantize",
							 "Quantization of the model's float weights when the worker loads it.",
							 "int8: one scale per output channel; int4: one scale per 128 inputs (int4_g32: per 32). "
							 "Already quantized tensors keep their type.  Takes effect when the worker next loads a model.",
							 &llm_quantize,
							 LLM_QUANT_NONE,
							 llm_quantize_options,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomStringVariable("llm.quantize_calib",
							   "Calibration text file for activation-aware (AWQ) scales of llm.quantize.",
							   "A text file (absolute, or relative to the data directory) that the float model is run on; "
							   "its first 4096 tokens, at least 256, set per-channel scales before quantizing. "
							   "Empty quantizes without AWQ; ignored when llm.quantize is none.  Takes effect when the "
							   "worker next loads a model.",
							   &llm_quantize_calib,
							   "",
							   PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);

	DefineCustomRealVariable("llm.kv_budget",
							 "Keys and values a sequence keeps per layer and head; the rest are evicted.",
							 "0 keeps everything; a value below 1 is a fraction of the context length, "
							 "1 or more a number of tokens.  Turns the prefix cache off.",
							 &llm_kv_budget,
							 0.0, 0.0, 1e9,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("llm.kv_sink_tokens",
							"First positions of a sequence that eviction never drops (attention sinks).",
							NULL,
							&llm_kv_sink_tokens,
							4, 0, 1024,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomEnumVariable("llm.kv_evict",
							 "Which keys a sequence over llm.kv_budget drops.",
							 "h2o keeps the sinks, the newest half of the budget and the keys with the most "
							 "attention so far; h2o_mean ranks those by mean attention per query; streaming "
							 "keeps the sinks and the newest; window only the newest.",
							 &llm_kv_evict,
							 LLM_EVICT_H2O,
							 llm_kv_evict_options,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("llm.max_queued_requests",
							"Number of request slots in shared memory.",
							"Requests waiting for or being served by the llm worker each take one.",
							&llm_max_queued_requests,
							1024, 1, 65536,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("llm.max_requests_per_role",
							"Request slots one role may hold at once.",
							"A role also holds at most its share of the slots by llm.role_weight while other roles "
							"have requests.  A batch beyond it waits for its own requests; a lone request beyond it "
							"fails.  -1 uses llm.max_queued_requests less a quarter.",
							&llm_max_requests_per_role,
							-1, -1, 65536,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("llm.role_weight",
							"Weight of the session's role in the llm worker's fair shares.",
							"Roles with requests share the request slots and the engine's sequences in proportion "
							"to their weights.  Set per role by a superuser: ALTER ROLE ... SET llm.role_weight.",
							&llm_role_weight,
							1, 1, 1000,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("llm.batch_rows",
							"Rows whose llm_generate() calls run together in an LLM Batch plan node.",
							"A query that calls llm_generate() per row gets an LLM Batch node, which queues the "
							"calls of this many rows at once and returns the rows in order.  -1 uses twice "
							"llm.max_sequences; 0 or 1 plans queries without the node (row by row).  Above "
							"twice llm.max_sequences only a superuser may set it.",
							&llm_batch_rows,
							-1, -1, 65536,
							PGC_USERSET,
							0,
							llm_batch_rows_check, NULL, NULL);

	DefineCustomStringVariable("llm.remote_servers",
							   "Foreign servers whose llm serves this server's LLM Batch nodes too.",
							   "A comma-separated list of foreign servers (CREATE SERVER ... FOREIGN DATA WRAPPER "
							   "postgres_fdw, with a user mapping for each role), each running llm with the same "
							   "model.  An LLM Batch node spreads its requests over them and the local worker by "
							   "their free capacity.  Empty: none.",
							   &llm_remote_servers,
							   "",
							   PGC_USERSET,
							   GUC_LIST_INPUT,
							   NULL, NULL, NULL);

	DefineCustomBoolVariable("llm.local_inference",
							 "Whether LLM Batch nodes also send requests to this server's own worker.",
							 "Off, with llm.remote_servers set, this server only dispatches to the remote nodes.",
							 &llm_local_inference,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("llm.remote_timeout",
							"How long a remote node may send no answer before its requests go elsewhere.",
							"A node with requests in flight that sends nothing for this long is given up for "
							"the statement and its unanswered requests are sent to the other nodes.  0: no "
							"limit.",
							&llm_remote_timeout,
							300000, 0, INT_MAX,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("llm.max_tokens",
							"Largest max_tokens a generation may ask for.",
							"A call asking for more fails.",
							&llm_max_tokens,
							4096, 0, INT_MAX,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("llm.max_prompt_bytes",
							"Largest request a call may queue: its prompt, system prompt and stop strings, in bytes.",
							"Checked in the backend before anything is copied into shared memory.",
							&llm_max_prompt_bytes,
							1048576, 1024, MaxAllocSize / 2,
							PGC_SUSET,
							GUC_UNIT_BYTE,
							NULL, NULL, NULL);

	DefineCustomIntVariable("llm.debug_step_delay",
							"Delay after each engine step, for testing.",
							NULL,
							&llm_debug_step_delay,
							0, 0, 10000,
							PGC_SIGHUP,
							GUC_UNIT_MS | GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);

	MarkGUCPrefixReserved("llm");
}

/* Module load: refuse unless preloaded, then settings, shared memory, worker, the LLM Batch node. */
void
_PG_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("llm must be loaded via shared_preload_libraries"),
				 errhint("Add \"llm\" to shared_preload_libraries and restart the server.")));

	LlmDefineSettings();

	prev_process_utility_hook = ProcessUtility_hook;
	ProcessUtility_hook = llm_process_utility;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = llm_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = llm_shmem_startup;

	LlmWorkerRegister();
	LlmJobInit();
	LlmBatchPlanInit();
	LlmBatchScanInit();
	RegisterXactCallback(llm_xact_callback, NULL);
}
