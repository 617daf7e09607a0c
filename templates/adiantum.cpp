// adiantum(S,B[,H]): the Adiantum length-preserving encryption mode (Crowley
// and Biggers, "Adiantum: length-preserving encryption for entry-level
// processors", 2018), as the kernel's crypto/adiantum.c. Android uses it for
// disk encryption on CPUs without AES instructions (dm-crypt
// "xchacha12,aes-adiantum-plain64"); the whole sector is one wide block, so
// any change of plaintext changes the whole ciphertext sector.
//
// Name: adiantum(xchacha12,aes) or adiantum(xchacha20,aes), optionally with
// the hash named: adiantum(xchacha12,aes,nhpoly1305). S is an XChaCha
// skcipher (32-byte key, 32-byte IV), B a cipher with 16-byte blocks and
// 32-byte keys, H the 16-byte-digest NHPoly1305. The instance's generic name
// is adiantum(S,B) either way, as the kernel's.
//
// Key: 32 bytes, S's key K_S. S encrypting 1136 zero bytes with IV 1 || 0...
// gives K_E (32, B's key), K_T (16, the header's Poly1305 key), K_H (1088,
// H's key). IV: the 32-byte tweak T. A message of n >= 16 bytes is the bulk
// L (n - 16 bytes) || R (16 bytes); with + and - mod 2^128 (little-endian)
// and H_T = Poly1305_{K_T}(LE128(8 * |L|) || T) (r only, no s):
//   P_M = P_R + (H_T + NH_{K_H}(P_L))
//   C_M = E_{K_E}(P_M)
//   C_L = P_L ^ XChaCha_{K_S}(nonce C_M || 1 || 0...)
//   C_R = C_M - (H_T + NH_{K_H}(C_L))
// and decryption runs it backwards. Lengths below 16 are refused; req.iv is
// left unchanged. The stream covers the bulk rounded up to 64 bytes when that
// fits in the message (the second hash step overwrites the last 16 bytes).
#include "generic/poly1305_core.hpp"

#include <blkcrypt/internal/bytes_util.hpp>
#include <blkcrypt/internal/template.hpp>
#include <blkcrypt/request.hpp>
#include <blkcrypt/secure_buffer.hpp>
#include <blkcrypt/sg.hpp>

#include <cstring>

namespace blkcrypt {
namespace {

constexpr std::size_t kBlock = 16;       // B's block, also |R|
constexpr std::size_t kBlockKey = 32;    // K_E
constexpr std::size_t kHeaderKey = 16;   // K_T
constexpr std::size_t kHashKey = 1088;   // K_H (NHPoly1305)
constexpr std::size_t kTweak = 32;       // the IV
constexpr std::size_t kStreamIv = 32;    // XChaCha: 24-byte nonce || position
constexpr std::size_t kChachaBlock = 64;
constexpr std::size_t kDerived = kBlockKey + kHeaderKey + kHashKey;

// 128-bit little-endian integers, as the kernel's le128 arithmetic.
struct Le128 {
    uint64_t lo = 0, hi = 0;
    static Le128 load(const uint8_t* p) noexcept { return {get_le64(p), get_le64(p + 8)}; }
    void store(uint8_t* p) const noexcept {
        put_le64(p, lo);
        put_le64(p + 8, hi);
    }
    Le128 operator+(Le128 o) const noexcept {
        const uint64_t l = lo + o.lo;
        return {l, hi + o.hi + (l < lo)};
    }
    Le128 operator-(Le128 o) const noexcept {
        const uint64_t l = lo - o.lo;
        return {l, hi - o.hi - (lo < o.lo)};
    }
};

class AdiantumTfm final : public SkcipherTfm {
public:
    AdiantumTfm(std::unique_ptr<SkcipherTfm> stream, bool stream_async, std::unique_ptr<CipherTfm> block,
                std::unique_ptr<ShashTfm> hash)
        : stream_(std::move(stream)), stream_async_(stream_async), block_(std::move(block)),
          hash_(std::move(hash)) {}
    ~AdiantumTfm() override { header_key_.wipe(); }

