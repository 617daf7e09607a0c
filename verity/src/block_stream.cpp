#include "block_stream.hpp"
#include "read_buffer.hpp"

#include <linux/aio_abi.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <memory>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14; older kernels refuse it (harmless)
#endif

namespace blkcrypt::verity {

namespace {

constexpr std::size_t kChunkBytes = 4u << 20;
// One chunk is hashed and the next queued on the pool while the others are
// read: with direct reads, three requests stay queued at the disk, which is
// what it needs to stream.
constexpr std::size_t kSlots = 5;
// Without direct reads: how far ahead of the hashing position the page cache
// is asked to be filled, so the disk always has requests queued.
constexpr uint64_t kReadAheadBytes = 32u << 20;
// The kernel caps one WILLNEED request at the device's readahead or I/O size
// (often 128 KiB to 8 MiB) and drops the rest, so the window is asked for in
// pieces no larger than the smallest usual cap.
constexpr uint64_t kAdvicePiece = 128u << 10;

Error read_error(uint64_t offset, std::size_t len) {
    return make_error(Status::IoError, "cannot read " + std::to_string(len) + " bytes at offset " +
                                           std::to_string(offset));
}

Error changed_error(const dm::BackingStore& store) {
    const std::string name = store.name();
    return make_error(Status::IoError, (name.empty() ? "the input" : name) + ": changed size while being read");
}

uint64_t page_size() noexcept {
    static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    return page;
}

// madvise wants a page-aligned start; the advice is only advice, so its
// failure (an old kernel, a range past a shrunk end) is ignored.
void advise(ConstBytes map, uint64_t off, uint64_t len, int advice) noexcept {
    if (off >= map.size()) return;
    len = std::min<uint64_t>(len, map.size() - off);
    const uint64_t start = off / page_size() * page_size();
    void* addr = const_cast<uint8_t*>(map.data() + start);
    (void)::madvise(addr, static_cast<std::size_t>(off + len - start), advice);
}

// True when at most half of kSamples pages spread over [off, off+len) of the
// mapping are missing from the page cache (or mincore cannot tell): such a
// range is read through the mapping; a mostly uncached one straight from the
// disk. A sample, as asking mincore for every page of every chunk cost 5% of
// a warm run's time.
constexpr uint64_t kSamples = 16;
bool mostly_cached(ConstBytes map, uint64_t off, uint64_t len) noexcept {
    const uint64_t page = page_size();
    const uint64_t first = off / page, pages = (off + len - 1) / page - first + 1;
    const uint64_t step = std::max<uint64_t>(1, pages / kSamples);
    uint64_t missing = 0, seen = 0;
    for (uint64_t i = 0; i < pages; i += step, ++seen) {
        unsigned char v = 1;
        void* addr = const_cast<uint8_t*>(map.data() + (first + i) * page);
        if (::mincore(addr, 1, &v) != 0) return true;
        missing += (v & 1) == 0;
    }
    return missing * 2 <= seen;
}

// Reads the chunks of a run in order, kSlots at a time. A chunk of a mapped
// file that is in the page cache is hashed in place (no copy); one that is
// not is read with O_DIRECT through kernel AIO into the chunk's buffer, so
// the disk streams without the page-cache fill (the CPU time of which, on a
// shared machine, made a cold run twice as slow as `cat`) and without this
// thread blocking in readahead submission. Stores that cannot be mapped are
// read with read() into the buffers.
class ChunkReader {
public:
    ChunkReader(dm::BackingStore& store, uint64_t offset, uint32_t bs, uint64_t nblocks, uint64_t chunk_blocks)
        : store_(store), offset_(offset), bs_(bs), nblocks_(nblocks), chunk_blocks_(chunk_blocks),
          ahead_(offset) {
        map_ = store.mapped();
        in_place_ = nblocks > 0 && map_.size() >= offset + nblocks * bs;
        // A run of one chunk (a small file) gains nothing from streaming
        // past the page cache, and the AIO context is set up by the first
        // direct read, not here: io_destroy waits for an RCU grace period
        // (tens of milliseconds on a busy machine), which a warm or small
        // input, read through the mapping, must not pay once per file.
        if (!in_place_ || offset % dm::BackingStore::kDirectAlign != 0 || bs % 512 != 0 || chunks() < 2)
            return;
        dfd_ = store.direct_fd();
    }
    ~ChunkReader() {
        // Waits for (or cancels) reads still in flight before their buffers go.
        if (aio_ != 0) (void)::syscall(SYS_io_destroy, aio_);
    }
    ChunkReader(const ChunkReader&) = delete;
    ChunkReader& operator=(const ChunkReader&) = delete;

    uint64_t chunks() const noexcept { return (nblocks_ + chunk_blocks_ - 1) / chunk_blocks_; }

