#pragma once
// Private to backend/: include <etnn/backend/backend.hpp> or <etnn/etnn.hpp>.
// The CPU's compute threads, for the folders above backend/ that plan around them (the data
// loader's prefetch worker): etnn::num_threads(), etnn::set_num_threads(n) and
// etnn::usable_cpus(), the CPUs this process may run on.
#include "../cpu/parallel.hpp"
