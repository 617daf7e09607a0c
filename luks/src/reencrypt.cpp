// The LUKS2 reencryption engine: a forward re-key step by step, with
// cryptsetup 2.6.1's resilience (luks2_reencrypt.c reencrypt_step,
// reencrypt_hotzone_protect_final, reencrypt_recover_segment). Ciphers are
// named and run by the dm-crypt engine; the metadata is reencrypt_meta.cpp's.
#include "luks2_internal.hpp"

#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/dm/plain_key.hpp>
#include <blkcrypt/luks/reencrypt.hpp>
#include <blkcrypt/luks/reencrypt_shift.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/shash.hpp>

#include <algorithm>
#include <memory>
#include <system_error>
#include <thread>

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

    Result<void> make_targets() {
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
    Status io(dm::CryptTarget* t, dm::BioDir dir, uint64_t off, uint8_t* p, std::size_t n) {
        if (t) return bio_sync(*t, dir, off, p, n);
        if (dir == dm::BioDir::Read) return data.read(base + off, Bytes(p, n));
        return data.write(base + off, ConstBytes(p, n));
    }

    Result<void> reload() {
        Result<Header> h = read_header(reg, dev);
        if (!h) return h.error();
        md = std::move(h->md);
        Result<std::optional<ReencryptState>> s = reencrypt_state(md);
        if (!s) return s.error();
        if (!*s) return bad("Device is not marked for LUKS2 reencryption.");
        st = std::move(**s);
        return {};
    }

    // Re-encrypts [at, at + len) of the data (offsets relative to the
    // data start), old key to new; with redo, only the blocks it marks.
    Result<void> rekey(uint64_t at, uint64_t len, const std::vector<bool>* redo = nullptr, uint64_t block = 0) {
        std::vector<uint8_t> buf(static_cast<std::size_t>(std::min<uint64_t>(kIoChunk, len)));
        for (uint64_t pos = 0; pos < len;) {
            const uint64_t n = std::min<uint64_t>(kIoChunk, len - pos);
            if (Status s = io(old_t.get(), dm::BioDir::Read, at + pos, buf.data(), n); s != Status::Ok)
                return make_error(s, "cannot read the data with " + old_seg.encryption);
            if (!redo) {
                if (Status s = io(new_t.get(), dm::BioDir::Write, at + pos, buf.data(), n); s != Status::Ok)
                    return make_error(s, "cannot write the data");
            } else {
                for (uint64_t b = 0; b < n; b += block)
                    if ((*redo)[static_cast<std::size_t>((pos + b) / block)])
                        if (Status s = io(new_t.get(), dm::BioDir::Write, at + pos + b, buf.data() + b, block);
                            s != Status::Ok)
                            return make_error(s, "cannot write the data");
            }
            pos += n;
        }
        if (Status s = data.flush(); s != Status::Ok) return make_error(s, "cannot flush the data");
        return {};
    }

    Result<Shash> checksum_hash() const {
        Result<Shash> h = Shash::alloc(reg, dm::plain_hash_alg(st.hash));
        if (!h) return make_error(Status::Unsupported, "Hash algorithm " + st.hash + " is not available.");
        return h;
    }

    // The resilience data of the hotzone [at, at + len) before it changes:
    // hashes of its old ciphertext blocks (read a chunk at a time), or a
    // copy of that ciphertext.
    Result<void> protect(uint64_t at, uint64_t len) {
        if (st.area_type == "none") return {};
        if (st.area_type == "journal") {
            std::vector<uint8_t> raw(static_cast<std::size_t>(len));
            if (Status s = data.read(base + at, raw); s != Status::Ok) return make_error(s, "cannot read the hotzone");
            if (Status s = write_all(dev, st.area_offset, raw); s != Status::Ok) return make_error(s, "cannot write the journal");
            return {};
        }
        // Two hashers: the blocks of each chunk are split between this
        // thread and one helper (a 1 GiB hotzone is ~0.5 s of SHA-256).
        Result<Shash> h = checksum_hash();
        if (!h) return h.error();
        Result<Shash> h2 = checksum_hash();
        if (!h2) return h2.error();
        const std::size_t hs = h->digestsize();
        std::vector<uint8_t> sums(static_cast<std::size_t>(len / st.hash_block) * hs);
        std::vector<uint8_t> raw(static_cast<std::size_t>(std::min<uint64_t>(kIoChunk, len)));
        auto hash_blocks = [&](Shash& hh, uint64_t pos, std::size_t from, std::size_t to) {
            for (std::size_t b = from; b < to; b += st.hash_block) {
                const std::size_t i = static_cast<std::size_t>((pos + b) / st.hash_block);
                if (Status s = hh.digest(ConstBytes(raw.data() + b, st.hash_block), Bytes(sums.data() + i * hs, hs));
                    s != Status::Ok)
                    return s;
            }
            return Status::Ok;
        };
        for (uint64_t pos = 0; pos < len;) {
            const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(kIoChunk, len - pos));
            if (Status s = data.read(base + at + pos, Bytes(raw.data(), n)); s != Status::Ok)
                return make_error(s, "cannot read the hotzone");
            const std::size_t half = n / st.hash_block / 2 * st.hash_block;
            Status s2 = Status::Ok;
            std::thread helper;
            try {
                helper = std::thread([&] { s2 = hash_blocks(*h2, pos, half, n); });
            } catch (const std::system_error&) {  // no thread to be had: hash it all here
                s2 = hash_blocks(*h2, pos, half, n);
            }
            const Status s1 = hash_blocks(*h, pos, 0, half);
            if (helper.joinable()) helper.join();
            if (s1 != Status::Ok || s2 != Status::Ok)
                return make_error(s1 != Status::Ok ? s1 : s2, "cannot hash the hotzone");
            pos += n;
        }
        if (Status s = write_all(dev, st.area_offset, sums); s != Status::Ok) return make_error(s, "cannot write the checksums");
        return {};
    }

    // reencrypt_recover_segment for the crashed hotzone [at, at + len).
    Result<void> recover(uint64_t at, uint64_t len) {
        if (st.area_type == "journal") {
            if (len > st.area_size) return bad("the crashed hotzone is larger than the journal");
            std::vector<uint8_t> copy(static_cast<std::size_t>(len));
            if (Status s = dev.read(st.area_offset, copy); s != Status::Ok) return make_error(s, "cannot read the journal");
            if (Status s = write_all(data, base + at, copy); s != Status::Ok)
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
        if (st.area_type == "journal") len = st.area_size;
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

}  // namespace

Result<ReencryptRunResult> reencrypt_run(Registry& reg, BackingStore& device, ConstBytes passphrase,
                                         const ReencryptRunOptions& opts) {
    Run run{reg, device, opts.data ? *opts.data : device, {}, {}, {}, {}, {}, {}};
    if (auto r = run.reload(); !r) return r.error();
    // In-place encryption with a data shift has its own engine.
    if (run.st.mode == "encrypt" && run.st.area_type == "datashift") return encrypt_shift_run(reg, device, passphrase, opts);
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
    if (run.old_seg.size) {
        run.data_size = *run.old_seg.size;
    } else {
        if (run.data.size() < run.base) return bad("the device ends before its data");
        run.data_size = (run.data.size() - run.base) / run.align * run.align;
    }
    if (run.st.area_type == "checksum" && (run.st.hash_block % 512 || run.align % 512))
        return bad("bad checksum block size");

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
            if (is_new && rel == 0) done = len;
        }
    }
    // The device ends before data already converted (or in flight): it
    // shrank since. Going on would finish a header over lost data.
    if (done > run.data_size || (hot && hot->first + hot->second > run.data_size))
        return bad("the device ends before the data this reencryption already converted (it shrank?): "
                   "restore its size, then resume");
    if (hot) {
        if (hot->first != done) return bad("the crashed hotzone does not follow the finished data");
        if (auto r = run.recover(hot->first, hot->second); !r) return r.error();
        done = hot->first + hot->second;
        if (auto r = reencrypt_write_progress(reg, device, run.md, run.st, run.data_size, done, 0); !r) return r.error();
        if (auto r = run.reload(); !r) return r.error();
        out.recovered = true;
    }
    if (opts.recover_only) return out;

    while (done < run.data_size) {
        const uint64_t len = std::min(out.hotzone, run.data_size - done);
        if (auto r = run.protect(done, len); !r) return r.error();
        if (auto r = reencrypt_write_progress(reg, device, run.md, run.st, run.data_size, done, len); !r) return r.error();
        if (auto r = run.reload(); !r) return r.error();
        if (auto r = run.rekey(done, len); !r) return r.error();
        done += len;
        if (auto r = reencrypt_write_progress(reg, device, run.md, run.st, run.data_size, done, 0); !r) return r.error();
        if (auto r = run.reload(); !r) return r.error();
        if (opts.progress && !opts.progress(done, run.data_size)) return out;
    }
    if (auto r = reencrypt_finish(reg, device, run.md, run.st); !r) return r.error();
    out.finished = true;
    return out;
}

}  // namespace blkcrypt::luks::luks2
