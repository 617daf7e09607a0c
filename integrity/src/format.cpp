// integritysetup format + the kernel's constructor, and the tags of zeros
// in place of cryptsetup's wipe pass (see format.hpp).
#include <blkcrypt/integrity/format.hpp>

#include <blkcrypt/integrity/journal.hpp>
#include <blkcrypt/integrity/journal_crypt.hpp>
#include <blkcrypt/random.hpp>
#include <blkcrypt/shash.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>

namespace blkcrypt::integrity {

namespace {

uint64_t load_tag(const uint8_t* p, std::size_t n) {
    uint64_t v = 0;
    std::memcpy(&v, p, n);  // little-endian hosts only, as the rest of blkcrypt
    return v;
}

// Blocks of zeros a slow-path fill digests at a time.
constexpr std::size_t kZeroBufferBytes = 1 << 20;

}  // namespace

Result<ZeroTags> ZeroTags::create(const TagHash& hash) {
    ZeroTags z(hash);
    const uint32_t ts = hash.tag_size(), bs = hash.block_size();
    const std::string_view alg = hash.alg_name();
    if (ts > 8 || (alg != "crc32c" && alg != "crc32")) return z;
    // tag(s) = tag(0) ^ XOR over the set bits i of s of (tag(2^i) ^ tag(0)):
    // a CRC of a fixed-length message is affine in its bits.
    std::vector<uint8_t> zeros(bs);
    std::vector<uint8_t> tag(ts);
    auto tag_of = [&](uint64_t sector) -> Result<uint64_t> {
        if (Status s = hash.compute(sector, zeros, tag); s != Status::Ok)
            return make_error(s, "integrity: cannot compute a tag");
        return load_tag(tag.data(), ts);
    };
    auto base = tag_of(0);
    if (!base) return base.error();
    std::array<uint64_t, 64> delta{};
    for (int i = 0; i < 64; ++i) {
        auto t = tag_of(uint64_t(1) << i);
        if (!t) return t.error();
        delta[i] = *t ^ *base;
    }
    z.base_ = *base;
    z.table_.assign(8, {});
    for (int b = 0; b < 8; ++b)
        for (unsigned v = 0; v < 256; ++v) {
            uint64_t x = 0;
            for (int k = 0; k < 8; ++k)
                if (v & (1u << k)) x ^= delta[b * 8 + k];
            z.table_[b][v] = x;
        }
    z.linear_ = true;
    // The derivation holds only for an affine hash: checked on a few
    // sectors (any other hash registered under these names falls back).
    for (uint64_t s : {uint64_t(8), uint64_t(123456) * 8, uint64_t(0x0123456789abcdefULL) & ~uint64_t(7),
                       ~uint64_t(0) << 3}) {
        uint8_t fast[8];
        auto slow = tag_of(s);
        if (!slow || z.fill(s, Bytes(fast, ts)) != Status::Ok || load_tag(fast, ts) != *slow) {
            z.linear_ = false;
            z.table_.clear();
            break;
        }
    }
    return z;
}

Status ZeroTags::fill(uint64_t sector, Bytes tags) const {
    const uint32_t ts = hash_->tag_size(), bs = hash_->block_size();
    if (tags.size() % ts) return Status::Invalid;
    const uint64_t n = tags.size() / ts;
    const uint64_t step = bs / kSectorSize;
    if (linear_) {
        for (uint64_t i = 0; i < n; ++i, sector += step) {
            uint64_t t = base_;
            for (int b = 0; b < 8; ++b) t ^= table_[b][(sector >> (8 * b)) & 0xff];
            std::memcpy(tags.data() + i * ts, &t, ts);
        }
        return Status::Ok;
    }
    static const std::vector<uint8_t> zeros(kZeroBufferBytes);
    const uint64_t per = std::max<uint64_t>(1, kZeroBufferBytes / bs);
    for (uint64_t i = 0; i < n; i += per) {
        const uint64_t k = std::min(per, n - i);
        if (Status s = hash_->compute(sector + i * step, ConstBytes(zeros.data(), k * bs), tags.subspan(i * ts, k * ts));
            s != Status::Ok)
            return s;
    }
    return Status::Ok;
}

namespace {

// Makes [offset, offset+len) of `store` read as zeros: holes stay, data is
// punched out where the store can, written over with zeros elsewhere.
Status zero_range(BackingStore& store, uint64_t offset, uint64_t len) {
    static const std::vector<uint8_t> zeros(kZeroBufferBytes);
    while (len) {
        const auto run = store.allocation(offset, len);
        const uint64_t n = std::min(len, std::max<uint64_t>(run.length, 1));
        if (!run.hole) {
            Status s = store.discard(offset, n);
            if (s == Status::Unsupported) {
                for (uint64_t done = 0; done < n;) {
                    const uint64_t k = std::min<uint64_t>(n - done, zeros.size());
                    if (Status w = store.write(offset + done, ConstBytes(zeros.data(), k)); w != Status::Ok) return w;
                    done += k;
                }
            } else if (s != Status::Ok) {
                return s;
            }
        }
        offset += n;
        len -= n;
    }
    return Status::Ok;
}

Error io_error(const BackingStore& store, const std::string& what, Status s) {
    std::string name = store.name();
    return make_error(s == Status::Ok ? Status::IoError : s,
                      (name.empty() ? std::string() : name + ": ") + what + " failed (" + to_string(s) + ")");
}

// One run of consecutive blocks whose tags lie together: within one
// interleave area (all of the device with a metadata device).
struct Run {
    uint64_t sector;  // logical, first block
    uint64_t blocks;
};

std::vector<Run> tag_runs(const Geometry& g, uint64_t max_blocks) {
    std::vector<Run> runs;
    const uint64_t spb = uint64_t(1) << g.log2_sectors_per_block;
    const uint64_t area = g.meta_device ? g.provided_data_sectors : (uint64_t(1) << g.log2_interleave_sectors);
    for (uint64_t s = 0; s < g.provided_data_sectors;) {
        const uint64_t area_end = std::min(g.provided_data_sectors, (s / area + 1) * area);
        const uint64_t blocks = std::min(max_blocks, (area_end - s) / spb);
        runs.push_back({s, blocks});
        s += blocks * spb;
    }
    return runs;
}

}  // namespace

Result<Formatted> format(Registry& reg, BackingStore& image, BackingStore* data, const FormatOptions& o) {
    FormatParams p = o.params;
    p.internal_hash = true;
    p.journal_mac = !o.journal_mac.empty();
    if (o.random_salt) {
        if (auto r = random_bytes(p.salt); !r) return r.error();
    }
    if (p.tag_size == 0) {
        auto sh = Shash::alloc(reg, o.internal_hash);
        if (!sh) return sh.error();
        if (sh->digestsize() > 424) return make_error(Status::Invalid, "dm-integrity: digest too large for a tag");
        p.tag_size = static_cast<uint16_t>(sh->digestsize());
    }
    Devices dev;
    dev.buffer_sectors = o.buffer_sectors;
    if (data) {
        dev.data_sectors = data->size() / kSectorSize;
        dev.meta_sectors = image.size() / kSectorSize;
    } else {
        dev.data_sectors = image.size() / kSectorSize;
    }
    auto sb = format_superblock(p, dev);
    if (!sb) return sb.error();
    auto geo = open_geometry(*sb, dev);
    if (!geo) return geo.error();
    auto hash = TagHash::create(reg, o.internal_hash, o.key, *sb);
    if (!hash) return hash.error();
    auto zero_tags = ZeroTags::create(*hash);
    if (!zero_tags) return zero_tags.error();
    std::shared_ptr<JournalMac> mac;
    if (p.journal_mac) {
        auto m = JournalMac::create(reg, o.journal_mac, o.journal_mac_key, *sb);
        if (!m) return m.error();
        mac = std::move(*m);
    }
    std::shared_ptr<JournalCrypt> jcrypt;
    if (!o.journal_crypt.empty()) {
        auto c = JournalCrypt::create(reg, o.journal_crypt, o.journal_crypt_key, *geo);
        if (!c) return c.error();
        jcrypt = std::move(*c);
    }

    // 1. The superblock area, zeroed first (cryptsetup's "wipe integrity
    // superblock"): an interrupted format leaves no superblock.
    const std::vector<uint8_t> zero_sb(kSuperblockSectors * kSectorSize);
    if (image.size() < zero_sb.size()) return make_error(Status::Invalid, "dm-integrity: the device is too small");
    if (Status s = image.write(0, zero_sb); s != Status::Ok) return io_error(image, "zeroing the superblock", s);
    if (Status s = image.flush(); s != Status::Ok) return io_error(image, "flush", s);

    // 2. The data made zero and every tag that of a zero block (what the
    // wipe pass leaves), in parallel over the tag runs.
    Formatted out{*sb, *geo, zero_tags->linear()};
    if (o.compute_tags) {
        BackingStore& data_store = data ? *data : image;
        const uint32_t ts = sb->tag_size, bs = sb->sector_size();
        const uint64_t max_blocks = std::max<uint64_t>(1, (uint64_t(4) << 20) / ts);  // 4 MiB of tags a run at most
        const auto runs = tag_runs(*geo, max_blocks);
        const uint64_t total = geo->provided_data_sectors * kSectorSize;
        std::atomic<std::size_t> next{0};
        std::atomic<uint64_t> done{0};
        std::atomic<bool> stop{false};
        std::mutex err_mu;
        std::optional<Error> err;
        auto fail = [&](Error e) {
            std::lock_guard lk(err_mu);
            if (!err) err = std::move(e);
            stop = true;
        };
        auto worker = [&] {
            std::vector<uint8_t> tags;
            for (;;) {
                const std::size_t i = next.fetch_add(1);
                if (i >= runs.size() || stop) return;
                const Run& r = runs[i];
                const uint64_t bytes = r.blocks * bs;
                if (Status s = zero_range(data_store, geo->data_offset(r.sector), bytes); s != Status::Ok)
                    return fail(io_error(data_store, "zeroing the data", s));
                tags.resize(r.blocks * ts);
                if (Status s = zero_tags->fill(r.sector, tags); s != Status::Ok)
                    return fail(make_error(s, "dm-integrity: computing the tags failed"));
                if (Status s = image.write(geo->tag_offset(r.sector), tags); s != Status::Ok)
                    return fail(io_error(image, "writing the tags", s));
                done += bytes;
            }
        };
        unsigned threads = o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency());
        threads = static_cast<unsigned>(std::min<std::size_t>(threads, runs.size()));
        std::vector<std::thread> pool;
        for (unsigned t = 1; t < threads; ++t) {
            try {
                pool.emplace_back(worker);
            } catch (const std::system_error&) {
                break;  // near the thread limit: the ones started (and this one) do it
            }
        }
        if (o.progress) {
            // This thread reports while the pool works, then joins in.
            while (!pool.empty() && next < runs.size() && !stop) {
                if (!o.progress(done, total)) {
                    fail(make_error(Status::Interrupted, "dm-integrity: format interrupted"));
                    break;
                }
                std::this_thread::sleep_for(std::chrono::milliseconds(100));
            }
        }
        worker();
        for (auto& t : pool) t.join();
        if (err) return *err;
        if (o.progress) o.progress(total, total);
    }

