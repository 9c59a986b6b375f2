/*
 * status.h
 *		Status codes and error messages of the engine.
 *
 * The engine never aborts or exits: inside PostgreSQL that would restart the
 * whole cluster.  Every function that can fail returns an LlmStatus and, when
 * given a non-NULL LlmError, writes a one-line message naming what was wrong
 * (lower case, no final period, in PostgreSQL's style).
 */
#ifndef LLM_STATUS_H
#define LLM_STATUS_H

#include <stddef.h>

typedef enum LlmStatus
{
	LLM_OK = 0,
	LLM_ERR_IO,					/* a file could not be opened, read or mapped */
	LLM_ERR_FORMAT,				/* a file is malformed */
	LLM_ERR_UNSUPPORTED,		/* well-formed but not supported (type, arch) */
	LLM_ERR_INVALID,			/* a bad argument from the caller */
	LLM_ERR_NOMEM,				/* an allocation failed */
	LLM_ERR_LIMIT,				/* a size limit was exceeded (context, pool) */
	LLM_ERR_NOT_FOUND,			/* a key, tensor or sequence does not exist */
	LLM_ERR_BACKEND				/* a device call failed */
} LlmStatus;

#define LLM_ERROR_MSG_LEN 512

typedef struct LlmError
{
	LlmStatus	status;
	char		msg[LLM_ERROR_MSG_LEN];
} LlmError;

/* Record status and a printf-style message in err (if not NULL); returns status. */
LlmStatus	llm_error_set(LlmError *err, LlmStatus status, const char *fmt,...)
			__attribute__((format(printf, 3, 4)));

/* Clear err to LLM_OK with an empty message. */
void		llm_error_clear(LlmError *err);

/* The name of a status code, e.g. "format error". */
const char *llm_status_name(LlmStatus status);

#endif							/* LLM_STATUS_H */
