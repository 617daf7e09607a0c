// GOST R 34.11-2012 "Streebog" (RFC 6986) as the kernel's streebog_generic.c
// registers it: shashes "streebog256" and "streebog512", drivers
// "streebog256-generic" / "streebog512-generic", 64-byte blocks. Neither
// Crypto++ nor OpenSSL 3 (without the gost engine) has it.
//
// Byte order: RFC 6986 writes vectors most significant byte first; here a
// 512-bit vector is the 64 bytes as they stream in, i.e. eight little-endian
// u64 words, word 0 least significant (as libgcrypt and the kernel do).
//
// LPS (substitution, transposition, linear map) runs through eight 256-entry
// tables computed once from pi and the matrix A: table-based like the
// references, so its timing depends on secret bytes through the cache.
#include "generic/generic.hpp"
#include "generic/gost_pi.hpp"

#include <blkcrypt/internal/alg.hpp>
#include <blkcrypt/internal/bytes_util.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include <array>
#include <cstring>

namespace blkcrypt {
namespace {

using U512 = std::array<uint64_t, 8>;
constexpr std::size_t kBlock = 64;

// The matrix of the linear map l (RFC 6986 section 6.4), row 0 first.
constexpr uint64_t kA[64] = {
    0x8e20faa72ba0b470ULL, 0x47107ddd9b505a38ULL, 0xad08b0e0c3282d1cULL, 0xd8045870ef14980eULL,
    0x6c022c38f90a4c07ULL, 0x3601161cf205268dULL, 0x1b8e0b0e798c13c8ULL, 0x83478b07b2468764ULL,
    0xa011d380818e8f40ULL, 0x5086e740ce47c920ULL, 0x2843fd2067adea10ULL, 0x14aff010bdd87508ULL,
    0x0ad97808d06cb404ULL, 0x05e23c0468365a02ULL, 0x8c711e02341b2d01ULL, 0x46b60f011a83988eULL,
    0x90dab52a387ae76fULL, 0x486dd4151c3dfdb9ULL, 0x24b86a840e90f0d2ULL, 0x125c354207487869ULL,
    0x092e94218d243cbaULL, 0x8a174a9ec8121e5dULL, 0x4585254f64090fa0ULL, 0xaccc9ca9328a8950ULL,
    0x9d4df05d5f661451ULL, 0xc0a878a0a1330aa6ULL, 0x60543c50de970553ULL, 0x302a1e286fc58ca7ULL,
    0x18150f14b9ec46ddULL, 0x0c84890ad27623e0ULL, 0x0642ca05693b9f70ULL, 0x0321658cba93c138ULL,
    0x86275df09ce8aaa8ULL, 0x439da0784e745554ULL, 0xafc0503c273aa42aULL, 0xd960281e9d1d5215ULL,
    0xe230140fc0802984ULL, 0x71180a8960409a42ULL, 0xb60c05ca30204d21ULL, 0x5b068c651810a89eULL,
    0x456c34887a3805b9ULL, 0xac361a443d1c8cd2ULL, 0x561b0d22900e4669ULL, 0x2b838811480723baULL,
    0x9bcf4486248d9f5dULL, 0xc3e9224312c8c1a0ULL, 0xeffa11af0964ee50ULL, 0xf97d86d98a327728ULL,
    0xe4fa2054a80b329cULL, 0x727d102a548b194eULL, 0x39b008152acb8227ULL, 0x9258048415eb419dULL,
    0x492c024284fbaec0ULL, 0xaa16012142f35760ULL, 0x550b8e9e21f7a530ULL, 0xa48b474f9ef5dc18ULL,
    0x70a6a56e2440598eULL, 0x3853dc371220a247ULL, 0x1ca76e95091051adULL, 0x0edd37c48a08a6d8ULL,
    0x07e095624504536cULL, 0x8d70c431ac02a736ULL, 0xc83862965601dd1bULL, 0x641c314b2b8ee083ULL,
};

// The iteration constants C_1 .. C_12 (RFC 6986 section 6.5) as U512.
constexpr U512 kC[12] = {
    {0xdd806559f2a64507ULL, 0x05767436cc744d23ULL, 0xa2422a08a460d315ULL, 0x4b7ce09192676901ULL,
     0x714eb88d7585c4fcULL, 0x2f6a76432e45d016ULL, 0xebcb2f81c0657c1fULL, 0xb1085bda1ecadae9ULL},
    {0xe679047021b19bb7ULL, 0x55dda21bd7cbcd56ULL, 0x5cb561c2db0aa7caULL, 0x9ab5176b12d69958ULL,
     0x61d55e0f16b50131ULL, 0xf3feea720a232b98ULL, 0x4fe39d460f70b5d7ULL, 0x6fa3b58aa99d2f1aULL},
    {0x991e96f50aba0ab2ULL, 0xc2b6f443867adb31ULL, 0xc1c93a376062db09ULL, 0xd3e20fe490359eb1ULL,
     0xf2ea7514b1297b7bULL, 0x06f15e5f529c1f8bULL, 0x0a39fc286a3d8435ULL, 0xf574dcac2bce2fc7ULL},
    {0x220cbebc84e3d12eULL, 0x3453eaa193e837f1ULL, 0xd8b71333935203beULL, 0xa9d72c82ed03d675ULL,
     0x9d721cad685e353fULL, 0x488e857e335c3c7dULL, 0xf948e1a05d71e4ddULL, 0xef1fdfb3e81566d2ULL},
    {0x601758fd7c6cfe57ULL, 0x7a56a27ea9ea63f5ULL, 0xdfff00b723271a16ULL, 0xbfcd1747253af5a3ULL,
     0x359e35d7800fffbdULL, 0x7f151c1f1686104aULL, 0x9a3f410c6ca92363ULL, 0x4bea6bacad474799ULL},
    {0xfa68407a46647d6eULL, 0xbf71c57236904f35ULL, 0x0af21f66c2bec6b6ULL, 0xcffaa6b71c9ab7b4ULL,
     0x187f9ab49af08ec6ULL, 0x2d66c4f95142a46cULL, 0x6fa4c33b7a3039c0ULL, 0xae4faeae1d3ad3d9ULL},
    {0x8886564d3a14d493ULL, 0x3517454ca23c4af3ULL, 0x06476983284a0504ULL, 0x0992abc52d822c37ULL,
     0xd3473e33197a93c9ULL, 0x399ec6c7e6bf87c9ULL, 0x51ac86febf240954ULL, 0xf4c70e16eeaac5ecULL},
    {0xa47f0dd4bf02e71eULL, 0x36acc2355951a8d9ULL, 0x69d18d2bd1a5c42fULL, 0xf4892bcb929b0690ULL,
     0x89b4443b4ddbc49aULL, 0x4eb7f8719c36de1eULL, 0x03e7aa020c6e4141ULL, 0x9b1f5b424d93c9a7ULL},
    {0x7261445183235adbULL, 0x0e38dc92cb1f2a60ULL, 0x7b2b8a9aa6079c54ULL, 0x800a440bdbb2ceb1ULL,
     0x3cd955b7e00d0984ULL, 0x3a7d3a1b25894224ULL, 0x944c9ad8ec165fdeULL, 0x378f5a541631229bULL},
    {0x74b4c7fb98459cedULL, 0x3698fad1153bb6c3ULL, 0x7a1e6c303b7652f4ULL, 0x9fe76702af69334bULL,
     0x1fffe18a1b336103ULL, 0x8941e71cff8a78dbULL, 0x382ae548b2e4f3f3ULL, 0xabbedea680056f52ULL},
    {0x6bcaa4cd81f32d1bULL, 0xdea2594ac06fd85dULL, 0xefbacd1d7d476e98ULL, 0x8a1d71efea48b9caULL,
     0x2001802114846679ULL, 0xd8fa6bbbebab0761ULL, 0x3002c6cd635afe94ULL, 0x7bcd9ed0efc889fbULL},
    {0x48bc924af11bd720ULL, 0xfaf417d5d9b21b99ULL, 0xe71da4aa88e12852ULL, 0x5d80ef9d1891cc86ULL,
     0xf82012d430219f9bULL, 0xcda43c32bcdf1d77ULL, 0xd21380b00449b17aULL, 0x378ee767f11631baULL},
};

// T[m][v]: the contribution of byte value v in input word m to every output
// word of LPS. Byte b of word m moves (transposition) to byte m of word b,
// after pi; l maps bit t of byte m of a word to row 63 - 8m - t of A.
struct LpsTables {
    uint64_t t[8][256];
    constexpr LpsTables() : t{} {
        for (int m = 0; m < 8; ++m)
            for (int v = 0; v < 256; ++v) {
                uint64_t r = 0;
                const uint8_t s = generic::kGostPi[static_cast<std::size_t>(v)];
                for (int bit = 0; bit < 8; ++bit)
                    if (s >> bit & 1) r ^= kA[63 - 8 * m - bit];
                t[m][v] = r;
            }
    }
};
constexpr LpsTables kLps;

// Unrolled: with constant shifts and indices this is 64 loads and XORs.
U512 lps(const U512& x) {
    U512 r;
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
        uint64_t w = 0;
#pragma GCC unroll 8
        for (int m = 0; m < 8; ++m) w ^= kLps.t[m][(x[static_cast<std::size_t>(m)] >> (8 * k)) & 0xff];
        r[static_cast<std::size_t>(k)] = w;
    }
    return r;
}

U512 operator^(const U512& a, const U512& b) {
    U512 r;
    for (std::size_t i = 0; i < 8; ++i) r[i] = a[i] ^ b[i];
    return r;
}

// a += b mod 2^512.
void add512(U512& a, const U512& b) {
    uint64_t carry = 0;
    for (std::size_t i = 0; i < 8; ++i) {
        const uint64_t s = a[i] + b[i];
        const uint64_t c1 = s < a[i];
        a[i] = s + carry;
        carry = c1 | (a[i] < s);
    }
}

U512 load(const uint8_t* p) {
    U512 r;
    for (std::size_t i = 0; i < 8; ++i) r[i] = get_le64(p + 8 * i);
    return r;
}

// The compression g_N(h, m) (RFC 6986 section 7).
void compress(U512& h, const U512& n, const U512& m) {
    U512 k = lps(h ^ n);
    U512 s = m;
    for (const U512& c : kC) {
        s = lps(k ^ s);
        k = lps(k ^ c);
    }
    h = h ^ (k ^ s) ^ m;
}

// Ours: { u8 buf[64]; u64 h[8]; u64 N[8]; u64 Sigma[8]; u32 fill; u32 zero; }
// (264 bytes), words little-endian; fill is how much of buf is pending
// (0 .. 63); the bytes of buf past it are zero.
constexpr std::size_t kStateSize = kBlock + 3 * 64 + 8;

class StreebogState final : public ShashState {
public:
    explicit StreebogState(std::size_t digestsize) : digestsize_(digestsize) { init(); }
    ~StreebogState() override {
        for (U512* v : {&h_, &n_, &sigma_}) secure_wipe(v->data(), sizeof *v);
        secure_wipe(buf_.data(), buf_.size());
    }

