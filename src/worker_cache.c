/*
 * worker_cache.c
 *		The worker's answer cache: finished answers given again, without an
 *		engine step, to any request with the same key.
 *
 * The cache itself (a table bounded by llm.cache_mb, least recently used
 * entries dropped first, and its file format) is the engine's
 * (answer_cache.c); this file decides what may be cached, keys it by role,
 * and keeps it in the file llm_answer_cache of the data directory (the
 * N-th worker of llm.devices: llm_answer_cache.N).
 *
 * The key (llm_answer_key) holds the model's identity (through the file),
 * the prompt's tokens, every generation parameter and, when sampling, the
 * seed, and the request's partition: its role, or one shared by all roles
 * with llm.cache_shared.  A hit reveals by its speed that the same request
 * was made before, so by default each role sees only its own.
 *
 * The model's identity (LlmAnswerCacheModelLoaded, from worker_model.c) is
 * a hash of the model file's whole content, mixed with the settings that
 * change the numbers the engine computes (llm.quantize and its calibration
 * text, llm.kv_type, llm.kv_budget and its eviction settings, the context
 * length and the device).  Another identity clears the cache.  Nothing is
 * cached where answers depend on how requests are batched (a GPU without
 * llm.deterministic), nor for sampling with a random seed (never asked
 * again), nor failed or cancelled requests.
 *
 * The file is written whole to llm_answer_cache.tmp, fsynced and renamed
 * over the old one (durable_rename): at the worker's exit, and when it has
 * changed, at most every LLM_ANSWER_CACHE_SAVE_S seconds while the worker
 * is idle, or every LLM_ANSWER_CACHE_BUSY_SAVE_S seconds while it is busy
 * (a write holds up the steps for as long as it takes).  A crash may lose
 * the answers since the last write, never damage the file that is read.
 * Reading it at the first model load checks everything (checksums,
 * version, identity) before serving any of it; a damaged file is
 * discarded with a warning.
 *
 * Only the worker process uses this file's state: no locking.  The gauges
 * it reports go to shared memory under LlmState->lock (worker.c).
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "miscadmin.h"
#include "storage/fd.h"

#include "llm.h"

#define LLM_ANSWER_CACHE_SAVE_S 60
#define LLM_ANSWER_CACHE_BUSY_SAVE_S 600

static LlmAnswerCache *Cache = NULL;	/* NULL: llm.cache_mb is 0, or out of memory */
static uint64 CacheIdentity = 0;	/* of the model loaded; 0: none yet */
static bool CacheUsable = false;	/* the loaded engine's answers are batch-invariant */
static bool CacheFileRead = false;	/* the file was read (or found missing) once */
static TimestampTz CacheSavedAt = 0;

/* This worker's cache file in the data directory: "llm_answer_cache", then ".N" for the N-th worker of llm.devices. */
static const char *
LlmAnswerCacheFile(void)
{
	static char name[64];

	if (LlmMyWorker == 0)
		return "llm_answer_cache";
	snprintf(name, sizeof(name), "llm_answer_cache.%d", LlmMyWorker);
	return name;
}

/* The file it is written to before it replaces LlmAnswerCacheFile(). */
static const char *
LlmAnswerCacheTmp(void)
{
	static char name[64];

	snprintf(name, sizeof(name), "%s.tmp", LlmAnswerCacheFile());
	return name;
}

static void LlmAnswerCacheReadFile(void);

/* Apply llm.cache_mb (at start and after each reload of the configuration): create, resize or drop the cache. */
void
LlmAnswerCacheConfigure(void)
{
	size_t		max_bytes = (size_t) llm_cache_mb * 1024 * 1024;

	if (llm_cache_mb == 0)
	{
		if (Cache != NULL || !CacheFileRead)
		{
			/* off: forget the answers, in memory and on disk */
			llm_answer_cache_free(Cache);
			Cache = NULL;
			if (unlink(LlmAnswerCacheFile()) != 0 && errno != ENOENT)
				ereport(LOG,
						(errcode_for_file_access(),
						 errmsg("could not remove file \"%s\": %m", LlmAnswerCacheFile())));
		}
		CacheFileRead = true;	/* nothing left to read */
		return;
	}
	if (Cache != NULL)
	{
		llm_answer_cache_set_limit(Cache, max_bytes);
		return;
	}
	Cache = llm_answer_cache_new(max_bytes);
	if (Cache == NULL)
	{
		ereport(LOG,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory creating the answer cache"),
				 errdetail("Answers are computed each time.")));
		return;
	}
	CacheFileRead = false;		/* the file may hold answers: read at the model's load, or now */
	if (CacheIdentity != 0)
		LlmAnswerCacheReadFile();
}

