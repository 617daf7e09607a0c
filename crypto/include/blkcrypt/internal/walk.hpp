// SgWalk: steps through the src and dst lists of a request together, giving
// the longest spans that are contiguous in both and a whole number of `unit`
// bytes. A unit that straddles a segment boundary (in src or dst) is gathered
// into a bounce buffer, processed there in place, and scattered to dst by
// done(). If len is not a multiple of unit, the last chunk is the remainder.
//
//   for (SgWalk w(req.src, req.dst, req.len, 16); w.next(); w.done())
//       process(w.in(), w.out(), w.len());
//
// src and dst must be the same memory (in place) or not overlap at all.
#pragma once

#include <blkcrypt/sg.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace blkcrypt {

class SgWalk {
public:
    SgWalk(SgList src, SgList dst, std::size_t len, std::size_t unit);
    ~SgWalk();
    SgWalk(const SgWalk&) = delete;
    SgWalk& operator=(const SgWalk&) = delete;

    bool next();
    void done();

    const uint8_t* in() const noexcept { return in_; }
    uint8_t* out() const noexcept { return out_; }
    std::size_t len() const noexcept { return n_; }
    bool bounced() const noexcept { return bounced_; }
    std::size_t offset() const noexcept { return pos_; }  // bytes done before this chunk

private:
    struct Cursor {
        SgList sg;
        std::size_t idx = 0;
        std::size_t off = 0;
        void skip_empty() noexcept;
        void advance(std::size_t n) noexcept;
        std::size_t avail() const noexcept { return sg[idx].len - off; }
        uint8_t* ptr() const noexcept { return sg[idx].data + off; }
        SgList rest() const noexcept { return sg.subspan(idx); }
    };
    Cursor src_, dst_;
    std::size_t remaining_;
    std::size_t unit_;
    std::size_t pos_ = 0;
    const uint8_t* in_ = nullptr;
    uint8_t* out_ = nullptr;
    std::size_t n_ = 0;
    bool bounced_ = false;
    uint8_t small_[64];
    std::vector<uint8_t> big_;
};

}  // namespace blkcrypt
