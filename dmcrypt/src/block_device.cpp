// The ground floor of every table: a plain BackingStore as a block device
// (on a thread pool), a block device as a store, and the synchronous I/O
// helpers.
#include <blkcrypt/dm/block_device.hpp>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace blkcrypt::dm {
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

std::shared_ptr<BackingStore> device_store(std::shared_ptr<BlockDevice> dev, std::string name) {
    return std::make_shared<DeviceStore>(std::move(dev), std::move(name));
}

}  // namespace blkcrypt::dm
