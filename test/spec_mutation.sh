#!/usr/bin/env bash
# The invariance matrix must catch a wrong verification of drafts: a mutant
# engine whose drafting sequences take the argmax instead of sampling (what
# a verifier that only checks greedy agreement does) must fail the
# speculative scenarios of test_invariance_engine on sampled requests,
# while every scenario without speculation stays identical.
#
#   test/spec_mutation.sh      (after make engine-all; about 30 seconds)
set -euo pipefail
cd "$(dirname "$0")/.."

d=build/mutants/spec
mkdir -p "$d"
make -s build/libllmengine.a

# the mutation: at a drafting sequence's rows, the argmax instead of a sample
sample='^\(\s*\)t = llm_sampler_sample(\&s->sampler, logits, s->tokens, s->n_tokens);'
mutant='\1t = s->n_draft > 0 ? mutant_argmax(logits, e->model->config.n_vocab) : llm_sampler_sample(\&s->sampler, logits, s->tokens, s->n_tokens);'
{
    cat src/engine/engine.c
    cat <<'EOF'
int32_t
mutant_argmax(const float *logits, int n)
{
	int32_t		best = 0;

	for (int32_t t = 1; t < n; t++)
		if (logits[t] > logits[best])
			best = t;
	return best;
}
EOF
} | sed "s/$sample/$mutant/" | sed '0,/^#include "engine.h"/s//#include "engine.h"\nint32_t mutant_argmax(const float *logits, int n);/' > "$d/engine.c"
if ! grep -q 'n_draft > 0 ? mutant_argmax' "$d/engine.c"; then
    echo "spec_mutation: the sampling call in src/engine/engine.c changed; update the mutation" >&2
    exit 1
fi

flags=(-std=c11 -D_GNU_SOURCE -O2 -pthread -Isrc/engine -Itest)
cc "${flags[@]}" -c "$d/engine.c" -o "$d/engine.o"
cp build/libllmengine.a "$d/libllmengine.a"
ar d "$d/libllmengine.a" engine.o
ar rcs "$d/libllmengine.a" "$d/engine.o"
cc "${flags[@]}" -o "$d/test_invariance_engine" test/test_invariance_engine.c "$d/libllmengine.a" -lpcre2-8 -lm -lpthread -ldl

out=$("$d/test_invariance_engine" 2>&1) && rc=0 || rc=$?
if [ "$rc" -eq 0 ]; then
    echo "spec_mutation: FAILED: verifying drafts on the argmax went unnoticed" >&2
    exit 1
fi
if ! grep -Eq '(speculative|draft model).*DIFFERS' <<< "$out"; then
    echo "spec_mutation: FAILED: the mutant failed, but not in a speculative scenario:" >&2
    echo "$out" | tail -n 20 >&2
    exit 1
fi
if grep -E 'DIFFERS' <<< "$out" | grep -Evq 'speculative|draft model'; then
    echo "spec_mutation: FAILED: the mutation changed a scenario without speculation:" >&2
    grep DIFFERS <<< "$out" >&2
    exit 1
fi
echo "spec_mutation: verifying on the argmax caught in $(grep -Ec '(speculative|draft model).*DIFFERS' <<< "$out") speculative scenarios; every other scenario identical"
