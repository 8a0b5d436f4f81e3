# Warning flags and sanitizers, applied to every target the project compiles.
# -Werror only when GPURUN_WERROR is on (CI), so that a user's newer compiler never breaks a build.
set(GPURUN_WARNING_FLAGS -Wall -Wextra -Wshadow -Wpointer-arith -Wstrict-prototypes -Wvla
    -Wformat=2 -Wno-unused-parameter)
if(GPURUN_WERROR)
  list(APPEND GPURUN_WARNING_FLAGS -Werror)
endif()

if(GPURUN_SANITIZE)
  add_compile_options(-fsanitize=${GPURUN_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${GPURUN_SANITIZE})
endif()

# gpurun_warnings(target): C sources get the full set; C++ (benchmarks against oneTBB) a subset.
function(gpurun_warnings target)
  foreach(flag ${GPURUN_WARNING_FLAGS})
    if(flag STREQUAL "-Wstrict-prototypes")
      target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:C>:${flag}>)
    else()
      target_compile_options(${target} PRIVATE ${flag})
    endif()
  endforeach()
endfunction()
