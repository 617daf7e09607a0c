// PBKDF2-HMAC (RFC 8018 section 5.2) over the registry's hmac(hash).
#include <blkcrypt/kdf.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/secure_buffer.hpp>
#include <blkcrypt/shash.hpp>

#include <algorithm>
#include <string>
#include <utility>

namespace blkcrypt {

Result<void> pbkdf2(Registry& reg, std::string_view hash, ConstBytes password, ConstBytes salt,
                    uint32_t iterations, Bytes out) {
    if (iterations == 0) return make_error(Status::Invalid, "PBKDF2 needs at least one iteration");
    const std::string name = "hmac(" + std::string(hash) + ")";
    Result<Shash> mac = Shash::alloc(reg, name);
    if (!mac) return mac.error();
    if (Status s = mac->setkey(password); s != Status::Ok)
        return make_error(s, name + ": the passphrase was refused as a key");
    // One running computation reused for every iteration: no allocation
    // per HMAC (millions of them for one keyslot).
    Result<ShashDesc> desc = mac->new_desc();
    if (!desc) return desc.error();
    const std::size_t hlen = mac->digestsize();
    if (hlen == 0) return make_error(Status::Invalid, name + " has no digest");
    if (out.size() / hlen >= 0xffffffffu)
        return make_error(Status::Invalid, "PBKDF2 output too long");

    // salt || INT(block), then U_j and the running XOR T, all secret.
    SecureBuffer first(salt.size() + 4);
    std::copy(salt.begin(), salt.end(), first.data());
    // U_j alternates between two halves of one buffer (a driver may write
    // its digest before it has read all of its input, so never in place).
    SecureBuffer us(2 * hlen), t(hlen);
    uint32_t block = 1;
    for (std::size_t done = 0; done < out.size(); done += hlen, ++block) {
        uint8_t* idx = first.data() + salt.size();
        idx[0] = static_cast<uint8_t>(block >> 24);
        idx[1] = static_cast<uint8_t>(block >> 16);
        idx[2] = static_cast<uint8_t>(block >> 8);
        idx[3] = static_cast<uint8_t>(block);
        uint8_t* u = us.data();
        uint8_t* next = us.data() + hlen;
        uint8_t* acc = t.data();
        if (Status s = desc->digest(first, Bytes(u, hlen)); s != Status::Ok) return make_error(s, name);
        std::copy(u, u + hlen, acc);
        for (uint32_t j = 1; j < iterations; ++j) {
            if (Status s = desc->digest(ConstBytes(u, hlen), Bytes(next, hlen)); s != Status::Ok)
                return make_error(s, name);
            std::swap(u, next);
            for (std::size_t k = 0; k < hlen; ++k) acc[k] ^= u[k];
        }
        const std::size_t n = std::min(hlen, out.size() - done);
        std::copy(t.data(), t.data() + n, out.data() + done);
    }
    return {};
}

}  // namespace blkcrypt
