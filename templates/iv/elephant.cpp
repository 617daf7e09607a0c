// elephant(X): BitLocker's AES-CBC + Elephant diffuser (dm-crypt's
// "elephant", crypt_iv_elephant*, diffuser_a/b_*).
//
// Key = [bulk key || sector key Ks], halves (key_extra_size = key_size / 2,
// at most 32 bytes); the bulk half goes to X (split into key_count keys as
// usual), Ks programs an AES block cipher. As in the kernel, which allocates
// "ecb(aes)" for Ks whatever X is, the sector-key cipher is always "aes".
//   IV          = eboiv: X_K0(zero block, IV = LE64(iv_sector * sector_size))
//   sector key  = ks[0..16) = AES_Ks(e), ks[16..32) = AES_Ks(e with e[15] = 0x80),
//                 e = LE64(iv_sector * sector_size) zero padded to 16 bytes
// Write: copy the plaintext to dst, XOR ks into every 32 bytes, diffuser A
// encrypt, diffuser B encrypt (on little-endian u32 words), then CBC in place.
// Read: CBC-decrypt, then diffuser B decrypt, A decrypt, XOR ks.
#include <blkcrypt/internal/geniv.hpp>

#include <blkcrypt/secure_buffer.hpp>

#include <cstring>

namespace blkcrypt {

Result<void> eboiv_check_inner(std::string_view tmpl, const AlgInfo& in);  // eboiv.cpp

namespace {

constexpr std::size_t kMaxSector = 4096;
constexpr std::size_t kMaxKey = 32;    // ELEPHANT_MAX_KEY_SIZE

uint32_t rotl(uint32_t x, int r) { return x << r | x >> (32 - r); }

// The diffusers of drivers/md/dm-crypt.c, index for index.
void diffuser_a_decrypt(uint32_t* d, int n) {
    for (int i = 0; i < 5; i++) {
        int i1 = 0, i2 = n - 2, i3 = n - 5;
        while (i1 < n - 1) {
            d[i1] += d[i2] ^ rotl(d[i3], 9);
            i1++; i2++; i3++;
            if (i3 >= n) i3 -= n;
            d[i1] += d[i2] ^ d[i3];
            i1++; i2++; i3++;
            if (i2 >= n) i2 -= n;
            d[i1] += d[i2] ^ rotl(d[i3], 13);
            i1++; i2++; i3++;
            d[i1] += d[i2] ^ d[i3];
            i1++; i2++; i3++;
        }
    }
}

void diffuser_a_encrypt(uint32_t* d, int n) {
    for (int i = 0; i < 5; i++) {
        int i1 = n - 1, i2 = n - 2 - 1, i3 = n - 5 - 1;
        while (i1 > 0) {
            d[i1] -= d[i2] ^ d[i3];
            i1--; i2--; i3--;
            d[i1] -= d[i2] ^ rotl(d[i3], 13);
            i1--; i2--; i3--;
            if (i2 < 0) i2 += n;
            d[i1] -= d[i2] ^ d[i3];
            i1--; i2--; i3--;
            if (i3 < 0) i3 += n;
            d[i1] -= d[i2] ^ rotl(d[i3], 9);
            i1--; i2--; i3--;
        }
    }
}

void diffuser_b_decrypt(uint32_t* d, int n) {
    for (int i = 0; i < 3; i++) {
        int i1 = 0, i2 = 2, i3 = 5;
        while (i1 < n - 1) {
            d[i1] += d[i2] ^ d[i3];
            i1++; i2++; i3++;
            d[i1] += d[i2] ^ rotl(d[i3], 10);
            i1++; i2++; i3++;
            if (i2 >= n) i2 -= n;
            d[i1] += d[i2] ^ d[i3];
            i1++; i2++; i3++;
            if (i3 >= n) i3 -= n;
            d[i1] += d[i2] ^ rotl(d[i3], 25);
            i1++; i2++; i3++;
        }
    }
}

void diffuser_b_encrypt(uint32_t* d, int n) {
    for (int i = 0; i < 3; i++) {
        int i1 = n - 1, i2 = 2 - 1, i3 = 5 - 1;
        while (i1 > 0) {
            d[i1] -= d[i2] ^ rotl(d[i3], 25);
            i1--; i2--; i3--;
            if (i3 < 0) i3 += n;
            d[i1] -= d[i2] ^ d[i3];
            i1--; i2--; i3--;
            if (i2 < 0) i2 += n;
            d[i1] -= d[i2] ^ rotl(d[i3], 10);
            i1--; i2--; i3--;
            d[i1] -= d[i2] ^ d[i3];
            i1--; i2--; i3--;
        }
    }
}

class ElephantTfm final : public GenivTfm {
public:
    ElephantTfm(std::shared_ptr<const Alg> inner, const Alg& aes)
        : GenivTfm(std::move(inner)), aes_(create_cipher_tfm(aes)) {}

private:
    std::size_t extra_key_size(std::size_t key_len) const override { return key_len / 2; }

