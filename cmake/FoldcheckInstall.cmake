# What `cmake --install BUILD --prefix P` puts under P, and the CMake package that lets another
# project use foldcheck as a library:
#
#   find_package(foldcheck 0.1 REQUIRED)
#   target_link_libraries(app PRIVATE foldcheck::harness)   # or foldcheck::reference alone
#
#   bin/foldcheck                          the command
#   share/foldcheck/foldcheck.schema.json  the versioned JSON schema of every output
#   include/foldcheck/...                  public headers of reference/, harness/ and reports/,
#                                          and json_assert.hpp (below)
#   lib/libfoldcheck_*.a                   the libraries (static)
#   lib/cmake/foldcheck/                   foldcheckConfig.cmake, its version file, the targets,
#                                          and the find modules of the dependencies Debian ships
#                                          without a CMake config (FindMPFR, FindLibZip)
#
# Targets: foldcheck::reference (certified arithmetic; MPFR), foldcheck::reports (renderers of
# the versioned JSON; nlohmann_json, fmt), foldcheck::harness (all of the library: one target
# per concern, foldcheck::base .. foldcheck::commands, harness/CMakeLists.txt; links the other
# two). The libraries are static, so their private dependencies (foldcheck::reports,
# onnx_proto and its protobuf) are link dependencies of a consumer: foldcheckConfig.cmake
# finds them as well.
#
# Contract with a consumer: every translation unit of foldcheck is compiled with
# -include json_assert.hpp (a missing JSON key throws instead of being undefined behaviour).
# nlohmann's inline code must be the same in the consumer's units that include foldcheck's
# headers, so the installed targets carry that option in their interface.
include(CMakePackageConfigHelpers)

set(_fc_json_assert "SHELL:-include \"$<INSTALL_PREFIX>/${CMAKE_INSTALL_INCLUDEDIR}/foldcheck/json_assert.hpp\"")
set(_fc_parts reference result reports harness)
foreach(concern ${FOLDCHECK_HARNESS_CONCERNS})
  list(APPEND _fc_parts ${concern})
  list(APPEND _fc_harness_includes harness/${concern}/include/)
endforeach()
foreach(part ${_fc_parts})
  set_target_properties(foldcheck_${part} PROPERTIES EXPORT_NAME ${part})
  target_compile_features(foldcheck_${part} INTERFACE cxx_std_20)  # the public headers are C++20
  target_compile_options(foldcheck_${part} INTERFACE "$<INSTALL_INTERFACE:${_fc_json_assert}>")
endforeach()

list(TRANSFORM _fc_parts PREPEND foldcheck_ OUTPUT_VARIABLE _fc_targets)
install(TARGETS ${_fc_targets} EXPORT foldcheckTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS foldcheck RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY reference/include/ result/include/ ${_fc_harness_includes} reports/include/
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES cmake/json_assert.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/foldcheck)
install(FILES reports/schema/foldcheck.schema.json DESTINATION ${CMAKE_INSTALL_DATADIR}/foldcheck)

set(_fc_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/foldcheck)
install(EXPORT foldcheckTargets NAMESPACE foldcheck:: DESTINATION ${_fc_cmake_dir})
configure_package_config_file(cmake/foldcheckConfig.cmake.in
  ${PROJECT_BINARY_DIR}/foldcheckConfig.cmake INSTALL_DESTINATION ${_fc_cmake_dir})
# 0.x: a minor version may change the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/foldcheckConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/foldcheckConfig.cmake ${PROJECT_BINARY_DIR}/foldcheckConfigVersion.cmake
              cmake/FindMPFR.cmake cmake/FindLibZip.cmake
        DESTINATION ${_fc_cmake_dir})

# The built-in engine adapters of `foldcheck engines` (adapters/README.md; their list:
# adapters/adapters.cmake), found there by the installed program (PREFIX/share/foldcheck/engines).
include(${PROJECT_SOURCE_DIR}/adapters/adapters.cmake)
install(FILES ${FOLDCHECK_PYTHON_ADAPTERS} DESTINATION ${CMAKE_INSTALL_DATADIR}/foldcheck/engines)
