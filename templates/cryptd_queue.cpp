#include "cryptd_queue.hpp"

#include <algorithm>
#include <optional>
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

Status CryptdQueue::enqueue(Job job, bool may_backlog) {
    {
        std::lock_guard lk(mu_);
        if (!start_locked()) return Status::NoMem;  // nothing would ever run the job
        if (queue_.size() < max_queued_ && backlog_.empty()) {
            queue_.push_back(std::move(job));
        } else if (may_backlog) {
            backlog_.push_back(std::move(job));
            return Status::Busy;
        } else {
            return Status::Busy;
        }
    }
    cv_.notify_one();
    return Status::InProgress;
}

void CryptdQueue::worker() {
    for (;;) {
        Job job;
        std::optional<Job> promoted;
        {
            std::unique_lock lk(mu_);
            cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
            if (queue_.empty()) return;  // stopping and drained
            job = std::move(queue_.front());
            queue_.pop_front();
            if (!backlog_.empty()) {
                promoted = std::move(backlog_.front());
                backlog_.pop_front();
            }
        }
        if (promoted) {
            // The submitter must hear InProgress before the final status, so
            // the job becomes runnable only after it has been told.
            if (promoted->left_backlog) promoted->left_backlog();
            {
                std::lock_guard lk(mu_);
                queue_.push_back(std::move(*promoted));
            }
            cv_.notify_one();
        }
        job.run();
    }
}

}  // namespace blkcrypt
