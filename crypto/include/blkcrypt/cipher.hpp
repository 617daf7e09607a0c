// Cipher: a single-block cipher ("aes", "serpent", ...). Mostly for templates
// and tests; data is normally processed through an Skcipher.
#pragma once

#include <blkcrypt/alg_ref.hpp>
#include <blkcrypt/bytes.hpp>
#include <blkcrypt/status.hpp>

#include <memory>
#include <string_view>

namespace blkcrypt {

class Registry;
class CipherTfm;

class Cipher {
public:
    static Result<Cipher> alloc(Registry& reg, std::string_view name);
    Cipher(Cipher&&) noexcept;
    Cipher& operator=(Cipher&&) noexcept;
    ~Cipher();

    const AlgInfo& info() const noexcept { return ref_.info(); }
    std::size_t blocksize() const noexcept { return info().blocksize; }

    Status setkey(ConstBytes key);
    // nblocks whole blocks; in may equal out. Thread-safe after setkey.
    Status encrypt(const uint8_t* in, uint8_t* out, std::size_t nblocks = 1) const;
    Status decrypt(const uint8_t* in, uint8_t* out, std::size_t nblocks = 1) const;

private:
    Cipher(AlgRef ref, std::unique_ptr<CipherTfm> tfm);
    AlgRef ref_;
    std::unique_ptr<CipherTfm> tfm_;
    bool keyed_ = false;
};

}  // namespace blkcrypt
