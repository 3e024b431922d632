# FindLibZip: Debian's libzip-dev CMake config also requires the zipcmp/zipmerge/ziptool
# executables (separate packages) to exist; locate the library directly instead and
# provide LibZip::LibZip.
find_path(LIBZIP_INCLUDE_DIR zip.h)
find_library(LIBZIP_LIBRARY zip)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(LibZip REQUIRED_VARS LIBZIP_LIBRARY LIBZIP_INCLUDE_DIR)
if(LibZip_FOUND AND NOT TARGET LibZip::LibZip)
  add_library(LibZip::LibZip UNKNOWN IMPORTED)
  set_target_properties(LibZip::LibZip PROPERTIES
    IMPORTED_LOCATION "${LIBZIP_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${LIBZIP_INCLUDE_DIR}")
endif()
