#!/usr/bin/env bash
# A fast-weight layer's models through the command line as a user runs them: `tttlab train --layer
# <layer>` trains on the CPU (the loss falls) and saves checkpoints whose config.json names the layer
# (and keeps the given fragment), `--resume` from the middle checkpoint repeats the rest of the run's
# losses exactly, `eval` scores it, `generate` decodes from it (greedy twice gives the same text), and
# `--backbone m` is refused with its reason. A layer without GPU kernels (none today) would be refused
# on `--device cuda` for train, eval and generate with the one-line reason before a GPU is looked for;
# every layer here generates on `--device cuda` the CPU's greedy text where there is a GPU, and
# without one exits 1 with the device's one-line reason (not a usage error); titans and lact also
# train two steps on `--device cuda` where there is a GPU (exit 1 with that reason without one).
#   test_layer_run.sh <tttlab executable> <layer> <config.json fragment, or -> [model options...]
# e.g. test_layer_run.sh build/tttlab titans '"mini_batch_size": 8' --mini-batch 8
set -euo pipefail
exe=$1
layer=$2
fragment=$3
shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for i in $(seq 1 400); do echo "the cat sat on the mat $i times, and the dog ran after it."; done >"$work/text.txt"

model=(--layer "$layer" --hidden-size 32 --heads 2 --layers 2 --intermediate-size 64 "$@")
run="$work/run-$layer"
"$exe" train --data "$work/text.txt" "${model[@]}" --seq-len 32 --batch 4 --steps 40 --lr 1e-2 --threads 2 \
  --eval-windows 2 --seed 3 --device cpu --checkpoint-every 20 --keep-checkpoints 0 --out "$run" >"$work/train.log" 2>&1 ||
  { echo "FAIL: train --layer $layer exited $?"; cat "$work/train.log"; exit 1; }
grep -q "\"tttlab_seq_layer\": \"$layer\"" "$run"/*/config.json ||
  { echo "FAIL: the checkpoint's config.json does not name $layer"; ls -R "$run"; exit 1; }
if [[ "$fragment" != "-" ]]; then
  grep -qF "$fragment" "$run"/*/config.json ||
    { echo "FAIL: the checkpoint's config.json does not keep $fragment"; exit 1; }
fi
first=$(grep -m1 '"loss"' "$run/metrics.jsonl" | sed -E 's/.*"loss":([0-9.eE+-]*).*/\1/')
last=$(grep '"loss"' "$run/metrics.jsonl" | tail -1 | sed -E 's/.*"loss":([0-9.eE+-]*).*/\1/')
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 1.0) }' ||
  { echo "FAIL: $layer's training loss did not fall (first $first, last $last)"; exit 1; }

# Resume from step 20: the same losses for steps 21..40, to the last digit. On the CPU as the run
# itself: a resume picks its device afresh (auto: a GPU that can train the layer), and the GPU's sums
# are not the CPU's bits.
cp -r "$run" "$work/resumed"
echo step-0000020 >"$work/resumed/latest"
"$exe" train --resume "$work/resumed" --device cpu >"$work/resume.log" 2>&1 ||
  { echo "FAIL: train --resume of $layer exited $?"; cat "$work/resume.log"; exit 1; }
losses() { grep '"loss"' "$1" | sed -E 's/^\{"step":([0-9]+),"loss":([^,]*),.*/\1 \2/' | sort -n; }
[[ $(losses "$run/metrics.jsonl" | wc -l) -eq 40 ]] || { echo "FAIL: the run logged no 40 losses"; exit 1; }
diff <(losses "$run/metrics.jsonl") <(losses "$work/resumed/metrics.jsonl") >"$work/resume.diff" ||
  { echo "FAIL: $layer resumed from step 20 gave other losses:"; head "$work/resume.diff"; exit 1; }

"$exe" eval --checkpoint "$run" --data "$work/text.txt" --windows 4 --device cpu --json >"$work/eval.json" 2>"$work/eval.log" ||
  { echo "FAIL: eval of $layer exited $?"; cat "$work/eval.log"; exit 1; }
grep -q '"val_loss"' "$work/eval.json" || { echo "FAIL: eval printed no loss"; cat "$work/eval.json"; exit 1; }

