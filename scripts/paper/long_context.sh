#!/usr/bin/env bash
# scripts/paper/long_context.sh — the paper's Fig. 2 (right) in miniature: sequence layers trained at
# T = 2048 with the same budget, and their validation loss at every token position. Its seed-0 runs
# are the long-context models that ship in assets/models (long-*), which the course's lessons 8, 9,
# 12 and 13 open.
#
#   bash scripts/paper/long_context.sh OUT_DIR            (from the repository root, after building)
#
# Environment (defaults in brackets):
#   TTTLAB [build/tttlab]   SEEDS ["0 1 2"] (run at once, one process each)   STEPS [2000]
#   LAYERS ["ttt-linear:m ttt-mlp:m ttt-linear:t softmax-attention:t linear-attention:t mamba2:t"]
#   (layer:backbone)
#   DEVICE [cuda]           DATA_DIR [data/brown]   WINDOWS [64] (validation windows of SEQ_LEN bytes)
#   SEQ_LEN [2048]          THREADS [0: all] (CPU runs)
# Writes OUT_DIR/seed<s>/<layer>-<backbone>/ (a `tttlab train` run directory, with eval.json from
# `tttlab eval --json`), then long_context_summary.py writes OUT_DIR/long-context.csv (mean loss by
# position over the seeds, per layer) and prints the table of docs/RESULTS.md. A run that already has
# its eval.json is skipped, so an interrupted sweep resumes.
set -uo pipefail
out=${1:?usage: long_context.sh OUT_DIR}
TTTLAB=${TTTLAB:-build/tttlab}
SEEDS=${SEEDS:-"0 1 2"}
STEPS=${STEPS:-2000}
LAYERS=${LAYERS:-"ttt-linear:m ttt-mlp:m ttt-linear:t softmax-attention:t linear-attention:t mamba2:t"}
DEVICE=${DEVICE:-cuda}
DATA_DIR=${DATA_DIR:-data/brown}
WINDOWS=${WINDOWS:-64}
SEQ_LEN=${SEQ_LEN:-2048}
THREADS=${THREADS:-0}
mkdir -p "$out"

run_seed() {  # seed: every layer, one after the other
  local seed=$1 lb layer backbone dir
  for lb in $LAYERS; do
    layer=${lb%%:*}; backbone=${lb##*:}
    dir="$out/seed$seed/$layer-$backbone"
    [[ -s "$dir/eval.json" ]] && continue
    rm -rf "$dir"; mkdir -p "$out/seed$seed"
    local t0=$SECONDS
    if "$TTTLAB" train --preset tiny --layer "$layer" --backbone "$backbone" --seq-len "$SEQ_LEN" --batch 8 \
        --steps "$STEPS" --lr 0.004 --seed "$seed" --data brown --data-dir "$DATA_DIR" --eval-every "$STEPS" \
        --eval-windows "$WINDOWS" --device "$DEVICE" --threads "$THREADS" --out "$dir" > "$dir.log" 2>&1 &&
       "$TTTLAB" eval --checkpoint "$dir" --data-dir "$DATA_DIR" --seq-len "$SEQ_LEN" --windows "$WINDOWS" \
        --device "$DEVICE" --threads "$THREADS" --json > "$dir/eval.json.tmp"; then
      mv "$dir/eval.json.tmp" "$dir/eval.json"
      echo "seed $seed $layer ($backbone): trained and evaluated in $((SECONDS - t0)) s"
    else
      echo "seed $seed $layer ($backbone): FAILED, see $dir.log" >&2
    fi
  done
}

for s in $SEEDS; do run_seed "$s" & done
wait
python3 "$(dirname "$0")/long_context_summary.py" "$out"
