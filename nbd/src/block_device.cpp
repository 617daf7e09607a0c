// The two first block devices: a plain BackingStore (on a thread pool) and a
// dm-crypt CryptTarget (one bio per I/O on its async path).
#include <blkcrypt/dm/bio.hpp>
#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/nbd/block_device.hpp>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace blkcrypt::nbd {
namespace {

Status wait_for(const std::function<Status(Completion)>& submit) {
    std::mutex mu;
    std::condition_variable cv;
    bool finished = false;
    Status result = Status::Ok;
    const Status s = submit([&](Status st) {
        std::lock_guard lk(mu);
        result = st;
        finished = true;
        cv.notify_one();
    });
    if (s != Status::InProgress) return s;
    std::unique_lock lk(mu);
    cv.wait(lk, [&] { return finished; });
    return result;
}

bool valid_block_size(uint32_t bs) { return bs >= 512 && bs <= 4096 && (bs & (bs - 1)) == 0; }

class StoreDevice final : public BlockDevice {
public:
    StoreDevice(std::shared_ptr<BackingStore> store, StoreDeviceOptions o)
        : store_(std::move(store)), opts_(o), size_(store_->size() / o.block_size * o.block_size) {
        unsigned n = o.threads ? o.threads : std::max(2u, std::thread::hardware_concurrency());
        for (unsigned i = 0; i < n; ++i) threads_.emplace_back([this] { work(); });
    }
    ~StoreDevice() override {
        {
            std::lock_guard lk(mu_);
            stopping_ = true;
        }
        cv_.notify_all();
        for (auto& t : threads_) t.join();
    }
    uint64_t size() const override { return size_; }
    uint32_t block_size() const override { return opts_.block_size; }
    bool read_only() const override { return opts_.read_only; }

    Status submit_read(uint64_t offset, Bytes out, Completion done) override {
        if (!aligned(offset, out.size()) || !done) return Status::Invalid;
        return queue([this, offset, out, done = std::move(done)] { done(store_->read(offset, out)); });
    }
    Status submit_write(uint64_t offset, ConstBytes in, Completion done) override {
        if (opts_.read_only) return Status::Unsupported;
        if (!aligned(offset, in.size()) || !done) return Status::Invalid;
        return queue([this, offset, in, done = std::move(done)] { done(store_->write(offset, in)); });
    }
    Status flush() override { return opts_.read_only ? Status::Ok : store_->flush(); }
    bool can_discard() const override { return opts_.discard && !opts_.read_only; }
    Status discard(uint64_t offset, uint64_t len) override {
        if (!can_discard()) return Status::Unsupported;
        if (offset % opts_.block_size || len % opts_.block_size || offset > size_ || len > size_ - offset)
            return Status::Invalid;
        return store_->discard(offset, len);
    }
    // A hole in the file is a hole reading as zeros; runs are merged across
    // the store's answers so a long one is one extent.
    std::vector<Extent> extents(uint64_t offset, uint64_t len, unsigned max) override {
        std::vector<Extent> v;
        while (len) {
            const BackingStore::Run r = store_->allocation(offset, len);
            const uint64_t n = std::clamp<uint64_t>(r.length, 1, len);
            if (!v.empty() && v.back().hole == r.hole)
                v.back().length += n;
            else if (v.size() == max)
                break;
            else
                v.push_back({n, r.hole, r.hole});
            offset += n;
            len -= n;
        }
        return v;
    }
    void drain() override {
        std::unique_lock lk(mu_);
        idle_.wait(lk, [&] { return jobs_.empty() && running_ == 0; });
    }
    std::string describe() const override {
        return opts_.description.empty() ? "plain " + store_->name() : opts_.description;
    }

private:
    bool aligned(uint64_t offset, std::size_t len) const {
        const uint32_t bs = opts_.block_size;
        return len && offset % bs == 0 && len % bs == 0 && offset <= size_ && len <= size_ - offset;
    }
    Status queue(std::function<void()> job) {
        {
            std::lock_guard lk(mu_);
            jobs_.push_back(std::move(job));
        }
        cv_.notify_one();
        return Status::InProgress;
    }
    void work() {
        std::unique_lock lk(mu_);
        for (;;) {
            cv_.wait(lk, [&] { return stopping_ || !jobs_.empty(); });
            if (jobs_.empty()) return;
            auto job = std::move(jobs_.front());
            jobs_.pop_front();
            ++running_;
            lk.unlock();
            job();
            lk.lock();
            --running_;
            if (jobs_.empty() && running_ == 0) idle_.notify_all();
        }
    }