    Status set_extra_key(ConstBytes extra) override {
        if (extra.empty() || extra.size() > kMaxKey) return Status::Invalid;
        return aes_->setkey(extra);
    }

    // The 32-byte sector key stream of the unit.
    void sector_key(const GenivUnit& u, uint8_t ks[32]) const {
        uint8_t es[16] = {};
        put_le64(es, u.iv_sector * params().sector_size);
        aes_->encrypt(es, ks, 1);
        es[15] = 0x80;
        aes_->encrypt(es, ks + 16, 1);
        secure_wipe(es, sizeof es);
    }

    // Elephant on the unit's bytes: write (XOR, A, B) or read (B^-1, A^-1, XOR).
    void elephant(const GenivUnit& u, uint8_t* data) const {
        const std::size_t ss = u.size;
        const int n = static_cast<int>(ss / 4);
        uint8_t ks[32];
        uint32_t d[kMaxSector / 4];
        sector_key(u, ks);
        auto xor_ks = [&] {
            for (std::size_t off = 0; off < ss; off += 32)
                for (std::size_t i = 0; i < 32; ++i) data[off + i] ^= ks[i];
        };
        auto load = [&] {
            for (int i = 0; i < n; ++i)
                d[i] = uint32_t(data[4 * i]) | uint32_t(data[4 * i + 1]) << 8 |
                       uint32_t(data[4 * i + 2]) << 16 | uint32_t(data[4 * i + 3]) << 24;
        };
        auto store = [&] {
            for (int i = 0; i < n; ++i)
                for (int b = 0; b < 4; ++b) data[4 * i + b] = static_cast<uint8_t>(d[i] >> (8 * b));
        };
        if (u.enc) {
            xor_ks();
            load();
            diffuser_a_encrypt(d, n);
            diffuser_b_encrypt(d, n);
            store();
        } else {
            load();
            diffuser_b_decrypt(d, n);
            diffuser_a_decrypt(d, n);
            store();
            xor_ks();
        }
        secure_wipe(d, sizeof d);
        secure_wipe(ks, sizeof ks);
    }

    Status pre(GenivUnit& u) const override {
        if (u.enc) {
            // The source stays as it is: the diffused copy goes to dst, and
            // the cipher then runs in place there (CRYPT_ENCRYPT_PREPROCESS).
            uint8_t buf[kMaxSector];
            sg_gather(u.src, 0, Bytes(buf, u.size));
            elephant(u, buf);
            sg_scatter(u.dst, 0, ConstBytes(buf, u.size));
            secure_wipe(buf, u.size);
            u.src = u.dst;
        }
        // IV = eboiv, with the first bulk key (any_tfm(cc)).
        const std::size_t bs = inner_ivsize();
        uint8_t zero[kGenivMaxIv] = {}, off[kGenivMaxIv] = {};
        put_le64(off, u.iv_sector * params().sector_size);
        return inner_crypt(0, ConstBytes(zero, bs), u.iv.first(bs), Bytes(off, bs), true);
    }

    Status post(GenivUnit& u) const override {
        if (u.enc) return Status::Ok;
        uint8_t buf[kMaxSector];
        sg_gather(u.dst, 0, Bytes(buf, u.size));
        elephant(u, buf);
        sg_scatter(u.dst, 0, ConstBytes(buf, u.size));
        secure_wipe(buf, u.size);
        return Status::Ok;
    }

    std::unique_ptr<CipherTfm> aes_;
};

}  // namespace

std::shared_ptr<Template> make_elephant_template() {
    auto prepare = [](Registry& reg, const Alg& inner, std::vector<std::shared_ptr<const Alg>>& spawns)
        -> Result<GenivTemplate::MakeTfm> {
        if (auto r = eboiv_check_inner("elephant", inner.info()); !r) return r.error();
        auto aes_name = AlgName::parse("aes");
        if (!aes_name) return aes_name.error();
        auto aes = grab_spawn(reg, "elephant", *aes_name, AlgType::Cipher);
        if (!aes) return aes.error();
        const AlgInfo& c = (*aes)->info();
        if (c.type != AlgType::Cipher || c.blocksize != 16)
            return make_error(Status::Invalid, "elephant: '" + c.driver + "' is not a 16-byte block cipher");
        spawns.push_back(*aes);
        std::shared_ptr<const Alg> cipher = *aes;
        return GenivTemplate::MakeTfm([cipher](std::shared_ptr<const Alg> in) {
            return std::make_unique<ElephantTfm>(std::move(in), *cipher);
        });
    };
    return std::make_shared<GenivTemplate>("elephant", prepare);
}

}  // namespace blkcrypt
