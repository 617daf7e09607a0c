// TaskPool: a fixed set of threads that run the parts of jobs, in the order
// the jobs were started. A second job may be started before the first is
// waited for: the workers go on to it without waiting for the caller (the
// reader queues the next chunk while one is hashed).
#pragma once

#include <blkcrypt/status.hpp>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace blkcrypt::verity {

class TaskPool {
public:
    // fn(part, worker): worker < threads() identifies the calling thread.
    using PartFn = std::function<Status(std::size_t part, unsigned worker)>;

    // Starts up to `threads` workers: fewer when thread creation fails,
    // possibly none, and then start() runs the job on the calling thread
    // (as worker 0) before returning.
    explicit TaskPool(unsigned threads);
    ~TaskPool();
    TaskPool(const TaskPool&) = delete;
    TaskPool& operator=(const TaskPool&) = delete;

    // Threads started (0: jobs run on the caller). Workers are numbered
    // below max(1, threads()).
    unsigned threads() const noexcept { return static_cast<unsigned>(threads_.size()); }
    // Starts fn on parts [0, parts); returns at once. Each start is matched
    // by a wait; at most kMaxJobs are started and not yet waited for.
    static constexpr std::size_t kMaxJobs = 2;
    void start(std::size_t parts, PartFn fn);
    // Waits for the oldest job not waited for; the first failing part's status.
    Status wait();
    Status run(std::size_t parts, PartFn fn) {
        start(parts, std::move(fn));
        return wait();
    }

private:
    struct Job {
        PartFn fn;
        std::size_t parts = 0, next = 0, finished = 0;
        Status status = Status::Ok;
    };
    void worker(unsigned index);
    Job* runnable() noexcept;  // the oldest job with a part not taken; under mu_

    std::mutex mu_;
    std::condition_variable work_cv_, done_cv_;
    std::deque<Job> jobs_;  // a worker keeps a pointer while it runs a part: never popped before all finish
    bool stop_ = false;
    std::vector<std::thread> threads_;
};

// 0 means every core.
unsigned resolve_threads(unsigned requested) noexcept;

}  // namespace blkcrypt::verity
