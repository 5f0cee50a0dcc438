# Warnings for the project's own targets: tttlab_set_warnings(<target>).
function(tttlab_set_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wnon-virtual-dtor -Wno-unused-parameter>
    # -Wshadow=local is GCC's spelling; clang (the fuzz build) knows only the whole -Wshadow family.
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wshadow=local>
    # GCC 12 reports false 'maybe uninitialized' warnings inside Eigen's AVX-512 reductions.
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-maybe-uninitialized>)
endfunction()
