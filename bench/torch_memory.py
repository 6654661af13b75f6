# torch_memory.py - the memory of one PyTorch training step, as the
# benches compare it with attnc's scratch (bench/gpt_torch.py,
# bench/torch_seq2seq.py): the bytes of the distinct storages autograd
# saves for the backward (the weights left out), and the peak of every
# allocation of a forward and backward (the profiler's memory events,
# the weights' gradients, which the step allocates, included).
#
# Needs PyTorch (Debian's python3-torch) for /usr/bin/python3; the
# project's tests do not.
import torch


def step_memory(loss, params):
    """(saved bytes, peak bytes, the gradients' bytes) of a step whose
    forward loss() returns the loss, over the weights in params."""
    from torch.profiler import profile, ProfilerActivity
    params = list(params)
    weights_at = {p.data_ptr() for p in params}
    saved = {}

    def pack(t):
        st = t.storage()
        if st.data_ptr() not in weights_at:
            saved[st.data_ptr()] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss()
    with profile(activities=[ProfilerActivity.CPU],
                 profile_memory=True) as prof:
        loss().backward()
    events = [e for e in prof.profiler.kineto_results.events()
              if e.name() == '[memory]']
    live = peak = 0
    for e in sorted(events, key=lambda e: e.start_us()):
        live += e.nbytes()
        peak = max(peak, live)
    grads = sum(p.numel() * p.element_size() for p in params)
    return sum(saved.values()), peak, grads
