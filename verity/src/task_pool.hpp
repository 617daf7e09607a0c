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

    // Up to `threads` workers, started by the first job of more than one
    // part: a command that only ever hashes one part (a 4 KiB file) starts
    // none, and its jobs run on the calling thread (as worker 0) inside
    // start(). Fewer start when thread creation fails, possibly none, and
    // jobs then run on the caller too.
    explicit TaskPool(unsigned threads);
    ~TaskPool();
    TaskPool(const TaskPool&) = delete;
    TaskPool& operator=(const TaskPool&) = delete;

    // Workers: those asked for until they are started, then those started
    // (0: jobs run on the caller); it only shrinks. Workers are numbered
    // below max(1, threads()) as read at any time.
    unsigned threads() const noexcept {
        return started_ ? static_cast<unsigned>(threads_.size()) : wanted_;
    }
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
    void start_workers();
    Job* runnable() noexcept;  // the oldest job with a part not taken; under mu_

    std::mutex mu_;
    std::condition_variable work_cv_, done_cv_;
    std::deque<Job> jobs_;  // a worker keeps a pointer while it runs a part: never popped before all finish
    bool stop_ = false;
    std::vector<std::thread> threads_;
    unsigned wanted_ = 0;
    bool started_ = false;  // start_workers() ran (only the owner's thread reads or writes it)
};

// 0 means every core.
unsigned resolve_threads(unsigned requested) noexcept;

}  // namespace blkcrypt::verity
