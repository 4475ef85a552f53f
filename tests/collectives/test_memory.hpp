// Which memory the matrix runs on: host memory (the default), or device memory when
// KOLO_TEST_DEVICE_MEMORY=1: the host stand-in's (KOLO_DEVICE_STANDIN=N, CI) or, on a GPU,
// CUDA managed memory on device LOCAL_RANK % devices (managed, so that the checks can read it
// from the host once the operation has been synchronized).
#pragma once
#include <cstddef>

#include "kolo/buffer.hpp"

namespace kolo::coltest {

bool test_on_device();
Device test_device();  // cpu, or the device the test's buffers are on
void* test_alloc(size_t bytes);
void test_free(void* p);
inline Buffer TestBuffer(void* p, size_t n, DataType t) { return Buffer(p, n, t, test_device()); }

}  // namespace kolo::coltest
