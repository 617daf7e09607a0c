#include "task_pool.hpp"

#include <system_error>

namespace blkcrypt::verity {

unsigned resolve_threads(unsigned requested) noexcept {
    if (requested) return requested;
    const unsigned n = std::thread::hardware_concurrency();
    return n ? n : 1;
}

TaskPool::TaskPool(unsigned threads) {
    threads_.reserve(threads);
    // Near the process's thread limit creation fails: run with the threads
    // that started, or on the caller's thread when there are none.
    for (unsigned i = 0; i < threads; ++i) {
        try {
            const auto index = static_cast<unsigned>(threads_.size());  // workers are numbered densely
            threads_.emplace_back([this, index] { worker(index); });
        } catch (const std::system_error&) {
            // EAGAIN may pass (another thread exited): try the others too.
        }
    }
}

TaskPool::~TaskPool() {
    {
        std::lock_guard lk(mu_);
        stop_ = true;
    }
    work_cv_.notify_all();
    for (auto& t : threads_) t.join();
}

void TaskPool::start(std::size_t parts, PartFn fn) {
    if (threads_.empty()) {  // no worker: the job runs here, wait() reports it
        Status st = Status::Ok;
        for (std::size_t i = 0; i < parts; ++i)
            if (Status s = fn(i, 0); s != Status::Ok && st == Status::Ok) st = s;
        std::lock_guard lk(mu_);
        parts_ = finished_ = next_ = parts;
        status_ = st;
        return;
    }
    {
        std::lock_guard lk(mu_);
        fn_ = std::move(fn);
        parts_ = parts;
        next_ = finished_ = 0;
        status_ = Status::Ok;
    }
    work_cv_.notify_all();
}

Status TaskPool::wait() {
    std::unique_lock lk(mu_);
    done_cv_.wait(lk, [&] { return finished_ == parts_; });
    fn_ = nullptr;
    return status_;
}

void TaskPool::worker(unsigned index) {
    std::unique_lock lk(mu_);
    for (;;) {
        work_cv_.wait(lk, [&] { return stop_ || next_ < parts_; });
        if (next_ >= parts_) return;  // stopping, nothing left
        const std::size_t part = next_++;
        PartFn fn = fn_;
        lk.unlock();
        const Status s = fn(part, index);
        lk.lock();
        if (s != Status::Ok && status_ == Status::Ok) status_ = s;
        if (++finished_ == parts_) done_cv_.notify_all();
    }
}

}  // namespace blkcrypt::verity
