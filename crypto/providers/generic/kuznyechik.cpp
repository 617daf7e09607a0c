// GOST R 34.12-2015 "Kuznyechik" (RFC 7801): cipher "kuznyechik", driver
// "kuznyechik-generic", 16-byte blocks, 32-byte keys. The kernel has no
// driver; VeraCrypt and cryptsetup's userspace TrueCrypt code use it, in XTS
// through the xts template here.
//
// Byte order: a block is its 16 bytes in the order RFC 7801 prints them
// (a_15, the most significant, first), as VeraCrypt and the RFC's vectors
// take them; the key likewise (K_1 is its first 16 bytes).
//
// A round L(S(X[k](a))) is sixteen lookups in per-position tables of L(pi(v))
// built once, as the references do: the timing depends on secret bytes
// through the cache. Decryption undoes L by tables of the inverse map and
// pi by its inverse table, through tables of L^-1(pi^-1(v)) on a state kept
// under L^-1 (so both directions cost the same).
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

constexpr std::size_t kBlock = 16;
constexpr std::size_t kKey = 32;
constexpr int kRounds = 10;

// A block as two u64: w[0] holds bytes 0..7, w[1] bytes 8..15 (memory order).
struct Blk {
    uint64_t w[2];
};

inline Blk operator^(Blk a, Blk b) { return {{a.w[0] ^ b.w[0], a.w[1] ^ b.w[1]}}; }

Blk load(const uint8_t* p) { return {{get_le64(p), get_le64(p + 8)}}; }
void store(uint8_t* p, Blk b) {
    put_le64(p, b.w[0]);
    put_le64(p + 8, b.w[1]);
}
uint8_t byte_at(const Blk& b, int j) { return static_cast<uint8_t>(b.w[j >> 3] >> (8 * (j & 7))); }

// Multiplication in GF(2^8) modulo x^8 + x^7 + x^6 + x + 1 (RFC 7801 section 2).
uint8_t gf_mul(uint8_t a, uint8_t b) {
    uint8_t r = 0;
    while (b) {
        if (b & 1) r ^= a;
        a = static_cast<uint8_t>((a << 1) ^ ((a & 0x80) ? 0xc3 : 0));
        b >>= 1;
    }
    return r;
}

// The coefficients of l for bytes 0..15 of a block (a_15 .. a_0).
constexpr uint8_t kLin[16] = {148, 32, 133, 16, 194, 192, 1, 251, 1, 192, 194, 16, 133, 32, 148, 1};

// R: l of the block becomes byte 0, the others move one place on.
void r_step(uint8_t a[16]) {
    uint8_t x = 0;
    for (int j = 0; j < 16; ++j) x ^= gf_mul(a[j], kLin[j]);
    std::memmove(a + 1, a, 15);
    a[0] = x;
}

// R^-1: byte 0 leaves, the rest move back, l of the result fills byte 15.
void r_inv_step(uint8_t a[16]) {
    const uint8_t first = a[0];
    std::memmove(a, a + 1, 15);
    uint8_t x = first;
    for (int j = 0; j < 15; ++j) x ^= gf_mul(a[j], kLin[j]);
    // kLin[15] is 1, so x is the byte that makes l(a) == first.
    a[15] = x;
}

void l_map(uint8_t a[16]) {
    for (int i = 0; i < 16; ++i) r_step(a);
}
void l_inv_map(uint8_t a[16]) {
    for (int i = 0; i < 16; ++i) r_inv_step(a);
}

struct Tables {
    Blk ls[16][256];   // L(pi(v) at position j)
    Blk li[16][256];   // L^-1(v at position j)
    Blk lsi[16][256];  // L^-1(pi^-1(v) at position j)
    uint8_t pi_inv[256];

    Tables() {
        for (int v = 0; v < 256; ++v)
            pi_inv[generic::kGostPi[static_cast<std::size_t>(v)]] = static_cast<uint8_t>(v);
        // L and L^-1 are linear over GF(2^8): v at position j maps to v
        // times the image of 1 there, so 32 maps of unit blocks give every
        // entry (the tables are built at each start, by the registry's
        // self-test: a map per entry took ~20 ms of every command).
        for (int j = 0; j < 16; ++j) {
            uint8_t fwd[16] = {}, inv[16] = {};
            fwd[j] = inv[j] = 1;
            l_map(fwd);
            l_inv_map(inv);
            for (int v = 0; v < 256; ++v) {
                const uint8_t s = generic::kGostPi[static_cast<std::size_t>(v)];
                uint8_t a[16], b[16], c[16];
                for (int i = 0; i < 16; ++i) {
                    a[i] = gf_mul(fwd[i], s);
                    b[i] = gf_mul(inv[i], static_cast<uint8_t>(v));
                    c[i] = gf_mul(inv[i], pi_inv[v]);
                }
                ls[j][v] = load(a);
                li[j][v] = load(b);
                lsi[j][v] = load(c);
            }
        }
    }
};

