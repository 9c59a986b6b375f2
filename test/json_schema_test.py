#!/usr/bin/env python3
"""Constrained decoding against a real JSON Schema validator.

Runs `llm-cli generate --json-schema` for every schema below with several
prompts, greedy and sampled, on stories260K (and on SmolLM2-135M-Instruct
when tools/fetch-model.sh has fetched it), and checks with the jsonschema
package (Debian's python3-jsonschema) that every output

  - parses as JSON and validates against its schema, or
  - is refused with the engine's "reached max_tokens" error, never cut.

With a max_tokens too small for the schema (3 tokens) the same holds: the
output is whole and valid, or an error.  Prints a summary; exits 1 on any
failure.

Usage: test/json_schema_test.py LLM_CLI STORIES_GGUF [SMOLLM2_GGUF]
"""
import json
import os
import subprocess
import sys

import jsonschema

SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
     "required": ["name", "age"]},
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10},
                                      "email": {"type": "string", "minLength": 3, "maxLength": 30},
                                      "active": {"type": "boolean"}},
     "required": ["name", "active"], "additionalProperties": False},
    {"type": "object", "properties": {"a": {"type": "null"}, "b": {"type": "number"}, "c": {"const": "x"}}},
    {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string", "maxLength": 6},
                                               "minItems": 1, "maxItems": 3}},
     "required": ["tags"]},
    {"type": "array", "items": {"type": "integer"}, "maxItems": 5},
    {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "minItems": 2, "maxItems": 2},
    {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "integer"},
                                                                 "ok": {"type": "boolean"}},
                                "required": ["id", "ok"]}, "maxItems": 3},
    {"type": "string"},
    {"type": "string", "maxLength": 5},
    {"type": "string", "minLength": 2, "maxLength": 2},
    {"type": "string", "enum": ["positive", "negative", "neutral"]},
    {"enum": [1, "two", None, True, {"k": [3]}]},
    {"type": ["integer", "null"], "enum": [1, 2.5, "two", None]},	# the values of another type are never written
    {"const": {"fixed": [1, 2, {"x": None}]}},
    {"type": "integer"},
    {"type": "number"},
    {"type": "boolean"},
    {"type": "null"},
    {"type": ["string", "integer"]},
    {"type": ["object", "null"], "properties": {"v": {"type": "integer"}}, "required": ["v"]},
    {"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 4}]},
    {"anyOf": [{"type": "object", "properties": {"kind": {"const": "cat"}, "lives": {"type": "integer"}},
                "required": ["kind", "lives"]},
               {"type": "object", "properties": {"kind": {"const": "dog"}, "good": {"type": "boolean"}},
                "required": ["kind", "good"]}]},
    {"type": "object", "properties": {"nested": {"type": "object", "properties": {
        "deeper": {"type": "object", "properties": {"leaf": {"type": "string", "maxLength": 8}},
                   "required": ["leaf"]}}, "required": ["deeper"]}}, "required": ["nested"]},
    {"type": "object"},
    {"type": "array"},
    {},
    True,
    {"title": "Person", "description": "a person", "type": "object",
     "properties": {"first name": {"type": "string", "maxLength": 12}, "quote\"d": {"type": "integer"}},
     "required": ["first name", "quote\"d"]},
    {"type": "object", "properties": {"summary": {"type": "string", "maxLength": 40},
                                      "sentiment": {"enum": ["positive", "negative", "neutral"]},
                                      "score": {"type": "number"}},
     "required": ["summary", "sentiment", "score"]},
    {"type": "object", "properties": {"items": {"type": "array", "items": {"type": "array", "items": {
        "type": "integer"}, "maxItems": 2}, "maxItems": 2}}, "required": ["items"]},
    {"type": "string", "maxLength": 3, "minLength": 0},
    # an issue's schema: an optional property beside a required one, which a model may write first
    # (without the rating's "minimum" and "maximum", which the engine once refused; the last schema has them)
    {"type": "object", "properties": {"product": {"type": "string", "maxLength": 30},
                                      "rating": {"type": "integer"}},
     "required": ["product"]},
    # integer ranges: negative, one-sided, wide, exclusive and fractional bounds
    {"type": "array", "items": {"type": "integer", "minimum": -50, "exclusiveMaximum": -3}, "maxItems": 4},
    {"type": "object", "properties": {"count": {"type": "integer", "minimum": 0},
                                      "delta": {"type": "integer", "maximum": 10.5},
                                      "big": {"type": "integer", "minimum": -1000000, "maximum": 1000000000}},
     "required": ["count", "big"]},
    # the issue's schema whole, run on SmolLM2 with a review to extract from
    {"type": "object", "properties": {"product": {"type": "string"},
                                      "rating": {"type": "integer", "minimum": 1, "maximum": 5}},
     "required": ["product"]},
]

PROMPTS = ["Once upon a time", "Lily had a big red ball. She", "The cat said", "{\"name\": \""]
REVIEW = ("Extract the product and its rating from the review as JSON.\n\n"
          "Review: The Acme kettle is great, I give it 5 stars.")


def generate(cli, model, prompt, schema, n, temp, seed, chat=False):
    """One constrained generation: (ok, text, stderr)."""
    cmd = [cli, "generate", "-m", model, "-p", prompt, "-n", str(n), "--temp", str(temp), "--seed",
           str(seed), "--json-schema", json.dumps(schema)]
    if chat:
        cmd.append("--chat")
    p = subprocess.run(cmd, capture_output=True, timeout=300)
    return p.returncode == 0, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def check(cli, model, name, schemas, prompts, runs, chat=False):
    """Run every schema, prompt and (max_tokens, temperature, seed); count what happened."""
    valid = limit = failed = 0
    for si, schema in enumerate(schemas):
        for prompt in prompts:
            for n, temp, seed in runs:
                ok, text, err = generate(cli, model, prompt, schema, n, temp, seed + si, chat)
                if not ok:
                    if "reached max_tokens" in err or "reached the context length" in err:
                        limit += 1
                    else:
                        failed += 1
                        print(f"FAIL {name} schema {si} {prompt!r}: {err.strip()}")
                    continue
                try:
                    jsonschema.validate(json.loads(text), schema)
                    valid += 1
                except (ValueError, jsonschema.ValidationError) as e:
                    failed += 1
                    print(f"FAIL {name} schema {si} {prompt!r} n={n}: {text!r}: {e}")
    print(f"{name}: {valid} valid, {limit} refused at max_tokens, {failed} failed")
    return failed


def main():
    cli, stories = sys.argv[1], sys.argv[2]
    smollm = sys.argv[3] if len(sys.argv) > 3 else None
    for s in SCHEMAS:
        jsonschema.Draft202012Validator.check_schema(s)
    failed = check(cli, stories, "stories260K", SCHEMAS, PROMPTS,
                   [(256, 0, 0), (256, 1.0, 11), (3, 0, 0)])
    if smollm and os.path.exists(smollm):
        failed += check(cli, smollm, "SmolLM2-135M", SCHEMAS[::3] + SCHEMAS[-1:],
                        ["Describe a person as JSON.", "Give me some data.", REVIEW],
                        [(128, 0, 0), (96, 0.8, 5)], chat=True)
    else:
        print("SmolLM2-135M: not fetched, skipped")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
