#include "cryptd_queue.hpp"

#include <algorithm>
#include <new>
#include <system_error>

namespace blkcrypt {

CryptdQueue::CryptdQueue(std::size_t threads, std::size_t max_queued)
    : nthreads_(threads ? threads : std::max(2u, std::thread::hardware_concurrency())),
      max_queued_(std::max<std::size_t>(1, max_queued)) {}

CryptdQueue::~CryptdQueue() {
    {
        std::lock_guard lk(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
}

bool CryptdQueue::start_locked() {
    // Threads start on first use: a registry that never uses cryptd has none.
    // Near the process's thread limit creation fails: the queue runs with the
    // threads it got, and tries again on a later request when it got none.
    if (!threads_.empty()) return true;
    if (ring_.empty()) {
        try {
            ring_.resize(max_queued_);
        } catch (const std::bad_alloc&) {
            return false;
        }
    }
    threads_.reserve(nthreads_);
    for (std::size_t i = 0; i < nthreads_; ++i) {
        try {
            threads_.emplace_back([this] { worker(); });
        } catch (const std::system_error&) {
            // EAGAIN may pass (another thread exited): try the others too.
        }
    }
    return !threads_.empty();
}

std::size_t CryptdQueue::threads() const {
    std::lock_guard lk(mu_);
    return threads_.size();
}

void CryptdQueue::push_locked(const Job& job) {
    ring_[(head_ + count_) % ring_.size()] = job;
    ++count_;
}

Status CryptdQueue::enqueue(const Job& job, bool may_backlog) {
    {
        std::lock_guard lk(mu_);
        if (!start_locked()) return Status::NoMem;  // nothing would ever run the job
        if (count_ + reserved_ < max_queued_ && backlog_.empty()) {
            push_locked(job);
        } else {
            if (may_backlog) backlog_.push_back(job);
            return Status::Busy;
        }
    }
    cv_.notify_one();
    return Status::InProgress;
}

void CryptdQueue::worker() {
    for (;;) {
        Job job, promoted;
        {
            std::unique_lock lk(mu_);
            cv_.wait(lk, [&] { return stop_ || count_ != 0; });
            if (count_ == 0) return;  // stopping and drained
            job = ring_[head_];
            head_ = (head_ + 1) % ring_.size();
            --count_;
            if (!backlog_.empty()) {
                promoted = backlog_.front();
                backlog_.pop_front();
                ++reserved_;  // the slot just freed
            }
        }
        if (promoted.run) {
            // The submitter must hear InProgress before the final status, so
            // the job becomes runnable only after it has been told.
            if (promoted.left_backlog) promoted.left_backlog(promoted);
            {
                std::lock_guard lk(mu_);
                --reserved_;
                push_locked(promoted);
            }
            cv_.notify_one();
        }
        job.run(job);
    }
}

}  // namespace blkcrypt
