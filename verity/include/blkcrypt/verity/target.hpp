// VerityTarget: the read path of dm-verity. Every data block read is hashed
// and checked against the tree; hash blocks are checked up to the root the
// first time they are needed and then kept, verified, in a bounded cache
// (the kernel's dm-bufio buffers with their "verified" flag), so a read
// climbs the tree only as far as the first already-verified block.
//
// Policies, as in the kernel: a corrupt block fails the read with
// Status::Corrupt (default; restart/panic_on_corruption act the same here),
// or with ignore_corruption it is reported to the log callback and its data
// returned; ignore_zero_blocks returns zeros for blocks whose expected digest
// is that of a zero block without reading them; check_at_most_once verifies
// each data block only on its first read. With the table's FEC options, a
// block that fails its hash is first rebuilt from the FEC data as the
// kernel's dm-verity-fec does (without erasures, then with the blocks of
// its group whose hashes fail as erasures); it counts as corrupt only when
// no rebuilt content matches its hash. Thread-safe.
#pragma once

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/verity/block_hasher.hpp>
#include <blkcrypt/verity/table.hpp>
#include <blkcrypt/verity/tree.hpp>

#include <atomic>
#include <functional>
#include <memory>

namespace blkcrypt {
class Registry;
}

namespace blkcrypt::verity {

struct VerityTargetOptions {
    HashMode mode = HashMode::Auto;
    std::size_t cache_blocks = 1024;  // verified hash blocks kept in memory
    // Each corruption found, as it is found (from the reading thread).
    std::function<void(const Corruption&)> log;
    // The device the table's use_fec_from_device names (required with it).
    std::shared_ptr<BackingStore> fec_device;
};

struct TargetStats {
    uint64_t data_blocks_verified = 0;
    uint64_t hash_blocks_verified = 0;
    uint64_t zero_blocks_skipped = 0;
    uint64_t corruptions = 0;
    uint64_t fec_corrected = 0;  // blocks FEC rebuilt (the kernel status line's count)
};

class VerityTarget {
public:
    static Result<std::unique_ptr<VerityTarget>> create(Registry& reg, const VerityTable& table,
                                                        std::shared_ptr<BackingStore> data,
                                                        std::shared_ptr<BackingStore> hash,
                                                        VerityTargetOptions opts = {});
    ~VerityTarget();

    uint64_t size() const noexcept;  // bytes of data the target serves
    uint32_t block_size() const noexcept;
    // Reads out.size() bytes at offset; both multiples of the data block size.
    Status read(uint64_t offset, Bytes out);
    // 'V' (no corruption seen) or 'C', like the kernel's status line.
    char status_char() const noexcept;
    TargetStats stats() const noexcept;
    const std::string& driver() const noexcept;

private:
    struct Impl;
    explicit VerityTarget(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace blkcrypt::verity
