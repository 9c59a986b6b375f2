/*
 * llm.h
 *		Private header of the llm extension: settings, shared memory, the
 *		request queue, the background worker and the SQL functions.
 *
 * The PostgreSQL side never touches the model.  A backend writes a request
 * into a slot of shared memory (queue.c), the background worker "llm worker"
 * (worker.c) feeds it to the engine (src/engine) and writes the result back;
 * shmem.c owns the slots and states who may change what.  worker_model.c
 * loads the model and its engine for the worker.  Of the engine, the
 * PostgreSQL side includes only its public header, engine.h.
 */
#ifndef LLM_H
#define LLM_H

#include "postgres.h"

#include <signal.h>

#include "pg_compat.h"

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "nodes/plannodes.h"
#include "storage/condition_variable.h"
#include "storage/lwlock.h"
#include "utils/dsa.h"
#include "utils/guc.h"
#include "utils/wait_event.h"
#include "utils/timestamp.h"

#include "engine.h"

/* Settings (llm.c); see the descriptions there. */
extern char *llm_model;
extern char *llm_model_dir;
extern int	llm_device;
extern char *llm_devices;
extern bool llm_deterministic;
extern bool llm_gpu_fusion;
extern bool llm_gpu_pdl;
extern bool llm_prefix_cache_shared;
extern int	llm_cache_mb;
extern bool llm_cache_shared;
extern int	llm_threads;
extern int	llm_max_batch_tokens;
extern int	llm_step_time_ms;
extern int	llm_max_sequences;
extern int	llm_kv_cache_mb;
extern int	llm_kv_block_size;
extern double llm_kv_budget;
extern int	llm_kv_sink_tokens;
extern int	llm_kv_evict;
extern int	llm_max_queued_requests;
extern int	llm_debug_step_delay;
extern int	llm_chat_setting;	/* llm.chat, an LlmChatSetting (llm_chat is the SQL function) */
extern char *llm_system_prompt;
extern int	llm_kv_type;
extern int	llm_speculative;
extern int	llm_speculative_max_draft;
extern char *llm_draft_model;
extern int	llm_quantize;
extern char *llm_quantize_calib;
extern int	llm_batch_rows;
extern int	llm_max_tokens;
extern int	llm_max_prompt_bytes;
extern int	llm_max_requests_per_role;
extern int	llm_role_weight;
extern char *llm_remote_servers;
extern bool llm_local_inference;
extern int	llm_remote_timeout;

/* Wait events (PostgreSQL 15 shows every extension wait as "Extension"). */
#define LLM_WAIT_EVENT_REQUEST	PG_WAIT_EXTENSION	/* a backend waits for its result */
#define LLM_WAIT_EVENT_WORKER	PG_WAIT_EXTENSION	/* the worker waits for requests */

/* Limits of the fixed-size text fields of a slot and of the worker status. */
#define LLM_ERRMSG_LEN		LLM_ERROR_MSG_LEN
#define LLM_ERRDETAIL_LEN	1024
#define LLM_ERRHINT_LEN		256
#define LLM_NAME_LEN		MAXPGPATH

/* The life of a request slot; see the protocol at the top of shmem.c. */
typedef enum LlmSlotState
{
	LLM_SLOT_FREE = 0,
	LLM_SLOT_QUEUED,			/* written by a backend, waiting for the worker */
	LLM_SLOT_RUNNING,			/* claimed by the worker, in the engine */
	LLM_SLOT_DONE,				/* result written */
	LLM_SLOT_ERROR,				/* error written */
	LLM_SLOT_CANCELLED			/* abandoned by its backend; the worker frees it */
} LlmSlotState;

/* Sampling parameters of a request, checked by functions.c. */
typedef struct LlmParams
{
	int32		max_tokens;
	double		temperature;
	double		top_p;
	int32		top_k;
	uint64		seed;
	bool		random_seed;	/* seed drawn at random (a NULL argument): the answer is not worth caching */
	bool		chat;			/* wrap the prompt in the model's chat format */
	bool		messages;		/* the prompt is a conversation (llm_chat): a JSON array of
								 * messages, rendered with the tools by the chat template */
	int8		enable_thinking;	/* messages: -1 the template's default, 0 or 1 */
	bool		score;			/* score the continuation instead of generating (max_tokens unused) */
	LlmGrammarKind grammar;		/* what constrains the output: its text (grammar_len bytes) ends the input */
	Size		grammar_len;
	uint64		draft_group;	/* llm.speculative's prompt lookup also searches this group's requests (an
								 * LLM Batch node's: its process and instance); 0: none */
} LlmParams;

