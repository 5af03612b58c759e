# SPDX-License-Identifier: Apache-2.0
# Makes the kernels compiled once per instruction-set level into objects that can be linked into
# one program side by side (run-time dispatch, include/kiln/kernels/isa.hpp), and the entry points
# that dispatch between them. Run by CMake at build time (cmake -P) with:
#
#   LEVELS     the levels' identifiers, lowest first, separated by commas (x86_64,x86_64_v3,x86_64_v4)
#   OBJECT_<level>  each level's compiled src/kiln_kernels.cpp (compiled with -fvisibility=hidden
#              -fvisibility-inlines-hidden, and with GCC -fno-gnu-unique)
#   OUT_DIR    where the results go: kiln_kernels_<level>.o and kiln_kernels_entry.o
#   CXX, NM, OBJCOPY   the tools
#
# Each level's object has its own copy of every inline function, template and std:: function it
# uses, compiled for its level. Linked as they are, the linker would keep one copy of each (the
# first object's) and call it from every level and from the rest of the program: AVX-512 code on a
# CPU without it, or the baseline's where the wider code was meant. So each object keeps all of its
# symbols to itself (`objcopy --keep-global-symbol`, with its COMDAT groups dissolved so that no
# copy is discarded in favour of another object's; std:: templates too, which have default
# visibility whatever -fvisibility says) but one: `kiln_kernels_table_<level>`, the addresses of its
# out-of-line (non-inline, global) functions in the order of one sorted list. For each function in
# the list, kiln_kernels_entry.o defines the global symbol of its name as one jump through
# `kiln_kernels_slots[i]`, which src/kiln_dispatch.cpp fills from the chosen level's table in a
# constructor (priority 101, registered here) before the program's own constructors run.
#
# Fails, naming them, when an object defines global data (it would be one copy per level, not one
# per process: such state belongs in <kiln/impl/runtime.ipp>) or when the levels' objects do not
# define the same functions.
cmake_minimum_required(VERSION 3.21)

foreach(var LEVELS OUT_DIR CXX NM OBJCOPY)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "kiln-isa-objects.cmake: ${var} is not set")
  endif()
endforeach()
string(REPLACE "," ";" LEVELS "${LEVELS}")
foreach(level IN LISTS LEVELS)
  if(NOT DEFINED OBJECT_${level})
    message(FATAL_ERROR "kiln-isa-objects.cmake: OBJECT_${level} is not set")
  endif()
endforeach()

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "kiln-isa-objects.cmake: `${cmd}` failed (${rc}):\n${out}${err}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

# The global functions an object defines (nm's type T), sorted.
function(global_functions object result)
  run(${NM} --defined-only --extern-only --format=posix ${object})
  string(REPLACE "\n" ";" lines "${run_output}")
  set(functions "")
  set(data "")
  foreach(line IN LISTS lines)
    if(line MATCHES "^([^ ]+) ([A-Za-z]) ")
      set(name "${CMAKE_MATCH_1}")
      set(type "${CMAKE_MATCH_2}")
      if(type STREQUAL "T")
        list(APPEND functions "${name}")
      elseif(type MATCHES "^[BDGRS]$")
        list(APPEND data "${name}")
      endif()
    endif()
  endforeach()
  if(data)
    string(REPLACE ";" "\n  " shown "${data}")
    message(FATAL_ERROR "kiln-isa-objects.cmake: ${object} defines global data, which would be one copy per instruction-set level:\n  ${shown}")
  endif()
  list(SORT functions)
  set(${result} "${functions}" PARENT_SCOPE)
endfunction()

list(GET LEVELS 0 first_level)
foreach(level IN LISTS LEVELS)
  set(object ${OBJECT_${level}})
  global_functions(${object} functions)
  if(level STREQUAL first_level)
    set(symbols "${functions}")
    if(NOT symbols)
      message(FATAL_ERROR "kiln-isa-objects.cmake: ${object} defines no global function")
    endif()
  elseif(NOT functions STREQUAL symbols)
    set(missing "${symbols}")
    list(REMOVE_ITEM missing ${functions})
    set(extra "${functions}")
    list(REMOVE_ITEM extra ${symbols})
    message(FATAL_ERROR "kiln-isa-objects.cmake: the ${level} kernels define other functions than the ${first_level} ones; "
                        "only in ${first_level}: ${missing}; only in ${level}: ${extra}")
  endif()
