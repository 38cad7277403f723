# FindCereal.cmake — header-only; Debian's libcereal-dev config is not relied upon.
find_path(CEREAL_INCLUDE_DIR cereal/cereal.hpp)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Cereal REQUIRED_VARS CEREAL_INCLUDE_DIR)
if(Cereal_FOUND AND NOT TARGET Cereal::cereal)
  add_library(Cereal::cereal INTERFACE IMPORTED)
  set_target_properties(Cereal::cereal PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${CEREAL_INCLUDE_DIR}")
endif()
