# The browser build: the lab compiled by emscripten to WebAssembly + WebGL2 (web/, scripts/web.sh).
#
# scripts/web.sh configures it with `emcmake cmake … -DTTTLAB_WEB_DEPS=<folder>`, after putting in that
# folder what Debian does not ship as WebAssembly:
#   src/imgui, src/md4c, src/muparser   the sources of Debian's packages (the same versions the desktop
#                                      build links: Dear ImGui 1.86, md4c 0.4.8, muParser 2.3.3)
#   eigen3/                            a copy of /usr/include/eigen3 with two lines changed, so that
#                                      Eigen's SSE kernels compile to WebAssembly SIMD (web.sh says which)
#   include/                           links to header-only libraries (nlohmann, stb_image_write.h)
#                                      alone, so that no glibc header of /usr/include is ever reached
# The same targets the desktop build finds with pkg-config or find_package (Eigen3::Eigen,
# nlohmann_json::nlohmann_json, PkgConfig::TTTLAB_MD4C, …) are defined here from those sources, so
# core/ and app/ build unchanged.
set(TTTLAB_WEB_DEPS "" CACHE PATH "Folder with the browser build's third-party sources (scripts/web.sh makes it)")
if(NOT EXISTS "${TTTLAB_WEB_DEPS}/eigen3/Eigen/Core" OR NOT EXISTS "${TTTLAB_WEB_DEPS}/src/imgui/imgui.cpp")
  message(FATAL_ERROR "The browser build needs TTTLAB_WEB_DEPS (the folder scripts/web.sh prepares): "
                      "build it with `bash scripts/web.sh`, not with cmake alone")
endif()

# What the browser has no use for, or cannot run.
set(TTTLAB_CUDA OFF CACHE STRING "" FORCE)
set(TTTLAB_NATIVE OFF CACHE BOOL "" FORCE)
set(TTTLAB_BUILD_TESTS OFF CACHE BOOL "" FORCE)
set(TTTLAB_BUILD_FUZZERS OFF CACHE BOOL "" FORCE)

# Every file: threads (SharedArrayBuffer workers), C++ exceptions (emcc's default turns a throw into an
# abort, and the engine reports bad input by throwing), WebAssembly SIMD with Eigen's SSE kernels
# translated onto it (-msse4.2: about 1.5× the GEMM speed of plain -msimd128), and the std::bit_cast
# that emscripten's libc++ 13 lacks. The exceptions are emscripten's JavaScript-based ones: with
# WebAssembly's own (-fwasm-exceptions) the engine ran 0–18 % faster, but an exception thrown and caught
# in main() on the page's thread escaped uncaught (a broken #state= link stopped the page).
add_compile_options(-pthread -fexceptions -msimd128 -msse4.2
                    $<$<COMPILE_LANGUAGE:CXX>:-include${CMAKE_SOURCE_DIR}/web/compat/tttlab_wasm_compat.hpp>)
include_directories(BEFORE SYSTEM ${CMAKE_SOURCE_DIR}/web/compat)  # its mmintrin.h, before clang's x86 one
add_link_options(-pthread -fexceptions)

set(_deps "${TTTLAB_WEB_DEPS}")
add_library(Eigen3::Eigen INTERFACE IMPORTED GLOBAL)
target_include_directories(Eigen3::Eigen SYSTEM INTERFACE "${_deps}/eigen3")
add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED GLOBAL)
target_include_directories(nlohmann_json::nlohmann_json SYSTEM INTERFACE "${_deps}/include")
set(nlohmann_json_FOUND TRUE)

# Third-party libraries from source, without the project's warnings.
add_library(tttlab_web_md4c STATIC "${_deps}/src/md4c/src/md4c.c")
target_include_directories(tttlab_web_md4c SYSTEM PUBLIC "${_deps}/src/md4c/src")
add_library(tttlab_web_md4c_html STATIC "${_deps}/src/md4c/src/md4c-html.c" "${_deps}/src/md4c/src/entity.c")
target_link_libraries(tttlab_web_md4c_html PUBLIC tttlab_web_md4c)
file(GLOB _muparser_sources "${_deps}/src/muparser/src/*.cpp")
add_library(tttlab_web_muparser STATIC ${_muparser_sources})
target_include_directories(tttlab_web_muparser SYSTEM PUBLIC "${_deps}/src/muparser/include")
target_compile_definitions(tttlab_web_muparser PUBLIC MUPARSER_STATIC)
add_library(PkgConfig::TTTLAB_MD4C ALIAS tttlab_web_md4c)
add_library(PkgConfig::TTTLAB_MD4C_HTML ALIAS tttlab_web_md4c_html)
add_library(PkgConfig::TTTLAB_MUPARSER ALIAS tttlab_web_muparser)
set(TTTLAB_MD4C_FOUND TRUE)
set(TTTLAB_MD4C_HTML_FOUND TRUE)
set(TTTLAB_MUPARSER_FOUND TRUE)

# stb_image_write (PNG export): Debian's libstb is built for the host's CPU only, so its one
# implementation file is compiled here from the header.
file(WRITE ${CMAKE_BINARY_DIR}/generated/stb_image_write.c
     "#define STB_IMAGE_WRITE_IMPLEMENTATION\n#include <stb_image_write.h>\n")
add_library(tttlab_web_stb STATIC ${CMAKE_BINARY_DIR}/generated/stb_image_write.c)
target_include_directories(tttlab_web_stb SYSTEM PUBLIC "${_deps}/include")

# Dear ImGui with its GLFW and OpenGL 3 backends; the GL backend speaks OpenGL ES 3 (WebGL2), and
# emscripten's own GLFW (a JavaScript library, -sUSE_GLFW=3) stands in for libglfw.
set(_imgui "${_deps}/src/imgui")
add_library(tttlab_imgui_backends STATIC
  "${_imgui}/imgui.cpp" "${_imgui}/imgui_draw.cpp" "${_imgui}/imgui_tables.cpp" "${_imgui}/imgui_widgets.cpp"
  "${_imgui}/imgui_demo.cpp" "${_imgui}/backends/imgui_impl_glfw.cpp" "${_imgui}/backends/imgui_impl_opengl3.cpp")
target_include_directories(tttlab_imgui_backends SYSTEM PUBLIC "${_imgui}" "${_imgui}/backends" "${_deps}/include")
# IMGUI_ENABLE_TEST_ENGINE: Dear ImGui calls hooks for every item it lays out, which web/test_hooks.cpp
# records for the browser test (where to click) only when the page's address asks for it (?test=1);
# otherwise each item costs one test of a flag. PUBLIC: it changes ImGuiContext's layout, which every
# file that includes imgui_internal.h must agree on.
target_compile_definitions(tttlab_imgui_backends PUBLIC IMGUI_IMPL_OPENGL_ES3 IMGUI_ENABLE_TEST_ENGINE)
target_link_libraries(tttlab_imgui_backends PUBLIC tttlab_web_stb)
target_link_options(tttlab_imgui_backends INTERFACE -sUSE_GLFW=3 -sMIN_WEBGL_VERSION=2 -sMAX_WEBGL_VERSION=2)
foreach(t tttlab_web_md4c tttlab_web_md4c_html tttlab_web_muparser tttlab_web_stb tttlab_imgui_backends)
  set_target_properties(${t} PROPERTIES UNITY_BUILD OFF)
endforeach()
set(TTTLAB_HAVE_WEB_GUI ON)
