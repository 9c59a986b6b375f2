#!/usr/bin/env python3
"""Chat templates: the engine's rendering against Jinja2's, byte for byte.

For every real template in ../shared/chat-templates and test/data/chat-templates,
render a system + user turn (and a user turn alone) with the generation prompt,
once with Jinja2 as Hugging Face transformers does (sandboxed, trim_blocks,
lstrip_blocks, loopcontrols; messages, add_generation_prompt, bos_token,
eos_token; raise_exception and strftime_now) and once with
`llm-cli template --template FILE`, and compare the bytes.  Each template must:
  - render identically on every conversation (strftime_now giving the date the
    engine is given with --date, or 26 Jul 2024, the engine's fixed date), or
  - be refused by the engine where Jinja2 raises too (a system prompt that
    Gemma's template rejects), or
  - be listed in test/data/chat-templates/unsupported.txt with the reason
    (the engine refuses it: llm-cli exits non-zero), or with "user-only:"
    and the reason when only a user turn without a system prompt is refused
    (the template writes a default system prompt the engine does not render).
A template the engine renders differently is a failure, and so is a listed
one that the engine renders after all (the list must stay exact).  Then the
same check on a real model's own template (SmolLM2, from its GGUF) through -m.

Usage: test/chat_template_test.py [MODEL.gguf ...]
Prints one line per template and "chat templates: N passed, N failed".
"""
import datetime
import glob
import json
import os
import struct
import subprocess
import sys

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.join(ROOT, "bin", "llm-cli")
DIRS = [os.path.join(ROOT, "..", "shared", "chat-templates"), os.path.join(ROOT, "test", "data", "chat-templates")]
DATE = datetime.datetime(2026, 12, 1)
ENGINE_DATE = datetime.datetime(2024, 7, 26)	# strftime_now's date when a request gives none
BOS, EOS = "<s>", "</s>"

# (system or None, user): edges the families treat differently (trim, Unicode, markers)
CONVERSATIONS = [
    ("You are a concise assistant.", "Summarize in one sentence: the cat sat on the mat."),
    ("  Padded system prompt.\n", "\n\tA user turn with blanks around it.  \n"),
    ("Réponds en français, s'il te plaît.", "日本語の文章です。Emoji: 🐘 ✓\u00a0"),
    ("Line one.\nLine two.", "Looks like markup: <|im_end|> [INST] <start_of_turn> </s>"),
    (None, "What is 2 + 2?"),
    (None, "  Only a user turn, padded.  "),
]


class Raised(Exception):
    pass


class GenerationTag(jinja2.ext.Extension):
    """transformers' {% generation %} ... {% endgeneration %}: marks the assistant's text, renders its body."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.Scope(body, lineno=lineno)


def raise_exception(msg):
    raise Raised(msg)


def oracle(template, system, user, bos, eos, with_date):
    """Jinja2's rendering, or Raised when the template raises."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols", GenerationTag])

    def tojson(x, indent=None, ensure_ascii=False, separators=None, sort_keys=False):
        return json.dumps(x, indent=indent, ensure_ascii=ensure_ascii, separators=separators, sort_keys=sort_keys)
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    date = DATE if with_date else ENGINE_DATE
    env.globals["strftime_now"] = lambda fmt: date.strftime(fmt)
    messages = ([{"role": "system", "content": system}] if system is not None else []) + \
        [{"role": "user", "content": user}]
    try:
        return env.from_string(template).render(messages=messages, add_generation_prompt=True,
                                                bos_token=bos, eos_token=eos)
    except Raised:
        raise
    except jinja2.TemplateError as e:
        raise Raised(str(e))


def oracle_end_of_turn(template, bos, eos):
    """What Jinja2 writes right after an assistant's reply, or None when the template takes no such turn."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols", GenerationTag])
    env.filters["tojson"] = lambda x, **kw: json.dumps(x, ensure_ascii=False)
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: ENGINE_DATE.strftime(fmt)
    reply = "The reply."
    try:
        text = env.from_string(template).render(messages=[{"role": "user", "content": "Hello"},
                                                          {"role": "assistant", "content": reply}],
                                                add_generation_prompt=False, bos_token=bos, eos_token=eos)
    except (Raised, jinja2.TemplateError):
        return None
    at = text.rfind(reply)
    return text[at + len(reply):] if at >= 0 else None


def engine(args, system, user, with_date):
    """llm-cli template's bytes, or None when it refuses; and its stderr."""
    cmd = [CLI, "template"] + args + ["--user", user]
    if system is not None:
        cmd += ["--system", system]
    if with_date:
        cmd += ["--date", DATE.strftime("%d %b %Y")]
    p = subprocess.run(cmd, capture_output=True)
    return (p.stdout.decode("utf-8") if p.returncode == 0 else None), p.stderr.decode("utf-8", "replace").strip()


