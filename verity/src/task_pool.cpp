#include "task_pool.hpp"

#include <system_error>

namespace blkcrypt::verity {

unsigned resolve_threads(unsigned requested) noexcept {
    if (requested) return requested;
    const unsigned n = std::thread::hardware_concurrency();
    return n ? n : 1;
}

TaskPool::TaskPool(unsigned threads) : wanted_(threads) {}

void TaskPool::start_workers() {
    started_ = true;
    threads_.reserve(wanted_);
    // Near the process's thread limit creation fails: run with the threads
    // that started, or on the caller's thread when there are none.
    for (unsigned i = 0; i < wanted_; ++i) {
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
    if (!started_ && parts > 1) start_workers();
    if (threads_.empty()) {  // no worker (yet): the job runs here, wait() reports it
        Status st = Status::Ok;
        for (std::size_t i = 0; i < parts; ++i)
            if (Status s = fn(i, 0); s != Status::Ok && st == Status::Ok) st = s;
        std::lock_guard lk(mu_);
        jobs_.push_back(Job{nullptr, parts, parts, parts, st});
        return;
    }
    {
        std::lock_guard lk(mu_);
        jobs_.push_back(Job{std::move(fn), parts, 0, 0, Status::Ok});
    }
    work_cv_.notify_all();
}

Status TaskPool::wait() {
    std::unique_lock lk(mu_);
    if (jobs_.empty()) return Status::Ok;
    done_cv_.wait(lk, [&] { return jobs_.front().finished == jobs_.front().parts; });
    const Status st = jobs_.front().status;
    jobs_.pop_front();
    return st;
}

TaskPool::Job* TaskPool::runnable() noexcept {
    for (Job& j : jobs_)
        if (j.next < j.parts) return &j;
    return nullptr;
}

void TaskPool::worker(unsigned index) {
    std::unique_lock lk(mu_);
    for (;;) {
        Job* job = nullptr;
        work_cv_.wait(lk, [&] { return (job = runnable()) != nullptr || stop_; });
        if (!job) return;  // stopping, nothing left
        const std::size_t part = job->next++;
        lk.unlock();
        // The job's function is called in place (not copied per part): it
        // stays until the last part has finished.
        const Status s = job->fn(part, index);
        lk.lock();
        if (s != Status::Ok && job->status == Status::Ok) job->status = s;
        if (++job->finished == job->parts) done_cv_.notify_all();
    }
}

}  // namespace blkcrypt::verity
