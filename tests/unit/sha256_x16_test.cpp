// The 16-lane AVX-512 SHA-256 behind sha256-ni's finup_mb: its compression
// against SHA-NI lane by lane, and finup_mb against OpenSSL's driver for
// batch sizes around multiples of 16 (x16, then 2-way, then one), message
// lengths on the block and padding edges, from buffered prefixes of every
// length up to two blocks.
#include "test_util.hpp"

#if defined(__x86_64__)
#include "../../crypto/providers/x86/cpu.hpp"
#include "../../crypto/providers/x86/sha256_ni.hpp"
#include "../../crypto/providers/x86/sha256_x16.hpp"
#endif

#include <blkcrypt/shash.hpp>

#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

using namespace blkcrypt;
using Buf = std::vector<uint8_t>;

namespace {

Buf random_buf(std::mt19937& rng, std::size_t n) {
    Buf b(n);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    return b;
}

// finup_mb of count random messages of len bytes after a random prefix of
// plen bytes, by both descriptors: every digest and the prefix state left
// behind must agree.
void check_batch(ShashDesc& ni, ShashDesc& ref, std::mt19937& rng, std::size_t plen, std::size_t len,
                 std::size_t count) {
    INFO("prefix " << plen << " len " << len << " count " << count);
    const Buf prefix = random_buf(rng, plen);
    std::vector<Buf> msgs, got(count, Buf(32)), want(count, Buf(32));
    for (std::size_t i = 0; i < count; ++i) msgs.push_back(random_buf(rng, len));
    const std::vector<ConstBytes> in(msgs.begin(), msgs.end());
    const std::vector<Bytes> out_got(got.begin(), got.end()), out_want(want.begin(), want.end());
    for (ShashDesc* d : {&ni, &ref}) {
        d->init();
        d->update(prefix);
    }
    REQUIRE(ni.finup_mb(in, out_got) == Status::Ok);
    REQUIRE(ref.finup_mb(in, out_want) == Status::Ok);
    for (std::size_t i = 0; i < count; ++i) {
        INFO("message " << i);
        REQUIRE(got[i] == want[i]);
    }
    Buf a(32), b(32);  // finup_mb left the prefix state as it was
    REQUIRE(ni.final(a) == Status::Ok);
    REQUIRE(ref.final(b) == Status::Ok);
    REQUIRE(a == b);
}

constexpr std::size_t kLens[] = {0, 1, 55, 56, 63, 64, 65, 119, 120, 4096, 4096 + 32};

}  // namespace

TEST_CASE("sha256 x16: compression equals SHA-NI lane by lane", "[sha256x16]") {
#if defined(__x86_64__)
    if (!x86::have_avx512() || !x86::have_sha_ni()) {
        SUCCEED("no AVX-512 or SHA-NI on this CPU: x16 compression not tested");
        return;
    }
    std::vector<x86::X16Load> loads{x86::X16Load::Shuffle};
    if (x86::have_avx512_vbmi()) loads.push_back(x86::X16Load::Vbmi);
    else WARN("no AVX512_VBMI on this CPU: the vpermt2b message load is not tested");
    std::mt19937 rng(16);
    for (const x86::X16Load load : loads)
    for (std::size_t nblocks : {0u, 1u, 2u, 3u, 64u, 65u}) {
        INFO("load " << (load == x86::X16Load::Vbmi ? "vbmi" : "shuffle") << " nblocks " << nblocks);
        // Every lane its own data and its own random state.
        std::vector<Buf> data;
        const uint8_t* p[16];
        uint32_t got[16][8], want[16][8];
        for (int k = 0; k < 16; ++k) {
            data.push_back(random_buf(rng, nblocks * 64));
            p[k] = data.back().data();
            for (auto& x : want[k]) x = static_cast<uint32_t>(rng());
        }
        std::memcpy(got, want, sizeof got);
        x86::sha256_x16_blocks_with(load, got, p, nblocks);
        for (int k = 0; k < 16; ++k) {
            INFO("lane " << k);
            x86::sha256_ni_blocks(want[k], p[k], nblocks);
            REQUIRE(std::memcmp(got[k], want[k], sizeof want[k]) == 0);
        }
    }
#else
    SUCCEED("not x86-64: no x16 compression");
#endif
}

// The reference: sha256-openssl, or sha256-cryptopp when built without OpenSSL.
TEST_CASE("sha256-ni finup_mb equals sha256-openssl on every batch shape", "[sha256x16][sha256ni]") {
    auto ni = Shash::alloc(testutil::registry(), "sha256-ni");
    if (!ni) {
        SUCCEED("no SHA-NI on this CPU: sha256-ni is not registered");
        return;
    }
    auto ref = Shash::alloc(testutil::registry(), testutil::openssl_or("sha256-openssl", "sha256-cryptopp"));
    REQUIRE(ref.ok());
    auto nd = ni->new_desc();
    auto rd = ref->new_desc();
    REQUIRE(nd.ok());
    REQUIRE(rd.ok());
#if defined(__x86_64__)
    if (!x86::have_avx512()) WARN("no AVX-512 on this CPU: only the 2-way finup_mb is tested");
    CHECK(nd->mb_width() == (x86::have_avx512() ? 16u : 2u));
#endif
    std::mt19937 rng(40);
    // Every batch size to 40 (and 100): whole groups of 16, then the 2-way
    // and single remainders, each from a random prefix length.
    std::uniform_int_distribution<std::size_t> prefix_len(0, 130);
    for (std::size_t count = 1; count <= 41; ++count)
        for (std::size_t len : kLens) check_batch(*nd, *rd, rng, prefix_len(rng), len, count == 41 ? 100 : count);
    // Every prefix length to 130 (buffered 0..63 bytes, with or without whole
    // blocks before), in a batch that takes all three paths: 16 + 2 + 1.
    for (std::size_t plen = 0; plen <= 130; ++plen)
        for (std::size_t len : kLens) check_batch(*nd, *rd, rng, plen, len, 19);
}