const Tables& tables() {
    static const Tables t;
    return t;
}

// Sum over the bytes of x of tab[j][x_j]: one linear map after a bytewise one.
Blk lookup(const Blk (&tab)[16][256], Blk x) {
    Blk r{{0, 0}};
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) r = r ^ tab[j][byte_at(x, j)];
    return r;
}

Blk ls(const Tables& t, Blk x) { return lookup(t.ls, x); }

class KuznyechikTfm final : public CipherTfm {
public:
    KuznyechikTfm() : t_(tables()) {}
    ~KuznyechikTfm() override {
        secure_wipe(keys_.data(), sizeof keys_);
        secure_wipe(dkeys_.data(), sizeof dkeys_);
    }

    Status setkey(ConstBytes key) override {
        if (key.size() != kKey) return Status::Invalid;
        // RFC 7801 section 4.3: K_1, K_2 are the key's halves; each further
        // pair is eight Feistel steps F[C_i] with C_i = L(Vec128(i)).
        Blk a1 = load(key.data()), a0 = load(key.data() + 16);
        keys_[0] = a1;
        keys_[1] = a0;
        for (int i = 0; i < 4; ++i) {
            for (int j = 1; j <= 8; ++j) {
                uint8_t c[16] = {};
                c[15] = static_cast<uint8_t>(8 * i + j);
                l_map(c);
                const Blk next = ls(t_, a1 ^ load(c)) ^ a0;
                a0 = a1;
                a1 = next;
            }
            keys_[static_cast<std::size_t>(2 * i + 2)] = a1;
            keys_[static_cast<std::size_t>(2 * i + 3)] = a0;
        }
        // Decryption runs on L^-1 of the state, as L^-1 is linear:
        // S^-1(L^-1(x ^ K)) = S^-1(L^-1(x) ^ L^-1(K)).
        dkeys_[0] = keys_[0];
        for (std::size_t r = 1; r < kRounds; ++r) dkeys_[r] = lookup(t_.li, keys_[r]);
        return Status::Ok;
    }

    void encrypt(const uint8_t* in, uint8_t* out, std::size_t nblocks) const override {
        for (std::size_t n = 0; n < nblocks; ++n, in += kBlock, out += kBlock) {
            Blk x = load(in);
            for (int r = 0; r < kRounds - 1; ++r) x = ls(t_, x ^ keys_[static_cast<std::size_t>(r)]);
            store(out, x ^ keys_[kRounds - 1]);
        }
    }

    void decrypt(const uint8_t* in, uint8_t* out, std::size_t nblocks) const override {
        for (std::size_t n = 0; n < nblocks; ++n, in += kBlock, out += kBlock) {
            // y = L^-1(x); each round y = L^-1(S^-1(y ^ K'_r)); the last
            // round leaves out L^-1.
            Blk y = lookup(t_.li, load(in));
            for (int r = kRounds - 1; r > 1; --r)
                y = lookup(t_.lsi, y ^ dkeys_[static_cast<std::size_t>(r)]);
            uint8_t b[16];
            store(b, y ^ dkeys_[1]);
            for (uint8_t& c : b) c = t_.pi_inv[c];
            store(out, load(b) ^ dkeys_[0]);
        }
    }

private:
    const Tables& t_;
    std::array<Blk, kRounds> keys_{};
    std::array<Blk, kRounds> dkeys_{};  // K_1, then L^-1(K_2) .. L^-1(K_10)
};

class KuznyechikAlg final : public CipherAlg {
public:
    using CipherAlg::CipherAlg;
    std::unique_ptr<CipherTfm> create_tfm() const override { return std::make_unique<KuznyechikTfm>(); }
};

}  // namespace

Result<void> register_generic_kuznyechik(Registry& reg) {
    AlgInfo i = generic::provider_info("kuznyechik", "kuznyechik-generic", AlgType::Cipher);
    i.blocksize = kBlock;
    i.min_keysize = i.max_keysize = kKey;
    i.needs_key = true;
    const std::shared_ptr<Alg> algs[] = {std::make_shared<KuznyechikAlg>(i)};
    return reg.register_algs(algs);
}

}  // namespace blkcrypt
