/*
 * fuzz_chat.c
 *		libFuzzer target: arbitrary bytes as a Jinja chat template.
 *
 * The input is the template text (not NUL-terminated: libFuzzer's buffer
 * is exactly its size, so a read past it is an AddressSanitizer report).
 * llm_chat_detect() must recognise it or refuse it with a message; a
 * recognised format is rendered with and without a system prompt and a
 * date, and every part of the rendering must lie in the template's format,
 * the inputs or the rendering's own buffer.  The generation-block reader
 * (llm_chat_generation_text) runs with a small and a large output buffer,
 * and llm_chat_set_literal() with the names the engine asks for.
 * Seeded with the real templates of test/data/chat-templates.
 */
#include "fuzz.h"
#include "chat.h"

/* Whether [p, p + n) lies inside [base, base + size). */
static bool
inside(const char *p, size_t n, const char *base, size_t size)
{
	return p >= base && n <= size && (size_t) (p - base) <= size - n;
}

/* Render f with in; check that the parts are where they may be and read every byte. */
static void
fuzz_render(const LlmChatFormat *f, const LlmChatInput *in)
{
	LlmChatRendering r;
	LlmError	err;
	LlmStatus	st;
	volatile size_t sum = 0;

	memset(&r, 0xA5, sizeof(r));
	st = llm_chat_render(f, in, &r, &err);
	if (st != LLM_OK)
	{
		FUZZ_CHECK(st == LLM_ERR_UNSUPPORTED && err.msg[0] != '\0', "render failed with %s: %s",
				   llm_status_name(st), err.msg);
		return;
	}
	FUZZ_CHECK(r.n_parts >= 1 && r.n_parts <= LLM_CHAT_MAX_PARTS, "%d parts", r.n_parts);
	for (int i = 0; i < r.n_parts; i++)
	{
		const LlmChatPart *p = &r.parts[i];

		FUZZ_CHECK(p->len == 0 || p->text != NULL, "part %d: %zu bytes at NULL", i, p->len);
		/* user and system texts are never read for special tokens */
		if (p->len > 0 && (inside(p->text, p->len, in->user, in->user_len) ||
						   (in->system != NULL && inside(p->text, p->len, in->system, in->system_len))))
			FUZZ_CHECK(!p->special, "part %d of the user's or system's text is special", i);
		for (size_t k = 0; k < p->len; k++)
			sum += (unsigned char) p->text[k];
	}
	(void) sum;
}

/* One input: detect, render four ways, read the generation block and the set literals. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *tmpl = (const char *) data;
	static const char sys[] = " \xE3\x80\x80You are helpful.\xC2\xA0\n";
	static const char user[] = "\tHello <|im_start|> [INST] {{ x }}\xE2\x80\xA8 ";
	static const char *const names[] = {"g4_default_system_message", "default_system_message", "x", ""};
	LlmChatFormat f;
	LlmError	err;
	LlmStatus	st;
	char		out[256];

	memset(&f, 0, sizeof(f));
	st = llm_chat_detect(tmpl, size, &f, &err);
	if (st != LLM_OK)
		FUZZ_CHECK((st == LLM_ERR_UNSUPPORTED || st == LLM_ERR_NOMEM) && err.msg[0] != '\0',
				   "detect failed with %s: %s", llm_status_name(st), err.msg);
	else
	{
		FUZZ_CHECK(memchr(f.suffix, '\0', sizeof(f.suffix)) != NULL, "the suffix is not terminated");
		for (int k = 0; k < 4; k++)
		{
			LlmChatInput in = {0};

			in.system = k & 1 ? sys : NULL;
			in.system_len = k & 1 ? sizeof(sys) - 1 : 0;
			in.user = user;
			in.user_len = sizeof(user) - 1;
			in.bos = "<s>";
			in.eos = "</s>";
			in.date = k & 2 ? "01 Dec 2026" : NULL;
			fuzz_render(&f, &in);
		}
		llm_chat_format_free(&f);
	}

	for (size_t outsz = 8; outsz <= sizeof(out); outsz += sizeof(out) - 8)
	{
		memset(out, 0x5A, sizeof(out));
		st = llm_chat_generation_text(tmpl, size, out, outsz, &err);
		FUZZ_CHECK(memchr(out, '\0', outsz) != NULL, "the generation text overruns %zu bytes", outsz);
		FUZZ_CHECK(outsz == sizeof(out) || out[outsz] == 0x5A, "a write past %zu bytes", outsz);
		if (st != LLM_OK)
			FUZZ_CHECK(err.msg[0] != '\0', "generation text failed (%s) without a message", llm_status_name(st));
	}

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
	{
		const char *lit = NULL;
		size_t		lit_len = 0;

		if (llm_chat_set_literal(tmpl, size, names[i], strlen(names[i]), &lit, &lit_len))
			FUZZ_CHECK(inside(lit, lit_len, tmpl, size), "the literal of \"%s\" is outside the template", names[i]);
	}
	return 0;
}
