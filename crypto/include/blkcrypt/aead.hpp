// Aead: authenticated encryption ("gcm(aes)", "rfc4309(ccm(aes))", ...).
// Layout as in the kernel: src = assoc || text; on encrypt dst = assoc ||
// ciphertext || tag; on decrypt src's text is ciphertext || tag and cryptlen
// counts the tag.
#pragma once

#include <blkcrypt/alg_ref.hpp>
#include <blkcrypt/bytes.hpp>
#include <blkcrypt/request.hpp>
#include <blkcrypt/sg.hpp>

#include <memory>
#include <string_view>

namespace blkcrypt {

class Registry;
class AeadTfm;

struct AeadRequest {
    SgList src;
    SgList dst;
    std::size_t assoclen = 0;
    std::size_t cryptlen = 0;  // bytes after the assoc data in src
    Bytes iv;
    unsigned flags = 0;
    Completion complete;
};

class Aead {
public:
    static Result<Aead> alloc(Registry& reg, std::string_view name);
    Aead(Aead&&) noexcept;
    Aead& operator=(Aead&&) noexcept;
    ~Aead();

    const AlgInfo& info() const noexcept { return ref_.info(); }
    std::size_t ivsize() const noexcept { return info().ivsize; }
    std::size_t authsize() const noexcept { return authsize_; }
    bool is_async() const noexcept { return info().async; }

    Status setkey(ConstBytes key);
    Status setauthsize(std::size_t n);

    Status encrypt(AeadRequest& req) const;
    Status decrypt(AeadRequest& req) const;  // BadMsg on a tag mismatch

    // Flat buffers, blocking. encrypt: out = ct || tag (in.size()+authsize);
    // decrypt: in = ct || tag, out = in.size()-authsize bytes.
    Status encrypt(ConstBytes assoc, ConstBytes in, Bytes out, Bytes iv) const;
    Status decrypt(ConstBytes assoc, ConstBytes in, Bytes out, Bytes iv) const;

private:
    Aead(AlgRef ref, std::unique_ptr<AeadTfm> tfm);
    Status check(const AeadRequest& req, bool enc) const;
    Status crypt_flat(ConstBytes assoc, ConstBytes in, Bytes out, Bytes iv, bool enc) const;
    AlgRef ref_;
    std::unique_ptr<AeadTfm> tfm_;
    std::size_t authsize_ = 0;
    bool keyed_ = false;
};

}  // namespace blkcrypt
