#!/usr/bin/env bash
# `tttlab train` writes metrics.jsonl records whose keys (in order) are exactly those of
# tests/metrics_keys.txt: a step record, an evaluation record, and the final evaluation (with the loss
# by position). The app's Training module is held to the same file (tests/app/test_model_modules.cpp),
# so the CLI and the app write the same schema.
#   test_metrics_keys.sh <tttlab executable> <metrics_keys.txt>
set -euo pipefail
exe=$1
keys_file=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for i in $(seq 1 200); do echo "the cat sat on the mat $i times, and the dog ran after it."; done >"$work/text.txt"
"$exe" train --data "$work/text.txt" --hidden-size 32 --heads 2 --layers 2 --intermediate-size 64 -b 8 \
  --seq-len 32 --batch 2 --steps 4 --eval-every 2 --eval-windows 2 --threads 1 --seed 1 --out "$work/run" >/dev/null
# The key list of each record, in order: "step loss lr ..." (keys are the quoted names before a colon).
keys_of() { while IFS= read -r line; do grep -o '"[a-z_]*":' <<<"$line" | tr -d '":' | paste -sd' '; done <"$1"; }
keys_of "$work/run/metrics.jsonl" | sort -u >"$work/got.txt"
sort -u "$keys_file" >"$work/want.txt"
if ! diff "$work/want.txt" "$work/got.txt"; then
  echo "FAIL: metrics.jsonl key lists (< expected, > written)"; cat "$work/run/metrics.jsonl"; exit 1
fi
[[ $(grep -c '"loss"' "$work/run/metrics.jsonl") -eq 4 ]] || { echo "FAIL: expected 4 step records"; exit 1; }
echo "ok: every record of the CLI's metrics.jsonl has one of the expected key lists, and each list occurs"
