// CryptTarget: dm-crypt's crypt_config (the transform, geometry, pools) and
// the per-bio conversion (dm_crypt_io + convert_context), after
// drivers/md/dm-crypt.c, with one request per max_request bytes instead of
// one per sector: the IV-generation template cuts it into sectors.
#include "workers.hpp"

#include <blkcrypt/internal/bytes_util.hpp>
#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/secure_buffer.hpp>
#include <blkcrypt/skcipher.hpp>

#include <algorithm>
#include <atomic>
#include <bit>
#include <new>
#include <optional>
#include <thread>
#include <vector>

namespace blkcrypt::dm {
namespace {

constexpr uint64_t kSector = 512;

// One bio in flight: its place in the conversion, and everything a request
// needs, allocated once per slot so the data path does not allocate.
struct CryptIo {
    enum class Phase { Start, Reading, Crypting };

    Bio* bio = nullptr;
    Phase phase = Phase::Start;
    std::size_t size = 0;            // bio->size(), counted once
    uint64_t done = 0;               // bytes converted (and, for writes, stored)
    std::size_t chunk = 0;           // bytes in the request being converted
    std::size_t bounce_used = 0;     // high-water mark, wiped when the bio fails
    Status crypt_status = Status::Ok;  // set by an async completion
    // Reads the store runs on its own (start_read) not yet over, plus one
    // held by the worker issuing them; and a failed one's status.
    std::atomic<std::size_t> reads_left{0};
    std::atomic<Status> read_status{Status::Ok};
    Completion read_done;            // built once per slot: no allocation per read
    SkcipherRequest req;
    uint8_t iv[8] = {};
    std::vector<SgEntry> window;     // the request's part of bio->vecs
    SgEntry bounce_sg;
    std::unique_ptr<uint8_t[]> bounce;
};

Error table_error(const CryptTable& t, const std::string& what) {
    return make_error(Status::Invalid, what + " for cipher '" + t.cipher + "' (" + t.alg_name + ")");
}

class CryptTargetImpl final : public CryptTarget {
public:
    CryptTargetImpl(const CryptTable& table, std::shared_ptr<BackingStore> store, Skcipher tfm,
                    uint64_t length, unsigned threads, std::size_t depth, std::size_t max_request)
        : table_(table), store_(std::move(store)), tfm_(std::move(tfm)), length_(length),
          base_(table.offset * kSector), max_request_(max_request), ios_(depth),
          pool_(threads, depth, [this](std::size_t slot) { run(slot); }) {
        for (std::size_t i = 0; i < ios_.size(); ++i) {
            CryptIo& io = ios_[i];
            // Left uninitialised: pages are only touched by the writes using them.
            io.bounce.reset(new uint8_t[max_request_]);
            io.req.flags = kMayBacklog;
            io.req.complete = [this, i](Status s) {
                if (s == Status::InProgress) return;  // left the backlog; the result follows
                ios_[i].crypt_status = s;
                pool_.schedule(i);
            };
            io.read_done = [this, i](Status s) { read_over(i, s); };
        }
    }

    ~CryptTargetImpl() override { pool_.drain(); }
    unsigned worker_threads() const noexcept { return pool_.threads(); }

    Status submit(Bio& bio) override {
        const auto slot = take_slot(bio);
        if (!slot) return Status::Invalid;
        pool_.schedule(*slot);
        return Status::InProgress;
    }

    Status run_inline(Bio& bio) override {
        const auto slot = take_slot(bio);
        if (!slot) return Status::Invalid;
        CryptIo& io = ios_[*slot];
        Status s = bio.dir == BioDir::Read ? read_bio(bio) : Status::Ok;
        if (s == Status::Ok) s = convert(io);
        if (s == Status::InProgress) return s;  // the completion schedules the rest
        io.bio = nullptr;
        if (io.bounce_used && s != Status::Ok) secure_wipe(io.bounce.get(), io.bounce_used);
        io.bounce_used = 0;
        pool_.release(*slot);
        pool_.retire();
        return s;
    }

