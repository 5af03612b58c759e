# SPDX-License-Identifier: Apache-2.0
# kiln's dependencies, found the same way when building kiln and when a project uses an installed
# kiln (kiln-config.cmake includes this file).

# Boost.Hana (compile-time pipelines) and Boost's intrusive_ptr (IR nodes): header-only.
find_package(Boost 1.81 CONFIG REQUIRED)

# xsimd: header-only SIMD. Debian's xsimd 8 CMake package lists a link dependency on a target
# "xtl" that it never defines, so linking against its `xsimd` target fails with "-lxtl not found"
# unless xtl-dev is installed and found first. kiln needs only the headers, so it finds them
# directly and wraps them in its own target.
if(NOT TARGET kiln::xsimd)
  find_path(KILN_XSIMD_INCLUDE_DIR xsimd/xsimd.hpp REQUIRED)
  add_library(kiln::xsimd INTERFACE IMPORTED)
  set_target_properties(kiln::xsimd PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${KILN_XSIMD_INCLUDE_DIR}")
endif()
