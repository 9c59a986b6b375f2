/*
 * worker.c
 *		The background worker "llm worker": loads the model and serves the
 *		request queue through the engine.
 *
 * One worker per server.  At start (and when the model settings change on
 * SIGHUP) it loads llm.model, a GGUF file that must lie inside
 * llm.model_dir, and creates an engine for it.  A model that is missing,
 * outside the directory or invalid is logged as an error and the worker
 * keeps running without one, answering every request with "no model is
 * loaded": a bad setting must not become a crash loop.
 *
 * The main loop, once per engine step:
 *   1. drop CANCELLED slots (releasing their engine sequences) and claim
 *      QUEUED ones: tokenize, check the context length, llm_engine_add();
 *      every claimed request joins the engine at once and the engine
 *      batches them (continuous batching);
 *   2. run one llm_engine_step() when the engine has work, then hand every
 *      finished sequence back to its slot (DONE or ERROR) and wake the
 *      waiting backend;
 *   3. wait on the latch (not at all while the engine has work), then
 *      handle SIGHUP and SIGTERM.
 * New requests, cancellations and signals are thus seen between any two
 * steps.
 *
 * Only this process touches the engine.  The engine's compute threads must
 * never run PostgreSQL code, including its signal handlers, so every engine
 * call that may start threads runs with all signals blocked; threads
 * inherit that mask.  On exit (ERROR, FATAL, SIGTERM) a before_shmem_exit
 * callback fails every request the worker has not answered, so waiting
 * backends get an error rather than wait forever; a crash (SIGKILL) makes
 * the postmaster reset shared memory, which ends every session anyway.  The
 * postmaster restarts the worker after a second in both cases.
 */
#include "postgres.h"

#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "llm.h"

/* The worker's view of a slot it has put into the engine. */
typedef struct LlmWorkerSeq
{
	bool		active;			/* in the engine */
	int64		engine_id;
	int32	   *tokens;			/* (n_prompt) the prompt, malloc'd by llm_tokenize */
} LlmWorkerSeq;

/* The settings a model was loaded with; a change on SIGHUP reloads it. */
typedef struct LlmModelSettings
{
	char		model[MAXPGPATH];
	char		model_dir[MAXPGPATH];
	int			threads;
	int			max_batch_tokens;
	int			step_time_ms;
	int			max_sequences;
	int			kv_cache_mb;
	int			kv_block_size;
	double		kv_budget;
	int			kv_sink_tokens;
	int			kv_evict;
	int			kv_type;
	int			device;
	int			quantize;
	char		quantize_calib[MAXPGPATH];	/* AWQ calibration text; "" = none or quantize none */
} LlmModelSettings;

static LlmModel *WorkerModel = NULL;
static LlmEngine *WorkerEngine = NULL;
static LlmWorkerSeq *WorkerSeqs = NULL;	/* (n_slots) */
static LlmModelSettings WorkerApplied;
static bool WorkerReloadPending = false;
static LlmEngineStats WorkerLast;	/* the engine's counters at the last publish */

/* Register the worker; called by _PG_init in the postmaster. */
void
LlmWorkerRegister(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_ConsistentState;
	worker.bgw_restart_time = 1;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "llm");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "LlmWorkerMain");
	snprintf(worker.bgw_name, BGW_MAXLEN, "llm worker");
	snprintf(worker.bgw_type, BGW_MAXLEN, "llm worker");
	RegisterBackgroundWorker(&worker);
}

/* Block every signal, returning the old mask (see the header comment). */
static sigset_t
LlmBlockSignals(void)
{
	sigset_t	all;
	sigset_t	old;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	return old;
}

