// "crc32" and "crc32c" with the kernel's conventions, which Crypto++'s CRC32
// classes do not offer (their register is private and always starts at ~0):
//   crc32:  crc32_le, poly 0xEDB88320, seed 0, no final inversion
//   crc32c: Castagnoli, poly 0x82F63B78, seed ~0, final inversion
// Both: setkey takes a 4-byte little-endian seed; the digest is the result
// little-endian; the exported state is the running register, 4 bytes LE.
#include "cryptopp_algs.hpp"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace blkcrypt::cryptopp {
namespace {

constexpr uint32_t kCrc32Poly = 0xEDB88320;
constexpr uint32_t kCrc32cPoly = 0x82F63B78;

// Slicing-by-8 tables of a reflected CRC: t[0] is the byte table, t[k]
// advances a byte's contribution by k more zero bytes.
using CrcTables = std::array<std::array<uint32_t, 256>, 8>;

constexpr CrcTables make_tables(uint32_t poly) {
    CrcTables t{};
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int b = 0; b < 8; ++b) c = (c >> 1) ^ ((c & 1) ? poly : 0);
        t[0][i] = c;
    }
    for (std::size_t k = 1; k < 8; ++k)
        for (std::size_t i = 0; i < 256; ++i)
            t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
    return t;
}

template <uint32_t Poly>
constexpr CrcTables kTables = make_tables(Poly);

template <uint32_t Poly>
constexpr uint32_t crc_sw(uint32_t crc, const uint8_t* p, std::size_t n) {
    const auto& t = kTables<Poly>;
    for (; n >= 8; p += 8, n -= 8) {
        const uint32_t a = crc ^ get_le<uint32_t>(p), b = get_le<uint32_t>(p + 4);
        crc = t[7][a & 0xff] ^ t[6][(a >> 8) & 0xff] ^ t[5][(a >> 16) & 0xff] ^ t[4][a >> 24] ^
              t[3][b & 0xff] ^ t[2][(b >> 8) & 0xff] ^ t[1][(b >> 16) & 0xff] ^ t[0][b >> 24];
    }
    for (; n; ++p, --n) crc = t[0][(crc ^ *p) & 0xff] ^ (crc >> 8);
    return crc;
}

// The standard check values ("123456789", init ~0, final ~), at compile time:
// at run time crc32c takes the SSE4.2 path where the CPU has it.
constexpr std::array<uint8_t, 9> kCheck{'1', '2', '3', '4', '5', '6', '7', '8', '9'};
static_assert(~crc_sw<kCrc32Poly>(~0u, kCheck.data(), kCheck.size()) == 0xCBF43926);
static_assert(~crc_sw<kCrc32cPoly>(~0u, kCheck.data(), kCheck.size()) == 0xE3069283);

#if defined(__x86_64__)
// SSE4.2's crc32 instruction is CRC-32C on the raw register, like the kernel's
// __crc32c_le: no inversions.
__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(uint32_t crc, const uint8_t* p,
                                                          std::size_t n) {
    uint64_t c = crc;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t v;
        std::memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
    }
    crc = static_cast<uint32_t>(c);
    for (; n; ++p, --n) crc = _mm_crc32_u8(crc, *p);
    return crc;
}
#endif

uint32_t crc32c_update(uint32_t crc, const uint8_t* p, std::size_t n) {
#if defined(__x86_64__)
    static const bool hw = __builtin_cpu_supports("sse4.2");
    if (hw) return crc32c_sse42(crc, p, n);
#endif
    return crc_sw<kCrc32cPoly>(crc, p, n);
}

struct Crc32 {
    static constexpr const char* name = "crc32";
    static constexpr uint32_t seed = 0;
    static uint32_t update(uint32_t c, ConstBytes d) {
        return crc_sw<kCrc32Poly>(c, d.data(), d.size());
    }
    static uint32_t finish(uint32_t c) { return c; }
};

struct Crc32c {
    static constexpr const char* name = "crc32c";
    static constexpr uint32_t seed = ~uint32_t{0};
    static uint32_t update(uint32_t c, ConstBytes d) {
        return crc32c_update(c, d.data(), d.size());
    }
    static uint32_t finish(uint32_t c) { return ~c; }
};

template <class K>
class CrcTfm final : public ShashTfm {
public:
    uint32_t seed() const { return seed_; }

    Status setkey(ConstBytes key) override {
        if (key.size() != 4) return Status::Invalid;
        seed_ = get_le<uint32_t>(key.data());
        return Status::Ok;
    }

    std::unique_ptr<ShashState> new_state() const override;

    void digest(ConstBytes data, Bytes out) const override {
        put_le(out.data(), K::finish(K::update(seed_, data)));
    }

private:
    uint32_t seed_ = K::seed;
};

template <class K>
class CrcState final : public ShashState {
public:
    explicit CrcState(const CrcTfm<K>& tfm) : tfm_(tfm), crc_(tfm.seed()) {}

    void init() override { crc_ = tfm_.seed(); }  // the seed as of init, like the kernel
    void update(ConstBytes data) override { crc_ = K::update(crc_, data); }
    void final(Bytes out) override { put_le(out.data(), K::finish(crc_)); }
    void export_state(Bytes out) const override { put_le(out.data(), crc_); }
    Status import_state(ConstBytes in) override {
        crc_ = get_le<uint32_t>(in.data());
        return Status::Ok;
    }

private:
    const CrcTfm<K>& tfm_;
    uint32_t crc_;
};

template <class K>
std::unique_ptr<ShashState> CrcTfm<K>::new_state() const {
    return std::make_unique<CrcState<K>>(*this);
}

template <class K>
class CrcAlg final : public ShashAlg {
public:
    CrcAlg() : ShashAlg(make_info()) {}
    std::unique_ptr<ShashTfm> create_tfm() const override { return std::make_unique<CrcTfm<K>>(); }

private:
    static AlgInfo make_info() {
        AlgInfo info = provider_info(K::name, AlgType::Shash);
        info.digestsize = 4;
        info.statesize = 4;
        info.blocksize = 1;
        info.min_keysize = 4;  // the seed is optional
        info.max_keysize = 4;
        return info;
    }
};

}  // namespace

std::vector<std::shared_ptr<Alg>> make_crcs() {
    return {std::make_shared<CrcAlg<Crc32>>(), std::make_shared<CrcAlg<Crc32c>>()};
}

}  // namespace blkcrypt::cryptopp
