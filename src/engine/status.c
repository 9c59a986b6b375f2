/*
 * status.c
 *		Error recording for the engine (see status.h).
 */
#include "status.h"

#include <stdarg.h>
#include <stdio.h>

/* Record status and a printf-style message in err (if not NULL); returns status. */
LlmStatus
llm_error_set(LlmError *err, LlmStatus status, const char *fmt,...)
{
	va_list		ap;

	if (err == NULL)
		return status;
	err->status = status;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return status;
}

/* Clear err to LLM_OK with an empty message. */
void
llm_error_clear(LlmError *err)
{
	if (err == NULL)
		return;
	err->status = LLM_OK;
	err->msg[0] = '\0';
}

/* The name of a status code, e.g. "format error". */
const char *
llm_status_name(LlmStatus status)
{
	switch (status)
	{
		case LLM_OK:
			return "ok";
		case LLM_ERR_IO:
			return "i/o error";
		case LLM_ERR_FORMAT:
			return "format error";
		case LLM_ERR_UNSUPPORTED:
			return "unsupported";
		case LLM_ERR_INVALID:
			return "invalid argument";
		case LLM_ERR_NOMEM:
			return "out of memory";
		case LLM_ERR_LIMIT:
			return "limit exceeded";
		case LLM_ERR_NOT_FOUND:
			return "not found";
		case LLM_ERR_BACKEND:
			return "backend error";
	}
	return "unknown status";
}