    Status setkey(ConstBytes key) override {
        if (stream_->setkey(key) != Status::Ok) return Status::Invalid;
        SecureBuffer derived(kDerived);  // zeros, enciphered in place
        uint8_t iv[kStreamIv] = {1};
        if (Status s = stream_crypt(derived.span(), iv); s != Status::Ok)
            return s;
        const uint8_t* k = derived.data();
        if (block_->setkey(ConstBytes(k, kBlockKey)) != Status::Ok) return Status::Invalid;
        header_key_.set(k + kBlockKey);
        if (hash_->setkey(ConstBytes(k + kBlockKey + kHeaderKey, kHashKey)) != Status::Ok)
            return Status::Invalid;
        return Status::Ok;
    }
    Status encrypt(SkcipherRequest& req) const override { return crypt(req, true); }
    Status decrypt(SkcipherRequest& req) const override { return crypt(req, false); }

private:
    // S over len bytes from src to dst, waiting if S is asynchronous.
    Status stream_crypt(SgList src, SgList dst, std::size_t len, uint8_t* iv) const {
        SkcipherRequest r;
        r.src = src;
        r.dst = dst;
        r.len = len;
        r.iv = Bytes(iv, kStreamIv);
        r.flags = kMayBacklog;
        CryptoWait w;
        if (stream_async_) r.complete = w.callback();
        return w.wait(stream_->encrypt(r));
    }
    Status stream_crypt(Bytes buf, uint8_t* iv) const {
        SgEntry e{buf.data(), buf.size()};
        return stream_crypt(SgList(&e, 1), SgList(&e, 1), buf.size(), iv);
    }

    // H_T: Poly1305 of LE64(bits of the bulk) || 0^8 || T.
    Le128 header_hash(std::size_t bulk, ConstBytes tweak) const {
        uint8_t blocks[kBlock + kTweak] = {};
        put_le64(blocks, static_cast<uint64_t>(bulk) * 8);
        std::memcpy(blocks + kBlock, tweak.data(), kTweak);
        generic::Poly1305Core p;
        p.init();
        p.blocks(header_key_, blocks, sizeof blocks / 16);
        uint8_t out[16];
        p.emit(out);
        p.wipe();
        return Le128::load(out);
    }

    // NHPoly1305 of the first len bytes of sg, on st (reset first).
    static Le128 bulk_hash(ShashState& st, SgList sg, std::size_t len) {
        st.init();
        for (const SgEntry& e : sg) {
            if (!len) break;
            const std::size_t n = std::min(e.len, len);
            st.update(ConstBytes(e.data, n));
            len -= n;
        }
        uint8_t out[16];
        st.final(Bytes(out, 16));
        return Le128::load(out);
    }

    Status crypt(SkcipherRequest& req, bool enc) const {
        if (req.len < kBlock) return Status::Invalid;  // checked before any output
        const std::size_t bulk = req.len - kBlock;
        const Le128 ht = header_hash(bulk, ConstBytes(req.iv.data(), kTweak));
        const auto hst = hash_->new_state();  // one per request, for both hash steps

        // First hash step: the middle block M = R + (H_T + NH(L)).
        uint8_t rbuf[kStreamIv] = {};
        sg_gather(req.src, bulk, Bytes(rbuf, kBlock));
        Le128 m = Le128::load(rbuf) + (ht + bulk_hash(*hst, req.src, bulk));
        m.store(rbuf);
        if (enc) block_->encrypt(rbuf, rbuf, 1);

        // The stream's nonce is C_M || LE32(1) || 0.
        uint8_t iv[kStreamIv] = {};
        std::memcpy(iv, rbuf, kBlock);
        iv[kBlock] = 1;
        std::size_t stream_len = bulk;
        const std::size_t rounded = (bulk + kChachaBlock - 1) / kChachaBlock * kChachaBlock;
        if (rounded <= req.len) stream_len = rounded;
        Status s = stream_crypt(req.src, req.dst, stream_len, iv);
        if (s != Status::Ok) {
            secure_wipe(rbuf, sizeof rbuf);
            return s;
        }

        // Second hash step: R = M - (H_T + NH(L')), L' the bulk just written.
        if (!enc) block_->decrypt(rbuf, rbuf, 1);
        m = Le128::load(rbuf) - (ht + bulk_hash(*hst, req.dst, bulk));
        m.store(rbuf);
        sg_scatter(req.dst, bulk, ConstBytes(rbuf, kBlock));
        secure_wipe(rbuf, sizeof rbuf);
        return Status::Ok;
    }

