// The encrypted journal: see journal_crypt.hpp.
#include <blkcrypt/integrity/journal_crypt.hpp>

#include <blkcrypt/integrity/journal.hpp>
#include <blkcrypt/secure_buffer.hpp>
#include <blkcrypt/skcipher.hpp>

#include "journal_internal.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

namespace blkcrypt::integrity {

std::string journal_crypt_kernel_name(std::string_view name) {
    const auto dash = name.find('-');
    if (name.find('(') != std::string_view::npos || dash == std::string_view::npos) return std::string(name);
    return std::string(name.substr(0, dash)) + "(" + std::string(name.substr(dash + 1)) + ")";
}

namespace {

constexpr uint64_t kPage = 4096;

uint64_t section_bytes(const Geometry& g) noexcept { return uint64_t(g.journal_section_sectors) * kSectorSize; }

class JournalCryptImpl final : public JournalCrypt {
public:
    JournalCryptImpl(Skcipher tfm, const Geometry& g) : tfm_(std::move(tfm)), g_(g) {
        for (unsigned k = 0; k < kCommitSeqs; ++k) bases_[k] = commit_id(0, 0, k);
    }

    // create_journal, block size 1: the keystream and the commit-id bases.
    Result<void> init_stream() {
        const uint64_t sectors = uint64_t(g_.journal_sections) * g_.journal_section_sectors;
        const uint64_t pages = (sectors * kSectorSize + kPage - 1) / kPage;
        const uint64_t len = pages * kPage + 8 * kCommitSeqs;
        if (len > (uint64_t(1) << 31)) return make_error(Status::Invalid, "journal_crypt: the journal is too large");
        SecureBuffer buf(static_cast<std::size_t>(len));  // zeros, then the bases
        for (unsigned k = 0; k < kCommitSeqs; ++k)
            detail::put_le64(buf.data() + pages * kPage + 8 * k, bases_[k]);
        SecureBuffer iv(tfm_.ivsize());
        if (Status s = tfm_.encrypt(ConstBytes(buf.data(), buf.size()), Bytes(buf.data(), buf.size()),
                                    Bytes(iv.data(), iv.size()));
            s != Status::Ok)
            return make_error(s, "journal_crypt: cannot encrypt the journal's keystream");
        for (unsigned k = 0; k < kCommitSeqs; ++k) bases_[k] = detail::get_le64(buf.data() + pages * kPage + 8 * k);
        fix_bases();
        buf.resize(static_cast<std::size_t>(sectors * kSectorSize));
        xor_ = std::move(buf);
        stream_ = true;
        return {};
    }

    // create_journal, a block cipher: each section's IV.
    Result<void> init_block() {
        const std::size_t ivsize = tfm_.ivsize(), bs = tfm_.blocksize();
        if (ivsize == 0 || bs == 0 || section_bytes(g_) % bs != 0)
            return make_error(Status::Invalid, "journal_crypt: " + tfm_.info().name + " cannot encrypt a section");
        const std::size_t crypt_len = (ivsize + bs - 1) / bs * bs;
        ivs_ = SecureBuffer(std::size_t(g_.journal_sections) * ivsize);
        SecureBuffer data(crypt_len), iv(ivsize);
        for (uint32_t i = 0; i < g_.journal_sections; ++i) {
            std::fill(data.data(), data.data() + crypt_len, uint8_t(0));
            std::fill(iv.data(), iv.data() + ivsize, uint8_t(0));
            const uint8_t le[4] = {uint8_t(i), uint8_t(i >> 8), uint8_t(i >> 16), uint8_t(i >> 24)};
            std::memcpy(data.data(), le, std::min<std::size_t>(crypt_len, 4));
            if (Status s = tfm_.encrypt(ConstBytes(data.data(), crypt_len), Bytes(data.data(), crypt_len),
                                        Bytes(iv.data(), ivsize));
                s != Status::Ok)
                return make_error(s, "journal_crypt: cannot make the sections' IVs");
            std::memcpy(ivs_.data() + std::size_t(i) * ivsize, data.data(), ivsize);
        }
        return {};
    }

    bool stream() const noexcept override { return stream_; }
    uint64_t commit_base(unsigned seq) const noexcept override { return bases_[seq % kCommitSeqs]; }

    Result<void> encrypt(uint32_t first, Bytes sections) const override { return crypt(first, sections, true); }
    Result<void> decrypt(uint32_t first, Bytes sections) const override { return crypt(first, sections, false); }

private:
    // The kernel's retest_commit_id: a base equal to an earlier one is
    // bumped by one until all four differ.
    void fix_bases() noexcept {
        for (unsigned i = 0; i < kCommitSeqs; ++i)
            for (unsigned j = 0; j < i; ++j)
                if (bases_[j] == bases_[i]) {
                    ++bases_[i];
                    j = unsigned(-1);  // from the start again
                }
    }

