#!/bin/sh
# Write test/data/wpm_reference.tsv: llama.cpp's WordPiece ids for the
# inputs of the llama-bpe suite (../shared/vocab/ggml-vocab-llama-bpe.gguf.inp),
# test/data/pre_inputs.inp and test/data/wpm_inputs.inp, in that order, with
# the synthetic BERT vocabulary of test_tokenizer.c (tools/gen_wpm_vocab.py),
# uncased (the default normalizer) and cased.  test_tokenizer compares the
# engine with it.
#
# Usage: tools/gen_wpm_reference.sh LLAMA_TOKENIZE > test/data/wpm_reference.tsv
#
# One llama-tokenize run per vocabulary: the inputs are joined with the
# control token [MASK] (103), which llama.cpp matches as a special token,
# so each input is tokenized on its own; [CLS] (101) first and [SEP] (102)
# last, which llama.cpp adds, are taken off, and the ids cut at 103.
# Output: "uncased|cased<TAB>input<TAB>ids" per line.
set -eu
tok=$1
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

python3 - "$root/../shared/vocab/ggml-vocab-llama-bpe.gguf.inp" "$root/test/data/pre_inputs.inp" \
	"$root/test/data/wpm_inputs.inp" > "$tmp/joined.txt" <<'PY'
import sys
parts = []
for path in sys.argv[1:]:
    data = open(path, encoding='utf-8', newline='').read()
    p = data.split('\n__ggml_vocab_test__\n')
    if p and p[-1] == '':
        p.pop()
    parts += p
sys.stdout.write('[MASK]'.join(parts))
PY

echo "# llama.cpp WordPiece ids (tools/gen_wpm_vocab.py vocabulary); made by tools/gen_wpm_reference.sh"
for mode in uncased cased; do
	python3 "$root/tools/gen_wpm_vocab.py" "$tmp/v.gguf" "$mode"
	"$tok" -m "$tmp/v.gguf" -f "$tmp/joined.txt" --ids --log-disable 2>/dev/null | tail -n 1 |
		python3 -c '
import sys
mode = sys.argv[1]
ids = eval(sys.stdin.read())
assert ids[0] == 101 and ids[-1] == 102
groups, cur = [], []
for i in ids[1:-1]:
    if i == 103:
        groups.append(cur)
        cur = []
    else:
        cur.append(i)
groups.append(cur)
for k, g in enumerate(groups):
    print("%s\t%d\t%s" % (mode, k, " ".join(map(str, g))))
' "$mode"
done
