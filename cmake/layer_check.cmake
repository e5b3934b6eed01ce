# The include check behind kiln_layer (cmake/kiln_layer.cmake), run as
#   cmake -DCONFIG=<layer>.cmake [-DSTAMP=<file>] -P layer_check.cmake
# CONFIG sets LAYER_TARGET, LAYER_ROOT, LAYER_FILES (absolute), LAYER_ALLOWED (folders the layer may
# include) and LAYER_OWNERS ("folder=target" for every layer). An #include "a/b.h" belongs to the
# layer whose folder is the longest prefix of its path; one outside LAYER_ALLOWED, or of no layer at
# all, fails with a message naming the file and the missing link. Includes without a folder (a
# file's neighbours) are always allowed.
cmake_minimum_required(VERSION 3.25)
include(${CONFIG})

set(problems "")
foreach(file IN LISTS LAYER_FILES)
  file(RELATIVE_PATH rel ${LAYER_ROOT} ${file})
  file(STRINGS ${file} lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"[^\"]+\"")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" inc "${line}")
    if(NOT inc MATCHES "/")
      continue()
    endif()
    set(owner_folder "")
    set(owner_target "")
    foreach(pair IN LISTS LAYER_OWNERS)
      string(REPLACE "=" ";" kv "${pair}")
      list(GET kv 0 folder)
      list(GET kv 1 target)
      string(FIND "${inc}" "${folder}/" at)
      string(LENGTH "${folder}" n)
      string(LENGTH "${owner_folder}" best)
      # The longest folder wins: "mcp/http/x.h" is mcp/http's, not mcp's.
      if(at EQUAL 0 AND n GREATER best)
        set(owner_folder ${folder})
        set(owner_target ${target})
      endif()
    endforeach()
    if(owner_folder STREQUAL "")
      string(APPEND problems "${rel} includes \"${inc}\", which is in no layer (kiln_layer in that folder's CMakeLists.txt)\n")
    elseif(NOT owner_folder IN_LIST LAYER_ALLOWED)
      string(APPEND problems "${rel} includes \"${inc}\" but ${LAYER_TARGET} does not link ${owner_target}\n")
    endif()
  endforeach()
endforeach()

if(problems)
  # NOTICE prints the lines as they are (FATAL_ERROR would re-wrap them), one per include.
  message(NOTICE "${problems}")
  message(FATAL_ERROR "layer check of ${LAYER_TARGET} failed (docs/architecture.md, \"How the layer check works\")")
endif()
if(STAMP)
  file(TOUCH ${STAMP})
endif()
