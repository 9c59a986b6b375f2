/*
 * worker_model.c
 *		The model's life in the background worker: the settings it was
 *		loaded with, the model file's path inside llm.model_dir, the AWQ
 *		calibration text, loading the model and its engine, and unloading.
 *
 * The worker (worker.c) loads at start and, after a SIGHUP that changed
 * any of the settings below, once the engine has drained.  A model that is
 * missing, outside the directory or invalid is logged as an error: when
 * a model was loaded, that one keeps serving (the new one is loaded before
 * the old is freed) and the worker's entry in LlmState->workers (its
 * error) says why the settings were not applied; otherwise the worker
 * stays without one (LlmWorkerModel and LlmWorkerEngine NULL, state
 * NO_MODEL with the reason).  A bad setting
 * must neither take service down nor become a crash loop.
 *
 * Only the worker process runs this code, and every engine call that may
 * start compute threads runs with all signals blocked (LlmBlockSignals), so
 * the threads, which inherit the mask, never run PostgreSQL's handlers.
 * LlmState->lock is taken only to publish the worker's state (shmem.c).
 */
#include "postgres.h"

#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "utils/memutils.h"

#include "llm.h"

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
	int			speculative;
	int			speculative_max_draft;
	char		draft_model[MAXPGPATH];	/* llm.speculative = draft: its file */
	int			device;
	int			device_index;	/* llm.devices: the GPU's number */
	bool		deterministic;
	bool		gpu_fusion;
	bool		gpu_pdl;
	int			quantize;
	char		quantize_calib[MAXPGPATH];	/* AWQ calibration text; "" = none or quantize none */
} LlmModelSettings;

LlmModel   *LlmWorkerModel = NULL;
static LlmModel *LlmWorkerDraft = NULL; /* llm.draft_model, when llm.speculative = draft */
LlmEngine  *LlmWorkerEngine = NULL;
static LlmModelSettings WorkerApplied;	/* the settings of the last load */

/* Block every signal, returning the old mask (see the header comment of worker.c). */
sigset_t
LlmBlockSignals(void)
{
	sigset_t	all;
	sigset_t	old;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	return old;
}

/* Restore the mask LlmBlockSignals() returned. */
void
LlmRestoreSignals(sigset_t *old)
{
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

/* The SQLSTATE for an engine status. */
int
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
char *
LlmMessageAsSentence(const char *msg)
{
	char	   *s = psprintf("%s.", msg);

	if (s[0] >= 'a' && s[0] <= 'z')
		s[0] += 'A' - 'a';
	return s;
}

/* The last component of path: a model's file name, which anyone sees (SHOW llm.model, llm_worker_status()'s model). */
static const char *
LlmFileName(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash != NULL ? slash + 1 : path;
}

/*
 * Record the worker's state for llm_worker_status(), and why there is no
 * model: error, and error_public, the same without paths or system error
 * texts, for roles that may not see those (LlmMaySeePaths).
 */
static void
LlmWorkerSetState(LlmWorkerState state, const char *path, const char *error, const char *error_public)
{
	LlmWorkerInfo *w = LlmWorkerSelf();

	LWLockAcquire(LlmState->lock, LW_EXCLUSIVE);
	w->state = state;
	if (path)
		strlcpy(w->model_path, path, sizeof(w->model_path));
	strlcpy(w->error, error ? error : "", sizeof(w->error));
	/* an error never goes without its public version */
	if (error != NULL && error[0] != '\0' && (error_public == NULL || error_public[0] == '\0'))
		error_public = "The settings could not be applied (members of pg_read_all_settings see why).";
	strlcpy(w->error_public, error_public ? error_public : "",
			sizeof(w->error_public));
	if (state != LLM_WORKER_READY)
		w->has_model = false;
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
	s->speculative = llm_speculative;
	s->speculative_max_draft = llm_speculative_max_draft;
	if (s->speculative == LLM_SPEC_DRAFT)
		strlcpy(s->draft_model, llm_draft_model ? llm_draft_model : "", sizeof(s->draft_model));
	{
		/* this worker's entry of llm.devices (llm.device when it is empty), and its share of the threads */
		LlmDeviceSpec spec = LlmDeviceOf(LlmMyWorker, llm_threads, (int) sysconf(_SC_NPROCESSORS_ONLN));

		s->device = spec.device;
		s->device_index = spec.index;
		if (spec.threads > 0)
			s->threads = spec.threads;
	}
	s->deterministic = llm_deterministic;
	s->gpu_fusion = llm_gpu_fusion;
	s->gpu_pdl = llm_gpu_pdl;
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
	fd = open(path, O_RDONLY | O_NONBLOCK | PG_BINARY, 0);	/* never block on a FIFO swapped in */
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
 * The real path of file name (what it is, for messages: "model file"),
 * relative to llm.model_dir unless absolute; errors out when it does not
 * exist or lies outside llm.model_dir.
 */
static char *
LlmWorkerPathInDir(const LlmModelSettings *s, const char *name, const char *what)
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

	if (is_absolute_path(name))
		joined = pstrdup(name);
	else
		joined = psprintf("%s/%s", s->model_dir, name);

	path = realpath(joined, NULL);
	if (path == NULL)
	{
		free(dir);
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not access %s \"%s\": %m", what, joined)));
	}

	/* inside dir: dir itself as a prefix, then a '/' (dir "/" ends with one) */
	dirlen = strlen(dir);
	if (strncmp(path, dir, dirlen) != 0 || (path[dirlen] != '/' && dir[dirlen - 1] != '/'))
	{
		char	   *p = pstrdup(path);
		char	   *d = pstrdup(dir);

		free(path);
		free(dir);
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("%s \"%s\" is outside llm.model_dir", what, p),
				 errdetail("llm.model_dir is \"%s\".", d)));
	}

	joined = pstrdup(path);
	free(path);
	free(dir);
	return joined;
}

