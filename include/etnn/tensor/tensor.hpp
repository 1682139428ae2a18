#pragma once
// etnn tensors, the face of tensor/: Buffer<T, Device> (RAII memory on a device), Tensor and TensorView with a
// static per-sample Shape and a run-time batch, and host copies (to_host, copy_rows on the CPU).
//   etnn::Tensor<float, etnn::Shape<784>> x(64);   x.sample(b)[i]
#include "buffer.hpp"
#include "copy.hpp"
#include "tensor_view.hpp"
