/*
 * chat.c
 *		SQL function llm_chat(): the model's answer to a conversation, a
 *		jsonb array of messages rendered by the model's chat template.
 *
 * The backend checks the shape it can check without the template (a
 * non-empty array of objects, each with a known "role"; tools an array)
 * and sends the conversation, the tools and enable_thinking as JSON text
 * in UTF-8 to the worker, which renders and tokenizes them with the engine
 * (llm_chat_tokenize_messages, worker_tokenize.c).  The conversation
 * travels where a prompt does (LlmJob.prompt, params.messages set) and the
 * tools right after it, so queueing, fair shares, the prefix cache and the
 * LLM Batch node treat a conversation as they treat a prompt.  The
 * generation parameters are llm_generate()'s, checked by the same code
 * (LlmJobParamsFromArgs), so a call means and refuses what llm_generate()
 * does; batch_call.c builds a row's job with LlmChatJobFromArgs(), as a
 * call row by row does.
 *
 * The JSON is jsonb's text: keys in jsonb's order (shorter first, then
 * bytewise), which a template that prints messages or tools with tojson
 * shows as such.  llm.system_prompt does not apply: the conversation is
 * the whole input, and without a system message the template's default
 * (if any) is used.
 */
#include "postgres.h"

#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "llm.h"

PG_FUNCTION_INFO_V1(llm_chat);

/* llm_chat()'s argument positions. */
#define LLM_CHAT_ARG_MESSAGES	0
#define LLM_CHAT_ARG_MAX_TOKENS 1	/* through stop (6): llm_generate()'s positions */
#define LLM_CHAT_ARG_STOP		6
#define LLM_CHAT_ARG_ON_ERROR	7
#define LLM_CHAT_ARG_JSON_SCHEMA 8
#define LLM_CHAT_ARG_CHOICES	9
#define LLM_CHAT_ARG_TOOLS		10
#define LLM_CHAT_ARG_ENABLE_THINKING 11

/* llm_generate()'s positions of the arguments mapped here (functions.c). */
#define LLM_GENERATE_ARG_PROMPT 0
#define LLM_GENERATE_ARG_CHAT	7
#define LLM_GENERATE_ARG_ON_ERROR 8
#define LLM_GENERATE_ARG_SYSTEM 9
#define LLM_GENERATE_ARG_JSON_SCHEMA 10
#define LLM_GENERATE_ARG_CHOICES 11

/* The roles a message may have. */
static const char *const LlmChatRoles[] = {"system", "user", "assistant", "tool"};

/* The JSON type of a jsonb value, as PostgreSQL names it ("object", "string", ...). */
static const char *
LlmJsonbType(Jsonb *jb)
{
	JsonbValue	v;

	v.type = jbvBinary;
	v.val.binary.data = &jb->root;
	v.val.binary.len = VARSIZE(jb) - VARHDRSZ;
	return JsonbTypeName(&v);
}

/* Error out unless jb, the argument name, is a JSON array. */
static void
LlmCheckJsonArray(Jsonb *jb, const char *name)
{
	if (!JB_ROOT_IS_ARRAY(jb) || JB_ROOT_IS_SCALAR(jb))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a JSON array", name),
				 errdetail("The value is a JSON %s.", LlmJsonbType(jb))));
}

/*
 * Check a conversation: a non-empty JSON array of objects, each with a
 * "role" that is "system", "user", "assistant" or "tool".  The rest of a
 * message (its content, tool calls, ...) is the template's to read.
 */