/* Restore the mask LlmBlockSignals() returned. */
static void
LlmRestoreSignals(sigset_t *old)
{
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

/* The SQLSTATE for an engine status. */
static int
LlmStatusErrcode(LlmStatus status)
{
	switch (status)
	{
		case LLM_ERR_INVALID:
			return ERRCODE_INVALID_PARAMETER_VALUE;
		case LLM_ERR_LIMIT:
			return ERRCODE_PROGRAM_LIMIT_EXCEEDED;
		case LLM_ERR_NOMEM:
			return ERRCODE_OUT_OF_MEMORY;
		case LLM_ERR_IO:
			return ERRCODE_IO_ERROR;
		case LLM_ERR_FORMAT:
			return ERRCODE_DATA_CORRUPTED;
		case LLM_ERR_UNSUPPORTED:
			return ERRCODE_FEATURE_NOT_SUPPORTED;
		case LLM_ERR_NOT_FOUND:
			return ERRCODE_UNDEFINED_OBJECT;
		default:
			return ERRCODE_INTERNAL_ERROR;
	}
}

/* An engine message (lower case, no period) as a detail sentence. */
static char *
LlmMessageAsSentence(const char *msg)
{
	char	   *s = psprintf("%s.", msg);

	if (s[0] >= 'a' && s[0] <= 'z')
		s[0] += 'A' - 'a';
	return s;
}

/* Record the worker's state (and why there is no model) for llm_worker_status(). */
static void
LlmWorkerSetState(LlmWorkerState state, const char *path, const char *error)
{
	LWLockAcquire(LlmState->lock, LW_EXCLUSIVE);
	LlmState->worker.state = state;
	if (path)
		strlcpy(LlmState->worker.model_path, path, sizeof(LlmState->worker.model_path));
	strlcpy(LlmState->worker.error, error ? error : "", sizeof(LlmState->worker.error));
	if (state != LLM_WORKER_READY)
		LlmState->worker.has_model = false;
	LWLockRelease(LlmState->lock);
}

/* Remember the settings the current model was loaded with. */
static void
LlmWorkerReadSettings(LlmModelSettings *s)
{
	memset(s, 0, sizeof(*s));
	strlcpy(s->model, llm_model ? llm_model : "", sizeof(s->model));
	strlcpy(s->model_dir, llm_model_dir ? llm_model_dir : "", sizeof(s->model_dir));
	s->threads = llm_threads;
	s->max_batch_tokens = llm_max_batch_tokens;
	s->step_time_ms = llm_step_time_ms;
	s->max_sequences = llm_max_sequences;
	s->kv_cache_mb = llm_kv_cache_mb;
	s->kv_block_size = llm_kv_block_size;
	s->kv_budget = llm_kv_budget;
	s->kv_sink_tokens = llm_kv_sink_tokens;
	s->kv_evict = llm_kv_evict;
	s->kv_type = llm_kv_type;
	s->device = llm_device;
	s->quantize = llm_quantize;
	if (llm_quantize != LLM_QUANT_NONE)
		strlcpy(s->quantize_calib, llm_quantize_calib ? llm_quantize_calib : "", sizeof(s->quantize_calib));
}

/*
 * The calibration text file at path (llm.quantize_calib) in a palloc'd
 * buffer of *len bytes; errors out when it cannot be read.
 */
static char *
LlmWorkerReadCalib(const char *path, size_t *len)
{
	struct stat st;
	char	   *buf;
	Size		got = 0;
	bool		failed = false;
	int			fd;
	int			save_errno;

	if (stat(path, &st) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read calibration text file \"%s\": %m", path),
				 errhint("Set llm.quantize_calib to a readable text file, or to an empty string for quantization without AWQ.")));
	if (!S_ISREG(st.st_mode))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("calibration text file \"%s\" is not a regular file", path)));
	if ((Size) st.st_size >= MaxAllocSize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("calibration text file \"%s\" is too large", path),
				 errdetail("The file has %lld bytes; AWQ uses only the first 4096 tokens of it.",
						   (long long) st.st_size)));

	buf = palloc((Size) st.st_size + 1);
	fd = open(path, O_RDONLY | PG_BINARY, 0);
	failed = fd < 0;
	while (!failed && got < (Size) st.st_size)
	{
		ssize_t		n = read(fd, buf + got, (Size) st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
		{
			failed = n < 0;
			break;				/* an error, or the file got shorter */
		}
		got += (Size) n;
	}
	if (fd >= 0)
	{
		save_errno = errno;
		close(fd);
		errno = save_errno;
	}
	if (failed)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read calibration text file \"%s\": %m", path)));
	buf[got] = '\0';
	*len = (size_t) got;
	return buf;
}

/*
 * The real path of the model file named by the settings; errors out when
 * it does not exist or lies outside llm.model_dir.
 */
