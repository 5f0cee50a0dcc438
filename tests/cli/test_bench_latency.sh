#!/usr/bin/env bash
# `tttlab bench --latency` (Fig. 3 in miniature) from the command line. On any machine: the refusals
# (each one line, exit status 2, nothing measured), and the plan's rows and CSV format (--plan uses no
# GPU). With a GPU (TTTLAB_LATENCY_GPU=1, or a GPU the executable can use): a short real run on the
# tiny preset, whose CSV must hold a measured number for every row it did not skip with a reason.
#   test_bench_latency.sh <tttlab executable>
set -euo pipefail
exe=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# refuse <expected stderr regex> <args...>: exit status 2 and one line of stderr matching the regex.
refuse() {
  local want=$1 rc=0
  shift
  "$exe" bench "$@" >"$work/out" 2>"$work/err" || rc=$?
  [[ $rc -eq 2 ]] || { echo "FAIL: bench $* exited $rc, expected 2"; cat "$work/err"; exit 1; }
  grep -Eq -- "$want" "$work/err" || { echo "FAIL: bench $*: stderr does not match '$want':"; cat "$work/err"; exit 1; }
  [[ $(wc -l <"$work/err") -le 1 ]] || { echo "FAIL: bench $*: more than one line on stderr"; cat "$work/err"; exit 1; }
}
refuse "--latency measures the GPU: use it with --device cuda" --latency
refuse "--latency measures the GPU: use it with --device cuda" --latency --device cpu --plan
refuse "--lengths requires --latency" --device cuda --lengths 1024
refuse "--csv requires --latency" --device cuda --csv "$work/x.csv"
refuse "--lengths: 1000 is not a multiple of 64" --device cuda --latency --lengths 1024 1000
refuse "--lengths: 0 is not a multiple of 64" --device cuda --latency --lengths 0
refuse "--lengths: 131072 is not a multiple of 64 in \[64, 65536\]" --device cuda --latency --lengths 131072
refuse "--decode-max-context: -1 is not in" --device cuda --latency --decode-max-context=-1
refuse "--phases: 'both' is not all, prefill or decode" --device cuda --latency --phases both
refuse "--decode-fill: 'jump' is not walk or skip" --device cuda --latency --decode-fill jump
refuse "--decode-products: 'tf32' is not cublas or exact" --device cuda --latency --decode-products tf32
refuse "--decode-products requires --latency" --device cuda --decode-products exact
refuse "--phases requires --latency" --device cuda --phases decode
refuse "one preset" --device cuda --latency --presets tiny small
refuse "--csv: the folder '$work/none' does not exist" --device cuda --latency --csv "$work/none/x.csv"
refuse "--latency excludes" --device cuda --latency --training-only
refuse "--latency excludes" --device cuda --latency --gpus 2
[[ ! -e "$work/x.csv" ]] || { echo "FAIL: a refused run wrote its CSV"; exit 1; }

# The plan: every layer's prefill and decode rows (batches 1, 16, 512), in the CSV's format,
# duplicates of --lengths merged.
"$exe" bench --device cuda --latency --plan --lengths 4096 1024 4096 --decode-max-context 2048 \
  --csv "$work/plan.csv" >"$work/plan.txt" 2>"$work/plan.err" ||
  { echo "FAIL: --plan exited $?"; cat "$work/plan.err"; exit 1; }
header='layer,phase,batch,T,median_us_per_token,q1_us,q3_us,min_us,max_us,repeats,median_us_per_step,context,products,status'
[[ $(head -1 "$work/plan.csv") == "$header" ]] || { echo "FAIL: CSV header:"; head -1 "$work/plan.csv"; exit 1; }
# 4 layers x (2 prefill + 2 x 3 decode (batches 1, 16, 512)) = 32 rows.
[[ $(tail -n +2 "$work/plan.csv" | wc -l) -eq 32 ]] || { echo "FAIL: plan rows:"; cat "$work/plan.csv"; exit 1; }
# The batched decode rows name their products (cublas by default); the others leave the field empty.
for want in 'ttt-linear,prefill,16,1024,,,,,,,,,,planned' 'ttt-mlp,prefill,16,4096,,,,,,,,,,planned' \
            'softmax-attention,decode,1,1024,,,,,,,,,,planned' \
            'mamba2,decode,1,4096,,,,,,,,,,skipped: beyond --decode-max-context' \
            'ttt-mlp,decode,16,1024,,,,,,,,,cublas,planned' 'mamba2,decode,512,1024,,,,,,,,,cublas,planned' \
            'softmax-attention,decode,512,4096,,,,,,,,,cublas,skipped: beyond --decode-max-context'; do
  grep -qxF -- "$want" "$work/plan.csv" || { echo "FAIL: no CSV row '$want':"; cat "$work/plan.csv"; exit 1; }
