// The VAES drivers, xts-aes-vaes (AVX-512, 16 blocks in flight) and
// xts-aes-vaes-avx2 (ymm registers, 8 blocks in flight), each test case once
// per driver, against the composition xts(aes-cryptopp): every length
// 16..600 byte by byte for each key size, in place and out of place,
// contiguous and scattered, decryption back; long data units; data units
// against unmapped pages (the tail loads and stores must stay inside); equal
// key halves; and the dm-crypt engine writing and reading an image through
// it. Each driver is skipped (with a warning) where the CPU lacks its
// instructions, and must be registered where it has them.
#include "test_util.hpp"

#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/skcipher.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

using namespace blkcrypt;
using testutil::cpu_has_vaes_avx2;
using testutil::cpu_has_vaes_avx512;
using testutil::crypt_sg;
using testutil::hex;
using testutil::registry;

namespace {

using Buf = std::vector<uint8_t>;

using testutil::random_bytes;

struct Driver {
    const char* name;
    bool (*cpu_has)();   // the test's own judgement of the CPU
    const char* needs;   // for the messages
    int priority;
};
const Driver kDrivers[] = {
    {"xts-aes-vaes", cpu_has_vaes_avx512, "VAES/AVX-512", 400},
    {"xts-aes-vaes-avx2", cpu_has_vaes_avx2, "VAES/AVX2", 350},
};

// Each driver in turn (one run of the test case each).
const Driver& each_driver() {
    const Driver& d = kDrivers[GENERATE(as<std::size_t>{}, 0, 1)];
    static_assert(std::size(kDrivers) == 2);
    return d;
}

// The driver, or nothing (with a warning) on a CPU without the instructions.
std::optional<Skcipher> vaes_driver(const Driver& d) {
    auto t = Skcipher::alloc(registry(), d.name);
    if (t) return std::move(t).value();
    if (d.cpu_has()) FAIL("the CPU has " << d.needs << " but " << d.name << " is not registered");
    WARN("no " << d.needs << " on this CPU (or hidden): " << d.name << " is not registered, test skipped");
    return std::nullopt;
}

Skcipher reference() {
    auto t = Skcipher::alloc(registry(), "xts(aes-cryptopp)");
    REQUIRE(t);
    return std::move(t).value();
}

Buf run(const Skcipher& t, bool enc, const Buf& in, const Buf& iv) {
    Buf out(in.size(), 0xee), ivc = iv;
    REQUIRE((enc ? t.encrypt(in, out, ivc) : t.decrypt(in, out, ivc)) == Status::Ok);
    REQUIRE(ivc == iv);  // the tweak is left unchanged
    return out;
}

Buf run_in_place(const Skcipher& t, bool enc, const Buf& in, const Buf& iv) {
    Buf buf = in, ivc = iv;
    const SgEntry sg{buf.data(), buf.size()};
    REQUIRE(crypt_sg(t, enc, SgList(&sg, 1), SgList(&sg, 1), buf.size(), ivc) == Status::Ok);
    REQUIRE(ivc == iv);
    return buf;
}

// Random cuts of [0, n) into segments (some tiny, some empty).
std::vector<SgEntry> cut(std::mt19937_64& rng, uint8_t* p, std::size_t n) {
    std::vector<SgEntry> sg;
    for (std::size_t pos = 0; pos < n;) {
        std::size_t k = 1 + rng() % (rng() % 2 ? 40 : n);
        k = std::min(k, n - pos);
        if (rng() % 8 == 0) sg.push_back({p + pos, 0});
        sg.push_back({p + pos, k});
        pos += k;
    }
    return sg;
}

// Scattered src and dst (or the same scattered buffer, in place).
Buf run_scattered(std::mt19937_64& rng, const Skcipher& t, bool enc, const Buf& in, const Buf& iv, bool in_place) {
    Buf src = in, dst(in.size(), 0xee), ivc = iv;
    const auto s = cut(rng, src.data(), src.size());
    const auto d = in_place ? s : cut(rng, dst.data(), dst.size());
    REQUIRE(crypt_sg(t, enc, s, d, in.size(), ivc) == Status::Ok);
    REQUIRE(ivc == iv);
    return in_place ? src : dst;
}

// Every way of running one data unit: equal to the reference, and back.
void check_unit(std::mt19937_64& rng, const Skcipher& v, const Skcipher& ref, const Buf& pt, const Buf& iv) {
    const Buf want = run(ref, true, pt, iv);
    REQUIRE(run(v, true, pt, iv) == want);
    REQUIRE(run_in_place(v, true, pt, iv) == want);
    REQUIRE(run(v, false, want, iv) == pt);
    REQUIRE(run_in_place(v, false, want, iv) == pt);
    const bool in_place = rng() % 2;
    INFO((in_place ? "scattered, in place" : "scattered, out of place"));
    REQUIRE(run_scattered(rng, v, true, pt, iv, in_place) == want);
    REQUIRE(run_scattered(rng, v, false, want, iv, !in_place) == pt);
}

}  // namespace