static char *
LlmWorkerModelPath(const LlmModelSettings *s)
{
	char	   *dir;
	char	   *path;
	char	   *joined;
	size_t		dirlen;

	if (s->model_dir[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("llm.model_dir is not set"),
				 errhint("Set llm.model_dir to the directory that holds the model files.")));

	dir = realpath(s->model_dir, NULL);
	if (dir == NULL)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not access model directory \"%s\": %m", s->model_dir)));

	if (is_absolute_path(s->model))
		joined = pstrdup(s->model);
	else
		joined = psprintf("%s/%s", s->model_dir, s->model);

	path = realpath(joined, NULL);
	if (path == NULL)
	{
		free(dir);
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not access model file \"%s\": %m", joined)));
	}

	dirlen = strlen(dir);
	if (strncmp(path, dir, dirlen) != 0 || path[dirlen] != '/')
	{
		char	   *p = pstrdup(path);
		char	   *d = pstrdup(dir);

		free(path);
		free(dir);
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("model file \"%s\" is outside llm.model_dir", p),
				 errdetail("llm.model_dir is \"%s\".", d)));
	}

	joined = pstrdup(path);
	free(path);
	free(dir);
	return joined;
}

/* Load the model and start an engine for it; errors out on failure. */
static void
LlmWorkerOpenModel(const LlmModelSettings *s)
{
	char	   *path;
	LlmModel   *model = NULL;
	LlmEngine  *engine = NULL;
	LlmModelLoadOptions opts;
	LlmEngineConfig config;
	LlmError	err;
	LlmStatus	status;
	sigset_t	mask;
	const LlmModelInfo *info;
	char	   *calib = NULL;
	size_t		calib_len = 0;
	int			n_threads;

	path = LlmWorkerModelPath(s);

	n_threads = s->threads > 0 ? s->threads : Min(Max(1, (int) sysconf(_SC_NPROCESSORS_ONLN)), 1024);
	if (s->quantize_calib[0] != '\0')
		calib = LlmWorkerReadCalib(s->quantize_calib, &calib_len);

	llm_model_load_options_default(&opts);
	opts.quantize = (LlmQuantScheme) s->quantize;
	opts.calib_text = calib;
	opts.calib_len = calib_len;
	opts.n_threads = n_threads;

	llm_error_clear(&err);
	mask = LlmBlockSignals();
	status = llm_model_load_with(path, &opts, &model, &err);
	LlmRestoreSignals(&mask);
	if (status != LLM_OK)
		ereport(ERROR,
				(errcode(LlmStatusErrcode(status)),
				 calib != NULL ?
				 errmsg("could not load model file \"%s\" with AWQ calibration text \"%s\"", path, s->quantize_calib) :
				 errmsg("could not load model file \"%s\"", path),
				 errdetail_internal("%s", LlmMessageAsSentence(err.msg))));

	llm_engine_config_default(&config);
	config.n_threads = n_threads;
	config.max_batch_tokens = s->max_batch_tokens;
	config.step_time_ms = s->step_time_ms;
	config.max_seqs = s->max_sequences;
	config.kv_type = (LlmKvType) s->kv_type;
	config.kv_block_size = s->kv_block_size;
	config.kv_cache_bytes = (size_t) s->kv_cache_mb * 1024 * 1024;
	config.device = (LlmDevice) s->device;
	config.kv_sink_tokens = s->kv_sink_tokens;
	config.evict_policy = (LlmEvictPolicy) s->kv_evict;
	/* below 1: a fraction of the context (the model's, as the engine limits it) */
	config.kv_budget = s->kv_budget >= 1.0 ? (int) Min(s->kv_budget, INT_MAX) :
		(int) ceil(s->kv_budget * llm_model_info(model)->n_ctx);

	mask = LlmBlockSignals();
	status = llm_engine_new(model, &config, &engine, &err);
	LlmRestoreSignals(&mask);
	if (status != LLM_OK)
	{
		llm_model_free(model);
		ereport(ERROR,
				(errcode(LlmStatusErrcode(status)),
				 errmsg("could not start the inference engine for model \"%s\"", path),
				 errdetail_internal("%s", LlmMessageAsSentence(err.msg))));
	}

	WorkerModel = model;
	WorkerEngine = engine;
	info = llm_model_info(model);

	LWLockAcquire(LlmState->lock, LW_EXCLUSIVE);
	LlmState->worker.state = LLM_WORKER_READY;
	strlcpy(LlmState->worker.model_path, path, sizeof(LlmState->worker.model_path));
	LlmState->worker.has_model = true;
	LlmState->worker.model = *info;
	LlmState->worker.n_ctx = llm_engine_n_ctx(engine);
	LlmState->worker.n_threads = config.n_threads;
	LlmState->worker.loaded_at = GetCurrentTimestamp();
	LlmState->worker.error[0] = '\0';
	LWLockRelease(LlmState->lock);

	ereport(LOG,
			(errmsg("llm worker loaded model \"%s\"", path),
			 errdetail("Architecture %s, %lld parameters, %d layers, dimension %d, %d heads (%d KV heads), "
					   "vocabulary %d, context length %d; weights %s%s; %d threads.",
					   info->arch, (long long) info->n_params, info->n_layers, info->dim,
					   info->n_heads, info->n_kv_heads, info->n_vocab, info->n_ctx,
					   info->weight_types,
					   calib != NULL ? psprintf(" with AWQ scales from \"%s\"", s->quantize_calib) : "",
					   config.n_threads)));
	if (calib != NULL)
		pfree(calib);
}

