# Warnings for the project's own targets: tttlab_set_warnings(<target>).
function(tttlab_set_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wshadow=local -Wnon-virtual-dtor -Wno-unused-parameter>)
endfunction()
