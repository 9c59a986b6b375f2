#!/bin/sh
# Write test/data/pre_reference.tsv: llama.cpp's token ids for the inputs of
# the llama-bpe suite (../shared/vocab/ggml-vocab-llama-bpe.gguf.inp, inputs
# 0-45) and of test/data/pre_inputs.inp (46 on: mixed scripts, digits,
# marks, odd whitespace) under every pre-tokenizer of
# src/engine/tokenizer_pre.c, with the llama-bpe vocabulary and merges.
# test_tokenizer compares the engine with it.
#
# Usage: tools/gen_pre_reference.sh LLAMA_TOKENIZE > test/data/pre_reference.tsv
#   LLAMA_TOKENIZE: llama.cpp's llama-tokenize, e.g.
#   .../vendor/llama.cpp/build/bin/llama-tokenize (cmake --build build --target llama-tokenize)
#
# Each pre-tokenizer is one llama-tokenize run: tools/gguf_set_pre.py gives a
# copy of the vocabulary that tokenizer.ggml.pre, and the inputs are joined
# with the control token <|end_of_text|> (128001), which llama.cpp matches
# as a special token, so each input is tokenized on its own; the ids are cut
# at 128001 again.  Output: "name<TAB>input<TAB>ids" per line, or one line
# "name<TAB>=<TAB>other" when every id equals those of the earlier name
# other; a comment line for a pre-tokenizer llama-tokenize fails on.
set -eu
tok=$1
root=$(cd "$(dirname "$0")/.." && pwd)
vocab=$root/../shared/vocab/ggml-vocab-llama-bpe.gguf
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# the inputs, joined by the separator (the .inp format: test_tokenizer.c's header)
python3 - "$vocab.inp" "$root/test/data/pre_inputs.inp" > "$tmp/joined.txt" <<'PY'
import sys
parts = []
for path in sys.argv[1:]:
    data = open(path, encoding='utf-8', newline='').read()
    p = data.split('\n__ggml_vocab_test__\n')
    if p and p[-1] == '':
        p.pop()
    parts += p
sys.stdout.write('<|end_of_text|>'.join(parts))
PY

names=$(sed -n 's/^	{"\([^"]*\)", &llm_pre_g_.*/\1/p' "$root/src/engine/tokenizer_pre.c")
{
echo "# llama.cpp ids (llama-bpe vocabulary) per pre-tokenizer; made by tools/gen_pre_reference.sh"
for name in $names; do
	python3 "$root/tools/gguf_set_pre.py" "$vocab" "$tmp/v.gguf" "$name"
	if ! "$tok" -m "$tmp/v.gguf" -f "$tmp/joined.txt" --ids --no-bos --log-disable \
		> "$tmp/out.txt" 2>/dev/null; then
		echo "# $name: llama-tokenize failed"
		continue
	fi
	tail -n 1 "$tmp/out.txt" |
		python3 -c '
import sys
name = sys.argv[1]
ids = eval(sys.stdin.read())
groups, cur = [], []
for i in ids:
    if i == 128001:
        groups.append(cur)
        cur = []
    else:
        cur.append(i)
groups.append(cur)
for k, g in enumerate(groups):
    print("%s\t%d\t%s" % (name, k, " ".join(map(str, g))))
' "$name"
done
} | python3 -c '
import sys
seen = {}
block, name = [], None
def flush():
    if name is None:
        return
    key = "\n".join(l.split("\t", 1)[1] for l in block)
    if key in seen:
        print("%s\t=\t%s" % (name, seen[key]))
    else:
        seen[key] = name
        print("\n".join(block))
for line in sys.stdin:
    line = line.rstrip("\n")
    if line.startswith("#"):
        flush()
        block, name = [], None
        print(line)
        continue
    n = line.split("\t", 1)[0]
    if n != name:
        flush()
        block, name = [], n
    block.append(line)
flush()
'
