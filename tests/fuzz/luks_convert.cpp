// LUKS conversion and token import over untrusted headers and JSON. The
// first byte picks what the rest is:
//   0: a LUKS1 header device's first bytes (in a 2 MiB store): convert to
//      LUKS2; what it writes must read back as LUKS2 with both copies good,
//      and converting that back must fail cleanly or give a good LUKS1.
//   1: a LUKS2 JSON area's text in two valid 16 KiB copies (2 MiB store):
//      convert to LUKS1; what it writes must read back as LUKS1.
//   2: a token's JSON imported into a small valid LUKS2 container: accepted
//      means the header reads back with that token.
#include "fuzz_util.hpp"

#include <blkcrypt/luks/container.hpp>
#include <blkcrypt/luks/convert.hpp>
#include <blkcrypt/luks/luks1.hpp>
#include <blkcrypt/luks/luks2.hpp>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace blkcrypt;
namespace luks2 = blkcrypt::luks::luks2;
namespace luks1 = blkcrypt::luks::luks1;

namespace {

constexpr std::size_t kStore = 2u << 20;
constexpr uint64_t kHdr = 16 * 1024;

void must_read_luks1(Registry& reg, BackingStore& s) {
    if (!luks1::read_header(reg, s).ok()) std::abort();
}

void must_read_luks2(Registry& reg, BackingStore& s) {
    Result<luks2::Header> h = luks2::read_header(reg, s);
    if (!h || !h->primary_ok || !h->secondary_ok) std::abort();
}

// The LUKS2 copies of `json`, valid checksums, into store.
bool wrap(Registry& reg, MemoryStore& store, std::string_view json) {
    luks2::BinaryHeader h;
    h.hdr_size = kHdr;
    h.seqid = 1;
    h.checksum_alg = "sha256";
    h.uuid = "00000000-0000-4000-8000-000000000000";
    for (bool secondary : {false, true}) {
        auto copy = luks2::build_copy(reg, h, secondary, json);
        if (!copy) return false;
        std::memcpy(store.data().data() + (secondary ? kHdr : 0), copy->data(), copy->size());
    }
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    auto reg = fuzz::make_registry();
    const ConstBytes rest(data + 1, size - 1);
    MemoryStore store(kStore);
    switch (data[0] % 3) {
        case 0: {
            std::memcpy(store.data().data(), rest.data(), std::min(rest.size(), kStore));
            if (!luks::convert_to_luks2(*reg, store).ok()) return 0;
            must_read_luks2(*reg, store);
            if (luks::convert_to_luks1(*reg, store).ok()) must_read_luks1(*reg, store);
            return 0;
        }
        case 1: {
            const std::string_view json(reinterpret_cast<const char*>(rest.data()), rest.size());
            if (!wrap(*reg, store, json)) return 0;
            if (luks::convert_to_luks1(*reg, store).ok()) must_read_luks1(*reg, store);
            return 0;
        }
        default: {
            // One keyslot-free container: no KDF runs per input.
            static const std::string base =
                R"({"keyslots":{},"tokens":{},"segments":{"0":{"type":"crypt","offset":"1048576","size":"dynamic",)"
                R"("iv_tweak":"0","encryption":"aes-xts-plain64","sector_size":512}},"digests":{"0":{"type":"pbkdf2",)"
                R"("keyslots":[],"segments":["0"],"hash":"sha256","iterations":1000,)"
                R"("salt":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","digest":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}},)"
                R"("config":{"json_size":"12288","keyslots_size":"1015808"}})";
            if (!wrap(*reg, store, base)) std::abort();
            const std::string_view token(reinterpret_cast<const char*>(rest.data()), rest.size());
            Result<int> id = luks2::import_token(*reg, store, token, -1, false);
            if (!id) return 0;
            Result<luks2::Header> h = luks2::read_header(*reg, store);
            if (!h || !h->md.tokens.count(*id)) std::abort();
            return 0;
        }
    }
}
