# etnn_program(NAME [PORTABLE] SOURCES...): an executable of this project (test, example,
# benchmark) linked to etnn::etnn with the project's warning set. Users' targets never get these
# flags. PORTABLE builds it without -march, as a consumer's portable build is.
include(CheckCXXCompilerFlag)
check_cxx_compiler_flag(-march=native etnn_has_march_native)

function(etnn_program name)
  cmake_parse_arguments(PARSE_ARGV 1 program "PORTABLE" "" "")
  set(sources ${program_UNPARSED_ARGUMENTS})
  add_executable(${name} ${sources})
  target_link_libraries(${name} PRIVATE etnn::etnn)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic>
                                           $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
  endif()
  # The project's programs are built for the machine that builds them, as a benchmark of it is;
  # a consumer's portable build still runs etnn's AVX-512 GEMM where the CPU has it (run time).
  if(ETNN_NATIVE_PROGRAMS AND etnn_has_march_native AND NOT program_PORTABLE)
    target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-march=native>)
  endif()
  if(TARGET etnn::cuda)
    # A .cu source makes a CUDA program: nvcc, the CUDA runtime and cuBLASLt.
    foreach(source IN LISTS sources)
      if(source MATCHES "\\.cu$")
        target_link_libraries(${name} PRIVATE etnn::cuda)
        break()
      endif()
    endforeach()
  endif()
  # GCC 12 reports a false "iteration ... invokes undefined behavior" inside Eigen's GEMV kernel
  # (Eigen/src/Core/products/GeneralMatrixVector.h) when it inlines it with a run-time row count.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wno-aggressive-loop-optimizations>)
  endif()
  # GCC 12 also reports "'__Y' (may be) used uninitialized" inside its own avx512fintrin.h when
  # Eigen's AVX-512 kernels are inlined (-march=native on AVX-512 machines; GCC bug 105593).
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wno-maybe-uninitialized -Wno-uninitialized>
                                           $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wno-maybe-uninitialized>)
  endif()
endfunction()
