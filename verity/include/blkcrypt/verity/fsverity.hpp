// fs-verity file digests, as `fsverity digest` (fsverity-utils) computes
// them: the Merkle tree over the file (salted with the zero-padded salt), the
// 256-byte struct fsverity_descriptor, and the file digest H(descriptor).
// The tree can be streamed to a sink in FS_IOC_READ_VERITY_METADATA order
// (root-most level first, leaves last). Memory stays bounded whatever the
// file size: a read chunk plus one partial block per tree level.
#pragma once

#include <blkcrypt/bytes.hpp>
#include <blkcrypt/status.hpp>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace blkcrypt {
class Registry;
}

namespace blkcrypt::verity {

inline constexpr std::size_t kFsverityDescriptorSize = 256;
inline constexpr std::size_t kFsverityMaxSaltSize = 32;
inline constexpr std::size_t kFsverityMaxDigestSize = 64;

// The fs-verity hash algorithms (FS_VERITY_HASH_ALG_*).
struct FsverityHashAlg {
    std::string_view name;        // registry name and the printed prefix
    uint8_t number;               // 1 = sha256, 2 = sha512
    std::size_t digest_size;
    std::size_t input_block_size; // the salt is zero-padded to this
};
// nullptr when `name` is not an fs-verity algorithm.
const FsverityHashAlg* fsverity_find_hash(std::string_view name) noexcept;

struct FsverityParams {
    std::string hash = "sha256";  // sha256 | sha512
    uint32_t block_size = 4096;   // power of two, >= 2 * digest size, <= 2^30
    std::vector<uint8_t> salt;    // 0..32 bytes
    unsigned threads = 0;         // leaf hashing threads; 0 = all cores
    // fsverity_compute_fd calls it after each chunk with the bytes hashed so
    // far and the file size; returning false stops it ("interrupted").
    std::function<bool(uint64_t done, uint64_t total)> progress;
};

// Invalid with a message naming the bad parameter.
Result<void> fsverity_check_params(const FsverityParams& p);

// Size in bytes of the Merkle tree of a file of `file_size` bytes.
Result<uint64_t> fsverity_tree_size(const FsverityParams& p, uint64_t file_size);

// Receives every tree block once (block_size bytes, zero-padded), with its
// byte offset in the root-first tree. Blocks arrive in no particular order.
using FsverityTreeSink = std::function<Result<void>(uint64_t offset, ConstBytes block)>;

struct FsverityDigest {
    const FsverityHashAlg* alg = nullptr;
    std::vector<uint8_t> digest;     // the file digest: H(descriptor)
    std::vector<uint8_t> root_hash;  // all zero for an empty file
    std::array<uint8_t, kFsverityDescriptorSize> descriptor{};
    uint64_t tree_size = 0;
};

// struct fsverity_formatted_digest: "FSVerity" || le16 alg || le16 size ||
// digest, what a built-in signature signs.
std::vector<uint8_t> fsverity_formatted_digest(const FsverityDigest& d);

// Streaming computation over a file whose size is known up front (it goes
// into the descriptor and fixes the tree layout). Feed exactly file_size
// bytes through update() in pieces of any size, then finish(). Chunks that
// are whole blocks are hashed in place; the rest is buffered.
class FsverityBuilder {
public:
    static Result<FsverityBuilder> create(Registry& reg, const FsverityParams& p,
                                          uint64_t file_size, FsverityTreeSink sink = {});
    FsverityBuilder(FsverityBuilder&&) noexcept;
    FsverityBuilder& operator=(FsverityBuilder&&) noexcept;
    ~FsverityBuilder();

    Result<void> update(ConstBytes data);
    Result<FsverityDigest> finish();

    // A buffer size that update() hashes without copying (whole blocks).
    std::size_t preferred_chunk() const noexcept;

    struct Impl;

private:
    // It feeds the leaf digests from the shared block reader directly.
    friend Result<FsverityDigest> fsverity_compute_fd(Registry&, const FsverityParams&, int, FsverityTreeSink);
    explicit FsverityBuilder(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// Fills buf completely with the next bytes of the file, or fails.
using FsverityReadFn = std::function<Result<void>(Bytes buf)>;

Result<FsverityDigest> fsverity_compute(Registry& reg, const FsverityParams& p,
                                        uint64_t file_size, const FsverityReadFn& read,
                                        FsverityTreeSink sink = {});

// Reads a regular file from its start (fstat gives the size; sequential
// readahead is requested). IoError when the file changes size meanwhile.
Result<FsverityDigest> fsverity_compute_fd(Registry& reg, const FsverityParams& p, int fd,
                                           FsverityTreeSink sink = {});

}  // namespace blkcrypt::verity