TEST_CASE("xts-aes-vaes: is the xts(aes) driver where the CPU allows", "[xtsvaes]") {
    const Driver& d = each_driver();
    INFO(d.name);
    auto v = vaes_driver(d);
    if (!v) return;
    CHECK(v->info().driver == d.name);
    CHECK(v->info().module == "x86");
    CHECK(v->info().priority == d.priority);
    CHECK(v->ivsize() == 16);
    // The zmm driver wins where the CPU has both, the ymm one where it has
    // no AVX-512 (or it is hidden).
    auto a = Skcipher::alloc(registry(), "xts(aes)");
    REQUIRE(a);
    CHECK(a->info().driver == (cpu_has_vaes_avx512() ? "xts-aes-vaes" : "xts-aes-vaes-avx2"));
}

// Each length with each key size (AES-128, -192, -256), against the
// reference; edge_ivs adds IVs of all zeros, all ones and 0x80 bytes.
void check_lengths(uint64_t seed, const std::vector<std::size_t>& lengths, bool edge_ivs = false) {
    const Driver& d = each_driver();
    INFO(d.name);
    auto v = vaes_driver(d);
    if (!v) return;
    Skcipher ref = reference();
    std::mt19937_64 rng(seed);
    for (std::size_t keylen : {32u, 48u, 64u}) {
        const Buf key = random_bytes(rng, keylen);
        REQUIRE(v->setkey(key) == Status::Ok);
        REQUIRE(ref.setkey(key) == Status::Ok);
        for (std::size_t len : lengths) {
            INFO("key " << keylen << " bytes, length " << len);
            check_unit(rng, *v, ref, random_bytes(rng, len), random_bytes(rng, 16));
        }
        for (uint8_t fill : {0x00, 0xff, 0x80}) {
            if (!edge_ivs) break;
            INFO("key " << keylen << " bytes, IV filled with " << int(fill));
            check_unit(rng, *v, ref, random_bytes(rng, 1000), Buf(16, fill));
        }
    }
}

TEST_CASE("xts-aes-vaes: every length 16..600 against xts(aes-cryptopp)", "[xtsvaes]") {
    std::vector<std::size_t> lengths;
    for (std::size_t len = 16; len <= 600; ++len) lengths.push_back(len);
    check_lengths(0x7e5, lengths);
}

TEST_CASE("xts-aes-vaes: long data units and tweak edge values", "[xtsvaes]") {
    check_lengths(0x10c, {4096, 4097, 4111, 4112, 65536 + 15, 65536 + 16 * 3 + 5, (1u << 20) + 17}, true);
}

TEST_CASE("xts-aes-vaes: keys as the xts template takes them", "[xtsvaes]") {
    const Driver& d = each_driver();
    INFO(d.name);
    auto v = vaes_driver(d);
    if (!v) return;
    Skcipher ref = reference();
    for (std::size_t n : {0u, 1u, 16u, 24u, 31u, 33u, 40u, 47u, 49u, 63u, 65u, 96u, 128u}) {
        INFO("key " << n);
        CHECK(v->setkey(Buf(n, 1)) == Status::Invalid);
    }
    // IEEE 1619 vector 1: an all-zero key (equal halves, which the kernel
    // accepts outside FIPS mode), IV 0, 32 zero bytes.
    REQUIRE(v->setkey(Buf(32, 0)) == Status::Ok);
    const Buf ct = run(*v, true, Buf(32, 0), Buf(16, 0));
    CHECK(hex(ct) == "917cf69ebd68b2ec9b9fe9a3eadda692cd43d2f59598ed858c02c2652fbf922e");
    REQUIRE(ref.setkey(Buf(32, 0)) == Status::Ok);
    CHECK(run(ref, true, Buf(32, 0), Buf(16, 0)) == ct);
    // Lengths below one block are refused and write nothing.
    REQUIRE(v->setkey(Buf(64, 3)) == Status::Ok);
    for (std::size_t len : {1u, 15u}) {
        Buf in(len, 1), out(len, 0xee), iv(16, 0);
        CHECK(v->encrypt(in, out, iv) == Status::Invalid);
        CHECK(out == Buf(len, 0xee));
    }
}