static void
LlmCheckMessages(Jsonb *jb)
{
	uint32		n;

	LlmCheckJsonArray(jb, "messages");
	n = JB_ROOT_COUNT(jb);
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("messages must not be empty")));
	for (uint32 i = 0; i < n; i++)
	{
		JsonbValue *msg = getIthJsonbValueFromContainer(&jb->root, i);
		JsonbValue *role;
		bool		known = false;

		if (msg->type != jbvBinary || !JsonContainerIsObject(msg->val.binary.data))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("message %u of %u is not a JSON object", i + 1, n),
					 errdetail("It is a JSON %s.", JsonbTypeName(msg))));
		role = getKeyJsonValueFromContainer(msg->val.binary.data, "role", 4, NULL);
		if (role == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("message %u of %u has no \"role\"", i + 1, n)));
		if (role->type != jbvString)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("message %u of %u has a \"role\" that is not a string", i + 1, n),
					 errdetail("It is a JSON %s.", JsonbTypeName(role))));
		for (int r = 0; r < lengthof(LlmChatRoles); r++)
			known |= strlen(LlmChatRoles[r]) == (size_t) role->val.string.len &&
				memcmp(LlmChatRoles[r], role->val.string.val, role->val.string.len) == 0;
		if (!known)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("message %u of %u has an unknown role \"%s\"", i + 1, n,
							pnstrdup(role->val.string.val, role->val.string.len)),
					 errhint("The roles are \"system\", \"user\", \"assistant\" and \"tool\".")));
		pfree(msg);
	}
}

/* A jsonb value's text in UTF-8 (what the model reads), NUL-terminated; its length into *len. */
static char *
LlmJsonbUtf8(Jsonb *jb, Size *len)
{
	char	   *s = JsonbToCString(NULL, &jb->root, VARSIZE(jb));
	char	   *utf8 = pg_server_to_any(s, strlen(s), PG_UTF8);

	*len = strlen(utf8);
	return utf8;
}

/*
 * Fill job from llm_chat()'s twelve arguments: llm_generate()'s parameters
 * checked as it checks them, the tools and, unless messages is NULL (then
 * there is no request), the conversation; all checked whether or not
 * messages is NULL, so bad calls fail the same way always.
 */
void
LlmChatJobFromArgs(LlmJob *job, const NullableDatum *args)
{
	NullableDatum gen[LLM_GENERATE_NARGS];

	/* as llm_generate(NULL, ..., chat => true, system => NULL) */
	for (int a = LLM_CHAT_ARG_MAX_TOKENS; a <= LLM_CHAT_ARG_STOP; a++)
		gen[a] = args[a];
	gen[LLM_GENERATE_ARG_PROMPT].isnull = true;
	gen[LLM_GENERATE_ARG_CHAT].value = BoolGetDatum(true);
	gen[LLM_GENERATE_ARG_CHAT].isnull = false;
	gen[LLM_GENERATE_ARG_ON_ERROR] = args[LLM_CHAT_ARG_ON_ERROR];
	gen[LLM_GENERATE_ARG_SYSTEM].isnull = true;
	gen[LLM_GENERATE_ARG_JSON_SCHEMA] = args[LLM_CHAT_ARG_JSON_SCHEMA];
	gen[LLM_GENERATE_ARG_CHOICES] = args[LLM_CHAT_ARG_CHOICES];
	LlmJobParamsFromArgs(job, gen);

	job->params.messages = true;
	job->params.enable_thinking = args[LLM_CHAT_ARG_ENABLE_THINKING].isnull ? -1 :
		DatumGetBool(args[LLM_CHAT_ARG_ENABLE_THINKING].value) ? 1 : 0;
	if (!args[LLM_CHAT_ARG_TOOLS].isnull)
	{
		Jsonb	   *tools = DatumGetJsonbP(args[LLM_CHAT_ARG_TOOLS].value);

		LlmCheckJsonArray(tools, "tools");
		job->tools = LlmJsonbUtf8(tools, &job->tools_len);
	}
	if (!args[LLM_CHAT_ARG_MESSAGES].isnull)
	{
		Jsonb	   *messages = DatumGetJsonbP(args[LLM_CHAT_ARG_MESSAGES].value);

		LlmCheckMessages(messages);
		job->prompt = LlmJsonbUtf8(messages, &job->prompt_len);
	}
}

/*
 * llm_chat(messages, max_tokens, temperature, top_p, top_k, seed, stop, on_error, json_schema, choices,
 *			tools, enable_thinking)
 *		The model's answer to the conversation, the assistant's next turn.
 */
Datum
llm_chat(PG_FUNCTION_ARGS)
{
	LlmJob		job;

	LlmChatJobFromArgs(&job, fcinfo->args);
	return LlmRunOneJob(&job, fcinfo);
}
