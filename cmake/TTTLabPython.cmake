# TTTLAB_PYTHON (AUTO/ON/OFF) -> TTTLAB_HAVE_PYTHON: whether python/ builds the module `tttlab`.
#
# The interpreter is Debian's /usr/bin/python3 where it exists, unless Python3_EXECUTABLE is given:
# the module is built for one interpreter's ABI, and a python3 found first on PATH (pyenv, a virtual
# environment) may lack NumPy or the headers. The tests run with the same interpreter.
set(TTTLAB_HAVE_PYTHON OFF)
if(EMSCRIPTEN OR TTTLAB_SANITIZE OR TTTLAB_BUILD_FUZZERS OR NOT TTTLAB_BUILD_APP OR TTTLAB_PYTHON STREQUAL "OFF")
  if(TTTLAB_PYTHON STREQUAL "ON")
    message(FATAL_ERROR "TTTLAB_PYTHON=ON needs the app's libraries (TTTLAB_BUILD_APP) and a build without "
                        "sanitizers, fuzzers or emscripten")
  endif()
  return()
endif()
if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python3_EXECUTABLE /usr/bin/python3 CACHE FILEPATH "The Python the module is built for and tested with")
endif()
find_package(Python3 3.8 COMPONENTS Interpreter Development.Module QUIET)
if(Python3_FOUND)
  find_package(pybind11 2.6 CONFIG QUIET)
endif()
if(Python3_FOUND AND pybind11_FOUND)
  set(TTTLAB_HAVE_PYTHON ON)
  message(STATUS "tttlab: the Python module for ${Python3_EXECUTABLE} (${Python3_VERSION}, pybind11 ${pybind11_VERSION})")
elseif(TTTLAB_PYTHON STREQUAL "ON")
  message(FATAL_ERROR "TTTLAB_PYTHON=ON: pybind11 or the Python 3 headers not found (install pybind11-dev python3-dev)")
else()
  message(STATUS "tttlab: no Python module (install pybind11-dev python3-dev for it)")
endif()
