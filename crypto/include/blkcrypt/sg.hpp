// Scatter-gather lists: non-owning views of the memory a request works on.
// A request never owns its buffers; the caller keeps them alive until completion.
#pragma once

#include <blkcrypt/bytes.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

namespace blkcrypt {

struct SgEntry {
    uint8_t* data = nullptr;
    std::size_t len = 0;
};

using SgList = std::span<const SgEntry>;

std::size_t sg_total(SgList sg) noexcept;

// Copy bytes between a scatter-gather list (starting at byte offset) and a
// flat buffer. Return the number of bytes copied (short if the list ends).
std::size_t sg_gather(SgList sg, std::size_t offset, Bytes out) noexcept;
std::size_t sg_scatter(SgList sg, std::size_t offset, ConstBytes in) noexcept;
// Overwrite bytes [offset, offset+len) with zeros that the compiler keeps
// (secure_wipe): the plaintext of a decryption whose tag did not match.
std::size_t sg_wipe(SgList sg, std::size_t offset, std::size_t len) noexcept;

// The sub-list covering bytes [offset, offset+len) of sg, written into out
// (which must have room for as many entries as sg). Returns the used prefix.
std::span<SgEntry> sg_slice(SgList sg, std::size_t offset, std::size_t len,
                            std::span<SgEntry> out) noexcept;

// The first non-empty entry's memory when it holds all len bytes, else
// nullptr: drivers take their fast flat path on it.
uint8_t* sg_contiguous(SgList sg, std::size_t len) noexcept;

// True when both lists describe exactly the same memory (an in-place request).
bool sg_same(SgList a, SgList b) noexcept;

}  // namespace blkcrypt
