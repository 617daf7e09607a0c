# BLKCRYPT_SANITIZE=address,undefined or thread: instrument every target.
if(BLKCRYPT_SANITIZE)
  add_compile_options(-fsanitize=${BLKCRYPT_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${BLKCRYPT_SANITIZE})
endif()
