#!/usr/bin/env bash
# One device call for the attention baselines (docs/KERNELS.md, "Attention baselines"): kernel tests,
# train tests, the kernel and whole-model benches, a short CLI training run, compute-sanitizer (quick
# mode). Run from a folder holding tttlab_gpu_tests, tttlab_ttt_bench and tttlab; logs go to $OUT.
# (Run 14's call 3 ran the CLI step without --out, which tttlab refused as a usage error.)
set -u
OUT=${OUT:-./out}; mkdir -p "$OUT"
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
echo "== attention kernel tests"
timeout 50 ./tttlab_gpu_tests --gtest_filter='Attention*' > "$OUT/attn-tests.log" 2>&1; echo "attn tests rc=$?"
grep -E "INFO|FAILED|PASSED|Failure|OK \]" "$OUT/attn-tests.log" | head -40
grep -A3 "Failure" "$OUT/attn-tests.log" | head -30
echo "== train tests"
timeout 80 ./tttlab_gpu_tests --gtest_filter='TrainCuda.*' > "$OUT/train-tests.log" 2>&1; echo "train tests rc=$?"
grep -E "attention|FAILED|PASSED|Failure|OK \]" "$OUT/train-tests.log" | head -40
echo "== kernel bench"
timeout 30 ./tttlab_ttt_bench --no-mlp --repeats 20 > "$OUT/bench.log" 2>&1; echo "bench rc=$?"; cat "$OUT/bench.log"
echo "== whole-model bench, softmax-attention"
timeout 50 ./tttlab bench --device cuda --layer softmax-attention > "$OUT/model-bench-softmax.log" 2>&1; echo "model bench rc=$?"; grep -A8 "Whole-model" "$OUT/model-bench-softmax.log"
echo "== whole-model bench, linear-attention"
timeout 40 ./tttlab bench --device cuda --layer linear-attention > "$OUT/model-bench-linear.log" 2>&1; echo "model bench rc=$?"; grep -A8 "Whole-model" "$OUT/model-bench-linear.log"
echo "== CLI: tttlab train --device cuda --layer softmax-attention"
timeout 25 ./tttlab train --device cuda --layer softmax-attention --data mqar --steps 30 --out "$OUT/cli-run" > "$OUT/cli-train.log" 2>&1; echo "cli train rc=$?"; head -8 "$OUT/cli-train.log"; tail -4 "$OUT/cli-train.log"
CS=/usr/local/cuda/bin/compute-sanitizer
for tool in memcheck racecheck; do
  TTTLAB_GPU_TEST_QUICK=1 timeout 30 $CS --tool $tool --error-exitcode 7 ./tttlab_gpu_tests --gtest_filter='Attention.ForwardAndBackward*:Attention.Arguments*' > "$OUT/$tool.log" 2>&1
  echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/$tool.log" | head -6
done
