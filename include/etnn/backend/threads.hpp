#pragma once
// Private to backend/: include <etnn/backend/backend.hpp> or <etnn/etnn.hpp>.
// The CPU's compute threads, for the folders above backend/ that plan around them (the data
// loader's prefetch worker): etnn::num_threads(), etnn::set_num_threads(n) and
// etnn::usable_cpus(), the CPUs this process may run on; and spread_thread_scratch(device), which
// a pass's reserve() calls after its warm-up pass so that every CPU thread's scratch is grown
// (cpu/thread_scratch.hpp).
#include <type_traits>

#include "../core/device.hpp"
#include "../cpu/parallel.hpp"
#include "../cpu/thread_scratch.hpp"

namespace etnn::backend {

template <class Device>
void spread_thread_scratch(Device) {
  if constexpr (std::is_same_v<Device, Cpu>) cpu::spread_thread_scratch();
}

}  // namespace etnn::backend
