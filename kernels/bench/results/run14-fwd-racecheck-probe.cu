// racecheck probe: is a warp-specialised block with per-group named barriers (bar.sync id, 128) and
// block barriers between the groups reported as racy by compute-sanitizer? The pattern of
// ttt_linear_v6.cu: group A (threads 0..127) reduces through shared memory with two named-barrier
// rounds and hands x to group B across a __syncthreads; group B reduces with one named-barrier
// round. NAMED=0 replaces each named barrier by a __syncthreads in both groups (the control).
#include <cstdio>
template <int NAMED>
__global__ void probe(float* out, int iters) {
  __shared__ float redA[2][128], redB[128], x[128];
  const int tid = threadIdx.x;
  const bool rec = tid < 128;
  const int g = rec ? tid : tid - 128;
  float acc = 0.0f;
  if (rec) x[g] = 1.0f;
  for (int it = 0; it < iters; ++it) {
    __syncthreads();
    if (rec) {
      redA[0][g] = acc + it;
      if (NAMED) asm volatile("bar.sync 1, 128;" ::: "memory"); else __syncthreads();
      float v = redA[0][(g + 32) & 127];
      redA[1][g] = v;
      if (NAMED) asm volatile("bar.sync 1, 128;" ::: "memory"); else __syncthreads();
      acc += redA[1][(g + 64) & 127];
    } else {
      acc += x[g];
      if (!NAMED) { __syncthreads(); __syncthreads(); }
    }
    __syncthreads();
    if (rec) {
      x[g] = acc;
      if (!NAMED) __syncthreads();
    } else {
      redB[g] = acc;
      if (NAMED) asm volatile("bar.sync 2, 128;" ::: "memory"); else __syncthreads();
      acc += redB[(g + 32) & 127];
    }
  }
  out[blockIdx.x * 256 + tid] = acc;
}
int main() {
  float* out;
  cudaMalloc(&out, 4 * 256 * sizeof(float));
  probe<1><<<4, 256>>>(out, 8);
  cudaDeviceSynchronize();
  std::printf("named: %s\n", cudaGetErrorString(cudaGetLastError()));
  probe<0><<<4, 256>>>(out, 8);
  cudaDeviceSynchronize();
  std::printf("control: %s\n", cudaGetErrorString(cudaGetLastError()));
  return 0;
}