/* One request slot in shared memory. */
typedef struct LlmSlot
{
	LlmSlotState state;
	uint64		request_id;		/* unique per submission, never 0 */
	int			owner_pid;		/* the backend that submitted it */
	int			worker;			/* RUNNING, CANCELLED: the model worker that claimed it; -1 before */
	int			role;			/* its role's entry in fair.c's table */
	Oid			roleid;			/* its role (the session user), whose prefix cache it uses */
	TimestampTz queued_at;

	/* Written by the backend before FREE -> QUEUED. */
	LlmParams	params;
	dsa_pointer input;			/* system prompt, prompt, tools, continuation, n_stop NUL-terminated stop
								 * strings, grammar */
	bool		has_system;		/* a system prompt of system_len bytes comes first */
	Size		system_len;
	Size		prompt_len;		/* params.messages: the conversation's JSON */
	bool		has_tools;		/* params.messages: the tools' JSON (tools_len bytes) follows the prompt */
	Size		tools_len;
	Size		continuation_len;	/* params.score: the continuation's bytes follow the prompt */
	Size		input_len;
	int			n_stop;

	/* Written by the worker before RUNNING -> DONE | ERROR. */
	dsa_pointer result;			/* completion text (UTF-8, not NUL-terminated) */
	Size		result_len;
	int32		prompt_tokens;
	int32		completion_tokens;	/* while RUNNING: so far, after each step */
	int32		cached_tokens;	/* prompt tokens taken from the prefix cache */
	int32		drafted_tokens; /* llm.speculative: tokens drafted for it, and of those accepted */
	int32		accepted_tokens;
	double		logprob;		/* params.score: the continuation's log-probability */
	bool		cache_hit;		/* answered from the answer cache (worker_cache.c), no engine step */
	int64		run_us;			/* from the worker's claim to the result */
	LlmFinishReason finish_reason;
	int			sqlerrcode;
	char		errmsg[LLM_ERRMSG_LEN];
	char		errdetail[LLM_ERRDETAIL_LEN];
	char		errdetail_public[LLM_ERRDETAIL_LEN];	/* set: errdetail may name paths, and
														 * this is what roles outside
														 * pg_read_all_settings see */
	char		errhint[LLM_ERRHINT_LEN];

	/* Broadcast by the worker when the slot reaches DONE or ERROR. */
	ConditionVariable cv;
} LlmSlot;

/* What the worker is doing, for llm_worker_status(). */
typedef enum LlmWorkerState
{
	LLM_WORKER_STOPPED = 0,
	LLM_WORKER_STARTING,
	LLM_WORKER_LOADING,
	LLM_WORKER_READY,
	LLM_WORKER_NO_MODEL
} LlmWorkerState;

/* The worker's status and the model it serves. */
typedef struct LlmWorkerInfo
{
	int			pid;			/* 0 when not running */
	int			pgprocno;		/* whose latch to set */
	LlmWorkerState state;
	TimestampTz started_at;
	TimestampTz loaded_at;
	char		model_path[LLM_NAME_LEN];	/* resolved path, or the setting when not loaded */
	char		error[LLM_ERRDETAIL_LEN];	/* why no model is loaded, as a sentence */
	char		error_public[LLM_ERRDETAIL_LEN];	/* error without paths or system texts:
													 * what roles outside
													 * pg_read_all_settings see */
	bool		has_model;
	bool		chat_template;	/* the model has a chat template */
	LlmModelInfo model;
	int			n_ctx;			/* the engine's per-sequence limit */
	uint64		identity;		/* the answers' identity (the answer cache's: file and settings), 0: unknown */
	int			n_threads;
	char		device[128];	/* what the engine computes on (llm_engine_device) */
	char		device_note[256];	/* llm.device = auto on the CPU: why not a GPU */
	/* gauges at its last step, summed over the workers by llm_stats */
	int			engine_waiting;
	int			engine_running;
	int			kv_blocks_used;
	int			kv_blocks_cached;
	int			kv_blocks_total;
	int64		cache_entries;	/* its answer cache's entries and bytes */
	int64		cache_bytes;
	/* cumulative, for llm_workers(): requests it answered, and their tokens */
	int64		requests;
	int64		prompt_tokens;
	int64		completion_tokens;
} LlmWorkerInfo;

