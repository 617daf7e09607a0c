// dm-verity FEC: parameters and the Reed-Solomon decoder on damaged
// codewords. Byte 0: roots; then a message, damage positions and values and
// which of them are named as erasures. Invariants: within the code's reach
// (2 * errors + erasures <= roots) the decoder restores the codeword exactly;
// beyond it, anything it returns as corrected is a codeword. Then FEC
// geometry from the input's numbers, and a small FEC image with one block
// damaged as the input says, which must be rebuilt exactly when in reach.
#include "fuzz_util.hpp"

#include <blkcrypt/verity/fec.hpp>
#include <blkcrypt/verity/reed_solomon.hpp>

#include <cstdlib>
#include <cstring>
#include <vector>

using namespace blkcrypt;
using namespace blkcrypt::verity;

namespace {

void codec(fuzz::Input& in) {
    const unsigned roots = 1 + in.byte() % 30;
    auto rs = ReedSolomon::create(roots);
    if (!rs) std::abort();
    uint8_t good[255] = {};
    const std::string_view msg = in.take(rs->message_size());
    std::memcpy(good, msg.data(), msg.size());
    rs->encode(good, good + rs->message_size());
    uint8_t w[255];
    std::memcpy(w, good, 255);
    const unsigned n = in.byte() % 40;
    std::vector<uint8_t> eras;
    bool hit[255] = {};
    unsigned errors = 0;
    for (unsigned i = 0; i < n; ++i) {
        const uint8_t pos = static_cast<uint8_t>(in.byte() % 255);
        const uint8_t val = in.byte();
        const bool erase = in.byte() & 1;
        if (hit[pos]) continue;
        hit[pos] = true;
        w[pos] ^= val;
        if (erase) eras.push_back(pos);
        else if (val) ++errors;
    }
    const int r = rs->decode(w, eras);
    if (2 * errors + eras.size() <= roots) {
        if (r < 0 || std::memcmp(w, good, 255) != 0) std::abort();
    } else if (r >= 0) {
        uint8_t again[255];
        std::memcpy(again, w, 255);
        if (rs->decode(again) != 0 || std::memcmp(again, w, 255) != 0) std::abort();  // not a codeword
    }
}

void layout(fuzz::Input& in) {
    VerityParams p;
    p.data_block_size = p.hash_block_size = 512u << (in.byte() % 4);
    p.data_blocks = 1 + in.byte() % 40;
    p.superblock = in.byte() & 1;
    const uint32_t roots = in.byte() % 27;
    const uint64_t covered = p.data_blocks + in.byte();
    const uint64_t offset = uint64_t{in.byte()} * 256;
    auto tg = compute_geometry(p, 32);
    if (!tg) return;
    auto g = fec_geometry(p, *tg, roots, covered, offset);
    if (!g) return;
    if (g->roots < 2 || g->roots > 24 || g->rounds * g->rsn < g->covered) std::abort();
    // A small image: data and hash from the input, parity computed, one block damaged.
    MemoryStore data(p.data_blocks * p.data_block_size), hash((tg->hash_start_block + g->covered) * p.data_block_size),
        fec(g->offset + g->parity_bytes());
    for (auto& b : data.data()) b = in.byte();
    if (!fec_encode(*g, data, hash, fec, 1)) std::abort();
    const uint64_t m = in.byte() % p.data_blocks;
    std::vector<uint8_t> orig(data.data().begin() + static_cast<std::ptrdiff_t>(m * p.data_block_size),
                              data.data().begin() + static_cast<std::ptrdiff_t>((m + 1) * p.data_block_size));
    const unsigned nbad = in.byte() % 64;
    for (unsigned i = 0; i < nbad; ++i) data.data()[m * p.data_block_size + in.byte() * 2u % p.data_block_size] ^= 0x5a;
    std::vector<uint8_t> out(p.data_block_size);
    const uint64_t bad[] = {m};
    auto r = fec_correct_block(*g, data, hash, fec, m, out, bad);  // one erasure: always in reach
    if (!r || out != orig) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    fuzz::Input in(data, size);
    if (in.byte() & 1) codec(in);
    else layout(in);
    return 0;
}
