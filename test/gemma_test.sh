#!/usr/bin/env bash
# Sane behaviour of Gemma 3 270M base (fetched by
# tools/fetch-model.sh gemma): answers are not empty, greedy output is
# deterministic, stop strings and max tokens stop generation, Gemma's turn
# markers tokenize, chat (the base model has no template) is refused, and the
# capital of France is Paris.
# Prints "gemma: N passed, N failed" and exits non-zero on any failure.
set -u
cd "$(dirname "$0")/.."
CLI=bin/llm-cli
MODEL=$(tools/fetch-model.sh gemma | tail -n 1) || { echo "gemma: could not fetch the model"; echo "gemma: 0 passed, 1 failed"; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL gemma: $*" >&2; }

gen() { "$CLI" generate -m "$MODEL" --threads "$(nproc)" "$@"; }

# the capital of France, asked plainly (the packaged model is the base model)
gen -p "What is the capital of France? Answer with one word." -n 8 > "$TMP/paris" 2>"$TMP/err"
if grep -q "Paris" "$TMP/paris"; then ok; else fail "France: '$(cat "$TMP/paris")' $(tail -1 "$TMP/err")"; fi

# greedy is deterministic, and not empty
prompt="Article: The city recorded its hottest day in fifty years on Tuesday, with temperatures reaching 41 degrees. Officials opened cooling centres and asked residents to check on elderly neighbours.
Summary in one sentence:"
gen -p "$prompt" -n 48 --stop "." > "$TMP/a" 2>"$TMP/a.err"
gen -p "$prompt" -n 48 --stop "." > "$TMP/b" 2>/dev/null
if [ -s "$TMP/a" ] && cmp -s "$TMP/a" "$TMP/b"; then ok; else fail "greedy runs differ or are empty: '$(cat "$TMP/a")' / '$(cat "$TMP/b")'"; fi

# the stop string ended it: no period in the text, finish reason stop
if ! grep -q '[.]' "$TMP/a" && grep -q "finish: stop" "$TMP/a.err"; then
    ok
else
    fail "stop string: '$(cat "$TMP/a")' $(tail -1 "$TMP/a.err")"
fi

# max tokens stops it too
gen -p "Once upon a time" -n 5 > /dev/null 2>"$TMP/err"
if grep -q "5 generated, finish: length" "$TMP/err"; then ok; else fail "max tokens: $(tail -1 "$TMP/err")"; fi

# the chat template: BOS, <start_of_turn>user ... <end_of_turn> <start_of_turn>model
ids=$(printf '<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n' | "$CLI" tokenize -m "$MODEL" --special --bos)
if [ "$ids" = "2 105 2364 107 10979 106 107 105 4368 107" ]; then ok; else fail "chat markers tokenize to '$ids'"; fi
# the packaged model is the base model, without tokenizer.chat_template: chat is refused, never guessed
if ! gen --chat -p "Hi" -n 4 > "$TMP/chat" 2>"$TMP/err" && grep -q "has no chat template" "$TMP/err"; then
    ok
else
    fail "chat on the base model: $(tail -1 "$TMP/err")"
fi

# a few more prompts give non-empty text
for p in "The three primary colors are" "Water boils at" "The largest planet in the solar system is"; do
    gen -p "$p" -n 8 > "$TMP/o" 2>/dev/null
    if [ -n "$(tr -d '[:space:]' < "$TMP/o")" ]; then ok; else fail "empty answer to '$p'"; fi
done

echo "gemma: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