/*
 * Read (write false) or write len bytes of buf from or to fd, in as many
 * calls as it takes (one call moves at most about 2 GB); the bytes moved,
 * or -1 with errno set.
 */
static ssize_t
LlmCacheFileIO(int fd, void *buf, size_t len, bool write_it)
{
	size_t		done = 0;

	while (done < len)
	{
		ssize_t		n = write_it ? write(fd, (char *) buf + done, len - done) : read(fd, (char *) buf + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		done += n;
	}
	return (ssize_t) done;
}

/* Take the answers of the file, if any, for the model of CacheIdentity; a damaged file is removed. */
static void
LlmAnswerCacheReadFile(void)
{
	struct stat st;
	int			fd;
	uint8	   *buf;
	ssize_t		got;
	LlmError	err;
	LlmStatus	status;

	CacheFileRead = true;
	if (stat(LlmAnswerCacheFile(), &st) != 0)
	{
		if (errno != ENOENT)
			ereport(LOG,
					(errcode_for_file_access(),
					 errmsg("could not stat file \"%s\": %m", LlmAnswerCacheFile())));
		return;
	}
	buf = malloc(Max(st.st_size, 1));
	if (buf == NULL)
	{
		ereport(LOG,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory reading the answer cache file \"%s\"", LlmAnswerCacheFile())));
		return;
	}
	fd = OpenTransientFile(LlmAnswerCacheFile(), O_RDONLY | PG_BINARY);
	if (fd < 0)
	{
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("could not open file \"%s\": %m", LlmAnswerCacheFile())));
		free(buf);
		return;
	}
	got = LlmCacheFileIO(fd, buf, st.st_size, false);
	CloseTransientFile(fd);
	if (got != st.st_size)
	{
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("could not read file \"%s\": read %zd of %lld bytes",
						LlmAnswerCacheFile(), got, (long long) st.st_size)));
		free(buf);
		return;
	}

	llm_error_clear(&err);
	status = llm_answer_cache_load(Cache, CacheIdentity, buf, (size_t) got, &err);
	free(buf);
	if (status == LLM_OK)
		ereport(LOG,
				(errmsg("llm worker read %zu cached answers from \"%s\"",
						llm_answer_cache_count(Cache), LlmAnswerCacheFile())));
	else if (status == LLM_ERR_NOT_FOUND)
		ereport(LOG,
				(errmsg("llm worker discarded the answer cache file \"%s\"", LlmAnswerCacheFile()),
				 errdetail("Its answers are of another model or other model settings.")));
	else
		ereport(WARNING,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("answer cache file \"%s\" is invalid and was discarded", LlmAnswerCacheFile()),
				 errdetail("%s", LlmMessageAsSentence(err.msg))));
	if (status != LLM_OK)
	{
		llm_answer_cache_clear(Cache);
		if (unlink(LlmAnswerCacheFile()) != 0 && errno != ENOENT)
			ereport(LOG,
					(errcode_for_file_access(),
					 errmsg("could not remove file \"%s\": %m", LlmAnswerCacheFile())));
	}
}

/*
 * A model was loaded, whose identity (file content and settings, see the
 * top of this file) is given, on an engine whose answers are
 * batch-invariant or not: keep the answers of the same identity, drop the
 * others, and read the file the first time.
 */
void
LlmAnswerCacheModelLoaded(uint64 identity, bool batch_invariant)
{
	if (Cache != NULL && CacheIdentity != 0 && identity != CacheIdentity)
		llm_answer_cache_clear(Cache);	/* another model: its answers go, the file follows at the next save */
	CacheIdentity = identity;
	CacheUsable = batch_invariant;
	if (Cache != NULL && !CacheFileRead && identity != 0)
		LlmAnswerCacheReadFile();
}

/* The partition of a role's answers: the role, or 0 (all roles) with llm.cache_shared. */
static uint64
LlmAnswerCachePartition(Oid roleid)
{
	return llm_cache_shared ? 0 : ((uint64) roleid << 32) | 0x616e73;
}

