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
#include <cstdlib>
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

// The write numbers a crash sweep tries, 1-based up to total: each one up to
// `dense`, then every `step`-th. BLKCRYPT_TEST_CRASH_STRIDE=s keeps the first
// and last three of those and every s-th between: CI's ASan build takes the
// same paths in a fifth of the time (a whole sweep there takes minutes);
// every other run tries them all.
inline std::vector<int> crash_points(int total, int dense = std::numeric_limits<int>::max(), int step = 1) {
    std::vector<int> all;
    for (int at = 1; at <= total; at += at < dense ? 1 : step) all.push_back(at);
    int stride = 1;
    if (const char* e = std::getenv("BLKCRYPT_TEST_CRASH_STRIDE")) stride = std::max(1, std::atoi(e));
    if (stride == 1) return all;
    std::vector<int> some;
    for (std::size_t i = 0; i < all.size(); ++i)
        if (i < 3 || i + 3 >= all.size() || i % static_cast<std::size_t>(stride) == 0) some.push_back(all[i]);
    return some;
}

}  // namespace testutil
