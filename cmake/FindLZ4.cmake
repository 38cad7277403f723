# FindLZ4.cmake — Debian's liblz4-dev ships no CMake config; expose LZ4::lz4.
find_path(LZ4_INCLUDE_DIR lz4frame.h)
find_library(LZ4_LIBRARY lz4)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(LZ4 REQUIRED_VARS LZ4_INCLUDE_DIR LZ4_LIBRARY)
if(LZ4_FOUND AND NOT TARGET LZ4::lz4)
  add_library(LZ4::lz4 UNKNOWN IMPORTED)
  set_target_properties(LZ4::lz4 PROPERTIES IMPORTED_LOCATION "${LZ4_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${LZ4_INCLUDE_DIR}")
endif()
mark_as_advanced(LZ4_INCLUDE_DIR LZ4_LIBRARY)