/*
 * Load the model the settings name.  Failure is logged as an error and
 * leaves the worker without a model; it never ends the worker.
 */
static void
LlmWorkerLoad(void)
{
	MemoryContext cxt = CurrentMemoryContext;

	LlmWorkerReadSettings(&WorkerApplied);
	if (WorkerApplied.model[0] == '\0')
	{
		ereport(LOG,
				(errmsg("llm worker has no model to load"),
				 errhint("Set llm.model to a GGUF file in llm.model_dir and reload the configuration.")));
		LlmWorkerSetState(LLM_WORKER_NO_MODEL, "", "llm.model is not set.");
		return;
	}

	LlmWorkerSetState(LLM_WORKER_LOADING,
					  is_absolute_path(WorkerApplied.model) ? WorkerApplied.model
					  : psprintf("%s/%s", WorkerApplied.model_dir, WorkerApplied.model),
					  NULL);
	PG_TRY();
	{
		LlmWorkerOpenModel(&WorkerApplied);
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		char	   *why;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		EmitErrorReport();
		FlushErrorState();

		/* As a detail: the message as a sentence, then the detail. */
		why = psprintf("%s.%s%s", edata->message,
					   edata->detail ? " " : "", edata->detail ? edata->detail : "");
		why[0] = pg_toupper((unsigned char) why[0]);
		LlmWorkerSetState(LLM_WORKER_NO_MODEL, NULL, why);
		FreeErrorData(edata);
	}
	PG_END_TRY();
}

/* Free the engine and the model, if loaded. */
static void
LlmWorkerFreeEngine(void)
{
	if (WorkerEngine)
		llm_engine_free(WorkerEngine);
	if (WorkerModel)
		llm_model_free(WorkerModel);
	WorkerEngine = NULL;
	WorkerModel = NULL;
}

/* Free the engine and the model (the engine must be idle). */
static void
LlmWorkerUnload(void)
{
	LlmWorkerFreeEngine();
	memset(&WorkerLast, 0, sizeof(WorkerLast));
	LlmWorkerSetState(LLM_WORKER_LOADING, NULL, NULL);
}

/*
 * Answer a slot the worker holds (RUNNING): with a result when result is
 * given, else with the error.  A slot its backend cancelled in the meantime
 * is freed instead.  text is copied into the DSA area.
 */
