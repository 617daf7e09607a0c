#include <blkcrypt/integrity/tag_hash.hpp>

#include <blkcrypt/internal/bytes_util.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include <cstring>
#include <string>

namespace blkcrypt::integrity {

std::string kernel_hash_name(std::string_view name) {
    // integritysetup writes keyed hashes as "hmac-sha256" (crypt_parse_integrity_mode).
    if (name.starts_with("hmac-")) return "hmac(" + std::string(name.substr(5)) + ")";
    return std::string(name);
}

TagHash::TagHash(Shash shash, uint32_t tag_size, uint32_t block_size,
                 std::optional<std::array<uint8_t, kSaltSize>> salt)
    : shash_(std::move(shash)), tag_size_(tag_size), block_size_(block_size), salt_(salt) {}

Result<TagHash> TagHash::create(Registry& reg, std::string_view alg, ConstBytes key, const Superblock& sb) {
    auto sh = Shash::alloc(reg, alg);
    if (!sh) return sh.error();
    Shash shash = std::move(*sh);
    if (shash.info().needs_key) {
        if (key.empty()) return make_error(Status::Invalid, "integrity hash '" + std::string(alg) + "' needs a key");
        if (Status s = shash.setkey(key); s != Status::Ok)
            return make_error(s, "integrity hash '" + std::string(alg) + "' refused its key");
    } else if (!key.empty()) {
        return make_error(Status::Invalid, "integrity hash '" + std::string(alg) + "' takes no key");
    }
    if (sb.tag_size == 0) return make_error(Status::Invalid, "integrity tag size 0");
    std::optional<std::array<uint8_t, kSaltSize>> salt;
    if (sb.has(kFlagFixedHmac)) salt = sb.salt;
    return TagHash(std::move(shash), sb.tag_size, sb.sector_size(), salt);
}

Status TagHash::compute(uint64_t sector, ConstBytes blocks, Bytes tags) const {
    if (blocks.size() % block_size_ || tags.size() != blocks.size() / block_size_ * tag_size_) return Status::Invalid;
    auto d = shash_.new_desc();
    if (!d) return d.error().status;
    const std::size_t ds = shash_.digestsize();
    uint8_t digest[64];  // the largest digest a tag takes (sha512)
    if (ds > sizeof digest) return Status::Invalid;
    const uint64_t step = block_size_ / kSectorSize;
    for (std::size_t i = 0; i * block_size_ < blocks.size(); ++i, sector += step) {
        uint8_t le[8];
        put_le64(le, sector);
        d->init();
        if (salt_) d->update(ConstBytes(salt_->data(), salt_->size()));
        d->update(ConstBytes(le, sizeof le));
        if (Status s = d->finup(blocks.subspan(i * block_size_, block_size_), Bytes(digest, ds)); s != Status::Ok)
            return s;
        uint8_t* out = tags.data() + i * tag_size_;
        if (ds >= tag_size_) {
            std::memcpy(out, digest, tag_size_);
        } else {
            std::memcpy(out, digest, ds);
            std::memset(out + ds, 0, tag_size_ - ds);
        }
    }
    secure_wipe(digest, sizeof digest);
    return Status::Ok;
}

}  // namespace blkcrypt::integrity
