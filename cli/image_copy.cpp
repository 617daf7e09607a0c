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

CopyResult copy_image(const ImageCopy& job) {
    const bool enc = job.encrypt;
    const std::string verb = enc ? "encrypt" : "decrypt";
    const std::string& in_path = job.in_path;
    Output& out = job.out;
    const dm::CryptTable& table = job.table;
    const bool in_stream = is_stream_input(in_path);
    const uint64_t step = table.sector_size / kSector;
    const uint64_t offset_bytes = table.offset * kSector;
    if (job.start_sectors % step)
        throw UsageError("--start must be a multiple of the sector size (" + std::to_string(step) + " sectors)");
    // Name the option that was given: --offset alone, or with --start.
    const std::string too_large = job.start_sectors ? "--offset + --start is too large" : "--offset is too large";
    if (job.start_sectors > UINT64_MAX / kSector - table.offset) throw UsageError(too_large);
    const uint64_t start_bytes = job.start_sectors * kSector;  // where the range starts in the device
    // Where the range's ciphertext starts in the encrypted file.
    const uint64_t range_bytes = offset_bytes + start_bytes;
    if (enc && start_bytes && !out.seekable()) throw UsageError("--start needs a seekable OUT");
    const std::string past = start_bytes ? "--start is past the end of " : "--offset is past the end of ";
    const auto started = std::chrono::steady_clock::now();
    // Plaintext size: all of IN (encrypt) or IN after --offset (decrypt), unless
    // --size; unknown for a stream without --size, which is read to its end.
    std::shared_ptr<dm::BackingStore> in_store;
    std::optional<InputFile> in;
    std::optional<uint64_t> total;
    if (in_stream) {
        in.emplace(in_path);
        if (job.size_sectors) total = *job.size_sectors * kSector;
        if (!enc) {  // the range's ciphertext starts at --offset + --start: skip what comes before
            std::vector<uint8_t> skip(kChunk);
            for (uint64_t left = range_bytes; left;) {
                const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(left, kChunk));
                if (in->read(blkcrypt::Bytes(skip).first(n)) != n) {
                    if (job.offset_from_header && !start_bytes)
                        throw Failure(in->display_name() + " ends before the data offset of " +
                                      std::to_string(offset_bytes) + " bytes: a truncated or damaged container");
                    throw UsageError(past + in->display_name());
                }
                left -= n;
            }
        }
    } else {
        auto s = dm::open_file_store(in_path, false);
        if (!s) throw Failure(s.error().message);
        in_store = *s;
        const uint64_t in_size = in_store->size();
        uint64_t avail = in_size;
        if (!enc) {
            if (in_size < range_bytes) {
                if (job.offset_from_header && in_size < offset_bytes)
                    throw Failure(in_path + ": " + std::to_string(in_size) + " bytes end before the data offset of " +
                                  std::to_string(offset_bytes) + " bytes: a truncated or damaged container");
                throw UsageError(past + in_path);
            }
            avail = in_size - range_bytes;
        }
        if (!job.size_sectors && avail % table.sector_size && job.offset_from_header && !start_bytes)
            throw Failure(in_path + ": " + std::to_string(avail) + " bytes after the data offset is not a multiple of the "
                          "sector size " + std::to_string(table.sector_size) + ": a truncated or damaged container");
        if (!job.size_sectors && avail % table.sector_size)
            throw UsageError(in_path + ": " + std::to_string(avail) + " bytes" +
                             (enc                       ? ""
                              : job.offset_from_header ? " after the data offset + --start"
                              : start_bytes            ? " after --offset + --start"
                                                       : " after --offset") +
                             " is not a multiple of the sector size " + std::to_string(table.sector_size));
        uint64_t length = avail / kSector;  // 512-byte sectors
        if (job.size_sectors) {
            length = *job.size_sectors;
            if (length > avail / kSector)
                throw UsageError("--size " + std::to_string(length) + " is more than the " +
                                 std::to_string(avail / kSector) + " sectors of " + in_path);
        }
        if (length == 0) throw UsageError(in_path + ": nothing to " + verb);
        total = length * kSector;
    }
    const std::string in_name = in ? in->display_name() : in_path;
    // A stream of unknown size: the target spans far more than any input.
    // A stream of unknown size: the target spans --max (a container's data
    // segment) or far more than any input.
    const uint64_t length = total ? *total / kSector
                            : job.max_sectors ? *job.max_sectors / step * step
                                              : (uint64_t{1} << 50) / step * step;

    if (length > UINT64_MAX / kSector - table.offset - job.start_sectors) throw UsageError(too_large);
    if (total && enc && range_bytes && (out.kind() == Output::Kind::Temp || out.kind() == Output::Kind::InPlace))
        reserve_range(out, range_bytes, *total);
    else if (total)
        out.reserve((enc ? range_bytes : 0) + *total);  // the device must be large enough
    if (enc && job.keep_prefix && out.kind() == Output::Kind::Temp) copy_prefix(out, offset_bytes);
    // Encryption into a seekable OUT of known size writes through a file store
    // on it; any other case goes through the ring of chunk buffers.
    std::shared_ptr<dm::BackingStore> store;
    std::shared_ptr<RingStore> ring;
    dm::CryptTargetOptions opts;
    opts.threads = job.threads;
    const std::size_t depth = std::max<std::size_t>(8, 2 * std::size_t{opts.threads});
    opts.queue_depth = depth;
    opts.max_request = kChunk;
    if (enc && out.seekable() && total) {
        auto s = dm::open_file_store(out.write_path(), true);
        if (!s) throw Failure(s.error().message);
        store = *s;
    } else if (!enc && !in_stream) {
        store = in_store;
    } else {
        ring = std::make_shared<RingStore>(range_bytes, range_bytes + length * kSector, depth);
        store = ring;
    }
    if (enc && !out.seekable()) {  // a stream's ciphertext also starts at --offset
        const std::vector<uint8_t> zeros(kChunk);
        for (uint64_t left = offset_bytes; left;) {
            const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(left, kChunk));
            out.write(blkcrypt::ConstBytes(zeros).first(n));
            left -= n;
        }
    }

    // Encryption reads a mappable IN in place: the engine never writes a
    // write bio's memory, so its pages go from the page cache straight to
    // the cipher, without a copy into a buffer of ours.
    const blkcrypt::ConstBytes in_map = enc && in_store ? in_store->mapped() : blkcrypt::ConstBytes{};
    blkcrypt::Registry& reg = registry();
    // The target is the device up to the range's end; only the range is submitted.
    auto target = make_crypt_target(reg, table, store, job.start_sectors + length, opts);

    Progress progress(job.progress, job.progress_name, total.value_or(0));
    uint64_t next = 0, done = 0;

    // Writes out what the oldest bio produced, in order.
    auto retire = [&](const dm::RetiredBio& r) {
        if (r.status != blkcrypt::Status::Ok)
            throw Failure(std::string(enc ? "writing " : "reading ") + (enc ? out.name() : in_name) +
                          " at sector " + std::to_string(r.sector) + ": " + blkcrypt::to_string(r.status));
        const uint64_t pos = r.sector * kSector - start_bytes;  // byte offset into the range
        const std::size_t n = r.data.size();
        if (enc && ring) {
            out.pwrite(ring->chunk(pos).first(n), range_bytes + pos);
        } else if (enc) {
            if (!in_map.empty()) in_store->release_mapped(pos, n);  // bounded memory
            // Truncated under us: the mapping read zeros, not the file.
            if (in_store && in_store->changed()) throw Failure(in_path + ": changed size while being read");
            store->start_writeback(range_bytes + pos, n);
        } else {
            out.pwrite(r.data, pos);
            // Start writeback now, so the final fsync waits for the tail only
            // (advice: an error here resurfaces at that fsync).
            if (out.seekable())
                (void)::sync_file_range(out.fd(), static_cast<off64_t>(pos), static_cast<off64_t>(n),
                                        SYNC_FILE_RANGE_WRITE);
        }
        done += n;
        progress.update(done);
        return blkcrypt::Status::Ok;
    };
    // Its destructor waits for the bios in flight, also when an exception
    // leaves this function. Slots own a chunk buffer unless IN is mapped.
    dm::BioRing bios(*target, depth, in_map.empty() ? kChunk : 0, retire);
    auto refused = [](blkcrypt::Status st) {
        throw Failure(std::string("bio refused: ") + blkcrypt::to_string(st));
    };

    for (bool eof = false; !eof && (!total || next < *total);) {
        if (const blkcrypt::Status st = bios.reserve(); st != blkcrypt::Status::Ok) refused(st);
        std::size_t n = static_cast<std::size_t>(total ? std::min<uint64_t>(kChunk, *total - next) : kChunk);
        uint8_t* data = bios.next_buffer().data();
        if (!in_map.empty()) {
            data = const_cast<uint8_t*>(in_map.data() + next);  // read-only mapping, never written
        } else if (in) {
            // Sequential reads: plaintext into the bio, ciphertext into the ring.
            const std::size_t got = in->read(enc ? blkcrypt::Bytes(data, n) : ring->chunk(next).first(n));
            if (got < n) {
                if (total)
                    throw Failure(in_name + " ended after " + std::to_string(next + got) +
                                  " bytes; --size asks for " + std::to_string(*total));
                if (got % table.sector_size)
                    throw Failure(in_name + " ends with a partial sector: " + std::to_string(next + got) +
                                  " bytes is not a multiple of the sector size " +
                                  std::to_string(table.sector_size));
                eof = true;
                n = got;
                if (n == 0) break;
            }
            if (!total && job.max_sectors && next + n > length * kSector)
                throw Failure(in_name + " holds more than the " + std::to_string(length * kSector) + " bytes of " +
                              out.name() + "'s data segment");
        } else if (enc && in_store->read(next, blkcrypt::Bytes(data, n)) != blkcrypt::Status::Ok) {
            throw Failure(in_path + ": read error at byte " + std::to_string(next));
        }
        const dm::BioDir dir = enc ? dm::BioDir::Write : dm::BioDir::Read;
        if (const blkcrypt::Status st = bios.submit((start_bytes + next) / kSector, dir, blkcrypt::Bytes(data, n));
            st != blkcrypt::Status::Ok)
            refused(st);
        next += n;
    }
    if (const blkcrypt::Status st = bios.finish(); st != blkcrypt::Status::Ok) refused(st);
    if (next == 0) throw UsageError(in_name + ": nothing to " + verb);
    if (in_store && in_store->changed()) throw Failure(in_path + ": changed size while being read");
    progress.finish(done);

    target.reset();
    store.reset();
    // Its fsync also covers what the file store wrote.
    if (job.commit_with) Output::commit_all({job.commit_with, &out});
    else out.commit();
    return CopyResult{done, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()};
}