static void
LlmWorkerAnswer(int slotno, const LlmResult *result, int sqlerrcode,
				const char *msg, const char *detail, const char *hint)
{
	LlmSlot    *slot = &LlmState->slots[slotno];
	dsa_area   *area = LlmShmemDsa();
	dsa_pointer text = InvalidDsaPointer;
	dsa_pointer chunks[3];
	int			n_chunks = 0;
	bool		answered = false;

	if (result && result->text_len > 0)
	{
		text = dsa_allocate_extended(area, result->text_len, DSA_ALLOC_HUGE | DSA_ALLOC_NO_OOM);
		if (DsaPointerIsValid(text))
			memcpy(dsa_get_address(area, text), result->text, result->text_len);
		else
		{
			sqlerrcode = ERRCODE_OUT_OF_MEMORY;
			msg = "out of memory";
			detail = psprintf("Failed on request for %zu bytes of shared memory for the completion.",
							  result->text_len);
			hint = NULL;
			result = NULL;
		}
	}

	LWLockAcquire(LlmState->lock, LW_EXCLUSIVE);
	if (slot->state == LLM_SLOT_RUNNING || slot->state == LLM_SLOT_QUEUED)
	{
		if (result)
		{
			slot->result = text;
			slot->result_len = result->text_len;
			slot->prompt_tokens = result->n_prompt;
			slot->completion_tokens = result->n_generated;
			slot->finish_reason = result->reason;
			slot->state = LLM_SLOT_DONE;
			LlmState->counters.requests_completed++;
			LlmState->counters.prompt_tokens += result->n_prompt;
			LlmState->counters.completion_tokens += result->n_generated;
		}
		else
		{
			slot->sqlerrcode = sqlerrcode;
			strlcpy(slot->errmsg, msg, sizeof(slot->errmsg));
			strlcpy(slot->errdetail, detail ? detail : "", sizeof(slot->errdetail));
			strlcpy(slot->errhint, hint ? hint : "", sizeof(slot->errhint));
			slot->state = LLM_SLOT_ERROR;
			LlmState->counters.requests_failed++;
		}
		answered = true;
	}
	else
	{
		/* cancelled meanwhile: free it */
		Assert(slot->state == LLM_SLOT_CANCELLED);
		LlmSlotTakeChunks(slot, chunks, &n_chunks);
		slot->state = LLM_SLOT_FREE;
		LlmState->counters.requests_cancelled++;
	}
	LWLockRelease(LlmState->lock);

	if (!answered && DsaPointerIsValid(text))
		chunks[n_chunks++] = text;
	LlmFreeChunks(chunks, n_chunks);
	if (answered)
		ConditionVariableBroadcast(&slot->cv);
}

/* Take a slot's sequence out of the engine. */
static void
LlmWorkerRelease(int slotno)
{
	LlmWorkerSeq *seq = &WorkerSeqs[slotno];

	if (!seq->active)
		return;
	llm_engine_release(WorkerEngine, seq->engine_id);
	free(seq->tokens);
	seq->tokens = NULL;
	seq->active = false;
}

/*
 * Put a claimed request into the engine: tokenize the prompt, check it
 * fits, add it.  Answers the slot with an error when any of that fails.
 */
static void
LlmWorkerStart(int slotno, const LlmParams *params, dsa_pointer input,
			   Size prompt_len, int n_stop)
{
	dsa_area   *area = LlmShmemDsa();
	const char *bytes = dsa_get_address(area, input);
	const char **stop = NULL;
	LlmRequest	req;
	LlmError	err;
	LlmStatus	status;
	int32	   *tokens = NULL;
	int			n_tokens = 0;
	int			n_ctx;
	int64		id;
	sigset_t	mask;

	if (WorkerEngine == NULL)
	{
		const char *why;

		LWLockAcquire(LlmState->lock, LW_SHARED);
		why = pstrdup(LlmState->worker.error);
		LWLockRelease(LlmState->lock);
		dsa_free(area, input);
		LlmWorkerAnswer(slotno, NULL, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
						"no model is loaded", why,
						"Set llm.model to a GGUF file in llm.model_dir and reload the configuration.");
		return;
	}

	llm_error_clear(&err);
	/*
	 * BOS as the model wants it; with chat, the prompt wrapped as a user
	 * turn.  Control tokens in the user's text stay text.
	 */
	status = llm_chat_tokenize(WorkerModel, bytes, prompt_len, params->chat, &tokens, &n_tokens, &err);
	if (status == LLM_ERR_UNSUPPORTED)
	{
		dsa_free(area, input);
		LlmWorkerAnswer(slotno, NULL, ERRCODE_FEATURE_NOT_SUPPORTED,
						"the model has no chat template", LlmMessageAsSentence(err.msg),
						"Call llm_generate with chat => false, or set llm.chat to off.");
		return;
	}
	if (status != LLM_OK)
	{
		dsa_free(area, input);
		LlmWorkerAnswer(slotno, NULL, LlmStatusErrcode(status),
						"could not tokenize the prompt", LlmMessageAsSentence(err.msg), NULL);
		return;
	}

	/* The same limit as the engine's, with both counts for the user. */
	n_ctx = llm_engine_n_ctx(WorkerEngine);
	if (n_tokens > n_ctx || (n_tokens == n_ctx && params->max_tokens > 0))
	{
		free(tokens);
		dsa_free(area, input);
		LlmWorkerAnswer(slotno, NULL, ERRCODE_PROGRAM_LIMIT_EXCEEDED,
						"prompt is too long",
						psprintf("The prompt has %d tokens; the model's context length is %d.",
								 n_tokens, n_ctx),
						NULL);
		return;
	}

	/* The stop strings follow the prompt, each NUL-terminated. */
	if (n_stop > 0)
	{
		const char *p = bytes + prompt_len;

		stop = palloc(sizeof(char *) * n_stop);
		for (int i = 0; i < n_stop; i++)
		{
			stop[i] = p;
			p += strlen(p) + 1;
		}
	}

	llm_request_default(&req);
	req.prompt = tokens;
	req.n_prompt = n_tokens;
	req.max_tokens = params->max_tokens;
	req.temperature = (float) params->temperature;
	req.top_p = (float) params->top_p;
	req.top_k = params->top_k;
	req.seed = params->seed;
	req.stop = stop;
	req.n_stop = n_stop;

	mask = LlmBlockSignals();
	status = llm_engine_add(WorkerEngine, &req, &id, &err);
	LlmRestoreSignals(&mask);
	dsa_free(area, input);		/* add copied the stop strings */

	if (status != LLM_OK)
	{
		free(tokens);
		LlmWorkerAnswer(slotno, NULL, LlmStatusErrcode(status), err.msg, NULL, NULL);
		return;
	}

	WorkerSeqs[slotno].active = true;
	WorkerSeqs[slotno].engine_id = id;
	WorkerSeqs[slotno].tokens = tokens;
}