    std::unique_ptr<SkcipherTfm> stream_;
    bool stream_async_;
    std::unique_ptr<CipherTfm> block_;
    std::unique_ptr<ShashTfm> hash_;
    generic::Poly1305Key header_key_;
};

class AdiantumAlg final : public SkcipherAlg {
public:
    AdiantumAlg(AlgInfo info, SpawnRef<SkcipherAlg> stream, SpawnRef<CipherAlg> block, SpawnRef<ShashAlg> hash)
        : SkcipherAlg(std::move(info)), stream_(*this, std::move(stream)), block_(*this, std::move(block)),
          hash_(*this, std::move(hash)) {}
    std::unique_ptr<SkcipherTfm> create_tfm() const override {
        return std::make_unique<AdiantumTfm>(stream_.create_tfm(), stream_.info().async, block_.create_tfm(),
                                             hash_.create_tfm());
    }

private:
    Spawn<SkcipherAlg> stream_;
    Spawn<CipherAlg> block_;
    Spawn<ShashAlg> hash_;
};

class AdiantumTemplate final : public Template {
public:
    std::string_view name() const override { return "adiantum"; }

    Result<std::shared_ptr<Alg>> create(Registry& reg, const AlgName& name) const override {
        const auto& args = name.args();
        if (args.size() != 2 && args.size() != 3)
            return make_error(Status::Invalid,
                              "'" + name.str() + "': template 'adiantum' takes 2 or 3 arguments");
        auto stream = grab_spawn<SkcipherAlg>(reg, "adiantum", args[0]);
        if (!stream) return stream.error();
        auto block = grab_spawn<CipherAlg>(reg, "adiantum", args[1]);
        if (!block) return block.error();
        auto hash = args.size() == 3 ? grab_spawn<ShashAlg>(reg, "adiantum", args[2]) : default_hash(reg);
        if (!hash) return hash.error();
        const AlgInfo &s = stream->info(), &b = block->info(), &h = hash->info();
        auto bad = [](const std::string& what) { return make_error(Status::Invalid, "adiantum: " + what); };
        if (s.type != AlgType::Skcipher || s.ivsize != kStreamIv || s.blocksize != 1)
            return bad("'" + s.name + "' is not an XChaCha stream cipher with a 32-byte IV");
        if (b.blocksize != kBlock || b.min_keysize > kBlockKey || b.max_keysize < kBlockKey)
            return bad("cipher '" + b.name + "' needs 16-byte blocks and 32-byte keys");
        if (h.name != "nhpoly1305" || h.digestsize != 16)
            return bad("the hash must be nhpoly1305, not '" + h.name + "'");

        AlgInfo info;
        info.module = module;
        info.name = "adiantum(" + s.name + "," + b.name + ")";
        info.driver = "adiantum(" + s.driver + "," + b.driver + "," + h.driver + ")";
        info.priority = (4 * s.priority + 2 * b.priority + h.priority) / 7;  // the kernel's weights
        info.type = AlgType::Skcipher;
        info.async = false;  // an asynchronous S is waited for
        info.needs_key = true;
        info.blocksize = kBlock;
        info.chunksize = s.chunksize;
        info.min_keysize = s.min_keysize;
        info.max_keysize = s.max_keysize;
        info.ivsize = kTweak;
        return std::shared_ptr<Alg>(
            std::make_shared<AdiantumAlg>(std::move(info), std::move(*stream), std::move(*block), std::move(*hash)));
    }

private:
    // Two arguments: the hash is nhpoly1305, whichever driver is best.
    static Result<SpawnRef<ShashAlg>> default_hash(Registry& reg) {
        auto h = reg.lookup("nhpoly1305", AlgType::Shash);
        if (!h) return make_error(h.error().status, "adiantum: " + h.error().message);
        return spawn_ref<ShashAlg>("adiantum", std::move(h.value()));
    }
};

}  // namespace

std::shared_ptr<Template> make_adiantum_template() { return std::make_shared<AdiantumTemplate>(); }

}  // namespace blkcrypt
