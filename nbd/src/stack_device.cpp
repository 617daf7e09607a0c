// The block devices a device-mapper table is made of: linear windows, zero,
// error, a concatenation of segments, the verified view of a verity target,
// and a block device seen as a BackingStore by a target stacked on it.
#include <blkcrypt/nbd/dm_table.hpp>
#include <blkcrypt/verity/target.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

namespace blkcrypt::nbd {
namespace {

bool inside(uint64_t offset, std::size_t len, uint64_t size, uint32_t bs) {
    return len && offset % bs == 0 && len % bs == 0 && offset <= size && len <= size - offset;
}

class LinearDevice final : public BlockDevice {
public:
    LinearDevice(std::shared_ptr<BlockDevice> lower, uint64_t offset, uint64_t length)
        : lower_(std::move(lower)), offset_(offset), length_(length) {}
    uint64_t size() const override { return length_; }
    uint32_t block_size() const override { return lower_->block_size(); }
    bool read_only() const override { return lower_->read_only(); }
    Status submit_read(uint64_t offset, Bytes out, Completion done) override {
        if (!inside(offset, out.size(), length_, block_size())) return Status::Invalid;
        return lower_->submit_read(offset_ + offset, out, std::move(done));
    }
    Status submit_write(uint64_t offset, ConstBytes in, Completion done) override {
        if (!inside(offset, in.size(), length_, block_size())) return Status::Invalid;
        return lower_->submit_write(offset_ + offset, in, std::move(done));
    }
    Status flush() override { return lower_->flush(); }
    bool can_discard() const override { return lower_->can_discard(); }
    Status discard(uint64_t offset, uint64_t len) override {
        const uint32_t bs = block_size();
        if (!len || offset % bs || len % bs || offset > length_ || len > length_ - offset) return Status::Invalid;
        return lower_->discard(offset_ + offset, len);
    }
    void drain() override { lower_->drain(); }
    std::string describe() const override {
        return "linear " + std::to_string(offset_ / 512) + " of " + lower_->describe();
    }

private:
    std::shared_ptr<BlockDevice> lower_;
    const uint64_t offset_, length_;
};

// zero and error: no backing at all; I/O completes before submit returns.
class FixedDevice final : public BlockDevice {
public:
    FixedDevice(uint64_t size, bool zero, bool read_only) : size_(size), zero_(zero), read_only_(read_only) {}
    uint64_t size() const override { return size_; }
    uint32_t block_size() const override { return 512; }
    bool read_only() const override { return read_only_; }
    Status submit_read(uint64_t offset, Bytes out, Completion done) override {
        if (!done || !inside(offset, out.size(), size_, 512)) return Status::Invalid;
        if (zero_) std::memset(out.data(), 0, out.size());
        done(zero_ ? Status::Ok : Status::IoError);
        return Status::InProgress;
    }
    Status submit_write(uint64_t offset, ConstBytes in, Completion done) override {
        if (read_only_) return Status::Unsupported;
        if (!done || !inside(offset, in.size(), size_, 512)) return Status::Invalid;
        done(zero_ ? Status::Ok : Status::IoError);  // dm-zero drops writes
        return Status::InProgress;
    }
    Status flush() override { return Status::Ok; }
    void drain() override {}
    std::string describe() const override { return zero_ ? "zero" : "error"; }

private:
    const uint64_t size_;
    const bool zero_, read_only_;
};

class ConcatDevice final : public BlockDevice {
public:
    ConcatDevice(std::vector<Segment> segs, uint64_t size, uint32_t bs, bool ro, std::string what)
        : segs_(std::move(segs)), size_(size), bs_(bs), read_only_(ro), what_(std::move(what)) {}
    uint64_t size() const override { return size_; }
    uint32_t block_size() const override { return bs_; }
    bool read_only() const override { return read_only_; }
    Status submit_read(uint64_t offset, Bytes out, Completion done) override {
        return split(offset, out.size(), std::move(done), [&](BlockDevice& d, uint64_t at, std::size_t from,
                                                              std::size_t n, Completion c) {
            return d.submit_read(at, out.subspan(from, n), std::move(c));
        });
    }
    Status submit_write(uint64_t offset, ConstBytes in, Completion done) override {
        if (read_only_) return Status::Unsupported;
        return split(offset, in.size(), std::move(done), [&](BlockDevice& d, uint64_t at, std::size_t from,
                                                             std::size_t n, Completion c) {
            return d.submit_write(at, in.subspan(from, n), std::move(c));
        });
    }
    Status flush() override {
        Status first = Status::Ok;
        for (auto& s : segs_)
            if (Status st = s.dev->flush(); st != Status::Ok && first == Status::Ok) first = st;
        return first;
    }
    // As the kernel's dm_table_supports_discards: only when every target does.
    bool can_discard() const override {
        if (read_only_) return false;
        for (const auto& s : segs_)
            if (!s.dev->can_discard()) return false;
        return true;
    }
    Status discard(uint64_t offset, uint64_t len) override {
        if (!can_discard()) return Status::Unsupported;
        if (!len || offset % bs_ || len % bs_ || offset > size_ || len > size_ - offset) return Status::Invalid;
        for (const auto& s : segs_) {
            const uint64_t end = s.start + s.dev->size();
            if (end <= offset || s.start >= offset + len) continue;
            const uint64_t from = std::max(offset, s.start), to = std::min(offset + len, end);
            if (Status st = s.dev->discard(from - s.start, to - from); st != Status::Ok) return st;
        }
        return Status::Ok;
    }
    void drain() override {
        for (auto& s : segs_) s.dev->drain();
    }
    std::string describe() const override { return what_; }

private:
    // The parts of one I/O: `done` gets the first failure once all finished.
    // The count starts one high so that parts completing while later ones
    // are still being submitted cannot finish the whole.
    struct Join {
        std::atomic<std::size_t> left{1};
        std::mutex mu;
        Status result = Status::Ok;
        Completion done;
        void finish(Status s) {
            if (s != Status::Ok) {
                std::lock_guard lk(mu);
                if (result == Status::Ok) result = s;
            }
            if (left.fetch_sub(1) == 1) done(result);
        }
    };
    template <class Submit>
    Status split(uint64_t offset, std::size_t len, Completion done, Submit submit) {
        if (!done || !inside(offset, len, size_, bs_)) return Status::Invalid;
        auto join = std::make_shared<Join>();
        join->done = std::move(done);
        auto it = std::upper_bound(segs_.begin(), segs_.end(), offset,
                                   [](uint64_t o, const Segment& s) { return o < s.start; }) - 1;
        for (std::size_t from = 0; from < len; ++it) {
            const uint64_t at = offset + from - it->start;
            const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(len - from, it->dev->size() - at));
            join->left.fetch_add(1);
            const Status s = submit(*it->dev, at, from, n, [join](Status st) { join->finish(st); });
            if (s != Status::InProgress) join->finish(s == Status::Ok ? Status::IoError : s);
            from += n;
        }
        join->finish(Status::Ok);
        return Status::InProgress;
    }