    // 3. The clean journal the kernel writes (init_journal), then the
    // superblock, last, as the kernel writes it (REQ_FUA).
    if (jcrypt) {
        // The store is only borrowed for the call.
        auto jstore = journal_crypt_store(std::shared_ptr<BackingStore>(&image, [](BackingStore*) {}), jcrypt, *geo);
        if (auto j = init_journal(*jstore, *sb, *geo, mac.get()); !j) return j.error();
    } else if (auto j = init_journal(image, *sb, *geo, mac.get()); !j) {
        return j.error();
    }
    if (Status s = image.flush(); s != Status::Ok) return io_error(image, "flush", s);
    if (data) {
        if (Status s = data->flush(); s != Status::Ok) return io_error(*data, "flush", s);
    }
    auto area = encode_superblock(*sb);
    // sb_mac: with fix_hmac and a journal MAC the kernel MACs the superblock.
    if (mac && sb->has(kFlagFixedHmac)) {
        if (auto m = mac->write_superblock(area); !m) return m.error();
    }
    if (Status s = image.write(0, area); s != Status::Ok)
        return io_error(image, "writing the superblock", s);
    if (Status s = image.flush(); s != Status::Ok) return io_error(image, "flush", s);
    return out;
}

}  // namespace blkcrypt::integrity
