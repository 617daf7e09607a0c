// Counts operator new calls per thread (alloc_count.cpp replaces the global
// operator new), for tests that a path does not allocate. Not available under
// ASan or TSan, whose runtimes own operator new.
#pragma once

#include <cstddef>

namespace alloc_count {
bool available() noexcept;
std::size_t here() noexcept;  // operator new calls on this thread so far
}  // namespace alloc_count