    Status submit_sync(Bio& bio) override {
        Completion saved = std::move(bio.on_complete);
        CryptoWait wait;
        bio.on_complete = wait.callback();
        Status s = wait.wait(submit(bio));
        bio.on_complete = std::move(saved);
        return s;
    }

    void drain() override { pool_.drain(); }
    const CryptTable& table() const override { return table_; }
    uint64_t length_sectors() const override { return length_; }
    const AlgInfo& cipher_info() const override { return tfm_.info(); }

private:
    // A slot set up for the bio, or none when the bio is refused.
    std::optional<std::size_t> take_slot(Bio& bio) {
        const std::size_t n = bio.size();
        const uint64_t step = table_.sector_size / kSector;
        // As crypt_map: a bio must cover whole sectors of the target.
        if (!bio.on_complete || n == 0 || n % table_.sector_size || bio.sector % step) return std::nullopt;
        if (bio.sector > length_ || n / kSector > length_ - bio.sector) return std::nullopt;

        std::size_t slot = pool_.acquire();
        CryptIo& io = ios_[slot];
        io.bio = &bio;
        io.phase = CryptIo::Phase::Start;
        io.size = n;
        io.done = 0;
        io.window.resize(std::max(io.window.size(), bio.vecs.size()));  // grows, then reused
        return slot;
    }

    // A worker's turn with a bio: start it, or go on after an async request.
    void run(std::size_t slot) {
        CryptIo& io = ios_[slot];
        Status s = Status::Ok;
        if (io.phase == CryptIo::Phase::Start) {
            // Reads decrypt in place what the store holds (kcryptd_crypt_read_convert).
            if (io.bio->dir == BioDir::Read) s = start_reads(io);
            // The store still reads: read_over schedules the bio again.
            if (s == Status::InProgress) return;
        } else if (io.phase == CryptIo::Phase::Reading) {
            s = io.crypt_status;
        } else {
            s = io.crypt_status;
            if (s == Status::Ok) s = chunk_done(io);
        }
        if (s == Status::Ok) s = convert(io);
        // InProgress: an async request holds the bio, and its completion
        // schedules it again; io may already be on another worker.
        if (s != Status::InProgress) finish(slot, s);
    }

    // crypt_convert: one request per max_request bytes; Ok when the bio is
    // done, InProgress when an async transform took a request.
    Status convert(CryptIo& io) {
        const Bio& bio = *io.bio;
        const bool enc = bio.dir == BioDir::Write;
        while (io.done < io.size) {
            io.chunk = static_cast<std::size_t>(std::min<uint64_t>(max_request_, io.size - io.done));
            auto win = sg_slice(bio.vecs, io.done, io.chunk, io.window);
            io.req.src = win;
            if (enc) {
                // Writes never touch the caller's memory: encrypt into the bounce buffer.
                io.bounce_sg = SgEntry{io.bounce.get(), io.chunk};
                io.req.dst = SgList(&io.bounce_sg, 1);
                io.bounce_used = std::max(io.bounce_used, io.chunk);
            } else {
                io.req.dst = win;
            }
            io.req.len = io.chunk;
            // The IV templates take the request's first 512-byte sector.
            put_le64(io.iv, table_.iv_offset + bio.sector + io.done / kSector);
            io.req.iv = Bytes(io.iv, tfm_.ivsize());
            io.phase = CryptIo::Phase::Crypting;
            Status s = enc ? tfm_.encrypt(io.req) : tfm_.decrypt(io.req);
            // Busy with kMayBacklog: accepted into the backlog; the completion
            // reports InProgress, then the result. The slot bounds how many a
            // target has outstanding, so nothing more is needed to throttle.
            if (s == Status::InProgress || s == Status::Busy) return Status::InProgress;
            if (s != Status::Ok) return s;
            if (s = chunk_done(io); s != Status::Ok) return s;
        }
        return Status::Ok;
    }