done
grep -q "random weights" "$work/plan.txt" || { echo "FAIL: the plan does not say the weights are random"; exit 1; }
"$exe" bench --device cuda --latency --plan --layer mamba2 --json >"$work/plan.json"
grep -q '"plan": true' "$work/plan.json" && [[ $(grep -c '"layer": "mamba2"' "$work/plan.json") -eq 24 ]] ||
  { echo "FAIL: --plan --layer mamba2 --json:"; cat "$work/plan.json"; exit 1; }
"$exe" bench --device cuda --latency --plan --layer ttt-linear --lengths 1024 --decode-products exact \
  --csv "$work/eplan.csv" >/dev/null
grep -qxF 'ttt-linear,decode,512,1024,,,,,,,,,exact,planned' "$work/eplan.csv" ||
  { echo "FAIL: --decode-products exact plan:"; cat "$work/eplan.csv"; exit 1; }
# --phases decode plans the decode rows only: 6 lengths x 3 batches.
"$exe" bench --device cuda --latency --plan --layer ttt-mlp --phases decode --csv "$work/dplan.csv" >/dev/null
[[ $(tail -n +2 "$work/dplan.csv" | wc -l) -eq 18 ]] && ! grep -q ',prefill,' "$work/dplan.csv" ||
  { echo "FAIL: --phases decode plan:"; cat "$work/dplan.csv"; exit 1; }

# A real run, where a GPU is there.
rc=0
"$exe" bench --device cuda --latency --presets tiny --lengths 128 256 --csv "$work/run.csv" --json \
  >"$work/run.json" 2>"$work/run.err" || rc=$?
if [[ $rc -ne 0 ]]; then
  # No GPU here, or a build without the CUDA kernels (the sanitizer and browser presets).
  if [[ "${TTTLAB_LATENCY_GPU:-0}" != 1 ]] &&
    grep -Eq "no usable CUDA device|this build has no CUDA kernels" "$work/run.err"; then
    echo "ok: refusals and plan checked; the measured run skipped (no GPU: $(head -1 "$work/run.err"))"
    exit 0
  fi
  echo "FAIL: the measured run exited $rc"; cat "$work/run.err"; exit 1
fi
[[ $(head -1 "$work/run.csv") == "$header" ]] || { echo "FAIL: measured CSV header"; exit 1; }
# Every row is measured (a positive median, min <= median <= max) or skipped with a reason.
# Decode rows: the step time is the per-token time times the batch, and the context says how it came;
# the batched ones name their products (cublas, the default), the others none.
awk -F, 'NR > 1 { if (($2 == "decode" && $3 > 1) != ($13 == "cublas") || ($13 != "cublas" && $13 != "")) { print "bad products: " $0; bad = 1 }
                  if ($14 == "ok") { if (!($5 > 0 && $8 <= $5 && $5 <= $9 && $10 >= 5)) { print "bad row: " $0; bad = 1 } ; ok++
                                     if ($2 == "decode" && !($11 > 0 && ($11 - $5 * $3) ^ 2 <= (1e-3 * $11) ^ 2 + 1e-6 && ($12 == "walked" || $12 == "set"))) { print "bad decode row: " $0; bad = 1 } }
                  else if ($14 !~ /^"?skipped: /) { print "bad status: " $0; bad = 1 } }
         END { if (ok < 10) { print "only " ok " measured rows"; bad = 1 }; exit bad }' "$work/run.csv" ||
  { cat "$work/run.csv"; exit 1; }
for want in '^ttt-linear,prefill,[0-9]+,128,[0-9.]+' '^ttt-linear,decode,1,256,[0-9.]+' '^mamba2,prefill,16,256,[0-9.]+' \
            '^mamba2,decode,1,128,[0-9.]+' '^softmax-attention,prefill,16,256,[0-9.]+' \
            '^ttt-mlp,decode,16,256,[0-9.]+' '^softmax-attention,decode,512,128,[0-9.]+' \
            '^mamba2,decode,512,256,[0-9.]+.*,set,cublas,ok$'; do
  grep -Eq -- "$want" "$work/run.csv" || { echo "FAIL: no measured row '$want':"; cat "$work/run.csv"; exit 1; }
done
grep -q '"decode_walk_tokens_per_s"' "$work/run.json" || { echo "FAIL: JSON without the walk rate"; exit 1; }
echo "ok: refusals, plan and a measured run on the GPU ($(tail -n +2 "$work/run.csv" | wc -l) rows)"
