# SPDX-License-Identifier: Apache-2.0
# Installs the kiln build tree into a scratch prefix, then configures, builds and runs the
# consumer project against it.
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
execute_process(COMMAND ${KILN_WORK_DIR}/build/consumer RESULT_VARIABLE rc OUTPUT_VARIABLE out)
message(STATUS "${out}")
if(rc)
  message(FATAL_ERROR "the consumer ran but failed (${rc})")
endif()