    void init() override {
        // IV: all zero bytes for 512, all 0x01 bytes for 256.
        h_.fill(digestsize_ == 64 ? 0 : 0x0101010101010101ULL);
        n_.fill(0);
        sigma_.fill(0);
        buf_.fill(0);
        fill_ = 0;
    }

    void update(ConstBytes data) override {
        if (data.empty()) return;  // an empty span may have no pointer: memcpy must not see it
        const uint8_t* p = data.data();
        std::size_t len = data.size();
        if (fill_) {
            const std::size_t take = std::min(len, kBlock - fill_);
            std::memcpy(buf_.data() + fill_, p, take);
            fill_ += take;
            p += take;
            len -= take;
            if (fill_ < kBlock) return;
            block(buf_.data());
            buf_.fill(0);
            fill_ = 0;
        }
        for (; len >= kBlock; p += kBlock, len -= kBlock) block(p);
        std::memcpy(buf_.data(), p, len);
        fill_ = len;
    }

    void final(Bytes out) override {
        // Pad with 0x01 then zeros; N counts only the message bits.
        buf_[fill_] = 0x01;
        const U512 m = load(buf_.data());
        compress(h_, n_, m);
        add512(n_, U512{8 * fill_, 0, 0, 0, 0, 0, 0, 0});
        add512(sigma_, m);
        const U512 zero{};
        compress(h_, zero, n_);
        compress(h_, zero, sigma_);
        // streebog256 is the high half: the last 32 bytes.
        uint8_t full[64];
        for (std::size_t i = 0; i < 8; ++i) put_le64(full + 8 * i, h_[i]);
        std::memcpy(out.data(), full + 64 - digestsize_, digestsize_);
        secure_wipe(full, sizeof full);
        init();
    }

