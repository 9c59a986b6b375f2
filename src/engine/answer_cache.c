/*
 * answer_cache.c
 *		The answer cache: finished answers by key, bounded in bytes with
 *		least-recently-used eviction, and its checked file format.
 *
 * A chained hash table finds an entry by its key's hash (then the key's
 * bytes, compared whole: a hash collision never serves another answer); a
 * doubly linked list orders the entries from least to most recently used.
 * Each entry is one allocation: its header, the logprobs, the key and the
 * text.  The bytes counted against the limit are the allocation plus the
 * table's pointer for it.
 *
 * File layout (native byte order, checked by a marker):
 *   header:  "LLMANSWR" | u32 version | u32 0x01020304 | u64 identity |
 *            u64 entries | u64 payload length | u64 payload hash |
 *            u64 hash of the header's bytes before it
 *   entry:   u64 hash of the rest of the entry | u32 key length |
 *            u32 finish reason | i32 prompt tokens | i32 generated tokens |
 *            u32 has logprobs | u32 0 | u64 text length | key | text |
 *            logprobs (float, one per generated token)
 * Entries run from least to most recently used, so loading them in order
 * rebuilds the same recency.  See engine.h for the interface.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"

#define ANSWER_MAGIC "LLMANSWR"
#define ANSWER_VERSION 1
#define ANSWER_BYTE_ORDER 0x01020304u
#define ANSWER_HEADER_LEN 56
#define ANSWER_ENTRY_HEAD 40
#define ANSWER_KEY_VERSION 1	/* the key's layout (llm_answer_key), its first field */

typedef struct AnswerEntry
{
	struct AnswerEntry *chain;	/* next in its bucket */
	struct AnswerEntry *older;	/* recency list: towards the least recently used */
	struct AnswerEntry *newer;
	uint64_t	hash;			/* of the key */
	size_t		bytes;			/* counted against the limit */
	size_t		key_len;
	size_t		text_len;
	int			n_prompt;
	int			n_generated;
	LlmFinishReason reason;
	bool		has_logprobs;
	/* (n_generated floats if has_logprobs) logprobs, (key_len) key, (text_len + 1) text */
	_Alignas(8) unsigned char data[];
} AnswerEntry;

struct LlmAnswerCache
{
	AnswerEntry **buckets;		/* (n_buckets), a power of two */
	size_t		n_buckets;
	size_t		count;
	size_t		bytes;
	size_t		max_bytes;
	AnswerEntry *oldest;		/* least recently used */
	AnswerEntry *newest;
	bool		dirty;
};

/* One 64-bit word into the running hash. */
static inline uint64_t
hash_round(uint64_t h, uint64_t w)
{
	w *= 0x87c37b91114253d5ull;
	w = (w << 31) | (w >> 33);
	h ^= w * 0x4cf5ad432745937full;
	h = (h << 27) | (h >> 37);
	return h * 5 + 0x52dce729;
}

/* Hash n bytes: 8 a round (MurmurHash3's mixing), then the tail and the length, then fmix64. */
uint64_t
llm_hash64(const void *p, size_t n, uint64_t seed)
{
	const unsigned char *b = p;
	uint64_t	h = seed ^ 0x9e3779b97f4a7c15ull;
	uint64_t	w;
	size_t		i = 0;

	for (; i + 8 <= n; i += 8)
	{
		memcpy(&w, b + i, 8);
		h = hash_round(h, w);
	}
	w = 0;
	if (i < n)
		memcpy(&w, b + i, n - i);
	h = hash_round(h, w ^ ((uint64_t) (n - i) << 56));
	h ^= (uint64_t) n;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}

