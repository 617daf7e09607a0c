// The LUKS2 reencryption engine: a forward re-key step by step, with
// cryptsetup 2.6.1's resilience (luks2_reencrypt.c reencrypt_step,
// reencrypt_hotzone_protect_final, reencrypt_recover_segment). Ciphers are
// named and run by the dm-crypt engine; the metadata is reencrypt_meta.cpp's.
#include "luks2_internal.hpp"

#include <blkcrypt/dm/bio_ring.hpp>
#include <blkcrypt/dm/block_device.hpp>
#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/dm/plain_key.hpp>
#include <blkcrypt/luks/container.hpp>
#include <blkcrypt/luks/reencrypt.hpp>
#include <blkcrypt/luks/reencrypt_shift.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/shash.hpp>

#include <algorithm>
#include <memory>
#include <optional>
#include <system_error>
#include <thread>
#include <tuple>

namespace blkcrypt::luks::luks2 {

namespace detail {

// Encrypts or decrypts buf in place as segment seg's data at IV sector
// iv_sector (512-byte units), through a dm-crypt target over memory.
Result<void> crypt_mem(Registry& reg, const Segment& seg, ConstBytes key, uint64_t iv_sector, Bytes buf, bool encrypt) {
    Result<dm::CryptTable> table = dm::parse_cipher_spec(seg.encryption);
    if (!table) return table.error();
    table->key.assign(key);
    table->sector_size = seg.sector_size;
    table->iv_offset = iv_sector;
    auto store = std::make_shared<MemoryStore>(buf.size());
    if (!encrypt) std::copy(buf.begin(), buf.end(), store->data().begin());
    Result<std::unique_ptr<dm::CryptTarget>> t = dm::CryptTarget::create(reg, *table, store, buf.size() / 512);
    if (!t) return t.error();
    dm::Bio bio;
    bio.dir = encrypt ? dm::BioDir::Write : dm::BioDir::Read;
    bio.vecs.push_back(SgEntry{buf.data(), buf.size()});
    if (Status s = (*t)->submit_sync(bio); s != Status::Ok)
        return make_error(s, std::string("cannot ") + (encrypt ? "encrypt" : "decrypt") + " with " + seg.encryption);
    t->reset();
    if (encrypt) std::copy(store->data().begin(), store->data().end(), buf.begin());
    return {};
}

}  // namespace detail

namespace {

Error bad(std::string msg) { return make_error(Status::Invalid, std::move(msg)); }

constexpr uint64_t kMaxHotzone = 1ull << 30;      // LUKS2_REENCRYPT_MAX_HOTZONE_LENGTH
constexpr uint64_t kNoneHotzone = 20ull << 20;    // cryptsetup's default step without resilience
constexpr std::size_t kIoChunk = 8u << 20;        // memory per transform pass (the engine splits it over its workers)
constexpr const char* kIntegrityChecksum =
    "Resilience checksum cannot protect a device with an integrity profile (a block whose new data landed without "
    "its tag, which holds a random IV, is neither the old nor the new one): use --resilience journal.";

bool has_flag(const Segment& s, std::string_view f) { return std::count(s.flags.begin(), s.flags.end(), f) > 0; }

// A dm-crypt target for segment seg's data on the device (base: the data
// start in bytes, iv_tweak in 512-byte sectors), over all `bytes` of it:
// reads decrypt from the device, writes encrypt onto it, on the engine's
// worker threads (one per core), as the kernel's dm-crypt does for
// cryptsetup's reencryption.
Result<std::unique_ptr<dm::CryptTarget>> segment_target(Registry& reg, const Segment& seg, ConstBytes key,
                                                        BackingStore& dev, uint64_t base, uint64_t iv_tweak,
                                                        uint64_t bytes) {
    Result<dm::CryptTable> table = dm::parse_cipher_spec(seg.encryption);
    if (!table) return table.error();
    table->key.assign(key);
    table->sector_size = seg.sector_size;
    table->iv_offset = iv_tweak;
    table->offset = base / 512;
    auto borrowed = std::shared_ptr<BackingStore>(&dev, [](BackingStore*) {});
    dm::CryptTargetOptions o;
    o.max_request = 1u << 20;
    return dm::CryptTarget::create(reg, *table, borrowed, bytes / 512, o);
}

// A segment with an integrity profile as cryptsetup stacks it (the
// Volume luks2_open makes for segment 0): its kernel AEAD cipher over the
// dm-integrity device whose superblock is at the segment offset.
Result<luks::Volume> integrity_volume(const Segment& seg, ConstBytes key) {
    if (seg.integrity->journal_encryption != "none" || seg.integrity->journal_integrity != "none")
        return make_error(Status::Unsupported, "LUKS2 integrity with journal encryption or integrity is not supported");
    auto p = luks::integrity_profile(seg.encryption, seg.integrity->type);
    if (!p) return p.error();
    if (key.size() <= seg.integrity->key_size.value_or(p->key_size))
        return bad("the volume key is too short for integrity " + seg.integrity->type);
    auto table = dm::parse_crypt_args(p->cipher + " - 0 1 integrity:" + std::to_string(p->tag_size) + ":aead");
    if (!table) return table.error();
    table->key.assign(key);
    table->sector_size = seg.sector_size;
    table->iv_large_sectors = false;
    table->iv_offset = seg.iv_tweak;
    table->offset = 0;
    luks::Volume v;
    v.version = luks::Version::Luks2;
    v.table = std::move(*table);
    v.integrity = luks::VolumeIntegrity{seg.integrity->type, seg.offset / 512, p->tag_size};
    return v;
}

Status bio_sync(dm::CryptTarget& t, dm::BioDir dir, uint64_t off, uint8_t* p, std::size_t n) {
    dm::Bio bio;
    bio.sector = off / 512;
    bio.dir = dir;
    bio.vecs.push_back(SgEntry{p, n});
    return t.submit_sync(bio);
}

Status write_all(BackingStore& dev, uint64_t off, ConstBytes b) {
    if (Status s = dev.write(off, b); s != Status::Ok) return s;
    return dev.flush();
}

struct Run {
    Registry& reg;
    BackingStore& dev;   // the header (and the resilience area)
    BackingStore& data;  // the data: dev itself unless the header is detached
    Metadata md;
    ReencryptState st;
    SecureBuffer vk_old, vk_new;
    Segment old_seg, new_seg;  // the backups: the data's two forms
    uint64_t base = 0, tweak = 0, data_size = 0, align = 512;
    // The data through each key; null for a linear (plaintext) side.
    std::unique_ptr<dm::CryptTarget> old_t, new_t;
    std::vector<uint8_t> buf;  // rekey's chunk, kept from step to step (its pages stay mapped)
    std::vector<uint8_t> pipe;  // rekey_pipelined's chunks, kept likewise
    // With an integrity profile: the two stacks cryptsetup would load, over
    // the one dm-integrity device (mode D: data and tag written in place,
    // the journal left clean), and its layout. Offsets are then logical
    // (in the dm-integrity device) and data_size is what it provides.
    std::shared_ptr<dm::BlockDevice> old_d, new_d;
    std::optional<integrity::Geometry> geo;

