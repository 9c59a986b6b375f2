#!/usr/bin/env python3
"""Write a vocabulary-only GGUF file of the synthetic BERT vocabulary that
test_tokenizer.c's load_wpm builds in memory, for llama.cpp's llama-tokenize.

Usage: python3 tools/gen_wpm_vocab.py OUT.gguf [cased]
With "cased", tokenizer.ggml.normalizer.lowercase is written false.
The tokens: [PAD] 0, [unused1..99] 1..99, [UNK] 100, [CLS] 101, [SEP] 102,
[MASK] 103, then WORDS (keep in step with wpm_words in test_tokenizer.c).
Used by tools/gen_wpm_reference.sh.
"""
import struct
import sys

WORDS = [
    "\u2581hello", "\u2581world", "\u2581un", "\u2581unaff", "able", "aff",
    "\u2581cafe", "\u2581naive", "\u2581,", "\u2581!", "\u2581'",
    "\u2581t", "\u2581don", "\u2581\u4f60", "\u2581\u597d",
    "\u2581a", "b", "\u2581b", "\u2581c", "\u2581$", "\u2581x",
    "\u2581e", "\u2581caf\u00e9", "\u2581\u03b1\u03b2\u03b3",
    "\u2581Hello", "\u2581a\u0301",
]

UINT32, FLOAT32, BOOL, STRING, ARRAY, INT32 = 4, 6, 7, 8, 9, 5


def s(x):
    b = x.encode('utf-8')
    return struct.pack('<Q', len(b)) + b


def kv(key, vtype, payload):
    return s(key) + struct.pack('<I', vtype) + payload


def main():
    tokens = ["[PAD]"] + ["[unused%d]" % i for i in range(1, 100)] + \
        ["[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
    types = [3] + [5] * 99 + [2, 3, 3, 3] + [1] * len(WORDS)
    kvs = [
        kv("general.architecture", STRING, s("bert")),
        kv("bert.context_length", UINT32, struct.pack('<I', 512)),
        kv("bert.embedding_length", UINT32, struct.pack('<I', 8)),
        kv("bert.feed_forward_length", UINT32, struct.pack('<I', 8)),
        kv("bert.block_count", UINT32, struct.pack('<I', 1)),
        kv("bert.attention.head_count", UINT32, struct.pack('<I', 1)),
        kv("bert.attention.layer_norm_epsilon", FLOAT32, struct.pack('<f', 1e-12)),
        kv("bert.attention.causal", BOOL, struct.pack('<B', 0)),
        kv("bert.pooling_type", UINT32, struct.pack('<I', 1)),
        kv("tokenizer.ggml.model", STRING, s("bert")),
        kv("tokenizer.ggml.tokens", ARRAY,
           struct.pack('<IQ', STRING, len(tokens)) + b''.join(s(t) for t in tokens)),
        kv("tokenizer.ggml.token_type", ARRAY,
           struct.pack('<IQ', INT32, len(types)) + b''.join(struct.pack('<i', t) for t in types)),
    ]
    if len(sys.argv) > 2 and sys.argv[2] == 'cased':
        kvs.append(kv("tokenizer.ggml.normalizer.lowercase", BOOL, struct.pack('<B', 0)))
    with open(sys.argv[1], 'wb') as f:
        f.write(struct.pack('<IIQQ', 0x46554747, 3, 0, len(kvs)))
        f.write(b''.join(kvs))


main()
