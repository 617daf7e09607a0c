# The Debian package: `cpack -G DEB` in the build folder makes
# blkcrypt_VERSION_ARCH.deb with everything `cmake --install` puts under
# /usr (CLI, libblkcrypt and libblkcrypt-c, headers, pkg-config and CMake
# files, man pages, bash completion, plugins, the Python package).
# Depends: what dpkg-shlibdeps finds for the ELF files, plus what is loaded
# without a DT_NEEDED entry: GnuTLS (dlopen'ed by its SONAME for serve
# --tls, nbd/src/tls.cpp) and python3 for the Python package.
# Included at the end of the top-level CMakeLists.txt, after install.cmake.
set(CPACK_PACKAGE_NAME blkcrypt)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "userspace dm-crypt, dm-verity and LUKS/TrueCrypt/BitLocker/FileVault 2 containers")
set(CPACK_PACKAGE_DESCRIPTION "blkcrypt opens, decrypts, verifies and serves (NBD) encrypted and verified disk
images in userspace, without root or the kernel's device mapper: LUKS1/2,
TrueCrypt/VeraCrypt, BitLocker, FileVault 2, loop-AES, dm-crypt, dm-verity,
dm-integrity. Includes the C++ and C libraries and the Python package.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # blkcrypt_0.1.0_amd64.deb
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "blkcrypt developers <blkcrypt@localhost>")
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# No debug info in the package (a RelWithDebInfo build would ship ~300 MiB).
set(CPACK_STRIP_FILES ON)
# libblkcrypt.so.0 and libblkcrypt-c.so.1 are in the package itself.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_BINARY_DIR}/crypto ${CMAKE_BINARY_DIR}/capi)
set(_blkcrypt_deb_depends "python3")
if(BLKCRYPT_WITH_TLS AND BLKCRYPT_GNUTLS_LIBRARY)
  # The package that holds the GnuTLS library the SONAME names.
  get_filename_component(_gnutls_real ${BLKCRYPT_GNUTLS_LIBRARY} REALPATH)
  set(_gnutls_pkg "")
  find_program(BLKCRYPT_DPKG_QUERY dpkg-query)
  if(BLKCRYPT_DPKG_QUERY)
    execute_process(COMMAND ${BLKCRYPT_DPKG_QUERY} -S ${_gnutls_real}
                    OUTPUT_VARIABLE _gnutls_owner ERROR_QUIET RESULT_VARIABLE _rc)
    if(_rc EQUAL 0 AND _gnutls_owner MATCHES "^([^:,]+)")
      set(_gnutls_pkg ${CMAKE_MATCH_1})
    endif()
  endif()
  if(_gnutls_pkg)
    string(APPEND _blkcrypt_deb_depends ", ${_gnutls_pkg}")
  else()
    string(APPEND _blkcrypt_deb_depends ", libgnutls30")
  endif()
endif()
set(CPACK_DEBIAN_PACKAGE_DEPENDS "${_blkcrypt_deb_depends}")
include(CPack)
