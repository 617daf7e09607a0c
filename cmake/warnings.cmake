# Warnings for our own targets: blkcrypt_warnings(<target>)
function(blkcrypt_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow=local
                         -Wnon-virtual-dtor -Wno-missing-field-initializers)
endfunction()
