// The ring of bios in flight; see <blkcrypt/dm/bio_ring.hpp>.
#include <blkcrypt/dm/bio_ring.hpp>

#include <algorithm>

namespace blkcrypt::dm {

BioRing::BioRing(CryptTarget& target, std::size_t depth, std::size_t buffer_bytes, RetireFn on_retire)
    : BioRing(static_cast<BlockDevice*>(nullptr), depth, buffer_bytes, std::move(on_retire)) {
    target_ = &target;
}

BioRing::BioRing(BlockDevice& device, std::size_t depth, std::size_t buffer_bytes, RetireFn on_retire)
    : BioRing(&device, depth, buffer_bytes, std::move(on_retire)) {}

BioRing::BioRing(BlockDevice* device, std::size_t depth, std::size_t buffer_bytes, RetireFn on_retire)
    : device_(device), buffer_bytes_(buffer_bytes), on_retire_(std::move(on_retire)),
      slots_(std::max<std::size_t>(depth, 1)) {
    for (Slot& s : slots_) {
        if (buffer_bytes_) s.buf = std::make_unique<uint8_t[]>(buffer_bytes_);
        s.bio.vecs.reserve(1);
        // Set once: the data path only fills in sector, direction and memory.
        s.bio.on_complete = [this, &s](Status st) {
            std::lock_guard lk(mu_);
            s.status = st;
            s.busy = false;
            cv_.notify_all();
        };
    }
}

BioRing::~BioRing() { drain(); }

Status BioRing::retire_oldest() {
    Slot& s = slots_[head_];
    {
        std::unique_lock lk(mu_);
        cv_.wait(lk, [&] { return !s.busy; });
    }
    // Advanced before the callback, so that a throwing callback leaves the
    // ring consistent.
    head_ = (head_ + 1) % slots_.size();
    --inflight_;
    const RetiredBio r{s.bio.sector, s.bio.dir, s.data, s.status};
    const Status st = on_retire_ ? on_retire_(r) : r.status;
    return st == Status::Ok ? st : stop(st);
}

Status BioRing::stop(Status s) noexcept {
    drain();
    return s;
}

Status BioRing::reserve() {
    return inflight_ == slots_.size() ? retire_oldest() : Status::Ok;
}

Bytes BioRing::next_buffer() noexcept {
    Slot& s = slots_[(head_ + inflight_) % slots_.size()];
    return {s.buf.get(), s.buf ? buffer_bytes_ : 0};
}

Status BioRing::submit(uint64_t sector, BioDir dir, Bytes data) {
    if (Status st = reserve(); st != Status::Ok) return st;
    Slot& s = slots_[(head_ + inflight_) % slots_.size()];
    s.data = data;
    s.status = Status::Ok;
    s.busy = true;
    s.bio.sector = sector;
    s.bio.dir = dir;
    s.bio.vecs.assign(1, SgEntry{data.data(), data.size()});
    // A device takes the slot's completion as is (a copy of a small
    // function object: no allocation).
    const Status st = target_ ? target_->submit(s.bio)
                      : dir == BioDir::Read ? device_->submit_read(sector * 512, data, s.bio.on_complete)
                                            : device_->submit_write(sector * 512, data, s.bio.on_complete);
    if (st != Status::InProgress) {
        s.busy = false;  // refused bios are not completed
        return stop(st);
    }
    ++inflight_;
    return Status::Ok;
}

Status BioRing::finish() {
    while (inflight_)
        if (Status st = retire_oldest(); st != Status::Ok) return st;
    return Status::Ok;
}

void BioRing::drain() noexcept {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] {
        return std::none_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.busy; });
    });
    head_ = inflight_ = 0;
}

}  // namespace blkcrypt::dm
