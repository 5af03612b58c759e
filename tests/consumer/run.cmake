# SPDX-License-Identifier: Apache-2.0
# Installs the kiln build tree into a scratch prefix, then configures, builds and runs the
# consumer project against it; then builds the same program by hand with a relative -I and runs it
# from another folder. Both export a library, so both show export_library finding the installed
# headers (not the build tree's, and not through the compiler's working directory).
file(REMOVE_RECURSE ${KILN_WORK_DIR})
set(prefix ${KILN_WORK_DIR}/prefix)
execute_process(COMMAND ${CMAKE_COMMAND} --install ${KILN_BINARY_DIR} --prefix ${prefix} RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "cmake --install failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${KILN_CONSUMER_SOURCE} -B ${KILN_WORK_DIR}/build -G Ninja
                        -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER} RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the consumer against the installed kiln failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${KILN_WORK_DIR}/build RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the consumer failed (${rc})")
endif()

function(run_consumer program folder)
  file(MAKE_DIRECTORY ${folder})
  execute_process(COMMAND ${program} ${ARGN} WORKING_DIRECTORY ${folder} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${out}${err}")
  if(rc)
    message(FATAL_ERROR "the consumer ${program} ran in ${folder} but failed (${rc})")
  endif()
  string(FIND "${out}" "kiln headers at ${prefix}/include\n" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "export_library did not find the installed headers in ${prefix}/include")
  endif()
endfunction()

# Built by CMake against the installed package, which records where its headers are: exports a
# library and runs it.
run_consumer(${KILN_WORK_DIR}/build/my_compiler ${KILN_WORK_DIR}/run-cmake ${KILN_WORK_DIR}/run-cmake/model.so)
# Built by hand with a relative include path, run from another folder: finds the same headers.
file(MAKE_DIRECTORY ${KILN_WORK_DIR}/by-hand)
execute_process(COMMAND ${CMAKE_CXX_COMPILER} -std=c++20 -Iprefix/include ${KILN_CONSUMER_SOURCE}/find_headers.cpp -o by-hand/find_headers -ldl
                WORKING_DIRECTORY ${KILN_WORK_DIR} RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building a program with a relative -I failed (${rc})")
endif()
run_consumer(${KILN_WORK_DIR}/by-hand/find_headers ${KILN_WORK_DIR}/elsewhere)
