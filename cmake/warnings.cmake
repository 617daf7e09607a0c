# Warnings for our own targets: blkcrypt_warnings(<target>)
function(blkcrypt_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic
                         -Wnon-virtual-dtor -Wno-missing-field-initializers)
  # -Wshadow=local is GCC's; clang (the fuzz build) has no such option.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE -Wshadow=local)
  endif()
  # GCC 12 at -O3 warns inside libstdc++ on `"literal" + std::string` (GCC
  # bug 105329, a false positive fixed in GCC 13): left on, Release builds of
  # Debian 12 would print it for every such concatenation.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(${target} PRIVATE -Wno-restrict)
  endif()
endfunction()