    Result<void> crypt(uint32_t first, Bytes sec, bool enc) const {
        const uint64_t sb = section_bytes(g_);
        if (sec.size() % sb != 0 || first > g_.journal_sections || sec.size() / sb > g_.journal_sections - first)
            return make_error(Status::Invalid, "journal_crypt: not whole journal sections");
        if (stream_) {
            const uint8_t* k = xor_.data() + first * sb;
            for (std::size_t n = 0; n < sec.size(); ++n) sec[n] ^= k[n];
            return {};
        }
        const std::size_t ivsize = tfm_.ivsize();
        SecureBuffer iv(ivsize);
        for (uint64_t o = 0, i = first; o < sec.size(); o += sb, ++i) {
            std::memcpy(iv.data(), ivs_.data() + i * ivsize, ivsize);
            Bytes s(sec.data() + o, static_cast<std::size_t>(sb));
            const Status st = enc ? tfm_.encrypt(s, s, Bytes(iv.data(), ivsize))
                                  : tfm_.decrypt(s, s, Bytes(iv.data(), ivsize));
            if (st != Status::Ok) return make_error(st, "journal_crypt: cannot encrypt a journal section");
        }
        return {};
    }

    Skcipher tfm_;
    Geometry g_;
    bool stream_ = false;
    std::array<uint64_t, kCommitSeqs> bases_{};
    SecureBuffer xor_;  // the keystream (stream ciphers)
    SecureBuffer ivs_;  // the sections' IVs (block ciphers)
};

// The journal area of `meta` as plaintext with the plain commit ids.
class JournalCryptStore final : public BackingStore {
public:
    JournalCryptStore(std::shared_ptr<BackingStore> inner, std::shared_ptr<const JournalCrypt> c, const Geometry& g)
        : in_(std::move(inner)), c_(std::move(c)), g_(g), jo_(journal_offset(g)), jl_(journal_bytes(g)),
          sb_(section_bytes(g)) {
        for (unsigned k = 0; k < kCommitSeqs; ++k) same_ = same_ && c_->commit_base(k) == commit_id(0, 0, k);
    }

    Status read(uint64_t off, Bytes out) override {
        if (Status s = in_->read(off, out); s != Status::Ok) return s;
        uint64_t a, b;
        if (!overlap(off, out.size(), a, b)) return Status::Ok;
        std::vector<uint8_t> tmp;
        const uint32_t s0 = uint32_t((a - jo_) / sb_);
        if (Status s = load(s0, uint32_t((b - jo_ + sb_ - 1) / sb_), tmp); s != Status::Ok) return s;
        std::memcpy(out.data() + (a - off), tmp.data() + (a - jo_ - s0 * sb_), static_cast<std::size_t>(b - a));
        return Status::Ok;
    }

    Status write(uint64_t off, ConstBytes in) override {
        uint64_t a, b;
        if (!overlap(off, in.size(), a, b)) return in_->write(off, in);
        if (a > off)
            if (Status s = in_->write(off, in.first(static_cast<std::size_t>(a - off))); s != Status::Ok) return s;
        if (off + in.size() > b)
            if (Status s = in_->write(b, in.subspan(static_cast<std::size_t>(b - off))); s != Status::Ok) return s;
        const uint32_t s0 = uint32_t((a - jo_) / sb_), s1 = uint32_t((b - jo_ + sb_ - 1) / sb_);
        std::vector<uint8_t> tmp;
        if ((a - jo_) % sb_ != 0 || (b - jo_) % sb_ != 0) {
            if (Status s = load(s0, s1, tmp); s != Status::Ok) return s;
        } else {
            tmp.resize(static_cast<std::size_t>((s1 - s0) * sb_));
        }
        std::memcpy(tmp.data() + (a - jo_ - s0 * sb_), in.data() + (a - off), static_cast<std::size_t>(b - a));
        for (uint32_t i = s0; i < s1; ++i) to_kernel(i, tmp.data() + (i - s0) * sb_);
        if (!c_->encrypt(s0, tmp)) return Status::IoError;
        return in_->write(jo_ + s0 * sb_, tmp);
    }

