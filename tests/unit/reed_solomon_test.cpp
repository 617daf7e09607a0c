// dm-verity FEC: the Reed-Solomon codec (code definition, errors and
// erasures at and beyond the limit) and the interleaved FEC layout against
// a direct byte-by-byte reading of formats.md section 4.5.
#include "test_util.hpp"

#include <blkcrypt/verity/fec.hpp>
#include <blkcrypt/verity/reed_solomon.hpp>
#include <blkcrypt/verity/table.hpp>
#include <blkcrypt/verity/target.hpp>
#include <blkcrypt/verity/tree.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <random>

using namespace blkcrypt;
using namespace blkcrypt::verity;

namespace {

// c(alpha^i) for the codeword as a polynomial, position k <-> x^(254-k).
uint8_t eval_at_root(const std::vector<uint8_t>& word, unsigned i) {
    uint8_t s = 0;
    for (uint8_t c : word) s = gf256::mul(s, gf256::exp(i)) ^ c;
    return s;
}

std::vector<uint8_t> random_codeword(const ReedSolomon& rs, std::mt19937& rng) {
    std::vector<uint8_t> w(255);
    for (unsigned i = 0; i < rs.message_size(); ++i) w[i] = static_cast<uint8_t>(rng());
    rs.encode(w.data(), w.data() + rs.message_size());
    return w;
}

std::vector<uint8_t> positions(std::mt19937& rng, unsigned n) {
    std::vector<uint8_t> all(255);
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    all.resize(n);
    return all;
}

void corrupt(std::vector<uint8_t>& w, const std::vector<uint8_t>& at, std::mt19937& rng) {
    for (uint8_t k : at) w[k] ^= static_cast<uint8_t>(1 + rng() % 255);  // never a no-op
}

}  // namespace

TEST_CASE("gf256 uses the field 0x11d with alpha = x", "[fec]") {
    CHECK(gf256::exp(0) == 1);
    CHECK(gf256::exp(1) == 2);
    CHECK(gf256::exp(8) == 0x1d);  // x^8 = x^4 + x^3 + x^2 + 1
    CHECK(gf256::exp(255) == 1);
    CHECK(gf256::mul(0x80, 2) == 0x1d);
    for (unsigned a = 1; a < 256; ++a) CHECK(gf256::mul(static_cast<uint8_t>(a), 1) == a);
}

TEST_CASE("Reed-Solomon codewords vanish at alpha^0 .. alpha^(roots-1)", "[fec]") {
    std::mt19937 rng(1);
    for (unsigned roots : {2u, 3u, 8u, 24u}) {
        auto rs = ReedSolomon::create(roots);
        REQUIRE(rs.ok());
        for (int n = 0; n < 20; ++n) {
            const auto w = random_codeword(*rs, rng);
            for (unsigned i = 0; i < roots; ++i) CHECK(eval_at_root(w, i) == 0);
            // (and the word is not trivially zero)
            if (n == 0) CHECK(std::any_of(w.begin(), w.end(), [](uint8_t c) { return c; }));
        }
    }
    CHECK_FALSE(ReedSolomon::create(0).ok());
    CHECK_FALSE(ReedSolomon::create(65).ok());
}

TEST_CASE("Reed-Solomon column accumulation equals per-codeword encoding", "[fec]") {
    std::mt19937 rng(2);
    for (unsigned roots : {2u, 5u, 24u}) {
        auto rs = ReedSolomon::create(roots);
        REQUIRE(rs.ok());
        const std::size_t n = 77;  // not a multiple of the 32-byte vector step
        std::vector<std::vector<uint8_t>> msg(n, std::vector<uint8_t>(rs->message_size()));
        for (auto& m : msg)
            for (auto& b : m) b = static_cast<uint8_t>(rng());
        std::vector<std::vector<uint8_t>> rows(roots, std::vector<uint8_t>(n, 0));
        std::vector<uint8_t*> ptr;
        for (auto& r : rows) ptr.push_back(r.data());
        std::vector<uint8_t> col(n);
        // Symbols in reverse order: the sum is order-free.
        for (unsigned s = rs->message_size(); s-- > 0;) {
            for (std::size_t p = 0; p < n; ++p) col[p] = msg[p][s];
            rs->accumulate(s, col.data(), ptr.data(), n);
        }
        for (std::size_t p = 0; p < n; ++p) {
            std::vector<uint8_t> par(roots);
            rs->encode(msg[p].data(), par.data());
            for (unsigned j = 0; j < roots; ++j) REQUIRE(rows[j][p] == par[j]);
        }
    }
}

