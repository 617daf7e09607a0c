// See image_copy.hpp. Moved here from cmd_crypt.cpp so that `crypt` and
// `luks` run one copy loop.
#include "image_copy.hpp"
#include "registry.hpp"

#include <blkcrypt/dm/bio.hpp>
#include <blkcrypt/dm/bio_ring.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cli {

namespace dm = blkcrypt::dm;

namespace {

constexpr uint64_t kSector = 512;
constexpr std::size_t kChunk = 1 << 20;  // bytes per bio

// stdin, a FIFO or a character device: read in order, no size known.
bool is_stream_input(const std::string& path) {
    struct stat st {};
    return path == "-" || (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode));
}

// A regular OUT is allocated where the ciphertext goes, [from, from+len):
// what lies before stays a hole in a new file (a large --offset costs no
// space), and ENOSPC still shows here, before any work.
void reserve_range(Output& out, uint64_t from, uint64_t len) {
    struct stat st {};
    if (::fstat(out.fd(), &st) != 0) throw Failure(out.error_text(errno));
    if (static_cast<uint64_t>(st.st_size) >= from + len) return;
    if (::fallocate(out.fd(), 0, static_cast<off_t>(from), static_cast<off_t>(len)) == 0) return;
    if (errno != EOPNOTSUPP && errno != ENOSYS && errno != EINVAL) throw Failure(out.error_text(errno));
    if (::ftruncate(out.fd(), static_cast<off_t>(from + len)) != 0) throw Failure(out.error_text(errno));
}

