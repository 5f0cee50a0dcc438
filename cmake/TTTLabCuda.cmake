# CUDA detection. Sets TTTLAB_HAVE_CUDA when the kernels/ library is to be built.
#
# TTTLAB_CUDA=AUTO builds the kernels where nvcc is found (on PATH, via CUDACXX, or at
# /usr/local/cuda/bin/nvcc); ON insists; OFF never looks. The build never needs a GPU: kernels are
# compiled for CMAKE_CUDA_ARCHITECTURES (default 90, Hopper) and the program probes for a device at
# run time.
set(TTTLAB_HAVE_CUDA OFF)
if(NOT TTTLAB_CUDA STREQUAL "OFF")
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    # Device code (.cu) is C++17: CMake 3.25 (Debian 12's) knows no C++20 flag for nvcc, and
    # without this it would carry CXX_STANDARD 20 over to CUDA and refuse to generate.
    if(NOT DEFINED CMAKE_CUDA_STANDARD)
      set(CMAKE_CUDA_STANDARD 17)
      set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(TTTLAB_HAVE_CUDA ON)
    message(STATUS "TTT Lab: CUDA kernels ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, arch ${CMAKE_CUDA_ARCHITECTURES})")
  elseif(TTTLAB_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TTTLAB_CUDA=ON but no CUDA compiler was found (set CUDACXX or install the toolkit)")
  else()
    message(STATUS "TTT Lab: CUDA kernels OFF (no nvcc found); the CPU engine is used")
  endif()
else()
  message(STATUS "TTT Lab: CUDA kernels OFF (TTTLAB_CUDA=OFF)")
endif()
