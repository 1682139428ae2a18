#pragma once
// etnn core, the face of core/: configuration (ETNN_HD), Shape<...>, the device tags and
// allocators, errors and their message helper, fast exp and erf, lane sums, the scalar types
// (float, double and the mixed precisions), the seeded RNG, and the generic compile-time checks.
#include "alignment.hpp"
#include "checks.hpp"
#include "config.hpp"
#include "device.hpp"
#include "error.hpp"
#include "fast_math.hpp"
#include "lane_sum.hpp"
#include "file.hpp"
#include "precision.hpp"
#include "random.hpp"
#include "shape.hpp"
#include "token_ids.hpp"
#include "type_list.hpp"
