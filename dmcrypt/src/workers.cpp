#include "workers.hpp"

#include <system_error>

namespace blkcrypt::dm {
namespace {
// The pool whose worker this thread is, if any (see acquire()).
thread_local const WorkerPool* tl_pool = nullptr;
}  // namespace

WorkerPool::WorkerPool(unsigned threads, std::size_t slots, RunFn run)
    : run_(std::move(run)), ring_(slots) {
    free_.reserve(slots);
    for (std::size_t i = slots; i-- > 0;) free_.push_back(i);
    threads_.reserve(threads);
    // Near the process's thread limit creation fails: run with the workers
    // that started (CryptTarget::create refuses a pool with none).
    for (unsigned i = 0; i < threads; ++i) {
        try {
            threads_.emplace_back([this] { worker(); });
        } catch (const std::system_error&) {
            // EAGAIN may pass (another thread exited): try the others too.
        }
    }
}

WorkerPool::~WorkerPool() {
    drain();
    {
        std::lock_guard lk(mu_);
        stop_ = true;
        work_cv_.notify_all();
    }
    for (auto& t : threads_) t.join();
}

std::size_t WorkerPool::pop_locked() {
    std::size_t s = ring_[head_];
    head_ = (head_ + 1) % ring_.size();
    --queued_;
    return s;
}

std::size_t WorkerPool::acquire() {
    std::unique_lock lk(mu_);
    const bool helper = tl_pool == this;
    for (;;) {
        if (!free_.empty()) {
            std::size_t s = free_.back();
            free_.pop_back();
            ++in_flight_;
            return s;
        }
        if (!helper) {
            room_cv_.wait(lk);
        } else if (queued_) {
            // Every slot is taken and this worker would otherwise sleep while
            // the bios holding them wait for a worker: run one of them.
            std::size_t s = pop_locked();
            lk.unlock();
            run_(s);
            lk.lock();
        } else {
            ++helpers_waiting_;
            work_cv_.wait(lk);
            --helpers_waiting_;
        }
    }
}

// Notifications are sent under the lock: a crypto completion calling
// schedule() may be the last touch before the target is destroyed.
void WorkerPool::schedule(std::size_t slot) {
    std::lock_guard lk(mu_);
    ring_[(head_ + queued_) % ring_.size()] = slot;
    ++queued_;
    work_cv_.notify_one();
}

void WorkerPool::release(std::size_t slot) {
    std::lock_guard lk(mu_);
    free_.push_back(slot);
    room_cv_.notify_one();
    if (helpers_waiting_) work_cv_.notify_all();  // they wait on work_cv_
}

void WorkerPool::retire() {
    std::lock_guard lk(mu_);
    if (--in_flight_ == 0) idle_cv_.notify_all();
}

void WorkerPool::drain() {
    std::unique_lock lk(mu_);
    idle_cv_.wait(lk, [&] { return in_flight_ == 0; });
}

void WorkerPool::worker() {
    tl_pool = this;
    std::unique_lock lk(mu_);
    for (;;) {
        work_cv_.wait(lk, [&] { return stop_ || queued_ > 0; });
        if (!queued_) return;  // stopping, and nothing left
        std::size_t s = pop_locked();
        lk.unlock();
        run_(s);
        lk.lock();
    }
}

}  // namespace blkcrypt::dm
