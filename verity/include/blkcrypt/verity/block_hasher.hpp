// BlockHasher: salted hashing of equal-sized blocks through the registry, the
// one primitive dm-verity (and fs-verity) trees are made of.
//
// Sync mode uses a shash: the salted state is computed once, exported, and
// each block is finished from it (ShashDesc::finup_mb: import + finup, or a
// driver's interleaved multi-buffer code). Formats that put the salt after
// the block, and hashes without export, take init/update/final per block.
// Async mode uses an ahash (e.g. cryptd(sha256) or a plugin's accelerator)
// with many requests in flight. Both give identical digests.
#pragma once

#include <blkcrypt/bytes.hpp>
#include <blkcrypt/status.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace blkcrypt {
class Registry;
}

namespace blkcrypt::verity {

enum class SaltPlacement { Before, After };
enum class HashMode {
    Auto,   // shash when the name resolves to one, else ahash
    Sync,   // shash only
    Async,  // ahash requests (any hash works: shashes are wrapped)
};

// One thread's hashing state. Not thread-safe; make one per thread.
class HashContext {
public:
    virtual ~HashContext() = default;
    // out[i] = H(salt || blocks[i]) (or H(blocks[i] || salt)); all blocks the
    // same length, each out[i] at least digest_size() bytes.
    virtual Status hash(const ConstBytes* blocks, const Bytes* out, std::size_t n) = 0;
    Status hash_one(ConstBytes block, Bytes out) { return hash(&block, &out, 1); }
};

class BlockHasher {
public:
    virtual ~BlockHasher() = default;
    static Result<std::shared_ptr<BlockHasher>> create(Registry& reg, std::string_view hash_name,
                                                       ConstBytes salt, SaltPlacement place,
                                                       HashMode mode = HashMode::Auto);
    virtual std::size_t digest_size() const noexcept = 0;
    virtual bool is_async() const noexcept = 0;
    // The driver that hashes, e.g. "sha256-openssl".
    virtual const std::string& driver() const noexcept = 0;
    // The algorithm, as a superblock records it: the generic name, without
    // a cryptd(...) wrapper (how it runs is not part of the format).
    std::string algorithm() const;
    virtual Result<std::unique_ptr<HashContext>> new_context() const = 0;

protected:
    virtual const std::string& generic_name() const noexcept = 0;
};

}  // namespace blkcrypt::verity