    uint64_t size() const override { return in_->size(); }
    Status flush() override { return in_->flush(); }
    Status discard(uint64_t off, uint64_t len) override {
        uint64_t a, b;
        if (overlap(off, len, a, b)) return Status::Unsupported;
        return in_->discard(off, len);
    }
    std::string name() const override { return in_->name(); }

private:
    bool overlap(uint64_t off, uint64_t len, uint64_t& a, uint64_t& b) const noexcept {
        a = std::max(off, jo_);
        b = std::min(off + len, jo_ + jl_);
        return a < b;
    }

    // Sections [s0, s1) decrypted, with the plain commit ids.
    Status load(uint32_t s0, uint32_t s1, std::vector<uint8_t>& tmp) {
        tmp.resize(static_cast<std::size_t>((s1 - s0) * sb_));
        if (Status s = in_->read(jo_ + s0 * sb_, tmp); s != Status::Ok) return s;
        if (!c_->decrypt(s0, tmp)) return Status::IoError;
        for (uint32_t i = s0; i < s1; ++i) to_plain(i, tmp.data() + (i - s0) * sb_);
        return Status::Ok;
    }

    uint64_t kernel_id(uint32_t i, uint32_t j, unsigned k) const noexcept {
        return c_->commit_base(k) ^ ((uint64_t(i) << 32) ^ j);
    }

    void to_kernel(uint32_t i, uint8_t* sec) const noexcept {
        if (same_) return;
        for (uint32_t j = 0; j < g_.journal_section_sectors; ++j) {
            uint8_t* p = sec + std::size_t(j) * kSectorSize + kJournalSectorData;
            const uint64_t v = detail::get_le64(p);
            for (unsigned k = 0; k < kCommitSeqs; ++k)
                if (v == commit_id(i, j, k)) {
                    detail::put_le64(p, kernel_id(i, j, k));
                    break;
                }
        }
    }

    bool plain_valid(uint32_t i, uint32_t j, uint64_t v) const noexcept {
        for (unsigned k = 0; k < kCommitSeqs; ++k)
            if (v == commit_id(i, j, k)) return true;
        return false;
    }

    void to_plain(uint32_t i, uint8_t* sec) const noexcept {
        if (same_) return;
        for (uint32_t j = 0; j < g_.journal_section_sectors; ++j) {
            uint8_t* p = sec + std::size_t(j) * kSectorSize + kJournalSectorData;
            uint64_t v = detail::get_le64(p);
            unsigned k = 0;
            while (k < kCommitSeqs && v != kernel_id(i, j, k)) ++k;
            if (k < kCommitSeqs) {
                v = commit_id(i, j, k);
            } else {
                // An id the kernel refuses must stay one of no sequence.
                while (plain_valid(i, j, v)) v = (v << 1) | (v >> 63);
                if (v == 0 || v == ~uint64_t(0)) v ^= 1;  // rotation of 0 / all-ones never changes
            }
            detail::put_le64(p, v);
        }
    }

    std::shared_ptr<BackingStore> in_;
    std::shared_ptr<const JournalCrypt> c_;
    Geometry g_;
    uint64_t jo_, jl_, sb_;
    bool same_ = true;
};

}  // namespace

Result<std::shared_ptr<JournalCrypt>> JournalCrypt::create(Registry& reg, std::string_view alg, ConstBytes key,
                                                           const Geometry& g) {
    if (g.journal_sections == 0 || g.journal_section_sectors == 0)
        return make_error(Status::Invalid, "journal_crypt: the geometry has no journal");
    if (key.empty())
        return make_error(Status::Invalid, "journal_crypt " + std::string(alg) + " needs a key (--journal-crypt-key-file)");
    auto tfm = Skcipher::alloc(reg, alg);
    if (!tfm) return make_error(tfm.status(), "journal_crypt " + std::string(alg) + ": " + tfm.error().message);
    if (Status s = tfm->setkey(key); s != Status::Ok)
        return make_error(Status::Invalid, "journal_crypt " + std::string(alg) + ": the key is refused (" + to_string(s) + ")");
    const bool stream = tfm->blocksize() == 1;
    auto c = std::make_shared<JournalCryptImpl>(std::move(*tfm), g);
    if (auto r = stream ? c->init_stream() : c->init_block(); !r) return r.error();
    return std::shared_ptr<JournalCrypt>(std::move(c));
}

std::shared_ptr<BackingStore> journal_crypt_store(std::shared_ptr<BackingStore> meta,
                                                  std::shared_ptr<const JournalCrypt> crypt, const Geometry& g) {
    return std::make_shared<JournalCryptStore>(std::move(meta), std::move(crypt), g);
}

}  // namespace blkcrypt::integrity