    // A request converted: writes store the ciphertext (the kernel's clone bio).
    Status chunk_done(CryptIo& io) {
        const Bio& bio = *io.bio;
        if (bio.dir == BioDir::Write) {
            uint64_t at = base_ + bio.sector * kSector + io.done;
            if (Status s = store_->write(at, ConstBytes(io.bounce.get(), io.chunk)); s != Status::Ok)
                return s;
        }
        io.done += io.chunk;
        return Status::Ok;
    }

    // The bio's reads, started on the store where it can run them without
    // this worker (many in flight while the workers decrypt others), read
    // here where it cannot. InProgress: read_over goes on with the bio.
    Status start_reads(CryptIo& io) {
        const Bio& bio = *io.bio;
        io.phase = CryptIo::Phase::Reading;
        io.read_status.store(Status::Ok, std::memory_order_relaxed);
        io.reads_left.store(1, std::memory_order_relaxed);  // this call's own hold
        uint64_t at = base_ + bio.sector * kSector;
        for (const SgEntry& v : bio.vecs) {
            if (!v.len) continue;
            io.reads_left.fetch_add(1, std::memory_order_relaxed);
            if (!store_->start_read(at, Bytes(v.data, v.len), io.read_done)) {
                const Status s = store_->read(at, Bytes(v.data, v.len));
                io.reads_left.fetch_sub(1, std::memory_order_relaxed);
                if (s != Status::Ok) io.read_status.store(s, std::memory_order_relaxed);
            }
            at += v.len;
        }
        if (io.reads_left.fetch_sub(1, std::memory_order_acq_rel) != 1) return Status::InProgress;
        // Every read over already (or none started): go on on this worker.
        return io.read_status.load(std::memory_order_relaxed);
    }

