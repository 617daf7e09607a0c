// Replays tests/verity/fec/kernel/golden.tsv: the real kernel's dm-verity FEC
// reading, block by block, devices with damaged blocks whose FEC data
// blkcrypt made. Our read path must fail the same blocks and return the same
// bytes for the rest (make-kernel-golden.sh has the recipe).
#include "paths.hpp"
#include "verity_util.hpp"

#include <blkcrypt/verity/fec.hpp>
#include <blkcrypt/verity/table.hpp>
#include <blkcrypt/verity/target.hpp>
#include <blkcrypt/verity/tree.hpp>

#include <catch2/catch.hpp>

using namespace blkcrypt;
using namespace blkcrypt::verity;
using namespace verity_test;

namespace {

std::string header_value(const std::string& path, const std::string& key) {
    std::ifstream f(path);
    for (std::string line; std::getline(f, line);)
        if (line.rfind("# " + key + " ", 0) == 0) return line.substr(key.size() + 3);
    throw std::runtime_error("no '" + key + "' line in " + path);
}

// "d:B:zero", "d:B:X@OFF", "h:B:X@OFF" (make-kernel-golden.sh's damage()).
void damage(const std::string& spec, MemoryStore& data, MemoryStore& hash) {
    std::istringstream in(spec);
    for (std::string s; in >> s;) {
        if (s == "-") continue;
        auto& bytes = (s[0] == 'h' ? hash : data).data();
        const auto c2 = s.find(':', 2);
        const uint64_t blk = std::stoull(s.substr(2, c2 - 2));
        const std::string what = s.substr(c2 + 1);
        if (what == "zero") {
            std::fill_n(bytes.begin() + static_cast<std::ptrdiff_t>(blk * 4096), 4096, 0);
        } else {
            const uint64_t at = blk * 4096 + std::stoull(what.substr(2));
            std::fill_n(bytes.begin() + static_cast<std::ptrdiff_t>(at), 4, 'X');
        }
    }
}

}  // namespace

TEST_CASE("the kernel's dm-verity FEC reads equal our read path's", "[fec][golden]") {
    const std::string dir = std::string(testutil::kSourceDir) + "/tests/verity/fec/kernel/";
    const auto cases = read_tsv(dir + "cases.tsv");
    const auto golden = read_tsv(dir + "golden.tsv");
    REQUIRE(cases.size() == golden.size());
    auto& reg = testutil::registry();

    // The images the kernel read, rebuilt: same data, our tree and FEC.
    VerityParams p;
    p.data_blocks = 1000;
    p.salt = {0x0f};
    p.uuid = {0, 0, 0, 0, 0x11, 0x11, 0x42, 0x22, 0x83, 0x33, 0x44, 0x44, 0x44, 0x44, 0x44, 0x44};
    MemoryStore data(0), hash(0), fec(0);
    data.data() = ctr_data(reg, 4096000, "000000000000000000000000000000f1");
    auto tg = plan_tree(reg, p);
    REQUIRE(tg.ok());
    hash.data().resize(tg->hash_device_size(p));
    auto f = format_tree(reg, p, data, hash);
    REQUIRE(f.ok());
    auto g = fec_geometry(p, *tg, 3, fec_covered_blocks(p, *tg, hash.size()), 0);
    REQUIRE(g.ok());
    fec.data().resize(g->parity_bytes());
    REQUIRE(fec_encode(*g, data, hash, fec, 2).ok());
    std::istringstream sums(header_value(dir + "golden.tsv", "data"));
    std::string w, data_sum, hash_sum, fec_sum;
    sums >> w >> data_sum >> w >> w >> hash_sum >> w >> w >> fec_sum;  // "sha256 X hash sha256 Y fec sha256 Z"
    REQUIRE(sha256_hex(data.data()) == data_sum);
    REQUIRE(sha256_hex(hash.data()) == hash_sum);
    REQUIRE(sha256_hex(fec.data()) == fec_sum);
    auto table = parse_verity_line(header_value(dir + "golden.tsv", "table"));
    REQUIRE(table.ok());
    CHECK(table->root_hash == f->root_hash);

    for (std::size_t i = 0; i < cases.size(); ++i) {
        const std::string& name = cases[i].at(0);
        INFO(name << ": " << cases[i].at(1));
        REQUIRE(golden[i].at(0) == name);
        auto d = std::make_shared<MemoryStore>(0), h = std::make_shared<MemoryStore>(0);
        d->data() = data.data();
        h->data() = hash.data();
        damage(cases[i][1], *d, *h);
        VerityTargetOptions o;
        o.fec_device = std::make_shared<MemoryStore>(0);
        static_cast<MemoryStore&>(*o.fec_device).data() = fec.data();
        auto target = VerityTarget::create(reg, *table, d, h, o);
        REQUIRE(target.ok());
        // As dd bs=4096 iflag=direct conv=noerror,sync: block by block, a failed one as zeros.
        std::vector<uint8_t> out(4096000);
        int failed = 0;
        for (uint64_t b = 0; b < 1000; ++b) {
            Bytes blk = Bytes(out).subspan(b * 4096, 4096);
            const Status st = (*target)->read(b * 4096, blk);
            if (st != Status::Ok) {
                CHECK(st == Status::Corrupt);
                std::fill(blk.begin(), blk.end(), 0);
                ++failed;
            }
        }
        CHECK(failed == std::stoi(golden[i].at(1)));
        CHECK(sha256_hex(out) == golden[i].at(2));
    }
}