    Result<void> make_targets() {
        if (old_seg.integrity) {
            auto borrowed = std::shared_ptr<BackingStore>(&data, [](BackingStore*) {});
            for (auto [seg, key, out] : {std::tuple{&old_seg, &vk_old, &old_d}, std::tuple{&new_seg, &vk_new, &new_d}}) {
                auto v = integrity_volume(*seg, *key);
                if (!v) return v.error();
                if (!geo) {
                    auto g = luks::integrity_geometry(*v, data);
                    if (!g) return g.error();
                    geo = *g;
                }
                auto d = luks::integrity_device(reg, *v, borrowed, {.read_only = false, .mode = 'D'});
                if (!d) return d.error();
                *out = std::move(*d);
            }
            return {};
        }
        if (old_seg.type == "crypt") {
            auto o = segment_target(reg, old_seg, vk_old, data, base, tweak, data_size);
            if (!o) return o.error();
            old_t = std::move(*o);
        }
        if (new_seg.type == "crypt") {
            auto n = segment_target(reg, new_seg, vk_new, data, base, tweak, data_size);
            if (!n) return n.error();
            new_t = std::move(*n);
        }
        return {};
    }

    // [off, off + n) of the data (relative to its start) through target t,
    // or as stored when t is null (a linear segment).
    Status io(bool to_new, dm::BioDir dir, uint64_t off, uint8_t* p, std::size_t n) {
        if (dm::BlockDevice* d = (to_new ? new_d : old_d).get()) {
            if (dir == dm::BioDir::Read) return dm::read_sync(*d, off, Bytes(p, n));
            return dm::write_sync(*d, off, ConstBytes(p, n));
        }
        if (dm::CryptTarget* t = (to_new ? new_t : old_t).get()) return bio_sync(*t, dir, off, p, n);
        if (dir == dm::BioDir::Read) return data.read(base + off, Bytes(p, n));
        return data.write(base + off, ConstBytes(p, n));
    }

    Result<void> reload() { return detail::read_reencryption(reg, dev, md, st); }

    // rekey of a whole hotzone between two keys: reads (decrypting on the
    // old target's workers) and writes (encrypting on the new one's) stay
    // in flight together, so one chunk goes out while the next converts;
    // one at a time, the steps of a chunk would leave a core idle.
    Result<void> rekey_pipelined(uint64_t at, uint64_t len) {
        constexpr std::size_t kChunk = 1u << 20, kDepth = 4;
        // A chunk's memory is read into and written from; it is reused once
        // its write is retired: kDepth reads plus kDepth writes in flight.
        pipe.resize(2 * kDepth * kChunk);
        bool write_failed = false;
        dm::BioRing writes(*new_t, kDepth, 0, [&](const dm::RetiredBio& r) {
            if (r.status != Status::Ok) write_failed = true;
            else data.start_writeback(base + r.sector * 512, r.data.size());  // out while the rest converts
            return r.status;
        });
        dm::BioRing reads(*old_t, kDepth, 0, [&](const dm::RetiredBio& r) {
            if (r.status != Status::Ok) return r.status;
            const Status s = writes.submit(r.sector, dm::BioDir::Write, r.data);
            if (s != Status::Ok) write_failed = true;
            return s;
        });
        Status s = Status::Ok;
        for (uint64_t pos = 0, i = 0; pos < len && s == Status::Ok; ++i) {
            const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(kChunk, len - pos));
            s = reads.submit((at + pos) / 512, dm::BioDir::Read, Bytes(pipe.data() + (i % (2 * kDepth)) * kChunk, n));
            pos += n;
        }
        if (s == Status::Ok) s = reads.finish();
        if (s == Status::Ok) s = writes.finish();
        if (s != Status::Ok) {
            reads.drain();
            writes.drain();
            return make_error(s, write_failed ? "cannot write the data" : "cannot read the data with " + old_seg.encryption);
        }
        if (Status f = data.flush(); f != Status::Ok) return make_error(f, "cannot flush the data");
        return {};
    }