TEST_CASE("Reed-Solomon decodes errors and erasures up to the limit", "[fec]") {
    std::mt19937 rng(3);
    for (unsigned roots : {2u, 3u, 8u, 24u}) {
        auto rs = ReedSolomon::create(roots);
        REQUIRE(rs.ok());
        for (int trial = 0; trial < 200; ++trial) {
            const auto good = random_codeword(*rs, rng);
            // e errors and f erasures with 2e + f <= roots, at random places.
            const unsigned f = static_cast<unsigned>(rng() % (roots + 1));
            const unsigned e = (roots - f) / 2;
            auto where = positions(rng, e + f);
            auto w = good;
            corrupt(w, where, rng);
            std::vector<uint8_t> eras(where.begin() + e, where.end());
            const int r = rs->decode(w.data(), eras);
            INFO("roots " << roots << " errors " << e << " erasures " << f);
            REQUIRE(r >= static_cast<int>(e));
            REQUIRE(w == good);
        }
        // An intact word with erasures named is left alone.
        auto w = random_codeword(*rs, rng);
        const auto copy = w;
        const std::vector<uint8_t> eras{0, 254};
        CHECK(rs->decode(w.data(), eras) == 0);
        CHECK(w == copy);
    }
}

TEST_CASE("Reed-Solomon beyond the limit never returns a non-codeword", "[fec]") {
    std::mt19937 rng(4);
    for (unsigned roots : {2u, 3u, 8u, 24u}) {
        int refused = 0;
        auto rs = ReedSolomon::create(roots);
        REQUIRE(rs.ok());
        for (int trial = 0; trial < 200; ++trial) {
            const auto good = random_codeword(*rs, rng);
            auto w = good;
            corrupt(w, positions(rng, roots / 2 + 1 + static_cast<unsigned>(rng() % 4)), rng);
            const auto damaged = w;
            const int r = rs->decode(w.data());
            if (r < 0) {
                ++refused;
                CHECK(w == damaged);  // left unchanged
            } else {
                // A miscorrection can only land on another codeword.
                CHECK(w != good);
                for (unsigned i = 0; i < roots; ++i) CHECK(eval_at_root(w, i) == 0);
            }
        }
        // More erasures than roots are refused outright.
        auto w = random_codeword(*rs, rng);
        auto many = positions(rng, roots + 1);
        CHECK(rs->decode(w.data(), many) == -1);
        // With 12 correctable errors a word past the limit is within reach of
        // another codeword with probability ~1e-9: all are detected. (With 2
        // roots nearly every word is within 1 of some codeword.)
        if (roots == 24) CHECK(refused == 200);
    }
}

