// A store that "crashes" in its n-th write (1-based; 0 or less: never): only
// a prefix of that write reaches the disk, and it and every later write and
// flush fail, as if the process died there. The prefix is `keep_sectors`
// whole 512-byte sectors (sector writes are atomic, larger ones are not), or
// with kHalfBytes the first half of the write's bytes. With Tear::Suffix the
// sectors kept are the write's last ones instead: a disk may land a large
// write's sectors in any order, so a tail without its head happens too.
#pragma once

#include <blkcrypt/backing_store.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace testutil {

class TornStore final : public blkcrypt::BackingStore {
public:
    static constexpr std::size_t kHalfBytes = std::numeric_limits<std::size_t>::max();
    enum class Tear { Prefix, Suffix };

    TornStore(std::vector<uint8_t> image, int crash_at, std::size_t keep_sectors = kHalfBytes,
              Tear tear = Tear::Prefix)
        : mem_(image.size()), crash_at_(crash_at), keep_(keep_sectors), tear_(tear) {
        mem_.data() = std::move(image);
    }
    blkcrypt::Status read(uint64_t off, blkcrypt::Bytes out) override { return mem_.read(off, out); }
    blkcrypt::Status write(uint64_t off, blkcrypt::ConstBytes in) override {
        ++writes_;
        sizes_.push_back(in.size());
        if (crashed()) {
            if (writes_ == crash_at_) {
                const std::size_t n = keep_ == kHalfBytes ? in.size() / 2 : std::min(in.size(), keep_ * 512);
                if (tear_ == Tear::Suffix)
                    (void)mem_.write(off + (in.size() - n), in.last(n));
                else
                    (void)mem_.write(off, in.first(n));
            }
            return blkcrypt::Status::IoError;
        }
        return mem_.write(off, in);
    }
    blkcrypt::Status flush() override { return crashed() ? blkcrypt::Status::IoError : blkcrypt::Status::Ok; }
    uint64_t size() const override { return mem_.size(); }
    int writes() const { return writes_; }
    // The size in bytes of every write asked for, in order.
    const std::vector<std::size_t>& write_sizes() const { return sizes_; }
    std::vector<uint8_t>& image() { return mem_.data(); }

private:
    bool crashed() const { return crash_at_ > 0 && writes_ >= crash_at_; }

    blkcrypt::MemoryStore mem_;
    int crash_at_;
    std::size_t keep_;
    Tear tear_;
    int writes_ = 0;
    std::vector<std::size_t> sizes_;
};

}  // namespace testutil
