// dm-crypt's integrity feature (aead_target.hpp): crypt_convert_block_aead
// and crypt_convert_block_skcipher's stored-IV path, one sector at a time,
// over a TaggedDevice. I/Os are cut into chunks run by a WorkerPool; each
// pool slot owns the buffers a chunk needs (tags, write bounce, random IVs),
// so the data path allocates one record per I/O and nothing per sector.
#include "workers.hpp"

#include <blkcrypt/aead.hpp>
#include <blkcrypt/dm/aead_target.hpp>
#include <blkcrypt/internal/bytes_util.hpp>
#include <blkcrypt/random.hpp>
#include <blkcrypt/secure_buffer.hpp>
#include <blkcrypt/shash.hpp>
#include <blkcrypt/skcipher.hpp>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <new>
#include <optional>
#include <thread>
#include <vector>

namespace blkcrypt::dm {
namespace {

constexpr uint64_t kSector = 512;
constexpr std::size_t kMaxIv = 32;  // every AEAD/skcipher IV the kernel's dm-crypt meets

Error bad(std::string msg) { return make_error(Status::Invalid, std::move(msg)); }

enum class IvGen { Random, Plain, Plain64, Plain64Be, Null };

Result<IvGen> iv_gen(const CryptTable& t) {
    const std::string& m = t.ivmode;
    if (m == "random") return IvGen::Random;
    if (m == "plain") return IvGen::Plain;
    if (m == "plain64") return IvGen::Plain64;
    if (m == "plain64be") return IvGen::Plain64Be;
    if (m == "null") return IvGen::Null;
    if (m.empty()) return bad("IV mechanism required with the integrity feature");
    return bad("IV mode '" + m + "' is not available with the integrity feature here "
               "(random, plain, plain64, plain64be, null)");
}

// crypt_ctr_auth_cipher: the MAC of "authenc(<mac>,<cipher>)", else empty.
std::string authenc_mac(const std::string& api) {
    if (!api.starts_with("authenc(")) return {};
    const std::size_t comma = api.find(',');
    if (comma == std::string::npos) return {};
    return api.substr(8, comma - 8);
}

// The transform and its layout, keyed: what crypt_ctr_cipher and
// crypt_integrity_ctr set up.
struct Transform {
    std::optional<Aead> aead;
    std::optional<Skcipher> sk;
    AeadLayout lay;
};

Result<Transform> make_transform(Registry& reg, const CryptTable& t, bool with_key) {
    if (!t.integrity_tag_size) return bad("the table has no integrity feature (integrity:<bytes>:aead|none)");
    auto gen = iv_gen(t);
    if (!gen) return gen.error();
    Transform x;
    AeadLayout& l = x.lay;
    l.aead = t.integrity_aead();
    l.on_disk = t.integrity_tag_size;
    std::size_t ivsize = 0;
    if (l.aead) {
        if (const std::string mac = authenc_mac(t.api); !mac.empty()) {
            auto h = Shash::alloc(reg, mac);
            if (!h) return bad("Invalid AEAD cipher spec: " + mac + ": " + h.error().message);
            l.mac_key_size = h->digestsize();
        } else if (t.api.starts_with("authenc(")) {
            return bad("Invalid AEAD cipher spec");
        }
        auto a = Aead::alloc(reg, t.api);
        if (!a) return make_error(a.status(), "Error allocating crypto tfm '" + t.api + "': " + a.error().message);
        // Sector by sector in the worker's thread: an async driver would
        // only add hand-overs (the registry prefers synchronous ones).
        if (a->is_async()) return bad("'" + t.api + "' resolved to an asynchronous driver");
        x.aead.emplace(std::move(a).value());
        ivsize = x.aead->ivsize();
    } else {
        auto s = Skcipher::alloc(reg, t.api);
        if (!s) return make_error(s.status(), "Error allocating crypto tfm '" + t.api + "': " + s.error().message);
        if (s->is_async()) return bad("'" + t.api + "' resolved to an asynchronous driver");
        x.sk.emplace(std::move(s).value());
        ivsize = x.sk->ivsize();
    }
    // crypt_ctr_ivmode: at least a 64-bit sector number fits the IV.
    if (!ivsize) return bad("Selected cipher does not support IVs");
    l.iv_size = std::max<std::size_t>(ivsize, 8);
    if (l.iv_size > kMaxIv) return bad("IV of " + std::to_string(l.iv_size) + " bytes is too long");
    l.iv_stored = *gen == IvGen::Random ? l.iv_size : 0;
    // crypt_integrity_ctr.
    if (l.aead) {
        if (l.on_disk <= l.iv_stored) return bad("Integrity AEAD auth tag size is not supported.");
        l.auth_size = l.on_disk - l.iv_stored;
        if (x.aead->setauthsize(l.auth_size) != Status::Ok)
            return bad("Integrity AEAD auth tag size is not supported.");
    } else if (!l.iv_stored) {
        // The kernel never calls crypt_integrity_ctr here and writes tags
        // that mean nothing; refuse instead.
        return bad("integrity:" + std::to_string(l.on_disk) + ":none stores only random IVs: use IV mode random");
    }
    if (l.auth_size + l.iv_stored != l.on_disk) return bad("Not enough space for integrity tag in the profile.");
    if (!with_key) return x;

    Status s;
    if (l.mac_key_size) {
        // crypt_setkey with crypt_copy_authenckey: rtattr {len 8, type 1},
        // be32 enckeylen, then the MAC key (the volume key's tail), then
        // the encryption key.
        if (t.key.size() < l.mac_key_size) return bad("key shorter than the MAC key");
        const std::size_t enc = t.key.size() - l.mac_key_size;
        SecureBuffer blob(8 + t.key.size());
        uint8_t* p = blob.data();
        p[0] = 8, p[1] = 0, p[2] = 1, p[3] = 0;
        put_be32(p + 4, static_cast<uint32_t>(enc));
        std::memcpy(p + 8, t.key.data() + enc, l.mac_key_size);
        std::memcpy(p + 8 + l.mac_key_size, t.key.data(), enc);
        s = x.aead->setkey(ConstBytes(blob.data(), blob.size()));
    } else if (l.aead) {
        s = x.aead->setkey(ConstBytes(t.key.data(), t.key.size()));
    } else {
        s = x.sk->setkey(ConstBytes(t.key.data(), t.key.size()));
    }
    if (s != Status::Ok)
        return make_error(Status::Invalid, "Error decoding and setting key: " + std::to_string(t.key.size()) +
                                               " bytes refused by '" + t.api + "'");
    return x;
}

// One chunk of an I/O in flight, and the buffers it works in (one per slot).
struct IoState;
struct Job {
    IoState* io = nullptr;
    bool write = false;
    uint64_t offset = 0;  // bytes into the target
    uint8_t* data = nullptr;
    std::size_t len = 0;
    std::unique_ptr<uint8_t[]> tags, bounce, ivs;
};

struct IoState {
    std::atomic<std::size_t> pending{0};
    std::atomic<Status> status{Status::Ok};
    Completion done;
};

class AeadCryptDevice final : public BlockDevice {
public:
    AeadCryptDevice(const CryptTable& t, Transform x, IvGen gen, std::shared_ptr<integrity::TaggedDevice> lower,
                    uint64_t length, unsigned threads, std::size_t depth, std::size_t chunk,
                    const AeadCryptOptions& opts)
        : cipher_(t.cipher), x_(std::move(x)), gen_(gen), lower_(std::move(lower)), size_(length * kSector),
          base_(t.offset * kSector), iv_offset_(t.iv_offset), ss_(t.sector_size),
          shift_(static_cast<unsigned>(std::countr_zero(t.sector_size / kSector))), large_(t.iv_large_sectors),
          chunk_(chunk), read_only_(opts.read_only || lower_->read_only()), on_error_(opts.on_error),
          jobs_(depth), pool_(threads, depth, [this](std::size_t slot) { run(slot); }) {
        const std::size_t n = chunk_ / ss_;
        for (Job& j : jobs_) {
            j.tags.reset(new uint8_t[n * x_.lay.on_disk]);
            j.ivs.reset(new uint8_t[n * x_.lay.iv_size]);
            if (!read_only_) j.bounce.reset(new uint8_t[chunk_]);
        }
    }
    ~AeadCryptDevice() override { pool_.drain(); }

