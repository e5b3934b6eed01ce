# One library per folder, and the build refuses an #include the link edges do not allow.
#
#   kiln_layer(<target> [DEPS <layer targets>...] [PUBLIC <libs>...] [PRIVATE <libs>...]
#              [EXCLUDE <file names>...] [EXECUTABLE] [FOLDER <dir>])
#
# makes <target> a static library of the folder's *.cpp (an INTERFACE library when there are none,
# an executable with EXECUTABLE), links DEPS publicly and records them. Every source and header of the
# folder may then include headers of its own folder and of its DEPS, transitively, and nothing else:
# a check run before the target compiles (cmake/layer_check.cmake, re-run whenever a file of the
# folder changes) fails the build with e.g.
#   mcp/session.cpp includes "tools/x.h" but kiln_mcp does not link kiln_tools
# Deps must be declared before they are used, so the order of add_subdirectory is the layering and a
# cycle cannot be written down. kiln_layer_finish() (after the last folder) writes the checks' inputs.

set(KILN_LAYER_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/layer_check.cmake)

function(kiln_layer target)
  cmake_parse_arguments(PARSE_ARGV 1 L "EXECUTABLE" "FOLDER" "DEPS;PUBLIC;PRIVATE;EXCLUDE")
  if(NOT L_FOLDER)
    file(RELATIVE_PATH L_FOLDER ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  endif()
  set(dir ${PROJECT_SOURCE_DIR}/${L_FOLDER})
  file(GLOB sources CONFIGURE_DEPENDS ${dir}/*.cpp)
  file(GLOB headers CONFIGURE_DEPENDS ${dir}/*.h)
  foreach(name IN LISTS L_EXCLUDE)
    list(REMOVE_ITEM sources ${dir}/${name})
  endforeach()

  # Allowed folders: this one and every folder its deps may include, transitively.
  set(allowed ${L_FOLDER})
  set(closure ${target})
  foreach(dep IN LISTS L_DEPS)
    get_property(known GLOBAL PROPERTY KILN_LAYER_FOLDER_${dep})
    if(NOT known)
      message(FATAL_ERROR "kiln_layer(${target}): ${dep} is not a layer declared before it")
    endif()
    get_property(dep_allowed GLOBAL PROPERTY KILN_LAYER_ALLOWED_${dep})
    get_property(dep_closure GLOBAL PROPERTY KILN_LAYER_CLOSURE_${dep})
    list(APPEND allowed ${dep_allowed})
    list(APPEND closure ${dep_closure})
  endforeach()
  list(REMOVE_DUPLICATES allowed)
  list(REMOVE_DUPLICATES closure)
  set_property(GLOBAL PROPERTY KILN_LAYER_FOLDER_${target} ${L_FOLDER})
  set_property(GLOBAL PROPERTY KILN_LAYER_ALLOWED_${target} ${allowed})
  set_property(GLOBAL PROPERTY KILN_LAYER_CLOSURE_${target} ${closure})
  set_property(GLOBAL APPEND PROPERTY KILN_LAYERS ${target})

  if(L_EXECUTABLE)
    add_executable(${target} ${sources})
    target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR})
    target_link_libraries(${target} PRIVATE ${L_DEPS} ${L_PUBLIC} ${L_PRIVATE})
  elseif(sources)
    add_library(${target} STATIC ${sources})
    target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
    target_link_libraries(${target} PUBLIC ${L_DEPS} ${L_PUBLIC} PRIVATE ${L_PRIVATE})
  else()
    add_library(${target} INTERFACE)
    target_include_directories(${target} INTERFACE ${PROJECT_SOURCE_DIR})
    target_link_libraries(${target} INTERFACE ${L_DEPS} ${L_PUBLIC})
  endif()

  # The check's inputs are written by kiln_layer_finish, when every folder's layer is known.
  set(config ${PROJECT_BINARY_DIR}/layers/${target}.cmake)
  set(stamp ${PROJECT_BINARY_DIR}/layers/${target}.ok)
  set_property(GLOBAL PROPERTY KILN_LAYER_FILES_${target} ${sources} ${headers})
  add_custom_command(
    OUTPUT ${stamp}
    COMMAND ${CMAKE_COMMAND} -DCONFIG=${config} -DSTAMP=${stamp} -P ${KILN_LAYER_SCRIPT}
    DEPENDS ${sources} ${headers} ${config} ${KILN_LAYER_SCRIPT}
    COMMENT "Checking the includes of ${L_FOLDER}/ against the links of ${target}"
    VERBATIM)
  add_custom_target(${target}_layer_check DEPENDS ${stamp})
  add_dependencies(${target} ${target}_layer_check)
endfunction()

# A layer whose sources are generated (schemas/): its folder's headers may be included by the layers
# that link it; it has no check of its own.
function(kiln_layer_generated target)
  file(RELATIVE_PATH folder ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  set_property(GLOBAL PROPERTY KILN_LAYER_FOLDER_${target} ${folder})
  set_property(GLOBAL PROPERTY KILN_LAYER_ALLOWED_${target} ${folder})
  set_property(GLOBAL PROPERTY KILN_LAYER_CLOSURE_${target} ${target})
  set_property(GLOBAL APPEND PROPERTY KILN_GENERATED_LAYERS ${target})
endfunction()

# Writes every layer's check input: its files, the folders it may include, and which target owns
# each folder (so the message can name the link that is missing).
function(kiln_layer_finish)
  get_property(layers GLOBAL PROPERTY KILN_LAYERS)
  get_property(generated GLOBAL PROPERTY KILN_GENERATED_LAYERS)
  set(owners "")
  foreach(t IN LISTS layers generated)
    get_property(folder GLOBAL PROPERTY KILN_LAYER_FOLDER_${t})
    list(APPEND owners "${folder}=${t}")
  endforeach()
  foreach(t IN LISTS layers)
    get_property(folder GLOBAL PROPERTY KILN_LAYER_FOLDER_${t})
    get_property(allowed GLOBAL PROPERTY KILN_LAYER_ALLOWED_${t})
    get_property(files GLOBAL PROPERTY KILN_LAYER_FILES_${t})
    set(text "# Generated by kiln_layer_finish (cmake/kiln_layer.cmake).\n")
    string(APPEND text "set(LAYER_TARGET \"${t}\")\nset(LAYER_ROOT \"${PROJECT_SOURCE_DIR}\")\n")
    string(APPEND text "set(LAYER_ALLOWED \"${allowed}\")\nset(LAYER_OWNERS \"${owners}\")\n")
    string(APPEND text "set(LAYER_FILES \"${files}\")\n")
    # Rewritten only when it changes, so an unchanged layer is not re-checked after a reconfigure.
    file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/layers/${t}.cmake CONTENT "${text}" @ONLY)
  endforeach()
endfunction()
