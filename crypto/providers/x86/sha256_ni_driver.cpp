// "sha256-ni": SHA-256 on the x86 SHA extensions, registered only when the
// CPU has them. Its finup_mb, which the verity engines call on batches of
// equal-length blocks, hashes sixteen messages at a time in the lanes of
// AVX-512 registers when the CPU and OS have AVX-512 (about 1.8x the
// throughput per core of 2-way SHA-NI on Sapphire Rapids), and what remains
// two at a time with SHA-NI, interleaved (the kernel's 2-way SHA-256 for
// dm-verity, 2025). Exported state: the kernel's struct sha256_state
// (u32 state[8], u64 count, u8 buf[64]), interchangeable with the other
// sha256 drivers.
#include "cpu.hpp"
#include "sha256_ni.hpp"
#include "sha256_x16.hpp"

#include <blkcrypt/internal/bytes_util.hpp>
#include <blkcrypt/internal/alg.hpp>
#include <blkcrypt/internal/bytes_util.hpp>

#include <algorithm>
#include <array>
#include <cstring>

namespace blkcrypt {

namespace {

constexpr std::size_t kBlock = 64, kDigest = 32, kStateSize = 32 + 8 + kBlock;
constexpr uint32_t kIv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                             0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

struct Sha256 {
    uint32_t v[8];
    uint64_t count = 0;  // bytes absorbed
    uint8_t buf[kBlock];
};

// memcpy that accepts the null pointer of an empty span.
void copy(uint8_t* dst, const uint8_t* src, std::size_t n) {
    if (n) std::memcpy(dst, src, n);
}

void put_digest(const uint32_t v[8], uint8_t* out) {
    for (int i = 0; i < 8; ++i)
        for (int k = 0; k < 4; ++k) out[4 * i + k] = static_cast<uint8_t>(v[i] >> (24 - 8 * k));
}

// Completes the final block(s) of a message total bytes long whose unhashed
// tail is already in out[0..n), n < 64: 0x80, zeros, and the bit length.
// Returns the block count (1 or 2).
std::size_t pad(uint8_t out[2 * kBlock], std::size_t n, uint64_t total) {
    const std::size_t blocks = n < 56 ? 1 : 2;
    out[n] = 0x80;
    std::memset(out + n + 1, 0, blocks * kBlock - n - 1);
    const uint64_t bits = total * 8;
    put_be64(out + blocks * kBlock - 8, bits);
    return blocks;
}

// nblocks 64-byte blocks of each of N messages, p[k] into state v[k], with
// the widest compression function for N.
template <std::size_t N>
void compress(uint32_t (&v)[N][8], const uint8_t* const (&p)[N], std::size_t nblocks) {
    if constexpr (N == 1) {
        x86::sha256_ni_blocks(v[0], p[0], nblocks);
    } else if constexpr (N == 2) {
        x86::sha256_ni_blocks2(v[0], v[1], p[0], p[1], nblocks);
    } else {
        static_assert(N == 16);
        x86::sha256_x16_blocks(v, p, nblocks);
    }
}

class NiState final : public ShashState {
public:
    void init() override {
        std::memcpy(s_.v, kIv, sizeof kIv);
        s_.count = 0;
    }
    void update(ConstBytes data) override {
        if (data.empty()) return;  // (its pointer may be null)
        std::size_t used = s_.count % kBlock;
        s_.count += data.size();
        const uint8_t* p = data.data();
        std::size_t n = data.size();
        if (used) {
            const std::size_t take = std::min(n, kBlock - used);
            copy(s_.buf + used, p, take);
            p += take, n -= take;
            if (used + take < kBlock) return;
            x86::sha256_ni_blocks(s_.v, s_.buf, 1);
        }
        if (n >= kBlock) x86::sha256_ni_blocks(s_.v, p, n / kBlock);
        copy(s_.buf, p + n / kBlock * kBlock, n % kBlock);
    }
    void final(Bytes out) override {
        uint8_t last[2 * kBlock];
        const std::size_t used = s_.count % kBlock;
        copy(last, s_.buf, used);
        x86::sha256_ni_blocks(s_.v, last, pad(last, used, s_.count));
        put_digest(s_.v, out.data());
    }
    void export_state(Bytes out) const override {
        std::memcpy(out.data(), s_.v, 32);
        std::memcpy(out.data() + 32, &s_.count, 8);
        // Only the buffered bytes; the rest zero, as the other drivers export it.
        const std::size_t used = s_.count % kBlock;
        std::memcpy(out.data() + 40, s_.buf, used);
        std::memset(out.data() + 40 + used, 0, kBlock - used);
    }
    Status import_state(ConstBytes in) override {
        uint64_t count;
        std::memcpy(&count, in.data() + 32, 8);
        if (count >> 61) return Status::Invalid;  // its bit length would not fit the padding
        s_.count = count;
        std::memcpy(s_.v, in.data(), 32);
        std::memcpy(s_.buf, in.data() + 40, kBlock);
        return Status::Ok;
    }

