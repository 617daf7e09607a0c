// aegis128: the request handling shared by every AEGIS-128 driver, and the
// portable driver aegis128-generic (priority 100, as the kernel's
// crypto/aegis128-core.c). Its AES round is a lookup table, like the
// kernel's generic driver: fast enough, but not constant-time; on x86 the
// AES-NI driver (priority 400) takes the name when the CPU has AES-NI.
//
// Request layout as in aead.hpp: src = assoc || text, dst = assoc || text'
// (|| tag on encrypt); the assoc data is copied to dst when out of place. A
// decrypt whose tag does not match returns BadMsg with the text part of dst
// wiped (AEGIS cannot check the tag before it has decrypted everything).
#include "aegis128.hpp"

#include "generic.hpp"

#include <blkcrypt/internal/walk.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include <array>
#include <cstring>
#include <vector>

namespace blkcrypt::aegis128 {

const uint8_t kConst0[kBlock] = {0x00, 0x01, 0x01, 0x02, 0x03, 0x05, 0x08, 0x0d,
                                 0x15, 0x22, 0x37, 0x59, 0x90, 0xe9, 0x79, 0x62};
const uint8_t kConst1[kBlock] = {0xdb, 0x3d, 0x18, 0x55, 0x6d, 0xc2, 0x2f, 0xf1,
                                 0x20, 0x11, 0x31, 0x42, 0x73, 0xb5, 0x28, 0xdd};

namespace {

// The part of a list from byte offset on, in storage that lives as long as
// the request is being processed (most lists have a handful of entries).
class Slice {
public:
    Slice(SgList sg, std::size_t off, std::size_t len) {
        std::span<SgEntry> room(small_);
        if (sg.size() > small_.size()) {
            big_.resize(sg.size());
            room = big_;
        }
        list_ = sg_slice(sg, off, len, room);
    }
    SgList list() const noexcept { return list_; }

private:
    std::array<SgEntry, 8> small_{};
    std::vector<SgEntry> big_;
    std::span<SgEntry> list_;
};

class AegisTfm final : public AeadTfm {
public:
    explicit AegisTfm(const Ops& ops) : ops_(ops) {}

    Status setkey(ConstBytes key) override {
        if (key.size() != kKeySize) return Status::Invalid;
        key_.assign(key);
        return Status::Ok;
    }
    // As the kernel's crypto_aegis128_setauthsize.
    Status setauthsize(std::size_t n) override {
        return n >= kMinTag && n <= kMaxTag ? Status::Ok : Status::Invalid;
    }

    Status encrypt(AeadRequest& req, std::size_t authsize) const override {
        State st;
        const std::size_t textlen = req.cryptlen;
        run(st, req, textlen, true);
        uint8_t tag[kMaxTag];
        ops_.final(st, uint64_t{req.assoclen} * 8, uint64_t{textlen} * 8, tag);
        sg_scatter(req.dst, req.assoclen + textlen, ConstBytes(tag, authsize));
        secure_wipe(&st, sizeof st);
        return Status::Ok;
    }

    Status decrypt(AeadRequest& req, std::size_t authsize) const override {
        State st;
        const std::size_t textlen = req.cryptlen - authsize;  // the handle checked cryptlen >= authsize
        // Read the tag before anything is written: in place, dst is src.
        uint8_t want[kMaxTag], got[kMaxTag];
        sg_gather(req.src, req.assoclen + textlen, Bytes(want, authsize));
        run(st, req, textlen, false);
        ops_.final(st, uint64_t{req.assoclen} * 8, uint64_t{textlen} * 8, got);
        secure_wipe(&st, sizeof st);
        uint8_t diff = 0;  // compared in constant time
        for (std::size_t i = 0; i < authsize; ++i) diff |= static_cast<uint8_t>(want[i] ^ got[i]);
        if (diff) {
            sg_wipe(req.dst, req.assoclen, textlen);
            return Status::BadMsg;
        }
        return Status::Ok;
    }

private:
    void run(State& st, AeadRequest& req, std::size_t textlen, bool enc) const {
        ops_.init(st, key_.data(), req.iv.data());
        // The assoc data, block by block (a block split across entries is
        // bounced), copied to dst when out of place; the last block padded.
        for (SgWalk w(req.src, req.dst, req.assoclen, kBlock); w.next(); w.done()) {
            const std::size_t full = w.len() / kBlock, rest = w.len() % kBlock;
            ops_.absorb(st, w.in(), full);
            if (rest) {
                uint8_t pad[kBlock] = {};
                std::memcpy(pad, w.in() + full * kBlock, rest);
                ops_.absorb(st, pad, 1);
            }
            if (w.out() != w.in()) std::memcpy(w.out(), w.in(), w.len());
        }
        const Slice src(req.src, req.assoclen, textlen), dst(req.dst, req.assoclen, textlen);
        for (SgWalk w(src.list(), dst.list(), textlen, kBlock); w.next(); w.done()) {
            const std::size_t full = w.len() / kBlock, rest = w.len() % kBlock;
            const uint8_t* in = w.in();
            uint8_t* out = w.out();
            (enc ? ops_.encrypt : ops_.decrypt)(st, in, out, full);
            if (!rest) continue;
            in += full * kBlock;
            out += full * kBlock;
            if (enc) {
                uint8_t pad[kBlock] = {};
                std::memcpy(pad, in, rest);
                ops_.encrypt(st, pad, pad, 1);
                std::memcpy(out, pad, rest);
                secure_wipe(pad, sizeof pad);
            } else {
                ops_.decrypt_tail(st, in, out, rest);
            }
        }
    }