namespace {

// The FEC layout read literally: codeword c takes message byte
// c + j * rounds * bs for j < rsn; its parity goes at c * roots.
std::vector<uint8_t> reference_parity(const FecGeometry& g, const std::vector<uint8_t>& message) {
    auto rs = ReedSolomon::create(g.roots);
    REQUIRE(rs.ok());
    const uint64_t R = g.rounds * g.block_size;
    std::vector<uint8_t> out(R * g.roots), m(g.rsn);
    for (uint64_t c = 0; c < R; ++c) {
        for (unsigned j = 0; j < g.rsn; ++j) {
            const uint64_t at = c + j * R;
            m[j] = at < message.size() ? message[at] : 0;
        }
        rs->encode(m.data(), &out[c * g.roots]);
    }
    return out;
}

struct FecImage {
    VerityParams p;
    TreeGeometry tg;
    FecGeometry g;
    MemoryStore data, hash, fec;
};

std::unique_ptr<FecImage> make_fec_image(uint32_t bs, uint64_t blocks, uint32_t roots, unsigned threads,
                                         uint64_t hash_extra = 0, uint64_t fec_offset = 1024) {
    VerityParams p;
    p.data_block_size = p.hash_block_size = bs;
    p.data_blocks = blocks;
    p.salt = {1, 2, 3};
    auto tg = plan_tree(testutil::registry(), p);
    REQUIRE(tg.ok());
    const uint64_t hash_size = tg->hash_device_size(p) + hash_extra;
    auto img = std::unique_ptr<FecImage>(new FecImage{p, *tg, {}, MemoryStore(blocks * bs), MemoryStore(hash_size),
                                                      MemoryStore(0)});
    std::mt19937 rng(static_cast<unsigned>(blocks * 31 + roots));
    for (auto& b : img->data.data()) b = static_cast<uint8_t>(rng());
    REQUIRE(format_tree(testutil::registry(), p, img->data, img->hash).ok());
    for (uint64_t i = tg->hash_device_size(p); i < hash_size; ++i) img->hash.data()[i] = static_cast<uint8_t>(rng());
    auto g = fec_geometry(p, *tg, roots, fec_covered_blocks(p, *tg, hash_size), fec_offset);
    REQUIRE(g.ok());
    img->g = *g;
    img->fec.data().assign(g->offset + g->parity_bytes(), 0xee);
    REQUIRE(fec_encode(*g, img->data, img->hash, img->fec, threads).ok());
    return img;
}

std::vector<uint8_t> message_of(FecImage& img) {
    std::vector<uint8_t> m = img.data.data();
    const auto& h = img.hash.data();
    const uint64_t from = img.g.hash_start * img.g.block_size;
    m.insert(m.end(), h.begin() + static_cast<std::ptrdiff_t>(from),
             h.begin() + static_cast<std::ptrdiff_t>(from + (img.g.covered - img.g.data_blocks) * img.g.block_size));
    return m;
}

}  // namespace

TEST_CASE("FEC geometry follows veritysetup's counts and rules", "[fec]") {
    VerityParams p;
    p.data_blocks = 1000;
    auto tg = plan_tree(testutil::registry(), p);
    REQUIRE(tg.ok());
    // veritysetup format, 1000 blocks of 4096, --fec-roots 3: "FEC blocks: 15".
    const uint64_t covered = fec_covered_blocks(p, *tg, tg->hash_device_size(p));
    CHECK(covered == 1009);
    auto g = fec_geometry(p, *tg, 3, covered, 0);
    REQUIRE(g.ok());
    CHECK(g->rounds == 5);
    CHECK(g->parity_blocks() == 15);
    CHECK_FALSE(fec_geometry(p, *tg, 1, covered, 0).ok());
    CHECK_FALSE(fec_geometry(p, *tg, 25, covered, 0).ok());
    CHECK_FALSE(fec_geometry(p, *tg, 2, covered, 100).ok());
    CHECK_FALSE(fec_geometry(p, *tg, 2, 1000, 0).ok());  // misses the tree
    VerityParams q = p;
    q.hash_block_size = 1024;
    auto tq = plan_tree(testutil::registry(), q);
    REQUIRE(tq.ok());
    CHECK_FALSE(fec_geometry(q, *tq, 2, covered, 0).ok());
}

