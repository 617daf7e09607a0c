# Libraries the project compiles against but opens with dlopen by SONAME at
# first use (GnuTLS for serve --tls, libnbd for NBD URIs), so commands that
# never need them do not load them at every start. The SONAME baked in is the
# one of the library found at configure time.
#
# blkcrypt_dlopen_soname(OUT CACHE_VAR NAME HINTS OPTION)
#   finds library NAME (into the cache variable CACHE_VAR, which packaging
#   reads too) and sets OUT to its SONAME; fails naming OPTION to turn off.
function(blkcrypt_dlopen_soname out cache_var name hints option)
  find_library(${cache_var} NAMES ${name} HINTS ${hints})
  set(soname "")
  if(${cache_var} AND CMAKE_OBJDUMP)
    execute_process(COMMAND ${CMAKE_OBJDUMP} -p ${${cache_var}}
                    OUTPUT_VARIABLE dynamic ERROR_QUIET RESULT_VARIABLE rc)
    if(rc EQUAL 0 AND dynamic MATCHES "SONAME +([^ \n]+)")
      set(soname ${CMAKE_MATCH_1})
    endif()
  endif()
  if(NOT soname)
    message(FATAL_ERROR "${option}: the SONAME of ${name} (${${cache_var}}) could not be read with objdump "
                        "(binutils); configure with -D${option}=OFF.")
  endif()
  set(${out} ${soname} PARENT_SCOPE)
endfunction()
