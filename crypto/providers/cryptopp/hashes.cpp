// Hashes from Crypto++ as ShashAlgs, each with export/import of its running
// state. md5, sha1 and sha2 export the kernel's structs (x86-64 layout)
// because dm-crypt's lmk IV mode and dm-verity read them.
#define CRYPTOPP_ENABLE_NAMESPACE_WEAK 1  // MD5 lives in CryptoPP::Weak
#include "cryptopp_algs.hpp"

#include <blkcrypt/secure_buffer.hpp>

#include <crypto++/blake2.h>
#include <crypto++/md5.h>
#include <crypto++/ripemd.h>
#include <crypto++/sha.h>
#include <crypto++/sha3.h>
#include <crypto++/whrlpool.h>

#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

namespace blkcrypt::cryptopp {
namespace {

using CryptoPP::word32;
using CryptoPP::word64;

// ---- Reaching members Crypto++ keeps private --------------------------------
// Import must set the byte count of an iterated hash and the whole state of
// BLAKE2, both private in Crypto++. An explicit instantiation may name
// private members ([temp.spec.general]/6), so Expose<Tag, &X::m> defines
// the friend function member(Tag) that returns the member pointer.
template <class Tag, typename Tag::type M>
struct Expose {
    friend typename Tag::type member(Tag) { return M; }
};

template <class W>
using IterBase = CryptoPP::IteratedHashBase<W, CryptoPP::HashTransformation>;

struct CountLo32 { using type = word32 IterBase<word32>::*; friend type member(CountLo32); };
struct CountHi32 { using type = word32 IterBase<word32>::*; friend type member(CountHi32); };
struct CountLo64 { using type = word64 IterBase<word64>::*; friend type member(CountLo64); };
struct CountHi64 { using type = word64 IterBase<word64>::*; friend type member(CountHi64); };
struct Blake2bSt {
    using type = CryptoPP::BLAKE2b_State CryptoPP::BLAKE2b::*;
    friend type member(Blake2bSt);
};
struct Blake2sSt {
    using type = CryptoPP::BLAKE2s_State CryptoPP::BLAKE2s::*;
    friend type member(Blake2sSt);
};
template <class H>
using Blake2St = std::conditional_t<std::is_same_v<H, CryptoPP::BLAKE2b>, Blake2bSt, Blake2sSt>;
// The word of H's state: word64 for BLAKE2b, word32 for BLAKE2s.
template <class H>
using Blake2Word = std::conditional_t<std::is_same_v<H, CryptoPP::BLAKE2b>, word64, word32>;

template struct Expose<CountLo32, &IterBase<word32>::m_countLo>;
template struct Expose<CountHi32, &IterBase<word32>::m_countHi>;
template struct Expose<CountLo64, &IterBase<word64>::m_countLo>;
template struct Expose<CountHi64, &IterBase<word64>::m_countHi>;
template struct Expose<Blake2bSt, &CryptoPP::BLAKE2b::m_state>;
template struct Expose<Blake2sSt, &CryptoPP::BLAKE2s::m_state>;

// ---- Shared scaffolding ------------------------------------------------------
// H: the Crypto++ hash, which hashes on the stack for digest(); S: the state.
template <class H, class S>
class CppHashTfm final : public ShashTfm {
public:
    std::unique_ptr<ShashState> new_state() const override { return std::make_unique<S>(); }
    void digest(ConstBytes data, Bytes out) const override {
        H h;
        h.Update(data.data(), data.size());
        h.TruncatedFinal(out.data(), out.size());
    }
};

template <class Tfm>
class CppHashAlg final : public ShashAlg {
public:
    using ShashAlg::ShashAlg;
    std::unique_ptr<ShashTfm> create_tfm() const override { return std::make_unique<Tfm>(); }
};

template <class H>
AlgInfo hash_info(const char* name, std::size_t statesize) {
    AlgInfo info = provider_info(name, AlgType::Shash);
    info.digestsize = H::DIGESTSIZE;
    info.blocksize = H::BLOCKSIZE;  // the same as the kernel's cra_blocksize for all of these
    info.statesize = statesize;
    return info;
}

// A state that runs a Crypto++ hash H directly; subclasses add export/import.
template <class H>
class CppState : public ShashState {
public:
    void init() override { h_.Restart(); }
    void update(ConstBytes data) override { h_.Update(data.data(), data.size()); }
    void final(Bytes out) override { h_.TruncatedFinal(out.data(), out.size()); }

protected:
    H h_;
};

// ---- Merkle-Damgard hashes: md5, sha1, sha2, rmd160, wp512 ------------------
// Where the kernel's struct keeps each field; words and counts are stored
// little-endian. Unused bytes (padding, the stale tail of the block) are zero.
struct MdLayout {
    std::size_t words;      // chaining words at offset 0 (u32 or u64 each)
    std::size_t count_off;  // bytes hashed: u64 (u64[2], low first, for 64-bit words)
    std::size_t block_off;  // the partial input block, raw bytes
    std::size_t size;
};

// struct md5_state    { u32 hash[4]; u32 block[16]; u64 byte_count; }
constexpr MdLayout kMd5{4, 80, 16, 88};
// struct sha1_state   { u32 state[5]; /* 4 bytes padding */ u64 count; u8 buffer[64]; }
constexpr MdLayout kSha1{5, 24, 32, 96};
// struct sha256_state { u32 state[8]; u64 count; u8 buf[64]; } (sha224 too)
constexpr MdLayout kSha256{8, 32, 40, 104};
// struct sha512_state { u64 state[8]; u64 count[2]; u8 buf[128]; } (sha384 too)
constexpr MdLayout kSha512{8, 64, 80, 208};
// Ours, shaped like the above: rmd160 as sha1_state, wp512 as sha512_state
// with a 64-byte buffer.
constexpr MdLayout kRmd160{5, 24, 32, 96};
constexpr MdLayout kWp512{8, 64, 80, 144};

// H with its protected state words and partial block in reach.
template <class H>
struct OpenMd : H {
    using W = typename H::HashWordType;
    using Count = std::conditional_t<sizeof(W) == 4, CountLo32, CountLo64>;
    using CountHi = std::conditional_t<sizeof(W) == 4, CountHi32, CountHi64>;