TEST_CASE("FEC parity matches the layout read byte by byte", "[fec]") {
    // Sizes that fill the last round and that do not; hash area with extra
    // trailing blocks (covered, as veritysetup covers the whole device).
    struct Case {
        uint32_t bs;
        uint64_t blocks;
        uint32_t roots;
        unsigned threads;
        uint64_t extra;
    } cases[] = {{512, 1, 2, 1, 0},   {512, 300, 3, 3, 0},  {4096, 253 * 2 - 3, 2, 2, 0},
                 {4096, 100, 24, 3, 4096 * 5}, {1024, 700, 8, 1, 0}, {4096, 2000, 8, 4, 0}};
    for (const auto& c : cases) {
        INFO("bs " << c.bs << " blocks " << c.blocks << " roots " << c.roots);
        auto img = make_fec_image(c.bs, c.blocks, c.roots, c.threads, c.extra);
        const auto want = reference_parity(img->g, message_of(*img));
        const auto& f = img->fec.data();
        REQUIRE(f.size() == img->g.offset + want.size());
        CHECK(std::all_of(f.begin(), f.begin() + 1024, [](uint8_t b) { return b == 0xee; }));
        CHECK(std::equal(want.begin(), want.end(), f.begin() + 1024));
    }
}

TEST_CASE("FEC reconstructs damaged data and hash blocks", "[fec]") {
    auto img = make_fec_image(4096, 600, 4, 2);
    const FecGeometry& g = img->g;
    std::vector<uint8_t> out(4096);
    const auto original = img->data.data();
    // Whole data block 7 destroyed, and a hash block: both known bad.
    std::fill_n(img->data.data().begin() + 7 * 4096, 4096, 0);
    const uint64_t hb = g.hash_start + 1;
    const auto hash_orig = std::vector<uint8_t>(img->hash.data().begin() + static_cast<std::ptrdiff_t>(hb * 4096),
                                                img->hash.data().begin() + static_cast<std::ptrdiff_t>((hb + 1) * 4096));
    std::fill_n(img->hash.data().begin() + static_cast<std::ptrdiff_t>(hb * 4096), 4096, 0xff);
    const uint64_t hm = fec_message_block_of_hash(g, hb);
    const std::vector<uint64_t> bad{7, hm};
    auto r = fec_correct_block(g, img->data, img->hash, img->fec, 7, out, bad);
    REQUIRE(r.ok());
    CHECK(*r > 4000);
    CHECK(std::equal(out.begin(), out.end(), original.begin() + 7 * 4096));
    r = fec_correct_block(g, img->data, img->hash, img->fec, hm, out, bad);
    REQUIRE(r.ok());
    CHECK(out == hash_orig);
    std::copy(hash_orig.begin(), hash_orig.end(), img->hash.data().begin() + static_cast<std::ptrdiff_t>(hb * 4096));
    // Without the erasure hints, a whole bad block is one error per codeword:
    // 4 roots correct 2 of them in one round.
    r = fec_correct_block(g, img->data, img->hash, img->fec, 7, out);
    REQUIRE(r.ok());
    CHECK(std::equal(out.begin(), out.end(), original.begin() + 7 * 4096));
    // Three whole blocks of one round, not named: beyond 4 roots.
    for (uint64_t k = 1; k <= 2; ++k)
        std::fill_n(img->data.data().begin() + static_cast<std::ptrdiff_t>((7 + k * g.rounds) * 4096), 4096, 0x5a);
    r = fec_correct_block(g, img->data, img->hash, img->fec, 7, out);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().status == Status::Corrupt);
    // Named as erasures, the same three are within reach.
    const std::vector<uint64_t> three{7, 7 + g.rounds, 7 + 2 * g.rounds};
    r = fec_correct_block(g, img->data, img->hash, img->fec, 7, out, three);
    REQUIRE(r.ok());
    CHECK(std::equal(out.begin(), out.end(), original.begin() + 7 * 4096));
}

