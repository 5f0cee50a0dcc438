// Internals shared by the attention kernels (attention.cu: v1 and the host side; attention_v2.cu:
// the tensor-core version). Private to kernels/src.
#pragma once

struct CUstream_st;

namespace tttlab::kernels::attention_detail {

constexpr int kTile = 64;  // queries per query tile, keys per key tile
constexpr int kThreads = 256;

struct Params {
  const float *Q, *K, *V, *O, *dO, *lse_in, *delta_in;
  float *Out, *lse, *delta, *dQ, *dK, *dV;
  int H, T, d;
  int tiles;       // ceil(T / 64)
  float scale;     // 1/√d (softmax), 1 (linear)
  float scale_l2;  // scale·log2(e)
};

// Version 2 (3xTF32 tensor cores). dm: d rounded up to 32, 64 or 128. Launch on `stream`.
void forward_v2(const Params& p, int bh, int dm, bool linear, CUstream_st* stream);
void backward_v2(const Params& p, int bh, int dm, bool linear, CUstream_st* stream);  // after δ

}  // namespace tttlab::kernels::attention_detail
