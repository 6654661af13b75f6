#!/usr/bin/python3
# gpt_torch.py - models/gpt.g written independently in PyTorch, on the
# weights of an attnc checkpoint: checks that attnc computes what PyTorch
# computes, and times PyTorch's training step for bench comparisons.
#
#   gpt_torch.py check WEIGHTS INPUTS LOSS   (attnc --save, --inputs and
#       --outputs files): prints PyTorch's loss in float32 and float64 and
#       attnc's, and exits 1 if attnc is further from float64 than 4x
#       PyTorch's float32 error (and 1e-6 relative).
#   gpt_torch.py time WEIGHTS B T STEPS THREADS: median seconds of a
#       training step (forward, backward, Adam) at batch B, steps T.
#   gpt_torch.py memory WEIGHTS B T: the activation memory of a forward
#       and backward at batch B, steps T, one thread, in bytes: the
#       tensors autograd saves for the backward (distinct storages, the
#       weights not counted), and the peak of all the step's allocations
#       (the profiler's memory events; the weights' gradients, which the
#       step allocates, included).
#
# The sizes (width D, blocks L, MLP width F, context CTX, vocabulary) are
# read from the weights; the heads H, which the weights do not show, from
# the environment's GPT_HEADS (models/gpt.g's 4 by default).
#
# Needs PyTorch (Debian's python3-torch) for /usr/bin/python3; the
# project's tests do not.
import json, math, os, struct, sys, time
import torch
from torch_memory import step_memory

D, H, L, F, CTX = 64, int(os.environ.get('GPT_HEADS', '4')), 2, 256, 64

def set_sizes(p):
    global D, L, F, CTX
    CTX, D = p['gpt.wpe'].shape
    L = len({k.split('.')[1] for k in p if k.split('.')[1].isdigit()})
    F = p['gpt.0.mlp.linear_0.W'].shape[1]

def read_st(path):
    b = open(path, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    h = json.loads(b[8:8 + n])
    d = b[8 + n:]
    out = {}
    for k, v in h.items():
        if k == '__metadata__':
            continue
        s, e = v['data_offsets']
        dt = {'F32': torch.float32, 'I32': torch.int32}[v['dtype']]
        out[k] = torch.frombuffer(bytearray(d[s:e]), dtype=dt).reshape(v['shape'])
    return out

def layer_norm(x, p, name):
    return torch.nn.functional.layer_norm(x, x.shape[-1:], p[name + '.gamma'],
                                          p[name + '.beta'], 1e-5)

def forward(p, tokens):
    B, T = tokens.shape
    x = p['gpt.embed.table'][tokens.long()] + p['gpt.wpe'][:T]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for l in range(L):
        a = 'gpt.%d.' % l
        h = layer_norm(x, p, a + 'norm_0')
        q, k, v = (h @ p[a + 'attention.W_' + c] for c in 'qkv')
        split = lambda t: t.reshape(B, T, H, D // H).transpose(1, 2)
        s = split(q) @ split(k).transpose(-1, -2) / math.sqrt(D / H)
        s = s.masked_fill(~mask, -1e6)
        y = (s.softmax(-1) @ split(v)).transpose(1, 2).reshape(B, T, D)
        x = x + y @ p[a + 'attention.W_o']
        h = layer_norm(x, p, a + 'norm_1')
        h = torch.nn.functional.gelu(h @ p[a + 'mlp.linear_0.W'] + p[a + 'mlp.linear_0.b'])
        x = x + h @ p[a + 'mlp.linear_1.W'] + p[a + 'mlp.linear_1.b']
    x = layer_norm(x, p, 'gpt.norm_2')
    return x @ p['gpt.linear.W'] + p['gpt.linear.b']

def loss_of(p, tokens, targets):
    logits = forward(p, tokens)
    V = logits.shape[-1]
    return torch.nn.functional.cross_entropy(logits.reshape(-1, V),
                                             targets.reshape(-1).long())

def check(weights, inputs, loss_file):
    p32 = read_st(weights)
    set_sizes(p32)
    p64 = {k: v.double() for k, v in p32.items()}
    x = read_st(inputs)
    l32 = loss_of(p32, x['tokens'], x['targets']).item()
    l64 = loss_of(p64, x['tokens'], x['targets']).item()
    ours = next(iter(read_st(loss_file).values())).item()
    e_torch, e_ours = abs(l32 - l64), abs(ours - l64)
    print('float64 %.12f  torch f32 %.9f (err %.2e)  attnc %.9f (err %.2e)'
          % (l64, l32, e_torch, ours, e_ours))
    return 0 if e_ours <= max(4 * e_torch, 1e-6 * abs(l64)) else 1

def time_steps(weights, B, T, steps, threads):
    torch.set_num_threads(threads)
    p = {k: v.clone().requires_grad_() for k, v in read_st(weights).items()}
    set_sizes(p)
    opt = torch.optim.Adam(p.values(), lr=1e-3)
    g = torch.Generator().manual_seed(0)
    tok = torch.randint(0, p['gpt.embed.table'].shape[0], (B, T), generator=g)
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        opt.zero_grad()
        loss_of(p, tok, tok.roll(-1, 1)).backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    times.sort()
    print('%.6f' % times[len(times) // 2])
    return 0

def memory(weights, B, T):
    torch.set_num_threads(1)
    p = {k: v.clone().requires_grad_() for k, v in read_st(weights).items()
         if not k.startswith('optim:')}
    set_sizes(p)
    g = torch.Generator().manual_seed(0)
    tok = torch.randint(0, p['gpt.embed.table'].shape[0], (B, T), generator=g)
    saved, peak, grads = step_memory(lambda: loss_of(p, tok, tok.roll(-1, 1)),
                                     p.values())
    print('%d %d %d' % (saved, peak, grads))
    return 0

if __name__ == '__main__':
    if sys.argv[1] == 'check':
        sys.exit(check(*sys.argv[2:5]))
    if sys.argv[1] == 'memory':
        sys.exit(memory(sys.argv[2], *map(int, sys.argv[3:5])))
    sys.exit(time_steps(sys.argv[2], *map(int, sys.argv[3:7])))
