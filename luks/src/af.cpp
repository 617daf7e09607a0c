// See <blkcrypt/luks/af.hpp>. The diffusion hashes the block in digest-size
// pieces, piece i as H(be32(i) || piece), the last piece truncated: the
// layout cryptsetup writes, so split and merge must match it bit for bit.
#include <blkcrypt/dm/plain_key.hpp>
#include <blkcrypt/luks/af.hpp>
#include <blkcrypt/random.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/secure_buffer.hpp>
#include <blkcrypt/shash.hpp>

#include <algorithm>
#include <string>

namespace blkcrypt::luks {

namespace {

Result<void> diffuse(const Shash& h, Bytes block, SecureBuffer& scratch) {
    const std::size_t dsize = h.digestsize();
    SecureBuffer digest(dsize);
    for (std::size_t off = 0, i = 0; off < block.size(); off += dsize, ++i) {
        const std::size_t n = std::min(dsize, block.size() - off);
        scratch.resize(4 + n);
        scratch[0] = static_cast<uint8_t>(i >> 24);
        scratch[1] = static_cast<uint8_t>(i >> 16);
        scratch[2] = static_cast<uint8_t>(i >> 8);
        scratch[3] = static_cast<uint8_t>(i);
        std::copy(block.begin() + off, block.begin() + off + n, scratch.data() + 4);
        if (Status s = h.digest(scratch, digest.span()); s != Status::Ok)
            return make_error(s, "anti-forensic diffusion: " + h.info().name);
        std::copy(digest.data(), digest.data() + n, block.begin() + off);
    }
    return {};
}

Result<Shash> diffusion_hash(Registry& reg, std::string_view hash, std::size_t key_size,
                             uint32_t stripes, std::size_t area) {
    if (stripes == 0 || key_size == 0) return make_error(Status::Invalid, "empty anti-forensic split");
    if (area / stripes != key_size || area % stripes)
        return make_error(Status::Invalid, "anti-forensic area is not key size x stripes");
    // cryptsetup's names (ripemd160, whirlpool) are the registry's rmd160, wp512.
    Result<Shash> h = Shash::alloc(reg, dm::plain_hash_alg(hash));
    if (!h) return h.error();
    if (h->digestsize() == 0) return make_error(Status::Invalid, std::string(hash) + " has no digest");
    return h;
}

}  // namespace

Result<void> af_split(Registry& reg, std::string_view hash, ConstBytes key, uint32_t stripes,
                      Bytes out) {
    Result<Shash> h = diffusion_hash(reg, hash, key.size(), stripes, out.size());
    if (!h) return h.error();
    const std::size_t n = key.size();
    SecureBuffer acc(n), scratch;
    for (uint32_t s = 0; s + 1 < stripes; ++s) {
        Bytes stripe = out.subspan(s * n, n);
        if (Result<void> r = random_bytes(stripe); !r) return r;
        for (std::size_t k = 0; k < n; ++k) acc[k] ^= stripe[k];
        if (Result<void> r = diffuse(*h, acc.span(), scratch); !r) return r;
    }
    Bytes last = out.subspan(static_cast<std::size_t>(stripes - 1) * n, n);
    for (std::size_t k = 0; k < n; ++k) last[k] = acc[k] ^ key[k];
    return {};
}

Result<void> af_merge(Registry& reg, std::string_view hash, ConstBytes in, uint32_t stripes,
                      Bytes key) {
    Result<Shash> h = diffusion_hash(reg, hash, key.size(), stripes, in.size());
    if (!h) return h.error();
    const std::size_t n = key.size();
    SecureBuffer acc(n), scratch;
    for (uint32_t s = 0; s + 1 < stripes; ++s) {
        ConstBytes stripe = in.subspan(s * n, n);
        for (std::size_t k = 0; k < n; ++k) acc[k] ^= stripe[k];
        if (Result<void> r = diffuse(*h, acc.span(), scratch); !r) return r;
    }
    ConstBytes last = in.subspan(static_cast<std::size_t>(stripes - 1) * n, n);
    for (std::size_t k = 0; k < n; ++k) key[k] = acc[k] ^ last[k];
    return {};
}

}  // namespace blkcrypt::luks