    // Re-encrypts [at, at + len) of the data (offsets relative to the
    // data start), old key to new; with redo, only the blocks it marks.
    Result<void> rekey(uint64_t at, uint64_t len, const std::vector<bool>* redo = nullptr, uint64_t block = 0) {
        if (!redo && old_t && new_t && !geo) return rekey_pipelined(at, len);
        buf.resize(std::max(buf.size(), static_cast<std::size_t>(std::min<uint64_t>(kIoChunk, len))));
        for (uint64_t pos = 0; pos < len;) {
            const uint64_t n = std::min<uint64_t>(kIoChunk, len - pos);
            if (Status s = io(false, dm::BioDir::Read, at + pos, buf.data(), n); s != Status::Ok)
                return make_error(s, "cannot read the data with " + old_seg.encryption);
            if (!redo) {
                if (Status s = io(true, dm::BioDir::Write, at + pos, buf.data(), n); s != Status::Ok)
                    return make_error(s, "cannot write the data");
                // The disk writes this chunk while the next one converts, so
                // the step's flush waits for the tail only.
                if (!geo) data.start_writeback(base + at + pos, n);
            } else {
                for (uint64_t b = 0; b < n; b += block)
                    if ((*redo)[static_cast<std::size_t>((pos + b) / block)])
                        if (Status s = io(true, dm::BioDir::Write, at + pos + b, buf.data() + b, block);
                            s != Status::Ok)
                            return make_error(s, "cannot write the data");
            }
            pos += n;
        }
        if (new_d)
            if (Status s = new_d->flush(); s != Status::Ok) return make_error(s, "cannot flush the data");
        if (Status s = data.flush(); s != Status::Ok) return make_error(s, "cannot flush the data");
        return {};
    }

    // With integrity, before a step is marked: every block of the hotzone
    // must pass its tag under the old key, or the step could not decrypt
    // it and a crash recovery would stop at it again. A failure names the
    // first such block and leaves the header as it is (resumable).
    Result<void> check_old(uint64_t at, uint64_t len) {
        std::vector<uint8_t> buf(static_cast<std::size_t>(std::min<uint64_t>(kIoChunk, len)));
        for (uint64_t pos = 0; pos < len;) {
            const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(kIoChunk, len - pos));
            if (dm::read_sync(*old_d, at + pos, Bytes(buf.data(), n)) != Status::Ok) {
                for (uint64_t b = 0; b < n; b += align) {
                    const Status s = dm::read_sync(*old_d, at + pos + b, Bytes(buf.data(), align));
                    if (s != Status::Ok)
                        return make_error(s, "sector " + std::to_string((at + pos + b) / 512) +
                                                 " of the dm-integrity device fails its integrity check under the old "
                                                 "key (tampered, or never written since a format with "
                                                 "--integrity-no-wipe): the reencryption stops before it, nothing "
                                                 "written for this step");
                }
                return make_error(Status::IoError, "cannot read the hotzone with " + old_seg.encryption);
            }
            pos += n;
        }
        return {};
    }

    // With integrity: the bytes of one hotzone block as stored, its data
    // sectors plus its tag (the tag holds the random IV of the random-IV
    // modes, so data without its tag cannot be decrypted).
    uint64_t stored_bytes(uint64_t len) const { return geo ? len + len / align * geo->tag_size : len; }

    // With integrity: reads (or writes back) the hotzone [at, at + len) as
    // stored, into buf: its data sectors, then all its tags, walking the
    // interleave areas (each holds its tags, then 2^l2i data sectors).
    Status stored_io(bool write, uint64_t at, uint64_t len, uint8_t* buf) {
        const uint64_t area = uint64_t(1) << geo->log2_interleave_sectors;
        uint8_t* tags = buf + len;
        for (uint64_t pos = 0; pos < len;) {
            const uint64_t sector = (at + pos) / 512;
            const uint64_t n = std::min(len - pos, (area - (sector & (area - 1))) * 512);
            const uint64_t tn = n / align * geo->tag_size, toff = pos / align * geo->tag_size;
            Status s = write ? data.write(geo->data_offset(sector), ConstBytes(buf + pos, n))
                             : data.read(geo->data_offset(sector), Bytes(buf + pos, n));
            if (s != Status::Ok) return s;
            s = write ? data.write(geo->tag_offset(sector), ConstBytes(tags + toff, tn))
                      : data.read(geo->tag_offset(sector), Bytes(tags + toff, tn));
            if (s != Status::Ok) return s;
            pos += n;
        }
        return write ? data.flush() : Status::Ok;
    }

    Result<Shash> checksum_hash() const {
        Result<Shash> h = Shash::alloc(reg, dm::plain_hash_alg(st.hash));
        if (!h) return make_error(Status::Unsupported, "Hash algorithm " + st.hash + " is not available.");
        return h;
    }

