# BLKCRYPT_FUZZ=ON: every target gets libFuzzer's coverage instrumentation and
# ASan + UBSan (the harnesses in tests/fuzz link the fuzzer runtime itself).
if(BLKCRYPT_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "BLKCRYPT_FUZZ needs clang++ (libFuzzer): -DCMAKE_CXX_COMPILER=clang++")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=all)
  add_link_options(-fsanitize=address,undefined)
endif()
