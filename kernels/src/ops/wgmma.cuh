// Warpgroup matrix products (wgmma, sm_90a only) for the Hopper kernels: the shared-memory matrix
// descriptor of a 128-byte-swizzled bf16 tile, the fences and waits, and the few m64nNk16 shapes the
// kernels use (bf16 × bf16 → fp32). Private to kernels/src; include it only from files compiled for
// sm_90a (kernels/CMakeLists.txt, TTTLAB_SM90A_SOURCES).
//
// Tiles. A tile is stored as rows of 64 bf16 (128 bytes); row r's 16-byte chunk c sits at chunk
// c ^ (r mod 8), and the tile starts on a 1024-byte boundary (the swizzle is a function of the
// address). A tile wider than 64 columns is stored as several such 64-column tiles one after the
// other. The descriptor (PTX ISA, "Matrix Descriptor Format"): start address >> 4 in bits 0–13,
// leading byte offset >> 4 in 16–29, stride byte offset >> 4 in 32–45, swizzle mode in 62–63 (1 =
// 128 bytes). For both operand layouts used here the stride offset is the 1024 bytes between groups
// of 8 rows; the leading offset (between 64-column tiles of an MN-major operand) is never used,
// since every product here spans at most 64 columns of such an operand, so it is set to 1024 too.
// A k-step of 16 columns of a K-major tile is a start address 32 bytes further; of an MN-major tile
// (rows = the contraction), 16 rows = 2048 bytes further.
//
// Accumulators. Thread lane of warp w (of the warpgroup) holds, for each 8-column slice i of the
// m64nN result, d[4i + 2r + c] = element (16w + lane/4 + 8r, 8i + 2·(lane%4) + c): mma.sync's C
// fragment repeated along N. A register A operand (wgmma_rs_tb) has mma.sync m16n8k16's A layout.
// The compiler does not know that a wgmma writes its registers later: fence_regs after the wait
// keeps it from reading them early.
#pragma once

#include <cstdint>

namespace tttlab::kernels::detail::wgmma {

__device__ __forceinline__ std::uint64_t desc_sw128(std::uint32_t smem_addr) {
  return std::uint64_t((smem_addr & 0x3FFFFu) >> 4) | (std::uint64_t(1024 >> 4) << 16) |
         (std::uint64_t(1024 >> 4) << 32) | (std::uint64_t(1) << 62);
}

__device__ __forceinline__ void fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Ordinary stores (cp.async included) to shared memory become visible to the tensor cores' reads
// only after this fence in the writing thread and a barrier.
__device__ __forceinline__ void fence_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

template <int R>
__device__ __forceinline__ void fence_regs(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int R, int C>
__device__ __forceinline__ void fence_regs(std::uint32_t (&d)[R][C]) {
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int j = 0; j < C; ++j) asm volatile("" : "+r"(d[i][j])::"memory");
}

// d (64 × N) = (scale_d ? d : 0) + A·Bᵀ, A (64 × 16) and B (N × 16) K-major tiles in shared memory.
template <int N>
__device__ void wgmma_ss(float (&d)[N / 2], std::uint64_t a, std::uint64_t b, int scale_d);
// d (64 × N) += A·B, A (64 × 16) in registers, B (16 × N) MN-major in shared memory (row-major with
// the contraction along rows: "transposed B").
template <int N>
__device__ void wgmma_rs_tb(float (&d)[N / 2], const std::uint32_t (&a)[4], std::uint64_t b);

// ---- the shapes (operand lists written out: every accumulator register is named) -----------------
template <>
__device__ __forceinline__ void wgmma_ss<64>(float (&d)[32], std::uint64_t a, std::uint64_t b,
                                             int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
      "%9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, "
      "%27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b), "r"(scale_d)
      : "memory");
}

template <>
__device__ __forceinline__ void wgmma_ss<128>(float (&d)[64], std::uint64_t a, std::uint64_t b,
                                              int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
      "%9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, "
      "%27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, "
      "%45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, "
      "%63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63])
      : "l"(a), "l"(b), "r"(scale_d)
      : "memory");
}

template <>
__device__ __forceinline__ void wgmma_rs_tb<64>(float (&d)[32], const std::uint32_t (&a)[4],
                                                std::uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
      "%9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, "
      "%27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1)
      : "memory");
}

}  // namespace tttlab::kernels::detail::wgmma
