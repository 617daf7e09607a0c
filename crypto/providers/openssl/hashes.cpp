// sha1, sha256, sha512 and hmac(sha256) from OpenSSL as shashes:
// sha1-openssl, sha256-openssl, sha512-openssl, hmac-sha256-openssl.
//
// Exported states use the kernel's structs, byte for byte what the Crypto++
// drivers export (dm-crypt's lmk and dm-verity read them, and a state
// exported by one driver must finish on the other):
//   struct sha1_state   { u32 state[5]; /* 4 bytes padding */ u64 count; u8 buffer[64]; }  96
//   struct sha256_state { u32 state[8]; u64 count; u8 buf[64]; }                          104
//   struct sha512_state { u64 state[8]; u64 count[2]; u8 buf[128]; }                     208
// little-endian, count = bytes hashed, unused bytes zero.
//
// EVP_MD_CTX exposes no intermediate state, so this uses the low-level
// SHA*_CTX functions, deprecated in OpenSSL 3 but present in the default
// build; their fields (h[], Nl/Nh = message length in bits, data, num) map
// directly onto the kernel's.
#define OPENSSL_SUPPRESS_DEPRECATED  // SHA*_Init/Update/Final, deliberately
#include "ossl_common.hpp"

#include <blkcrypt/internal/bytes_util.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include <openssl/sha.h>

#include <cstring>