/* A request the worker has claimed, with what it needs from the slot. */
typedef struct LlmClaim
{
	int			slotno;
	LlmParams	params;
	dsa_pointer input;
	Size		prompt_len;
	int			n_stop;
} LlmClaim;

/*
 * Step 1 of the loop: free the slots whose backends gave up (dropping their
 * sequences) and claim the queued ones (unless a reload is waiting for the
 * engine to drain).
 */
static void
LlmWorkerScanSlots(void)
{
	int			n_slots = LlmState->n_slots;
	LlmClaim   *claims = palloc(sizeof(LlmClaim) * n_slots);
	int		   *dropped = palloc(sizeof(int) * n_slots);
	dsa_pointer *chunks = palloc(sizeof(dsa_pointer) * 2 * n_slots);
	int			n_claims = 0;
	int			n_dropped = 0;
	int			n_chunks = 0;

	LWLockAcquire(LlmState->lock, LW_EXCLUSIVE);
	for (int i = 0; i < n_slots; i++)
	{
		LlmSlot    *slot = &LlmState->slots[i];

		if (slot->state == LLM_SLOT_CANCELLED)
		{
			dropped[n_dropped++] = i;
			LlmSlotTakeChunks(slot, chunks, &n_chunks);
			slot->state = LLM_SLOT_FREE;
			LlmState->counters.requests_cancelled++;
		}
		else if (slot->state == LLM_SLOT_QUEUED && !WorkerReloadPending)
		{
			LlmClaim   *c = &claims[n_claims++];

			c->slotno = i;
			c->params = slot->params;
			c->input = slot->input;
			c->prompt_len = slot->prompt_len;
			c->n_stop = slot->n_stop;
			slot->input = InvalidDsaPointer;
			slot->state = LLM_SLOT_RUNNING;
		}
	}
	LWLockRelease(LlmState->lock);

	/* Engine calls and DSA frees come after releasing the lock. */
	for (int i = 0; i < n_dropped; i++)
		LlmWorkerRelease(dropped[i]);
	LlmFreeChunks(chunks, n_chunks);
	for (int i = 0; i < n_claims; i++)
		LlmWorkerStart(claims[i].slotno, &claims[i].params, claims[i].input,
					   claims[i].prompt_len, claims[i].n_stop);
}

/* The slot whose sequence has this engine id, or -1. */
static int
LlmWorkerFindSeq(int64 engine_id)
{
	for (int i = 0; i < LlmState->n_slots; i++)
		if (WorkerSeqs[i].active && WorkerSeqs[i].engine_id == engine_id)
			return i;
	return -1;
}

/*
 * Step 2 of the loop: one engine step.  A failed step fails every sequence
 * in the engine.
 */
