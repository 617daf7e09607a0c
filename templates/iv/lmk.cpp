// lmk(X): loop-AES compatibility (dm-crypt's "lmk", crypt_iv_lmk_*).
//
// 512-byte sectors only. The IV of a sector is the raw MD5 chaining value
// (no MD5 padding: the md5 shash's exported state, u32 hash[4] LE) after
//   [v3: a 64-byte seed block = 16 seed bytes + 48 zeros]
//   plaintext bytes 16..511
//   LE32(s) || LE32((s >> 32 & 0xffffff) | 0x80000000) || LE32(4024) || LE32(0)
// — a whole number of MD5 blocks — truncated to the IV size (at most 16).
// Write: IV computed from the plaintext, then CBC. Read: CBC-decrypt with a
// zero IV (the kernel's generator gives zeros on read), then recompute the IV
// from decrypted bytes 16..511 (which do not depend on the IV) and XOR it into
// the first IV-size bytes of the plaintext.
//
// Key: dm-crypt gives lmk 64 keys (key_count). Version 3 is recognised, as
// the kernel does, by a key that does not split into key_count parts: then
// key_count + 1 equal parts, the last being the seed (its first 16 bytes).
#include <blkcrypt/internal/geniv.hpp>

#include <blkcrypt/secure_buffer.hpp>

#include <array>
#include <cstring>
#include <mutex>
#include <vector>

namespace blkcrypt {
namespace {

constexpr std::size_t kSector = 512;
constexpr std::size_t kSeedBlock = 64;    // LMK_SEED_SIZE
constexpr std::size_t kMd5Digest = 16;
constexpr std::size_t kMaxState = 256;    // room for the md5 driver's exported state

class LmkTfm final : public GenivTfm {
public:
    LmkTfm(std::shared_ptr<const Alg> inner, const Alg& md5)
        : GenivTfm(std::move(inner)), md5_(create_shash_tfm(md5)), statesize_(md5.info().statesize),
          ivsize_(std::max<std::size_t>(inner_ivsize(), 8)) {}
    ~LmkTfm() override { secure_wipe(seed_.data(), seed_.size()); }

private:
    std::size_t extra_key_size(std::size_t key_len) const override {
        const unsigned parts = params().key_count;
        // crypt_ctr_ivmode: key_size % key_parts != 0 -> one more part, the seed.
        return key_len % parts ? key_len / (parts + 1) : 0;
    }

    Status set_extra_key(ConstBytes extra) override {
        seed_.fill(0);
        has_seed_ = false;
        if (extra.empty()) return Status::Ok;  // version 2
        // The kernel copies 16 bytes (md5's digest size) from the seed part;
        // a shorter part would have it read past the key.
        if (extra.size() < kMd5Digest) return Status::Invalid;
        std::memcpy(seed_.data(), extra.data(), kMd5Digest);
        has_seed_ = true;
        return Status::Ok;
    }

    Status check_params(const SectorParams& p) const override {
        return p.sector_size == kSector ? Status::Ok : Status::Invalid;
    }

    // The IV of one sector from its 512 bytes (only bytes 16..511 count).
    void lmk_one(const GenivUnit& u, const uint8_t* data, uint8_t* iv) const {
        StateLease lease(*this);
        ShashState* st = lease.get();
        st->init();
        if (has_seed_) st->update(ConstBytes(seed_.data(), seed_.size()));
        st->update(ConstBytes(data + 16, kSector - 16));
        uint8_t tail[16];
        const uint64_t s = u.iv_sector;
        const uint32_t w[4] = {static_cast<uint32_t>(s),
                               static_cast<uint32_t>((s >> 32) & 0x00ffffff) | 0x80000000u, 4024, 0};
        for (int i = 0; i < 4; ++i)
            for (int b = 0; b < 4; ++b) tail[4 * i + b] = static_cast<uint8_t>(w[i] >> (8 * b));
        st->update(ConstBytes(tail, sizeof tail));
        uint8_t state[kMaxState];
        st->export_state(Bytes(state, statesize_));
        std::memcpy(iv, state, ivsize_);  // u32 hash[4], little-endian
        secure_wipe(state, sizeof state);
        st->init();  // drop the state derived from the plaintext
    }