    unsigned workers() const { return pool_.threads(); }
    uint64_t size() const override { return size_; }
    uint32_t block_size() const override { return static_cast<uint32_t>(ss_); }
    bool read_only() const override { return read_only_; }

    Status submit_read(uint64_t offset, Bytes out, Completion done) override {
        return submit(false, offset, out.data(), out.size(), std::move(done));
    }
    Status submit_write(uint64_t offset, ConstBytes in, Completion done) override {
        if (read_only_) return Status::Unsupported;
        // Encrypted into the slot's bounce buffer: `in` is only read.
        return submit(true, offset, const_cast<uint8_t*>(in.data()), in.size(), std::move(done));
    }
    Status flush() override {
        if (read_only_) return Status::Ok;
        auto r = lower_->flush();
        return r ? Status::Ok : r.error().status;
    }
    void drain() override { pool_.drain(); }
    std::string describe() const override { return "crypt " + cipher_ + " over " + lower_->describe(); }

private:
    Status submit(bool write, uint64_t offset, uint8_t* data, std::size_t len, Completion done) {
        if (!done || !len || offset % ss_ || len % ss_ || offset > size_ || len > size_ - offset)
            return Status::Invalid;
        const std::size_t n = (len + chunk_ - 1) / chunk_;
        auto* io = new IoState;
        io->pending.store(n, std::memory_order_relaxed);
        io->done = std::move(done);
        for (std::size_t i = 0; i < n; ++i) {
            const std::size_t slot = pool_.acquire();
            Job& j = jobs_[slot];
            j.io = io;
            j.write = write;
            j.offset = offset + i * chunk_;
            j.data = data + i * chunk_;
            j.len = std::min(chunk_, len - i * chunk_);
            pool_.schedule(slot);
        }
        return Status::InProgress;
    }