    const std::vector<Segment> segs_;
    const uint64_t size_;
    const uint32_t bs_;
    const bool read_only_;
    const std::string what_;
};

// The verified view as a read-only store, for a store device's I/O pool.
class VerifiedStore final : public BackingStore {
public:
    VerifiedStore(std::unique_ptr<verity::VerityTarget> t, std::string name) : t_(std::move(t)), name_(std::move(name)) {}
    Status read(uint64_t offset, Bytes out) override { return t_->read(offset, out); }
    Status write(uint64_t, ConstBytes) override { return Status::Unsupported; }
    uint64_t size() const override { return t_->size(); }
    std::string name() const override { return name_; }

private:
    std::unique_ptr<verity::VerityTarget> t_;
    std::string name_;
};

class DeviceStore final : public BackingStore {
public:
    DeviceStore(std::shared_ptr<BlockDevice> dev, std::string name) : dev_(std::move(dev)), name_(std::move(name)) {}
    Status read(uint64_t offset, Bytes out) override { return read_sync(*dev_, offset, out); }
    Status write(uint64_t offset, ConstBytes in) override { return write_sync(*dev_, offset, in); }
    uint64_t size() const override { return dev_->size(); }
    Status flush() override { return dev_->flush(); }
    Status discard(uint64_t offset, uint64_t len) override {
        return dev_->can_discard() ? dev_->discard(offset, len) : Status::Unsupported;
    }
    std::string name() const override { return name_; }

private:
    std::shared_ptr<BlockDevice> dev_;
    std::string name_;
};

}  // namespace