    bool finup_mb(const ConstBytes* data, const Bytes* out, std::size_t n) override {
        std::size_t i = 0;
        if (x86::have_avx512())
            for (; n - i >= 16; i += 16) finup_n<16>(data + i, out + i);
        for (; n - i >= 2; i += 2) finup_n<2>(data + i, out + i);
        if (i < n) finup_n<1>(data + i, out + i);
        return true;
    }
    unsigned mb_width() const noexcept override { return x86::have_avx512() ? 16 : 2; }
    // Two-block messages (BitLocker's 88 bytes) with the chaining value kept
    // in registers; others round by round in ShashDesc.
    bool chain(Bytes msg, uint64_t rounds) override {
        if (msg.size() < 72 || msg.size() > 119) return false;
        x86::sha256_ni_chain(msg.data(), msg.size(), rounds);
        return true;
    }

private:
    // N equal-length messages msg[0..N) from this state, which is left as it
    // was, their blocks compressed together.
    template <std::size_t N>
    void finup_n(const ConstBytes* msg, const Bytes* out) const {
        uint32_t v[N][8];
        for (auto& vk : v) std::memcpy(vk, s_.v, 32);
        const std::size_t used = s_.count % kBlock, len = msg[0].size();
        uint8_t last[N][2 * kBlock];  // each lane's block built around the buffer
        const uint8_t* p[N];
        std::size_t off = 0;  // message bytes hashed
        if (used && used + len >= kBlock) {  // the buffered prefix completes a block
            off = kBlock - used;
            for (std::size_t k = 0; k < N; ++k) {
                copy(last[k], s_.buf, used), copy(last[k] + used, msg[k].data(), off);
                p[k] = last[k];
            }
            compress<N>(v, p, 1);
        }
        if (const std::size_t whole = (len - off) / kBlock) {
            for (std::size_t k = 0; k < N; ++k) p[k] = msg[k].data() + off;
            compress<N>(v, p, whole);
            off += whole * kBlock;
        }
        // The tail: the buffered prefix if no block took it, the rest of the
        // message, the padding.
        const std::size_t head = off ? 0 : used, n = head + len - off;
        std::size_t blocks = 0;
        for (std::size_t k = 0; k < N; ++k) {
            copy(last[k], s_.buf, head), copy(last[k] + head, msg[k].data() + off, len - off);
            blocks = pad(last[k], n, s_.count + len);
            p[k] = last[k];
        }
        compress<N>(v, p, blocks);
        for (std::size_t k = 0; k < N; ++k) put_digest(v[k], out[k].data());
    }

    Sha256 s_{{}, 0, {}};
};

class NiTfm final : public ShashTfm {
public:
    std::unique_ptr<ShashState> new_state() const override { return std::make_unique<NiState>(); }
    void digest(ConstBytes data, Bytes out) const override {
        NiState st;
        st.init();
        st.finup(data, out);
    }
};

class Sha256NiAlg final : public ShashAlg {
public:
    Sha256NiAlg() : ShashAlg(make_info()) {}
    std::unique_ptr<ShashTfm> create_tfm() const override { return std::make_unique<NiTfm>(); }

private:
    static AlgInfo make_info() {
        AlgInfo i;
        i.name = "sha256";
        i.driver = "sha256-ni";
        i.module = "x86";
        i.priority = 400;  // above OpenSSL's 300: same single-buffer speed, plus multi-buffer finup_mb
        i.type = AlgType::Shash;
        i.blocksize = kBlock;
        i.digestsize = kDigest;
        i.statesize = kStateSize;
        return i;
    }
};

}  // namespace

// Called by register_x86_provider (provider.cpp).
Result<void> register_sha256_ni(Registry& reg) {
    if (!x86::have_sha_ni()) return {};
    return reg.register_alg(std::make_shared<Sha256NiAlg>());
}

}  // namespace blkcrypt