    void run(std::size_t slot) {
        Job& j = jobs_[slot];
        IoState* io = j.io;
        const Status s = j.write ? write_chunk(j) : read_chunk(j);
        if (s != Status::Ok) {
            Status ok = Status::Ok;
            io->status.compare_exchange_strong(ok, s);
        }
        j.io = nullptr;
        pool_.release(slot);
        if (io->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            Completion d = std::move(io->done);
            const Status final = io->status.load();
            delete io;
            d(final);
        }
        pool_.retire();
    }

    // The IV of a sector whose IV is not stored (crypt_iv_*_gen).
    void make_iv(uint64_t cc_sector, uint8_t* iv) const {
        const std::size_t n = x_.lay.iv_size;
        uint64_t s = large_ ? cc_sector >> shift_ : cc_sector;
        std::memset(iv, 0, n);
        switch (gen_) {
        case IvGen::Plain: put_le32(iv, static_cast<uint32_t>(s)); break;
        case IvGen::Plain64: put_le64(iv, s); break;
        case IvGen::Plain64Be: put_be64(iv + n - 8, s); break;
        case IvGen::Null:
        case IvGen::Random: break;
        }
    }

    // One sector (crypt_convert_block_aead / _skcipher): in -> out, its
    // on-disk tag at `tag`. org_iv: the sector's IV (generated, or read
    // from the tag). rel: the sector's number in 512-byte units in the target.
    Status convert(bool write, uint64_t rel, const uint8_t* in, uint8_t* out, uint8_t* tag,
                   const uint8_t* org_iv) const {
        const AeadLayout& l = x_.lay;
        uint8_t iv[kMaxIv];  // working copy: a transform may change it
        std::memcpy(iv, org_iv, l.iv_size);
        if (!l.aead) {
            SgEntry src{const_cast<uint8_t*>(in), ss_}, dst{out, ss_};
            SkcipherRequest req;
            req.src = SgList(&src, 1);
            req.dst = SgList(&dst, 1);
            req.len = ss_;
            req.iv = Bytes(iv, x_.sk->ivsize());
            return write ? x_.sk->encrypt(req) : x_.sk->decrypt(req);
        }
        // AAD = le64 sector || IV; data; auth tag.
        uint8_t aad[8 + kMaxIv];
        put_le64(aad, rel);
        std::memcpy(aad + 8, org_iv, l.iv_size);
        const std::size_t alen = 8 + l.iv_size;
        SgEntry src[3] = {{aad, alen}, {const_cast<uint8_t*>(in), ss_}, {tag, l.auth_size}};
        SgEntry dst[3] = {{aad, alen}, {out, ss_}, {tag, l.auth_size}};
        AeadRequest req;
        req.src = SgList(src, 3);
        req.dst = SgList(dst, 3);
        req.assoclen = alen;
        req.cryptlen = write ? ss_ : ss_ + l.auth_size;
        req.iv = Bytes(iv, x_.aead->ivsize());
        return write ? x_.aead->encrypt(req) : x_.aead->decrypt(req);
    }