/*
 * The model workers llm.devices asks for (one when it is empty): each a
 * device, a GPU's index, and its share of llm.threads.
 */
#define LLM_MAX_WORKERS 8

typedef struct LlmDeviceSpec
{
	LlmDevice	device;			/* LLM_DEVICE_CPU or LLM_DEVICE_CUDA, or llm.device when llm.devices is empty */
	int			index;			/* CUDA: the GPU's number */
	int			threads;		/* CPU: compute threads (0: llm.threads) */
} LlmDeviceSpec;

typedef struct LlmDeviceList
{
	int			n;
	LlmDeviceSpec specs[LLM_MAX_WORKERS];
} LlmDeviceList;

/* Counters for llm_stats, written by the worker (gauges at its last step). */
typedef struct LlmCounters
{
	int64		requests_completed;
	int64		requests_failed;
	int64		requests_cancelled;
	int64		prompt_tokens;	/* of finished requests */
	int64		completion_tokens;
	int64		steps;
	int64		busy_us;		/* time spent in engine steps */
	int64		preemptions;
	int64		prefix_hit_tokens;	/* prompt tokens the prefix cache saved */
	int64		evicted_keys;	/* (position, layer, KV head) keys dropped by llm.kv_budget */
	int64		draft_tokens;	/* llm.speculative: tokens drafted, and of those accepted */
	int64		draft_accepted;
	int64		cache_hits;		/* requests answered from the answer cache */
	TimestampTz reset_at;
} LlmCounters;

/* One remote inference node's counters, for llm_remote_stats (remote.c). */
#define LLM_REMOTE_STATS 32		/* nodes tracked, by foreign server name */
typedef struct LlmRemoteCounters
{
	char		server[NAMEDATALEN];	/* "": a free entry */
	int64		answers;		/* requests it answered to this server's LLM Batch nodes */
	int64		prompt_tokens;
	int64		completion_tokens;
	int64		failures;		/* times it failed or was refused */
} LlmRemoteCounters;

/* The extension's shared state; the slots follow, then the DSA area's first segment. */
typedef struct LlmShared
{
	LWLock	   *lock;			/* see the protocol in shmem.c */
	int			dsa_tranche;
	dsa_pointer dsa_anchor;		/* a small object as old as the area (LlmShmemDsaForget) */
	int			n_slots;
	uint64		next_request_id;
	int			next_free_hint;
	int			n_workers;		/* model workers (llm.devices), each its entry of workers */
	LlmWorkerInfo workers[LLM_MAX_WORKERS];
	LlmCounters counters;
	LlmRemoteCounters remote[LLM_REMOTE_STATS];
	LlmSlot		slots[FLEXIBLE_ARRAY_MEMBER];
} LlmShared;

/* devices.c: llm.devices */
extern bool llm_devices_check(char **newval, void **extra, GucSource source);
extern void llm_devices_assign(const char *newval, void *extra);
extern int	LlmDeviceCount(void);
extern LlmDeviceSpec LlmDeviceOf(int i, int total_threads, int n_cpus);

