#!/usr/bin/env bash
# A Mamba-2 model through the command line as a user runs it: `tttlab train --layer mamba2` trains on
# the CPU (the loss falls) and saves a checkpoint, `eval` scores it, `generate` decodes from it
# (greedy twice gives the same text), and `--backbone m` with mamba2 is refused with its reason.
#   test_mamba2_run.sh <tttlab executable>
set -euo pipefail
exe=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for i in $(seq 1 400); do echo "the cat sat on the mat $i times, and the dog ran after it."; done >"$work/text.txt"
model=(--layer mamba2 --hidden-size 32 --heads 2 --layers 2 --intermediate-size 64 --mamba2-d-state 16
       --mamba2-headdim 16 --mamba2-chunk 8)

"$exe" train --data "$work/text.txt" "${model[@]}" --seq-len 32 --batch 4 --steps 40 --lr 1e-2 --threads 2 \
  --eval-windows 2 --seed 3 --device cpu --out "$work/run" >"$work/train.log" 2>&1 ||
  { echo "FAIL: train exited $?"; cat "$work/train.log"; exit 1; }
grep -q '"tttlab_seq_layer": "mamba2"' "$work"/run/*/config.json ||
  { echo "FAIL: the checkpoint's config.json does not name mamba2"; ls -R "$work/run"; exit 1; }
# grep -m1, not `grep | head -1`: under pipefail head's early exit can end grep with SIGPIPE, which
# failed this script about once in 30 runs.
first=$(grep -m1 '"loss"' "$work/run/metrics.jsonl" | sed -E 's/.*"loss":([0-9.eE+-]*).*/\1/')
last=$(grep '"loss"' "$work/run/metrics.jsonl" | tail -1 | sed -E 's/.*"loss":([0-9.eE+-]*).*/\1/')
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 1.0) }' ||
  { echo "FAIL: the training loss did not fall (first $first, last $last)"; exit 1; }

"$exe" eval --checkpoint "$work/run" --data "$work/text.txt" --windows 4 --device cpu --json >"$work/eval.json" 2>"$work/eval.log" ||
  { echo "FAIL: eval exited $?"; cat "$work/eval.log"; exit 1; }
grep -q '"val_loss"' "$work/eval.json" || { echo "FAIL: eval printed no loss"; cat "$work/eval.json"; exit 1; }

gen() { "$exe" generate --checkpoint "$work/run" --prompt "the cat " --tokens 24 --temperature 0 --device cpu 2>/dev/null; }
a=$(gen) || { echo "FAIL: generate exited $?"; exit 1; }
b=$(gen)
[[ -n "$a" && "$a" == "$b" ]] || { echo "FAIL: greedy decoding gave '$a' then '$b'"; exit 1; }

rc=0
"$exe" train --data "$work/text.txt" "${model[@]}" --backbone m --out "$work/m" >/dev/null 2>"$work/m.log" || rc=$?
[[ $rc -eq 2 ]] && grep -q "Transformer backbone" "$work/m.log" ||
  { echo "FAIL: --backbone m with mamba2 gave exit $rc:"; cat "$work/m.log"; exit 1; }
echo "ok: trained mamba2 from $first to $last nats, evaluated, decoded '$a' twice, refused --backbone m"