    // Starts fetching chunk c into its slot (for a store read with read(),
    // reads it now); the outcome is collected by get(c).
    void issue(uint64_t c) {
        if (c >= chunks()) return;
        Slot& s = slots_[c % kSlots];
        const uint64_t at = at_of(c);
        const std::size_t len = len_of(c);
        s.status = Status::Ok;
        if (in_place_) {
            if (dfd_ >= 0 && !mostly_cached(map_, at, len) && submit(s, c, at, len)) return;
            if (dfd_ < 0) {  // no direct reads: the page cache is filled ahead
                const uint64_t want = std::min<uint64_t>(offset_ + nblocks_ * bs_, at + len + kReadAheadBytes);
                for (ahead_ = std::max(ahead_, at); ahead_ < want; ahead_ += kAdvicePiece)
                    advise(map_, ahead_, std::min(kAdvicePiece, want - ahead_), MADV_WILLNEED);
            }
            s.mode = Mode::Mapped;
            s.populated = false;
            return;
        }
        s.mode = Mode::Copied;
        if (!buffer(s)) return;
        s.status = store_.read(at, Bytes(s.buf.get(), len));
    }

    // Maps chunk c's pages here, not by page faults in the workers: called
    // (by get) for the next chunk while one is hashed, so that only two or
    // three chunks of the mapping are resident at a time.
    void prepare(uint64_t c) noexcept {
        if (c >= chunks()) return;
        Slot& s = slots_[c % kSlots];
        if (s.mode != Mode::Mapped || s.populated) return;
        advise(map_, at_of(c), len_of(c), MADV_POPULATE_READ);
        s.populated = true;
    }

    Result<const uint8_t*> get(uint64_t c) {
        Slot& s = slots_[c % kSlots];
        const uint64_t at = at_of(c);
        const std::size_t len = len_of(c);
        prepare(c);
        if (s.mode == Mode::Mapped) return map_.data() + at;
        if (s.mode == Mode::Copied) {
            if (s.status == Status::NoMem) return make_error(s.status, "out of memory for the read buffers");
            if (s.status != Status::Ok) return read_error(at, len);
            return static_cast<const uint8_t*>(s.buf.get());
        }
        while (s.pending)
            if (Status st = reap(); st != Status::Ok) return make_error(st, "waiting for a read failed");
        if (s.result >= 0 && static_cast<uint64_t>(s.result) < len) return changed_error(store_);  // short: shrank
        if (s.result < 0) {
            // Refused (alignment the device wants, a file system without
            // O_DIRECT): read through the mapping from now on.
            if (s.result != -EINVAL) return read_error(at, len);
            dfd_ = -1;
            s.mode = Mode::Mapped;
            s.populated = false;
            prepare(c);
            return map_.data() + at;
        }
        return static_cast<const uint8_t*>(s.buf.get());
    }

    // Chunk c is hashed: its mapped pages leave this process (bounded
    // memory), and a file truncated meanwhile is reported, as some of those
    // blocks read as zeros, not the file.
    Result<void> done(uint64_t c) {
        Slot& s = slots_[c % kSlots];
        if (s.mode == Mode::Mapped) {
            store_.release_mapped(at_of(c), len_of(c));
            if (store_.changed()) return changed_error(store_);
        }
        return {};
    }

private:
    enum class Mode { Mapped, Direct, Copied };
    struct Slot {
        Mode mode = Mode::Mapped;
        bool populated = false;
        Status status = Status::Ok;
        bool pending = false;
        int64_t result = 0;
        ReadBuffer buf;
        iocb cb{};
    };

    uint64_t at_of(uint64_t c) const noexcept { return offset_ + c * chunk_blocks_ * bs_; }
    std::size_t len_of(uint64_t c) const noexcept {
        return static_cast<std::size_t>(std::min(chunk_blocks_, nblocks_ - c * chunk_blocks_) * bs_);
    }

    bool buffer(Slot& s) {
        if (s.buf) return true;
        const std::size_t size = (std::min(chunk_blocks_, nblocks_) * bs_ + dm::BackingStore::kDirectAlign - 1) /
                                 dm::BackingStore::kDirectAlign * dm::BackingStore::kDirectAlign;
        if (!s.buf.allocate(size)) s.status = Status::NoMem;
        return static_cast<bool>(s.buf);
    }

    // The length is rounded up to the alignment: bytes past the run (or a
    // short read at the end of the file past it) are not looked at.
    bool submit(Slot& s, uint64_t c, uint64_t at, std::size_t len) {
        if (aio_ == 0 && ::syscall(SYS_io_setup, static_cast<unsigned>(kSlots), &aio_) != 0) {
            dfd_ = -1, aio_ = 0;  // no AIO here: through the mapping, with readahead
            return false;
        }
        if (!buffer(s)) return false;
        constexpr std::size_t a = dm::BackingStore::kDirectAlign;
        s.cb = iocb{};
        s.cb.aio_data = c % kSlots;
        s.cb.aio_lio_opcode = IOCB_CMD_PREAD;
        s.cb.aio_fildes = static_cast<uint32_t>(dfd_);
        s.cb.aio_buf = reinterpret_cast<uint64_t>(s.buf.get());
        s.cb.aio_nbytes = (len + a - 1) / a * a;
        s.cb.aio_offset = static_cast<int64_t>(at);
        iocb* list[1] = {&s.cb};
        long n;
        do n = ::syscall(SYS_io_submit, aio_, 1L, list);
        while (n < 0 && errno == EINTR);
        if (n != 1) return false;  // mapped instead
        s.mode = Mode::Direct;
        s.pending = true;
        return true;
    }

