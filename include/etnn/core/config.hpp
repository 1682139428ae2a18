#pragma once
// Private to core/: include <etnn/core/core.hpp> or <etnn/etnn.hpp>.
// Build-wide configuration: version and the host/device annotation for functors.

#define ETNN_VERSION_MAJOR 0
#define ETNN_VERSION_MINOR 1
#define ETNN_VERSION_PATCH 0

// ETNN_HD marks functions that run on the host and, under nvcc, on the device.
// Every elementwise functor and update rule is ETNN_HD so both backends share one definition.
#if defined(__CUDACC__)
#define ETNN_HD __host__ __device__
#else
#define ETNN_HD
#endif