    // The resilience data of the hotzone [at, at + len) before it changes:
    // hashes of its old ciphertext blocks, or a copy of that ciphertext.
    // A mappable data store is hashed or copied from its pages (no copy of
    // ours); otherwise it is read a chunk at a time.
    Result<void> protect(uint64_t at, uint64_t len) {
        if (old_d)
            if (auto r = check_old(at, len); !r) return r;
        if (st.area_type == "none") return {};
        const ConstBytes map = data.mapped();
        bool in_place = map.size() >= base + at + len;
        std::vector<uint8_t> raw;
        // The bytes [pos, pos + n) of the hotzone, n <= kIoChunk.
        auto chunk = [&](uint64_t pos, std::size_t n) -> Result<ConstBytes> {
            if (in_place) return map.subspan(static_cast<std::size_t>(base + at + pos), n);
            raw.resize(std::max(raw.size(), n));
            if (Status s = data.read(base + at + pos, Bytes(raw.data(), n)); s != Status::Ok)
                return make_error(s, "cannot read the hotzone");
            return ConstBytes(raw.data(), n);
        };
        // Done with a chunk: a mapped one's pages leave this process's
        // memory. If the file changed size meanwhile (a shrunk file's
        // mapping reads as zeros), the chunk is done again through read(),
        // which fails on a short file: true when it must be redone.
        auto redo = [&](uint64_t pos, std::size_t n) {
            if (!in_place) return false;
            data.release_mapped(base + at + pos, n);
            if (!data.changed()) return false;
            in_place = false;
            return true;
        };
        if (st.area_type == "journal") {
            if (geo) {  // data and tags, read through the integrity layout
                std::vector<uint8_t> stored(static_cast<std::size_t>(stored_bytes(len)));
                if (stored_bytes(len) > st.area_size) return bad("the hotzone is larger than the journal");
                if (Status s = stored_io(false, at, len, stored.data()); s != Status::Ok)
                    return make_error(s, "cannot read the hotzone");
                if (Status s = write_all(dev, st.area_offset, stored); s != Status::Ok) return make_error(s, "cannot write the journal");
                return {};
            }
            if (len > st.area_size) return bad("the hotzone is larger than the journal");
            for (uint64_t pos = 0; pos < len;) {
                const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(kIoChunk, len - pos));
                Result<ConstBytes> c = chunk(pos, n);
                if (!c) return c.error();
                if (Status s = dev.write(st.area_offset + pos, *c); s != Status::Ok)
                    return make_error(s, "cannot write the journal");
                if (redo(pos, n)) continue;
                dev.start_writeback(st.area_offset + pos, n);  // out while the next chunk is copied
                pos += n;
            }
            if (Status s = dev.flush(); s != Status::Ok) return make_error(s, "cannot write the journal");
            return {};
        }
        // Two hashers: the blocks of each chunk are split between this
        // thread and one helper, each hashing many blocks at once (the
        // driver's multi-buffer code: SHA-256 of 4 KiB blocks goes 16 at a
        // time with AVX-512).
        Result<Shash> h = checksum_hash();
        if (!h) return h.error();
        Result<ShashDesc> d1 = h->new_desc(), d2 = h->new_desc();
        if (!d1) return d1.error();
        if (!d2) return d2.error();
        d1->init();
        d2->init();
        const std::size_t hs = h->digestsize();
        const bool mb = h->statesize() > 0;
        std::vector<uint8_t> sums(static_cast<std::size_t>(len / st.hash_block) * hs);
        auto hash_blocks = [&](ShashDesc& d, ConstBytes c, uint64_t pos, std::size_t from, std::size_t to) {
            constexpr std::size_t kBatch = 64;
            ConstBytes in[kBatch];
            Bytes out[kBatch];
            for (std::size_t b = from; b < to;) {
                std::size_t k = 0;
                for (; k < kBatch && b < to; ++k, b += st.hash_block) {
                    const std::size_t i = static_cast<std::size_t>((pos + b) / st.hash_block);
                    in[k] = c.subspan(b, st.hash_block);
                    out[k] = Bytes(sums.data() + i * hs, hs);
                }
                if (mb) {
                    if (Status s = d.finup_mb(std::span(in, k), std::span(out, k)); s != Status::Ok) return s;
                } else {  // a hash without an exportable state: one at a time
                    for (std::size_t j = 0; j < k; ++j)
                        if (Status s = h->digest(in[j], out[j]); s != Status::Ok) return s;
                }
            }
            return Status::Ok;
        };
        for (uint64_t pos = 0; pos < len;) {
            const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(kIoChunk, len - pos));
            Result<ConstBytes> c = chunk(pos, n);
            if (!c) return c.error();
            const std::size_t half = n / st.hash_block / 2 * st.hash_block;
            Status s2 = Status::Ok;
            std::thread helper;
            try {
                helper = std::thread([&] { s2 = hash_blocks(*d2, *c, pos, half, n); });
            } catch (const std::system_error&) {  // no thread to be had: hash it all here
                s2 = hash_blocks(*d2, *c, pos, half, n);
            }
            const Status s1 = hash_blocks(*d1, *c, pos, 0, half);
            if (helper.joinable()) helper.join();
            if (s1 != Status::Ok || s2 != Status::Ok)
                return make_error(s1 != Status::Ok ? s1 : s2, "cannot hash the hotzone");
            if (redo(pos, n)) continue;
            pos += n;
        }
        if (Status s = write_all(dev, st.area_offset, sums); s != Status::Ok) return make_error(s, "cannot write the checksums");
        return {};
    }

    // reencrypt_recover_segment for the crashed hotzone [at, at + len).
    Result<void> recover(uint64_t at, uint64_t len) {
        if (st.area_type == "journal") {
            if (stored_bytes(len) > st.area_size) return bad("the crashed hotzone is larger than the journal");
            std::vector<uint8_t> copy(static_cast<std::size_t>(stored_bytes(len)));
            if (Status s = dev.read(st.area_offset, copy); s != Status::Ok) return make_error(s, "cannot read the journal");
            // With integrity the tags go back too: the hotzone is then the
            // old key's again, data and tags, whatever the crash tore.
            if (Status s = geo ? stored_io(true, at, len, copy.data()) : write_all(data, base + at, copy); s != Status::Ok)
                return make_error(s, "cannot restore the hotzone from the journal");
            return rekey(at, len);
        }
        if (st.area_type == "checksum") {
            Result<Shash> h = checksum_hash();
            if (!h) return h.error();
            const std::size_t hs = h->digestsize();
            const uint64_t blocks = len / st.hash_block;
            if (blocks * hs > st.area_size) return bad("the crashed hotzone has more blocks than the checksum area");
            std::vector<uint8_t> sums(static_cast<std::size_t>(blocks * hs)), raw(st.hash_block), cur(hs);
            if (Status s = dev.read(st.area_offset, sums); s != Status::Ok) return make_error(s, "cannot read the checksums");
            std::vector<bool> redo(static_cast<std::size_t>(blocks));
            for (uint64_t b = 0; b < blocks; ++b) {
                if (Status s = data.read(base + at + b * st.hash_block, raw); s != Status::Ok)
                    return make_error(s, "cannot read the hotzone");
                if (Status s = h->digest(raw, cur); s != Status::Ok) return make_error(s, "cannot hash the hotzone");
                // Still the old ciphertext: not yet re-encrypted.
                redo[static_cast<std::size_t>(b)] = std::equal(cur.begin(), cur.end(), sums.begin() + static_cast<std::ptrdiff_t>(b * hs));
            }
            return rekey(at, len, &redo, st.hash_block);
        }
        return make_error(Status::Unsupported,
                          "the crashed hotzone cannot be recovered with resilience " + st.area_type);
    }

    uint64_t hotzone(uint64_t want) const {
        uint64_t len = kNoneHotzone;
        if (st.area_type == "journal") len = geo ? st.area_size / (align + geo->tag_size) * align : st.area_size;
        if (st.area_type == "checksum") {
            Result<Shash> h = checksum_hash();
            len = h ? st.area_size / h->digestsize() * st.hash_block : 0;
        }
        len = std::min(len, kMaxHotzone);
        if (want) len = std::min(len, want);
        return len / align * align;
    }
};

