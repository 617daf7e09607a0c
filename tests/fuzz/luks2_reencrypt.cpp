// LUKS2 reencryption metadata: the input is the JSON area's text, built into
// two header copies with valid checksums (as luks2_header's even inputs), so
// every input reaches reencrypt_state. A state found is then serialised for
// its verification digest (dummy keys of the keyslots' sizes), checked
// against its digest when that is cheap, and each segment map is built for a
// few progress points (a re-key's and an encryption with a data shift's);
// a map built must parse back as valid metadata.
#include "fuzz_util.hpp"

#include <blkcrypt/luks/luks2.hpp>
#include <blkcrypt/luks/reencrypt.hpp>
#include <blkcrypt/luks/reencrypt_shift.hpp>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace blkcrypt;
namespace luks2 = blkcrypt::luks::luks2;

namespace {
constexpr uint64_t kHdr = 16 * 1024;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    auto reg = fuzz::make_registry();
    const std::string_view json(reinterpret_cast<const char*>(data), size);
    luks2::BinaryHeader h;
    h.hdr_size = kHdr;
    h.seqid = 1;
    h.checksum_alg = "sha256";
    h.uuid = "00000000-0000-4000-8000-000000000000";
    MemoryStore store(2 * kHdr);
    for (bool secondary : {false, true}) {
        auto copy = luks2::build_copy(*reg, h, secondary, json);
        if (!copy) return 0;
        std::memcpy(store.data().data() + (secondary ? kHdr : 0), copy->data(), copy->size());
    }
    Result<luks2::Header> hdr = luks2::read_header(*reg, store);
    if (!hdr) return 0;
    const luks2::Metadata& md = hdr->md;
    Result<std::optional<luks2::ReencryptState>> st = luks2::reencrypt_state(md);
    if (!st || !*st) return 0;
    const luks2::ReencryptState& s = **st;
    // Its ids name what the metadata holds.
    if (!md.keyslots.count(s.keyslot) || !md.segments.count(s.seg_previous) || !md.segments.count(s.seg_final))
        std::abort();
    const std::vector<uint8_t> k1(64, 1), k2(64, 2);
    (void)luks2::reencrypt_verification_data(md, s, k1, k2);
    if (s.digest >= 0 && md.digests.at(s.digest).iterations <= 1000) (void)luks2::reencrypt_verify(*reg, md, s, k1, k2);
    const uint64_t total = 64u << 20;
    auto check_map = [&](const Result<std::string>& map) {
        if (!map) return;
        // The map keeps the metadata's own invariants (or the input's were
        // outside what a reencryption may hold: a refusal, not a crash).
        std::vector<uint8_t> area(kHdr - luks2::kBinHeaderSize, 0);
        if (map->size() >= area.size()) return;
        std::memcpy(area.data(), map->data(), map->size());
        (void)luks2::parse_metadata(area, md.hdr);
    };
    for (uint64_t done : {uint64_t{0}, uint64_t{4096}, total / 2})
        check_map(luks2::reencrypt_progress_json(md, s, total, done, done ? 4096 : 0));
    // An encryption with a data shift (its own map writer, which checks the
    // backup segments' geometry first).
    for (uint64_t from : {uint64_t{0}, uint64_t{4096}, s.shift_size, total / 2}) {
        check_map(luks2::encrypt_shift_progress_json(md, s, from, 0));
        check_map(luks2::encrypt_shift_progress_json(md, s, from, from ? 512 : 0));
    }
    return 0;
}
