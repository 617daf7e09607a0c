// The LUKS1 header: the input is the start of a header device (header and
// keyslot areas). parse_header must refuse or accept without reading past the
// input; an accepted header serialises back to one that parses the same; then
// every keyslot is tried with a fixed passphrase over a device the size the
// header asks for (at most 4 MiB), iteration counts capped so one input stays
// fast.
#include "fuzz_util.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/luks/container.hpp>
#include <blkcrypt/luks/luks1.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>

using namespace blkcrypt;

namespace {
constexpr uint64_t kMaxDevice = 4 << 20;  // every seed layout (64-byte keys: 2 MiB)
constexpr uint32_t kMaxIterations = 8;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    auto h = luks::luks1::parse_header(ConstBytes(data, size));
    if (!h) return 0;
    auto raw = luks::luks1::serialize_header(*h);
    if (!raw) return 0;  // e.g. a NUL-less 32-byte name: parsed as 31 characters, which fit
    auto back = luks::luks1::parse_header(*raw);
    if (!back || back->cipher_spec() != h->cipher_spec() || back->hash_spec != h->hash_spec ||
        back->uuid != h->uuid || back->key_bytes != h->key_bytes || back->payload_offset != h->payload_offset ||
        back->mk_digest != h->mk_digest || luks::luks1::device_sectors(*back) != luks::luks1::device_sectors(*h))
        std::abort();
    (void)luks::luks1::dump(*h, "fuzz");

    const uint64_t need = luks::luks1::device_sectors(*h) * luks::luks1::kSector;
    if (need > kMaxDevice) return 0;
    luks::luks1::Header capped = *h;
    capped.mk_digest_iterations = std::min(capped.mk_digest_iterations, kMaxIterations);
    for (auto& k : capped.keyslots) k.iterations = std::min(k.iterations, kMaxIterations);
    auto capped_raw = luks::luks1::serialize_header(capped);
    if (!capped_raw) return 0;
    MemoryStore store(std::max<uint64_t>(need, size));
    std::memcpy(store.data().data(), data, size);
    std::memcpy(store.data().data(), capped_raw->data(), capped_raw->size());
    auto reg = fuzz::make_registry();
    static const uint8_t pass[] = {'f', 'u', 'z', 'z'};
    auto vol = luks::open(*reg, store, ConstBytes(pass, sizeof pass));
    if (vol) {
        auto t = luks::dm_table(*vol, store, "dev");
        if (t) {
            if (t->size() != 1 || !t->front().crypt) std::abort();
            (void)dm::CryptTarget::create(*reg, *t->front().crypt, std::make_shared<MemoryStore>(store.size()),
                                          t->front().length);
        }
    }
    return 0;
}