    W* words() { return this->m_state.data(); }
    const W* words() const { return this->m_state.data(); }
    uint8_t* block() { return reinterpret_cast<uint8_t*>(this->m_data.data()); }
    const uint8_t* block() const { return reinterpret_cast<const uint8_t*>(this->m_data.data()); }
    W& lo() { return this->*member(Count{}); }
    W& hi() { return this->*member(CountHi{}); }
    W lo() const { return this->*member(Count{}); }
    W hi() const { return this->*member(CountHi{}); }
};

template <class H, MdLayout L>
class MdState final : public CppState<OpenMd<H>> {
    using W = typename H::HashWordType;

public:
    static constexpr std::size_t kStateSize = L.size;

    void export_state(Bytes out) const override {
        const auto& h = this->h_;
        std::memset(out.data(), 0, L.size);
        for (std::size_t i = 0; i < L.words; ++i)
            put_le(out.data() + i * sizeof(W), h.words()[i]);
        // Crypto++ counts bytes in two words, low first: the kernel's u64
        // count for 32-bit words, its u64 count[2] for 64-bit ones.
        put_le(out.data() + L.count_off, h.lo());
        put_le(out.data() + L.count_off + sizeof(W), h.hi());
        std::memcpy(out.data() + L.block_off, h.block(), h.lo() % H::BLOCKSIZE);
    }