    void export_state(Bytes out) const override {
        uint8_t* p = out.data();
        std::memcpy(p, buf_.data(), kBlock);
        for (const U512* v : {&h_, &n_, &sigma_}) {
            p += 64;
            for (std::size_t i = 0; i < 8; ++i) put_le64(p + 8 * i, (*v)[i]);
        }
        put_le32(out.data() + kStateSize - 8, static_cast<uint32_t>(fill_));
        put_le32(out.data() + kStateSize - 4, 0);
    }

    Status import_state(ConstBytes in) override {
        const uint32_t fill = get_le32(in.data() + kStateSize - 8);
        if (fill >= kBlock || get_le32(in.data() + kStateSize - 4) != 0) return Status::Invalid;
        // A pending byte past fill would be hashed into the padding.
        for (std::size_t i = fill; i < kBlock; ++i)
            if (in[i]) return Status::Invalid;
        std::memcpy(buf_.data(), in.data(), kBlock);
        h_ = load(in.data() + 64);
        n_ = load(in.data() + 128);
        sigma_ = load(in.data() + 192);
        fill_ = fill;
        return Status::Ok;
    }

private:
    void block(const uint8_t* p) {
        const U512 m = load(p);
        compress(h_, n_, m);
        add512(n_, U512{512, 0, 0, 0, 0, 0, 0, 0});
        add512(sigma_, m);
    }