Result<std::shared_ptr<BlockDevice>> make_linear_device(std::shared_ptr<BlockDevice> lower, uint64_t offset,
                                                        uint64_t length) {
    if (!lower) return make_error(Status::Invalid, "no device");
    const uint32_t bs = lower->block_size();
    if (offset % bs || length % bs || length == 0)
        return make_error(Status::Invalid, "not aligned to the " + std::to_string(bs) + "-byte blocks of " +
                                               lower->describe());
    if (offset > lower->size() || length > lower->size() - offset)
        return make_error(Status::Invalid, lower->describe() + " is too small: " + std::to_string(lower->size() / 512) +
                                               " sectors, the line needs " + std::to_string((offset + length) / 512));
    return std::shared_ptr<BlockDevice>(std::make_shared<LinearDevice>(std::move(lower), offset, length));
}

std::shared_ptr<BlockDevice> make_zero_device(uint64_t size, bool read_only) {
    return std::make_shared<FixedDevice>(size, true, read_only);
}

std::shared_ptr<BlockDevice> make_error_device(uint64_t size) {
    return std::make_shared<FixedDevice>(size, false, false);
}

Result<std::shared_ptr<BlockDevice>> make_concat_device(std::vector<Segment> segments, bool read_only,
                                                        std::string description) {
    if (segments.empty()) return make_error(Status::Invalid, "no segments");
    uint32_t bs = 512;
    uint64_t end = 0;
    for (const Segment& s : segments) {
        if (!s.dev || s.dev->size() == 0) return make_error(Status::Invalid, "an empty segment");
        if (s.start != end) return make_error(Status::Invalid, "segments are not back to back");
        if (s.dev->size() > UINT64_MAX - end) return make_error(Status::Invalid, "the device is too large");
        end += s.dev->size();
        bs = std::max(bs, s.dev->block_size());
        read_only = read_only || s.dev->read_only();
    }
    // The kernel stacks the largest logical block size; each target must
    // start and end on it.
    for (const Segment& s : segments)
        if (s.start % bs || s.dev->size() % bs)
            return make_error(Status::Invalid, "sector " + std::to_string(s.start / 512) + ": the segment of " +
                                                   std::to_string(s.dev->size() / 512) +
                                                   " sectors is not aligned to the table's " + std::to_string(bs) +
                                                   "-byte logical block size");
    return std::shared_ptr<BlockDevice>(
        std::make_shared<ConcatDevice>(std::move(segments), end, bs, read_only, std::move(description)));
}

Result<std::shared_ptr<BlockDevice>> make_verity_device(std::unique_ptr<verity::VerityTarget> target,
                                                        unsigned threads, std::string description) {
    if (!target) return make_error(Status::Invalid, "no verity target");
    StoreDeviceOptions o;
    o.read_only = true;
    o.block_size = target->block_size();
    o.threads = threads;
    o.description = description;
    return make_store_device(std::make_shared<VerifiedStore>(std::move(target), description), o);
}

std::shared_ptr<BackingStore> device_store(std::shared_ptr<BlockDevice> dev, std::string name) {
    return std::make_shared<DeviceStore>(std::move(dev), std::move(name));
}

}  // namespace blkcrypt::nbd
