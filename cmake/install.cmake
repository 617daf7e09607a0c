# Installation: `cmake --install <build> [--prefix P]` puts
#   include/blkcrypt/**              every public header (internal/ included:
#                                    provider, template and plugin authors need it)
#   lib/libblkcrypt.so*              the shared library and its SONAME links
#   lib/libblkcrypt-c.so*            the C API (<blkcrypt/blkcrypt.h>), blkcrypt::blkcrypt_c
#   lib/python3/dist-packages/blkcrypt   the Python package (BLKCRYPT_PYTHON_DIR, python/)
#   bin/blkcrypt                     the CLI, finding the library via $ORIGIN
#   lib/cmake/blkcrypt/              find_package(blkcrypt) -> blkcrypt::blkcrypt
#   lib/pkgconfig/blkcrypt.pc        pkg-config --cflags --libs blkcrypt
#   share/man/man8/blkcrypt*.8       the man pages, generated from the option tables
#   share/bash-completion/completions/blkcrypt   bash completion, likewise
# Crypto++, OpenSSL and GnuTLS are private to libblkcrypt.so: consumers of the package
# need neither their headers nor their pkg-config/CMake files.
# Included at the end of the top-level CMakeLists.txt.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(BLKCRYPT_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/blkcrypt CACHE STRING
    "Where the blkcrypt CMake package files are installed (relative to the prefix)")
mark_as_advanced(BLKCRYPT_INSTALL_CMAKEDIR)

# ---- headers: whole trees, so headers added later are installed too -------
foreach(dir crypto/include/blkcrypt dmcrypt/include/blkcrypt verity/include/blkcrypt integrity/include/blkcrypt luks/include/blkcrypt tcrypt/include/blkcrypt
        bitlk/include/blkcrypt fvault2/include/blkcrypt loopaes/include/blkcrypt nbd/include/blkcrypt
        containers/include/blkcrypt capi/include/blkcrypt)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/blkcrypt
          COMPONENT blkcrypt_dev
          FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h")
endforeach()

# ---- the library and the CLI ---------------------------------------------
# crypto/ already exports $<INSTALL_INTERFACE:include>; a non-default
# CMAKE_INSTALL_INCLUDEDIR (where dm/ and verity/ go too) is added here.
set(_blkcrypt_includes)
if(NOT CMAKE_INSTALL_INCLUDEDIR STREQUAL "include")
  set(_blkcrypt_includes INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endif()
install(TARGETS blkcrypt blkcrypt_c EXPORT blkcryptTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
                COMPONENT blkcrypt_runtime NAMELINK_COMPONENT blkcrypt_dev
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT blkcrypt_dev
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT blkcrypt_runtime
        ${_blkcrypt_includes})

if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(_blkcrypt_cli_rpath "${CMAKE_INSTALL_LIBDIR}")
else()
  set(_blkcrypt_cli_rpath "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
endif()
set_target_properties(blkcrypt_cli PROPERTIES INSTALL_RPATH "${_blkcrypt_cli_rpath}")
install(TARGETS blkcrypt_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT blkcrypt_runtime)
# Made when blkcrypt_cli is built (cli/CMakeLists.txt).
install(DIRECTORY ${BLKCRYPT_MAN_DIR}/ DESTINATION ${CMAKE_INSTALL_MANDIR}/man8
        COMPONENT blkcrypt_runtime FILES_MATCHING PATTERN "blkcrypt*.8")
install(FILES ${BLKCRYPT_COMPLETION_FILE} DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
        COMPONENT blkcrypt_runtime)

# ---- CMake package ---------------------------------------------------------
install(EXPORT blkcryptTargets
        NAMESPACE blkcrypt::
        FILE blkcryptTargets.cmake
        DESTINATION ${BLKCRYPT_INSTALL_CMAKEDIR}
        COMPONENT blkcrypt_dev)
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/blkcryptConfig.cmake.in
  ${PROJECT_BINARY_DIR}/blkcryptConfig.cmake
  INSTALL_DESTINATION ${BLKCRYPT_INSTALL_CMAKEDIR})
# The SONAME carries the major version; so does compatibility.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/blkcryptConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/blkcryptConfig.cmake
              ${PROJECT_BINARY_DIR}/blkcryptConfigVersion.cmake
        DESTINATION ${BLKCRYPT_INSTALL_CMAKEDIR}
        COMPONENT blkcrypt_dev)

# ---- pkg-config --------------------------------------------------------------
# Written at install time so that `cmake --install --prefix P` gets prefix=P
# (the configure-time CMAKE_INSTALL_PREFIX may differ).
foreach(kind LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${kind}}")
    set(_blkcrypt_pc_${kind} "${CMAKE_INSTALL_${kind}}")
  else()
    set(_blkcrypt_pc_${kind} "\${prefix}/${CMAKE_INSTALL_${kind}}")
  endif()
endforeach()
set(_blkcrypt_pc_out ${PROJECT_BINARY_DIR}/pkgconfig/blkcrypt.pc)
install(CODE "
  set(BLKCRYPT_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  set(BLKCRYPT_PC_LIBDIR [=[${_blkcrypt_pc_LIBDIR}]=])
  set(BLKCRYPT_PC_INCLUDEDIR [=[${_blkcrypt_pc_INCLUDEDIR}]=])
  set(BLKCRYPT_PC_VERSION [=[${PROJECT_VERSION}]=])
  configure_file([=[${PROJECT_SOURCE_DIR}/cmake/blkcrypt.pc.in]=] [=[${_blkcrypt_pc_out}]=] @ONLY)
" COMPONENT blkcrypt_dev)
install(FILES ${_blkcrypt_pc_out}
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT blkcrypt_dev)
