// The verity superblock decoder, then the hash image behind it: the input is
// a hash device (superblock + tree); verify_tree checks small data against
// it, with the root hash taken from the input's tail.
#include "fuzz_util.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/verity/superblock.hpp>
#include <blkcrypt/verity/tree.hpp>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace blkcrypt;

namespace {
constexpr uint64_t kMaxData = 256 * 1024;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    if (size < verity::kSuperblockSize) {
        (void)verity::decode_superblock(ConstBytes(data, size));  // short: refused, no over-read
        return 0;
    }
    auto p = verity::decode_superblock(ConstBytes(data, verity::kSuperblockSize));
    if (!p) return 0;
    // A decoded superblock encodes back to the same fields.
    auto sb = verity::encode_superblock(*p);
    if (!sb) std::abort();
    auto back = verity::decode_superblock(*sb);
    // (The name is stored lower-cased, as veritysetup does.)
    auto lower = [](std::string s) {
        for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        return s;
    };
    if (!back || back->hash_name != lower(p->hash_name) || back->salt != p->salt ||
        back->data_blocks != p->data_blocks || back->data_block_size != p->data_block_size)
        std::abort();
    if (p->data_blocks > kMaxData / p->data_block_size) return 0;
    auto reg = fuzz::make_registry();
    auto g = verity::plan_tree(*reg, *p);
    if (!g) return 0;
    auto hash = std::make_shared<dm::MemoryStore>(size);
    std::memcpy(hash->data().data(), data, size);
    auto dstore = std::make_shared<dm::MemoryStore>(p->data_blocks * p->data_block_size);
    // The root hash: the input's last digest_size bytes (a seed made by
    // `verity format` ends with its root hash).
    std::vector<uint8_t> root(g->digest_size, 0);
    if (size >= verity::kSuperblockSize + root.size())
        std::memcpy(root.data(), data + size - root.size(), root.size());
    verity::TreeOptions opts;
    opts.threads = 1;
    (void)verity::verify_tree(*reg, *p, root, *dstore, *hash, opts);
    return 0;
}