/* The real path of the model file named by the settings, inside llm.model_dir. */
static char *
LlmWorkerModelPath(const LlmModelSettings *s)
{
	return LlmWorkerPathInDir(s, s->model, "model file");
}

/*
 * The engine configuration for settings s, with n_threads threads, for a
 * model of context length model_n_ctx.
 */
static void
LlmWorkerMakeConfig(const LlmModelSettings *s, int n_threads, int model_n_ctx, LlmEngineConfig *config)
{
	llm_engine_config_default(config);
	config->n_threads = n_threads;
	config->max_batch_tokens = s->max_batch_tokens;
	config->step_time_ms = s->step_time_ms;
	config->max_seqs = s->max_sequences + LlmFairHeadroom(s->max_sequences);	/* fair.c */
	config->kv_type = (LlmKvType) s->kv_type;
	config->speculative = (LlmSpeculative) s->speculative;
	config->spec_max_draft = s->speculative_max_draft;
	config->kv_block_size = s->kv_block_size;
	config->kv_cache_bytes = (size_t) s->kv_cache_mb * 1024 * 1024;
	config->device = (LlmDevice) s->device;
	config->device_index = s->device_index;
	/* the CUDA backend is a module beside llm.so, loaded only by this process */
	config->cuda_module = psprintf("%s/llm_cuda.so", pkglib_path);
	config->deterministic = s->deterministic;
	config->gpu_fusion = s->gpu_fusion;
	config->gpu_pdl = s->gpu_pdl;
	config->kv_sink_tokens = s->kv_sink_tokens;
	config->evict_policy = (LlmEvictPolicy) s->kv_evict;
	/* below 1: a fraction of the context (the model's, as the engine limits it) */
	config->kv_budget = s->kv_budget >= 1.0 ? (int) Min(s->kv_budget, INT_MAX) :
		(int) ceil(s->kv_budget * model_n_ctx);
}

/*
 * Load llm.draft_model for llm.speculative = draft (target, loaded, is
 * freed when this errors out): a file in llm.model_dir.
 */
static LlmModel *
LlmWorkerOpenDraft(const LlmModelSettings *s, LlmModel *target)
{
	LlmModel   *draft = NULL;
	LlmError	err;
	LlmStatus	status;
	sigset_t	mask;
	char	   *path;

	if (s->draft_model[0] == '\0')
	{
		llm_model_free(target);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("llm.speculative = draft needs llm.draft_model"),
				 errhint("Set llm.draft_model to a GGUF file in llm.model_dir with the model's vocabulary, "
						 "or set llm.speculative to ngram or off.")));
	}
	PG_TRY();
	{
		path = LlmWorkerPathInDir(s, s->draft_model, "draft model file");
	}
	PG_CATCH();
	{
		llm_model_free(target);
		PG_RE_THROW();
	}
	PG_END_TRY();
	mask = LlmBlockSignals();
	status = llm_model_load(path, &draft, &err);
	LlmRestoreSignals(&mask);
	if (status != LLM_OK)
	{
		llm_model_free(target);
		ereport(ERROR,
				(errcode(LlmStatusErrcode(status)),
				 errmsg("could not load draft model file \"%s\"", path),
				 errdetail_internal("%s", LlmMessageAsSentence(err.msg))));
	}
	return draft;
}

