#!/bin/sh
# mpi_train.sh ATTNC SOURCE_DIR - data-parallel training under mpirun:
# 2 ranks on this machine give the losses of one process with --shards 2
# to the bit (the shards' gradients are gathered and added in shard
# order on every rank), a run saved under MPI resumes under MPI to the
# same losses, a rank that fails ends the job with its rank named, and
# ranks given different trainings are refused. Every step that fails
# says which, with what the job printed.
set -eu
attnc=$1
cd "$2"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# Open MPI refuses root unless told; its own allocations are not ours
# to check for leaks.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export ASAN_OPTIONS=detect_leaks=0
mpi="mpirun -np 2 --oversubscribe --mca btl tcp,self -x ASAN_OPTIONS"
model=tests/cli/data/cls.g
losses() { sed 's/.*"loss": \([^,]*\), \(.*"valid_loss": [^,]*\)\{0,1\}.*/\1 \2/' "$1"; }
# fail WHAT FILE: says what failed, with the output FILE holds.
fail() {
	echo "mpi_train: $1; the output was:" >&2
	cat "$2" >&2
	exit 1
}
# run OUT CMD...: CMD must exit 0, its output kept in OUT.
run() {
	out=$1
	shift
	"$@" >"$out" 2>&1 || fail "'$*' exited $?" "$out"
}

run "$dir/one.out" "$attnc" $model --train --shards 2 --metrics "$dir/one.json"
run "$dir/two.out" $mpi "$attnc" $model --train --metrics "$dir/two.json"
losses "$dir/one.json" >"$dir/want"
losses "$dir/two.json" >"$dir/got"
diff -u "$dir/want" "$dir/got"
grep -q "in 2 shards of 8 rows" "$dir/two.out" ||
	fail "no 'in 2 shards of 8 rows' line" "$dir/two.out"
# Rank 0 alone prints the progress (on stderr): each epoch's line once.
test "$(grep -c '^epoch ' "$dir/two.out")" = 4 || {
	echo "the progress is printed by more than rank 0:" >&2
	cat "$dir/two.out" >&2
	exit 1
}

# Saved after 2 epochs under MPI (rank 0 writes), resumed under MPI
# (every rank reads) for the other 2.
run "$dir/save.out" $mpi "$attnc" $model --train --epochs 2 \
	--save "$dir/ck.safetensors" --metrics "$dir/resumed.json"
run "$dir/resume.out" $mpi "$attnc" $model --resume "$dir/ck.safetensors" \
	--epochs 4 --metrics "$dir/resumed.json"
losses "$dir/resumed.json" >"$dir/got"
diff -u "$dir/want" "$dir/got"

# A bad file: every rank says so with its rank, and the job fails. The
# ranks learn of it together before training, so neither is killed
# before it has said its error (rank 0's MPI_Abort once ended rank 1
# before it printed, now and then, under load).
if $mpi "$attnc" $model --train --data "$dir/missing.safetensors" \
	>"$dir/bad.out" 2>&1; then
	fail "a run with a missing data file exited 0" "$dir/bad.out"
fi
for rank in 0 1; do
	grep -q "^rank $rank: attnc: error: $dir/missing.safetensors: No such file" \
		"$dir/bad.out" || fail "rank $rank did not name the missing file" "$dir/bad.out"
done
! grep -q "MPI_ABORT" "$dir/bad.out" ||
	fail "ranks that all failed to start were aborted" "$dir/bad.out"
# Rank 1 alone fails (MPMD: it alone is given the missing file): it
# says why, rank 0 names it, and neither waits for the other.
mpmd="mpirun --oversubscribe --mca btl tcp,self -x ASAN_OPTIONS -np 1"
if timeout 120 $mpmd "$attnc" $model --train : -np 1 "$attnc" $model \
	--train --data "$dir/missing.safetensors" >"$dir/bad1.out" 2>&1; then
	fail "a run whose rank 1 has no data exited 0" "$dir/bad1.out"
fi
grep -q "^rank 1: attnc: error: $dir/missing.safetensors: No such file" \
	"$dir/bad1.out" || fail "rank 1 did not name the missing file" "$dir/bad1.out"
grep -q "^rank 0: attnc: error: MPI: rank 1 could not start training" \
	"$dir/bad1.out" || fail "rank 0 did not name rank 1" "$dir/bad1.out"
# Rank 0 alone fails before training (it alone writes --metrics):
# it says why and ends the job.
if timeout 120 $mpi "$attnc" $model --train \
	--metrics "$dir/no/such/dir/m.json" >"$dir/bad0.out" 2>&1; then
	fail "a run whose --metrics cannot be written exited 0" "$dir/bad0.out"
fi
grep -q "^rank 0: attnc: error: --metrics: cannot write" "$dir/bad0.out" ||
	fail "rank 0 did not say its --metrics error" "$dir/bad0.out"
# Ranks given another training (here --lr: each rank's steps would use
# its own, silently; --epochs: rank 1 used to wait forever for rank 0
# in the gather of an epoch rank 0 never ran) fail at once, saying what
# differs.
for flag in "--lr 0.05:optimizer (--lr, clip)" "--epochs 3:epochs (--epochs)"; do
	if timeout 120 $mpmd "$attnc" $model --train : -np 1 "$attnc" $model \
		--train ${flag%%:*} >"$dir/differ.out" 2>&1; then
		echo "ranks with ${flag%%:*} on one exited 0"
		exit 1
	fi
	grep -qF "rank 0: attnc: error: MPI: rank 1's ${flag#*:} differs from rank 0's" \
		"$dir/differ.out" || {
		cat "$dir/differ.out" >&2
		exit 1
	}
done
echo "mpi train ok"