// The bytes before the ciphertext of an existing regular OUT, copied into
// its temporary file (a new OUT keeps its hole there).
void copy_prefix(Output& out, uint64_t bytes) {
    struct stat st {};
    if (!bytes || ::stat(out.name().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
    const int fd = ::open(out.name().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Failure(out.error_text(errno));
    std::vector<uint8_t> buf(kChunk);
    for (uint64_t pos = 0; pos < bytes;) {
        const ssize_t n = ::pread(fd, buf.data(), static_cast<std::size_t>(std::min<uint64_t>(kChunk, bytes - pos)),
                                  static_cast<off_t>(pos));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            const int err = errno;
            ::close(fd);
            throw Failure(out.error_text(err));
        }
        if (n == 0) break;  // a shorter OUT: the rest stays a hole
        try {
            out.pwrite(blkcrypt::ConstBytes(buf).first(static_cast<std::size_t>(n)), pos);
        } catch (...) {
            ::close(fd);
            throw;
        }
        pos += static_cast<uint64_t>(n);
    }
    ::close(fd);
}

// The target's store when IN or OUT is a stream: one chunk buffer per bio in
// flight, found from the offset (bios start at multiples of kChunk and never
// cross one). Encryption leaves the ciphertext there for the writer; a
// decryption's reader fills it before the bio is submitted.
class RingStore final : public dm::BackingStore {
public:
    RingStore(uint64_t base, uint64_t size, std::size_t depth)
        : base_(base), size_(size), bufs_(depth, std::vector<uint8_t>(kChunk)) {}
    blkcrypt::Bytes chunk(uint64_t pos) { return bufs_[(pos / kChunk) % bufs_.size()]; }
    blkcrypt::Status read(uint64_t offset, blkcrypt::Bytes out) override {
        const auto src = locate(offset, out.size());
        if (src.size() != out.size()) return blkcrypt::Status::IoError;
        if (!out.empty()) std::memcpy(out.data(), src.data(), out.size());
        return blkcrypt::Status::Ok;
    }
    blkcrypt::Status write(uint64_t offset, blkcrypt::ConstBytes in) override {
        const auto dst = locate(offset, in.size());
        if (dst.size() != in.size()) return blkcrypt::Status::IoError;
        if (!in.empty()) std::memcpy(dst.data(), in.data(), in.size());
        return blkcrypt::Status::Ok;
    }
    uint64_t size() const override { return size_; }

private:
    // The bytes [offset, offset+len) of the store, or an empty span.
    blkcrypt::Bytes locate(uint64_t offset, std::size_t len) {
        if (offset < base_) return {};
        const uint64_t rel = offset - base_;
        const std::size_t within = static_cast<std::size_t>(rel % kChunk);
        if (len > kChunk - within) return {};
        return chunk(rel).subspan(within, len);
    }
    const uint64_t base_, size_;
    std::vector<std::vector<uint8_t>> bufs_;
};

// How many bios are in flight at once and the target options that go with
// it: the same for every ring the copies run.
struct RingShape {
    dm::CryptTargetOptions opts;
    std::size_t depth = 0;  // bios in flight
};

RingShape ring_shape(unsigned threads) {
    RingShape r;
    r.opts.threads = threads;
    r.depth = std::max<std::size_t>(8, 2 * std::size_t{threads});
    r.opts.queue_depth = r.depth;
    r.opts.max_request = kChunk;
    return r;
}

// OUT as the copies fill it: what is written and the progress lines it drives.
struct Sink {
    Output& out;
    Progress& progress;
    uint64_t done = 0;

    // Counts n more bytes done.
    void count(std::size_t n) {
        done += n;
        progress.update(done);
    }
    // Writes data at pos and starts its writeback now, so the final fsync
    // waits for the tail only (advice: an error here resurfaces at that fsync).
    void put(blkcrypt::ConstBytes data, uint64_t pos) {
        out.pwrite(data, pos);
        if (out.seekable())
            (void)::sync_file_range(out.fd(), static_cast<off64_t>(pos), static_cast<off64_t>(data.size()),
                                    SYNC_FILE_RANGE_WRITE);
        count(data.size());
    }
};

}  // namespace

// Creation errors are the table's fault (cipher, key length, sizes) unless
// the store failed underneath.
std::unique_ptr<dm::CryptTarget> make_crypt_target(blkcrypt::Registry& reg, const dm::CryptTable& t,
                                                   std::shared_ptr<dm::BackingStore> store,
                                                   uint64_t length_sectors, const dm::CryptTargetOptions& opts) {
    auto target = dm::CryptTarget::create(reg, t, std::move(store), length_sectors, opts);
    if (!target) {
        const auto s = target.error().status;
        if (s == blkcrypt::Status::IoError || s == blkcrypt::Status::NoMem)
            throw Failure(target.error().message);
        throw UsageError(target.error().message);
    }
    return std::move(target).value();
}

namespace {

// The copy runs in four steps: plan (the options alone), open (IN and the
// range's size), store (OUT made ready, the target's store chosen) and pump
// (the bios). Each step's errors come in the order the one function gave them.

// What the options ask for, settled before IN is opened.
struct CopyPlan {
    bool enc = false;
    std::string verb;           // "encrypt" or "decrypt", as "nothing to ..." says it
    bool in_stream = false;     // IN is read in order, its size unknown
    uint64_t step = 0;          // the cipher's sector, in 512-byte sectors
    uint64_t offset_bytes = 0;  // where the ciphertext starts in the encrypted file
    uint64_t start_bytes = 0;   // where the range starts in the device
    uint64_t range_bytes = 0;   // where the range's ciphertext starts in the encrypted file
    std::string too_large;      // the overflow message, naming the options given
    std::string past;           // the message for an IN that ends before the range
};

// Checks what needs no input, so that a bad option is refused at once,
// before IN is opened or read.
CopyPlan plan_copy(const ImageCopy& job) {
    const dm::CryptTable& table = job.table;
    CopyPlan p;
    p.enc = job.encrypt;
    p.verb = p.enc ? "encrypt" : "decrypt";
    p.in_stream = is_stream_input(job.in_path);
    p.step = table.sector_size / kSector;
    p.offset_bytes = table.offset * kSector;
    if (job.start_sectors % p.step)
        throw UsageError("--start must be a multiple of the sector size (" + std::to_string(p.step) + " sectors)");
    // Name the option that was given: --offset alone, or with --start.
    p.too_large = job.start_sectors ? "--offset + --start is too large" : "--offset is too large";
    if (job.start_sectors > UINT64_MAX / kSector - table.offset) throw UsageError(p.too_large);
    p.start_bytes = job.start_sectors * kSector;
    p.range_bytes = p.offset_bytes + p.start_bytes;
    if (p.enc && p.start_bytes && !job.out.seekable()) throw UsageError("--start needs a seekable OUT");
    p.past = p.start_bytes ? "--start is past the end of " : "--offset is past the end of ";
    return p;
}

// IN opened, and the range sized. Plaintext size: all of IN (encrypt) or IN
// after --offset (decrypt), unless --size; unknown for a stream without
// --size, which is read to its end.
struct CopySource {
    std::shared_ptr<dm::BackingStore> store;  // a regular file or a block device
    std::unique_ptr<InputFile> stream;        // stdin, a FIFO or a character device
    std::optional<uint64_t> total;            // plaintext bytes, if known
    std::string name;                         // IN as the stream errors name it
    uint64_t length = 0;                      // the range, in 512-byte sectors
};

// A stream IN is positioned by reading: decryption skips what comes before
// the range's ciphertext, as nothing can seek there.
void open_stream_input(const ImageCopy& job, const CopyPlan& p, CopySource& src) {
    src.stream = std::make_unique<InputFile>(job.in_path);
    if (job.size_sectors) src.total = *job.size_sectors * kSector;
    if (p.enc) return;
    std::vector<uint8_t> skip(kChunk);
    for (uint64_t left = p.range_bytes; left;) {
        const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(left, kChunk));
        if (src.stream->read(blkcrypt::Bytes(skip).first(n)) != n) {
            if (job.offset_from_header && !p.start_bytes)
                throw Failure(src.stream->display_name() + " ends before the data offset of " +
                              std::to_string(p.offset_bytes) + " bytes: a truncated or damaged container");
            throw UsageError(p.past + src.stream->display_name());
        }
        left -= n;
    }
}

// A file or device IN has a size, so the range is checked against it here,
// before OUT is touched: a short container is damaged (exit 1), a short
// --offset/--start/--size a usage error.
void open_file_input(const ImageCopy& job, const CopyPlan& p, CopySource& src) {
    const std::string& in_path = job.in_path;
    const uint64_t sector_size = job.table.sector_size;
    auto s = blkcrypt::open_store(in_path, false);
    if (!s) throw Failure(s.error().message);
    src.store = *s;
    const uint64_t in_size = src.store->size();
    uint64_t avail = in_size;
    if (!p.enc) {
        if (in_size < p.range_bytes) {
            if (job.offset_from_header && in_size < p.offset_bytes)
                throw Failure(in_path + ": " + std::to_string(in_size) + " bytes end before the data offset of " +
                              std::to_string(p.offset_bytes) + " bytes: a truncated or damaged container");
            throw UsageError(p.past + in_path);
        }
        avail = in_size - p.range_bytes;
    }
    if (!job.size_sectors && avail % sector_size && job.offset_from_header && !p.start_bytes)
        throw Failure(in_path + ": " + std::to_string(avail) + " bytes after the data offset is not a multiple of the "
                      "sector size " + std::to_string(sector_size) + ": a truncated or damaged container");
    if (!job.size_sectors && avail % sector_size)
        throw UsageError(in_path + ": " + std::to_string(avail) + " bytes" +
                         (p.enc                     ? ""
                          : job.offset_from_header ? " after the data offset + --start"
                          : p.start_bytes          ? " after --offset + --start"
                                                   : " after --offset") +
                         " is not a multiple of the sector size " + std::to_string(sector_size));
    uint64_t length = avail / kSector;  // 512-byte sectors
    if (job.size_sectors) {
        length = *job.size_sectors;
        if (length > avail / kSector)
            throw UsageError("--size " + std::to_string(length) + " is more than the " +
                             std::to_string(avail / kSector) + " sectors of " + in_path);
    }
    if (length == 0) throw UsageError(in_path + ": nothing to " + p.verb);
    src.total = length * kSector;
}

// Opens IN and fixes the range's length, which the target is created with.
CopySource open_source(const ImageCopy& job, const CopyPlan& p) {
    CopySource src;
    if (p.in_stream) open_stream_input(job, p, src);
    else open_file_input(job, p, src);
    src.name = src.stream ? src.stream->display_name() : job.in_path;
    // A stream of unknown size: the target spans --max (a container's data
    // segment) or far more than any input.
    src.length = src.total        ? *src.total / kSector
                 : job.max_sectors ? *job.max_sectors / p.step * p.step
                                   : (uint64_t{1} << 50) / p.step * p.step;
    if (src.length > UINT64_MAX / kSector - job.table.offset - job.start_sectors) throw UsageError(p.too_large);
    return src;
}

// The target's store and how many bios it takes at once.
struct CopyStore {
    std::shared_ptr<dm::BackingStore> store;  // what the target reads or writes
    std::shared_ptr<RingStore> ring;          // the same store, when it is the ring of chunk buffers
    RingShape shape;
};

// Makes OUT ready before any work (space reserved, so ENOSPC shows now; the
// kept prefix; a stream's leading zeros) and chooses the store: encryption
// into a seekable OUT of known size writes through a file store on it,
// decryption of a file reads it in place, and any other case goes through
// the ring of chunk buffers.
CopyStore prepare_store(const ImageCopy& job, const CopyPlan& p, const CopySource& src) {
    Output& out = job.out;
    if (src.total && p.enc && p.range_bytes &&
        (out.kind() == Output::Kind::Temp || out.kind() == Output::Kind::InPlace))
        reserve_range(out, p.range_bytes, *src.total);
    else if (src.total)
        out.reserve((p.enc ? p.range_bytes : 0) + *src.total);  // the device must be large enough
    if (p.enc && job.keep_prefix && out.kind() == Output::Kind::Temp) copy_prefix(out, p.offset_bytes);
    CopyStore st;
    st.shape = ring_shape(job.threads);
    if (p.enc && out.seekable() && src.total) {
        st.store = out.store();
    } else if (!p.enc && !p.in_stream) {
        st.store = src.store;
    } else {
        st.ring = std::make_shared<RingStore>(p.range_bytes, p.range_bytes + src.length * kSector, st.shape.depth);
        st.store = st.ring;
    }
    if (p.enc && !out.seekable()) {  // a stream's ciphertext also starts at --offset
        const std::vector<uint8_t> zeros(kChunk);
        for (uint64_t left = p.offset_bytes; left;) {
            const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(left, kChunk));
            out.write(blkcrypt::ConstBytes(zeros).first(n));
            left -= n;
        }
    }
    return st;
}

