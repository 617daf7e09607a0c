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
# Libraries loaded with dlopen by SONAME (GnuTLS for serve's TLS, libnbd for
# NBD URIs) are invisible to dpkg-shlibdeps, so their packages are named here:
# the one dpkg says owns the library found at configure time, else FALLBACK.
find_program(BLKCRYPT_DPKG_QUERY dpkg-query)
function(blkcrypt_dlopen_depends library fallback)
  get_filename_component(real ${library} REALPATH)
  set(pkg ${fallback})
  if(BLKCRYPT_DPKG_QUERY)
    execute_process(COMMAND ${BLKCRYPT_DPKG_QUERY} -S ${real}
                    OUTPUT_VARIABLE owner ERROR_QUIET RESULT_VARIABLE rc)
    if(rc EQUAL 0 AND owner MATCHES "^([^:,]+)")
      set(pkg ${CMAKE_MATCH_1})
    endif()
  endif()
  set(_blkcrypt_deb_depends "${_blkcrypt_deb_depends}, ${pkg}" PARENT_SCOPE)
endfunction()
if(BLKCRYPT_WITH_TLS AND BLKCRYPT_GNUTLS_LIBRARY)
  blkcrypt_dlopen_depends(${BLKCRYPT_GNUTLS_LIBRARY} libgnutls30)
endif()
if(BLKCRYPT_WITH_NBD_CLIENT AND BLKCRYPT_LIBNBD_LIBRARY)
  blkcrypt_dlopen_depends(${BLKCRYPT_LIBNBD_LIBRARY} libnbd0)
endif()
set(CPACK_DEBIAN_PACKAGE_DEPENDS "${_blkcrypt_deb_depends}")
include(CPack)