    Status reap() {
        std::array<io_event, kSlots> ev{};
        long n = ::syscall(SYS_io_getevents, aio_, 1L, static_cast<long>(ev.size()), ev.data(), nullptr);
        if (n < 0) return errno == EINTR ? Status::Ok : Status::IoError;
        for (long i = 0; i < n; ++i) {
            Slot& s = slots_[static_cast<std::size_t>(ev[static_cast<std::size_t>(i)].data)];
            s.result = ev[static_cast<std::size_t>(i)].res;
            s.pending = false;
        }
        return Status::Ok;
    }

    dm::BackingStore& store_;
    const uint64_t offset_;
    const uint32_t bs_;
    const uint64_t nblocks_;
    const uint64_t chunk_blocks_;
    ConstBytes map_;
    bool in_place_ = false;
    int dfd_ = -1;
    aio_context_t aio_ = 0;
    uint64_t ahead_;  // without direct reads, the page cache was asked for up to here
    std::array<Slot, kSlots> slots_;
};

}  // namespace

Result<void> hash_blocks(ParallelHasher& pool, dm::BackingStore& store, uint64_t offset, uint32_t bs,
                         uint64_t length, const ProgressFn& progress, const DigestSink& sink) {
    const std::size_t ds = pool.digest_size();
    const uint64_t nblocks = length / bs;  // whole blocks; a short tail comes last
    const uint64_t chunk_blocks = std::max<uint64_t>(1, kChunkBytes / bs);
    const std::size_t buf_blocks = static_cast<std::size_t>(std::clamp<uint64_t>(nblocks, 1, chunk_blocks));
    store.hint_sequential();
    // Chunk c+1 is queued on the pool before chunk c is waited for, so the
    // workers go from one chunk to the next without waiting for this thread;
    // chunk c is released and its digests handed on while c+1 is hashed.
    // Hence two digest buffers, and four slots: c, c+1 and two reads ahead.
    std::array<std::vector<uint8_t>, 2> digests{std::vector<uint8_t>(buf_blocks * ds),
                                                std::vector<uint8_t>(buf_blocks * ds)};
    {
        ChunkReader reader(store, offset, bs, nblocks, chunk_blocks);
        const uint64_t chunks = reader.chunks();
        const auto count_of = [&](uint64_t c) {
            return static_cast<std::size_t>(std::min(chunk_blocks, nblocks - c * chunk_blocks));
        };
        // The pool reads a started chunk and writes its digests until it is
        // waited for: every return waits for what is queued.
        std::size_t queued = 0;
        struct Drain {
            ParallelHasher& pool;
            std::size_t& queued;
            ~Drain() {
                for (; queued > 0; --queued) (void)pool.wait();
            }
        } drain{pool, queued};
        const auto start = [&](uint64_t c) -> Result<void> {
            auto data = reader.get(c);
            if (!data) return data.error();
            pool.start(*data, count_of(c), bs, digests[c % 2].data());
            ++queued;
            return {};
        };
        for (uint64_t c = 0; c < kSlots; ++c) reader.issue(c);  // c's slot is c % kSlots
        if (chunks > 0)
            if (auto r = start(0); !r) return r;
        for (uint64_t c = 0; c < chunks; ++c) {
            if (c + 1 < chunks)
                if (auto r = start(c + 1); !r) return r;
            --queued;
            if (Status s = pool.wait(); s != Status::Ok)
                return make_error(s, std::string("hashing failed: ") + to_string(s));
            if (auto r = reader.done(c); !r) return r;
            const uint64_t first = c * chunk_blocks;
            const std::size_t count = count_of(c);
            if (auto r = sink(first, count, ConstBytes(digests[c % 2]).first(count * ds)); !r) return r;
            if (progress && !progress((first + count) * bs, length))
                return make_error(Status::Interrupted, "interrupted");
            reader.issue(c + kSlots);  // into chunk c's slot
        }
    }
    if (const auto tail = static_cast<std::size_t>(length - nblocks * bs); tail > 0) {
        std::vector<uint8_t> last(bs, 0);  // zero-padded
        const uint64_t at = offset + nblocks * bs;
        if (store.read(at, Bytes(last).first(tail)) != Status::Ok) {
            if (store.changed()) return changed_error(store);
            return read_error(at, tail);
        }
        if (Status s = pool.own_context().hash_one(last, Bytes(digests[0]).first(ds)); s != Status::Ok)
            return make_error(s, std::string("hashing failed: ") + to_string(s));
        if (auto r = sink(nblocks, 1, ConstBytes(digests[0]).first(ds)); !r) return r;
        if (progress && !progress(length, length)) return make_error(Status::Interrupted, "interrupted");
    }
    if (store.changed()) return changed_error(store);  // grew (or shrank) meanwhile
    return {};
}

}  // namespace blkcrypt::verity
