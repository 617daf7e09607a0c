#include <blkcrypt/dm/plain_key.hpp>

#include <blkcrypt/shash.hpp>

#include <algorithm>
#include <cstring>
#include <vector>

namespace blkcrypt::dm {

namespace {

// cryptsetup's names (its OpenSSL backend's table) where the kernel's differ.
struct Alias {
    std::string_view cryptsetup, registry;
};
constexpr Alias kAliases[] = {
    {"ripemd160", "rmd160"},       {"whirlpool", "wp512"},
    {"stribog256", "streebog256"}, {"stribog512", "streebog512"},
    {"blake2b512", "blake2b-512"}, {"blake2s256", "blake2s-256"},
};

// cryptsetup reads "N" with sscanf("%zd"); only plain decimal digits here.
bool parse_length(std::string_view s, std::size_t& out) {
    if (s.empty() || s.size() > 9) return false;
    std::size_t v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        v = v * 10 + static_cast<std::size_t>(c - '0');
    }
    out = v;
    return true;
}

// Fills out with H(pass), H("A" pass), H("AA" pass), ... (hashalot's trick
// against zero bytes in the key, kept by cryptsetup for compatibility).
Result<void> hash_rounds(Registry& reg, const std::string& alg, ConstBytes pass, Bytes out) {
    auto h = Shash::alloc(reg, alg);
    if (!h) return make_error(Status::NotFound, "hash algorithm '" + alg + "' not supported: " + h.error().message);
    auto desc = h->new_desc();
    if (!desc) return make_error(Status::Invalid, "'" + alg + "' is not an unkeyed hash");
    const std::size_t dsize = h->digestsize();
    if (dsize == 0) return make_error(Status::Invalid, "'" + alg + "' has no digest");
    SecureBuffer digest(dsize);
    static const uint8_t kA = 'A';
    std::size_t done = 0;
    for (std::size_t round = 0; done < out.size(); ++round) {
        desc->init();
        for (std::size_t i = 0; i < round; ++i) desc->update(ConstBytes(&kA, 1));
        desc->update(pass);
        const Status st = desc->final(digest.span());
        if (st != Status::Ok) return make_error(st, "hashing the passphrase with " + alg + " failed");
        const std::size_t n = std::min(dsize, out.size() - done);
        std::memcpy(out.data() + done, digest.data(), n);
        done += n;
    }
    return {};
}

}  // namespace

std::string plain_hash_alg(std::string_view name) {
    std::string lower(name);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c); });
    for (const auto& a : kAliases)
        if (lower == a.cryptsetup) return std::string(a.registry);
    return lower;
}

Result<SecureBuffer> plain_key(Registry& reg, std::optional<std::string_view> hash,
                               std::size_t key_size, ConstBytes passphrase) {
    if (key_size == 0) return make_error(Status::Invalid, "the key size is zero");
    SecureBuffer key(key_size);  // zero: the padding of short keys
    if (!hash) {
        std::memcpy(key.data(), passphrase.data(), std::min(key_size, passphrase.size()));
        return key;
    }
    std::string_view name = *hash;
    std::size_t hashed = key_size;  // bytes that come from the hash; the rest stays zero
    if (const auto colon = name.find(':'); colon != std::string_view::npos) {
        if (!parse_length(name.substr(colon + 1), hashed))
            return make_error(Status::Invalid, "hash length in '" + std::string(name) + "' is not a number");
        if (hashed > key_size)
            return make_error(Status::Invalid, "hash length " + std::to_string(hashed) + " is more than the key size " +
                                                   std::to_string(key_size) + " (bytes)");
        name = name.substr(0, colon);
    }
    if (name.empty()) return make_error(Status::Invalid, "empty hash name");
    const std::string alg = plain_hash_alg(name);
    if (alg == "plain") {
        if (passphrase.size() < hashed)
            return make_error(Status::Invalid, "the passphrase is shorter than the " + std::to_string(hashed) +
                                                   " bytes that --hash plain:" + std::to_string(hashed) + " takes");
        if (hashed) std::memcpy(key.data(), passphrase.data(), hashed);
        return key;
    }
    auto r = hash_rounds(reg, alg, passphrase, key.span().first(hashed));
    if (!r) return r.error();
    return key;
}

}  // namespace blkcrypt::dm