/* Hash a whole file, 1 MiB at a time, chaining each chunk's hash into the next. */
LlmStatus
llm_file_hash(const char *path, uint64_t *out, LlmError *err)
{
	size_t		chunk = 1 << 20;
	unsigned char *buf;
	uint64_t	h = 0;
	uint64_t	total = 0;
	int			fd;

	buf = malloc(chunk);
	if (buf == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory hashing \"%s\"", path);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
	{
		free(buf);
		return llm_error_set(err, LLM_ERR_IO, "could not open \"%s\": %s", path, strerror(errno));
	}
	for (;;)
	{
		ssize_t		got = read(fd, buf, chunk);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
		{
			int			e = errno;

			close(fd);
			free(buf);
			return llm_error_set(err, LLM_ERR_IO, "could not read \"%s\": %s", path, strerror(e));
		}
		if (got == 0)
			break;
		h = llm_hash64(buf, (size_t) got, h);
		total += (uint64_t) got;
	}
	close(fd);
	free(buf);
	*out = llm_hash64(&total, sizeof(total), h);
	return LLM_OK;
}

/* A growable byte buffer for keys and files. */
typedef struct ByteBuf
{
	uint8_t    *p;
	size_t		len;
	size_t		cap;
	bool		failed;			/* an allocation failed: p is freed, everything else ignored */
} ByteBuf;

