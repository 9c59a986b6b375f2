/*
 * tokenizer_pre.c
 *		The pre-tokenizers of byte-level BPE: tokenizer.ggml.pre names, the
 *		ordered expressions each applies, and its flags.  Data only; the
 *		split itself is in tokenizer_bpe.c.
 *
 * The table follows llama.cpp (src/llama-vocab.cpp: the name -> pre type
 * chain in load() and the regex_exprs of each type in llm_tokenizer_bpe).
 * A group is one of llama.cpp's pre types; its expressions are applied in
 * order, each to every piece the previous one produced, and both the
 * matches and the text between them become pieces.  Groups that llama.cpp
 * gives the same expressions share one array.  The expressions are
 * llama.cpp's strings as written, except where llama.cpp does not run its
 * string as a regular expression but a hand-written splitter in its place
 * (unicode.cpp, unicode_regex_split_custom); there the entry is a PCRE2
 * expression for what that splitter does, and the comment says so (Kimi
 * K2's); AFMoE's digit splitter, also used for Tiny Aya's first string, is
 * recognised by its string and run by tokenizer_bpe.c.  The
 * hand-written splitters for GPT-2's, Llama 3's, Qwen2's and Qwen3.5's
 * strings and for "[^\n]+|[\n]+" do what their string says, so those
 * strings stay.
 *
 * tokenizer_bpe.c adapts every expression to llama.cpp's reading of it
 * before compiling (see llm_pre_translate there): the letter subcategories
 * \p{Lu} \p{Ll} \p{Lt} \p{Lm} \p{Lo} mean any letter, \d means [0-9], $
 * means the end of the piece only, and in expressions without \p{..} a
 * class never matches non-ASCII whitespace.
 *
 * Flags that only change detokenizing in llama.cpp (clean_spaces) are not
 * kept: this engine's detokenizer concatenates pieces.
 */
#include "tokenizer_int.h"

#define LLM_PRE_GROUP(id, exprs_, raw) \
	{ id, exprs_, (int) (sizeof(exprs_) / sizeof(exprs_[0])), raw }

/* GPT-2 (Radford et al. 2019): contractions, words, numbers, symbols, spaces. */
static const char *const llm_pre_gpt2[] = {
	"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
};