/*
 * The identity of the answers of a model file (path) loaded with settings
 * s into engine (config): a hash of the file's whole content (read once
 * here; the model is mapped, so the pages are mostly cached already) mixed
 * with the settings that change what the engine computes (see
 * worker_cache.c); 0 when the file cannot be read again.
 */
static uint64
LlmWorkerModelIdentity(const char *path, const LlmModelSettings *s, const LlmEngineConfig *config,
					   LlmEngine *engine, const char *calib, size_t calib_len)
{
	struct
	{
		uint64		file;
		uint64		calib;
		int32		quantize;
		int32		kv_type;
		int32		kv_budget;
		int32		kv_sink_tokens;
		int32		evict_policy;
		int32		n_ctx;
		int32		deterministic;
		char		device[128];
	}			id;
	LlmError	err;

	memset(&id, 0, sizeof(id));
	if (llm_file_hash(path, &id.file, &err) != LLM_OK)
	{
		ereport(LOG,
				(errmsg("llm worker caches no answers of model \"%s\"", path),
				 errdetail_internal("%s", LlmMessageAsSentence(err.msg))));
		return 0;
	}
	id.calib = calib ? llm_hash64(calib, calib_len, 1) : 0;
	id.quantize = s->quantize;
	id.kv_type = config->kv_type;
	id.kv_budget = config->kv_budget;
	id.kv_sink_tokens = config->kv_budget > 0 ? config->kv_sink_tokens : 0;
	id.evict_policy = config->kv_budget > 0 ? config->evict_policy : 0;
	id.n_ctx = llm_engine_n_ctx(engine);
	id.deterministic = config->deterministic;
	strlcpy(id.device, llm_engine_device(engine), sizeof(id.device));
	return Max(llm_hash64(&id, sizeof(id), 2), 1);	/* never 0, which means none */
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
	uint64		identity;
	int			n_threads;
	LlmModel   *draft = NULL;
	LlmWorkerInfo *w;

	path = LlmWorkerModelPath(s);

	n_threads = s->threads > 0 ? s->threads : Min(Max(1, (int) sysconf(_SC_NPROCESSORS_ONLN)), 1024);
	if (s->quantize_calib[0] != '\0')	/* confined to llm.model_dir, as the model is */
		calib = LlmWorkerReadCalib(LlmWorkerPathInDir(s, s->quantize_calib, "calibration text file"), &calib_len);

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

	LlmWorkerMakeConfig(s, n_threads, llm_model_info(model)->n_ctx, &config);
	if (s->speculative == LLM_SPEC_DRAFT)
		config.draft_model = draft = LlmWorkerOpenDraft(s, model);

	mask = LlmBlockSignals();
	status = llm_engine_new(model, &config, &engine, &err);
	LlmRestoreSignals(&mask);
	if (status != LLM_OK)
	{
		llm_model_free(model);
		llm_model_free(draft);
		ereport(ERROR,
				(errcode(LlmStatusErrcode(status)),
				 errmsg("could not start the inference engine for model \"%s\"", path),
				 errdetail_internal("%s", LlmMessageAsSentence(err.msg)),
				 config.device == LLM_DEVICE_CUDA && status == LLM_ERR_UNSUPPORTED ?
				 errhint("Install llm_cuda.so beside llm.so (llm built where nvcc is found) on a machine with a GPU "
						 "and its driver, or set llm.device to auto or cpu.") : 0));
	}

	/* the answers of this model and these settings (worker_cache.c); the CPU's always batch-invariant */
	identity = LlmWorkerModelIdentity(path, s, &config, engine, calib, calib_len);
	LlmAnswerCacheModelLoaded(identity, strncmp(llm_engine_device(engine), "cpu", 3) == 0 || config.deterministic);

	/* the new model works: only now let the old one go */
	LlmWorkerFreeEngine();
	LlmWorkerModel = model;
	LlmWorkerDraft = draft;
	LlmWorkerEngine = engine;
	info = llm_model_info(model);

	w = LlmWorkerSelf();
	LWLockAcquire(LlmState->lock, LW_EXCLUSIVE);
	w->state = LLM_WORKER_READY;
	strlcpy(w->model_path, path, sizeof(w->model_path));
	w->has_model = true;
	w->chat_template = llm_model_has_chat_template(model);
	w->model = *info;
	w->n_ctx = llm_engine_n_ctx(engine);
	w->identity = identity;
	w->n_threads = config.n_threads;
	strlcpy(w->device, llm_engine_device(engine), sizeof(w->device));
	strlcpy(w->device_note, llm_engine_device_note(engine), sizeof(w->device_note));
	w->loaded_at = GetCurrentTimestamp();
	w->error[0] = '\0';
	w->error_public[0] = '\0';
	LWLockRelease(LlmState->lock);

	ereport(LOG,
			(errmsg("llm worker loaded model \"%s\"", path),
			 errdetail("Architecture %s, %lld parameters, %d layers, dimension %d, %d heads (%d KV heads), "
					   "vocabulary %d, context length %d; weights %s%s; %d threads on %s%s%s.",
					   info->arch, (long long) info->n_params, info->n_layers, info->dim,
					   info->n_heads, info->n_kv_heads, info->n_vocab, info->n_ctx,
					   info->weight_types,
					   calib != NULL ? psprintf(" with AWQ scales from \"%s\"", s->quantize_calib) : "",
					   config.n_threads, llm_engine_device(engine),
					   llm_engine_device_note(engine)[0] != '\0' ? ": " : "", llm_engine_device_note(engine))));
	if (calib != NULL)
		pfree(calib);
}