/* shmem.c */
extern LlmShared *LlmState;
extern void LlmShmemRequest(void);
extern void LlmShmemStartup(void);
extern dsa_area *LlmShmemDsa(void);
extern void LlmShmemDsaForget(void);
extern void LlmShmemDsaTrim(void);
extern dsa_pointer LlmDsaTextPut(dsa_area *area, const char *text, Size len, int flags);
extern void LlmDsaTextGet(dsa_area *area, dsa_pointer dp, char *out, Size len);
extern char *LlmDsaTextCopy(dsa_area *area, dsa_pointer dp, Size len);
extern void LlmDsaTextFree(dsa_area *area, dsa_pointer dp);
extern void LlmShmemCheck(void);
extern void LlmWakeWorker(void);
extern void LlmSlotTakeChunks(LlmSlot *slot, dsa_pointer *chunks, int *n);
extern void LlmFreeChunks(dsa_pointer *chunks, int n);

/* fair.c: shares of slots and engine sequences among roles, per-role counters */
#define LLM_ROLE_ENTRIES 128	/* roles tracked, entry 0 standing for the others */

/* A role's cumulative counters (llm_role_stats). */
typedef struct LlmRoleCounters
{
	int64		completed;
	int64		failed;
	int64		cancelled;
	int64		prompt_tokens;	/* of completed requests */
	int64		completion_tokens;
	int64		cached_tokens;	/* of completed requests: prompt tokens the prefix cache saved */
	int64		cache_hits;		/* completed requests answered from the answer cache */
	int64		admitted;		/* requests the worker took from the queue */
	int64		queue_us;		/* their time in the queue, summed */
} LlmRoleCounters;

/* One row of llm_role_stats. */
typedef struct LlmRoleStats
{
	Oid			roleid;			/* InvalidOid: roles beyond the table */
	int			weight;
	int			queued;
	int			running;
	LlmRoleCounters c;
} LlmRoleStats;

/* Why a backend got no slot. */
typedef enum LlmFairRefusalKind
{
	LLM_FAIR_OK = 0,
	LLM_FAIR_QUEUE_FULL,		/* every slot taken, the role at llm.max_requests_per_role */
	LLM_FAIR_ROLE_LIMIT,		/* free slots, the role at llm.max_requests_per_role */
	LLM_FAIR_WAIT				/* the role at its share, or every slot taken by others: wait */
} LlmFairRefusalKind;

typedef struct LlmFairRefusal
{
	LlmFairRefusalKind refusal;
	int			role;			/* the role's entry */
	int			held;			/* slots it holds */
	int			cap;			/* llm.max_requests_per_role, resolved */
	int			share;			/* its weighted share of the slots */
	int			limit;			/* the smaller of the two */
} LlmFairRefusal;

/* A backend waiting for a slot: registered in its role's entry while waiting. */
typedef struct LlmFairWaiter
{
	bool		waiting;
	int			role;			/* the entry it is registered in */
} LlmFairWaiter;

extern Size LlmFairShmemSize(void);
extern void LlmFairShmemInit(void);
extern int	LlmFairHeadroom(int max_sequences);
extern int	LlmFairTakeSlot(LlmFairRefusal *why, LlmFairWaiter *waiter);
extern void LlmFairStopWaiting(LlmFairWaiter *waiter);
extern ConditionVariable *LlmFairSlotFreedCV(void);
pg_noreturn extern void LlmFairRefuse(const LlmFairRefusal *why);
extern void LlmSlotFree(LlmSlot *slot);
extern void LlmCountOutcome(LlmSlot *slot, LlmSlotState outcome);
extern void LlmFairWorkerInit(void);
extern int	LlmFairPick(int *picked, int capacity, bool has_engine);
extern int	LlmFairRoleWeight(int e);
extern int	LlmRoleStatsSnapshot(LlmRoleStats *out);
extern void LlmRoleStatsReset(void);