/* Append n bytes to b. */
static void
buf_put(ByteBuf *b, const void *src, size_t n)
{
	if (b->failed || n == 0)
		return;
	if (b->len + n > b->cap)
	{
		size_t		cap = b->cap ? b->cap : 256;
		uint8_t    *p;

		while (cap < b->len + n)
			cap *= 2;
		p = realloc(b->p, cap);
		if (p == NULL)
		{
			free(b->p);
			b->p = NULL;
			b->failed = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, src, n);
	b->len += n;
}

/* Append one fixed-size value. */
#define BUF_PUT(b, v) buf_put((b), &(v), sizeof(v))

/* Build the key of a request: every field that changes its answer, arrays with their lengths. */
LlmStatus
llm_answer_key(const LlmRequest *r, uint64_t partition, uint8_t **key, size_t *len, LlmError *err)
{
	ByteBuf		b = {0};
	uint32_t	version = ANSWER_KEY_VERSION;
	uint64_t	seed = r->temperature > 0.0f ? r->seed : 0;	/* greedy decoding ignores it */
	uint8_t		flags = (uint8_t) ((r->ignore_eos ? 1 : 0) | (r->logprobs ? 2 : 0));
	int32_t		v;
	uint32_t	grammar = (uint32_t) r->grammar;
	uint64_t	grammar_len = r->grammar != LLM_GRAMMAR_NONE ? (uint64_t) r->grammar_len : 0;

	if (r->n_prompt < 0 || r->n_forced < 0 || r->n_stop < 0)
		return llm_error_set(err, LLM_ERR_INVALID, "negative count in request");
	BUF_PUT(&b, version);
	BUF_PUT(&b, partition);
	v = r->n_prompt;
	BUF_PUT(&b, v);
	buf_put(&b, r->prompt, sizeof(int32_t) * (size_t) r->n_prompt);
	v = r->n_forced;
	BUF_PUT(&b, v);
	buf_put(&b, r->forced, sizeof(int32_t) * (size_t) r->n_forced);
	v = r->max_tokens;
	BUF_PUT(&b, v);
	BUF_PUT(&b, r->temperature);
	v = r->top_k;
	BUF_PUT(&b, v);
	BUF_PUT(&b, r->top_p);
	BUF_PUT(&b, r->min_p);
	BUF_PUT(&b, r->repeat_penalty);
	BUF_PUT(&b, seed);
	BUF_PUT(&b, flags);
	v = r->n_stop;
	BUF_PUT(&b, v);
	for (int i = 0; i < r->n_stop; i++)
	{
		uint64_t	n = strlen(r->stop[i]);

		BUF_PUT(&b, n);
		buf_put(&b, r->stop[i], n);
	}
	BUF_PUT(&b, grammar);
	BUF_PUT(&b, grammar_len);
	if (grammar_len > 0)
		buf_put(&b, r->grammar_text, grammar_len);
	if (b.failed)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory building an answer cache key");
	*key = b.p;
	*len = b.len;
	return LLM_OK;
}

/* The entry's logprobs. */
static inline float *
entry_logprobs(AnswerEntry *e)
{
	return (float *) e->data;
}

/* The entry's key. */
static inline uint8_t *
entry_key(AnswerEntry *e)
{
	return e->data + (e->has_logprobs ? sizeof(float) * (size_t) e->n_generated : 0);
}

/* The entry's text (NUL-terminated). */
static inline char *
entry_text(AnswerEntry *e)
{
	return (char *) entry_key(e) + e->key_len;
}

/* Create an empty cache of 256 buckets. */
LlmAnswerCache *
llm_answer_cache_new(size_t max_bytes)
{
	LlmAnswerCache *c = calloc(1, sizeof(LlmAnswerCache));

	if (c == NULL)
		return NULL;
	c->n_buckets = 256;
	c->buckets = calloc(c->n_buckets, sizeof(AnswerEntry *));
	if (c->buckets == NULL)
	{
		free(c);
		return NULL;
	}
	c->max_bytes = max_bytes;
	return c;
}

/* Unlink e from its bucket and the recency list, and free it. */
static void
entry_drop(LlmAnswerCache *c, AnswerEntry *e)
{
	AnswerEntry **pp = &c->buckets[e->hash & (c->n_buckets - 1)];

	while (*pp != e)
		pp = &(*pp)->chain;
	*pp = e->chain;
	if (e->older)
		e->older->newer = e->newer;
	else
		c->oldest = e->newer;
	if (e->newer)
		e->newer->older = e->older;
	else
		c->newest = e->older;
	c->count--;
	c->bytes -= e->bytes;
	c->dirty = true;
	free(e);
}

/* Drop least recently used entries until need more bytes fit. */
static void
cache_make_room(LlmAnswerCache *c, size_t need)
{
	while (c->oldest != NULL && c->bytes + need > c->max_bytes)
		entry_drop(c, c->oldest);
}

/* Free every entry, the table and the cache. */
void
llm_answer_cache_free(LlmAnswerCache *c)
{
	if (c == NULL)
		return;
	llm_answer_cache_clear(c);
	free(c->buckets);
	free(c);
}

/* Set the limit, then evict down to it. */
void
llm_answer_cache_set_limit(LlmAnswerCache *c, size_t max_bytes)
{
	c->max_bytes = max_bytes;
	cache_make_room(c, 0);
}

/* Drop every entry, the oldest first. */
void
llm_answer_cache_clear(LlmAnswerCache *c)
{
	while (c->oldest != NULL)
		entry_drop(c, c->oldest);
}

/* The entry of key, or NULL. */
static AnswerEntry *
cache_find(LlmAnswerCache *c, const uint8_t *key, size_t key_len, uint64_t hash)
{
	for (AnswerEntry *e = c->buckets[hash & (c->n_buckets - 1)]; e != NULL; e = e->chain)
		if (e->hash == hash && e->key_len == key_len && memcmp(entry_key(e), key, key_len) == 0)
			return e;
	return NULL;
}

/* Move e to the newest end of the recency list. */
static void
entry_touch(LlmAnswerCache *c, AnswerEntry *e)
{
	if (c->newest == e)
		return;
	if (e->older)
		e->older->newer = e->newer;
	else
		c->oldest = e->newer;
	e->newer->older = e->older;
	e->older = c->newest;
	e->newer = NULL;
	c->newest->newer = e;
	c->newest = e;
}

/* Find key's entry, make it the newest, and point out at its answer. */
bool
llm_answer_cache_get(LlmAnswerCache *c, const uint8_t *key, size_t key_len, LlmAnswer *out)
{
	AnswerEntry *e = cache_find(c, key, key_len, llm_hash64(key, key_len, 0));

	if (e == NULL)
		return false;
	entry_touch(c, e);
	out->reason = e->reason;
	out->n_prompt = e->n_prompt;
	out->n_generated = e->n_generated;
	out->text = entry_text(e);
	out->text_len = e->text_len;
	out->logprobs = e->has_logprobs ? entry_logprobs(e) : NULL;
	return true;
}

/* Double the buckets when entries outnumber them (keeps chains short); a failed resize is harmless. */
static void
cache_grow(LlmAnswerCache *c)
{
	size_t		n = c->n_buckets * 2;
	AnswerEntry **b;

	if (c->count < c->n_buckets)
		return;
	b = calloc(n, sizeof(AnswerEntry *));
	if (b == NULL)
		return;
	for (size_t i = 0; i < c->n_buckets; i++)
		for (AnswerEntry *e = c->buckets[i], *next; e != NULL; e = next)
		{
			next = e->chain;
			e->chain = b[e->hash & (n - 1)];
			b[e->hash & (n - 1)] = e;
		}
	free(c->buckets);
	c->buckets = b;
	c->n_buckets = n;
}

/* Copy an answer into one new allocation, make room, and link it as the newest. */
bool
llm_answer_cache_put(LlmAnswerCache *c, const uint8_t *key, size_t key_len, const LlmAnswer *a)
{
	uint64_t	hash = llm_hash64(key, key_len, 0);
	size_t		lp_bytes = a->logprobs ? sizeof(float) * (size_t) a->n_generated : 0;
	size_t		size;
	AnswerEntry *e;
	AnswerEntry **bucket;

	if (a->n_generated < 0 || a->n_prompt < 0)
		return false;
	size = sizeof(AnswerEntry) + lp_bytes + key_len + a->text_len + 1;
	if (size + sizeof(AnswerEntry *) > c->max_bytes)
		return false;
	e = cache_find(c, key, key_len, hash);
	if (e != NULL)
		entry_drop(c, e);
	cache_make_room(c, size + sizeof(AnswerEntry *));
	e = malloc(size);
	if (e == NULL)
		return false;
	memset(e, 0, sizeof(AnswerEntry));
	e->hash = hash;
	e->bytes = size + sizeof(AnswerEntry *);
	e->key_len = key_len;
	e->text_len = a->text_len;
	e->n_prompt = a->n_prompt;
	e->n_generated = a->n_generated;
	e->reason = a->reason;
	e->has_logprobs = a->logprobs != NULL;
	if (lp_bytes > 0)
		memcpy(entry_logprobs(e), a->logprobs, lp_bytes);
	memcpy(entry_key(e), key, key_len);
	if (a->text_len > 0)
		memcpy(entry_text(e), a->text, a->text_len);
	entry_text(e)[a->text_len] = '\0';

	cache_grow(c);
	bucket = &c->buckets[hash & (c->n_buckets - 1)];
	e->chain = *bucket;
	*bucket = e;
	e->older = c->newest;
	if (c->newest)
		c->newest->newer = e;
	else
		c->oldest = e;
	c->newest = e;
	c->count++;
	c->bytes += e->bytes;
	c->dirty = true;
	return true;
}

/* Entries held. */
size_t
llm_answer_cache_count(const LlmAnswerCache *c)
{
	return c->count;
}

/* Bytes counted against the limit. */
size_t
llm_answer_cache_bytes(const LlmAnswerCache *c)
{
	return c->bytes;
}

/* Whether the cache changed since the last serialize or load. */
bool
llm_answer_cache_dirty(const LlmAnswerCache *c)
{
	return c->dirty;
}

/* Write the header, then each entry from the oldest with its hash, then the header's hashes. */
LlmStatus
llm_answer_cache_serialize(LlmAnswerCache *c, uint64_t identity, uint8_t **buf, size_t *len, LlmError *err)
{
	ByteBuf		b = {0};
	uint8_t		header[ANSWER_HEADER_LEN] = {0};
	uint32_t	version = ANSWER_VERSION;
	uint32_t	order = ANSWER_BYTE_ORDER;
	uint64_t	count = c->count;
	uint64_t	payload_len;
	uint64_t	h;

	buf_put(&b, header, sizeof(header));	/* filled in at the end */
	for (AnswerEntry *e = c->oldest; e != NULL; e = e->newer)
	{
		size_t		start = b.len;
		uint64_t	zero64 = 0;
		uint32_t	key_len = (uint32_t) e->key_len;
		uint32_t	reason = (uint32_t) e->reason;
		int32_t		n_prompt = e->n_prompt;
		int32_t		n_generated = e->n_generated;
		uint32_t	has_lp = e->has_logprobs;
		uint32_t	zero32 = 0;
		uint64_t	text_len = e->text_len;

		BUF_PUT(&b, zero64);	/* the entry's hash, below */
		BUF_PUT(&b, key_len);
		BUF_PUT(&b, reason);
		BUF_PUT(&b, n_prompt);
		BUF_PUT(&b, n_generated);
		BUF_PUT(&b, has_lp);
		BUF_PUT(&b, zero32);
		BUF_PUT(&b, text_len);
		buf_put(&b, entry_key(e), e->key_len);
		buf_put(&b, entry_text(e), e->text_len);
		if (e->has_logprobs)
			buf_put(&b, entry_logprobs(e), sizeof(float) * (size_t) e->n_generated);
		if (b.failed)
			break;
		h = llm_hash64(b.p + start + 8, b.len - start - 8, 0);
		memcpy(b.p + start, &h, 8);
	}
	if (b.failed)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory writing the answer cache");
	payload_len = b.len - ANSWER_HEADER_LEN;
	memcpy(b.p, ANSWER_MAGIC, 8);
	memcpy(b.p + 8, &version, 4);
	memcpy(b.p + 12, &order, 4);
	memcpy(b.p + 16, &identity, 8);
	memcpy(b.p + 24, &count, 8);
	memcpy(b.p + 32, &payload_len, 8);
	h = llm_hash64(b.p + ANSWER_HEADER_LEN, payload_len, 0);
	memcpy(b.p + 40, &h, 8);
	h = llm_hash64(b.p, 48, 0);
	memcpy(b.p + 48, &h, 8);
	c->dirty = false;
	*buf = b.p;
	*len = b.len;
	return LLM_OK;
}

/* One entry as read from a file (pointers into its bytes). */
typedef struct FileEntry
{
	const uint8_t *key;
	size_t		key_len;
	LlmAnswer	a;
	bool		has_logprobs;
	const uint8_t *logprobs;	/* unaligned: copied before use */
} FileEntry;

/*
 * Parse the entry at *pos of buf (end bytes), checking every length against
 * the bytes left and its hash; advances *pos.
 */
static bool
file_entry_read(const uint8_t *buf, size_t end, size_t *pos, FileEntry *fe)
{
	size_t		p = *pos;
	uint64_t	h;
	uint32_t	key_len,
				reason,
				has_lp;
	int32_t		n_prompt,
				n_generated;
	uint64_t	text_len;
	size_t		need;

	if (end - p < ANSWER_ENTRY_HEAD)
		return false;
	memcpy(&h, buf + p, 8);
	memcpy(&key_len, buf + p + 8, 4);
	memcpy(&reason, buf + p + 12, 4);
	memcpy(&n_prompt, buf + p + 16, 4);
	memcpy(&n_generated, buf + p + 20, 4);
	memcpy(&has_lp, buf + p + 24, 4);
	memcpy(&text_len, buf + p + 32, 8);
	if ((reason != LLM_FINISH_STOP && reason != LLM_FINISH_LENGTH) || n_prompt < 0 || n_generated < 0 ||
		has_lp > 1 || key_len == 0)
		return false;
	if (text_len > end - p - ANSWER_ENTRY_HEAD)
		return false;
	need = (size_t) key_len + (size_t) text_len + (has_lp ? sizeof(float) * (size_t) n_generated : 0);
	if (need > end - p - ANSWER_ENTRY_HEAD)
		return false;
	if (llm_hash64(buf + p + 8, ANSWER_ENTRY_HEAD - 8 + need, 0) != h)
		return false;
	fe->key = buf + p + ANSWER_ENTRY_HEAD;
	fe->key_len = key_len;
	fe->a.reason = (LlmFinishReason) reason;
	fe->a.n_prompt = n_prompt;
	fe->a.n_generated = n_generated;
	fe->a.text = (const char *) fe->key + key_len;
	fe->a.text_len = text_len;
	fe->a.logprobs = NULL;
	fe->has_logprobs = has_lp != 0;
	fe->logprobs = (const uint8_t *) fe->a.text + text_len;
	*pos = p + ANSWER_ENTRY_HEAD + need;
	return true;
}

/* Check the header and every entry first, then take the entries in order. */
LlmStatus
llm_answer_cache_load(LlmAnswerCache *c, uint64_t identity, const uint8_t *buf, size_t len, LlmError *err)
{
	uint32_t	version,
				order;
	uint64_t	file_identity,
				count,
				payload_len,
				payload_hash,
				header_hash;
	size_t		pos;

	if (len < ANSWER_HEADER_LEN || memcmp(buf, ANSWER_MAGIC, 8) != 0)
		return llm_error_set(err, LLM_ERR_FORMAT, "not an answer cache file");
	memcpy(&version, buf + 8, 4);
	memcpy(&order, buf + 12, 4);
	memcpy(&file_identity, buf + 16, 8);
	memcpy(&count, buf + 24, 8);
	memcpy(&payload_len, buf + 32, 8);
	memcpy(&payload_hash, buf + 40, 8);
	memcpy(&header_hash, buf + 48, 8);
	if (llm_hash64(buf, 48, 0) != header_hash)
		return llm_error_set(err, LLM_ERR_FORMAT, "header checksum mismatch");
	if (order != ANSWER_BYTE_ORDER || version != ANSWER_VERSION)
		return llm_error_set(err, LLM_ERR_UNSUPPORTED, "answer cache file of version %u%s",
							 (unsigned) version, order != ANSWER_BYTE_ORDER ? " from another byte order" : "");
	if (payload_len != len - ANSWER_HEADER_LEN)
		return llm_error_set(err, LLM_ERR_FORMAT, "file has %zu bytes of entries, header says %llu",
							 len - ANSWER_HEADER_LEN, (unsigned long long) payload_len);
	if (llm_hash64(buf + ANSWER_HEADER_LEN, payload_len, 0) != payload_hash)
		return llm_error_set(err, LLM_ERR_FORMAT, "entries checksum mismatch");
	if (file_identity != identity)
		return llm_error_set(err, LLM_ERR_NOT_FOUND, "answer cache file is of another model");

	/* every entry checked before any is taken */
	pos = ANSWER_HEADER_LEN;
	for (uint64_t i = 0; i < count; i++)
	{
		FileEntry	fe;

		if (!file_entry_read(buf, len, &pos, &fe))
			return llm_error_set(err, LLM_ERR_FORMAT, "entry %llu of %llu is damaged",
								 (unsigned long long) i + 1, (unsigned long long) count);
	}
	if (pos != len)
		return llm_error_set(err, LLM_ERR_FORMAT, "%zu bytes after the last entry", len - pos);

	pos = ANSWER_HEADER_LEN;
	for (uint64_t i = 0; i < count; i++)
	{
		FileEntry	fe;
		float	   *lp = NULL;

		(void) file_entry_read(buf, len, &pos, &fe);
		if (fe.has_logprobs)
		{
			lp = malloc(sizeof(float) * (size_t) fe.a.n_generated + 1);
			if (lp == NULL)
				break;
			memcpy(lp, fe.logprobs, sizeof(float) * (size_t) fe.a.n_generated);
			fe.a.logprobs = lp;
		}
		(void) llm_answer_cache_put(c, fe.key, fe.key_len, &fe.a);
		free(lp);
	}
	c->dirty = false;
	return LLM_OK;
}