/*
 * Look up the request req (built from claimed) in the cache.  A request that
 * may be cached gets its key (*key, malloc'd, *key_len bytes; the caller
 * frees it) to store its answer under; else *key is NULL.  Returns true on a
 * hit, with *out the result the request had (its text and logprobs valid
 * until the cache next changes).
 */
bool
LlmAnswerCacheLookup(const LlmRequest *req, const LlmClaimed *claimed, LlmResult *out,
					 uint8_t **key, size_t *key_len)
{
	LlmError	err;
	LlmAnswer	a;

	*key = NULL;
	*key_len = 0;
	if (Cache == NULL || !CacheUsable || CacheIdentity == 0)
		return false;
	if (req->temperature > 0.0f && claimed->params.random_seed)
		return false;
	if (llm_answer_key(req, LlmAnswerCachePartition(claimed->roleid), key, key_len, &err) != LLM_OK)
		return false;			/* out of memory: computed as if not cached */
	if (!llm_answer_cache_get(Cache, *key, *key_len, &a))
		return false;
	memset(out, 0, sizeof(*out));
	out->status = LLM_OK;
	out->reason = a.reason;
	out->n_prompt = a.n_prompt;
	out->n_generated = a.n_generated;
	out->text = a.text;
	out->text_len = a.text_len;
	out->logprobs = a.logprobs;
	return true;
}

/* Keep a finished request's answer under its key (from LlmAnswerCacheLookup). */
void
LlmAnswerCacheStore(const uint8_t *key, size_t key_len, const LlmResult *result)
{
	LlmAnswer	a;

	if (Cache == NULL || key == NULL || result->status != LLM_OK ||
		(result->reason != LLM_FINISH_STOP && result->reason != LLM_FINISH_LENGTH))
		return;
	a.reason = result->reason;
	a.n_prompt = result->n_prompt;
	a.n_generated = result->n_generated;
	a.text = result->text;
	a.text_len = result->text_len;
	a.logprobs = result->logprobs;
	(void) llm_answer_cache_put(Cache, key, key_len, &a);
}

/*
 * Write the cache to its file when it changed: with force (at exit), else
 * at most every LLM_ANSWER_CACHE_SAVE_S seconds, or every
 * LLM_ANSWER_CACHE_BUSY_SAVE_S while busy.  Failures are logged; the old
 * file stays whole.
 */
void
LlmAnswerCacheSave(bool force, bool busy)
{
	TimestampTz now = GetCurrentTimestamp();
	uint8_t    *buf;
	size_t		len;
	LlmError	err;
	int			fd;

	if (Cache == NULL || CacheIdentity == 0 || !CacheFileRead || !llm_answer_cache_dirty(Cache))
		return;
	if (!force && !TimestampDifferenceExceeds(CacheSavedAt, now,
											  (busy ? LLM_ANSWER_CACHE_BUSY_SAVE_S : LLM_ANSWER_CACHE_SAVE_S) * 1000))
		return;
	CacheSavedAt = now;
	if (llm_answer_cache_serialize(Cache, CacheIdentity, &buf, &len, &err) != LLM_OK)
	{
		ereport(LOG,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("could not write the answer cache file \"%s\"", LlmAnswerCacheFile()),
				 errdetail("%s", LlmMessageAsSentence(err.msg))));
		return;
	}
	fd = OpenTransientFile(LlmAnswerCacheTmp(), O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY);
	if (fd < 0 || LlmCacheFileIO(fd, buf, len, true) != (ssize_t) len || pg_fsync(fd) != 0)
	{
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", LlmAnswerCacheTmp())));
		if (fd >= 0)
			CloseTransientFile(fd);
		free(buf);
		unlink(LlmAnswerCacheTmp());
		return;
	}
	free(buf);
	if (CloseTransientFile(fd) != 0)
	{
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("could not close file \"%s\": %m", LlmAnswerCacheTmp())));
		unlink(LlmAnswerCacheTmp());
		return;
	}
	(void) durable_rename(LlmAnswerCacheTmp(), LlmAnswerCacheFile(), LOG);
}

/* The cache's entries and bytes, for llm_stats. */
void
LlmAnswerCacheGauges(int64 *entries, int64 *bytes)
{
	*entries = Cache ? (int64) llm_answer_cache_count(Cache) : 0;
	*bytes = Cache ? (int64) llm_answer_cache_bytes(Cache) : 0;
}
