#pragma once
// Runs a test's scope on n of etnn's CPU threads, restoring the pool's count when it ends.
#include <etnn/etnn.hpp>

namespace etnn::test {

struct ThreadCount {
  int saved = cpu::ThreadPool::instance().threads();
  explicit ThreadCount(int n) { cpu::ThreadPool::instance().set_threads(n); }
  ~ThreadCount() { cpu::ThreadPool::instance().set_threads(saved); }
  ThreadCount(const ThreadCount&) = delete;
  ThreadCount& operator=(const ThreadCount&) = delete;
};

}  // namespace etnn::test