// The backward run (cryptsetup's --decrypt of a detached header): old
// [0, p) | new [p, end), each step's hotzone the S bytes before p.
Result<void> run_backward(Run& run, const ReencryptRunOptions& opts, ReencryptRunResult& out) {
    // Where the data stands: p is the end of the old data (the hotzone's end
    // when one crashed), the data size when nothing is done.
    std::optional<uint64_t> old_end;
    std::optional<std::pair<uint64_t, uint64_t>> hot;
    for (const auto& [sid, seg] : run.md.segments) {
        const int id = sid;
        const Segment& s = seg;
        if (id == run.st.seg_previous || id == run.st.seg_final) continue;
        if (s.offset < run.base) return bad("a segment before the data start");
        const uint64_t rel = s.offset - run.base;
        const uint64_t len = s.size ? *s.size : run.data_size - std::min(rel, run.data_size);
        if (has_flag(s, "in-reencryption")) hot = std::make_pair(rel, len);
        else if (s.type == run.old_seg.type && rel == 0) old_end = len;
    }
    uint64_t p = hot ? hot->first + hot->second : old_end ? *old_end : 0;
    if (p > run.data_size)
        return bad("the device ends before the data this reencryption already converted (it shrank?): "
                   "restore its size, then resume");
    auto map = [&](uint64_t plain_end, uint64_t h) -> Result<void> {
        Result<std::string> text = reencrypt_backward_progress_json(run.md, run.st, run.data_size, plain_end, h);
        if (!text) return text.error();
        if (auto r = write_metadata(run.reg, run.dev, run.md, *text); !r) return r;
        return run.reload();
    };
    // Once the hotzone at offset 0 is converted, the header goes straight to
    // the finished one: the map in between (one linear segment, the
    // requirement still set) is never written. cryptsetup 2.6.1 reads a
    // backward map with a single live segment as "nothing done yet"
    // (_offset_backward: one segment, so the next hotzone ends at the device
    // end) and, resuming it, decrypts the plaintext again with the old key.
    // Its own run writes that map before its finish, and its repair of a
    // crash in the last hotzone leaves it too; ours leaves neither.
    auto finish = [&]() -> Result<void> {
        ReencryptState done = run.st;
        done.crashed = false;  // the hotzone's data is written and flushed
        if (auto r = reencrypt_finish(run.reg, run.dev, run.md, done); !r) return r.error();
        out.finished = true;
        return {};
    };
    if (hot) {
        if (auto r = run.recover(hot->first, hot->second); !r) return r;
        p = hot->first;
        out.recovered = true;
        if (p == 0) return finish();  // also for repair: nothing is left to run
        if (auto r = map(p, 0); !r) return r;
    }
    if (opts.recover_only) return {};
    while (p > 0) {
        const uint64_t len = std::min(out.hotzone, p);
        const uint64_t at = p - len;
        if (auto r = run.protect(at, len); !r) return r;
        if (auto r = map(p, len); !r) return r;
        if (auto r = run.rekey(at, len); !r) return r;
        p = at;
        if (p == 0) break;
        if (auto r = map(p, 0); !r) return r;
        if (opts.progress && !opts.progress(run.data_size - p, run.data_size)) return {};
    }
    if (opts.progress) (void)opts.progress(run.data_size, run.data_size);
    return finish();
}