void set_copy_options(const po::variables_map& vm, ImageCopy& job, const std::string& name) {
    if (vm.count("threads")) job.threads = vm["threads"].as<unsigned>();
    job.progress = progress_settings(vm);
    job.progress_name = name;
}

uint64_t table_bytes(const dm::DmTable& table) {
    uint64_t total = 0;
    for (const dm::DmLine& g : table) total += g.length * kSector;
    return total;
}

// Moved from cmd_bitlk.cpp: each line's plaintext in order, zeros and stored
// bytes (linear) through one buffer, crypt lines through a BioRing.
CopyResult copy_table(const TableCopy& job) {
    const auto started = std::chrono::steady_clock::now();
    Output& out = job.out;
    dm::CryptTargetOptions opts;
    opts.threads = job.threads;
    const std::size_t depth = std::max<std::size_t>(8, 2 * std::size_t{job.threads});
    opts.queue_depth = depth;
    opts.max_request = kChunk;
    const uint64_t total = table_bytes(job.table);
    out.reserve(total);
    Progress progress(job.progress, job.name, total);
    std::vector<uint8_t> buf(kChunk);
    uint64_t written = 0;
    // In order, starting the writeback of what was written, so the final
    // fsync waits for the tail only (advice: an error here resurfaces at
    // that fsync).
    auto emit = [&](blkcrypt::ConstBytes data) {
        out.write(data);
        if (out.seekable())
            (void)::sync_file_range(out.fd(), static_cast<off64_t>(written), static_cast<off64_t>(data.size()),
                                    SYNC_FILE_RANGE_WRITE);
        written += data.size();
        progress.update(written);
    };
    auto failed = [&](uint64_t at, blkcrypt::Status s) {
        throw Failure(job.name + ": reading the plaintext at byte " + std::to_string(at) + ": " +
                      blkcrypt::to_string(s));
    };
    for (const dm::DmLine& g : job.table) {
        const uint64_t bytes = g.length * kSector;
        if (!g.crypt) {  // zero or linear
            std::fill(buf.begin(), buf.end(), uint8_t{0});
            for (uint64_t at = 0; at < bytes;) {
                const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(kChunk, bytes - at));
                const blkcrypt::Bytes chunk(buf.data(), n);
                if (g.target == "linear")
                    if (blkcrypt::Status s = job.store->read(g.offset * kSector + at, chunk); s != blkcrypt::Status::Ok)
                        failed(g.start * kSector + at, s);
                emit(chunk);
                at += n;
            }
            continue;
        }
        auto target = make_crypt_target(registry(), *g.crypt, job.store, g.length, opts);
        dm::BioRing ring(*target, depth, kChunk, [&](const dm::RetiredBio& r) {
            if (r.status != blkcrypt::Status::Ok) failed((g.start + r.sector) * kSector, r.status);
            emit(r.data);
            return blkcrypt::Status::Ok;
        });
        for (uint64_t at = 0; at < bytes;) {
            const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(kChunk, bytes - at));
            if (blkcrypt::Status s = ring.reserve(); s != blkcrypt::Status::Ok) failed(g.start * kSector + at, s);
            if (blkcrypt::Status s = ring.submit(at / kSector, dm::BioDir::Read, ring.next_buffer().first(n));
                s != blkcrypt::Status::Ok)
                failed(g.start * kSector + at, s);
            at += n;
        }
        if (blkcrypt::Status s = ring.finish(); s != blkcrypt::Status::Ok) failed(g.start * kSector, s);
    }
    progress.finish(written);
    return CopyResult{written, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()};
}

}  // namespace cli