// The bytes [first_byte, first_byte + total) of a target, as the pump walks them.
struct PumpRange {
    uint64_t first_byte = 0;        // where the range starts in the device
    std::optional<uint64_t> total;  // its length; none: until fill comes back short
    dm::BioDir dir = dm::BioDir::Read;
};

// Gives a bio its memory: (byte offset into the range, the slot's own buffer,
// the bytes wanted) -> the bytes to submit. Fewer than wanted ends the range.
using FillFn = std::function<blkcrypt::Bytes(uint64_t pos, uint8_t* slot, std::size_t want)>;
// The ring stopped (the target refused a bio): throws the command's error.
// pos: the byte into the range being submitted, 0 when the ring's finish failed.
using RefusedFn = std::function<void(uint64_t pos, blkcrypt::Status)>;

// Drives one range of a target through a BioRing: 1 MiB bios, `depth` in
// flight, retired in order. It knows no files: fill and retire are the two
// ends, so the same loop serves any source and sink (copy_image's IN and OUT,
// each crypt line of copy_table, copy_device's stack). Target: a
// dm::CryptTarget or a dm::BlockDevice. Returns the bytes submitted.
template <class Target>
uint64_t pump(Target& target, std::size_t depth, std::size_t slot_bytes, const PumpRange& range,
              const FillFn& fill, dm::RetireFn retire, const RefusedFn& refused) {
    // Its destructor waits for the bios in flight, also when an exception
    // leaves this function.
    dm::BioRing bios(target, depth, slot_bytes, std::move(retire));
    uint64_t next = 0;
    for (bool eof = false; !eof && (!range.total || next < *range.total);) {
        if (const blkcrypt::Status st = bios.reserve(); st != blkcrypt::Status::Ok) refused(next, st);
        const std::size_t want =
            static_cast<std::size_t>(range.total ? std::min<uint64_t>(kChunk, *range.total - next) : kChunk);
        const blkcrypt::Bytes data = fill(next, bios.next_buffer().data(), want);
        if (data.size() < want) {
            eof = true;
            if (data.empty()) break;
        }
        if (const blkcrypt::Status st = bios.submit((range.first_byte + next) / kSector, range.dir, data);
            st != blkcrypt::Status::Ok)
            refused(next, st);
        next += data.size();
    }
    if (const blkcrypt::Status st = bios.finish(); st != blkcrypt::Status::Ok) refused(0, st);
    return next;
}

