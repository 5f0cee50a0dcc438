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
CPU_SECONDS=${CPU_SECONDS:-100}
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
      timeout 420 ./tttlab_gpu_tests > "$OUT/tests.log" 2>&1; echo "tests rc=$?"
      grep -E "INFO|FAILED|PASSED|SKIPPED \]|Failure|error" "$OUT/tests.log" | head -90 ;;
    brown)
      echo "== brown: small, $STEPS steps, GPU"
      common="--preset small --data brown --data-dir brown --steps $STEPS --eval-every 100 --eval-windows 64 --seed 1"
      timeout 300 ./tttlab train $common --device cuda --out "$W/gpu" > "$OUT/brown_gpu.log" 2>&1; echo "gpu rc=$?"
      tail -4 "$OUT/brown_gpu.log"
      echo "== brown: the same run on the CPU for ${CPU_SECONDS}s"
      timeout -s INT "$CPU_SECONDS" ./tttlab train $common --device cpu --out "$W/cpu" > "$OUT/brown_cpu.log" 2>&1; echo "cpu rc=$?"
      tail -3 "$OUT/brown_cpu.log"
      echo "== brown: the CPU run resumed on the GPU"
      cp -r "$W/cpu" "$W/cpu_then_gpu"
      timeout 200 ./tttlab train --resume "$W/cpu_then_gpu" --device cuda > "$OUT/brown_resume.log" 2>&1; echo "resume rc=$?"
      tail -3 "$OUT/brown_resume.log"
      cp "$W/gpu/metrics.jsonl" "$OUT/brown_gpu_metrics.jsonl"
      cp "$W/cpu/metrics.jsonl" "$OUT/brown_cpu_metrics.jsonl"
      python3 compare_runs.py "$W/gpu/metrics.jsonl" "$W/cpu/metrics.jsonl" "$W/cpu_then_gpu/metrics.jsonl" | tee "$OUT/brown_compare.txt" ;;
    bench)
      echo "== bench"
      timeout 300 ./tttlab bench --device cuda 2>&1 | tee "$OUT/bench.log"; echo "bench rc=${PIPESTATUS[0]}" ;;
  esac
done
rm -rf "$W"
