// BioRing: a bounded ring of bios in flight on one CryptTarget (or any
// BlockDevice: a stack such as LUKS2 --integrity), retired in submission
// order. What a streaming client needs (the CLI's crypt
// encrypt/decrypt, an NBD server): keep `depth` bios converting at once while
// the results go out in order, with bounded memory.
//
//   BioRing ring(*target, depth, chunk, [&](const RetiredBio& r) { ...; return Status::Ok; });
//   while (more) {
//       if (Status s = ring.reserve(); s != Status::Ok) ...   // room for one more
//       Bytes buf = ring.next_buffer();                          // fill it (or use own memory)
//       if (Status s = ring.submit(sector, BioDir::Write, buf.first(n)); s != Status::Ok) ...
//   }
//   Status s = ring.finish();                                    // retire the rest
//
// The retire callback runs on the caller's thread, inside reserve/submit/
// finish, for the oldest bio once it has completed (whatever its status: the
// callback decides). A non-Ok return from the callback, or the target
// refusing a bio, stops the ring: the bios still in flight are waited for,
// not retired, and that status is returned. An exception thrown by the
// callback passes through with the ring consistent; the destructor waits for
// what is still in flight. Not thread-safe: one caller drives a ring.
//
// Each slot's Bio and its completion are set up once, so a submit does not
// allocate.
#pragma once

#include <blkcrypt/dm/bio.hpp>
#include <blkcrypt/dm/block_device.hpp>
#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/status.hpp>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace blkcrypt::dm {

// A bio being retired: what was submitted, and how it completed.
struct RetiredBio {
    uint64_t sector = 0;
    BioDir dir = BioDir::Read;
    Bytes data;  // the memory given to submit
    Status status = Status::Ok;
};

using RetireFn = std::function<Status(const RetiredBio&)>;

class BioRing {
public:
    // depth >= 1 bios in flight at most; buffer_bytes: the size of each
    // slot's own buffer (0: the caller always submits its own memory). The
    // target must outlive the ring's bios (the ring waits for them on
    // destruction, not on the target).
    BioRing(CryptTarget& target, std::size_t depth, std::size_t buffer_bytes, RetireFn on_retire);
    // The same over a block device: a bio's sector is 512-byte units of it.
    BioRing(BlockDevice& device, std::size_t depth, std::size_t buffer_bytes, RetireFn on_retire);
    ~BioRing();
    BioRing(const BioRing&) = delete;
    BioRing& operator=(const BioRing&) = delete;

    // Makes room for one more bio: when depth are in flight, waits for the
    // oldest and retires it.
    Status reserve();
    // The buffer of the slot the next submit uses; valid after reserve().
    Bytes next_buffer() noexcept;
    // Submits a bio over data (next_buffer() or caller memory that stays
    // valid until the bio is retired) at sector. Reserves first if needed.
    Status submit(uint64_t sector, BioDir dir, Bytes data);
    // Retires every bio in flight, in order.
    Status finish();
    // Waits for the bios in flight without retiring them (after an error).
    void drain() noexcept;

    std::size_t depth() const noexcept { return slots_.size(); }
    std::size_t in_flight() const noexcept { return inflight_; }

private:
    BioRing(BlockDevice* device, std::size_t depth, std::size_t buffer_bytes, RetireFn on_retire);
    struct Slot {
        std::unique_ptr<uint8_t[]> buf;
        Bio bio;
        Bytes data;
        bool busy = false;
        Status status = Status::Ok;
    };
    Status retire_oldest();
    Status stop(Status s) noexcept;

    // One of the two is set.
    CryptTarget* target_ = nullptr;
    BlockDevice* device_ = nullptr;
    const std::size_t buffer_bytes_;
    RetireFn on_retire_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::vector<Slot> slots_;
    std::size_t head_ = 0, inflight_ = 0;
};

}  // namespace blkcrypt::dm
