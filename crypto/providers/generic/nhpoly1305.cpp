// NHPoly1305, the kernel's crypto/nhpoly1305.c: Adiantum's hash of the bulk
// of a message, an epsilon-almost-delta-universal hash (not a MAC).
//   key    1088 bytes = 16-byte Poly1305 key r || 1072-byte NH key
//   digest 16 bytes
// The message is cut into 1024-byte NH messages (the last one a multiple of
// 16 bytes, zero-padded); NH with 4 passes (key offsets 0, 16, 32, 48 bytes)
// maps each to 32 bytes, and those are Poly1305 (r only, no s) blocks. Data
// may arrive in any pieces: the result is the same.
//
// Driver nhpoly1305-generic, priority 100.
#include "generic/generic.hpp"
#include "generic/poly1305_core.hpp"

#include <blkcrypt/internal/alg.hpp>
#include <blkcrypt/internal/bytes_util.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include <algorithm>
#include <cstring>

namespace blkcrypt {
namespace {

constexpr std::size_t kUnit = 16;          // NH message unit
constexpr std::size_t kNhMessage = 1024;   // bytes per NH hash
constexpr std::size_t kPasses = 4;
constexpr std::size_t kNhHash = 8 * kPasses;
constexpr std::size_t kNhKeyWords = kNhMessage / 4 + 4 * (kPasses - 1);  // 268
constexpr std::size_t kKeySize = 16 + 4 * kNhKeyWords;                  // 1088
constexpr std::size_t kDigest = 16;
// Exported state: poly h (3 x 8), NH sums (4 x 8), nh_remaining (4),
// buflen (4), buffer (16).
constexpr std::size_t kStateSize = 24 + kNhHash + 4 + 4 + kUnit;

// NH over len bytes (a multiple of 16) with the key words from `key`.
void nh(const uint32_t* key, const uint8_t* m, std::size_t len, uint64_t sums[kPasses]) noexcept {
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (; len; len -= kUnit, m += kUnit, key += 4) {
        const uint32_t m0 = get_le32(m), m1 = get_le32(m + 4), m2 = get_le32(m + 8), m3 = get_le32(m + 12);
        auto prod = [](uint32_t a, uint32_t b) { return uint64_t{a} * b; };
        s0 += prod(m0 + key[0], m2 + key[2]) + prod(m1 + key[1], m3 + key[3]);
        s1 += prod(m0 + key[4], m2 + key[6]) + prod(m1 + key[5], m3 + key[7]);
        s2 += prod(m0 + key[8], m2 + key[10]) + prod(m1 + key[9], m3 + key[11]);
        s3 += prod(m0 + key[12], m2 + key[14]) + prod(m1 + key[13], m3 + key[15]);
    }
    sums[0] = s0;
    sums[1] = s1;
    sums[2] = s2;
    sums[3] = s3;
}

class NhpolyTfm;

class NhpolyState final : public ShashState {
public:
    explicit NhpolyState(const NhpolyTfm& tfm) : tfm_(tfm) {}
    ~NhpolyState() override { wipe(); }

    void init() override {
        poly_.init();
        std::fill(sums_, sums_ + kPasses, 0);
        remaining_ = 0;
        buflen_ = 0;
    }
    void update(ConstBytes data) override;
    void final(Bytes out) override;
    void export_state(Bytes out) const override;
    Status import_state(ConstBytes in) override;

private:
    void units(const uint8_t* src, std::size_t len);
    void wipe() noexcept {
        poly_.wipe();
        secure_wipe(sums_, sizeof sums_);
        secure_wipe(buf_, sizeof buf_);
    }

    const NhpolyTfm& tfm_;
    generic::Poly1305Core poly_;
    uint64_t sums_[kPasses] = {};
    std::size_t remaining_ = 0;  // bytes left in the current NH message; 0: none open
    std::size_t buflen_ = 0;
    uint8_t buf_[kUnit] = {};
};

class NhpolyTfm final : public ShashTfm {
public:
    ~NhpolyTfm() override {
        poly_key_.wipe();
        secure_wipe(nh_key_, sizeof nh_key_);
    }
    Status setkey(ConstBytes key) override {
        if (key.size() != kKeySize) return Status::Invalid;
        poly_key_.set(key.data());
        for (std::size_t i = 0; i < kNhKeyWords; ++i) nh_key_[i] = get_le32(key.data() + 16 + 4 * i);
        return Status::Ok;
    }
    std::unique_ptr<ShashState> new_state() const override { return std::make_unique<NhpolyState>(*this); }

