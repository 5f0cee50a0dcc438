// web/compat/tttlab_wasm_compat.hpp — force-included into every C++ file of the browser build.
//
// emscripten 3.1.6 (Debian 12) ships libc++ 13, which lacks C++20's std::bit_cast. The compiler has
// the builtin the standard library would use, so the missing function is one line over it. Newer
// toolchains define __cpp_lib_bit_cast and this file adds nothing.
#pragma once
#include <type_traits>
#include <version>
#if !defined(__cpp_lib_bit_cast)
namespace std {
template <class To, class From>
  requires(sizeof(To) == sizeof(From) && is_trivially_copyable_v<To> && is_trivially_copyable_v<From>)
constexpr To bit_cast(const From& from) noexcept {
  return __builtin_bit_cast(To, from);
}
}  // namespace std
#endif