namespace blkcrypt::ossl {
namespace {

// Byte count as two words of the kernel's struct: (low, high); high is 0
// for the 32-bit-word hashes, whose count is one u64.
struct Count {
    uint64_t lo, hi;
};

struct Sha1 {
    using Ctx = SHA_CTX;
    using Word = uint32_t;
    static constexpr const char* kName = "sha1";
    static constexpr std::size_t kWords = 5, kBlock = 64, kDigest = 20;
    static constexpr std::size_t kCountOff = 24, kBlockOff = 32, kStateSize = 96;
    static void init(Ctx& c) { SHA1_Init(&c); }
    static void update(Ctx& c, const uint8_t* p, std::size_t n) { SHA1_Update(&c, p, n); }
    static void final(Ctx& c, uint8_t* out) { SHA1_Final(out, &c); }
    // h0..h4 are separate members: reach them by member pointer.
    static constexpr SHA_LONG Ctx::*kH[5] = {&Ctx::h0, &Ctx::h1, &Ctx::h2, &Ctx::h3, &Ctx::h4};
    static Word word(const Ctx& c, std::size_t i) { return c.*kH[i]; }
    static void set_word(Ctx& c, std::size_t i, Word w) { c.*kH[i] = w; }
    static uint8_t* block(Ctx& c) { return reinterpret_cast<uint8_t*>(c.data); }
    static const uint8_t* block(const Ctx& c) { return reinterpret_cast<const uint8_t*>(c.data); }
    static Count count(const Ctx& c) { return {((uint64_t{c.Nh} << 32) | c.Nl) >> 3, 0}; }
    static void set_count(Ctx& c, Count n) {  // n.lo < 2^61, checked by the caller
        c.Nl = static_cast<SHA_LONG>(n.lo << 3);
        c.Nh = static_cast<SHA_LONG>(n.lo >> 29);
        c.num = static_cast<unsigned>(n.lo % kBlock);
    }
};

struct Sha256 {
    using Ctx = SHA256_CTX;
    using Word = uint32_t;
    static constexpr const char* kName = "sha256";
    static constexpr std::size_t kWords = 8, kBlock = 64, kDigest = 32;
    static constexpr std::size_t kCountOff = 32, kBlockOff = 40, kStateSize = 104;
    static void init(Ctx& c) { SHA256_Init(&c); }
    static void update(Ctx& c, const uint8_t* p, std::size_t n) { SHA256_Update(&c, p, n); }
    static void final(Ctx& c, uint8_t* out) { SHA256_Final(out, &c); }
    static Word word(const Ctx& c, std::size_t i) { return c.h[i]; }
    static void set_word(Ctx& c, std::size_t i, Word w) { c.h[i] = w; }
    static uint8_t* block(Ctx& c) { return reinterpret_cast<uint8_t*>(c.data); }
    static const uint8_t* block(const Ctx& c) { return reinterpret_cast<const uint8_t*>(c.data); }
    static Count count(const Ctx& c) { return {((uint64_t{c.Nh} << 32) | c.Nl) >> 3, 0}; }
    static void set_count(Ctx& c, Count n) {
        c.Nl = static_cast<SHA_LONG>(n.lo << 3);
        c.Nh = static_cast<SHA_LONG>(n.lo >> 29);
        c.num = static_cast<unsigned>(n.lo % kBlock);
    }
};

struct Sha512 {
    using Ctx = SHA512_CTX;
    using Word = uint64_t;
    static constexpr const char* kName = "sha512";
    static constexpr std::size_t kWords = 8, kBlock = 128, kDigest = 64;
    static constexpr std::size_t kCountOff = 64, kBlockOff = 80, kStateSize = 208;
    static void init(Ctx& c) { SHA512_Init(&c); }
    static void update(Ctx& c, const uint8_t* p, std::size_t n) { SHA512_Update(&c, p, n); }
    static void final(Ctx& c, uint8_t* out) { SHA512_Final(out, &c); }
    static Word word(const Ctx& c, std::size_t i) { return c.h[i]; }
    static void set_word(Ctx& c, std::size_t i, Word w) { c.h[i] = w; }
    static uint8_t* block(Ctx& c) { return c.u.p; }
    static const uint8_t* block(const Ctx& c) { return c.u.p; }
    // Nl/Nh: the 128-bit length in bits; the kernel's count[2]: in bytes.
    static Count count(const Ctx& c) { return {(c.Nl >> 3) | (c.Nh << 61), c.Nh >> 3}; }
    static void set_count(Ctx& c, Count n) {  // n.hi < 2^61, checked by the caller
        c.Nl = n.lo << 3;
        c.Nh = (n.hi << 3) | (n.lo >> 61);
        c.num = static_cast<unsigned>(n.lo % kBlock);
    }
};

template <class H>
void export_ctx(const typename H::Ctx& c, Bytes out) {
    using W = typename H::Word;
    std::memset(out.data(), 0, H::kStateSize);
    for (std::size_t i = 0; i < H::kWords; ++i) put_le<W>(out.data() + i * sizeof(W), H::word(c, i));
    const Count n = H::count(c);
    put_le<uint64_t>(out.data() + H::kCountOff, n.lo);
    if (sizeof(W) == 8) put_le<uint64_t>(out.data() + H::kCountOff + 8, n.hi);
    std::memcpy(out.data() + H::kBlockOff, H::block(c), n.lo % H::kBlock);
}

template <class H>
Status import_ctx(typename H::Ctx& c, ConstBytes in) {
    using W = typename H::Word;
    Count n{get_le<uint64_t>(in.data() + H::kCountOff), 0};
    if (sizeof(W) == 8) n.hi = get_le<uint64_t>(in.data() + H::kCountOff + 8);
    // The length in bits must fit the padding's length field (as the
    // Crypto++ drivers check, so both accept the same states).
    if ((sizeof(W) == 8 ? n.hi : n.lo) >> 61) return Status::Invalid;
    H::init(c);  // fields the kernel's struct lacks (md_len)
    for (std::size_t i = 0; i < H::kWords; ++i) H::set_word(c, i, get_le<W>(in.data() + i * sizeof(W)));
    H::set_count(c, n);
    std::memcpy(H::block(c), in.data() + H::kBlockOff, H::kBlock);
    return Status::Ok;
}

// A running SHA computation.
template <class H>
class ShaState final : public ShashState {
public:
    ShaState() { H::init(c_); }
    ~ShaState() override { secure_wipe(&c_, sizeof c_); }
    void init() override { H::init(c_); }
    void update(ConstBytes data) override { H::update(c_, data.data(), data.size()); }
    void final(Bytes out) override { H::final(c_, out.data()); }
    void export_state(Bytes out) const override { export_ctx<H>(c_, out); }
    Status import_state(ConstBytes in) override { return import_ctx<H>(c_, in); }

private:
    typename H::Ctx c_;
};

template <class H>
class ShaTfm final : public ShashTfm {
public:
    std::unique_ptr<ShashState> new_state() const override { return std::make_unique<ShaState<H>>(); }
    // On the stack: SHA256() and friends fetch an EVP_MD on every call in 3.0.
    void digest(ConstBytes data, Bytes out) const override {
        typename H::Ctx c;
        H::init(c);
        H::update(c, data.data(), data.size());
        H::final(c, out.data());
        secure_wipe(&c, sizeof c);
    }
};

template <class Tfm>
class OsslHashAlg final : public ShashAlg {
public:
    using ShashAlg::ShashAlg;
    std::unique_ptr<ShashTfm> create_tfm() const override { return std::make_unique<Tfm>(); }
};

template <class H>
AlgInfo sha_info(std::string name, std::string driver) {
    AlgInfo info = provider_info(std::move(name), std::move(driver), AlgType::Shash);
    info.blocksize = H::kBlock;
    info.digestsize = H::kDigest;
    info.statesize = H::kStateSize;
    return info;
}

template <class H>
std::shared_ptr<Alg> sha() {
    return std::make_shared<OsslHashAlg<ShaTfm<H>>>(
        sha_info<H>(H::kName, std::string(H::kName) + "-openssl"));
}

// ---- hmac(sha256) --------------------------------------------------------------
// RFC 2104 as the hmac template: setkey hashes (key ^ ipad) and (key ^ opad)
// once and keeps both contexts; a computation starts from a copy of the
// first. The exported state is the inner sha256 state (statesize 104), as the
// template's, so states move between the two.
class HmacSha256Tfm final : public ShashTfm {
public:
    using H = Sha256;
    HmacSha256Tfm() { (void)setkey({}); }  // defined even unkeyed; the handle refuses that
    ~HmacSha256Tfm() override {
        secure_wipe(&ipad_, sizeof ipad_);
        secure_wipe(&opad_, sizeof opad_);
    }

