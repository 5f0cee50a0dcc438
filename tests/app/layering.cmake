# The app's layers (docs/ARCHITECTURE.md): the lab (app/lab/) needs no UI and sits below the course
# (app/course/), the hidden-state inspection (app/inspect/), the CUDA services (app/compute/) and the
# command line (app/cli/); only app/gui/ draws with Dear ImGui. A file that includes across these
# lines the wrong way fails this check, naming the file, the line and the include.
#   cmake -DAPP_DIR=<source>/app -P layering.cmake
if(NOT APP_DIR)
  message(FATAL_ERROR "layering.cmake: pass -DAPP_DIR=<the app/ folder>")
endif()

# folder: the include prefixes that folder may not use
set(rules
  "lab:gui/,course/,inspect/,compute/,cli/,imgui,GLFW/"
  "course:gui/,inspect/,compute/,cli/,imgui,GLFW/"
  "inspect:gui/,course/,compute/,cli/,imgui,GLFW/"
  "compute:gui/,course/,inspect/,cli/,imgui,GLFW/"
  "cli:gui/,imgui,GLFW/")

set(violations 0)
set(checked 0)
foreach(rule ${rules})
  string(REPLACE ":" ";" parts "${rule}")
  string(REPLACE "," ";" parts "${parts}")
  list(GET parts 0 folder)
  list(SUBLIST parts 1 -1 forbidden)
  file(GLOB_RECURSE sources "${APP_DIR}/${folder}/*.cpp" "${APP_DIR}/${folder}/*.hpp")
  foreach(src ${sources})
    math(EXPR checked "${checked} + 1")
    file(STRINGS "${src}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]")
    foreach(line ${includes})
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[\"<]([^\">]*)[\">].*" "\\1" header "${line}")
      foreach(prefix ${forbidden})
        string(FIND "${header}" "${prefix}" at)
        if(at EQUAL 0)
          file(RELATIVE_PATH rel "${APP_DIR}/.." "${src}")
          message(SEND_ERROR "${rel}: includes \"${header}\": app/${folder} may not depend on ${prefix}")
          math(EXPR violations "${violations} + 1")
        endif()
      endforeach()
    endforeach()
  endforeach()
endforeach()
if(checked LESS 50)
  message(FATAL_ERROR "layering.cmake: only ${checked} files found under ${APP_DIR}: wrong folder?")
endif()
if(violations GREATER 0)
  message(FATAL_ERROR "${violations} include(s) cross the app's layers the wrong way")
endif()
message(STATUS "app layering: ${checked} files, no include crosses a layer the wrong way")
