#!/usr/bin/env python3
"""Copy a tensor-less GGUF file (a ggml-vocab-*.gguf) with one string key set.

Usage: python3 tools/gguf_set_pre.py IN.gguf OUT.gguf VALUE [KEY]
KEY defaults to tokenizer.ggml.pre; it is added when missing.  Used by
tools/gen_pre_reference.sh to give a vocabulary other pre-tokenizers.
"""
import struct
import sys

# GGUF value types and the byte size of the fixed-size ones
FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
STRING, ARRAY = 8, 9


def skip_value(buf, pos, vtype):
    """The offset just past a value of type vtype at pos."""
    if vtype in FIXED:
        return pos + FIXED[vtype]
    if vtype == STRING:
        (n,) = struct.unpack_from('<Q', buf, pos)
        return pos + 8 + n
    if vtype == ARRAY:
        atype, n = struct.unpack_from('<IQ', buf, pos)
        pos += 12
        if atype in FIXED:
            return pos + n * FIXED[atype]
        for _ in range(n):
            pos = skip_value(buf, pos, atype)
        return pos
    raise ValueError('unknown GGUF type %d' % vtype)


def gguf_str(s):
    b = s.encode('utf-8')
    return struct.pack('<Q', len(b)) + b


def main():
    src, dst, value = sys.argv[1:4]
    key = sys.argv[4] if len(sys.argv) > 4 else 'tokenizer.ggml.pre'
    buf = open(src, 'rb').read()
    magic, version, n_tensors, n_kv = struct.unpack_from('<IIQQ', buf, 0)
    if magic != 0x46554747 or n_tensors != 0:
        sys.exit('%s: not a GGUF file without tensors' % src)
    pos = 24
    out = []
    found = False
    for _ in range(n_kv):
        start = pos
        (klen,) = struct.unpack_from('<Q', buf, pos)
        name = buf[pos + 8:pos + 8 + klen].decode('utf-8')
        pos += 8 + klen
        (vtype,) = struct.unpack_from('<I', buf, pos)
        end = skip_value(buf, pos + 4, vtype)
        if name == key:
            out.append(gguf_str(key) + struct.pack('<I', STRING) + gguf_str(value))
            found = True
        else:
            out.append(buf[start:end])
        pos = end
    if not found:
        out.append(gguf_str(key) + struct.pack('<I', STRING) + gguf_str(value))
        n_kv += 1
    with open(dst, 'wb') as f:
        f.write(struct.pack('<IIQQ', magic, version, 0, n_kv))
        f.write(b''.join(out))


main()