gen() { "$exe" generate --checkpoint "$run" --prompt "the cat " --tokens 24 --temperature 0 --device cpu 2>/dev/null; }
a=$(gen) || { echo "FAIL: generate from $layer exited $?"; exit 1; }
b=$(gen)
[[ -n "$a" && "$a" == "$b" ]] || { echo "FAIL: greedy decoding of $layer gave '$a' then '$b'"; exit 1; }

# --device cuda: a usage error (exit 2) naming the missing kernels (or decoder), on a machine with or
# without a GPU.
missing="no GPU kernels"
expect_refusal() {
  local what=$1; shift
  local rc=0
  "$@" >/dev/null 2>"$work/cuda.log" || rc=$?
  [[ $rc -eq 2 ]] && grep -q "$layer has $missing yet (a later issue)" "$work/cuda.log" ||
    { echo "FAIL: $what --device cuda with $layer gave exit $rc:"; cat "$work/cuda.log"; exit 1; }
}
# Where there is a GPU: train two steps there (titans, lact) or decode the CPU's greedy text there
# (deltanet, gated-deltanet, titans); without one, exit 1 with the device's one-line reason.
cuda_train() {
  local rc=0
  "$exe" train --data "$work/text.txt" "${model[@]}" --seq-len 32 --batch 4 --steps 2 --threads 2 \
    --device cuda --out "$work/cuda-$layer" >"$work/cuda.out" 2>"$work/cuda.log" || rc=$?
  if [[ $rc -eq 0 ]]; then
    cuda_note="trained on the GPU"
  else
    [[ $rc -eq 1 ]] && grep -q "^.*--device cuda: .*CUDA" "$work/cuda.log" ||
      { echo "FAIL: train --device cuda with $layer gave exit $rc:"; cat "$work/cuda.out" "$work/cuda.log"; exit 1; }
    cuda_note="no GPU for train --device cuda"
  fi
}
cuda_generate() {
  local rc=0 note
  "$exe" generate --checkpoint "$run" --prompt "the cat " --tokens 24 --temperature 0 --device cuda \
    >"$work/cuda.out" 2>"$work/cuda.log" || rc=$?
  if [[ $rc -eq 0 ]]; then
    [[ "$(cat "$work/cuda.out")" == "$a" ]] ||
      { echo "FAIL: greedy generate --device cuda with $layer gave '$(cat "$work/cuda.out")', the CPU '$a'"; exit 1; }
    note="decoded the same text on the GPU"
  else
    [[ $rc -eq 1 && $(wc -l <"$work/cuda.log") -eq 1 ]] && grep -q "^.*--device cuda: .*CUDA" "$work/cuda.log" ||
      { echo "FAIL: generate --device cuda with $layer gave exit $rc:"; cat "$work/cuda.out" "$work/cuda.log"; exit 1; }
    note="no GPU for generate --device cuda"
  fi
  cuda_note="${cuda_note:+$cuda_note, }$note"
}
case $layer in
  deltanet | gated-deltanet)
    cuda_generate
    ;;
  titans | lact)
    cuda_train
    cuda_generate
    ;;
  *)
    expect_refusal train "$exe" train --data "$work/text.txt" "${model[@]}" --steps 2 --device cuda --out "$work/cuda-$layer"
    [[ ! -e "$work/cuda-$layer" ]] || { echo "FAIL: the refused run wrote $work/cuda-$layer"; exit 1; }
    expect_refusal eval "$exe" eval --checkpoint "$run" --data "$work/text.txt" --windows 2 --device cuda
    expect_refusal generate "$exe" generate --checkpoint "$run" --prompt "the " --tokens 4 --device cuda
    cuda_note="refused --device cuda"
    ;;
esac
# --backbone m: refused, naming the Transformer backbone these layers use.
rc=0
"$exe" train --data "$work/text.txt" "${model[@]}" --backbone m --out "$work/m" >/dev/null 2>"$work/m.log" || rc=$?
[[ $rc -eq 2 ]] && grep -q "Transformer backbone" "$work/m.log" ||
  { echo "FAIL: --backbone m with $layer gave exit $rc:"; cat "$work/m.log"; exit 1; }
echo "ok: trained $layer from $first to $last nats, resumed exactly, evaluated, decoded '$a' twice, $cuda_note and --backbone m"