    Status setkey(ConstBytes key) override {
        uint8_t k[H::kBlock] = {};  // the key zero-padded to one block
        if (key.size() > H::kBlock) {
            H::Ctx c;
            H::init(c);
            H::update(c, key.data(), key.size());
            H::final(c, k);
            secure_wipe(&c, sizeof c);
        } else if (!key.empty()) {
            std::memcpy(k, key.data(), key.size());
        }
        uint8_t pad[H::kBlock];
        for (auto [fill, ctx] : {std::pair{uint8_t{0x36}, &ipad_}, std::pair{uint8_t{0x5c}, &opad_}}) {
            for (std::size_t i = 0; i < H::kBlock; ++i) pad[i] = static_cast<uint8_t>(k[i] ^ fill);
            H::init(*ctx);
            H::update(*ctx, pad, H::kBlock);
        }
        secure_wipe(k, sizeof k);
        secure_wipe(pad, sizeof pad);
        return Status::Ok;
    }

    std::unique_ptr<ShashState> new_state() const override;

    void start(H::Ctx& c) const { c = ipad_; }
    void finish(H::Ctx& c, uint8_t* out) const {
        uint8_t ih[H::kDigest];
        H::final(c, ih);
        c = opad_;
        H::update(c, ih, H::kDigest);
        H::final(c, out);
        secure_wipe(ih, sizeof ih);
    }

    void digest(ConstBytes data, Bytes out) const override {
        H::Ctx c = ipad_;
        H::update(c, data.data(), data.size());
        finish(c, out.data());
        secure_wipe(&c, sizeof c);
    }

private:
    H::Ctx ipad_, opad_;
};

class HmacSha256State final : public ShashState {
public:
    using H = Sha256;
    explicit HmacSha256State(const HmacSha256Tfm& tfm) : tfm_(tfm) { tfm_.start(c_); }
    ~HmacSha256State() override { secure_wipe(&c_, sizeof c_); }
    void init() override { tfm_.start(c_); }
    void update(ConstBytes data) override { H::update(c_, data.data(), data.size()); }
    void final(Bytes out) override { tfm_.finish(c_, out.data()); }
    void export_state(Bytes out) const override { export_ctx<H>(c_, out); }
    Status import_state(ConstBytes in) override { return import_ctx<H>(c_, in); }

private:
    const HmacSha256Tfm& tfm_;
    H::Ctx c_;
};

std::unique_ptr<ShashState> HmacSha256Tfm::new_state() const {
    return std::make_unique<HmacSha256State>(*this);
}

std::shared_ptr<Alg> hmac_sha256() {
    AlgInfo info = sha_info<Sha256>("hmac(sha256)", "hmac-sha256-openssl");
    info.needs_key = true;
    info.min_keysize = 0;  // any length: RFC 2104 hashes long keys
    return std::make_shared<OsslHashAlg<HmacSha256Tfm>>(std::move(info));
}

}  // namespace

std::vector<std::shared_ptr<Alg>> make_hashes() {
    return {sha<Sha1>(), sha<Sha256>(), sha<Sha512>(), hmac_sha256()};
}

}  // namespace blkcrypt::ossl