    std::size_t digestsize_;
    U512 h_{}, n_{}, sigma_{};
    std::array<uint8_t, kBlock> buf_{};
    std::size_t fill_ = 0;
};

class StreebogTfm final : public ShashTfm {
public:
    explicit StreebogTfm(std::size_t digestsize) : digestsize_(digestsize) {}
    std::unique_ptr<ShashState> new_state() const override {
        return std::make_unique<StreebogState>(digestsize_);
    }
    void digest(ConstBytes data, Bytes out) const override {
        StreebogState st(digestsize_);
        st.update(data);
        st.final(out);
    }

private:
    std::size_t digestsize_;
};

class StreebogAlg final : public ShashAlg {
public:
    using ShashAlg::ShashAlg;
    std::unique_ptr<ShashTfm> create_tfm() const override {
        return std::make_unique<StreebogTfm>(info().digestsize);
    }
};

std::shared_ptr<Alg> streebog(const char* name, const char* driver, std::size_t digestsize) {
    AlgInfo i = generic::provider_info(name, driver, AlgType::Shash);
    i.blocksize = kBlock;
    i.digestsize = digestsize;
    i.statesize = kStateSize;
    return std::make_shared<StreebogAlg>(i);
}

}  // namespace

Result<void> register_generic_streebog(Registry& reg) {
    const std::shared_ptr<Alg> algs[] = {streebog("streebog256", "streebog256-generic", 32),
                                         streebog("streebog512", "streebog512-generic", 64)};
    return reg.register_algs(algs);
}

}  // namespace blkcrypt