TEST_CASE("xts-aes-vaes: data units against unmapped pages", "[xtsvaes]") {
    const Driver& d = each_driver();
    INFO(d.name);
    auto v = vaes_driver(d);
    if (!v) return;
    Skcipher ref = reference();
    const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    // [guard][data page][guard]: every access outside the data page faults.
    void* m = mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(m != MAP_FAILED);
    auto* base = static_cast<uint8_t*>(m);
    REQUIRE(mprotect(base, page, PROT_NONE) == 0);
    REQUIRE(mprotect(base + 2 * page, page, PROT_NONE) == 0);
    uint8_t* data = base + page;
    std::mt19937_64 rng(0x9a6e);
    const Buf key = random_bytes(rng, 64);
    REQUIRE(v->setkey(key) == Status::Ok);
    REQUIRE(ref.setkey(key) == Status::Ok);
    for (std::size_t len = 16; len <= 160; ++len) {
        for (bool at_end : {true, false}) {
            INFO("length " << len << (at_end ? " ending at" : " starting at") << " a page boundary");
            const Buf pt = random_bytes(rng, len), iv = random_bytes(rng, 16);
            const Buf want = run(ref, true, pt, iv);
            uint8_t* p = at_end ? data + page - len : data;
            std::memcpy(p, pt.data(), len);
            const SgEntry sg{p, len};
            Buf ivc = iv;
            REQUIRE(crypt_sg(*v, true, SgList(&sg, 1), SgList(&sg, 1), len, ivc) == Status::Ok);
            REQUIRE(Buf(p, p + len) == want);
            REQUIRE(crypt_sg(*v, false, SgList(&sg, 1), SgList(&sg, 1), len, ivc) == Status::Ok);
            REQUIRE(Buf(p, p + len) == pt);
        }
    }
    munmap(m, 3 * page);
}

TEST_CASE("xts-aes-vaes: the dm-crypt engine, many sectors", "[xtsvaes][dmcrypt]") {
    const Driver& d = each_driver();
    INFO(d.name);
    auto v = vaes_driver(d);
    if (!v) return;
    Skcipher ref = reference();
    std::mt19937_64 rng(0xd3);
    for (std::size_t keylen : {32u, 64u}) {
        for (std::size_t ss : {512u, 4096u}) {
            INFO("key " << keylen << " bytes, sector size " << ss);
            const Buf key = random_bytes(rng, keylen);
            std::string args = "aes-xts-plain64 " + hex(key) + " 0";
            if (ss != 512) args += " 1 sector_size:" + std::to_string(ss);
            auto table = dm::parse_crypt_args(args);
            REQUIRE(table);
            constexpr std::size_t kSize = 256 << 10;
            auto store = std::make_shared<dm::MemoryStore>(kSize);
            dm::CryptTargetOptions opts;
            opts.threads = 2;
            auto tg = dm::CryptTarget::create(registry(), *table, store, 0, opts);
            REQUIRE(tg);
            // Bios of 1..8 sectors; plain64 IVs count 512-byte sectors.
            Buf pt = random_bytes(rng, kSize);
            std::vector<dm::Bio> bios;
            std::vector<Status> status;
            std::vector<SgEntry> segs;
            segs.reserve(kSize / ss);
            for (std::size_t pos = 0; pos < kSize;) {
                const std::size_t n = std::min<std::size_t>(ss * (1 + rng() % 8), kSize - pos);
                segs.push_back({pt.data() + pos, n});
                dm::Bio b;
                b.sector = pos / 512;
                b.dir = dm::BioDir::Write;
                b.vecs = {segs.back()};
                bios.push_back(std::move(b));
                pos += n;
            }
            status.assign(bios.size(), Status::InProgress);
            for (std::size_t i = 0; i < bios.size(); ++i) {
                bios[i].on_complete = [&status, i](Status s) { status[i] = s; };
                REQUIRE((*tg)->submit(bios[i]) == Status::InProgress);
            }
            (*tg)->drain();
            for (Status s : status) CHECK(s == Status::Ok);
            // Each sector as its own xts(aes-cryptopp) data unit.
            REQUIRE(ref.setkey(key) == Status::Ok);
            const Buf& image = store->data();
            for (std::size_t off = 0; off < kSize; off += ss) {
                Buf iv(16, 0);
                const uint64_t sector = off / 512;
                for (int i = 0; i < 8; ++i) iv[static_cast<std::size_t>(i)] = static_cast<uint8_t>(sector >> (8 * i));
                const Buf sec(pt.begin() + static_cast<std::ptrdiff_t>(off),
                              pt.begin() + static_cast<std::ptrdiff_t>(off + ss));
                INFO("sector " << sector);
                REQUIRE(Buf(image.begin() + static_cast<std::ptrdiff_t>(off),
                             image.begin() + static_cast<std::ptrdiff_t>(off + ss)) == run(ref, true, sec, iv));
            }
            // And back, in one read bio.
            Buf back(kSize, 0);
            dm::Bio r;
            r.sector = 0;
            r.dir = dm::BioDir::Read;
            r.vecs = {SgEntry{back.data(), kSize}};
            Status rs = Status::InProgress;
            r.on_complete = [&rs](Status s) { rs = s; };
            REQUIRE((*tg)->submit(r) == Status::InProgress);
            (*tg)->drain();
            CHECK(rs == Status::Ok);
            CHECK(back == pt);
        }
    }
}