static void
LlmWorkerStep(void)
{
	LlmError	err;
	LlmStatus	status;
	sigset_t	mask;
	TimestampTz start = GetCurrentTimestamp();

	llm_error_clear(&err);
	mask = LlmBlockSignals();
	status = llm_engine_step(WorkerEngine, &err);
	LlmRestoreSignals(&mask);

	LWLockAcquire(LlmState->lock, LW_EXCLUSIVE);
	LlmState->counters.steps++;
	LlmState->counters.busy_us += GetCurrentTimestamp() - start;
	LWLockRelease(LlmState->lock);

	if (status != LLM_OK)
	{
		ereport(WARNING,
				(errcode(LlmStatusErrcode(status)),
				 errmsg("llm engine step failed: %s", err.msg)));
		for (int i = 0; i < LlmState->n_slots; i++)
		{
			if (!WorkerSeqs[i].active)
				continue;
			LlmWorkerRelease(i);
			LlmWorkerAnswer(i, NULL, LlmStatusErrcode(status), err.msg, NULL, NULL);
		}
	}
}

/*
 * Answer every finished sequence.  Runs after each step and after adding
 * requests (a sequence can finish without a step, e.g. max_tokens = 0).
 */
static void
LlmWorkerCollect(void)
{
	LlmResult	result;

	while (llm_engine_poll(WorkerEngine, &result))
	{
		int			slotno = LlmWorkerFindSeq(result.id);

		if (slotno < 0)
		{
			elog(WARNING, "llm engine finished unknown sequence " INT64_FORMAT, result.id);
			llm_engine_release(WorkerEngine, result.id);
			continue;
		}
		if (result.reason == LLM_FINISH_ERROR)
			LlmWorkerAnswer(slotno, NULL, ERRCODE_INTERNAL_ERROR,
							result.error ? result.error : "generation failed", NULL, NULL);
		else
			LlmWorkerAnswer(slotno, &result, 0, NULL, NULL, NULL);
		LlmWorkerRelease(slotno);	/* after answering: result.text lives until here */
	}
}

/* Publish the engine's gauges and report what the worker is doing. */
static void
LlmWorkerPublish(void)
{
	LlmEngineStats st;
	static int	last_waiting = -1;
	static int	last_running = -1;

	memset(&st, 0, sizeof(st));
	if (WorkerEngine)
		llm_engine_stats(WorkerEngine, &st);

	LWLockAcquire(LlmState->lock, LW_EXCLUSIVE);
	LlmState->counters.engine_waiting = st.n_waiting;
	LlmState->counters.engine_running = st.n_running;
	LlmState->counters.kv_blocks_used = st.kv_blocks_used;
	LlmState->counters.kv_blocks_cached = st.kv_blocks_cached;
	LlmState->counters.kv_blocks_total = st.kv_blocks_total;
	/* The engine's totals restart with each engine: add what is new. */
	if (st.preemptions > WorkerLast.preemptions)
		LlmState->counters.preemptions += st.preemptions - WorkerLast.preemptions;
	if (st.prefix_hit_tokens > WorkerLast.prefix_hit_tokens)
		LlmState->counters.prefix_hit_tokens += st.prefix_hit_tokens - WorkerLast.prefix_hit_tokens;
	if (st.evicted_keys > WorkerLast.evicted_keys)
		LlmState->counters.evicted_keys += st.evicted_keys - WorkerLast.evicted_keys;
	LWLockRelease(LlmState->lock);
	WorkerLast = st;

	if (st.n_waiting != last_waiting || st.n_running != last_running)
	{
		if (st.n_waiting + st.n_running == 0)
			pgstat_report_activity(STATE_IDLE, NULL);
		else
			pgstat_report_activity(STATE_RUNNING,
								   psprintf("generating: %d running, %d waiting",
											st.n_running, st.n_waiting));
		last_waiting = st.n_waiting;
		last_running = st.n_running;
	}
}

/* Re-read the configuration; changed model settings schedule a reload. */
static void
LlmWorkerReloadConfig(void)
{
	LlmModelSettings now;

	ConfigReloadPending = false;
	ProcessConfigFile(PGC_SIGHUP);

	LlmWorkerReadSettings(&now);
	if (WorkerEngine == NULL || memcmp(&now, &WorkerApplied, sizeof(now)) != 0)
		WorkerReloadPending = true;
}

/*
 * before_shmem_exit callback: fail every request not answered yet, free the
 * cancelled ones, and say the worker is gone.
 */