    // A started read is over (on the store's thread): the last one hands
    // the bio back to the workers.
    void read_over(std::size_t slot, Status s) {
        CryptIo& io = ios_[slot];
        if (s != Status::Ok) io.read_status.store(s, std::memory_order_relaxed);
        if (io.reads_left.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
        io.crypt_status = io.read_status.load(std::memory_order_relaxed);
        pool_.schedule(slot);
    }

    Status read_bio(const Bio& bio) {
        uint64_t at = base_ + bio.sector * kSector;
        for (const SgEntry& v : bio.vecs) {
            if (!v.len) continue;
            if (Status s = store_->read(at, Bytes(v.data, v.len)); s != Status::Ok) return s;
            at += v.len;
        }
        return Status::Ok;
    }

    void finish(std::size_t slot, Status s) {
        CryptIo& io = ios_[slot];
        Bio* bio = io.bio;
        io.bio = nullptr;
        // A converted bounce holds only ciphertext, already stored; a failed
        // request may have left plaintext there (templates that copy, then
        // transform in place), so only then is it wiped.
        if (io.bounce_used && s != Status::Ok) secure_wipe(io.bounce.get(), io.bounce_used);
        io.bounce_used = 0;
        // Free the slot before the callback, so a callback submitting a
        // follow-up bio finds room.
        pool_.release(slot);
        bio->on_complete(s);
        pool_.retire();
    }

    const CryptTable table_;
    const std::shared_ptr<BackingStore> store_;
    const Skcipher tfm_;
    const uint64_t length_;       // 512-byte sectors
    const uint64_t base_;         // byte offset of the target in the store
    const std::size_t max_request_;
    std::vector<CryptIo> ios_;    // one per slot; outlives pool_ (declared before)
    WorkerPool pool_;
};

}  // namespace

Result<std::unique_ptr<CryptTarget>> CryptTarget::create(Registry& reg, const CryptTable& table,
                                                         std::shared_ptr<BackingStore> store,
                                                         uint64_t length_sectors, CryptTargetOptions opts) {
    if (!store) return make_error(Status::Invalid, "no backing store");
    if (table.integrity_tag_size)  // sealed sectors need tags beside them (aead_target.hpp)
        return make_error(Status::Invalid, "the integrity feature (integrity:" +
                                               std::to_string(table.integrity_tag_size) + ":" + table.integrity_auth +
                                               ") needs a dm-integrity device below the crypt target, not a plain file");
    const std::size_t ss = table.sector_size;
    if (ss < 512 || ss > 4096 || !std::has_single_bit(ss))
        return make_error(Status::Invalid, "Invalid feature value for sector_size");
    const uint64_t step = ss / kSector;
    if (table.iv_offset % step) return make_error(Status::Invalid, "Invalid iv_offset sector");

    // The kernel's crypt_ctr order: transform, IV set-up (sector geometry, key
    // split), key. The registry's message says what is missing.
    const std::string name = opts.force_async ? "cryptd(" + table.alg_name + ")" : table.alg_name;
    auto tfm = Skcipher::alloc(reg, name);
    if (!tfm)
        return make_error(tfm.status(), "Error allocating crypto tfm for cipher '" + table.cipher +
                                            "' (" + name + "): " + tfm.error().message);
    Status s = tfm->set_sector_params({ss, table.iv_large_sectors, table.key_count});
    if (s == Status::Unsupported) {
        // Not an IV template (aes-ecb): position-independent, so any sector
        // size works, but nothing could pick one of several keys.
        if (tfm->ivsize() != 0 || table.key_count != 1)
            return table_error(table, "Error creating IV: '" + name + "' is not an IV-generation template");
    } else if (s != Status::Ok) {
        return table_error(table, "Error creating IV: sector_size " + std::to_string(ss) +
                                      (table.iv_large_sectors ? " with iv_large_sectors" : "") +
                                      ", " + std::to_string(table.key_count) + " key(s) refused");
    }
    s = tfm->setkey(table.key);
    if (s == Status::Invalid)
        return table_error(table, "key of " + std::to_string(table.key.size()) +
                                      " bytes refused (wrong length, or equal XTS key halves)");
    if (s != Status::Ok) return table_error(table, std::string("Error setting key: ") + to_string(s));

    // Geometry: the target lies within the store and covers whole sectors.
    const uint64_t store_sectors = store->size() / kSector;
    if (table.offset > store_sectors)
        return make_error(Status::Invalid, "Invalid device sector: offset past the end of the device");
    uint64_t length = length_sectors ? length_sectors : table.length;
    if (!length) length = store_sectors - table.offset;
    if (length > store_sectors - table.offset)
        return make_error(Status::Invalid, "Device too small for the target length");
    if (length % step)
        return make_error(Status::Invalid, "Device size is not multiple of sector_size feature");

    const std::size_t max_request = opts.max_request / ss * ss;
    if (!max_request)
        return make_error(Status::Invalid, "max_request must hold at least one sector");
    unsigned threads = opts.threads ? opts.threads : std::max(1u, std::thread::hardware_concurrency());
    std::size_t depth = opts.queue_depth ? opts.queue_depth : 4 * std::size_t{threads};
    // A store that runs reads without a worker (start_read) says how many
    // it wants in flight; reads never touch the bounce buffers, so more
    // bios cost address space only.
    if (!opts.queue_depth) depth = std::max(depth, store->read_depth());
    std::unique_ptr<CryptTargetImpl> target;
    try {
        target = std::make_unique<CryptTargetImpl>(table, std::move(store), std::move(tfm).value(),
                                                   length, threads, depth, max_request);
    } catch (const std::bad_alloc&) {  // the bounce buffers: depth * max_request bytes
        return make_error(Status::NoMem, "cannot allocate " + std::to_string(depth) + " buffers of " +
                                             std::to_string(max_request) + " bytes");
    }
    if (target->worker_threads() == 0)
        return make_error(Status::NoMem, "cannot start any crypt worker thread");
    return std::unique_ptr<CryptTarget>(std::move(target));
}

}  // namespace blkcrypt::dm
