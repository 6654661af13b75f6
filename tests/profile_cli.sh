#!/bin/sh
# profile_cli.sh ATTNC SOURCE_DIR - --profile's report against counts
# known by hand, and its effect on results (none):
#   - --jit on tests/models/profile_mlp.g (one matmul kernel, one sum
#     kernel computing the relu and the square): the outputs are the same
#     bytes with and without --profile, the JSON line counts 1 call of
#     forward, 1 of each kernel, the sum with its 2 fused nodes;
#   - --train on tests/cli/data/lm_tensors.g, 2 epochs of 9 batches at
#     1 and at 2 threads: the epoch losses are the same digits with and
#     without --profile, loss_grad, the batches and the update count 18
#     calls, the validation's loss 6 (3 batches an epoch), and the
#     JSON's totals agree (the rows by kind and by line sum to the
#     kernels' time, each entry point's to its own, within its time on
#     each thread,
#     with shares summing to 1, and to the same calls), and the rows by
#     line are the model's lines, a prelude op's at the line calling it;
#     loss_grad's backward rows (the kernels only the gradients read) sum
#     to its backward_ms, the loss entry has none;
#   - the same with --shards 2, the tuner off: at 2 threads the shards
#     run side by side in each of the 18 steps, and "(shards' wait)"
#     counts 18 calls and a time that is no more than the run's, times
#     its 2 threads; at 1 thread there is no such row.
# Needs python3 for the JSON (exit 77, skipped, without it).
set -eu
attnc=$1
cd "$2"
command -v python3 >/dev/null || exit 77
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

g=tests/models/profile_mlp.g
"$attnc" $g --jit >"$dir/plain.out"
"$attnc" $g --jit --profile --metrics "$dir/run.json" >"$dir/prof.out" \
	2>"$dir/prof.err"
cmp "$dir/plain.out" "$dir/prof.out"
grep -q '^  tests/models/profile_mlp.g:12 sum (+2) *1 ' "$dir/prof.err"
python3 - "$dir/run.json" <<'PY'
import json, sys
d = json.loads(open(sys.argv[1]).readline())
assert d["profile"] == "run", d
assert [(e["name"], e["calls"]) for e in d["entries"]] == [("forward", 1)], d
kinds = {r["kind"]: r for r in d["by_kind"]}
assert sorted(kinds) == ["matmul", "sum"], kinds
assert kinds["matmul"]["calls"] == 1 and kinds["matmul"]["flops"] == 2 * 4 * 8 * 16
assert kinds["sum"]["calls"] == 1 and kinds["sum"]["flops"] == 0
lines = {(r["line"], r["kind"]): r for r in d["by_line"]}
assert lines[(12, "sum")]["fused"] == 2 and lines[(11, "matmul")]["fused"] == 0
PY

m=tests/cli/data/lm_tensors.g
for t in 1 2; do
	"$attnc" $m --train --epochs 2 --threads $t --metrics "$dir/plain.json" \
		2>/dev/null
	"$attnc" $m --train --epochs 2 --threads $t --profile \
		--metrics "$dir/prof.json" 2>/dev/null
	python3 - "$dir/plain.json" "$dir/prof.json" $t <<'PY'
import json, math, sys
plain = [json.loads(l) for l in open(sys.argv[1])]
prof = [json.loads(l) for l in open(sys.argv[2])]
threads = int(sys.argv[3])
losses = lambda ls: [(l["loss"], l["valid_loss"]) for l in ls if "epoch" in l]
assert losses(plain) == losses(prof) and len(losses(prof)) == 2, (plain, prof)
p = [l for l in prof if "profile" in l]
assert len(p) == 1 and p[0]["profile"] == "training", p
p = p[0]
calls = {e["name"]: e["calls"] for e in p["entries"] + p["host"]}
assert calls == {"loss": 6, "loss_grad": 18, "batches": 18, "update": 18}, calls
close = lambda a, b: math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
for rows in (p["by_kind"], p["by_line"]):
    assert close(sum(r["ms"] for r in rows), p["kernel_ms"]), rows
    for e in p["entries"]:
        mine = [r for r in rows if r["entry"] == e["name"]]
        assert close(sum(r["ms"] for r in mine), e["kernel_ms"]), (e, mine)
        # a static schedule's kernels run on every thread: their sum
        # is within the entry's time on each (docs/cli.md)
        assert e["kernel_ms"] <= threads * e["ms"], e
        assert not mine or close(sum(r["share"] for r in mine), 1.0), mine
        # every kernel runs once a call of its entry point
        assert all(r["calls"] % e["calls"] == 0 for r in mine), (e, mine)
assert sum(r["calls"] for r in p["by_kind"]) == sum(r["calls"] for r in p["by_line"])
# prelude ops count at the model's line that calls them: linear's
# matmuls at line 22 (both linears), norm's layer norm at 21, embed's
# embedding at 20; no row in prelude.g
files = {r["file"] for r in p["by_line"]}
assert files == {"tests/cli/data/lm_tensors.g"}, files
lg = {(r["line"], r["kind"]) for r in p["by_line"] if r["entry"] == "loss_grad"}
assert (22, "matmul") in lg and (20, "embedding") in lg, lg
assert any(l == 21 and k.startswith("layer_norm") for l, k in lg), lg
# the backward: loss_grad's rows that only the gradients read, summing
# to its backward_ms; none in loss (no gradients) or in the embedding
# lookup the loss reads; the embedding's gradient only in the backward
for e in p["entries"]:
    for rows in (p["by_kind"], p["by_line"]):
        bw = sum(r["ms"] for r in rows if r["entry"] == e["name"] and r["backward"])
        assert close(bw, e["backward_ms"]), (e, rows)
    if e["name"] == "loss":
        assert e["backward_ms"] == 0, e
    else:
        assert 0 < e["backward_ms"] < e["kernel_ms"], e
kb = {(r["kind"], r["backward"]) for r in p["by_kind"] if r["entry"] == "loss_grad"}
assert ("embedding", False) in kb and ("embedding", True) not in kb, kb
assert ("embedding_grad", True) in kb and ("embedding_grad", False) not in kb, kb
assert ("matmul", False) in kb and ("matmul", True) in kb, kb
PY
done
for t in 1 2; do
	ATTNC_NO_TUNER=1 "$attnc" $m --train --epochs 2 --threads $t \
		--shards 2 --profile --metrics "$dir/shards.json" 2>/dev/null
	python3 - "$dir/shards.json" $t <<'PY'
import json, sys
p = [json.loads(l) for l in open(sys.argv[1]) if '"profile"' in l][0]
host = {h["name"]: h for h in p["host"]}
if sys.argv[2] == "1":
    assert sorted(host) == ["batches", "update"], host
else:
    w = host["shards' wait"]
    assert w["calls"] == 18 and 0 <= w["ms"] <= 2 * p["run_ms"], (w, p)
PY
done
echo "profile cli ok"