// The copy's two ends as the pump sees them: IN fills the bios, OUT takes
// what they produced.
struct CopyEnds {
    const ImageCopy& job;
    const CopyPlan& p;
    const CopySource& src;
    const CopyStore& st;
    Sink& sink;
    // Encryption reads a mappable IN in place: the engine never writes a
    // write bio's memory, so its pages go from the page cache straight to
    // the cipher, without a copy into a buffer of ours.
    blkcrypt::ConstBytes in_map;

    blkcrypt::Bytes fill(uint64_t next, uint8_t* data, std::size_t n) {
        if (!in_map.empty()) {
            data = const_cast<uint8_t*>(in_map.data() + next);  // read-only mapping, never written
        } else if (src.stream) {
            // Sequential reads: plaintext into the bio, ciphertext into the ring.
            const std::size_t got = src.stream->read(p.enc ? blkcrypt::Bytes(data, n) : st.ring->chunk(next).first(n));
            if (got < n) {
                if (src.total)
                    throw Failure(src.name + " ended after " + std::to_string(next + got) +
                                  " bytes; --size asks for " + std::to_string(*src.total));
                if (got % job.table.sector_size)
                    throw Failure(src.name + " ends with a partial sector: " + std::to_string(next + got) +
                                  " bytes is not a multiple of the sector size " +
                                  std::to_string(job.table.sector_size));
                n = got;
                if (n == 0) return {};
            }
            if (!src.total && job.max_sectors && next + n > src.length * kSector)
                throw Failure(src.name + " holds more than the " + std::to_string(src.length * kSector) +
                              " bytes of " + job.out.name() + "'s data segment");
        } else if (p.enc && src.store->read(next, blkcrypt::Bytes(data, n)) != blkcrypt::Status::Ok) {
            throw Failure(job.in_path + ": read error at byte " + std::to_string(next));
        }
        return blkcrypt::Bytes(data, n);
    }