    std::shared_ptr<BackingStore> store_;
    const StoreDeviceOptions opts_;
    const uint64_t size_;
    std::mutex mu_;
    std::condition_variable cv_, idle_;
    std::deque<std::function<void()>> jobs_;  // bounded by the server's budget
    unsigned running_ = 0;
    bool stopping_ = false;
    std::vector<std::thread> threads_;
};

class CryptDevice final : public BlockDevice {
public:
    CryptDevice(std::shared_ptr<dm::CryptTarget> t, std::shared_ptr<BackingStore> s, bool ro)
        : target_(std::move(t)), store_(std::move(s)), read_only_(ro) {}
    ~CryptDevice() override { target_->drain(); }
    uint64_t size() const override { return target_->length_sectors() * 512; }
    uint32_t block_size() const override { return static_cast<uint32_t>(target_->table().sector_size); }
    bool read_only() const override { return read_only_; }

    Status submit_read(uint64_t offset, Bytes out, Completion done) override {
        return submit(dm::BioDir::Read, offset, out.data(), out.size(), std::move(done));
    }
    Status submit_write(uint64_t offset, ConstBytes in, Completion done) override {
        if (read_only_) return Status::Unsupported;
        // The target encrypts into its own bounce buffers: `in` is only read.
        return submit(dm::BioDir::Write, offset, const_cast<uint8_t*>(in.data()), in.size(), std::move(done));
    }
    Status flush() override { return read_only_ ? Status::Ok : store_->flush(); }
    bool can_discard() const override { return !read_only_ && target_->table().allow_discards; }
    Status discard(uint64_t offset, uint64_t len) override {
        const uint32_t bs = block_size();
        if (!can_discard()) return Status::Unsupported;
        if (offset % bs || len % bs || offset > size() || len > size() - offset) return Status::Invalid;
        return store_->discard(target_->table().offset * 512 + offset, len);
    }
    void drain() override { target_->drain(); }
    std::string describe() const override {
        return "crypt " + target_->table().cipher + " over " + store_->name();
    }

private:
    static constexpr std::size_t kInlineMax = 16 << 10;
    // One heap record per bio: the bio must live until its completion.
    struct Op {
        dm::Bio bio;
        Completion done;
    };
    Status submit(dm::BioDir dir, uint64_t offset, uint8_t* data, std::size_t len, Completion done) {
        const uint32_t bs = block_size();
        if (!done || !len || offset % bs || len % bs || offset > size() || len > size() - offset)
            return Status::Invalid;
        auto* op = new Op;
        op->done = std::move(done);
        op->bio.dir = dir;
        op->bio.sector = offset / 512;
        op->bio.vecs = {{data, len}};
        op->bio.on_complete = [op](Status s) {
            Completion d = std::move(op->done);
            delete op;
            d(s);
        };
        // Small I/O runs in the caller's thread: for 4 KiB the hand-over to a
        // worker and back (two wake-ups) costs more than the I/O and the
        // cipher; large I/O goes to the workers, several cores at once.
        if (len <= kInlineMax) {
            const Status s = target_->run_inline(op->bio);
            if (s == Status::InProgress) return s;
            Completion d = std::move(op->done);
            delete op;
            if (s == Status::Invalid) return s;
            d(s);
            return Status::InProgress;
        }
        const Status s = target_->submit(op->bio);
        if (s != Status::InProgress && s != Status::Ok) {
            delete op;
            return s;
        }
        return Status::InProgress;
    }

    std::shared_ptr<dm::CryptTarget> target_;
    std::shared_ptr<BackingStore> store_;
    const bool read_only_;
};

}  // namespace

Status read_sync(BlockDevice& dev, uint64_t offset, Bytes out) {
    return wait_for([&](Completion c) { return dev.submit_read(offset, out, std::move(c)); });
}

Status write_sync(BlockDevice& dev, uint64_t offset, ConstBytes in) {
    return wait_for([&](Completion c) { return dev.submit_write(offset, in, std::move(c)); });
}

Result<std::shared_ptr<BlockDevice>> make_store_device(std::shared_ptr<BackingStore> store, StoreDeviceOptions opts) {
    if (!store) return make_error(Status::Invalid, "no backing store");
    if (!valid_block_size(opts.block_size))
        return make_error(Status::Invalid, "block size " + std::to_string(opts.block_size) +
                                               " is not a power of two in 512..4096");
    if (store->size() < opts.block_size)
        return make_error(Status::Invalid, store->name() + ": smaller than one block");
    return std::shared_ptr<BlockDevice>(std::make_shared<StoreDevice>(std::move(store), opts));
}

std::shared_ptr<BlockDevice> make_crypt_device(std::shared_ptr<dm::CryptTarget> target,
                                               std::shared_ptr<BackingStore> store, bool read_only) {
    return std::make_shared<CryptDevice>(std::move(target), std::move(store), read_only);
}

}  // namespace blkcrypt::nbd