/* Llama 3 (also DBRX, Smaug, ChatGLM4): digits in threes, CR/LF kept apart. */
static const char *const llm_pre_llama3[] = {
	"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

/* Jais 2: Llama 3's, with whitespace runs cut at powers of two. */
static const char *const llm_pre_jais2[] = {
	"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}",
};

/* DeepSeek LLM: newlines, Latin/Greek/Cyrillic... words, punctuation, CJK, numbers. */
static const char *const llm_pre_deepseek_llm[] = {
	"[\r\n]",
	"\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
	"\\s?[!-/:-~！-／：-～‘-‟　-。]+",
	"\\s+$",
	"[一-龥ࠀ-一가-퟿]+",
	"\\p{N}+",
};

/* DeepSeek V3 (also Hunyuan dense, JoyAI, HY v4): digits in threes, CJK, then words. */
static const char *const llm_pre_deepseek3_llm[] = {
	"\\p{N}{1,3}",
	"[一-龥぀-ゟ゠-ヿ]+",
	"[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
};

/* Spark 2.5: DeepSeek V3's with a lone CR/LF rule, then single digits. */
static const char *const llm_pre_spark2_5[] = {
	"\\p{N}{1,3}",
	"[一-龥぀-ゟ゠-ヿ]+",
	"[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+",
	"\\p{N}",
};

/* Youtu: Korean, CJK punctuation, Bopomofo and CJK runs, then GPT-4o-like words. */
static const char *const llm_pre_youtu[] = {
	"[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+",
	"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

/* DeepSeek Coder: newlines, words, punctuation, CJK, single digits. */
static const char *const llm_pre_deepseek_coder[] = {
	"[\r\n]",
	"\\s?\\p{L}+",
	"\\s?\\p{P}+",
	"[一-龥ࠀ-一가-퟿]+",
	"\\p{N}",
};

/* Falcon: punctuation runs, GPT-2's, then digits in threes. */
static const char *const llm_pre_falcon[] = {
	"[\\p{P}\\$\\+<=>\\^~\\|`]+",
	"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
	"[0-9][0-9][0-9]",
};

/* StarCoder (also Refact, Command-R, SmolLM, CodeShell, EXAONE, Minerva, Mellum 2): single digits, then GPT-2's. */
static const char *const llm_pre_starcoder[] = {
	"\\p{N}",
	"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
};

/* Qwen2 (also StableLM 2, Hunyuan, Solar Open, Grok 2): Llama 3's with single digits. */
static const char *const llm_pre_qwen2[] = {
	"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

/* Qwen3.5: Qwen2's with combining marks kept in words. */
static const char *const llm_pre_qwen35[] = {
	"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

/* Poro (also BLOOM, GPT-3 Finnish): an optional space and a run without sentence punctuation. */
static const char *const llm_pre_poro[] = {
	" ?[^(\\s|.,!?…。，、।۔،)]+",
};

/* Viking: Poro's, then single digits. */
static const char *const llm_pre_viking[] = {
	" ?[^(\\s|.,!?…。，、।۔،)]+",
	"\\p{N}",
};

/* Tekken (Mistral): case-aware words, single digits. */
static const char *const llm_pre_tekken[] = {
	"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

/* Chameleon: sentinel and image tokens, tabs/newlines/space pairs, digits, punctuation, GPT-2's. */
static const char *const llm_pre_chameleon[] = {
	"<sentinel:[0-9]+>",
	"(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
	"([\\t\\n]|    |  )",
	"\\p{N}",
	"[\\p{P}!-/:-@\\[-`{-~]",
	"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
};

/* GPT-4o (also Llama 4, MiniMax M2): case-aware words with contractions, digits in threes. */
static const char *const llm_pre_gpt4o[] = {
	"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

/* Granite embedding multilingual 97M: GPT-4o's with combining marks in words. */
static const char *const llm_pre_granite_emb_multi[] = {
	"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))*((?=[\\p{L}\\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))+((?=[\\p{L}\\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

/*
 * Tiny Aya (also Cohere2 MoE): digits in threes from the right, then
 * GPT-4o-like words.  llama.cpp does not run the first expression as one but
 * its AFMoE digit splitter; so does tokenizer_bpe.c (LLM_PRE_MODE_DIGITS).
 */
static const char *const llm_pre_tiny_aya[] = {
	"\\d{1,3}(?=(?:\\d{3})*\\b)",
	"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

/*
 * Kimi K2.  llama.cpp's entry is "\p{Han}+", a trigger for a hand-written
 * splitter (unicode_regex_split_custom_kimi_k2) of K2's whole expression:
 * runs of Han (its unicode_cpt_is_han blocks, not the Han script), words
 * of other letters with an optional contraction, digits in threes, then
 * Llama 3's symbol and whitespace rules.  This is that splitter as one
 * expression.
 */
#define LLM_PRE_HAN "\\x{3400}-\\x{4DBF}\\x{4E00}-\\x{9FFF}\\x{F900}-\\x{FAFF}" \
	"\\x{20000}-\\x{2A6DF}\\x{2A700}-\\x{2EBEF}\\x{2F800}-\\x{2FA1F}"
static const char *const llm_pre_kimi_k2[] = {
	"[" LLM_PRE_HAN "]+"
	"|[^\\r\\n\\p{L}\\p{N}]?(?:(?![" LLM_PRE_HAN "])\\p{L})+"
	"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
	"|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

/* SuperBPE: number runs, then cut before every group of three digits from the right (empty matches). */
static const char *const llm_pre_superbpe[] = {
	"\\p{N}+",
	"(?=(\\d{3})+(?!\\d))",
};

/* Bailing MoE (also Bailing MoE 2, LLaDA MoE): Qwen2-like, a newline at a time. */
static const char *const llm_pre_bailingmoe[] = {
	"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
};

/* Seed-Coder: Qwen2-like, symbols never take CR/LF. */
static const char *const llm_pre_seed_coder[] = {
	"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

/* Ufakzeka: Qwen2's without the contraction rule. */
static const char *const llm_pre_ufakzeka[] = {
	"[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

/*
 * AFMoE: digits in threes from the right, CJK and other Asian scripts, then
 * words.  The first entry names llama.cpp's hand-written digit splitter
 * (no PCRE2 expression); tokenizer_bpe.c runs its own (LLM_PRE_MODE_DIGITS).
 */
static const char *const llm_pre_afmoe[] = {
	"\\p{AFMoE_digits}",
	"[一-鿿㐀-䶿豈-﫿぀-ゟ゠-ヿ･-ﾟ⼀-⿟เ-๿຀-໿ក-៿က-႟ꩠ-ꩿꧠ-꧿가-힯ᄀ-ᇿ]+",
	"[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

/* Laguna: lines and newline runs, then Qwen2's. */
static const char *const llm_pre_laguna[] = {
	"[^\\n]+|[\\n]+",
	"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

/* EXAONE MoE: Qwen2-like, words may span single spaces. */
static const char *const llm_pre_exaone_moe[] = {
	"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
};

/* Gemma 4 (also Sarvam MoE): lines and newline runs only, BPE on raw UTF-8. */
static const char *const llm_pre_gemma4[] = {
	"[^\\n]+|[\\n]+",
};

/* MiniCPM 5: digits in threes, then Qwen2-like with number runs. */
static const char *const llm_pre_minicpm5[] = {
	"\\p{N}{1,3}",
	"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

/* Whitespace (Jina v2 zh): runs of non-space, BPE on raw UTF-8. */
static const char *const llm_pre_whitespace[] = {
	"\\S+",
};

/* llama.cpp's default (no tokenizer.ggml.pre, or "default"): punctuation, GPT-2's, numbers, threes. */
static const char *const llm_pre_default[] = {
	"[\\p{P}\\$\\+<=>\\^~\\|]+",
	"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
	"\\p{N}+",
	"[0-9][0-9][0-9]",
};

/* The groups, one per llama.cpp pre type (types with the same expressions share). */
static const LlmPreGroup llm_pre_g_default = LLM_PRE_GROUP("default", llm_pre_default, false);
static const LlmPreGroup llm_pre_g_gpt2 = LLM_PRE_GROUP("gpt2", llm_pre_gpt2, false);
static const LlmPreGroup llm_pre_g_llama3 = LLM_PRE_GROUP("llama3", llm_pre_llama3, false);
static const LlmPreGroup llm_pre_g_jais2 = LLM_PRE_GROUP("jais2", llm_pre_jais2, false);
static const LlmPreGroup llm_pre_g_deepseek_llm = LLM_PRE_GROUP("deepseek-llm", llm_pre_deepseek_llm, false);
static const LlmPreGroup llm_pre_g_deepseek3_llm = LLM_PRE_GROUP("deepseek3-llm", llm_pre_deepseek3_llm, false);
static const LlmPreGroup llm_pre_g_spark2_5 = LLM_PRE_GROUP("spark2-5", llm_pre_spark2_5, false);
static const LlmPreGroup llm_pre_g_youtu = LLM_PRE_GROUP("youtu", llm_pre_youtu, false);
static const LlmPreGroup llm_pre_g_deepseek_coder = LLM_PRE_GROUP("deepseek-coder", llm_pre_deepseek_coder, false);
static const LlmPreGroup llm_pre_g_falcon = LLM_PRE_GROUP("falcon", llm_pre_falcon, false);
static const LlmPreGroup llm_pre_g_starcoder = LLM_PRE_GROUP("starcoder", llm_pre_starcoder, false);
static const LlmPreGroup llm_pre_g_qwen2 = LLM_PRE_GROUP("qwen2", llm_pre_qwen2, false);
static const LlmPreGroup llm_pre_g_qwen35 = LLM_PRE_GROUP("qwen35", llm_pre_qwen35, false);
static const LlmPreGroup llm_pre_g_poro = LLM_PRE_GROUP("poro", llm_pre_poro, false);
static const LlmPreGroup llm_pre_g_viking = LLM_PRE_GROUP("viking", llm_pre_viking, false);
static const LlmPreGroup llm_pre_g_tekken = LLM_PRE_GROUP("tekken", llm_pre_tekken, false);
static const LlmPreGroup llm_pre_g_chameleon = LLM_PRE_GROUP("chameleon", llm_pre_chameleon, false);
static const LlmPreGroup llm_pre_g_gpt4o = LLM_PRE_GROUP("gpt4o", llm_pre_gpt4o, false);
static const LlmPreGroup llm_pre_g_granite_emb_multi = LLM_PRE_GROUP("granite-emb-multi", llm_pre_granite_emb_multi, false);
static const LlmPreGroup llm_pre_g_tiny_aya = LLM_PRE_GROUP("tiny-aya", llm_pre_tiny_aya, false);
static const LlmPreGroup llm_pre_g_kimi_k2 = LLM_PRE_GROUP("kimi-k2", llm_pre_kimi_k2, false);
static const LlmPreGroup llm_pre_g_superbpe = LLM_PRE_GROUP("superbpe", llm_pre_superbpe, false);
static const LlmPreGroup llm_pre_g_bailingmoe = LLM_PRE_GROUP("bailingmoe", llm_pre_bailingmoe, false);
static const LlmPreGroup llm_pre_g_seed_coder = LLM_PRE_GROUP("seed-coder", llm_pre_seed_coder, false);
static const LlmPreGroup llm_pre_g_ufakzeka = LLM_PRE_GROUP("ufakzeka", llm_pre_ufakzeka, false);
static const LlmPreGroup llm_pre_g_afmoe = LLM_PRE_GROUP("afmoe", llm_pre_afmoe, false);
static const LlmPreGroup llm_pre_g_laguna = LLM_PRE_GROUP("laguna", llm_pre_laguna, false);
static const LlmPreGroup llm_pre_g_exaone_moe = LLM_PRE_GROUP("exaone-moe", llm_pre_exaone_moe, false);
static const LlmPreGroup llm_pre_g_gemma4 = LLM_PRE_GROUP("gemma4", llm_pre_gemma4, true);
static const LlmPreGroup llm_pre_g_minicpm5 = LLM_PRE_GROUP("minicpm5", llm_pre_minicpm5, false);
static const LlmPreGroup llm_pre_g_whitespace = LLM_PRE_GROUP("whitespace", llm_pre_whitespace, true);

/* What llama.cpp uses when tokenizer.ggml.pre is missing. */
const LlmPreGroup *const llm_pre_group_missing = &llm_pre_g_default;

#define IGN LLM_PRE_IGNORE_MERGES
#define BOS LLM_PRE_ADD_BOS
#define SEP LLM_PRE_ADD_SEP
#define ESC LLM_PRE_ESCAPE_SPACES
#define NLW LLM_PRE_NEWLINES_WHOLE

/* Every tokenizer.ggml.pre value llama.cpp knows, in the order of its chain. */
const LlmPreName llm_pre_names[] = {
	{"default", &llm_pre_g_default, 0},
	{"minicpm5", &llm_pre_g_minicpm5, IGN},
	{"llama3", &llm_pre_g_llama3, IGN | BOS},
	{"llama-v3", &llm_pre_g_llama3, IGN | BOS},
	{"llama-bpe", &llm_pre_g_llama3, IGN | BOS},
	{"falcon3", &llm_pre_g_llama3, IGN | BOS},
	{"falcon-h1", &llm_pre_g_llama3, IGN | BOS},
	{"pixtral", &llm_pre_g_llama3, IGN | BOS},
	{"midm-2.0", &llm_pre_g_llama3, IGN | BOS},
	{"lfm2", &llm_pre_g_llama3, IGN | BOS},
	{"jina-v5-nano", &llm_pre_g_llama3, IGN | BOS},
	{"deepseek-llm", &llm_pre_g_deepseek_llm, 0},
	{"deepseek-coder", &llm_pre_g_deepseek_coder, 0},
	{"deepseek-v3", &llm_pre_g_deepseek3_llm, 0},
	{"spark2_5", &llm_pre_g_spark2_5, 0},
	{"youtu", &llm_pre_g_youtu, IGN},
	{"falcon", &llm_pre_g_falcon, 0},
	{"mpt", &llm_pre_g_gpt2, 0},
	{"starcoder", &llm_pre_g_starcoder, 0},
	{"gpt-2", &llm_pre_g_gpt2, 0},
	{"phi-2", &llm_pre_g_gpt2, 0},
	{"jina-es", &llm_pre_g_gpt2, 0},
	{"jina-de", &llm_pre_g_gpt2, 0},
	{"gigachat", &llm_pre_g_gpt2, 0},
	{"jina-v2-es", &llm_pre_g_gpt2, 0},
	{"jina-v2-de", &llm_pre_g_gpt2, 0},
	{"a.x-4.0", &llm_pre_g_gpt2, 0},
	{"mellum", &llm_pre_g_gpt2, 0},
	{"modern-bert", &llm_pre_g_gpt2, 0},
	{"jais-2", &llm_pre_g_jais2, 0},
	{"gemma4", &llm_pre_g_gemma4, ESC | NLW},
	{"granite-embed-multi-311m", &llm_pre_g_gemma4, ESC | NLW},
	{"sarvam-moe", &llm_pre_g_gemma4, ESC},
	{"jina-v1-en", &llm_pre_g_gpt2, SEP},
	{"jina-v2-code", &llm_pre_g_gpt2, SEP},
	{"roberta-bpe", &llm_pre_g_gpt2, SEP},
	{"whitespace", &llm_pre_g_whitespace, 0},
	{"refact", &llm_pre_g_starcoder, 0},
	{"command-r", &llm_pre_g_starcoder, 0},
	{"qwen2", &llm_pre_g_qwen2, 0},
	{"deepseek-r1-qwen", &llm_pre_g_qwen2, 0},
	{"kormo", &llm_pre_g_qwen2, 0},
	{"f2llmv2", &llm_pre_g_qwen2, 0},
	{"qwen35", &llm_pre_g_qwen35, 0},
	{"stablelm2", &llm_pre_g_qwen2, 0},
	{"olmo", &llm_pre_g_gpt2, 0},
	{"dbrx", &llm_pre_g_llama3, 0},
	{"smaug-bpe", &llm_pre_g_llama3, 0},
	{"poro-chat", &llm_pre_g_poro, 0},
	{"chatglm-bpe", &llm_pre_g_llama3, 0},
	{"glm4", &llm_pre_g_llama3, IGN},
	{"glm5", &llm_pre_g_llama3, IGN},
	{"viking", &llm_pre_g_viking, 0},
	{"jais", &llm_pre_g_gpt2, 0},
	{"tekken", &llm_pre_g_tekken, IGN | BOS},
	{"smollm", &llm_pre_g_starcoder, 0},
	{"codeshell", &llm_pre_g_starcoder, 0},
	{"bloom", &llm_pre_g_poro, 0},
	{"gpt3-finnish", &llm_pre_g_poro, 0},
	{"exaone", &llm_pre_g_starcoder, 0},
	{"exaone4", &llm_pre_g_gpt2, 0},
	{"exaone-moe", &llm_pre_g_exaone_moe, 0},
	{"chameleon", &llm_pre_g_chameleon, BOS},
	{"minerva-7b", &llm_pre_g_starcoder, 0},
	{"megrez", &llm_pre_g_qwen2, 0},
	{"gpt-4o", &llm_pre_g_gpt4o, 0},
	{"llama4", &llm_pre_g_gpt4o, 0},
	{"kanana2", &llm_pre_g_gpt4o, 0},
	{"talkie", &llm_pre_g_gpt4o, 0},
	{"granite-embed-multi-97m", &llm_pre_g_granite_emb_multi, IGN},
	{"tiny_aya", &llm_pre_g_tiny_aya, 0},
	{"cohere2moe", &llm_pre_g_tiny_aya, 0},
	{"superbpe", &llm_pre_g_superbpe, 0},
	{"trillion", &llm_pre_g_gpt2, 0},
	{"granite-docling", &llm_pre_g_gpt2, 0},
	{"bailingmoe", &llm_pre_g_bailingmoe, 0},
	{"bailingmoe2", &llm_pre_g_bailingmoe, 0},
	{"llada-moe", &llm_pre_g_bailingmoe, 0},
	{"seed-coder", &llm_pre_g_seed_coder, 0},
	{"hunyuan", &llm_pre_g_qwen2, 0},
	{"hunyuan-dense", &llm_pre_g_deepseek3_llm, 0},
	{"hy_v4", &llm_pre_g_deepseek3_llm, 0},
	{"joyai-llm", &llm_pre_g_deepseek3_llm, 0},
	{"kimi-k2", &llm_pre_g_kimi_k2, 0},
	{"ufakzeka", &llm_pre_g_ufakzeka, 0},
	{"grok-2", &llm_pre_g_qwen2, 0},
	{"afmoe", &llm_pre_g_afmoe, 0},
	{"laguna", &llm_pre_g_laguna, 0},
	{"minimax-m2", &llm_pre_g_gpt4o, 0},
	{"solar-open", &llm_pre_g_qwen2, 0},
	{"mellum2", &llm_pre_g_starcoder, 0},
};

const int	llm_pre_n_names = (int) (sizeof(llm_pre_names) / sizeof(llm_pre_names[0]));