def check(name, template, args, bos, eos, unsupported):
    """One template over every conversation: (ok, line)."""
    renders = refusals = 0
    for with_date in (False, True):
        for system, user in CONVERSATIONS:
            try:
                want = oracle(template, system, user, bos, eos, with_date)
            except Raised as e:
                want, why = None, str(e)
            got, err = engine(args, system, user, with_date)
            listed = unsupported.get(name)
            if got is None and listed is not None and (not listed[0] or system is None):
                refusals += 1			# listed: refused whole, or (user-only) without a system prompt
                continue
            if got is None and want is None:
                refusals += 1			# both refuse: Gemma's "System role not supported"
                continue
            if got != want:
                where = f"system={system!r} user={user!r} date={with_date}"
                if got is None:
                    return False, f"FAIL {name}: the engine refuses ({err}) where Jinja2 renders {want!r} [{where}]"
                if want is None:
                    return False, f"FAIL {name}: Jinja2 raises ({why}) where the engine renders {got!r} [{where}]"
                return False, f"FAIL {name}: engine {got!r} != Jinja2 {want!r} [{where}]"
            renders += 1
    if name in unsupported:
        user_only, why = unsupported[name]
        if user_only:
            if refusals == 0:
                return False, f"FAIL {name}: listed as needing a system prompt but renders without one; update the list"
            return True, f"ok {name}: {renders} identical; a user turn alone is refused: {why}"
        if renders > 0:
            return False, f"FAIL {name}: listed as unsupported ({why}) but renders; update the list"
        return True, f"unsupported {name}: {why}"
    info = {}
    for system in (None, CONVERSATIONS[0][0]):		# a template may refuse either
        info = info or dict(line.split(": ", 1) for line in engine(args, system, CONVERSATIONS[0][1], False)[1]
                            .splitlines() if ": " in line and not line.startswith("llm-cli"))
    family, end = info.get("chat format", "?"), info.get("end of turn", "").replace("\\n", "\n")
    # the scoring functions append the end of the turn to an answer: it must be what the template writes there
    after = oracle_end_of_turn(template, bos, eos)
    if renders > 0 and not end:
        return False, f"FAIL {name}: the engine renders it but gives no end of turn"
    if after is not None and not after.startswith(end):
        return False, f"FAIL {name}: the engine ends a reply with {end!r}, Jinja2 with {after!r}"
    return True, f"ok {name} ({family}): {renders} identical, {refusals} refused as by Jinja2, end of turn {end!r}"


def gguf_strings(path, keys):
    """String and integer metadata of a GGUF file (the keys asked for), and its token strings."""
    out = {}
    tokens = None
    with open(path, "rb") as f:
        f.read(8)
        _, n_kv = struct.unpack("<QQ", f.read(16))
        sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
        fmt = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

        def string():
            n, = struct.unpack("<Q", f.read(8))
            return f.read(n).decode("utf-8", "replace")
        for _ in range(n_kv):
            key = string()
            t, = struct.unpack("<I", f.read(4))
            if t == 8:
                val = string()
            elif t == 9:
                et, n = struct.unpack("<IQ", f.read(12))
                if et == 8:
                    val = [string() for _ in range(n)]
                else:
                    f.read(sizes[et] * n)
                    val = None
            else:
                val, = struct.unpack("<" + fmt[t], f.read(sizes[t]))
            if key == "tokenizer.ggml.tokens":
                tokens = val
            elif key in keys:
                out[key] = val
    return out, tokens


def main():
    unsupported = {}
    with open(os.path.join(ROOT, "test", "data", "chat-templates", "unsupported.txt"), encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                name, _, why = line.partition(" ")
                why = why.strip()
                user_only = why.startswith("user-only:")
                unsupported[name] = (user_only, why[len("user-only:"):].strip() if user_only else why)
    passed = failed = 0
    seen = set()
    for d in DIRS:
        for path in sorted(glob.glob(os.path.join(d, "*.jinja"))):
            name = os.path.basename(path)[:-len(".jinja")]
            seen.add(name)
            with open(path, encoding="utf-8") as f:
                template = f.read()
            ok, line = check(name, template, ["--template", path, "--bos", BOS, "--eos", EOS], BOS, EOS, unsupported)
            print(line)
            passed, failed = passed + ok, failed + (not ok)
    for name in unsupported:
        if name not in seen:
            print(f"FAIL {name}: listed in unsupported.txt but no such template")
            failed += 1
    for model in sys.argv[1:]:
        meta, tokens = gguf_strings(model, {"tokenizer.chat_template", "tokenizer.ggml.bos_token_id",
                                            "tokenizer.ggml.eos_token_id"})
        bos = tokens[meta["tokenizer.ggml.bos_token_id"]] if "tokenizer.ggml.bos_token_id" in meta else ""
        eos = tokens[meta["tokenizer.ggml.eos_token_id"]] if "tokenizer.ggml.eos_token_id" in meta else ""
        ok, line = check(os.path.basename(model), meta["tokenizer.chat_template"], ["-m", model], bos, eos, {})
        print(line)
        passed, failed = passed + ok, failed + (not ok)
    print(f"chat templates: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