    generic::Poly1305Key poly_key_;
    uint32_t nh_key_[kNhKeyWords] = {};
};

// A whole number of units through NH, each finished NH hash through Poly1305.
void NhpolyState::units(const uint8_t* src, std::size_t len) {
    while (len) {
        const std::size_t pos = remaining_ ? kNhMessage - remaining_ : 0;
        const std::size_t n = std::min(len, kNhMessage - pos);
        uint64_t part[kPasses];
        nh(tfm_.nh_key_ + pos / 4, src, n, part);
        for (std::size_t i = 0; i < kPasses; ++i) sums_[i] = (pos ? sums_[i] : 0) + part[i];
        remaining_ = kNhMessage - pos - n;
        if (remaining_ == 0) {
            uint8_t h[kNhHash];
            for (std::size_t i = 0; i < kPasses; ++i) put_le64(h + 8 * i, sums_[i]);
            poly_.blocks(tfm_.poly_key_, h, kNhHash / 16);
        }
        src += n;
        len -= n;
    }
}

void NhpolyState::update(ConstBytes data) {
    if (data.empty()) return;  // an empty span's data() may be null: no memcpy from it
    const uint8_t* p = data.data();
    std::size_t len = data.size();
    if (buflen_) {
        const std::size_t n = std::min(len, kUnit - buflen_);
        std::memcpy(buf_ + buflen_, p, n);
        buflen_ += n;
        p += n;
        len -= n;
        if (buflen_ < kUnit) return;
        units(buf_, kUnit);
        buflen_ = 0;
    }
    const std::size_t whole = len / kUnit * kUnit;
    if (whole) units(p, whole);
    p += whole;
    len -= whole;
    if (len) {
        std::memcpy(buf_, p, len);
        buflen_ = len;
    }
}

void NhpolyState::final(Bytes out) {
    if (buflen_) {
        std::fill(buf_ + buflen_, buf_ + kUnit, 0);
        units(buf_, kUnit);
        buflen_ = 0;
    }
    if (remaining_) {  // a short last NH message
        uint8_t h[kNhHash];
        for (std::size_t i = 0; i < kPasses; ++i) put_le64(h + 8 * i, sums_[i]);
        poly_.blocks(tfm_.poly_key_, h, kNhHash / 16);
        remaining_ = 0;
    }
    uint8_t d[kDigest];
    poly_.emit(d);
    std::memcpy(out.data(), d, kDigest);
    init();
}

void NhpolyState::export_state(Bytes out) const {
    uint8_t* p = out.data();
    poly_.save(p);
    for (std::size_t i = 0; i < kPasses; ++i) put_le64(p + 24 + 8 * i, sums_[i]);
    put_le32(p + 24 + kNhHash, static_cast<uint32_t>(remaining_));
    put_le32(p + 28 + kNhHash, static_cast<uint32_t>(buflen_));
    std::memcpy(p + 32 + kNhHash, buf_, kUnit);
}

Status NhpolyState::import_state(ConstBytes in) {
    const uint8_t* p = in.data();
    const uint32_t rem = get_le32(p + 24 + kNhHash), bl = get_le32(p + 28 + kNhHash);
    if (rem >= kNhMessage || rem % kUnit || bl >= kUnit) return Status::Invalid;
    if (!poly_.load(p)) return Status::Invalid;
    for (std::size_t i = 0; i < kPasses; ++i) sums_[i] = get_le64(p + 24 + 8 * i);
    remaining_ = rem;
    buflen_ = bl;
    std::memcpy(buf_, p + 32 + kNhHash, kUnit);
    return Status::Ok;
}

class NhpolyAlg final : public ShashAlg {
public:
    using ShashAlg::ShashAlg;
    std::unique_ptr<ShashTfm> create_tfm() const override { return std::make_unique<NhpolyTfm>(); }
};

}  // namespace

Result<void> register_generic_nhpoly1305(Registry& reg) {
    AlgInfo i = generic::provider_info("nhpoly1305", "nhpoly1305-generic", AlgType::Shash);
    i.needs_key = true;
    i.blocksize = kUnit;
    i.min_keysize = i.max_keysize = kKeySize;
    i.digestsize = kDigest;
    i.statesize = kStateSize;
    const std::shared_ptr<Alg> algs[] = {std::make_shared<NhpolyAlg>(i)};
    return reg.register_algs(algs);
}

}  // namespace blkcrypt
