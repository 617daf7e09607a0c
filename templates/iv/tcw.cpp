// tcw(X): TrueCrypt < 4.1 compatibility (dm-crypt's "tcw", crypt_iv_tcw_*).
//
// 512-byte sectors only. The key ends with iv_size bytes of IV seed and 16
// bytes of whitening (iv_size = max(X's ivsize, 8)); the rest is the cipher
// key(s). The key must be longer than those extra bytes.
//   IV        = seed XOR LE64(s), the 8 sector bytes repeated over the IV
//   whitening = w = whitening XOR (LE64(s) || LE64(s)); each 4-byte word of w
//               replaced by the kernel's crc32 of it (crc32_le, seed 0, no
//               final inversion, LE32 — the registry's "crc32"); then
//               w[0..4) ^= w[12..16), w[4..8) ^= w[8..12), and w[0..8) is
//               XORed into every 8 bytes of the sector.
// Write: CBC-encrypt, then whiten the ciphertext (post, on dst).
// Read: remove the whitening from the ciphertext first — into dst, so an
// out-of-place request leaves its source alone — then decrypt in place.
#include <blkcrypt/internal/geniv.hpp>

#include <blkcrypt/secure_buffer.hpp>

#include <cstring>
#include <limits>

namespace blkcrypt {
namespace {

constexpr std::size_t kSector = 512;
constexpr std::size_t kWhitening = 16;  // TCW_WHITENING_SIZE
constexpr std::size_t kMaxIv = 16;      // the sector number covers at most 16 IV bytes

class TcwTfm final : public GenivTfm {
public:
    TcwTfm(std::shared_ptr<const Alg> inner, const Alg& crc32)
        : GenivTfm(std::move(inner)), crc32_(create_shash_tfm(crc32)),
          ivsize_(std::max<std::size_t>(inner_ivsize(), 8)) {}
    ~TcwTfm() override {
        secure_wipe(seed_, sizeof seed_);
        secure_wipe(whitening_, sizeof whitening_);
    }

private:
    std::size_t extra_key_size(std::size_t key_len) const override {
        // crypt_iv_tcw_ctr: "Wrong key size for TCW" unless the key is longer
        // than the extra bytes. More than the key makes setkey refuse it.
        if (key_len <= ivsize_ + kWhitening) return std::numeric_limits<std::size_t>::max();
        return ivsize_ + kWhitening;
    }

    Status set_extra_key(ConstBytes extra) override {
        if (extra.size() != ivsize_ + kWhitening) return Status::Invalid;
        std::memcpy(seed_, extra.data(), ivsize_);
        std::memcpy(whitening_, extra.data() + ivsize_, kWhitening);
        return Status::Ok;
    }

    Status check_params(const SectorParams& p) const override {
        return p.sector_size == kSector ? Status::Ok : Status::Invalid;
    }

    // XOR the sector's whitening into 512 bytes of data.
    void whiten(const GenivUnit& u, uint8_t* data) const {
        uint8_t sector[8], buf[kWhitening];
        put_le64(sector, u.iv_sector);
        for (std::size_t i = 0; i < 8; ++i) {
            buf[i] = whitening_[i] ^ sector[i];
            buf[8 + i] = whitening_[8 + i] ^ sector[i];
        }
        for (std::size_t i = 0; i < 4; ++i) {
            uint8_t word[4];
            std::memcpy(word, buf + 4 * i, 4);
            crc32_->digest(ConstBytes(word, 4), Bytes(buf + 4 * i, 4));
        }
        for (std::size_t i = 0; i < 4; ++i) {
            buf[i] ^= buf[12 + i];
            buf[4 + i] ^= buf[8 + i];
        }
        for (std::size_t off = 0; off < kSector; off += 8)
            for (std::size_t i = 0; i < 8; ++i) data[off + i] ^= buf[i];
        secure_wipe(buf, sizeof buf);
    }

    Status pre(GenivUnit& u) const override {
        if (!u.enc) {
            // Unwhiten the ciphertext into dst and decrypt there.
            uint8_t buf[kSector];
            sg_gather(u.src, 0, Bytes(buf, kSector));
            whiten(u, buf);
            sg_scatter(u.dst, 0, ConstBytes(buf, kSector));
            u.src = u.dst;
        }
        uint8_t sector[8];
        put_le64(sector, u.iv_sector);
        for (std::size_t i = 0; i < ivsize_; ++i) u.iv[i] = seed_[i] ^ sector[i % 8];
        return Status::Ok;
    }

    Status post(GenivUnit& u) const override {
        if (!u.enc) return Status::Ok;
        uint8_t buf[kSector];
        sg_gather(u.dst, 0, Bytes(buf, kSector));
        whiten(u, buf);
        sg_scatter(u.dst, 0, ConstBytes(buf, kSector));
        return Status::Ok;
    }

    std::unique_ptr<ShashTfm> crc32_;
    std::size_t ivsize_;  // dm-crypt's iv_size
    uint8_t seed_[kMaxIv] = {};
    uint8_t whitening_[kWhitening] = {};
};

}  // namespace

std::shared_ptr<Template> make_tcw_template() {
    auto prepare = [](Registry& reg, const Alg& inner, std::vector<std::shared_ptr<const Alg>>& spawns)
        -> Result<GenivTemplate::MakeTfm> {
        const AlgInfo& in = inner.info();
        if (in.ivsize == 0)
            return make_error(Status::Invalid, "tcw: '" + in.name + "' takes no IV; use a mode such as cbc(" +
                                                   in.name + ")");
        if (in.ivsize > kMaxIv)
            return make_error(Status::Invalid, "tcw: '" + in.name + "' has a " + std::to_string(in.ivsize) +
                                                   "-byte IV; tcw supports at most 16");
        auto crc_name = AlgName::parse("crc32");
        if (!crc_name) return crc_name.error();
        auto crc = grab_spawn(reg, "tcw", *crc_name, AlgType::Shash);
        if (!crc) return crc.error();
        const AlgInfo& h = (*crc)->info();
        if (h.type != AlgType::Shash || h.digestsize != 4)
            return make_error(Status::Invalid, "tcw: '" + h.driver + "' is not a 4-byte crc32 shash");
        spawns.push_back(*crc);
        std::shared_ptr<const Alg> hash = *crc;
        return GenivTemplate::MakeTfm([hash](std::shared_ptr<const Alg> x) {
            return std::make_unique<TcwTfm>(std::move(x), *hash);
        });
    };
    return std::make_shared<GenivTemplate>("tcw", prepare);
}

}  // namespace blkcrypt
