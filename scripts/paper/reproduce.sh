#!/usr/bin/env bash
# scripts/paper/reproduce.sh — the paper in miniature (docs/RESULTS.md) in one command: Table 1 (the
# ablation), Fig. 8 (quality and speed against the inner mini-batch size b) and Fig. 2 right (loss by
# position at long context), with their tables (CSV, JSON) and plots (PNG) in one results folder.
#
#   bash scripts/paper/reproduce.sh [--quick] [OUT]      (from the repository root, after building;
#                                                          OUT defaults to results/)
#
# Full: the settings of docs/RESULTS.md, 3 seeds each. It needs a GPU: about 25 minutes on an NVIDIA
# H100 with 16 CPU cores (ablate about 4.5 min of training, the b sweep 9 min with b = T on the CPU, the long-context
# runs 10.5 min). On a CPU alone it would take days.
# --quick: the same pipeline at toy budgets that run on a CPU in about 8 minutes on 2 cores
# (40 to 60 steps, shorter texts, 2 seeds). Its numbers are noisy and say little about the paper;
# it checks that the whole pipeline works before a long run.
# Plots need matplotlib (Debian: python3-matplotlib; the script uses /usr/bin/python3, or $PYTHON).
# Each part resumes where it stopped: run the same command again after an interruption.
set -uo pipefail
quick=0
if [[ ${1:-} == --quick ]]; then quick=1; shift; fi
out=${1:-results}
TTTLAB=${TTTLAB:-build/tttlab}
PYTHON=${PYTHON:-/usr/bin/python3}
here=$(dirname "$0")
export TTTLAB
[[ -x $TTTLAB ]] || { echo "reproduce.sh: $TTTLAB not found; build first (bash scripts/test.sh or cmake --build build)" >&2; exit 2; }
mkdir -p "$out"
start=$SECONDS
if (( quick )); then
  ablate_args=(--steps 60 --seq-len 128 --batch 8 --seeds 2 --eval-windows 32)
  export STEPS=60 SEQ_LEN=128 BS="1 4 16" CPU_BS=128 SEEDS="0 1" DEVICE=auto  # the b sweep
  long_env=(STEPS=40 SEQ_LEN=512 WINDOWS=8 SEEDS="0 1" DEVICE=auto)
else
  ablate_args=(--steps 300 --seq-len 256 --seeds 3 --gpu-gemm fp32)
  export STEPS=600 SEQ_LEN=512 SEEDS="0 1 2" DEVICE=cuda
  long_env=(STEPS=2000 SEQ_LEN=2048 WINDOWS=64 SEEDS="0 1 2" DEVICE=cuda)
fi

echo "== Table 1 in miniature (tttlab ablate ${ablate_args[*]})"
if [[ ! -s $out/table1.json ]]; then
  "$TTTLAB" ablate "${ablate_args[@]}" --json > "$out/table1.json.tmp" && mv "$out/table1.json.tmp" "$out/table1.json" ||
    echo "reproduce.sh: ablate failed" >&2
fi

echo "== Fig. 8 in miniature (scripts/paper/minibatch_sweep.sh)"
bash "$here/minibatch_sweep.sh" "$out/minibatch"

echo "== Fig. 2 right in miniature (scripts/paper/long_context.sh)"
env "${long_env[@]}" bash "$here/long_context.sh" "$out/long"

echo "== plots"
"$PYTHON" "$here/plots.py" "$out" || echo "reproduce.sh: no plots (see above)" >&2
echo "reproduce.sh: done in $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s; results in $out/"
