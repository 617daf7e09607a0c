// Plugin "sm3": the SM3 hash (GB/T 32905-2016, ISO/IEC 10118-3) as the
// shash driver "sm3-plugin", with its own known-answer vectors. SM3 gives
// 32 bytes, so it also serves dm-crypt's ESSIV with AES-256
// (aes-cbc-essiv:sm3) and dm-verity (--hash sm3).
//
// The exported state uses the kernel's struct sm3_state layout: eight
// native-endian u32 chaining words, a u64 byte count, the 64-byte buffer.
#include <blkcrypt/internal/bytes_util.hpp>
#include <blkcrypt/internal/alg.hpp>
#include <blkcrypt/plugin.hpp>

#include <array>
#include <bit>
#include <cstring>

namespace {

using namespace blkcrypt;

constexpr std::size_t kBlock = 64, kDigest = 32, kStateSize = 32 + 8 + kBlock;
constexpr std::array<uint32_t, 8> kIv = {0x7380166f, 0x4914b2b9, 0x172442d7, 0xda8a0600,
                                         0xa96f30bc, 0x163138aa, 0xe38dee4d, 0xb0fb0e4e};

uint32_t p0(uint32_t x) { return x ^ std::rotl(x, 9) ^ std::rotl(x, 17); }
uint32_t p1(uint32_t x) { return x ^ std::rotl(x, 15) ^ std::rotl(x, 23); }

void compress(std::array<uint32_t, 8>& v, const uint8_t* block) {
    uint32_t w[68], w1[64];
    for (int j = 0; j < 16; ++j) w[j] = get_be32(block + 4 * j);
    for (int j = 16; j < 68; ++j)
        w[j] = p1(w[j - 16] ^ w[j - 9] ^ std::rotl(w[j - 3], 15)) ^ std::rotl(w[j - 13], 7) ^ w[j - 6];
    for (int j = 0; j < 64; ++j) w1[j] = w[j] ^ w[j + 4];
    uint32_t a = v[0], b = v[1], c = v[2], d = v[3], e = v[4], f = v[5], g = v[6], h = v[7];
    for (int j = 0; j < 64; ++j) {
        const uint32_t t = j < 16 ? 0x79cc4519u : 0x7a879d8au;
        const uint32_t ss1 = std::rotl(std::rotl(a, 12) + e + std::rotl(t, j % 32), 7);
        const uint32_t ss2 = ss1 ^ std::rotl(a, 12);
        const uint32_t ff = j < 16 ? a ^ b ^ c : (a & b) | (a & c) | (b & c);
        const uint32_t gg = j < 16 ? e ^ f ^ g : (e & f) | (~e & g);
        const uint32_t tt1 = ff + d + ss2 + w1[j];
        const uint32_t tt2 = gg + h + ss1 + w[j];
        d = c;
        c = std::rotl(b, 9);
        b = a;
        a = tt1;
        h = g;
        g = std::rotl(f, 19);
        f = e;
        e = p0(tt2);
    }
    v[0] ^= a, v[1] ^= b, v[2] ^= c, v[3] ^= d, v[4] ^= e, v[5] ^= f, v[6] ^= g, v[7] ^= h;
}

class Sm3State final : public ShashState {
public:
    void init() override {
        v_ = kIv;
        count_ = 0;
    }
    void update(ConstBytes data) override {
        if (data.empty()) return;  // (its pointer may be null)
        std::size_t used = count_ % kBlock;
        count_ += data.size();
        const uint8_t* p = data.data();
        std::size_t n = data.size();
        if (used) {
            const std::size_t take = std::min(n, kBlock - used);
            std::memcpy(buf_.data() + used, p, take);
            p += take, n -= take, used += take;
            if (used < kBlock) return;
            compress(v_, buf_.data());
        }
        for (; n >= kBlock; p += kBlock, n -= kBlock) compress(v_, p);
        if (n) std::memcpy(buf_.data(), p, n);  // p may be null when n is 0
    }
    void final(Bytes out) override {
        const uint64_t bits = count_ * 8;
        uint8_t pad[kBlock * 2] = {0x80};
        const std::size_t used = count_ % kBlock;
        const std::size_t padlen = (used < 56 ? 56 : 120) - used;
        update(ConstBytes(pad, padlen));
        uint8_t len[8];
        for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(bits >> (56 - 8 * i));
        update(ConstBytes(len, 8));
        for (std::size_t i = 0; i < 8; ++i)
            for (int k = 0; k < 4; ++k) out[4 * i + k] = static_cast<uint8_t>(v_[i] >> (24 - 8 * k));
    }
    void export_state(Bytes out) const override {
        std::memcpy(out.data(), v_.data(), 32);
        std::memcpy(out.data() + 32, &count_, 8);
        const std::size_t used = count_ % kBlock;  // the rest zero, like the kernel's
        std::memcpy(out.data() + 40, buf_.data(), used);
        std::memset(out.data() + 40 + used, 0, kBlock - used);
    }
    Status import_state(ConstBytes in) override {
        uint64_t count;
        std::memcpy(&count, in.data() + 32, 8);
        if (count >> 61) return Status::Invalid;  // its bit length would not fit the padding
        count_ = count;
        std::memcpy(v_.data(), in.data(), 32);
        std::memcpy(buf_.data(), in.data() + 40, kBlock);
        return Status::Ok;
    }

private:
    std::array<uint32_t, 8> v_ = kIv;
    uint64_t count_ = 0;
    std::array<uint8_t, kBlock> buf_{};
};

class Sm3Tfm final : public ShashTfm {
public:
    std::unique_ptr<ShashState> new_state() const override { return std::make_unique<Sm3State>(); }
};

class Sm3Alg final : public ShashAlg {
public:
    Sm3Alg() : ShashAlg(info()) {}
    std::unique_ptr<ShashTfm> create_tfm() const override { return std::make_unique<Sm3Tfm>(); }

private:
    static AlgInfo info() {
        AlgInfo i;
        i.name = "sm3";
        i.driver = "sm3-plugin";
        i.priority = 100;
        i.type = AlgType::Shash;
        i.blocksize = kBlock;
        i.digestsize = kDigest;
        i.statesize = kStateSize;
        return i;
    }
};

// GB/T 32905-2016 appendix A examples 1 and 2, and longer messages checked
// with OpenSSL's SM3 (python3 hashlib.new("sm3")).
constexpr const char kVectors[] = R"(# Source: GB/T 32905-2016 Appendix A (examples 1, 2); others cross-checked with OpenSSL SM3
[sm3]
msg    = "abc"
digest = 66c7f0f462eeedd9d1f2d46bdc10e4e24167c4875cf2f7a2297da02b8f4ba8e0

msg    = "abcd"
repeat = 16
digest = debe9ff92275b8a138604889c18e5a4d6fdb70e5387e5765293dcba39c0c5732

msg    = ""
digest = 1ab21d8355cfa17f8e61194831e81a8f22bec8c728fefb747ed035eb5082aa2b

msg    = "a"
repeat = 1000
digest = f4bedca973227d45c5b822551d2e762d4cfb0e9af70b241452545727b5fb046f

msg    = 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9fa0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebfc0c1c2c3c4c5c6c7
digest = 137c8be9a568df1f999ea75e042359e582990c708027d61f20489a368bf5ced5
)";

int init(void* host_ptr) {
    auto& host = *static_cast<PluginHost*>(host_ptr);
    host.add_vectors(kVectors, "plugins/sm3/sm3.cpp");
    host.add_alg(std::make_shared<Sm3Alg>());
    return 0;
}

constexpr blkcrypt_plugin kPlugin = {BLKCRYPT_PLUGIN_ABI_VERSION, "sm3",
                                     "SM3 hash (GB/T 32905) as sm3-plugin", init};

}  // namespace

extern "C" const blkcrypt_plugin* blkcrypt_plugin_entry(void) { return &kPlugin; }