/*
 * Load the model the settings name, in place of the one loaded (the engine
 * must be idle).  The old one is freed only once the new one works: a
 * failure is logged as an error and, when a model was loaded, leaves it
 * serving (its settings stay the applied ones, so the next reload tries
 * again), else leaves the worker without a model; it never ends the
 * worker.  Returns whether a new engine now serves.
 */
bool
LlmWorkerLoad(void)
{
	MemoryContext cxt = CurrentMemoryContext;
	LlmModelSettings serving = WorkerApplied;
	bool		had_model = LlmWorkerEngine != NULL;
	char	   *serving_path = pstrdup(LlmWorkerSelf()->model_path);
	bool		loaded = false;

	LlmWorkerReadSettings(&WorkerApplied);
	if (WorkerApplied.model[0] == '\0')
	{
		ereport(LOG,
				(errmsg("llm worker has no model to load"),
				 errhint("Set llm.model to a GGUF file in llm.model_dir and reload the configuration.")));
		LlmWorkerFreeEngine();
		LlmWorkerSetState(LLM_WORKER_NO_MODEL, "", "llm.model is not set.", "llm.model is not set.");
		return had_model;
	}

	if (!had_model)
		LlmWorkerSetState(LLM_WORKER_LOADING,
						  is_absolute_path(WorkerApplied.model) ? WorkerApplied.model
						  : psprintf("%s/%s", WorkerApplied.model_dir, WorkerApplied.model),
						  NULL, NULL);
	PG_TRY();
	{
		LlmWorkerOpenModel(&WorkerApplied);
		loaded = true;
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
		if (had_model)
		{
			/* keep serving the model that works, and say so */
			WorkerApplied = serving;
			LlmWorkerSetState(LLM_WORKER_READY, serving_path,
							  psprintf("The new settings were not applied: %s Still serving \"%s\".", why, serving_path),
							  psprintf("The new settings were not applied (members of pg_read_all_settings see why). "
									   "Still serving \"%s\".", LlmFileName(serving_path)));
			ereport(LOG,
					(errmsg("llm worker keeps serving model \"%s\"", serving_path)));
		}
		else
			LlmWorkerSetState(LLM_WORKER_NO_MODEL, NULL, why,
							  psprintf("Model file \"%s\" could not be loaded (members of pg_read_all_settings see why).",
									   LlmFileName(WorkerApplied.model)));
		FreeErrorData(edata);
	}
	PG_END_TRY();
	return loaded;
}

/* How many sequences the worker runs at once in the loaded engine (llm.max_sequences when it was loaded). */
int
LlmWorkerEngineSeqs(void)
{
	return WorkerApplied.max_sequences;
}

/* Free the engine and the model, if loaded. */
void
LlmWorkerFreeEngine(void)
{
	if (LlmWorkerEngine)
		llm_engine_free(LlmWorkerEngine);
	if (LlmWorkerModel)
		llm_model_free(LlmWorkerModel);
	llm_model_free(LlmWorkerDraft);
	LlmWorkerEngine = NULL;
	LlmWorkerModel = NULL;
	LlmWorkerDraft = NULL;
}

/*
 * The settings name the serving model again (say, ALTER SYSTEM RESET after
 * a reload to a missing file): the failed reload's message goes.
 */
void
LlmWorkerForgetFailedReload(void)
{
	if (LlmWorkerEngine != NULL)
		LlmWorkerSetState(LLM_WORKER_READY, NULL, NULL, NULL);
}

/*
 * Whether the worker should load the model anew: none is loaded, or the
 * settings (just re-read from the configuration) differ from those of the
 * last load.
 */
bool
LlmWorkerModelStale(void)
{
	LlmModelSettings now;

	LlmWorkerReadSettings(&now);
	return LlmWorkerEngine == NULL || memcmp(&now, &WorkerApplied, sizeof(now)) != 0;
}