// cryptsetup's --decrypt --header NEW of an in-device header (v3, a data
// shift): the ciphertext of data x lies at S + x (the head's, [0, M), also
// at 0: the moved segment), the plaintext goes to x. Forward from M in
// hotzones of S bytes (each read from S further on, so a crashed one is
// re-read from its source: datashift), then the moved segment decrypted in
// place under the area's checksum or journal, then the tail wiped and the
// header finished.
Result<ReencryptRunResult> run_decrypt_shift(Run& run, ConstBytes passphrase, const ReencryptRunOptions& opts) {
    if (run.st.repair_needed) return bad("Reencryption metadata is invalid; run cryptsetup repair first.");
    if (run.st.direction != "forward" || (run.st.area_type != "datashift-checksum" && run.st.area_type != "datashift-journal"))
        return make_error(Status::Unsupported, "a decryption with a moved segment must be forward, datashift-checksum or -journal");
    const Segment mov = run.md.segments.at(run.st.seg_moved), prev = run.md.segments.at(run.st.seg_previous);
    const uint64_t shift = run.st.shift_size, moved = mov.size.value_or(0);
    if (mov.type != "crypt" || prev.type != "crypt" || mov.offset != 0 || prev.offset != shift || prev.iv_tweak != 0 ||
        run.md.segments.at(run.st.seg_final).type != "linear" || moved == 0)
        return bad("the backup segments do not describe a decryption with a data shift");
    const uint64_t align = std::max<uint64_t>(prev.sector_size, 512);
    if (run.data.size() < shift + moved) return bad("the device ends before its data (has it shrunk?)");
    const uint64_t size = (run.data.size() - shift) / align * align;
    if (moved > size) return bad("the device ends before its moved segment (has it shrunk?)");

    // Where the data stands.
    uint64_t done = moved;
    bool pending_crypt = false, plain_head = false;
    std::optional<std::pair<uint64_t, uint64_t>> hot;
    for (const auto& [sid, seg] : run.md.segments) {
        const int id = sid;
        const Segment& s = seg;
        if (id == run.st.seg_previous || id == run.st.seg_final || id == run.st.seg_moved) continue;
        if (has_flag(s, "in-reencryption")) {
            hot = std::make_pair(s.offset, s.size.value_or(0));
        } else if (s.type == "crypt") {
            pending_crypt = true;
        } else if (s.offset == moved && moved > 0 && !plain_head) {
            done = s.size ? moved + *s.size : size;
        } else if (s.offset == 0) {
            plain_head = true;  // the moved segment already decrypted
        }
    }
    if (done > size || (hot && hot->first + hot->second > size))
        return bad("the device ends before the data this reencryption already converted (it shrank?): "
                   "restore its size, then resume");
    if (done % align || (hot && (hot->first % align || hot->second == 0 || hot->second % align ||
                                 (hot->first == 0 ? hot->second != moved : hot->first != done || hot->second > shift))))
        return bad("the segment map is not one of a decryption with a data shift");

    ReencryptRunResult out;
    out.data_size = size;
    out.hotzone = shift;
    // The finish: the old ciphertext past the plaintext wiped, then the
    // header (cryptsetup wipes [D, D + S) too, before its keyslots go).
    auto finish = [&]() -> Result<ReencryptRunResult> {
        const uint64_t end = std::min(size + shift, run.data.size());
        if (auto r = detail::wipe_random(run.data, size, end - size); !r) return r.error();
        ReencryptState fin = run.st;
        fin.crashed = false;  // the last hotzone's data is written and flushed
        if (auto r = reencrypt_finish(run.reg, run.dev, run.md, fin); !r) return r.error();
        out.finished = true;
        return out;
    };
    // Every live segment plaintext: only the finish is left (cryptsetup
    // killed after its last step); it needs no key. cryptsetup 2.6.1 would
    // take this map for the moved step still to run (reencrypt_offset_forward_moved:
    // no crypt segment, offset 0) and decrypt the plaintext head again.
    if (!hot && !pending_crypt && plain_head) return finish();

    Result<ReencryptKeys> keys = reencrypt_unlock(run.reg, run.dev, run.md, run.st, passphrase);
    if (!keys) return keys.error();
    if (keys->old_key.empty()) return make_error(Status::NoKey, "No key available with this passphrase.");
    run.vk_old = std::move(keys->old_key);
    if (auto r = reencrypt_verify(run.reg, run.md, run.st, run.vk_old, {}); !r) return r.error();
    run.old_seg = prev;
    run.new_seg = run.md.segments.at(run.st.seg_final);
    run.align = align;
    auto from_head = segment_target(run.reg, prev, run.vk_old, run.data, shift, 0, size);
    if (!from_head) return from_head.error();
    std::unique_ptr<dm::CryptTarget> src = std::move(*from_head);

    const std::string moved_resilience = run.st.area_type.substr(std::string("datashift-").size());
    auto map = [&](uint64_t d, uint64_t h, bool moved_hot) -> Result<void> {
        Result<std::string> text = decrypt_shift_progress_json(run.md, run.st, size, d, h, moved_hot);
        if (!text) return text.error();
        if (auto r = write_metadata(run.reg, run.dev, run.md, *text); !r) return r;
        return run.reload();
    };
    // [at, at + len): read S further on through the old key, written as
    // plaintext in place.
    auto shifted = [&](uint64_t at, uint64_t len) -> Result<void> {
        run.buf.resize(std::max(run.buf.size(), static_cast<std::size_t>(std::min<uint64_t>(kIoChunk, len))));
        for (uint64_t pos = 0; pos < len;) {
            const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(kIoChunk, len - pos));
            if (Status s = bio_sync(*src, dm::BioDir::Read, at + pos, run.buf.data(), n); s != Status::Ok)
                return make_error(s, "cannot read the data with " + prev.encryption);
            if (Status s = run.data.write(at + pos, ConstBytes(run.buf.data(), n)); s != Status::Ok)
                return make_error(s, "cannot write the data");
            pos += n;
        }
        if (Status s = run.data.flush(); s != Status::Ok) return make_error(s, "cannot flush the data");
        return {};
    };
    // The moved segment is converted in place by the engine's checksum or
    // journal code: the old side over [0, M), the resilience stripped of
    // its "datashift-" (as cryptsetup switches to the moved segment's).
    auto moved_run = [&]() -> Result<void> {
        run.st.area_type = moved_resilience;
        run.base = 0;
        run.tweak = mov.iv_tweak;
        run.data_size = moved;
        return run.make_targets();
    };
    if (hot) {
        out.recovered = true;
        if (hot->first == 0) {
            if (auto r = moved_run(); !r) return r.error();
            if (auto r = run.recover(0, moved); !r) return r.error();
            return finish();  // nothing is left to run, for repair too
        }
        if (auto r = shifted(hot->first, hot->second); !r) return r.error();
        done = hot->first + hot->second;
        if (auto r = map(done, 0, false); !r) return r.error();
    }
    if (opts.recover_only) return out;
    while (done < size) {
        const uint64_t len = std::min(shift, size - done);
        if (auto r = map(done, len, false); !r) return r.error();
        if (auto r = shifted(done, len); !r) return r.error();
        done += len;
        if (auto r = map(done, 0, false); !r) return r.error();
        if (opts.progress && !opts.progress(done - moved, size)) return out;
    }
    // The last step; from its map straight to the finished header (the map
    // between, one linear segment, is the one cryptsetup would run again).
    const ReencryptState kept = run.st;
    if (auto r = moved_run(); !r) return r.error();
    if (auto r = run.protect(0, moved); !r) return r.error();
    run.st = kept;
    if (auto r = map(size, 0, true); !r) return r.error();
    run.st.area_type = moved_resilience;
    if (auto r = run.rekey(0, moved); !r) return r.error();
    run.st = kept;
    if (auto r = run.reload(); !r) return r.error();
    if (opts.progress) (void)opts.progress(size, size);
    return finish();
}

}  // namespace