    Status import_state(ConstBytes in) override {
        const W hi = get_le<W>(in.data() + L.count_off + sizeof(W));
        // The message length in bits must fit the padding's length field.
        if (hi >> (8 * sizeof(W) - 3)) return Status::Invalid;
        auto& h = this->h_;
        for (std::size_t i = 0; i < L.words; ++i)
            h.words()[i] = get_le<W>(in.data() + i * sizeof(W));
        h.lo() = get_le<W>(in.data() + L.count_off);
        h.hi() = hi;
        std::memcpy(h.block(), in.data() + L.block_off, H::BLOCKSIZE);
        return Status::Ok;
    }
};

// One-shot digests reuse one hash object per thread: building and wiping a
// Crypto++ object per call cost about 10% at 256 bytes. TruncatedFinal
// restarts it (initial words, zero count); the block buffer, which held the
// message's tail, is wiped here.
template <class H, MdLayout L>
class MdHashTfm final : public ShashTfm {
public:
    std::unique_ptr<ShashState> new_state() const override { return std::make_unique<MdState<H, L>>(); }
    void digest(ConstBytes data, Bytes out) const override {
        thread_local OpenMd<H> h;
        h.Update(data.data(), data.size());
        h.TruncatedFinal(out.data(), out.size());
        secure_wipe(h.block(), H::BLOCKSIZE);
    }
};

// `digestsize` below H's: the digest cut to that many bytes (TruncatedFinal
// gives the prefix), as the kernel's wp384/wp256 cut wp512's.
template <class H, MdLayout L>
std::shared_ptr<Alg> md_hash(const char* name, std::size_t digestsize = H::DIGESTSIZE) {
    AlgInfo info = hash_info<H>(name, MdState<H, L>::kStateSize);
    info.digestsize = digestsize;
    return std::make_shared<CppHashAlg<MdHashTfm<H, L>>>(std::move(info));
}

// ---- SHA-3 -------------------------------------------------------------------
// Ours: { u64 st[25]; u32 partial; u32 zero; } (208 bytes): the Keccak state
// with the input absorbed so far XORed in, and how many bytes of the current
// rate block that covers (0 .. blocksize-1).
template <class H>
struct OpenSha3 : H {
    word64* lanes() { return this->m_state.data(); }
    const word64* lanes() const { return this->m_state.data(); }
    unsigned& partial() { return this->m_counter; }
    unsigned partial() const { return this->m_counter; }
};

template <class H>
class Sha3State final : public CppState<OpenSha3<H>> {
public:
    static constexpr std::size_t kStateSize = 25 * 8 + 8;

    void export_state(Bytes out) const override {
        for (std::size_t i = 0; i < 25; ++i) put_le(out.data() + 8 * i, this->h_.lanes()[i]);
        put_le<uint32_t>(out.data() + 200, this->h_.partial());
        put_le<uint32_t>(out.data() + 204, 0);
    }

    Status import_state(ConstBytes in) override {
        const uint32_t partial = get_le<uint32_t>(in.data() + 200);
        if (partial >= H::BLOCKSIZE) return Status::Invalid;
        for (std::size_t i = 0; i < 25; ++i)
            this->h_.lanes()[i] = get_le<word64>(in.data() + 8 * i);
        this->h_.partial() = partial;
        return Status::Ok;
    }
};

template <class H>
std::shared_ptr<Alg> sha3_hash(const char* name) {
    using S = Sha3State<H>;
    return std::make_shared<CppHashAlg<CppHashTfm<H, S>>>(hash_info<H>(name, S::kStateSize));
}

// ---- BLAKE2b-512 and BLAKE2s-256, optionally keyed ---------------------------
// Ours, in the field order of the kernel's struct blake2b_state / blake2s_state
// (W = u64 / u32, B = 128 / 64 bytes):
// { W h[8]; W t[2]; W f[2]; u8 buf[B]; u32 buflen; u32 outlen; } (232 / 120
// bytes). BLAKE2 keeps the last block (up to B bytes) unhashed until it knows
// whether more follows, so buflen may be B. A keyed state holds the key block
// in buf until more input arrives, as in the kernel.
template <class H>
typename H::State& state_of(H& h) { return h.*member(Blake2St<H>{}); }
template <class H>
const typename H::State& state_of(const H& h) { return h.*member(Blake2St<H>{}); }

template <class H>
class Blake2Tfm final : public ShashTfm {
public:
    // An unkeyed BLAKE2 copies without allocating, so the initial state of
    // every computation, keyed or not, is kept in one: init() and digest()
    // copy it.
    const H& initial() const { return initial_; }

    Status setkey(ConstBytes key) override {
        if (key.empty() || key.size() > H::MAX_KEYLENGTH) return Status::Invalid;
        try {
            const H keyed(key.data(), key.size());
            state_of(initial_) = state_of(keyed);
        } catch (const CryptoPP::Exception&) {
            return Status::Invalid;
        } catch (const std::bad_alloc&) {
            return Status::NoMem;
        }
        return Status::Ok;
    }

