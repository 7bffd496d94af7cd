// Declarations only. The PyTorch wheel ships c10d's headers but not gloo's, which
// ProcessGroupGloo.hpp includes; it holds gloo objects only through pointers (and its inline
// code names a few members), so declaring them is enough to compile against it. The real gloo
// is inside libtorch_cpu.so.
#pragma once
#include <chrono>
namespace gloo {
class Context {
 public:
  void setTimeout(std::chrono::milliseconds timeout);
};
}  // namespace gloo
