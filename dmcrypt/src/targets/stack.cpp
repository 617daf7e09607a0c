// The stack of a table's lines: segments back to back, an I/O split at
// their boundaries.
#include "inside.hpp"

#include <blkcrypt/dm/targets.hpp>

#include <algorithm>
#include <atomic>
#include <mutex>

namespace blkcrypt::dm {
namespace {

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
    // A one-line table is its line: a crypt line stacked on an integrity
    // table reaches the tags through it.
    std::shared_ptr<integrity::TaggedDevice> tagged() override {
        return segs_.size() == 1 ? segs_[0].dev->tagged() : nullptr;
    }

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

}  // namespace

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

}  // namespace blkcrypt::dm
