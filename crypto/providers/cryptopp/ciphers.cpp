// Block ciphers from Crypto++ as single-block CipherAlgs ("aes", "serpent",
// ...), keyed with exactly the key lengths the kernel's drivers accept.
#include "cryptopp_algs.hpp"

#include <crypto++/aes.h>
#include <crypto++/blowfish.h>
#include <crypto++/camellia.h>
#include <crypto++/cast.h>
#include <crypto++/cpu.h>
#include <crypto++/des.h>
#include <crypto++/secblock.h>
#include <crypto++/serpent.h>
#include <crypto++/sm4.h>
#include <crypto++/twofish.h>

#include <algorithm>
#include <mutex>
#include <new>
#include <type_traits>

namespace blkcrypt::cryptopp {
namespace {

// Accepted key lengths: min..max in steps of `step` bytes.
struct KeySizes {
    std::size_t min, max, step;
    bool accepts(std::size_t n) const { return n >= min && n <= max && (n - min) % step == 0; }
};

// Serpent pads a short key with a single 1 bit and zeros to 256 bits. The
// kernel takes any key of 0..32 bytes; Crypto++ only 16, 24 or 32, but pads
// those the same way, so padding here gives Crypto++ the kernel's full range.
CryptoPP::SecByteBlock serpent_full_key(ConstBytes key) {
    CryptoPP::SecByteBlock k;
    k.CleanNew(32);  // zeroed (the size constructor leaves it uninitialised)
    std::copy(key.begin(), key.end(), k.begin());
    if (key.size() < 32) k[key.size()] = 1;
    return k;
}

template <class C>
class CppCipherTfm final : public CipherTfm {
public:
    CppCipherTfm(KeySizes sizes, bool serialise) : sizes_(sizes), serialise_(serialise) {}

    Status setkey(ConstBytes key) override {
        if (!sizes_.accepts(key.size())) return Status::Invalid;
        try {
            if constexpr (std::is_same_v<C, CryptoPP::Serpent>) {
                const auto k = serpent_full_key(key);
                enc_.SetKey(k.data(), k.size());
                dec_.SetKey(k.data(), k.size());
            } else {
                enc_.SetKey(key.data(), key.size());
                dec_.SetKey(key.data(), key.size());
            }
        } catch (const CryptoPP::Exception&) {
            return Status::Invalid;
        } catch (const std::bad_alloc&) {
            return Status::NoMem;
        }
        return Status::Ok;
    }

    void encrypt(const uint8_t* in, uint8_t* out, std::size_t nblocks) const override {
        run(enc_, in, out, nblocks);
    }
    void decrypt(const uint8_t* in, uint8_t* out, std::size_t nblocks) const override {
        run(dec_, in, out, nblocks);
    }

private:
    void run(const CryptoPP::BlockTransformation& c, const uint8_t* in, uint8_t* out,
             std::size_t nblocks) const {
        if (nblocks == 0) return;
        // One call for all blocks lets AES-NI and friends work on several at once.
        const auto process = [&] {
            c.AdvancedProcessBlocks(in, nullptr, out, nblocks * C::BLOCKSIZE,
                                    CryptoPP::BlockTransformation::BT_AllowParallel);
        };
        if (serialise_) {
            std::lock_guard lock(mu_);
            process();
        } else {
            process();
        }
    }

    KeySizes sizes_;
    // Some Crypto++ ciphers use scratch space inside the keyed object
    // (mutable members), so one object must not run on two threads at once.
    bool serialise_;
    mutable std::mutex mu_;
    typename C::Encryption enc_;  // the key schedules live in Crypto++'s
    typename C::Decryption dec_;  // SecBlocks, wiped on destruction
};

template <class C>
class CppCipherAlg final : public CipherAlg {
public:
    CppCipherAlg(const char* name, KeySizes sizes, bool serialise)
        : CipherAlg(make_info(name, sizes)), sizes_(sizes), serialise_(serialise) {}