/* queue.c: one request as a backend sees it */
typedef struct LlmJob
{
	/* input */
	const char *prompt;			/* UTF-8; NULL for a NULL prompt (no request); params.messages:
								 * the conversation's JSON array */
	Size		prompt_len;
	const char *system;			/* UTF-8 system prompt (chat only), or NULL */
	Size		system_len;
	const char *tools;			/* params.messages: the tools' UTF-8 JSON array, or NULL */
	Size		tools_len;
	const char *continuation;	/* params.score: the UTF-8 text to score after the prompt */
	Size		continuation_len;
	LlmParams	params;			/* with this job's seed */
	const char *stops;			/* n_stop NUL-terminated UTF-8 strings, back to back */
	Size		stops_len;
	int			n_stop;
	const char *grammar;		/* params.grammar: the JSON Schema's UTF-8 text, or the choices NUL-terminated */
	bool		error_as_null;	/* on_error => 'null': a failed request gives a NULL completion */
	bool		shared;			/* params.score: a content-free calibration job, whose answer the statement keeps */

	/* queue bookkeeping */
	int			slot;			/* -1 when not in a slot */
	int			remote_node;	/* the LLM Batch node's remote node (remote.c) it is sent to, or -1 */
	uint64		request_id;		/* its slot's request, or its remote dispatch's */

	/* output */
	char	   *completion;		/* palloc'd, in the server encoding; NULL when failed */
	bool		failed;			/* the request failed (only with error_as_null) */
	char	   *error;			/* failed: why, the error's message and its detail (palloc'd) */
	int			sqlerrcode;		/* failed: the error's SQLSTATE */
	int32		prompt_tokens;
	int32		completion_tokens;
	int32		cached_tokens;
	int32		drafted_tokens;
	int32		accepted_tokens;
	double		logprob;		/* params.score: natural log of the continuation's probability */
	bool		cache_hit;		/* answered from the answer cache */
	int32		n_scored;		/* params.score: the continuation's tokens (copied with the answer) */
	int64		run_us;
	LlmFinishReason finish_reason;
} LlmJob;

/* A new draft group for the requests of one batch (queue.c). */
extern uint64 LlmQueueDraftGroup(void);

extern void LlmQueueRun(LlmJob *jobs, int n_jobs);
extern void LlmQueueAttach(void);
extern bool LlmQueueSubmit(LlmJob *job, bool in_flight);
extern bool LlmQueuePoll(LlmJob *job, long timeout_ms);
extern void LlmQueueWait(LlmJob *job);
extern void LlmQueueCancel(LlmJob *jobs, int n_jobs);
pg_noreturn extern void LlmQueueSlotsFull(void);

/* llm.chat: whether a call whose chat is NULL uses the model's chat format */
typedef enum LlmChatSetting
{
	LLM_CHAT_OFF,
	LLM_CHAT_ON,
	LLM_CHAT_AUTO				/* when the model has a chat template */
} LlmChatSetting;

/* functions.c: the SQL generation functions' arguments, shared with the batch node */
#define LLM_GENERATE_NARGS 12
extern void LlmJobFromArgs(LlmJob *job, const NullableDatum *args);
extern Datum LlmRunOneJob(LlmJob *job, FunctionCallInfo fcinfo);
extern void LlmJobParamsFromArgs(LlmJob *job, const NullableDatum *args);
extern bool LlmModelChats(void);
extern char *LlmTextUtf8(Datum d, Size *len);

/* batch_call.c: the functions the "LLM Batch" node runs for a window of rows */
typedef enum LlmBatchFunc
{
	LLM_BATCH_NONE = -1,
	LLM_BATCH_GENERATE,			/* llm_generate() */
	LLM_BATCH_CHAT,				/* llm_chat() */
	LLM_BATCH_SCORE,			/* llm_score() */
	LLM_BATCH_CLASSIFY,			/* llm_classify() */
	LLM_BATCH_FILTER,			/* llm_filter() */
	LLM_BATCH_PROBABILITY,		/* llm_probability() */
	LLM_BATCH_CLASSIFY_SCORES,	/* llm_classify_scores(), set-returning: its result in the node is a float8[] */
	LLM_BATCH_RANK				/* llm_rank(), the same */
} LlmBatchFunc;

#define LLM_BATCH_MAX_NARGS LLM_GENERATE_NARGS
extern LlmBatchFunc LlmBatchFuncOf(Oid funcid);
extern int	LlmBatchFuncNargs(LlmBatchFunc f);
extern Oid	LlmBatchFromFunc(LlmBatchFunc f, Oid funcid);
extern LlmJob *LlmBatchCallJobs(LlmBatchFunc f, const NullableDatum *args, int *n_jobs);
extern Datum LlmBatchCallResult(LlmBatchFunc f, const NullableDatum *args, const LlmJob *jobs, int n_jobs,
								bool *isnull);
