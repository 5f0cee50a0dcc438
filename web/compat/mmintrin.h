/* web/compat/mmintrin.h — Eigen's SSE path includes <mmintrin.h> (MMX). emscripten translates SSE
 * intrinsics to WebAssembly SIMD but has no MMX header, and clang's x86 one refuses to compile for
 * wasm; Eigen uses no MMX intrinsic, so the SSE header it expects next is all it needs. */
#pragma once
#include <xmmintrin.h>