    const Ops ops_;
    SecureBuffer key_;
};

class AegisAlg final : public AeadAlg {
public:
    AegisAlg(AlgInfo info, const Ops& ops) : AeadAlg(std::move(info)), ops_(ops) {}
    std::unique_ptr<AeadTfm> create_tfm() const override { return std::make_unique<AegisTfm>(ops_); }

private:
    Ops ops_;
};

// ---- the portable driver -------------------------------------------------
// The AES round (SubBytes, ShiftRows, MixColumns, then the round key XORed
// in, as the aesenc instruction) with one 256-entry table of MixColumns
// columns, built at compile time from the S-box's definition.
constexpr uint8_t xtime(uint8_t x) { return static_cast<uint8_t>((x << 1) ^ ((x >> 7) * 0x1b)); }

constexpr uint8_t gf_mul(uint8_t a, uint8_t b) {
    uint8_t r = 0;
    for (; b; b >>= 1, a = xtime(a))
        if (b & 1) r ^= a;
    return r;
}

constexpr uint8_t rotl8(uint8_t x, int n) { return static_cast<uint8_t>((x << n) | (x >> (8 - n))); }

constexpr std::array<uint8_t, 256> make_sbox() {
    // x^-1 from logarithms to the generator 3 (255 steps, not 254 products a
    // byte: clang's constexpr step limit refuses those).
    std::array<uint8_t, 256> exp{}, log{};
    uint8_t p = 1;
    for (int i = 0; i < 255; ++i) {
        exp[i] = p;
        log[p] = static_cast<uint8_t>(i);
        p = static_cast<uint8_t>(p ^ xtime(p));  // p * 3
    }
    std::array<uint8_t, 256> s{};
    for (int x = 0; x < 256; ++x) {
        const uint8_t inv = x ? exp[(255 - log[x]) % 255] : 0;
        s[x] = static_cast<uint8_t>(inv ^ rotl8(inv, 1) ^ rotl8(inv, 2) ^ rotl8(inv, 3) ^ rotl8(inv, 4) ^ 0x63);
    }
    return s;
}

// te[x]: the column MixColumns makes of S(x) in row 0, as a little-endian
// word (row 0 in the low byte); rows 1..3 are its byte rotations.
constexpr std::array<uint32_t, 256> make_te() {
    constexpr std::array<uint8_t, 256> sbox = make_sbox();
    std::array<uint32_t, 256> t{};
    for (int x = 0; x < 256; ++x) {
        const uint8_t s = sbox[x];
        t[x] = uint32_t{gf_mul(s, 2)} | uint32_t{s} << 8 | uint32_t{s} << 16 | uint32_t{gf_mul(s, 3)} << 24;
    }
    return t;
}

constexpr std::array<uint32_t, 256> kTe = make_te();

constexpr uint32_t rotl32(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }

using Block = std::array<uint32_t, 4>;  // four columns, little-endian words

Block load(const uint8_t* p) {
    Block b;
    for (int c = 0; c < 4; ++c)
        b[c] = uint32_t{p[4 * c]} | uint32_t{p[4 * c + 1]} << 8 | uint32_t{p[4 * c + 2]} << 16 |
               uint32_t{p[4 * c + 3]} << 24;
    return b;
}

void store(uint8_t* p, const Block& b) {
    for (int c = 0; c < 4; ++c)
        for (int r = 0; r < 4; ++r) p[4 * c + r] = static_cast<uint8_t>(b[c] >> (8 * r));
}

Block operator^(const Block& a, const Block& b) { return {a[0] ^ b[0], a[1] ^ b[1], a[2] ^ b[2], a[3] ^ b[3]}; }
Block operator&(const Block& a, const Block& b) { return {a[0] & b[0], a[1] & b[1], a[2] & b[2], a[3] & b[3]}; }

// Row r of output column c comes from input column c + r (ShiftRows).
Block aes_round(const Block& x, const Block& key) {
    Block out;
    for (int c = 0; c < 4; ++c)
        out[c] = kTe[x[c] & 0xff] ^ rotl32(kTe[(x[(c + 1) & 3] >> 8) & 0xff], 8) ^
                 rotl32(kTe[(x[(c + 2) & 3] >> 16) & 0xff], 16) ^ rotl32(kTe[x[(c + 3) & 3] >> 24], 24) ^ key[c];
    return out;
}

struct Gen {
    Block s[5];
    explicit Gen(const State& st) {
        for (int i = 0; i < 5; ++i) s[i] = load(st.s[i]);
    }
    void save(State& st) const {
        for (int i = 0; i < 5; ++i) store(st.s[i], s[i]);
    }
    void update(const Block& m) {
        const Block s4 = s[4];
        s[4] = aes_round(s[3], s[4]);
        s[3] = aes_round(s[2], s[3]);
        s[2] = aes_round(s[1], s[2]);
        s[1] = aes_round(s[0], s[1]);
        s[0] = aes_round(s4, s[0] ^ m);
    }
    Block keystream() const { return s[1] ^ s[4] ^ (s[2] & s[3]); }
};

void gen_init(State& st, const uint8_t* key, const uint8_t* iv) {
    const Block k = load(key), kiv = k ^ load(iv), c0 = load(kConst0), c1 = load(kConst1);
    Gen g(st);
    g.s[0] = kiv;
    g.s[1] = c1;
    g.s[2] = c0;
    g.s[3] = k ^ c0;
    g.s[4] = k ^ c1;
    for (int i = 0; i < 5; ++i) {
        g.update(k);
        g.update(kiv);
    }
    g.save(st);
}

void gen_absorb(State& st, const uint8_t* ad, std::size_t n) {
    Gen g(st);
    for (std::size_t i = 0; i < n; ++i) g.update(load(ad + i * kBlock));
    g.save(st);
}

void gen_encrypt(State& st, const uint8_t* in, uint8_t* out, std::size_t n) {
    Gen g(st);
    for (std::size_t i = 0; i < n; ++i) {
        const Block p = load(in + i * kBlock);
        store(out + i * kBlock, p ^ g.keystream());
        g.update(p);
    }
    g.save(st);
}

void gen_decrypt(State& st, const uint8_t* in, uint8_t* out, std::size_t n) {
    Gen g(st);
    for (std::size_t i = 0; i < n; ++i) {
        const Block p = load(in + i * kBlock) ^ g.keystream();
        store(out + i * kBlock, p);
        g.update(p);
    }
    g.save(st);
}

void gen_decrypt_tail(State& st, const uint8_t* in, uint8_t* out, std::size_t len) {
    Gen g(st);
    uint8_t buf[kBlock] = {};
    std::memcpy(buf, in, len);
    store(buf, load(buf) ^ g.keystream());
    std::memset(buf + len, 0, kBlock - len);
    std::memcpy(out, buf, len);
    g.update(load(buf));
    g.save(st);
    secure_wipe(buf, sizeof buf);
}

void gen_final(State& st, uint64_t assoc_bits, uint64_t text_bits, uint8_t* tag) {
    Gen g(st);
    uint8_t lens[kBlock];
    for (int i = 0; i < 8; ++i) {
        lens[i] = static_cast<uint8_t>(assoc_bits >> (8 * i));
        lens[8 + i] = static_cast<uint8_t>(text_bits >> (8 * i));
    }
    const Block t = load(lens) ^ g.s[3];
    for (int i = 0; i < 7; ++i) g.update(t);
    store(tag, g.s[0] ^ g.s[1] ^ g.s[2] ^ g.s[3] ^ g.s[4]);
}

constexpr Ops kGenericOps = {gen_init, gen_absorb, gen_encrypt, gen_decrypt, gen_decrypt_tail, gen_final};

}  // namespace

std::shared_ptr<Alg> make_alg(AlgInfo info, const Ops& ops) {
    info.name = "aegis128";
    info.type = AlgType::Aead;
    info.needs_key = true;
    info.blocksize = 1;  // any length, as the kernel's
    info.min_keysize = info.max_keysize = kKeySize;
    info.ivsize = kIvSize;
    info.maxauthsize = kMaxTag;
    return std::make_shared<AegisAlg>(std::move(info), ops);
}

}  // namespace blkcrypt::aegis128

namespace blkcrypt {

// Called by register_generic_provider (provider.cpp).
Result<void> register_generic_aegis128(Registry& reg) {
    return reg.register_alg(
        aegis128::make_alg(generic::provider_info("aegis128", "aegis128-generic", AlgType::Aead),
                           aegis128::kGenericOps));
}

}  // namespace blkcrypt
