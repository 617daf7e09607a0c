// The Poly1305 core as the kernel's poly1305_core_* (lib/crypto/poly1305):
// an evaluation of a polynomial mod 2^130 - 5 keyed by r only, without the
// final "+ s". NHPoly1305 and Adiantum's header hash use it that way: their
// outputs are the 128-bit reduced value. Three 44/44/42-bit limbs with
// 128-bit products.
#pragma once

#include <blkcrypt/bytes.hpp>
#include <blkcrypt/internal/bytes_util.hpp>

#include <cstdint>
#include <cstring>

namespace blkcrypt::generic {

class Poly1305Key {
public:
    // key: 16 bytes, clamped as the standard requires.
    void set(const uint8_t* key) noexcept {
        const uint64_t t0 = get_le64(key), t1 = get_le64(key + 8);
        r_[0] = t0 & 0xffc0fffffffULL;
        r_[1] = ((t0 >> 44) | (t1 << 20)) & 0xfffffc0ffffULL;
        r_[2] = (t1 >> 24) & 0x00ffffffc0fULL;
    }
    void wipe() noexcept {
        volatile uint64_t* p = r_;
        for (int i = 0; i < 3; ++i) p[i] = 0;
    }
    const uint64_t* r() const noexcept { return r_; }

private:
    uint64_t r_[3] = {0, 0, 0};
};

class Poly1305Core {
public:
    void init() noexcept { h_[0] = h_[1] = h_[2] = 0; }

    // nblocks 16-byte blocks, each with 2^128 added (hibit), as all callers here.
    void blocks(const Poly1305Key& key, const uint8_t* m, std::size_t nblocks) noexcept {
        __extension__ typedef unsigned __int128 u128;  // GCC and Clang on 64-bit hosts
        constexpr uint64_t m44 = 0xfffffffffffULL, m42 = 0x3ffffffffffULL;
        const uint64_t r0 = key.r()[0], r1 = key.r()[1], r2 = key.r()[2];
        const uint64_t s1 = r1 * 20, s2 = r2 * 20;  // 2^132 = 4 * 2^130 = 4 * 5 mod p
        uint64_t h0 = h_[0], h1 = h_[1], h2 = h_[2];
        for (; nblocks; --nblocks, m += 16) {
            const uint64_t t0 = get_le64(m), t1 = get_le64(m + 8);
            h0 += t0 & m44;
            h1 += ((t0 >> 44) | (t1 << 20)) & m44;
            h2 += ((t1 >> 24) & m42) | (uint64_t{1} << 40);
            const u128 d0 = u128(h0) * r0 + u128(h1) * s2 + u128(h2) * s1;
            u128 d1 = u128(h0) * r1 + u128(h1) * r0 + u128(h2) * s2;
            u128 d2 = u128(h0) * r2 + u128(h1) * r1 + u128(h2) * r0;
            uint64_t c = static_cast<uint64_t>(d0 >> 44);
            h0 = static_cast<uint64_t>(d0) & m44;
            d1 += c;
            c = static_cast<uint64_t>(d1 >> 44);
            h1 = static_cast<uint64_t>(d1) & m44;
            d2 += c;
            c = static_cast<uint64_t>(d2 >> 42);
            h2 = static_cast<uint64_t>(d2) & m42;
            h0 += c * 5;
            c = h0 >> 44;
            h0 &= m44;
            h1 += c;
        }
        h_[0] = h0;
        h_[1] = h1;
        h_[2] = h2;
    }

    // The fully reduced value mod 2^130 - 5, its low 128 bits little-endian.
    void emit(uint8_t out[16]) const noexcept {
        constexpr uint64_t m44 = 0xfffffffffffULL, m42 = 0x3ffffffffffULL;
        uint64_t h0 = h_[0], h1 = h_[1], h2 = h_[2], c;
        c = h1 >> 44; h1 &= m44; h2 += c;
        c = h2 >> 42; h2 &= m42; h0 += c * 5;
        c = h0 >> 44; h0 &= m44; h1 += c;
        c = h1 >> 44; h1 &= m44; h2 += c;
        c = h2 >> 42; h2 &= m42; h0 += c * 5;
        c = h0 >> 44; h0 &= m44; h1 += c;
        // h - p, kept when h >= p (no borrow out of the top limb).
        uint64_t g0 = h0 + 5;
        c = g0 >> 44; g0 &= m44;
        uint64_t g1 = h1 + c;
        c = g1 >> 44; g1 &= m44;
        const uint64_t g2 = h2 + c - (uint64_t{1} << 42);
        const uint64_t keep_g = (g2 >> 63) - 1;  // all ones when g2 did not borrow
        h0 = (h0 & ~keep_g) | (g0 & keep_g);
        h1 = (h1 & ~keep_g) | (g1 & keep_g);
        h2 = (h2 & ~keep_g) | (g2 & keep_g);
        put_le64(out, h0 | (h1 << 44));
        put_le64(out + 8, (h1 >> 20) | (h2 << 24));
    }

    // The accumulator as 24 little-endian bytes (for exported hash states).
    void save(uint8_t out[24]) const noexcept {
        for (int i = 0; i < 3; ++i) put_le64(out + 8 * i, h_[i]);
    }
    // False (and unchanged) if a limb is out of range.
    bool load(const uint8_t in[24]) noexcept {
        uint64_t h[3];
        for (int i = 0; i < 3; ++i) h[i] = get_le64(in + 8 * i);
        if (h[0] >> 45 || h[1] >> 45 || h[2] >> 43) return false;
        std::memcpy(h_, h, sizeof h);
        return true;
    }

    void wipe() noexcept {
        volatile uint64_t* p = h_;
        for (int i = 0; i < 3; ++i) p[i] = 0;
    }

private:
    uint64_t h_[3] = {0, 0, 0};
};

}  // namespace blkcrypt::generic