    // Writes out what the oldest bio produced, in order.
    blkcrypt::Status retire(const dm::RetiredBio& r) {
        Output& out = job.out;
        if (r.status != blkcrypt::Status::Ok)
            throw Failure(std::string(p.enc ? "writing " : "reading ") + (p.enc ? out.name() : src.name) +
                          " at sector " + std::to_string(r.sector) + ": " + blkcrypt::to_string(r.status));
        const uint64_t pos = r.sector * kSector - p.start_bytes;  // byte offset into the range
        const std::size_t n = r.data.size();
        if (p.enc && st.ring) {
            out.pwrite(st.ring->chunk(pos).first(n), p.range_bytes + pos);
        } else if (p.enc) {
            if (!in_map.empty()) src.store->release_mapped(pos, n);  // bounded memory
            // Truncated under us: the mapping read zeros, not the file.
            if (src.store && src.store->changed()) throw Failure(job.in_path + ": changed size while being read");
            st.store->start_writeback(p.range_bytes + pos, n);
        } else {
            sink.put(r.data, pos);
            return blkcrypt::Status::Ok;
        }
        sink.count(n);
        return blkcrypt::Status::Ok;
    }
};

}  // namespace

CopyResult copy_image(const ImageCopy& job) {
    const CopyPlan plan = plan_copy(job);
    const auto started = std::chrono::steady_clock::now();
    const CopySource src = open_source(job, plan);
    CopyStore st = prepare_store(job, plan, src);
    const blkcrypt::ConstBytes in_map =
        plan.enc && src.store ? src.store->mapped() : blkcrypt::ConstBytes{};  // see CopyEnds::in_map
    blkcrypt::Registry& reg = registry();
    // The target is the device up to the range's end; only the range is submitted.
    auto target = make_crypt_target(reg, job.table, st.store, job.start_sectors + src.length, st.shape.opts);

    Progress progress(job.progress, job.progress_name, src.total.value_or(0));
    Sink sink{job.out, progress};
    CopyEnds ends{job, plan, src, st, sink, in_map};
    // Slots own a chunk buffer unless IN is mapped.
    const uint64_t next = pump(
        *target, st.shape.depth, in_map.empty() ? kChunk : 0,
        PumpRange{plan.start_bytes, src.total, plan.enc ? dm::BioDir::Write : dm::BioDir::Read},
        [&](uint64_t pos, uint8_t* slot, std::size_t want) { return ends.fill(pos, slot, want); },
        [&](const dm::RetiredBio& r) { return ends.retire(r); },
        [](uint64_t, blkcrypt::Status s) { throw Failure(std::string("bio refused: ") + blkcrypt::to_string(s)); });
    if (next == 0) throw UsageError(src.name + ": nothing to " + plan.verb);
    if (src.store && src.store->changed()) throw Failure(job.in_path + ": changed size while being read");
    progress.finish(sink.done);

    target.reset();
    st.store.reset();
    // Its fsync also covers what the file store wrote.
    if (job.commit_with) Output::commit_all({job.commit_with, &job.out});
    else job.out.commit();
    return CopyResult{sink.done, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()};
}

