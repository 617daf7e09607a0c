// dm-crypt golden vectors from the real Linux kernel (tests/dmcrypt/golden/):
// every case of manifest.tsv through the IV-generation templates, as one
// request and in scatter-gather pieces split inside sectors, in place and out
// of place, both directions.
#include "dmcrypt_golden.hpp"
#include "test_util.hpp"

#include <blkcrypt/internal/bytes_util.hpp>
#include <blkcrypt/dm/table.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/request.hpp>
#include <blkcrypt/sg.hpp>
#include <blkcrypt/skcipher.hpp>

#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

using namespace blkcrypt;

namespace {

using testutil::read_file;

using Buf = std::vector<uint8_t>;

// Three pieces of buf, cut at a and b.
std::vector<SgEntry> three(Buf& buf, std::size_t a, std::size_t b) {
    return {SgEntry{buf.data(), a}, SgEntry{buf.data() + a, b - a}, SgEntry{buf.data() + b, buf.size() - b}};
}

Status run(const Skcipher& tfm, bool enc, const std::vector<SgEntry>& src, const std::vector<SgEntry>& dst,
           std::size_t len, Buf iv) {
    return testutil::crypt_sg(tfm, enc, SgList(src.data(), src.size()), SgList(dst.data(), dst.size()), len,
                              Bytes(iv.data(), iv.size()));
}

// Checks one case; returns "" or what went wrong.
std::string check_case(Registry& reg, const golden::Case& c, const Buf& plaintext) {
    auto t = dm::parse_crypt_args(golden::crypt_args(c));
    if (!t) return "table: " + t.error().message;
    auto tfm = Skcipher::alloc(reg, t->alg_name);
    if (!tfm) return "alloc " + t->alg_name + ": " + tfm.error().message;
    if (!t->ivmode.empty()) {
        SectorParams p;
        p.sector_size = t->sector_size;
        p.iv_large_sectors = t->iv_large_sectors;
        p.key_count = t->key_count;
        if (Status s = tfm->set_sector_params(p); s != Status::Ok)
            return std::string("set_sector_params: ") + to_string(s);
    } else if (t->key_count != 1) {
        return "key count without an IV mode";
    }
    if (Status s = tfm->setkey(t->key); s != Status::Ok) return std::string("setkey: ") + to_string(s);

    Buf ct;
    if (!read_file(golden::kDir + c.ct_file, &ct)) return "missing " + c.ct_file;
    if (ct.size() != c.size || plaintext.size() < c.size) return "size mismatch";
    const Buf pt(plaintext.begin(), plaintext.begin() + static_cast<std::ptrdiff_t>(c.size));
    const std::size_t n = c.size;

    // The request IV: LE64 of the first 512-byte sector (iv_offset included).
    Buf iv(tfm->ivsize(), 0);
    if (!iv.empty()) {
        if (iv.size() != 8) return "unexpected IV size " + std::to_string(iv.size());
        put_le64(iv.data(), t->iv_offset);
    }
    std::string err;
    auto fail = [&](const std::string& what) {
        if (err.empty()) err = what;
    };

    // One request, flat buffers.
    {
        Buf out(n), ivc = iv;
        Status s = tfm->encrypt(pt, out, ivc);
        if (s != Status::Ok) fail(std::string("encrypt: ") + to_string(s));
        else if (out != ct) fail("encrypt differs from the kernel");
        Buf back(n);
        ivc = iv;
        s = tfm->decrypt(ct, back, ivc);
        if (s != Status::Ok) fail(std::string("decrypt: ") + to_string(s));
        else if (back != pt) fail("decrypt differs from the plaintext");
    }
    // In place, three pieces cut inside sectors.
    const std::size_t a = 100, b = n - 1000;  // b: inside a sector for 512 and 4096
    {
        Buf buf = pt;
        auto sg = three(buf, a, b);
        Status s = run(*tfm, true, sg, sg, n, iv);
        if (s != Status::Ok) fail(std::string("sg in-place encrypt: ") + to_string(s));
        else if (buf != ct) fail("sg in-place encrypt differs");
        s = run(*tfm, false, sg, sg, n, iv);
        if (s != Status::Ok) fail(std::string("sg in-place decrypt: ") + to_string(s));
        else if (buf != pt) fail("sg in-place decrypt differs");
    }
    // Out of place, differently cut source and destination; the source stays.
    {
        Buf src = pt, dst(n, 0xa5);
        auto s_sg = three(src, a, b);
        auto d_sg = three(dst, 700, n - 300);
        Status s = run(*tfm, true, s_sg, d_sg, n, iv);
        if (s != Status::Ok) fail(std::string("sg out-of-place encrypt: ") + to_string(s));
        else if (dst != ct) fail("sg out-of-place encrypt differs");
        if (src != pt) fail("sg out-of-place encrypt modified its source");
        Buf csrc = ct, pdst(n, 0x5a);
        auto cs = three(csrc, 333, n - 77);
        auto pd = three(pdst, a, b);
        s = run(*tfm, false, cs, pd, n, iv);
        if (s != Status::Ok) fail(std::string("sg out-of-place decrypt: ") + to_string(s));
        else if (pdst != pt) fail("sg out-of-place decrypt differs");
        if (csrc != ct) fail("sg out-of-place decrypt modified its source");
    }
    return err;
}

}  // namespace

TEST_CASE("every kernel golden case matches byte for byte", "[ivgolden]") {
    auto cases = golden::read_manifest();
    REQUIRE(!cases.empty());
    Buf plaintext;
    REQUIRE(read_file(golden::kDir + "plaintext.bin", &plaintext));

    Registry reg;
    REQUIRE(register_defaults(reg));
    std::vector<std::string> failures;
    std::size_t passed = 0;
    for (const auto& c : cases) {
        std::string err = check_case(reg, c, plaintext);
        if (err.empty()) ++passed;
        else failures.push_back(c.name + " (" + c.cipher + "): " + err);
    }
    for (const auto& f : failures) UNSCOPED_INFO(f);
    INFO(cases.size() << " cases: " << passed << " passed, " << failures.size() << " failed");
    CHECK(failures.empty());
    // Every case runs: none is skipped for an algorithm blkcrypt lacks.
    CHECK(passed == cases.size());
    CHECK(cases.size() == 90);
}
