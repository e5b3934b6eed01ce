# Runs the layer check on a fixture and asserts its verdict: cmake -DCONFIG=... -DEXPECT=pass|fail
# [-DMESSAGE=<text the failure must contain>] -P expect.cmake
execute_process(COMMAND ${CMAKE_COMMAND} -DCONFIG=${CONFIG} -P ${SCRIPT}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(APPEND out "${err}")
if(EXPECT STREQUAL "pass" AND NOT rc EQUAL 0)
  message(FATAL_ERROR "the layer check refused an allowed include:\n${out}")
endif()
if(EXPECT STREQUAL "fail")
  if(rc EQUAL 0)
    message(FATAL_ERROR "the layer check passed a forbidden include")
  endif()
  string(FIND "${out}" "${MESSAGE}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the layer check failed without saying:\n  ${MESSAGE}\nit said:\n${out}")
  endif()
endif()
