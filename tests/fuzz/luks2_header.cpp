// LUKS2 metadata. The first byte picks what the rest is:
//   even: the JSON area's text. Both header copies are built around it with
//         valid checksums, so every input reaches the JSON validation; then
//         read_header, dump, dump_json and (when the KDF costs are small) an
//         unlock attempt over keyslot areas of zeros.
//   odd:  a raw header image (binary header, JSON area, maybe a secondary):
//         parse_binary_header and parse_metadata without the checksum, then
//         read_header over the bytes as they are.
#include "fuzz_util.hpp"

#include <blkcrypt/luks/luks2.hpp>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace blkcrypt;
namespace luks2 = blkcrypt::luks::luks2;

namespace {

constexpr uint64_t kHdr = 16 * 1024;
constexpr std::size_t kAreas = 512 * 1024;  // keyslot areas the store holds

bool cheap(const luks2::Metadata& md) {
    for (const auto& [id, k] : md.keyslots) {
        if (k.kdf.type == "pbkdf2" && k.kdf.iterations > 1000) return false;
        if (k.kdf.type != "pbkdf2" && (k.kdf.memory > 256 || k.kdf.time > 4 || k.kdf.cpus > 4)) return false;
    }
    for (const auto& [id, d] : md.digests)
        if (d.iterations > 1000) return false;
    return true;
}

void exercise(Registry& reg, BackingStore& store) {
    Result<luks2::Header> h = luks2::read_header(reg, store);
    if (!h) return;
    const std::string text = luks2::dump(h->md);
    const std::string js = luks2::dump_json(h->md);
    // The pretty form is JSON that names the same objects.
    auto back = nlohmann::ordered_json::parse(js, nullptr, false);
    auto orig = nlohmann::ordered_json::parse(h->md.json, nullptr, false);
    if (back.is_discarded() || !back.is_object() || back != orig) std::abort();
    if (text.rfind("LUKS header information\n", 0) != 0) std::abort();
    if (!cheap(h->md)) return;
    const uint8_t pw[] = {'f', 'u', 'z', 'z'};
    (void)luks2::open(reg, store, pw);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    auto reg = fuzz::make_registry();
    const ConstBytes rest(data + 1, size - 1);
    if ((data[0] & 1) == 0) {
        const std::string_view json(reinterpret_cast<const char*>(rest.data()), rest.size());
        luks2::BinaryHeader h;
        h.hdr_size = kHdr;
        h.seqid = 1;
        h.checksum_alg = "sha256";
        h.uuid = "00000000-0000-4000-8000-000000000000";
        MemoryStore store(2 * kHdr + kAreas);
        for (bool secondary : {false, true}) {
            auto copy = luks2::build_copy(*reg, h, secondary, json);
            if (!copy) return 0;
            std::memcpy(store.data().data() + (secondary ? kHdr : 0), copy->data(), copy->size());
        }
        exercise(*reg, store);
        return 0;
    }
    auto bin = luks2::parse_binary_header(rest, false, 0);
    if (bin && bin->hdr_size <= 64 * 1024) {
        std::vector<uint8_t> area(bin->hdr_size - luks2::kBinHeaderSize, 0);
        const std::size_t have = rest.size() > luks2::kBinHeaderSize ? rest.size() - luks2::kBinHeaderSize : 0;
        std::memcpy(area.data(), rest.data() + luks2::kBinHeaderSize, std::min(have, area.size()));
        (void)luks2::parse_metadata(area, *bin);
    }
    MemoryStore store(rest.size());
    std::memcpy(store.data().data(), rest.data(), rest.size());
    exercise(*reg, store);
    return 0;
}
