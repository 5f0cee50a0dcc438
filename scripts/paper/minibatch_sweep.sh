#!/usr/bin/env bash
# scripts/paper/minibatch_sweep.sh — the paper's Fig. 8 in miniature: validation quality against the
# inner mini-batch size b, each b trained from the same seeds, plus the training speed of each b.
#
#   bash scripts/paper/minibatch_sweep.sh OUT_DIR            (from the repository root, after building)
#
# Environment (defaults in brackets):
#   TTTLAB [build/tttlab]   the executable      SEEDS ["0 1 2"]     STEPS [600]      SEQ_LEN [512]
#   BS ["1 2 4 8 16 32 64"] b on the device     CPU_BS [SEQ_LEN]    b trained on the CPU ("" for none; b = T: the
#   GPU kernels take b ≤ 64)                    PRESET [tiny]       BACKBONE [m]     LR [0.004]
#   DEVICE [auto]           device for BS       CPU_JOBS [3]        CPU runs at once (threads split)
# Writes OUT_DIR/runs/b<b>-s<seed>/ (each a `tttlab train` run directory) and, through
# minibatch_summary.py, OUT_DIR/minibatch.csv (one row per run) and OUT_DIR/minibatch-summary.csv
# (mean and sample sd over the seeds per b). A run whose directory already holds a finished metrics
# file is skipped, so an interrupted sweep resumes.
set -uo pipefail
out=${1:?usage: minibatch_sweep.sh OUT_DIR}
TTTLAB=${TTTLAB:-build/tttlab}
SEEDS=${SEEDS:-"0 1 2"}
STEPS=${STEPS:-600}
SEQ_LEN=${SEQ_LEN:-512}
BS=${BS:-"1 2 4 8 16 32 64"}
CPU_BS=${CPU_BS-$SEQ_LEN}
PRESET=${PRESET:-tiny}
BACKBONE=${BACKBONE:-m}
LR=${LR:-0.004}
DEVICE=${DEVICE:-auto}
CPU_JOBS=${CPU_JOBS:-3}
DATA_DIR=${DATA_DIR:-data/brown}
mkdir -p "$out/runs"
threads=$(( $(nproc) / CPU_JOBS )); (( threads < 1 )) && threads=1

run() {  # b seed device threads
  local dir="$out/runs/b$1-s$2"
  if [[ -f "$dir/metrics.jsonl" ]] && grep -q "\"step\":$STEPS,\"val_loss\"" "$dir/metrics.jsonl"; then return 0; fi
  rm -rf "$dir"
  "$TTTLAB" train --preset "$PRESET" --backbone "$BACKBONE" --layer ttt-linear -b "$1" --seq-len "$SEQ_LEN" \
    --steps "$STEPS" --lr "$LR" --seed "$2" --data brown --data-dir "$DATA_DIR" --eval-every "$STEPS" \
    --eval-windows 0 --device "$3" --threads "$4" --out "$dir" > "$dir.log" 2>&1
  echo "b=$1 seed=$2 device=$3 rc=$? $(tail -1 "$dir.log")"
}

# The CPU runs (b = T) in the background, the device runs in the foreground.
pids=()
for b in $CPU_BS; do
  for s in $SEEDS; do
    run "$b" "$s" cpu "$threads" &
    pids+=($!)
    while (( $(jobs -rp | wc -l) >= CPU_JOBS + 1 )); do sleep 1; done
  done
done
for b in $BS; do
  for s in $SEEDS; do run "$b" "$s" "$DEVICE" 1; done
done
wait "${pids[@]}"
python3 "$(dirname "$0")/minibatch_summary.py" "$out"
