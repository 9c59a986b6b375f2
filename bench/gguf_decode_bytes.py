#!/usr/bin/env python3
"""Bytes of weights that one batch-1 decode step reads from a GGUF file.

Every tensor is read once per token except the token embedding, of which
one row is read -- unless the model has no output.weight (tied embeddings),
when the LM head reads the whole embedding table.  Prints the byte count.

    gguf_decode_bytes.py MODEL.gguf
"""
import struct
import sys

# ggml type -> (values per block, bytes per block)
TYPE_SIZES = {
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24),
    8: (32, 34), 9: (32, 36), 10: (256, 84), 11: (256, 110), 12: (256, 144),
    13: (256, 176), 14: (256, 210), 15: (256, 292), 30: (1, 2),
    0x4C4D0001: (64, 44),  # llm's own SPARSE24 (src/engine/quant.h)
}
SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def read(f, fmt):
    """One little-endian value of struct format fmt."""
    return struct.unpack('<' + fmt, f.read(struct.calcsize('<' + fmt)))[0]


def read_string(f):
    """A GGUF string: u64 length, then the bytes."""
    return f.read(read(f, 'Q')).decode('utf-8', 'replace')


def skip_value(f, vtype):
    """Skip one metadata value of type vtype."""
    if vtype == 8:
        read_string(f)
    elif vtype == 9:
        etype, n = read(f, 'I'), read(f, 'Q')
        if etype in SCALAR_SIZES:
            f.seek(SCALAR_SIZES[etype] * n, 1)
        else:
            for _ in range(n):
                skip_value(f, etype)
    else:
        f.seek(SCALAR_SIZES[vtype], 1)


def main(path):
    """Print the decode bytes of the model at path."""
    with open(path, 'rb') as f:
        if f.read(4) != b'GGUF':
            sys.exit(f'{path}: not a GGUF file')
        read(f, 'I')
        n_tensors, n_kv = read(f, 'Q'), read(f, 'Q')
        for _ in range(n_kv):
            read_string(f)
            skip_value(f, read(f, 'I'))
        sizes = {}
        rows = {}
        for _ in range(n_tensors):
            name = read_string(f)
            dims = [read(f, 'Q') for _ in range(read(f, 'I'))]
            ttype = read(f, 'I')
            read(f, 'Q')
            block, nbytes = TYPE_SIZES[ttype]
            n = 1
            for d in dims:
                n *= d
            sizes[name] = n // block * nbytes
            rows[name] = dims[1] if len(dims) > 1 else 1
    total = sum(sizes.values())
    if 'output.weight' in sizes and 'token_embd.weight' in sizes:
        total -= sizes['token_embd.weight'] - sizes['token_embd.weight'] // rows['token_embd.weight']
    print(total)


if __name__ == '__main__':
    main(sys.argv[1])