    std::unique_ptr<CipherTfm> create_tfm() const override {
        return std::make_unique<CppCipherTfm<C>>(sizes_, serialise_);
    }

private:
    static AlgInfo make_info(const char* name, KeySizes sizes) {
        AlgInfo info = provider_info(name, AlgType::Cipher);
        info.blocksize = C::BLOCKSIZE;
        info.min_keysize = sizes.min;
        info.max_keysize = sizes.max;
        info.needs_key = true;
        return info;
    }

    KeySizes sizes_;
    bool serialise_;
};

template <class C>
std::shared_ptr<Alg> cipher(const char* name, KeySizes sizes, bool serialise = false) {
    return std::make_shared<CppCipherAlg<C>>(name, sizes, serialise);
}

// TrueCrypt's Blowfish ("blowfish_le", cryptsetup's name): the standard
// cipher reading and writing its two 32-bit halves little-endian. The kernel
// has only the big-endian one, which is why cryptsetup cannot map such
// volumes; here it is the standard Blowfish with each word byte-swapped.
class BlowfishLeTfm final : public CipherTfm {
public:
    Status setkey(ConstBytes key) override { return inner_.setkey(key); }
    void encrypt(const uint8_t* in, uint8_t* out, std::size_t nblocks) const override {
        swap_words(in, out, nblocks);
        inner_.encrypt(out, out, nblocks);
        swap_words(out, out, nblocks);
    }
    void decrypt(const uint8_t* in, uint8_t* out, std::size_t nblocks) const override {
        swap_words(in, out, nblocks);
        inner_.decrypt(out, out, nblocks);
        swap_words(out, out, nblocks);
    }

private:
    static void swap_words(const uint8_t* in, uint8_t* out, std::size_t nblocks) {
        for (std::size_t w = 0; w < nblocks * 2; ++w, in += 4, out += 4) {
            const uint8_t a = in[0], b = in[1], c = in[2], d = in[3];
            out[0] = d;
            out[1] = c;
            out[2] = b;
            out[3] = a;
        }
    }
    CppCipherTfm<CryptoPP::Blowfish> inner_{{4, 56, 1}, false};
};

class BlowfishLeAlg final : public CipherAlg {
public:
    BlowfishLeAlg() : CipherAlg(make_info()) {}
    std::unique_ptr<CipherTfm> create_tfm() const override { return std::make_unique<BlowfishLeTfm>(); }

private:
    static AlgInfo make_info() {
        AlgInfo info = provider_info("blowfish_le", AlgType::Cipher);
        info.blocksize = CryptoPP::Blowfish::BLOCKSIZE;
        info.min_keysize = 4;
        info.max_keysize = 56;
        info.needs_key = true;
        return info;
    }
};

}  // namespace

std::vector<std::shared_ptr<Alg>> make_ciphers() {
    // Which ciphers keep scratch in the object (checked in Crypto++ 8.7):
    // CAST-128/256 (m_t, kappa), SM4 (m_wspace), and AES encryption when it
    // falls back from AES-NI to the SSE2 code (m_aliasBlock).
    const bool aes_scratch = !CryptoPP::HasAESNI();
    return {
        cipher<CryptoPP::AES>("aes", {16, 32, 8}, aes_scratch),
        cipher<CryptoPP::Serpent>("serpent", {0, 32, 1}),
        cipher<CryptoPP::Twofish>("twofish", {16, 32, 8}),
        cipher<CryptoPP::Camellia>("camellia", {16, 32, 8}),
        cipher<CryptoPP::CAST128>("cast5", {5, 16, 1}, true),
        cipher<CryptoPP::CAST256>("cast6", {16, 32, 4}, true),
        cipher<CryptoPP::Blowfish>("blowfish", {4, 56, 1}),
        std::make_shared<BlowfishLeAlg>(),
        // Any 24-byte key, as the kernel without CRYPTO_TFM_REQ_FORBID_WEAK_KEYS.
        cipher<CryptoPP::DES_EDE3>("des3_ede", {24, 24, 1}),
        cipher<CryptoPP::SM4>("sm4", {16, 16, 1}, true),
    };
}

}  // namespace blkcrypt::cryptopp
