// tests/dmcrypt/golden/refused.tsv: tables the Linux kernel's dm-crypt
// refused when the goldens were made. Each must be refused here too, by the
// table parser or by target creation, with a key of the size the kernel was
// given.
#include "dmcrypt_golden.hpp"
#include "test_util.hpp"

#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/registry.hpp>

#include <catch2/catch.hpp>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

using namespace blkcrypt;
using namespace blkcrypt::dm;

namespace {

struct Refused {
    std::string name, cipher, opts, kernel_error;
    std::size_t key_bytes = 0, sector_size = 512;
    uint64_t iv_offset = 0;
};

// refused.tsv: case cipher key_bytes iv_offset sector_size opts kernel_error
std::vector<Refused> read_refused() {
    std::vector<Refused> out;
    for (const auto& w : golden::read_tsv(golden::kDir + "refused.tsv", 7)) {
        Refused r;
        r.name = w[0];
        r.cipher = w[1];
        r.key_bytes = std::stoul(w[2]);
        r.iv_offset = std::stoull(w[3]);
        r.sector_size = std::stoul(w[4]);
        r.opts = w[5] == "-" ? "" : w[5];
        r.kernel_error = w[6];
        out.push_back(r);
    }
    return out;
}

// A key of n bytes: 01 02 03 ... as hex (any key; the kernel refused the shape).
std::string key_hex(std::size_t n) {
    static const char* d = "0123456789abcdef";
    std::string s;
    for (std::size_t i = 0; i < n; ++i) {
        const auto b = static_cast<uint8_t>(i + 1);
        s += d[b >> 4];
        s += d[b & 15];
    }
    return n ? s : "-";
}

}  // namespace

TEST_CASE("every table the kernel refused is refused", "[dmcrypt][refused]") {
    auto cases = read_refused();
    REQUIRE(cases.size() >= 6);
    for (const auto& r : cases) {
        golden::Case c;
        c.cipher = r.cipher;
        c.key_hex = key_hex(r.key_bytes);
        c.iv_offset = r.iv_offset;
        c.sector_size = r.sector_size;
        c.opts = r.opts;
        const std::string args = golden::crypt_args(c);
        INFO(r.name << ": '" << r.cipher << "', kernel: " << r.kernel_error);
        auto t = parse_crypt_args(args);
        if (!t) {
            SUCCEED("refused by the parser: " << t.error().message);
            continue;
        }
        // The kernel's allocation failures (-ENOENT, -EINVAL from the IV
        // mode or the key) come at target creation here.
        auto target = CryptTarget::create(testutil::registry(), *t, std::make_shared<MemoryStore>(1 << 16));
        INFO("parsed as " << t->alg_name);
        CHECK(!target);
    }
}