    std::unique_ptr<ShashState> new_state() const override;

    void digest(ConstBytes data, Bytes out) const override {
        H h(initial_);
        h.Update(data.data(), data.size());
        h.TruncatedFinal(out.data(), out.size());
    }

private:
    H initial_;
};

template <class H>
class Blake2State final : public CppState<H> {
    using W = Blake2Word<H>;
    static constexpr std::size_t kBuf = H::BLOCKSIZE;
    static constexpr std::size_t kLenOff = 12 * sizeof(W) + kBuf;

public:
    explicit Blake2State(const Blake2Tfm<H>& tfm) : tfm_(tfm) { init(); }

    // The key is read at init, as the kernel does.
    void init() override { state_of(this->h_) = state_of(tfm_.initial()); }

    void export_state(Bytes out) const override {
        const auto& st = state_of(this->h_);
        for (std::size_t i = 0; i < 12; ++i) put_le(out.data() + sizeof(W) * i, st.m_hft[i]);  // h, t, f
        std::memcpy(out.data() + 12 * sizeof(W), st.m_buf.data(), kBuf);
        put_le(out.data() + kLenOff, static_cast<uint32_t>(st.m_len));
        put_le(out.data() + kLenOff + 4, static_cast<uint32_t>(H::DIGESTSIZE));
    }

    Status import_state(ConstBytes in) override {
        const uint32_t buflen = get_le<uint32_t>(in.data() + kLenOff);
        const uint32_t outlen = get_le<uint32_t>(in.data() + kLenOff + 4);
        // f[] is set only by the final block; a running state has it zero.
        const bool finalised =
            get_le<W>(in.data() + 10 * sizeof(W)) || get_le<W>(in.data() + 11 * sizeof(W));
        if (buflen > kBuf || outlen != H::DIGESTSIZE || finalised) return Status::Invalid;
        auto& st = state_of(this->h_);
        for (std::size_t i = 0; i < 12; ++i) st.m_hft[i] = get_le<W>(in.data() + sizeof(W) * i);
        std::memcpy(st.m_buf.data(), in.data() + 12 * sizeof(W), kBuf);
        st.m_len = buflen;
        return Status::Ok;
    }

private:
    const Blake2Tfm<H>& tfm_;
};

template <class H>
std::unique_ptr<ShashState> Blake2Tfm<H>::new_state() const {
    return std::make_unique<Blake2State<H>>(*this);
}

template <class H>
std::shared_ptr<Alg> blake2_hash(const char* name) {
    AlgInfo info = hash_info<H>(name, 12 * sizeof(Blake2Word<H>) + H::BLOCKSIZE + 8);
    info.min_keysize = 1;  // the key is optional; setkey takes 1..MAX_KEYLENGTH bytes
    info.max_keysize = H::MAX_KEYLENGTH;
    return std::make_shared<CppHashAlg<Blake2Tfm<H>>>(std::move(info));
}

}  // namespace

std::vector<std::shared_ptr<Alg>> make_hashes() {
    namespace C = CryptoPP;
    return {
        md_hash<C::Weak::MD5, kMd5>("md5"),
        md_hash<C::SHA1, kSha1>("sha1"),
        md_hash<C::SHA224, kSha256>("sha224"),
        md_hash<C::SHA256, kSha256>("sha256"),
        md_hash<C::SHA384, kSha512>("sha384"),
        md_hash<C::SHA512, kSha512>("sha512"),
        md_hash<C::RIPEMD160, kRmd160>("rmd160"),
        md_hash<C::Whirlpool, kWp512>("wp512"),
        md_hash<C::Whirlpool, kWp512>("wp384", 48),
        md_hash<C::Whirlpool, kWp512>("wp256", 32),
        sha3_hash<C::SHA3_256>("sha3-256"),
        sha3_hash<C::SHA3_512>("sha3-512"),
        blake2_hash<C::BLAKE2b>("blake2b-512"),
        blake2_hash<C::BLAKE2s>("blake2s-256"),
    };
}

}  // namespace blkcrypt::cryptopp