extern PGDLLEXPORT Datum llm_generate(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum llm_chat(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum llm_score(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum llm_classify(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum llm_filter(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum llm_probability(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum llm_classify_scores(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum llm_rank(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum llm_classify_scores_from(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum llm_rank_from(PG_FUNCTION_ARGS);

/* chat.c: llm_chat(), a conversation through the model's chat template */
#define LLM_CHAT_NARGS 12
extern void LlmChatJobFromArgs(LlmJob *job, const NullableDatum *args);

/* semantic.c: the scoring functions' jobs and results (f is not LLM_BATCH_GENERATE nor LLM_BATCH_CHAT) */
extern LlmJob *LlmSemanticJobs(LlmBatchFunc f, const NullableDatum *args, int *n_jobs);
extern Datum LlmSemanticResult(LlmBatchFunc f, const NullableDatum *args, const LlmJob *jobs, int n_jobs);

/* calibrate.c: contextual calibration of label scores, content-free answers kept per statement */
#define LLM_CONTENT_FREE_INPUTS 3
extern const char *const LlmContentFreeInputs[LLM_CONTENT_FREE_INPUTS];
extern bool LlmKeptAnswer(LlmJob *job);
extern void LlmKeepAnswer(const LlmJob *job);
extern void LlmQueueRunKept(LlmJob *jobs, int n_jobs);
extern void LlmSoftmax(const double *logprobs, int n, double *probs);
extern void LlmLabelScores(const LlmJob *jobs, const LlmJob *cf_jobs, int n, double *scores);

/* batch_plan.c and batch_scan.c: the "LLM Batch" plan node */
extern void LlmBatchPlanInit(void);
extern void LlmBatchScanInit(void);
extern Plan *LlmBatchScanCreate(Plan *child, List *scan_tlist, List *tlist, List *qual,
								List *call_args, int64 bound, int plan_node_id);

/* remote.c: remote inference nodes (llm.remote_servers) for the "LLM Batch" node */
typedef struct LlmRemote LlmRemote;
typedef void (*LlmRemoteAnswerCb) (void *arg, void *row, int job, uint64 id, LlmJob *answer);
typedef void (*LlmRemoteLostCb) (void *arg, void *row, int job, uint64 id);
struct ExplainState;
extern LlmRemote *LlmRemoteStart(MemoryContext cxt);
extern int	LlmRemotePick(LlmRemote *r, int local_load);
extern void LlmRemoteAdd(LlmRemote *r, int node, LlmJob *job, void *row, int j);
extern void LlmRemoteFlush(LlmRemote *r, LlmRemoteLostCb lost, void *arg);
extern bool LlmRemoteBusy(LlmRemote *r);
extern void LlmRemoteCollect(LlmRemote *r, long wait_ms, LlmRemoteAnswerCb answer, LlmRemoteLostCb lost,
							 void *arg);
extern void LlmRemoteCancel(LlmRemote *r);
extern void LlmRemoteExplain(LlmRemote *r, struct ExplainState *es);
extern void LlmRemoteRunJobs(LlmJob *jobs, int n_jobs);
extern void LlmRemoteTakeAnswer(LlmJob *job, const LlmJob *ans, MemoryContext cxt);
extern void LlmRemoteCountAnswer(const char *server, int64 prompt_tokens, int64 completion_tokens);
extern void LlmRemoteCountFailure(const char *server);

/* remote_serve.c: a remote node's side, llm_remote_batch(), and the wire format */
#define LLM_REMOTE_MAGIC	0x4c4c4d31	/* "LLM1": a batch's first four bytes */
#define LLM_REMOTE_WAIT_MS	1000	/* longest single wait of either side */
extern void LlmRemotePutJob(StringInfo buf, const LlmJob *job, uint64 tag);
extern bool LlmRemoteGetAnswer(StringInfo buf, LlmJob *ans, uint64 *tag);

/* worker_tokenize.c: the worker's tokenizer thread */
typedef enum LlmTokenizeStage
{
	LLM_TOKENIZE_PROMPT,		/* the (chat-wrapped) prompt */
	LLM_TOKENIZE_CONTINUATION	/* params.score: the continuation */
} LlmTokenizeStage;

/* What the worker takes from a slot when it claims its request (the input's layout is LlmSlot's). */
typedef struct LlmClaimed
{
	int			slotno;
	uint64		request_id;		/* the slot's request when it was claimed */
	Oid			roleid;			/* the slot's role */
	int			weight;			/* its role's llm.role_weight */
	LlmParams	params;
	Size		input_len;
	bool		has_system;
	Size		system_len;
	Size		prompt_len;
	bool		has_tools;
	Size		tools_len;
	Size		continuation_len;
	int			n_stop;
} LlmClaimed;

/* A claimed request on its way through the tokenizer thread (all malloc'd). */
typedef struct LlmTokenizeJob
{
	LlmClaimed	req;
	char	   *bytes;			/* (req.input_len) a copy of the slot's input (LlmSlot.input) */
	/* written by the thread */
	int32_t    *tokens;			/* (n_tokens) the prompt */
	int			n_tokens;
	int32_t    *forced;			/* (n_forced) params.score: the continuation */
	int			n_forced;
	LlmStatus	status;
	LlmTokenizeStage stage;		/* what status is about */
	LlmError	err;
	struct LlmTokenizeJob *next;
} LlmTokenizeJob;

extern void LlmTokenizerSubmit(LlmTokenizeJob *job);
extern LlmTokenizeJob *LlmTokenizerTake(void);
extern bool LlmTokenizerIdle(void);
extern void LlmTokenizeJobFree(LlmTokenizeJob *job);
extern void LlmTokenizerStop(void);

/* worker_cache.c: the worker's answer cache, kept in its memory and in a file */
extern void LlmAnswerCacheConfigure(void);
extern void LlmAnswerCacheModelLoaded(uint64 identity, bool batch_invariant);
extern bool LlmAnswerCacheLookup(const LlmRequest *req, const LlmClaimed *claimed, LlmResult *out,
								 uint8_t **key, size_t *key_len);
extern void LlmAnswerCacheStore(const uint8_t *key, size_t key_len, const LlmResult *result);
extern void LlmAnswerCacheSave(bool force, bool busy);
extern void LlmAnswerCacheGauges(int64 *entries, int64 *bytes);

/* worker.c: the background worker's registration and serving loop */
extern int	LlmMyWorker;
extern LlmWorkerInfo *LlmWorkerSelf(void);
extern LlmWorkerInfo LlmWorkerServing(void);
extern int	LlmWorkersReady(void);
extern void LlmWorkerRegister(void);
extern PGDLLEXPORT void LlmWorkerMain(Datum main_arg);

/* worker_model.c: the worker's model, from the settings to a running engine */
extern LlmModel *LlmWorkerModel;	/* NULL when no model is loaded */
extern LlmEngine *LlmWorkerEngine;	/* NULL when no model is loaded */
extern bool LlmWorkerLoad(void);
extern void LlmWorkerFreeEngine(void);
extern bool LlmWorkerModelStale(void);
extern void LlmWorkerForgetFailedReload(void);
extern int	LlmWorkerEngineSeqs(void);
extern sigset_t LlmBlockSignals(void);
extern void LlmRestoreSignals(sigset_t *old);
extern int	LlmStatusErrcode(LlmStatus status);
extern char *LlmMessageAsSentence(const char *msg);

/* progress.c: each backend's work in the worker, for the llm_progress view */
extern Size LlmProgressShmemSize(void);
extern void LlmProgressShmemInit(void);
extern void LlmProgressStart(int64 rows_total, bool estimated);
extern void LlmProgressTotalKnown(int64 estimate, int64 rows_total);
extern void LlmProgressRow(int64 prompt_tokens, int64 completion_tokens);
extern void LlmProgressEnd(void);
extern void LlmProgressReset(void);

/* stats.c */
extern const char *LlmWorkerStateName(LlmWorkerState state);
extern void LlmWorkerGauges(LlmWorkerInfo *g);
extern bool LlmMaySeePaths(void);

#endif							/* LLM_H */
