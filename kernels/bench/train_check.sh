#!/usr/bin/env bash
# One device-machine call for the GPU training step (docs/KERNELS.md, "The training step"):
#   tests  the GPU test suite (TTT kernels, the step's ops, whole-model gradients, the 50-step
#          CPU-vs-GPU loss curves, checkpoints across devices)
#   brown  `tttlab train --device cuda --preset small` on Brown, the same run on the CPU for as many
#          steps as fit in CPU_SECONDS (Ctrl-C saves it), the CPU run resumed on the GPU, and the
#          loss curves compared at equal steps (compare_runs.py)
#   bench  `tttlab bench --device cuda` (TTT kernels and whole-model training steps)
# Run from a folder holding tttlab, tttlab_gpu_tests, compare_runs.py and brown/{train,val}.txt;
# logs go to $OUT (or ./out). Steps: "tests brown bench" by default, or name them as arguments.
set -u
OUT=${OUT:-./out}
mkdir -p "$OUT"
cd "$(dirname "$0")"
steps=${*:-tests brown bench}
STEPS=${STEPS:-200}
LAYER=${LAYER:-ttt-linear}  # the preset's mixer: ttt-linear, ttt-mlp, linear-attention, softmax-attention
CPU_SECONDS=${CPU_SECONDS:-80}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
echo "cpu cores: $(nproc)"
# cuBLAS: the toolkit's, else the one PyTorch ships.
if ! ldconfig -p | grep -q libcublas.so.13 && [ ! -e /usr/local/cuda/lib64/libcublas.so.13 ]; then
  d=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null)
  [ -n "$d" ] && export TTTLAB_CUBLAS="$d/libcublas.so.13" && echo "cuBLAS from $TTTLAB_CUBLAS"
fi
W=$(mktemp -d)
for s in $steps; do
  case $s in
    tests)
      echo "== tests"
      # In three groups, so that a crash in one leaves the others' results.
      : > "$OUT/tests.log"
      for f in '-NnOps*:TrainCuda*' 'NnOps*' 'TrainCuda*'; do
        timeout 200 ./tttlab_gpu_tests --gtest_filter="$f" >> "$OUT/tests.log" 2>&1; echo "tests $f rc=$?"
      done
      grep -iE "INFO|FAILED|PASSED|SKIPPED \]|Failure|error|Which is|actual" "$OUT/tests.log" | head -120 ;;
    brown)
      echo "== brown: small, $LAYER, $STEPS steps, GPU"
      common="--preset small --layer $LAYER --data brown --data-dir brown --steps $STEPS --eval-every 100 --eval-windows 64 --seed 1"
      timeout 80 ./tttlab train $common --device cuda --out "$W/gpu" > "$OUT/brown_gpu.log" 2>&1; echo "gpu rc=$?"
      tail -4 "$OUT/brown_gpu.log"
      echo "== brown: the same run on the CPU for ${CPU_SECONDS}s"
      timeout -s INT "$CPU_SECONDS" ./tttlab train $common --device cpu --out "$W/cpu" > "$OUT/brown_cpu.log" 2>&1; echo "cpu rc=$?"
      tail -3 "$OUT/brown_cpu.log"
      echo "== brown: the CPU run resumed on the GPU"
      cp -r "$W/cpu" "$W/cpu_then_gpu"
      timeout 60 ./tttlab train --resume "$W/cpu_then_gpu" --device cuda > "$OUT/brown_resume.log" 2>&1; echo "resume rc=$?"
      tail -3 "$OUT/brown_resume.log"
      python3 compare_runs.py "$W/gpu/metrics.jsonl" "$W/cpu/metrics.jsonl" "$W/cpu_then_gpu/metrics.jsonl" | tee "$OUT/brown_compare.txt" "$OUT/brown_compare-$LAYER.txt"
      echo "== brown: the GPU run's checkpoint evaluated on the GPU and on the CPU (tttlab eval, 64 windows)"
      for dev in cuda cpu; do
        timeout 60 ./tttlab eval --checkpoint "$W/gpu" --data-dir brown --windows 64 --device $dev | grep -E "^device|^validation"
      done | tee "$OUT/eval-$LAYER.txt"
      # One archive: the device tool returns at most 8 files.
      mkdir -p "$W/brown_logs"
      for r in gpu cpu cpu_then_gpu; do cp "$W/$r/metrics.jsonl" "$W/brown_logs/${r}_metrics.jsonl"; done
      mv "$OUT"/brown_*.log "$OUT/brown_compare.txt" "$W/brown_logs/"
      tar -czf "$OUT/brown-$LAYER.tar.gz" -C "$W" brown_logs ;;
    bench)
      echo "== bench"
      timeout 120 ./tttlab bench --device cuda 2>&1 | tee "$OUT/bench.log"; echo "bench rc=${PIPESTATUS[0]}" ;;
  esac
done
rm -rf "$W"