void set_copy_options(const po::variables_map& vm, ImageCopy& job, const std::string& name) {
    if (vm.count("threads")) job.threads = vm["threads"].as<unsigned>();
    job.progress = progress_settings(vm);
    job.progress_name = name;
}

CopyResult copy_device(const DeviceCopy& job) {
    const auto started = std::chrono::steady_clock::now();
    const RingShape shape = ring_shape(job.threads);
    if (!job.write) job.out->reserve(job.bytes);
    Progress progress(job.progress, job.name, job.bytes);
    std::optional<Sink> sink;
    if (!job.write) sink.emplace(Sink{*job.out, progress});
    uint64_t done = 0;
    pump(
        job.device, shape.depth, kChunk, PumpRange{job.start, job.bytes, job.write ? dm::BioDir::Write : dm::BioDir::Read},
        [&](uint64_t pos, uint8_t* slot, std::size_t want) {
            return job.write ? job.fill(pos, slot, want) : blkcrypt::Bytes(slot, want);
        },
        [&](const dm::RetiredBio& r) {
            const uint64_t at = r.sector * kSector;
            if (r.status != blkcrypt::Status::Ok) job.failed(at, r.data.size(), r.status);
            if (sink) {
                sink->put(r.data, at - job.start);
            } else {
                if (job.written) job.written(at - job.start, r.data.size());
                progress.update(done += r.data.size());
            }
            return blkcrypt::Status::Ok;
        },
        [&](uint64_t pos, blkcrypt::Status s) { job.failed(job.start + pos, 0, s); });
    if (sink) done = sink->done;
    progress.finish(done);
    return CopyResult{done, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()};
}

uint64_t table_bytes(const dm::DmTable& table) {
    uint64_t total = 0;
    for (const dm::DmLine& g : table) total += g.length * kSector;
    return total;
}

// Each line's plaintext in order: zeros and stored bytes (linear) through
// one buffer, crypt lines through the pump, as copy_image runs its range.
CopyResult copy_table(const TableCopy& job) {
    const auto started = std::chrono::steady_clock::now();
    const RingShape shape = ring_shape(job.threads);
    const uint64_t total = table_bytes(job.table);
    job.out.reserve(total);
    Progress progress(job.progress, job.name, total);
    Sink sink{job.out, progress};
    auto failed = [&](uint64_t at, blkcrypt::Status s) {
        throw Failure(job.name + ": reading the plaintext at byte " + std::to_string(at) + ": " +
                      blkcrypt::to_string(s));
    };
    std::vector<uint8_t> buf;
    for (const dm::DmLine& g : job.table) {
        const uint64_t first = g.start * kSector;  // the line's place in the plaintext and in OUT
        const uint64_t bytes = g.length * kSector;
        if (g.crypt) {
            auto target = make_crypt_target(registry(), *g.crypt, job.store, g.length, shape.opts);
            pump(
                *target, shape.depth, kChunk, PumpRange{0, bytes, dm::BioDir::Read},
                [](uint64_t, uint8_t* slot, std::size_t want) { return blkcrypt::Bytes(slot, want); },
                [&](const dm::RetiredBio& r) {
                    if (r.status != blkcrypt::Status::Ok) failed(first + r.sector * kSector, r.status);
                    sink.put(r.data, first + r.sector * kSector);
                    return blkcrypt::Status::Ok;
                },
                [&](uint64_t pos, blkcrypt::Status s) { failed(first + pos, s); });
            continue;
        }
        buf.assign(kChunk, 0);  // zero, or linear's stored bytes
        for (uint64_t at = 0; at < bytes;) {
            const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(kChunk, bytes - at));
            const blkcrypt::Bytes chunk(buf.data(), n);
            if (g.target == "linear")
                if (blkcrypt::Status s = job.store->read(g.offset * kSector + at, chunk); s != blkcrypt::Status::Ok)
                    failed(first + at, s);
            sink.put(chunk, first + at);
            at += n;
        }
    }
    progress.finish(sink.done);
    return CopyResult{sink.done, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()};
}

}  // namespace cli
