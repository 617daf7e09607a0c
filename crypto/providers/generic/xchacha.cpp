// XChaCha12 and XChaCha20 as skciphers, as the kernel's crypto/chacha_generic.c
// defines them (Adiantum's stream ciphers):
//   key  32 bytes
//   iv   32 bytes = 24-byte nonce || 64-bit little-endian stream position
// HChaCha (the ChaCha permutation without the feed-forward, keyed by the key
// and the first 16 nonce bytes) derives a subkey; ChaCha with that subkey
// then runs with state words 12..15 = the position's two words and the last
// 8 nonce bytes. Like the kernel, only word 12 counts blocks (it wraps
// without carrying into word 13). Encryption and decryption are the same
// XOR with the keystream; any length; req.iv is left unchanged.
//
// Drivers xchacha12-generic and xchacha20-generic, priority 100.
#include "generic/generic.hpp"

#include <blkcrypt/internal/alg.hpp>
#include <blkcrypt/internal/bytes_util.hpp>
#include <blkcrypt/internal/walk.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include <bit>
#include <cstring>

namespace blkcrypt {
namespace {

constexpr std::size_t kKey = 32, kIv = 32, kBlock = 64;

inline void quarter(uint32_t* x, int a, int b, int c, int d) noexcept {
    x[a] += x[b]; x[d] = std::rotl(x[d] ^ x[a], 16);
    x[c] += x[d]; x[b] = std::rotl(x[b] ^ x[c], 12);
    x[a] += x[b]; x[d] = std::rotl(x[d] ^ x[a], 8);
    x[c] += x[d]; x[b] = std::rotl(x[b] ^ x[c], 7);
}

void permute(uint32_t* x, int rounds) noexcept {
    for (int i = 0; i < rounds; i += 2) {
        quarter(x, 0, 4, 8, 12);
        quarter(x, 1, 5, 9, 13);
        quarter(x, 2, 6, 10, 14);
        quarter(x, 3, 7, 11, 15);
        quarter(x, 0, 5, 10, 15);
        quarter(x, 1, 6, 11, 12);
        quarter(x, 2, 7, 8, 13);
        quarter(x, 3, 4, 9, 14);
    }
}

// "expand 32-byte k", then 8 key words.
void init_state(uint32_t* s, const uint32_t* key) noexcept {
    s[0] = 0x61707865;
    s[1] = 0x3320646e;
    s[2] = 0x79622d32;
    s[3] = 0x6b206574;
    std::memcpy(s + 4, key, 8 * sizeof(uint32_t));
}

class XchachaTfm final : public SkcipherTfm {
public:
    explicit XchachaTfm(int rounds) : rounds_(rounds) {}
    ~XchachaTfm() override { secure_wipe(key_, sizeof key_); }

    Status setkey(ConstBytes key) override {
        if (key.size() != kKey) return Status::Invalid;
        for (int i = 0; i < 8; ++i) key_[i] = get_le32(key.data() + 4 * i);
        return Status::Ok;
    }
    Status encrypt(SkcipherRequest& req) const override { return crypt(req); }
    Status decrypt(SkcipherRequest& req) const override { return crypt(req); }

private:
    Status crypt(SkcipherRequest& req) const {
        const uint8_t* iv = req.iv.data();
        uint32_t st[16], x[16];
        // HChaCha: the subkey is words 0..3 and 12..15 of the permuted state.
        init_state(x, key_);
        for (int i = 0; i < 4; ++i) x[12 + i] = get_le32(iv + 4 * i);
        permute(x, rounds_);
        uint32_t sub[8];
        std::memcpy(sub, x, 16);
        std::memcpy(sub + 4, x + 12, 16);
        init_state(st, sub);
        st[12] = get_le32(iv + 24);
        st[13] = get_le32(iv + 28);
        st[14] = get_le32(iv + 16);
        st[15] = get_le32(iv + 20);

        uint8_t ks[kBlock];
        for (SgWalk w(req.src, req.dst, req.len, kBlock); w.next(); w.done()) {
            const uint8_t* in = w.in();
            uint8_t* out = w.out();
            for (std::size_t done = 0; done < w.len(); done += kBlock) {
                std::memcpy(x, st, sizeof x);
                permute(x, rounds_);
                for (int i = 0; i < 16; ++i) put_le32(ks + 4 * i, x[i] + st[i]);
                ++st[12];
                const std::size_t n = std::min(kBlock, w.len() - done);
                for (std::size_t i = 0; i < n; ++i) out[done + i] = in[done + i] ^ ks[i];
            }
        }
        secure_wipe(ks, sizeof ks);
        secure_wipe(st, sizeof st);
        secure_wipe(x, sizeof x);
        secure_wipe(sub, sizeof sub);
        return Status::Ok;
    }

    int rounds_;
    uint32_t key_[8] = {};
};

class XchachaAlg final : public SkcipherAlg {
public:
    XchachaAlg(AlgInfo info, int rounds) : SkcipherAlg(std::move(info)), rounds_(rounds) {}
    std::unique_ptr<SkcipherTfm> create_tfm() const override { return std::make_unique<XchachaTfm>(rounds_); }

private:
    int rounds_;
};

AlgInfo xchacha_info(const std::string& name) {
    AlgInfo i = generic::provider_info(name, name + "-generic", AlgType::Skcipher);
    i.needs_key = true;
    i.blocksize = 1;  // a stream cipher
    i.min_keysize = i.max_keysize = kKey;
    i.ivsize = kIv;
    i.chunksize = kBlock;
    return i;
}

}  // namespace

Result<void> register_generic_xchacha(Registry& reg) {
    const std::shared_ptr<Alg> algs[] = {std::make_shared<XchachaAlg>(xchacha_info("xchacha12"), 12),
                                         std::make_shared<XchachaAlg>(xchacha_info("xchacha20"), 20)};
    return reg.register_algs(algs);
}

}  // namespace blkcrypt