endforeach()
list(LENGTH symbols symbol_count)

file(MAKE_DIRECTORY ${OUT_DIR})
foreach(level IN LISTS LEVELS)
  set(object ${OBJECT_${level}})
  set(table "# The ${level} kernels' table (cmake/kiln-isa-objects.cmake).\n")
  string(APPEND table "\t.section .data.rel.ro.kiln_kernels_table_${level},\"aw\"\n\t.globl kiln_kernels_table_${level}\n")
  string(APPEND table "\t.p2align 3\n\t.type kiln_kernels_table_${level}, @object\nkiln_kernels_table_${level}:\n")
  foreach(s IN LISTS symbols)
    string(APPEND table "\t.quad ${s}\n")
  endforeach()
  math(EXPR bytes "${symbol_count} * 8")
  string(APPEND table "\t.size kiln_kernels_table_${level}, ${bytes}\n\t.section .note.GNU-stack,\"\",@progbits\n")
  file(WRITE ${OUT_DIR}/kiln_kernels_table_${level}.s "${table}")
  run(${CXX} -c ${OUT_DIR}/kiln_kernels_table_${level}.s -o ${OUT_DIR}/kiln_kernels_table_${level}.o)
  run(${CXX} -r -nostdlib ${object} ${OUT_DIR}/kiln_kernels_table_${level}.o -o ${OUT_DIR}/kiln_kernels_${level}.merged.o)
  run(${OBJCOPY} --keep-global-symbol=kiln_kernels_table_${level} --remove-section=.group ${OUT_DIR}/kiln_kernels_${level}.merged.o
      ${OUT_DIR}/kiln_kernels_${level}.o)
  file(REMOVE ${OUT_DIR}/kiln_kernels_${level}.merged.o ${OUT_DIR}/kiln_kernels_table_${level}.o)
  # What is left global must be the table alone (and what the object uses from elsewhere).
  run(${NM} --defined-only --extern-only --format=posix ${OUT_DIR}/kiln_kernels_${level}.o)
  string(REGEX REPLACE "kiln_kernels_table_${level} [A-Za-z] [^\n]*\n" "" rest "${run_output}")
  if(NOT rest STREQUAL "")
    message(FATAL_ERROR "kiln-isa-objects.cmake: the ${level} kernels still define global symbols after localizing:\n${rest}")
  endif()
endforeach()

set(entry "# One entry point per out-of-line kernel function, jumping through the chosen level's\n")
string(APPEND entry "# address (cmake/kiln-isa-objects.cmake, src/kiln_dispatch.cpp).\n\t.text\n")
set(i 0)
foreach(s IN LISTS symbols)
  math(EXPR offset "${i} * 8")
  string(APPEND entry "\t.globl ${s}\n\t.type ${s}, @function\n\t.p2align 4\n${s}:\n\tjmp *kiln_kernels_slots+${offset}(%rip)\n\t.size ${s}, .-${s}\n")
  math(EXPR i "${i} + 1")
endforeach()
math(EXPR bytes "${symbol_count} * 8")
string(APPEND entry "\t.bss\n\t.globl kiln_kernels_slots\n\t.hidden kiln_kernels_slots\n\t.p2align 6\n\t.type kiln_kernels_slots, @object\n")
string(APPEND entry "kiln_kernels_slots:\n\t.zero ${bytes}\n\t.size kiln_kernels_slots, ${bytes}\n")
string(APPEND entry "\t.section .rodata\n\t.globl kiln_kernels_slot_count\n\t.hidden kiln_kernels_slot_count\n\t.p2align 3\n")
string(APPEND entry "\t.type kiln_kernels_slot_count, @object\nkiln_kernels_slot_count:\n\t.quad ${symbol_count}\n\t.size kiln_kernels_slot_count, 8\n")
string(APPEND entry "\t.section .init_array.00101,\"aw\",@init_array\n\t.p2align 3\n\t.quad kiln_kernels_select\n")
string(APPEND entry "\t.section .note.GNU-stack,\"\",@progbits\n")
file(WRITE ${OUT_DIR}/kiln_kernels_entry.s "${entry}")
run(${CXX} -c ${OUT_DIR}/kiln_kernels_entry.s -o ${OUT_DIR}/kiln_kernels_entry.o)
message(STATUS "kiln: ${symbol_count} kernel entry points dispatched among ${LEVELS}")