    Status read_chunk(Job& j) {
        const AeadLayout& l = x_.lay;
        const std::size_t n = j.len / ss_;
        const Bytes tags(j.tags.get(), n * l.on_disk);
        // From the device's mapping straight into the caller's memory when
        // it offers one (a read-only image), else read there and converted
        // in place.
        const ConstBytes view = lower_->read_view(base_ + j.offset, j.len, tags);
        if (view.empty())
            if (auto r = lower_->read(base_ + j.offset, Bytes(j.data, j.len), tags); !r) return r.error().status;
        struct Release {
            integrity::TaggedDevice& d;
            uint64_t at;
            std::size_t len;
            bool on;
            ~Release() { if (on) d.release_view(at, len); }
        } release{*lower_, base_ + j.offset, j.len, !view.empty()};
        uint8_t ivbuf[kMaxIv];
        for (std::size_t i = 0; i < n; ++i) {
            const uint64_t rel = (j.offset + i * ss_) / kSector;
            uint8_t* tag = j.tags.get() + i * l.on_disk;
            const uint8_t* iv = ivbuf;
            if (l.iv_stored)
                iv = tag + l.auth_size;  // For READs use IV stored in integrity metadata
            else
                make_iv(rel + iv_offset_, ivbuf);
            uint8_t* p = j.data + i * ss_;
            const Status s = convert(false, rel, view.empty() ? p : view.data() + i * ss_, p, tag, iv);
            if (s != Status::Ok) {
                if (on_error_) on_error_(rel, s);  // "INTEGRITY AEAD ERROR, sector <rel>"
                return s;
            }
        }
        return Status::Ok;
    }

    Status write_chunk(Job& j) {
        const AeadLayout& l = x_.lay;
        const std::size_t n = j.len / ss_;
        uint8_t* ivs = j.ivs.get();
        if (l.iv_stored) {
            // crypt_iv_random_gen, for the whole chunk at once.
            if (auto r = random_bytes(Bytes(ivs, n * l.iv_size)); !r) return r.error().status;
        } else {
            for (std::size_t i = 0; i < n; ++i) make_iv((j.offset + i * ss_) / kSector + iv_offset_, ivs + i * l.iv_size);
        }
        for (std::size_t i = 0; i < n; ++i) {
            const uint64_t rel = (j.offset + i * ss_) / kSector;
            uint8_t* tag = j.tags.get() + i * l.on_disk;
            const uint8_t* iv = ivs + i * l.iv_size;
            const Status s = convert(true, rel, j.data + i * ss_, j.bounce.get() + i * ss_, tag, iv);
            if (s != Status::Ok) {
                secure_wipe(j.bounce.get(), j.len);
                return s;
            }
            // Store the IV after the auth tag; zeros pad the rest.
            std::memcpy(tag + l.auth_size, iv, l.iv_stored);
            std::memset(tag + l.auth_size + l.iv_stored, 0, l.on_disk - l.auth_size - l.iv_stored);
        }
        auto r = lower_->write(base_ + j.offset, ConstBytes(j.bounce.get(), j.len),
                               ConstBytes(j.tags.get(), n * l.on_disk));
        return r ? Status::Ok : r.error().status;
    }