Result<ReencryptRunResult> reencrypt_run(Registry& reg, BackingStore& device, ConstBytes passphrase,
                                         const ReencryptRunOptions& opts) {
    Run run{reg, device, opts.data ? *opts.data : device, {}, {}, {}, {}, {}, {}};
    if (auto r = run.reload(); !r) return r.error();
    // In-place encryption with a data shift has its own engine.
    if (opts.device_size && run.st.area_type.rfind("datashift", 0) == 0)
        return make_error(Status::Unsupported, "--device-size cannot be used with a data shift (datashift resilience)");
    if (run.st.mode == "encrypt" && run.st.area_type == "datashift") return encrypt_shift_run(reg, device, passphrase, opts);
    if (run.st.mode == "decrypt" && run.st.seg_moved >= 0) return run_decrypt_shift(run, passphrase, opts);
    if (run.st.repair_needed) return bad("Reencryption metadata is invalid; run cryptsetup repair first.");
    // A forward re-key, or --encrypt / --decrypt with a detached header (one
    // side linear, no data shift).
    // cryptsetup runs the latter backward (from the end of the data).
    const bool plain_side = run.st.mode == "encrypt" || (run.st.mode == "decrypt" && run.st.version == 2);
    const bool backward = run.st.mode == "decrypt" && run.st.direction == "backward";
    if ((run.st.mode != "reencrypt" && !plain_side) || (run.st.direction != "forward" && !backward) || run.st.seg_moved >= 0 ||
        (run.st.area_type != "checksum" && run.st.area_type != "journal" && run.st.area_type != "none"))
        return make_error(Status::Unsupported, "only a forward re-key (checksum, journal or none) is run yet");
    if (backward && !run.st.crashed) {
        // Every live segment linear: all data is plaintext and only the
        // finish is left, which needs no key. cryptsetup's finish wipes each
        // old keyslot's area before it drops the keyslot from the JSON, so
        // killed there, a listed keyslot opens nothing any more.
        bool all_plain = true;
        for (const auto& [id, seg] : run.md.segments)
            if (id != run.st.seg_previous && id != run.st.seg_final && seg.type != "linear") all_plain = false;
        if (all_plain) {
            if (auto r = reencrypt_finish(reg, device, run.md, run.st); !r) return r.error();
            ReencryptRunResult out;
            out.finished = true;
            return out;
        }
    }
    Result<ReencryptKeys> keys = reencrypt_unlock(reg, device, run.md, run.st, passphrase);
    if (!keys) return keys.error();
    if (keys->old_key.empty() && !keys->new_key.empty()) {
        // cryptsetup's finish removes the old keyslots one header write at a
        // time before it drops the requirement: killed in between, every
        // data segment is already the new key's and only the cleanup is left.
        bool all_new = true;
        for (const auto& [id, seg] : run.md.segments) {
            if (id == run.st.seg_previous || id == run.st.seg_final) continue;
            bool is_new = false;
            for (const auto& [did, d] : run.md.digests)
                if (did == run.st.digest_new && std::count(d.segments.begin(), d.segments.end(), id)) is_new = true;
            if (!is_new || has_flag(seg, "in-reencryption")) all_new = false;
        }
        bool old_keyslot_left = false;
        for (const auto& [did, d] : run.md.digests)
            if (did == run.st.digest_old && !d.keyslots.empty()) old_keyslot_left = true;
        if (all_new && !old_keyslot_left) {
            if (auto r = reencrypt_finish(reg, device, run.md, run.st); !r) return r.error();
            ReencryptRunResult out;
            out.finished = true;
            return out;
        }
    }
    if (run.st.digest_old >= 0 && run.st.digest_new >= 0 && (keys->old_key.empty() || keys->new_key.empty()))
        return make_error(Status::NoKey, "the passphrase opens only one of the two volume keys");
    if ((run.st.digest_old >= 0 && keys->old_key.empty()) || (run.st.digest_new >= 0 && keys->new_key.empty()))
        return make_error(Status::NoKey, "No key available with this passphrase.");
    run.vk_old = std::move(keys->old_key);
    run.vk_new = std::move(keys->new_key);
    if (auto r = reencrypt_verify(reg, run.md, run.st, run.vk_old, run.vk_new); !r) return r.error();

    run.old_seg = run.md.segments.at(run.st.seg_previous);
    run.new_seg = run.md.segments.at(run.st.seg_final);
    if (run.old_seg.offset != run.new_seg.offset || run.old_seg.iv_tweak != run.new_seg.iv_tweak)
        return bad("the backup segments of a re-key differ in place");
    run.base = run.old_seg.offset;
    run.tweak = run.old_seg.iv_tweak;
    run.align = std::max({run.old_seg.sector_size, run.new_seg.sector_size, 512u});
    if (run.new_seg.integrity && !run.old_seg.integrity)
        return make_error(Status::Unsupported, "adding an integrity profile by reencryption is not supported");
    if (run.old_seg.integrity) {
        // A re-key only: the dm-integrity device (superblock, tag size,
        // block size) is kept, so both sides must fit it; and checksum
        // resilience cannot tell a block whose new data landed without its
        // tag, so only the journal (or none) protects the hotzone.
        if (plain_side || backward || !run.new_seg.integrity || run.new_seg.integrity->type != run.old_seg.integrity->type ||
            run.new_seg.sector_size != run.old_seg.sector_size)
            return make_error(Status::Unsupported, "only a re-key that keeps the integrity profile and the sector size is "
                                                   "run on a device with an integrity profile");
        if (run.st.area_type == "checksum") return make_error(Status::Unsupported, kIntegrityChecksum);
    }
    if (run.old_seg.size) {
        run.data_size = *run.old_seg.size;
    } else if (run.old_seg.integrity) {
        auto v = integrity_volume(run.old_seg, run.vk_old);
        if (!v) return v.error();
        auto g = luks::integrity_geometry(*v, run.data);
        if (!g) return g.error();
        run.data_size = g->provided_data_sectors * 512 / run.align * run.align;
    } else {
        if (run.data.size() < run.base) return bad("the device ends before its data");
        run.data_size = (run.data.size() - run.base) / run.align * run.align;
    }
    if (run.st.area_type == "checksum" && (run.st.hash_block % 512 || run.align % 512))
        return bad("bad checksum block size");
    const bool fixed = opts.device_size != 0;
    if (fixed) {
        if (backward || run.old_seg.integrity)
            return make_error(Status::Unsupported,
                              "--device-size is for a forward reencryption of a device without an integrity profile");
        if (opts.device_size > run.data_size) return bad("Reduced data size is larger than real device size.");
        if (opts.device_size % run.align)
            return bad("Data device is not aligned to encryption sector size (" + std::to_string(run.align) + " bytes).");
        run.data_size = opts.device_size;
    }

    if (auto r = run.make_targets(); !r) return r.error();

    ReencryptRunResult out;
    out.data_size = run.data_size;
    out.hotzone = run.hotzone(opts.hotzone_size);
    if (out.hotzone == 0) return bad("the resilience area holds no hotzone");

    if (backward) {
        if (auto r = run_backward(run, opts, out); !r) return r.error();
        return out;
    }

    // Where the data stands: new segments from the start, a crashed hotzone.
    uint64_t done = 0;
    std::optional<std::pair<uint64_t, uint64_t>> hot;
    for (const auto& [sid, seg] : run.md.segments) {
        const int id = sid;
        const Segment& s = seg;
        if (id == run.st.seg_previous || id == run.st.seg_final) continue;
        const bool is_hot = has_flag(s, "in-reencryption");
        if (s.offset < run.base) return bad("a segment before the data start");
        const uint64_t rel = s.offset - run.base;
        const uint64_t len = s.size ? *s.size : run.data_size - std::min(rel, run.data_size);
        if (is_hot) {
            hot = std::make_pair(rel, len);
        } else {
            bool is_new = false;
            for (const auto& [did, d] : run.md.digests)
                if (did == run.st.digest_new && std::count(d.segments.begin(), d.segments.end(), id)) is_new = true;
            // --keep-key: both forms share the digest; the cipher and sector
            // size tell them apart (a run that changes neither is refused).
            if (run.st.digest_old == run.st.digest_new)
                is_new = s.encryption == run.new_seg.encryption && s.sector_size == run.new_seg.sector_size;
            if (is_new && rel == 0) done = len;
        }
    }
    if (fixed && done > run.data_size)
        return bad("--device-size " + std::to_string(run.data_size) + " is below the " + std::to_string(done) +
                   " bytes already reencrypted");
    // The device ends before data already converted (or in flight): it
    // shrank since. Going on would finish a header over lost data.
    if (done > run.data_size || (hot && hot->first + hot->second > run.data_size))
        return bad("the device ends before the data this reencryption already converted (it shrank?): "
                   "restore its size, then resume");
    if (hot) {
        if (hot->first != done) return bad("the crashed hotzone does not follow the finished data");
        if (auto r = run.recover(hot->first, hot->second); !r) return r.error();
        done = hot->first + hot->second;
        out.recovered = true;
        // As backward (run_backward): the map "all converted, not finished"
        // is never written. A forward map with one live segment is
        // cryptsetup 2.6.1's "nothing done" too (_offset_forward), and its
        // resume would convert every sector a second time.
        if (done < run.data_size) {
            if (auto r = reencrypt_write_progress(reg, device, run.md, run.st, run.data_size, done, 0, fixed); !r)
                return r.error();
            if (auto r = run.reload(); !r) return r.error();
        }
    }
    if (opts.recover_only && done < run.data_size) return out;  // a repair of the last hotzone finishes

    while (done < run.data_size) {
        const uint64_t len = std::min(out.hotzone, run.data_size - done);
        if (auto r = run.protect(done, len); !r) return r.error();
        if (auto r = reencrypt_write_progress(reg, device, run.md, run.st, run.data_size, done, len, fixed); !r)
            return r.error();
        if (auto r = run.reload(); !r) return r.error();
        if (auto r = run.rekey(done, len); !r) return r.error();
        done += len;
        if (done == run.data_size) break;
        if (auto r = reencrypt_write_progress(reg, device, run.md, run.st, run.data_size, done, 0, fixed); !r)
            return r.error();
        if (auto r = run.reload(); !r) return r.error();
        if (opts.progress && !opts.progress(done, run.data_size)) return out;
    }
    if (opts.progress) (void)opts.progress(run.data_size, run.data_size);
    ReencryptState fin = run.st;
    fin.crashed = false;  // the last hotzone, still marked, is written and flushed
    if (auto r = reencrypt_finish(reg, device, run.md, fin); !r) return r.error();
    out.finished = true;
    return out;
}

}  // namespace blkcrypt::luks::luks2
