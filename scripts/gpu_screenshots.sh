#!/usr/bin/env bash
# The desktop app's computing panels rendered on a GPU machine: docs/screenshots/gpu/*.png.
#
#   bash scripts/gpu_screenshots.sh [TTTLAB] [OUT_DIR]     (defaults: build-cuda/tttlab, docs/screenshots/gpu)
#
# Needs a CUDA GPU and the GPU's OpenGL driver through EGL (libEGL.so.1 and NVIDIA's EGL vendor
# library): the app renders headless (TTTLAB_GL=egl), no X server. It first trains a 125m TTT-Linear
# model for a few steps at T = 2048 on the GPU (a model of that size to evaluate and inspect, not a good
# one), then opens each panel from a state file with "compute": "gpu" and waits for it to finish.
# The state files it uses are written next to the pictures (*.tttlab), so each view can be opened again
# in the app on any GPU machine (`tttlab gui --state docs/screenshots/gpu/evaluation.tttlab`, from the
# repository's folder); the 125m views read the model from runs/gpu-125m, which this script trains when
# it is not there.
set -euo pipefail
TTTLAB=${1:-build-cuda/tttlab}
OUT=${2:-docs/screenshots/gpu}
mkdir -p "$OUT"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export TTTLAB_GL=egl

M125=runs/gpu-125m
if [ ! -d "$M125" ]; then
  echo "== a 125m TTT-Linear model, 40 steps at T = 2048 on the GPU"
  "$TTTLAB" train --preset 125m --layer ttt-linear --backbone m --data brown --steps 40 --seq-len 2048 \
    --batch 8 --device cuda --eval-every 0 --out "$M125" >"$WORK/train.log" 2>&1 || {
    tail -5 "$WORK/train.log"
    exit 1
  }
  tail -2 "$WORK/train.log"
fi

LONG_TEXT="Every evening the keeper climbed the stairs of the old lighthouse, counted the steps, and lit the lamp. He counted them again on the way down. There were always one hundred and twelve steps, and he was always glad when the number came out the same, because the sea changed every night and the stairs did not. "

state() {  # state NAME PANEL PANEL_JSON
  cat >"$OUT/$1.tttlab" <<EOF
{"format": "tttlab-state", "version": 1, "compute": "gpu", "active_panel": "$2",
 "panels": {"$2": $3}}
EOF
}
shot() {  # shot NAME PANEL
  echo "== $1"
  "$TTTLAB" gui --device gpu --state "$OUT/$1.tttlab" --panel "$2" --screenshot "$OUT/$1.png" \
    --frames 10 --size 1600x1000
}

state primal_dual primal_dual "{\"head\": {\"source\": \"model\", \"model_id\": \"file:$M125\", \"block\": 5, \"head\": 3,
  \"text\": \"$LONG_TEXT\", \"repeat\": 2}, \"precision\": \"double\", \"timing_reps\": 5}"
shot primal_dual primal_dual

state primal_dual_theorem1 primal_dual "{\"head\": {\"source\": \"model\", \"model_id\": \"shipped\", \"block\": 1, \"head\": 2,
  \"text\": \"$LONG_TEXT\", \"repeat\": 2}, \"precision\": \"double\", \"timing_reps\": 9, \"linear_attention\": true}"
shot primal_dual_theorem1 primal_dual

state minibatch minibatch '{"mode": "evaluate", "model_id": "shipped", "seq_len": 1024, "windows": 8}'
shot minibatch minibatch

state evaluation evaluation "{\"models\": [\"file:$M125\", \"shipped\"], \"data\": \"brown\", \"seq_len\": 2048, \"windows\": 64}"
shot evaluation evaluation

state inner_curves inner_curves "{\"model_id\": \"file:$M125\", \"data\": \"brown\", \"seq_len\": 2048, \"sequences\": 2}"
shot inner_curves inner_curves

state evolution evolution "{\"head\": {\"source\": \"model\", \"model_id\": \"file:$M125\", \"block\": 5, \"head\": 3,
  \"text\": \"$LONG_TEXT\", \"repeat\": 6}}"
shot evolution evolution

state generation generation '{"model_id": "shipped", "prompt": "The keeper climbed the stairs and ", "temperature": 0.8,
  "top_k": 20, "seed": 3, "max_tokens": 600, "tokens_per_second": 1000000}'
shot generation generation

echo "wrote $(ls "$OUT"/*.png | wc -l) screenshots to $OUT"