TEST_CASE("verity table FEC options parse, print in cryptsetup's order and are checked", "[fec]") {
    const std::string args =
        "1 d h 4096 4096 1000 1 sha256 6ab3cd39cb8a60c474f004026054f5d6303781dc5fad93f12e9b3ee4f224e565 00 "
        "8 use_fec_from_device f fec_start 3 fec_blocks 1009 fec_roots 3";
    auto t = parse_verity_args(args);
    REQUIRE(t.ok());
    CHECK(t->fec.device == "f");
    CHECK(t->fec.start == 3);
    CHECK(t->fec.blocks == 1009);
    CHECK(t->fec.roots == 3);
    CHECK(t->args() == args);
    const char* bad[] = {
        "1 d h 4096 4096 1000 1 sha256 00 - 2 fec_roots 3",                                  // no device
        "1 d h 4096 4096 1000 1 sha256 00 - 4 use_fec_from_device f fec_blocks 1009",        // no roots
        "1 d h 4096 4096 1000 1 sha256 00 - 6 use_fec_from_device f fec_blocks 1009 fec_roots 25",
        "1 d h 4096 4096 1000 1 sha256 00 - 6 use_fec_from_device f fec_blocks 10 fec_roots 2",  // < data
        "1 d h 4096 1024 1000 1 sha256 00 - 6 use_fec_from_device f fec_blocks 1009 fec_roots 2",
        "1 d h 4096 4096 1000 1 sha256 00 - 1 use_fec_from_device",                          // no value
        "1 d h 4096 4096 1000 1 sha256 00 - 6 use_fec_from_device f fec_blocks x fec_roots 2",
    };
    for (const char* b : bad) {
        INFO(b);
        CHECK_FALSE(parse_verity_args(b).ok());
    }
}

TEST_CASE("the verity read path corrects damaged blocks through FEC", "[fec]") {
    auto img = make_fec_image(4096, 600, 4, 2, 0, 8192);
    const FecGeometry& g = img->g;
    const auto original = img->data.data();
    // The root hash: format_tree again, into a scratch hash device.
    MemoryStore h2(img->hash.size());
    auto f = format_tree(testutil::registry(), img->p, img->data, h2);
    REQUIRE(f.ok());
    auto t = make_verity_table(img->p, img->tg, f->root_hash, "d", "h");
    t.fec = {"f", g.offset / 4096, g.covered, g.roots};
    auto data = std::make_shared<MemoryStore>(0), hash = std::make_shared<MemoryStore>(0),
         fec = std::make_shared<MemoryStore>(0);
    data->data() = img->data.data();
    hash->data() = img->hash.data();
    fec->data() = img->fec.data();
    // rounds = ceil(606 / 251) = 3: blocks 7, 10, 13, 16 are one group.
    REQUIRE(g.rounds == 3);
    for (uint64_t b : {7u, 10u, 13u}) std::fill_n(data->data().begin() + static_cast<std::ptrdiff_t>(b * 4096), 4096, 0);
    hash->data()[(g.hash_start + 2) * 4096 + 5] ^= 1;  // a leaf hash block
    VerityTargetOptions o;
    std::vector<Corruption> seen;
    o.log = [&](const Corruption& c) { seen.push_back(c); };
    CHECK_FALSE(VerityTarget::create(testutil::registry(), t, data, hash, o).ok());  // FEC device missing
    o.fec_device = fec;
    auto target = VerityTarget::create(testutil::registry(), t, data, hash, o);
    REQUIRE(target.ok());
    std::vector<uint8_t> out(600 * 4096);
    REQUIRE((*target)->read(0, out) == Status::Ok);
    CHECK(out == original);
    CHECK(seen.empty());
    CHECK((*target)->status_char() == 'V');
    CHECK((*target)->stats().fec_corrected == 4);  // three data blocks and the hash block
    // A fifth bad block in the group: 4 erasures + 1 error > 4 roots.
    for (uint64_t b : {16u, 19u}) std::fill_n(data->data().begin() + static_cast<std::ptrdiff_t>(b * 4096), 4096, 0);
    auto again = VerityTarget::create(testutil::registry(), t, data, hash, o);
    REQUIRE(again.ok());
    CHECK((*again)->read(7 * 4096, Bytes(out).first(4096)) == Status::Corrupt);
    REQUIRE_FALSE(seen.empty());
    CHECK(seen[0].kind == Corruption::DataBlock);
    CHECK(seen[0].block == 7);
}