    const std::string cipher_;
    const Transform x_;
    const IvGen gen_;
    const std::shared_ptr<integrity::TaggedDevice> lower_;
    const uint64_t size_, base_, iv_offset_;
    const std::size_t ss_;
    const unsigned shift_;
    const bool large_;
    const std::size_t chunk_;
    const bool read_only_;
    const std::function<void(uint64_t, Status)> on_error_;
    std::vector<Job> jobs_;  // one per slot; outlives pool_ (declared before)
    WorkerPool pool_;
};

}  // namespace

Result<AeadLayout> aead_layout(Registry& reg, const CryptTable& table) {
    auto x = make_transform(reg, table, false);
    if (!x) return x.error();
    return x->lay;
}

Result<std::shared_ptr<BlockDevice>> make_aead_crypt_device(Registry& reg, const CryptTable& table,
                                                            std::shared_ptr<integrity::TaggedDevice> lower,
                                                            uint64_t length_sectors, AeadCryptOptions opts) {
    if (!lower) return bad("Integrity profile not supported: the device below keeps no tags (dm-integrity)");
    const std::size_t ss = table.sector_size;
    if (ss < 512 || ss > 4096 || !std::has_single_bit(ss)) return bad("Invalid feature value for sector_size");
    const uint64_t step = ss / kSector;
    if (table.iv_offset % step) return bad("Invalid iv_offset sector");
    auto gen = iv_gen(table);
    if (!gen) return gen.error();
    auto x = make_transform(reg, table, true);
    if (!x) return x.error();
    // crypt_integrity_ctr's checks against the device's profile.
    if (lower->tag_size() != x->lay.on_disk)
        return bad("Integrity profile tag size mismatch: the device keeps " + std::to_string(lower->tag_size()) +
                   " bytes a block, the table says " + std::to_string(x->lay.on_disk));
    if (lower->block_size() != ss)
        return bad("Integrity profile sector size mismatch: the device's block is " +
                   std::to_string(lower->block_size()) + " bytes, the crypt sector " + std::to_string(ss));
    const uint64_t have = lower->size() / kSector;
    if (table.offset > have) return bad("Invalid device sector: offset past the end of the device");
    uint64_t length = length_sectors ? length_sectors : table.length;
    if (!length) length = have - table.offset;
    if (length > have - table.offset) return bad("Device too small for the target length");
    if (length % step || table.offset % step)
        return bad("Device size is not multiple of sector_size feature");

    const std::size_t chunk = std::max(opts.chunk / ss * ss, ss);
    const unsigned threads = opts.threads ? opts.threads : std::max(1u, std::thread::hardware_concurrency());
    const std::size_t depth = opts.queue_depth ? opts.queue_depth : 4 * std::size_t{threads};
    std::unique_ptr<AeadCryptDevice> dev;
    try {
        dev = std::make_unique<AeadCryptDevice>(table, std::move(x).value(), *gen, std::move(lower), length,
                                                threads, depth, chunk, opts);
    } catch (const std::bad_alloc&) {
        return make_error(Status::NoMem, "cannot allocate " + std::to_string(depth) + " buffers of " +
                                             std::to_string(chunk) + " bytes");
    }
    if (dev->workers() == 0) return make_error(Status::NoMem, "cannot start any crypt worker thread");
    return std::shared_ptr<BlockDevice>(std::move(dev));
}

}  // namespace blkcrypt::dm
