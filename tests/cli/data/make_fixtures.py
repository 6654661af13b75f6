#!/usr/bin/env python3
# make_fixtures.py - writes the small safetensors, .npz and .npy files the
# CLI tests of data = tensors(...) and --inputs/--outputs read
# (tests/cli/data/*.safetensors, *.npz, *.npy; run it with /usr/bin/python3,
# whose numpy writes the NumPy ones).
# It writes safetensors by hand (8-byte length, JSON header, little-endian
# data), so it needs neither PyTorch nor the safetensors package; run it
# from this folder after changing a fixture, and commit the files.
import json, random, struct

FMT = {'F32': 'f', 'F64': 'd', 'I32': 'i', 'I64': 'q'}

def save(path, tensors):
    header, blobs, off = {}, [], 0
    for name, (dtype, shape, data) in tensors.items():
        b = struct.pack('<%d%s' % (len(data), FMT[dtype]), *data)
        header[name] = {'dtype': dtype, 'shape': shape,
                        'data_offsets': [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(',', ':')).encode()
    h += b' ' * ((8 - len(h) % 8) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h + b''.join(blobs))

# Three Gaussian blobs in 4-D, class c shifted by 2 along axis c; the
# labels int64 as PyTorch saves them.
random.seed(0)
N = 150
xs, ys = [], []
for i in range(N):
    c = random.randrange(3)
    xs += [round(random.gauss(0, 1) + (2 if j == c else 0), 4) for j in range(4)]
    ys.append(c)
save('cls.safetensors', {'x': ('F32', [N, 4], xs), 'y': ('I64', [N], ys)})
save('cls_missing.safetensors', {'x': ('F32', [N, 4], xs)})
save('cls_ragged.safetensors', {'x': ('F32', [N, 4], xs), 'y': ('I64', [N - 1], ys[1:])})
save('cls_dtype.safetensors', {'x': ('I32', [N, 4], [int(v) for v in xs]),
                               'y': ('I64', [N], ys)})
save('cls_empty.safetensors', {'x': ('F32', [0, 4], []), 'y': ('I64', [0], [])})
save('cls_big_label.safetensors', {'x': ('F32', [2, 4], xs[:8]),
                                   'y': ('I64', [2], [0, 1 << 40])})
# A float64 feature beyond float32's range (element 5, of sample 1),
# which would round to inf.
save('cls_f64_huge.safetensors', {'x': ('F64', [20, 4], xs[:5] + [1e300] + xs[6:80]),
                                  'y': ('I64', [20], ys[:20])})
# A label out of cls.g's 3 classes, which its training step finds.
save('cls_label_3.safetensors', {'x': ('F32', [N, 4], xs),
                                 'y': ('I64', [N], [3] + ys[1:])})
# An infinity in a held-out sample (140 of 150, the 21st of the last 30),
# which makes the validation loss NaN.
save('cls_valid_inf.safetensors', {'x': ('F32', [N, 4], xs[:561] + [float('inf')] + xs[562:]),
                                   'y': ('I64', [N], ys)})
# --inputs of tests/cli/data/double.g: a (N, 3) and b (N,)
save('double_in.safetensors', {'a': ('F32', [2, 3], [0.5, 1, 1.5, 2, 2.5, 3]),
                               'b': ('I32', [2], [7, -1])})
save('double_extra.safetensors', {'a': ('F32', [2, 3], [0] * 6), 'b': ('I32', [2], [0, 0]),
                                  'c': ('F32', [1], [0])})
save('double_shape.safetensors', {'a': ('F32', [2, 4], [0] * 8), 'b': ('I32', [2], [0, 0])})
save('double_empty.safetensors', {'a': ('F32', [0, 3], []), 'b': ('I32', [0], [])})
# --inputs of tests/cli/data/lookup.g (ids of a table of 4): the second
# lookup's ids out of range, then the first's.
save('lookup_b_bad.safetensors', {'a': ('I32', [2], [0, 3]), 'b': ('I32', [2], [1, 4])})
save('lookup_a_bad.safetensors', {'a': ('I32', [2], [-1, 3]), 'b': ('I32', [2], [1, 2])})
# --inputs of models/gpt.g's loss at run-time T = 10 and T = 65 (past
# its context of 64): ids of its built-in text's 60 characters.
toks = [(7 * i + 3) % 60 for i in range(20)]
save('gpt_T10.safetensors', {'tokens': ('I32', [2, 10], toks),
                             'targets': ('I32', [2, 10], toks[1:] + toks[:1])})
long = [(5 * i + 1) % 60 for i in range(65)]
save('gpt_T65.safetensors', {'tokens': ('I32', [1, 65], long),
                             'targets': ('I32', [1, 65], long)})
# A token id past the vocabulary of 60, at 2 threads found by a
# thread of the loss's static schedule.
bad = toks[:13] + [60] + toks[14:]
save('gpt_bad_token.safetensors', {'tokens': ('I32', [2, 10], bad),
                                   'targets': ('I32', [2, 10], toks[1:] + toks[:1])})
# Samples of a next-token model of its own (tokens, targets (N, T) as
# PyTorch's int64), for lm_tensors.g: 96 windows of 8 over a repeating
# pattern of 12 ids, so the loss can fall far.
seq = [(i * 5 + i // 12) % 12 for i in range(96 * 8 + 1)]
tok, tgt = [], []
for w in range(96):
    tok += seq[w * 8:w * 8 + 8]
    tgt += seq[w * 8 + 1:w * 8 + 9]
save('lm_tensors.safetensors', {'tokens': ('I64', [96, 8], tok),
                                'targets': ('I64', [96, 8], tgt)})

# The same samples and inputs in NumPy's formats (np.savez: a zip of
# stored NAME.npy members; np.save: one array), for data = tensors(...)
# and --inputs from .npz/.npy. These need numpy (/usr/bin/python3 has it).
import numpy as np
X = np.array(xs, dtype=np.float32).reshape(N, 4)
Y = np.array(ys, dtype=np.int64)
np.savez('cls.npz', x=X, y=Y)
np.savez('cls_missing.npz', x=X)
np.savez('cls_ragged.npz', x=X, y=Y[1:])
np.savez('cls_dtype.npz', x=X.astype(np.int32), y=Y)
np.savez('empty.npz')
np.savez_compressed('cls_compressed.npz', x=X, y=Y)
A = np.array([[0.5, 1, 1.5], [2, 2.5, 3]], dtype=np.float32)
np.savez('double_in.npz', a=A, b=np.array([7, -1], dtype=np.int32))
np.save('double_a.npy', A)
save('single_in.safetensors', {'a': ('F32', [2, 3], [0.5, 1, 1.5, 2, 2.5, 3])})
np.save('single_in.npy', A.astype(np.float64))