    Status pre(GenivUnit& u) const override {
        if (!u.enc) return Status::Ok;  // read: zero IV
        uint8_t buf[kSector];
        sg_gather(u.src, 0, Bytes(buf, kSector));
        lmk_one(u, buf, u.iv.data());
        secure_wipe(buf, sizeof buf);
        return Status::Ok;
    }

    Status post(GenivUnit& u) const override {
        if (u.enc) return Status::Ok;
        uint8_t buf[kSector], iv[kMd5Digest];
        sg_gather(u.dst, 0, Bytes(buf, kSector));
        lmk_one(u, buf, iv);
        for (std::size_t i = 0; i < ivsize_; ++i) buf[i] ^= iv[i];
        sg_scatter(u.dst, 0, ConstBytes(buf, ivsize_));
        secure_wipe(buf, sizeof buf);
        secure_wipe(iv, sizeof iv);
        return Status::Ok;
    }

    // MD5 states are reused, not made per sector: a request takes one from
    // the pool (making one only when every state is in use by another
    // thread) and gives it back, so the data path stops allocating once
    // each thread that runs requests has had one.
    class StateLease {
    public:
        explicit StateLease(const LmkTfm& t) : t_(t) {
            {
                std::lock_guard lk(t_.pool_mu_);
                if (!t_.pool_.empty()) {
                    st_ = std::move(t_.pool_.back());
                    t_.pool_.pop_back();
                }
            }
            if (!st_) st_ = t_.md5_->new_state();
        }
        ~StateLease() {
            std::lock_guard lk(t_.pool_mu_);
            try {
                t_.pool_.push_back(std::move(st_));
            } catch (...) {
                // No room to keep it: it is freed; the pool only saves work.
            }
        }
        ShashState* get() const noexcept { return st_.get(); }

    private:
        const LmkTfm& t_;
        std::unique_ptr<ShashState> st_;
    };

    std::unique_ptr<ShashTfm> md5_;
    mutable std::mutex pool_mu_;
    mutable std::vector<std::unique_ptr<ShashState>> pool_;
    std::size_t statesize_;
    std::size_t ivsize_;  // dm-crypt's iv_size: max(inner ivsize, 8)
    std::array<uint8_t, kSeedBlock> seed_{};
    bool has_seed_ = false;
};

}  // namespace

std::shared_ptr<Template> make_lmk_template() {
    auto prepare = [](Registry& reg, const Alg& inner, std::vector<std::shared_ptr<const Alg>>& spawns)
        -> Result<GenivTemplate::MakeTfm> {
        const AlgInfo& in = inner.info();
        if (in.ivsize == 0)
            return make_error(Status::Invalid, "lmk: '" + in.name + "' takes no IV; use a mode such as cbc(" +
                                                   in.name + ")");
        if (in.ivsize > kMd5Digest)
            return make_error(Status::Invalid, "lmk: '" + in.name + "' has a " + std::to_string(in.ivsize) +
                                                   "-byte IV; lmk's MD5-derived IV has at most 16 bytes");
        auto md5_name = AlgName::parse("md5");
        if (!md5_name) return md5_name.error();
        auto md5 = grab_spawn(reg, "lmk", *md5_name, AlgType::Shash);
        if (!md5) return md5.error();
        const AlgInfo& h = (*md5)->info();
        if (h.type != AlgType::Shash || h.digestsize != kMd5Digest || h.statesize < kMd5Digest ||
            h.statesize > kMaxState)
            return make_error(Status::Invalid, "lmk: '" + h.driver +
                                                   "' does not export an MD5 state (u32 hash[4] first)");
        spawns.push_back(*md5);
        std::shared_ptr<const Alg> hash = *md5;
        return GenivTemplate::MakeTfm([hash](std::shared_ptr<const Alg> x) {
            return std::make_unique<LmkTfm>(std::move(x), *hash);
        });
    };
    return std::make_shared<GenivTemplate>("lmk", prepare);
}

}  // namespace blkcrypt