static void
LlmWorkerOnExit(int code, Datum arg)
{
	int			n_slots = LlmState->n_slots;
	bool	   *wake = palloc0(sizeof(bool) * n_slots);
	dsa_pointer *chunks = palloc(sizeof(dsa_pointer) * 2 * n_slots);
	int			n_chunks = 0;
	int			sqlerrcode = ProcDiePending ? ERRCODE_ADMIN_SHUTDOWN : ERRCODE_INTERNAL_ERROR;

	LWLockAcquire(LlmState->lock, LW_EXCLUSIVE);
	for (int i = 0; i < n_slots; i++)
	{
		LlmSlot    *slot = &LlmState->slots[i];

		if (slot->state == LLM_SLOT_QUEUED || slot->state == LLM_SLOT_RUNNING)
		{
			slot->sqlerrcode = sqlerrcode;
			strlcpy(slot->errmsg, "llm background worker exited", sizeof(slot->errmsg));
			strlcpy(slot->errdetail, "The request was not finished.", sizeof(slot->errdetail));
			slot->errhint[0] = '\0';
			slot->state = LLM_SLOT_ERROR;
			LlmState->counters.requests_failed++;
			wake[i] = true;
		}
		else if (slot->state == LLM_SLOT_CANCELLED)
		{
			LlmSlotTakeChunks(slot, chunks, &n_chunks);
			slot->state = LLM_SLOT_FREE;
			LlmState->counters.requests_cancelled++;
		}
	}
	LlmState->worker.pid = 0;
	LlmState->worker.state = LLM_WORKER_STOPPED;
	LlmState->worker.has_model = false;
	LlmState->counters.engine_waiting = 0;
	LlmState->counters.engine_running = 0;
	LlmState->counters.kv_blocks_used = 0;
	LlmState->counters.kv_blocks_cached = 0;
	LWLockRelease(LlmState->lock);

	LlmFreeChunks(chunks, n_chunks);
	for (int i = 0; i < n_slots; i++)
		if (wake[i])
			ConditionVariableBroadcast(&LlmState->slots[i].cv);

	LlmWorkerFreeEngine();
}

/* Main entry point of the background worker. */
void
LlmWorkerMain(Datum main_arg)
{
	MemoryContext iteration_cxt;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/* No database: only for pg_stat_activity and the wait events. */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("llm worker");

	WorkerSeqs = MemoryContextAllocZero(TopMemoryContext,
										sizeof(LlmWorkerSeq) * LlmState->n_slots);
	(void) LlmShmemDsa();

	LWLockAcquire(LlmState->lock, LW_EXCLUSIVE);
	LlmState->worker.pid = MyProcPid;
	LlmState->worker.pgprocno = MyProc->pgprocno;
	LlmState->worker.state = LLM_WORKER_STARTING;
	LlmState->worker.started_at = GetCurrentTimestamp();
	LlmState->worker.has_model = false;
	LWLockRelease(LlmState->lock);
	before_shmem_exit(LlmWorkerOnExit, 0);

	iteration_cxt = AllocSetContextCreate(TopMemoryContext,
										  "llm worker iteration",
										  ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(iteration_cxt);

	LlmWorkerLoad();

	for (;;)
	{
		bool		busy;

		MemoryContextReset(iteration_cxt);
		CHECK_FOR_INTERRUPTS();

		if (ConfigReloadPending)
			LlmWorkerReloadConfig();

		/* A reload waits until the sequences in the engine have finished. */
		if (WorkerReloadPending && (WorkerEngine == NULL || !llm_engine_busy(WorkerEngine)))
		{
			WorkerReloadPending = false;
			LlmWorkerUnload();
			LlmWorkerLoad();
		}

		LlmWorkerScanSlots();

		busy = WorkerEngine != NULL && llm_engine_busy(WorkerEngine);
		if (busy)
			LlmWorkerStep();
		if (WorkerEngine != NULL)
			LlmWorkerCollect();
		LlmWorkerPublish();

		/* Sleep only when idle; when busy just look at the latch and the postmaster. */
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_EXIT_ON_PM_DEATH | (busy ? WL_TIMEOUT : 0),
						 busy ? llm_debug_step_delay : -1L,
						 LLM_WAIT_EVENT_WORKER);
		ResetLatch(MyLatch);
	}
}
