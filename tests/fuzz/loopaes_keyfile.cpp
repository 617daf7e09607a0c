// loop-AES key files: the first byte picks the key size (low 2 bits: 16, 24,
// 32 or 20 bytes, the last without a default hash) and the --hash (next 2
// bits: default, sha1, sha256, rmd160); the rest is the key file. An
// accepted file must hold 1, 64 or 65 equal, non-empty keys; the derived key
// is key size x count; its table must make a CryptTarget (aes takes every
// derived size) over a small device that writes and reads back.
#include "fuzz_util.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/loopaes/loopaes.hpp>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

using namespace blkcrypt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    const ConstBytes file(data + 1, size - 1);
    auto lines = loopaes::parse_keyfile(file);
    if (!lines) return 0;
    const std::size_t n = lines->size();
    if (n != 1 && n != 64 && n != 65) std::abort();
    for (const SecureBuffer& k : *lines)
        if (k.empty() || k.size() != (*lines)[0].size()) std::abort();

    static constexpr std::size_t kSizes[] = {16, 24, 32, 20};
    static constexpr const char* kHashes[] = {nullptr, "sha1", "sha256", "rmd160"};
    loopaes::Params p;
    p.key_size = kSizes[data[0] & 3];
    if (const char* h = kHashes[(data[0] >> 2) & 3]) p.hash = h;
    auto reg = fuzz::make_registry();
    auto v = loopaes::open(*reg, p, file);
    if (!v) return 0;
    if (v->key_count != n || v->table.key.size() != p.key_size * n) std::abort();

    auto store = std::make_shared<MemoryStore>(128 * 512);  // every one of the 64 keys, twice
    dm::CryptTargetOptions opts;
    opts.threads = 1;
    auto tg = dm::CryptTarget::create(*reg, v->table, store, 0, opts);
    if (!tg) {
        if (p.key_size != 20) std::abort();  // aes refuses only that size
        return 0;
    }
    std::vector<uint8_t> buf(store->size(), 0x5a), back(store->size());
    dm::Bio w;
    w.dir = dm::BioDir::Write;
    w.vecs = {{buf.data(), buf.size()}};
    if ((*tg)->submit_sync(w) != Status::Ok) std::abort();
    dm::Bio r;
    r.dir = dm::BioDir::Read;
    r.vecs = {{back.data(), back.size()}};
    if ((*tg)->submit_sync(r) != Status::Ok || back != buf) std::abort();
    return 0;
}
